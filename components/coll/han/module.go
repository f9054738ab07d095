package han

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/gompi/gompi/datatype"
	"github.com/gompi/gompi/frameworks/coll"
	"github.com/gompi/gompi/mca"
	"github.com/gompi/gompi/mpierr"
)

// module is han's part of one communicator.
type module struct {
	*layout
	log     *mca.Logger
	segment int
	spread  int // coll_han_allreduce_spread_bytes
	// gatherSpread is coll_han_allgather_spread_bytes: allgathers of at
	// least this many bytes in all spread their network phase.
	gatherSpread int
	// bcastSpread is coll_han_bcast_spread_bytes: bcasts of at least this
	// many bytes spread their network phase.
	bcastSpread int
	// scatterSpread is coll_han_scatter_spread_bytes: scatters of blocks
	// of at least this many bytes spread their network phase.
	scatterSpread int
	nbMax         int // coll_han_nonblocking_max_bytes
	// gatherMax is coll_han_gather_max_bytes: larger blocks of a gather
	// or scatter go below han.
	gatherMax int
	// anyReducer is int64 max: the ranks' agreement on whether any failed.
	anyReducer datatype.Reducer
	// phase names the component chosen for each operation's phases, ""
	// for the slot's own (coll_han_<op>_low and _up).
	phase [coll.NumOps][2]string
	// below is each filled slot's function under han's (Stacker): calls
	// han does not take, and the agreement that makes the parts.
	below [coll.NumOps]coll.Func

	mu    sync.Mutex
	made  bool
	err   error // why the parts could not be made: every later call fails alike
	parts parts

	// fr is the scratch of the call in progress, taken by enter.
	fr   frame
	busy atomic.Bool
}

// frame is one call's scratch: the phases' arguments, the segment bounds
// and the node packing. A communicator's blocking collectives come one at a
// time (MPI's rule, and han is coll.Serial), so the module keeps one, and a
// small collective in a loop allocates nothing: an Args literal handed to
// a phase escapes, an allocation per phase.
type frame struct {
	sub                       coll.Args
	segs                      []int
	nodeOff, nodeLen, rankOff []int
	displs, lens              []int
}

// enter takes the module's frame for a call, or a fresh one when another
// call holds it (collectives on one communicator from two goroutines at
// once, which MPI does not allow but which must not corrupt this one).
func (m *module) enter() *frame {
	if m.busy.CompareAndSwap(false, true) {
		return &m.fr
	}
	return new(frame)
}

// leave ends the call that entered with f: the phases' arguments drop the
// caller's buffers, and the module's frame is free again.
func (m *module) leave(f *frame) {
	f.sub.Clear()
	if f == &m.fr {
		m.busy.Store(false)
	}
}

// args returns the arguments of the next phase, v in the frame's room. The
// phase before must be over, or have copied them (a nonblocking start
// does).
func (f *frame) args(v coll.Args) *coll.Args {
	f.sub.Reuse(v)
	return &f.sub
}

// ints returns s with length n, zeroed, growing it if need be.
func ints(s []int, n int) []int {
	if cap(s) < n {
		return make([]int, n)
	}
	s = s[:n]
	clear(s)
	return s
}

// parts are the sub-communicators of one communicator and the functions
// chosen for their phases.
type parts struct {
	node    coll.Sub // this rank's node
	leaders coll.Sub // the nodes' leaders; nil on the other ranks
	// peers are the ranks in this rank's place (its rank in its node) on
	// every node, made when every node holds the same number of ranks: the
	// spread allreduce's network phase.
	peers coll.Sub
	// low and up are the functions of the chosen components, by the
	// operation of the phase (an allreduce's low phases are a reduce and a
	// bcast); nil: the slot's own.
	lowFn, upFn [coll.NumOps][coll.NumOps]coll.Func
}

func (m *module) Func(op coll.Op) coll.Func {
	switch op {
	case coll.Barrier:
		return m.barrier
	case coll.Bcast:
		return m.bcast
	case coll.Reduce:
		return m.reduce
	case coll.Allreduce:
		return m.allreduce
	case coll.Gather:
		return m.gather
	case coll.Scatter:
		return m.scatter
	case coll.Allgather:
		return m.allgather
	case coll.Allgatherv:
		return m.allgatherv
	}
	return nil
}

// Stack keeps the function below han's for the calls it passes on.
func (m *module) Stack(op coll.Op, below coll.Func) { m.below[op] = below }

// Serial: han's operations run collectives on its parts in a fixed order;
// two of them at once on one communicator could interleave those
// differently on different ranks.
func (m *module) Serial() {}

