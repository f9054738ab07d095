package params

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gompi/gompi/mpierr"
)

// testRegistry registers one parameter of each type, as a component would.
func testRegistry(t *testing.T) (*Registry, map[string]*Param) {
	t.Helper()
	r := NewRegistry()
	ps := map[string]*Param{}
	add := func(d Def) {
		if d.Framework == "" {
			d.Framework, d.Component = "btl", "tcp"
		}
		if d.Level == 0 {
			d.Level = 4
		}
		ps[d.Name] = r.Register(d)
	}
	add(Def{Name: "btl_tcp_use_nagle", Type: Bool, Default: "false"})
	add(Def{Name: "btl_tcp_links", Type: Int, Default: "1"})
	add(Def{Name: "btl_tcp_port", Type: Uint, Default: "1024"})
	add(Def{Name: "btl_tcp_eager_limit", Type: Size, Default: "64k"})
	add(Def{Name: "btl_tcp_if_include", Type: String, Default: ""})
	add(Def{Name: "btl_tcp_mode", Type: Enum, Default: "fast", Values: []EnumValue{{0, "fast"}, {1, "safe"}, {7, "paranoid"}}})
	add(Def{Name: "btl_tcp_tags", Type: List, Default: "a,b"})
	add(Def{Name: "btl_tcp_checks", Type: List, Default: "", Values: []EnumValue{{0, "crc"}, {1, "len"}}})
	add(Def{Name: "btl_base_verbose", Framework: "btl", Component: "", Type: Int, Default: "0", Level: 8,
		Range: &Range{0, 100}, Values: []EnumValue{{0, "error"}, {10, "component"}, {100, "max"}}})
	add(Def{Name: "mpi_use_sparse_groups", Framework: "group", Component: "", Type: Bool, Default: "false",
		Synonyms: []string{"mpi_use_sparse_group_storage"}})
	add(Def{Name: "btl_tcp_version", Type: String, Default: "1.0", Scope: ScopeConstant})
	r.Freeze()
	return r, ps
}

func writeFile(t *testing.T, name, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// noFiles keeps the user's and the machine's parameter files out of a test.
var noFiles = "OMPI_MCA_mca_base_param_files=none"

func resolve(t *testing.T, r *Registry, src Sources) *Values {
	t.Helper()
	vs, err := Resolve(r, src)
	if err != nil {
		t.Fatalf("Resolve: %v", err)
	}
	return vs
}

func TestPrecedence(t *testing.T) {
	r, ps := testRegistry(t)
	p := ps["btl_tcp_links"]
	fileA := writeFile(t, "a.conf", "btl_tcp_links = 20\n")
	fileB := writeFile(t, "b.toml", "# system file\nbtl_tcp_links = 30\n")
	type sources struct {
		file, env, cmd string // "" = not set
		files          string // the file list when file is set
	}
	cases := []struct {
		name   string
		in     sources
		want   int64
		source string
	}{
		{"default alone", sources{}, 1, "default"},
		{"file beats default", sources{file: "x", files: fileA}, 20, "file (" + fileA + ":1)"},
		{"environment beats default", sources{env: "40"}, 40, "environment"},
		{"command line beats default", sources{cmd: "50"}, 50, "command line"},
		{"environment beats file", sources{file: "x", files: fileA, env: "40"}, 40, "environment"},
		{"command line beats file", sources{file: "x", files: fileA, cmd: "50"}, 50, "command line"},
		{"command line beats environment", sources{env: "40", cmd: "50"}, 50, "command line"},
		{"command line beats all", sources{file: "x", files: fileA, env: "40", cmd: "50"}, 50, "command line"},
		{"leftmost file wins", sources{file: "x", files: fileA + "," + fileB}, 20, "file (" + fileA + ":1)"},
		{"leftmost file wins, reversed", sources{file: "x", files: fileB + "," + fileA}, 30, "file (" + fileB + ":2)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			src := Sources{Env: []string{noFiles}}
			if c.in.file != "" {
				src.Env = []string{"OMPI_MCA_mca_base_param_files=" + c.in.files}
			}
			if c.in.env != "" {
				src.Env = append(src.Env, "OMPI_MCA_btl_tcp_links="+c.in.env)
			}
			if c.in.cmd != "" {
				src.CommandLine = []Setting{{"btl_tcp_links", c.in.cmd}}
			}
			v := resolve(t, r, src).Get(p)
			if v.Int() != c.want || v.Source.String() != c.source {
				t.Errorf("got %d from %s, want %d from %s", v.Int(), v.Source, c.want, c.source)
			}
		})
	}
}

