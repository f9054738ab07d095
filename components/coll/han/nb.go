package han

import (
	"slices"

	"github.com/gompi/gompi/datatype"
	"github.com/gompi/gompi/frameworks/coll"
	"github.com/gompi/gompi/frameworks/pml"
	"github.com/gompi/gompi/mpierr"
)

// Nonblocking and persistent collectives through han. Barrier, bcast,
// reduce, allreduce, gather and allgather(v) run as han's blocking forms
// do, node phase, leaders' phase, node phase, each phase a nonblocking
// collective on a part, planned once as a coroutine of the part's blocking
// algorithm (tuned's, over shm within a node and tcp between the leaders:
// see plan for why not sm's), and started when the phase before it
// completes; a rooted call whose root is not its node's leader ends with a
// message from the leader. A large allreduce runs the blocking spread
// form's steps instead (the node's exchange, the fold, the peers'
// allreduce, the node's allgatherv). Without this, a nonblocking
// collective on a communicator over several nodes ran the flat algorithm
// below han.

// NBFunc fills the nonblocking slots of the operations han runs as a fixed
// list of phases.
func (m *module) NBFunc(op coll.Op) coll.NBFunc {
	switch op {
	case coll.Barrier, coll.Bcast, coll.Reduce, coll.Allreduce, coll.Gather, coll.Allgather, coll.Allgatherv:
		// Not scatter: its phases measured slower than the flat
		// algorithm below han at 8 B and 1 KiB (1.05-1.25x, 2 simulated
		// hosts of 2 ranks), a coroutine switch per phase being most of
		// a small scatter's cost there.
		return m.plan
	}
	return nil
}

// blocksOf returns an allgather's (or allgatherv's) blocks: rank r's count
// and its displacement in Recv, and the bytes of all of them.
func blocksOf(c coll.Comm, a *coll.Args) (count, displ func(r int) int, total int) {
	if a.Op == coll.Allgatherv {
		for _, n := range a.Counts {
			total += n
		}
		return func(r int) int { return a.Counts[r] }, func(r int) int { return a.Displs[r] }, total
	}
	block := len(a.Send)
	if a.InPlace {
		block = len(a.Recv) / c.Size()
	}
	return func(int) int { return block }, func(r int) int { return r * block }, block * c.Size()
}

// takesNB reports whether han plans a's call. It leaves what its blocking
// form passes below (nothing to move, an order it cannot keep), and calls
// larger than coll_han_nonblocking_max_bytes (its phases are whole, where
// the algorithms below pipeline large messages).
func (m *module) takesNB(c coll.Comm, a *coll.Args) bool {
	fits := func(n int) bool { return n > 0 && n <= m.nbMax }
	switch a.Op {
	case coll.Barrier:
		return true
	case coll.Bcast:
		return fits(len(a.Recv)) || m.bcastSpreads(len(a.Recv))
	case coll.Allreduce:
		return (fits(len(a.Recv)) || m.spreads(len(a.Recv))) && m.keepsOrder(a)
	case coll.Reduce:
		return fits(len(a.Input())) && m.keepsOrder(a)
	case coll.Gather:
		return fits(len(a.Send)*c.Size()) || a.InPlace && fits(len(a.Recv))
	case coll.Allgather, coll.Allgatherv:
		_, _, total := blocksOf(c, a)
		return fits(total) || m.gatherSpreads(total, c.Size())
	}
	return false
}

