package params

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/gompi/gompi/mpierr"
)

// EnvPrefix starts every environment variable that sets a parameter.
const EnvPrefix = "OMPI_MCA_"

// EnvSourcePrefix starts the variable that a launcher sets beside
// OMPI_MCA_<name> to say where the value really came from.
const EnvSourcePrefix = "OMPI_MCA_SOURCE_"

// CommandLineMark is the value of OMPI_MCA_SOURCE_<name> for a value that was
// given on the launcher's command line.
const CommandLineMark = "command line"

// Setting is one name/value pair from a command line.
type Setting struct{ Name, Value string }

// Sources are the explicit inputs from which an instance's values are
// resolved. Files are not listed here: mca_base_param_files, resolved from
// these sources, names them.
type Sources struct {
	// Env is an environment snapshot in os.Environ form ("KEY=value").
	Env []string
	// CommandLine holds the --mca settings of this process's own command
	// line, in order. Naming a parameter twice is an error.
	CommandLine []Setting
}

// setting is one value from one source, before it is matched to a parameter.
type setting struct {
	name string
	text string // the text form; unused when typed is set
	// typed is a TOML value (string, int64, bool, float64, []any, …); nil
	// for text sources.
	typed any
	src   Source
}

// layer is every setting of one source, by name. Layers are consulted from
// the highest precedence down.
type layer struct {
	byName map[string]setting
	order  []string // names in the order the source gave them
}

func newLayer() *layer { return &layer{byName: map[string]setting{}} }

func (l *layer) add(s setting) {
	if _, dup := l.byName[s.name]; !dup {
		l.order = append(l.order, s.name)
	}
	l.byName[s.name] = s
}

// Values are the resolved parameter values of one instance. They are
// immutable after Resolve and safe for concurrent reads.
type Values struct {
	reg      *Registry
	vals     map[*Param]Value
	layers   []*layer // command line, environment, files (leftmost first)
	files    []string
	warnings []string
}

// Unknown is a name that was set in some source but that no registered
// parameter has.
type Unknown struct {
	Name        string
	Source      Source
	Suggestions []string // the closest registered names, best first
	// Group, when no registered name is close but the name's prefix names
	// a framework or a component, holds that group's closest parameters.
	Group *GroupSuggestion
}

// Message describes the unknown name for a user.
func (u Unknown) Message() string {
	msg := fmt.Sprintf("unknown MCA parameter %q (source: %s)", u.Name, u.Source)
	if len(u.Suggestions) == 0 && u.Group != nil {
		g := u.Group
		owner := g.Framework + " " + g.Component
		if g.Component == "all" {
			owner = g.Framework
		}
		return fmt.Sprintf("%s; no registered parameter has a similar name; did you mean one of %s's parameters: %s? (ompi_info --param %s %s --level 9 lists them all)",
			msg, owner, strings.Join(g.Params, ", "), g.Framework, g.Component)
	}
	if len(u.Suggestions) == 0 {
		return msg + "; no registered parameter has a similar name (ompi_info --all lists them)"
	}
	return msg + "; did you mean " + strings.Join(u.Suggestions, " or ") + "?"
}

// Resolve computes every registered parameter's value from src. It returns
// the values together with an error that joins every bad value, bad file and
// duplicate command-line setting it met; the values of parameters whose input
// was bad keep their defaults, so that tools can still show the rest.
func Resolve(reg *Registry, src Sources) (*Values, error) {
	vs := &Values{reg: reg, vals: map[*Param]Value{}}
	var errs []error

	env := envMap(src.Env)
	cmd := newLayer()
	for _, s := range src.CommandLine {
		if _, dup := cmd.byName[s.Name]; dup {
			errs = append(errs, mpierr.Errorf(mpierr.ErrUnsupportedParam,
				"MCA parameter %q is given more than once on the command line", s.Name))
			continue
		}
		cmd.add(setting{name: s.Name, text: s.Value, src: Source{Kind: FromCommandLine}})
	}
	envL, envWarn := envLayer(src.Env)
	vs.warnings = append(vs.warnings, envWarn...)
	vs.layers = []*layer{cmd, envL}

	files, fileErr := vs.paramFiles(env)
	errs = append(errs, fileErr...)
	for _, f := range files {
		settings, err := readParamFile(f)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		l := newLayer()
		for _, s := range settings {
			if s.name == ParamFilesName {
				vs.warnings = append(vs.warnings, fmt.Sprintf(
					"%s is set in %s, where it has no effect: it can be set only in the environment or on the command line",
					ParamFilesName, s.src))
				continue
			}
			l.add(s)
		}
		vs.layers = append(vs.layers, l)
		vs.files = append(vs.files, f)
	}

	for _, p := range reg.Params() {
		if p == reg.paramFiles {
			continue // resolved above
		}
		v, err := vs.resolve(p)
		if err != nil {
			errs = append(errs, err)
		}
		vs.vals[p] = v
	}
	vs.warnings = append(vs.warnings, vs.deprecations()...)
	return vs, errors.Join(errs...)
}

