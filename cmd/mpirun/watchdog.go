package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
)

// The watchdog is mpirun's insurance against its own sudden death: a second
// process, started from mpirun's own executable, that holds the read end of a
// pipe ("lifeline") whose write end only mpirun has. mpirun tells it the
// process group of every rank it starts; when the pipe reaches end of file
// without "done", mpirun is gone (kill -9 included) and the watchdog kills
// every group. A rank's own PMI client also notices, but a program that does
// not speak PMI (a shell script) would not.

const watchdogEnv = "GOMPI_MPIRUN_WATCHDOG"

func (j *job) startWatchdog() error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("watchdog: %w", err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("watchdog: %w", err)
	}
	cmd := exec.Command(self)
	cmd.Env = []string{watchdogEnv + "=1"}
	cmd.Stdin = r
	// Its own session: a ^C meant for mpirun's terminal does not reach it,
	// and it holds none of mpirun's output.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	err = cmd.Start()
	r.Close()
	if err != nil {
		w.Close()
		return fmt.Errorf("watchdog: %w", err)
	}
	go cmd.Wait()
	j.watchdog = w
	return nil
}

// registerGroup tells the watchdog about a rank's process group.
func (j *job) registerGroup(pgid int) {
	if j.watchdog != nil {
		fmt.Fprintf(j.watchdog, "g %d\n", pgid)
	}
}

// finishWatchdog tells the watchdog that the job ended normally.
func (j *job) finishWatchdog() {
	if j.watchdog != nil {
		io.WriteString(j.watchdog, "done\n")
		j.watchdog.Close()
		j.watchdog = nil
	}
}

// watchdog runs in the watchdog process.
func watchdog(lifeline io.Reader) int {
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
