package pml

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gompi/gompi/mpierr"
	"github.com/gompi/gompi/rte"
)

func idleEngine(lost chan struct{}) *Engine {
	e := NewEngine(nil, nil, func() int { return 0 }, nil)
	e.lost, e.bell = lost, rte.NewLocalBell(lost)
	e.policy.Yield = true
	return e
}

func TestWaitSeesCompletionFromAnotherGoroutine(t *testing.T) {
	r := new(Request)
	r.Init(idleEngine(nil), nil)
	go func() {
		time.Sleep(5 * time.Millisecond)
		r.Complete(Status{Source: 3, Tag: 4, Count: 5})
	}()
	st, err := r.Wait()
	if err != nil || st.Source != 3 || st.Tag != 4 || st.Count != 5 {
		t.Errorf("Wait: %+v, %v", st, err)
	}
	if _, done, _ := r.Test(); !done {
		t.Error("Test after completion: not done")
	}
}

// Requests completed in a batch (CompleteBatched) wake a goroutine asleep
// on one of them at the batch's RingBatch: it does not sleep out its
// SleepMax.
func TestBatchedCompletionWakesASleeper(t *testing.T) {
	e := idleEngine(nil)
	e.policy.YieldFor, e.policy.SleepMax = time.Millisecond, time.Minute
	rs := make([]*Request, 3)
	for i := range rs {
		rs[i] = new(Request)
		rs[i].Init(e, nil)
	}
	woke := make(chan Status, 1)
	go func() {
		st, _ := rs[1].Wait()
		woke <- st
	}()
	for deadline := time.Now().Add(10 * time.Second); !e.bell.Sleeping(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the waiter never went to sleep")
		}
	}
	for i, r := range rs {
		r.CompleteBatched(i, 7, 3*i, nil)
	}
	e.RingBatch()
	select {
	case st := <-woke:
		if st.Source != 1 || st.Tag != 7 || st.Count != 3 || st.Err != nil || st.Cancelled {
			t.Errorf("the waiter got %+v, want request 1's status", st)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter still sleeps 10 s after the batch's RingBatch")
	}
}

// A wait ends with ErrProcAborted when the job is lost, rather than hang.
func TestWaitFailsWhenTheJobIsLost(t *testing.T) {
	lost := make(chan struct{})
	r := new(Request)
	r.Init(idleEngine(lost), nil)
	time.AfterFunc(5*time.Millisecond, func() { close(lost) })
	_, err := r.Wait()
	if !errors.Is(err, mpierr.ErrProcAborted) || !errors.Is(err, ErrJobLost) {
		t.Errorf("Wait on a lost job: %v", err)
	}
	if r.Done() {
		t.Error("the request completed")
	}
}