func TestEnvironmentMarkedAsCommandLine(t *testing.T) {
	r, ps := testRegistry(t)
	vs := resolve(t, r, Sources{Env: []string{noFiles,
		"OMPI_MCA_btl_tcp_links=7", "OMPI_MCA_SOURCE_btl_tcp_links=command line",
		"OMPI_MCA_btl_tcp_port=9", "OMPI_MCA_SOURCE_btl_tcp_port=somewhere"}})
	if got := vs.Get(ps["btl_tcp_links"]).Source.String(); got != "command line" {
		t.Errorf("marked value has source %q, want command line", got)
	}
	if got := vs.Get(ps["btl_tcp_port"]).Source.String(); got != "environment" {
		t.Errorf("badly marked value has source %q, want environment", got)
	}
	if w := strings.Join(vs.Warnings(), "\n"); !strings.Contains(w, "OMPI_MCA_SOURCE_btl_tcp_port") {
		t.Errorf("no warning about the unknown source marker; warnings: %q", w)
	}
	// The marker variables are not parameters: they must not be reported.
	if u := vs.Unknown(); len(u) != 0 {
		t.Errorf("unexpected unknown names: %v", u)
	}
	// A real command-line setting beats one forwarded through the environment.
	vs = resolve(t, r, Sources{
		Env:         []string{noFiles, "OMPI_MCA_btl_tcp_links=7", "OMPI_MCA_SOURCE_btl_tcp_links=command line"},
		CommandLine: []Setting{{"btl_tcp_links", "8"}},
	})
	if got := vs.Get(ps["btl_tcp_links"]).Int(); got != 8 {
		t.Errorf("got %d, want the real command line's 8", got)
	}
}

func TestTypesAcceptedSpellings(t *testing.T) {
	r, ps := testRegistry(t)
	cases := []struct {
		param, in, want string
	}{
		{"btl_tcp_use_nagle", "1", "true"}, {"btl_tcp_use_nagle", "0", "false"},
		{"btl_tcp_use_nagle", "true", "true"}, {"btl_tcp_use_nagle", "FALSE", "false"},
		{"btl_tcp_use_nagle", "Yes", "true"}, {"btl_tcp_use_nagle", "no", "false"},
		{"btl_tcp_use_nagle", "on", "true"}, {"btl_tcp_use_nagle", "OFF", "false"},
		{"btl_tcp_use_nagle", "enabled", "true"}, {"btl_tcp_use_nagle", "Disabled", "false"},
		{"btl_tcp_use_nagle", " true ", "true"},
		{"btl_tcp_links", "42", "42"}, {"btl_tcp_links", "-42", "-42"}, {"btl_tcp_links", "+3", "3"},
		{"btl_tcp_links", "0x10", "16"}, {"btl_tcp_links", "0XfF", "255"}, {"btl_tcp_links", "010", "10"},
		{"btl_tcp_links", "9223372036854775807", "9223372036854775807"},
		{"btl_tcp_links", "-9223372036854775808", "-9223372036854775808"},
		{"btl_tcp_port", "0", "0"}, {"btl_tcp_port", "18446744073709551615", "18446744073709551615"},
		{"btl_tcp_port", "0x1f", "31"},
		{"btl_tcp_eager_limit", "4096", "4096"}, {"btl_tcp_eager_limit", "64k", "65536"},
		{"btl_tcp_eager_limit", "64K", "65536"}, {"btl_tcp_eager_limit", "2m", "2097152"},
		{"btl_tcp_eager_limit", "1G", "1073741824"}, {"btl_tcp_eager_limit", "0x100", "256"},
		{"btl_tcp_if_include", "  lo, eth0 ", "  lo, eth0 "},
		{"btl_tcp_mode", "safe", "safe"}, {"btl_tcp_mode", "PARANOID", "paranoid"}, {"btl_tcp_mode", "7", "paranoid"},
		{"btl_tcp_tags", "x", "x"}, {"btl_tcp_tags", " x , y ", "x,y"}, {"btl_tcp_tags", "", ""},
		{"btl_tcp_checks", "CRC,len", "crc,len"},
		{"btl_base_verbose", "100", "100"}, {"btl_base_verbose", "component", "10"}, {"btl_base_verbose", "0x0a", "10"},
	}
	for _, c := range cases {
		t.Run(c.param+"="+c.in, func(t *testing.T) {
			vs := resolve(t, r, Sources{Env: []string{noFiles}, CommandLine: []Setting{{c.param, c.in}}})
			if got := vs.Get(ps[c.param]).String(); got != c.want {
				t.Errorf("%s=%q resolved to %q, want %q", c.param, c.in, got, c.want)
			}
		})
	}
}

