package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gompi/gompi/internal/testutil"
)

// The tests run the real mpirun binary on real processes. TestMain builds
// mpirun and the test program rankprog once.
var bin struct{ mpirun, rankprog, hello, bench string }

func TestMain(m *testing.M) {
	testutil.Main(m, map[*string]string{
		&bin.mpirun: ".", &bin.rankprog: "../../internal/testprogs/rankprog", &bin.hello: "../../examples/hello",
		&bin.bench: "../gompi-bench"})
}

func startJob(t *testing.T, stdin io.Reader, env []string, args ...string) *testutil.Proc {
	t.Helper()
	cmd := exec.Command(bin.mpirun, args...)
	cmd.Stdin = stdin
	cmd.Env = append(os.Environ(), env...)
	return testutil.Start(t, cmd)
}

func runJob(t *testing.T, args ...string) *testutil.Proc {
	t.Helper()
	j := startJob(t, nil, nil, args...)
	j.Wait(t, 30*time.Second)
	return j
}

// assertGone checks that no live process is left in any of the groups.
// Zombies are dead: they wait for their parent (or init) to reap them.
func assertGone(t *testing.T, groups []int) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for {
		var left []string
		for _, p := range testutil.Processes(t) {
			for _, g := range groups {
				if p.Pgid == g && p.State != 'Z' {
					left = append(left, fmt.Sprintf("pid %d (group %d, state %c)", p.Pid, g, p.State))
				}
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes of the job's rank groups are left: %s", strings.Join(left, ", "))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestHello(t *testing.T) {
	j := runJob(t, "-np", "4", bin.hello)
	if j.Code != 0 {
		t.Fatalf("status %d, stderr %s", j.Code, j.Stderr)
	}
	for r := 0; r < 4; r++ {
		if !strings.Contains(j.Stdout.String(), fmt.Sprintf("hello from rank %d of 4 on ", r)) {
			t.Errorf("no line for rank %d:\n%s", r, j.Stdout)
		}
	}
	if n := strings.Count(j.Stdout.String(), "\n"); n != 4 {
		t.Errorf("%d lines, want 4:\n%s", n, j.Stdout)
	}
}

func TestGoSourceDirectory(t *testing.T) {
	j := runJob(t, "-np", "2", "../../examples/hello")
	if j.Code != 0 || strings.Count(j.Stdout.String(), "hello from rank") != 2 {
		t.Fatalf("status %d\nstdout:\n%s\nstderr:\n%s", j.Code, j.Stdout, j.Stderr)
	}
}

func TestSingleton(t *testing.T) {
	out, err := exec.Command(bin.hello).CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "hello from rank 0 of 1 on ") {
		t.Fatalf("%v: %s", err, out)
	}
}

func TestForeignLauncherIsRefused(t *testing.T) {
	cmd := exec.Command(bin.hello)
	cmd.Env = append(os.Environ(), "OMPI_COMM_WORLD_SIZE=2", "OMPI_COMM_WORLD_RANK=0")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "OMPI_COMM_WORLD_SIZE is set but there is no PMI_FD or PMI_PORT") {
		t.Fatalf("%v: %s", err, out)
	}
}

