package ob1

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/gompi/gompi/frameworks/btl"
	"github.com/gompi/gompi/frameworks/llp"
	"github.com/gompi/gompi/frameworks/pml"
	"github.com/gompi/gompi/mpierr"
)

// sendReq is a send that did not complete at once: a non-blocking send, a
// rendezvous, or an eager send that found no room.
type sendReq struct {
	pml.Request
	c     *comm
	sp    *sendPeer
	buf   []byte
	dst   int // communicator rank
	world int
	tag   int
	seq   uint16
	// proto is the header type of the first fragment: MATCH, RNDV or RGET.
	proto byte
	// id names the request in the table while a rendezvous waits for its
	// ACK or FIN. rget is the RGET's description of buf; buf stays
	// referenced by the request until FIN, so the peer reads live memory.
	id   uint64
	rget []byte
	// rgetBuf holds rget when it fits (a BTL name and a CMA description
	// do), saving an allocation per message.
	rgetBuf [48]byte
	// stamp is when the send began (wall clock, ns), for a PIPE or RGET in
	// the pipelined range whose receiver measures (rdmachoice.go); else 0.
	// offer numbers an RGET offered there (pipeOffers); else 0.
	stamp int64
	offer uint32

	// After the ACK: bytes [off, want) go as FRAGs to dstReq. Only one
	// goroutine at a time pushes a request's fragments (the ACK callback,
	// then the module's single pusher).
	dstReq    uint64
	off, want int
	fhdr      [fragLen]byte

	finished atomic.Bool
	// firstSent: the first fragment of a rendezvous went out (Interrupt
	// fails only those: a queued one keeps the pair's sequence).
	firstSent atomic.Bool
	mod       *module
}

// Recycle gives an eager send back to the free list, once the Wait that
// returned it is done with it (pml.Request.SetRecycler).
func (r *sendReq) Recycle() {
	m := r.mod
	r.buf, r.c, r.sp, r.mod = nil, nil, nil, nil
	m.sendPool.put(r)
}

func (r *sendReq) finish(err error) {
	if r.finished.Swap(true) {
		return
	}
	r.Complete(pml.Status{Source: r.dst, Tag: r.tag, Err: err})
}

func lostErr(dst, world int) error {
	return mpierr.Errorf(mpierr.ErrProcFailed, "ob1: send to rank %d: world rank %d is lost", dst, world)
}

// sendErr is a transport's error for a send to rank dst.
func sendErr(dst int, err error) error {
	return failedIfLost(fmt.Errorf("ob1: send to rank %d: %w", dst, err))
}

// failedIfLost tags err, a transport's error, with ErrProcFailed when it
// says the peer is lost: the operation that finds a peer lost fails as the
// later ones on it do (lostErr, peerLost), not with the transport's
// ErrProcAborted, for under --enable-recovery the first operation to meet a
// death is as much a process failure as the rest.
func failedIfLost(err error) error {
	if errors.Is(err, btl.ErrPeerLost) {
		return mpierr.Wrap(mpierr.ErrProcFailed, err)
	}
	return err
}

// Send is the blocking send, and the only path that tries the LLP.
func (m *module) Send(pc *pml.Comm, buf []byte, dst, tag int, mode pml.SendMode) error {
	c := pc.State.(*comm)
	if err := c.interrupted(tag); err != nil {
		return err
	}
	w := c.send[dst].world
	sp := &c.send[dst]
	sp.mu.Lock()
	// Both immediate paths need an empty queue: a message may not go
	// before one queued earlier (it would only be parked at the receiver).
	if mode != pml.Synchronous && len(sp.queue) == 0 {
		// The LLP, as in Fujitsu's ob1: the sequence number is the pair's
		// next one, and it is taken only if the LLP takes the message. The
		// send lock stays held across the attempt and the fall-back, so no
		// other message to this peer can take a number in between.
		// Not to a peer the BTLs found lost: the LLP cannot tell, and
		// the send must fail rather than vanish into a slot.
		if l := m.llpOf[w]; l != nil && len(buf) < m.llpMax && !m.lost[w].Load() {
			err := l.Send(w, putMatch(sp.hdr[:], hdrMatch, c.cid, c.rank, tag, sp.seq), buf)
			if err == nil {
				sp.seq++
				sp.llpHits++
				sp.mu.Unlock()
				return nil
			}
			if err != llp.ErrNotAvailable && !errors.Is(err, llp.ErrNotAvailable) {
				sp.mu.Unlock()
				m.noteLost(w, err)
				return failedIfLost(fmt.Errorf("ob1: send to rank %d by the llp: %w", dst, err))
			}
			m.nLLPFallbacks.Add(1)
		}
		// Eager, straight into the transport, still with no request.
		if mode != pml.Buffered {
			route := m.eagerRoute(w, sp, len(buf))
			if len(buf) <= route.Attr.EagerLimit-matchLen && !m.lost[w].Load() {
				err := sp.sendLocked(route, tagOf(hdrMatch), putMatch(sp.hdr[:], hdrMatch, c.cid, c.rank, tag, sp.seq), buf)
				if err == nil {
					sp.seq++
					sp.eager++
					sp.mu.Unlock()
					return nil
				}
				if !isWouldBlock(err) {
					sp.mu.Unlock()
					m.noteLost(w, err)
					return sendErr(dst, err)
				}
			}
		}
	}
	if mode == pml.Buffered {
		err := m.bufferedLocked(c, sp, buf, dst, w, tag)
		sp.mu.Unlock()
		return err
	}
	r := m.newSend(c, sp, buf, dst, w, tag, mode)
	m.start(sp, r)
	sp.mu.Unlock()
	_, err := r.Wait()
	return err
}

