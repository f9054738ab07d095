package sm

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"

	"github.com/gompi/gompi/components/common/shmem"
	"github.com/gompi/gompi/frameworks/coll"
	"github.com/gompi/gompi/mca"
	"github.com/gompi/gompi/mpierr"
	"github.com/gompi/gompi/rte"
)

// The segment's layout. Words written by different ranks sit a line
// apart (128 bytes: two cache lines, as the adjacent-line prefetcher pulls
// pairs), so that a rank's store costs its readers one line.
//
//	0                   header: magic, version, ranks, slot bytes
//	line*(1+r)          rank r's sequence number, then its inline slots:
//	                    parity 0 at +8, parity 1 at +8+inlineMax
//	line*(1+n+r)        rank r's sleep count
//	line*(1+2n) + ...   rank r's slots: parity 0 at (2r)*slot, 1 at (2r+1)*slot
//	... + 2n*slot       the shared result slots of a split allreduce,
//	                    parity 0, then parity 1
//
// Messages up to inlineMax bytes sit in the sequence number's cache line:
// the reader's one miss brings both, and the writer's one store of the line
// makes it its own; in slots of their own they cost a second crossing each.
// Sleep counts have lines of their own: a publisher loads every peer's
// after each store, and a line that changes only when its owner sleeps
// stays in the publisher's cache, where a sequence number's line would be
// a miss each time.
const (
	line       = 128
	magic      = 0x4d53434f49504d47 // "GMPIOCSM"
	version    = 3
	offMagic   = 0
	offVersion = 8
	offRanks   = 12
	offSlot    = 16
	// inlineMax: two parities after the 8-byte number in one 64-byte
	// cache line.
	inlineMax = 24
)

func segmentSize(n, slot int) int { return line*(1+2*n) + 2*(n+1)*slot }

// writeHeader writes the header of a segment for n ranks and slots of slot
// bytes, the magic last.
func writeHeader(mem []byte, n, slot int) {
	le := binary.LittleEndian
	le.PutUint32(mem[offVersion:], version)
	le.PutUint32(mem[offRanks:], uint32(n))
	le.PutUint64(mem[offSlot:], uint64(slot))
	le.PutUint64(mem[offMagic:], magic)
}

// checkHeader checks that mem, a segment rank 0 made, is one for n ranks
// and slots of slot bytes. Rank 0 is another process: mem may hold
// anything. Its errors are ErrIntern.
func checkHeader(mem []byte, n, slot int) error {
	if len(mem) < offSlot+8 {
		return mpierr.Errorf(mpierr.ErrIntern, "a segment of %d bytes has no header", len(mem))
	}
	le := binary.LittleEndian
	if m, v, r, s := le.Uint64(mem[offMagic:]), le.Uint32(mem[offVersion:]), le.Uint32(mem[offRanks:]), le.Uint64(mem[offSlot:]); m != magic || v != version || r != uint32(n) || s != uint64(slot) {
		return mpierr.Errorf(mpierr.ErrIntern, "not a coll sm segment of %d ranks and %d-byte slots (version %d): magic %#x, version %d, %d ranks, %d-byte slots",
			n, slot, version, m, v, r, s)
	}
	return nil
}

// Setup states.
const (
	unset = iota
	on
	off     // setting up failed: every call goes below
	setting // a nonblocking run sets it up (nonblocking.go: nbPlan.startSetup)
)

// The setup's message tags: phases no other algorithm of barrier uses.
var (
	tagName    = coll.Tag(coll.Barrier, 13)
	tagMapped  = coll.Tag(coll.Barrier, 14)
	tagVerdict = coll.Tag(coll.Barrier, 15)
)

