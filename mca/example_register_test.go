package mca_test

import (
	"fmt"
	"log"
	"strings"

	"github.com/gompi/gompi/frameworks/coll"
	"github.com/gompi/gompi/mca"
	"github.com/gompi/gompi/mpi"
	"github.com/gompi/gompi/mpitest"
)

// fanBarrier is a coll component linked into the program: it fills the
// barrier slot, and every other collective falls through to gompi's own
// components. docs/components.md tells the whole story; examples/outoftree
// builds one in a module of its own.
type fanBarrier struct{}

func (fanBarrier) Info() mca.Info {
	return mca.Info{Framework: "coll", Name: "fanbarrier", Version: mca.Version{Major: 1},
		API: coll.Framework.API, Priority: 50} // above tuned (30): its barrier wins
}

func (fanBarrier) Register(r *mca.Registrar) {} // no parameter beyond coll_fanbarrier_priority

// Query is asked per communicator; declining leaves that communicator to
// the others.
func (fanBarrier) Query(b *mca.Base, c coll.Comm) (int, coll.Module, error) {
	if c.Size() < 2 {
		return 0, nil, mca.Decline("communicator %s has one rank", c.Name())
	}
	return 50, &coll.Slots{coll.Barrier: fanIn}, nil
}

// fanIn: every rank tells rank 0 it arrived, rank 0 then lets them all go.
func fanIn(c coll.Comm, _ *coll.Args) error {
	tag := coll.Tag(coll.Barrier, 1)
	if c.Rank() != 0 {
		if err := c.Send(nil, 0, tag); err != nil {
			return err
		}
		_, err := c.Recv(nil, 0, tag)
		return err
	}
	for q := 1; q < c.Size(); q++ {
		if _, err := c.Recv(nil, q, tag); err != nil {
			return err
		}
	}
	for q := 1; q < c.Size(); q++ {
		if err := c.Send(nil, q, tag); err != nil {
			return err
		}
	}
	return nil
}

// Register from init, as a database/sql driver does: before mpi.Init, so
// that every instance's selection sees the component.
func init() { mca.Register(fanBarrier{}) }

// A linked component registers itself with mca.Register and is selected
// like gompi's own (coll=^fanbarrier would exclude it): the world's
// barrier slot is fanbarrier's, the other slots keep gompi's components.
func ExampleRegister() {
	err := mpitest.RunErr(3, func(r *mpitest.Rank) error {
		w := r.CommWorld()
		if err := w.Barrier(); err != nil {
			return err
		}
		sum := make([]int, 1)
		if err := mpi.Allreduce(w, []int{w.Rank()}, sum, mpi.Sum); err != nil {
			return err
		}
		if w.Rank() == 0 {
			for _, slot := range strings.Fields(w.CollTable()) {
				if op, from, _ := strings.Cut(slot, "="); op == "barrier" || op == "allreduce" {
					fmt.Printf("%s from fanbarrier: %v\n", op, from == "fanbarrier")
				}
			}
			fmt.Println("sum", sum[0])
		}
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	// Output:
	// barrier from fanbarrier: true
	// allreduce from fanbarrier: false
	// sum 3
}
