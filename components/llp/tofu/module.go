package tofu

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/gompi/gompi/frameworks/llp"
	"github.com/gompi/gompi/mca"
	"github.com/gompi/gompi/mpierr"
	"github.com/gompi/gompi/rte"
)

type module struct {
	log      *mca.Logger
	geo      geometry
	capacity int // bytes of message a slot holds
	modex    *rte.Modex
	fn       llp.RecvFunc

	job        string
	rank, pid  int
	localRanks []int // the node's ranks, in order; a rank's index is its announce slot
	localIdx   int
	ctl        *ctlSeg // our own
	peers      []*peer // by world rank; nil for ranks not reached
	local      []*peer // by local index

	closed atomic.Bool

	// Receiving side. active is read without the lock by the idle check
	// and replaced (copy on write) under it.
	bellSeen atomic.Uint64
	active   atomic.Pointer[[]*inbox]
	progress sync.Mutex
	in       []*inbox // by local index, under progress
}

// peer is a local process this module reaches.
type peer struct {
	rank, local, pid int
	ctl              *ctlSeg        // the peer's control segment
	gone             *atomic.Uint64 // its "finalized" word

	mu       sync.Mutex // the sending side
	out      *outbox
	outSeg   *segment
	attached *atomic.Uint64 // the box's "receiver mapped it" word
	broken   bool           // making the box failed: never try again
}

func (m *module) Name() string { return "tofu" }

