// Package pml declares the point-to-point messaging layer framework: MPI
// matching and protocols on top of the byte transfer layer. An instance uses
// exactly one PML (single select).
//
// The module interface is completed by the issue that builds ob1.
package pml

import (
	"fmt"

	"github.com/gompi/gompi/mca"
)

// Framework is the pml framework's declaration.
var Framework = &mca.Framework{
	Name:        "pml",
	Description: "Point-to-point messaging: MPI matching and protocols over the BTLs",
	API:         mca.Version{Major: 1, Minor: 0, Patch: 0},
	Selection:   mca.SingleSelect,
	Check:       check,
}

func init() { mca.RegisterFramework(Framework) }

// Module is a selected PML.
type Module interface{}

// Component is what a pml component implements.
type Component interface {
	mca.Component
	// Query is called once per instance, after Open. It returns the
	// component's priority and its module, or an error wrapping
	// mca.ErrDeclined when it cannot serve this instance.
	Query(b *mca.Base) (priority int, m Module, err error)
}

func check(c mca.Component) error {
	if _, ok := c.(Component); !ok {
		return fmt.Errorf("%T does not implement pml.Component (Query(*mca.Base) (int, pml.Module, error))", c)
	}
	return nil
}

// Select picks the instance's PML.
func Select(b *mca.Base) (Module, *mca.Entry, error) {
	sel, err := mca.Select(b, Framework, func(c mca.Component) (int, Module, error) {
		return c.(Component).Query(b)
	})
	if err != nil {
		return nil, nil, err
	}
	return sel[0].Module, sel[0].Entry, nil
}