func TestTypesRejectedSpellings(t *testing.T) {
	r, ps := testRegistry(t)
	cases := []struct {
		param, in, accepted string
	}{
		{"btl_tcp_use_nagle", "maybe", "true/false"}, {"btl_tcp_use_nagle", "2", "true/false"},
		{"btl_tcp_use_nagle", "", "true/false"}, {"btl_tcp_use_nagle", "t", "true/false"},
		{"btl_tcp_links", "notanumber", "whole number"}, {"btl_tcp_links", "", "whole number"},
		{"btl_tcp_links", "12abc", "whole number"}, {"btl_tcp_links", "0x", "whole number"},
		{"btl_tcp_links", "1.5", "whole number"}, {"btl_tcp_links", "9223372036854775808", "between"},
		{"btl_tcp_links", "64k", "whole number"}, {"btl_tcp_links", "true", "whole number"},
		{"btl_tcp_port", "-5", "non-negative"}, {"btl_tcp_port", "18446744073709551616", "up to"},
		{"btl_tcp_eager_limit", "-5", "non-negative"}, {"btl_tcp_eager_limit", "64q", "k, m or g"},
		{"btl_tcp_eager_limit", "k", "k, m or g"}, {"btl_tcp_eager_limit", "17179869184g", "up to"},
		{"btl_tcp_eager_limit", "0x10k", "k, m or g"},
		{"btl_tcp_mode", "sloppy", "fast, safe, paranoid"}, {"btl_tcp_mode", "3", "fast, safe, paranoid"},
		{"btl_tcp_tags", "a,,b", "without empty items"}, {"btl_tcp_tags", "a,", "without empty items"},
		{"btl_tcp_checks", "crc,md5", "crc, len"},
		{"btl_base_verbose", "101", "from 0 to 100"}, {"btl_base_verbose", "-1", "from 0 to 100"},
		{"btl_base_verbose", "loud", "error, component, max"},
		{"btl_tcp_version", "2.0", "informational"},
	}
	for _, c := range cases {
		t.Run(c.param+"="+c.in, func(t *testing.T) {
			vs, err := Resolve(r, Sources{Env: []string{noFiles, "OMPI_MCA_" + c.param + "=" + c.in}})
			if err == nil {
				t.Fatalf("%s=%q accepted as %v", c.param, c.in, vs.Get(ps[c.param]))
			}
			msg := err.Error()
			for _, want := range []string{c.param, c.accepted, "environment"} {
				if !strings.Contains(msg, want) {
					t.Errorf("error %q does not mention %q", msg, want)
				}
			}
			if c.in != "" && !strings.Contains(msg, c.in) {
				t.Errorf("error %q does not show the value %q", msg, c.in)
			}
			if !errors.Is(err, mpierr.ErrUnsupportedParam) {
				t.Errorf("error %q does not carry ErrUnsupportedParam", msg)
			}
			// The bad value is not used: the parameter keeps its default.
			if v := vs.Get(ps[c.param]); v.Source.Kind != FromDefault {
				t.Errorf("after a bad value the parameter has source %s, want default", v.Source)
			}
		})
	}
}

func TestCommandLineDuplicateIsError(t *testing.T) {
	r, _ := testRegistry(t)
	_, err := Resolve(r, Sources{Env: []string{noFiles}, CommandLine: []Setting{{"btl_tcp_links", "1"}, {"btl_tcp_links", "2"}}})
	if err == nil || !strings.Contains(err.Error(), "more than once") {
		t.Fatalf("got %v, want a duplicate error", err)
	}
}

