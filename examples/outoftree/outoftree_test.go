// Package outoftree holds the out-of-tree component examples, each a Go
// module of its own (a replace points it at this repository); its test
// builds them as a user would and runs them under mpirun.
package outoftree

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gompi/gompi/internal/testutil"
)

var bin struct{ mpirun string }

func TestMain(m *testing.M) {
	testutil.Main(m, "outoftree-test-", map[*string]string{&bin.mpirun: "../../cmd/mpirun"})
}

var slotTable = regexp.MustCompile(`slot table: rank=(\d+) comm=MPI_COMM_WORLD size=4 table="([^"]*)"`)

// The linked example, built in its own module with `go build`, runs under
// mpirun on 4 ranks: the verbose slot table has the barrier from its
// component and every other slot from gompi's (tuned, and basic for the
// gatherv and scatterv tuned leaves empty); its Allreduce is right.
func TestLinkedComponent(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "linked")
	build := exec.Command("go", "build", "-o", exe, ".")
	build.Dir = "linked"
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build in examples/outoftree/linked: %v\n%s", err, out)
	}
	cmd := exec.Command(bin.mpirun, "--timeout", "60", "-np", "4", "--mca", "coll_base_verbose", "10", exe)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatalf("mpirun: %v\nstdout:\n%s\nstderr:\n%s", err, &stdout, &stderr)
	}
	if n := strings.Count(stdout.String(), ": sum 6;"); n != 4 {
		t.Errorf("%d ranks summed 0+1+2+3 right, want 4:\n%s", n, &stdout)
	}
	tables := slotTable.FindAllStringSubmatch(stderr.String(), -1)
	if len(tables) != 4 {
		t.Fatalf("%d ranks logged the world's slot table, want 4:\n%s", len(tables), &stderr)
	}
	for _, m := range tables {
		for _, slot := range strings.Fields(m[2]) {
			op, from, _ := strings.Cut(slot, "=")
			want := "tuned"
			switch op {
			case "barrier":
				want = "ringbarrier"
			case "gatherv", "scatterv":
				want = "basic"
			}
			if from != want {
				t.Errorf("rank %s: %s from %s, want %s", m[1], op, from, want)
			}
		}
	}
	t.Logf("built and ran in %v", time.Since(start))
}
