package ob1

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/gompi/gompi/frameworks/btl"
	"github.com/gompi/gompi/frameworks/pml"
	"github.com/gompi/gompi/mca"
	"github.com/gompi/gompi/mpierr"
	"github.com/gompi/gompi/release"
)

// recvReq is a receive.
type recvReq struct {
	pml.Request
	c   *comm
	buf []byte
	// src and tag are as posted (AnySource, AnyTag allowed).
	src, tag int

	// Matching state, under c.mu.
	postSeq    uint64
	posted     bool
	prev, next *recvReq

	// The fields down to back are here, beside the ones every receive
	// writes, not after the rendezvous state: an eager receive touches
	// four cache lines of its request, not five.
	//
	// pooled: a blocking receive's, which it gives back itself once it
	// has read the status. Other receives go back through Wait when they
	// complete eagerly (Recycle); the rest are left to the collector.
	pooled bool
	// dirty: this use went past an eager match (a rendezvous, a cancel, a
	// failure: whatever writes the fields from fragsFrom to guard), so the
	// next use starts from a zeroed request. An eager receive leaves them
	// as it found them, zero, and its next use skips zeroing the whole
	// request, a store a word: the fence of the matching lock's next
	// taking waits for each (newRecvLocked).
	dirty bool
	mod   *module
	// back says the request is back in its communicator's pool.
	back atomic.Uint64

	// fragsFrom is when this receive, offered an RGET, asked for fragments
	// instead (rdmaChoice's clock); 0 for the others, and for messages in
	// the sender's pipelined range, which are timed from the sender's
	// stamp (0: none) instead. fresh: matched as it arrived.
	fragsFrom time.Duration
	stamp     int64
	fresh     bool
	seq       uint16 // the message's sequence number, with a stamp

	// Rendezvous state, once matched. id names the request in FRAGs; got
	// counts the bytes placed, want the bytes to place (the message's
	// length, or less when it is truncated).
	id       uint64
	world    int
	st       pml.Status
	msgLen   int
	want     int
	got      atomic.Int64
	finished atomic.Bool
	// guard keeps FRAG payloads, copied here or steered by a BTL, out of
	// buf once peerLost has failed the receive and handed buf back.
	guard btl.Guard
	// scratch holds, on the fast path, an RGET's description copied out of
	// the ring, then the FIN this receive sends (sendCtl copies it if it
	// has to queue it): local arrays would escape into the transports'
	// interface calls, an allocation per message.
	scratch [64]byte
}

func (r *recvReq) poolMark() *atomic.Uint64 { return &r.back }

// newRecv takes a receive from the module's free list: blocking receives
// and receives completed eagerly come back to it, so that steady traffic
// allocates none.
func (m *module) newRecv(c *comm, buf []byte, src, tag int, pooled bool) *recvReq {
	c.mu.Lock()
	r := m.newRecvLocked(c, buf, src, tag, pooled)
	c.mu.Unlock()
	return r
}

// newRecvLocked is newRecv for callers that hold c.mu: the request comes
// from the communicator's free list, which that lock guards.
func (m *module) newRecvLocked(c *comm, buf []byte, src, tag int, pooled bool) *recvReq {
	r := c.recvFree.get()
	switch {
	case r.mod == m && !r.dirty && r.Done():
		// Back from an eager match, through its Wait: the same engine,
		// hooks, communicator and module; what that use wrote is written
		// again below or by posting it, and the status by the completion.
		r.Reuse()
	default:
		if r.dirty {
			*r = recvReq{}
		}
		r.Init(m.eng, r)
		r.c, r.mod = c, m
	}
	r.buf, r.src, r.tag, r.pooled = buf, src, tag, pooled
	return r
}

// recycle returns a blocking receive's request to the free list once its
// caller has read the status.
func (m *module) recycle(r *recvReq) {
	// Not one whose buffer peerLost took back: a BTL may still hold its
	// guard, which reuse would open again (see btl.Steer).
	if r.pooled && (r.id == 0 || !r.guard.Withdrawn()) {
		// The buffer goes (the pool must not keep the program's memory);
		// the communicator and module stay, the pool's own.
		r.buf = nil
		r.c.recvFree.put(r)
	}
}

// Recycle gives a non-blocking receive back to the free list, once the Wait
// that returned it is done with it (pml.Request.SetRecycler).
func (r *recvReq) Recycle() {
	r.buf = nil
	r.c.recvFree.put(r)
}