// module is sm for one communicator.
type module struct {
	node     coll.Node
	log      *mca.Logger
	me, n    int
	maxBytes int // coll_sm_max_bytes
	split    int // coll_sm_split_bytes
	// rootedMin: bcast and reduce under it go below (coll_sm_rooted_min_bytes,
	// where ranks outnumber cores; 0 otherwise).
	rootedMin int
	// bcastMin: a blocking bcast under it goes below: rootedMin, or on two
	// ranks coll_sm_pair_bcast_min_bytes if larger.
	bcastMin int
	// gatherMin: gathers and scatters of smaller blocks go below
	// (coll_sm_gather_min_bytes); on two ranks sm fills neither.
	gatherMin int
	slot      int // maxBytes rounded up to whole lines
	below     [coll.NumOps]coll.Func
	slots     coll.Slots

	// state is atomic: a nonblocking run sets the segment up on whichever
	// goroutine progresses it, while the program may make a blocking call.
	state atomic.Int32
	seg   *shmem.Segment
	// backing is what the segment is made of (shmem_backing).
	backing shmem.Backing
	seqs    []*atomic.Uint64
	sleeps  []*atomic.Uint64
	bell    *rte.Bell
	worlds  []int // world ranks, to ring sleepers
	// armMu guards mine against Finalize: another goroutine's wait may arm
	// and disarm the bell's watchers while this communicator is freed.
	armMu sync.Mutex
	mine  *atomic.Uint64 // this rank's sleep count; nil once finalized

	// ops counts operations (their parity picks the slots); seq is the
	// last sequence number this rank published (an operation publishes
	// one per phase), prevStart the first of the previous operation, and
	// seen the least that every rank had reached when last looked at.
	ops, seq, prevStart, seen uint64
	// What arrived waits for: every rank at want, or only rank root.
	want    uint64
	root    int
	arrived func() bool // bound once: a method value per wait would allocate

	// The nonblocking operations (nonblocking.go): how many were started
	// (written by the program's calls only) and how many are done here
	// (by whichever goroutine progresses them), drainNB's condition bound
	// once, and a freed plan kept for the next (set by whichever goroutine
	// finished it, taken by the program's next call).
	nbTickets  uint64
	nbFinished atomic.Uint64
	nbDrained  func() bool
	nbSpare    atomic.Pointer[nbPlan]
}

func newModule(node coll.Node, log *mca.Logger, maxBytes, split int) *module {
	m := &module{node: node, log: log, me: node.Rank(), n: node.Size(), maxBytes: maxBytes, split: split, slot: roundUp(maxBytes, line)}
	m.arrived = m.arrivedNow
	m.nbDrained = m.nbDrainedNow
	m.slots[coll.Barrier] = m.barrier
	if maxBytes > 0 {
		m.slots[coll.Bcast] = m.bcast
		m.slots[coll.Reduce] = m.reduce
		m.slots[coll.Allreduce] = m.allreduce
		m.slots[coll.Allgather] = m.allgather
		m.slots[coll.Alltoall] = m.alltoall
		if m.n > 2 {
			// On two ranks a gather or scatter is one block each way,
			// which the transports' single copy serves as well.
			m.slots[coll.Gather] = m.gather
			m.slots[coll.Scatter] = m.scatter
		}
	}
	return m
}

func (m *module) Func(op coll.Op) coll.Func { return m.slots[op] }

// Stack keeps the function of the module below, for messages over
// coll_sm_max_bytes and for a segment that could not be made.
func (m *module) Stack(op coll.Op, below coll.Func) { m.below[op] = below }

// Serial: sm's blocking operations follow one sequence through one
// segment, and a wait keeps its place in it (m.want, m.root): a coroutine
// must never run one beside another operation. sm's own nonblocking
// operations (nonblocking.go) keep their place in the sequence without
// waiting; the calls they do not take run the module below sm's algorithm.
func (m *module) Serial() {}

// passOn runs op with the module below; without one, sm cannot run it.
func (m *module) passOn(op coll.Op, c coll.Comm, a *coll.Args, bytes int) error {
	if f := m.below[op]; f != nil {
		return f(c, a)
	}
	return mpierr.Errorf(mpierr.ErrUnsupportedOp, "coll sm: %s on %s: %s, and no module below sm fills %s", op, c.Name(), m.why(op, bytes), op)
}

// ready sets the segment up at the first call that needs it; false means
// sm cannot run (the reason was logged once).
func (m *module) ready(c coll.Comm) (bool, error) {
	switch m.state.Load() {
	case unset:
		if err := m.setup(c); err != nil {
			return false, err
		}
	case setting:
		// A nonblocking call before this one sets it up: it ends first.
		if err := m.drainNB(); err != nil {
			return false, err
		}
	}
	return m.state.Load() == on, nil
}

