package shm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/gompi/gompi/components/common/shmem"
	"github.com/gompi/gompi/frameworks/btl"
	"github.com/gompi/gompi/mca"
	"github.com/gompi/gompi/mpierr"
	"github.com/gompi/gompi/release"
	"github.com/gompi/gompi/rte"
)

// config is what the parameters say, checked.
type config struct {
	ringSize      uint64
	cma           bool
	livenessPolls int
}

// pollBatch bounds the fragments taken from one peer per Progress call, so
// that a peer that streams does not starve the others.
const pollBatch = 64

type module struct {
	owner shmem.Owner // the package's, with this process's shared mappings
	attr  btl.Attributes
	cfg   config
	log   *mca.Logger
	cb    btl.Callbacks
	modex *rte.Modex
	wake  *rte.Bell // this process's: RingPeer wakes sleeping peers

	job        string
	rank, pid  int
	node       int
	nodeOf     []int
	localRanks []int // the node's ranks, in order; a rank's index is its slot
	localIdx   int
	ctl        *shmem.Ctl  // our own
	eps        []*endpoint // by local index; nil for ourselves and non-shm peers

	closed atomic.Bool
	// testRead, set by tests only (export_test.go), runs just before Peek's
	// first read of a ring: a test widens the window there.
	testRead func()

	// Receiving side, under progress.
	progress release.Mutex
	bell     uint64   // our doorbell as last seen
	in       []*inbox // by local index
	active   []*inbox // attached and readable
	polls    int      // Progress calls since the last liveness check
	pollFds  []unix.PollFd
	pollEps  []*endpoint

	// Lost peers found outside Progress (by Send or Get) are told to the
	// callback by the next Progress: Send's caller may hold locks that the
	// callback takes.
	lostMu      sync.Mutex
	lostQueue   []lostNote
	lostPending atomic.Bool
}

type lostNote struct {
	rank int
	err  error
}

// inbox is a box from a peer to us, attached.
type inbox struct {
	src     int
	ep      *endpoint
	box     *shmem.Box
	c       *consumer
	deliver func(tag uint8, frags [][]byte)
	failed  bool
}

// endpoint is a local peer.
type endpoint struct {
	m       *module
	rank    int
	local   int
	pid     int
	pidfd   int // -1 when the peer is this process or pidfd_open is unavailable
	peerCtl *shmem.Ctl
	flags   atomic.Uint32
	lost    atomic.Pointer[error]

	mu      release.Mutex // the producer side
	out     *producer
	outBox  *shmem.Box
	refused int // consecutive sends refused for lack of room
}

func (e *endpoint) Rank() int        { return e.rank }
func (e *endpoint) Flags() btl.Flags { return btl.Flags(e.flags.Load()) }

func (m *module) Attributes() btl.Attributes { return m.attr }

func (m *module) RegisterRecv(tag btl.Tag, fn btl.RecvFunc) { m.cb.RegisterRecv(tag, fn) }

func (m *module) RegisterRecvRun(tag btl.Tag, fn btl.RunRecvFunc) { m.cb.RegisterRecvRun(tag, fn) }
func (m *module) RegisterError(fn btl.ErrorFunc)                  { m.cb.RegisterError(fn) }

// AddProcs maps the control segment of every local peer that published a
// card, probes single copy towards it, and watches its pid. The last peer
// to map a control segment removes its file.
// Reaches says, before the modex, that shm reaches every other rank of its
// node (btl.Reacher): AddProcs attaches each of them or fails.
func (m *module) Reaches(rank int) bool {
	return rank != m.rank && rank >= 0 && rank < len(m.nodeOf) && m.nodeOf[rank] == m.node
}