// plan plans a's call as phases on the parts, or, for a call han does not
// take, as nbc does: the blocking algorithm below han run as a coroutine.
// The parts are made here at the communicator's first han call, blocking
// or not (every rank plans its nonblocking collectives in the same order).
func (m *module) plan(c coll.Comm, a *coll.Args) (coll.Plan, error) {
	if !m.takesNB(c, a) {
		return coll.Coroutine(c, a, a.Blocking)
	}
	p, err := m.setup(c)
	if err != nil {
		return nil, err
	}
	pl := &phasePlan{scratch: a.Scratch, phases: make([]phase, 0, maxPhases)}
	me := c.Rank()
	k, k0 := m.node[me], m.node[a.Root]
	n := len(a.Recv)
	switch a.Op {
	case coll.Barrier:
		pl.add(p.node, coll.Barrier, coll.Args{})
		if p.leaders != nil {
			pl.add(p.leaders, coll.Barrier, coll.Args{})
		}
		pl.add(p.node, coll.Barrier, coll.Args{})
	case coll.Bcast:
		if m.bcastSpreads(n) {
			// The blocking spread form's steps: the root's node's hand-out,
			// the peers' bcast, the other nodes' trade; the node's steps on
			// every rank of it, in the window of a run's tag of the node.
			cut := m.cutBcast(c, a)
			out := pl.messages(p.node, cut.handOut(), -1)
			pl.phases[out].tagFrom = out
			pl.add(p.peers, coll.Bcast, coll.Args{Recv: cut.piece(cut.j), Root: cut.k0})
			pl.messages(p.node, cut.trade(), out)
			break
		}
		if k == k0 && a.Root != m.leader(k0) {
			// The root's node has the data after its own bcast, as in the
			// blocking form; its leader then serves the other nodes.
			pl.add(p.node, coll.Bcast, coll.Args{Recv: a.Recv, Root: m.local[a.Root]})
			if p.leaders != nil {
				pl.add(p.leaders, coll.Bcast, coll.Args{Recv: a.Recv, Root: k0})
			}
			break
		}
		if p.leaders != nil {
			pl.add(p.leaders, coll.Bcast, coll.Args{Recv: a.Recv, Root: k0})
		}
		pl.add(p.node, coll.Bcast, coll.Args{Recv: a.Recv})
	case coll.Allreduce:
		if m.spreads(n) {
			// The blocking spread form's steps: the node's exchange (in the
			// window of the node's last phase), the fold, the peers'
			// allreduce, the node's allgatherv.
			s := m.cutSpread(c, a, pl.lend(m.spreadScratch(a)))
			exchange := pl.messages(p.node, s.exchange(), -1)
			pl.copying(s.fold)
			pl.add(p.peers, coll.Allreduce, coll.Args{Recv: s.acc, InPlace: true, Reducer: a.Reducer})
			pl.phases[exchange].tagFrom = pl.add(p.node, coll.Allgatherv, coll.Args{Recv: a.Recv, InPlace: true, Counts: s.length, Displs: s.off})
			break
		}
		if p.leaders != nil {
			pl.add(p.node, coll.Reduce, coll.Args{Send: a.Send, Recv: a.Recv, InPlace: a.InPlace, Reducer: a.Reducer})
			pl.add(p.leaders, coll.Allreduce, coll.Args{Recv: a.Recv, InPlace: true, Reducer: a.Reducer})
		} else {
			pl.add(p.node, coll.Reduce, coll.Args{Send: a.Input(), Recv: pl.lend(n), Reducer: a.Reducer})
		}
		pl.add(p.node, coll.Bcast, coll.Args{Recv: a.Recv})
	case coll.Reduce:
		n = len(a.Input())
		spare := pl.lend(n)
		na := coll.Args{Send: a.Input(), Recv: spare, Reducer: a.Reducer}
		if p.leaders != nil {
			acc := a.Recv
			if me != a.Root {
				acc = pl.lend(n)
			}
			na.Recv = acc
			if me == a.Root && a.InPlace {
				na.Send, na.InPlace = nil, true
			}
			ua := coll.Args{Send: acc, Recv: spare, Root: k0, Reducer: a.Reducer}
			if k == k0 {
				ua.Send, ua.Recv, ua.InPlace = nil, acc, true
			}
			pl.add(p.node, coll.Reduce, na)
			pl.add(p.leaders, coll.Reduce, ua)
			pl.handToRoot(m, p, me, a, acc, 0)
		} else {
			pl.add(p.node, coll.Reduce, na)
			pl.handToRoot(m, p, me, a, nil, 0)
		}
	case coll.Gather:
		m.planGather(c, a, p, pl)
	case coll.Allgather, coll.Allgatherv:
		if count, displ, total := blocksOf(c, a); m.gatherSpreads(total, c.Size()) {
			// The blocking spread form's steps: the own block into Recv,
			// the peers' allgatherv, the node's trade of every node's
			// blocks (its own's too: a plan's steps run one at a time).
			cut := m.cutGatherAll(c, a, count, displ, make([]int, len(m.nodes)), make([]int, len(m.nodes)))
			pl.copying(cut.ownIn)
			pl.add(p.peers, coll.Allgatherv, coll.Args{Recv: a.Recv, InPlace: true, Counts: cut.counts, Displs: cut.displs})
			var msgs []message
			for k2 := range m.nodes {
				msgs = append(msgs, cut.trade(k2)...)
			}
			trade := pl.messages(p.node, msgs, -1)
			pl.phases[trade].tagFrom = trade
			break
		}
		m.planGatherAll(c, a, p, pl)
	}
	pl.op = a.Op
	for i := range pl.phases {
		// Coroutines in the run's tags, not the part's own nonblocking
		// slots: a phase starts when the one before it completes, so the
		// phases of several runs start on a part in an order that differs
		// from rank to rank, which sm's runs, taking turns in one shared
		// segment by the order they start, cannot follow.
		ph := &pl.phases[i]
		if ph.plan != nil {
			continue // a step of han's own
		}
		if ph.plan, err = ph.sub.Table().PlanCoroutine(ph.op, ph.sub, &ph.args); err != nil {
			pl.Free()
			return nil, err
		}
	}
	return pl, nil
}

