package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"

	"github.com/gompi/gompi/frameworks/btl"
	"github.com/gompi/gompi/frameworks/coll"
	"github.com/gompi/gompi/frameworks/group"
	"github.com/gompi/gompi/frameworks/llp"
	"github.com/gompi/gompi/frameworks/pml"
	"github.com/gompi/gompi/internal/testutil"
	"github.com/gompi/gompi/mca"
	"github.com/gompi/gompi/params"
	"github.com/gompi/gompi/rte"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// golden is a test-only btl component with one parameter of every kind.
type golden struct{}

func (golden) Info() mca.Info {
	return mca.Info{Framework: "btl", Name: "golden", Version: mca.Version{Major: 0, Minor: 3, Patch: 1}, API: btl.Framework.API}
}

func (golden) Register(r *mca.Registrar) {
	r.Add(params.Def{Name: "btl_golden_enabled", Type: params.Bool, Default: "true", Level: 1, Help: "Whether the golden path is used"})
	r.Add(params.Def{Name: "btl_golden_eager_limit", Type: params.Size, Default: "4k", Level: 4, Help: "Largest message sent eagerly, in bytes"})
	r.Add(params.Def{Name: "btl_golden_links", Type: params.Int, Default: "2", Level: 4, Range: &params.Range{Min: 1, Max: 8},
		Values: []params.EnumValue{{Value: 1, Name: "one"}, {Value: 8, Name: "all"}}, Help: "Connections per peer: 1 to 8"})
	r.Add(params.Def{Name: "btl_golden_mode", Type: params.Enum, Default: "fast", Level: 5,
		Values: []params.EnumValue{{Value: 0, Name: "fast"}, {Value: 1, Name: "safe"}}, Help: "Protocol mode"})
	r.Add(params.Def{Name: "btl_golden_checks", Type: params.List, Default: "crc", Level: 6,
		Values: []params.EnumValue{{Value: 0, Name: "crc"}, {Value: 1, Name: "len"}}, Help: "Checks on every fragment"})
	r.Add(params.Def{Name: "btl_golden_address", Type: params.String, Default: "host:1234", Level: 2,
		Synonyms: []string{"btl_golden_addr"}, Help: "Where to listen: host:port"})
	r.Add(params.Def{Name: "btl_golden_version_string", Type: params.String, Default: "v1", Level: 9, Scope: params.ScopeConstant})
}

func (golden) Query(b *mca.Base, rt *rte.Runtime) (btl.Module, error) {
	return nil, mca.Decline("test only")
}

// testCatalog is the real frameworks plus the golden component, in a
// catalogue of the test's own, so that adding components to gompi does not
// change the golden files.
func testCatalog() *mca.Catalog {
	c := mca.NewCatalog()
	for _, fw := range []*mca.Framework{btl.Framework, coll.Framework, group.Framework, llp.Framework, pml.Framework} {
		c.RegisterFramework(fw)
	}
	c.Register(golden{}, mca.Linked)
	return c
}

var cleanEnv = []string{"OMPI_MCA_mca_base_param_files=none"}

func runInfo(t *testing.T, cat *mca.Catalog, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var o, e bytes.Buffer
	code = run(args, env, &o, &e, cat)
	return o.String(), e.String(), code
}

func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from the golden file (go test -update rewrites it):\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

func TestGolden(t *testing.T) {
	env := append([]string{"OMPI_MCA_btl_golden_links=all", "OMPI_MCA_btl=^golden"}, cleanEnv...)
	for _, c := range []struct {
		file string
		args []string
	}{
		{"param_golden.txt", []string{"--param", "btl", "golden", "--level", "9"}},
		{"param_golden_level1.txt", []string{"--param", "btl", "golden"}},
		{"param_golden.parsable", []string{"--param", "btl", "golden", "--level", "9", "--parsable"}},
		{"param_golden.json", []string{"--param", "btl", "golden", "--level", "9", "--json"}},
		{"default.txt", nil},
		{"default.parsable", []string{"--parsable"}},
	} {
		t.Run(c.file, func(t *testing.T) {
			out, errOut, code := runInfo(t, testCatalog(), env, c.args...)
			if code != 0 || errOut != "" {
				t.Fatalf("exit %d, stderr %q", code, errOut)
			}
			checkGolden(t, c.file, strings.ReplaceAll(out, runtime.Version(), "GOVERSION"))
		})
	}
}

