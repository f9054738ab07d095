package faulttest

import (
	"fmt"
	"math/rand/v2"
	"os/exec"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gompi/gompi/internal/testutil"
)

// errorBound is the bound on the time from a rank's death to the
// error of the last survivor.
const errorBound = time.Second

// liveBound is how long a recovering job may take from the kill to its end
// (the survivors' errors, Shrink, 100 Allreduce, Finalize, on two busy
// cores) before the test calls it a hang: generous, as only a hang should
// ever reach it.
const liveBound = 20 * time.Second

// killWithin is the longest random delay between the last rank's "ready"
// line and the kill: several collectives of the loop, at any point of one.
const killWithin = 300 * time.Millisecond

// recoveryRound is what one kill gave.
type recoveryRound struct {
	lastErr time.Duration // from the kill to the last survivor's error
	end     time.Duration // from the kill to mpirun's exit
	hung    bool
	failed  bool           // a check failed
	ops     map[string]int // the collectives the survivors' errors came from
}

func TestRecovery(t *testing.T) {
	n := rounds(t)
	cpus := twoCores(t)
	hog := startOn(t, exec.Command("sh", "-c", "while :; do :; done"), cpus)
	defer hog.Cmd.Process.Kill()

	var table []string
	ops := map[string]int{}
	for _, tr := range transports {
		for _, np := range []int{4, 6} {
			name := fmt.Sprintf("%s/np%d", tr.name, np)
			var rs []recoveryRound
			t.Run(name, func(t *testing.T) {
				for i := 0; i < n; i++ {
					rs = append(rs, recoverRound(t, tr.btl, np, cpus))
				}
			})
			table = append(table, recoverySummary(name, rs))
			for _, r := range rs {
				for op, k := range r.ops {
					ops[op] += k
				}
			}
		}
	}
	var inOps []string
	for op, k := range ops {
		inOps = append(inOps, fmt.Sprintf("%s %d", op, k))
	}
	sort.Strings(inOps)
	t.Logf("recovery suite, %d round(s) of each, on cores %v beside a CPU hog:\n%-10s %6s %12s %10s %10s %12s %6s %7s\n%s\nthe survivors' errors came from: %s",
		n, cpus, "btl/np", "rounds", "to last err", "median", "max", "end median", "hangs", "failed", strings.Join(table, "\n"), strings.Join(inOps, ", "))
}

func recoverySummary(name string, rs []recoveryRound) string {
	var errs, ends []time.Duration
	hangs, failed := 0, 0
	for _, r := range rs {
		if r.hung {
			hangs++
		}
		if r.failed {
			failed++
		}
		if r.lastErr > 0 {
			errs = append(errs, r.lastErr)
		}
		if !r.hung {
			ends = append(ends, r.end)
		}
	}
	ms := func(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }
	sort.Slice(errs, func(i, j int) bool { return errs[i] < errs[j] })
	sort.Slice(ends, func(i, j int) bool { return ends[i] < ends[j] })
	min, med, mx, end := "-", "-", "-", "-"
	if len(errs) > 0 {
		min, med, mx = ms(errs[0]), ms(errs[len(errs)/2]), ms(errs[len(errs)-1])
	}
	if len(ends) > 0 {
		end = ms(ends[len(ends)/2])
	}
	return fmt.Sprintf("%-10s %6d %12s %10s %10s %12s %6d %7d", name, len(rs), min, med, mx, end, hangs, failed)
}

var (
	readyLine     = regexp.MustCompile(`(?m)^ready (\d+) (\d+) (\w+)$`)
	failedLine    = regexp.MustCompile(`(?m)^failed (\d+) (\d+) (\S+) (\w+) (\d+)$`)
	recoveredLine = regexp.MustCompile(`(?m)^recovered (\d+) (\d+) ([\d,]+)$`)
	finalizedLine = regexp.MustCompile(`(?m)^finalized (\d+)$`)
	mpirunLine    = regexp.MustCompile(`(?m)^mpirun: rank (\d+) .*$`)
)

