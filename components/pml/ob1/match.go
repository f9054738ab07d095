package ob1

import (
	"fmt"
	"math/bits"
	"sync/atomic"

	"github.com/gompi/gompi/frameworks/btl"
	"github.com/gompi/gompi/frameworks/group"
	"github.com/gompi/gompi/frameworks/pml"
	"github.com/gompi/gompi/mpierr"
	"github.com/gompi/gompi/release"
)

// comm is ob1's state for one communicator.
type comm struct {
	pc    *pml.Comm
	cid   uint16
	group *group.Group
	rank  int
	size  int

	// send is per peer (communicator rank); each has its lock, so that
	// sends to different peers never contend (see sendPeer.mu).
	send []sendPeer

	// mu is the matching lock: it guards everything below.
	mu    release.Mutex
	peers []recvPeer
	wild  reqList // posted AnySource receives, in posting order
	// wildPosted is 1 while wild holds a receive (noteWild; read without
	// c.mu, as recvPeer.queued).
	wildPosted atomic.Uint64
	unexAll    msgList // unexpected messages of every peer, in matching order
	postSeq    uint64  // posting order of receives
	// recvFree is the communicator's free list of receive requests.
	recvFree lockedPool[recvReq, *recvReq]

	// intr is what Interrupt made of the communicator (nil: nothing).
	intr atomic.Pointer[interruption]
}

// sendPeer is the send side of one (communicator, peer) pair.
type sendPeer struct {
	world int // the peer's world rank
	// mu guards what follows. It is the lock of the peer's eager route
	// when that transport lends it (btl.HeldSender: shm's ring producer,
	// shared by every communicator's sends to the peer), so that a
	// message takes one lock, not ob1's and then the transport's; the
	// sends made under it go through sendLocked. Otherwise it is own.
	mu  *release.Mutex
	own release.Mutex
	// held is the eager route's module when mu is its lock, and heldRoute
	// that route.
	held      btl.HeldSender
	heldRoute *btl.Route
	seq       uint16     // the next message's sequence number
	queue     []*sendReq // sends that found no room, in sequence order
	// inQueued says the peer is on the module's list of queues to push.
	inQueued bool
	// rr turns eager messages over the peer's routes.
	rr uint32
	// hdr is scratch space for headers, used under mu, so that the hot
	// path does not allocate.
	hdr [maxHdr]byte
	// doneFree holds the requests of immediate sends, taken under mu.
	doneFree lockedPool[doneReq, *doneReq]
	// eager and llpHits count messages sent (Stats), under mu: a shared
	// atomic counter would cost every message a locked instruction.
	eager, llpHits uint64
}

// lendLock makes sp's lock the one of its eager route's endpoint when the
// transport lends it (btl.HeldSender), its own otherwise.
func (m *module) lendLock(sp *sendPeer) {
	sp.mu = &sp.own
	if sp.world >= m.bml.Size() {
		return // a test's module, with no peers
	}
	routes := m.bml.Peer(sp.world).Send
	if len(routes) == 0 {
		return
	}
	rt := &routes[0]
	if hs, ok := rt.Module.(btl.HeldSender); ok {
		if mu := hs.SendLock(rt.EP); mu != nil {
			sp.mu, sp.held, sp.heldRoute = mu, hs, rt
		}
	}
}

// sendLocked sends a fragment on route for a caller that holds sp.mu: with
// SendHeld when sp.mu is the route's own lock (Send would wait for it).
func (sp *sendPeer) sendLocked(route *btl.Route, tag btl.Tag, hdr, payload []byte) error {
	if route == sp.heldRoute {
		return sp.held.SendHeld(route.EP, tag, hdr, payload)
	}
	return route.Module.Send(route.EP, tag, hdr, payload)
}

// sendCounts sums the communicator's send counters.
func (c *comm) sendCounts() (eager, llpHits uint64) {
	for i := range c.send {
		sp := &c.send[i]
		sp.mu.Lock()
		eager, llpHits = eager+sp.eager, llpHits+sp.llpHits
		sp.mu.Unlock()
	}
	return eager, llpHits
}