// TestFailures: whatever way a rank fails, or mpirun is told or forced to
// stop, the job ends within 3 s, non-zero, says which rank failed and how,
// and leaves no process of any rank's group behind.
func TestFailures(t *testing.T) {
	literal := []string{"sh", "-c", `[ "$PMI_RANK" = 1 ] && exit 3; sleep 60`}
	// The same, with rank 1 waiting until rank 0 is up, so that the test can
	// see rank 0's process group before the job ends.
	sh := []string{"sh", "-c", `[ "$PMI_RANK" = 1 ] && { sleep 0.3; exit 3; }; echo ready $PMI_RANK; sleep 60`}
	cases := []struct {
		name   string
		args   []string
		ready  int    // wait for this many "ready" lines before acting
		act    string // "", "kill-rank", "term-mpirun", "kill-mpirun"
		status int    // -1: only non-zero; 0: not checked (mpirun was killed)
		want   string // regexp on stderr
	}{
		{"rank exits non-zero (the issue's command)", literal, 0, "", 3, `rank 1 \(pid \d+, host [^)]+\) exited with code 3`},
		{"rank exits non-zero", sh, 1, "", 3, `rank 1 \(pid \d+, host [^)]+\) exited with code 3`},
		{"rank killed", []string{bin.rankprog, "sleep"}, 2, "kill-rank", 128 + 9, `rank 1 \(pid \d+, host [^)]+\) exited on signal 9 \(Killed\)`},
		{"rank aborts", []string{bin.rankprog, "abort", "1", "7"}, 0, "", 7, `rank 1 \(pid \d+, host [^)]+\) called Abort with code 7`},
		{"rank returns without Finalize", []string{bin.rankprog, "nofinalize", "1"}, 0, "", -1, `rank 1 \(pid \d+, host [^)]+\) exited with code 0 without calling Finalize`},
		{"SIGTERM to mpirun", []string{bin.rankprog, "child"}, 2, "term-mpirun", 128 + 15, `received signal 15 \(Terminated\)`},
		{"kill -9 of mpirun, gompi ranks with children", []string{bin.rankprog, "child"}, 2, "kill-mpirun", 0, ``},
		{"kill -9 of mpirun, shell ranks", []string{"sh", "-c", `echo ready $PMI_RANK; sleep 60 & sleep 60`}, 2, "kill-mpirun", 0, ``},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// Whatever mpirun starts inherits the marker: the cases that do
			// not wait for the ranks cannot see their groups, but can look
			// for the marker afterwards.
			marker := fmt.Sprintf("GOMPI_TEST_FAILURES=%d-%d", os.Getpid(), i)
			j := startJob(t, nil, []string{marker}, append([]string{"-np", "2"}, c.args...)...)
			if c.ready > 0 {
				j.WaitOutput(t, `(?m)^ready \d`, c.ready, 10*time.Second)
			}
			groups := testutil.RankGroups(t, j.Cmd.Process.Pid)
			acted := time.Now()
			switch c.act {
			case "kill-rank":
				if len(groups) != 2 {
					t.Fatalf("found rank groups %v", groups)
				}
				syscall.Kill(groups[1], syscall.SIGKILL) // the rank with the higher pid: rank 1
			case "term-mpirun":
				j.Cmd.Process.Signal(syscall.SIGTERM)
			case "kill-mpirun":
				j.Cmd.Process.Kill()
			}
			j.Wait(t, 10*time.Second)
			if d := time.Since(acted); d > 3*time.Second {
				t.Errorf("the job took %v to end", d)
			}
			switch {
			case c.status > 0 && j.Code != c.status:
				t.Errorf("status %d, want %d", j.Code, c.status)
			case c.status < 0 && j.Code == 0:
				t.Errorf("status 0, want non-zero")
			}
			if c.want != "" && !regexp.MustCompile(c.want).MatchString(j.Stderr.String()) {
				t.Errorf("stderr does not match %q:\n%s", c.want, j.Stderr)
			}
			if len(groups) == 0 && c.ready > 0 {
				t.Fatalf("no rank groups were seen")
			}
			assertGone(t, groups)
			if left := marked(t, marker); len(left) != 0 {
				t.Errorf("processes of the job left: %v", left)
			}
		})
	}
}

// TestStartupStamps: GOMPI_STARTUP_TRACE=1 makes mpirun and every rank
// stamp their start-up and end on standard error, on one clock
// counted from GOMPI_STARTUP_T0 (bench/startup.sh reads them); unset, none
// is printed.
func TestStartupStamps(t *testing.T) {
	t0 := time.Now()
	j := startJob(t, nil, []string{"GOMPI_STARTUP_TRACE=1"}, "-np", "2", bin.hello)
	j.Wait(t, 30*time.Second)
	if j.Code != 0 {
		t.Fatalf("status %d: %s", j.Code, j.Stderr)
	}
	line := regexp.MustCompile(`(?m)^gompi-startup (\d+\.\d{3}) (\S+) \d+ (.+)$`)
	seen := map[string]bool{}
	for _, m := range line.FindAllStringSubmatch(j.Stderr.String(), -1) {
		ms, _ := strconv.ParseFloat(m[1], 64)
		if d := time.Since(t0); ms < 0 || ms > float64(d.Milliseconds())+1 {
			t.Errorf("stamp %q at %v ms: not within the job's %v", m[0], ms, d)
		}
		seen[m[2]+": "+m[3]] = true
	}
	for _, want := range []string{
		"mpirun: main entered", "mpirun: rank 1 spawned", "mpirun: exit", "mpirun: watchdog started",
		"rank0: init: entered", "rank1: init: llp selected; modex start", "rank1: init: modex end",
		"rank0: finalize: done",
	} {
		if !seen[want] {
			t.Errorf("no stamp %q:\n%s", want, j.Stderr)
		}
	}

	j = runJob(t, "-np", "2", bin.hello)
	if strings.Contains(j.Stderr.String(), "gompi-startup") {
		t.Errorf("stamps without GOMPI_STARTUP_TRACE:\n%s", j.Stderr)
	}
}

