package tuned

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gompi/gompi/frameworks/coll"
	"github.com/gompi/gompi/frameworks/coll/colltest"
	"github.com/gompi/gompi/frameworks/pml"
	"github.com/gompi/gompi/mca"
	"github.com/gompi/gompi/params"
)

// awaitSegment is the bcast segment size of TestWaitsThroughAwaiter: the
// conformance suite's largest bcast (129 elements, 1032 bytes) then goes
// down the pipeline in 9 segments, the last one short.
const awaitSegment = 128

// awaitLiveness bounds one algorithm's cases. A direct wait fails at once
// (the trap below); the bound is for hangs the trap cannot see, and is
// generous so that a loaded machine never trips it.
const awaitLiveness = 20 * time.Second

// Every algorithm tuned can force waits only through the Comm's Awaiter,
// as a nonblocking collective (coll.Coroutine) needs: a direct
// Request.Wait, or a wrapper Comm that hides the Awaiter from the
// helpers, would hold the goroutine that advances every nonblocking
// collective. Such a wait still gives the right result, so the
// conformance suite alone cannot tell; here the requests the algorithms
// get complete only through the Awaiter, and waiting on one directly
// fails at once, naming the call site.
func TestWaitsThroughAwaiter(t *testing.T) {
	// The harness catches the bug it is for: the pipelined bcast behind a
	// Comm that hides the Awaiter (tuned's segComm did) waits directly.
	t.Run("control/hidden_awaiter", func(t *testing.T) {
		t.Parallel()
		slot := forcedSlot(t, coll.Bcast, "pipeline")
		run := newAwaitRun("bcast/pipeline behind a Comm without Awaiter")
		defer run.stop()
		w := colltest.NewWorld(3, false)
		err := w.Run(func(c coll.Comm) error {
			a := &coll.Args{Op: coll.Bcast, Recv: make([]byte, 9*awaitSegment)}
			return run.call(func(c coll.Comm, a *coll.Args) error {
				return slot(struct{ coll.Comm }{c}, a) // hides the Awaiter
			}, c, a)
		})
		if err == nil || !strings.Contains(err.Error(), "waited on a request directly") {
			t.Fatalf("a direct wait went unnoticed: %v", err)
		}
	})
	for i, as := range algs {
		op := coll.Op(i)
		for v := 1; v < len(as); v++ {
			a := as[v]
			name := fmt.Sprintf("%s/%s", op, a.name)
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				slot := forcedSlot(t, op, a.name)
				run := newAwaitRun(name)
				defer run.stop()
				colltest.Conformance(t, op, func(c coll.Comm, args *coll.Args) error {
					return run.call(slot, c, args)
				}, colltest.Options{Sizes: []int{3, 4, 5}, Counts: []int{0, 1, 129}, Commutative: a.commutative})
			})
		}
	}
}

// forcedSlot is tuned's slot function for op with alg forced through its
// coll_tuned_<op>_algorithm parameter, and the bcast segment small: the
// path a communicator's table takes, withSegment included.
func forcedSlot(t *testing.T, op coll.Op, alg string) coll.Func {
	t.Helper()
	c := &Component{}
	cat := mca.NewCatalog()
	cat.RegisterFramework(coll.Framework)
	cat.Register(c, mca.Builtin)
	b, err := mca.NewBase(mca.Options{Catalog: cat, Output: io.Discard, Sources: params.Sources{
		Env: []string{"OMPI_MCA_mca_base_param_files=none"},
		CommandLine: []params.Setting{{Name: AlgorithmParam(op), Value: alg},
			{Name: "coll_tuned_bcast_segment_size", Value: fmt.Sprint(awaitSegment)}}}})
	if err != nil {
		t.Fatal(err)
	}
	comm := colltest.NewWorld(4, false).Comm(0)
	_, mod, err := c.Query(b, comm)
	if err != nil {
		t.Fatal(err)
	}
	m := mod.(*module)
	if got := m.choose(op, comm, &coll.Args{Reducer: sumReducer()}).name; got != alg {
		t.Fatalf("%s = %s: the module runs %s", AlgorithmParam(op), alg, got)
	}
	if m.segment != awaitSegment {
		t.Fatalf("bcast segment %d bytes, want %d: the pipeline would not cut the message", m.segment, awaitSegment)
	}
	return mod.Func(op)
}

