// Package sm is the coll component that runs the small collectives of a
// communicator whose ranks share one node through a segment of shared
// memory of its own, without point-to-point messages (Open MPI's coll/sm).
//
// Each rank owns a sequence number and two data slots, one per parity of
// the count of operations. An operation writes the rank's contribution into
// its slot of the operation's parity, publishes its next sequence number
// (one per phase: two for the split allreduce), and waits until the numbers
// it needs are there; readers then read the slots in place. Alternating
// the slots means a rank never waits for readers to finish: to write a slot
// it needs everyone to have started the previous operation, hence to be
// done reading the one before, which it knows from their numbers. A barrier
// is the same without data: one store and one cache line per peer to read,
// where a barrier of messages costs a send and a matched receive per round.
// Messages of up to 24 bytes travel in the sequence number's own cache line.
//
// It fills barrier, bcast, reduce, allreduce, allgather, alltoall, gather
// and scatter (one publish and one wait a call, where messages take
// log-many rounds), for messages up to coll_sm_max_bytes (a rank's block
// for allgather and gather, all of a rank's blocks together for alltoall
// and scatter; within coll_sm_segment_bytes); larger ones go to the
// module below (tuned), as Open MPI's modules pass on what they do not
// do, and so do, on two ranks, those over coll_sm_pair_bytes, small
// blocking bcasts (coll_sm_pair_bcast_min_bytes) and blocking allgathers
// and alltoalls (their nonblocking forms stay sm's); gathers and scatters
// of blocks under coll_sm_gather_min_bytes (on two ranks sm fills
// neither); and, where ranks outnumber cores, small bcasts and reduces
// (coll_sm_rooted_min_bytes). Nonblocking gather and scatter run the
// module below's algorithm. The segment is made at a communicator's first
// collective that uses it, not when the communicator is made, so that
// communicators that never run one cost nothing; its file is removed as
// soon as every rank has mapped it.
package sm

import (
	"github.com/gompi/gompi/components/common/shmem"
	"github.com/gompi/gompi/frameworks/coll"
	"github.com/gompi/gompi/mca"
	"github.com/gompi/gompi/mpierr"
	"github.com/gompi/gompi/params"
)

// Priority is sm's default priority: above tofu (40) and tuned (30), whose
// message-based algorithms it replaces for small messages on one node.
const Priority = 50

// MaxBytesParam bounds the messages sm carries.
const MaxBytesParam = "coll_sm_max_bytes"

// SplitBytesParam is where allreduce starts sharing the combining out.
const SplitBytesParam = "coll_sm_split_bytes"

// SegmentBytesParam bounds a communicator's segment, PairBytesParam
// what sm carries on two ranks; RootedMinParam and PairBcastMinParam are
// the small rooted calls it leaves to the module below.
const (
	SegmentBytesParam = "coll_sm_segment_bytes"
	PairBytesParam    = "coll_sm_pair_bytes"
	RootedMinParam    = "coll_sm_rooted_min_bytes"
	PairBcastMinParam = "coll_sm_pair_bcast_min_bytes"
	GatherMinParam    = "coll_sm_gather_min_bytes"
)

// maxSlot bounds coll_sm_max_bytes: the segment holds two slots per rank.
const maxSlot = 1 << 20

// Component is the sm coll component.
type Component struct {
	maxBytes, split, segment, pair, rootedMin, pairBcastMin, gatherMin *params.Param
}

// Info describes the component.
func (c *Component) Info() mca.Info {
	return mca.Info{Framework: "coll", Name: "sm", Version: mca.GompiVersion, API: coll.Framework.API, Priority: Priority}
}