// finish completes the request once, whoever gets there first.
func (r *recvReq) finish(err error) {
	if r.finished.Swap(true) {
		return
	}
	// Only the finisher that won writes: a late one may find r reused.
	r.dirty = true
	st := r.st
	if err != nil {
		st.Err = err
	}
	if r.pooled || r.guard.Withdrawn() {
		// A blocking caller gives r back itself (recycle, after this); one
		// whose buffer was taken back may still be in a BTL's hands.
		r.c.recvFree.drop(r)
	} else {
		// Nothing of ob1 refers to r once it is finished (its finisher
		// took it out of the table or pipe that held it): the Wait that
		// returns it may recycle it.
		r.SetRecycler(r)
	}
	r.Complete(st)
}

// Cancel removes a receive that has not matched.
func (r *recvReq) Cancel() bool {
	c := r.c
	c.mu.Lock()
	if !r.posted {
		c.mu.Unlock()
		return false
	}
	c.unpost(r)
	c.mu.Unlock()
	r.st = pml.Status{Source: pml.AnySource, Tag: pml.AnyTag, Cancelled: true}
	r.finish(nil)
	return true
}

// truncErr is the error of a receive whose buffer is shorter than the
// message.
func truncErr(msgLen, bufLen, src, tag int) error {
	return mpierr.Errorf(mpierr.ErrTruncate,
		"mpi: message of %d bytes from rank %d (tag %d) truncated to the %d-byte receive buffer", msgLen, src, tag, bufLen)
}

// completeEager copies an eager message into the buffer and completes the
// receive.
func (r *recvReq) completeEager(src, tag int, data []byte) {
	r.Complete(r.eagerStatus(src, tag, data))
}

// eagerStatus places an eager message's data in r and returns r's status,
// for a completion the caller makes.
func (r *recvReq) eagerStatus(src, tag int, data []byte) pml.Status {
	n, err := r.placeEager(src, tag, data)
	return pml.Status{Source: src, Tag: tag, Count: n, Err: err}
}

// placeEager places an eager message's data in r and returns the count and
// error of its status (CompleteBatched takes them as fields).
func (r *recvReq) placeEager(src, tag int, data []byte) (int, error) {
	n := copy(r.buf, data)
	var err error
	if len(data) > len(r.buf) {
		err = truncErr(len(data), len(r.buf), src, tag)
	}
	if !r.pooled {
		// Nothing of ob1 refers to an eager receive once it completes:
		// the Wait that returns it may recycle it.
		r.SetRecycler(r)
	}
	// Whoever matched r took it out of matching (or it never was in), so
	// nothing else completes it: no need for finish's atomic swap. The
	// status goes straight to the completion, not through r.st (see
	// pml.Status.set).
	return n, err
}

// startRecv matches r with a message taken from the unexpected queue or by a
// matched probe.
func (m *module) startRecv(r *recvReq, msg *inMsg) {
	if msg.typ == hdrMatch {
		r.completeEager(msg.src, msg.tag, msg.data)
		return
	}
	m.runAction(&action{r: r, typ: msg.typ, msgLen: msg.msgLen, srcReq: msg.srcReq, data: msg.data,
		world: msg.world, src: msg.src, tag: msg.tag})
}