// recvPeer is the receive side of one (communicator, peer) pair.
type recvPeer struct {
	// queued is 1 while posted, unex or parked holds something: stored
	// under c.mu when they change (setQueued, noteQueued), read without
	// it by the receive fast path (fastClear), where the matching lock's
	// compare-and-swap was a sixth of a Send and Recv's software cost.
	// Beside posted, which every post writes.
	queued atomic.Uint64
	// lookSkips counts the Irecvs since one found nothing in its look at
	// the peer's next message; 0 while they look (irecvInPlace).
	lookSkips atomic.Uint64
	posted    reqList           // receives posted for this peer
	world     int               // the peer's world rank
	expected  uint16            // the sequence number that matches next
	parked    map[uint16]*inMsg // headers that arrived before their turn
	unex      msgList           // this peer's unexpected messages
}

// lookAgain makes the peer's next Irecv look at its next message.
func (p *recvPeer) lookAgain() {
	if p.lookSkips.Load() != 0 {
		release.Store(&p.lookSkips, 0)
	}
}

// setQueued notes that one of p's lists holds something now. Callers hold
// c.mu.
func (p *recvPeer) setQueued() {
	if p.queued.Load() == 0 {
		release.Store(&p.queued, 1)
	}
}

// noteQueued refreshes p.queued after something left its lists. Callers
// hold c.mu.
func (p *recvPeer) noteQueued() {
	var v uint64
	if p.posted.head != nil || p.unex.head != nil || len(p.parked) != 0 {
		v = 1
	}
	if p.queued.Load() != v {
		release.Store(&p.queued, v)
	}
}

// noteWild refreshes c.wildPosted after c.wild changed. Callers hold c.mu.
func (c *comm) noteWild() {
	var v uint64
	if c.wild.head != nil {
		v = 1
	}
	if c.wildPosted.Load() != v {
		release.Store(&c.wildPosted, v)
	}
}

// inMsg is a message header (with its eager data or first chunk) that could
// not be matched when it arrived: parked, unexpected, or taken by a matched
// probe. Its data is a copy.
type inMsg struct {
	typ    byte
	ctx    uint16
	src    int // communicator rank
	world  int
	tag    int
	seq    uint16
	msgLen int
	srcReq uint64
	data   []byte
	// small holds the data of short messages, saving an allocation; room,
	// that of longer ones up to keptRoom, kept with the message in the
	// free list for the next one.
	small [32]byte
	room  []byte

	allPrev, allNext   *inMsg
	peerPrev, peerNext *inMsg
}

func (m *module) AddComm(pc *pml.Comm) error {
	local := pc.Size
	if pc.Local != nil {
		local = pc.Local.Size()
	}
	if pc.Group == nil || pc.Size != pc.Group.Size() || pc.Rank < 0 || pc.Rank >= local {
		return mpierr.Errorf(mpierr.ErrComm, "ob1: communicator %d: rank %d of %d does not fit its group", pc.CID, pc.Rank, local)
	}
	c := &comm{
		pc: pc, cid: pc.CID, group: pc.Group, rank: pc.Rank, size: pc.Size,
		send:  make([]sendPeer, pc.Size),
		peers: make([]recvPeer, pc.Size),
	}
	for r := 0; r < pc.Size; r++ {
		w := pc.Group.World(r)
		if w < 0 || w >= m.size {
			return mpierr.Errorf(mpierr.ErrComm, "ob1: communicator %d: rank %d is world rank %d, outside the job of %d", pc.CID, r, w, m.size)
		}
		c.send[r].world, c.peers[r].world = w, w
		m.lendLock(&c.send[r])
	}
	m.commsMu.Lock()
	cs := *m.comms.Load()
	if int(pc.CID) < len(cs) && cs[pc.CID] != nil {
		m.commsMu.Unlock()
		return mpierr.Errorf(mpierr.ErrComm, "ob1: context id %d is already in use", pc.CID)
	}
	n := max(len(cs), int(pc.CID)+1)
	next := make([]*comm, n)
	copy(next, cs)
	next[pc.CID] = c
	pc.State = c
	m.comms.Store(&next)
	orphans := m.orphans[pc.CID]
	delete(m.orphans, pc.CID)
	m.commsMu.Unlock()
	// Headers that arrived before the communicator existed here go through
	// matching now, in arrival order; sequence numbers sort them out.
	for _, msg := range orphans {
		m.incoming(msg.world, msg, nil)
	}
	return nil
}

