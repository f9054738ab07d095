package coll

import (
	"sync"

	"github.com/gompi/gompi/frameworks/pml"
	"github.com/gompi/gompi/mpierr"
)

// Coroutine plans a nonblocking collective that runs f, a blocking slot's
// function, as a coroutine: Start and Progress run f until it would wait,
// their caller blocked meanwhile; there f hands control back, and a later
// Progress resumes it once what it waits for is there. f sees
// c through a Comm whose blocking calls (Send, Recv, Sendrecv, and the
// helpers' waits through Awaiter) give the goroutine back instead of
// waiting, whose tags are the run's (NBTag), and that offers no low-latency
// path (LLP: nonblocking sends never take it). The blocking algorithm's
// shape, decision rules and errors are the nonblocking one's.
//
// f must wait only through the Comm and the helpers, never through a
// Request's Wait: a Wait would hold the goroutine that progresses the
// collective until it returns. It must not be a Serial module's.
//
// The coroutine is kept between the runs of a persistent collective, so
// that a Start costs a resume rather than a new coroutine.
func Coroutine(c Comm, a *Args, f Func) (Plan, error) {
	if f == nil {
		return nil, mpierr.Errorf(mpierr.ErrUnsupportedOp, "coll: %s on %s: no blocking algorithm that may run beside other operations fills %s",
			NBName(a.Op), c.Name(), a.Op)
	}
	p := a.coroutines.get()
	p.f, p.a, p.pool = f, a, a.coroutines
	p.comm = coComm{inner: c, p: p}
	// The algorithm's Comm points at the plan's own fields: a coComm
	// value in an interface is an allocation per run.
	p.c = &p.comm
	if _, inter := c.(Inter); inter {
		p.inter = coInter{p.comm}
		p.c = &p.inter
	}
	return p, nil
}

// coPool keeps a communicator's idle coroutines, each parked at the top of
// its loop: a nonblocking collective reuses one instead of making one (a
// new coroutine is a goroutine: more than the rest of a small collective's
// cost). Table.Finalize ends them.
type coPool struct {
	mu    sync.Mutex
	free  []*coPlan
	ended bool // by end: what comes back later is stopped, not kept
}

func (q *coPool) get() *coPlan {
	if q != nil {
		q.mu.Lock()
		if n := len(q.free); n > 0 {
			p := q.free[n-1]
			q.free[n-1] = nil
			q.free = q.free[:n-1]
			q.mu.Unlock()
			return p
		}
		q.mu.Unlock()
	}
	return new(coPlan)
}

// put keeps p, whose coroutine is parked between runs, for a later plan;
// once the pool has ended (its communicator freed before a persistent
// collective's plan), p's coroutine is stopped instead of parked for ever.
func (q *coPool) put(p *coPlan) {
	q.mu.Lock()
	if q.ended {
		q.mu.Unlock()
		p.abandoned = true
		p.stopCoroutine()
		return
	}
	q.free = append(q.free, p)
	q.mu.Unlock()
}

// end stops every idle coroutine.
func (q *coPool) end() {
	q.mu.Lock()
	free := q.free
	q.free, q.ended = nil, true
	q.mu.Unlock()
	for _, p := range free {
		p.abandoned = true
		p.stopCoroutine()
	}
}

// coPlan is a Plan that runs a blocking function as a coroutine.
type coPlan struct {
	f     Func
	a     *Args
	comm  coComm
	inter coInter // comm as an intercommunicator's, when it is one
	c     Comm    // what f sees: &comm or &inter

	next func() (struct{}, bool)
	stop func()
	base int // the run's base tag

	// Between resumes: what the coroutine waits for (nil: nothing, it
	// runs or is done), whether the run is complete, and its error.
	cond     func() bool
	finished bool
	err      error
	// abandoned is set by Free: an Await that resumes returns an error.
	abandoned bool
	// yieldFn is the coroutine's yield, which body receives.
	yieldFn func(struct{}) bool
	// waitReq is, instead of cond, the one request the coroutine waits
	// for (no closure for the commonest wait).
	waitReq *pml.Request
	// pool takes the plan back at Free, its coroutine parked.
	pool *coPool
}

