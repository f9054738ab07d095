// Package han is the coll component for communicators that span several
// nodes (Open MPI's coll/han: Luo et al., "HAN: a Hierarchical AutotuNed
// Collective Communication Framework", CLUSTER 2020). It runs an operation
// as phases over two kinds of sub-communicator: each node's ranks (the node
// communicator, where coll sm serves) and one leader per node (the leaders'
// communicator, where tuned runs over the network). An Allreduce is a
// reduce within each node, an allreduce among the leaders and a bcast
// within each node, so the network carries one contribution per node
// instead of one per rank, and pays its latency ⌈log2 nodes⌉ times instead
// of ⌈log2 ranks⌉.
//
// The sub-communicators are made at the communicator's first collective
// that han runs (coll.Splitter), not when the communicator is made, so
// communicators that run none cost nothing; the module frees them with the
// communicator. Each has a slot table of its own, resolved as any
// communicator's, so each phase goes to whichever component serves that
// part best; coll_han_<op>_low and coll_han_<op>_up name a component for
// the node phases and the leaders' phase instead.
//
// Large bcasts, reduces and allreduces may be cut into segments of
// coll_han_segment_bytes that flow as a pipeline: a leader starts segment
// i's network phase as a nonblocking collective on the leaders'
// communicator and runs the node phase of the segment before it while the
// network carries it. Off by default: where the network's work is done by
// the same cores as the node's (simulated hosts sharing a machine), it was
// measured slower; on a network with its own engines it is what overlaps.
//
// Large allreduces, bcasts and allgathers instead spread their network
// phase over every rank of a node when the nodes hold equal numbers of
// ranks (coll_han_allreduce_spread_bytes, coll_han_bcast_spread_bytes,
// coll_han_allgather_spread_bytes): the ranks in one place on every node
// (the peers' communicator) carry one share each, so that no leader moves
// the whole node's bytes alone and the others wait; their nonblocking and
// persistent forms run the same steps as plans. A scatter of large
// blocks spreads the root's sending the same way
// (coll_han_scatter_spread_bytes).
//
// han fills barrier, bcast, reduce, allreduce, gather, scatter, allgather
// and allgatherv; every other slot, and every call on a communicator within
// one node, goes to the components below. Reductions whose op is not
// commutative stay in rank order: han runs them when each node's ranks are
// consecutive in the communicator (the node phase then combines a
// consecutive run, and the leaders are in rank order), and passes them
// below otherwise.
package han

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gompi/gompi/datatype"
	"github.com/gompi/gompi/frameworks/coll"
	"github.com/gompi/gompi/mca"
	"github.com/gompi/gompi/mpierr"
	"github.com/gompi/gompi/params"
)

// Priority is han's default priority: above tuned (30), which it runs on
// the leaders' communicator, and below tofu (40) and sm (50), which
// decline communicators that span nodes anyway.
const Priority = 35

// SegmentBytesParam is the pipeline's segment size; SpreadBytesParam,
// BcastSpreadParam and GatherSpreadParam are where an allreduce, a bcast and
// an allgather spread their leaders' phase over every rank of a node.
// NonblockingMaxParam bounds the nonblocking calls that run as han's
// phases.
const (
	SegmentBytesParam   = "coll_han_segment_bytes"
	SpreadBytesParam    = "coll_han_allreduce_spread_bytes"
	GatherSpreadParam   = "coll_han_allgather_spread_bytes"
	BcastSpreadParam    = "coll_han_bcast_spread_bytes"
	ScatterSpreadParam  = "coll_han_scatter_spread_bytes"
	NonblockingMaxParam = "coll_han_nonblocking_max_bytes"
	GatherMaxParam      = "coll_han_gather_max_bytes"
)

// filled are the operations han runs hierarchically.
var filled = []coll.Op{coll.Barrier, coll.Bcast, coll.Reduce, coll.Allreduce, coll.Gather, coll.Scatter, coll.Allgather, coll.Allgatherv}

// Phase names the two kinds of phase whose component a parameter may
// choose: low (within a node) and up (among the leaders), Open MPI han's
// words.
type Phase int

