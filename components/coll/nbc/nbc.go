// Package nbc is the coll component of the nonblocking and persistent
// collectives (Open MPI's libnbc has the role): it fills every nonblocking
// slot of every communicator, intercommunicators included, by running the
// blocking slot's algorithm as a coroutine that the instance's progress
// advances (coll.Coroutine). Whatever algorithm a communicator's blocking
// table holds (tuned's, with its decision rules and forcing parameters;
// basic's; a plugin's schedules) is so available nonblocking, with the same
// messages in the run's own tags. Modules that keep state between the
// waits of one operation (coll.Serial: sm) are passed over for the next
// module down.
//
// It fills no blocking slot.
package nbc

import (
	"github.com/gompi/gompi/frameworks/coll"
	"github.com/gompi/gompi/mca"
)

// Priority is nbc's default priority. It only orders nbc among the modules
// that fill nonblocking slots: one that does so natively for some calls
// ranks above it.
const Priority = 20

// Component is the nbc coll component.
type Component struct{}

// Info describes the component.
func (c *Component) Info() mca.Info {
	return mca.Info{Framework: "coll", Name: "nbc", Version: mca.GompiVersion, API: coll.Framework.API, Priority: Priority}
}

// Register declares the component's parameters: only its priority.
func (c *Component) Register(r *mca.Registrar) {}

// Query accepts every communicator.
func (c *Component) Query(b *mca.Base, comm coll.Comm) (int, coll.Module, error) {
	return Priority, module, nil
}

// QueryInter accepts every intercommunicator: the blocking slots that its
// table holds run nonblocking as well.
func (c *Component) QueryInter(b *mca.Base, comm coll.Inter) (int, coll.Module, error) {
	return Priority, module, nil
}

// coroutine is every nonblocking slot's function.
func coroutine(c coll.Comm, a *coll.Args) (coll.Plan, error) {
	return coll.Coroutine(c, a, a.Blocking)
}

// nbModule fills the nonblocking slots and leaves the blocking ones.
type nbModule struct{}

func (nbModule) Func(op coll.Op) coll.Func     { return nil }
func (nbModule) NBFunc(op coll.Op) coll.NBFunc { return coroutine }

var module coll.Module = nbModule{}

var (
	_ coll.Nonblocking    = nbModule{}
	_ coll.InterComponent = (*Component)(nil)
)