func (m *module) DelComm(pc *pml.Comm) error {
	m.commsMu.Lock()
	defer m.commsMu.Unlock()
	cs := *m.comms.Load()
	if int(pc.CID) >= len(cs) || cs[pc.CID] != pc.State {
		return mpierr.Errorf(mpierr.ErrComm, "ob1: context id %d is not in use", pc.CID)
	}
	next := append([]*comm(nil), cs...)
	next[pc.CID] = nil
	m.comms.Store(&next)
	eager, llpHits := cs[pc.CID].sendCounts()
	m.nEager.Add(eager)
	m.nLLPHits.Add(llpHits)
	return nil
}

// recvBTL is the BTL callback for every ob1 tag.
func (m *module) recvBTL(src int, _ btl.Tag, frag []byte) { m.dispatch(src, frag) }

// recvRun is the BTL callback for runs of MATCH fragments (btl.RunReceiver):
// a window of small messages from one peer, matched under one hold of the
// communicator's matching lock instead of one per message. A fragment that
// is not simply the peer's next message on a known communicator (another
// communicator's, out of order, malformed) ends the hold and goes through
// dispatch, in order.
func (m *module) recvRun(src int, _ btl.Tag, frags [][]byte) {
	var held *comm
	batched := 0
	for _, frag := range frags {
		if len(frag) >= matchLen && frag[0] == hdrMatch {
			a := arrival{data: frag[matchLen:]}
			matchFields(&a.h, frag)
			c := held
			if c == nil || c.cid != a.h.ctx {
				if held != nil {
					held.mu.Unlock()
					held = nil
				}
				c = m.comm(a.h.ctx)
			}
			if c != nil {
				if held == nil {
					c.mu.Lock()
					held = c
				}
				if r := int(a.h.src); r >= 0 && r < c.size {
					if p := &c.peers[r]; p.world == src && p.expected == a.h.seq && len(p.parked) == 0 {
						// matchIn's eager case, completing in a batch.
						tag := int(a.h.tag)
						if req := c.findPosted(r, tag); req != nil {
							c.unpost(req)
							n, err := req.placeEager(r, tag, a.data)
							req.CompleteBatched(r, tag, n, err)
							batched++
						} else {
							m.matchIn(c, r, nil, &a, src, nil)
						}
						p.expected++
						continue
					}
				}
			}
		}
		if held != nil {
			held.mu.Unlock()
			held = nil
		}
		m.dispatch(src, frag)
	}
	if held != nil {
		held.mu.Unlock()
	}
	if batched > 0 {
		m.eng.RingBatch()
	}
}

// dispatch handles one fragment from a BTL or an LLP. It runs inside
// Progress; frag is valid only during the call.
func (m *module) dispatch(src int, frag []byte) {
	if len(frag) < 2 {
		m.bad(src, fmt.Errorf("fragment of %d bytes", len(frag)))
		return
	}
	switch frag[0] {
	case hdrMatch:
		if len(frag) < matchLen {
			m.bad(src, fmt.Errorf("match header of %d bytes, want %d", len(frag), matchLen))
			return
		}
		a := arrival{data: frag[matchLen:]}
		matchFields(&a.h, frag)
		m.incoming(src, nil, &a)
	case hdrRndv, hdrRget, hdrPipe:
		h, payload, err := decodeMatch(frag)
		if err != nil {
			m.bad(src, err)
			return
		}
		if h.typ == hdrPipe && !m.onPipe(src, &h, len(payload)) {
			return
		}
		m.incoming(src, nil, &arrival{h: h, data: payload})
	case hdrAck:
		m.onAck(src, frag)
	case hdrFrag:
		m.onFrag(src, frag)
	case hdrFin:
		m.onFin(src, frag)
	case hdrPFrag:
		m.onPFrag(src, frag)
	case hdrNotice:
		m.onNotice(src, frag)
	default:
		m.bad(src, fmt.Errorf("unknown header type %d", frag[0]))
	}
}

// arrival is a header straight off the wire, its data valid only during the
// callback.
type arrival struct {
	h    matchHdr
	data []byte
}

