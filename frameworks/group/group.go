// Package group declares the group storage framework: how a group maps its
// ranks to world ranks. An instance uses one store (single select): dense by
// default, sparse when mpi_use_sparse_groups is on.
//
// The Store interface is completed by the issue that builds dense and sparse.
package group

import (
	"fmt"

	"github.com/gompi/gompi/mca"
	"github.com/gompi/gompi/params"
)

// SparseGroupsParam is the name of the switch for sparse group storage.
const SparseGroupsParam = "mpi_use_sparse_groups"

// Framework is the group framework's declaration.
var Framework = &mca.Framework{
	Name:        "group",
	Description: "Group storage: maps group ranks to world ranks, densely or relative to a parent",
	API:         mca.Version{Major: 1, Minor: 0, Patch: 0},
	Selection:   mca.SingleSelect,
	Check:       check,
	Params: []params.Def{{
		Name: SparseGroupsParam, Type: params.Bool, Default: "false", Level: 2, Scope: params.ScopeAllEq,
		Synonyms: []string{"mpi_use_sparse_group_storage"},
		Help:     "Store groups derived from the world as ranges, a stride or a bitmap relative to their parent, whichever is smallest (sparse component)",
	}},
}

func init() { mca.RegisterFramework(Framework) }

// Module makes group stores.
type Module interface{}

// Component is what a group component implements.
type Component interface {
	mca.Component
	// Query is called once per instance, after Open. It returns the
	// component's priority and module, or an error wrapping
	// mca.ErrDeclined.
	Query(b *mca.Base) (priority int, m Module, err error)
}

func check(c mca.Component) error {
	if _, ok := c.(Component); !ok {
		return fmt.Errorf("%T does not implement group.Component (Query(*mca.Base) (int, group.Module, error))", c)
	}
	return nil
}

// Select picks the instance's group store.
func Select(b *mca.Base) (Module, *mca.Entry, error) {
	sel, err := mca.Select(b, Framework, func(c mca.Component) (int, Module, error) {
		return c.(Component).Query(b)
	})
	if err != nil {
		return nil, nil, err
	}
	return sel[0].Module, sel[0].Entry, nil
}
