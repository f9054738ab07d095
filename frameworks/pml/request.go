package pml

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/gompi/gompi/mca"
	"github.com/gompi/gompi/mpierr"
	"github.com/gompi/gompi/rte"
)

// Status describes a completed receive (or probe).
type Status struct {
	// Source is the sender's rank in the communicator, and Tag the
	// message's tag.
	Source, Tag int
	// Count is the number of bytes received (for a probe: the message's
	// length). A truncated receive counts the bytes that fit.
	Count int
	// Cancelled is set for a receive that Cancel removed before it matched.
	Cancelled bool
	// Err is the operation's error, nil on success; Wait returns it too.
	Err error
}

// Request is a non-blocking operation. Its state is one atomic flag: the PML
// writes the status and then sets the flag; waiters spin on the instance's
// progress and read the flag, then the status. A request is safe to wait on
// and test from several goroutines.
//
// Requests are plain Go objects: nothing needs to be freed. A nil *Request is
// an inactive request (MPI_REQUEST_NULL): it is always complete, with an empty
// status.
type Request struct {
	done   atomic.Bool
	status Status
	eng    *Engine
	ops    RequestOps
	onDone func()
}

// RequestOps is implemented by a PML for the requests it can cancel.
type RequestOps interface {
	// Cancel removes the request if it has not matched yet, completing it
	// with Status.Cancelled, and reports whether it did.
	Cancel() bool
}

// Init prepares a request for a PML: eng is the instance's engine, ops its
// cancel hook (nil for none). It also resets a request the PML reuses.
func (r *Request) Init(eng *Engine, ops RequestOps) {
	r.done.Store(false)
	r.status = Status{}
	r.eng, r.ops, r.onDone = eng, ops, nil
}

// OnComplete sets a function that Complete calls after the request is done
// (the PML uses it to give back buffered-send space). Set it before the
// request can complete.
func (r *Request) OnComplete(f func()) { r.onDone = f }

// Complete is called by the PML, once: it records the status and marks the
// request done.
func (r *Request) Complete(st Status) {
	// Read the hook first: once done is set, a waiter may reuse r.
	f := r.onDone
	r.status = st
	r.done.Store(true)
	if f != nil {
		f()
	}
}

// Engine returns the engine the request waits on (nil for a nil request).
func (r *Request) Engine() *Engine {
	if r == nil {
		return nil
	}
	return r.eng
}

// Done reports whether the request has completed, without progressing.
func (r *Request) Done() bool { return r == nil || r.done.Load() }

// Status returns the status of a completed request; before completion its Err
// has class ErrPending.
func (r *Request) Status() Status {
	if r == nil {
		return Status{Source: AnySource, Tag: AnyTag}
	}
	if !r.done.Load() {
		return Status{Source: AnySource, Tag: AnyTag, Err: mpierr.Errorf(mpierr.ErrPending, "mpi: request still pending")}
	}
	return r.status
}

// Test progresses once if the request is not complete, and reports whether it
// is now; the status and error are those of a completed request.
func (r *Request) Test() (Status, bool, error) {
	if r == nil {
		return r.Status(), true, nil
	}
	if !r.done.Load() {
		r.eng.Progress()
		if !r.done.Load() {
			return Status{}, false, nil
		}
	}
	return r.status, true, r.status.Err
}

// Wait waits for the request to complete and returns its status and error.
// If the job is lost while waiting (the launcher went away, a rank failed),
// it returns an error of class ErrProcAborted instead.
func (r *Request) Wait() (Status, error) { return r.WaitContext(nil) }

// WaitContext is Wait that gives up when ctx ends first: it then returns an
// error that wraps ctx.Err() and has class ErrPending. The request is still
// pending: wait for it again, or Cancel it if it is a receive (its buffer
// belongs to gompi until it completes). A nil ctx never ends.
func (r *Request) WaitContext(ctx context.Context) (Status, error) {
	if r == nil {
		return r.Status(), nil
	}
	if !r.done.Load() {
		if err := r.eng.wait(ctx, &r.done); err != nil {
			return Status{Source: AnySource, Tag: AnyTag, Err: err}, err
		}
	}
	return r.status, r.status.Err
}

// Cancel cancels a receive that has not matched yet: it then completes with
// Status.Cancelled set and no error. It reports whether it cancelled. Sends,
// and receives that have matched, are not cancelled; wait for them.
func (r *Request) Cancel() bool {
	if r == nil || r.done.Load() || r.ops == nil {
		return false
	}
	return r.ops.Cancel()
}

