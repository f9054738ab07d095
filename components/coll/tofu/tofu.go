// Package tofu is the coll component of Fujitsu's K computer MPI, as
// Fujitsu described it to Open MPI's developers in 2011: a barrier over the
// low-latency path, and nothing else.
// Every other slot is left empty and falls through to the modules below it
// (tuned, basic), which is the point of the coll framework's layering.
//
// The barrier is the dissemination algorithm (⌈log2 n⌉ rounds): in round k
// each rank sends an empty message to rank+2^k and receives one from
// rank-2^k. Its sends are blocking and empty, so ob1 offers each to the LLP,
// which writes it straight into a slot the peer polls: no request, no
// queue. The component declines a communicator that the LLP does not reach
// entirely (another node, the LLP excluded or off).
package tofu

import (
	"github.com/gompi/gompi/frameworks/coll"
	"github.com/gompi/gompi/mca"
)

// Priority is tofu's default priority: above tuned (30), so that its
// barrier wins where it applies.
const Priority = 40

// Component is the tofu coll component.
type Component struct{}

// Info describes the component.
func (c *Component) Info() mca.Info {
	return mca.Info{Framework: "coll", Name: "tofu", Version: mca.GompiVersion, API: coll.Framework.API, Priority: Priority}
}

// Register declares the component's parameters: only its priority.
func (c *Component) Register(r *mca.Registrar) {}

// Query accepts communicators of two ranks or more that the LLP reaches.
func (c *Component) Query(b *mca.Base, comm coll.Comm) (int, coll.Module, error) {
	if comm.Size() < 2 {
		return 0, nil, mca.Decline("communicator %s has one rank: nothing to synchronize", comm.Name())
	}
	if !comm.LLP() {
		return 0, nil, mca.Decline("the low-latency path does not reach every rank of %s (another node, or llp excluded)", comm.Name())
	}
	return Priority, &module, nil
}

var module = coll.Slots{coll.Barrier: Barrier}

// Barrier is the dissemination barrier with blocking empty sends, which the
// PML offers to the LLP.
func Barrier(c coll.Comm, a *coll.Args) error {
	n, me := c.Size(), c.Rank()
	tag := coll.Tag(coll.Barrier, 0)
	for d := 1; d < n; d <<= 1 {
		if err := c.Send(nil, (me+d)%n, tag); err != nil {
			return err
		}
		if _, err := c.Recv(nil, (me-d+n)%n, tag); err != nil {
			return err
		}
	}
	return nil
}