// copyIn makes an inMsg of an arrival, from the free list when one is
// there (freeMsg).
func (m *module) copyIn(a *arrival, world int) *inMsg {
	msg := m.msgPool.get()
	room := msg.room
	*msg = inMsg{
		typ: a.h.typ, ctx: a.h.ctx, src: int(a.h.src), world: world, tag: int(a.h.tag), seq: a.h.seq,
		msgLen: len(a.data), srcReq: a.h.srcReq, room: room,
	}
	if a.h.typ != hdrMatch {
		msg.msgLen = int(a.h.msgLen)
	}
	n := len(a.data)
	switch {
	case n <= len(msg.small):
		msg.data = msg.small[:n:n]
	case n <= cap(msg.room):
		msg.data = msg.room[:n:n]
	case n <= keptRoom:
		msg.room = make([]byte, max(64, 1<<bits.Len(uint(n-1))))
		msg.data = msg.room[:n:n]
	default:
		msg.data = make([]byte, n)
	}
	copy(msg.data, a.data)
	return msg
}

// keptRoom is the most data room an unexpected message keeps in the free
// list (inMsg.room): a shm eager message (btl_shm_eager_limit, 4160 with
// the header), so that a rank ahead of its peers in a loop allocates
// nothing; the free list then pins at most maxFree times this (4 MiB).
// Longer ones (tcp's and self's eager messages, up to 64 KiB) are
// allocated each time and left to the collector.
const keptRoom = 4 << 10

// freeMsg gives back a message a receive has started from (startRecv,
// which is done with its data when it returns).
func (m *module) freeMsg(msg *inMsg) {
	// startRecv and completeEager are done with msg.data: its room is
	// the next message's.
	*msg = inMsg{room: msg.room}
	m.msgPool.put(msg)
}

// incoming matches one MATCH, RNDV or RGET header from world rank world:
// either a fresh arrival (a) or a copy made earlier (msg).
func (m *module) incoming(world int, msg *inMsg, a *arrival) {
	var cid uint16
	var src int
	var seq uint16
	if a != nil {
		cid, src, seq = a.h.ctx, int(a.h.src), a.h.seq
	} else {
		cid, src, seq = msg.ctx, msg.src, msg.seq
	}
	c := m.comm(cid)
	if c == nil {
		// A peer may create a communicator and send on it before this
		// process has created it: keep the header until AddComm.
		if msg == nil {
			msg, a = m.copyIn(a, world), nil
		}
		m.commsMu.Lock()
		if c = m.comm(cid); c == nil {
			m.orphans[cid] = append(m.orphans[cid], msg)
			m.commsMu.Unlock()
			return
		}
		m.commsMu.Unlock()
	}
	// The source must be a member whose world rank is the sender's: a
	// header may not speak for another process.
	if src < 0 || src >= c.size || c.peers[src].world != world {
		m.bad(world, fmt.Errorf("communicator %d: source rank %d is not world rank %d", cid, src, world))
		return
	}
	// Room for the usual one action on the stack: an append to a nil
	// slice allocated per rendezvous.
	var actBuf [1]action
	acts := actBuf[:0]
	c.mu.Lock()
	p := &c.peers[src]
	if seq != p.expected {
		if msg == nil {
			msg, a = m.copyIn(a, world), nil
		}
		if p.parked == nil {
			p.parked = map[uint16]*inMsg{}
		}
		if _, dup := p.parked[seq]; dup {
			c.mu.Unlock()
			m.bad(world, fmt.Errorf("communicator %d: sequence number %d from rank %d is already waiting its turn", cid, seq, src))
			return
		}
		p.parked[seq] = msg
		p.setQueued()
		c.mu.Unlock()
		m.nOutOfOrder.Add(1)
		return
	}
	acts = m.matchIn(c, src, msg, a, world, acts)
	p.expected++
	for len(p.parked) > 0 {
		next, ok := p.parked[p.expected]
		if !ok {
			break
		}
		delete(p.parked, p.expected)
		acts = m.matchIn(c, src, next, nil, world, acts)
		p.expected++
		if len(p.parked) == 0 {
			p.noteQueued()
		}
	}
	c.mu.Unlock()
	for i := range acts {
		m.runAction(&acts[i])
	}
}

