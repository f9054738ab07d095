package pml

import (
	"context"
	"sync/atomic"

	"github.com/gompi/gompi/mpierr"
	"github.com/gompi/gompi/release"
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

// Envelope is what a blocking receive reports besides its error: the
// Status fields a receive that returns sets. It is a struct of its own, not
// a Status, because the Go compiler keeps structs of up to four fields in
// registers and moves larger ones through memory, where a Status built a
// word at a time and copied 16 bytes at a time stalls store forwarding:
// that cost the 8-byte receive path ~25 % of its time.
type Envelope struct {
	Source, Tag, Count int
}

// set copies *from into s a field at a time. A Status is too large for the
// compiler to keep in registers: assigned whole, it is built a word at a time
// in one temporary and copied 16 bytes at a time into the next, and each
// such copy of words just stored stalls store forwarding (~4 ns). The
// request paths move statuses with set, and pass it a pointer because a
// Status argument to an inlined call is itself copied whole.
func (s *Status) set(from *Status) {
	s.Source, s.Tag, s.Count, s.Cancelled, s.Err = from.Source, from.Tag, from.Count, from.Cancelled, from.Err
}

// Request is a non-blocking operation. Its state is one atomic flag: the PML
// writes the status and then sets the flag; waiters progress the instance
// (wait.go's policy: spin, yield, sleep) and read the flag, then the status.
// A request is safe to test from several goroutines; one goroutine waits on
// it (MPI's rule too: the Wait that returns it frees it, see below).
//
// Nothing needs to be freed, but, as MPI_Wait does, a Wait that returns a
// completed request frees it: the PML may then hand the same object out
// again for a later operation (its free lists keep Isend and Irecv from
// allocating). Do not use a request after a Wait on it has returned, as
// MPI's handle is MPI_REQUEST_NULL then; Test, Status and Done do not free
// it, so that a Wait after a Test still works. A program that completes
// requests with Test alone frees each with Free once Test reports it
// complete (MPI_Test's own freeing), or leaves it to the collector. A nil
// *Request is an inactive request (MPI_REQUEST_NULL): it is always
// complete, with an empty status.
type Request struct {
	done   atomic.Uint64 // 1 when complete
	status Status
	eng    *Engine
	ops    RequestOps
	onDone func()
	// owner takes the request back once a Wait has returned it; nil for
	// requests that are not on a free list, or that the PML still refers
	// to.
	owner Recycler
	// freed is set by the Wait or Free that gave the request back, so
	// that a second Wait on it (a misuse: MPI_Wait frees) fails instead of
	// returning a stale status; a later reuse clears it.
	freed bool
	// persistent is what stands behind a persistent request (Start), nil
	// for others.
	persistent Persistent
}

// Persistent is what stands behind a persistent request (package mpi's
// persistent collectives, MPI_Allreduce_init): Start begins its next run,
// which completes the request; Free releases it. A persistent request is
// never freed by a Wait: it is inactive between runs, and Wait on it then
// returns at once with the last run's status.
type Persistent interface {
	Start(r *Request) error
	Free() error
}

// SetPersistent makes r persistent, behind p, and inactive (complete, with
// an empty status) until its first Start.
func (r *Request) SetPersistent(eng *Engine, p Persistent) {
	r.InitDone(eng, Status{Source: AnySource, Tag: AnyTag}, nil)
	r.persistent = p
	release.Store(&r.done, doneReported)
}

// Values of Request.done past 0 (pending): complete, and, for a persistent
// request, complete and returned to the program by a Wait or Test, which
// makes it inactive until its next Start (MPI's rule: Waitany and Testany
// pass an inactive request over, where a completed one not yet returned is
// still active).
const (
	doneComplete = 1
	doneReported = 2
)

// reported marks a persistent request's completion as returned to the
// program (a Wait or Test returned it complete). The program's goroutine
// calls it; a plain store, as Restart's.
func (r *Request) reported() {
	if r.persistent != nil && r.done.Load() == doneComplete {
		release.Store(&r.done, doneReported)
	}
}

// Active reports whether r is an active request in MPI's sense, the ones
// Waitany and Testany look at: not nil (MPI_REQUEST_NULL), not freed by the
// Wait that returned it, and, when persistent, started since a Wait or Test
// last returned it complete.
func (r *Request) Active() bool {
	return r != nil && !r.freed && r.done.Load() != doneReported
}

// Persistent reports whether r is a persistent request.
func (r *Request) Persistent() bool { return r != nil && r.persistent != nil }

// Start begins the next run of a persistent request (MPI_Start). The
// request must be inactive: never started, or its last run complete.
func (r *Request) Start() error {
	switch {
	case r == nil || r.persistent == nil:
		return mpierr.Errorf(mpierr.ErrRequest, "pml: Start of a request that is not persistent: start the requests that an ...Init call returned")
	case r.done.Load() == 0:
		return mpierr.Errorf(mpierr.ErrRequest, "pml: Start of a persistent request whose last run is not complete: Wait for it first")
	}
	return r.persistent.Start(r)
}

// Free releases the request (MPI_Request_free). A persistent request must
// be inactive, and it cannot be started again. Any other request must be
// complete: Free then gives it back as the Wait that returned it would, so
// that a program that polls with Test and never Waits has its operations'
// requests (and a nonblocking collective's run) reused instead of left to
// the collector. Unlike MPI, a pending request cannot be freed: a receive
// freed before it completes would land in memory the program no longer
// watches, and a send's completion could not be known.
func (r *Request) Free() error {
	switch {
	case r == nil:
		return mpierr.Errorf(mpierr.ErrRequest, "pml: Free of a nil request (MPI_REQUEST_NULL): there is nothing to free")
	case r.freed:
		return mpierr.Errorf(mpierr.ErrRequest, "pml: Free of a request that a Wait or Free already freed: free a request once")
	case r.persistent != nil:
		if r.done.Load() == 0 {
			return mpierr.Errorf(mpierr.ErrRequest, "pml: Free of a persistent request whose last run is not complete: Wait for it first")
		}
		p := r.persistent
		r.persistent, r.freed = nil, true
		return p.Free()
	case r.done.Load() == 0:
		return mpierr.Errorf(mpierr.ErrRequest, "pml: Free of a request that is still pending: Wait for it, or Test until it is complete and then Free it")
	}
	if r.owner == nil {
		r.freed = true
		return nil
	}
	// release marks it freed before giving it back: once given back it
	// may be another operation's at once.
	r.release()
	return nil
}

// Recycler is implemented by a PML's requests that go back to a free list:
// Recycle is called once, by the Wait that returned the request completed.
type Recycler interface {
	Recycle()
}

// SetRecycler makes the Wait that returns r completed give it back to o.
// The PML calls it before Complete, and only once nothing of its own
// refers to r any more: after Complete the waiter may recycle r at once.
func (r *Request) SetRecycler(o Recycler) { r.owner = o }

// release hands a completed request back to its free list, once.
func (r *Request) release() {
	if o := r.owner; o != nil {
		r.owner = nil
		r.freed = true
		o.Recycle()
	}
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
	// Nobody else sees r yet: a plain store (release.Store; sync/atomic's
	// is a locked exchange, a fence), and only when a reused request is
	// still marked done.
	if r.done.Load() != 0 {
		release.Store(&r.done, 0)
	}
	r.status = Status{}
	r.eng, r.ops, r.onDone, r.owner, r.freed = eng, ops, nil, nil, false
}

// Reuse makes pending again a request that its PML gives out once more
// after a Wait returned it, with the engine and cancel hook it had (the
// PML's free lists are per engine): Init without the stores of what has
// not changed. The status is left as it is: nothing reads it before the
// completion, which writes every field. Each store counts: the next
// locked instruction (the matching lock of the receive posted next) waits
// for every store before it to leave the core.
func (r *Request) Reuse() {
	release.Store(&r.done, 0)
	r.freed = false
}

// Restart makes a complete persistent request active again for its next
// run, keeping what stands behind it.
func (r *Request) Restart() {
	r.status = Status{}
	// Only the program's goroutine that restarts it sees it now: a plain
	// store (sync/atomic's is a locked exchange, a fence).
	release.Store(&r.done, 0)
}

// InitDone prepares a request that is complete already, with st, for the
// Wait that returns it to give back to o (nil for none): a PML's immediate
// operations. Nobody else can see the request yet, so nothing rings.
func (r *Request) InitDone(eng *Engine, st Status, o Recycler) {
	r.status.set(&st)
	r.eng, r.ops, r.onDone, r.owner, r.freed = eng, nil, nil, o, false
	// A request back from a free list is marked done already.
	if r.done.Load() == 0 {
		release.Store(&r.done, doneComplete)
	}
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
	eng := r.eng
	r.status.set(&st)
	r.done.Store(doneComplete)
	if f != nil {
		f()
	}
	// A goroutine that sleeps on this request (or on what f released)
	// while another completed it must wake.
	if eng != nil {
		eng.bell.Ring()
	}
}

// CompleteOwn is Complete called by the goroutine that waits for r or
// tests it (the extra progress's done, SetExtraProgress), which therefore
// sleeps on nothing: done is set with a plain store (release.Store), and
// the bell is not rung. Complete's locked store is what makes a sleeper
// on the bell see the request done or be woken (no lost wake-up); here
// there is none to wake, and the fence cost a nonblocking collective's
// Wait as much as the rest of its bookkeeping.
func (r *Request) CompleteOwn(st Status) { r.completeQuiet(st) }

// completeQuiet records st and marks r done with a plain store, ringing
// nobody: the callers say why nobody needs it.
func (r *Request) completeQuiet(st Status) {
	f := r.onDone
	r.status.set(&st)
	release.Store(&r.done, doneComplete)
	if f != nil {
		f()
	}
}

// CompleteBatched is Complete for one of several requests a PML completes
// in one pass (a run of messages delivered together): done is set with a
// plain store and nobody is rung. The PML must call Engine.RingBatch once
// after the pass, whose one fence and ring stand for all of them: a
// locked store per message was a tenth of a small message's receive.
//
// The status comes as its fields, not as a Status: one passed whole into
// this inlined call was copied through the stack sixteen bytes at a time,
// and each copy of words just stored stalled store forwarding (Status.set),
// 44 % of the samples of ob1's loop over a window of small messages.
func (r *Request) CompleteBatched(source, tag, count int, err error) {
	f := r.onDone
	s := &r.status
	s.Source, s.Tag, s.Count, s.Cancelled, s.Err = source, tag, count, false, err
	release.Store(&r.done, doneComplete)
	if f != nil {
		f()
	}
}

// IsWaited reports whether done, the word an extra progress was given
// (SetExtraProgress), is r's: its caller waits for r or tests it.
func (r *Request) IsWaited(done *atomic.Uint64) bool { return done == &r.done }

// Engine returns the engine the request waits on (nil for a nil request).
func (r *Request) Engine() *Engine {
	if r == nil {
		return nil
	}
	return r.eng
}

// Done reports whether the request has completed, without progressing.
func (r *Request) Done() bool { return r == nil || r.done.Load() != 0 }

// Status returns the status of a completed request; before completion its Err
// has class ErrPending.
func (r *Request) Status() Status {
	if r == nil {
		return Status{Source: AnySource, Tag: AnyTag}
	}
	if r.done.Load() == 0 {
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
	if r.done.Load() == 0 {
		r.eng.ProgramProgress(&r.done)
		if r.done.Load() == 0 {
			return Status{}, false, nil
		}
	}
	r.reported()
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
func (r *Request) WaitContext(ctx context.Context) (st Status, err error) {
	err = r.WaitInto(ctx, &st)
	return st, err
}

// WaitInto is WaitContext that writes the status to *st (when st is not
// nil) instead of returning it: Waitall's statuses.
func (r *Request) WaitInto(ctx context.Context, st *Status) error {
	if r == nil {
		if st != nil {
			*st = r.Status()
		}
		return nil
	}
	if r.freed {
		err := mpierr.Errorf(mpierr.ErrRequest, "pml: Wait on a request that an earlier Wait or Free freed (as MPI_Wait does): wait on a request once")
		if st != nil {
			*st = Status{Source: AnySource, Tag: AnyTag, Err: err}
		}
		return err
	}
	if r.done.Load() == 0 {
		if err := r.eng.wait(ctx, &r.done, nil, false); err != nil {
			if st != nil {
				*st = Status{Source: AnySource, Tag: AnyTag, Err: err}
			}
			return err
		}
	}
	err := r.status.Err
	if st != nil {
		st.set(&r.status)
	}
	r.reported()
	r.release()
	return err
}

// Cancel cancels a receive that has not matched yet: it then completes with
// Status.Cancelled set and no error. It reports whether it cancelled. Sends,
// and receives that have matched, are not cancelled; wait for them.
func (r *Request) Cancel() bool {
	if r == nil || r.done.Load() != 0 || r.ops == nil {
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
