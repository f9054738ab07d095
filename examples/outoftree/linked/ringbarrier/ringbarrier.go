// Package ringbarrier is a coll component written outside gompi's tree and
// linked into a program: importing it registers it (mca.Register, from
// init, as database/sql drivers do). It fills the barrier slot only; every
// other operation falls through to the components below it.
package ringbarrier

import (
	"github.com/gompi/gompi/frameworks/coll"
	"github.com/gompi/gompi/mca"
)

// Priority puts the component above tofu (40) and tuned (30), so that it
// takes the barrier wherever it accepts a communicator.
const Priority = 50

func init() { mca.Register(&Component{}) }

// Component is the ringbarrier coll component.
type Component struct{}

// Info describes it: built against the coll API it was compiled with.
func (c *Component) Info() mca.Info {
	return mca.Info{Framework: "coll", Name: "ringbarrier", Version: mca.Version{Major: 1}, API: coll.Framework.API, Priority: Priority}
}

// Register declares no parameter beyond coll_ringbarrier_priority, which
// every coll component gets.
func (c *Component) Register(r *mca.Registrar) {}

// Query accepts communicators of two ranks or more.
func (c *Component) Query(b *mca.Base, comm coll.Comm) (int, coll.Module, error) {
	if comm.Size() < 2 {
		return 0, nil, mca.Decline("communicator %s has one rank", comm.Name())
	}
	return Priority, &coll.Slots{coll.Barrier: Barrier}, nil
}

// Barrier passes a token twice around the ring: after the first lap rank 0
// knows everyone has arrived, the second lap tells them. 2n messages: a
// teaching example, not a fast barrier.
func Barrier(c coll.Comm, _ *coll.Args) error {
	me, n := c.Rank(), c.Size()
	tag := coll.Tag(coll.Barrier, 7)
	next, prev := (me+1)%n, (me-1+n)%n
	for lap := 0; lap < 2; lap++ {
		if me == 0 {
			if err := c.Send(nil, next, tag); err != nil {
				return err
			}
			if _, err := c.Recv(nil, prev, tag); err != nil {
				return err
			}
			continue
		}
		if _, err := c.Recv(nil, prev, tag); err != nil {
			return err
		}
		if err := c.Send(nil, next, tag); err != nil {
			return err
		}
	}
	return nil
}
