package sm

import (
	"github.com/gompi/gompi/datatype"
	"github.com/gompi/gompi/frameworks/coll"
	"github.com/gompi/gompi/release"
)

// sm's nonblocking barrier, bcast, reduce, allreduce, allgather and
// alltoall: the blocking algorithms' steps (begin, write the slot,
// publish, wait for the others' numbers, combine or copy) as states that
// Progress advances without waiting. Start writes this rank's part and
// publishes it, so that what the others need is there while the program
// computes; the rest is one look at the sequence numbers per Progress. A
// coroutine could run the blocking functions only one at a time (Serial),
// and would cost a goroutine switch per wait, more than the whole of a
// small operation here.
//
// sm's operations follow one sequence through the segment, in call order
// (the same on every rank, as MPI asks): a nonblocking one begins only
// once the one started before it on this communicator is done here, and a
// blocking one waits for every nonblocking one in flight first, so that
// the sequence numbers and slot parities are taken in call order, as the
// blocking operations alone take them.

// NBFunc fills the nonblocking slots of the operations sm carries; a call
// that sm does not take (its size, or a segment that could not be set up)
// runs the blocking algorithm of the module below sm as a coroutine, as
// coll nbc would.
//
// Whether a run of an nbPlan is sm's own is decided when it starts, not
// when it is planned: every rank starts the calls of a communicator in the
// same order, blocking and nonblocking, persistent runs among them, so the
// segment's state at a start is the same on every rank (unset, or set up
// or being set up by an earlier call). A persistent call planned before
// the segment existed therefore runs natively once it does, and one kept
// unstarted holds nothing back.
//
// A run started while the segment is unset sets it up (the first call sm
// would take, in a program that makes nonblocking calls first): a
// coroutine that runs sm's setup, whose messages go out as the run is
// progressed, then the call with the module below's algorithm, on every
// rank. The runs started while that one is in flight wait for it, and run
// the module below's algorithm if the ranks agreed that there is no
// segment (nbPlan.below).
func (m *module) NBFunc(op coll.Op) coll.NBFunc {
	if m.slots[op] == nil || op == coll.Gather || op == coll.Scatter {
		// Gather and scatter: blocking only; coll nbc fills them (a
		// coroutine of the algorithm below sm's).
		return nil
	}
	return func(c coll.Comm, a *coll.Args) (coll.Plan, error) {
		if m.state.Load() == off || !m.takesNB(op, a) {
			return coll.Coroutine(c, a, a.Blocking)
		}
		p := m.nbSpare.Swap(nil)
		if p == nil {
			// Done until started: a plan freed unstarted counts no run.
			p = &nbPlan{m: m, state: nbDone}
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
	case coll.Allgather:
		_, bytes = m.allgatherInput(a)
	case coll.Alltoall:
		bytes = len(a.Recv)
	}
	return bytes <= m.maxBytes && (bytes >= m.rootedMin || op != coll.Bcast && op != coll.Reduce)
}

// startSetup makes p's run the one that sets the segment up: sm's setup,
// then the call with the module below's algorithm, as a coroutine. It
// counts among sm's runs (its ticket), so that the runs after it wait for
// it, and so does a blocking call (ready).
func (p *nbPlan) startSetup() error {
	m := p.m
	below := p.a.Blocking
	if below == nil {
		_, err := coll.Coroutine(p.c, p.a, nil) // its error names the operation
		return err
	}
	setup, err := coll.Coroutine(p.c, p.a, func(c coll.Comm, a *coll.Args) error {
		if err := m.setup(c); err != nil {
			return err
		}
		return below(c, a)
	})
	if err != nil {
		return err
	}
	m.state.Store(setting)
	p.setup, p.inner = setup, setup
	return setup.Start(p.tag)
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
	m   *module
	c   coll.Comm
	tag int // the run's base tag
	// below is the module below's coroutine, made by the first run that
	// found the segment off (a setup that failed), kept for the next;
	// setup is the coroutine of a run that set the segment up (startSetup);
	// inner is the one of the two that the run in flight is, or nil: sm's
	// own steps.
	below, setup, inner coll.Plan
	err                 error // why the run ended, when it could not start below
	op                  coll.Op
	a                   *coll.Args
	ticket              uint64 // this run's place among the communicator's nonblocking runs
	state               int
	k                   uint64 // this run's (first) sequence number
	par                 int    // and its slots' parity
	split               bool   // an allreduce that shares the combining out (allreduceSplit)
}

func (p *nbPlan) Start(tag int) error {
	m := p.m
	p.tag = tag
	// Starts come in call order, from the program's calls on the
	// communicator, one at a time.
	m.nbTickets++
	p.ticket = m.nbTickets
	p.state, p.err, p.inner = nbAfterPrev, nil, nil
	if p.setup != nil {
		// The setup ran in the last run; this one is sm's or below's.
		p.setup.Free()
		p.setup = nil
	}
	if m.state.Load() == unset {
		if err := p.startSetup(); err != nil {
			p.inner = nil
			p.finish()
			return err
		}
		return nil
	}
	p.advance()
	return nil
}

// Finished (coll.Finisher): a run of sm's own steps that Start took to
// the end. A run through a setup or the module below reports through
// Progress.
func (p *nbPlan) Finished() (bool, error) {
	return p.inner == nil && p.state == nbDone, p.err
}

func (p *nbPlan) Progress() (bool, error) {
	if p.inner != nil {
		done, err := p.inner.Progress()
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
	if p.inner != nil {
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
	spare := p.state == nbDone && p.below == nil && p.setup == nil
	if p.state != nbDone {
		p.finish()
	}
	p.a, p.c, p.inner = nil, nil, nil
	if spare {
		m.nbSpare.Store(p)
		return
	}
	if p.below != nil {
		p.below.Free()
		p.below = nil
	}
	if p.setup != nil {
		p.setup.Free()
		p.setup = nil
	}
}

// Reusable: a run of sm's own steps stays right for the same call made
// again, since the segment, once set up, serves the communicator for its
// life; a run that set the segment up or ran the module below's
// algorithm makes no such claim.
func (p *nbPlan) Reusable() bool { return p.inner == nil }

// advance takes the run as far as it goes without waiting.
func (p *nbPlan) advance() {
	m, a := p.m, p.a
	if p.state == nbAfterPrev {
		// Runs begin one after another and finish in that order.
		if m.nbFinished.Load() < p.ticket-1 {
			return
		}
		if m.state.Load() != on {
			// Started while a setup was in flight, which failed on every
			// rank (they agree), or after it failed: the module below's
			// algorithm, as on every other rank.
			p.runBelow()
			return
		}
		p.state = nbBegin
	}
	if p.state == nbBegin {
		writes := p.op == coll.Reduce || p.op == coll.Allreduce || p.op == coll.Allgather || p.op == coll.Alltoall ||
			p.op == coll.Bcast && m.me == a.Root
		if writes && m.prevStart > 0 && !m.allAt(m.prevStart) {
			return
		}
		p.split = p.op == coll.Allreduce && m.splits(len(a.Input()))
		phases := uint64(1)
		if p.split {
			phases = 2
		}
		p.k, p.par = m.reserve(phases)
		switch {
		case p.op == coll.Bcast && m.me == a.Root:
			datatype.CopyCached(m.data(m.me, p.par, len(a.Recv)), a.Recv)
		case p.op == coll.Allgather:
			in, bs := m.allgatherInput(a)
			datatype.CopyCached(m.data(m.me, p.par, bs), in)
		case writes:
			in := a.Input()
			datatype.CopyCached(m.data(m.me, p.par, len(in)), in)
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
			datatype.CopyCached(a.Recv, m.data(a.Root, p.par, len(a.Recv)))
			p.finish()
			return
		}
		if !m.allAt(p.k) {
			return
		}
		m.seen = p.k
		switch p.op {
		case coll.Allgather:
			_, bs := m.allgatherInput(a)
			m.gatherOut(a, p.par, bs)
			p.finish()
			return
		case coll.Alltoall:
			m.alltoallOut(a, p.par)
			p.finish()
			return
		}
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
		datatype.CopyCached(a.Recv[:n], m.result(p.par, n))
		p.finish()
	}
}

// runBelow runs the call as a coroutine of the module below's algorithm.
func (p *nbPlan) runBelow() {
	if p.below == nil {
		below, err := coll.Coroutine(p.c, p.a, p.a.Blocking)
		if err != nil {
			p.err = err
			p.finish()
			return
		}
		p.below = below
	}
	if err := p.below.Start(p.tag); err != nil {
		p.err = err
		p.finish()
		return
	}
	p.inner = p.below
}

// finish marks the run done here: the run started after it may begin,
// and, with none left in flight, a blocking operation.
func (p *nbPlan) finish() {
	p.state = nbDone
	m := p.m
	if p.setup != nil {
		// A setup that ended without settling (a lost peer) leaves sm
		// off, as a blocking setup that fails does.
		m.state.CompareAndSwap(setting, off)
	}
	// Plans run one at a time (coll.Plan): a plain store publishes the
	// count to a blocking call's drainNB.
	release.Store(&m.nbFinished, m.nbFinished.Load()+1)
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