// Finalize frees the parts.
func (m *module) Finalize() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	var errs []error
	for _, s := range []coll.Sub{m.parts.peers, m.parts.leaders, m.parts.node} {
		if s != nil {
			errs = append(errs, s.Free())
		}
	}
	m.parts = parts{}
	return errors.Join(errs...)
}

// phasesOf are the operations each filled operation runs in its phases.
var phasesOf = map[coll.Op][2][]coll.Op{
	coll.Barrier:    {{coll.Barrier}, {coll.Barrier}},
	coll.Bcast:      {{coll.Bcast}, {coll.Bcast}},
	coll.Reduce:     {{coll.Reduce}, {coll.Reduce}},
	coll.Allreduce:  {{coll.Reduce, coll.Bcast}, {coll.Allreduce}},
	coll.Gather:     {{coll.Gather}, {coll.Gatherv}},
	coll.Scatter:    {{coll.Scatter}, {coll.Scatterv}},
	coll.Allgather:  {{coll.Gather, coll.Bcast}, {coll.Allgatherv}},
	coll.Allgatherv: {{coll.Gatherv, coll.Bcast}, {coll.Allgatherv}},
}

// setup makes the parts at the communicator's first call, collectively:
// every rank's first han call is the same operation (MPI's order).
func (m *module) setup(c coll.Comm) (*parts, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.made {
		return &m.parts, m.err
	}
	m.made = true
	m.err = m.makeParts(c)
	return &m.parts, m.err
}

func (m *module) makeParts(c coll.Comm) error {
	sp, ok := c.(coll.Splitter)
	if !ok {
		return mpierr.Errorf(mpierr.ErrIntern, "coll han: %s cannot make sub-communicators", c.Name())
	}
	agree := m.below[coll.Allreduce]
	if agree == nil {
		return mpierr.Errorf(mpierr.ErrComponentNotFound, "coll han: %s: no module below han fills allreduce, which making the node and leaders' communicators needs", c.Name())
	}
	leaders := make([]int, len(m.nodes))
	for k := range m.nodes {
		leaders[k] = m.leader(k)
	}
	var err error
	if m.parts.node, err = sp.Split(m.nodes, agree); err != nil {
		return fmt.Errorf("coll han: node communicators of %s: %w", c.Name(), err)
	}
	if m.parts.leaders, err = sp.Split([][]int{leaders}, agree); err != nil {
		return fmt.Errorf("coll han: leaders' communicator of %s: %w", c.Name(), err)
	}
	if m.perNode > 1 && (m.spread > 0 || m.gatherSpread > 0 || m.bcastSpread > 0 || m.scatterSpread > 0) {
		places := make([][]int, m.perNode)
		for _, ranks := range m.nodes {
			for j, r := range ranks {
				places[j] = append(places[j], r)
			}
		}
		if m.parts.peers, err = sp.Split(places, agree); err != nil {
			return fmt.Errorf("coll han: communicators of the ranks in one place on every node of %s: %w", c.Name(), err)
		}
	}
	if log := m.log; log.V(mca.VerboseComponent) {
		kv := []any{"comm", c.Name(), "nodes", len(m.nodes), "node", m.parts.node.Name(), "node_table", m.parts.node.Table().String()}
		if m.parts.leaders != nil {
			kv = append(kv, "leaders", m.parts.leaders.Name(), "leaders_table", m.parts.leaders.Table().String())
		}
		log.Log(mca.VerboseComponent, "parts made", kv...)
	}
	// The phases' components are checked where their parts are (the
	// leaders' on leaders only); every rank then learns whether any rank
	// failed, so that none waits in a phase a failed rank never enters.
	chosen := m.choosePhases()
	failed := []int64{0}
	if chosen != nil {
		failed[0] = 1
	}
	a := &coll.Args{Op: coll.Allreduce, Recv: datatype.Bytes(failed), InPlace: true, Reducer: m.anyReducer}
	if err := agree(c, a); err != nil {
		return fmt.Errorf("coll han: %s: agreeing on the phases' components: %w", c.Name(), err)
	}
	switch {
	case chosen != nil:
		return chosen
	case failed[0] != 0:
		var set []string
		for op, names := range m.phase {
			if names[Up] != "" {
				set = append(set, PhaseParam(coll.Op(op), Up)+" = "+names[Up])
			}
		}
		return mpierr.Errorf(mpierr.ErrArg, "coll han: %s: a leader cannot run its phase with the component that "+
			"%s names (the leaders' errors say which operation and what is accepted there)", c.Name(), strings.Join(set, ", "))
	}
	return nil
}