func (m *module) AddProcs(ranks []int) ([]btl.Endpoint, error) {
	cards, err := m.owner.ReadCards(m.log, m.modex, m.localRanks, m.rank, m.ctl)
	if err != nil {
		return nil, err
	}
	// Goroutine ranks share a pid: probe single copy once per process.
	probed := map[int]error{}
	for _, c := range cards {
		ep, err := m.attachPeer(c, len(cards), probed)
		if err != nil {
			return nil, err
		}
		m.eps[c.Local] = ep
	}
	byRank := make(map[int]*endpoint, len(cards))
	for _, ep := range m.eps {
		if ep != nil {
			byRank[ep.rank] = ep
		}
	}
	out := make([]btl.Endpoint, len(ranks))
	for i, r := range ranks {
		// Same node only, and never oneself (self's job).
		if ep := byRank[r]; ep != nil && r >= 0 && r < len(m.nodeOf) && m.nodeOf[r] == m.node {
			out[i] = ep
		}
	}
	m.progress.Lock()
	for _, ep := range m.eps {
		if ep != nil && ep.pidfd >= 0 {
			m.pollFds = append(m.pollFds, unix.PollFd{Fd: int32(ep.pidfd), Events: unix.POLLIN})
			m.pollEps = append(m.pollEps, ep)
		}
	}
	m.progress.Unlock()
	return out, nil
}

func (m *module) attachPeer(card shmem.Card, attachers int, probed map[int]error) (*endpoint, error) {
	rank, local, pid := card.Rank, card.Local, card.Pid
	ctl, err := m.owner.AttachCtl(m.log, m.job, card, shmem.CtlHeader{Rank: rank, Pid: pid, LocalSize: len(m.localRanks)}, attachers)
	if err != nil {
		return nil, err
	}
	ep := &endpoint{m: m, rank: rank, local: local, pid: pid, pidfd: -1, peerCtl: ctl}
	fail := func(err error) (*endpoint, error) {
		ctl.Unmap()
		return nil, err
	}
	if pid != m.pid {
		fd, err := unix.PidfdOpen(pid, 0)
		switch {
		case err == nil:
			ep.pidfd = fd
		case errors.Is(err, unix.ESRCH):
			return fail(fmt.Errorf("btl shm: rank %d (pid %d) is gone: %w", rank, pid, btl.ErrPeerLost))
		default:
			// Old kernels: fall back to kill(pid, 0), which cannot tell a
			// zombie from a live process but sees a reaped one.
			m.log.Log(mca.VerboseComponent, "pidfd_open refused: checking the peer's liveness with kill(pid, 0)", "peer", rank, "error", err.Error())
		}
	}
	if m.cfg.cma {
		err, done := probed[pid]
		if !done {
			addr, nonce := probeOf(ctl.Mem)
			err = probeCMA(pid, addr, nonce)
			probed[pid] = err
		}
		if err != nil {
			m.log.Log(mca.VerboseComponent, "single copy (process_vm_readv) refused towards peer: large transfers go as fragments",
				"peer", rank, "pid", pid, "reason", err.Error())
		} else {
			ep.flags.Store(uint32(btl.FlagGet | btl.FlagPut))
		}
	}
	m.log.Log(mca.VerboseInfo, "mapped the control segment of a local peer", "peer", rank, "pid", pid,
		"single_copy", ep.Flags()&btl.FlagGet != 0)
	return ep, nil
}

// probeCMA reads the nonce word of a peer's control segment through
// process_vm_readv and compares it with what the mapping shows: success
// proves both that the kernel lets us read the peer and that the pid names
// the right process (it would not across pid namespaces).
func probeCMA(pid int, addr, nonce uint64) error {
	desc := make([]byte, btl.CMADescLen)
	binary.LittleEndian.PutUint32(desc, uint32(pid))
	binary.LittleEndian.PutUint64(desc[4:], addr)
	binary.LittleEndian.PutUint64(desc[12:], 8)
	var got [8]byte
	if err := btl.CMARead(desc, 0, got[:]); err != nil {
		return err
	}
	if v := binary.LittleEndian.Uint64(got[:]); v != nonce {
		return fmt.Errorf("read %#x from pid %d where its segment holds %#x (another pid namespace?): %w", v, pid, nonce, btl.ErrNoRDMA)
	}
	return nil
}

func (m *module) endpoint(ep btl.Endpoint) (*endpoint, error) {
	e, ok := ep.(*endpoint)
	if !ok || e == nil || e.m != m {
		return nil, mpierr.Errorf(mpierr.ErrArg, "btl shm: endpoint %T is not one of this module's", ep)
	}
	return e, nil
}