// jsonFacts turns ompi_info's JSON into parsable lines, independently of the
// code that prints the parsable form, so that the two forms can be compared
// fact for fact.
func jsonFacts(t *testing.T, doc []byte) []string {
	var d map[string]any
	if err := json.Unmarshal(doc, &d); err != nil {
		t.Fatal(err)
	}
	var out []string
	add := func(format string, a ...any) { out = append(out, fmt.Sprintf(format, a...)) }
	quote := func(v string) string {
		if strings.Contains(v, ":") {
			return `"` + v + `"`
		}
		return v
	}
	if p, ok := d["package"].(map[string]any); ok {
		add("package:%v", p["name"])
		add("gompi:version:full:%v", p["version"])
		add("mca-api:version:full:%v", p["mca_version"])
		add("go:version:full:%v", p["go_version"])
	}
	if cs, ok := d["coll_slots"].(map[string]any); ok {
		for _, form := range []string{"blocking", "nonblocking", "persistent"} {
			var names []string
			for _, n := range cs[form].([]any) {
				names = append(names, n.(string))
			}
			add("coll:slots:%s:%s", form, strings.Join(names, ","))
		}
	}
	for _, ci := range d["components"].([]any) {
		c := ci.(map[string]any)
		pre := fmt.Sprintf("mca:%v:%v", c["framework"], c["name"])
		add(`%s:version:"mca:%v"`, pre, c["mca_version"])
		add(`%s:version:"api:%v"`, pre, c["api_version"])
		add(`%s:version:"component:%v"`, pre, c["version"])
		add("%s:origin:%v", pre, c["origin"])
	}
	for _, pi := range d["params"].([]any) {
		p := pi.(map[string]any)
		pre := fmt.Sprintf("mca:%v:%v:param:%v", p["framework"], p["component"], p["name"])
		add("%s:value:%s", pre, quote(p["value"].(string)))
		add("%s:source:%v", pre, p["source"])
		add("%s:status:%v", pre, p["status"])
		add("%s:level:%v", pre, p["level"])
		if h, ok := p["help"]; ok {
			add("%s:help:%v", pre, h)
		}
		if es, ok := p["enumerators"].([]any); ok {
			for _, ei := range es {
				e := ei.(map[string]any)
				add("%s:enumerator:value:%v:%v", pre, e["value"], e["name"])
			}
		}
		if r, ok := p["range"].([]any); ok {
			add("%s:range:%v:%v", pre, r[0], r[1])
		}
		dep := "no"
		if p["deprecated"].(bool) {
			dep = "yes"
		}
		add("%s:deprecated:%s", pre, dep)
		add("%s:type:%v", pre, p["type"])
		if ss, ok := p["synonyms"].([]any); ok {
			for _, s := range ss {
				add("%s:synonym:name:%v", pre, s)
			}
		}
		if s, ok := p["synonym_of"]; ok {
			add("%s:synonym_of:name:%v", pre, s)
		}
		add("%s:disabled:%v", pre, p["disabled"])
	}
	return out
}

func TestJSONCarriesTheParsableFacts(t *testing.T) {
	env := append([]string{"OMPI_MCA_btl=^golden", "OMPI_MCA_btl_golden_addr=x:1"}, cleanEnv...)
	for _, args := range [][]string{
		{"--param", "btl", "golden", "--level", "9"},
		{"--param", "all", "all", "--level", "9"},
		{"--all"},
		{},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			parsable, _, code := runInfo(t, testCatalog(), env, append(args, "--parsable")...)
			js, _, code2 := runInfo(t, testCatalog(), env, append(args, "--json")...)
			if code != 0 || code2 != 0 {
				t.Fatalf("exit codes %d %d", code, code2)
			}
			got := jsonFacts(t, []byte(js))
			want := strings.Split(strings.TrimSuffix(parsable, "\n"), "\n")
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("JSON facts differ from parsable lines:\n--- from JSON\n%s\n--- parsable\n%s", strings.Join(got, "\n"), parsable)
			}
		})
	}
}

