package mpi

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/gompi/gompi/frameworks/coll"
	"github.com/gompi/gompi/frameworks/pml"
	"github.com/gompi/gompi/mca"
	"github.com/gompi/gompi/mpierr"
	"github.com/gompi/gompi/params"
	"github.com/gompi/gompi/release"
	"github.com/gompi/gompi/rte"
)

// AsyncProgressParam says whether an instance runs a progress goroutine
// for its nonblocking collectives.
const AsyncProgressParam = "mpi_async_progress"

// AsyncRecheckParam is how often the progress goroutine looks for progress
// without being rung.
const AsyncRecheckParam = "mpi_async_progress_recheck_us"

// lingerRechecks is how many recheck periods the progress goroutine keeps
// looking after the last run it saw in flight or started: a program that
// starts one collective after another arms the bell while the goroutine
// waits, and only a look it was already going to make covers that arming.
const lingerRechecks = 100

// Values of mpi_async_progress.
const (
	asyncNo   = 0
	asyncYes  = 1
	asyncAuto = 2
)

func init() {
	mca.RegisterProjectParams("mpi", params.Def{
		Name: AsyncProgressParam, Type: params.Enum, Default: "auto", Level: 4, Scope: params.ScopeLocal,
		Values: []params.EnumValue{{Value: asyncNo, Name: "no"}, {Value: asyncYes, Name: "yes"}, {Value: asyncAuto, Name: "auto"}},
		Help: "Whether a goroutine advances the nonblocking collectives while the program computes without calling MPI: " +
			"yes (it runs while one is pending and sleeps on the wait policy's doorbell when nothing arrives; it needs a " +
			"core beside the computation's and GOMAXPROCS of at least 2 to run there), no (they advance only in calls " +
			"into the instance: Wait, Test, any other call), or auto (yes when this rank has at least two cores to " +
			"itself: its node's cores, bounded by its CPU affinity, over the ranks of the node; with one core each, " +
			"the goroutine takes the core from the computation only when the kernel preempts it, hundreds of " +
			"microseconds after a message arrives here, and every wake costs the computation more than it gains)",
	}, params.Def{
		Name: AsyncRecheckParam, Type: params.Int, Default: "1000", Level: 9, Scope: params.ScopeLocal,
		Range: &params.Range{Min: 0, Max: 1000000},
		Help: "Microseconds after which the progress goroutine looks again without being rung, while nonblocking " +
			"collectives are in flight and for 100 such periods after the last one started or was seen in flight: a peer " +
			"publishes with a plain store and then checks whether this rank waits, and rarely (the store still in the " +
			"peer's store buffer while this rank arms and takes its last look) both miss each other and no ring comes; " +
			"this bounds what such a miss costs the overlap. 0: only rings wake the goroutine",
	})
}

// nbcState is an instance's nonblocking collectives in flight, and its
// progress goroutine.
type nbcState struct {
	// mu is held by the goroutine that advances the runs, and to start
	// one: a Plan's methods are never called twice at once.
	mu     runLock
	active []*nbcRun
	// n is len(active), read without mu; stored under it with a release
	// store (a locked exchange costs a fence per run, twice).
	n atomic.Uint64
	// starts counts the runs started, stored under mu likewise: the
	// progress goroutine tells from it that the program is still starting
	// collectives (backgroundLoop).
	starts atomic.Uint64

	async   bool          // mpi_async_progress decided yes
	recheck time.Duration // mpi_async_progress_recheck_us
	stop    chan struct{} // closed by Finalize
	start   sync.Once
	wg      sync.WaitGroup
}

// runLock is a lock whose Unlock is a plain store (release.Store): the
// runs in flight are added and advanced under it once or twice per
// nonblocking collective, and sync.Mutex's unlock is a locked instruction,
// a fence that waits for every store before it (an 8-byte Iallreduce took
// a dozen such fences a rank; each one costs more than the rest of its
// line). Lock yields while another goroutine holds it: a run's Progress
// may resume a coroutine. It is release.Mutex without the sleep: a holder
// here is the progress goroutine or another caller advancing the runs,
// and the waiter is a program goroutine in Wait or Start, which a sleep of
// up to a millisecond would hand the collective's latency to.
type runLock struct{ v atomic.Uint64 }