// runAction receives a matched rendezvous: it places the first chunk and
// asks for the rest (RNDV), or reads the sender's buffer (RGET).
func (m *module) runAction(a *action) {
	r := a.r
	r.dirty = true
	r.world, r.msgLen = a.world, a.msgLen
	r.want = min(a.msgLen, len(r.buf))
	r.st = pml.Status{Source: a.src, Tag: a.tag, Count: r.want}
	if a.msgLen > len(r.buf) {
		r.st.Err = truncErr(a.msgLen, len(r.buf), a.src, a.tag)
	}
	r.stamp, r.fresh, r.seq = a.stamp, a.fresh, a.seq
	if a.typ == hdrPipe {
		// The first chunk is here; the rest comes unasked (pipe.go).
		copy(r.buf[:r.want], a.data)
		m.pipeMatched(r, a.world, a.srcReq, len(a.data))
		return
	}
	if a.typ == hdrRget {
		if !m.useRDMA {
			m.askRest(r, a.srcReq, 0, 0)
			return
		}
		pipelined := a.msgLen <= m.pipeLim[a.world]
		way, from := m.rdma.wayNow(a.world, r.want, pipelined)
		if way == byFragments {
			if !pipelined {
				r.fragsFrom = from
				m.askRest(r, a.srcReq, 0, 0)
				return
			}
			// The sender's PIPEs are what fragments cost here; this one,
			// asked by ACK, pays a round trip more and is not timed.
			r.fresh = false
			m.askRest(r, a.srcReq, 0, ackPipeline)
			return
		}
		name, desc, _ := decodeRget(a.data) // checked at arrival
		err := m.get(a.world, name, desc, r.buf[:r.want])
		if err == nil {
			switch {
			case r.stamp != 0:
				m.endToEnd(r, byGet)
			case from != 0 && !pipelined:
				m.rdma.note(a.world, r.want, byGet, from, m.rdma.now())
			}
			// The header in r's scratch space: a local array would escape
			// into the transport's interface call, an allocation per RGET.
			m.sendCtl(a.world, hdrFin, putFin(r.scratch[:], a.srcReq))
			r.finish(nil)
			return
		}
		if !errors.Is(err, btl.ErrNoRDMA) {
			// Not a refusal: the read failed. Release the sender and fail.
			m.noteLost(a.world, err)
			var b [finLen]byte
			m.sendCtl(a.world, hdrFin, putFin(b[:], a.srcReq))
			r.st.Count = 0
			r.finish(failedIfLost(fmt.Errorf("ob1: reading a %d-byte message from rank %d: %w", a.msgLen, a.src, err)))
			return
		}
		if m.log.V(mca.VerboseTrace) {
			m.log.Log(mca.VerboseTrace, "RDMA get refused; asking for fragments", "peer", a.world, "bytes", r.want, "error", err)
		}
		// Fragments are the only way from this sender: in its pipelined
		// range, a PIPE saves the round trip.
		m.askRest(r, a.srcReq, 0, ackPipeline)
		return
	}
	// RNDV: the first chunk is here.
	n := copy(r.buf[:r.want], a.data)
	r.got.Store(int64(n))
	m.askRest(r, a.srcReq, len(a.data), 0)
}

// askRest sends the ACK that asks for bytes [from, want), with flags; when
// there are none, it releases the sender and completes the receive.
func (m *module) askRest(r *recvReq, srcReq uint64, from int, flags byte) {
	// The header in r's scratch space, as the FIN's: a local array would
	// escape into the transport's interface call.
	b := r.scratch[:ackLen]
	if from >= r.want {
		m.sendCtl(r.world, hdrAck, putAck(b, ackHdr{srcReq: srcReq, offset: uint64(from), want: uint64(r.want), flags: flags}))
		r.finish(nil)
		return
	}
	m.reqMu.Lock()
	r.id = m.newIDLocked()
	m.recvs[r.id] = r
	m.reqMu.Unlock()
	if m.lost[r.world].Load() {
		m.reqMu.Lock()
		_, mine := m.recvs[r.id]
		delete(m.recvs, r.id)
		m.reqMu.Unlock()
		if mine {
			r.finish(mpierr.Errorf(mpierr.ErrProcFailed, "ob1: rank %d is lost", r.world))
		}
		return
	}
	m.sendCtl(r.world, hdrAck, putAck(b, ackHdr{srcReq: srcReq, dstReq: r.id, offset: uint64(from), want: uint64(r.want), flags: flags}))
}

// get reads a sender's exposed buffer through the RDMA route of the named
// BTL.
func (m *module) get(world int, name, desc, dst []byte) error {
	if !m.useRDMA {
		return btl.ErrNoRDMA
	}
	for _, rt := range m.bml.Peer(world).RDMA {
		if string(name) != rt.Attr.Name || rt.EP.Flags()&btl.FlagGet == 0 {
			continue
		}
		rd, ok := rt.Module.(btl.RDMA)
		if !ok {
			break
		}
		return rd.Get(rt.EP, desc, 0, dst)
	}
	return fmt.Errorf("no %s route with RDMA Get to rank %d: %w", name, world, btl.ErrNoRDMA)
}