// TestNormalEndEndsWhatRanksLeft: ranks that end well but leave a process
// running in their group (a background child) do not leave it behind when
// the job ends, and mpirun does not wait for it to end by itself.
func TestNormalEndEndsWhatRanksLeft(t *testing.T) {
	marker := fmt.Sprintf("GOMPI_TEST_LEFT=%d", os.Getpid())
	j := startJob(t, nil, []string{marker}, "-np", "2", "sh", "-c", `sleep 60 & echo started $PMI_RANK`)
	j.Wait(t, 10*time.Second)
	if j.Code != 0 || strings.Count(j.Stdout.String(), "started") != 2 {
		t.Fatalf("status %d\nstdout:\n%s\nstderr:\n%s", j.Code, j.Stdout, j.Stderr)
	}
	if left := marked(t, marker); len(left) != 0 {
		t.Errorf("the ranks' background children are left: %v", left)
	}
}

func TestParametersAndEnvironment(t *testing.T) {
	j := runJob(t, "-np", "2", "--tag-output",
		"--mca", "btl_base_verbose", "5", "-x", "GOMPI_TEST_FOO=bar", "-x", "OMPI_MCA_pml_base_verbose=7",
		"-x", "OMPI_MCA_btl_base_verbose=9", "--mca", "mpi_show_mca_params", "cmdline",
		bin.rankprog, "env", "GOMPI_TEST_FOO", "OMPI_MCA_btl_base_verbose", "OMPI_MCA_SOURCE_btl_base_verbose",
		"PMI_RANK", "PMI_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK")
	if j.Code != 0 {
		t.Fatalf("status %d: %s", j.Code, j.Stderr)
	}
	for r := 0; r < 2; r++ {
		for _, want := range []string{
			"GOMPI_TEST_FOO=bar", "OMPI_MCA_btl_base_verbose=5", "OMPI_MCA_SOURCE_btl_base_verbose=command line",
			fmt.Sprintf("PMI_RANK=%d", r), "PMI_SIZE=2", fmt.Sprintf("OMPI_COMM_WORLD_RANK=%d", r),
			"OMPI_COMM_WORLD_SIZE=2", fmt.Sprintf("OMPI_COMM_WORLD_LOCAL_RANK=%d", r),
		} {
			if line := fmt.Sprintf("[%d] %s\n", r, want); !strings.Contains(j.Stdout.String(), line) {
				t.Errorf("stdout lacks %q:\n%s", line, j.Stdout)
			}
		}
	}
	// mpi_show_mca_params: rank 0 alone prints the command-line values.
	if n := strings.Count(j.Stderr.String(), "btl_base_verbose=5 (command line)"); n != 1 {
		t.Errorf("mpi_show_mca_params printed the --mca value %d times:\n%s", n, j.Stderr)
	}

	j = runJob(t, "-np", "2", "--mca", "btl_base_verbose", "5", "-x", "OMPI_MCA_pml_base_verbose=7",
		bin.rankprog, "param", "btl_base_verbose", "pml_base_verbose")
	for _, want := range []string{"btl_base_verbose=5 (command line)", "pml_base_verbose=7 (environment)"} {
		if strings.Count(j.Stdout.String(), want) != 2 {
			t.Errorf("stdout lacks %q twice:\n%s\n%s", want, j.Stdout, j.Stderr)
		}
	}
}

func TestStdinGoesToRankZero(t *testing.T) {
	j := startJob(t, strings.NewReader("line one\nline two\n"), nil, "-np", "2", "--tag-output", bin.rankprog, "stdin")
	j.Wait(t, 30*time.Second)
	if j.Code != 0 || j.Stdout.String() != "[0] line one\n[0] line two\n" {
		t.Fatalf("status %d, stdout %q, stderr %s", j.Code, j.Stdout, j.Stderr)
	}
}

