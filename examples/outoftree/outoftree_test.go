package outoftree

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gompi/gompi/internal/testutil"
)

var bin struct{ mpirun, ompiInfo, collectives, bench, testplugin string }

func TestMain(m *testing.M) {
	testutil.Main(m, map[*string]string{
		&bin.mpirun: "../../cmd/mpirun", &bin.ompiInfo: "../../cmd/ompi_info",
		&bin.collectives: "../collectives", &bin.bench: "../../cmd/gompi-bench",
		&bin.testplugin: "../../frameworks/coll/collplugin/internal/testplugin",
	})
}

// checkTable checks one rank's slot table: barrier from the given module,
// gatherv and scatterv from basic (tuned leaves them empty), bcast, reduce,
// allreduce, allgather, alltoall, gather and scatter from sm over tuned
// (those it carries through the node's shared segment), the rest from
// tuned.
func checkTable(t *testing.T, rank, table, barrier string) {
	t.Helper()
	for _, slot := range strings.Fields(table) {
		op, from, _ := strings.Cut(slot, "=")
		want := "tuned"
		switch op {
		case "barrier":
			want = barrier
		case "gatherv", "scatterv":
			want = "basic"
		case "bcast", "reduce", "allreduce", "allgather", "alltoall", "gather", "scatter":
			want = "sm>tuned"
		}
		if from != want {
			t.Errorf("rank %s: %s from %s, want %s", rank, op, from, want)
		}
	}
}

var slotTable = regexp.MustCompile(`slot table: rank=(\d+) comm=MPI_COMM_WORLD size=4 table="([^"]*)"`)

// The linked example, built in its own module with `go build`, runs under
// mpirun on 4 ranks: the verbose slot table has the barrier from its
// component and every other slot from gompi's (tuned, basic for the
// gatherv and scatterv tuned leaves empty, sm over tuned for bcast, reduce,
// allreduce, allgather, alltoall, gather and scatter); its Allreduce is
// right.
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
		checkTable(t, m[1], m[2], "ringbarrier")
	}
	t.Logf("built and ran in %v", time.Since(start))
}

// buildPlugin builds examples/outoftree/plugin, a module of its own, as its
// author would, into a new directory of the component path.
func buildPlugin(t *testing.T) (dir, exe string) {
	t.Helper()
	dir = t.TempDir()
	exe = filepath.Join(dir, "gompi-coll-plugbarrier")
	build := exec.Command("go", "build", "-o", exe, ".")
	build.Dir = "plugin"
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build in examples/outoftree/plugin: %v\n%s", err, out)
	}
	return dir, exe
}

// runCollectives runs examples/collectives on 4 ranks with args before it
// and checks every rank's sum and slot table: barrier from wantBarrier,
// the rest from gompi's own components. It returns mpirun's stderr.
func runCollectives(t *testing.T, wantBarrier string, args ...string) string {
	t.Helper()
	args = append([]string{"--timeout", "60", "-np", "4"}, args...)
	cmd := exec.Command(bin.mpirun, append(args, bin.collectives)...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("mpirun %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, &stdout, &stderr)
	}
	lines := regexp.MustCompile(`rank (\d): sum 6; (.*)`).FindAllStringSubmatch(stdout.String(), -1)
	if len(lines) != 4 {
		t.Fatalf("%d ranks summed 0+1+2+3 right, want 4:\n%s\nstderr:\n%s", len(lines), &stdout, &stderr)
	}
	for _, m := range lines {
		checkTable(t, m[1], m[2], wantBarrier)
	}
	return stderr.String()
}

// The plugin example, built in its own module, found on the component path
// by a program that knows nothing of it: on 4 ranks the barrier comes from
// the plugin and the rest from gompi's components; its parameter is
// registered in the host (ompi_info shows it with the plugin's origin, and
// --mca sets it: disabled, the plugin fills nothing).
func TestPluginComponent(t *testing.T) {
	dir, exe := buildPlugin(t)
	stderr := runCollectives(t, "plugbarrier", "--mca", "mca_base_component_path", dir, "--mca", "coll_base_verbose", "10")
	if n := len(slotTable.FindAllString(stderr, -1)); n != 4 {
		t.Errorf("%d ranks logged the world's slot table, want 4:\n%s", n, stderr)
	}
	runCollectives(t, "sm>tofu", "--mca", "mca_base_component_path", dir, "--mca", "coll_plugbarrier_enable", "0")

	out, err := exec.Command(bin.ompiInfo, "--mca", "mca_base_component_path", dir, "--param", "coll", "plugbarrier", "--level", "9").CombinedOutput()
	if err != nil {
		t.Fatalf("ompi_info: %v\n%s", err, out)
	}
	for _, want := range []string{"plugbarrier (MCA v1.0.0, API v1.0.0, Component v1.0.0, plugin (" + exe + "))",
		`parameter "coll_plugbarrier_enable" (current value: "true"`, `parameter "coll_plugbarrier_priority" (current value: "50"`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("ompi_info lacks %q:\n%s", want, out)
		}
	}
}

