package sm

import (
	"github.com/gompi/gompi/frameworks/coll"
	"github.com/gompi/gompi/release"
)

// sm's nonblocking barrier, bcast, reduce and allreduce: the blocking
// algorithms' steps (begin, write the slot, publish, wait for the others'
// numbers, combine or copy) as states that Progress advances without
// waiting. Start writes this rank's part and publishes it, so that what the
// others need is there while the program computes; the rest is one look at
// the sequence numbers per Progress. A coroutine could run the blocking
// functions only one at a time (Serial), and would cost a goroutine switch
// per wait, more than the whole of a small operation here.
//
// sm's operations follow one sequence through the segment, in call order
// (the same on every rank, as MPI asks): a nonblocking one begins only once
// the one started before it on this communicator is done here, and a
// blocking one waits for every nonblocking one in flight first, so that the
// sequence numbers and slot parities are taken in call order, as the
// blocking operations alone take them.

// NBFunc fills the nonblocking slots of the operations sm carries; a call
// that sm does not take (its size, or a segment that could not be set up)
// runs the blocking algorithm of the module below sm as a coroutine, as
// coll nbc would.
//
// The first call that sm would take, on a communicator whose segment is
// not set up yet, sets it up in its run (setupPlan), so that a program
// that only makes nonblocking calls gets sm too. The calls made while that
// run is in flight are planned as sm's on every rank, whatever the setup's
// progress here (the choice must be the same everywhere): each waits for
// the run before it, and if the ranks agreed that there is no segment, it
// runs the coroutine then (nbPlan.below).
func (m *module) NBFunc(op coll.Op) coll.NBFunc {
	if m.slots[op] == nil {
		return nil
	}
	return func(c coll.Comm, a *coll.Args) (coll.Plan, error) {
		state := m.state.Load()
		if state == off || !m.takesNB(op, a) {
			return coll.Coroutine(c, a, a.Blocking)
		}
		if state == unset {
			return m.setupRun(c, a)
		}
		p := m.nbSpare.Swap(nil)
		if p == nil {
			p = &nbPlan{m: m}
		}
		p.op, p.a, p.c = op, a, c
		return p, nil
	}
}

// takesNB reports whether op on a is a call that sm runs itself once its
// segment is set up: the blocking form would run through it.
func (m *module) takesNB(op coll.Op, a *coll.Args) bool {
	bytes := 0
	switch op {
	case coll.Bcast:
		bytes = len(a.Recv)
	case coll.Reduce, coll.Allreduce:
		bytes = len(a.Input())
	}
	return bytes <= m.maxBytes && (bytes >= m.rootedMin || op != coll.Bcast && op != coll.Reduce)
}

// setupRun plans the call that sets the segment up: a coroutine that runs
// setup (its messages go out as the run is progressed; the run's tags keep
// them apart from anything else), then this call with the module below's
// algorithm, as every rank does for it. Its runs take tickets like sm's
// own, so that the calls after them wait for them, and so does a blocking
// call (ready). A persistent call's later runs are the module below's
// algorithm alone, on every rank.
func (m *module) setupRun(c coll.Comm, a *coll.Args) (coll.Plan, error) {
	below := a.Blocking
	if below == nil {
		return coll.Coroutine(c, a, nil) // its error names the operation
	}
	setUp := false
	inner, err := coll.Coroutine(c, a, func(c coll.Comm, a *coll.Args) error {
		if !setUp {
			setUp = true
			if err := m.setup(c); err != nil {
				return err
			}
		}
		return below(c, a)
	})
	if err != nil {
		return nil, err
	}
	m.state.Store(setting)
	return &setupPlan{m: m, inner: inner}, nil
}

// setupPlan is setupRun's plan: the coroutine, counted among sm's runs.
type setupPlan struct {
	m       *module
	inner   coll.Plan
	running bool // a run started and not yet counted done
}

func (p *setupPlan) Start(tag int) error {
	p.m.nbTickets++
	p.running = true
	if err := p.inner.Start(tag); err != nil {
		p.finish()
		return err
	}
	return nil
}

func (p *setupPlan) Progress() (bool, error) {
	done, err := p.inner.Progress()
	if done {
		p.finish()
	}
	return done, err
}

func (p *setupPlan) Free() {
	p.inner.Free()
	p.finish()
	// Never started, or its setup ended without settling (a lost peer):
	// sm stays off, as after a blocking setup that fails.
	p.m.state.CompareAndSwap(setting, off)
}

// finish counts the run done, once.
func (p *setupPlan) finish() {
	if !p.running {
		return
	}
	p.running = false
	m := p.m
	m.state.CompareAndSwap(setting, off)
	release.Store(&m.nbFinished, m.nbFinished.Load()+1)
}

// The states of an nbPlan's run.
const (
	nbAfterPrev = iota // waits for the run started before it to be done here
	nbBegin            // waits for every rank to have started the previous operation (writers)
	nbArrive           // waits for the others' numbers
	nbShared           // a split allreduce: waits for every rank's block of the shared result
	nbDone
)

// nbPlan is one nonblocking sm operation.
type nbPlan struct {
	m      *module
	c      coll.Comm
	tag    int       // the run's base tag
	below  coll.Plan // the module below's coroutine, when the setup it waited for failed
	err    error     // why the run ended, when it could not start below
	op     coll.Op
	a      *coll.Args
	ticket uint64 // this run's place among the communicator's nonblocking runs
	state  int
	k      uint64 // this run's (first) sequence number
	par    int    // and its slots' parity
	split  bool   // an allreduce that shares the combining out (allreduceSplit)
}