func TestModexAmongProcesses(t *testing.T) {
	j := runJob(t, "-np", "4", "--report-modex", bin.rankprog, "modex")
	if j.Code != 0 {
		t.Fatalf("status %d: %s", j.Code, j.Stderr)
	}
	if n := strings.Count(j.Stdout.String(), "modex ok on rank"); n != 4 {
		t.Errorf("%d ranks ok:\n%s\n%s", n, j.Stdout, j.Stderr)
	}
	if !strings.Contains(j.Stdout.String(), `node data "node data from 0"`) {
		t.Errorf("node data is not the leader's:\n%s", j.Stdout)
	}
	if !regexp.MustCompile(`modex fence 1: 4 processes, 5 values of 2 keys, \d+ value bytes; \d+ bytes in 1 puts`).MatchString(j.Stderr.String()) {
		t.Errorf("no modex report:\n%s", j.Stderr)
	}
}

func TestMPICHLauncher(t *testing.T) {
	mpiexec, err := exec.LookPath("mpiexec.mpich")
	if err != nil {
		t.Skip("mpiexec.mpich is not installed (Debian package mpich); .ci/run installs it")
	}
	out, err := exec.Command(mpiexec, "-n", "3", bin.rankprog, "modex").CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for r := 0; r < 3; r++ {
		if !strings.Contains(string(out), fmt.Sprintf("modex ok on rank %d of 3", r)) {
			t.Errorf("rank %d did not report:\n%s", r, out)
		}
	}
	out, err = exec.Command(mpiexec, "-n", "3", bin.rankprog, "hello").CombinedOutput()
	if err != nil || strings.Count(string(out), " of 3 on ") != 3 {
		t.Fatalf("%v\n%s", err, out)
	}
	// Cards bigger than Hydra's 1024-byte values travel in several chunks.
	out, err = exec.Command(mpiexec, "-n", "3", bin.rankprog, "modex", "3000").CombinedOutput()
	if err != nil || strings.Count(string(out), "modex ok on rank") != 3 {
		t.Fatalf("3000-byte cards: %v\n%s", err, out)
	}
}

// marked returns the live processes whose environment holds marker (a
// variable given to one mpirun, which its ranks and their children
// inherit), waiting up to 3 s for them to go.
func marked(t *testing.T, marker string) []int {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for {
		var left []int
		for _, p := range testutil.Processes(t) {
			if p.State == 'Z' {
				continue
			}
			env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", p.Pid))
			if err == nil && slices.Contains(strings.Split(string(env), "\x00"), marker) {
				left = append(left, p.Pid)
			}
		}
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestBadInput(t *testing.T) {
	noexec := filepath.Join(t.TempDir(), "noexec")
	if err := os.WriteFile(noexec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	overcommit := strconv.Itoa(runtime.NumCPU() + 1) // more ranks than cores
	cases := []struct {
		args []string
		want string
		code int
	}{
		{[]string{"--bogus", "-np", "2", bin.hello}, `unknown option "--bogus"`, 1},
		{[]string{"-np", "0", bin.hello}, `-np "0": the number of ranks must be a whole number of at least 1`, 1},
		{[]string{"-np", "two", bin.hello}, `-np "two"`, 1},
		{[]string{bin.hello}, "no number of ranks", 1},
		{[]string{"-np", "2"}, "no program to run", 1},
		{[]string{"-np", "2", "/nonexistent/prog"}, `program "/nonexistent/prog": no such file or directory`, 1},
		{[]string{"-np", "2", "no-such-program-anywhere"}, "not found in PATH", 1},
		{[]string{"-np", "2", noexec}, "is not executable", 1},
		{[]string{"-np", "2", t.TempDir()}, "directory without Go source", 1},
		{[]string{"-np", "2", "--bind-to", "socket", bin.hello}, "accepted values are core and none", 1},
		{[]string{"-np", overcommit, "--bind-to", "core", bin.hello}, "use --bind-to none", 1},
		{[]string{"-np", "2", "--mca", "btl", "self", "--mca", "btl", "tcp", bin.hello}, "more than once", 1},
		{[]string{"-np", "2", "-x", "GOMPI_SURELY_UNSET_VAR", bin.hello}, "is not set in mpirun's environment", 1},
		{[]string{"-np", "2", "--timeout", "-1", bin.hello}, "positive number of seconds", 1},
		{[]string{"-np", "2", "--timeout", "0.5", bin.rankprog, "sleep"}, `timeout after 0.5s: ending the job \(ranks still running: 0, 1\)`, 124},
		{[]string{"-np", "2", "--mca", "btl", "nosuch", bin.hello}, `no btl component "nosuch"; btl components: self, shm, tcp`, 1},
		{[]string{"-np", "2", "--mca", "btl", "self", bin.hello}, `rank \d cannot reach rank \d: BTLs tried: self`, 1},
		// A launch agent that fails for every rank (a host name ssh
		// cannot resolve): no rank ever speaks PMI, and mpirun must still end.
		{[]string{"-np", "2", "--host", "x:1,y:1", "--mca", "plm_rsh_agent", "/bin/false", bin.hello}, `rank 1 \(pid \d+, host y\) exited with code 1`, 1},
	}
	for i, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			// Whatever mpirun started inherits the marker: none of it may
			// outlive the job (the ranks' groups are gone with mpirun, so
			// they cannot be looked up afterwards).
			marker := fmt.Sprintf("GOMPI_TEST_BADINPUT=%d-%d", os.Getpid(), i)
			j := startJob(t, nil, []string{marker}, c.args...)
			j.Wait(t, 10*time.Second)
			if j.Code != c.code {
				t.Errorf("status %d, want %d", j.Code, c.code)
			}
			if !regexp.MustCompile(c.want).MatchString(j.Stderr.String()) {
				t.Errorf("stderr does not match %q:\n%s", c.want, j.Stderr)
			}
			if left := marked(t, marker); len(left) != 0 {
				t.Errorf("processes of the job left: %v", left)
			}
		})
	}
}