func (m *module) Send(ep btl.Endpoint, tag btl.Tag, hdr, payload []byte) error {
	e, err := m.endpoint(ep)
	if err != nil {
		return err
	}
	if len(hdr)+len(payload) > m.attr.MaxSendSize {
		return btl.ErrTooLarge
	}
	return e.send(tag, hdr, payload)
}

// Sendi is Send for fragments up to the eager limit: Send never queues, so
// it is immediate already.
func (m *module) Sendi(ep btl.Endpoint, tag btl.Tag, hdr, payload []byte) bool {
	e, err := m.endpoint(ep)
	if err != nil || len(hdr)+len(payload) > m.attr.EagerLimit {
		return false
	}
	return e.send(tag, hdr, payload) == nil
}

func (e *endpoint) send(tag btl.Tag, hdr, payload []byte) error {
	if p := e.lost.Load(); p != nil {
		return *p
	}
	e.mu.Lock()
	asleep, err := e.sendHeld(tag, hdr, payload)
	e.mu.Unlock()
	if asleep {
		e.m.wake.RingPeer(e.rank)
	}
	return err
}

// SendLock returns the lock of ep's ring producer (btl.HeldSender).
func (m *module) SendLock(ep btl.Endpoint) *release.Mutex {
	e, err := m.endpoint(ep)
	if err != nil {
		return nil
	}
	return &e.mu
}

// SendHeld is Send for a caller that holds SendLock(ep) (btl.HeldSender).
func (m *module) SendHeld(ep btl.Endpoint, tag btl.Tag, hdr, payload []byte) error {
	e, err := m.endpoint(ep)
	if err != nil {
		return err
	}
	if len(hdr)+len(payload) > m.attr.MaxSendSize {
		return btl.ErrTooLarge
	}
	if p := e.lost.Load(); p != nil {
		return *p
	}
	asleep, err := e.sendHeld(tag, hdr, payload)
	if asleep {
		// Under the caller's lock: only when the peer sleeps, where a
		// system call or a wake-up is paid anyway.
		e.m.wake.RingPeer(e.rank)
	}
	return err
}

// sendHeld writes a record into the peer's ring and says whether the peer
// sleeps (its bell is to be rung); the caller holds e.mu, under which
// Finalize unmaps the peer's segment.
func (e *endpoint) sendHeld(tag btl.Tag, hdr, payload []byte) (asleep bool, err error) {
	if e.m.closed.Load() {
		return false, mpierr.Errorf(mpierr.ErrOther, "btl shm: send after Finalize")
	}
	if e.out == nil {
		if err := e.connect(); err != nil {
			return false, err
		}
	}
	if e.out.write(uint8(tag), hdr, payload) {
		e.refused = 0
		return e.peerCtl.Asleep(), nil
	}
	// No room: the receiver is slow, or dead. Look rarely, so that a
	// sender spinning on a full box costs the peer nothing.
	if e.refused++; e.refused >= e.m.cfg.livenessPolls {
		e.refused = 0
		if lerr := e.m.checkPeer(e); lerr != nil {
			return false, lerr
		}
	}
	return false, btl.ErrWouldBlock
}

// connect makes the box to the peer, on first Send, and announces it in
// the peer's control segment. The receiver maps it on its next Progress and
// removes the file.
func (e *endpoint) connect() error {
	m := e.m
	size := int(m.cfg.ringSize)
	box, err := m.owner.CreateBox(m.job, m.rank, e.rank, boxHeader+size)
	if err != nil {
		return err
	}
	tail, err := owner.Word(box.Mem, boxOffTail)
	var prod *producer
	if err == nil {
		prod, err = newProducer(box.Mem[boxHeader:], tail)
	}
	if err != nil {
		box.Destroy()
		return mpierr.Errorf(mpierr.ErrIntern, "btl shm: %s: %w", box.Name, err)
	}
	writeBoxHeader(box.Mem, boxHeaderInfo{src: m.rank, dst: e.rank, pid: m.pid, size: uint64(size)})
	e.out, e.outBox = prod, box
	e.peerCtl.Announce(m.localIdx, uint64(size), box.Ref())
	m.log.Log(mca.VerboseInfo, "made the box to a local peer", "peer", e.rank, "segment", box.Name, "ring_bytes", size)
	return nil
}

