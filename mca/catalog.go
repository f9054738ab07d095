package mca

import (
	"fmt"
	"regexp"
	"sort"
	"sync"

	"github.com/gompi/gompi/mpierr"
	"github.com/gompi/gompi/params"
)

// Entry is a component in the catalogue.
type Entry struct {
	Component Component
	Info      Info
	Origin    Origin
	Framework *Framework
	// Priority is the <fw>_<comp>_priority parameter, nil in frameworks
	// without priorities.
	Priority *params.Param
	// Path is the executable of a plugin component, "" for the others.
	Path string
}

// OriginText is how ompi_info shows where the component came from:
// "built-in", "linked", or "plugin (<path>)".
func (e *Entry) OriginText() string {
	if e.Origin == Plugin {
		return fmt.Sprintf("plugin (%s)", e.Path)
	}
	return e.Origin.String()
}

// Catalog knows every framework and component and every parameter they
// declared. It is filled at initialisation and frozen when the first Base is
// made from it. The process has one (Default); tests may make their own.
type Catalog struct {
	mu         sync.RWMutex
	frozen     bool
	reg        *params.Registry
	frameworks map[string]*Framework
	projects   map[string]*Project
	components map[string][]*Entry // by framework, sorted by name

	// Plugins are loaded once, by the first Base, from the component path
	// its parameters give; loadMu orders concurrent first Bases.
	loadMu     sync.Mutex
	loaded     bool
	loadedPath string
	skipped    []Skipped
}

// NewCatalog returns a catalogue with the parameter system's own parameters
// and the mca and mpi projects, and no framework.
func NewCatalog() *Catalog {
	c := &Catalog{
		reg:        params.NewRegistry(),
		frameworks: map[string]*Framework{},
		projects:   map[string]*Project{},
		components: map[string][]*Entry{},
	}
	c.RegisterProject(&Project{Name: "mca", Description: "The component architecture and its parameter system",
		Params: pluginParamDefs()})
	c.RegisterProject(&Project{Name: "mpi", Description: "The MPI layer"})
	return c
}

// Project is a name space of project-wide parameters (mpi_*, mca_*, rte_*)
// with a logger of its own, set by <name>_base_verbose. It has no components.
type Project struct {
	Name        string
	Description string
	// Params are the project's parameters; their Framework field is filled
	// in. Read them by name with Base.Lookup.
	Params []params.Def
}

// RegisterProject adds a project to the default catalogue. Call it from an
// init function.
func RegisterProject(p *Project) { defaultCatalog.RegisterProject(p) }

var defaultCatalog = NewCatalog()

// Default returns the process's catalogue, the one that Register,
// RegisterBuiltin and RegisterFramework fill.
func Default() *Catalog { return defaultCatalog }

// RegisterFramework adds fw to the default catalogue. Call it from the
// framework package's init function.
func RegisterFramework(fw *Framework) { defaultCatalog.RegisterFramework(fw) }

// Register adds a component linked in from outside gompi to the default
// catalogue. Call it from an init function.
func Register(c Component) { defaultCatalog.Register(c, Linked) }

// RegisterBuiltin adds gompi's own components; components/builtin calls it.
func RegisterBuiltin(cs ...Component) {
	for _, c := range cs {
		defaultCatalog.Register(c, Builtin)
	}
}

var (
	frameworkNameRE = regexp.MustCompile(`^[a-z][a-z0-9]*$`)
	componentNameRE = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
)

