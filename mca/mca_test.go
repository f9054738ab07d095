package mca

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/gompi/gompi/mpierr"
	"github.com/gompi/gompi/params"
)

// fake is a component whose behaviour the test chooses.
type fake struct {
	fw, name     string
	api          Version
	priority     int // queried priority
	defaultPrio  int // Info.Priority
	openDecline  string
	queryDecline string
	queryFail    error

	mu     sync.Mutex
	opens  int
	closes int
	knob   *params.Param
}

func (f *fake) Info() Info {
	api := f.api
	if api == (Version{}) {
		api = Version{1, 2, 0}
	}
	return Info{Framework: f.fw, Name: f.name, Version: Version{0, 1, 0}, API: api, Priority: f.defaultPrio}
}

func (f *fake) Register(r *Registrar) {
	f.knob = r.Add(params.Def{Name: f.fw + "_" + f.name + "_knob", Type: params.Int, Default: "3", Level: 5, Help: "a knob"})
}

func (f *fake) Open(b *Base) error {
	f.mu.Lock()
	f.opens++
	f.mu.Unlock()
	if f.openDecline != "" {
		return Decline("%s", f.openDecline)
	}
	return nil
}

func (f *fake) Close(b *Base) error {
	f.mu.Lock()
	f.closes++
	f.mu.Unlock()
	return nil
}

// query is the test frameworks' Query: it logs at three verbosities so that
// the tests can see which lines appear.
func (f *fake) query(b *Base) (int, string, error) {
	log := b.Logger(f.fw).Named(f.name)
	log.Log(VerboseComponent, "query at 10")
	log.Log(VerboseInfo, "query at 40")
	log.Log(VerboseMax, "query at 100")
	if f.queryFail != nil {
		return 0, "", f.queryFail
	}
	if f.queryDecline != "" {
		return 0, "", Decline("%s", f.queryDecline)
	}
	return f.priority, "module-" + f.name, nil
}

var (
	single = &Framework{Name: "single", Description: "test single select", API: Version{1, 0, 0}, Selection: SingleSelect}
	multi  = &Framework{Name: "multi", Description: "test multi select", API: Version{1, 0, 0}, Selection: MultiSelect}
	empty  = &Framework{Name: "empty", Description: "test multi select that may be empty", API: Version{1, 0, 0}, Selection: MultiSelect, AllowEmpty: true}
)

// newCatalog registers the test frameworks and the given components in a
// private catalogue.
func newCatalog(comps ...*fake) *Catalog {
	c := NewCatalog()
	for _, fw := range []*Framework{single, multi, empty} {
		c.RegisterFramework(fw)
	}
	for _, f := range comps {
		c.Register(f, Builtin)
	}
	return c
}

func newBase(t *testing.T, c *Catalog, cmd ...string) (*Base, *bytes.Buffer, error) {
	t.Helper()
	var out bytes.Buffer
	var settings []params.Setting
	for i := 0; i+1 < len(cmd); i += 2 {
		settings = append(settings, params.Setting{Name: cmd[i], Value: cmd[i+1]})
	}
	b, err := NewBase(Options{Catalog: c, Output: &out, Rank: 0, Reporter: true,
		Sources: params.Sources{Env: []string{"OMPI_MCA_mca_base_param_files=none"}, CommandLine: settings}})
	return b, &out, err
}

func selectNames(t *testing.T, b *Base, fw *Framework) ([]string, error) {
	t.Helper()
	sel, err := Select(b, fw, func(c Component) (int, string, error) { return c.(*fake).query(b) })
	var names []string
	for _, s := range sel {
		names = append(names, fmt.Sprintf("%s:%d", s.Entry.Info.Name, s.Priority))
		if s.Module != "module-"+s.Entry.Info.Name {
			t.Errorf("module of %s is %q", s.Entry.Info.Name, s.Module)
		}
	}
	return names, err
}

