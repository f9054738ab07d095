package ob1

import (
	"fmt"
	"sync"

	"github.com/gompi/gompi/datatype"
	"github.com/gompi/gompi/frameworks/pml"
	"github.com/gompi/gompi/mpierr"
)

// The pipelined eager protocol (PIPE), for messages above the eager limit
// and up to the route's btl.Attributes.PipelineLimit (shm's
// btl_shm_pipeline_limit), in standard, buffered and ready mode. The sender
// writes a PIPE header (RNDV's layout, naming its own request by a number of
// its own) with the first chunk, then the rest as PFRAGs of the route's max
// send size, back to back, without waiting for the receiver: the receiver
// copies fragment k out of the ring while the sender copies k+1 in, and no
// handshake, FIN or system call stands before the data. vader's rendezvous
// for the same sizes (RGET, then process_vm_readv and FIN) costs a system
// call, which on the paravirtualized machines this runs on costs 1–3 µs,
// as much as copying 8 KiB twice.
//
// The receiver keeps a pipeIn per message under way, by (sender, request),
// made when the PIPE header arrives, before it is matched: a matched receive
// takes the PFRAGs straight into its buffer; while the message is
// unexpected (or parked, or waiting for its communicator) they are held in
// a buffer of the message's length, copied into the receive when one
// matches. Since the PFRAGs carry their offset, their order among
// themselves and with other traffic does not matter.

// pipeKey names a pipelined message under way: the sender's world rank and
// its request number.
type pipeKey struct {
	world int
	id    uint64
}

// pipeIn is a pipelined message whose PFRAGs are still arriving.
type pipeIn struct {
	mu      sync.Mutex
	first   int // bytes that came with the PIPE header
	msgLen  int
	arrived int    // PFRAG bytes arrived
	held    []byte // the PFRAGs' bytes while no receive has matched (msgLen long, allocated at the first)
	r       *recvReq
	failed  bool
}

// onPipe registers a PIPE header's message before it goes through matching,
// so that its PFRAGs, which follow it in the same ring, find a place. It
// reports false when the header is bad (reported, and dropped).
func (m *module) onPipe(src int, h *matchHdr, first int) bool {
	lim := 0
	if src >= 0 && src < len(m.pipeLim) {
		lim = m.pipeLim[src]
	}
	if h.msgLen > uint64(lim) {
		// The parameter is the job's: a larger one is a peer's bug, and its
		// length would size the buffer of an unexpected message.
		m.bad(src, fmt.Errorf("PIPE of %d bytes: above this side's pipeline limit, %d", h.msgLen, lim))
		return false
	}
	if uint64(first) == h.msgLen {
		return true // nothing follows
	}
	k := pipeKey{src, h.srcReq}
	m.pipeMu.Lock()
	if m.pipes == nil {
		m.pipes = map[pipeKey]*pipeIn{}
	}
	if _, dup := m.pipes[k]; dup {
		m.pipeMu.Unlock()
		m.bad(src, fmt.Errorf("PIPE for request %d, which is already under way", h.srcReq))
		return false
	}
	p := m.pipePool.get()
	p.first, p.msgLen, p.arrived, p.held, p.r, p.failed = first, int(h.msgLen), 0, nil, nil, false
	m.pipes[k] = p
	m.pipeMu.Unlock()
	return true
}

// pipeMatched gives the rest of a matched PIPE message to r, whose buffer
// holds the first chunk already; it completes r when every byte is there.
func (m *module) pipeMatched(r *recvReq, world int, id uint64, first int) {
	if first >= r.msgLen {
		if r.stamp != 0 {
			m.endToEnd(r, byFragments)
		}
		r.finish(nil)
		return
	}
	k := pipeKey{world, id}
	m.pipeMu.Lock()
	p := m.pipes[k]
	m.pipeMu.Unlock()
	if p == nil {
		// Taken out by peerLost (or never made: onPipe refused it).
		r.st.Count = 0
		r.finish(mpierr.Errorf(mpierr.ErrProcFailed, "ob1: receiving a %d-byte message from rank %d: the rank is lost", r.msgLen, r.st.Source))
		return
	}
	p.mu.Lock()
	if p.failed {
		p.mu.Unlock()
		r.st.Count = 0
		r.finish(mpierr.Errorf(mpierr.ErrProcFailed, "ob1: receiving a %d-byte message from rank %d: the rank is lost", r.msgLen, r.st.Source))
		return
	}
	if p.held != nil && r.want > first {
		// Held data can be the whole message: read by the program next.
		datatype.CopyCached(r.buf[first:r.want], p.held[first:r.want])
	}
	p.held = nil
	done := p.arrived == p.msgLen-p.first
	if !done {
		p.r = r // otherwise r is this call's to finish alone, as in onPFrag
	}
	p.mu.Unlock()
	if done {
		m.pipeDone(k, r)
	}
}

// onPFrag places one PFRAG.
func (m *module) onPFrag(src int, frag []byte) {
	f, data, err := decodeFragOf(frag, hdrPFrag)
	if err != nil {
		m.bad(src, err)
		return
	}
	k := pipeKey{src, f.dstReq}
	m.pipeMu.Lock()
	p := m.pipes[k]
	m.pipeMu.Unlock()
	if p == nil {
		m.bad(src, fmt.Errorf("PFRAG for request %d, which is no pipelined message of rank %d under way", f.dstReq, src))
		return
	}
	off, n := int(f.offset), len(data)
	p.mu.Lock()
	if off < p.first || off+n > p.msgLen || p.arrived+n > p.msgLen-p.first {
		p.mu.Unlock()
		m.bad(src, fmt.Errorf("PFRAG of %d bytes at %d does not fit a message of %d (%d came with its header, %d since)", n, off, p.msgLen, p.first, p.arrived))
		return
	}
	r := p.r
	switch {
	case p.failed:
		p.mu.Unlock()
		return
	case r != nil:
		if off < r.want {
			copy(r.buf[off:r.want], data)
		}
	default:
		if p.held == nil {
			p.held = make([]byte, p.msgLen)
		}
		copy(p.held[off:], data)
	}
	p.arrived += n
	done := r != nil && p.arrived == p.msgLen-p.first
	if done {
		// Claimed: pipesLost must not finish r too, which may be
		// recycled once finished.
		p.r = nil
	}
	p.mu.Unlock()
	if done {
		m.pipeDone(k, r)
	}
}

