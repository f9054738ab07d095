package main

import (
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gompi/gompi/internal/testutil"
)

// TestWatchdogKillsEveryGroup: both forms of the watchdog (the shell
// script, and mpirun's own executable where there is no shell) kill every
// group they were told of when their lifeline ends without "done", skip
// groups that are not one (0 would be the watchdog's own), and leave every
// group alone after "done". Each group is a shell with a child of its own,
// as a rank that does not speak PMI may be.
func TestWatchdogKillsEveryGroup(t *testing.T) {
	forms := []struct {
		name  string
		shell string
	}{
		{"sh", watchdogShell},
		{"mpirun", "/nonexistent/sh"},
	}
	for _, f := range forms {
		for _, done := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/done=%v", f.name, done), func(t *testing.T) {
				cmd, err := watchdogCommand(f.shell)
				if err != nil {
					t.Fatal(err)
				}
				if f.shell != watchdogShell {
					if cmd.Path == watchdogShell {
						t.Fatalf("with no shell the watchdog is %s, want mpirun's executable", cmd.Path)
					}
					cmd.Path = bin.mpirun // not the test binary
				}
				var groups []int
				for range 2 {
					g := exec.Command("sh", "-c", "sleep 60 & sleep 60")
					g.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
					if err := g.Start(); err != nil {
						t.Fatal(err)
					}
					go g.Wait()
					groups = append(groups, g.Process.Pid)
					t.Cleanup(func() { syscall.Kill(-g.Process.Pid, syscall.SIGKILL) })
				}
				cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
				lifeline, err := cmd.StdinPipe()
				if err != nil {
					t.Fatal(err)
				}
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				fmt.Fprintf(lifeline, "g 0\ng x\ng %d\ng %d\n", groups[0], groups[1])
				if done {
					fmt.Fprintf(lifeline, "done\n")
				}
				lifeline.Close()
				waited := make(chan error, 1)
				go func() { waited <- cmd.Wait() }()
				select {
				case err := <-waited:
					if err != nil {
						t.Fatalf("the watchdog ended with %v", err)
					}
				case <-time.After(10 * time.Second):
					cmd.Process.Kill()
					t.Fatalf("the watchdog did not end within 10 s of its lifeline's end")
				}
				alive := liveInGroups(t, groups)
				if done {
					for _, g := range groups {
						if !strings.Contains(strings.Join(alive, " "), fmt.Sprintf("(group %d)", g)) {
							t.Errorf("after done, group %d has no live process (live: %v)", g, alive)
						}
					}
				}
				if !done {
					for deadline := time.Now().Add(5 * time.Second); len(alive) > 0 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
						alive = liveInGroups(t, groups)
					}
					if len(alive) > 0 {
						t.Errorf("processes left after the lifeline ended: %v", alive)
					}
				}
			})
		}
	}
}

// liveInGroups lists the live processes of the groups.
func liveInGroups(t *testing.T, groups []int) []string {
	var alive []string
	for _, p := range testutil.Processes(t) {
		for _, g := range groups {
			if p.Pgid == g && p.State != 'Z' {
				alive = append(alive, fmt.Sprintf("%d (group %d)", p.Pid, g))
			}
		}
	}
	return alive
}
