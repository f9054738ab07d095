// Package mca is gompi's Modular Component Architecture: frameworks, the
// components that implement them, the catalogue that knows them all, and the
// per-instance Base that resolves parameters, selects components and logs.
//
// # The lifecycle of a component
//
// A component is a value that implements Component. Its life has five steps,
// written once here and nowhere else:
//
//  1. Registration, at program initialisation: the component is added to the
//     catalogue (RegisterBuiltin from components/builtin for gompi's own,
//     Register from an init function for one linked in from outside). The
//     catalogue checks its name, its framework and the major number of the
//     framework API it was built for, and panics on a mistake: those are
//     programming errors. It then calls Register, in which the component
//     declares its parameters and keeps their handles. The catalogue is frozen
//     when the first Base is made.
//  2. Open, optional (the Opener interface), once per Base, when the
//     component is a candidate for selection: it checks the machine and may
//     decline by returning an error that wraps ErrDeclined with the reason.
//  3. Query, declared by each framework in frameworks/<fw> with its own
//     signature (per instance, or per communicator for coll): it returns a
//     priority and a module, or declines with ErrDeclined.
//  4. Use of the module, through the framework's interface.
//  5. Close, optional (the Closer interface), once per Base for every
//     component whose Open succeeded: when a single-select framework picked
//     another component, or when the Base is closed.
//
// A component value belongs to one catalogue: it keeps the handles of the
// parameters it registered there.
//
// # Where to start
//
// A program that only uses gompi does not import mca: components are chosen
// with MCA parameters (mpirun --mca, OMPI_MCA_ variables, files), and
// ompi_info lists them. A component author implements Component and the
// Query of its framework (coll.Component for collectives), and calls
// Register from init (ExampleRegister is a whole coll component);
// docs/components.md walks through it, and through plugins, which package
// plugin loads.
package mca

import (
	"errors"
	"fmt"

	"github.com/gompi/gompi/mpierr"
	"github.com/gompi/gompi/params"
)

// Version is a major.minor.patch version. Components must match their
// framework's API version in the major number.
type Version struct{ Major, Minor, Patch int }

func (v Version) String() string { return fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch) }

// MCAVersion is the version of this component architecture, printed by
// ompi_info as the "MCA" version of every component.
var MCAVersion = Version{1, 0, 0}

// Info is the static description of a component.
type Info struct {
	// Framework is the name of the framework the component implements.
	Framework string
	// Name is the component's name within its framework: lower case letters,
	// digits and '_'.
	Name string
	// Version is the component's own version.
	Version Version
	// API is the version of the framework API the component was built
	// against.
	API Version
	// Priority is the default of <fw>_<name>_priority in frameworks that
	// select by priority (single-select ones and coll).
	Priority int
}

// ID returns "<framework>/<name>".
func (i Info) ID() string { return i.Framework + "/" + i.Name }

// Component is what every component implements. Each framework adds its own
// Query method in frameworks/<fw>.
type Component interface {
	// Info describes the component. It is called at registration and must
	// always return the same value.
	Info() Info
	// Register declares the component's parameters. It is called once, at
	// registration; the component keeps the returned handles.
	Register(r *Registrar)
}

// Opener is an optional interface of a Component, for components that
// check the machine (or start something) before they can be queried.
// Selection (Select) opens each candidate that its framework's selection
// parameter keeps, once per Base, just before its first Query; Open may
// decline with an error wrapping ErrDeclined, and any other error fails
// the selection. A component that does not implement Opener is opened
// without a call, as if Open returned nil.
type Opener interface {
	Open(b *Base) error
}

// Closer is an optional interface of a Component, for components that
// hold resources between Open and the end of the Base. Close is called
// once per Base for every component whose Open succeeded: by Select when a
// single-select framework picked another component, and by Base.Close
// (the last opened first) for the rest. A component that does not
// implement Closer has nothing to release: it counts as closed without a
// call. Modules end with their framework's Finalize, components with
// Close.
type Closer interface {
	Close(b *Base) error
}

// ErrDeclined is wrapped by the error a component returns from Open or Query
// when it cannot serve this instance (or communicator). The rest of the error
// says why; selection logs it and lists it when nothing can be selected.
var ErrDeclined = mpierr.Errorf(mpierr.ErrComponentNotFound, "component declined")

// Decline returns an error wrapping ErrDeclined with the reason.
func Decline(format string, a ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, a...), ErrDeclined)
}

// IsDeclined reports whether err is a decline rather than a failure.
func IsDeclined(err error) bool { return errors.Is(err, ErrDeclined) }

// Origin says how a component reached the catalogue.
type Origin uint8

const (
	// Builtin components are gompi's own, listed in components/builtin.
	Builtin Origin = iota
	// Linked components are compiled in from another module and registered
	// from its init function.
	Linked
	// Plugin components run in their own process (go-plugin).
	Plugin
)

func (o Origin) String() string {
	switch o {
	case Builtin:
		return "built-in"
	case Linked:
		return "linked"
	case Plugin:
		return "plugin"
	}
	return fmt.Sprintf("Origin(%d)", uint8(o))
}

// Registrar is what a component's Register receives: it declares parameters
// under the component's name.
type Registrar struct {
	reg       *params.Registry
	framework string
	component string
}

// Add registers a parameter of the component. d.Name must be the full name,
// starting with "<framework>_<component>_"; Framework and Component are
// filled in. It panics on a malformed Def.
func (r *Registrar) Add(d params.Def) *params.Param {
	prefix := r.framework + "_" + r.component + "_"
	if len(d.Name) <= len(prefix) || d.Name[:len(prefix)] != prefix {
		panic(fmt.Sprintf("mca: component %s/%s registers parameter %q: its name must start with %q",
			r.framework, r.component, d.Name, prefix))
	}
	d.Framework, d.Component = r.framework, r.component
	return r.reg.Register(d)
}

// GompiVersion is the version of gompi, which is also the component version
// of every built-in component.
var GompiVersion = Version{0, 1, 0}
