package tofu

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/gompi/gompi/components/common/shmem"
	"github.com/gompi/gompi/frameworks/llp"
	"github.com/gompi/gompi/mca"
	"github.com/gompi/gompi/mpierr"
	"github.com/gompi/gompi/release"
	"github.com/gompi/gompi/rte"
)

type module struct {
	owner    shmem.Owner // the package's, with this process's shared mappings
	log      *mca.Logger
	geo      geometry
	capacity int // bytes of message a slot holds
	modex    *rte.Modex
	wake     *rte.Bell // this process's: RingPeer wakes sleeping peers
	fn       llp.RecvFunc

	job        string
	rank, pid  int
	localRanks []int // the node's ranks, in order; a rank's index is its announce slot
	localIdx   int
	ctl        *shmem.Ctl // our own
	peers      []*peer    // by world rank; nil for ranks not reached
	local      []*peer    // by local index

	closed atomic.Bool
	// testRead, set by tests only (export_test.go), runs just before the
	// first read of mapped memory in Progress and Peek: a test widens the
	// window there.
	testRead func()

	// Receiving side, under progress: every read of a box or of our
	// control segment is, since Finalize unmaps them under it.
	progress release.Mutex
	bellSeen uint64   // our doorbell as last seen
	in       []*inbox // by local index
	active   []*inbox // attached and readable
}

// peer is a local process this module reaches.
type peer struct {
	rank, local, pid int
	ctl              *shmem.Ctl     // the peer's control segment
	gone             *atomic.Uint64 // its "finalized" word

	mu     release.Mutex // the sending side
	out    *outbox
	outBox *shmem.Box
	broken bool // making the box failed: never try again
}

func (m *module) Name() string { return "tofu" }

// AddProcs maps the control segment of every local peer that published a
// card. The last peer to map a control segment removes its file.
func (m *module) AddProcs(ranks []int) ([]bool, error) {
	cards, err := m.owner.ReadCards(m.log, m.modex, m.localRanks, m.rank, m.ctl)
	if err != nil {
		return nil, err
	}
	for _, c := range cards {
		p, err := m.attachPeer(c, len(cards))
		if err != nil {
			return nil, err
		}
		m.local[c.Local] = p
		if c.Rank >= 0 && c.Rank < len(m.peers) {
			m.peers[c.Rank] = p
		}
	}
	out := make([]bool, len(ranks))
	for i, r := range ranks {
		out[i] = r >= 0 && r < len(m.peers) && m.peers[r] != nil
	}
	return out, nil
}

// attachPeer maps a peer's control segment and counts itself in it; the
// attacher that completes the count (every card holder but its owner)
// removes the file.
func (m *module) attachPeer(card shmem.Card, attachers int) (*peer, error) {
	ctl, err := m.owner.AttachCtl(m.log, m.job, card, shmem.CtlHeader{Rank: card.Rank, Pid: card.Pid, LocalSize: len(m.localRanks)}, attachers)
	if err != nil {
		return nil, err
	}
	return &peer{rank: card.Rank, local: card.Local, pid: card.Pid, ctl: ctl, gone: ctl.Gone}, nil
}

func (m *module) RegisterRecv(fn llp.RecvFunc) { m.fn = fn }

// Send writes hdr and payload into the next slot of the box to peer, making
// the box on the first Send, or refuses at once.
func (m *module) Send(peer int, hdr, payload []byte) error {
	if uint(peer) >= uint(len(m.peers)) {
		return llp.ErrNotAvailable
	}
	p := m.peers[peer]
	if p == nil || len(hdr)+len(payload) > m.capacity {
		return llp.ErrNotAvailable
	}
	// Another goroutine sending to this peer (on another communicator):
	// refuse rather than wait.
	if !p.mu.TryLock() {
		return llp.ErrNotAvailable
	}
	// A finalized peer reads nothing more; the BTL path reports the error.
	if m.closed.Load() || p.gone.Load() != 0 {
		p.mu.Unlock()
		return llp.ErrNotAvailable
	}
	o := p.out
	if o == nil {
		if p.broken {
			p.mu.Unlock()
			return llp.ErrNotAvailable
		}
		var err error
		if o, err = m.connect(p); err != nil {
			p.broken = true
			p.mu.Unlock()
			m.log.Log(mca.VerboseComponent, "cannot make the box to a local peer: its messages take the BTLs", "peer", peer, "error", err.Error())
			return llp.ErrNotAvailable
		}
	}
	ok := o.write(hdr, payload)
	// Under the lock: Finalize unmaps the peer's segment under it.
	asleep := ok && p.ctl.Asleep()
	p.mu.Unlock()
	if !ok {
		return llp.ErrNotAvailable
	}
	if asleep {
		m.wake.RingPeer(peer)
	}
	return nil
}