// RegisterProject adds a project, its <name>_base_verbose and its
// parameters. It panics on a malformed declaration, a name already taken by a
// framework or project, or a frozen catalogue.
func (c *Catalog) RegisterProject(p *Project) {
	c.mu.Lock()
	defer c.mu.Unlock()
	fail := func(format string, a ...any) {
		panic(fmt.Sprintf("mca: registering project %q: ", p.Name) + fmt.Sprintf(format, a...))
	}
	switch {
	case c.frozen:
		fail("the catalogue is frozen: projects register during initialisation")
	case !frameworkNameRE.MatchString(p.Name) || p.Name == "all":
		fail("a project name is lower case letters and digits, and not all")
	case c.frameworks[p.Name] != nil || c.projects[p.Name] != nil:
		fail("the name is already taken")
	case p.Description == "":
		fail("a project needs a Description")
	}
	c.projects[p.Name] = p
	c.reg.Register(verboseParamDef(p.Name))
	for _, d := range p.Params {
		d.Framework, d.Component = p.Name, ""
		c.reg.Register(d)
	}
}

// RegisterProjectParams adds parameters to a project registered before:
// for the package that owns a project's parameters when another registered
// the project (mpi's, which mca registers). It panics on an unknown project
// or a frozen catalogue.
func RegisterProjectParams(project string, defs ...params.Def) {
	defaultCatalog.RegisterProjectParams(project, defs...)
}

// RegisterProjectParams is the package function on this catalogue.
func (c *Catalog) RegisterProjectParams(project string, defs ...params.Def) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.projects[project]
	switch {
	case c.frozen:
		panic(fmt.Sprintf("mca: parameters of project %q: the catalogue is frozen", project))
	case p == nil:
		panic(fmt.Sprintf("mca: parameters of project %q: no such project", project))
	}
	for _, d := range defs {
		d.Framework, d.Component = project, ""
		p.Params = append(p.Params, d)
		c.reg.Register(d)
	}
}

// RegisterFramework adds a framework and its base parameters. It panics on a
// malformed declaration, a duplicate, or a frozen catalogue.
func (c *Catalog) RegisterFramework(fw *Framework) {
	c.mu.Lock()
	defer c.mu.Unlock()
	fail := func(format string, a ...any) {
		panic(fmt.Sprintf("mca: registering framework %q: ", fw.Name) + fmt.Sprintf(format, a...))
	}
	switch {
	case c.frozen:
		fail("the catalogue is frozen: frameworks register during initialisation")
	case !frameworkNameRE.MatchString(fw.Name) || fw.Name == "all":
		fail("a framework name is lower case letters and digits, and not all")
	case c.frameworks[fw.Name] != nil || c.projects[fw.Name] != nil:
		fail("the name is already taken")
	case fw.Selection != SingleSelect && fw.Selection != MultiSelect:
		fail("Selection must be SingleSelect or MultiSelect")
	case fw.Description == "":
		fail("a framework needs a Description")
	}
	c.frameworks[fw.Name] = fw
	c.reg.Register(selectionParamDef(fw))
	c.reg.Register(verboseParamDef(fw.Name))
	for _, d := range fw.Params {
		d.Framework, d.Component = fw.Name, ""
		c.reg.Register(d)
	}
}

// Register adds a component with the given origin and calls its Register. It
// panics on a missing or malformed name, an unknown framework, a duplicate,
// an API major version that differs from the framework's, a component that
// does not implement the framework's interface, or a frozen catalogue.
func (c *Catalog) Register(comp Component, origin Origin) {
	if err := c.register(comp, origin, ""); err != nil {
		panic(err.Error())
	}
}

// RegisterPlugin adds a plugin component found at path. It checks what
// Register checks but returns the mistake as an error: a plugin is outside
// input, and a bad one is skipped, not fatal. Plugin loaders call it while
// the catalogue is being prepared for its first Base.
func (c *Catalog) RegisterPlugin(comp Component, path string) error {
	return c.register(comp, Plugin, path)
}

