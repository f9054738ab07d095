// Package self is the coll component of communicators of one rank: every
// operation is a local copy, or nothing. It declines every larger
// communicator.
package self

import (
	"github.com/gompi/gompi/datatype"
	"github.com/gompi/gompi/frameworks/coll"
	"github.com/gompi/gompi/mca"
)

// Priority is self's default priority: above every other component, since
// nothing beats a copy.
const Priority = 75

// Component is the self coll component.
type Component struct{}

// Info describes the component.
func (c *Component) Info() mca.Info {
	return mca.Info{Framework: "coll", Name: "self", Version: mca.GompiVersion, API: coll.Framework.API, Priority: Priority}
}

// Register declares the component's parameters: only its priority.
func (c *Component) Register(r *mca.Registrar) {}

// Query accepts communicators of one rank.
func (c *Component) Query(b *mca.Base, comm coll.Comm) (int, coll.Module, error) {
	if n := comm.Size(); n != 1 {
		return 0, nil, mca.Decline("communicator %s has %d ranks; self serves one", comm.Name(), n)
	}
	return Priority, &module, nil
}

var module = coll.Slots{
	coll.Barrier:            none,
	coll.Bcast:              none,
	coll.Reduce:             copyInput,
	coll.Allreduce:          copyInput,
	coll.Scan:               copyInput,
	coll.Exscan:             none, // rank 0's result is undefined
	coll.ReduceScatter:      copyInput,
	coll.ReduceScatterBlock: copyInput,
	coll.Gather:             copyBlock,
	coll.Gatherv:            copyBlock,
	coll.Allgather:          copyBlock,
	coll.Allgatherv:         copyBlock,
	coll.Scatter:            scatter,
	coll.Scatterv:           scatter,
	coll.Alltoall:           copyBlock,
	coll.Alltoallv:          alltoallv,
}

func none(c coll.Comm, a *coll.Args) error { return nil }

// copyInput is a reduction of one contribution: the input itself.
func copyInput(c coll.Comm, a *coll.Args) error {
	if !a.InPlace {
		datatype.CopyCached(a.Recv, a.Send)
	}
	return nil
}

// copyBlock places the rank's block where the gathered buffer wants it.
func copyBlock(c coll.Comm, a *coll.Args) error {
	if a.InPlace {
		return nil
	}
	at := 0
	if a.Displs != nil {
		at = a.Displs[0]
	}
	datatype.CopyCached(a.Recv[at:], a.Send)
	return nil
}

func scatter(c coll.Comm, a *coll.Args) error {
	if a.InPlace {
		return nil
	}
	at := 0
	if a.Displs != nil {
		at = a.Displs[0]
	}
	datatype.CopyCached(a.Recv, a.Send[at:])
	return nil
}

func alltoallv(c coll.Comm, a *coll.Args) error {
	if a.InPlace {
		return nil
	}
	datatype.CopyCached(a.Recv[a.Displs[0]:a.Displs[0]+a.Counts[0]], a.Send[a.SendDispls[0]:a.SendDispls[0]+a.SendCounts[0]])
	return nil
}