func TestFiles(t *testing.T) {
	r, ps := testRegistry(t)
	cases := []struct {
		name, file, text string
		want             map[string]string // parameter → value@line
	}{
		{"toml flat", "p.toml", "# comment\nbtl_tcp_links = 5\n\nbtl_tcp_if_include = \"lo\"\n",
			map[string]string{"btl_tcp_links": "5@2", "btl_tcp_if_include": "lo@4"}},
		{"toml nested table", "p.toml", "[btl.tcp]\nlinks = 6\nif_include = \"eth0\"\n",
			map[string]string{"btl_tcp_links": "6@2", "btl_tcp_if_include": "eth0@3"}},
		{"toml dotted keys", "p.toml", "btl.tcp.links = 7\n", map[string]string{"btl_tcp_links": "7@1"}},
		{"toml partial table", "p.toml", "[btl]\ntcp_links = 8\nbase_verbose = 10\n",
			map[string]string{"btl_tcp_links": "8@2", "btl_base_verbose": "10@3"}},
		{"toml typed values", "p.toml", "btl_tcp_use_nagle = true\nbtl_tcp_eager_limit = 4096\nbtl_tcp_tags = [\"x\",\n  \"y\"]\nbtl_tcp_mode = 1\n",
			map[string]string{"btl_tcp_use_nagle": "true@1", "btl_tcp_eager_limit": "4096@2", "btl_tcp_tags": "x,y@3", "btl_tcp_mode": "safe@5"}},
		{"toml strings in the classic syntax", "p.toml", "btl_tcp_eager_limit = \"64k\"\nbtl_tcp_use_nagle = \"yes\"\n",
			map[string]string{"btl_tcp_eager_limit": "65536@1", "btl_tcp_use_nagle": "true@2"}},
		{"toml multi-line string before a key", "p.toml", "btl_tcp_if_include = \"\"\"\nlo\nx = 1\n\"\"\"\nbtl_tcp_links = 9\n",
			map[string]string{"btl_tcp_if_include": "lo\nx = 1\n@1", "btl_tcp_links": "9@5"}},
		{"toml inline table", "p.toml", "\nbtl = { tcp = { links = 3 } }\n", map[string]string{"btl_tcp_links": "3@2"}},
		{"toml quoted key", "p.toml", "\"btl_tcp_links\" = 4\n", map[string]string{"btl_tcp_links": "4@1"}},
		{"conf", "p.conf", "# Open MPI style\n\nbtl_tcp_links = 5\nbtl_tcp_if_include=lo\n",
			map[string]string{"btl_tcp_links": "5@3", "btl_tcp_if_include": "lo@4"}},
		{"conf quotes and comments", "p.conf", "btl_tcp_if_include = \"eth0\"   # trailing comment\nbtl_tcp_tags = a,b # c\n",
			map[string]string{"btl_tcp_if_include": "eth0@1", "btl_tcp_tags": "a,b@2"}},
		{"conf hash inside value", "p.conf", "btl_tcp_if_include = a#b\n", map[string]string{"btl_tcp_if_include": "a#b@1"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := writeFile(t, c.file, c.text)
			vs := resolve(t, r, Sources{Env: []string{"OMPI_MCA_mca_base_param_files=" + path}})
			for name, want := range c.want {
				v := vs.Get(ps[name])
				wantVal, wantLine, _ := strings.Cut(want, "@")
				wantSrc := "file (" + path + ":" + wantLine + ")"
				if v.String() != wantVal || v.Source.String() != wantSrc {
					t.Errorf("%s = %q from %s, want %q from %s", name, v.String(), v.Source, wantVal, wantSrc)
				}
			}
			if u := vs.Unknown(); len(u) != 0 {
				t.Errorf("unexpected unknown names %v", u)
			}
		})
	}
}