func (m *module) Progress() int {
	if !m.progress.TryLock() {
		return 0
	}
	defer m.progress.Unlock()
	if m.closed.Load() {
		return 0
	}
	if b := m.ctl.Bell.Load(); b != m.bell {
		m.bell = b
		m.attachBoxes()
	}
	n := 0
	broken := false
	for _, in := range m.active {
		k, err := in.c.poll(pollBatch, in.deliver)
		n += k
		if err != nil {
			in.failed, broken = true, true
			m.markLost(in.ep, mpierr.Errorf(mpierr.ErrIntern,
				"btl shm: the box from rank %d holds garbage: %v: %w", in.src, err, btl.ErrPeerLost), true)
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
	if m.polls++; m.polls >= m.cfg.livenessPolls {
		m.polls = 0
		m.checkPeers()
	}
	if m.lostPending.Load() {
		m.notifyLost()
	}
	return n
}

// attachBoxes maps the boxes peers announced since the last look and
// removes their files: both sides have them mapped now. The bell also
// rings when a peer has mapped a segment of ours: Settle closes what no
// peer needs to open any more.
func (m *module) attachBoxes() {
	m.owner.Held.Settle()
	for i, slot := range m.ctl.Slots {
		if i == m.localIdx || m.in[i] != nil {
			continue
		}
		size := slot.Load()
		if size == 0 {
			continue
		}
		ep := m.eps[i]
		ref := m.ctl.Refs[i].Load()
		in, err := m.openBox(ep, m.localRanks[i], size, ref)
		if err != nil {
			// Whatever it is, it is no box of ours: do not look again.
			m.in[i] = &inbox{src: m.localRanks[i], failed: true}
			if ref == 0 {
				owner.Unlink(owner.BoxPath(m.job, m.localRanks[i], m.rank))
			}
			if ep != nil {
				// A sender that finalized before we looked removed its box:
				// that is an orderly departure, not a loss to report.
				m.markLost(ep, fmt.Errorf("btl shm: attaching the box from rank %d: %w: %w", ep.rank, err, btl.ErrPeerLost),
					ep.peerCtl.Gone.Load() == 0)
			} else {
				m.log.Log(mca.VerboseComponent, "ignored a box from a rank this module does not reach", "peer", m.localRanks[i], "reason", err.Error())
			}
			continue
		}
		m.in[i] = in
		m.active = append(m.active, in)
		m.log.Log(mca.VerboseInfo, "mapped the box from a local peer and removed its file", "peer", in.src, "ring_bytes", size)
	}
}

func (m *module) openBox(ep *endpoint, src int, size, ref uint64) (*inbox, error) {
	if ep == nil {
		return nil, fmt.Errorf("rank %d has no endpoint here", src)
	}
	if !validRingSize(size) {
		return nil, fmt.Errorf("announced ring of %d bytes", size)
	}
	box, err := m.owner.OpenBox(m.job, src, ep.pid, m.rank, ref, boxHeader+int(size))
	if err != nil {
		return nil, err
	}
	h, err := parseBoxHeader(box.Mem)
	if err == nil && (h.src != src || h.dst != m.rank || h.size != size || h.pid != ep.pid) {
		err = fmt.Errorf("%s names rank %d (pid %d) to rank %d with a ring of %d; want rank %d (pid %d) to rank %d with %d",
			box.Name, h.src, h.pid, h.dst, h.size, src, ep.pid, m.rank, size)
	}
	var tail *atomic.Uint64
	var c *consumer
	if err == nil {
		if tail, err = owner.Word(box.Mem, boxOffTail); err == nil {
			c, err = newConsumer(box.Mem[boxHeader:], tail)
		}
	}
	if err != nil {
		box.Unmap()
		return nil, err
	}
	if err := owner.Adopt(box, ep.peerCtl); err != nil {
		return nil, err
	}
	in := &inbox{src: src, ep: ep, box: box, c: c}
	in.deliver = func(tag uint8, frags [][]byte) {
		if !m.cb.DeliverRun(src, btl.Tag(tag), frags) && m.log.V(mca.VerboseWarn) {
			m.log.Log(mca.VerboseWarn, "dropped fragments: no callback for their tag", "peer", src, "tag", tag, "fragments", len(frags))
		}
	}
	return in, nil
}

// markLost records that a peer cannot be reached, once; notify queues the
// error callback for the next Progress.
func (m *module) markLost(ep *endpoint, err error, notify bool) {
	if ep == nil || !ep.lost.CompareAndSwap(nil, &err) {
		return
	}
	m.log.Log(mca.VerboseComponent, "lost a local peer", "peer", ep.rank, "reason", err.Error())
	if notify {
		m.lostMu.Lock()
		m.lostQueue = append(m.lostQueue, lostNote{ep.rank, err})
		m.lostMu.Unlock()
		m.lostPending.Store(true)
	}
}

func (m *module) notifyLost() {
	m.lostMu.Lock()
	q := m.lostQueue
	m.lostQueue = nil
	m.lostPending.Store(false)
	m.lostMu.Unlock()
	for _, n := range q {
		m.cb.Lost(n.rank, n.err)
	}
}

// checkPeers looks, in one poll(2), at the pidfds of the peers not yet
// lost, and at their "finalized" words.
func (m *module) checkPeers() {
	for _, ep := range m.eps {
		if ep != nil && ep.lost.Load() == nil && ep.pidfd < 0 && ep.pid != m.pid {
			if err := unix.Kill(ep.pid, 0); errors.Is(err, unix.ESRCH) {
				m.markLost(ep, fmt.Errorf("btl shm: rank %d (pid %d) died: %w", ep.rank, ep.pid, btl.ErrPeerLost), true)
			}
		}
	}
	if len(m.pollFds) > 0 {
		for i := range m.pollFds {
			m.pollFds[i].Revents = 0
		}
		if n, err := unix.Poll(m.pollFds, 0); err == nil && n > 0 {
			for i, fd := range m.pollFds {
				if fd.Revents != 0 {
					ep := m.pollEps[i]
					m.markLost(ep, fmt.Errorf("btl shm: rank %d (pid %d) died: %w", ep.rank, ep.pid, btl.ErrPeerLost), true)
				}
			}
		}
	}
	for _, ep := range m.eps {
		if ep != nil && ep.lost.Load() == nil && ep.peerCtl.Gone.Load() != 0 {
			m.markLost(ep, fmt.Errorf("btl shm: rank %d has finalized: %w", ep.rank, btl.ErrPeerLost), false)
		}
	}
}

// checkPeer is checkPeers for one peer, for a sender whose box stays full.
// It returns the error the peer was lost with, or nil.
func (m *module) checkPeer(ep *endpoint) error {
	var dead bool
	switch {
	case ep.pidfd >= 0:
		fds := []unix.PollFd{{Fd: int32(ep.pidfd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, 0)
		dead = err == nil && n > 0
	case ep.pid != m.pid:
		dead = errors.Is(unix.Kill(ep.pid, 0), unix.ESRCH)
	}
	switch {
	case dead:
		m.markLost(ep, fmt.Errorf("btl shm: rank %d (pid %d) died: %w", ep.rank, ep.pid, btl.ErrPeerLost), true)
	case ep.peerCtl.Gone.Load() != 0:
		m.markLost(ep, fmt.Errorf("btl shm: rank %d has finalized: %w", ep.rank, btl.ErrPeerLost), false)
	}
	if p := ep.lost.Load(); p != nil {
		return *p
	}
	return nil
}

// withoutSingleCopy is the module when single copy is off: everything but
// btl.RDMA, so that what it implements and its FlagGet and FlagPut (none)
// say the same (the BML rejects a module where they differ). The default,
// single copy on, is *module itself, so its hot calls stay direct.
type withoutSingleCopy struct{ plainModule }

// plainModule is what a module without single copy offers.
type plainModule interface {
	btl.Module
	btl.FragmentPeeker
	btl.HeldSender
}

// Expose describes buf for process_vm_readv/writev by a peer.
func (m *module) Expose(buf []byte) []byte { return btl.ExposeCMA(buf) }

// AppendExpose is Expose appended to dst (btl.AppendExposer).
func (m *module) AppendExpose(dst, buf []byte) []byte { return btl.AppendCMA(dst, buf) }

// Get reads a peer's exposed buffer with one copy (process_vm_readv).
func (m *module) Get(ep btl.Endpoint, desc []byte, off int, dst []byte) error {
	return m.rdma(ep, desc, off, dst, false)
}

// Put writes into a peer's exposed buffer with one copy (process_vm_writev).
func (m *module) Put(ep btl.Endpoint, desc []byte, off int, src []byte) error {
	return m.rdma(ep, desc, off, src, true)
}

func (m *module) rdma(ep btl.Endpoint, desc []byte, off int, local []byte, write bool) error {
	e, err := m.endpoint(ep)
	if err != nil {
		return err
	}
	want := btl.FlagGet
	if write {
		want = btl.FlagPut
	}
	if e.Flags()&want == 0 {
		return fmt.Errorf("btl shm: rank %d: %w", e.rank, btl.ErrNoRDMA)
	}
	if p := e.lost.Load(); p != nil {
		return *p
	}
	pid, _, err := btl.ParseCMA(desc, off, len(local))
	if err != nil {
		return err
	}
	if pid != e.pid {
		// Only the peer's own memory: a description is data from the peer.
		return mpierr.Errorf(mpierr.ErrIntern, "btl shm: rank %d (pid %d) sent a description of pid %d's memory", e.rank, e.pid, pid)
	}
	if write {
		err = btl.CMAWrite(desc, off, local)
	} else {
		err = btl.CMARead(desc, off, local)
	}
	switch {
	case errors.Is(err, btl.ErrNoRDMA):
		// The probe passed but the kernel refuses now: stop offering it.
		e.flags.Store(0)
		m.log.Log(mca.VerboseComponent, "single copy refused by the kernel: large transfers to this peer go as fragments from now on",
			"peer", e.rank, "reason", err.Error())
	case errors.Is(err, btl.ErrPeerLost):
		m.markLost(e, err, true)
	}
	return err
}

// Finalize marks us finalized in our control segment (so peers stop
// sending to us), removes whatever file of ours is still there, and unmaps
// everything.
func (m *module) Finalize() error {
	if !m.closed.CompareAndSwap(false, true) {
		return nil
	}
	m.wake.Unwatch(m.ctl)
	m.progress.Lock()
	defer m.progress.Unlock()
	m.ctl.Gone.Store(1)
	var errs []error
	for _, ep := range m.eps {
		if ep == nil {
			continue
		}
		ep.mu.Lock()
		if ep.outBox != nil {
			errs = append(errs, owner.Release(ep.outBox))
			ep.out = nil
		}
		ep.peerCtl.Unmap()
		if ep.pidfd >= 0 {
			unix.Close(ep.pidfd)
			ep.pidfd = -1
		}
		ep.mu.Unlock()
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

// Peek returns the next fragment from ep's peer when one is there, holding
// the progress lock until Done (btl.FragmentPeeker).
func (m *module) Peek(ep btl.Endpoint) (btl.Tag, []byte, bool) {
	e, ok := ep.(*endpoint)
	if !ok || e == nil || e.m != m {
		return 0, nil, false
	}
	// The lock before the first read of the ring: Finalize unmaps it under
	// the lock, after setting closed.
	if !m.progress.TryLock() {
		return 0, nil, false
	}
	in := m.in[e.local]
	if m.closed.Load() || in == nil || in.failed {
		m.progress.Unlock()
		return 0, nil, false
	}
	if m.testRead != nil {
		m.testRead()
	}
	tag, frag, ok := in.c.peek()
	if !ok {
		m.progress.Unlock()
		return 0, nil, false
	}
	return btl.Tag(tag), frag, true
}

// Done ends a Peek that returned true.
func (m *module) Done(ep btl.Endpoint, consume bool) {
	if consume {
		m.in[ep.(*endpoint).local].c.consume()
	}
	m.progress.Unlock()
}

var (
	_ btl.RDMA           = (*module)(nil)
	_ btl.FragmentPeeker = (*module)(nil)
	_ btl.FragmentPeeker = withoutSingleCopy{}
	_ btl.HeldSender     = (*module)(nil)
	_ btl.HeldSender     = withoutSingleCopy{}
)
