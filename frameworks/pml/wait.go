package pml

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gompi/gompi/mca"
	"github.com/gompi/gompi/mpierr"
	"github.com/gompi/gompi/params"
	"github.com/gompi/gompi/rte"
)

// The parameters of the wait policy, registered with the framework.
const (
	// YieldParam says whether waiting gives the core away.
	YieldParam = "mpi_yield_when_idle"
	// SpinParam, YieldForParam and SleepMaxParam are the policy's budgets.
	SpinParam     = "mpi_wait_spin_us"
	YieldForParam = "mpi_wait_yield_us"
	SleepMaxParam = "mpi_wait_sleep_max_ms"
)

// Values of mpi_yield_when_idle.
const (
	YieldNo   = 0
	YieldYes  = 1
	YieldAuto = 2
)

var waitParams = []params.Def{{
	Name: YieldParam, Type: params.Enum, Default: "auto", Level: 4, Scope: params.ScopeLocal,
	Values: []params.EnumValue{{Value: YieldNo, Name: "no"}, {Value: YieldYes, Name: "yes"}, {Value: YieldAuto, Name: "auto"}},
	Help: "What a rank waiting for communication does when nothing moves: yes (poll for " + SpinParam +
		", then poll and yield the core for " + YieldForParam + ", then sleep until a peer or the kernel wakes it), " +
		"no (poll without end: the lowest latency where every rank has a core of its own), or auto (yes when the " +
		"node runs more ranks than it has cores, as mpirun tells each rank)",
}, {
	Name: SpinParam, Type: params.Uint, Default: "0", Level: 5,
	Help: "Microseconds a waiting rank polls before it starts yielding, when it yields (" + YieldParam + "). " +
		"0 by default: where ranks outnumber cores the peer waited for is likely not running, and polling only " +
		"keeps it off the core (a 4-rank allreduce on 2 cores: 8 µs with 0, 75 µs with 20)",
}, {
	Name: YieldForParam, Type: params.Uint, Default: "500", Level: 5,
	Help: "Microseconds a waiting rank then polls and yields the core between polls, before it sleeps until woken",
}, {
	Name: SleepMaxParam, Type: params.Uint, Default: "100", Level: 6,
	Help: "Longest sleep of a waiting rank, in milliseconds, before it looks by itself (peers and the kernel wake it " +
		"sooner); it bounds how late a sleeping rank notices a peer that died",
}}

// Policy is what a wait does when nothing moves.
type Policy struct {
	// Yield: poll for Spin, then poll and yield for YieldFor, then sleep
	// on the instance's bell, at most SleepMax at a time. Without it a wait
	// polls without end (letting other goroutines in now and then).
	Yield                    bool
	Spin, YieldFor, SleepMax time.Duration
	// Why says how Yield was decided, for logs.
	Why string
}

// Engine is an instance's progress engine and its one wait policy: every
// blocking call of the instance (Recv, Wait*, Probe, the barriers of Init
// and Finalize, every collective) waits through it.
//
// A wait calls the PML's Progress and checks its condition; when nothing
// moves, it follows the Policy. Where ranks have cores of their own it only
// polls: a thread wake-up costs tens of microseconds, more than a small
// message's whole trip. Where they outnumber the cores (mpirun says so) it
// polls briefly, while an answer is likely near, then yields the core
// between polls (sched_yield: another process runs), then sleeps on the
// instance's rte.Bell until a peer, the kernel or another goroutine rings
// it, so that a rank that waits long costs nothing. It does not sleep while
// the PML has output that only this process's progress pushes (busy), since
// nobody would wake it when the transport has room again.
type Engine struct {
	progress func() int
	// extra is the instance's progress beyond the PML's (package mpi's
	// nonblocking collectives), nil until set; pending says whether any of
	// those is in flight (SetBackground).
	extra   atomic.Pointer[func(done *atomic.Uint64) int]
	pending atomic.Pointer[func() bool]
	busy    func() bool
	bell    *rte.Bell
	lost    <-chan struct{}
	policy  Policy
	log     *mca.Logger
	noSleep atomic.Bool // the bell cannot sleep here: only yield
	// fence is a word RingBatch changes with a locked instruction, which
	// orders the batch's plain stores before the bell's look at sleepers.
	fence atomic.Uint64
}