func TestHelpAndVersion(t *testing.T) {
	j := runJob(t, "--help")
	if j.Code != 0 || !strings.Contains(j.Stdout.String(), "--tag-output") {
		t.Errorf("help: %d %s", j.Code, j.Stdout)
	}
	j = runJob(t, "--version")
	if j.Code != 0 || !strings.HasPrefix(j.Stdout.String(), "mpirun (gompi) ") {
		t.Errorf("version: %d %s", j.Code, j.Stdout)
	}
}

// TestBinding checks that each rank runs on one core of its own when ranks
// do not outnumber cores, and unbound otherwise.
func TestBinding(t *testing.T) {
	allowed := func(out string) []string {
		var sets []string
		sc := bufio.NewScanner(strings.NewReader(out))
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "Cpus_allowed_list:"); ok {
				sets = append(sets, strings.TrimSpace(v))
			}
		}
		sort.Strings(sets)
		return sets
	}
	ncpu := len(strings.Split(allowed(readStatus(t))[0], ","))
	if ncpu < 2 && !strings.Contains(allowed(readStatus(t))[0], "-") {
		t.Skip("one core: nothing to bind apart")
	}
	j := runJob(t, "-np", "2", "sh", "-c", "grep Cpus_allowed_list /proc/self/status")
	sets := allowed(j.Stdout.String())
	if len(sets) != 2 || sets[0] == sets[1] || strings.ContainsAny(sets[0]+sets[1], ",-") {
		t.Errorf("ranks are not bound to distinct single cores: %v", sets)
	}
	j = runJob(t, "-np", "2", "--bind-to", "none", "sh", "-c", "grep Cpus_allowed_list /proc/self/status")
	if sets := allowed(j.Stdout.String()); len(sets) != 2 || sets[0] != sets[1] {
		t.Errorf("--bind-to none: %v", sets)
	}
}

func readStatus(t *testing.T) string {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skip(err)
	}
	return string(b)
}

// BenchmarkStartup times a whole job: mpirun -np 2 of a prebuilt hello, from
// exec to exit.
func BenchmarkStartup(b *testing.B) {
	for b.Loop() {
		out, err := exec.Command(bin.mpirun, "-np", "2", bin.hello).CombinedOutput()
		if err != nil {
			b.Fatalf("%v: %s", err, out)
		}
	}
}

