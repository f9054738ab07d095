package params

import (
	"fmt"
	"regexp"
	"strings"
	"sync"
)

// Def declares a parameter. Registration mistakes in a Def are programming
// errors: Registry.Register panics on them with a message naming the
// parameter.
type Def struct {
	// Name is the full name: <framework>_<component>_<name> for a
	// component's parameter, <framework>_base_<name> or <framework> for a
	// framework's, <project>_<name> for a project-wide one.
	Name string
	// Framework and Component are the group ompi_info lists the parameter
	// under. Component is "" for framework-level and project-wide parameters,
	// which ompi_info shows as "base".
	Framework string
	Component string
	Type      Type
	// Default is the default value in Type's text syntax.
	Default string
	// Help is one line (or paragraph) of help text; it may be empty.
	Help string
	// Level is the info level, 1–9: 1–3 user, 4–6 tuner, 7–9 developer.
	Level int
	Scope Scope
	// Values are the names of an Enum, the named aliases of an Int (the
	// verbosity names, say), or the allowed items of a List.
	Values []EnumValue
	// Range bounds an Int; nil means unbounded.
	Range *Range
	// Synonyms are deprecated names that still set this parameter, with one
	// warning per name.
	Synonyms []string

	// defaultFrom computes the default from the environment snapshot
	// (mca_base_param_files needs $HOME and $GOMPI_SYSCONFDIR).
	defaultFrom func(env map[string]string) string
}

// Param is a registered parameter. It is immutable; read its value for an
// instance with Values.Get.
type Param struct {
	def   Def
	index int
	dflt  Value // the parsed static default
}

// Name returns the parameter's full name.
func (p *Param) Name() string { return p.def.Name }

// Def returns the parameter's declaration. Its slices are shared: do not
// modify them.
func (p *Param) Def() Def { return p.def }

// Group returns the framework and the component ("base" for none) that
// ompi_info lists the parameter under.
func (p *Param) Group() (framework, component string) {
	if p.def.Component == "" {
		return p.def.Framework, "base"
	}
	return p.def.Framework, p.def.Component
}

// Registry holds parameter declarations. It is filled during program
// initialisation and frozen before the first instance resolves values.
type Registry struct {
	mu     sync.RWMutex
	params []*Param
	byName map[string]*Param // names and synonyms
	frozen bool

	paramFiles    *Param
	unknownPolicy *Param
	showParams    *Param
}

// The parameters that the parameter system itself owns.
const (
	ParamFilesName    = "mca_base_param_files"
	UnknownParamsName = "mca_base_unknown_params"
	ShowParamsName    = "mpi_show_mca_params"
)

// Unknown-name policies, the values of mca_base_unknown_params.
const (
	UnknownIgnore int64 = 0
	UnknownWarn   int64 = 1
	UnknownError  int64 = 2
)

// NewRegistry returns a registry holding the parameter system's own
// parameters: mca_base_param_files, mca_base_unknown_params and
// mpi_show_mca_params.
func NewRegistry() *Registry {
	r := &Registry{byName: map[string]*Param{}}
	r.paramFiles = r.Register(Def{
		Name: ParamFilesName, Framework: "mca", Type: List, Level: 2,
		Help: "Comma-separated list of parameter files (.toml or .conf); the leftmost file that sets a name wins. " +
			"Settable only from the environment or the command line; \"none\" reads no file",
		defaultFrom: defaultParamFiles,
	})
	r.unknownPolicy = r.Register(Def{
		Name: UnknownParamsName, Framework: "mca", Type: Enum, Level: 2, Default: "warn",
		Values: []EnumValue{{UnknownIgnore, "ignore"}, {UnknownWarn, "warn"}, {UnknownError, "error"}},
		Help:   "What to do with a parameter name that no component registered: warn (with the closest known names), error, or ignore",
	})
	r.showParams = r.Register(Def{
		Name: ShowParamsName, Framework: "mpi", Type: List, Level: 2,
		Values: []EnumValue{{0, "all"}, {1, "nondefault"}, {2, "default"}, {3, "file"}, {4, "enviro"}, {5, "cmdline"}},
		Help: "Rank 0 prints the parameter values of these sources at Init, one \"name=value (source)\" line each: " +
			"all, nondefault (file, enviro and cmdline), default, file, enviro, cmdline",
	})
	return r
}

