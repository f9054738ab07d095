// Package tuned is the coll component with the log-time and
// bandwidth-optimal algorithms, chosen per call by decision rules on the
// communicator's size and the message's (Open MPI's coll/tuned). Each
// operation's coll_tuned_<op>_algorithm parameter forces one algorithm by
// name or number; auto (0) leaves the choice to the rules, whose
// thresholds are parameters too.
//
// Algorithms that need a commutative op (Rabenseifner, ring) are not used
// for a non-commutative one: the rules pick an order-preserving algorithm
// instead, and a forced one is replaced likewise, with a warning once per
// communicator and operation, never a wrong answer.
package tuned

import (
	"fmt"
	"strings"
	"sync"

	"github.com/gompi/gompi/frameworks/coll"
	"github.com/gompi/gompi/mca"
	"github.com/gompi/gompi/params"
)

// Priority is tuned's default priority: above basic (10), below self (75)
// and tofu (40, which fills barrier only).
const Priority = 30

// alg is one algorithm of one operation.
type alg struct {
	name string
	fn   coll.Func
	// commutative: the algorithm combines out of rank order.
	commutative bool
	// segmented: the algorithm reads the segment size from its Comm
	// (segmentOf), which then carries it (withSegment: an allocation per
	// call, spent only where it is read).
	segmented bool
}

// algs are each operation's algorithms, by enum value; value 0 is auto.
// An array, not a map: every call looks its operation up (a map's hash
// was 6 % of a 2-rank alltoall's time).
var algs = [coll.NumOps][]alg{
	coll.Barrier: {1: {name: "dissemination", fn: barrierDissemination}, 2: {name: "recursive_doubling", fn: barrierRecursiveDoubling}},
	coll.Bcast: {1: {name: "binomial", fn: bcastBinomial}, 2: {name: "pipeline", fn: bcastPipeline, segmented: true},
		3: {name: "scatter_allgather", fn: bcastScatterAllgather}},
	coll.Reduce: {1: {name: "binomial", fn: reduceBinomial}, 2: {name: "rabenseifner", fn: reduceRabenseifner, commutative: true}},
	coll.Allreduce: {1: {name: "recursive_doubling", fn: allreduceRecursiveDoubling},
		2: {name: "rabenseifner", fn: allreduceRabenseifner, commutative: true}, 3: {name: "ring", fn: allreduceRing, commutative: true}},
	coll.Allgather:          {1: {name: "bruck", fn: allgatherBruck}, 2: {name: "ring", fn: allgatherRing}, 3: {name: "recursive_doubling", fn: allgatherRecursiveDoubling}},
	coll.Allgatherv:         {1: {name: "ring", fn: allgatherRing}},
	coll.Alltoall:           {1: {name: "pairwise", fn: alltoallPairwise}, 2: {name: "bruck", fn: alltoallBruck}},
	coll.Alltoallv:          {1: {name: "pairwise", fn: alltoallPairwise}},
	coll.Gather:             {1: {name: "binomial", fn: gatherBinomial}, 2: {name: "linear", fn: gatherLinear}},
	coll.Scatter:            {1: {name: "binomial", fn: scatterBinomial}, 2: {name: "linear", fn: scatterLinear}},
	coll.Scan:               {1: {name: "recursive_doubling", fn: scanRecursiveDoubling}},
	coll.Exscan:             {1: {name: "recursive_doubling", fn: scanRecursiveDoubling}},
	coll.ReduceScatter:      {1: {name: "allreduce", fn: reduceScatterAllreduce}},
	coll.ReduceScatterBlock: {1: {name: "allreduce", fn: reduceScatterAllreduce}},
}

// Gatherv and scatterv have no algorithm here: their slots stay empty and
// fall through to basic's linear ones, which are what a v variant's
// uneven blocks call for anyway.

// AlgorithmParam names op's forcing parameter.
func AlgorithmParam(op coll.Op) string { return "coll_tuned_" + op.String() + "_algorithm" }

// Component is the tuned coll component.
type Component struct {
	forced [coll.NumOps]*params.Param
	// The decision rules' thresholds, in bytes.
	segment, bcastLarge, allreduceLarge, allreduceRing, allgatherLarge, alltoallSmall *params.Param
	linearRanks, linearBytes, scatterAcross                                           *params.Param
}

// Info describes the component.
func (c *Component) Info() mca.Info {
	return mca.Info{Framework: "coll", Name: "tuned", Version: mca.GompiVersion, API: coll.Framework.API, Priority: Priority}
}