// onFrag places one fragment of a rendezvous.
func (m *module) onFrag(src int, frag []byte) {
	f, data, err := decodeFrag(frag)
	if err == nil {
		var r *recvReq
		if r, err = m.fragTarget(src, f, len(data)); err == nil {
			n := 0
			if off := int(f.offset); off < r.want {
				if !r.guard.Enter() {
					return // failed meanwhile: buf is the user's again
				}
				n = copy(r.buf[off:r.want], data)
				r.guard.Exit()
			}
			m.fragArrived(r, f, n)
			return
		}
	}
	if err != errQuiet {
		m.bad(src, err)
	}
}

// fragTarget finds the receive a FRAG of n bytes is for, and checks that
// it fits the message.
func (m *module) fragTarget(src int, f fragHdr, n int) (*recvReq, error) {
	m.reqMu.Lock()
	r := m.recvs[f.dstReq]
	m.reqMu.Unlock()
	if r == nil && m.quiet(f.dstReq) {
		return nil, errQuiet
	}
	if r == nil || r.world != src {
		return nil, fmt.Errorf("FRAG for request %d, which is not a receive from rank %d", f.dstReq, src)
	}
	if int(f.offset)+n > r.msgLen {
		return nil, fmt.Errorf("FRAG of %d bytes at %d overruns a message of %d", n, f.offset, r.msgLen)
	}
	return r, nil
}

// fragArrived counts n bytes of a FRAG in place, and completes the
// receive with the last.
func (m *module) fragArrived(r *recvReq, f fragHdr, n int) {
	if r.got.Add(int64(n)) < int64(r.want) {
		return
	}
	m.reqMu.Lock()
	_, mine := m.recvs[f.dstReq]
	delete(m.recvs, f.dstReq)
	m.reqMu.Unlock()
	if mine {
		switch {
		case r.fragsFrom != 0:
			m.rdma.note(r.world, r.want, byFragments, r.fragsFrom, m.rdma.now())
		case r.stamp != 0:
			m.endToEnd(r, byFragments)
		}
		r.finish(nil)
	}
}

// endToEnd records r, a message in its sender's pipelined range that
// carried a stamp, as received by way now (rdmaChoice.endToEnd).
func (m *module) endToEnd(r *recvReq, way int) {
	if !m.rdma.measured {
		return
	}
	t := time.Now()
	m.rdma.endToEnd(r.world, r.want, way, r.stamp, t.UnixNano(), r.fresh, r.c.cid, r.seq, m.rdma.at(t))
}

// fragSteer lets stream transports (tcp) read a large FRAG's payload
// straight into the receive buffer (btl.Steer): 1 MiB over tcp loopback
// copied it twice, kernel to frame buffer to user buffer.
func (m *module) fragSteer() btl.Steer {
	return btl.Steer{
		HdrLen: fragLen, Min: 32 << 10,
		Where: func(src int, hdr []byte, n int) ([]byte, *btl.Guard) {
			f, _, err := decodeFrag(hdr)
			if err != nil {
				return nil, nil
			}
			r, err := m.fragTarget(src, f, n)
			if err != nil || int(f.offset)+n > r.want {
				return nil, nil // delivered as usual: onFrag reports, or truncates
			}
			return r.buf[f.offset : int(f.offset)+n], &r.guard
		},
		Placed: func(src int, hdr []byte, n int) {
			f, _, err := decodeFrag(hdr)
			if err == nil {
				var r *recvReq
				if r, err = m.fragTarget(src, f, n); err == nil {
					m.fragArrived(r, f, n)
					return
				}
			}
			if err != errQuiet {
				m.bad(src, err)
			}
		},
	}
}

func (m *module) Irecv(pc *pml.Comm, buf []byte, src, tag int) (*pml.Request, error) {
	c := pc.State.(*comm)
	// A receive already queued for src would take src's next message
	// first (fastClear): a window of Irecvs pays this one load after
	// its first.
	if src != pml.AnySource && c.peers[src].queued.Load() == 0 {
		if r := m.irecvInPlace(c, buf, src, tag); r != nil {
			return &r.Request, nil
		}
	}
	c.mu.Lock()
	r := m.newRecvLocked(c, buf, src, tag, false)
	m.postLocked(c, r)
	return &r.Request, nil
}