// bufferedLocked copies buf into the attached buffer and starts sending the
// copy; the copy's space is freed when that send completes. Callers hold
// sp.mu.
func (m *module) bufferedLocked(c *comm, sp *sendPeer, buf []byte, dst, w, tag int) error {
	cp, release, err := m.bsend.Copy(buf)
	if err != nil {
		return err
	}
	r := m.newSend(c, sp, cp, dst, w, tag, pml.Standard)
	r.OnComplete(release)
	m.start(sp, r)
	return nil
}

func (m *module) Isend(pc *pml.Comm, buf []byte, dst, tag int, mode pml.SendMode) (*pml.Request, error) {
	c := pc.State.(*comm)
	if err := c.interrupted(tag); err != nil {
		return nil, err
	}
	w := c.send[dst].world
	sp := &c.send[dst]
	if mode == pml.Buffered {
		// Complete once copied, as MPI_Ibsend.
		sp.mu.Lock()
		err := m.bufferedLocked(c, sp, buf, dst, w, tag)
		sp.mu.Unlock()
		if err != nil {
			return nil, err
		}
		done := new(pml.Request)
		done.Init(m.eng, nil)
		done.Complete(pml.Status{Source: dst, Tag: tag})
		return done, nil
	}
	sp.mu.Lock()
	if mode != pml.Synchronous && len(sp.queue) == 0 && !m.lost[w].Load() {
		// Immediate send (ob1's sendi): a small message that the transport
		// takes at once needs no send request, only a completed one.
		route := m.eagerRoute(w, sp, len(buf))
		if len(buf) <= route.Attr.EagerLimit-matchLen {
			err := sp.sendLocked(route, tagOf(hdrMatch), putMatch(sp.hdr[:], hdrMatch, c.cid, c.rank, tag, sp.seq), buf)
			if err == nil {
				sp.seq++
				sp.eager++
				d := sp.doneFree.get()
				sp.mu.Unlock()
				d.sp = sp
				d.InitDone(m.eng, pml.Status{Source: dst, Tag: tag}, d)
				return &d.Request, nil
			}
			if !isWouldBlock(err) {
				sp.mu.Unlock()
				m.noteLost(w, err)
				return nil, sendErr(dst, err)
			}
		}
	}
	r := m.newSend(c, sp, buf, dst, w, tag, mode)
	m.start(sp, r)
	sp.mu.Unlock()
	return &r.Request, nil
}

// doneReq is the request of a send that completed before Isend returned.
type doneReq struct {
	pml.Request
	sp   *sendPeer     // whose pool it goes back to
	back atomic.Uint64 // it is back in the pool
}

func (d *doneReq) poolMark() *atomic.Uint64 { return &d.back }

// Recycle gives it back to the free list once its Wait has returned.
func (d *doneReq) Recycle() {
	sp := d.sp
	d.sp = nil
	sp.doneFree.put(d)
}

