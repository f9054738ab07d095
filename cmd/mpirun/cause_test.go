package main

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
)

// verdictStep is one report mpirun receives in a made-up history.
type verdictStep struct {
	kind string // "exit", "abort", "lost", "term", "kill"
	rank int
	peer int // lost: the peer; abort: the code
	ws   syscall.WaitStatus
	// after lists the steps (by index) that happened before this one in
	// the story the case tells, beyond what every history obeys (see
	// mustFollow): which rank died first is a fact, not a race.
	after []int
}

// mustFollow reports whether step i of steps may arrive only after step k,
// in any history: a rank's notices of lost peers come before its Abort,
// and both before its exit is classified (mpirun reads a rank's PMI
// conversation to its end first); SIGKILL follows SIGTERM; a rank that died
// of mpirun's signal died after it was sent; and the case's own facts.
func mustFollow(steps []verdictStep, i, k int) bool {
	a, b := steps[i], steps[k]
	for _, x := range a.after {
		if x == k {
			return true
		}
	}
	own := func(kind string) bool { return b.kind == kind && b.rank == a.rank }
	hasKill := false
	for _, s := range steps {
		hasKill = hasKill || s.kind == "kill"
	}
	switch a.kind {
	case "abort":
		return own("lost")
	case "exit":
		switch {
		case own("lost") || own("abort"):
			return true
		case a.ws.Signaled() && a.ws.Signal() == syscall.SIGTERM:
			return b.kind == "term"
		case a.ws.Signaled() && a.ws.Signal() == syscall.SIGKILL && hasKill:
			return b.kind == "kill"
		}
	case "kill":
		return b.kind == "term"
	}
	return false
}

// failureStep reports whether step s is a rank's own failure (an Abort, or
// an exit that mpirun's signals do not explain), after which mpirun may
// signal the job.
func failureStep(s verdictStep) bool {
	switch {
	case s.kind == "abort":
		return true
	case s.kind != "exit":
		return false
	case s.ws.Signaled():
		return s.ws.Signal() != syscall.SIGTERM
	}
	return s.ws.ExitStatus() != 0
}

// arrivalOrders calls fn with every order in which steps can arrive: every
// permutation that keeps mustFollow, with mpirun's SIGTERM only after a
// failure it reacts to, until fn returns false. It returns how many orders
// it gave fn.
func arrivalOrders(steps []verdictStep, fn func(order []int) bool) int {
	n, count := len(steps), 0
	follows := make([][]bool, n)
	for i := range follows {
		follows[i] = make([]bool, n)
		for k := range follows[i] {
			follows[i][k] = k != i && mustFollow(steps, i, k)
		}
	}
	used := make([]bool, n)
	order := make([]int, 0, n)
	var rec func(failed bool) bool
	rec = func(failed bool) bool {
		if len(order) == n {
			count++
			return fn(order)
		}
	next:
		for i := range steps {
			if used[i] || steps[i].kind == "term" && !failed {
				continue
			}
			for k := range steps {
				if follows[i][k] && !used[k] {
					continue next
				}
			}
			used[i], order = true, append(order, i)
			ok := rec(failed || failureStep(steps[i]))
			used[i], order = false, order[:len(order)-1]
			if !ok {
				return false
			}
		}
		return true
	}
	rec(false)
	return count
}