func (l *runLock) TryLock() bool { return l.v.Load() == 0 && l.v.CompareAndSwap(0, 1) }

func (l *runLock) Lock() {
	for !l.TryLock() {
		runtime.Gosched()
	}
}

func (l *runLock) Unlock() { release.Store(&l.v, 0) }

// nbcRun is one nonblocking or persistent collective: its plan, the
// request its runs complete, and what it was called with.
type nbcRun struct {
	c          *Comm
	op         coll.Op
	name       string
	a          *coll.Args
	plan       coll.Plan
	req        Request
	persistent bool
	freed      bool
	// reusable: a nonblocking run whose plan (coll.Reusable) outlives
	// its run; its Wait offers it to the communicator's nbReuse, where
	// idle says (1) that no request of the program's stands for it: the
	// next identical call may take it (Comm.reuse).
	reusable bool
	idle     atomic.Uint64
	// reuser is plan as a coll.Reusable, or nil: asserted once, at
	// planning (an assertion to an interface costs a lookup per run).
	reuser coll.Reusable
	// call is the program's call that last started this run, as it made
	// it (its slices and op, before any checking): the same call again
	// starts it again without the checks (Comm.startRepeat). Zero for
	// calls that do not say (call.set false).
	call rawCall
}

// rawCall is a nonblocking collective's call as the program made it: the
// memory of its buffers, its op and element type, its root. Two equal
// rawCalls made the same coll.Args (the checks and the arguments depend
// on nothing else), so a run planned for one serves the other.
type rawCall struct {
	set        bool
	send, recv unsafe.Pointer
	ns, nr     int
	op         *Op
	elem       any // (*T)(nil): the element type
	root       int
}

// setReduction records a reduction's call (and a bcast's: no send buffer,
// no op) in k, field by field into k's own memory: a rawCall built as a
// value and assigned was copied sixteen bytes at a time out of words just
// stored, which stalls store forwarding (a tenth of a repeated 8-byte
// Iallreduce's cost, both ranks).
func setReduction[T Elem](k *rawCall, send, recv []T, op *Op, root int) {
	k.set = true
	k.send, k.recv = unsafe.Pointer(unsafe.SliceData(send)), unsafe.Pointer(unsafe.SliceData(recv))
	k.ns, k.nr, k.op, k.elem, k.root = len(send), len(recv), op, (*T)(nil), root
}

// same reports whether k and o are the same call. Field by field, for the
// reason setReduction gives: == on the structs compared them with wide
// loads of the words setReduction had just stored.
func (k *rawCall) same(o *rawCall) bool {
	return k.set == o.set && k.send == o.send && k.recv == o.recv && k.ns == o.ns && k.nr == o.nr &&
		k.op == o.op && k.root == o.root && k.elem == o.elem
}

// Recycle takes back a nonblocking run whose request a Wait returned
// (pml.Recycler): the communicator's next nonblocking collective reuses it
// and its request.
func (r *nbcRun) Recycle() {
	c := r.c
	if r.reusable {
		// Kept whole, plan and arguments, for the same call made again.
		// In a loop r is the slot's already: a plain store makes it
		// idle (its taker holds nbc.mu, which orders the rest).
		slot := &c.nbReuse[r.op]
		if slot.Load() == r {
			release.Store(&r.idle, 1)
			return
		}
		s := &c.inst.nbc
		s.mu.Lock()
		old := slot.Swap(r)
		release.Store(&r.idle, 1)
		if old != nil && old.idle.Load() == 1 {
			// A run in flight stays its request's: its own Wait finds
			// the slot taken and puts it back in place of r.
			old.drop()
		}
		s.mu.Unlock()
		return
	}
	// The request stays as the Wait left it (done, freed): a program that
	// looks at it again sees it complete, as with a recycled p2p request.
	r.c, r.a, r.plan, r.reuser, r.name, r.call = nil, nil, nil, nil, "", rawCall{}
	c.runPool.Put(r)
}