const (
	Low Phase = iota
	Up
)

func (p Phase) String() string { return [...]string{"low", "up"}[p] }

// PhaseParam is the parameter that names the component of op's phase.
func PhaseParam(op coll.Op, p Phase) string { return fmt.Sprintf("coll_han_%s_%s", op, p) }

// Component is the han coll component.
type Component struct {
	segment, spread, gatherSpread, bcastSpread, scatterSpread, nbMax, gatherMax *params.Param
	phase                                                                       map[coll.Op]*[2]*params.Param
}

// Info describes the component.
func (c *Component) Info() mca.Info {
	return mca.Info{Framework: "coll", Name: "han", Version: mca.GompiVersion, API: coll.Framework.API, Priority: Priority}
}

// Register declares the segment size and the per-phase component choices.
// They are all-eq: ranks that cut or route one call differently would wait
// for each other for ever.
func (c *Component) Register(r *mca.Registrar) {
	c.segment = r.Add(params.Def{Name: SegmentBytesParam, Type: params.Size, Scope: params.ScopeAllEq, Level: 5, Default: "0",
		Help: "Bcasts, reduces and allreduces larger than this many bytes are cut into segments of this size, so that " +
			"one segment's network phase overlaps the node phases of its neighbours; 0: never cut. Off by default: " +
			"measured on 2 simulated hosts sharing 2 cores, where the network's work is the same cores', cutting " +
			"cost more than it overlapped (allreduce of 4 MiB: 11.1 ms whole, 11.6 in 1 MiB segments; of 1 MiB: 2.1 " +
			"whole, 3.9 in 256 KiB segments)"})
	c.spread = r.Add(params.Def{Name: SpreadBytesParam, Type: params.Size, Scope: params.ScopeAllEq, Level: 5, Default: "512k",
		Help: "Allreduces of at least this many bytes, on nodes that all hold the same number of ranks, spread the " +
			"network phase over every rank instead of one leader per node: each rank of a node reduces one block of " +
			"the node's inputs, allreduces it with the ranks in its place on the other nodes, and the node gathers " +
			"the blocks (the same bytes cross the network, from every rank at once, for networks one process cannot " +
			"fill); 0: never. Measured on 2 simulated hosts of 2 ranks (medians of 5 alternated jobs): 512 KiB 366 µs " +
			"against 447 through one leader, 1 MiB 515 against 1085, 2 MiB 1.8 ms against 2.5; at 256 KiB one leader " +
			"was as fast or faster"})
	c.gatherSpread = r.Add(params.Def{Name: GatherSpreadParam, Type: params.Size, Scope: params.ScopeAllEq, Level: 5, Default: "128k",
		Help: "Allgathers with blocks of at least this many bytes a rank (allgathervs: on average), on nodes that all " +
			"hold the same number of ranks, spread the network phase over every rank instead of one leader per node: " +
			"each rank allgathers its block with the ranks in its place on the other nodes while its node trades the " +
			"ranks' own blocks, then the node trades what the network brought (the same bytes cross the network, " +
			"from every rank at once, and nothing is packed); 0: never. Measured on 2 simulated hosts of 2 ranks " +
			"(medians of 3 alternated jobs): 128 KiB a rank 144 µs against 183 through one leader, 256 KiB 240 " +
			"against 363, 1 MiB 1543 against 1853; at 64 KiB the two were within their spread"})
	c.bcastSpread = r.Add(params.Def{Name: BcastSpreadParam, Type: params.Size, Scope: params.ScopeAllEq, Level: 5, Default: "512k",
		Help: "Bcasts of at least this many bytes, on nodes that all hold the same number of ranks, spread the network " +
			"phase over every rank instead of one leader per node: the root hands each rank of its node one piece of " +
			"the buffer first, each rank bcasts its piece to the ranks in its place on the other nodes, and those " +
			"nodes trade their pieces (the same bytes cross the network, from every rank of the root's node at once); " +
			"0: never. Measured on 2 simulated hosts of 2 ranks (medians of 3 alternated jobs): 512 KiB 181 µs " +
			"against 300 through one leader, 1 MiB 393 against 541, 2 MiB 1112 against 1496; at 256 KiB one leader " +
			"was faster (90 against 140)"})
	c.scatterSpread = r.Add(params.Def{Name: ScatterSpreadParam, Type: params.Size, Scope: params.ScopeAllEq, Level: 5, Default: "512k",
		Help: "Scatters with blocks of at least this many bytes a rank, on nodes that all hold the same number of ranks, " +
			"spread the network phase over the ranks of the root's node instead of the root sending every block off its " +
			"node: the root sends each rank of its node the blocks of the ranks in its place on the other nodes first, " +
			"and that rank passes them on (above " + GatherMaxParam + ", where han otherwise passes scatters below it); " +
			"0: never. Measured on 2 simulated hosts of 2 ranks (3 alternated jobs): 1 MiB a rank 589-690 µs against " +
			"968-1069 from the root alone; 512 KiB 215-388 against 187-345, 256 KiB within the spread"})
	c.gatherMax = r.Add(params.Def{Name: GatherMaxParam, Type: params.Size, Scope: params.ScopeAllEq, Level: 5, Default: "128k",
		Help: "Gathers and scatters with blocks of more than this many bytes a rank go to the module below han: every " +
			"block crosses the network once either way, so han saves only messages, and above this its node phase " +
			"(one more copy and wait) costs more than they do (2 simulated hosts of 2 ranks: a 64 KiB gather 38 µs " +
			"through han against 56 below it, 256 KiB 200 against 123); 0: han takes them at any size"})
	c.nbMax = r.Add(params.Def{Name: NonblockingMaxParam, Type: params.Size, Scope: params.ScopeAllEq, Level: 5, Default: "512k",
		Help: "Nonblocking and persistent bcasts, reduces, allreduces, gathers and allgathers (v) of at most this many bytes (all the ranks' blocks, for a gather) run as han's " +
			"phases (node, leaders, node), each a nonblocking collective of its part started when the one before " +
			"completes; larger ones, and all of them when 0, run the algorithm below han as a coroutine, as coll nbc " +
			"does (han's nonblocking phases are not cut into segments), except the allreduces, bcasts and allgathers " +
			"that spread (coll_han_<op>_spread_bytes), which run the spread form's steps at any size (1 MiB, medians " +
			"of 4 to 7 alternated jobs: Iallreduce 598 µs against 904 below han, Ibcast 336 against 481, Iallgather " +
			"of 1 MiB a rank 1626 against 1920). Nonblocking barriers always run as han's " +
			"phases. Measured on 2 simulated hosts of 2 ranks (Iallreduce + Wait, medians of 6 alternated jobs): " +
			"8 B 25.7 µs against 28.8 below han, 1 KiB 22.2 against 37.2, 64 KiB 98.5 against 127.5 (Ibarrier 25.7 " +
			"against 34.2; Iallgather of 8 B, 1 KiB, 64 KiB a rank, 5 jobs: 29.6, 28.8, 112 against 37.4, 38.3, 164; " +
			"Igather to rank 1, not a leader: 8.6, 12.5, 78 against 12.0, 12.9, 104; to rank 0 within 5 %); " +
			"1 MiB allreduce 1485 against 794 (3 jobs), hence the bound"})
	c.phase = map[coll.Op]*[2]*params.Param{}
	for _, op := range filled {
		var ps [2]*params.Param
		for _, p := range []Phase{Low, Up} {
			what, where := "node phases", "each node's communicator"
			if p == Up {
				what, where = "leaders' phase", "the leaders' communicator, one rank per node"
			}
			var ops []string
			for _, o := range phasesOf[op][p] {
				ops = append(ops, o.String())
			}
			ps[p] = r.Add(params.Def{Name: PhaseParam(op, p), Type: params.String, Scope: params.ScopeAllEq, Level: 6,
				Help: fmt.Sprintf("The coll component that runs the %s of han's blocking %s (its %s, on %s); empty: the one that "+
					"fills the slot there, as selection chose (sm within a node, tuned among the leaders). Nonblocking calls "+
					"run each phase as a coroutine of the highest component there that is not serial (tuned)", what, op, strings.Join(ops, " and "), where)})
		}
		c.phase[op] = &ps
	}
}

