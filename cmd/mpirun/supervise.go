package main

// Supervision: the loop that hears of the ranks' exits, aborts and broken
// PMI conversations, of --timeout and of signals to mpirun, and decides when
// the job must end.

import (
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

// exitTimeout is mpirun's exit status when --timeout expires, as timeout(1).
const exitTimeout = 124

// catchSignals makes SIGINT, SIGTERM and SIGHUP to mpirun reasons to end
// the job, which supervise acts on, instead of ending mpirun at once. It
// comes before the first rank starts, so that a signal during start-up ends
// the job as one later does. The caller stops it (signal.Stop) at its end.
func catchSignals() chan os.Signal {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	return sigs
}

// supervise serves the job until every rank has been reaped. It hears of
// the ranks' exits, aborts and broken PMI conversations, of --timeout and of
// the signals sigs caught, and ends the job (terminateAll) at the first
// failure, unless it is a death that --enable-recovery survives. It returns
// mpirun's own reason to end the job (a timeout, a signal; nil when none)
// and the status of the first death the job survived (0 when none). It
// comes once every rank has started: --timeout counts from then.
func (j *job) supervise(sigs <-chan os.Signal) (*failure, int) {
	var timeout <-chan time.Time
	if j.o.timeout > 0 {
		t := time.NewTimer(time.Duration(j.o.timeout * float64(time.Second)))
		defer t.Stop()
		timeout = t.C
	}

	// What failed is reported once every rank has ended (cause.go): which
	// report arrives first is a race, and the first is not always the cause.
	failed := false
	terminate := func() {
		if !failed {
			failed = true
			go j.terminateAll()
		}
	}
	var own *failure // mpirun's own reason to end the job
	recoveryStatus := 0
	for j.running() > 0 {
		select {
		case ev := <-j.events:
			switch ev.kind {
			case "abort":
				j.mu.Lock()
				j.abortFailureLocked(j.ranks[ev.rank])
				j.mu.Unlock()
				terminate()
			case "pmi-error":
				j.logf("rank %d (pid %d) broke the PMI protocol: %s", ev.rank, j.pid(ev.rank), ev.msg)
			case "exit":
				rs := j.markExited(ev.rank, ev.status)
				// A rank that called Abort exits right after its abort
				// line; let the PMI server finish reading it, so that
				// the abort, not the exit code, is its failure. (A child
				// that inherited the socket can keep it open: wait only
				// briefly.)
				select {
				case <-rs.served:
				case <-time.After(200 * time.Millisecond):
				}
				j.mu.Lock()
				aborted := rs.abort != nil
				if aborted {
					j.abortFailureLocked(rs)
				}
				j.mu.Unlock()
				if aborted {
					terminate()
					continue
				}
				if j.o.recovery && !failed && j.died(ev.rank, ev.status, rs) {
					if recoveryStatus == 0 {
						recoveryStatus = deathStatus(ev.status)
					}
					j.srv.Failed(ev.rank)
					continue
				}
				j.mu.Lock()
				f := j.exitFailureLocked(rs, ev.status, ev.at)
				j.mu.Unlock()
				if f != nil {
					terminate()
				}
			}
		case <-timeout:
			timeout = nil
			if own == nil {
				own = &failure{rank: -1, at: j.tick(), status: exitTimeout,
					how: fmt.Sprintf("timeout after %gs: ending the job (ranks still running: %s)", j.o.timeout, j.stillRunning())}
			}
			terminate()
		case s := <-sigs:
			sig := s.(syscall.Signal)
			if own == nil {
				own = &failure{rank: -1, at: j.tick(), status: 128 + int(sig),
					how: fmt.Sprintf("received signal %d (%s): ending the job", int(sig), signalName(sig))}
			}
			terminate()
		}
	}
	return own, recoveryStatus
}

// died reports whether a rank's exit is a death that --enable-recovery
// survives (a signal, a non-zero code, or no Finalize), and says so.
func (j *job) died(rank int, ws syscall.WaitStatus, rs *rankState) bool {
	var how string
	switch {
	case ws.Signaled():
		how = fmt.Sprintf("exited on signal %d (%s)", int(ws.Signal()), signalName(ws.Signal()))
	case ws.ExitStatus() != 0:
		how = fmt.Sprintf("exited with code %d", ws.ExitStatus())
	case rs.initialized && !rs.finalized:
		how = "exited with code 0 without calling Finalize"
	default:
		return false
	}
	j.logf("rank %d (pid %d) %s; --enable-recovery: the other ranks are told and go on", rank, rs.pid, how)
	return true
}

// deathStatus is mpirun's exit status for a rank's death.
func deathStatus(ws syscall.WaitStatus) int {
	switch {
	case ws.Signaled():
		return 128 + int(ws.Signal())
	case ws.ExitStatus() != 0:
		return ws.ExitStatus()
	}
	return 1
}

// signalName is s's description for mpirun's messages: "Killed",
// "Terminated".
func signalName(s syscall.Signal) string {
	n := s.String()
	if n == "" {
		return "unknown"
	}
	return strings.ToUpper(n[:1]) + n[1:]
}
