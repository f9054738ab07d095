package faulttest

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gompi/gompi/internal/testutil"
)

var bin struct{ mpirun, faultprog, recoverprog, shmkill string }

func TestMain(m *testing.M) {
	testutil.Main(m, map[*string]string{
		&bin.mpirun: "../../cmd/mpirun", &bin.faultprog: "../testprogs/faultprog",
		&bin.recoverprog: "../testprogs/recoverprog", &bin.shmkill: "../testprogs/shmkill"})
}

// endBound is the liveness bound of the issue: a job ends within 3 s of a
// rank's death.
const endBound = 3 * time.Second

// phases are where the victim is killed, with the longest random delay
// between its "phase" line and the kill. The peers hold the init and
// finalize phases open for 2 s (faultprog), so the victim is still inside
// them; the loops run until the job ends.
var phases = []struct {
	name  string
	delay time.Duration
}{
	{"init", 20 * time.Millisecond},
	{"rendezvous", 100 * time.Millisecond},
	{"allreduce", 50 * time.Millisecond},
	{"finalize", 20 * time.Millisecond},
	// The issue's own case: a token passed round in a loop.
	{"ring", 50 * time.Millisecond},
}

var transports = []struct{ name, btl string }{
	{"shm", "self,shm"},
	{"tcp", "self,tcp"},
}

// rounds is how many rounds of each phase and transport to run.
func rounds(t *testing.T) int {
	if s := os.Getenv("GOMPI_FAULT_ROUNDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("GOMPI_FAULT_ROUNDS=%q: want a number of rounds", s)
		}
		return n
	}
	if testing.Short() {
		return 1
	}
	return 3
}

// twoCores returns at most two of the cores this process may use: the
// jobs and the hog share them, whatever the machine.
func twoCores(t *testing.T) []int {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		t.Skip(err)
	}
	var cpus []int
	for c := 0; c < 1024 && len(cpus) < 2; c++ {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	return cpus
}

// startOn starts cmd from a thread bound to cpus, so that it and its
// children (mpirun's ranks) inherit the binding.
// What awaitOutput saw.
const (
	outputReady = iota
	outputEnded // the job ended first
	outputLate  // the time was up
)