func (m *module) Recv(pc *pml.Comm, buf []byte, src, tag int) (pml.Envelope, error) {
	c := pc.State.(*comm)
	if err := c.interrupted(tag); err != nil {
		return pml.Envelope{Source: src, Tag: tag}, err
	}
	if src != pml.AnySource {
		for try := 0; ; try++ {
			env, ok, err := m.recvFast(c, buf, src, tag)
			if ok {
				return env, err
			}
			if err != errAhead || try == aheadRetries {
				break
			}
			// The peer's next message went the other way: look there
			// first (recvFast stored the way it found the later one).
			w := c.peers[src].world
			release.Store(&m.viaBTL[w], 1-m.viaBTL[w].Load())
		}
	}
	c.mu.Lock()
	r := m.newRecvLocked(c, buf, src, tag, true)
	m.postLocked(c, r)
	st, err := r.Wait()
	if err != nil && !r.Done() {
		// The wait gave up (the job is lost): take the receive back, so
		// that nothing writes into buf after we return.
		if !r.Cancel() {
			return envelope(st), err // matched meanwhile: leave the request to finish
		}
	}
	m.recycle(r)
	return envelope(st), err
}

func envelope(st pml.Status) pml.Envelope {
	return pml.Envelope{Source: st.Source, Tag: st.Tag, Count: st.Count}
}

// postLocked matches r with the earliest fitting unexpected message, or
// posts it. The caller holds c.mu, which postLocked releases.
func (m *module) postLocked(c *comm, r *recvReq) {
	if err := c.interrupted(r.tag); err != nil {
		c.mu.Unlock()
		r.st = pml.Status{Source: r.src, Tag: r.tag}
		r.finish(err)
		return
	}
	if msg := c.findUnexpected(r.src, r.tag); msg != nil {
		if r.src != pml.AnySource {
			// The peer is ahead of its receives: the next Irecv looks
			// at the ring itself again (irecvInPlace).
			c.peers[r.src].lookAgain()
		}
		c.takeUnexpected(msg)
		c.mu.Unlock()
		m.startRecv(r, msg)
		m.freeMsg(msg)
		return
	}
	if r.src != pml.AnySource && m.anyLost.Load() && m.lost[c.peers[r.src].world].Load() {
		c.mu.Unlock()
		r.st = pml.Status{Source: r.src, Tag: pml.AnyTag}
		r.finish(mpierr.Errorf(mpierr.ErrProcFailed, "ob1: receive from rank %d: the rank is lost", r.src))
		return
	}
	c.post(r)
	c.mu.Unlock()
}

// probe looks for a matching unexpected message; take removes it.
func (c *comm) probe(src, tag int, take bool) (*inMsg, pml.Status, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	msg := c.findUnexpected(src, tag)
	if msg == nil {
		return nil, pml.Status{}, false
	}
	if take {
		c.takeUnexpected(msg)
	}
	return msg, pml.Status{Source: msg.src, Tag: msg.tag, Count: msg.msgLen}, true
}

func (m *module) Iprobe(pc *pml.Comm, src, tag int) (pml.Status, bool, error) {
	c := pc.State.(*comm)
	if _, st, ok := c.probe(src, tag, false); ok {
		return st, true, nil
	}
	m.Progress()
	_, st, ok := c.probe(src, tag, false)
	return st, ok, nil
}

func (m *module) Probe(pc *pml.Comm, src, tag int) (pml.Status, error) {
	c := pc.State.(*comm)
	var st pml.Status
	var ok bool
	err := m.eng.Until(nil, func() bool {
		_, st, ok = c.probe(src, tag, false)
		return ok || c.interrupted(tag) != nil
	})
	if err == nil && !ok {
		err = c.interrupted(tag)
	}
	return st, err
}

func (m *module) Improbe(pc *pml.Comm, src, tag int) (*pml.Message, pml.Status, bool, error) {
	c := pc.State.(*comm)
	msg, st, ok := c.probe(src, tag, true)
	if !ok {
		m.Progress()
		msg, st, ok = c.probe(src, tag, true)
		if !ok {
			return nil, st, false, nil
		}
	}
	return &pml.Message{State: msg, Comm: pc}, st, true, nil
}

func (m *module) Mprobe(pc *pml.Comm, src, tag int) (*pml.Message, pml.Status, error) {
	c := pc.State.(*comm)
	var msg *inMsg
	var st pml.Status
	err := m.eng.Until(nil, func() bool {
		var ok bool
		msg, st, ok = c.probe(src, tag, true)
		return ok || c.interrupted(tag) != nil
	})
	if err == nil && msg == nil {
		err = c.interrupted(tag)
	}
	if err != nil {
		return nil, st, err
	}
	return &pml.Message{State: msg, Comm: pc}, st, nil
}