// Query accepts intracommunicators whose ranks span two nodes or more with
// at least one node of two ranks or more, that can make sub-communicators.
func (c *Component) Query(b *mca.Base, comm coll.Comm) (int, coll.Module, error) {
	n := comm.Size()
	if n < 2 {
		return 0, nil, mca.Decline("communicator %s has one rank", comm.Name())
	}
	sp, ok := comm.(coll.Splitter)
	if !ok {
		return 0, nil, mca.Decline("communicator %s cannot make sub-communicators", comm.Name())
	}
	l := newLayout(n, sp.NodeOf)
	switch {
	case len(l.nodes) == 1:
		return 0, nil, mca.Decline("every rank of %s runs on one node", comm.Name())
	case len(l.nodes) == n:
		return 0, nil, mca.Decline("every rank of %s runs on a node of its own: no node phase", comm.Name())
	}
	m := &module{layout: l, log: b.Logger("coll").Named("han"), segment: int(b.Get(c.segment).Uint()),
		spread: int(b.Get(c.spread).Uint()), gatherSpread: int(min(b.Get(c.gatherSpread).Uint(), 1<<62)),
		bcastSpread:   int(min(b.Get(c.bcastSpread).Uint(), 1<<62)),
		scatterSpread: int(min(b.Get(c.scatterSpread).Uint(), 1<<62)), nbMax: int(min(b.Get(c.nbMax).Uint(), 1<<62)),
		gatherMax: int(min(b.Get(c.gatherMax).Uint(), 1<<62))}
	var err error
	if m.anyReducer, err = datatype.ReducerFor[int64](datatype.Max); err != nil {
		return 0, nil, err
	}
	known := b.Catalog().Components("coll")
	for _, op := range filled {
		for _, p := range []Phase{Low, Up} {
			name := strings.TrimSpace(b.Get(c.phase[op][p]).Str())
			if name == "" {
				continue
			}
			if !slices.ContainsFunc(known, func(e *mca.Entry) bool { return e.Info.Name == name }) {
				var names []string
				for _, e := range known {
					if e.Info.Name != "han" {
						names = append(names, e.Info.Name)
					}
				}
				return 0, nil, mpierr.Errorf(mpierr.ErrArg, "coll han: %s = %q: no such coll component; accepted: empty, or one of %s",
					PhaseParam(op, p), name, strings.Join(names, ", "))
			}
			m.phase[op][p] = name
		}
	}
	return Priority, m, nil
}