// newSend makes a send request and chooses its protocol.
func (m *module) newSend(c *comm, sp *sendPeer, buf []byte, dst, w, tag int, mode pml.SendMode) *sendReq {
	// From the free list: eager sends come back to it through Wait.
	r := m.sendPool.get()
	*r = sendReq{c: c, sp: sp, buf: buf, dst: dst, world: w, tag: tag, mod: m}
	r.Init(m.eng, nil)
	route := &m.bml.Peer(w).Send[0]
	n := len(buf)
	pipe, stamp := true, false
	if mode != pml.Synchronous && n > route.Attr.EagerLimit-matchLen && n <= route.Attr.PipelineLimit {
		pipe, stamp, r.offer = m.pipelined(w, n)
	}
	switch {
	case mode != pml.Synchronous && n <= route.Attr.EagerLimit-matchLen:
		r.proto = hdrMatch
	case mode != pml.Synchronous && n <= route.Attr.PipelineLimit && pipe:
		// Eager in several fragments (pipe.go); the number names it in
		// its PFRAGs, and no table holds it: no answer comes. Otherwise
		// an RGET offer, which the receiver answers with its choice
		// (rdmachoice.go).
		r.proto = hdrPipe
		r.dstReq = m.pipeID.Add(1)
	case n > route.Attr.EagerLimit-rndvLen && m.useRDMA:
		r.proto = hdrRndv
		if rd, ok := m.rdmaRoute(w); ok {
			var p []byte
			if ae, ok := rd.Module.(btl.AppendExposer); ok {
				p = ae.AppendExpose(rgetName(r.rgetBuf[:0], rd.Attr.Name), buf)
			} else {
				p = rgetPayload(r.rgetBuf[:0], rd.Attr.Name, rd.Module.(btl.RDMA).Expose(buf))
			}
			if rndvLen+stampLen+len(p) <= route.Attr.EagerLimit {
				r.proto, r.rget = hdrRget, p
			}
		}
	default:
		r.proto = hdrRndv
	}
	if (stamp || (r.proto == hdrRget && mode == pml.Synchronous)) && n <= route.Attr.PipelineLimit && m.rdma.measured {
		r.stamp = time.Now().UnixNano()
	}
	if r.proto != hdrMatch && r.proto != hdrPipe {
		m.reqMu.Lock()
		r.id = m.newIDLocked()
		m.sends[r.id] = r
		m.reqMu.Unlock()
	}
	return r
}

// eagerRoute picks the route of an eager message to world. When several
// BTLs carry the peer's traffic (equal exclusivity), eager messages take them
// in turn, as Open MPI's BML does; messages of one peer then arrive out of
// order, and the receiver's sequence numbers put them back. Only routes whose
// eager limit fits the message are used. Callers hold sp.mu.
func (m *module) eagerRoute(world int, sp *sendPeer, n int) *btl.Route {
	routes := m.bml.Peer(world).Send
	if len(routes) == 1 {
		return &routes[0]
	}
	for range routes {
		sp.rr++
		if rt := &routes[sp.rr%uint32(len(routes))]; n <= rt.Attr.EagerLimit-matchLen {
			return rt
		}
	}
	return &routes[0]
}

// rdmaRoute returns the first route to world that offers RDMA Get.
func (m *module) rdmaRoute(world int) (*btl.Route, bool) {
	p := m.bml.Peer(world)
	for i := range p.RDMA {
		rt := &p.RDMA[i]
		if rt.EP.Flags()&btl.FlagGet == 0 {
			continue
		}
		if _, ok := rt.Module.(btl.RDMA); ok {
			return rt, true
		}
	}
	return nil, false
}

// start gives r the pair's next sequence number and sends its first
// fragment, or queues it behind the pair's queued sends when there are some
// or the transport has no room. Callers hold sp.mu.
func (m *module) start(sp *sendPeer, r *sendReq) {
	r.seq = sp.seq
	sp.seq++
	if len(sp.queue) == 0 && m.first(r) {
		return
	}
	sp.queue = append(sp.queue, r)
	if !sp.inQueued {
		sp.inQueued = true
		m.workMu.Lock()
		m.queued = append(m.queued, sp)
		m.updateWork()
		m.workMu.Unlock()
	}
}

// drainQueue sends the queued first fragments of a pair, in order, until
// the transport has no room. Callers hold sp.mu.
func (m *module) drainQueue(sp *sendPeer) int {
	n := 0
	for len(sp.queue) > 0 {
		r := sp.queue[0]
		if !r.finished.Load() && !m.first(r) {
			break
		}
		sp.queue[0] = nil
		sp.queue = sp.queue[1:]
		n++
	}
	if len(sp.queue) == 0 {
		sp.queue = nil
	}
	return n
}