// takeMessage claims a matched-probe message for one receive.
func takeMessage(mm *pml.Message) (*inMsg, *comm, error) {
	msg, _ := mm.State.(*inMsg)
	if msg == nil || mm.Comm == nil {
		return nil, nil, mpierr.Errorf(mpierr.ErrRequest, "mpi: the message was already received (a matched probe's message is received once)")
	}
	mm.State = nil
	return msg, mm.Comm.State.(*comm), nil
}

func (m *module) Imrecv(buf []byte, mm *pml.Message) (*pml.Request, error) {
	msg, c, err := takeMessage(mm)
	if err != nil {
		return nil, err
	}
	r := m.newRecv(c, buf, msg.src, msg.tag, false)
	m.startRecv(r, msg)
	m.freeMsg(msg)
	return &r.Request, nil
}

func (m *module) Mrecv(buf []byte, mm *pml.Message) (pml.Status, error) {
	msg, c, err := takeMessage(mm)
	if err != nil {
		return pml.Status{}, err
	}
	r := m.newRecv(c, buf, msg.src, msg.tag, true)
	m.startRecv(r, msg)
	m.freeMsg(msg)
	st, err := r.Wait()
	if err == nil || r.Done() {
		m.recycle(r)
	}
	return st, err
}

// The receive fast path. A blocking receive from one peer, when nothing
// from that peer waits in the unexpected queue or out of order and no
// earlier receive is posted that could take its message, looks at the
// peer's next message itself, on the LLP slot and the shm ring, and when it
// is the message it waits for (the peer's next sequence number, this
// communicator, a fitting tag) copies the payload into the buffer and frees
// the slot: no request, no queue, no callback. Any other case (a message
// for another receive, a rendezvous, an unexpected message, a lost peer, a
// long wait) falls back to the normal path, which posts a request: its
// order is then the same as if the receive had been posted at once, since
// the fast path takes only the message that such a request would have
// matched first.

// fastPathTurn says which of a peer's paths turn i of the fast path polls:
// each path it has on every turn, except that with both, the one its last
// message did not take (the LLP when viaBTL) only every fastOtherPathEvery
// turns and on the last turn (a fast path of one turn, where ranks share
// cores, looks at both).
func fastPathTurn(hasLLP, hasBTL, viaBTL bool, i int, last bool) (pollLLP, pollBTL bool) {
	other := last || i%fastOtherPathEvery == 0
	both := hasLLP && hasBTL
	return hasLLP && (!both || !viaBTL || other), hasBTL && (!both || viaBTL || other)
}

// fastPolls bounds the fast path's polling before it falls back to the
// normal wait, which progresses everything (other peers, the transports'
// liveness checks) and polls on, or yields and sleeps by the policy. The
// fast path itself does not progress the receiving side: what Progress
// delivered from this peer would go to the unexpected queue (a copy and an
// allocation) and send this receive down the normal path. It pushes this
// process's queued output every fastPushEvery polls, which the peer may be
// waiting for before it sends.
// When the peer's BTL route cannot be peeked (m.unpeeked), the fast path
// progresses those BTLs every fastOtherEvery polls and falls back as soon as
// they deliver anything: a 4 KiB message over tcp beside the LLP waited out
// all fastPolls (~40 µs) before. Not every poll: a tcp progress is a read
// system call, longer than an LLP message's whole trip.
//
// With both an LLP and a peekable BTL route to the peer, a turn polls only
// the one its last message came through (viaBTL), and the other every
// fastOtherPathEvery turns: a ping-pong's messages take one path, and a
// turn that reads two lines notices its message half a turn later on
// average (a plain shm ping-pong was 10 ns faster than the LLP's once both
// paths were inlined).
const (
	fastPolls          = 1 << 12
	fastPushEvery      = 64
	fastOtherEvery     = 256
	fastOtherPathEvery = 8
)

