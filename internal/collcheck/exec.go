package collcheck

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"time"

	"github.com/gompi/gompi/mpi"
)

// Mode is how the checks call the collectives.
type Mode int

const (
	// Blocking calls the blocking forms (Allreduce), one at a time.
	Blocking Mode = iota
	// Nonblocking calls the nonblocking forms (Iallreduce): a check starts
	// several before it completes them, in an order of its own, with
	// point-to-point messages and a blocking collective on the same
	// communicator in flight meanwhile.
	Nonblocking
	// Persistent calls the persistent forms (AllreduceInit): a check plans
	// several, then starts them together (Startall, or Start each) Runs
	// times, with new inputs every run, completes them as Nonblocking does,
	// and frees them.
	Persistent
)

func (m Mode) String() string {
	switch m {
	case Blocking:
		return "blocking"
	case Nonblocking:
		return "nonblocking"
	case Persistent:
		return "persistent"
	}
	return fmt.Sprintf("collcheck.Mode(%d)", int(m))
}

// call is one collective call of a check: its forms, what writes its
// inputs for a run (and poisons its outputs), and what compares its
// results with the plain computation of that run's.
type call struct {
	what  string
	f     forms
	fill  func(run int)
	check func(run int) error
	req   *mpi.Request
}

// exec runs a check's calls in the options' mode.
type exec struct {
	c       *mpi.Comm
	o       *Options
	rng     *rand.Rand
	pending []*call
	// flushes numbers the flushes, whose traffic tags it.
	flushes int
}

func newExec(c *mpi.Comm, o *Options, check string) *exec {
	seed := uint64(0)
	for _, b := range []byte(check) {
		seed = seed*131 + uint64(b)
	}
	// The order of waits is each rank's own: seeded by the rank.
	return &exec{c: c, o: o, rng: rand.New(rand.NewPCG(uint64(c.Rank())+1, seed))}
}

// do runs one call: at once when blocking, otherwise it is started (or
// planned) and completed by a later flush, with others.
func (x *exec) do(what string, f forms, fill func(run int), check func(run int) error) error {
	cl := &call{what: what, f: f, fill: fill, check: check}
	switch x.o.Mode {
	case Blocking:
		fill(0)
		if err := f.blocking(); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		return check(0)
	case Nonblocking:
		fill(0)
		req, err := f.start()
		if err != nil {
			return fmt.Errorf("%s: %s: %w", what, f.nbName(), err)
		}
		if req == nil || req.Persistent() {
			return fmt.Errorf("%s: %s returned request %v, want an active nonblocking request", what, f.nbName(), req)
		}
		cl.req = req
	case Persistent:
		req, err := f.init()
		if err != nil {
			return fmt.Errorf("%s: %s: %w", what, f.initName(), err)
		}
		if !req.Persistent() || !req.Done() {
			return fmt.Errorf("%s: %s returned a request that is not an inactive persistent one", what, f.initName())
		}
		cl.req = req
	default:
		return fmt.Errorf("collcheck: mode %v", x.o.Mode)
	}
	x.pending = append(x.pending, cl)
	if len(x.pending) >= x.o.inFlight() {
		return x.flush()
	}
	return nil
}

// flush completes the pending calls and checks their results; persistent
// ones run Runs times, then are freed.
func (x *exec) flush() error {
	calls := x.pending
	x.pending = nil
	if len(calls) == 0 {
		return nil
	}
	x.flushes++
	reqs := make([]*mpi.Request, len(calls))
	for i, cl := range calls {
		reqs[i] = cl.req
	}
	runs := 1
	if x.o.Mode == Persistent {
		runs = x.o.runs()
	}
	for run := 0; run < runs; run++ {
		if x.o.Mode == Persistent {
			for _, cl := range calls {
				cl.fill(run)
			}
			if err := x.start(reqs, run); err != nil {
				return err
			}
		}
		if err := x.beside(run); err != nil {
			return err
		}
		if err := x.complete(calls, reqs); err != nil {
			return err
		}
		for _, cl := range calls {
			if err := cl.check(run); err != nil {
				if runs > 1 {
					return fmt.Errorf("run %d of %d: %w", run+1, runs, err)
				}
				return err
			}
		}
	}
	if x.o.Mode == Persistent {
		for _, cl := range calls {
			if err := cl.req.Free(); err != nil {
				return fmt.Errorf("%s: Free: %w", cl.what, err)
			}
		}
	}
	return nil
}