// RingBatch follows requests completed by CompleteBatched: a sleeper
// registers on the bell and then looks at its request, so the requests'
// stores must be seen before the bell is read; the atomic add is the fence
// between them that Complete's locked store gave each request.
func (e *Engine) RingBatch() {
	e.fence.Add(1)
	e.bell.Ring()
}

// Budgets of the polling loop, in idle passes (a pass is one Progress that
// moved nothing, tens to hundreds of nanoseconds).
const (
	noYieldEvery = 256 // when not yielding, still let the Go scheduler in now and then
	lostEvery    = 64  // how often a wait checks that the job is still there
	clockEvery   = 16  // how often the spin phase reads the clock
)

// NewEngine makes an instance's engine around progress (the PML's, which
// moves every transport) and busy (true while the PML holds output only its
// progress can push; nil for none). It reads the wait parameters from b and
// whether the node is oversubscribed from rt, and sleeps on rt's bell. b
// and rt may be nil (a PML tested alone): the defaults then apply, with a
// bell only this process rings.
func NewEngine(b *mca.Base, rt *rte.Runtime, progress func() int, busy func() bool) *Engine {
	e := &Engine{progress: progress, busy: busy}
	p := Policy{YieldFor: 500 * time.Microsecond, SleepMax: 100 * time.Millisecond}
	mode := int64(YieldAuto)
	if b != nil {
		mode = b.Lookup(YieldParam).Int()
		p.Spin = time.Duration(b.Lookup(SpinParam).Uint()) * time.Microsecond
		p.YieldFor = time.Duration(b.Lookup(YieldForParam).Uint()) * time.Microsecond
		p.SleepMax = max(time.Duration(b.Lookup(SleepMaxParam).Uint())*time.Millisecond, time.Millisecond)
		e.log = b.Logger("pml")
	}
	if rt != nil {
		e.bell, e.lost = rt.Bell(), rt.Lost()
	} else {
		e.bell = rte.NewLocalBell(nil)
	}
	switch mode {
	case YieldYes:
		p.Yield, p.Why = true, YieldParam+"=yes"
	case YieldNo:
		p.Why = YieldParam + "=no"
	default:
		if rt != nil {
			j := rt.Job()
			p.Yield = j.Oversubscribed
			p.Why = fmt.Sprintf("%s=auto: oversubscribed %v (decided by %s)", YieldParam, j.Oversubscribed, j.OversubscribedBy)
		} else {
			p.Why = YieldParam + "=auto without a runtime: polling"
		}
	}
	e.policy = p
	if e.log != nil && e.log.V(mca.VerboseComponent) {
		e.log.Log(mca.VerboseComponent, "wait policy", "yield", p.Yield, "spin", p.Spin, "yield_for", p.YieldFor,
			"sleep_max", p.SleepMax, "why", p.Why)
	}
	return e
}

// SetPolicy replaces the policy (tests).
func (e *Engine) SetPolicy(p Policy) { e.policy = p }

// Policy returns the wait policy.
func (e *Engine) Policy() Policy { return e.policy }

// Yields reports whether waits give the core away when idle.
func (e *Engine) Yields() bool { return e.policy.Yield }

// Bell returns the bell the engine's waits sleep on.
func (e *Engine) Bell() *rte.Bell { return e.bell }

// WaitStats are the bell's counters: how often waits slept and how the
// sleeps ended.
type WaitStats = rte.BellStats

// Stats returns the counters of the engine's sleeps.
func (e *Engine) Stats() WaitStats { return e.bell.Stats() }

// Progress progresses the instance once and returns how many things
// happened. When something did and another goroutine sleeps, it wakes it:
// what moved may be what that goroutine waits for.
func (e *Engine) Progress() int {
	n := e.progressAll()
	if n > 0 {
		e.bell.Ring()
	}
	return n
}

