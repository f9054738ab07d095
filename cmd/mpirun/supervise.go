package main

// Supervision: the loop that hears of the ranks' exits, aborts and broken
// PMI conversations, of --timeout and of signals to mpirun, and decides when
// the job must end.

import (
	"fmt"
	"strings"
	"syscall"
)

// exitTimeout is mpirun's exit status when --timeout expires, as timeout(1).
const exitTimeout = 124

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

func signalName(s syscall.Signal) string {
	n := s.String()
	if n == "" {
		return "unknown"
	}
	return strings.ToUpper(n[:1]) + n[1:]
}