func TestCommandLineValue(t *testing.T) {
	out, errOut, code := runInfo(t, mca.Default(), cleanEnv, "--mca", "btl_base_verbose", "5", "--parsable", "--param", "btl", "all", "--level", "9")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"mca:btl:base:param:btl_base_verbose:value:5\n", "mca:btl:base:param:btl_base_verbose:source:command line\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestDefaultSourceAndFileSource(t *testing.T) {
	out, _, code := runInfo(t, mca.Default(), cleanEnv, "--parsable", "--param", "btl", "all", "--level", "9")
	if code != 0 || !strings.Contains(out, "mca:btl:base:param:btl_base_verbose:value:0\n") ||
		!strings.Contains(out, "mca:btl:base:param:btl_base_verbose:source:default\n") {
		t.Fatalf("exit %d, output:\n%s", code, out)
	}
	file := filepath.Join(t.TempDir(), "params.toml")
	if err := os.WriteFile(file, []byte("# gompi parameters\n\n[btl.base]\nverbose = 40\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := runInfo(t, mca.Default(), []string{"OMPI_MCA_mca_base_param_files=" + file}, "--parsable", "--param", "btl", "all", "--level", "9")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"btl_base_verbose:value:40\n", "btl_base_verbose:source:file (" + file + ":4)\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
}

func TestErrors(t *testing.T) {
	cases := []struct {
		name string
		env  []string
		args []string
		want []string
	}{
		{"unknown framework", nil, []string{"--param", "nosuch", "all"}, []string{`no framework "nosuch"`, "btl, coll, group, llp, pml", "mca, mpi"}},
		{"unknown component", nil, []string{"--param", "btl", "nosuch"}, []string{`no btl component "nosuch"`, "golden"}},
		{"component of a project", nil, []string{"--param", "mpi", "x"}, []string{`no mpi component "x"`}},
		{"level out of range", nil, []string{"--param", "btl", "all", "--level", "10"}, []string{`invalid level "10"`, "1-9"}},
		{"unknown option", nil, []string{"--nosuchoption"}, []string{`unknown option "--nosuchoption"`, "--help"}},
		{"missing arguments", nil, []string{"--param", "btl"}, []string{`"--param" needs 2`}},
		{"parsable and json", nil, []string{"--parsable", "--json"}, []string{"choose one"}},
		{"stray argument", nil, []string{"btl"}, []string{`unexpected argument "btl"`}},
		{"bad value", []string{"OMPI_MCA_btl_golden_links=9"}, []string{"--param", "btl", "golden"}, []string{"btl_golden_links", `"9"`, "from 1 to 8"}},
		{"unknown name under error policy", []string{"OMPI_MCA_btl_base_verbsoe=5", "OMPI_MCA_mca_base_unknown_params=error"}, nil,
			[]string{"did you mean btl_base_verbose?"}},
		{"mixed selection", []string{"OMPI_MCA_btl=golden,^tcp"}, nil, []string{"mixes included and excluded"}},
		{"duplicate --mca", nil, []string{"--mca", "btl", "golden", "--mca", "btl", "golden"}, []string{"more than once"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, errOut, code := runInfo(t, testCatalog(), append(c.env, cleanEnv...), c.args...)
			if code == 0 {
				t.Fatalf("exit 0, stderr %q", errOut)
			}
			for _, w := range c.want {
				if !strings.Contains(errOut, w) {
					t.Errorf("stderr %q lacks %q", errOut, w)
				}
			}
		})
	}
}

func TestUnknownNameWarning(t *testing.T) {
	out, errOut, code := runInfo(t, testCatalog(), append([]string{"OMPI_MCA_btl_base_verbsoe=5"}, cleanEnv...))
	if code != 0 || !strings.Contains(errOut, "did you mean btl_base_verbose?") || !strings.Contains(out, "golden") {
		t.Errorf("exit %d, stderr %q", code, errOut)
	}
}

func TestExcludedComponentIsMarked(t *testing.T) {
	out, _, _ := runInfo(t, testCatalog(), append([]string{"OMPI_MCA_btl=^golden"}, cleanEnv...), "--param", "btl", "golden")
	if !strings.Contains(out, "MCA (-) btl golden: parameter \"btl_golden_enabled\"") {
		t.Errorf("excluded component not marked:\n%s", out)
	}
}

// TestCommand runs the built command as a user would, with the process
// environment, to check the wiring of main.
func TestCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the command")
	}
	bin, err := testutil.Program(".")
	if err != nil {
		t.Fatal(err)
	}
	runBin := func(env []string, args ...string) (string, string, int) {
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), env...)
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return o.String(), e.String(), code
	}
	_, errOut, code := runBin([]string{"OMPI_MCA_btl_base_verbsoe=5"})
	if code != 0 || !strings.Contains(errOut, "btl_base_verbose") {
		t.Errorf("warn: exit %d, stderr %q", code, errOut)
	}
	_, errOut, code = runBin([]string{"OMPI_MCA_btl_base_verbsoe=5", "OMPI_MCA_mca_base_unknown_params=error"})
	if code == 0 {
		t.Errorf("error policy: exit 0, stderr %q", errOut)
	}
	out, _, code := runBin(nil, "--mca", "btl_base_verbose", "5", "--parsable", "--param", "btl", "all", "--level", "9")
	if code != 0 || !strings.Contains(out, "btl_base_verbose:value:5\n") || !strings.Contains(out, "btl_base_verbose:source:command line\n") {
		t.Errorf("--mca: exit %d\n%s", code, out)
	}
	_, errOut, code = runBin(nil, "--param", "nosuch", "all")
	if code == 0 || !strings.Contains(errOut, "btl, coll, group, llp, pml") {
		t.Errorf("nosuch: exit %d, stderr %q", code, errOut)
	}
}

func TestListingsAreSorted(t *testing.T) {
	out, _, _ := runInfo(t, mca.Default(), cleanEnv, "--parsable")
	var comps []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasSuffix(l, `:version:"mca:`+mca.MCAVersion.String()+`"`) {
			comps = append(comps, l)
		}
	}
	want := 0
	for _, fw := range mca.Default().FrameworkNames() {
		want += len(mca.Default().Components(fw))
	}
	if len(comps) != want {
		t.Fatalf("%d component lines, want one for each of the %d components:\n%s", len(comps), want, out)
	}
	if !sort.StringsAreSorted(comps) {
		t.Errorf("components are not sorted by framework and name:\n%s", strings.Join(comps, "\n"))
	}
}