func TestFileErrors(t *testing.T) {
	r, _ := testRegistry(t)
	cases := []struct {
		name, file, text string
		want             []string
	}{
		{"toml value and table collide", "p.toml", "btl = \"self\"\n[btl.tcp]\nlinks = 3\n", []string{":2:", "full names"}},
		{"toml dotted key then value collide", "p.toml", "btl.tcp.links = 1\nbtl = \"self\"\n", []string{"full names", "btl"}},
		{"toml flat and nested spell one name", "p.toml", "btl_tcp_links = 1\n[btl.tcp]\nlinks = 2\n",
			[]string{"btl_tcp_links is set twice", "line 1", "line 3", "full name"}},
		{"toml syntax", "p.toml", "btl_tcp_links = \n", []string{"p.toml:1:"}},
		{"toml float", "p.toml", "btl_tcp_links = 1.5\n", []string{"1.5 (a TOML float)", "btl_tcp_links", "p.toml:1"}},
		{"toml bool for int", "p.toml", "\n\nbtl_tcp_links = true\n", []string{"true (a TOML boolean)", "p.toml:3"}},
		{"toml negative size", "p.toml", "btl_tcp_eager_limit = -1\n", []string{"-1 (a TOML integer)", "non-negative"}},
		{"toml array of tables", "p.toml", "[[btl]]\nx = 1\n", []string{"array of tables"}},
		{"conf without equals", "p.conf", "# c\nbtl_tcp_links 5\n", []string{"p.conf:2:", "name = value"}},
		{"conf duplicate", "p.conf", "btl_tcp_links = 1\nbtl_tcp_links = 2\n", []string{"p.conf:2:", "line 1"}},
		{"conf bad name", "p.conf", "BTL = self\n", []string{"p.conf:1:", "not a parameter name"}},
		{"conf unterminated quote", "p.conf", "btl_tcp_if_include = \"lo\n", []string{"p.conf:1:", "unterminated"}},
		{"conf bad value", "p.conf", "\nbtl_tcp_links = lots\n", []string{"\"lots\"", "btl_tcp_links", "p.conf:2)", "whole number"}},
		{"unknown extension", "p.ini", "btl_tcp_links = 1\n", []string{".toml", ".conf"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := writeFile(t, c.file, c.text)
			_, err := Resolve(r, Sources{Env: []string{"OMPI_MCA_mca_base_param_files=" + path}})
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestParamFilesList(t *testing.T) {
	r, ps := testRegistry(t)
	home := t.TempDir()
	sys := t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, ".gompi"), 0o700); err != nil {
		t.Fatal(err)
	}
	user := filepath.Join(home, ".gompi", "mca-params.toml")
	if err := os.WriteFile(user, []byte("btl_tcp_links = 11\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(sys, "mca-params.toml"), []byte("btl_tcp_links = 12\nbtl_tcp_port = 13\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	// The defaults: the user file beats the system file.
	vs := resolve(t, r, Sources{Env: []string{"HOME=" + home, "GOMPI_SYSCONFDIR=" + sys}})
	if got := vs.Get(ps["btl_tcp_links"]); got.Int() != 11 || got.Source.File != user {
		t.Errorf("btl_tcp_links = %v from %s, want 11 from the user file", got, got.Source)
	}
	if got := vs.Get(ps["btl_tcp_port"]).Uint(); got != 13 {
		t.Errorf("btl_tcp_port = %d, want 13 from the system file", got)
	}
	if got := vs.Get(r.ParamFiles()).String(); got != "~/.gompi/mca-params.toml,"+sys+"/mca-params.toml" {
		t.Errorf("mca_base_param_files = %q", got)
	}
	// Missing default files are not an error.
	resolve(t, r, Sources{Env: []string{"HOME=" + t.TempDir(), "GOMPI_SYSCONFDIR=" + t.TempDir()}})
	// "none" reads nothing.
	vs = resolve(t, r, Sources{Env: []string{"HOME=" + home, "OMPI_MCA_mca_base_param_files=none"}})
	if got := vs.Get(ps["btl_tcp_links"]); got.Source.Kind != FromDefault {
		t.Errorf("with none, btl_tcp_links came from %s", got.Source)
	}
	// A file the user names must exist.
	_, err := Resolve(r, Sources{Env: []string{"OMPI_MCA_mca_base_param_files=/nonexistent/x.toml"}})
	if err == nil || !strings.Contains(err.Error(), "/nonexistent/x.toml") {
		t.Errorf("missing named file: got %v", err)
	}
	// ~/ is expanded with the snapshot's HOME, also on the command line.
	vs = resolve(t, r, Sources{Env: []string{"HOME=" + home}, CommandLine: []Setting{{ParamFilesName, "~/.gompi/mca-params.toml"}}})
	if got := vs.Get(ps["btl_tcp_links"]).Int(); got != 11 {
		t.Errorf("~ expansion: btl_tcp_links = %d", got)
	}
	// Set in a file, mca_base_param_files is ignored with a warning.
	f := writeFile(t, "f.conf", "mca_base_param_files = /x.toml\n")
	vs = resolve(t, r, Sources{Env: []string{"OMPI_MCA_mca_base_param_files=" + f}})
	if w := strings.Join(vs.Warnings(), "\n"); !strings.Contains(w, "only in the environment or on the command line") {
		t.Errorf("warnings %q", w)
	}
}

func TestSynonymsWarnOnce(t *testing.T) {
	r, ps := testRegistry(t)
	p := ps["mpi_use_sparse_groups"]
	file := writeFile(t, "f.toml", "mpi_use_sparse_group_storage = true\n")
	vs := resolve(t, r, Sources{Env: []string{
		"OMPI_MCA_mca_base_param_files=" + file, "OMPI_MCA_mpi_use_sparse_group_storage=1"}})
	if v := vs.Get(p); !v.Bool() || v.Source.Kind != FromEnvironment {
		t.Errorf("synonym did not set the parameter: %v from %s", v, v.Source)
	}
	var deprecations []string
	for _, w := range vs.Warnings() {
		if strings.Contains(w, "deprecated") {
			deprecations = append(deprecations, w)
		}
	}
	if len(deprecations) != 1 || !strings.Contains(deprecations[0], "mpi_use_sparse_group_storage") ||
		!strings.Contains(deprecations[0], "use mpi_use_sparse_groups") || !strings.Contains(deprecations[0], "environment") {
		t.Errorf("want one deprecation warning naming both names and the source, got %q", deprecations)
	}
	// The real name beats its synonym at the same precedence, and the warning
	// says the synonym's value is not used.
	vs = resolve(t, r, Sources{Env: []string{noFiles, "OMPI_MCA_mpi_use_sparse_group_storage=1", "OMPI_MCA_mpi_use_sparse_groups=0"}})
	if vs.Get(p).Bool() {
		t.Error("synonym beat the real name")
	}
	if w := strings.Join(vs.Warnings(), "\n"); !strings.Contains(w, "not used") {
		t.Errorf("warning does not say the synonym is unused: %q", w)
	}
	// Lookup by synonym finds the parameter.
	if q, _, ok := vs.Lookup("mpi_use_sparse_group_storage"); !ok || q != p {
		t.Error("Lookup by synonym failed")
	}
}

func TestUnknownNames(t *testing.T) {
	r, _ := testRegistry(t)
	file := writeFile(t, "f.conf", "\nbtl_tcp_if_inclde = lo\n")
	vs := resolve(t, r, Sources{
		Env:         []string{"OMPI_MCA_mca_base_param_files=" + file, "OMPI_MCA_btl_base_verbsoe=5"},
		CommandLine: []Setting{{"btl_tcp_lnks", "3"}, {"zzzz_nothing_like_it", "1"}},
	})
	got := vs.Unknown()
	want := []struct{ name, source, suggest string }{
		{"btl_tcp_lnks", "command line", "btl_tcp_links"},
		{"zzzz_nothing_like_it", "command line", ""},
		{"btl_base_verbsoe", "environment", "btl_base_verbose"},
		{"btl_tcp_if_inclde", "file (" + file + ":2)", "btl_tcp_if_include"},
	}
	if len(got) != len(want) {
		t.Fatalf("unknown = %v, want %d names", got, len(want))
	}
	for i, w := range want {
		g := got[i]
		if g.Name != w.name || g.Source.String() != w.source || strings.Join(g.Suggestions, ",") != w.suggest {
			t.Errorf("unknown[%d] = %+v, want %+v", i, g, w)
		}
	}
	if msg := got[2].Message(); !strings.Contains(msg, "did you mean btl_base_verbose?") {
		t.Errorf("message %q", msg)
	}
	if msg := got[1].Message(); !strings.Contains(msg, "no registered parameter") {
		t.Errorf("message %q", msg)
	}

	for _, c := range []struct {
		policy   string
		warnings int
		err      bool
	}{{"warn", 4, false}, {"error", 0, true}, {"ignore", 0, false}} {
		vs := resolve(t, r, Sources{Env: []string{noFiles, "OMPI_MCA_btl_base_verbsoe=5", "OMPI_MCA_mca_base_unknown_params=" + c.policy}})
		w, err := vs.CheckUnknown()
		if c.err != (err != nil) || (c.policy == "warn" && len(w) != 1) || (c.policy != "warn" && len(w) != 0) {
			t.Errorf("policy %s: warnings %q, err %v", c.policy, w, err)
		}
		if err != nil && (!strings.Contains(err.Error(), "btl_base_verbose") || !errors.Is(err, mpierr.ErrUnsupportedParam)) {
			t.Errorf("policy error %q", err)
		}
	}
}

func TestShowLines(t *testing.T) {
	r, _ := testRegistry(t)
	file := writeFile(t, "f.conf", "btl_tcp_port = 99\n")
	src := func(show string) Sources {
		return Sources{
			Env:         []string{"OMPI_MCA_mca_base_param_files=" + file, "OMPI_MCA_btl_tcp_links=4", "OMPI_MCA_mpi_show_mca_params=" + show},
			CommandLine: []Setting{{"btl_tcp_if_include", "lo"}},
		}
	}
	lines := resolve(t, r, src("nondefault")).ShowLines()
	want := []string{
		"mca_base_param_files=" + file + " (environment)",
		"mpi_show_mca_params=nondefault (environment)",
		"btl_tcp_links=4 (environment)",
		"btl_tcp_port=99 (file (" + file + ":1))",
		"btl_tcp_if_include=lo (command line)",
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("nondefault lines:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	if lines := resolve(t, r, src("cmdline")).ShowLines(); len(lines) != 1 || lines[0] != "btl_tcp_if_include=lo (command line)" {
		t.Errorf("cmdline lines %q", lines)
	}
	if lines := resolve(t, r, src("all")).ShowLines(); len(lines) != len(r.Params()) {
		t.Errorf("all: %d lines for %d parameters", len(lines), len(r.Params()))
	}
	if lines := resolve(t, r, Sources{Env: []string{noFiles}}).ShowLines(); len(lines) != 0 {
		t.Errorf("unset: %q", lines)
	}
}

func TestRegisterPanics(t *testing.T) {
	cases := []struct {
		name string
		def  Def
		want string
	}{
		{"no name", Def{Framework: "btl", Type: Int, Level: 1, Default: "0"}, "name"},
		{"upper case", Def{Name: "Btl_x", Framework: "btl", Type: Int, Level: 1, Default: "0"}, "lower case"},
		{"level 0", Def{Name: "btl_x", Framework: "btl", Type: Int, Level: 0, Default: "0"}, "level"},
		{"level 10", Def{Name: "btl_x", Framework: "btl", Type: Int, Level: 10, Default: "0"}, "level"},
		{"no type", Def{Name: "btl_x", Framework: "btl", Level: 1}, "type"},
		{"bad default", Def{Name: "btl_x", Framework: "btl", Type: Int, Level: 1, Default: "x"}, "default"},
		{"enum without values", Def{Name: "btl_x", Framework: "btl", Type: Enum, Level: 1}, "Values"},
		{"duplicate", Def{Name: "mca_base_unknown_params", Framework: "mca", Type: Int, Level: 1, Default: "0"}, "already"},
		{"synonym taken", Def{Name: "btl_y", Framework: "btl", Type: Int, Level: 1, Default: "0", Synonyms: []string{"mpi_show_mca_params"}}, "synonym"},
		{"range on a string", Def{Name: "btl_x", Framework: "btl", Type: String, Level: 1, Range: &Range{0, 1}}, "Range"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			defer func() {
				r := recover()
				if r == nil || !strings.Contains(r.(string), c.want) {
					t.Errorf("panic %v, want one mentioning %q", r, c.want)
				}
			}()
			NewRegistry().Register(c.def)
		})
	}
	t.Run("frozen", func(t *testing.T) {
		r := NewRegistry()
		r.Freeze()
		defer func() {
			if p := recover(); p == nil || !strings.Contains(p.(string), "frozen") {
				t.Errorf("panic %v", p)
			}
		}()
		r.Register(Def{Name: "btl_x", Framework: "btl", Type: Int, Level: 1, Default: "0"})
	})
}

func TestSuggest(t *testing.T) {
	known := []string{"btl_tcp_if_include", "btl_tcp_if_exclude", "btl_base_verbose", "pml_base_verbose", "btl"}
	cases := map[string]string{
		"btl_tcp_if_inclde":  "btl_tcp_if_include",
		"btl_base_verbsoe":   "btl_base_verbose",
		"btl_tcp_if_exclued": "btl_tcp_if_exclude",
		"bt":                 "btl",
		"completely_else":    "",
	}
	for in, want := range cases {
		if got := strings.Join(Suggest(in, known, 3), ","); got != want {
			t.Errorf("Suggest(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestGroupSuggestion: a name that no registered name is near, but whose
// prefix names a component or a framework, gets that group's parameters
// closest to it.
func TestGroupSuggestion(t *testing.T) {
	r := NewRegistry()
	for _, d := range []Def{
		{Name: "btl_shm_ring_size", Component: "shm"},
		{Name: "btl_shm_max_send_size", Component: "shm"},
		{Name: "btl_shm_eager_limit", Component: "shm"},
		{Name: "btl_shm_latency", Component: "shm"},
		{Name: "btl_shm_single_copy_mechanism", Component: "shm"},
		{Name: "btl_tcp_sndbuf", Component: "tcp"},
		{Name: "btl_base_verbose"},
		{Name: "btl_base_warn_component_unused"},
	} {
		d.Framework, d.Type, d.Level, d.Default = "btl", Int, 4, "0"
		r.Register(d)
	}
	r.Freeze()
	vs := resolve(t, r, Sources{Env: []string{noFiles}, CommandLine: []Setting{
		{"btl_shm_sizee", "1"},            // the component's, by the word "size"
		{"btl_shm_copy_mech", "cma"},      // two words of one parameter
		{"btl_base_verbosity_level", "1"}, // the framework's own
		{"btl_nosuch_thing", "1"},         // the framework only
		{"btl_shm_ring_sise", "1"},        // near a name: that alone
		{"zzz_nothing", "1"},              // no group
	}})
	want := map[string]string{
		"btl_shm_sizee":            "btl shm: btl_shm_ring_size,btl_shm_max_send_size",
		"btl_shm_copy_mech":        "btl shm: btl_shm_single_copy_mechanism",
		"btl_base_verbosity_level": "btl base: btl_base_verbose,btl_base_warn_component_unused",
		"btl_nosuch_thing":         "btl all: ",
		"btl_shm_ring_sise":        "",
		"zzz_nothing":              "",
	}
	if got := vs.Unknown(); len(got) != len(want) {
		t.Fatalf("%d unknown names %v, want %d", len(got), got, len(want))
	}
	for _, u := range vs.Unknown() {
		got := ""
		if u.Group != nil {
			got = u.Group.Framework + " " + u.Group.Component + ": " + strings.Join(u.Group.Params, ",")
		}
		w := want[u.Name]
		if strings.HasSuffix(w, ": ") {
			// Only the group is checked: every btl parameter is as far.
			if !strings.HasPrefix(got, w) || len(u.Group.Params) != 3 {
				t.Errorf("%s: group %q, want %q and three parameters", u.Name, got, w)
			}
			continue
		}
		if got != w {
			t.Errorf("%s: group %q, want %q", u.Name, got, w)
		}
		if u.Name == "btl_shm_ring_sise" && strings.Join(u.Suggestions, ",") != "btl_shm_ring_size" {
			t.Errorf("%s: suggestions %q", u.Name, u.Suggestions)
		}
		if u.Name == "btl_shm_sizee" {
			msg := u.Message()
			for _, part := range []string{"did you mean one of btl shm's parameters: btl_shm_ring_size, btl_shm_max_send_size?",
				"ompi_info --param btl shm --level 9"} {
				if !strings.Contains(msg, part) {
					t.Errorf("message %q lacks %q", msg, part)
				}
			}
		}
	}
}
