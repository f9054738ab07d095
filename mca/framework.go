package mca

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/gompi/gompi/params"
)

// SelectionKind says how many components of a framework an instance uses.
type SelectionKind uint8

const (
	// SingleSelect frameworks use the one candidate of highest priority (pml,
	// group).
	SingleSelect SelectionKind = iota + 1
	// MultiSelect frameworks use every candidate that does not decline (btl,
	// llp, coll).
	MultiSelect
)

func (k SelectionKind) String() string {
	switch k {
	case SingleSelect:
		return "single"
	case MultiSelect:
		return "multi"
	}
	return fmt.Sprintf("SelectionKind(%d)", uint8(k))
}

// Framework declares a framework. Each frameworks/<fw> package declares one
// and registers it from its init function.
type Framework struct {
	// Name is the framework's name: lower case letters and digits, no '_'.
	Name string
	// Description is one line saying what the framework does.
	Description string
	// API is the version of the framework's component interface.
	API Version
	// Selection is SingleSelect or MultiSelect.
	Selection SelectionKind
	// AllowEmpty says that selecting no component at all is fine (llp).
	AllowEmpty bool
	// Priorities says that every component gets a <fw>_<comp>_priority
	// parameter that overrides what Query returns. Single-select frameworks
	// always have it; coll sets it too.
	Priorities bool
	// Params are the framework's own parameters beyond the two every
	// framework has (<fw> and <fw>_base_verbose). Their Framework field is
	// filled in. Read them by name with Base.Lookup.
	Params []params.Def
	// Check verifies that a component implements the framework's interface
	// (its Query method); a non-nil error makes registration panic. Frameworks
	// set it to Implements[<their Component interface>]().
	Check func(c Component) error
}

// Implements returns the Check of a framework whose components implement T,
// an interface that embeds Component and adds the framework's methods (its
// Query). The error of a component that does not implement T names the
// component's type, the interface and the methods it adds, with their
// signatures, so that the author sees what to write:
//
//	*x.Comp does not implement btl.Component (Query(*mca.Base, *rte.Runtime) (btl.Module, error))
func Implements[T Component]() func(c Component) error {
	t := reflect.TypeFor[T]()
	if t.Kind() != reflect.Interface {
		panic(fmt.Sprintf("mca: Implements[%s]: a framework's component type is an interface", t))
	}
	component := reflect.TypeFor[Component]()
	var adds []string
	for i := range t.NumMethod() {
		m := t.Method(i)
		if _, inherited := component.MethodByName(m.Name); !inherited {
			adds = append(adds, m.Name+strings.TrimPrefix(m.Type.String(), "func"))
		}
	}
	want := fmt.Sprintf("%s (%s)", t, strings.Join(adds, "; "))
	return func(c Component) error {
		if _, ok := c.(T); !ok {
			return fmt.Errorf("%T does not implement %s", c, want)
		}
		return nil
	}
}

func (f *Framework) usesPriorities() bool { return f.Priorities || f.Selection == SingleSelect }

// Verbosity thresholds on the 0–100 scale of <fw>_base_verbose.
const (
	VerboseError     = 0   // errors only
	VerboseComponent = 10  // component open, decline and select decisions
	VerboseWarn      = 20  // notable but harmless events
	VerboseInfo      = 40  // per-connection events
	VerboseTrace     = 60  // per-operation events
	VerboseDebug     = 80  // detail for developers
	VerboseMax       = 100 // everything
)

var verboseNames = []params.EnumValue{
	{Value: VerboseError, Name: "error"},
	{Value: VerboseComponent, Name: "component"},
	{Value: VerboseWarn, Name: "warn"},
	{Value: VerboseInfo, Name: "info"},
	{Value: VerboseTrace, Name: "trace"},
	{Value: VerboseDebug, Name: "debug"},
	{Value: VerboseMax, Name: "max"},
}

func selectionParamDef(fw *Framework) params.Def {
	return params.Def{
		Name: fw.Name, Framework: fw.Name, Type: params.List, Level: 2, Scope: params.ScopeAllEq,
		Help: fmt.Sprintf("Components of the %s framework to use: \"a,b\" uses only a and b, \"^a,b\" all but a and b, "+
			"empty all that can run", fw.Name),
	}
}

func verboseParamDef(name string) params.Def {
	return params.Def{
		Name: name + "_base_verbose", Framework: name, Type: params.Int, Level: 8, Default: "0",
		Range: &params.Range{Min: 0, Max: 100}, Values: verboseNames,
		Help: fmt.Sprintf("Verbosity of %s, 0–100: 0 errors only, 10 component open/decline/select decisions, "+
			"40 per-connection events, 100 everything", name),
	}
}

func priorityParamDef(fw *Framework, info Info) params.Def {
	return params.Def{
		Name: fw.Name + "_" + info.Name + "_priority", Framework: fw.Name, Component: info.Name,
		Type: params.Int, Level: 9, Default: fmt.Sprint(info.Priority),
		Help: fmt.Sprintf("Priority of the %s %s component; when set, it replaces the priority the component computes", info.Name, fw.Name),
	}
}