// setup: rank 0 makes the segment and sends its name; every other rank
// maps it and says whether it could; rank 0 drops the name (removes the
// file, or closes the memfd) and sends the verdict, so that all use sm or none does. An error is a failed message
// (a lost peer); a segment that cannot be made or mapped is no error: the
// communicator's collectives go below, with a warning.
func (m *module) setup(c coll.Comm) error {
	rt := m.node.Runtime()
	job := rt.Job()
	size := segmentSize(m.n, m.slot)
	owner := shmem.Owner{Name: "coll sm", Maps: shmem.MapsFor(rt), Backing: m.backing, SizeParam: SegmentBytesParam}
	var problem error
	fault := m.fault(rt)
	if m.me == 0 {
		name := shmem.Path(job.ID, fmt.Sprintf("collsm-%016x", rand.Uint64()))
		var seg *shmem.Segment
		err := fault
		if err == nil {
			seg, err = owner.Create(name, size)
		}
		if err == nil {
			// What peers open: the file, or the memfd through /proc.
			m.seg, name = seg, seg.Name
			writeHeader(seg.Mem, m.n, m.slot)
		} else {
			name, problem = "", err
		}
		for r := 1; r < m.n; r++ {
			if err := c.Send([]byte(name), r, tagName); err != nil {
				m.unmap()
				return err
			}
		}
		verdict := []byte{1}
		if m.seg == nil {
			verdict[0] = 0
		}
		for r := 1; r < m.n; r++ {
			var ok [1]byte
			if _, err := c.Recv(ok[:], r, tagMapped); err != nil {
				m.unmap()
				return err
			}
			if ok[0] == 0 {
				verdict[0] = 0
				if problem == nil {
					problem = fmt.Errorf("rank %d could not map %s", r, name)
				}
			}
		}
		if m.seg != nil {
			if err := m.seg.Drop(); err != nil && problem == nil {
				verdict[0], problem = 0, err
			}
		}
		for r := 1; r < m.n; r++ {
			if err := c.Send(verdict, r, tagVerdict); err != nil {
				m.unmap()
				return err
			}
		}
		return m.settle(verdict[0] == 1, problem)
	}
	var buf [256]byte
	st, err := c.Recv(buf[:], 0, tagName)
	if err != nil {
		return err
	}
	k := st.Count
	ok := []byte{0}
	if k > 0 {
		if problem = fault; problem == nil {
			problem = m.attach(owner, string(buf[:k]), size)
		}
		if problem == nil {
			ok[0] = 1
		}
	} else {
		problem = fmt.Errorf("rank 0 could not make the segment")
	}
	if err := c.Send(ok, 0, tagMapped); err != nil {
		m.unmap()
		return err
	}
	var verdict [1]byte
	if _, err := c.Recv(verdict[:], 0, tagVerdict); err != nil {
		m.unmap()
		return err
	}
	if verdict[0] == 1 && problem == nil {
		return m.settle(true, nil)
	}
	if problem == nil {
		problem = fmt.Errorf("another rank could not map the segment")
	}
	return m.settle(false, problem)
}

// faultKey names, among the goroutine ranks of a job (rte.Neighborhood),
// an error that this package's tests make the setup of one world rank fail
// with (FailSetup in export_test.go): rank 0's making of the segment,
// another rank's mapping of it.
type faultKey struct{ rank int }

// fault is the error a test injected for this rank's setup; nil in a
// process of its own.
func (m *module) fault(rt *rte.Runtime) error {
	err, _ := rt.Neighborhood().Shared(faultKey{m.node.WorldRank(m.me)}, func() any { return nil }).(error)
	return err
}

// attach maps the segment rank 0 made and checks that it is what this
// module expects.
func (m *module) attach(owner shmem.Owner, name string, size int) error {
	if !shmem.ValidPath(name) {
		return fmt.Errorf("rank 0 named %q, not a segment file", name)
	}
	seg, err := owner.OpenShared(name, size)
	if err != nil {
		return err
	}
	if err := checkHeader(seg.Mem, m.n, m.slot); err != nil {
		seg.Unmap()
		return fmt.Errorf("%s: %w", name, err)
	}
	m.seg = seg
	return nil
}

// settle starts using the segment, or drops it and says why.
func (m *module) settle(use bool, problem error) error {
	if !use {
		m.unmap()
		m.state.Store(off)
		m.log.Warn("no shared segment for the communicator's collectives: they go to the modules below",
			"comm", m.node.Name(), "reason", problem)
		return nil
	}
	m.seqs, m.sleeps = make([]*atomic.Uint64, m.n), make([]*atomic.Uint64, m.n)
	owner := shmem.Owner{Name: "coll sm"}
	for r := 0; r < m.n; r++ {
		var err error
		if m.seqs[r], err = owner.Word(m.seg.Mem, line*(1+r)); err == nil {
			m.sleeps[r], err = owner.Word(m.seg.Mem, line*(1+m.n+r))
		}
		if err != nil {
			return mpierr.Errorf(mpierr.ErrIntern, "coll sm: %w", err)
		}
	}
	m.worlds = make([]int, m.n)
	for r := range m.worlds {
		m.worlds[r] = m.node.WorldRank(r)
	}
	m.bell = m.node.Runtime().Bell()
	m.mine = m.sleeps[m.me]
	m.bell.Watch(m)
	m.state.Store(on)
	m.log.Log(mca.VerboseInfo, "shared segment mapped", "comm", m.node.Name(), "ranks", m.n, "slot_bytes", m.slot)
	return nil
}