// first sends r's first fragment. It reports false when the transport has no
// room (try again later); otherwise r is sent, or failed. Callers hold
// r.sp.mu, whose scratch space holds the header.
func (m *module) first(r *sendReq) bool {
	if m.lost[r.world].Load() {
		m.unregister(r)
		r.finish(lostErr(r.dst, r.world))
		return true
	}
	route := &m.bml.Peer(r.world).Send[0]
	hb := r.sp.hdr[:]
	c := r.c
	var err error
	switch r.proto {
	case hdrMatch:
		route = m.eagerRoute(r.world, r.sp, len(r.buf))
		err = r.sp.sendLocked(route, tagOf(hdrMatch), putMatch(hb, hdrMatch, c.cid, c.rank, r.tag, r.seq), r.buf)
		if err == nil {
			r.sp.eager++
			// Sent: ob1 no longer refers to r (its queue slot, if any, is
			// cleared by the caller), so its Wait may recycle it.
			r.SetRecycler(r)
			r.finish(nil)
			return true
		}
	case hdrPipe:
		h := putRndv(hb, hdrPipe, c.cid, c.rank, r.tag, r.seq, len(r.buf), r.dstReq)
		if r.stamp != 0 {
			h = putStamp(h, r.stamp)
		}
		chunk := min(len(r.buf), route.Attr.MaxSendSize-len(h))
		err = r.sp.sendLocked(route, tagOf(hdrPipe), h, r.buf[:chunk])
		if err == nil {
			m.nPipe.Add(1)
			r.firstSent.Store(true)
			r.off, r.want = chunk, len(r.buf)
			m.pushPipe(r, route)
			return true
		}
	case hdrRget:
		h := putRndv(hb, hdrRget, c.cid, c.rank, r.tag, r.seq, len(r.buf), r.id)
		if r.stamp != 0 {
			h = putStamp(h, r.stamp)
		}
		err = r.sp.sendLocked(route, tagOf(hdrRget), h, r.rget)
		if err == nil {
			m.nRget.Add(1)
		}
	default:
		chunk := max(0, min(len(r.buf), route.Attr.RndvEagerLimit-rndvLen))
		err = r.sp.sendLocked(route, tagOf(hdrRndv), putRndv(hb, hdrRndv, c.cid, c.rank, r.tag, r.seq, len(r.buf), r.id), r.buf[:chunk])
		if err == nil {
			m.nRndv.Add(1)
		}
	}
	if isWouldBlock(err) {
		return false
	}
	if err == nil {
		r.firstSent.Store(true)
		if x := c.intr.Load(); x.errFor(r.tag) != nil && m.unregister(r) {
			// Interrupted while it was queued: fail it now that its
			// header holds its place in the sequence.
			r.finish(x.errFor(r.tag))
		}
	}
	if err != nil {
		m.noteLost(r.world, err)
		m.unregister(r)
		r.finish(sendErr(r.dst, err))
	}
	// A rendezvous now waits in the table for its ACK or FIN.
	return true
}

// unregister takes a rendezvous out of the table; it reports whether it was
// there (whoever takes it out completes it).
func (m *module) unregister(r *sendReq) bool {
	if r.id == 0 {
		return true
	}
	m.reqMu.Lock()
	_, ok := m.sends[r.id]
	delete(m.sends, r.id)
	m.reqMu.Unlock()
	return ok
}

// lookupSend finds the rendezvous a control message from world names.
func (m *module) lookupSend(world int, id uint64, what string) *sendReq {
	m.reqMu.Lock()
	r := m.sends[id]
	m.reqMu.Unlock()
	if r == nil && m.quiet(id) {
		return nil // interrupted: its receiver did not know yet
	}
	if r == nil || r.world != world {
		m.bad(world, fmt.Errorf("%s for request %d, which is not a send to rank %d", what, id, world))
		return nil
	}
	return r
}

