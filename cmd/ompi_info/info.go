package main

import (
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"strconv"
	"strings"

	"github.com/gompi/gompi/frameworks/coll"
	"github.com/gompi/gompi/mca"
	"github.com/gompi/gompi/params"
)

const usage = `Usage: ompi_info [options]

Lists gompi's frameworks, components and MCA parameters.

  --param <fw|all> <comp|all|base>  show these components and their parameters
                                     (fw may also be the project-wide "mca" or "mpi")
  --level, -l <1-9>                  show parameters up to this level (default 1)
  --all, -a                          show everything at every level
  --parsable, --parseable            Open MPI's colon-separated form
  --json                             one JSON document (schema: docs/ompi_info.md)
  --mca <name> <value>               set a parameter for this listing
  --version, -V                      print the version and exit
  --help, -h                         print this help and exit
`

// options are ompi_info's parsed command line.
type options struct {
	params   [][2]string // --param pairs
	level    int
	all      bool
	parsable bool
	json     bool
	mca      []params.Setting
	help     bool
	version  bool
}

type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func parseArgs(args []string) (*options, error) {
	o := &options{level: 1}
	levelSet := false
	need := func(i, n int, flag string) error {
		if i+n >= len(args) {
			return &usageError{fmt.Sprintf("option %q needs %d argument(s)", flag, n)}
		}
		return nil
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		flag := "-" + strings.TrimLeft(a, "-")
		if !strings.HasPrefix(a, "-") {
			return nil, &usageError{fmt.Sprintf("unexpected argument %q", a)}
		}
		switch flag {
		case "-param", "-params":
			if err := need(i, 2, a); err != nil {
				return nil, err
			}
			o.params = append(o.params, [2]string{args[i+1], args[i+2]})
			i += 2
		case "-level", "-l":
			if err := need(i, 1, a); err != nil {
				return nil, err
			}
			n, err := strconv.Atoi(args[i+1])
			if err != nil || n < 1 || n > 9 {
				return nil, &usageError{fmt.Sprintf("invalid level %q: accepted levels are 1-9", args[i+1])}
			}
			o.level, levelSet = n, true
			i++
		case "-all", "-a":
			o.all = true
		case "-parsable", "-parseable":
			o.parsable = true
		case "-json":
			o.json = true
		case "-mca", "-gmca":
			if err := need(i, 2, a); err != nil {
				return nil, err
			}
			o.mca = append(o.mca, params.Setting{Name: args[i+1], Value: args[i+2]})
			i += 2
		case "-help", "-h":
			o.help = true
		case "-version", "-V":
			o.version = true
		default:
			return nil, &usageError{fmt.Sprintf("unknown option %q", a)}
		}
	}
	if o.parsable && o.json {
		return nil, &usageError{"--parsable and --json are alternatives: choose one"}
	}
	if o.all && !levelSet {
		o.level = 9
	}
	return o, nil
}

// run is ompi_info with its inputs made explicit, for tests.
func run(args, env []string, stdout, stderr io.Writer, cat *mca.Catalog) int {
	o, err := parseArgs(args)
	if err != nil {
		fmt.Fprintf(stderr, "ompi_info: error: %v\nType 'ompi_info --help' for usage.\n", err)
		return 1
	}
	if o.help {
		fmt.Fprint(stdout, usage)
		return 0
	}
	if o.version {
		fmt.Fprintf(stdout, "gompi v%s\n", mca.GompiVersion)
		return 0
	}
	base, err := mca.NewBase(mca.Options{
		Catalog: cat, Output: stderr, Rank: -1, Reporter: true,
		Sources: params.Sources{Env: env, CommandLine: o.mca},
	})
	if err != nil {
		fmt.Fprintf(stderr, "ompi_info: error: %v\n", err)
		return 1
	}
	defer base.Close()
	doc, err := collect(base, o)
	if err != nil {
		fmt.Fprintf(stderr, "ompi_info: error: %v\n", err)
		return 1
	}
	switch {
	case o.json:
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(doc); err != nil {
			fmt.Fprintf(stderr, "ompi_info: error: %v\n", err)
			return 1
		}
	case o.parsable:
		writeParsable(stdout, doc)
	default:
		writePretty(stdout, doc)
	}
	return 0
}