// planGatherAll adds allgather's (allgatherv's) phases to pl, as the
// blocking gatherAll runs them: the node's blocks gathered to its leader,
// the leaders' allgatherv of the nodes' blocks, the node's bcast of all;
// then, when the nodes' packing is not Recv's own layout, every rank
// unpacks it into rank order (a copy step). The packing's slices are the
// plan's own.
func (m *module) planGatherAll(c coll.Comm, a *coll.Args, p *parts, pl *phasePlan) {
	size, k := c.Size(), m.node[c.Rank()]
	count, displ, _ := blocksOf(c, a)
	var f frame
	nodeOff, nodeLen, rankOff, total, dense, mine := m.packedAll(&f, c, a, count, displ)
	all := a.Recv[:min(total, len(a.Recv))]
	if !dense {
		all = pl.lend(total)
	}
	displs, lens := m.nodeLayout(&f, k, count, rankOff)
	var nodeBuf []byte
	if p.leaders != nil {
		nodeBuf = all[nodeOff[k] : nodeOff[k]+nodeLen[k]]
	}
	na := coll.Args{Send: mine, Recv: nodeBuf}
	gop := coll.Gather
	if a.Op == coll.Allgatherv {
		gop = coll.Gatherv
		na.Counts, na.Displs = lens, displs
	}
	if p.leaders != nil && dense && a.InPlace {
		na.Send, na.InPlace = nil, true // the leader's block is where the node's block starts
	}
	pl.add(p.node, gop, na)
	if p.leaders != nil {
		pl.add(p.leaders, coll.Allgatherv, coll.Args{Recv: all, InPlace: true, Counts: nodeLen, Displs: nodeOff})
	}
	pl.add(p.node, coll.Bcast, coll.Args{Recv: all})
	if !dense {
		pl.copying(func() {
			for r := 0; r < size; r++ {
				datatype.CopyCached(a.Recv[displ(r):displ(r)+count(r)], all[rankOff[r]:rankOff[r]+count(r)])
			}
		})
	}
}

// maxPhases bounds a plan's phases and steps (a gather to a root that is
// not its node's leader on nodes not consecutive: node, leaders, unpacking,
// hand-over; an allgather that unpacks: node, leaders, node, unpacking).
const maxPhases = 4