func (m *module) unmap() {
	if m.seg != nil {
		m.seg.Unmap()
		m.seg = nil
	}
}

// Finalize stops watching and unmaps the segment, when the communicator
// is freed.
func (m *module) Finalize() error {
	if m.state.Load() == on {
		m.bell.Unwatch(m)
		m.state.Store(off)
	}
	m.armMu.Lock()
	m.mine = nil
	m.unmap()
	m.armMu.Unlock()
	return nil
}

// Arm and Disarm make the module a Watcher of the instance's bell: while
// a goroutine of this process sleeps, the rank's sleep count is non-zero
// and peers that publish ring it. A sleeper that armed before
// Finalize disarms after it: then there is nothing left to disarm.
func (m *module) Arm() {
	m.armMu.Lock()
	if m.mine != nil {
		m.mine.Add(1)
	}
	m.armMu.Unlock()
}

func (m *module) Disarm() {
	m.armMu.Lock()
	if m.mine != nil {
		m.mine.Add(^uint64(0))
	}
	m.armMu.Unlock()
}

// data is rank r's slot of parity par, when it carries bytes bytes.
func (m *module) data(r, par, bytes int) []byte {
	if bytes <= inlineMax {
		at := line*(1+r) + 8 + par*inlineMax
		return m.seg.Mem[at : at+bytes]
	}
	at := line*(1+2*m.n) + (2*r+par)*m.slot
	return m.seg.Mem[at : at+bytes]
}

// result is the shared result slot of parity par.
func (m *module) result(par, bytes int) []byte {
	at := line*(1+2*m.n) + (2*m.n+par)*m.slot
	return m.seg.Mem[at : at+bytes]
}

// publish announces operation k: this rank's slot of k is written (when
// it has one), and it is done reading the slots of k-1. Peers asleep are
// rung after the store (the bell's rule: publish, then look).
func (m *module) publish(k uint64) {
	m.seqs[m.me].Store(k)
	for r, s := range m.sleeps {
		if r != m.me && s.Load() != 0 {
			m.bell.RingPeer(m.worlds[r])
		}
	}
}

// arrivedNow reports whether what the current wait wants has arrived.
func (m *module) arrivedNow() bool {
	if m.root >= 0 {
		return m.seqs[m.root].Load() >= m.want
	}
	for _, s := range m.seqs {
		if s.Load() < m.want {
			return false
		}
	}
	return true
}

// waitAll waits until every rank has published k.
func (m *module) waitAll(k uint64) error {
	if m.seen >= k {
		return nil
	}
	m.want, m.root = k, -1
	if !m.arrivedNow() {
		if err := m.node.Until(m.arrived); err != nil {
			return err
		}
	}
	m.seen = k
	return nil
}

// waitFor waits until rank r has published k.
func (m *module) waitFor(r int, k uint64) error {
	m.want, m.root = k, r
	if m.arrivedNow() {
		return nil
	}
	return m.node.Until(m.arrived)
}

// begin starts an operation of phases sequence numbers and returns the
// first and the parity of its slots. A rank that will write a slot first
// waits until every rank has started the previous operation, hence
// finished reading the slots of the one before, which it is about to
// reuse.
func (m *module) begin(writes bool, phases uint64) (uint64, int, error) {
	if err := m.drainNB(); err != nil {
		return 0, 0, err
	}
	if writes && m.prevStart > 0 {
		if err := m.waitAll(m.prevStart); err != nil {
			return 0, 0, err
		}
	}
	k, par := m.reserve(phases)
	return k, par, nil
}

// reserve takes the next operation's phases sequence numbers and returns
// the first and the parity of its slots.
func (m *module) reserve(phases uint64) (uint64, int) {
	k, par := m.seq+1, int(m.ops&1)
	m.ops++
	m.seq += phases
	m.prevStart = k
	return k, par
}

// The optional interfaces sm relies on: a rename there must not leave these
// methods behind unseen.
var (
	_ coll.Stacker   = (*module)(nil)
	_ coll.Finalizer = (*module)(nil)
	_ coll.Serial    = (*module)(nil)
)