func (c *Catalog) register(comp Component, origin Origin, path string) (err error) {
	info := comp.Info()
	c.mu.Lock()
	fail := func(format string, a ...any) error {
		c.mu.Unlock()
		// ErrArg: the component's description is what is wrong. A
		// check's own error keeps its class too (wrapped with %w).
		return mpierr.Wrap(mpierr.ErrArg, fmt.Errorf("mca: registering component %s: "+format, append([]any{info.ID()}, a...)...))
	}
	if c.frozen {
		return fail("the catalogue is frozen: components register during initialisation (from an init function)")
	}
	fw := c.frameworks[info.Framework]
	switch {
	case fw == nil:
		return fail("no framework %q is registered (known: %v); import its package from frameworks/", info.Framework, c.frameworkNamesLocked())
	case !componentNameRE.MatchString(info.Name) || info.Name == "base" || info.Name == "all":
		return fail("a component name is lower case letters, digits and '_', and not base or all")
	case info.API.Major != fw.API.Major:
		return fail("built for %s API %s, but this gompi has %s API %s (major versions must match)", fw.Name, info.API, fw.Name, fw.API)
	}
	for _, e := range c.components[fw.Name] {
		if e.Info.Name == info.Name {
			return fail("a component of that name is already registered (%s)", e.OriginText())
		}
	}
	if fw.Check != nil {
		if err := fw.Check(comp); err != nil {
			return fail("%w", err)
		}
	}
	e := &Entry{Component: comp, Info: info, Origin: origin, Framework: fw, Path: path}
	list := append(c.components[fw.Name], e)
	sort.Slice(list, func(i, j int) bool { return list[i].Info.Name < list[j].Info.Name })
	c.components[fw.Name] = list
	c.mu.Unlock()

	// Parameters are registered outside the lock: Register may panic on a bad
	// Def, and the registry has its own lock. A plugin's parameters are
	// outside input: a bad one removes the plugin instead.
	if origin == Plugin {
		defer func() {
			if r := recover(); r != nil {
				c.mu.Lock()
				list := c.components[fw.Name]
				for i, x := range list {
					if x == e {
						c.components[fw.Name] = append(list[:i:i], list[i+1:]...)
						break
					}
				}
				c.mu.Unlock()
				err = mpierr.Errorf(mpierr.ErrArg, "mca: registering component %s: %v", info.ID(), r)
			}
		}()
	}
	if fw.usesPriorities() {
		e.Priority = c.reg.Register(priorityParamDef(fw, info))
	}
	comp.Register(&Registrar{reg: c.reg, framework: fw.Name, component: info.Name})
	return nil
}

// Freeze forbids further registration of frameworks, components and
// parameters.
func (c *Catalog) Freeze() {
	c.mu.Lock()
	c.frozen = true
	c.mu.Unlock()
	c.reg.Freeze()
}

// Params returns the registry of every parameter in the catalogue.
func (c *Catalog) Params() *params.Registry { return c.reg }

// Frameworks returns the registered frameworks sorted by name.
func (c *Catalog) Frameworks() []*Framework {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]*Framework, 0, len(c.frameworks))
	for _, fw := range c.frameworks {
		out = append(out, fw)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Framework returns the framework of that name, or nil.
func (c *Catalog) Framework(name string) *Framework {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.frameworks[name]
}

// Components returns a framework's components sorted by name.
func (c *Catalog) Components(framework string) []*Entry {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return append([]*Entry(nil), c.components[framework]...)
}

// Projects returns the registered projects sorted by name.
func (c *Catalog) Projects() []*Project {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]*Project, 0, len(c.projects))
	for _, p := range c.projects {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Project returns the project of that name, or nil.
func (c *Catalog) Project(name string) *Project {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.projects[name]
}

// ProjectNames returns the registered project names, sorted.
func (c *Catalog) ProjectNames() []string {
	var out []string
	for _, p := range c.Projects() {
		out = append(out, p.Name)
	}
	return out
}

// FrameworkNames returns the registered framework names, sorted.
func (c *Catalog) FrameworkNames() []string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.frameworkNamesLocked()
}

func (c *Catalog) frameworkNamesLocked() []string {
	out := make([]string, 0, len(c.frameworks))
	for n := range c.frameworks {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// componentNames returns a framework's component names, sorted.
func (c *Catalog) componentNames(framework string) []string {
	var out []string
	for _, e := range c.Components(framework) {
		out = append(out, e.Info.Name)
	}
	return out
}