// TestOversubscribedEnvironment: with more ranks than cores each rank is
// told so, and its Go runtime gets one processor unless the user chose.
func TestOversubscribedEnvironment(t *testing.T) {
	np := strconv.Itoa(runtime.NumCPU() + 1)
	show := "echo $GOMPI_OVERSUBSCRIBED/$GOMAXPROCS"
	j := runJob(t, "-np", np, "sh", "-c", show)
	if got := strings.Fields(j.Stdout.String()); j.Code != 0 || len(got) == 0 || slices.ContainsFunc(got, func(s string) bool { return s != "1/1" }) {
		t.Errorf("-np %s: ranks saw %q (status %d), want 1/1 each", np, got, j.Code)
	}
	j = runJob(t, "-np", np, "-x", "GOMAXPROCS=3", "sh", "-c", show)
	if got := strings.Fields(j.Stdout.String()); len(got) == 0 || slices.ContainsFunc(got, func(s string) bool { return s != "1/3" }) {
		t.Errorf("-x GOMAXPROCS=3: ranks saw %q, want 1/3 each", got)
	}
	j = runJob(t, "-np", "1", "sh", "-c", show)
	if got, want := strings.TrimSpace(j.Stdout.String()), "0/"+os.Getenv("GOMAXPROCS"); got != want {
		t.Errorf("-np 1: the rank saw %q, want %q (not oversubscribed, GOMAXPROCS left alone)", got, want)
	}
}

// TestUnknownParameterSuggestions: with the real catalogue, a misspelled
// name near a registered one gets it; one near none, but whose prefix names
// a component, gets that component's closest parameters; rank 0 alone says
// so, and the job runs.
func TestUnknownParameterSuggestions(t *testing.T) {
	j := runJob(t, "-np", "2", "--mca", "btl_shm_sizee", "1", "--mca", "coll_tuned_allreduce_algo", "2", bin.hello)
	if j.Code != 0 {
		t.Fatalf("status %d: %s", j.Code, j.Stderr)
	}
	for _, want := range []string{
		`unknown MCA parameter "btl_shm_sizee" (source: command line); no registered parameter has a similar name; did you mean one of btl shm's parameters: btl_shm_ring_size`,
		"(ompi_info --param btl shm --level 9 lists them all)",
		`unknown MCA parameter "coll_tuned_allreduce_algo" (source: command line); did you mean coll_tuned_allreduce_algorithm?`,
	} {
		if n := strings.Count(j.Stderr.String(), want); n != 1 {
			t.Errorf("stderr has %q %d times, want once:\n%s", want, n, j.Stderr)
		}
	}
}

// watchdogs returns the pids of mpirun's live watchdogs.
func watchdogs(t *testing.T, mpirunPid int) []int {
	t.Helper()
	var out []int
	for _, p := range testutil.Processes(t) {
		if p.Ppid == mpirunPid && p.State != 'Z' && testutil.IsWatchdog(p.Pid) {
			out = append(out, p.Pid)
		}
	}
	return out
}

