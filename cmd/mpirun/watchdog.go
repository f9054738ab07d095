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
// process that holds the read end of a pipe ("lifeline") whose write end
// only mpirun has. mpirun tells it the process group of every rank it
// starts; when the pipe reaches end of file without "done", mpirun is gone
// (kill -9 included) and the watchdog kills every group. A rank's own PMI
// client also notices, but a program that does not speak PMI (a shell
// script) would not.
//
// It is /bin/sh running watchdogScript, or, on a system with no /bin/sh (a
// distroless container), mpirun's own executable running watchdog. The
// shell starts in a fifth of the CPU time of a Go program (0.5 against 2.6
// ms), and the watchdog starts before the ranks, on the cores they start on:
// with mpirun's executable `mpirun -np 2 hello` took 0.5–1 ms longer.
//
// The watchdog is watched in turn: it names itself in ps ("mpirun [watchdog
// of <pid>]"), so that nobody mistakes it for a rank, and when it dies before
// the job's end mpirun says so and starts a new one, which it tells every
// group again.

const watchdogEnv = "GOMPI_MPIRUN_WATCHDOG"

// watchdogShell runs watchdogScript where it exists.
const watchdogShell = "/bin/sh"

// watchdogScript is what watchdog does, in POSIX sh: read "g <pgid>" lines
// until "done" (the job ended: exit) or end of file (mpirun is gone: kill
// every group). A group of 1 or less is never one of mpirun's (kill -- -1
// would signal every process the user may).
const watchdogScript = `trap '' INT TERM HUP PIPE
printf %s ` + watchdogComm + ` > /proc/self/comm
groups=
while read -r word pgid; do
	case $word in
	done) exit 0 ;;
	g) [ "$pgid" -gt 1 ] 2>/dev/null && groups="$groups -$pgid" ;;
	esac
done
[ -z "$groups" ] || kill -s KILL -- $groups
`

// watchdogComm is the watchdog's short name (/proc/<pid>/comm, ps -o comm,
// top): at most 15 bytes.
const watchdogComm = "mpirun-watchdog"

// watchdogNice is the watchdog's nice value: low, since it has nothing
// urgent to do, and its start would otherwise take the cores from the
// ranks starting beside it. Not the lowest: at 19, on two
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

// startWatchdog starts the first watchdog on a goroutine of its own and
// says on the channel when it is up or could not start. The watchdog must
// exist before any rank does, or a kill -9 of mpirun in between leaves
// behind ranks that do not speak PMI (under load, ranks were seen to start
// and print before mpirun had started a watchdog after them). Its start (a
// fork and exec from a thread of its own) runs beside the PMI server's.
func (j *job) startWatchdog() <-chan error {
	up := make(chan error, 1)
	go func() {
		j.wdMu.Lock()
		defer j.wdMu.Unlock()
		up <- j.spawnWatchdogLocked()
	}()
	return up
}

// spawnWatchdogLocked starts a watchdog, tells it every rank's group, and
// watches it. The caller holds wdMu.
func (j *job) spawnWatchdogLocked() error {
	cmd, err := watchdogCommand(watchdogShell)
	if err != nil {
		return fmt.Errorf("watchdog: %w", err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("watchdog: %w", err)
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

// watchdogCommand is the watchdog's command: shell running watchdogScript
// if shell can be run, else mpirun's own executable. argv[0] is what ps
// shows, for both: the watchdog is not one more rank.
func watchdogCommand(shell string) (*exec.Cmd, error) {
	name := fmt.Sprintf("mpirun [watchdog of %d]", os.Getpid())
	if unix.Access(shell, unix.X_OK) == nil {
		return &exec.Cmd{Path: shell, Args: []string{name, "-c", watchdogScript}, Env: []string{}}, nil
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := &exec.Cmd{Path: self, Args: []string{name}, Env: []string{watchdogEnv + "=1", "GOMAXPROCS=1"}}
	if stamp.On() {
		cmd.Env = append(cmd.Env, stamp.Env+"=1", stamp.T0Env+"="+strconv.FormatInt(stamp.Origin(), 10), stamp.WhoEnv+"=watchdog")
		cmd.Stderr = os.Stderr
	}
	return cmd, nil
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

// watchdog runs in the watchdog process where there is no shell for
// watchdogScript; the two do the same.
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
