package main

import (
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// A reaped rank's group is signalled only while it holds a child of
// mpirun: a group of the same id led by a stranger (the id reused once the
// rank's group emptied) is left alone.
func TestGroupsWithChildren(t *testing.T) {
	// A child of this process leading a group of its own.
	own := exec.Command("sleep", "30")
	own.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := own.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { own.Process.Kill(); own.Wait() }()
	// A stranger: a group leader whose parent is gone (setsid's child,
	// reparented away from this process).
	out, err := exec.Command("sh", "-c", "setsid sleep 30 >/dev/null 2>&1 & echo $!").Output()
	if err != nil {
		t.Fatal(err)
	}
	stranger, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatalf("the stranger's pid: %q", out)
	}
	defer syscall.Kill(stranger, syscall.SIGKILL)
	got := groupsWithChildren([]int{own.Process.Pid, stranger})
	if !slices.Equal(got, []int{own.Process.Pid}) {
		t.Errorf("groupsWithChildren(own %d, stranger %d) = %v, want only own", own.Process.Pid, stranger, got)
	}
}