// Register declares an algorithm parameter per operation and the rules'
// thresholds.
func (c *Component) Register(r *mca.Registrar) {
	for op := coll.Op(0); op < coll.NumOps; op++ {
		as := algs[op]
		if len(as) == 0 {
			continue
		}
		vals := []params.EnumValue{{Value: 0, Name: "auto"}}
		var names []string
		for v := 1; v < len(as); v++ {
			vals = append(vals, params.EnumValue{Value: int64(v), Name: as[v].name})
			names = append(names, fmt.Sprintf("%d %s", v, as[v].name))
		}
		c.forced[op] = r.Add(params.Def{Name: AlgorithmParam(op), Type: params.Enum, Level: 5, Default: "auto", Values: vals,
			Help: fmt.Sprintf("The %s algorithm of coll tuned: auto (0, the decision rules) or %s", op, strings.Join(names, ", "))})
	}
	c.segment = r.Add(params.Def{Name: "coll_tuned_bcast_segment_size", Type: params.Size, Level: 5, Default: "32k",
		Help: "Bytes per segment of the pipelined bcast: small enough that every rank of the chain is busy soon, " +
			"large enough that a segment costs more than a message's overhead"})
	c.bcastLarge = r.Add(params.Def{Name: "coll_tuned_bcast_large_bytes", Type: params.Size, Level: 6, Default: "64k",
		Help: "Messages of at least this many bytes on more than 4 ranks are broadcast by scatter and allgather; smaller ones, and any on 4 ranks or fewer, down a binomial tree"})
	c.allreduceLarge = r.Add(params.Def{Name: "coll_tuned_allreduce_large_bytes", Type: params.Size, Level: 6, Default: "16k",
		Help: "Allreduces of at least this many bytes with a commutative op on more than 4 ranks use Rabenseifner's reduce-scatter and allgather; smaller ones recursive doubling"})
	c.allreduceRing = r.Add(params.Def{Name: "coll_tuned_allreduce_ring_bytes", Type: params.Size, Level: 6, Default: "128k",
		Help: "Allreduces of at least this many bytes with a commutative op go round a ring (on 2 ranks of one node from 1k): measured on 2 cores, " +
			"the ring moves the least data and wins from there (2 ranks, 1 MiB: 390 µs against 519 for recursive doubling); between nodes " +
			"its second round trip costs more than the bytes it saves below this size"})
	c.allgatherLarge = r.Add(params.Def{Name: "coll_tuned_allgather_large_bytes", Type: params.Size, Level: 6, Default: "64k",
		Help: "Allgathers gathering at least this many bytes in all go round a ring; smaller ones by Bruck's algorithm (recursive doubling on powers of two)"})
	c.alltoallSmall = r.Add(params.Def{Name: "coll_tuned_alltoall_small_bytes", Type: params.Size, Level: 6, Default: "256",
		Help: "Alltoalls of blocks up to this many bytes on 4 ranks or more use Bruck's algorithm; others pairwise exchange"})
	c.linearRanks = r.Add(params.Def{Name: "coll_tuned_gather_linear_ranks", Type: params.Uint, Level: 6, Default: "10",
		Help: "Gathers and scatters on at most this many ranks move every block straight to or from the root (linear); on more, " +
			"blocks under coll_tuned_gather_linear_bytes go up or down a binomial tree (Open MPI's fixed rule: 10 ranks; " +
			"measured on 4 and 8 ranks over 2 cores, linear won from 8 B to 1 MiB: 64 KiB gather 24 µs against 39). A gather " +
			"on 2 ranks stays binomial, whose root receives with a blocking Recv"})
	c.linearBytes = r.Add(params.Def{Name: "coll_tuned_gather_linear_bytes", Type: params.Size, Level: 6, Default: "1k",
		Help: "Gathers and scatters with blocks of at least this many bytes go linear on any number of ranks: the tree's inner " +
			"ranks would forward more data than the root saves in messages"})
	c.scatterAcross = r.Add(params.Def{Name: "coll_tuned_scatter_across_nodes_bytes", Type: params.Size, Level: 6, Default: "16k",
		Help: "On a communicator whose ranks span several nodes, scatters with blocks under this many bytes go down a binomial " +
			"tree on any number of ranks, where linear's root would send every block over the network one after another " +
			"(simulated hosts, 4 ranks on 2 cores, µs at 1 KiB / 4 KiB blocks: 2 hosts of 2 ranks 4.1-9.8 / 9.8-10.6 against " +
			"13.6-20 / 12.4-19, 4 hosts of 1 rank 15.7-18.8 / 13.7-21 against 22-25 / 21-28; equal at 16 KiB); 0: never"})
}