// planGather adds gather's phases to pl, as the blocking gather runs
// them: the node's blocks gathered to its leader, the leaders' gatherv of
// the nodes' blocks to the root's node's leader, which unpacks them into
// rank order when the nodes are not consecutive and hands them to the root
// when the root is another rank.
func (m *module) planGather(c coll.Comm, a *coll.Args, p *parts, pl *phasePlan) {
	size, me := c.Size(), c.Rank()
	block := len(a.Send)
	if a.InPlace {
		block = len(a.Recv) / size
	}
	k, k0 := m.node[me], m.node[a.Root]
	rootLeader := m.leader(k0)
	mine := a.Send
	if a.InPlace {
		mine = a.Recv[me*block : (me+1)*block]
	}
	var f frame
	nodeOff, nodeLen, rankOff, total := m.packed(&f, func(int) int { return block })
	var res, all, nodeBuf []byte
	if me == rootLeader {
		res = a.Recv
		if me != a.Root {
			res = pl.lend(total)
		}
		all = res
		if !m.consecutive {
			all = pl.lend(total)
		}
		nodeBuf = all[nodeOff[k] : nodeOff[k]+nodeLen[k]]
	} else if p.leaders != nil {
		nodeBuf = pl.lend(nodeLen[k])
	}
	na := coll.Args{Send: mine, Recv: nodeBuf}
	if me == a.Root && a.InPlace && m.consecutive && me == rootLeader {
		na.Send, na.InPlace = nil, true // the root's block is where the node's block starts
	}
	node := pl.add(p.node, coll.Gather, na)
	if p.leaders != nil {
		ua := coll.Args{Send: nodeBuf, Root: k0, Counts: nodeLen, Displs: nodeOff}
		if me == rootLeader {
			ua.Send, ua.Recv, ua.InPlace = nil, all, true
		}
		pl.add(p.leaders, coll.Gatherv, ua)
	}
	if me == rootLeader && !m.consecutive {
		pl.copying(func() {
			for r := 0; r < size; r++ {
				datatype.CopyCached(res[r*block:(r+1)*block], all[rankOff[r]:rankOff[r]+block])
			}
		})
	}
	pl.handToRoot(m, p, me, a, res, node)
}

// phase is one collective of a han plan on one part, or a step of han's
// own (plan set when added): a message between a root and its node's
// leader, or a copy.
type phase struct {
	sub  coll.Sub
	op   coll.Op
	args coll.Args // the sub-plan's, alive as long as it
	plan coll.Plan
	tag  int // this run's, taken at Start
	base int // the run's tag taken from sub, when it took one
	// tagFrom, for a message step, is the phase whose run window its tag
	// is in (at han's own phase, ownTag): every rank of the node takes
	// that phase's tag, where only two send and receive the message. A
	// message step that is its own tagFrom takes a run's tag from sub
	// (every rank of the node has it, empty on some). -1: the phase takes
	// a tag of its own from sub, or none (a copy, which has no sub).
	tagFrom int
}

// phasePlan runs its phases one after another, each started when the one
// before completes; it holds the scratch its phases use as long as it
// lives (a persistent collective's runs use the same).
type phasePlan struct {
	op      coll.Op
	phases  []phase // made with their final capacity: the args' addresses stay
	cur     int
	scratch *coll.Scratch
	lent    [][]byte
}

func (pl *phasePlan) add(sub coll.Sub, op coll.Op, a coll.Args) int {
	pl.phases = append(pl.phases, phase{sub: sub, op: op, args: a, tagFrom: -1})
	return len(pl.phases) - 1
}

// message adds a step that sends buf to, or receives it from, rank peer
// of sub, in the window of phase tagFrom's run.
func (pl *phasePlan) message(sub coll.Sub, send bool, buf []byte, peer, tagFrom int) int {
	return pl.messages(sub, []message{{send: send, buf: buf, peer: peer}}, tagFrom)
}

// messages adds a step of several messages on sub, started at once. Empty
// ones are left out (both ends know their lengths), so that the step's
// requests are its messages, in order.
func (pl *phasePlan) messages(sub coll.Sub, msgs []message, tagFrom int) int {
	msgs = slices.DeleteFunc(msgs, func(x message) bool { return len(x.buf) == 0 })
	pl.phases = append(pl.phases, phase{sub: sub, plan: &messageStep{sub: sub, msgs: msgs}, tagFrom: tagFrom})
	return len(pl.phases) - 1
}

// copying adds a step that runs fn (a packing) when the steps before it
// are done.
func (pl *phasePlan) copying(fn func()) {
	pl.phases = append(pl.phases, phase{plan: localStep(fn), tagFrom: -1})
}

