package ob1

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/gompi/gompi/frameworks/pml"
)

// interruption is what Interrupt made of a communicator: the scopes whose
// operations fail, and with what.
type interruption struct {
	scope     pml.Scope
	coll, p2p error
}

// errFor returns the error of an operation with tag, or nil when no scope
// of x covers it.
func (x *interruption) errFor(tag int) error {
	if x == nil || !x.scope.Covers(tag) {
		return nil
	}
	if tag >= 0 || tag == pml.AnyTag {
		return x.p2p
	}
	return x.coll
}

// interrupted returns the error an operation with tag on c fails with at
// once, or nil: one atomic load on the path of every call.
func (c *comm) interrupted(tag int) error {
	return c.intr.Load().errFor(tag)
}

// Interrupt implements pml.Module.
func (m *module) Interrupt(pc *pml.Comm, s pml.Scope, err error) {
	c := pc.State.(*comm)
	// The scope first, under the matching lock: a receive posted after
	// this sees it (post checks under the same lock), one posted before is
	// in the lists walked below.
	c.mu.Lock()
	old := c.intr.Load()
	next := &interruption{}
	if old != nil {
		*next = *old
	}
	if s&pml.ScopeCollective != 0 && next.coll == nil {
		next.coll = err
	}
	if s&pml.ScopePointToPoint != 0 && next.p2p == nil {
		next.p2p = err
	}
	next.scope |= s
	c.intr.Store(next)
	var posted []*recvReq
	take := func(l *reqList) {
		for r := l.head; r != nil; {
			nx := r.next
			if s.Covers(r.tag) {
				c.unpost(r)
				posted = append(posted, r)
			}
			r = nx
		}
	}
	take(&c.wild)
	for i := range c.peers {
		take(&c.peers[i].posted)
	}
	c.mu.Unlock()
	for _, r := range posted {
		r.Complete(pml.Status{Source: r.src, Tag: r.tag, Err: next.errFor(r.tag)})
	}
	m.interruptRendezvous(c, s, next)
	m.eng.Wake()
}

// interruptRendezvous fails the rendezvous of c under way in scope s: sends
// whose first fragment went out (the receiver, interrupted too, will never
// ask for the rest) and matched receives (the sender stops sending). A
// send still queued keeps its place: the pair's sequence needs it.
func (m *module) interruptRendezvous(c *comm, s pml.Scope, x *interruption) {
	var sends []*sendReq
	var recvs []*recvReq
	m.reqMu.Lock()
	for id, r := range m.sends {
		if r.c == c && s.Covers(r.tag) && r.firstSent.Load() {
			sends = append(sends, r)
			delete(m.sends, id)
			m.quietIDs[id] = struct{}{}
		}
	}
	for id, r := range m.recvs {
		if r.c == c && s.Covers(r.st.Tag) {
			recvs = append(recvs, r)
			delete(m.recvs, id)
			m.quietIDs[id] = struct{}{}
		}
	}
	m.reqMu.Unlock()
	for _, r := range sends {
		r.finish(x.errFor(r.tag))
	}
	for _, r := range recvs {
		// A BTL may be placing the peer's data into r.buf: take buf back
		// first (see btl.Steer).
		r.guard.Withdraw()
		r.finish(x.errFor(r.st.Tag))
	}
}

// FailAnySource implements pml.Module.
func (m *module) FailAnySource(pc *pml.Comm, err error) {
	c := pc.State.(*comm)
	c.mu.Lock()
	var failed []*recvReq
	for r := c.wild.head; r != nil; {
		nx := r.next
		if pml.ScopePointToPoint.Covers(r.tag) {
			c.unpost(r)
			failed = append(failed, r)
		}
		r = nx
	}
	c.mu.Unlock()
	for _, r := range failed {
		r.Complete(pml.Status{Source: pml.AnySource, Tag: r.tag, Err: err})
	}
	if len(failed) > 0 {
		m.eng.Wake()
	}
}

// hdrNotice is a notice (Notify): type, flags, then the caller's bytes.
const hdrNotice = 10

// Notify implements pml.Module.
func (m *module) Notify(w int, msg []byte) error {
	if w < 0 || w >= m.size {
		return fmt.Errorf("ob1: notice to world rank %d: accepted: 0 to %d", w, m.size-1)
	}
	if m.lost[w].Load() {
		return lostErr(w, w)
	}
	if limit := m.bml.Peer(w).Send[0].Attr.EagerLimit; 2+len(msg) > limit {
		return fmt.Errorf("ob1: notice of %d bytes to rank %d: the route's eager limit is %d", len(msg), w, limit)
	}
	hdr := make([]byte, 2+len(msg))
	hdr[0] = hdrNotice
	copy(hdr[2:], msg)
	m.sendCtl(w, hdrNotice, hdr)
	return nil
}

// OnNotice implements pml.Module.
func (m *module) OnNotice(fn func(src int, msg []byte)) { m.notice.Store(&fn) }

// onNotice hands a notice to the handler; one that comes before a handler
// is set has nobody to read it.
func (m *module) onNotice(src int, frag []byte) {
	if fn := m.notice.Load(); fn != nil {
		(*fn)(src, frag[2:])
	}
}

// noticeHandler is OnNotice's function.
type noticeHandler = atomic.Pointer[func(src int, msg []byte)]

// errQuiet is fragTarget's answer for a fragment of an interrupted
// receive: dropped without a word, since its sender did not know yet.
var errQuiet = errors.New("ob1: fragment of an interrupted receive")

// quiet reports whether id named a request Interrupt failed.
func (m *module) quiet(id uint64) bool {
	m.reqMu.Lock()
	_, ok := m.quietIDs[id]
	m.reqMu.Unlock()
	return ok
}