// Query serves every communicator of two ranks or more.
func (c *Component) Query(b *mca.Base, comm coll.Comm) (int, coll.Module, error) {
	if comm.Size() < 2 {
		return 0, nil, mca.Decline("communicator %s has one rank: self serves it", comm.Name())
	}
	m := &module{
		log:            b.Logger("coll"),
		segment:        int(b.Get(c.segment).Uint()),
		bcastLarge:     int(b.Get(c.bcastLarge).Uint()),
		allreduceLarge: int(b.Get(c.allreduceLarge).Uint()),
		allreduceRing:  int(b.Get(c.allreduceRing).Uint()),
		allgatherLarge: int(b.Get(c.allgatherLarge).Uint()),
		alltoallSmall:  int(b.Get(c.alltoallSmall).Uint()),
		linearRanks:    int(b.Get(c.linearRanks).Uint()),
		linearBytes:    int(b.Get(c.linearBytes).Uint()),
		scatterAcross:  int(min(b.Get(c.scatterAcross).Uint(), 1<<40)),
	}
	m.segment = max(m.segment, 1)
	m.spansNodes = spansNodes(comm)
	for op := coll.Op(0); op < coll.NumOps; op++ {
		if c.forced[op] == nil {
			continue // an empty slot: lower modules fill it
		}
		m.forced[op] = int(b.Get(c.forced[op]).Int())
		m.slots[op] = m.dispatch(op)
	}
	return Priority, m, nil
}

// spansNodes reports whether comm's ranks run on more than one node; a
// communicator that cannot tell (no coll.Node) counts as one node.
func spansNodes(comm coll.Comm) bool {
	node, ok := comm.(coll.Node)
	if !ok {
		return false
	}
	nodeOf := node.Runtime().Job().NodeOf
	first := nodeOf[node.WorldRank(0)]
	for r := 1; r < comm.Size(); r++ {
		if nodeOf[node.WorldRank(r)] != first {
			return true
		}
	}
	return false
}

// module is tuned for one communicator.
type module struct {
	// spansNodes: the ranks are on several nodes, so that messages cross a
	// network, where a round trip costs more than on one node.
	spansNodes                                                                        bool
	log                                                                               *mca.Logger
	forced                                                                            [coll.NumOps]int
	slots                                                                             coll.Slots
	warned                                                                            [coll.NumOps]sync.Once
	segment, bcastLarge, allreduceLarge, allreduceRing, allgatherLarge, alltoallSmall int
	linearRanks, linearBytes, scatterAcross                                           int
}

func (m *module) Func(op coll.Op) coll.Func { return m.slots[op] }

// dispatch is op's slot: the forced algorithm, or the rules' choice.
func (m *module) dispatch(op coll.Op) coll.Func {
	return func(c coll.Comm, a *coll.Args) error {
		alg := m.choose(op, c, a)
		if alg.segmented {
			c = withSegment(c, m.segment)
		}
		return alg.fn(c, a)
	}
}

// Choose names the algorithm the module runs for op with these arguments
// (tests, logs).
func (m *module) choose(op coll.Op, c coll.Comm, a *coll.Args) alg {
	as := algs[op]
	v := m.forced[op]
	if v <= 0 || v >= len(as) {
		v = m.rule(op, c, a)
	}
	chosen := as[v]
	if chosen.commutative && a.Reducer.Op != nil && !a.Reducer.Commutative() {
		fallback := as[1] // every operation's first algorithm keeps rank order
		if m.forced[op] == v {
			m.warned[op].Do(func() {
				m.log.Warn("forced algorithm needs a commutative op: using an order-preserving one for this non-commutative op",
					"comm", c.Name(), "op", op.String(), "forced", chosen.name, "used", fallback.name, "reduction", a.Reducer.Op.Name())
			})
		}
		chosen = fallback
	}
	return chosen
}