func TestSelection(t *testing.T) {
	comps := func(fw string) []*fake {
		return []*fake{
			{fw: fw, name: "aaa", priority: 10, defaultPrio: 10},
			{fw: fw, name: "bbb", priority: 30, defaultPrio: 30},
			{fw: fw, name: "ccc", priority: 20, defaultPrio: 20},
		}
	}
	cases := []struct {
		name    string
		fw      *Framework
		cmd     []string
		want    string // selected names:priority, or an error's parts after "error:"
		warning string
	}{
		{"multi all by priority", multi, nil, "bbb:30,ccc:20,aaa:10", ""},
		{"single highest", single, nil, "bbb:30", ""},
		{"include", multi, []string{"multi", "aaa,ccc"}, "ccc:20,aaa:10", ""},
		{"include order does not matter", multi, []string{"multi", "ccc,aaa"}, "ccc:20,aaa:10", ""},
		{"single include", single, []string{"single", "aaa"}, "aaa:10", ""},
		{"exclude", multi, []string{"multi", "^bbb"}, "ccc:20,aaa:10", ""},
		{"exclude with a caret on each", multi, []string{"multi", "^bbb,^ccc"}, "aaa:10", ""},
		{"single exclude", single, []string{"single", "^bbb"}, "ccc:20", ""},
		{"exclude unknown warns", multi, []string{"multi", "^openib,bbb"}, "ccc:20,aaa:10", `excludes "openib", which is not a multi component (known: aaa, bbb, ccc)`},
		{"mixed is an error", multi, []string{"multi", "aaa,^bbb"}, "error:mixes included and excluded|command line", ""},
		{"double caret is an error", multi, []string{"multi", "^^aaa"}, "error:not a component name", ""},
		{"unknown included is an error", multi, []string{"multi", "aaa,nosuch"}, `error:no multi component "nosuch"|multi components: aaa, bbb, ccc`, ""},
		{"priority override", single, []string{"single_aaa_priority", "99"}, "aaa:99", ""},
		{"priority override in multi", multi, []string{"multi_aaa_priority", "99"}, "bbb:30,ccc:20,aaa:10", `unknown MCA parameter "multi_aaa_priority"`},
		{"priority tie goes by name", single, []string{"single_ccc_priority", "30"}, "bbb:30", ""},
		{"priority tie goes by name, reversed", single, []string{"single_aaa_priority", "30"}, "aaa:30", ""},
		{"nothing selectable", single, []string{"single", "^aaa,bbb,ccc"}, `error:no component of the single framework|excluded: aaa (by single = "^aaa,bbb,ccc", source: command line)`, ""},
		{"empty allowed", empty, []string{"empty", "^aaa,bbb,ccc"}, "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cat := newCatalog(append(append(comps("single"), comps("multi")...), comps("empty")...)...)
			b, out, err := newBase(t, cat, c.cmd...)
			var got string
			if err == nil {
				var names []string
				names, err = selectNames(t, b, c.fw)
				got = strings.Join(names, ",")
			}
			if want, ok := strings.CutPrefix(c.want, "error:"); ok {
				if err == nil {
					t.Fatalf("selected %q, want an error", got)
				}
				for _, part := range strings.Split(want, "|") {
					if !strings.Contains(err.Error(), part) {
						t.Errorf("error %q does not contain %q", err, part)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("error %v", err)
			}
			if got != c.want {
				t.Errorf("selected %q, want %q", got, c.want)
			}
			if c.warning != "" && !strings.Contains(out.String(), c.warning) {
				t.Errorf("output %q lacks the warning %q", out, c.warning)
			}
			if c.warning == "" && strings.Contains(out.String(), "[WARN]") {
				t.Errorf("unexpected warning: %q", out)
			}
		})
	}
}

func TestDeclinesAndFailures(t *testing.T) {
	a := &fake{fw: "single", name: "aaa", priority: 10, openDecline: "no device"}
	bb := &fake{fw: "single", name: "bbb", priority: 30, queryDecline: "needs two nodes"}
	c := &fake{fw: "single", name: "ccc", priority: 20}
	cat := newCatalog(a, bb, c)
	b, _, err := newBase(t, cat, "single", "^ccc")
	if err != nil {
		t.Fatal(err)
	}
	_, err = selectNames(t, b, single)
	if err == nil {
		t.Fatal("selected something")
	}
	for _, want := range []string{"declined: aaa (no device), bbb (needs two nodes)", "excluded: ccc (by single", "components: aaa, bbb, ccc"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if !errors.Is(err, mpierr.ErrComponentNotFound) {
		t.Errorf("error does not carry ErrComponentNotFound")
	}
	// A decliner is opened once per Base however often selection runs, and
	// one that declined at Open is never closed.
	selectNames(t, b, single)
	b.Close()
	if a.opens != 1 || a.closes != 0 || bb.opens != 1 || bb.closes != 1 || c.opens != 0 {
		t.Errorf("opens/closes: aaa %d/%d, bbb %d/%d, ccc opened %d", a.opens, a.closes, bb.opens, bb.closes, c.opens)
	}

	// A failure that is not a decline stops selection with the component's error.
	boom := errors.New("device on fire")
	d := &fake{fw: "multi", name: "ddd", queryFail: boom}
	b, _, err = newBase(t, newCatalog(d))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := selectNames(t, b, multi); !errors.Is(err, boom) || !strings.Contains(err.Error(), "ddd") {
		t.Errorf("got %v, want the component's failure", err)
	}
}

func TestSingleSelectClosesLosers(t *testing.T) {
	a := &fake{fw: "single", name: "aaa", priority: 10}
	bb := &fake{fw: "single", name: "bbb", priority: 30}
	b, _, err := newBase(t, newCatalog(a, bb))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := selectNames(t, b, single); err != nil {
		t.Fatal(err)
	}
	if a.closes != 1 || bb.closes != 0 {
		t.Errorf("after selection: loser closed %d times, winner %d", a.closes, bb.closes)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if a.closes != 1 || bb.closes != 1 {
		t.Errorf("after Close: loser closed %d times, winner %d", a.closes, bb.closes)
	}
}

func TestVerboseLevels(t *testing.T) {
	lines := func(out string, needle string) int { return strings.Count(out, needle) }
	cases := []struct {
		verbose                      string
		at10, at40, at100, decisions bool
	}{
		{"0", false, false, false, false},
		{"10", true, false, false, true},
		{"component", true, false, false, true},
		{"40", true, true, false, true},
		{"100", true, true, true, true},
	}
	for _, c := range cases {
		t.Run("multi_base_verbose="+c.verbose, func(t *testing.T) {
			mc := &fake{fw: "multi", name: "aaa"}
			sc := &fake{fw: "single", name: "sss"}
			b, out, err := newBase(t, newCatalog(mc, sc), "multi_base_verbose", c.verbose)
			if err != nil {
				t.Fatal(err)
			}
			selectNames(t, b, multi)
			selectNames(t, b, single)
			s := out.String()
			check := func(what string, want bool, n int) {
				if (n > 0) != want {
					t.Errorf("%s: %d lines, want them shown=%v; output:\n%s", what, n, want, s)
				}
			}
			check("multi.aaa at 10", c.at10, lines(s, "multi.aaa: query at 10"))
			check("multi.aaa at 40", c.at40, lines(s, "multi.aaa: query at 40"))
			check("multi.aaa at 100", c.at100, lines(s, "multi.aaa: query at 100"))
			check("selection decisions", c.decisions, lines(s, "multi: selected component"))
			// The other framework stays silent whatever multi's level.
			check("single framework", false, lines(s, "single"))
			if c.decisions && !strings.Contains(s, "rank=0") {
				t.Errorf("log lines do not carry the rank: %s", s)
			}
		})
	}
}

func TestRegistrationPanics(t *testing.T) {
	cases := []struct {
		name string
		do   func(c *Catalog)
		want string
	}{
		{"api major mismatch", func(c *Catalog) { c.Register(&fake{fw: "multi", name: "old", api: Version{2, 0, 0}}, Linked) },
			"built for multi API 2.0.0, but this gompi has multi API 1.0.0"},
		{"unknown framework", func(c *Catalog) { c.Register(&fake{fw: "nosuch", name: "x"}, Linked) }, `no framework "nosuch"`},
		{"bad name", func(c *Catalog) { c.Register(&fake{fw: "multi", name: "Bad"}, Linked) }, "component name"},
		{"base is reserved", func(c *Catalog) { c.Register(&fake{fw: "multi", name: "base"}, Linked) }, "component name"},
		{"duplicate", func(c *Catalog) {
			c.Register(&fake{fw: "multi", name: "x"}, Builtin)
			c.Register(&fake{fw: "multi", name: "x"}, Linked)
		}, "already registered (built-in)"},
		{"frozen", func(c *Catalog) { c.Freeze(); c.Register(&fake{fw: "multi", name: "x"}, Linked) }, "frozen"},
		{"framework named like a project", func(c *Catalog) {
			c.RegisterFramework(&Framework{Name: "mpi", Description: "x", Selection: SingleSelect})
		}, "the name is already taken"},
		{"framework without selection kind", func(c *Catalog) {
			c.RegisterFramework(&Framework{Name: "zz", Description: "x"})
		}, "Selection"},
		{"parameter outside the component's prefix", func(c *Catalog) { c.Register(&badParams{}, Linked) }, `must start with "multi_bad_"`},
		{"framework check", func(c *Catalog) {
			c.RegisterFramework(&Framework{Name: "checked", Description: "x", Selection: MultiSelect, API: Version{1, 0, 0},
				Check: func(Component) error { return errors.New("lacks Query") }})
			c.Register(&fake{fw: "checked", name: "x"}, Linked)
		}, "lacks Query"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			defer func() {
				r := recover()
				if r == nil || !strings.Contains(fmt.Sprint(r), c.want) {
					t.Errorf("panic %v, want one containing %q", r, c.want)
				}
			}()
			c.do(newCatalog())
		})
	}
}

type badParams struct{}

func (badParams) Info() Info {
	return Info{Framework: "multi", Name: "bad", API: Version{1, 0, 0}}
}
func (badParams) Register(r *Registrar) {
	r.Add(params.Def{Name: "btl_bad_x", Type: params.Int, Default: "0", Level: 1})
}

func TestComponentParameters(t *testing.T) {
	f := &fake{fw: "multi", name: "aaa"}
	cat := newCatalog(f)
	b, _, err := newBase(t, cat, "multi_aaa_knob", "7")
	if err != nil {
		t.Fatal(err)
	}
	if v := b.Get(f.knob); v.Int() != 7 || v.Source.Kind != params.FromCommandLine {
		t.Errorf("knob = %v from %s", v, v.Source)
	}
	if fw, comp := f.knob.Group(); fw != "multi" || comp != "aaa" {
		t.Errorf("knob group %s %s", fw, comp)
	}
	// A second Base in the same process sees its own value.
	b2, _, err := newBase(t, cat)
	if err != nil {
		t.Fatal(err)
	}
	if b2.Get(f.knob).Int() != 3 || b.Get(f.knob).Int() != 7 {
		t.Errorf("values leak between instances")
	}
}

func TestNewBaseJoinsErrors(t *testing.T) {
	cat := newCatalog(&fake{fw: "multi", name: "aaa"})
	_, _, err := newBase(t, cat, "multi", "nosuch", "multi_base_verbose", "loud", "mca_base_unknown_params", "error", "multi_aaa_knb", "1")
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{`no multi component "nosuch"`, `invalid value "loud"`, "did you mean multi_aaa_knob?"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}

func TestShowParamsOnlyOnReporter(t *testing.T) {
	cat := newCatalog()
	for _, reporter := range []bool{true, false} {
		var out bytes.Buffer
		_, err := NewBase(Options{Catalog: cat, Output: &out, Rank: 1, Reporter: reporter, Sources: params.Sources{
			Env:         []string{"OMPI_MCA_mca_base_param_files=none", "OMPI_MCA_multi_base_verbsoe=1"},
			CommandLine: []params.Setting{{Name: "mpi_show_mca_params", Value: "cmdline"}},
		}})
		if err != nil {
			t.Fatal(err)
		}
		shown := strings.Contains(out.String(), "mpi_show_mca_params=cmdline (command line)")
		warned := strings.Contains(out.String(), "did you mean multi_base_verbose?")
		if shown != reporter || warned != reporter {
			t.Errorf("reporter=%v: shown=%v warned=%v; output %q", reporter, shown, warned, out.String())
		}
	}
}

// TestPMLSilentUnderBTLVerbose is the issue's own case: with only
// btl_base_verbose set, the btl framework talks and pml stays silent.
func TestPMLSilentUnderBTLVerbose(t *testing.T) {
	c := NewCatalog()
	c.RegisterFramework(&Framework{Name: "btl", Description: "test btl", API: Version{1, 0, 0}, Selection: MultiSelect})
	c.RegisterFramework(&Framework{Name: "pml", Description: "test pml", API: Version{1, 0, 0}, Selection: SingleSelect})
	c.Register(&fake{fw: "btl", name: "aaa"}, Builtin)
	c.Register(&fake{fw: "pml", name: "bbb"}, Builtin)
	for _, level := range []string{"0", "10", "100"} {
		var out bytes.Buffer
		b, err := NewBase(Options{Catalog: c, Output: &out, Rank: 0, Reporter: true, Sources: params.Sources{
			Env: []string{"OMPI_MCA_mca_base_param_files=none", "OMPI_MCA_btl_base_verbose=" + level}}})
		if err != nil {
			t.Fatal(err)
		}
		for _, fw := range []*Framework{c.Framework("btl"), c.Framework("pml")} {
			if _, err := Select(b, fw, func(cm Component) (int, string, error) { return cm.(*fake).query(b) }); err != nil {
				t.Fatal(err)
			}
		}
		s := out.String()
		if strings.Contains(s, "pml") {
			t.Errorf("btl_base_verbose=%s: pml logged:\n%s", level, s)
		}
		if got, want := strings.Contains(s, "btl: selected component"), level != "0"; got != want {
			t.Errorf("btl_base_verbose=%s: btl decisions shown %v, want %v:\n%s", level, got, want, s)
		}
		if got, want := strings.Contains(s, "btl.aaa: query at 100"), level == "100"; got != want {
			t.Errorf("btl_base_verbose=%s: level-100 line shown %v, want %v", level, got, want)
		}
	}
}