// AddProcs maps the control segment of every local peer that published a
// card. The last peer to map a control segment removes its file.
func (m *module) AddProcs(ranks []int) ([]bool, error) {
	type card struct{ rank, local, pid, ctlBytes int }
	var cards []card
	for i, r := range m.localRanks {
		if r == m.rank {
			continue
		}
		b, err := m.modex.GetProc(r, cardKey)
		if errors.Is(err, rte.ErrNotFound) {
			m.log.Log(mca.VerboseComponent, "local peer does not run the tofu LLP: not reaching it", "peer", r)
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("llp tofu: business card of rank %d: %w", r, err)
		}
		pid, ctlBytes, err := parseCard(b)
		if err != nil {
			return nil, mpierr.Errorf(mpierr.ErrIntern, "llp tofu: rank %d: %w", r, err)
		}
		cards = append(cards, card{r, i, pid, ctlBytes})
	}
	if len(cards) == 0 {
		// Nobody will map our control segment.
		if err := unlinkFile(m.ctl.name); err != nil {
			return nil, err
		}
	}
	for _, c := range cards {
		p, err := m.attachPeer(c.rank, c.local, c.pid, c.ctlBytes, len(cards))
		if err != nil {
			return nil, err
		}
		m.local[c.local] = p
		if c.rank >= 0 && c.rank < len(m.peers) {
			m.peers[c.rank] = p
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
func (m *module) attachPeer(rank, local, pid, ctlBytes, attachers int) (*peer, error) {
	seg, err := openSegment(ctlName(m.job, rank), ctlBytes)
	if err != nil {
		return nil, fmt.Errorf("llp tofu: control segment of rank %d: %w", rank, err)
	}
	h, err := parseCtlHeader(seg.mem)
	if err == nil && (h.rank != rank || h.pid != pid || h.localSize != len(m.localRanks)) {
		err = fmt.Errorf("control segment of rank %d (pid %d, %d local ranks) names rank %d (pid %d, %d local ranks)",
			rank, pid, len(m.localRanks), h.rank, h.pid, h.localSize)
	}
	var ctl *ctlSeg
	if err == nil {
		ctl, err = bindCtl(seg, h.localSize)
	}
	if err != nil {
		seg.unmap()
		return nil, mpierr.Errorf(mpierr.ErrIntern, "llp tofu: %s: %w", seg.name, err)
	}
	if n := ctl.attached.Add(1); n == uint64(attachers) {
		if err := unlinkFile(seg.name); err != nil {
			seg.unmap()
			return nil, err
		}
		m.log.Log(mca.VerboseInfo, "every local peer has mapped the control segment: removed its file", "owner", rank)
	}
	return &peer{rank: rank, local: local, pid: pid, ctl: ctl, gone: ctl.gone}, nil
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
	p.mu.Unlock()
	if !ok {
		return llp.ErrNotAvailable
	}
	return nil
}

// connect makes the box to a peer and announces it in the peer's control
// segment. Callers hold p.mu.
func (m *module) connect(p *peer) (*outbox, error) {
	seg, err := createSegment(boxName(m.job, m.rank, p.rank), boxSize(m.geo))
	if err != nil {
		return nil, err
	}
	ack, err1 := word(seg.mem, boxOffAck)
	attached, err2 := word(seg.mem, boxOffAttach)
	var o *outbox
	err = errors.Join(err1, err2)
	if err == nil {
		o, err = newOutbox(seg.mem[boxHeader:], m.geo, ack)
	}
	if err != nil {
		seg.unmap()
		unlinkFile(seg.name)
		return nil, mpierr.Errorf(mpierr.ErrIntern, "llp tofu: %s: %w", seg.name, err)
	}
	writeBoxHeader(seg.mem, boxHeaderInfo{src: m.rank, dst: p.rank, pid: m.pid, geo: m.geo})
	p.out, p.outSeg, p.attached = o, seg, attached
	// The announce store publishes the header written above; the doorbell
	// tells the peer to look at its announce words.
	p.ctl.slots[m.localIdx].Store(m.geo.encode())
	p.ctl.bell.Add(1)
	m.log.Log(mca.VerboseInfo, "made the box to a local peer", "peer", p.rank, "file", seg.name)
	return o, nil
}

// Progress delivers what peers wrote. When nothing is there it takes no
// lock: a load of the doorbell and one of the next stamp per box.
func (m *module) Progress() int {
	if m.closed.Load() {
		return 0
	}
	if m.ctl.bell.Load() != m.bellSeen.Load() {
		m.attachBoxes()
	}
	for _, in := range *m.active.Load() {
		if in.ready() {
			return m.drain()
		}
	}
	return 0
}

// drain delivers the messages of every box, under the progress lock.
func (m *module) drain() int {
	if !m.progress.TryLock() {
		return 0
	}
	defer m.progress.Unlock()
	if m.closed.Load() {
		return 0
	}
	n := 0
	broken := false
	for _, in := range *m.active.Load() {
		k, err := in.poll(m.fn)
		n += k
		if err != nil {
			in.failed, broken = true, true
			m.log.Error("the tofu box from a local peer holds garbage: no longer reading it", "peer", in.src, "error", err.Error())
		}
	}
	if broken {
		var keep []*inbox
		for _, in := range *m.active.Load() {
			if !in.failed {
				keep = append(keep, in)
			}
		}
		m.active.Store(&keep)
	}
	return n
}

// attachBoxes maps the boxes peers announced since the last look and
// removes their files: both sides have them mapped now.
func (m *module) attachBoxes() {
	if !m.progress.TryLock() {
		return // whoever holds it, or the next Progress, will look
	}
	defer m.progress.Unlock()
	if m.closed.Load() {
		return
	}
	// Note the bell before reading the announce words: an announcement made
	// meanwhile rings it again.
	m.bellSeen.Store(m.ctl.bell.Load())
	var added []*inbox
	for i, slot := range m.ctl.slots {
		if i == m.localIdx || m.in[i] != nil {
			continue
		}
		v := slot.Load()
		if v == 0 {
			continue
		}
		src := m.localRanks[i]
		in, err := m.openBox(i, src, decodeGeometry(v))
		if err != nil {
			// Whatever it is, it is no box of ours: do not look again. What
			// the peer wrote there is lost, hence an error.
			m.in[i] = &inbox{src: src, failed: true}
			unlinkFile(boxName(m.job, src, m.rank))
			m.log.Error("cannot attach the tofu box from a local peer", "peer", src, "error", err.Error())
			continue
		}
		m.in[i] = in
		added = append(added, in)
		m.log.Log(mca.VerboseInfo, "mapped the box from a local peer and removed its file", "peer", src)
	}
	if len(added) > 0 {
		next := append(append([]*inbox(nil), *m.active.Load()...), added...)
		m.active.Store(&next)
	}
}

func (m *module) openBox(local, src int, g geometry) (*inbox, error) {
	p := m.local[local]
	if p == nil {
		return nil, fmt.Errorf("rank %d is not reached here", src)
	}
	if !g.valid() {
		return nil, fmt.Errorf("announced %d slots of %d bytes", g.slots, g.slotSize)
	}
	name := boxName(m.job, src, m.rank)
	seg, err := openSegment(name, boxSize(g))
	if err != nil {
		return nil, err
	}
	h, err := parseBoxHeader(seg.mem)
	if err == nil && (h.src != src || h.dst != m.rank || h.pid != p.pid || h.geo != g) {
		err = fmt.Errorf("%s names rank %d (pid %d) to rank %d with %d slots of %d; want rank %d (pid %d) to rank %d with %d of %d",
			name, h.src, h.pid, h.dst, h.geo.slots, h.geo.slotSize, src, p.pid, m.rank, g.slots, g.slotSize)
	}
	var in *inbox
	var attached *atomic.Uint64
	if err == nil {
		var ack *atomic.Uint64
		var e1, e2 error
		ack, e1 = word(seg.mem, boxOffAck)
		attached, e2 = word(seg.mem, boxOffAttach)
		if err = errors.Join(e1, e2); err == nil {
			in, err = newInbox(src, seg, seg.mem[boxHeader:], g, ack)
		}
	}
	if err != nil {
		seg.unmap()
		return nil, err
	}
	attached.Store(1)
	if err := unlinkFile(name); err != nil {
		seg.unmap()
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
	m.progress.Lock()
	defer m.progress.Unlock()
	m.ctl.gone.Store(1)
	var errs []error
	for _, p := range m.local {
		if p == nil {
			continue
		}
		p.mu.Lock()
		if p.outSeg != nil {
			// A box the peer never mapped: nobody else will remove it.
			if p.attached.Load() == 0 {
				errs = append(errs, unlinkFile(p.outSeg.name))
			}
			p.outSeg.unmap()
			p.out, p.outSeg = nil, nil
		}
		p.ctl.unmap()
		p.mu.Unlock()
	}
	for i, slot := range m.ctl.slots {
		if i == m.localIdx {
			continue
		}
		if in := m.in[i]; in != nil && in.seg != nil {
			in.seg.unmap()
		} else if in == nil && slot.Load() != 0 {
			errs = append(errs, unlinkFile(boxName(m.job, m.localRanks[i], m.rank)))
		}
	}
	empty := []*inbox{}
	m.active.Store(&empty)
	errs = append(errs, unlinkFile(m.ctl.name))
	m.ctl.unmap()
	return errors.Join(errs...)
}

var _ llp.Module = (*module)(nil)
