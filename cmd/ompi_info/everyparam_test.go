package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/gompi/gompi/internal/testutil"
)

// linkAllSource is a program that links every library package of the module
// (whatever a gompi program could link) and prints the name of every
// parameter registered in it and of its deprecated synonyms, which ompi_info
// lists too.
const linkAllSource = `package main

import (
	"fmt"

	"github.com/gompi/gompi/mca"
%s)

func main() {
	for _, p := range mca.Default().Params().Params() {
		fmt.Println(p.Name())
		for _, s := range p.Def().Synonyms {
			fmt.Println(s)
		}
	}
}
`

// TestEveryParameterListed holds that ompi_info lists every parameter that
// any package of the module registers: a parameter a program can read is one
// its user can discover. The program that links everything is generated from
// `go list`, so a package added later is covered without editing this test.
func TestEveryParameterListed(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	goCmd := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("go", args...)
		cmd.Dir = root
		out, err := cmd.Output()
		if err != nil {
			msg := ""
			if ee, ok := err.(*exec.ExitError); ok {
				msg = string(ee.Stderr)
			}
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, msg)
		}
		return string(out)
	}
	var imports strings.Builder
	pkgs := strings.Fields(goCmd("list", "-f", `{{if and (ne .Name "main") .GoFiles}}{{.ImportPath}}{{end}}`, "./..."))
	if len(pkgs) < 10 {
		t.Fatalf("go list found %d library packages: %v", len(pkgs), pkgs)
	}
	for _, p := range pkgs {
		imports.WriteString("\t_ \"" + p + "\"\n")
	}

	// The program must sit inside the module to import its internal
	// packages: an overlay places it there without writing to the tree.
	dir := t.TempDir()
	src := filepath.Join(dir, "main.go")
	if err := os.WriteFile(src, []byte(strings.Replace(linkAllSource, "%s", imports.String(), 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	virtual := filepath.Join(root, "cmd", "ompi_info", "linkall_overlay", "main.go")
	overlay := filepath.Join(dir, "overlay.json")
	if err := os.WriteFile(overlay, []byte(`{"Replace":{"`+virtual+`":"`+src+`"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	linkAll := filepath.Join(dir, "linkall")
	goCmd("build", "-overlay", overlay, "-o", linkAll, "./cmd/ompi_info/linkall_overlay")
	info, err := testutil.Program(".")
	if err != nil {
		t.Fatal(err)
	}

	env := append(os.Environ(), cleanEnv...)
	out, err := (&exec.Cmd{Path: linkAll, Env: env}).Output()
	if err != nil {
		t.Fatalf("the program that links everything: %v", err)
	}
	registered := strings.Fields(string(out))
	cmd := exec.Command(info, "--all", "--parsable")
	cmd.Env = env
	out, err = cmd.Output()
	if err != nil {
		t.Fatalf("ompi_info --all --parsable: %v", err)
	}
	listed := map[string]bool{}
	for _, line := range strings.Split(string(out), "\n") {
		// mca:<framework>:<component>:param:<name>:value:<value>
		if f := strings.SplitN(line, ":", 7); len(f) == 7 && f[3] == "param" && f[5] == "value" {
			listed[f[4]] = true
		}
	}
	var missing []string
	for _, name := range registered {
		if !listed[name] {
			missing = append(missing, name)
		}
		delete(listed, name)
	}
	if len(missing) > 0 {
		t.Errorf("registered by a package of the module but not listed by ompi_info --all --parsable: %s",
			strings.Join(missing, ", "))
	}
	if len(listed) > 0 {
		var extra []string
		for name := range listed {
			extra = append(extra, name)
		}
		sort.Strings(extra)
		t.Errorf("listed by ompi_info but registered by no package: %s", strings.Join(extra, ", "))
	}
	t.Logf("%d parameters and synonyms registered by %d packages", len(registered), len(pkgs))
}