// handToRoot adds the last hop of a rooted result gathered at the root's
// node's leader (result there) to a root that is another rank, in the
// window of node phase nodePhase: the blocking form's handToRoot.
func (pl *phasePlan) handToRoot(m *module, p *parts, me int, a *coll.Args, result []byte, nodePhase int) {
	rootLeader := m.leader(m.node[a.Root])
	switch {
	case a.Root == rootLeader:
	case me == rootLeader:
		pl.message(p.node, true, result, m.local[a.Root], nodePhase)
	case me == a.Root:
		pl.message(p.node, false, a.Recv, 0, nodePhase)
	}
}

// lend takes n bytes of the communicator's scratch for the plan's life.
func (pl *phasePlan) lend(n int) []byte {
	b := pl.scratch.Get(n)
	pl.lent = append(pl.lent, b)
	return b
}

// Start takes every phase's tag from its part now, in the order the
// communicator's collectives start, which is the same on every rank; a
// tag taken when the phase starts would follow the order in which runs
// happen to complete, which is not.
func (pl *phasePlan) Start(int) error {
	for i := range pl.phases {
		if ph := &pl.phases[i]; (ph.tagFrom < 0 || ph.tagFrom == i) && ph.sub != nil {
			ph.base = ph.sub.NBTag()
			ph.tag = ph.base
		}
	}
	for i := range pl.phases {
		if ph := &pl.phases[i]; ph.tagFrom >= 0 {
			var err error
			if ph.tag, err = coll.RunTag(pl.phases[ph.tagFrom].base, ownTag(pl.op)); err != nil {
				return err
			}
		}
	}
	pl.cur = 0
	return pl.phases[0].plan.Start(pl.phases[0].tag)
}

// Progress advances the current phase and starts the next when it is done.
func (pl *phasePlan) Progress() (bool, error) {
	for {
		ph := &pl.phases[pl.cur]
		done, err := ph.plan.Progress()
		if !done {
			return false, nil
		}
		if err != nil {
			return true, err
		}
		if pl.cur++; pl.cur == len(pl.phases) {
			return true, nil
		}
		next := &pl.phases[pl.cur]
		if err := next.plan.Start(next.tag); err != nil {
			return true, err
		}
	}
}

// Free frees the phases' plans and gives the scratch back.
func (pl *phasePlan) Free() {
	for i := range pl.phases {
		if p := pl.phases[i].plan; p != nil {
			p.Free()
			pl.phases[i].plan = nil
		}
	}
	pl.scratch.Put(pl.lent...)
	pl.lent = nil
}

// Reusable: the same call may start the plan again. Its phases are
// coroutines of blocking algorithms, which decide from the arguments at
// every run (a persistent collective restarts them too), and the parts and
// the scratch it holds do not change: nothing it chose can go stale.
func (pl *phasePlan) Reusable() bool { return true }

// messageStep is messages of a plan on a part, all started at once and
// done when all are: the hand-over between a rooted operation's root and
// its node's leader, or a spread allreduce's node exchange.
type messageStep struct {
	sub  coll.Sub
	msgs []message
	reqs []*pml.Request
}

func (s *messageStep) Start(tag int) error {
	s.reqs = s.reqs[:0]
	return postMessages(&s.reqs, s.sub, s.msgs, tag)
}

func (s *messageStep) Progress() (bool, error) {
	for _, r := range s.reqs {
		if !r.Done() {
			return false, nil
		}
	}
	// Every request is waited (a Wait gives it back); the first error is
	// the step's.
	var first error
	for i, r := range s.reqs {
		st, err := r.Wait()
		if x := s.msgs[i]; err == nil && !x.send && st.Count != len(x.buf) {
			err = mpierr.Errorf(mpierr.ErrCount, "coll han: %d bytes from rank %d of %s, want %d", st.Count, x.peer, s.sub.Name(), len(x.buf))
		}
		if first == nil {
			first = err
		}
	}
	s.reqs = s.reqs[:0]
	return true, first
}

// Free takes back receives still posted (a plan abandoned before its run
// ended), so that nothing writes into their buffers after.
func (s *messageStep) Free() {
	for _, r := range s.reqs {
		if !r.Done() {
			r.Cancel()
		}
	}
	s.reqs = nil
}

// localStep is a copy of a plan's, done when the steps before it are.
type localStep func()

func (f localStep) Start(int) error         { f(); return nil }
func (f localStep) Progress() (bool, error) { return true, nil }
func (f localStep) Free()                   {}