func (m *module) recvFast(c *comm, buf []byte, src, tag int) (pml.Envelope, bool, error) {
	w := c.peers[src].world
	lp := m.peekOf[w]
	bp, ep := m.peekBTL[w].p, m.peekBTL[w].ep
	if lp == nil && bp == nil {
		return pml.Envelope{}, false, nil
	}
	if !m.fastClear(c, src, w) {
		return pml.Envelope{}, false, nil
	}
	others := m.unpeeked[w]
	polls := fastPolls
	if m.eng.Yields() {
		// Ranks share cores: the peer is likely not running; look once.
		polls = 1
	}
	viaBTL := lp != nil && bp != nil && m.viaBTL[w].Load() == 1
	for i := 1; i <= polls; i++ {
		pollLLP, pollBTL := fastPathTurn(lp != nil, bp != nil, viaBTL, i, i == polls)
		if pollLLP {
			if msg, ok := lp.Peek(w); ok {
				if viaBTL {
					release.Store(&m.viaBTL[w], 0)
				}
				env, taken, err := m.takeInPlace(c, src, tag, buf, msg)
				lp.Done(w, taken)
				return env, taken, err
			}
		}
		if pollBTL {
			if t, frag, ok := bp.Peek(ep); ok {
				if lp != nil && !viaBTL {
					release.Store(&m.viaBTL[w], 1)
				}
				if t == tagOf(hdrRget) || t == tagOf(hdrPipe) {
					return m.takeRndvInPlace(c, src, tag, buf, m.peekBTL[w], frag) // pipe.go
				}
				var env pml.Envelope
				var taken bool
				var err error
				if t == tagOf(hdrMatch) {
					env, taken, err = m.takeInPlace(c, src, tag, buf, frag)
				}
				bp.Done(ep, taken)
				return env, taken, err
			}
		}
		if i%fastPushEvery == 0 {
			if m.work.Load() != 0 {
				m.pushWork()
			}
			if m.lost[w].Load() {
				return pml.Envelope{}, false, nil
			}
		}
		if others != nil && i%fastOtherEvery == 0 {
			for _, b := range others {
				if b.Progress() > 0 {
					// What arrived went through matching: the normal
					// path finds it (or waits on, for another message).
					// Wake whoever sleeps on what else arrived, as the
					// engine's own progress does.
					m.eng.Wake()
					return pml.Envelope{}, false, nil
				}
			}
		}
	}
	return pml.Envelope{}, false, nil
}

// An Irecv from one peer takes one look at the peer's next message, as a
// blocking receive does, and when it is there and is the one the receive
// takes, completes at once (eager) or starts its protocol (rendezvous): on
// a stream of messages that arrive before their receives, Progress (a
// posted receive's wait) would deliver the stream's later messages to the
// unexpected queue, a copy and an allocation each; an Irecv + Wait on
// 1 KiB messages cost 5× a Recv so.
// A look that finds nothing reads a line the sender writes, which a window
// of receives posted before their messages would pay for nothing (osu_bw's
// rate at 1 B lost 4–5 %), so after a miss a peer's Irecvs look only every
// irecvLookEvery-th time, until a posted receive finds its message already
// unexpected (postLocked: the peer is ahead again) or a look hits.
const irecvLookEvery = 16

// irecvInPlace is that look: a request, complete for an eager message and
// started for a rendezvous, or nil for the normal path.
func (m *module) irecvInPlace(c *comm, buf []byte, src, tag int) *recvReq {
	p := &c.peers[src]
	w := p.world
	lp := m.peekOf[w]
	bp, ep := m.peekBTL[w].p, m.peekBTL[w].ep
	if lp == nil && bp == nil || !m.fastClear(c, src, w) {
		return nil
	}
	// Plain stores, no read-modify-write: a locked add on every Irecv of
	// a window cost osu_bw's rate 10 % at 8 B. Concurrent Irecvs may lose
	// a count; it is a hint.
	if n := p.lookSkips.Load(); n != 0 {
		release.Store(&p.lookSkips, n+1)
		if (n+1)%irecvLookEvery != 0 {
			return nil
		}
	}
	if c.interrupted(tag) != nil {
		return nil
	}
	viaBTL := lp != nil && bp != nil && m.viaBTL[w].Load() == 1
	pollLLP, pollBTL := fastPathTurn(lp != nil, bp != nil, viaBTL, 1, true)
	var env pml.Envelope
	var taken bool
	var err error
	if pollLLP {
		if msg, ok := lp.Peek(w); ok {
			env, taken, err = m.takeInPlace(c, src, tag, buf, msg)
			lp.Done(w, taken)
		}
	}
	if pollBTL && !taken {
		if t, frag, ok := bp.Peek(ep); ok {
			switch t {
			case tagOf(hdrMatch):
				env, taken, err = m.takeInPlace(c, src, tag, buf, frag)
				bp.Done(ep, taken)
			case tagOf(hdrRget), tagOf(hdrPipe):
				// A rendezvous: its protocol starts here, as the
				// match in Progress would start it; the request
				// completes when the data is in.
				if r := m.startRndvInPlace(c, src, tag, buf, m.peekBTL[w], frag, false); r != nil {
					p.lookAgain()
					return r
				}
			default:
				bp.Done(ep, false)
			}
		}
	}
	if !taken {
		if err != errAhead && p.lookSkips.Load() == 0 {
			release.Store(&p.lookSkips, 1)
		}
		return nil
	}
	p.lookAgain()
	r := m.newRecv(c, buf, src, tag, false)
	r.SetRecycler(r)
	r.Complete(pml.Status{Source: env.Source, Tag: env.Tag, Count: env.Count, Err: err})
	return r
}