// Register declares the sizes that route calls. They are all-eq: ranks
// that routed one call differently (sm on one, the module below on another)
// would wait for each other for ever.
func (c *Component) Register(r *mca.Registrar) {
	c.maxBytes = r.Add(params.Def{Name: MaxBytesParam, Type: params.Size, Scope: params.ScopeAllEq, Level: 5, Default: "1m",
		Help: "Largest message (bytes per rank) that bcast, reduce, allreduce and allgather carry through the " +
			"communicator's shared segment, and alltoall (all of a rank's blocks together); larger ones go to the " +
			"module below. 0 leaves sm the barrier only. At most 1m; " +
			"the segment holds two slots of this size per rank and two more, within " + SegmentBytesParam})
	c.segment = r.Add(params.Def{Name: SegmentBytesParam, Type: params.Size, Scope: params.ScopeAllEq, Level: 6, Default: "16m",
		Help: "Most bytes of a communicator's shared segment (made at its first collective through sm): on many ranks " +
			"the slots shrink below " + MaxBytesParam + " to fit (16m: 1 MiB slots up to 6 ranks, 125 KiB on 64)"})
	c.pair = r.Add(params.Def{Name: PairBytesParam, Type: params.Size, Scope: params.ScopeAllEq, Level: 6, Default: "64k",
		Help: "On two ranks, bcast, reduce and allreduce above this many bytes go to the module below: there the " +
			"transports' single copies move less data than sm's copies in and out (2 ranks, 1 MiB allreduce, " +
			"near placement: 130 µs through tuned's ring, 245 through sm)"})
	c.rootedMin = r.Add(params.Def{Name: RootedMinParam, Type: params.Size, Scope: params.ScopeAllEq, Level: 6, Default: "2k",
		Help: "Where the job runs more ranks than the node has cores, bcast and reduce under this many bytes go to " +
			"the module below, whose messages let the root run ahead of the others instead of waiting for them " +
			"(4 ranks on 2 cores, 8 bytes: bcast 0.5 µs through tuned, 2.1 through sm; from 4 KiB sm is faster); 0: never"})
	c.pairBcastMin = r.Add(params.Def{Name: PairBcastMinParam, Type: params.Size, Scope: params.ScopeAllEq, Level: 6, Default: "1k",
		Help: "On two ranks, a blocking bcast under this many bytes goes to the module below even where each rank has a " +
			"core: sm's slot is then one message that keeps the root within a call of the reader, where the transport's " +
			"ring lets it run ahead (2 ranks near, a loop of bcasts: 8 bytes 0.08 µs through tuned, 0.10 through sm; " +
			"512 bytes 0.095 against 0.10; sm faster from 1 KiB); 0: never"})
	c.gatherMin = r.Add(params.Def{Name: GatherMinParam, Type: params.Size, Scope: params.ScopeAllEq, Level: 6, Default: "16k",
		Help: "Gathers and scatters with blocks of at least this many bytes a rank (and all of a scatter's within " +
			MaxBytesParam + ") go through the shared segment, smaller ones to the module below, whose messages let " +
			"the ranks that send run ahead of the one that receives (4 ranks on 2 cores: a 16 KiB gather 5.7-6.7 µs " +
			"through sm, 11-19 through tuned; 4 KiB 4.4-6.1 against 1.6-3.0). On two ranks sm fills neither: one " +
			"block each way, which the transports' single copy serves as well (a 64 KiB gather was faster through sm " +
			"near, slower far)"})
	c.split = r.Add(params.Def{Name: SplitBytesParam, Type: params.Size, Scope: params.ScopeAllEq, Level: 6, Default: "16k",
		Help: "Allreduces of at least this many bytes (and at most " + MaxBytesParam + ") on three ranks or more share the " +
			"combining out: each rank combines its block of every rank's input, then all copy the result; smaller ones, " +
			"and all on two ranks (where the split moves more memory than it saves), have every rank combine everything, " +
			"which waits once instead of twice"})
}

// Query accepts intracommunicators of two ranks or more that all run on
// this node, where shared memory is allowed.
func (c *Component) Query(b *mca.Base, comm coll.Comm) (int, coll.Module, error) {
	slot := b.Get(c.maxBytes).Uint()
	if slot > maxSlot {
		return 0, nil, mpierr.Errorf(mpierr.ErrArg, "coll sm: %s = %d: accepted: 0 to %d (1m)", MaxBytesParam, slot, maxSlot)
	}
	n := comm.Size()
	if n < 2 {
		return 0, nil, mca.Decline("communicator %s has one rank: self serves it", comm.Name())
	}
	node, ok := comm.(coll.Node)
	if !ok {
		return 0, nil, mca.Decline("communicator %s offers no shared memory", comm.Name())
	}
	rt := node.Runtime()
	job := rt.Job()
	for r := 0; r < n; r++ {
		if w := node.WorldRank(r); job.NodeOf[w] != job.NodeIndex {
			return 0, nil, mca.Decline("rank %d of %s (world rank %d) runs on another node", r, comm.Name(), w)
		}
	}
	if err := shmem.AllowedBy(b, "sm"); err != nil {
		return 0, nil, err
	}
	if err := shmem.Usable(job.ID); err != nil {
		return 0, nil, err
	}
	max := min(int(slot), slotFor(n, int(b.Get(c.segment).Uint())))
	if n == 2 {
		max = min(max, int(b.Get(c.pair).Uint()))
	}
	log := b.Logger("coll").Named("sm")
	backing, err := shmem.ChooseBacking(b, log)
	if err != nil {
		return 0, nil, err
	}
	m := newModule(node, log, max, int(b.Get(c.split).Uint()))
	m.backing = backing
	if job.Oversubscribed {
		m.rootedMin = int(b.Get(c.rootedMin).Uint())
	}
	m.gatherMin = int(b.Get(c.gatherMin).Uint())
	m.bcastMin = m.rootedMin
	if pairMin := int(b.Get(c.pairBcastMin).Uint()); n == 2 && pairMin > m.bcastMin {
		m.bcastMin = pairMin
	}
	return Priority, m, nil
}

func roundUp(v, to int) int { return (v + to - 1) / to * to }

// slotFor is the largest slot (whole lines) whose segment for n ranks fits
// in budget bytes; 0 when only the control lines fit, or not even they.
func slotFor(n, budget int) int {
	room := budget - segmentSize(n, 0)
	if room <= 0 {
		return 0
	}
	return room / (2 * (n + 1)) / line * line
}