// pipeDone completes a pipelined receive whose bytes are all in place, and
// gives its pipeIn back to the free list: nothing looks it up any more (its
// PFRAGs are all in, and pipeMatched has run). Only a peer that sends more
// PFRAGs than its message has could find it reused, within its own
// messages' bounds.
func (m *module) pipeDone(k pipeKey, r *recvReq) {
	if m.pipeDoneHook != nil {
		m.pipeDoneHook()
	}
	m.pipeMu.Lock()
	p := m.pipes[k]
	delete(m.pipes, k)
	m.pipeMu.Unlock()
	if p != nil {
		p.r = nil
		m.pipePool.put(p)
	}
	if r.stamp != 0 {
		m.endToEnd(r, byFragments)
	}
	r.finish(nil)
}

// pipesLost fails the pipelined messages under way from a lost peer.
func (m *module) pipesLost(world int, fail func() error) {
	var lost []*pipeIn
	m.pipeMu.Lock()
	for k, p := range m.pipes {
		if k.world == world {
			lost = append(lost, p)
			delete(m.pipes, k)
		}
	}
	m.pipeMu.Unlock()
	for _, p := range lost {
		p.mu.Lock()
		p.failed = true
		r := p.r
		p.held = nil
		p.mu.Unlock()
		if r != nil {
			r.st.Count = 0
			r.finish(fail())
		}
	}
}

// takeRndvInPlace is the receive fast path's (recv.go) for an RGET or PIPE
// header at the head of the peer's ring: when it is the message the blocking
// receive waits for, the receive takes its sequence number there and starts
// the protocol at once (RGET: the single copy and FIN; PIPE: the first chunk
// and the place for the PFRAGs that follow), rather than falling back to a
// posted request that Progress then matches, a hop that cost the RGET
// ping-pong about a microsecond. It ends the Peek (Done) itself.
func (m *module) takeRndvInPlace(c *comm, src, tag int, buf []byte, bp btlPeek, frag []byte) (pml.Envelope, bool, error) {
	r := m.startRndvInPlace(c, src, tag, buf, bp, frag, true)
	if r == nil {
		return pml.Envelope{}, false, nil
	}
	st, err := r.Wait()
	if err != nil && !r.Done() {
		return envelope(st), true, err // given up: leave r to whoever finishes it
	}
	m.recycle(r)
	return envelope(st), true, err
}

// startRndvInPlace takes an RGET or PIPE header at the head of the peer's
// ring for a receive of buf when it is the message the receive matches,
// and starts the protocol (takeRndvInPlace); it returns the request, or nil
// when the header is not for it. It ends the Peek (Done) itself. A pooled
// request is a blocking receive's (recycled by its caller).
func (m *module) startRndvInPlace(c *comm, src, tag int, buf []byte, bp btlPeek, frag []byte, pooled bool) *recvReq {
	w := c.peers[src].world
	h, data, err := decodeMatch(frag)
	if err != nil || h.ctx != c.cid || int(h.src) != src || !tagMatches(tag, int(h.tag)) || (h.typ == hdrRget && len(data) > len(recvReq{}.scratch)) {
		bp.p.Done(bp.ep, false)
		return nil // the normal path reports or matches it
	}
	c.mu.Lock()
	p := &c.peers[src]
	if h.seq != p.expected || p.unex.head != nil || len(p.parked) != 0 {
		c.mu.Unlock()
		bp.p.Done(bp.ep, false)
		return nil
	}
	if h.typ == hdrPipe && !m.onPipe(w, &h, len(data)) {
		c.mu.Unlock()
		bp.p.Done(bp.ep, true) // reported, dropped: as dispatch would
		return nil
	}
	p.expected++
	c.mu.Unlock()
	r := m.newRecv(c, buf, src, tag, pooled)
	a := action{r: r, typ: h.typ, msgLen: int(h.msgLen), srcReq: h.srcReq, world: w, src: src, tag: int(h.tag),
		stamp: h.stamp, fresh: true, seq: h.seq}
	if h.typ == hdrPipe {
		// The first chunk goes straight from the ring into the buffer.
		r.dirty = true
		r.world, r.msgLen = w, a.msgLen
		r.want = min(a.msgLen, len(buf))
		r.st = pml.Status{Source: src, Tag: a.tag, Count: r.want}
		if a.msgLen > len(buf) {
			r.st.Err = truncErr(a.msgLen, len(buf), src, a.tag)
		}
		copy(r.buf[:r.want], data)
		first := len(data)
		r.stamp, r.fresh, r.seq = h.stamp, true, h.seq
		bp.p.Done(bp.ep, true)
		m.pipeMatched(r, w, h.srcReq, first)
	} else {
		// The description, out of the ring before Done; the FIN that
		// runAction sends after the read reuses the space.
		a.data = r.scratch[:copy(r.scratch[:], data)]
		bp.p.Done(bp.ep, true)
		m.runAction(&a)
	}
	return r
}
