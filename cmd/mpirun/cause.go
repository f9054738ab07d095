package main

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"syscall"
)

// When a job fails, several things go wrong at once: a rank is killed, its
// peers see it gone and abort, mpirun ends the rest. Which of them mpirun
// hears of first is a race (a survivor's abort may arrive before the dead
// rank is reaped), so mpirun does not report the first one: it collects
// everything until every rank has ended and then decides.
//
//   - A rank that died by a signal mpirun did not send, exited non-zero,
//     exited without Finalize before mpirun signalled it, or called Abort,
//     has failed.
//   - A failure of a rank that had told mpirun it lost a peer (a "peer_lost"
//     notice, or the "lost=" list of its abort) that failed too is a
//     consequence of that peer's failure.
//   - The cause is the failure that is no consequence, earliest first (a
//     rank counts from the moment anyone reported it lost); mpirun's first
//     line names it, and its exit status follows it. The consequences
//     follow, summarised per lost peer.
//   - A rank that ended by mpirun's own SIGTERM or SIGKILL is neither.

// failure is how one rank failed, or why mpirun itself ended the job (rank
// -1: a timeout, a signal).
type failure struct {
	rank   int
	at     int64  // when mpirun learned of it (job.tick)
	how    string // "exited on signal 9 (Killed)", "called Abort with code 3"
	detail string // the abort's message
	status int    // mpirun's exit status if this is the cause
	abort  bool
}

// tick returns the next value of the job's event clock, which orders what
// mpirun learns from its different goroutines.
func (j *job) tick() int64 { return j.clock.Add(1) }

// exitFailure classifies a reaped rank's end; nil when it is no failure
// (a clean exit, or mpirun's own signal). The caller holds j.mu.
func (j *job) exitFailureLocked(rs *rankState, ws syscall.WaitStatus, at int64) *failure {
	if rs.failure != nil {
		return rs.failure
	}
	// Signals count when they were sent before the rank was reaped.
	termed := rs.termAt != 0 && rs.termAt < at
	killed := rs.killAt != 0 && rs.killAt < at
	var f *failure
	switch {
	case ws.Signaled():
		sig := ws.Signal()
		// mpirun sends SIGTERM, then SIGKILL: a rank that died of one it
		// had been sent was ended by mpirun. One that died of SIGKILL when
		// it had only been sent SIGTERM was killed by someone else.
		if (termed || killed) && sig == syscall.SIGTERM || killed && sig == syscall.SIGKILL {
			return nil
		}
		f = &failure{how: fmt.Sprintf("exited on signal %d (%s)", int(sig), signalName(sig)), status: 128 + int(sig)}
	case ws.ExitStatus() != 0:
		// A rank that failed by itself after mpirun's SIGTERM is still a
		// failure (likely a consequence), unless its code says it died of
		// the signal (a shell's 143).
		if code := ws.ExitStatus(); termed && code == 128+int(syscall.SIGTERM) || killed && code == 128+int(syscall.SIGKILL) {
			return nil
		}
		f = &failure{how: fmt.Sprintf("exited with code %d", ws.ExitStatus()), status: ws.ExitStatus()}
	case rs.initialized && !rs.finalized:
		if termed || killed {
			return nil
		}
		f = &failure{how: "exited with code 0 without calling Finalize", status: 1}
	default:
		return nil
	}
	f.rank, f.at = rs.rank, at
	rs.failure = f
	return f
}

// abortFailureLocked records a rank's Abort as its failure (an Abort wins
// over how the rank then exits). The caller holds j.mu.
func (j *job) abortFailureLocked(rs *rankState) *failure {
	if rs.failure != nil && rs.failure.abort {
		return rs.failure
	}
	a := rs.abort
	status := a.code
	if status == 0 {
		status = 1 // an abort is a failure whatever its code
	}
	rs.failure = &failure{rank: rs.rank, at: a.at, how: fmt.Sprintf("called Abort with code %d", a.code),
		detail: a.msg, status: status, abort: true}
	return rs.failure
}

// peerLost records that rank told mpirun it lost peer.
func (j *job) peerLost(rank, peer int) {
	at := j.tick()
	j.mu.Lock()
	defer j.mu.Unlock()
	if rank >= len(j.ranks) || peer >= len(j.ranks) {
		return
	}
	rs := j.ranks[rank]
	for _, p := range rs.lost {
		if p == peer {
			return
		}
	}
	rs.lost = append(rs.lost, peer)
	if j.ranks[peer].namedLost == 0 {
		j.ranks[peer].namedLost = at
	}
}