// waitWatchdog waits until mpirun has exactly one live watchdog other than
// old, and returns it.
func waitWatchdog(t *testing.T, j *testutil.Proc, old int) int {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if w := watchdogs(t, j.Cmd.Process.Pid); len(w) == 1 && w[0] != old {
			return w[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("mpirun has watchdogs %v (old %d), want one new one\nstderr:\n%s", watchdogs(t, j.Cmd.Process.Pid), old, j.Stderr)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestWatchdogWatched: the watchdog names itself in ps; killed, it is
// noticed, reported and replaced; and the new one does the job: after kill
// -9 of mpirun no rank is left. The ranks are shell scripts with a child of
// their own, which do not speak PMI: only a watchdog can end them.
func TestWatchdogWatched(t *testing.T) {
	j := startJob(t, nil, nil, "-np", "2", "sh", "-c", `echo ready $PMI_RANK; sleep 60 & sleep 60`)
	j.WaitOutput(t, `(?m)^ready \d`, 2, 10*time.Second)
	mpirunPid := j.Cmd.Process.Pid
	groups := testutil.RankGroups(t, mpirunPid)
	if len(groups) != 2 {
		t.Fatalf("rank groups %v", groups)
	}
	first := waitWatchdog(t, j, 0)
	cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", first))
	if got, want := strings.Split(string(cmdline), "\x00")[0], fmt.Sprintf("mpirun [watchdog of %d]", mpirunPid); got != want {
		t.Errorf("watchdog's argv[0] %q, want %q", got, want)
	}
	// The watchdog renames its main thread as it starts.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", first))
		got := strings.TrimSpace(string(comm))
		if got == "mpirun-watchdog" {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("watchdog's comm %q, want mpirun-watchdog", got)
			break
		}
	}

	// It runs at a low priority, in mpirun's session: where the kernel
	// schedules sessions as groups, a session of its own would take half
	// the cores from the ranks while it starts.
	checkNiced := func(pid int) {
		t.Helper()
		stat, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		end := bytes.LastIndexByte(stat, ')')
		f := strings.Fields(string(stat[end+1:]))
		if want := strconv.Itoa(watchdogNice); len(f) < 17 || f[16] != want {
			t.Errorf("watchdog %d's nice value: stat %q, want %s", pid, stat, want)
		}
		if len(f) > 3 && f[3] == strconv.Itoa(pid) {
			t.Errorf("watchdog %d leads a session of its own", pid)
		}
	}
	checkNiced(first)

	syscall.Kill(first, syscall.SIGKILL)
	second := waitWatchdog(t, j, first)
	checkNiced(second)
	want := fmt.Sprintf("mpirun: warning: the watchdog (pid %d) was killed by signal 9 (Killed); started a new one (pid %d)", first, second)
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(j.Stderr.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("stderr lacks %q:\n%s", want, j.Stderr)
		}
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case <-j.Done:
		t.Fatalf("the job ended (status %d) when its watchdog was killed:\n%s", j.Code, j.Stderr)
	default:
	}

	j.Cmd.Process.Kill()
	j.Wait(t, 10*time.Second)
	assertGone(t, groups)
	assertGone(t, []int{second}) // it did its work and ended
}

// TestCauseBeforeConsequence: survivors that lost a rank fail before that
// rank is reaped (it ignores SIGTERM and dies of SIGKILL 100 ms later, as a
// rank killed on a loaded machine may be reaped late). mpirun still names
// the dead rank first, exits with its status, and reports the survivors as
// its consequences. When the rank the survivors blamed was alive, the
// survivors' failure is the cause.
func TestCauseBeforeConsequence(t *testing.T) {
	cases := []struct {
		name   string
		args   []string
		status int
		first  string // regexp on mpirun's first line
		also   string // regexp on a later line of mpirun's
	}{
		{"survivors abort", []string{"lost", "0", "abort"}, 128 + 9,
			`^mpirun: rank 0 \(pid \d+, host [^)]+\) exited on signal 9 \(Killed\)$`,
			`(?m)^mpirun: (rank [123] \(pid \d+\) called Abort with code 1 after losing rank 0: rank [123] called Abort\(1\)|[23] ranks aborted after losing rank 0: ranks [123], [123].* \(called Abort with code 1\))$`},
		{"survivors exit", []string{"lost", "2", "exit"}, 128 + 9,
			`^mpirun: rank 2 \(pid \d+, host [^)]+\) exited on signal 9 \(Killed\)$`,
			`(?m)^mpirun: (rank [013] \(pid \d+\) exited with code 1 after losing rank 2|[23] ranks aborted after losing rank 2: ranks [013], [013].* \(exited with code 1\))$`},
		{"the blamed rank was alive", []string{"lost", "0", "abort", "alive"}, 1,
			`^mpirun: rank [123] \(pid \d+, host [^)]+\) called Abort with code 1: rank [123] called Abort\(1\)$`, ``},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			j := runJob(t, append([]string{"-np", "4", bin.rankprog}, c.args...)...)
			var lines []string
			for _, l := range strings.Split(j.Stderr.String(), "\n") {
				if strings.HasPrefix(l, "mpirun: ") {
					lines = append(lines, l)
				}
			}
			if j.Code != c.status {
				t.Errorf("status %d, want %d", j.Code, c.status)
			}
			if len(lines) == 0 || !regexp.MustCompile(c.first).MatchString(lines[0]) {
				t.Fatalf("mpirun's first line does not match %q:\n%s", c.first, j.Stderr)
			}
			if c.also != "" && !regexp.MustCompile(c.also).MatchString(strings.Join(lines[1:], "\n")) {
				t.Errorf("mpirun's later lines do not match %q:\n%s", c.also, j.Stderr)
			}
		})
	}
}