// onAck: the receiver matched; it wants bytes [offset, want) as FRAGs, or
// nothing more.
func (m *module) onAck(src int, frag []byte) {
	a, err := decodeAck(frag)
	if err != nil {
		m.bad(src, err)
		return
	}
	r := m.lookupSend(src, a.srcReq, "ACK")
	if r == nil {
		return
	}
	if a.want > uint64(len(r.buf)) {
		m.bad(src, fmt.Errorf("ACK asks for %d bytes of a %d-byte message", a.want, len(r.buf)))
		return
	}
	if a.offset >= a.want {
		if m.unregister(r) {
			// Out of the table with nothing left to send: its Wait may
			// recycle it (a synchronous send of a small message ends so).
			r.SetRecycler(r)
			r.finish(nil)
		}
		return
	}
	if r.proto == hdrRget {
		m.nRgetFallbacks.Add(1)
		if r.offer != 0 {
			m.heard(src, len(r.buf), r.offer, a.flags&ackPipeline != 0)
		}
	}
	r.dstReq, r.off, r.want = a.dstReq, int(a.offset), int(a.want)
	if _, finished := m.pushStream(r); !finished {
		m.workMu.Lock()
		m.streams = append(m.streams, r)
		m.updateWork()
		m.workMu.Unlock()
	} else {
		m.endStream(r)
	}
}

// onFin: the receiver has read an RGET's buffer.
func (m *module) onFin(src int, frag []byte) {
	id, err := decodeFin(frag)
	if err != nil {
		m.bad(src, err)
		return
	}
	if r := m.lookupSend(src, id, "FIN"); r != nil && m.unregister(r) {
		if r.offer != 0 {
			m.heard(src, len(r.buf), r.offer, false)
		}
		// Out of the table, its buffer read: nothing of ob1 refers to r any
		// more, so its Wait may recycle it (a fresh request per RGET cost
		// the allocator and the page faults of a growing heap more than
		// the rest of the software path).
		r.SetRecycler(r)
		r.finish(nil)
	}
}

// pushPipe sends the PFRAGs of a pipelined message after its header, at
// once, as far as the transport has room; the rest goes to the streams that
// Progress pushes. Callers hold r.sp.mu (what they send to the peer after r
// may overtake r's PFRAGs: the receiver places them by their offset).
func (m *module) pushPipe(r *sendReq, route *btl.Route) {
	room := max(1, route.Attr.MaxSendSize-fragLen)
	for r.off < r.want {
		end := min(r.off+room, r.want)
		err := r.sp.sendLocked(route, tagOf(hdrPFrag), putFragOf(r.fhdr[:], hdrPFrag, fragHdr{r.dstReq, uint64(r.off)}), r.buf[r.off:end])
		if isWouldBlock(err) {
			m.workMu.Lock()
			m.streams = append(m.streams, r)
			m.updateWork()
			m.workMu.Unlock()
			return
		}
		if err != nil {
			m.noteLost(r.world, err)
			r.finish(sendErr(r.dst, err))
			return
		}
		r.off = end
	}
	// All in the transport: nothing of ob1 refers to r any more, so its
	// Wait may recycle it (as an eager send's).
	r.SetRecycler(r)
	r.finish(nil)
}

// pushStream sends up to pipeline FRAGs of r. It reports how many it sent
// and whether r is finished (all handed to the transport, or failed).
// When all went, the caller ends r (endStream) once r is out of the
// module's list of streams: its Wait may then recycle it, and a recycled
// r may come back to that list as another message.
func (m *module) pushStream(r *sendReq) (sent int, finished bool) {
	if r.finished.Load() {
		return 0, true
	}
	route := &m.bml.Peer(r.world).Send[0]
	room := max(1, route.Attr.MaxSendSize-fragLen)
	typ := byte(hdrFrag)
	if r.proto == hdrPipe {
		typ = hdrPFrag // dstReq holds our own number
	}
	for sent < m.pipeline && r.off < r.want {
		end := min(r.off+room, r.want)
		err := route.Module.Send(route.EP, tagOf(typ), putFragOf(r.fhdr[:], typ, fragHdr{r.dstReq, uint64(r.off)}), r.buf[r.off:end])
		if isWouldBlock(err) {
			return sent, false
		}
		if err != nil {
			m.noteLost(r.world, err)
			if m.unregister(r) {
				r.finish(sendErr(r.dst, err))
			}
			return sent, true
		}
		r.off = end
		sent++
	}
	return sent, r.off >= r.want
}

// endStream ends a stream that pushStream reports finished, out of the
// module's list of streams: nothing of ob1 refers to r any more unless it
// failed (finished already), so its Wait may recycle it.
func (m *module) endStream(r *sendReq) {
	if !r.finished.Load() && m.unregister(r) {
		r.SetRecycler(r)
		r.finish(nil)
	}
}