// action is the part of matching a rendezvous that talks to the network,
// done after the matching lock is released.
type action struct {
	r   *recvReq
	typ byte
	// msgLen, srcReq and data describe the message; data is valid until
	// the action has run.
	msgLen int
	srcReq uint64
	data   []byte
	world  int
	src    int
	tag    int
	// stamp is the sender's (RGET, PIPE in its pipelined range; 0: none);
	// fresh: the header matched as it arrived, not from the unexpected
	// queue (rdmaChoice.endToEnd).
	stamp int64
	fresh bool
	seq   uint16
}

// matchIn matches one in-order header against the posted receives, or
// queues it as unexpected. Eager data is copied into the receive buffer here;
// a rendezvous becomes an action. Callers hold c.mu.
func (m *module) matchIn(c *comm, src int, msg *inMsg, a *arrival, world int, acts []action) []action {
	var typ byte
	var tag int
	if a != nil {
		typ, tag = a.h.typ, int(a.h.tag)
	} else {
		typ, tag = msg.typ, msg.tag
	}
	r := c.findPosted(src, tag)
	if r == nil {
		if msg == nil {
			msg = m.copyIn(a, world)
		}
		c.peers[src].unex.pushPeer(msg)
		c.peers[src].setQueued()
		c.unexAll.pushAll(msg)
		m.nUnexpected.Add(1)
		return acts
	}
	c.unpost(r)
	var data []byte
	var msgLen int
	var srcReq uint64
	if a != nil {
		data, msgLen, srcReq = a.data, len(a.data), a.h.srcReq
		if typ != hdrMatch {
			msgLen = int(a.h.msgLen)
		}
	} else {
		data, msgLen, srcReq = msg.data, msg.msgLen, msg.srcReq
	}
	if typ == hdrMatch {
		r.completeEager(src, tag, data)
		if msg != nil {
			// Parked, or kept for a communicator not made yet. A
			// rendezvous's (below) is left to the collector: its action
			// reads the data after the lock is released.
			m.freeMsg(msg)
		}
		return acts
	}
	var stamp int64
	if a != nil {
		stamp = a.h.stamp
	}
	return append(acts, action{r: r, typ: typ, msgLen: msgLen, srcReq: srcReq, data: data, world: world, src: src, tag: tag,
		stamp: stamp, fresh: a != nil, seq: c.peers[src].expected})
}

// tagMatches says whether a receive for want takes a message with tag got:
// AnyTag takes every tag >= 0, never the negative tags gompi reserves.
func tagMatches(want, got int) bool {
	return want == got || (want == pml.AnyTag && got >= 0)
}

// findPosted returns the earliest posted receive that takes a message from
// src with tag: the first fitting one of the peer's receives or of the
// AnySource receives, whichever was posted first. Callers hold c.mu.
func (c *comm) findPosted(src, tag int) *recvReq {
	var best *recvReq
	for r := c.peers[src].posted.head; r != nil; r = r.next {
		if tagMatches(r.tag, tag) {
			best = r
			break
		}
	}
	for r := c.wild.head; r != nil; r = r.next {
		if best != nil && r.postSeq > best.postSeq {
			break
		}
		if tagMatches(r.tag, tag) {
			return r
		}
	}
	return best
}

// findUnexpected returns the earliest unexpected message a receive for
// (src, tag) takes. Callers hold c.mu.
func (c *comm) findUnexpected(src, tag int) *inMsg {
	if src == pml.AnySource {
		for msg := c.unexAll.head; msg != nil; msg = msg.allNext {
			if tagMatches(tag, msg.tag) {
				return msg
			}
		}
		return nil
	}
	for msg := c.peers[src].unex.head; msg != nil; msg = msg.peerNext {
		if tagMatches(tag, msg.tag) {
			return msg
		}
	}
	return nil
}

// takeUnexpected removes msg from the unexpected queues. Callers hold c.mu.
func (c *comm) takeUnexpected(msg *inMsg) {
	p := &c.peers[msg.src]
	p.unex.removePeer(msg)
	if p.unex.head == nil {
		p.noteQueued()
	}
	c.unexAll.removeAll(msg)
}

// post queues r as a posted receive. Callers hold c.mu.
func (c *comm) post(r *recvReq) {
	c.postSeq++
	r.postSeq = c.postSeq
	r.posted = true
	if r.src == pml.AnySource {
		c.wild.push(r)
		c.noteWild()
	} else {
		c.peers[r.src].posted.push(r)
		c.peers[r.src].setQueued()
	}
}