// TestVerdict decides causes from made-up histories, in every order the
// reports can arrive in: what a case's story leaves open (a survivor's
// abort before the dead rank is reaped, notices of lost peers early or
// late) does not change the verdict.
func TestVerdict(t *testing.T) {
	killed := syscall.WaitStatus(syscall.SIGKILL) // died of SIGKILL
	termed := syscall.WaitStatus(syscall.SIGTERM) // died of SIGTERM
	code := func(c int) syscall.WaitStatus { return syscall.WaitStatus(c << 8) }
	type step = verdictStep
	cases := []struct {
		name   string
		steps  []step
		status int
		want   []string
	}{
		{"the dead rank is reaped first", []step{
			{"exit", 0, 0, killed, nil}, {"term", 0, 0, 0, nil}, {"lost", 1, 0, 0, nil}, {"abort", 1, 1, 0, nil}, {"exit", 1, 0, code(1), nil},
			{"exit", 2, 0, termed, nil}, {"exit", 3, 0, termed, nil},
		}, 137, []string{
			"rank 0 (pid 100, host h) exited on signal 9 (Killed)",
			"rank 1 (pid 101) called Abort with code 1 after losing rank 0: bye",
		}},
		{"a survivor aborts first (the issue's race)", []step{
			{"lost", 1, 0, 0, nil}, {"abort", 1, 1, 0, nil}, {"term", 0, 0, 0, nil}, {"exit", 1, 0, code(1), nil},
			{"lost", 2, 0, 0, nil}, {"abort", 2, 1, 0, nil}, {"lost", 3, 0, 0, nil}, {"abort", 3, 1, 0, nil},
			{"exit", 0, 0, killed, nil}, {"exit", 2, 0, code(1), nil}, {"exit", 3, 0, code(1), nil},
		}, 137, []string{
			"rank 0 (pid 100, host h) exited on signal 9 (Killed)",
			"3 ranks aborted after losing rank 0: ranks 1, 2, 3 (called Abort with code 1)",
		}},
		{"a survivor exits non-zero first, mpirun's SIGTERM ends the rest", []step{
			{"lost", 3, 1, 0, nil}, {"exit", 3, 0, code(2), nil}, {"term", 0, 0, 0, nil},
			{"exit", 1, 0, killed, nil}, {"exit", 0, 0, termed, nil}, {"exit", 2, 0, termed, nil},
		}, 137, []string{
			"rank 1 (pid 101, host h) exited on signal 9 (Killed)",
			"rank 3 (pid 103) exited with code 2 after losing rank 1",
		}},
		{"the blamed rank was alive", []step{
			{"lost", 1, 0, 0, nil}, {"abort", 1, 1, 0, nil}, {"term", 0, 0, 0, nil}, {"kill", 0, 0, 0, nil},
			{"exit", 0, 0, killed, nil}, {"exit", 1, 0, code(1), nil}, {"exit", 2, 0, termed, nil}, {"exit", 3, 0, termed, nil},
		}, 1, []string{
			"rank 1 (pid 101, host h) called Abort with code 1: bye",
		}},
		{"an abort of its own", []step{
			{"abort", 2, 7, 0, nil}, {"term", 0, 0, 0, nil}, {"exit", 2, 0, code(7), nil},
			{"exit", 0, 0, termed, nil}, {"exit", 1, 0, termed, nil}, {"exit", 3, 0, termed, nil},
		}, 7, []string{
			"rank 2 (pid 102, host h) called Abort with code 7: bye",
		}},
		// Rank 3 died first: nothing about rank 2 (its death, or a peer
		// losing it) was known before.
		{"two independent deaths, then their consequences", []step{
			{"exit", 3, 0, code(5), nil}, {"term", 0, 0, 0, nil}, {"lost", 1, 3, 0, nil}, {"exit", 2, 0, killed, []int{0}},
			{"lost", 0, 2, 0, []int{0}}, {"abort", 0, 1, 0, nil}, {"exit", 0, 0, code(1), nil}, {"exit", 1, 0, termed, nil},
		}, 5, []string{
			"rank 3 (pid 103, host h) exited with code 5",
			"rank 2 (pid 102, host h) exited on signal 9 (Killed)",
			"rank 0 (pid 100) called Abort with code 1 after losing rank 2: bye",
		}},
		// Rank 0 noticed first.
		{"ranks that lost each other", []step{
			{"lost", 0, 1, 0, nil}, {"lost", 1, 0, 0, []int{0}}, {"abort", 1, 1, 0, nil}, {"abort", 0, 1, 0, nil},
			{"exit", 0, 0, code(1), nil}, {"exit", 1, 0, code(1), nil},
		}, 1, []string{
			"rank 1 (pid 101, host h) called Abort with code 1: bye",
			"rank 0 (pid 100, host h) called Abort with code 1: bye",
		}},
		{"a rank ignores SIGTERM and needs SIGKILL", []step{
			{"exit", 1, 0, code(3), nil}, {"term", 0, 0, 0, nil}, {"kill", 0, 0, 0, nil}, {"exit", 0, 0, killed, nil},
		}, 3, []string{
			"rank 1 (pid 101, host h) exited with code 3",
		}},
		{"a clean job", []step{{"exit", 0, 0, 0, nil}, {"exit", 1, 0, 0, nil}}, 0, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var bad []string
			written := false // the order the case is written in is among them
			n := arrivalOrders(c.steps, func(order []int) bool {
				inOrder := true
				for k, i := range order {
					inOrder = inOrder && i == k
				}
				written = written || inOrder
				lines, status := replay(c.steps, order)
				if status == c.status && strings.Join(lines, "\n") == strings.Join(c.want, "\n") {
					return true
				}
				var desc []string
				for _, i := range order {
					s := c.steps[i]
					desc = append(desc, fmt.Sprintf("%s %d", s.kind, s.rank))
				}
				bad = append(bad, fmt.Sprintf("arrival order %s: status %d, lines:\n%s", strings.Join(desc, ", "), status, strings.Join(lines, "\n")))
				return len(bad) < 3
			})
			if len(bad) > 0 {
				t.Errorf("want status %d, lines:\n%s\n%s", c.status, strings.Join(c.want, "\n"), strings.Join(bad, "\n"))
			} else if !written {
				t.Errorf("the order the case is written in is not among its %d arrival orders", n)
			}
			t.Logf("%d arrival orders", n)
		})
	}
}

// replay feeds a job of four ranks the steps in order, as mpirun's event
// loop does, and returns its verdict.
func replay(steps []verdictStep, order []int) ([]string, int) {
	j := &job{host: "h"}
	for r := 0; r < 4; r++ {
		j.ranks = append(j.ranks, &rankState{rank: r, pid: 100 + r, initialized: true, finalized: true})
	}
	for _, i := range order {
		s := steps[i]
		switch s.kind {
		case "lost":
			j.peerLost(s.rank, s.peer)
		case "abort":
			rs := j.ranks[s.rank]
			rs.abort = &event{kind: "abort", rank: s.rank, code: s.peer, msg: "bye", at: j.tick()}
			j.abortFailureLocked(rs)
		case "term", "kill":
			sig := syscall.SIGTERM
			if s.kind == "kill" {
				sig = syscall.SIGKILL
			}
			j.markSignalled(sig) // not signalAll: the pids are made up
		case "exit":
			rs := j.markExited(s.rank, s.ws)
			if rs.abort == nil {
				j.exitFailureLocked(rs, s.ws, j.tick())
			}
		}
	}
	return j.verdict(nil)
}
