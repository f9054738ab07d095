package lwgrp_test

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/gompi/gompi/datatype"
	"github.com/gompi/gompi/lwgrp"
	"github.com/gompi/gompi/mpi"
	"github.com/gompi/gompi/mpitest"
)

// A recursive-halving sort, the case lwgrp was made for: at every level
// the group agrees on a pivot, its lower half trades values above the pivot
// for its upper half's values below, and each half goes on as a group of
// its own, made by SplitBin, without a communicator (no context id, no
// agreement among the parent's other ranks). Eight goroutine ranks of one
// process stand for eight processes.
func Example_recursiveHalvingSort() {
	const ranks, perRank = 8, 6
	err := mpitest.RunErr(ranks, func(r *mpitest.Rank) error {
		w := r.CommWorld()
		me := w.Rank()
		var vals []int64
		for i := 0; i < perRank; i++ {
			vals = append(vals, int64((me*37+i*101)%97))
		}
		g, err := lwgrp.LogRingFromComm(w)
		if err != nil {
			return err
		}
		for tag := 1; g.Size() > 1; tag++ {
			// The pivot: the mean of the group's values.
			var sums [2]int64
			local := []int64{0, int64(len(vals))}
			for _, v := range vals {
				local[0] += v
			}
			if err := lwgrp.Allreduce(&g.LogChain, local, sums[:], datatype.Sum, tag); err != nil {
				return err
			}
			pivot := sums[0] / max(sums[1], 1)
			half := g.Size() / 2
			lower := g.Rank() < half
			var keep, give []int64
			for _, v := range vals {
				if (v <= pivot) == lower {
					keep = append(keep, v)
				} else {
					give = append(give, v)
				}
			}
			// Trade with the partner half a group away: lengths, then values.
			partner := g.Right(log2(half))
			if !lower {
				partner = g.Left(log2(half))
			}
			got, err := trade(w, give, partner, tag)
			if err != nil {
				return err
			}
			vals = append(keep, got...)
			bin := 1
			if lower {
				bin = 0
			}
			if g, err = lwgrp.SplitBin(g, 2, bin, tag); err != nil {
				return err
			}
		}
		slices.Sort(vals)
		// Rank 0 collects the pieces in rank order, to show the result.
		counts := make([]int, ranks)
		if err := mpi.Allgather(w, []int{len(vals)}, counts); err != nil {
			return err
		}
		displs := make([]int, ranks)
		for i := 1; i < ranks; i++ {
			displs[i] = displs[i-1] + counts[i-1]
		}
		all := make([]int64, ranks*perRank)
		if err := mpi.Gatherv(w, vals, all, counts, displs, 0); err != nil {
			return err
		}
		if me == 0 {
			fmt.Println(len(all), "values, sorted:", slices.IsSorted(all))
			fmt.Println("smallest", all[:4], "largest", all[len(all)-4:])
		}
		return nil
	})
	if err != nil {
		fmt.Println(err)
	}
	// Output:
	// 48 values, sorted: true
	// smallest [0 3 4 7] largest [90 92 94 96]
}

func log2(v int) int {
	d := 0
	for 1<<d < v {
		d++
	}
	return d
}

// trade sends give to partner and returns what it sent back.
func trade(w *mpi.Comm, give []int64, partner, tag int) ([]int64, error) {
	var n, m [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(give)))
	if _, err := w.Sendrecv(n[:], partner, tag, m[:], partner, tag); err != nil {
		return nil, err
	}
	got := make([]int64, binary.LittleEndian.Uint64(m[:]))
	if _, err := mpi.Sendrecv(w, give, partner, tag, got, partner, tag); err != nil {
		return nil, err
	}
	return got, nil
}