// Message is a message taken out of matching by a matched probe; only Mrecv
// or Imrecv with it can receive it, once.
type Message struct {
	// State is the PML's record of the message; nil once received.
	State any
	// Comm is the communicator the message arrived on.
	Comm   *Comm
	noProc bool
}

// NoProcMessage returns the message a matched probe of ProcNull finds
// (MPI_MESSAGE_NO_PROC): receiving it completes at once with an empty
// status.
func NoProcMessage() *Message { return &Message{noProc: true} }

// IsNoProc reports whether m is a ProcNull message.
func (m *Message) IsNoProc() bool { return m.noProc }

// Engine is an instance's progress engine and wait loop: it calls the PML's
// Progress and, when nothing moves, spins a little and then yields. The yield
// is to other goroutines first (goroutine ranks, the BTLs' goroutines), then
// to other processes too (oversubscribed nodes), because a rank that spins on
// a core another rank needs delays the very message it waits for.
type Engine struct {
	progress func() int
	yield    bool
	lost     <-chan struct{}
}

// Budgets of the wait loop, in idle passes (a pass is one Progress that
// moved nothing, tens to hundreds of nanoseconds).
const (
	spinPasses   = 16   // pure spinning before the first yield, when yielding
	goschedPass  = 1024 // goroutine yields only, then process yields too
	noYieldEvery = 256  // without yielding, still let the Go scheduler in now and then
	lostEvery    = 64   // how often a wait checks that the job is still there
)

// NewEngine makes an instance's engine around progress, reading
// mpi_yield_when_idle; rt tells how many ranks share this node and when the
// job is lost. rt may be nil (tests of a PML alone).
func NewEngine(b *mca.Base, rt *rte.Runtime, progress func() int) *Engine {
	e := &Engine{progress: progress}
	mode := int64(YieldAuto)
	if b != nil {
		mode = b.Lookup(YieldParam).Int()
	}
	local := 1
	if rt != nil {
		local = rt.Job().LocalSize
		e.lost = rt.Lost()
	}
	switch mode {
	case YieldYes:
		e.yield = true
	case YieldAuto:
		// The node's cores, not this process's share of them: a rank bound
		// to one core by mpirun sees NumCPU() == 1 though its peers have
		// cores of their own. Goroutine ranks count as local ranks too.
		e.yield = local > nodeCPUs()
	}
	return e
}

// nodeCPUs counts the machine's online CPUs, whatever this process's
// affinity.
func nodeCPUs() int {
	b, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err != nil {
		return runtime.NumCPU()
	}
	n := 0
	for _, r := range strings.Split(strings.TrimSpace(string(b)), ",") {
		lo, hi, isRange := strings.Cut(r, "-")
		a, err1 := strconv.Atoi(lo)
		z, err2 := strconv.Atoi(hi)
		switch {
		case err1 != nil:
			return runtime.NumCPU()
		case !isRange:
			n++
		case err2 != nil || z < a:
			return runtime.NumCPU()
		default:
			n += z - a + 1
		}
	}
	return max(n, 1)
}

// Yields reports whether waits yield the processor when idle.
func (e *Engine) Yields() bool { return e.yield }

// Progress progresses the instance once.
func (e *Engine) Progress() int { return e.progress() }

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

// Idle is one step of a wait loop that found nothing to do; pass counts the
// idle passes so far (the caller keeps it, starting at 0).
func (e *Engine) Idle(pass *int) {
	*pass++
	n := *pass
	if !e.yield {
		if n%noYieldEvery == 0 {
			runtime.Gosched()
		}
		return
	}
	if n < spinPasses {
		return
	}
	runtime.Gosched()
	if n >= goschedPass {
		// Gosched does not let another process run: sched_yield does.
		unix.Syscall(unix.SYS_SCHED_YIELD, 0, 0, 0)
	}
}

// Until progresses until cond returns true, ctx ends, or the job is lost.
func (e *Engine) Until(ctx context.Context, cond func() bool) error {
	pass := 0
	for i := 1; !cond(); i++ {
		if i%lostEvery == 0 {
			if err := e.check(ctx); err != nil {
				return err
			}
		}
		if e.progress() > 0 {
			pass = 0
			continue
		}
		e.Idle(&pass)
	}
	return nil
}

// wait is Until for a request's flag, without a closure on the hot path.
// The first check of ctx and of the job comes after a few passes, so that an
// operation that completes at once costs nothing more.
func (e *Engine) wait(ctx context.Context, done *atomic.Bool) error {
	pass := 0
	for i := 1; !done.Load(); i++ {
		if i%lostEvery == 0 {
			if err := e.check(ctx); err != nil {
				return err
			}
		}
		if e.progress() > 0 {
			pass = 0
			continue
		}
		e.Idle(&pass)
	}
	return nil
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