// setupNBC decides the progress goroutine and makes the engine advance the
// nonblocking collectives in every progress.
func (i *Instance) setupNBC() {
	s := &i.nbc
	s.stop = make(chan struct{})
	switch i.base.Lookup(AsyncProgressParam).Int() {
	case asyncYes:
		s.async = true
	case asyncAuto:
		s.async = coresPerRank(i.rt.Job().LocalSize) >= 2 && runtime.GOMAXPROCS(0) >= 2
	}
	s.recheck = time.Duration(i.base.Lookup(AsyncRecheckParam).Int()) * time.Microsecond
	eng := i.pml.Engine()
	eng.SetExtraProgress(i.progressNBC)
	if s.async {
		eng.SetBackground(func() bool { return s.n.Load() > 0 })
	}
}

// progressNBC advances every run in flight once; it is the engine's extra
// progress, called by any goroutine that progresses. A goroutine that finds
// another advancing them goes on: that one will see to it.
func (i *Instance) progressNBC(waited *atomic.Uint64) int {
	s := &i.nbc
	if s.n.Load() == 0 || !s.mu.TryLock() {
		return 0
	}
	moved := 0
	kept := s.active[:0]
	for _, r := range s.active {
		done, err := r.plan.Progress()
		if !done {
			kept = append(kept, r)
			continue
		}
		moved++
		i.finishRun(r, err, r.req.IsWaited(waited))
	}
	for k := len(kept); k < len(s.active); k++ {
		s.active[k] = nil
	}
	s.active = kept
	release.Store(&s.n, uint64(len(kept)))
	s.mu.Unlock()
	return moved
}

// runsOn counts the runs in flight on c.
func (i *Instance) runsOn(c *Comm) int {
	s := &i.nbc
	if s.n.Load() == 0 {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, r := range s.active {
		if r.c == c {
			n++
		}
	}
	return n
}

// finishRun completes r's request with err; a nonblocking run's plan and
// arguments go then, a persistent one's stay for its next Start.
func (i *Instance) finishRun(r *nbcRun, err error, own bool) {
	if err != nil {
		err = fmt.Errorf("mpi: %s on %s: %w", r.name, r.c.name, err)
	}
	if !r.persistent {
		r.reusable = err == nil && r.reuser != nil && r.reuser.Reusable()
		if !r.reusable {
			r.release()
		}
		// Nothing refers to r now but its request: the Wait that returns
		// it gives r back.
		r.req.SetRecycler(r)
	}
	st := Status{Source: AnySource, Tag: AnyTag, Err: err}
	if own {
		// The goroutine that waits for it completes it: nobody to wake.
		r.req.CompleteOwn(st)
		return
	}
	r.req.Complete(st)
}

// release frees the plan and gives the arguments back.
func (r *nbcRun) release() {
	if r.freed {
		return
	}
	r.freed = true
	r.plan.Free()
	r.a.Clear()
	r.c.argPool.Put(r.a)
}

// startRun starts r's next run and puts it in flight: the run's tags are
// the communicator's next (every rank starts its nonblocking collectives on
// a communicator in the same order: MPI's rule).
func (i *Instance) startRun(r *nbcRun) error {
	if err := r.c.check(r.name); err != nil {
		return err
	}
	if err := r.c.broken(r.name); err != nil {
		return err
	}
	s := &i.nbc
	s.mu.Lock()
	inFlight, err := i.startLocked(r)
	s.mu.Unlock()
	if err != nil {
		return err
	}
	if inFlight {
		i.started()
	}
	return nil
}

// startLocked is startRun's part under nbc.mu: the run's tags, its Start,
// its place among the runs in flight, unless Start completed it
// (coll.Finisher): then it completes here, and the Wait that follows
// finds it done without a progress pass.
func (i *Instance) startLocked(r *nbcRun) (inFlight bool, err error) {
	s := &i.nbc
	tag := coll.NBTag(r.c.nbSeq)
	r.c.nbSeq++
	if err := r.plan.Start(tag); err != nil {
		return false, fmt.Errorf("mpi: %s on %s: %w", r.name, r.c.name, err)
	}
	if f, ok := r.plan.(coll.Finisher); ok {
		if done, ferr := f.Finished(); done {
			// Nobody waits for a request its Start has not returned.
			i.finishRun(r, ferr, true)
			return false, nil
		}
	}
	s.active = append(s.active, r)
	release.Store(&s.n, uint64(len(s.active)))
	release.Store(&s.starts, s.starts.Load()+1)
	return true, nil
}

// started wakes the progress goroutine, if any, for a run just started.
func (i *Instance) started() {
	s := &i.nbc
	if s.async {
		s.start.Do(i.startProgressGoroutine)
		i.pml.Engine().LeaveToBackground()
	}
}

// AsyncProgress reports whether a goroutine advances the instance's
// nonblocking collectives while the program computes (mpi_async_progress,
// auto decided).
func (i *Instance) AsyncProgress() bool { return i.nbc.async }

// startProgressGoroutine starts the goroutine that advances the runs in
// flight while the program computes. It waits on the bell's background
// channel, which the engine arms only while the program is outside the
// instance's calls with runs in flight (pml.Engine.LeaveToBackground): what
// arrives then wakes it, it progresses until nothing moves, and waits
// again. It spins never and costs nothing while the program is inside a
// call, which progresses by itself. GOMAXPROCS stays as it is: raised
// above the cores a rank is bound to, every goroutine hand-off would wake
// a thread that must take the core from the computation.
func (i *Instance) startProgressGoroutine() {
	s := &i.nbc
	eng := i.pml.Engine()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		backgroundLoop(s.stop, i.rt.Bell(), eng.Progress, func() bool { return s.n.Load() > 0 }, s.starts.Load, s.recheck)
	}()
}

