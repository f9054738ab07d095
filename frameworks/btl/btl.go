// Package btl declares the byte transfer layer framework: moving fragments
// between two processes. An instance uses every BTL that does not decline
// (multi select); per peer, the BTLs that reach it are ordered by exclusivity
// and latency, not by priority.
//
// The module interface is completed by the issue that builds self, shm and
// tcp.
package btl

import (
	"fmt"

	"github.com/gompi/gompi/mca"
)

// Framework is the btl framework's declaration.
var Framework = &mca.Framework{
	Name:        "btl",
	Description: "Byte transfer layer: moves fragments between two processes",
	API:         mca.Version{Major: 1, Minor: 0, Patch: 0},
	Selection:   mca.MultiSelect,
	Check:       check,
}

func init() { mca.RegisterFramework(Framework) }

// Module is a BTL ready to reach peers.
type Module interface{}

// Component is what a btl component implements.
type Component interface {
	mca.Component
	// Query is called once per instance, after Open. It returns the
	// component's module, or an error wrapping mca.ErrDeclined.
	Query(b *mca.Base) (Module, error)
}

func check(c mca.Component) error {
	if _, ok := c.(Component); !ok {
		return fmt.Errorf("%T does not implement btl.Component (Query(*mca.Base) (btl.Module, error))", c)
	}
	return nil
}

// Select returns the modules of every BTL the instance uses.
func Select(b *mca.Base) ([]mca.Selected[Module], error) {
	return mca.Select(b, Framework, func(c mca.Component) (int, Module, error) {
		m, err := c.(Component).Query(b)
		return 0, m, err
	})
}