// recoverRound runs one job of np ranks under --enable-recovery, kills a
// random rank at a random moment of its loop of collectives, and checks
// the survivors' recovery; it reports every check that fails and goes on.
func recoverRound(t *testing.T, btl string, np int, cpus []int) (r recoveryRound) {
	t.Helper()
	victim := rand.IntN(np)
	seed := rand.Uint64()
	cmd := exec.Command(bin.mpirun, "-np", strconv.Itoa(np), "--enable-recovery", "--mca", "btl", btl,
		bin.recoverprog, strconv.FormatUint(seed, 10))
	cmd.Env = testutil.CleanEnv()
	j := startOn(t, cmd, cpus)
	// The round's failed checks, reported together with the job's output
	// once the round is over.
	var problems []string
	errorf := func(format string, a ...any) {
		r.failed = true
		problems = append(problems, fmt.Sprintf(format, a...))
	}
	defer func() {
		if len(problems) > 0 {
			t.Errorf("%d ranks over %s, seed %d, victim rank %d:\n%s\nstdout:\n%s\nstderr:\n%s",
				np, btl, seed, victim, strings.Join(problems, "\n"), j.Stdout, j.Stderr)
		}
	}()
	pids := map[int]int{}
	var job string
	switch awaitOutput(j, 30*time.Second, func(stdout string) bool {
		for _, m := range readyLine.FindAllStringSubmatch(stdout, -1) {
			rank, _ := strconv.Atoi(m[1])
			pids[rank], _ = strconv.Atoi(m[2])
			job = m[3]
		}
		return len(pids) == np
	}) {
	case outputEnded:
		errorf("the job ended (status %d) before every rank was ready", j.Code)
		return r
	case outputLate:
		errorf("%d of %d ranks ready within 30 s", len(pids), np)
		return r
	}
	groups := testutil.RankGroups(t, j.Cmd.Process.Pid)
	time.Sleep(time.Duration(rand.Int64N(int64(killWithin) + 1)))
	// The clock starts before the kill: on a loaded machine this goroutine
	// may not run again until the survivors have failed.
	killed := time.Now()
	syscall.Kill(pids[victim], syscall.SIGKILL)
	select {
	case <-j.Done:
		r.end = time.Since(killed)
	case <-time.After(liveBound):
		r.hung = true
		r.end = time.Since(killed)
		// The survivors' stacks show where they wait: Go dumps them on
		// SIGQUIT, and mpirun passes them on as it ends.
		for rank, pid := range pids {
			if rank != victim {
				syscall.Kill(pid, syscall.SIGQUIT)
			}
		}
		select {
		case <-j.Done:
		case <-time.After(5 * time.Second):
			j.Cmd.Process.Kill()
			<-j.Done
		}
		errorf("the job did not end within %v of the kill", liveBound)
	}

	// Every survivor's first error is ErrProcFailed or ErrRevoked (the
	// program checks the class), within errorBound of the kill.
	failedAt := map[int]time.Duration{}
	r.ops = map[string]int{}
	for _, m := range failedLine.FindAllStringSubmatch(j.Stdout.String(), -1) {
		rank, _ := strconv.Atoi(m[1])
		ns, _ := strconv.ParseInt(m[2], 10, 64)
		if _, dup := failedAt[rank]; dup {
			errorf("rank %d failed twice", rank)
		}
		failedAt[rank] = time.Unix(0, ns).Sub(killed)
		r.ops[m[4]]++
		if m[3] != "MPI_ERR_PROC_FAILED" && m[3] != "MPI_ERR_REVOKED" {
			errorf("rank %d's %s failed with %s", rank, m[4], m[3])
		}
	}
	var survivors []string
	for rank := 0; rank < np; rank++ {
		if rank == victim {
			if _, ok := failedAt[rank]; ok {
				errorf("the victim said it failed")
			}
			continue
		}
		survivors = append(survivors, strconv.Itoa(rank))
		d, ok := failedAt[rank]
		switch {
		case !ok:
			errorf("survivor %d printed no failure", rank)
		case d < 0:
			errorf("survivor %d failed %v before the kill", rank, -d)
		case d > errorBound:
			errorf("survivor %d failed %v after the kill, want within %v", rank, d, errorBound)
		}
		r.lastErr = max(r.lastErr, d)
	}
	// Every survivor shrank the world to the others, and its Allreduces
	// on them gave the right sums (the program checks them).
	recovered := recoveredLine.FindAllStringSubmatch(j.Stdout.String(), -1)
	if len(recovered) != np-1 {
		errorf("%d survivors recovered, want %d", len(recovered), np-1)
	}
	for _, m := range recovered {
		if m[2] != strconv.Itoa(np-1) || m[3] != strings.Join(survivors, ",") {
			errorf("a survivor's shrunk communicator has %s ranks, world ranks %s; want %d, %s", m[2], m[3], np-1, strings.Join(survivors, ","))
		}
	}
	if f := finalizedLine.FindAllStringSubmatch(j.Stdout.String(), -1); len(f) != np-1 {
		errorf("%d survivors finalized, want %d", len(f), np-1)
	}
	// mpirun reports the victim's death and no other.
	for _, m := range mpirunLine.FindAllStringSubmatch(j.Stderr.String(), -1) {
		if m[1] != strconv.Itoa(victim) {
			errorf("mpirun reported another rank: %s", m[0])
		}
	}
	if !r.hung && j.Code != 128+int(syscall.SIGKILL) {
		errorf("mpirun exited %d, want the victim's status %d", j.Code, 128+int(syscall.SIGKILL))
	}
	want := fmt.Sprintf(`(?m)^mpirun: rank %d \(pid %d\) exited on signal 9 \(Killed\)`, victim, pids[victim])
	if !regexp.MustCompile(want).MatchString(j.Stderr.String()) {
		errorf("mpirun did not report rank %d (pid %d) killed by signal 9", victim, pids[victim])
	}
	if len(groups) != np {
		errorf("found %d rank groups, want %d", len(groups), np)
	}
	if left := waitGone(t, groups); len(left) > 0 {
		errorf("processes are left: %s", strings.Join(left, ", "))
		for _, g := range groups {
			syscall.Kill(-g, syscall.SIGKILL)
		}
	}
	if files := waitNoFiles(t, job); len(files) > 0 {
		errorf("files are left in /dev/shm: %v", files)
	}
	return r
}
