package mpi_test

import (
	"fmt"
	"log"

	"github.com/gompi/gompi/mpi"
	"github.com/gompi/gompi/mpitest"
)

// Dup makes a communicator of the same ranks with a context of its own: a
// library that does its communication on a Dup of the caller's
// communicator never matches the caller's messages, whatever tags both
// use.
func ExampleComm_Dup() {
	err := mpitest.RunErr(2, func(r *mpitest.Rank) error {
		w := r.CommWorld()
		lib, err := w.Dup()
		if err != nil {
			return err
		}
		defer lib.Free()
		if w.Rank() == 1 {
			if err := w.Send([]byte("app"), 0, 0); err != nil {
				return err
			}
			return lib.Send([]byte("lib"), 0, 0)
		}
		// Same source, same tag: each receive gets its own communicator's.
		buf := make([]byte, 3)
		if _, err := lib.Recv(buf, 1, 0); err != nil {
			return err
		}
		fmt.Println("on lib:", string(buf))
		if _, err := w.Recv(buf, 1, 0); err != nil {
			return err
		}
		fmt.Println("on world:", string(buf))
		cmp, err := w.Compare(lib)
		if err != nil {
			return err
		}
		fmt.Println("compared:", cmp)
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	// Output:
	// on lib: lib
	// on world: app
	// compared: congruent
}

// Split partitions a communicator by color; key orders the ranks within
// each part. Here the rows of a 2x3 grid of ranks: a row's ranks then
// reduce among themselves.
func ExampleComm_Split() {
	const rows, cols = 2, 3
	got := make([]string, rows*cols)
	err := mpitest.RunErr(rows*cols, func(r *mpitest.Rank) error {
		w := r.CommWorld()
		row, col := w.Rank()/cols, w.Rank()%cols
		rowComm, err := w.Split(row, col)
		if err != nil {
			return err
		}
		defer rowComm.Free()
		sum := make([]int, 1)
		if err := mpi.Allreduce(rowComm, []int{w.Rank()}, sum, mpi.Sum); err != nil {
			return err
		}
		got[w.Rank()] = fmt.Sprintf("world %d: row %d rank %d/%d, row sum %d", w.Rank(), row, rowComm.Rank(), rowComm.Size(), sum[0])
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	for _, line := range got {
		fmt.Println(line)
	}
	// Output:
	// world 0: row 0 rank 0/3, row sum 3
	// world 1: row 0 rank 1/3, row sum 3
	// world 2: row 0 rank 2/3, row sum 3
	// world 3: row 1 rank 0/3, row sum 12
	// world 4: row 1 rank 1/3, row sum 12
	// world 5: row 1 rank 2/3, row sum 12
}

// SplitType with SplitShared groups the ranks that share a node: the
// first step of a hierarchical algorithm (reduce on the node, then among
// nodes) or of sharing memory between a node's ranks. mpitest.WithNodes
// puts goroutine ranks on pretend nodes, as mpirun on two hosts would.
func ExampleComm_SplitType() {
	nodes := []int{0, 0, 1, 1, 1}
	got := make([]string, len(nodes))
	err := mpitest.RunErr(len(nodes), func(r *mpitest.Rank) error {
		w := r.CommWorld()
		node, err := w.SplitType(mpi.SplitShared, w.Rank())
		if err != nil {
			return err
		}
		defer node.Free()
		got[w.Rank()] = fmt.Sprintf("world %d: rank %d of %d on its node", w.Rank(), node.Rank(), node.Size())
		return nil
	}, mpitest.WithNodes(nodes), mpitest.WithMCA("btl", "self,shm,tcp"))
	if err != nil {
		log.Fatal(err)
	}
	for _, line := range got {
		fmt.Println(line)
	}
	// Output:
	// world 0: rank 0 of 2 on its node
	// world 1: rank 1 of 2 on its node
	// world 2: rank 0 of 3 on its node
	// world 3: rank 1 of 3 on its node
	// world 4: rank 2 of 3 on its node
}

// CreateGroup makes a communicator of a group's members, called by them
// alone: the even ranks build theirs while the odd ones go on with other
// work, which Split (collective over every rank) would not allow.
func ExampleComm_CreateGroup() {
	err := mpitest.RunErr(5, func(r *mpitest.Rank) error {
		w := r.CommWorld()
		if w.Rank()%2 == 1 {
			return nil // not a member: need not call
		}
		evens, err := r.WorldGroup().Incl([]int{0, 2, 4})
		if err != nil {
			return err
		}
		c, err := w.CreateGroup(evens, 0)
		if err != nil {
			return err
		}
		defer c.Free()
		sum := make([]int, 1)
		if err := mpi.Reduce(c, []int{w.Rank()}, sum, mpi.Sum, 0); err != nil {
			return err
		}
		if c.Rank() == 0 {
			fmt.Printf("%d members, sum of their world ranks %d\n", c.Size(), sum[0])
		}
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	// Output: 3 members, sum of their world ranks 6
}

// IntercommCreate joins two disjoint groups, each with its own
// communicator, into an intercommunicator: ranks address the other
// group's ranks, as a coupled simulation's two codes do. The leaders
// (each group's rank 0) meet over a communicator they share, here the
// world.
func ExampleComm_IntercommCreate() {
	const n = 4
	got := make([]string, n)
	err := mpitest.RunErr(n, func(r *mpitest.Rank) error {
		w := r.CommWorld()
		color := w.Rank() % 2 // group 0: world 0, 2; group 1: world 1, 3
		local, err := w.Split(color, w.Rank())
		if err != nil {
			return err
		}
		defer local.Free()
		remoteLeader := 1 - color // the other group's rank 0, in world ranks
		inter, err := local.IntercommCreate(0, w, remoteLeader, 99)
		if err != nil {
			return err
		}
		defer inter.Free()
		// Rank i of each group trades with rank i of the other.
		in := make([]int, 1)
		if _, err := mpi.Sendrecv(inter, []int{100 * w.Rank()}, local.Rank(), 0, in, local.Rank(), 0); err != nil {
			return err
		}
		got[w.Rank()] = fmt.Sprintf("world %d: %d local, %d remote, got %d", w.Rank(), inter.Size(), inter.RemoteSize(), in[0])
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	for _, line := range got {
		fmt.Println(line)
	}
	// Output:
	// world 0: 2 local, 2 remote, got 100
	// world 1: 2 local, 2 remote, got 0
	// world 2: 2 local, 2 remote, got 300
	// world 3: 2 local, 2 remote, got 200
}

// Merge turns an intercommunicator into one intracommunicator of both
// groups; the group that passes high false comes first. After a coupling
// phase the two codes can run collectives over everyone.
func ExampleComm_Merge() {
	err := mpitest.RunErr(4, func(r *mpitest.Rank) error {
		w := r.CommWorld()
		color := w.Rank() % 2
		local, err := w.Split(color, w.Rank())
		if err != nil {
			return err
		}
		inter, err := local.IntercommCreate(0, w, 1-color, 99)
		if err != nil {
			return err
		}
		both, err := inter.Merge(color == 0) // the odd ranks' group first
		if err != nil {
			return err
		}
		order := make([]int, both.Size())
		if err := mpi.Allgather(both, []int{w.Rank()}, order); err != nil {
			return err
		}
		if both.Rank() == 0 {
			fmt.Println("world ranks in merged order:", order, "intercommunicator:", both.IsInter())
		}
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	// Output: world ranks in merged order: [1 3 0 2] intercommunicator: false
}