// The document: every fact ompi_info prints, in the order it prints them.
// The three output forms are renderings of it, so that they cannot disagree.
type document struct {
	Package    *packageInfo    `json:"package,omitempty"`
	Components []componentInfo `json:"components"`
	// Skipped are the plugins found on mca_base_component_path that could
	// not be loaded, with the reason.
	Skipped []skippedInfo `json:"skipped_plugins,omitempty"`
	Params  []paramInfo   `json:"params"`
	// CollSlots are the coll framework's operation slots, which its
	// components fill per communicator (coll_base_verbose prints who fills
	// each): with the package, when the catalog has coll.
	CollSlots *slotsInfo `json:"coll_slots,omitempty"`
}

// slotsInfo names the slots by form. Persistent collectives (…_init) have
// no slots of their own: the nonblocking slot's plan runs each Start.
type slotsInfo struct {
	Blocking    []string `json:"blocking"`
	Nonblocking []string `json:"nonblocking"`
	Persistent  []string `json:"persistent"`
}

func collSlots() *slotsInfo {
	s := &slotsInfo{}
	for _, op := range coll.Ops() {
		s.Blocking = append(s.Blocking, op.String())
		s.Nonblocking = append(s.Nonblocking, coll.NBName(op))
		s.Persistent = append(s.Persistent, op.String()+"_init")
	}
	return s
}

type packageInfo struct {
	Name       string `json:"name"`
	Version    string `json:"version"`
	MCAVersion string `json:"mca_version"`
	GoVersion  string `json:"go_version"`
}

type componentInfo struct {
	Framework  string `json:"framework"`
	Name       string `json:"name"`
	MCAVersion string `json:"mca_version"`
	APIVersion string `json:"api_version"`
	Version    string `json:"version"`
	Origin     string `json:"origin"`
}

type skippedInfo struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

type enumInfo struct {
	Value int64  `json:"value"`
	Name  string `json:"name"`
}

type paramInfo struct {
	Framework   string     `json:"framework"`
	Component   string     `json:"component"` // "base" for framework-level and project-wide
	Name        string     `json:"name"`
	Value       string     `json:"value"`
	Source      string     `json:"source"`
	Status      string     `json:"status"` // "writeable" or "read-only"
	Level       int        `json:"level"`
	Help        string     `json:"help,omitempty"`
	Enumerators []enumInfo `json:"enumerators,omitempty"`
	Range       *[2]int64  `json:"range,omitempty"`
	Deprecated  bool       `json:"deprecated"`
	Type        string     `json:"type"`
	Synonyms    []string   `json:"synonyms,omitempty"`
	SynonymOf   string     `json:"synonym_of,omitempty"`
	Disabled    bool       `json:"disabled"`
}

// collect gathers the facts the options ask for.
func collect(b *mca.Base, o *options) (*document, error) {
	cat := b.Catalog()
	doc := &document{Components: []componentInfo{}, Params: []paramInfo{}}
	queries := o.params
	if o.all {
		queries = [][2]string{{"all", "all"}}
	}
	if len(queries) == 0 || o.all {
		doc.Package = &packageInfo{
			Name: "gompi", Version: mca.GompiVersion.String(),
			MCAVersion: mca.MCAVersion.String(), GoVersion: runtime.Version(),
		}
		if cat.Framework("coll") != nil {
			doc.CollSlots = collSlots()
		}
	}
	if len(queries) == 0 {
		for _, fw := range cat.Frameworks() {
			for _, e := range cat.Components(fw.Name) {
				doc.Components = append(doc.Components, component(e))
			}
		}
		for _, s := range cat.Skipped() {
			doc.Skipped = append(doc.Skipped, skippedInfo{Path: s.Path, Reason: s.Reason})
		}
		return doc, nil
	}
	for _, q := range queries {
		if err := collectParams(b, doc, q[0], q[1], o.level); err != nil {
			return nil, err
		}
	}
	return doc, nil
}