// awaitRun is what the ranks of one algorithm's cases share: the first
// failure, which ends every rank's waits so that a failing case returns
// at once with its reason instead of hanging.
type awaitRun struct {
	name   string
	ctx    context.Context
	cancel context.CancelCauseFunc
	timer  *time.Timer
}

func newAwaitRun(name string) *awaitRun {
	r := &awaitRun{name: name}
	r.ctx, r.cancel = context.WithCancelCause(context.Background())
	r.timer = time.AfterFunc(awaitLiveness, func() {
		r.fail(fmt.Sprintf("%s: still running after %v: a wait that bypasses the Comm's Awaiter, or a hang", name, awaitLiveness))
	})
	return r
}

func (r *awaitRun) stop() {
	r.timer.Stop()
	r.cancel(nil)
}

// fail records why the run ends (the first reason wins) and ends it.
func (r *awaitRun) fail(why string) { r.cancel(errors.New(why)) }

// abandoned is the error of a wait that the run's end cut short.
func (r *awaitRun) abandoned() error {
	return fmt.Errorf("awaitOnly: wait abandoned: %w", context.Cause(r.ctx))
}

// call runs slot on rank c behind an awaitOnly Comm and checks that it
// left no request unwaited.
func (r *awaitRun) call(slot coll.Func, c coll.Comm, a *coll.Args) error {
	x := &awaitOnly{inner: c, run: r, pending: map[*pml.Request]*pml.Request{}}
	// The trap: the only progress of the requests the algorithm gets. A
	// wait (Wait, Test) on one that is not complete progresses its engine,
	// and so fails here; the Awaiter completes them without it.
	x.eng = pml.NewEngine(nil, nil, func() int {
		msg := fmt.Sprintf("%s: rank %d waited on a request directly instead of through the Comm's Awaiter "+
			"(coll.WaitAll, WaitCounts, Until, the Comm's Send, Recv, Sendrecv), which would hold the goroutine "+
			"that advances a nonblocking collective; at:%s", r.name, c.Rank(), callers())
		r.fail(msg)
		panic(msg)
	}, nil)
	if err := slot(x, a); err != nil {
		return err
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if k := len(x.pending); k > 0 {
		return fmt.Errorf("%s: rank %d returned with %d requests it never waited for", r.name, c.Rank(), k)
	}
	return nil
}

// callers lists the project's frames of a direct wait, the waiter's
// first, without the engine's; skipping runtime.Callers, callers and the
// trap.
func callers() string {
	pcs := make([]uintptr, 32)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(3, pcs)])
	var b strings.Builder
	for {
		f, more := frames.Next()
		if strings.Contains(f.Function, "colltest.") || strings.HasSuffix(f.Function, "tuned.(*awaitRun).call") {
			break // the harness from here on
		}
		if strings.HasPrefix(f.Function, "github.com/gompi/gompi/") && !strings.Contains(f.Function, "pml.(*Engine)") {
			fmt.Fprintf(&b, "\n\t%s (%s:%d)", strings.TrimPrefix(f.Function, "github.com/gompi/gompi/"), filepath.Base(f.File), f.Line)
		}
		if !more {
			break
		}
	}
	return b.String()
}

// awaitOnly is a colltest rank as the Comm of a nonblocking collective
// (coll.Coroutine's) looks to an algorithm: an Awaiter, whose blocking
// calls wait through its Await. Isend and Irecv post the real request on
// the rank but return another ("outer"), on the trap engine, that only
// Await and AwaitAll complete: they wait for the real one through the
// rank's engine and copy its status.
type awaitOnly struct {
	inner coll.Comm
	run   *awaitRun
	eng   *pml.Engine // the trap
	mu    sync.Mutex
	// pending maps the outer requests not completed yet to the real ones.
	pending map[*pml.Request]*pml.Request
}