var (
	paramNameRE = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
	groupNameRE = regexp.MustCompile(`^[a-z][a-z0-9]*$`)
	compNameRE  = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
)

// Register declares a parameter and returns its handle. It panics on a
// malformed declaration, a duplicate name, or a frozen registry.
func (r *Registry) Register(d Def) *Param {
	r.mu.Lock()
	defer r.mu.Unlock()
	fail := func(format string, a ...any) {
		panic(fmt.Sprintf("params: registering %q: ", d.Name) + fmt.Sprintf(format, a...))
	}
	if r.frozen {
		fail("the registry is frozen: parameters are registered during initialisation")
	}
	if !paramNameRE.MatchString(d.Name) {
		fail("a name is lower case letters, digits and '_', starting with a letter")
	}
	if !groupNameRE.MatchString(d.Framework) {
		fail("framework %q must be lower case letters and digits", d.Framework)
	}
	if d.Component != "" && (!compNameRE.MatchString(d.Component) || d.Component == "base") {
		fail("component %q must be lower case letters, digits and '_', and not \"base\"", d.Component)
	}
	if d.Level < 1 || d.Level > 9 {
		fail("level %d is outside 1–9", d.Level)
	}
	if d.Type < Bool || d.Type > List {
		fail("no valid type")
	}
	if d.Type == Enum && len(d.Values) == 0 {
		fail("an enum needs Values")
	}
	if len(d.Values) > 0 && d.Type != Enum && d.Type != Int && d.Type != List {
		fail("Values are for Enum, Int and List parameters, not %v", d.Type)
	}
	if d.Range != nil && (d.Type != Int || d.Range.Min > d.Range.Max) {
		fail("a Range is for Int parameters, with Min <= Max")
	}
	seenName, seenNum := map[string]bool{}, map[int64]bool{}
	for _, ev := range d.Values {
		lower := strings.ToLower(ev.Name)
		if ev.Name == "" || seenName[lower] || (d.Type == Enum && seenNum[ev.Value]) {
			fail("enumerated value %d:%q is empty or repeated", ev.Value, ev.Name)
		}
		seenName[lower], seenNum[ev.Value] = true, true
	}
	if _, dup := r.byName[d.Name]; dup {
		fail("the name is already registered")
	}
	for _, s := range d.Synonyms {
		if !paramNameRE.MatchString(s) || s == d.Name {
			fail("synonym %q is not a valid, distinct name", s)
		}
		if _, dup := r.byName[s]; dup {
			fail("synonym %q is already registered", s)
		}
	}
	p := &Param{def: d, index: len(r.params)}
	dflt, err := d.parseText(d.Default)
	if err != nil && d.defaultFrom == nil {
		fail("default %q does not parse: %v", d.Default, err)
	}
	dflt.Source = Source{Kind: FromDefault}
	p.dflt = dflt
	r.params = append(r.params, p)
	r.byName[d.Name] = p
	for _, s := range d.Synonyms {
		r.byName[s] = p
	}
	return p
}

// Freeze forbids further registration.
func (r *Registry) Freeze() {
	r.mu.Lock()
	r.frozen = true
	r.mu.Unlock()
}

// Params returns every parameter in registration order.
func (r *Registry) Params() []*Param {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return append([]*Param(nil), r.params...)
}

// Lookup finds a parameter by its name or one of its synonyms.
func (r *Registry) Lookup(name string) (*Param, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	p, ok := r.byName[name]
	return p, ok
}

// names returns every registered name and synonym, for suggestions.
func (r *Registry) names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]string, 0, len(r.byName))
	for n := range r.byName {
		out = append(out, n)
	}
	return out
}

// ParamFiles, UnknownParams and ShowParams return the parameter system's
// own parameters.
func (r *Registry) ParamFiles() *Param    { return r.paramFiles }
func (r *Registry) UnknownParams() *Param { return r.unknownPolicy }
func (r *Registry) ShowParams() *Param    { return r.showParams }

// DefaultSysconfdir is where the system parameter file lives when
// $GOMPI_SYSCONFDIR is unset.
const DefaultSysconfdir = "/etc/gompi"

func defaultParamFiles(env map[string]string) string {
	sys := env["GOMPI_SYSCONFDIR"]
	if sys == "" {
		sys = DefaultSysconfdir
	}
	return "~/.gompi/mca-params.toml," + strings.TrimSuffix(sys, "/") + "/mca-params.toml"
}