// backgroundBell is what the progress goroutine uses of rte.Bell.
type backgroundBell interface {
	Background() <-chan struct{}
	BackgroundArmed() bool
	DisarmBackground()
}

// backgroundLoop is the progress goroutine: woken by a ring while the bell
// is armed for it, it progresses until nothing moves (while the program
// stays outside the instance's calls) and disarms once nothing is in
// flight. A ring can be lost: rte.Bell's note on lost wake-ups — a peer's
// plain store, still in its store buffer, and its load of the armed word
// pass this rank's arming and last look — and the program, computing, would
// not look again before its next call. So while runs are in flight, and for
// lingerRechecks periods after the last one it saw in flight or started,
// it also looks every recheck (0: never), which bounds what a lost ring
// costs; once the program has stopped starting collectives it waits for
// rings alone, and costs nothing.
func backgroundLoop(stop <-chan struct{}, bell backgroundBell, progress func() int, inFlight func() bool,
	starts func() uint64, recheck time.Duration) {
	var t *time.Timer
	if recheck > 0 {
		t = time.NewTimer(recheck)
		defer t.Stop()
	}
	lastBusy := time.Now() // started for a run just started
	lastStarts := starts()
	for {
		var tick <-chan time.Time
		if t != nil && time.Since(lastBusy) < lingerRechecks*recheck {
			t.Reset(recheck)
			tick = t.C
		}
		select {
		case <-stop:
			return
		case <-bell.Background():
		case <-tick:
		}
		for bell.BackgroundArmed() && progress() > 0 {
		}
		busy := inFlight()
		if !busy {
			bell.DisarmBackground()
		}
		if k := starts(); busy || k != lastStarts {
			lastBusy, lastStarts = time.Now(), k
		}
	}
}

// coresPerRank is how many cores each of the node's localSize ranks has,
// as far as this process can tell: the node's cores over its ranks, at
// most the CPUs this process may run on (a launcher's binding).
func coresPerRank(localSize int) int {
	n := rte.NodeCores() / max(localSize, 1)
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err == nil {
		n = min(n, set.Count())
	}
	return n
}

