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
// that sm does not take (its size, a segment not set up yet) runs the
// blocking algorithm of the module below sm as a coroutine, as coll nbc
// would.
func (m *module) NBFunc(op coll.Op) coll.NBFunc {
	if m.slots[op] == nil {
		return nil
	}
	return func(c coll.Comm, a *coll.Args) (coll.Plan, error) {
		if !m.takesNB(op, a) {
			return coll.Coroutine(c, a, a.Blocking)
		}
		p := m.nbSpare.Swap(nil)
		if p == nil {
			p = &nbPlan{m: m}
		}
		p.op, p.a = op, a
		return p, nil
	}
}

// takesNB reports whether sm runs op on a natively: the segment is set up
// (by a blocking call: setting it up exchanges messages and waits), and the
// blocking form would run through it.
func (m *module) takesNB(op coll.Op, a *coll.Args) bool {
	if m.state != on {
		return false
	}
	bytes := 0
	switch op {
	case coll.Bcast:
		bytes = len(a.Recv)
	case coll.Reduce, coll.Allreduce:
		bytes = len(a.Input())
	}
	return bytes <= m.maxBytes && (bytes >= m.rootedMin || op != coll.Bcast && op != coll.Reduce)
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
	op     coll.Op
	a      *coll.Args
	ticket uint64 // this run's place among the communicator's nonblocking runs
	state  int
	k      uint64 // this run's (first) sequence number
	par    int    // and its slots' parity
	split  bool   // an allreduce that shares the combining out (allreduceSplit)
}

func (p *nbPlan) Start(int) error {
	m := p.m
	// Starts come in call order, from the program's calls on the
	// communicator, one at a time.
	m.nbTickets++
	p.ticket = m.nbTickets
	p.state = nbAfterPrev
	p.advance()
	return nil
}

func (p *nbPlan) Progress() (bool, error) {
	if p.state != nbDone {
		if err := p.m.node.Broken(); err != nil {
			p.finish()
			return true, err
		}
	}
	p.advance()
	return p.state == nbDone, nil
}

// Free ends the plan; a run abandoned in flight (Finalize) no longer
// holds back the communicator's blocking operations. A finished plan goes
// back to the module, for the next plan: a small operation in a loop costs
// no allocation (one kept is enough for that; several in flight at once
// allocate).
func (p *nbPlan) Free() {
	m := p.m
	p.a = nil
	if p.state != nbDone {
		p.finish()
		return
	}
	m.nbSpare.Store(p)
}

// Reusable: a plan sm runs natively stays right, since the segment, once
// set up, serves the communicator for its life; calls that sm passes on
// are coroutines, which make no such claim.
func (p *nbPlan) Reusable() bool { return true }

// advance takes the run as far as it goes without waiting.
func (p *nbPlan) advance() {
	m, a := p.m, p.a
	if p.state == nbAfterPrev {
		// Runs begin one after another and finish in that order.
		if m.nbFinished.Load() < p.ticket-1 {
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
