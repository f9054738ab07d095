package lwgrp_test

import (
	"fmt"
	"log"

	"github.com/gompi/gompi/datatype"
	"github.com/gompi/gompi/lwgrp"
	"github.com/gompi/gompi/mpitest"
)

// LogRingFromList makes a group of chosen ranks of a communicator at no
// cost: no message is sent, and only the members call it. The group then
// runs collectives over the parent with a tag of the caller's choosing.
func ExampleLogRingFromList() {
	err := mpitest.RunErr(6, func(r *mpitest.Rank) error {
		w := r.CommWorld()
		members := []int{1, 3, 5}
		if w.Rank()%2 == 0 {
			return nil // not a member: does nothing
		}
		g, err := lwgrp.LogRingFromList(w, members)
		if err != nil {
			return err
		}
		word := make([]byte, 5)
		if g.Rank() == 0 {
			copy(word, "hello")
		}
		if err := lwgrp.Bcast(g, word, 0, 1); err != nil {
			return err
		}
		all := make([]byte, 5*g.Size())
		if err := lwgrp.Gather(g, word, all, 0, 2); err != nil {
			return err
		}
		if g.Rank() == 0 {
			fmt.Printf("world rank %d gathered %q from %d members\n", w.Rank(), all, g.Size())
		}
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	// Output: world rank 1 gathered "hellohellohello" from 3 members
}

// Split divides a group by color, as Comm.Split divides a communicator,
// but makes no communicator: no context id is agreed on, so splitting
// again and again (per level of a recursion, per phase) stays cheap.
// Allreduce and Scan run on the group's LogChain.
func ExampleSplit() {
	const n = 6
	got := make([]string, n)
	err := mpitest.RunErr(n, func(r *mpitest.Rank) error {
		w := r.CommWorld()
		all, err := lwgrp.LogRingFromComm(w)
		if err != nil {
			return err
		}
		color := w.Rank() % 2
		half, err := lwgrp.Split(all, color, w.Rank(), 1)
		if err != nil {
			return err
		}
		sum, prefix := make([]int, 1), make([]int, 1)
		if err := lwgrp.Allreduce(&half.LogChain, []int{w.Rank()}, sum, datatype.Sum, 2); err != nil {
			return err
		}
		if err := lwgrp.Scan(&half.LogChain, []int{1}, prefix, datatype.Sum, 3); err != nil {
			return err
		}
		got[w.Rank()] = fmt.Sprintf("world %d: color %d, member %d of %d, sum %d, scan %d",
			w.Rank(), color, half.Rank(), half.Size(), sum[0], prefix[0])
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	for _, line := range got {
		fmt.Println(line)
	}
	// Output:
	// world 0: color 0, member 0 of 3, sum 6, scan 1
	// world 1: color 1, member 0 of 3, sum 9, scan 1
	// world 2: color 0, member 1 of 3, sum 6, scan 2
	// world 3: color 1, member 1 of 3, sum 9, scan 2
	// world 4: color 0, member 2 of 3, sum 6, scan 3
	// world 5: color 1, member 2 of 3, sum 9, scan 3
}