// fastClear reports whether the fast path may wait for src's next message:
// nothing of src's is unexpected or parked, and no receive that could take
// it is posted. It reads the words matching keeps for it (noteQueued,
// noteWild), not the lists: no lock. What this goroutine posted before is
// there; what another posts meanwhile is concurrent with this receive,
// which MPI lets match in either order, and takeInPlace checks the
// sequence number and the queues under the lock before it takes anything.
func (m *module) fastClear(c *comm, src, w int) bool {
	return c.peers[src].queued.Load() == 0 && c.wildPosted.Load() == 0 && !m.lost[w].Load()
}

// errAhead is takeInPlace's answer for a message of the receive's
// communicator and peer whose sequence number is not the next one: the
// peer's next message went the other way (the LLP or the ring), and this
// one overtook it. Not an error to report: the receive looks the other way
// (Recv, irecvInPlace) rather than leaving to the normal path, whose
// progress would move the rest of a stream to the unexpected queue (a
// stream of 8-byte Sends, which alternate between a full LLP and the ring,
// was received at 0.16 µs a message against 0.08 without the LLP).
var errAhead = errors.New("ob1: a later message of the peer")

func aheadErr(ahead bool) error {
	if ahead {
		return errAhead
	}
	return nil
}

// aheadRetries bounds how often a blocking receive turns to the other path
// after finding a later message on one: the next is on the other, or in
// flight there.
const aheadRetries = 2

// takeInPlace matches frag, the next message from src, with a blocking
// receive when it is the one the receive takes: a MATCH header on this
// communicator with src's next sequence number and a fitting tag, and
// nothing of src's is waiting in the queues. It then copies the payload
// into buf and counts the sequence number; otherwise it leaves everything
// as it was.
func (m *module) takeInPlace(c *comm, src, tag int, buf, frag []byte) (pml.Envelope, bool, error) {
	if len(frag) < matchLen || frag[0] != hdrMatch {
		return pml.Envelope{}, false, nil
	}
	// The MATCH fields are read here rather than by decodeMatch, whose
	// call and 40-byte result cost this path 23 ns of its ~100
	// (BenchmarkCostSendRecv).
	ctx := le.Uint16(frag[2:])
	hsrc := int32(le.Uint32(frag[4:]))
	htag := int(int32(le.Uint32(frag[8:])))
	seq := le.Uint16(frag[12:])
	if ctx != c.cid || int(hsrc) != src || !tagMatches(tag, htag) {
		return pml.Envelope{}, false, nil
	}
	c.mu.Lock()
	p := &c.peers[src]
	if seq != p.expected || p.unex.head != nil || len(p.parked) != 0 {
		ahead := seq != p.expected && p.unex.head == nil && len(p.parked) == 0
		c.mu.Unlock()
		return pml.Envelope{}, false, aheadErr(ahead)
	}
	p.expected++
	c.mu.Unlock()
	data := frag[matchLen:]
	n := copy(buf, data)
	env := pml.Envelope{Source: src, Tag: htag, Count: n}
	if len(data) > len(buf) {
		return env, true, truncErr(len(data), len(buf), src, htag)
	}
	return env, true, nil
}