// connect makes the box to a peer and announces it in the peer's control
// segment. Callers hold p.mu.
func (m *module) connect(p *peer) (*outbox, error) {
	box, err := m.owner.CreateBox(m.job, m.rank, p.rank, boxSize(m.geo))
	if err != nil {
		return nil, err
	}
	ack, err := owner.Word(box.Mem, boxOffAck)
	var o *outbox
	if err == nil {
		o, err = newOutbox(box.Mem[boxHeader:], m.geo, ack)
	}
	if err != nil {
		box.Destroy()
		return nil, mpierr.Errorf(mpierr.ErrIntern, "llp tofu: %s: %w", box.Name, err)
	}
	writeBoxHeader(box.Mem, boxHeaderInfo{src: m.rank, dst: p.rank, pid: m.pid, geo: m.geo})
	p.out, p.outBox = o, box
	p.ctl.Announce(m.localIdx, m.geo.encode(), box.Ref())
	m.log.Log(mca.VerboseInfo, "made the box to a local peer", "peer", p.rank, "segment", box.Name)
	return o, nil
}

// Progress delivers what peers wrote. When nothing is there it costs the
// lock, a load of the doorbell and one of the next stamp per box.
func (m *module) Progress() int {
	// The lock before the first read of mapped memory: Finalize sets
	// closed, then unmaps under it.
	if !m.progress.TryLock() {
		return 0
	}
	defer m.progress.Unlock()
	if m.closed.Load() {
		return 0
	}
	if m.testRead != nil {
		m.testRead()
	}
	if m.ctl.Bell.Load() != m.bellSeen {
		m.attachBoxes()
	}
	n := 0
	broken := false
	for _, in := range m.active {
		k, err := in.poll(m.fn)
		n += k
		if err != nil {
			in.failed, broken = true, true
			m.log.Error("the tofu box from a local peer holds garbage: no longer reading it", "peer", in.src, "error", err.Error())
		}
	}
	if broken {
		keep := m.active[:0]
		for _, in := range m.active {
			if !in.failed {
				keep = append(keep, in)
			}
		}
		m.active = keep
	}
	return n
}

// attachBoxes maps the boxes peers announced since the last look and
// removes their files: both sides have them mapped now. Callers hold the
// progress lock.
func (m *module) attachBoxes() {
	// Note the bell before reading the announce words: an announcement made
	// meanwhile rings it again. The bell also rings when a peer has mapped
	// a segment of ours: Settle closes what no peer needs to open any more.
	m.bellSeen = m.ctl.Bell.Load()
	m.owner.Held.Settle()
	for i, slot := range m.ctl.Slots {
		if i == m.localIdx || m.in[i] != nil {
			continue
		}
		v := slot.Load()
		if v == 0 {
			continue
		}
		src := m.localRanks[i]
		ref := m.ctl.Refs[i].Load()
		in, err := m.openBox(i, src, decodeGeometry(v), ref)
		if err != nil {
			// Whatever it is, it is no box of ours: do not look again. What
			// the peer wrote there is lost, hence an error.
			m.in[i] = &inbox{src: src, failed: true}
			if ref == 0 {
				owner.Unlink(owner.BoxPath(m.job, src, m.rank))
			}
			m.log.Error("cannot attach the tofu box from a local peer", "peer", src, "error", err.Error())
			continue
		}
		m.in[i] = in
		m.active = append(m.active, in)
		m.log.Log(mca.VerboseInfo, "mapped the box from a local peer and removed its file", "peer", src)
	}
}