// body is the coroutine: one run of f per resume that Start makes, for as
// long as the plan lives.
func (p *coPlan) body(yield func(struct{}) bool) {
	p.yieldFn = yield
	for {
		p.err = p.f(p.c, p.a)
		p.finished = true
		if !yield(struct{}{}) {
			return
		}
	}
}

func (p *coPlan) Start(tag int) error {
	p.base, p.finished, p.err, p.cond, p.waitReq = tag, false, nil, nil, nil
	if p.next == nil {
		p.next, p.stop = goPull(p.body)
	}
	p.resume()
	return nil
}

// resume runs the coroutine until it waits or finishes its run.
func (p *coPlan) resume() {
	if _, ok := p.next(); !ok && !p.finished {
		p.finished = true
		p.err = mpierr.Errorf(mpierr.ErrIntern, "coll: the coroutine of %s ended without finishing its run", NBName(p.a.Op))
	}
}

func (p *coPlan) Progress() (bool, error) {
	if p.finished {
		return true, p.err
	}
	if p.waitReq != nil && !p.waitReq.Done() || p.cond != nil && !p.cond() {
		return false, nil
	}
	p.cond, p.waitReq = nil, nil
	p.resume()
	return p.finished, p.err
}

func (p *coPlan) Free() {
	if p.finished && p.pool != nil && p.stop != nil {
		// Parked between runs: ready for another plan.
		pool := p.pool
		p.f, p.a, p.comm, p.inter, p.c, p.pool, p.err = nil, nil, coComm{}, coInter{}, nil, nil, nil
		pool.put(p)
		return
	}
	p.abandoned = true
	p.stopCoroutine()
}

func (p *coPlan) stopCoroutine() {
	if p.stop != nil {
		p.stop()
		p.next, p.stop = nil, nil
	}
}

// await gives the goroutine back until cond holds.
func (p *coPlan) await(cond func() bool) error {
	for !cond() {
		p.cond = cond
		if !p.yield() {
			return p.abandonedErr()
		}
	}
	return nil
}

// awaitReq gives the goroutine back until r is complete.
func (p *coPlan) awaitReq(r *pml.Request) error {
	for !r.Done() {
		p.waitReq = r
		if !p.yield() {
			return p.abandonedErr()
		}
	}
	return nil
}

// awaitAll gives the goroutine back until every request of reqs is
// complete.
func (p *coPlan) awaitAll(reqs []*pml.Request) error {
	for _, r := range reqs {
		if err := p.awaitReq(r); err != nil {
			return err
		}
	}
	return nil
}

func (p *coPlan) abandonedErr() error {
	return mpierr.Errorf(mpierr.ErrPending, "coll: a nonblocking collective was abandoned before it completed")
}

// yield hands the goroutine back to Progress; false when the plan was
// freed meanwhile.
func (p *coPlan) yield() bool {
	if p.abandoned {
		return false
	}
	return p.yieldFn(struct{}{})
}

// coComm is what f sees of the communicator during a run.
type coComm struct {
	inner Comm
	p     *coPlan
}

var (
	_ Comm    = coComm{}
	_ Awaiter = coComm{}
)

func (x coComm) Rank() int    { return x.inner.Rank() }
func (x coComm) Size() int    { return x.inner.Size() }
func (x coComm) Name() string { return x.inner.Name() }
func (x coComm) LLP() bool    { return false }

func (x coComm) Await(cond func() bool) error { return x.p.await(cond) }

func (x coComm) AwaitAll(reqs []*pml.Request) error { return x.p.awaitAll(reqs) }

