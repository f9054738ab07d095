// Package llp declares the low-latency path framework of Fujitsu's K
// computer MPI: a way to send a small blocking message at once, with no
// request object, that may refuse with ErrNotAvailable so that the PML takes
// its normal path. An instance may use no LLP at all.
//
// The module interface is completed by the issue that builds tofu.
package llp

import (
	"fmt"

	"github.com/gompi/gompi/mca"
	"github.com/gompi/gompi/mpierr"
)

// Framework is the llp framework's declaration.
var Framework = &mca.Framework{
	Name:        "llp",
	Description: "Low-latency path: immediate sends of small blocking messages, with fall-back to the PML",
	API:         mca.Version{Major: 1, Minor: 0, Patch: 0},
	Selection:   mca.MultiSelect,
	AllowEmpty:  true,
	Check:       check,
}

func init() { mca.RegisterFramework(Framework) }

// ErrNotAvailable is returned by an LLP that cannot send a message at once;
// the caller then takes the PML's normal path.
var ErrNotAvailable = mpierr.Errorf(mpierr.ErrPending, "llp: not available")

// Module is an LLP ready to send.
type Module interface{}

// Component is what an llp component implements.
type Component interface {
	mca.Component
	// Query is called once per instance, after Open. It returns the
	// component's module, or an error wrapping mca.ErrDeclined.
	Query(b *mca.Base) (Module, error)
}

func check(c mca.Component) error {
	if _, ok := c.(Component); !ok {
		return fmt.Errorf("%T does not implement llp.Component (Query(*mca.Base) (llp.Module, error))", c)
	}
	return nil
}

// Select returns the modules of every LLP the instance uses; none is fine.
func Select(b *mca.Base) ([]mca.Selected[Module], error) {
	return mca.Select(b, Framework, func(c mca.Component) (int, Module, error) {
		m, err := c.(Component).Query(b)
		return 0, m, err
	})
}