// choosePhases finds the functions of the components coll_han_<op>_low
// and _up name, in this rank's parts.
func (m *module) choosePhases() error {
	for op, names := range m.phase {
		for p, name := range names {
			if name == "" {
				continue
			}
			sub := m.parts.node
			if Phase(p) == Up {
				sub = m.parts.leaders
			}
			if sub == nil {
				continue
			}
			for _, phaseOp := range phasesOf[coll.Op(op)][p] {
				f, fillers := sub.Table().FuncOf(phaseOp, name)
				if f == nil {
					return mpierr.Errorf(mpierr.ErrArg, "coll han: %s = %s: %s does not fill %s on %s; accepted there: %s",
						PhaseParam(coll.Op(op), Phase(p)), name, name, phaseOp, sub.Name(), fillers)
				}
				if Phase(p) == Low {
					m.parts.lowFn[op][phaseOp] = f
				} else {
					m.parts.upFn[op][phaseOp] = f
				}
			}
		}
	}
	return nil
}

// low runs the node phase phaseOp of op.
func (p *parts) low(op, phaseOp coll.Op, a *coll.Args) error {
	if f := p.lowFn[op][phaseOp]; f != nil {
		return p.node.Table().CallFunc(phaseOp, f, p.node, a)
	}
	return p.node.Call(phaseOp, a)
}

// up runs the leaders' phase phaseOp of op; only leaders call it.
func (p *parts) up(op, phaseOp coll.Op, a *coll.Args) error {
	if f := p.upFn[op][phaseOp]; f != nil {
		return p.leaders.Table().CallFunc(phaseOp, f, p.leaders, a)
	}
	return p.leaders.Call(phaseOp, a)
}

// startUp starts the leaders' phase phaseOp of op as a nonblocking
// collective, so that a node phase can run while the network carries it.
// It runs it blocking instead when nothing would overlap it (whole, the
// call is one segment: a nonblocking start costs microseconds), or when a
// component is chosen for the phase (its nonblocking form may not exist).
// The wait it returns is never nil.
func (p *parts) startUp(op, phaseOp coll.Op, a *coll.Args, whole bool) (func() error, error) {
	if whole || p.upFn[op][phaseOp] != nil {
		err := p.up(op, phaseOp, a)
		return func() error { return nil }, err
	}
	return p.leaders.Start(phaseOp, a)
}

// ownTag is the tag of han's own messages within a node (a root that is not
// its node's leader and the leader): a phase no algorithm of the node's
// components uses.
func ownTag(op coll.Op) int { return coll.Tag(op, 15) }

// segments cuts n bytes into pieces of at most seg bytes, whole units each
// (at least one unit a piece); seg 0 leaves n whole. It returns the
// pieces' starts, with n appended, in the frame's room.
func (f *frame) segments(n, unit, seg int) []int {
	b := f.segs[:0]
	if seg <= 0 || n <= seg {
		b = append(b, 0, n)
	} else {
		step := max(seg/unit, 1) * unit
		for at := 0; at < n; at += step {
			b = append(b, at)
		}
		b = append(b, n)
	}
	f.segs = b
	return b
}

// pipeline runs the node and network phases of segments in an overlapped
// order, the same on every rank of a node: for each segment i, first(i),
// then the network phase of i started (leaders only), then, for i-1, its
// network phase waited for and then(i-1). first or then may be nil.
func pipeline(p *parts, segs []int, first, then func(lo, hi int) error, start func(lo, hi int) (func() error, error)) (err error) {
	leader := p.leaders != nil && start != nil
	var pending [2]func() error // the network phases of segments i-1 and i
	defer func() {
		// On an error, what was started must end before the buffers go back.
		for _, w := range pending {
			if w != nil {
				if werr := w(); err == nil {
					err = werr
				}
			}
		}
	}()
	n := len(segs) - 1
	for i := 0; i <= n; i++ {
		if i < n {
			if first != nil {
				if err := first(segs[i], segs[i+1]); err != nil {
					return err
				}
			}
			if leader {
				w, err := start(segs[i], segs[i+1])
				if err != nil {
					return err
				}
				pending[1] = w
			}
		}
		if i > 0 {
			if w := pending[0]; w != nil {
				pending[0] = nil
				if err := w(); err != nil {
					return err
				}
			}
			if then != nil {
				if err := then(segs[i-1], segs[i]); err != nil {
					return err
				}
			}
		}
		pending[0], pending[1] = pending[1], nil
	}
	return nil
}