func (x coComm) Isend(buf []byte, dst, tag int) (*pml.Request, error) {
	t, err := runTag(x.p.base, tag)
	if err != nil {
		return nil, err
	}
	return x.inner.Isend(buf, dst, t)
}

func (x coComm) Irecv(buf []byte, src, tag int) (*pml.Request, error) {
	t, err := runTag(x.p.base, tag)
	if err != nil {
		return nil, err
	}
	return x.inner.Irecv(buf, src, t)
}

// wait awaits r and returns its status, as r.Wait would.
func (x coComm) wait(r *pml.Request) (pml.Status, error) {
	if err := x.p.awaitReq(r); err != nil {
		return pml.Status{Err: err}, err
	}
	return r.Wait()
}

func (x coComm) Send(buf []byte, dst, tag int) error {
	r, err := x.Isend(buf, dst, tag)
	if err != nil {
		return err
	}
	_, err = x.wait(r)
	return err
}

func (x coComm) Recv(buf []byte, src, tag int) (pml.Status, error) {
	r, err := x.Irecv(buf, src, tag)
	if err != nil {
		return pml.Status{Err: err}, err
	}
	return x.wait(r)
}

func (x coComm) Sendrecv(sbuf []byte, dst, stag int, rbuf []byte, src, rtag int) (pml.Status, error) {
	rr, err := x.Irecv(rbuf, src, rtag)
	if err != nil {
		return pml.Status{Err: err}, err
	}
	sr, err := x.Isend(sbuf, dst, stag)
	if err != nil {
		rr.Cancel()
		x.wait(rr)
		return pml.Status{Err: err}, err
	}
	if err := x.p.awaitAll([]*pml.Request{sr, rr}); err != nil {
		return pml.Status{Err: err}, err
	}
	_, serr := sr.Wait()
	st, rerr := rr.Wait()
	if rerr == nil {
		rerr = serr
	}
	return st, rerr
}

// coInter is coComm for an intercommunicator.
type coInter struct{ coComm }

func (x coInter) RemoteSize() int { return x.inner.(Inter).RemoteSize() }

// Local is the local group's communicator in the run's tags: its messages
// go through the same window, in the local context.
func (x coInter) Local() Comm { return coComm{inner: x.inner.(Inter).Local(), p: x.p} }

// goPull is iter.Pull for body, on a goroutine of its own: next runs body
// until it yields (or returns: then false), its caller blocked meanwhile;
// stop makes a parked body's yield return false and waits for it to
// return. iter.Pull's coroutines switch faster, but the Go runtime
// aborts the process (it cannot be recovered) when a goroutine locked to
// its OS thread (runtime.LockOSThread, a cgo callback) resumes one that it
// did not create, or any goroutine one that a locked goroutine created:
// and any of the program's goroutines, locked or not, may call the Wait
// or Test that progresses a collective, beside the progress goroutine.
// A goroutine handed control over channels has no such rule.
func goPull(body func(yield func(struct{}) bool)) (next func() (struct{}, bool), stop func()) {
	resume := make(chan bool)  // true: run on; false: the yield returns false
	yielded := make(chan bool) // true: body yielded; false: body returned
	started, done := false, false
	yield := func(struct{}) bool {
		yielded <- true
		return <-resume
	}
	next = func() (struct{}, bool) {
		if done {
			return struct{}{}, false
		}
		if !started {
			started = true
			go func() {
				body(yield)
				yielded <- false
			}()
		} else {
			resume <- true
		}
		if !<-yielded {
			done = true
			return struct{}{}, false
		}
		return struct{}{}, true
	}
	stop = func() {
		if done {
			return
		}
		done = true
		if !started {
			return
		}
		// A body may yield again after its yield returned false (an
		// abandoned wait's error returns through the algorithm to the
		// loop's yield): each yield gets false, until body returns.
		for resume <- false; <-yielded; {
			resume <- false
		}
	}
	return next, stop
}
