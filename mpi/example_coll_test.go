package mpi_test

import (
	"fmt"
	"log"

	"github.com/gompi/gompi/mpi"
	"github.com/gompi/gompi/mpitest"
)

// Bcast sends the root's buffer to every rank: the usual way to hand the
// input that rank 0 read to everyone. Every rank passes a buffer of the
// same length; after the call all hold the root's values.
func ExampleBcast() {
	const n = 4
	got := make([][]float64, n)
	err := mpitest.RunErr(n, func(r *mpitest.Rank) error {
		w := r.CommWorld()
		params := make([]float64, 3)
		if w.Rank() == 0 {
			copy(params, []float64{0.5, 1e-6, 100}) // as if read from a file
		}
		if err := mpi.Bcast(w, params, 0); err != nil {
			return err
		}
		got[w.Rank()] = params
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(got)
	// Output: [[0.5 1e-06 100] [0.5 1e-06 100] [0.5 1e-06 100] [0.5 1e-06 100]]
}

// Reduce combines one value per rank into the root alone, element by
// element: here the sum and, with a second call, the maximum of each
// rank's partial result. The other ranks may pass nil as recv.
func ExampleReduce() {
	err := mpitest.RunErr(4, func(r *mpitest.Rank) error {
		w := r.CommWorld()
		me := int64(w.Rank())
		part := []int64{me + 1, me * me}
		var sum, biggest []int64
		if w.Rank() == 0 {
			sum, biggest = make([]int64, 2), make([]int64, 2)
		}
		if err := mpi.Reduce(w, part, sum, mpi.Sum, 0); err != nil {
			return err
		}
		if err := mpi.Reduce(w, part, biggest, mpi.Max, 0); err != nil {
			return err
		}
		if w.Rank() == 0 {
			fmt.Println("sum", sum, "max", biggest)
		}
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	// Output: sum [10 14] max [4 9]
}

// Gather collects a block from every rank into the root, in rank order;
// Scatter is its inverse, handing block i of the root's buffer to rank i.
// Together they farm work out from rank 0 and bring the results back.
func ExampleGather() {
	err := mpitest.RunErr(3, func(r *mpitest.Rank) error {
		w := r.CommWorld()
		var work []int
		if w.Rank() == 0 {
			work = []int{1, 2, 3, 4, 5, 6} // two items for each of the 3 ranks
		}
		mine := make([]int, 2)
		if err := mpi.Scatter(w, work, mine, 0); err != nil {
			return err
		}
		for i := range mine {
			mine[i] *= mine[i]
		}
		var results []int
		if w.Rank() == 0 {
			results = make([]int, 6)
		}
		if err := mpi.Gather(w, mine, results, 0); err != nil {
			return err
		}
		if w.Rank() == 0 {
			fmt.Println(results)
		}
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	// Output: [1 4 9 16 25 36]
}

// Scatter hands block i of the root's send to rank i: each rank gets its
// share of an input only the root has.
func ExampleScatter() {
	const n = 4
	got := make([]string, n)
	err := mpitest.RunErr(n, func(r *mpitest.Rank) error {
		w := r.CommWorld()
		var all []byte
		if w.Rank() == 0 {
			all = []byte("abcdefgh")
		}
		mine := make([]byte, 2)
		if err := mpi.Scatter(w, all, mine, 0); err != nil {
			return err
		}
		got[w.Rank()] = string(mine)
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(got)
	// Output: [ab cd ef gh]
}

// Allgather gives every rank every rank's block, in rank order: each rank
// learns something all the others computed, here their count of local items.
func ExampleAllgather() {
	err := mpitest.RunErr(4, func(r *mpitest.Rank) error {
		w := r.CommWorld()
		counts := make([]int32, w.Size())
		if err := mpi.Allgather(w, []int32{int32(10 + w.Rank())}, counts); err != nil {
			return err
		}
		if w.Rank() == 3 { // any rank has the same; print from one
			fmt.Println("rank 3 knows", counts)
		}
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	// Output: rank 3 knows [10 11 12 13]
}

// Alltoall is the transpose: block j of rank i's send becomes block i of
// rank j's recv. The exchange a parallel FFT or a bucket sort does.
func ExampleAlltoall() {
	const n = 3
	got := make([][]int, n)
	err := mpitest.RunErr(n, func(r *mpitest.Rank) error {
		w := r.CommWorld()
		me := w.Rank()
		send := []int{10*me + 0, 10*me + 1, 10*me + 2} // one element for each rank
		recv := make([]int, n)
		if err := mpi.Alltoall(w, send, recv); err != nil {
			return err
		}
		got[me] = recv
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	for rank, row := range got {
		fmt.Println("rank", rank, row)
	}
	// Output:
	// rank 0 [0 10 20]
	// rank 1 [1 11 21]
	// rank 2 [2 12 22]
}

// Allreduce is Reduce whose result every rank gets: the global sum, norm or
// convergence test of an iterative solver.
func ExampleAllreduce() {
	err := mpitest.RunErr(4, func(r *mpitest.Rank) error {
		w := r.CommWorld()
		local := []float64{float64(w.Rank()), 1}
		global := make([]float64, 2)
		if err := mpi.Allreduce(w, local, global, mpi.Sum); err != nil {
			return err
		}
		if w.Rank() == 0 {
			fmt.Println("sum of ranks", global[0], "ranks", global[1])
		}
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	// Output: sum of ranks 6 ranks 4
}

// In place: passing the same slice as send and recv reduces into the
// input, with no second buffer. Each collective's doc says what its
// in-place form takes (for Gather, the root's own block of recv).
func ExampleAllreduce_inPlace() {
	err := mpitest.RunErr(3, func(r *mpitest.Rank) error {
		w := r.CommWorld()
		v := []int{w.Rank() + 1, 2}
		if err := mpi.Allreduce(w, v, v, mpi.Prod); err != nil {
			return err
		}
		if w.Rank() == 0 {
			fmt.Println(v)
		}
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	// Output: [6 8]
}

// MaxLoc reduces Pairs of a value and an index: the result is the largest
// value and the index that came with it, here the rank that holds it.
func ExampleReduce_maxLoc() {
	err := mpitest.RunErr(4, func(r *mpitest.Rank) error {
		w := r.CommWorld()
		errs := []float64{0.25, 0.75, 0.5, 0.125}
		mine := []mpi.Pair[float64, int32]{{Value: errs[w.Rank()], Index: int32(w.Rank())}}
		worst := make([]mpi.Pair[float64, int32], 1)
		if err := mpi.Reduce(w, mine, worst, mpi.MaxLoc, 0); err != nil {
			return err
		}
		if w.Rank() == 0 {
			fmt.Printf("largest error %v, on rank %d\n", worst[0].Value, worst[0].Index)
		}
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	// Output: largest error 0.75, on rank 1
}

// Scan gives rank i the sum over ranks 0..i, Exscan over ranks 0..i-1:
// with Exscan each rank learns where its part starts in a global array.
func ExampleExscan() {
	const n = 4
	incl, excl := make([]int, n), make([]int, n)
	err := mpitest.RunErr(n, func(r *mpitest.Rank) error {
		w := r.CommWorld()
		items := []int{w.Rank() + 2} // 2, 3, 4, 5 items on ranks 0..3
		in, ex := make([]int, 1), make([]int, 1)
		if err := mpi.Scan(w, items, in, mpi.Sum); err != nil {
			return err
		}
		if err := mpi.Exscan(w, items, ex, mpi.Sum); err != nil {
			return err
		}
		incl[w.Rank()], excl[w.Rank()] = in[0], ex[0] // rank 0's Exscan result stays 0
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("Scan  ", incl)
	fmt.Println("Exscan", excl)
	// Output:
	// Scan   [2 5 9 14]
	// Exscan [0 2 5 9]
}

// The v-forms take a count and a displacement per rank: Gatherv collects
// blocks of different lengths, here rank i's i+1 elements, packed one after
// the other at the root. counts and displs matter at the root only.
func ExampleGatherv() {
	err := mpitest.RunErr(3, func(r *mpitest.Rank) error {
		w := r.CommWorld()
		me := w.Rank()
		mine := make([]int, me+1)
		for i := range mine {
			mine[i] = me
		}
		var all []int
		var counts, displs []int
		if me == 0 {
			counts, displs = []int{1, 2, 3}, []int{0, 1, 3}
			all = make([]int, 6)
		}
		if err := mpi.Gatherv(w, mine, all, counts, displs, 0); err != nil {
			return err
		}
		if me == 0 {
			fmt.Println(all)
		}
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	// Output: [0 1 1 2 2 2]
}

// ReduceScatterBlock sums every rank's vector and leaves block i of the sum
// on rank i: an Allreduce whose result is wanted distributed, at the cost
// of a Reduce.
func ExampleReduceScatterBlock() {
	const n = 3
	got := make([]int, n)
	err := mpitest.RunErr(n, func(r *mpitest.Rank) error {
		w := r.CommWorld()
		contrib := []int{1, 10, 100} // one element for each rank's block
		mine := make([]int, 1)
		if err := mpi.ReduceScatterBlock(w, contrib, mine, mpi.Sum); err != nil {
			return err
		}
		got[w.Rank()] = mine[0]
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(got)
	// Output: [3 30 300]
}

// NewOp makes a reduction from a Go function. A non-commutative op keeps
// rank order: composing 2x2 matrices, the result is M0·M1·M2 and not
// another product. f sets inout = in op inout, in coming from lower ranks.
func ExampleNewOp() {
	matmul := mpi.NewOp("matmul2x2", func(in, inout []int64) {
		for i := 0; i+4 <= len(in); i += 4 {
			a, b := in[i:i+4], inout[i:i+4]
			b[0], b[1], b[2], b[3] = a[0]*b[0]+a[1]*b[2], a[0]*b[1]+a[1]*b[3],
				a[2]*b[0]+a[3]*b[2], a[2]*b[1]+a[3]*b[3]
		}
	}, false)
	err := mpitest.RunErr(3, func(r *mpitest.Rank) error {
		w := r.CommWorld()
		mats := [][]int64{{1, 1, 0, 1}, {1, 0, 1, 1}, {2, 0, 0, 1}}
		prod := make([]int64, 4)
		if err := mpi.Allreduce(w, mats[w.Rank()], prod, matmul); err != nil {
			return err
		}
		if w.Rank() == 0 {
			fmt.Println("M0·M1·M2 =", prod)
		}
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	// Output: M0·M1·M2 = [4 1 2 1]
}

// Alltoallv is the all-to-all of a sparse or uneven exchange: rank i sends
// sendCounts[j] elements to rank j. Here rank i sends j+1 copies of its
// rank to rank j; each rank first learns how much it will receive with an
// Alltoall of the counts, the usual two-step pattern.
func ExampleAlltoallv() {
	const n = 3
	got := make([][]int, n)
	err := mpitest.RunErr(n, func(r *mpitest.Rank) error {
		w := r.CommWorld()
		me := w.Rank()
		sendCounts, sendDispls := make([]int, n), make([]int, n)
		var send []int
		for j := 0; j < n; j++ {
			sendCounts[j], sendDispls[j] = j+1, len(send)
			for k := 0; k <= j; k++ {
				send = append(send, me)
			}
		}
		recvCounts := make([]int, n)
		if err := mpi.Alltoall(w, sendCounts, recvCounts); err != nil {
			return err
		}
		recvDispls, total := make([]int, n), 0
		for j, c := range recvCounts {
			recvDispls[j], total = total, total+c
		}
		recv := make([]int, total)
		if err := mpi.Alltoallv(w, send, sendCounts, sendDispls, recv, recvCounts, recvDispls); err != nil {
			return err
		}
		got[me] = recv
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	for rank, recv := range got {
		fmt.Println("rank", rank, recv)
	}
	// Output:
	// rank 0 [0 1 2]
	// rank 1 [0 0 1 1 2 2]
	// rank 2 [0 0 0 1 1 1 2 2 2]
}

// Ibcast starts a broadcast and returns: the ranks compute meanwhile and
// wait when they need the data. Several nonblocking collectives may be in
// flight at once, here a broadcast and a barrier, completed by one
// Waitall; every rank starts them in the same order.
func ExampleIbcast() {
	const n = 4
	got := make([]string, n)
	err := mpitest.RunErr(n, func(r *mpitest.Rank) error {
		w := r.CommWorld()
		table := make([]int32, 4)
		if w.Rank() == 0 {
			copy(table, []int32{2, 3, 5, 7})
		}
		bc, err := mpi.Ibcast(w, table, 0)
		if err != nil {
			return err
		}
		bar, err := mpi.Ibarrier(w)
		if err != nil {
			return err
		}
		local := w.Rank() * w.Rank() // work that does not touch table
		if err := mpi.Waitall([]*mpi.Request{bc, bar}, nil); err != nil {
			return err
		}
		got[w.Rank()] = fmt.Sprint(table, " ", local)
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	for rank, s := range got {
		fmt.Println("rank", rank, s)
	}
	// Output:
	// rank 0 [2 3 5 7] 0
	// rank 1 [2 3 5 7] 1
	// rank 2 [2 3 5 7] 4
	// rank 3 [2 3 5 7] 9
}
