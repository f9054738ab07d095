package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gompi/gompi/internal/stamp"
)

// The watchdog is mpirun's insurance against its own sudden death: a second
// process, started from mpirun's own executable, that holds the read end of a
// pipe ("lifeline") whose write end only mpirun has. mpirun tells it the
// process group of every rank it starts; when the pipe reaches end of file
// without "done", mpirun is gone (kill -9 included) and the watchdog kills
// every group. A rank's own PMI client also notices, but a program that does
// not speak PMI (a shell script) would not.
//
// The watchdog is watched in turn: it names itself in ps ("mpirun [watchdog
// of <pid>]"), so that nobody mistakes it for a rank, and when it dies before
// the job's end mpirun says so and starts a new one, which it tells every
// group again.

const watchdogEnv = "GOMPI_MPIRUN_WATCHDOG"

// watchdogComm is the watchdog's short name (/proc/<pid>/comm, ps -o comm,
// top): at most 15 bytes.
const watchdogComm = "mpirun-watchdog"

// watchdogNice is the watchdog's nice value: low, since it has nothing
// urgent to do, and its start (a Go runtime's) would otherwise take the
// cores from the ranks starting beside it. Not the lowest: at 19, on two
// cores shared with eight busy processes, the watchdog was still starting
// 4.6 s after mpirun's kill -9 and the ranks lived on; at 10 it ends them
// within a second there, and costs `mpirun -np 2 hello` ~2 ms more (77.3
// against 75.4 ms, 24 runs each).
const watchdogNice = 10

// maxWatchdogRestarts bounds how many times one job replaces its watchdog,
// so that a watchdog that cannot live does not make mpirun spin.
const maxWatchdogRestarts = 100

// watchdogState is mpirun's side of its watchdog; guarded by job.wdMu.
type watchdogState struct {
	w        *os.File // write end of the current watchdog's lifeline
	pid      int
	done     bool // the job has ended: a watchdog's exit is expected
	restarts int
}

// startWatchdog starts the first watchdog, and tells it the group of every
// rank started. It comes right after the ranks' start, not before: its
// start (an exec of mpirun and a Go runtime's start) on mpirun's path, and
// on the cores the ranks start on, made `mpirun -np 2 hello` 0.9 ms (8 %)
// slower (11.25 against 10.33 ms, medians of 30 alternated runs). The
// price is a window of about a millisecond in which a kill -9 of mpirun
// leaves ranks that do not speak PMI behind (gompi ranks end on their own
// when their PMI connection closes).
func (j *job) startWatchdog() error {
	j.wdMu.Lock()
	defer j.wdMu.Unlock()
	return j.spawnWatchdogLocked()
}

// spawnWatchdogLocked starts a watchdog, tells it every rank's group, and
// watches it. The caller holds wdMu.
func (j *job) spawnWatchdogLocked() error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("watchdog: %w", err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("watchdog: %w", err)
	}
	// argv[0] is what ps shows: the watchdog is not one more rank.
	cmd := &exec.Cmd{Path: self, Args: []string{fmt.Sprintf("mpirun [watchdog of %d]", os.Getpid())}}
	cmd.Env = []string{watchdogEnv + "=1"}
	if stamp.On() {
		cmd.Env = append(cmd.Env, stamp.Env+"=1", stamp.T0Env+"="+strconv.FormatInt(stamp.Origin(), 10), stamp.WhoEnv+"=watchdog")
		cmd.Stderr = os.Stderr
	}
	cmd.Stdin = r
	// Its own process group: a ^C meant for mpirun's terminal does not
	// reach it (it holds none of mpirun's output either). Not its own
	// session: where the kernel groups scheduling by session (autogroup),
	// a new session would weigh as much as the whole job and take half the
	// cores from the ranks starting beside it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = startNiced(cmd, watchdogNice)
	r.Close()
	if err != nil {
		w.Close()
		return fmt.Errorf("watchdog: %w", err)
	}
	j.wd.w, j.wd.pid = w, cmd.Process.Pid
	for _, g := range j.groups() {
		fmt.Fprintf(w, "g %d\n", g)
	}
	go j.watchWatchdog(cmd, w)
	return nil
}

