package main

import (
	"strings"
	"syscall"
	"testing"
)

// TestVerdict decides causes from made-up histories, in every order the
// reports can arrive in.
func TestVerdict(t *testing.T) {
	killed := syscall.WaitStatus(syscall.SIGKILL) // died of SIGKILL
	termed := syscall.WaitStatus(syscall.SIGTERM) // died of SIGTERM
	code := func(c int) syscall.WaitStatus { return syscall.WaitStatus(c << 8) }
	type step struct {
		kind string // "exit", "abort", "lost", "term", "kill"
		rank int
		peer int // lost: the peer; abort: the code
		ws   syscall.WaitStatus
	}
	cases := []struct {
		name   string
		steps  []step
		status int
		want   []string
	}{
		{"the dead rank is reaped first", []step{
			{"exit", 0, 0, killed}, {"term", 0, 0, 0}, {"lost", 1, 0, 0}, {"abort", 1, 1, 0}, {"exit", 1, 0, code(1)},
			{"exit", 2, 0, termed}, {"exit", 3, 0, termed},
		}, 137, []string{
			"rank 0 (pid 100, host h) exited on signal 9 (Killed)",
			"rank 1 (pid 101) called Abort with code 1 after losing rank 0: bye",
		}},
		{"a survivor aborts first (the issue's race)", []step{
			{"lost", 1, 0, 0}, {"abort", 1, 1, 0}, {"term", 0, 0, 0}, {"exit", 1, 0, code(1)},
			{"lost", 2, 0, 0}, {"abort", 2, 1, 0}, {"lost", 3, 0, 0}, {"abort", 3, 1, 0},
			{"exit", 0, 0, killed}, {"exit", 2, 0, code(1)}, {"exit", 3, 0, code(1)},
		}, 137, []string{
			"rank 0 (pid 100, host h) exited on signal 9 (Killed)",
			"3 ranks aborted after losing rank 0: ranks 1, 2, 3 (called Abort with code 1)",
		}},
		{"a survivor exits non-zero first, mpirun's SIGTERM ends the rest", []step{
			{"lost", 3, 1, 0}, {"exit", 3, 0, code(2)}, {"term", 0, 0, 0},
			{"exit", 1, 0, killed}, {"exit", 0, 0, termed}, {"exit", 2, 0, termed},
		}, 137, []string{
			"rank 1 (pid 101, host h) exited on signal 9 (Killed)",
			"rank 3 (pid 103) exited with code 2 after losing rank 1",
		}},
		{"the blamed rank was alive", []step{
			{"lost", 1, 0, 0}, {"abort", 1, 1, 0}, {"term", 0, 0, 0}, {"kill", 0, 0, 0},
			{"exit", 0, 0, killed}, {"exit", 1, 0, code(1)}, {"exit", 2, 0, termed}, {"exit", 3, 0, termed},
		}, 1, []string{
			"rank 1 (pid 101, host h) called Abort with code 1: bye",
		}},
		{"an abort of its own", []step{
			{"abort", 2, 7, 0}, {"term", 0, 0, 0}, {"exit", 2, 0, code(7)},
			{"exit", 0, 0, termed}, {"exit", 1, 0, termed}, {"exit", 3, 0, termed},
		}, 7, []string{
			"rank 2 (pid 102, host h) called Abort with code 7: bye",
		}},
		{"two independent deaths, then their consequences", []step{
			{"exit", 3, 0, code(5)}, {"term", 0, 0, 0}, {"lost", 1, 3, 0}, {"exit", 2, 0, killed},
			{"lost", 0, 2, 0}, {"abort", 0, 1, 0}, {"exit", 0, 0, code(1)}, {"exit", 1, 0, termed},
		}, 5, []string{
			"rank 3 (pid 103, host h) exited with code 5",
			"rank 2 (pid 102, host h) exited on signal 9 (Killed)",
			"rank 0 (pid 100) called Abort with code 1 after losing rank 2: bye",
		}},
		{"ranks that lost each other", []step{
			{"lost", 0, 1, 0}, {"lost", 1, 0, 0}, {"abort", 1, 1, 0}, {"abort", 0, 1, 0},
			{"exit", 0, 0, code(1)}, {"exit", 1, 0, code(1)},
		}, 1, []string{
			"rank 1 (pid 101, host h) called Abort with code 1: bye",
			"rank 0 (pid 100, host h) called Abort with code 1: bye",
		}},
		{"a rank ignores SIGTERM and needs SIGKILL", []step{
			{"exit", 1, 0, code(3)}, {"term", 0, 0, 0}, {"kill", 0, 0, 0}, {"exit", 0, 0, killed},
		}, 3, []string{
			"rank 1 (pid 101, host h) exited with code 3",
		}},
		{"a clean job", []step{{"exit", 0, 0, 0}, {"exit", 1, 0, 0}}, 0, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			j := &job{host: "h"}
			for r := 0; r < 4; r++ {
				j.ranks = append(j.ranks, &rankState{rank: r, pid: 100 + r, initialized: true, finalized: true})
			}
			for _, s := range c.steps {
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
			lines, status := j.verdict(nil)
			if status != c.status || strings.Join(lines, "\n") != strings.Join(c.want, "\n") {
				t.Errorf("status %d, lines:\n%s\nwant status %d, lines:\n%s", status, strings.Join(lines, "\n"), c.status, strings.Join(c.want, "\n"))
			}
		})
	}
}
