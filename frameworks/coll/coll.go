// Package coll declares the collectives framework. Every coll component is
// queried for each new communicator; the modules that accept are stacked by
// priority, and each collective slot is filled by the highest-priority module
// that provides it.
//
// The slot table and the communicator interface are completed by the issue
// that builds the coll components.
package coll

import (
	"fmt"

	"github.com/gompi/gompi/mca"
)

// Framework is the coll framework's declaration.
var Framework = &mca.Framework{
	Name:        "coll",
	Description: "Collective operations, selected per communicator slot by slot",
	API:         mca.Version{Major: 1, Minor: 0, Patch: 0},
	Selection:   mca.MultiSelect,
	Priorities:  true,
	Check:       check,
}

func init() { mca.RegisterFramework(Framework) }

// Comm is what a coll module sees of a communicator.
type Comm interface {
	Rank() int
	Size() int
}

// Module is a coll module for one communicator.
type Module interface{}

// Component is what a coll component implements.
type Component interface {
	mca.Component
	// Query is called for every new communicator. It returns a priority and
	// a module for that communicator, or an error wrapping mca.ErrDeclined.
	Query(b *mca.Base, comm Comm) (priority int, m Module, err error)
}

func check(c mca.Component) error {
	if _, ok := c.(Component); !ok {
		return fmt.Errorf("%T does not implement coll.Component (Query(*mca.Base, coll.Comm) (int, coll.Module, error))", c)
	}
	return nil
}

// Select returns the modules that accept comm, highest priority first.
func Select(b *mca.Base, comm Comm) ([]mca.Selected[Module], error) {
	return mca.Select(b, Framework, func(c mca.Component) (int, Module, error) {
		return c.(Component).Query(b, comm)
	})
}
