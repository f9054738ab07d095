package mpi_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/gompi/gompi/mpi"
	"github.com/gompi/gompi/mpitest"
)

// empties are the empty buffers a rank with nothing to move may pass: nil,
// a literal, a make of length 0, and an empty reslice of a live buffer
// (which may or may not share its address).
func empties() map[string][]int64 {
	live := make([]int64, 4)
	return map[string][]int64{"nil": nil, "literal": {}, "make": make([]int64, 0), "reslice": live[4:]}
}

// In-place Alltoallv with an empty receive buffer is in place: the send
// counts it ignores may be nil, on every rank (all receive counts zero)
// and on the ranks that receive nothing beside ranks that do, whichever
// empty slice they pass.
func TestAlltoallvInPlaceEmpty(t *testing.T) {
	for _, n := range []int{1, 2, 3, 5, 8} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			mpitest.Run(t, n, func(r *mpitest.Rank) error {
				c := r.CommWorld()
				me := c.Rank()
				zeros := make([]int, n)
				for name, b := range empties() {
					if err := mpi.Alltoallv(c, b, nil, nil, b, zeros, zeros); err != nil {
						return fmt.Errorf("all counts zero, %s buffer: %w", name, err)
					}
				}
				// Odd ranks receive nothing; the others exchange a
				// symmetric, uneven matrix with gaps (some zero, rank 0's
				// own block among them).
				active := func(i int) bool { return i%2 == 0 }
				count := func(i, j int) int {
					if !active(i) || !active(j) {
						return 0
					}
					return (i + j) % 3 * (1 + i + j)
				}
				value := func(from, to, k int) int64 { return int64(from*10000 + to*100 + k + 1) }
				for name, empty := range empties() {
					rc := make([]int, n)
					for j := range rc {
						rc[j] = count(me, j)
					}
					rd, total := gapped(rc)
					buf := empty
					if active(me) {
						buf = slices.Repeat([]int64{-9}, total)
						for j := range n {
							for k := range rc[j] {
								buf[rd[j]+k] = value(me, j, k)
							}
						}
					} else {
						rd = zeros // every block empty at 0: nothing to lay out
					}
					if err := mpi.Alltoallv(c, buf, nil, nil, buf, rc, rd); err != nil {
						return fmt.Errorf("odd ranks with a %s buffer: %w", name, err)
					}
					if !active(me) {
						continue
					}
					want := slices.Repeat([]int64{-9}, total)
					for j := range n {
						for k := range rc[j] {
							want[rd[j]+k] = value(j, me, k)
						}
					}
					if !slices.Equal(buf, want) {
						return fmt.Errorf("odd ranks with a %s buffer: rank %d holds %v, want %v", name, me, buf, want)
					}
				}
				return nil
			})
		})
	}
}

// gapped lays blocks of counts out with a gap of 2 before each.
func gapped(counts []int) (displs []int, total int) {
	displs = make([]int, len(counts))
	for i, k := range counts {
		total += 2
		displs[i] = total
		total += k
	}
	return displs, total
}

// The other collectives that accept the in-place form accept it with empty
// buffers too, whichever empty slices they are: on every rank at once, and
// where a rank's own block is empty beside ranks whose blocks are not (odd
// ranks count zero), with the right result on the others.
func TestInPlaceEmpty(t *testing.T) {
	for _, n := range []int{1, 2, 3, 5} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			mpitest.Run(t, n, func(r *mpitest.Rank) error {
				c := r.CommWorld()
				for name, e := range empties() {
					if err := inPlaceAllEmpty(c, e); err != nil {
						return fmt.Errorf("%s buffers: %w", name, err)
					}
					if err := inPlaceOwnBlockEmpty(c, e, name == "reslice"); err != nil {
						return fmt.Errorf("%s buffers: %w", name, err)
					}
				}
				return nil
			})
		})
	}
}

// inPlaceAllEmpty: every rank passes e as both buffers, counts all zero.
func inPlaceAllEmpty(c *mpi.Comm, e []int64) error {
	n, me := c.Size(), c.Rank()
	zeros := make([]int, n)
	root := n - 1
	var rootOnly []int64 // what the others pass: they have no receive buffer
	at := func(r int) []int64 {
		if me == r {
			return e
		}
		return rootOnly
	}
	return errors.Join(
		check("Allreduce", mpi.Allreduce(c, e, e, mpi.Sum)),
		check("Reduce", mpi.Reduce(c, e, at(root), mpi.Sum, root)),
		check("Scan", mpi.Scan(c, e, e, mpi.Sum)),
		check("Exscan", mpi.Exscan(c, e, e, mpi.Sum)),
		check("ReduceScatterBlock", mpi.ReduceScatterBlock(c, e, e, mpi.Sum)),
		check("ReduceScatter", mpi.ReduceScatter(c, e, e, zeros, mpi.Sum)),
		check("Allgather", mpi.Allgather(c, e, e)),
		check("Allgatherv", mpi.Allgatherv(c, e, e, zeros, zeros)),
		check("Gather", mpi.Gather(c, e, at(root), root)),
		check("Gatherv", mpi.Gatherv(c, e, at(root), zeros, zeros, root)),
		check("Scatter", mpi.Scatter(c, at(root), e, root)),
		check("Scatterv", mpi.Scatterv(c, at(root), zeros, zeros, e, root)),
		check("Alltoall", mpi.Alltoall(c, e, e)),
	)
}