// verdict decides the cause of the job's end from every failure (and own,
// mpirun's own reason, if any) and returns the lines that report it, cause
// first, and mpirun's exit status; no lines and 0 when nothing failed.
func (j *job) verdict(own *failure) (lines []string, status int) {
	j.mu.Lock()
	defer j.mu.Unlock()
	byRank := map[int]*failure{}
	var all []*failure
	for _, rs := range j.ranks {
		if rs.failure != nil {
			byRank[rs.rank] = rs.failure
			all = append(all, rs.failure)
		}
	}
	// since is when mpirun first knew of a failure: its own report, or an
	// earlier report of the rank as lost by a peer.
	since := func(f *failure) int64 {
		if f.rank >= 0 {
			if n := j.ranks[f.rank].namedLost; n != 0 && n < f.at {
				return n
			}
		}
		return f.at
	}
	// causeOf is the failed peer that f's rank had lost, if any.
	causeOf := func(f *failure) *failure {
		if f.rank < 0 {
			return nil
		}
		for _, p := range j.ranks[f.rank].lost {
			if g := byRank[p]; g != nil && g != f {
				return g
			}
		}
		return nil
	}
	var primaries []*failure
	if own != nil {
		primaries = append(primaries, own)
	}
	for _, f := range all {
		if causeOf(f) == nil {
			primaries = append(primaries, f)
		}
	}
	if len(primaries) == 0 && len(all) > 0 {
		// Every failure blames another (ranks that lost each other): the
		// earliest is the best guess.
		primaries = append(primaries, all...)
	}
	if len(primaries) == 0 {
		return nil, 0
	}
	sort.SliceStable(primaries, func(a, b int) bool { return since(primaries[a]) < since(primaries[b]) })
	cause := primaries[0]
	isPrimary := map[*failure]bool{}
	for _, f := range primaries {
		isPrimary[f] = true
		lines = append(lines, j.describe(f))
	}
	// The consequences, one line per lost peer, in rank order.
	groups := map[int][]*failure{}
	var peers []int
	for _, f := range all {
		if isPrimary[f] {
			continue
		}
		p := causeOf(f).rank
		if groups[p] == nil {
			peers = append(peers, p)
		}
		groups[p] = append(groups[p], f)
	}
	sort.Ints(peers)
	for _, p := range peers {
		fs := groups[p]
		sort.Slice(fs, func(a, b int) bool { return fs[a].rank < fs[b].rank })
		if len(fs) == 1 {
			f := fs[0]
			line := fmt.Sprintf("rank %d (pid %d) %s after losing rank %d", f.rank, j.ranks[f.rank].pid, f.how, p)
			if f.detail != "" {
				line += ": " + f.detail
			}
			lines = append(lines, line)
			continue
		}
		var ranks, hows []string
		seen := map[string]bool{}
		for _, f := range fs {
			ranks = append(ranks, strconv.Itoa(f.rank))
			if !seen[f.how] {
				seen[f.how] = true
				hows = append(hows, f.how)
			}
		}
		lines = append(lines, fmt.Sprintf("%d ranks aborted after losing rank %d: ranks %s (%s)",
			len(fs), p, strings.Join(ranks, ", "), strings.Join(hows, "; ")))
	}
	return lines, cause.status
}

// reportFailures prints the verdict on the job's failures, cause first, and
// returns mpirun's exit status: the cause's, or else recoveryStatus, that of
// a death the job survived under --enable-recovery. It comes after drain:
// the ranks' last notices of lost peers decide which failure is the cause.
func (j *job) reportFailures(own *failure, recoveryStatus int) int {
	lines, status := j.verdict(own)
	for _, l := range lines {
		j.logf("%s", l)
	}
	if status == 0 {
		status = recoveryStatus
	}
	return status
}

// describe is the report of a failure that is no consequence.
func (j *job) describe(f *failure) string {
	if f.rank < 0 {
		return f.how
	}
	host := j.ranks[f.rank].host
	if host == "" {
		host = j.host
	}
	line := fmt.Sprintf("rank %d (pid %d, host %s) %s", f.rank, j.ranks[f.rank].pid, host, f.how)
	if f.detail != "" {
		line += ": " + f.detail
	}
	return line
}
