package main

// Ending: the ranks' process groups signalled and the ranks reaped, with
// what they left behind.

import (
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
	j.signalAll(syscall.SIGKILL)
	outputs.Wait()
	// The notices of lost peers that ranks sent before they ended are read
	// (their PMI conversations are over) unless a child holds the socket.
	deadline := time.After(200 * time.Millisecond)
	for _, rs := range j.ranks {
		select {
		case <-rs.served:
		case <-deadline:
		}
	}
}

// groups returns the process group of every rank that was started.
func (j *job) groups() []int {
	j.mu.Lock()
	defer j.mu.Unlock()
	var pids []int
	for _, r := range j.ranks {
		if r.pid > 0 {
			pids = append(pids, r.pid)
		}
	}
	return pids
}

// signalAll sends sig to every rank's process group. A rank not reaped yet
// is marked first, so that its death by sig is known as mpirun's doing.
func (j *job) signalAll(sig syscall.Signal) {
	j.markSignalled(sig)
	for _, p := range j.groups() {
		syscall.Kill(-p, sig)
	}
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

// reapOrphans reaps the dead processes that ranks left behind (mpirun is
// their subreaper), until none is left or the time is up.
func reapOrphans(limit time.Duration) {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		switch {
		case err == syscall.ECHILD:
			return
		case pid > 0:
			continue
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