// start starts persistent requests, in the same order on every rank:
// with Startall on even runs, one Start at a time on odd ones.
func (x *exec) start(reqs []*mpi.Request, run int) error {
	if run%2 == 0 {
		if err := mpi.Startall(reqs); err != nil {
			return fmt.Errorf("Startall of %d: %w", len(reqs), err)
		}
		return nil
	}
	for i, r := range reqs {
		if err := r.Start(); err != nil {
			return fmt.Errorf("Start of request %d: %w", i, err)
		}
	}
	return nil
}

// beside is the traffic that goes on while the collectives are in flight,
// the same on every rank: a message around the ring in a user tag,
// received with AnySource and AnyTag (no collective's message may match
// it), and a blocking Allreduce checked against its sum.
func (x *exec) beside(run int) error {
	c := x.c
	me, p := c.Rank(), c.Size()
	tag := 7 + x.flushes%100
	out := []byte{byte(me), byte(run), byte(tag)}
	in := make([]byte, 8)
	rr, err := c.Irecv(in, mpi.AnySource, mpi.AnyTag)
	if err != nil {
		return fmt.Errorf("point-to-point beside the collectives: %w", err)
	}
	sr, err := c.Isend(out, (me+1)%p, tag)
	if err != nil {
		return fmt.Errorf("point-to-point beside the collectives: %w", err)
	}
	sum := []int64{int64(me + run)}
	if err := mpi.Allreduce(c, sum, sum, mpi.Sum); err != nil {
		return fmt.Errorf("a blocking allreduce beside the collectives: %w", err)
	}
	if want := int64(p*(p-1)/2 + p*run); sum[0] != want {
		return fmt.Errorf("a blocking allreduce beside the collectives: %d, want %d", sum[0], want)
	}
	st, err := rr.Wait()
	if err != nil {
		return fmt.Errorf("point-to-point beside the collectives: %w", err)
	}
	if _, err := sr.Wait(); err != nil {
		return fmt.Errorf("point-to-point beside the collectives: %w", err)
	}
	left := (me + p - 1) % p
	if st.Source != left || st.Tag != tag || st.Count != 3 || !slices.Equal(in[:3], []byte{byte(left), byte(run), byte(tag)}) {
		return fmt.Errorf("point-to-point beside the collectives: received %v from %d tag %d, want %v from %d tag %d",
			in[:st.Count], st.Source, st.Tag, []byte{byte(left), byte(run), byte(tag)}, left, tag)
	}
	return nil
}

// complete completes every request in a way picked at random: Waitall,
// Wait one by one in a random order, a Waitany loop or a Testall loop.
func (x *exec) complete(calls []*call, reqs []*mpi.Request) error {
	named := func(i int, err error) error {
		if err == nil {
			return nil
		}
		return fmt.Errorf("%s: %w", calls[i].what, err)
	}
	switch x.rng.IntN(4) {
	case 0:
		if err := mpi.Waitall(reqs, make([]mpi.Status, len(reqs))); err != nil {
			return fmt.Errorf("Waitall of %d: %w", len(reqs), err)
		}
	case 1:
		for _, i := range x.rng.Perm(len(reqs)) {
			if _, err := reqs[i].Wait(); err != nil {
				return named(i, err)
			}
		}
	case 2:
		left := slices.Clone(reqs)
		for k := range reqs {
			i, _, err := mpi.Waitany(left)
			if err != nil {
				return named(i, err)
			}
			if i == mpi.Undefined {
				return fmt.Errorf("Waitany found no active request with %d of %d left", len(reqs)-k, len(reqs))
			}
		}
	default:
		deadline := time.Now().Add(time.Minute)
		for spins := 1; ; spins++ {
			done, err := mpi.Testall(reqs, nil)
			if done {
				if err != nil {
					return fmt.Errorf("Testall of %d: %w", len(reqs), err)
				}
				break
			}
			// Let the other ranks run where they outnumber the cores.
			runtime.Gosched()
			if spins%64 == 0 {
				if time.Now().After(deadline) {
					return errors.New("Testall: the collectives did not complete within a minute")
				}
				time.Sleep(20 * time.Microsecond)
			}
		}
	}
	for i, r := range reqs {
		if !r.Done() {
			return fmt.Errorf("%s: pending after its completion", calls[i].what)
		}
	}
	return nil
}