func (p *nbPlan) Start(tag int) error {
	m := p.m
	p.tag = tag
	// Starts come in call order, from the program's calls on the
	// communicator, one at a time.
	m.nbTickets++
	p.ticket = m.nbTickets
	p.state, p.err = nbAfterPrev, nil
	p.advance()
	return nil
}

func (p *nbPlan) Progress() (bool, error) {
	if p.below != nil {
		done, err := p.below.Progress()
		if done && p.state != nbDone {
			p.finish()
		}
		return done, err
	}
	if p.state != nbDone {
		if err := p.m.node.Broken(); err != nil {
			p.finish()
			return true, err
		}
	}
	p.advance()
	if p.below != nil {
		// The setup it waited for failed: the coroutine from now on.
		return p.Progress()
	}
	return p.state == nbDone, p.err
}

// Free ends the plan; a run abandoned in flight (Finalize) no longer
// holds back the communicator's blocking operations. A finished plan goes
// back to the module, for the next plan: a small operation in a loop costs
// no allocation (one kept is enough for that; several in flight at once
// allocate).
func (p *nbPlan) Free() {
	m := p.m
	if p.below != nil {
		p.below.Free()
		p.below = nil
		if p.state != nbDone {
			p.finish()
		}
		p.a, p.c = nil, nil
		return
	}
	p.a, p.c = nil, nil
	if p.state != nbDone {
		p.finish()
		return
	}
	m.nbSpare.Store(p)
}

// Reusable: a plan sm runs natively stays right, since the segment, once
// set up, serves the communicator for its life; calls that sm passes on
// are coroutines, which make no such claim.
func (p *nbPlan) Reusable() bool { return p.below == nil }

// advance takes the run as far as it goes without waiting.
func (p *nbPlan) advance() {
	m, a := p.m, p.a
	if p.state == nbAfterPrev {
		// Runs begin one after another and finish in that order.
		if m.nbFinished.Load() < p.ticket-1 {
			return
		}
		if m.state.Load() != on {
			// Planned while a setup was in flight, which failed on every
			// rank (they agree): the module below's algorithm, as the
			// ranks that planned after it do.
			p.runBelow()
			return
		}
		p.state = nbBegin
	}
	if p.state == nbBegin {
		writes := p.op == coll.Reduce || p.op == coll.Allreduce || p.op == coll.Bcast && m.me == a.Root
		if writes && m.prevStart > 0 && !m.allAt(m.prevStart) {
			return
		}
		p.split = p.op == coll.Allreduce && len(a.Input()) >= m.split
		phases := uint64(1)
		if p.split {
			phases = 2
		}
		p.k, p.par = m.reserve(phases)
		switch {
		case p.op == coll.Bcast && m.me == a.Root:
			copyCached(m.data(m.me, p.par, len(a.Recv)), a.Recv)
		case writes:
			in := a.Input()
			copyCached(m.data(m.me, p.par, len(in)), in)
		}
		m.publish(p.k)
		if writes && (p.op == coll.Bcast || p.op == coll.Reduce && m.me != a.Root) {
			p.finish()
			return
		}
		p.state = nbArrive
	}
	if p.state == nbArrive {
		if p.op == coll.Bcast {
			if m.seqs[a.Root].Load() < p.k {
				return
			}
			copyCached(a.Recv, m.data(a.Root, p.par, len(a.Recv)))
			p.finish()
			return
		}
		if !m.allAt(p.k) {
			return
		}
		m.seen = p.k
		if p.split {
			// allreduceSplit's second half: this rank's block of the
			// shared result, then everyone's.
			in := a.Input()
			from, to := m.splitBlock(a, len(in))
			m.fold(a, p.par, m.result(p.par, len(in))[from:to], from)
			m.publish(p.k + 1)
			p.state = nbShared
		} else {
			if p.op != coll.Barrier {
				n := len(a.Input())
				m.fold(a, p.par, a.Recv[:n], 0)
			}
			p.finish()
			return
		}
	}
	if p.state == nbShared {
		if !m.allAt(p.k + 1) {
			return
		}
		m.seen = p.k + 1
		n := len(a.Input())
		copyCached(a.Recv[:n], m.result(p.par, n))
		p.finish()
	}
}

// runBelow runs the call as a coroutine of the module below's algorithm.
func (p *nbPlan) runBelow() {
	below, err := coll.Coroutine(p.c, p.a, p.a.Blocking)
	if err == nil {
		err = below.Start(p.tag)
	}
	if err != nil {
		p.err = err
		p.finish()
		return
	}
	p.below = below
}

// finish marks the run done here: the run started after it may begin,
// and, with none left in flight, a blocking operation.
func (p *nbPlan) finish() {
	p.state = nbDone
	// Plans run one at a time (coll.Plan): a plain store publishes the
	// count to a blocking call's drainNB.
	release.Store(&p.m.nbFinished, p.m.nbFinished.Load()+1)
}

// allAt reports, without waiting, whether every rank has published k.
func (m *module) allAt(k uint64) bool {
	if m.seen >= k {
		return true
	}
	for _, s := range m.seqs {
		if s.Load() < k {
			return false
		}
	}
	return true
}

// drainNB waits until the nonblocking operations in flight on the
// communicator are done here, before a blocking one takes the next
// sequence number. The instance's progress advances them meanwhile.
func (m *module) drainNB() error {
	if m.nbDrainedNow() {
		return nil
	}
	return m.node.Until(m.nbDrained)
}

// nbDrainedNow reports whether every nonblocking run started here is done.
func (m *module) nbDrainedNow() bool { return m.nbFinished.Load() == m.nbTickets }

var _ coll.Nonblocking = (*module)(nil)