// rule is the decision of auto, on the communicator's size and the bytes
// of the call. Provisional thresholds, in the spirit of Open MPI's fixed
// rules: latency-bound sizes take the log-round algorithms, large ones
// the bandwidth-optimal ones.
func (m *module) rule(op coll.Op, c coll.Comm, a *coll.Args) int {
	n := c.Size()
	commutative := a.Reducer.Op == nil || a.Reducer.Commutative()
	switch op {
	case coll.Bcast:
		// Measured at 2 and 4 ranks on 2 cores (8 B to 1 MiB): binomial
		// wins everywhere (1 MiB on 4 ranks: 244 µs, pipeline 371,
		// scatter-allgather 313); the others need more ranks than cores
		// to pay, so they are kept for large messages on more than 4.
		if n <= 4 || len(a.Recv) < m.bcastLarge {
			return 1
		}
		return 3
	case coll.Reduce:
		// Measured on 4 ranks: Rabenseifner wins from 64 KiB (81 µs against
		// 111) to 256 KiB, binomial below and, on 2 cores, at 1 MiB.
		bytes := max(len(a.Recv), len(a.Send))
		if commutative && n > 2 && bytes >= 4*m.allreduceLarge && bytes <= 32*m.allreduceLarge {
			return 2
		}
		return 1
	case coll.Allreduce:
		// Measured (gompi-bench allreduce, near placement, 2 cores): at 2
		// ranks of one node the ring wins from 1 KiB; at 4 recursive
		// doubling up to 64 KiB, the ring from 256 KiB (204 µs against
		// 447); Rabenseifner is for more ranks than 2 cores could tell.
		// Between two nodes (coll han's leaders) the ring's second round
		// trip over tcp costs more than the half it saves, below the ring's
		// threshold.
		bytes := len(a.Recv)
		switch {
		case !commutative:
			return 1
		case (n == 2 && bytes >= 1024 && !m.spansNodes) || bytes >= m.allreduceRing:
			return 3
		case n > 4 && bytes >= m.allreduceLarge:
			return 2
		}
		return 1
	case coll.Allgather:
		switch {
		case len(a.Recv) >= m.allgatherLarge:
			return 2
		case n&(n-1) == 0:
			return 3
		}
		return 1
	case coll.Gather, coll.Scatter:
		// On 2 ranks the tree is the same one message, received by a
		// blocking Recv, whose fast path polls until the message is there
		// and takes it in place; the linear root's Irecv looks once, and
		// in a loop of gathers the message is mostly not there yet (2
		// ranks near: 1 KiB 0.13 µs against 0.17, 16 KiB 0.7–0.9 against
		// 1.5–2.4; linear wins at 8 B, 0.15 against 0.20, and 64 KiB,
		// 3.5 against 4.0).
		if op == coll.Gather && n == 2 {
			return 1
		}
		block := len(a.Send) // a rank's block; a root in place holds all n
		if op == coll.Scatter {
			block = len(a.Recv)
		}
		if a.InPlace {
			block = max(len(a.Send), len(a.Recv)) / n
		}
		if op == coll.Scatter && m.spansNodes && block < m.scatterAcross {
			// The tree crosses into each node's part once; linear's root
			// sends every remote block itself, one after another.
			return 1
		}
		if n <= m.linearRanks || block >= m.linearBytes {
			return 2
		}
		return 1
	case coll.Alltoall:
		// Measured on 4 ranks: Bruck wins up to 256 B blocks (5.9 µs
		// against 8.2 at 8 B), pairwise from 1 KiB.
		if n >= 4 && len(a.Recv)/n <= m.alltoallSmall {
			return 2
		}
		return 1
	}
	return 1
}

// segComm carries the bcast segment size to the pipelined algorithm
// without a field in coll.Args.
type segComm struct {
	coll.Comm
	segment int
}

func (s segComm) segmentSize() int { return s.segment }

// segAwaitComm is segComm over a nonblocking run's Comm (coll.Coroutine):
// it keeps the Awaiter, which the helpers' waits (coll.WaitAll) look for;
// hidden, they would wait on the requests and hold the goroutine that
// advances the collective until the segments are through.
type segAwaitComm struct {
	segComm
	coll.Awaiter
}

func withSegment(c coll.Comm, seg int) coll.Comm {
	if aw, ok := c.(coll.Awaiter); ok {
		return segAwaitComm{segComm{c, seg}, aw}
	}
	return segComm{c, seg}
}

func segmentOf(c coll.Comm) int {
	if s, ok := c.(interface{ segmentSize() int }); ok {
		return s.segmentSize()
	}
	return 32 << 10
}