func check(what string, err error) error {
	if err != nil {
		return fmt.Errorf("%s in place, all empty: %w", what, err)
	}
	return nil
}

// inPlaceOwnBlockEmpty: the v variants and ReduceScatter in place where
// odd ranks' blocks are empty and the others' are not. An empty block is
// e, or with fromBuf the buffer's own empty reslice (on an even number of
// ranks the last one ends the buffer, where the reslice has no address of
// its own).
func inPlaceOwnBlockEmpty(c *mpi.Comm, e []int64, fromBuf bool) error {
	n, me := c.Size(), c.Rank()
	counts := make([]int, n)
	for r := range counts {
		if r%2 == 0 {
			counts[r] = r + 1
		}
	}
	displs, total := make([]int, n), 0
	for r := range n {
		displs[r] = total
		total += counts[r]
	}
	val := func(r, k int) int64 { return int64(100*r + k + 1) }
	full := make([]int64, total)
	for r := range n {
		for k := range counts[r] {
			full[displs[r]+k] = val(r, k)
		}
	}
	own := func(buf []int64, r int) []int64 {
		if counts[r] == 0 && !fromBuf {
			return e
		}
		return buf[displs[r] : displs[r]+counts[r]]
	}
	// Allgatherv: every rank's own block, already in place.
	recv := make([]int64, total)
	copy(own(recv, me), own(full, me))
	if err := mpi.Allgatherv(c, own(recv, me), recv, counts, displs); err != nil {
		return fmt.Errorf("Allgatherv in place, odd ranks' blocks empty: %w", err)
	}
	if !slices.Equal(recv, full) {
		return fmt.Errorf("Allgatherv in place, odd ranks' blocks empty: %v, want %v", recv, full)
	}
	for root := range n {
		// Gatherv to root, in place there.
		var g []int64
		send := own(full, me)
		if me == root {
			g = make([]int64, total)
			copy(own(g, root), own(full, root))
			send = own(g, root)
		}
		if err := mpi.Gatherv(c, send, g, counts, displs, root); err != nil {
			return fmt.Errorf("Gatherv in place at %d, odd ranks' blocks empty: %w", root, err)
		}
		if me == root && !slices.Equal(g, full) {
			return fmt.Errorf("Gatherv in place at %d, odd ranks' blocks empty: %v, want %v", root, g, full)
		}
		// Scatterv from root, in place there.
		var s []int64
		got := make([]int64, counts[me])
		if me == root {
			s = slices.Clone(full)
			got = own(s, root)
		}
		if err := mpi.Scatterv(c, s, counts, displs, got, root); err != nil {
			return fmt.Errorf("Scatterv in place at %d, odd ranks' blocks empty: %w", root, err)
		}
		if !slices.Equal(got, own(full, me)) {
			return fmt.Errorf("Scatterv in place at %d, odd ranks' blocks empty: rank %d got %v, want %v", root, me, got, own(full, me))
		}
	}
	// ReduceScatter in place: recv is send's start, empty on odd ranks.
	in := make([]int64, total)
	for i := range in {
		in[i] = int64(me + i)
	}
	before := 0
	for r := range me {
		before += counts[r]
	}
	out := in[:counts[me]]
	if counts[me] == 0 && !fromBuf {
		out = e
	}
	sums := make([]int64, total)
	for i := range sums {
		sums[i] = int64(n*i + n*(n-1)/2)
	}
	if err := mpi.ReduceScatter(c, in, out, counts, mpi.Sum); err != nil {
		return fmt.Errorf("ReduceScatter in place, odd ranks' blocks empty: %w", err)
	}
	if want := sums[before : before+counts[me]]; !slices.Equal(in[:counts[me]], want) {
		return fmt.Errorf("ReduceScatter in place, odd ranks' blocks empty: rank %d got %v, want %v", me, in[:counts[me]], want)
	}
	return nil
}
