package main

// Ending: the ranks' process groups signalled and the ranks reaped, with
// what they left behind.

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// killGrace is how long a rank may take to end after SIGTERM before it gets
// SIGKILL; the whole job ends well within two seconds of a failure.
const killGrace = 500 * time.Millisecond

// becomeSubreaper makes mpirun the parent of the processes that ranks leave
// behind, so that reapOrphans can reap them. It comes before the first rank
// starts: what a rank leaves behind before it would go to init.
func becomeSubreaper() {
	// Processes that ranks leave behind are reparented to mpirun rather
	// than to init, so that mpirun can reap them.
	unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
}

// drain ends what is left of the ranks and collects what they said last:
// it kills every rank's group, waits until their output has been forwarded,
// and gives the PMI server a moment to read their last notices. It comes
// after supervise, once every rank has been reaped, and before
// reportFailures, whose verdict rests on those notices.
func (j *job) drain(outputs *sync.WaitGroup) {
	// Ranks' background children and the output they hold go too.
	j.killed = j.signalAll(syscall.SIGKILL)
	outputs.Wait()
	// The notices of lost peers that ranks sent before they ended are read
	// (their PMI conversations are over) unless a child holds the socket.
	// One deadline for all: once it has fired, a rank whose PMI
	// conversation never began (its launch agent failed) is not waited for.
	deadline := time.NewTimer(200 * time.Millisecond)
	defer deadline.Stop()
	for _, rs := range j.ranks {
		select {
		case <-rs.served:
		case <-deadline.C:
			return
		}
	}
}

// groups returns the process groups to signal: every rank's not reaped
// yet (its leader lives, so the id is still its group's), and a reaped
// rank's only while the group holds a child of mpirun (what the rank left
// behind, reparented to mpirun, its subreaper). Once a group's last member
// is gone its id is free: another process may lead a group of that id
// (another job's rank, in a test suite that runs jobs side by side), and a
// kill of it would end a stranger. Under --enable-recovery a dead rank is
// reaped long before the job ends, which makes that window wide.
func (j *job) groups() []int {
	j.mu.Lock()
	var live, reaped []int
	for _, r := range j.ranks {
		switch {
		case r.pid <= 0:
		case r.exited:
			reaped = append(reaped, r.pid)
		default:
			live = append(live, r.pid)
		}
	}
	j.mu.Unlock()
	if reaped = nonEmpty(reaped); len(reaped) > 0 {
		live = append(live, groupsWithChildren(reaped)...)
	}
	return live
}

// nonEmpty returns those of groups that still have a process, zombies
// included: a signal 0 to an empty group fails with ESRCH. An id cannot be
// taken by a new group while a process of the old one is left, so an empty
// group needs no look at /proc, which costs milliseconds on a busy host
// (every process's stat read) at the end of every job.
func nonEmpty(groups []int) []int {
	out := groups[:0:0]
	for _, g := range groups {
		if err := syscall.Kill(-g, 0); err != syscall.ESRCH {
			out = append(out, g)
		}
	}
	return out
}

// groupsWithChildren returns those of groups that hold a child of this
// process, from /proc. A group it cannot tell about is left alone.
func groupsWithChildren(groups []int) []int {
	want := map[int]bool{}
	for _, g := range groups {
		want[g] = true
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	me := os.Getpid()
	var out []int
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // gone meanwhile
		}
		// pid (comm) state ppid pgrp …; comm may hold anything.
		end := bytes.LastIndexByte(stat, ')')
		if end < 0 {
			continue
		}
		f := strings.Fields(string(stat[end+1:]))
		if len(f) < 3 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		pgrp, _ := strconv.Atoi(f[2])
		if ppid == me && want[pgrp] {
			out = append(out, pgrp)
			delete(want, pgrp)
		}
	}
	return out
}

// signalAll sends sig to every rank's process group, and returns the groups
// it signalled. A rank not reaped yet is marked first, so that its death by
// sig is known as mpirun's doing.
func (j *job) signalAll(sig syscall.Signal) []int {
	j.markSignalled(sig)
	gs := j.groups()
	for _, p := range gs {
		syscall.Kill(-p, sig)
	}
	return gs
}

// markSignalled records that every rank not reaped yet is being sent sig.
func (j *job) markSignalled(sig syscall.Signal) {
	at := j.tick()
	j.mu.Lock()
	for _, r := range j.ranks {
		switch {
		case r.pid <= 0 || r.exited:
		case sig == syscall.SIGTERM && r.termAt == 0:
			r.termAt = at
		case sig == syscall.SIGKILL && r.killAt == 0:
			r.killAt = at
		}
	}
	j.mu.Unlock()
}

// terminateAll ends every rank's process group: SIGTERM, then SIGKILL for
// what is still there after a grace period.
func (j *job) terminateAll() {
	j.signalAll(syscall.SIGTERM)
	deadline := time.Now().Add(killGrace)
	for j.running() > 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	j.signalAll(syscall.SIGKILL)
}

// reapOrphans reaps the dead processes that ranks left behind in groups
// (mpirun is their subreaper), until the groups are empty or the time is
// up. It waits for nothing else: the watchdog, told that the job ended,
// exits by itself, and its exit is no reason for mpirun to stay.
func reapOrphans(groups []int, limit time.Duration) {
	deadline := time.Now().Add(limit)
	for {
		for {
			var ws syscall.WaitStatus
			if pid, _ := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil); pid <= 0 {
				break
			}
		}
		if groups = nonEmpty(groups); len(groups) == 0 || !time.Now().Before(deadline) {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// reapAll waits for the ranks that were started.
func (j *job) reapAll() {
	for j.running() > 0 {
		ev := <-j.events
		if ev.kind == "exit" {
			j.markExited(ev.rank, ev.status)
		}
	}
}