func (m *module) openBox(local, src int, g geometry, ref uint64) (*inbox, error) {
	p := m.local[local]
	if p == nil {
		return nil, fmt.Errorf("rank %d is not reached here", src)
	}
	if !g.valid() {
		return nil, fmt.Errorf("announced %d slots of %d bytes", g.slots, g.slotSize)
	}
	box, err := m.owner.OpenBox(m.job, src, p.pid, m.rank, ref, boxSize(g))
	if err != nil {
		return nil, err
	}
	h, err := parseBoxHeader(box.Mem)
	if err == nil && (h.src != src || h.dst != m.rank || h.pid != p.pid || h.geo != g) {
		err = fmt.Errorf("%s names rank %d (pid %d) to rank %d with %d slots of %d; want rank %d (pid %d) to rank %d with %d of %d",
			box.Name, h.src, h.pid, h.dst, h.geo.slots, h.geo.slotSize, src, p.pid, m.rank, g.slots, g.slotSize)
	}
	var in *inbox
	if err == nil {
		var ack *atomic.Uint64
		if ack, err = owner.Word(box.Mem, boxOffAck); err == nil {
			in, err = newInbox(src, box, box.Mem[boxHeader:], g, ack)
		}
	}
	if err != nil {
		box.Unmap()
		return nil, err
	}
	if err := owner.Adopt(box, p.ctl); err != nil {
		return nil, err
	}
	return in, nil
}

// Finalize marks us finalized (peers stop sending to us), removes whatever
// file of ours is still there, and unmaps everything.
func (m *module) Finalize() error {
	if !m.closed.CompareAndSwap(false, true) {
		return nil
	}
	m.wake.Unwatch(m.ctl)
	m.progress.Lock()
	defer m.progress.Unlock()
	m.ctl.Gone.Store(1)
	var errs []error
	for _, p := range m.local {
		if p == nil {
			continue
		}
		p.mu.Lock()
		if p.outBox != nil {
			errs = append(errs, owner.Release(p.outBox))
			p.out, p.outBox = nil, nil
		}
		p.ctl.Unmap()
		p.mu.Unlock()
	}
	for i, slot := range m.ctl.Slots {
		if i == m.localIdx {
			continue
		}
		if in := m.in[i]; in != nil && in.box != nil {
			in.box.Unmap()
		} else if in == nil && slot.Load() != 0 && m.ctl.Refs[i].Load() == 0 {
			// A named box announced to us but never mapped: nobody else
			// will remove it. (A memfd goes with its maker's descriptor.)
			errs = append(errs, owner.Unlink(owner.BoxPath(m.job, m.localRanks[i], m.rank)))
		}
	}
	m.active = nil
	errs = append(errs, m.ctl.Drop())
	m.ctl.Unmap()
	return errors.Join(errs...)
}

// Peek returns the next message from src when one is published, holding
// the progress lock until Done (llp.MessagePeeker).
func (m *module) Peek(src int) ([]byte, bool) {
	if uint(src) >= uint(len(m.peers)) {
		return nil, false
	}
	p := m.peers[src]
	if p == nil {
		return nil, false
	}
	// The lock before the first read of the box: Finalize sets closed,
	// then unmaps under it.
	if !m.progress.TryLock() {
		return nil, false
	}
	in := m.in[p.local]
	if m.closed.Load() || in == nil || in.failed {
		m.progress.Unlock()
		return nil, false
	}
	if m.testRead != nil {
		m.testRead()
	}
	msg, ok := in.peek()
	if !ok {
		m.progress.Unlock()
		return nil, false
	}
	return msg, true
}

// Done ends a Peek that returned true.
func (m *module) Done(src int, consume bool) {
	if consume {
		m.in[m.peers[src].local].consume()
	}
	m.progress.Unlock()
}

var (
	_ llp.Module        = (*module)(nil)
	_ llp.MessagePeeker = (*module)(nil)
)