// progressAll is the PML's progress and then the extra progress.
func (e *Engine) progressAll() int {
	n := e.progress()
	if f := e.extra.Load(); f != nil {
		n += (*f)(nil)
	}
	return n
}

// SetExtraProgress makes every Progress (and so every wait) also call fn,
// after the PML's: package mpi advances its nonblocking collectives so. fn
// never blocks, returns how many things it moved, and guards itself: any
// goroutine that progresses calls it, and a call may nest in one (fn's own
// sends progress the PML). done is the completion word of the request
// that the calling goroutine waits for or tests (nil for none): fn may
// complete that request with CompleteOwn, which wakes nobody.
func (e *Engine) SetExtraProgress(fn func(done *atomic.Uint64) int) { e.extra.Store(&fn) }

// SetBackground tells the engine how to know that operations are in
// flight that nobody waits for (package mpi's nonblocking collectives), for
// LeaveToBackground.
func (e *Engine) SetBackground(pending func() bool) { e.pending.Store(&pending) }

// LeaveToBackground is called when the program gets the goroutine back
// while operations are in flight (a nonblocking collective's start, the
// end of a wait or a Test): it arms the bell for the progress goroutine
// (rte.Bell.ArmBackground), so that what arrives while the program
// computes wakes it, and makes one pass for what arrived before. Waits and
// Tests disarm it at their start: a program inside a call progresses by
// itself, and the goroutine must then cost it nothing (no wake-up, and no
// ring from peers for every message).
func (e *Engine) LeaveToBackground() {
	p := e.pending.Load()
	if p == nil || !(*p)() {
		return
	}
	if err := e.bell.ArmBackground(); err != nil {
		return // nothing can wake the goroutine: the calls progress alone
	}
	e.Progress()
}

// takeBack disarms what LeaveToBackground armed and reports whether it was
// armed: the program is in a call that progresses by itself.
func (e *Engine) takeBack() bool {
	if !e.bell.BackgroundArmed() {
		return false
	}
	e.bell.DisarmBackground()
	return true
}

// ProgramProgress is one progress of a call that does not wait (a
// request's Test): with the background disarmed meanwhile.
func (e *Engine) ProgramProgress(done *atomic.Uint64) int {
	armed := e.takeBack()
	n := e.progressFor(done)
	if armed {
		e.LeaveToBackground()
	}
	return n
}

// progressFor is Progress for a wait on done: the extra progress first,
// and the PML's only when that did not complete it (a nonblocking
// collective whose peers' parts are all there needs no transport).
func (e *Engine) progressFor(done *atomic.Uint64) int {
	f := e.extra.Load()
	if f == nil || done == nil {
		return e.Progress()
	}
	n := (*f)(done)
	if n == 0 || done.Load() == 0 {
		n += e.progress()
	}
	if n > 0 {
		e.bell.Ring()
	}
	return n
}

// Wake rings the bell: call it after making true a condition that a wait
// (Until, UntilEvent) may be sleeping on, from outside the transports.
func (e *Engine) Wake() { e.bell.Ring() }

// ErrJobLost is wrapped by the errors of waits that end because the job is
// gone: the launcher ended it, or another rank failed.
var ErrJobLost = mpierr.Errorf(mpierr.ErrProcAborted, "the job was aborted (the launcher is gone or another rank failed)")

// Lost returns a non-nil error wrapping ErrJobLost once the job is lost.
func (e *Engine) Lost() error {
	if e.lost == nil {
		return nil
	}
	select {
	case <-e.lost:
		return ErrJobLost
	default:
		return nil
	}
}

// Until progresses until cond returns true, ctx (which may be nil) ends,
// or the job is lost. cond must become true through the instance's progress
// or a completion; anything else that makes it true calls Wake after.
func (e *Engine) Until(ctx context.Context, cond func() bool) error {
	return e.wait(ctx, nil, cond, false)
}