func envMap(env []string) map[string]string {
	m := make(map[string]string, len(env))
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return m
}

// envLayer collects OMPI_MCA_<name> variables, relabelled as command-line
// values where the launcher marked them so.
func envLayer(env []string) (*layer, []string) {
	m := envMap(env)
	var names []string
	for k := range m {
		if strings.HasPrefix(k, EnvPrefix) && !strings.HasPrefix(k, EnvSourcePrefix) {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	l := newLayer()
	var warnings []string
	for _, k := range names {
		name := strings.TrimPrefix(k, EnvPrefix)
		src := Source{Kind: FromEnvironment}
		if mark, ok := m[EnvSourcePrefix+name]; ok {
			if mark == CommandLineMark {
				src.Kind = FromCommandLine
			} else {
				warnings = append(warnings, fmt.Sprintf("%s%s=%q is not a source gompi knows (accepted: %q); the value of %s counts as environment",
					EnvSourcePrefix, name, mark, CommandLineMark, name))
			}
		}
		l.add(setting{name: name, text: m[k], src: src})
	}
	return l, warnings
}

// paramFiles resolves mca_base_param_files (command line, then environment,
// then the default) and returns the files to read, leftmost first. A file the
// user named that does not exist is an error; a default file that does not
// exist is simply absent.
func (vs *Values) paramFiles(env map[string]string) ([]string, []error) {
	p := vs.reg.paramFiles
	v := Value{typ: List, Source: Source{Kind: FromDefault}}
	var err error
	if s, ok := vs.find(p, 2); ok { // command line and environment only
		v, err = p.def.parseSetting(s)
		if err != nil {
			vs.vals[p] = p.dflt
			return nil, []error{err}
		}
	} else {
		v.list, _ = SplitList(p.def.defaultFrom(env))
	}
	vs.vals[p] = v
	if len(v.list) == 1 && v.list[0] == "none" {
		return nil, nil
	}
	var files []string
	var errs []error
	for _, f := range v.list {
		path, ok := expandHome(f, env)
		if !ok {
			if v.Source.Kind != FromDefault {
				errs = append(errs, mpierr.Errorf(mpierr.ErrUnsupportedParam,
					"%s (source: %s) names %q, but $HOME is not set", ParamFilesName, v.Source, f))
			}
			continue
		}
		if _, err := os.Stat(path); err != nil {
			if v.Source.Kind != FromDefault || !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, mpierr.Errorf(mpierr.ErrUnsupportedParam,
					"%s (source: %s) names %q: %w", ParamFilesName, v.Source, f, err))
			}
			continue
		}
		files = append(files, path)
	}
	return files, errs
}

func expandHome(path string, env map[string]string) (string, bool) {
	if path != "~" && !strings.HasPrefix(path, "~/") {
		return path, true
	}
	home := env["HOME"]
	if home == "" {
		return "", false
	}
	return filepath.Join(home, strings.TrimPrefix(path, "~")), true
}

// find returns the highest-precedence setting of p among the first n layers
// (all layers when n <= 0). At equal precedence the real name beats a
// synonym.
func (vs *Values) find(p *Param, n int) (setting, bool) {
	layers := vs.layers
	if n > 0 && n < len(layers) {
		layers = layers[:n]
	}
	for _, l := range layers {
		if s, ok := l.byName[p.def.Name]; ok {
			return s, true
		}
		for _, syn := range p.def.Synonyms {
			if s, ok := l.byName[syn]; ok {
				return s, true
			}
		}
	}
	return setting{}, false
}

func (vs *Values) resolve(p *Param) (Value, error) {
	s, ok := vs.find(p, 0)
	if !ok {
		return p.dflt, nil
	}
	if p.def.Scope == ScopeConstant {
		return p.dflt, mpierr.Errorf(mpierr.ErrUnsupportedParam,
			"MCA parameter %s (source: %s) is informational and cannot be set (value %q ignored)", p.def.Name, s.src, s.text)
	}
	v, err := p.def.parseSetting(s)
	if err != nil {
		return p.dflt, err
	}
	return v, nil
}

// parseSetting parses one setting for d, or returns an error that names the
// parameter, the value, its source and what is accepted.
func (d *Def) parseSetting(s setting) (Value, error) {
	var v Value
	var err error
	shown := fmt.Sprintf("%q", s.text)
	if s.typed != nil {
		v, err = d.parseTyped(s.typed)
		shown = describeTyped(s.typed)
	} else {
		v, err = d.parseText(s.text)
	}
	if err != nil {
		via := d.Name
		if s.name != d.Name {
			via = fmt.Sprintf("%s (deprecated synonym of %s)", s.name, d.Name)
		}
		return Value{}, mpierr.Errorf(mpierr.ErrUnsupportedParam,
			"invalid value %s for MCA parameter %s of type %v (source: %s); %v", shown, via, d.Type, s.src, err)
	}
	v.Source = s.src
	return v, nil
}