// layout is where a communicator's ranks run: its nodes, ordered by their
// lowest rank, each with its ranks in ascending order. Node k's leader is
// its lowest rank, rank k of the leaders' communicator.
type layout struct {
	nodes [][]int
	node  []int // the node of each rank (an index into nodes)
	local []int // each rank's rank in its node's communicator
	// consecutive: every node's ranks are consecutive in the communicator,
	// so that node by node is rank order.
	consecutive bool
	// perNode is the number of ranks of every node when they all hold the
	// same number, 0 otherwise.
	perNode int
}

func newLayout(n int, nodeOf func(r int) int) *layout {
	l := &layout{node: make([]int, n), local: make([]int, n), consecutive: true}
	index := map[int]int{}
	for r := 0; r < n; r++ {
		id := nodeOf(r)
		k, ok := index[id]
		if !ok {
			k = len(l.nodes)
			index[id] = k
			l.nodes = append(l.nodes, nil)
		}
		if ranks := l.nodes[k]; len(ranks) > 0 && ranks[len(ranks)-1] != r-1 {
			l.consecutive = false
		}
		l.node[r], l.local[r] = k, len(l.nodes[k])
		l.nodes[k] = append(l.nodes[k], r)
	}
	l.perNode = len(l.nodes[0])
	for _, ranks := range l.nodes {
		if len(ranks) != l.perNode {
			l.perNode = 0
		}
	}
	return l
}

// leader is node k's leader's rank in the communicator.
func (l *layout) leader(k int) int { return l.nodes[k][0] }