func component(e *mca.Entry) componentInfo {
	return componentInfo{
		Framework: e.Framework.Name, Name: e.Info.Name,
		MCAVersion: mca.MCAVersion.String(), APIVersion: e.Info.API.String(),
		Version: e.Info.Version.String(), Origin: e.OriginText(),
	}
}

// collectParams adds the components and parameters of one --param query.
func collectParams(b *mca.Base, doc *document, fwName, compName string, level int) error {
	cat := b.Catalog()
	var groups []string
	switch {
	case fwName == "all":
		groups = append(cat.FrameworkNames(), cat.ProjectNames()...)
	case cat.Project(fwName) != nil || cat.Framework(fwName) != nil:
		groups = []string{fwName}
	default:
		return fmt.Errorf("no framework %q; frameworks: %s; project-wide parameters: %s",
			fwName, strings.Join(cat.FrameworkNames(), ", "), strings.Join(cat.ProjectNames(), ", "))
	}
	for _, g := range groups {
		entries := cat.Components(g)
		wantBase := compName == "all" || compName == "base"
		var picked []*mca.Entry
		for _, e := range entries {
			if compName == "all" || compName == e.Info.Name {
				picked = append(picked, e)
			}
		}
		if len(picked) == 0 && !wantBase {
			var names []string
			for _, e := range entries {
				names = append(names, e.Info.Name)
			}
			if len(names) == 0 {
				return fmt.Errorf("no %s component %q; %s has no components (use \"all\" or \"base\" for its own parameters)", g, compName, g)
			}
			return fmt.Errorf("no %s component %q; %s components: %s (or \"all\", \"base\")", g, compName, g, strings.Join(names, ", "))
		}
		for _, e := range picked {
			doc.Components = append(doc.Components, component(e))
		}
		if wantBase {
			doc.Params = append(doc.Params, groupParams(b, g, "", false, level)...)
		}
		for _, e := range picked {
			doc.Params = append(doc.Params, groupParams(b, g, e.Info.Name, b.Excluded(e) != "", level)...)
		}
	}
	return nil
}

// groupParams returns the parameters of one (framework, component) group at
// or below level, in registration order, each deprecated synonym right after
// its parameter.
func groupParams(b *mca.Base, fw, comp string, disabled bool, level int) []paramInfo {
	var out []paramInfo
	for _, p := range b.Catalog().Params().Params() {
		d := p.Def()
		if d.Framework != fw || d.Component != comp || d.Level > level {
			continue
		}
		v := b.Get(p)
		_, group := p.Group()
		pi := paramInfo{
			Framework: fw, Component: group, Name: d.Name,
			Value: v.String(), Source: v.Source.String(), Status: "writeable",
			Level: d.Level, Help: d.Help, Type: d.Type.String(),
			Synonyms: d.Synonyms, Disabled: disabled,
		}
		if d.Scope == params.ScopeConstant {
			pi.Status = "read-only"
		}
		if d.Type == params.Bool {
			pi.Enumerators = []enumInfo{{0, "false"}, {1, "true"}}
		}
		for _, ev := range d.Values {
			pi.Enumerators = append(pi.Enumerators, enumInfo{ev.Value, ev.Name})
		}
		if d.Range != nil {
			pi.Range = &[2]int64{d.Range.Min, d.Range.Max}
		}
		out = append(out, pi)
		for _, syn := range d.Synonyms {
			s := pi
			s.Name, s.Deprecated, s.Synonyms, s.SynonymOf = syn, true, nil, d.Name
			out = append(out, s)
		}
	}
	return out
}