// finalizeNBC stops the progress goroutine and abandons the runs still in
// flight (MPI wants them complete before Finalize; their requests fail).
func (i *Instance) finalizeNBC() {
	s := &i.nbc
	if s.stop == nil {
		return
	}
	close(s.stop)
	i.rt.Bell().DisarmBackground()
	s.wg.Wait()
	s.mu.Lock()
	for _, r := range s.active {
		r.release()
		r.req.Complete(Status{Source: AnySource, Tag: AnyTag,
			Err: mpierr.Errorf(mpierr.ErrPending, "mpi: %s on %s: the instance was finalized before it completed", r.name, r.c.name)})
	}
	s.active = nil
	s.n.Store(0)
	s.mu.Unlock()
}

// nonblocking plans op on c and starts it (MPI_Iallreduce and the others),
// with arguments from the pool.
func (c *Comm) nonblocking(op coll.Op, name string, a *coll.Args) (*Request, error) {
	r, err := c.nonblockingCall(op, name, a)
	a.Clear()
	c.argPool.Put(a)
	return r, err
}

// nonblockingCall is nonblocking with arguments the caller keeps (on its
// stack, for the reductions): a call that repeats the last one of op
// starts its run again (Comm.reuse) and takes no arguments from the pool;
// another is planned with a copy of v.
func (c *Comm) nonblockingCall(op coll.Op, name string, v *coll.Args) (*Request, error) {
	return c.nonblockingRaw(op, name, v, nil)
}

// startRepeat starts the communicator's kept run of op when k is the call
// that last started it (rawCall), skipping the checks and the building of
// the arguments that the call made then: a loop of one nonblocking
// reduction on the same buffers pays Start's cost. ok false: not a
// repeat; the caller takes the full path (nonblockingRaw), which also
// reports any error.
func (c *Comm) startRepeat(op coll.Op, name string, k *rawCall) (req *Request, err error, ok bool) {
	if c == nil || c.inst == nil {
		return nil, nil, false
	}
	r := c.nbReuse[op].Load()
	if r == nil || c.check(name) != nil || c.broken(name) != nil {
		return nil, nil, false
	}
	i := c.inst
	s := &i.nbc
	s.mu.Lock()
	// Under the lock: the slot's run, its idleness and its call are the
	// lock holder's to change.
	if r = c.nbReuse[op].Load(); r == nil || r.idle.Load() == 0 || !r.call.same(k) {
		s.mu.Unlock()
		return nil, nil, false
	}
	release.Store(&r.idle, 0)
	r.req.Init(i.pml.Engine(), nil)
	inFlight, err := i.startLocked(r)
	if err != nil {
		c.nbReuse[op].Store(nil)
		r.release()
		s.mu.Unlock()
		return nil, err, true
	}
	s.mu.Unlock()
	if inFlight {
		i.started()
	}
	return &r.req, nil, true
}

// nonblockingRaw is nonblockingCall that records k, the program's call
// (nil: none), in the run it starts, for startRepeat.
func (c *Comm) nonblockingRaw(op coll.Op, name string, v *coll.Args, k *rawCall) (*Request, error) {
	i := c.inst
	if err := c.check(name); err != nil {
		return nil, err
	}
	if err := c.broken(name); err != nil {
		return nil, err
	}
	s := &i.nbc
	s.mu.Lock()
	r := c.reuse(op, v)
	if r == nil {
		s.mu.Unlock()
		var err error
		if r, err = c.plan(op, name, c.argsOwning(v), false); err != nil {
			return nil, err
		}
		s.mu.Lock()
	}
	if k != nil {
		r.call = *k
	} else {
		r.call = rawCall{}
	}
	r.req.Init(i.pml.Engine(), nil)
	inFlight, err := i.startLocked(r)
	if err != nil {
		if c.nbReuse[op].Load() == r {
			c.nbReuse[op].Store(nil)
		}
		r.release()
		s.mu.Unlock()
		return nil, err
	}
	s.mu.Unlock()
	if inFlight {
		i.started()
	}
	return &r.req, nil
}