// watchWatchdog waits for a watchdog to end; if the job has not ended, the
// watchdog was killed: mpirun says so and starts another.
func (j *job) watchWatchdog(cmd *exec.Cmd, w *os.File) {
	cmd.Wait()
	j.wdMu.Lock()
	defer j.wdMu.Unlock()
	if j.wd.done || j.wd.w != w {
		return
	}
	w.Close()
	j.wd.w = nil
	how := "exited"
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok {
		switch {
		case ws.Signaled():
			how = fmt.Sprintf("was killed by signal %d (%s)", int(ws.Signal()), signalName(ws.Signal()))
		default:
			how = fmt.Sprintf("exited with code %d", ws.ExitStatus())
		}
	}
	if j.wd.restarts >= maxWatchdogRestarts {
		j.logf("warning: the watchdog (pid %d) %s; it was replaced %d times already, so the job goes on without one: if mpirun dies, ranks that do not speak PMI are left behind",
			cmd.Process.Pid, how, j.wd.restarts)
		return
	}
	j.wd.restarts++
	if j.wd.restarts > 1 {
		// One that dies at once should not make mpirun spin.
		time.Sleep(10 * time.Millisecond)
	}
	if err := j.spawnWatchdogLocked(); err != nil {
		j.logf("warning: the watchdog (pid %d) %s, and a new one cannot start (%v): if mpirun dies, ranks that do not speak PMI are left behind",
			cmd.Process.Pid, how, err)
		return
	}
	j.logf("warning: the watchdog (pid %d) %s; started a new one (pid %d)", cmd.Process.Pid, how, j.wd.pid)
}

// registerGroup tells the watchdog about a rank's process group.
func (j *job) registerGroup(pgid int) {
	j.wdMu.Lock()
	defer j.wdMu.Unlock()
	if j.wd.w != nil {
		fmt.Fprintf(j.wd.w, "g %d\n", pgid)
	}
}

// finishWatchdog tells the watchdog that the job ended normally.
func (j *job) finishWatchdog() {
	j.wdMu.Lock()
	defer j.wdMu.Unlock()
	j.wd.done = true
	if j.wd.w != nil {
		io.WriteString(j.wd.w, "done\n")
		j.wd.w.Close()
		j.wd.w = nil
	}
}

// watchdog runs in the watchdog process.
func watchdog(lifeline io.Reader) int {
	stamp.Mark("watchdog up")
	// The main thread's name, which ps -o comm and top show (argv[0] is
	// for ps -f). Best effort: without it the watchdog still works.
	os.WriteFile("/proc/self/comm", []byte(watchdogComm), 0)
	signal.Ignore(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGPIPE)
	var groups []int
	sc := bufio.NewScanner(lifeline)
	for sc.Scan() {
		line := sc.Text()
		if line == "done" {
			return 0
		}
		if s, ok := strings.CutPrefix(line, "g "); ok {
			if pgid, err := strconv.Atoi(s); err == nil && pgid > 1 {
				groups = append(groups, pgid)
			}
		}
	}
	for _, g := range groups {
		syscall.Kill(-g, syscall.SIGKILL)
	}
	return 0
}

// startNiced starts cmd with the given nice value from its first
// instruction: from a thread of its own given that value, which the child
// inherits (a nice set after Start would miss the threads its runtime made
// meanwhile). The thread's value is changed for good, so it stays locked
// and ends with its goroutine.
func startNiced(cmd *exec.Cmd, nice int) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// Best effort: a watchdog at the normal priority still works.
		unix.Setpriority(unix.PRIO_PROCESS, 0, nice) // 0: this thread, on Linux
		done <- cmd.Start()
	}()
	return <-done
}