var (
	_ coll.Comm    = (*awaitOnly)(nil)
	_ coll.Awaiter = (*awaitOnly)(nil)
)

func (x *awaitOnly) Rank() int    { return x.inner.Rank() }
func (x *awaitOnly) Size() int    { return x.inner.Size() }
func (x *awaitOnly) Name() string { return x.inner.Name() }
func (x *awaitOnly) LLP() bool    { return false } // as coll.Coroutine's Comm

// outer wraps in, or passes on post's error.
func (x *awaitOnly) outer(in *pml.Request, err error) (*pml.Request, error) {
	if err != nil {
		return nil, err
	}
	out := new(pml.Request)
	out.Init(x.eng, nil)
	x.mu.Lock()
	x.pending[out] = in
	x.mu.Unlock()
	return out, nil
}

func (x *awaitOnly) Isend(buf []byte, dst, tag int) (*pml.Request, error) {
	return x.outer(x.inner.Isend(buf, dst, tag))
}

func (x *awaitOnly) Irecv(buf []byte, src, tag int) (*pml.Request, error) {
	return x.outer(x.inner.Irecv(buf, src, tag))
}

func (x *awaitOnly) Await(cond func() bool) error {
	for !cond() {
		if x.run.ctx.Err() != nil {
			return x.run.abandoned()
		}
		// Progress the rank: colltest matches receives only as their
		// requests are tested.
		x.mu.Lock()
		ins := make([]*pml.Request, 0, len(x.pending))
		for _, in := range x.pending {
			ins = append(ins, in)
		}
		x.mu.Unlock()
		for _, in := range ins {
			in.Test()
		}
		runtime.Gosched()
	}
	return nil
}

func (x *awaitOnly) AwaitAll(reqs []*pml.Request) error {
	for _, out := range reqs {
		if out.Done() { // nil, or completed by an earlier Await
			continue
		}
		x.mu.Lock()
		in, ok := x.pending[out]
		x.mu.Unlock()
		if !ok {
			return fmt.Errorf("%s: rank %d: AwaitAll of a request this Comm did not make", x.run.name, x.Rank())
		}
		// The rank's engine sleeps on its bell until a message comes; the
		// run's end wakes it.
		if err := in.Engine().Until(x.run.ctx, in.Done); err != nil || !in.Done() {
			return x.run.abandoned()
		}
		x.mu.Lock()
		delete(x.pending, out)
		x.mu.Unlock()
		out.Complete(in.Status())
	}
	return nil
}

// wait awaits out and returns its status: out.Wait returns at once then.
func (x *awaitOnly) wait(out *pml.Request) (pml.Status, error) {
	if err := x.AwaitAll([]*pml.Request{out}); err != nil {
		return pml.Status{Err: err}, err
	}
	return out.Wait()
}

func (x *awaitOnly) Send(buf []byte, dst, tag int) error {
	r, err := x.Isend(buf, dst, tag)
	if err != nil {
		return err
	}
	_, err = x.wait(r)
	return err
}

func (x *awaitOnly) Recv(buf []byte, src, tag int) (pml.Status, error) {
	r, err := x.Irecv(buf, src, tag)
	if err != nil {
		return pml.Status{Err: err}, err
	}
	return x.wait(r)
}

func (x *awaitOnly) Sendrecv(sbuf []byte, dst, stag int, rbuf []byte, src, rtag int) (pml.Status, error) {
	rr, err := x.Irecv(rbuf, src, rtag)
	if err != nil {
		return pml.Status{Err: err}, err
	}
	sr, err := x.Isend(sbuf, dst, stag)
	if err != nil {
		return pml.Status{Err: err}, err
	}
	if err := x.AwaitAll([]*pml.Request{sr, rr}); err != nil {
		return pml.Status{Err: err}, err
	}
	_, serr := sr.Wait()
	st, rerr := rr.Wait()
	if rerr == nil {
		rerr = serr
	}
	return st, rerr
}
