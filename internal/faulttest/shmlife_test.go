package faulttest

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gompi/gompi/internal/testutil"
)

// shmLifeBound is how long a job may take from the kill to its launcher's
// exit before the round counts as a hang: Hydra and mpirun end a job whose
// rank was killed in well under a second.
const shmLifeBound = 20 * time.Second

// TestShmLife is what a user relies on whatever starts the job: once a job
// whose rank was killed has ended, no file of it remains in /dev/shm. Each
// round holds one rank (shmkill -hold) where its segments' files provably
// exist and kills it there with SIGKILL:
//
//   - init: inside Init, after btl shm's and llp tofu's Query made the
//     control segments and before the modex fence, so that no peer has
//     mapped them (the peers wait in the fence);
//   - coll: past Init, before the held rank (never rank 0) enters the first
//     collective, which the others have entered: rank 0 made the world's
//     coll sm segment and sent its name, and waits for the held rank to map
//     it.
//
// under gompi's mpirun (which removes the job's files as it ends) and
// MPICH's Hydra, when mpiexec.mpich is on PATH (which removes nothing: the
// files must go by themselves, issue [shmlife]). Files are attributed by the
// job id the ranks print, so files of jobs of other tests running meanwhile
// do not count; the test removes what it found left, and kills any rank
// left, after reporting it.
//
// Two rounds of each phase per launcher, one under -short;
// GOMPI_FAULT_ROUNDS=N runs N:
//
//	GOMPI_FAULT_ROUNDS=20 go test -v -run TestShmLife ./internal/faulttest
func TestShmLife(t *testing.T) {
	n := 2
	if testing.Short() {
		n = 1
	}
	if os.Getenv("GOMPI_FAULT_ROUNDS") != "" {
		n = rounds(t)
	}
	launchers := []struct {
		name string
		argv []string
	}{
		{"mpirun", []string{bin.mpirun, "-np", "4"}},
		{"hydra", []string{"mpiexec.mpich", "-n", "4"}},
	}
	var table []string
	for _, l := range launchers {
		for _, phase := range []string{"init", "coll"} {
			ran, left := 0, 0
			t.Run(l.name+"/"+phase, func(t *testing.T) {
				if _, err := exec.LookPath(l.argv[0]); err != nil {
					t.Skipf("needs %s on PATH (MPICH's Hydra: apt-get install mpich)", l.argv[0])
				}
				for ; ran < n; ran++ {
					if shmLifeRound(t, l.argv, phase) {
						left++
					}
				}
			})
			if ran > 0 {
				table = append(table, fmt.Sprintf("%-12s %6d %10d", l.name+"/"+phase, ran, left))
			}
		}
	}
	t.Logf("shared-memory lifetime:\n%-12s %6s %10s\n%s", "launcher", "rounds", "left files", strings.Join(table, "\n"))
}

var shmkillLine = regexp.MustCompile(`(?m)^(query|ready|hold) (\d+) (\d+) (\w+)$`)

// shmLifeRound runs one job under the launcher's argv, kills the held rank
// and checks what remains; it reports every check that fails, and says
// whether files of the job were left.
func shmLifeRound(t *testing.T, argv []string, phase string) (leftFiles bool) {
	t.Helper()
	victim := rand.IntN(4)
	if phase == "coll" {
		victim = 1 + rand.IntN(3) // rank 0 makes the coll sm segment
	}
	cmd := exec.Command(argv[0], append(argv[1:], bin.shmkill, "-hold", strconv.Itoa(victim), phase)...)
	cmd.Env = testutil.CleanEnv()
	j := testutil.Start(t, cmd)
	var problems []string
	errorf := func(format string, a ...any) { problems = append(problems, fmt.Sprintf(format, a...)) }
	pids := map[int]int{}
	var job string
	defer func() {
		if len(problems) > 0 {
			t.Errorf("%s, %s, victim rank %d, job %q:\n%s\nstdout:\n%s\nstderr:\n%s", strings.Join(argv, " "), phase, victim, job,
				strings.Join(problems, "\n"), j.Stdout, j.Stderr)
		}
		// Nothing of the round stays, failed or not: the ranks still
		// running (checked to be shmkill, in case a pid was reused) and
		// the job's files.
		for _, pid := range pids {
			if exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); err == nil && exe == bin.shmkill {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		if job != "" {
			for _, f := range testutil.ShmFiles(t, job, "*") {
				os.Remove(f)
			}
		}
	}()
	held := false
	switch awaitOutput(j, 30*time.Second, func(stdout string) bool {
		for _, m := range shmkillLine.FindAllStringSubmatch(stdout, -1) {
			rank, _ := strconv.Atoi(m[2])
			pid, _ := strconv.Atoi(m[3])
			pids[rank], job = pid, m[4]
			held = held || m[1] == "hold" && rank == victim
		}
		return held && len(pids) == 4
	}) {
	case outputEnded:
		errorf("the job ended (status %d) before rank %d held", j.Code, victim)
		return false
	case outputLate:
		errorf("rank %d did not hold within 30 s, or not every rank said its pid (%v)", victim, pids)
		return false
	}
	if phase == "coll" {
		// Rank 0 gets to its first collective in its own time: wait
		// until it has mapped the segment (a mapping whose name says
		// collsm, named file or not), or a while, and kill then.
		maps := fmt.Sprintf("/proc/%d/maps", pids[0])
		for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
			if b, err := os.ReadFile(maps); err != nil || strings.Contains(string(b), "collsm") {
				break
			}
		}
	}
	t.Logf("%s: killing rank %d (pid %d) of job %s while its job has %v", phase, victim, pids[victim], job, shmNames(t, job))
	syscall.Kill(pids[victim], syscall.SIGKILL)
	select {
	case <-j.Done:
	case <-time.After(shmLifeBound):
		errorf("the job did not end within %v of the kill", shmLifeBound)
		j.Cmd.Process.Kill()
		<-j.Done
	}
	if j.Code == 0 {
		errorf("%s exited 0 after a rank was killed", argv[0])
	}
	if left := waitPidsGone(pids, endBound); len(left) > 0 {
		errorf("ranks left running after the launcher exited: %v", left)
	}
	// Once the launcher has exited and no rank is left, nothing will
	// remove a file of the job: look at once, without waitNoFiles' grace,
	// which would give a sweep of /dev/shm by anything else on the
	// machine time to hide a leak.
	if files := shmNames(t, job); len(files) > 0 {
		errorf("files of the job left in /dev/shm: %v", files)
		return true
	}
	return false
}

// shmNames are the names of the job's files in /dev/shm, without the
// directory.
func shmNames(t *testing.T, job string) []string {
	var names []string
	for _, f := range testutil.ShmFiles(t, job, "*") {
		names = append(names, strings.TrimPrefix(f, "/dev/shm/"))
	}
	return names
}

// waitPidsGone waits, up to within, until none of the pids is a live
// process (a zombie counts as gone: its parent reaps it), and returns those
// that are.
func waitPidsGone(pids map[int]int, within time.Duration) []int {
	deadline := time.Now().Add(within)
	for {
		var left []int
		for _, pid := range pids {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
			if s := string(b); err == nil && s[strings.LastIndexByte(s, ')')+2] != 'Z' {
				left = append(left, pid)
			}
		}
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(10 * time.Millisecond)
	}
}