// unpost removes a posted receive. Callers hold c.mu.
func (c *comm) unpost(r *recvReq) {
	if r.src == pml.AnySource {
		c.wild.remove(r)
		c.noteWild()
	} else {
		p := &c.peers[r.src]
		p.posted.remove(r)
		if p.posted.head == nil {
			p.noteQueued()
		}
	}
	r.posted = false
}

// Intrusive lists. Messages sit on two at once (all peers, and their
// peer's), hence two sets of links.

type msgList struct{ head, tail *inMsg }

func (l *msgList) pushAll(msg *inMsg) {
	msg.allPrev, msg.allNext = l.tail, nil
	if l.tail != nil {
		l.tail.allNext = msg
	} else {
		l.head = msg
	}
	l.tail = msg
}

func (l *msgList) removeAll(msg *inMsg) {
	if msg.allPrev != nil {
		msg.allPrev.allNext = msg.allNext
	} else {
		l.head = msg.allNext
	}
	if msg.allNext != nil {
		msg.allNext.allPrev = msg.allPrev
	} else {
		l.tail = msg.allPrev
	}
	msg.allPrev, msg.allNext = nil, nil
}

func (l *msgList) pushPeer(msg *inMsg) {
	msg.peerPrev, msg.peerNext = l.tail, nil
	if l.tail != nil {
		l.tail.peerNext = msg
	} else {
		l.head = msg
	}
	l.tail = msg
}

func (l *msgList) removePeer(msg *inMsg) {
	if msg.peerPrev != nil {
		msg.peerPrev.peerNext = msg.peerNext
	} else {
		l.head = msg.peerNext
	}
	if msg.peerNext != nil {
		msg.peerNext.peerPrev = msg.peerPrev
	} else {
		l.tail = msg.peerPrev
	}
	msg.peerPrev, msg.peerNext = nil, nil
}

type reqList struct{ head, tail *recvReq }

func (l *reqList) push(r *recvReq) {
	r.prev, r.next = l.tail, nil
	if l.tail != nil {
		l.tail.next = r
	} else {
		l.head = r
	}
	l.tail = r
}

func (l *reqList) remove(r *recvReq) {
	if r.prev != nil {
		r.prev.next = r.next
	} else {
		l.head = r.next
	}
	if r.next != nil {
		r.next.prev = r.prev
	} else {
		l.tail = r.prev
	}
	r.prev, r.next = nil, nil
}

// Pending implements pml.PendingCounter: the receives posted on c or under
// way there, and its sends not yet complete (queued, waiting for an ACK or
// FIN, or still streaming their fragments).
func (m *module) Pending(pc *pml.Comm) int {
	c, _ := pc.State.(*comm)
	if c == nil {
		return 0
	}
	n := 0
	c.mu.Lock()
	for r := c.wild.head; r != nil; r = r.next {
		n++
	}
	for i := range c.peers {
		for r := c.peers[i].posted.head; r != nil; r = r.next {
			n++
		}
	}
	c.mu.Unlock()
	// A send may be queued and in the table at once, or in the table and
	// streaming: counted once each.
	sends := map[*sendReq]bool{}
	for i := range c.send {
		sp := &c.send[i]
		sp.mu.Lock()
		for _, r := range sp.queue {
			if !r.Done() {
				sends[r] = true
			}
		}
		sp.mu.Unlock()
	}
	m.reqMu.Lock()
	for _, r := range m.sends {
		if r.c == c && !r.Done() {
			sends[r] = true
		}
	}
	for _, r := range m.recvs {
		if r.c == c {
			n++
		}
	}
	m.reqMu.Unlock()
	m.workMu.Lock()
	for _, r := range m.streams {
		if r.c == c && !r.Done() {
			sends[r] = true
		}
	}
	m.workMu.Unlock()
	m.pipeMu.Lock()
	for _, p := range m.pipes {
		p.mu.Lock()
		if p.r != nil && p.r.c == c {
			n++
		}
		p.mu.Unlock()
	}
	m.pipeMu.Unlock()
	return n + len(sends)
}