// reuse returns the communicator's last run of op, planned and ready to
// start again, when a is its call made again (coll.Args.SameCall). A
// program that repeats a nonblocking collective on the same buffers, the
// common loop, then pays what a persistent one costs: Start, not the
// planning and the freeing. Another call's run is dropped.
//
// The caller holds the instance's nbc.mu: takers are one at a time, so a
// plain store marks the run taken.
func (c *Comm) reuse(op coll.Op, a *coll.Args) *nbcRun {
	slot := &c.nbReuse[op]
	r := slot.Load()
	if r == nil || r.idle.Load() == 0 {
		return nil
	}
	release.Store(&r.idle, 0)
	if !r.a.SameCall(a) {
		slot.Store(nil)
		r.drop()
		return nil
	}
	return r
}

// drop releases a run kept for reuse and gives it back to the pool.
func (r *nbcRun) drop() {
	r.reusable = false
	r.release()
	c := r.c
	r.c, r.a, r.plan, r.reuser, r.name, r.call = nil, nil, nil, nil, "", rawCall{}
	c.runPool.Put(r)
}

// dropReusedRuns releases the runs kept for reuse on c, before its
// modules go.
func (c *Comm) dropReusedRuns() {
	s := &c.inst.nbc
	s.mu.Lock()
	defer s.mu.Unlock()
	for op := range c.nbReuse {
		if r := c.nbReuse[op].Swap(nil); r != nil && r.idle.Load() == 1 {
			release.Store(&r.idle, 0)
			r.drop()
		}
	}
}

// persistent plans op on c for Start (MPI_Allreduce_init and the others).
func (c *Comm) persistent(op coll.Op, name string, a *coll.Args) (*Request, error) {
	r, err := c.plan(op, name, a, true)
	if err != nil {
		return nil, err
	}
	r.req.SetPersistent(c.inst.pml.Engine(), r)
	return &r.req, nil
}

func (c *Comm) plan(op coll.Op, name string, a *coll.Args, persistent bool) (*nbcRun, error) {
	if err := c.check(name); err != nil {
		return nil, err
	}
	var cc coll.Comm = collComm{c}
	if c.local != nil {
		cc = interColl{collComm{c}}
	}
	c.nbPlans.Add(1)
	p, err := c.coll.Plan(op, cc, a)
	if err != nil {
		a.Clear()
		c.argPool.Put(a)
		return nil, fmt.Errorf("mpi: %s on %s: %w", name, c.name, err)
	}
	r, _ := c.runPool.Get().(*nbcRun)
	if r == nil || persistent {
		// A persistent run's request lives as long as the program keeps it.
		r = new(nbcRun)
	}
	r.c, r.op, r.name, r.a, r.plan, r.persistent, r.freed, r.reusable = c, op, name, a, p, persistent, false, false
	r.reuser, _ = p.(coll.Reusable)
	return r, nil
}

// Start begins the next run of a persistent collective (pml.Persistent).
func (r *nbcRun) Start(req *pml.Request) error {
	if r.freed {
		return mpierr.Errorf(mpierr.ErrRequest, "mpi: Start of %s on %s: the request was freed", r.name, r.c.name)
	}
	req.Restart()
	if err := r.c.inst.startRun(r); err != nil {
		req.Complete(Status{Source: AnySource, Tag: AnyTag, Err: err})
		return err
	}
	return nil
}

// Free releases a persistent collective (pml.Persistent), under the lock
// that every plan's methods run under (coll.Plan).
func (r *nbcRun) Free() error {
	s := &r.c.inst.nbc
	s.mu.Lock()
	r.release()
	s.mu.Unlock()
	return nil
}

// Startall starts every persistent request of reqs (MPI_Startall), in
// order, and returns the first error.
func Startall(reqs []*Request) error {
	for _, r := range reqs {
		if err := r.Start(); err != nil {
			return err
		}
	}
	return nil
}
