// Package dense is the group component that stores every group as the
// slice of its members' world ranks (group.NewDense: 4 bytes per member).
// It is always available and is the default: lookups are a slice index,
// inlined at the caller.
package dense

import (
	"github.com/gompi/gompi/frameworks/group"
	"github.com/gompi/gompi/mca"
)

// Priority is the component's priority; sparse outranks it when
// mpi_use_sparse_groups is on.
const Priority = 10

// Component is the dense group component.
type Component struct{}

// Info describes the component.
func (c *Component) Info() mca.Info {
	return mca.Info{Framework: "group", Name: "dense", Version: mca.GompiVersion, API: group.Framework.API, Priority: Priority}
}

// Register declares the component's parameters: it has none beyond the
// priority every group component gets.
func (c *Component) Register(r *mca.Registrar) {}

// Query never declines.
func (c *Component) Query(b *mca.Base) (int, group.Module, error) {
	return Priority, Module{}, nil
}

// Module stores groups densely; the zero value is ready to use.
type Module struct{}

// New stores the members' world ranks; the parent is not needed.
func (Module) New(world []int, parent *group.Group, parentRanks []int) group.Store {
	return group.NewDense(world)
}