// Broken plugins beside a good one: each is skipped with a message that
// names its file and the reason, and the job goes on with the others.
func TestBrokenPluginsAreSkipped(t *testing.T) {
	dir, _ := buildPlugin(t)
	install := func(name string, mode os.FileMode, body []byte) {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, body, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, mode); err != nil { // past the umask
			t.Fatal(err)
		}
	}
	test, err := os.ReadFile(bin.testplugin)
	if err != nil {
		t.Fatal(err)
	}
	reasons := map[string]string{
		"gompi-coll-script":      `not a plugin: its first line of output, "hello", is not a go-plugin handshake`,
		"gompi-coll-noexec":      "not executable (mode 0644)",
		"gompi-coll-wrongcookie": "it refused the handshake cookie",
		"gompi-coll-wrongapi":    "built for coll API 99.x, but this gompi has coll API 1.x",
		"gompi-coll-crashstart":  "it exited during start-up, before the go-plugin handshake; its stderr: panic: testplugin: crashing at start on purpose",
		"gompi-coll-crashquery":  "it exited during Query; its stderr: panic: testplugin: crashing in a query on purpose",
		"gompi-coll-hangquery":   "no answer to Query within 1s (mca_base_plugin_timeout); stopped it",
		"gompi-coll-badschedule": "schedule for barrier, rank",
		"gompi-coll-writable":    "group- or world-writable (mode 0777)",
	}
	install("gompi-coll-script", 0o755, []byte("#!/bin/sh\necho hello\n"))
	install("gompi-coll-noexec", 0o644, test)
	install("gompi-coll-writable", 0o777, test)
	for _, name := range []string{"wrongcookie", "wrongapi", "crashstart", "crashquery", "hangquery", "badschedule"} {
		install("gompi-coll-"+name, 0o755, test)
	}
	start := time.Now()
	stderr := runCollectives(t, "plugbarrier", "--mca", "mca_base_component_path", dir, "--mca", "mca_base_plugin_timeout", "1")
	for file, reason := range reasons {
		path := filepath.Join(dir, file)
		found := false
		for _, l := range strings.Split(stderr, "\n") {
			if strings.Contains(l, path) && strings.Contains(l, reason) {
				found = true
			}
		}
		if !found {
			t.Errorf("no message names %s with %q:\n%s", path, reason, stderr)
		}
	}
	t.Logf("job with %d broken plugins ran in %v", len(reasons), time.Since(start))
}

// A plugin never outlives its host. kill -9 of a singleton (no mpirun to
// clean up after it) leaves no plugin: the kernel's parent-death signal and
// the plugin's own watch of its parent end it. Under mpirun, kill -9 of a
// rank leaves none of the job's plugins either.
func TestNoPluginOutlivesItsHost(t *testing.T) {
	dir, exe := buildPlugin(t)
	plugins := func() []testutil.Process {
		var out []testutil.Process
		for _, p := range testutil.Processes(t) {
			if p.State == 'Z' {
				continue // dead, waiting for a parent to reap it
			}
			if cmd, err := os.ReadFile("/proc/" + strconv.Itoa(p.Pid) + "/cmdline"); err == nil && strings.HasPrefix(string(cmd), exe+"\x00") {
				out = append(out, p)
			}
		}
		return out
	}
	killHost := func(t *testing.T, job *testutil.Proc, want int) {
		var running []testutil.Process
		for deadline := time.Now().Add(30 * time.Second); len(running) < want; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%d plugin processes after 30 s, want %d\nstderr:\n%s", len(running), want, job.Stderr)
			}
			running = plugins()
		}
		host := running[0].Ppid
		if err := syscall.Kill(host, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		job.Wait(t, 10*time.Second)
		for deadline := time.Now().Add(3 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			left := plugins()
			if len(left) == 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("3 s after kill -9 of host pid %d, plugin processes remain: %+v", host, left)
			}
		}
	}
	idle := []string{"idle", "--in", "barrier", "--loops", "100000000000"}
	t.Run("singleton", func(t *testing.T) {
		cmd := exec.Command(bin.bench, idle...)
		cmd.Env = append(testutil.CleanEnv(), "OMPI_MCA_mca_base_component_path="+dir)
		killHost(t, testutil.Start(t, cmd), 1)
	})
	t.Run("mpirun", func(t *testing.T) {
		args := append([]string{"--timeout", "60", "-np", "2", "--mca", "mca_base_component_path", dir, bin.bench}, idle...)
		killHost(t, testutil.Start(t, exec.Command(bin.mpirun, args...)), 2)
	})
}