func TestWaitContext(t *testing.T) {
	r := new(Request)
	r.Init(idleEngine(nil), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
	defer cancel()
	_, err := r.WaitContext(ctx)
	if !errors.Is(err, context.DeadlineExceeded) || mpierr.ClassOf(err) != mpierr.ErrPending {
		t.Errorf("WaitContext past the deadline: %v (class %v)", err, mpierr.ClassOf(err))
	}
	ctx2, cancel2 := context.WithCancel(context.Background())
	cancel2()
	if _, err := r.WaitContext(ctx2); !errors.Is(err, context.Canceled) {
		t.Errorf("WaitContext of a cancelled context: %v", err)
	}
	r.Complete(Status{})
	if _, err := r.WaitContext(ctx2); err != nil {
		t.Errorf("WaitContext of a completed request: %v", err)
	}
}

func TestNilRequestIsInactive(t *testing.T) {
	var r *Request
	if st, err := r.Wait(); err != nil || st.Source != AnySource || st.Tag != AnyTag {
		t.Errorf("Wait: %+v %v", st, err)
	}
	if !r.Done() || r.Cancel() {
		t.Error("a nil request is not done, or cancels")
	}
}

func TestStatusOfAPendingRequest(t *testing.T) {
	r := new(Request)
	r.Init(idleEngine(nil), nil)
	if st := r.Status(); !errors.Is(st.Err, mpierr.ErrPending) {
		t.Errorf("status of a pending request: %+v", st)
	}
}

// countingRecycler counts the requests given back to it.
type countingRecycler struct{ n int }

func (c *countingRecycler) Recycle() { c.n++ }

// Free gives a completed request back once, as a Wait would, and refuses a
// nil request, a pending one and a second Free, each with ErrRequest; a
// Wait after Free fails rather than return a stale status.
func TestFreeOfACompletedRequest(t *testing.T) {
	var nilReq *Request
	if err := nilReq.Free(); !errors.Is(err, mpierr.ErrRequest) {
		t.Errorf("Free of a nil request: %v, want ErrRequest", err)
	}
	r := new(Request)
	r.Init(idleEngine(nil), nil)
	if err := r.Free(); !errors.Is(err, mpierr.ErrRequest) {
		t.Errorf("Free of a pending request: %v, want ErrRequest", err)
	}
	rc := new(countingRecycler)
	r.SetRecycler(rc)
	r.Complete(Status{Source: 1})
	if _, done, err := r.Test(); !done || err != nil {
		t.Fatalf("Test of a completed request: %v %v", done, err)
	}
	if err := r.Free(); err != nil {
		t.Fatalf("Free of a completed request: %v", err)
	}
	if rc.n != 1 {
		t.Errorf("Free gave the request back %d times, want once", rc.n)
	}
	if err := r.Free(); !errors.Is(err, mpierr.ErrRequest) {
		t.Errorf("a second Free: %v, want ErrRequest", err)
	}
	if _, err := r.Wait(); !errors.Is(err, mpierr.ErrRequest) {
		t.Errorf("Wait after Free: %v, want ErrRequest", err)
	}
	if rc.n != 1 {
		t.Errorf("given back %d times in all, want once", rc.n)
	}

	// A request no free list takes back is freed all the same.
	own := new(Request)
	own.Init(idleEngine(nil), nil)
	own.Complete(Status{})
	if err := own.Free(); err != nil {
		t.Fatalf("Free of a completed request without a recycler: %v", err)
	}
	if _, err := own.Wait(); !errors.Is(err, mpierr.ErrRequest) {
		t.Errorf("Wait after Free: %v, want ErrRequest", err)
	}
}

// countingPersistent counts its Frees.
type countingPersistent struct{ freed int }

func (p *countingPersistent) Start(*Request) error { return nil }
func (p *countingPersistent) Free() error          { p.freed++; return nil }

// A persistent request is freed once: a second Free fails with ErrRequest
// instead of passing for a completed request's.
func TestFreeOfAPersistentRequest(t *testing.T) {
	r := new(Request)
	p := new(countingPersistent)
	r.SetPersistent(idleEngine(nil), p)
	if err := r.Free(); err != nil || p.freed != 1 {
		t.Fatalf("Free of an inactive persistent request: %v, freed %d times", err, p.freed)
	}
	if err := r.Free(); !errors.Is(err, mpierr.ErrRequest) || p.freed != 1 {
		t.Errorf("a second Free: %v (freed %d times), want ErrRequest", err, p.freed)
	}
	if r.Active() {
		t.Error("a freed persistent request is still active")
	}
}

func TestBsendBuffer(t *testing.T) {
	var b BsendBuffer
	if _, _, err := b.Copy([]byte("x")); !errors.Is(err, mpierr.ErrBuffer) {
		t.Errorf("Copy without a buffer: %v", err)
	}
	space := make([]byte, 3*(10+BsendOverhead))
	if err := b.Attach(space); err != nil {
		t.Fatal(err)
	}
	if err := b.Attach(space); !errors.Is(err, mpierr.ErrBuffer) {
		t.Errorf("second Attach: %v", err)
	}
	var frees []func()
	for i := 0; i < 3; i++ {
		cp, free, err := b.Copy([]byte("0123456789"))
		if err != nil {
			t.Fatal(err)
		}
		if string(cp) != "0123456789" || &cp[0] != &space[i*(10+BsendOverhead)] {
			t.Errorf("copy %d: %q not at its block", i, cp)
		}
		frees = append(frees, free)
	}
	if _, _, err := b.Copy([]byte("a")); !errors.Is(err, mpierr.ErrBuffer) {
		t.Errorf("Copy into a full buffer: %v", err)
	}
	// Freeing the middle and then the first block merges them: a message
	// of two blocks fits.
	frees[1]()
	frees[1]() // twice is harmless
	frees[0]()
	if _, free, err := b.Copy(make([]byte, 2*(10+BsendOverhead)-BsendOverhead)); err != nil {
		t.Errorf("a two-block message after merging: %v", err)
	} else {
		frees = append(frees, free)
	}
	// Detach waits for the blocks still out.
	e := idleEngine(nil)
	calls := 0
	e.progress = func() int {
		calls++
		if calls == 10 {
			frees[2]()
			frees[3]()
		}
		return 0
	}
	got, err := b.Detach(e)
	if err != nil || &got[0] != &space[0] || calls < 10 {
		t.Errorf("Detach: %v after %d progress calls", err, calls)
	}
	if got, err := b.Detach(e); got != nil || err != nil {
		t.Errorf("Detach without a buffer: %v, %v", got, err)
	}
}
