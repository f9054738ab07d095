package mpi

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/gompi/gompi/frameworks/coll"
	"github.com/gompi/gompi/frameworks/pml"
	"github.com/gompi/gompi/mca"
	"github.com/gompi/gompi/mpierr"
	"github.com/gompi/gompi/params"
	"github.com/gompi/gompi/rte"
)

// AsyncProgressParam says whether an instance runs a progress goroutine
// for its nonblocking collectives.
const AsyncProgressParam = "mpi_async_progress"

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
	})
}

// nbcState is an instance's nonblocking collectives in flight, and its
// progress goroutine.
type nbcState struct {
	// mu is held by the goroutine that advances the runs, and to add one:
	// a Plan's methods are never called twice at once.
	mu     sync.Mutex
	active []*nbcRun
	n      atomic.Int32 // len(active), read without mu

	async bool          // mpi_async_progress decided yes
	stop  chan struct{} // closed by Finalize
	start sync.Once
	wg    sync.WaitGroup
}

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
}

// Recycle takes back a nonblocking run whose request a Wait returned
// (pml.Recycler): the communicator's next nonblocking collective reuses it
// and its request.
func (r *nbcRun) Recycle() {
	c := r.c
	// The request stays as the Wait left it (done, freed): a program that
	// looks at it again sees it complete, as with a recycled p2p request.
	r.c, r.a, r.plan, r.name = nil, nil, nil, ""
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
	eng := i.pml.Engine()
	eng.SetExtraProgress(i.progressNBC)
	if s.async {
		eng.SetBackground(func() bool { return s.n.Load() > 0 })
	}
}

// progressNBC advances every run in flight once; it is the engine's extra
// progress, called by any goroutine that progresses. A goroutine that finds
// another advancing them goes on: that one will see to it.
func (i *Instance) progressNBC() int {
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
		i.finishRun(r, err)
	}
	for k := len(kept); k < len(s.active); k++ {
		s.active[k] = nil
	}
	s.active = kept
	s.n.Store(int32(len(kept)))
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
func (i *Instance) finishRun(r *nbcRun, err error) {
	if err != nil {
		err = fmt.Errorf("mpi: %s on %s: %w", r.name, r.c.name, err)
	}
	if !r.persistent {
		r.release()
		// Nothing refers to r now but its request: the Wait that returns
		// it gives r back.
		r.req.SetRecycler(r)
	}
	r.req.Complete(Status{Source: AnySource, Tag: AnyTag, Err: err})
}

// release frees the plan and gives the arguments back.
func (r *nbcRun) release() {
	if r.freed {
		return
	}
	r.freed = true
	r.plan.Free()
	*r.a = coll.Args{}
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
	tag := coll.NBTag(r.c.nbSeq.Add(1) - 1)
	if err := r.plan.Start(tag); err != nil {
		return fmt.Errorf("mpi: %s on %s: %w", r.name, r.c.name, err)
	}
	s := &i.nbc
	s.mu.Lock()
	s.active = append(s.active, r)
	s.n.Store(int32(len(s.active)))
	s.mu.Unlock()
	if s.async {
		s.start.Do(i.startProgressGoroutine)
		i.pml.Engine().LeaveToBackground()
	}
	return nil
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
	bell := i.rt.Bell()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			select {
			case <-s.stop:
				return
			case <-bell.Background():
			}
			for bell.BackgroundArmed() && eng.Progress() > 0 {
			}
			if s.n.Load() == 0 {
				bell.DisarmBackground()
			}
		}
	}()
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

// nonblocking plans op on c and starts it (MPI_Iallreduce and the others).
func (c *Comm) nonblocking(op coll.Op, name string, a *coll.Args) (*Request, error) {
	r, err := c.plan(op, name, a, false)
	if err != nil {
		return nil, err
	}
	r.req.Init(c.inst.pml.Engine(), nil)
	if err := c.inst.startRun(r); err != nil {
		r.release()
		return nil, err
	}
	return &r.req, nil
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
	p, err := c.coll.Plan(op, cc, a)
	if err != nil {
		*a = coll.Args{}
		c.argPool.Put(a)
		return nil, fmt.Errorf("mpi: %s on %s: %w", name, c.name, err)
	}
	r, _ := c.runPool.Get().(*nbcRun)
	if r == nil || persistent {
		// A persistent run's request lives as long as the program keeps it.
		r = new(nbcRun)
	}
	r.c, r.op, r.name, r.a, r.plan, r.persistent, r.freed = c, op, name, a, p, persistent, false
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

// Free releases a persistent collective (pml.Persistent).
func (r *nbcRun) Free() error {
	r.release()
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