// UntilEvent is Until for a condition that something outside the
// transports makes true and then calls Wake (the launcher's answer to a
// barrier): it sleeps after a short spin even where waits do not yield,
// since polling cannot bring the answer sooner and on a single processor
// would keep the Go scheduler from reading the network that does. It still
// progresses while it waits, so that what peers need from this process
// goes out.
func (e *Engine) UntilEvent(ctx context.Context, cond func() bool) error {
	return e.wait(ctx, nil, cond, true)
}

// waitState is one wait's place in the policy.
type waitState struct {
	passes   int       // idle passes since progress last moved
	since    time.Time // when the first of them ran
	yielding bool      // the spin budget is spent
	sleepy   bool      // a sleep ran out: sleep again without polling first
	check    bool      // check ctx and the job now
}

func (w *waitState) moved() { *w = waitState{} }

// wait is Until, and a request's wait when done is set (then cond is nil:
// no closure on the hot path). The first check of ctx and of the job comes
// after a few passes, so that an operation that completes at once costs
// nothing more.
func (e *Engine) wait(ctx context.Context, done *atomic.Uint64, cond func() bool, event bool) error {
	if e.takeBack() {
		err := e.waitLoop(ctx, done, cond, event)
		e.LeaveToBackground()
		return err
	}
	return e.waitLoop(ctx, done, cond, event)
}

func (e *Engine) waitLoop(ctx context.Context, done *atomic.Uint64, cond func() bool, event bool) error {
	var w waitState
	for i := 1; ; i++ {
		if done != nil {
			if done.Load() != 0 {
				return nil
			}
		} else if cond() {
			return nil
		}
		if w.check || i%lostEvery == 0 {
			w.check = false
			if err := e.check(ctx); err != nil {
				return err
			}
		}
		if e.progressFor(done) > 0 {
			w.moved()
			continue
		}
		e.idle(&w, ctx, done, cond, event)
	}
}

// idle is one step of the policy after a pass that moved nothing.
func (e *Engine) idle(w *waitState, ctx context.Context, done *atomic.Uint64, cond func() bool, event bool) {
	w.passes++
	p := &e.policy
	if !p.Yield && !event {
		if w.passes%noYieldEvery == 0 {
			runtime.Gosched()
		}
		return
	}
	if !w.sleepy {
		if w.passes == 1 {
			w.since = time.Now()
			if w.yielding = p.Spin == 0; !w.yielding {
				return
			}
		}
		if !w.yielding {
			// Spinning: the clock is read only now and then.
			if w.passes%clockEvery != 0 || time.Since(w.since) < p.Spin {
				return
			}
			w.yielding = true
		}
		if p.Yield && time.Since(w.since) < p.Spin+p.YieldFor {
			yield()
			return
		}
	}
	if (e.busy != nil && e.busy()) || e.noSleep.Load() {
		yield()
		return
	}
	ready := func() bool {
		if e.progressAll() > 0 {
			return true
		}
		if done != nil {
			return done.Load() != 0
		}
		return cond()
	}
	wake, err := e.bell.Sleep(ctx, p.SleepMax, ready)
	switch {
	case err != nil:
		// No socket to sleep on: yield from now on, and say so once.
		if !e.noSleep.Swap(true) && e.log != nil {
			e.log.Warn("waits cannot sleep here: they poll and yield instead", "error", err)
		}
	case wake == rte.WakeTimeout:
		w.sleepy, w.check = true, true
	case wake == rte.WakeDone || wake == rte.WakeLost:
		w.check = true
	default:
		w.moved()
	}
}

// yield gives the core away: to the other goroutines of this process, then
// to other processes (Gosched alone does not).
func yield() {
	runtime.Gosched()
	unix.Syscall(unix.SYS_SCHED_YIELD, 0, 0, 0)
}

func (e *Engine) check(ctx context.Context) error {
	if ctx != nil {
		select {
		case <-ctx.Done():
			return mpierr.Errorf(mpierr.ErrPending, "mpi: stopped waiting: %w", ctx.Err())
		default:
		}
	}
	if err := e.Lost(); err != nil {
		return fmt.Errorf("mpi: wait: %w", err)
	}
	return nil
}