// deprecations returns one warning per deprecated synonym that some source
// set, naming the highest-precedence source that set it.
func (vs *Values) deprecations() []string {
	var out []string
	for _, p := range vs.reg.Params() {
		for _, syn := range p.def.Synonyms {
			for _, l := range vs.layers {
				s, ok := l.byName[syn]
				if !ok {
					continue
				}
				msg := fmt.Sprintf("MCA parameter %s (source: %s) is deprecated; use %s", syn, s.src, p.def.Name)
				if w, ok := vs.find(p, 0); ok && w.name != syn {
					msg += fmt.Sprintf(" (this value is not used: %s is set by %s)", p.def.Name, w.src)
				}
				out = append(out, msg)
				break
			}
		}
	}
	return out
}

// Registry returns the registry these values were resolved for.
func (vs *Values) Registry() *Registry { return vs.reg }

// Get returns p's value. p must belong to the registry the values were
// resolved for.
func (vs *Values) Get(p *Param) Value {
	v, ok := vs.vals[p]
	if !ok {
		panic(fmt.Sprintf("params: %s is not a parameter of this registry", p.def.Name))
	}
	return v
}

// Lookup finds a parameter by name or synonym and returns it with its value.
func (vs *Values) Lookup(name string) (*Param, Value, bool) {
	p, ok := vs.reg.Lookup(name)
	if !ok {
		return nil, Value{}, false
	}
	return p, vs.vals[p], true
}

// Files returns the parameter files that were read, leftmost first.
func (vs *Values) Files() []string { return append([]string(nil), vs.files...) }

// Warnings returns what resolution noticed that is not an error: deprecated
// synonyms in use, misplaced settings. Unknown names are reported by Unknown.
func (vs *Values) Warnings() []string { return append([]string(nil), vs.warnings...) }

// Unknown returns every name that a source set but no registered parameter
// (or synonym) has, with the closest registered names or, when none is
// close, the closest parameters of the group its prefix names. Command-line names
// come first, then environment, then files, each in its source's order.
func (vs *Values) Unknown() []Unknown {
	known := vs.reg.names()
	ps := vs.reg.Params()
	var out []Unknown
	for _, l := range vs.layers {
		for _, name := range l.order {
			if _, ok := vs.reg.Lookup(name); ok {
				continue
			}
			u := Unknown{Name: name, Source: l.byName[name].src, Suggestions: Suggest(name, known, 3)}
			if len(u.Suggestions) == 0 {
				if g, ok := suggestInGroup(name, ps, 3); ok {
					u.Group = &g
				}
			}
			out = append(out, u)
		}
	}
	return out
}

// CheckUnknown applies mca_base_unknown_params to Unknown: it returns the
// warnings to show under "warn", an error (class ErrUnsupportedParam) under
// "error", and nothing under "ignore".
func (vs *Values) CheckUnknown() (warnings []string, err error) {
	unknown := vs.Unknown()
	if len(unknown) == 0 {
		return nil, nil
	}
	policy := vs.Get(vs.reg.unknownPolicy)
	msgs := make([]string, len(unknown))
	for i, u := range unknown {
		msgs[i] = u.Message()
	}
	switch policy.Int() {
	case UnknownIgnore:
		return nil, nil
	case UnknownError:
		return nil, mpierr.Errorf(mpierr.ErrUnsupportedParam, "%s (%s=error, source: %s)",
			strings.Join(msgs, "; "), UnknownParamsName, policy.Source)
	}
	return msgs, nil
}

// ShowLines returns the "name=value (source)" lines that mpi_show_mca_params
// asks for, in registration order; none when it is empty.
func (vs *Values) ShowLines() []string {
	want := map[SourceKind]bool{}
	for _, item := range vs.Get(vs.reg.showParams).list {
		switch item {
		case "all":
			want[FromDefault], want[FromFile], want[FromEnvironment], want[FromCommandLine] = true, true, true, true
		case "nondefault":
			want[FromFile], want[FromEnvironment], want[FromCommandLine] = true, true, true
		case "default":
			want[FromDefault] = true
		case "file":
			want[FromFile] = true
		case "enviro":
			want[FromEnvironment] = true
		case "cmdline":
			want[FromCommandLine] = true
		}
	}
	var lines []string
	for _, p := range vs.reg.Params() {
		v := vs.vals[p]
		if want[v.Source.Kind] {
			lines = append(lines, fmt.Sprintf("%s=%s (%s)", p.def.Name, v, v.Source))
		}
	}
	return lines
}