// awaitOutput polls the job's standard output until ready finds in it what
// the test waits for, the job ends, or within is up.
func awaitOutput(j *testutil.Proc, within time.Duration, ready func(stdout string) bool) int {
	deadline := time.Now().Add(within)
	for !ready(j.Stdout.String()) {
		select {
		case <-j.Done:
			return outputEnded
		case <-time.After(2 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return outputLate
		}
	}
	return outputReady
}

func startOn(t *testing.T, cmd *exec.Cmd, cpus []int) *testutil.Proc {
	t.Helper()
	var p *testutil.Proc
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		// The thread's mask changes for good: it must end with this
		// goroutine, which it does as the goroutine exits locked.
		runtime.LockOSThread()
		var set unix.CPUSet
		for _, c := range cpus {
			set.Set(c)
		}
		if err = unix.SchedSetaffinity(0, &set); err != nil {
			err = fmt.Errorf("binding to %v: %w", cpus, err)
			return
		}
		p, err = testutil.TryStart(t, cmd)
	}()
	<-done
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// round is what one kill gave.
type round struct {
	end         time.Duration // from the kill to mpirun's exit
	namedFirst  bool
	failedCheck bool
}

func TestFaults(t *testing.T) {
	n := rounds(t)
	cpus := twoCores(t)
	// The hog: a shell spinning on the same cores for the whole suite.
	hog := startOn(t, exec.Command("sh", "-c", "while :; do :; done"), cpus)
	defer hog.Cmd.Process.Kill()

	var table []string
	for _, tr := range transports {
		for _, ph := range phases {
			name := ph.name + "/" + tr.name
			var rs []round
			t.Run(name, func(t *testing.T) {
				for i := 0; i < n; i++ {
					rs = append(rs, killRound(t, ph.name, tr.btl, ph.delay, cpus))
				}
			})
			table = append(table, summary(name, rs))
		}
	}
	t.Logf("fault suite, %d round(s) of each, 4 ranks on cores %v beside a CPU hog:\n%-16s %6s %10s %10s %10s %12s %8s\n%s",
		n, cpus, "phase/btl", "rounds", "end min", "median", "max", "named first", "failed", strings.Join(table, "\n"))
}

func summary(name string, rs []round) string {
	var ends []time.Duration
	named, failed := 0, 0
	for _, r := range rs {
		ends = append(ends, r.end)
		if r.namedFirst {
			named++
		}
		if r.failedCheck {
			failed++
		}
	}
	if len(ends) == 0 {
		return fmt.Sprintf("%-16s %6d", name, 0)
	}
	sort.Slice(ends, func(i, j int) bool { return ends[i] < ends[j] })
	ms := func(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }
	return fmt.Sprintf("%-16s %6d %10s %10s %10s %12d %8d", name, len(rs), ms(ends[0]), ms(ends[len(ends)/2]), ms(ends[len(ends)-1]), named, failed)
}

var phaseLine = regexp.MustCompile(`(?m)^phase (\w+) (\d+) (\d+) (\w+)$`)

// killRound runs one job and kills its victim at the phase; it reports
// every check that fails and goes on.
func killRound(t *testing.T, phase, btl string, maxDelay time.Duration, cpus []int) (r round) {
	t.Helper()
	victim := rand.IntN(4)
	cmd := exec.Command(bin.mpirun, "-np", "4", "--mca", "btl", btl, bin.faultprog, phase, strconv.Itoa(victim))
	cmd.Env = testutil.CleanEnv()
	j := startOn(t, cmd, cpus)
	errorf := func(format string, a ...any) {
		r.failedCheck = true
		t.Errorf("%s over %s, victim rank %d: %s\nstdout:\n%s\nstderr:\n%s", phase, btl, victim, fmt.Sprintf(format, a...), j.Stdout, j.Stderr)
	}
	var pid int
	var job string
	deadline := time.Now().Add(30 * time.Second)
	switch awaitOutput(j, time.Until(deadline), func(stdout string) bool {
		for _, m := range phaseLine.FindAllStringSubmatch(stdout, -1) {
			if m[1] == phase && m[2] == strconv.Itoa(victim) {
				pid, _ = strconv.Atoi(m[3])
				job = m[4]
			}
		}
		return pid != 0
	}) {
	case outputEnded:
		errorf("the job ended (status %d) before the victim reached its phase", j.Code)
		return r
	case outputLate:
		errorf("the victim did not reach its phase within 30 s")
		return r
	}
	// mpirun starts the ranks one after the other: the victim may say
	// where it is before the last one exists, and every one of them must
	// be seen to be checked for afterwards.
	groups := testutil.RankGroups(t, j.Cmd.Process.Pid)
	for len(groups) < 4 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
		groups = testutil.RankGroups(t, j.Cmd.Process.Pid)
	}
	time.Sleep(time.Duration(rand.Int64N(int64(maxDelay) + 1)))
	// The clock starts before the kill: on a loaded machine this goroutine
	// may not run again until the job is over.
	killed := time.Now()
	syscall.Kill(pid, syscall.SIGKILL)
	select {
	case <-j.Done:
		r.end = time.Since(killed)
	case <-time.After(30 * time.Second):
		j.Cmd.Process.Kill()
		<-j.Done
		r.end = time.Since(killed)
	}
	if r.end > endBound {
		errorf("the job took %v to end after the kill", r.end)
	}
	if j.Code == 0 {
		errorf("mpirun exited 0")
	}
	first := ""
	for _, l := range strings.Split(j.Stderr.String(), "\n") {
		if strings.HasPrefix(l, "mpirun: ") {
			first = l
			break
		}
	}
	want := fmt.Sprintf(`^mpirun: rank %d \(pid %d, host [^)]+\) exited on signal 9 \(Killed\)$`, victim, pid)
	r.namedFirst = regexp.MustCompile(want).MatchString(first)
	if !r.namedFirst {
		errorf("mpirun's first line is %q, want one naming rank %d (pid %d) killed by signal 9", first, victim, pid)
	}
	if len(groups) != 4 {
		errorf("found %d rank groups, want 4", len(groups))
	}
	if left := waitGone(t, groups); len(left) > 0 {
		errorf("processes are left: %s", strings.Join(left, ", "))
	}
	if files := waitNoFiles(t, job); len(files) > 0 {
		errorf("files are left in /dev/shm: %v", files)
	}
	return r
}

// waitGone waits, up to the liveness bound, until no live process is left
// in the groups, and returns those that are.
func waitGone(t *testing.T, groups []int) []string {
	deadline := time.Now().Add(endBound)
	for {
		var left []string
		for _, p := range testutil.Processes(t) {
			for _, g := range groups {
				if p.Pgid == g && p.State != 'Z' {
					left = append(left, fmt.Sprintf("pid %d (group %d, state %c)", p.Pid, g, p.State))
				}
			}
		}
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitNoFiles returns the job's files left in /dev/shm once mpirun has
// exited (it removes them before it exits: no wait is needed, but a short
// one costs nothing when all is well).
func waitNoFiles(t *testing.T, job string) []string {
	if job == "" {
		t.Errorf("no job id")
		return nil
	}
	deadline := time.Now().Add(time.Second)
	for {
		files := testutil.ShmFiles(t, job, "*")
		if len(files) == 0 || time.Now().After(deadline) {
			return files
		}
		time.Sleep(10 * time.Millisecond)
	}
}
