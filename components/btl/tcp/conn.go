package tcp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"syscall"
	"time"

	"github.com/gompi/gompi/frameworks/btl"
	"github.com/gompi/gompi/mca"
)

// Connection set-up runs on goroutines (accepting, the handshake, dialling):
// it happens once per peer and direction, off the latency path.

// acceptLoop serves one listener until the module shuts down.
func (m *module) acceptLoop(ln *net.TCPListener) {
	defer m.wg.Done()
	for {
		// Silent strangers must not hold every descriptor: wait for room
		// among the pending handshakes first.
		if !m.handshakes.Room(m.ctx.Done()) {
			return
		}
		conn, err := ln.AcceptTCP()
		if err != nil {
			if m.closing.Load() || errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of descriptors, say: log, breathe, go on serving.
			m.log.Log(mca.VerboseComponent, "accept failed", "address", ln.Addr(), "error", err)
			select {
			case <-time.After(10 * time.Millisecond):
			case <-m.ctx.Done():
				return
			}
			continue
		}
		m.inMu.Lock()
		if m.closing.Load() || !m.handshakes.Add(conn) {
			m.inMu.Unlock()
			conn.Close()
			return
		}
		m.wg.Add(1)
		m.inMu.Unlock()
		go m.handshakeIn(conn)
	}
}

// handshakeIn checks a new connection's hello and, when it is a peer's,
// answers it and hands the connection to Progress, and to the peer's
// endpoint when placeIncoming chose it for sending too.
func (m *module) handshakeIn(conn *net.TCPConn) {
	defer m.wg.Done()
	remote := conn.RemoteAddr().String()
	ic, e, deferred, err := m.acceptHello(conn)
	if deferred {
		// Not a refusal: the peer awaits our connection instead.
		m.deferred.Add(1)
		m.handshakes.Done(conn)
		conn.Close()
		return
	}
	m.inMu.Lock()
	if !m.handshakes.Done(conn) && err == nil {
		// Closed meanwhile to make room, or by Finalize.
		err = fmt.Errorf("closed before the handshake ended: %w", errHandshake)
	}
	if err == nil && m.closing.Load() {
		err = errors.New("module finalizing")
	}
	if err != nil {
		if ic != nil {
			delete(m.from, ic.rank)
		}
		m.inMu.Unlock()
		if !m.closing.Load() {
			m.rejected.Add(1) // before the close, which the stranger may be waiting for
			m.log.Log(mca.VerboseComponent, "rejected a connection", "from", remote, "reason", err)
			if e != nil {
				// Its endpoint was waiting for this connection.
				m.peerLost(ic.rank, fmt.Errorf("btl tcp: connection from rank %d: %v: %w", ic.rank, err, btl.ErrPeerLost))
			}
		}
		conn.Close()
		return
	}
	m.adopt = append(m.adopt, ic)
	m.adoptPending.Store(true)
	if e == nil {
		// No endpoint yet (AddProcs has not run): the first Send to the
		// peer takes it.
		m.spare[ic.rank] = spareConn{conn, ic.raw}
	}
	m.inMu.Unlock()
	if e != nil {
		e.adoptAccepted(conn, ic.raw)
	}
	m.bell.Ring()
	if m.log.V(mca.VerboseInfo) {
		m.log.Log(mca.VerboseInfo, "accepted a connection", "peer", ic.rank, "from", remote, "sending_on_it", e != nil)
	}
}

// acceptHello reads and checks a hello and answers it. Once the sender's
// rank is reserved (so that a second connection from it is refused), it
// returns the connection even with an error, for the caller to release the
// rank, and the endpoint that placeIncoming claimed for it, if any.
// deferred: the answer told the peer to use our connection instead.
func (m *module) acceptHello(conn *net.TCPConn) (ic *inConn, e *endpoint, deferred bool, err error) {
	// The deadline (btl_tcp_handshake_timeout) was set by m.handshakes.Add.
	buf := make([]byte, helloLen)
	// The first bytes alone tell garbage apart: no need to wait for more.
	if _, err := io.ReadFull(conn, buf[:6]); err != nil {
		return nil, nil, false, fmt.Errorf("reading the hello: %v: %w", err, errHandshake)
	}
	if err := checkMagic(buf[:6]); err != nil {
		return nil, nil, false, err
	}
	if _, err := io.ReadFull(conn, buf[6:]); err != nil {
		return nil, nil, false, fmt.Errorf("reading the hello: %v: %w", err, errHandshake)
	}
	h, err := m.id.check(buf, kindHello, -1)
	if err != nil {
		return nil, nil, false, err
	}
	rank := int(h.from)
	if m.isGone(rank) {
		return nil, nil, false, fmt.Errorf("rank %d was lost or has finalized: %w", rank, errHandshake)
	}
	m.inMu.Lock()
	dup := m.from[rank]
	if !dup {
		m.from[rank] = true
	}
	m.inMu.Unlock()
	if dup {
		return nil, nil, false, fmt.Errorf("rank %d is already connected: %w", rank, errHandshake)
	}
	e, deferred = m.placeIncoming(rank)
	if deferred {
		m.inMu.Lock()
		delete(m.from, rank)
		m.inMu.Unlock()
		answer := m.id.hello(kindDefer, rank, m.attr.MaxSendSize)
		conn.Write(answer.encode()) // the peer learns of it or loses the connection: either ends its dial
		return nil, nil, true, nil
	}
	raw, err := conn.SyscallConn()
	if err != nil {
		return nil, e, false, err
	}
	ic = newInConn(m, rank, conn, raw, int(h.maxFrame))
	reply := m.id.hello(kindReply, rank, m.attr.MaxSendSize)
	if _, err := conn.Write(reply.encode()); err != nil {
		return ic, e, false, fmt.Errorf("rank %d: sending the reply: %v: %w", rank, err, errHandshake)
	}
	conn.SetDeadline(time.Time{})
	m.configure(conn)
	return ic, e, false, nil
}

// placeIncoming decides, before the answer, what a connection rank dialled
// to us is for. Both ranks' fragments travel on one connection (so that
// each segment carries the acknowledgement of the last one the other way,
// instead of the kernel sending one on its own), so the connection is
// taken for sending too unless this rank dialled the peer as well: then
// the connection dialled by the lower rank is kept, and the other deferred
// (deferred true). A peer without an endpoint yet (AddProcs has not run)
// gets its connection kept as a spare (e nil).
func (m *module) placeIncoming(rank int) (e *endpoint, deferred bool) {
	m.inMu.Lock()
	e = m.endpoint(rank)
	m.inMu.Unlock()
	if e == nil {
		return nil, false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case e.state == epIdle:
		e.state, e.claimed = epConnecting, true
	case e.state == epConnecting && !e.claimed && (e.waiting || m.id.rank > rank):
		// Our dial is deferred, or will be (the peer is lower): it is
		// dropped when it ends.
		e.claimed = true
	default:
		// Our own dial is under way and the peer is higher, or it has
		// connected already: the peer's crossed ours.
		return nil, true
	}
	return e, false
}

// dial connects to rank, trying its usable addresses best first, and
// returns the connection and the peer's answer; a deferral (the peer
// keeps its own connection to us) returns no connection.
func (m *module) dial(rank int, cands []candidate) (*net.TCPConn, hello, error) {
	var failures []string
	for _, c := range cands {
		conn, ans, err := m.dialOne(rank, c.remote)
		if err == nil {
			if m.log.V(mca.VerboseInfo) {
				m.log.Log(mca.VerboseInfo, "connected", "peer", rank, "address", c.remote, "class", c.class, "deferred", ans.kind == kindDefer)
			}
			return conn, ans, nil
		}
		failures = append(failures, fmt.Sprintf("%v: %v", c.remote, err))
		if m.log.V(mca.VerboseInfo) {
			m.log.Log(mca.VerboseInfo, "cannot connect", "peer", rank, "address", c.remote, "class", c.class, "error", err)
		}
		if m.closing.Load() {
			break
		}
	}
	return nil, hello{}, fmt.Errorf("btl tcp: cannot connect to rank %d (%s): %w", rank, strings.Join(failures, "; "), btl.ErrPeerLost)
}

func (m *module) dialOne(rank int, ap netip.AddrPort) (*net.TCPConn, hello, error) {
	d := net.Dialer{Timeout: m.cfg.handshakeTimeout}
	nc, err := d.DialContext(m.ctx, "tcp", ap.String())
	if err != nil {
		return nil, hello{}, err
	}
	conn := nc.(*net.TCPConn)
	// Finalize must not wait out a handshake in progress.
	stop := context.AfterFunc(m.ctx, func() { conn.Close() })
	defer stop()
	conn.SetDeadline(time.Now().Add(m.cfg.handshakeTimeout))
	h := m.id.hello(kindHello, rank, m.attr.MaxSendSize)
	if _, err := conn.Write(h.encode()); err != nil {
		conn.Close()
		return nil, hello{}, fmt.Errorf("sending the hello: %w", err)
	}
	buf := make([]byte, helloLen)
	if _, err := io.ReadFull(conn, buf); err != nil {
		conn.Close()
		return nil, hello{}, fmt.Errorf("reading the reply (the peer refused the hello?): %w", err)
	}
	ans, err := m.id.checkAnswer(buf, rank)
	if err != nil {
		conn.Close()
		return nil, hello{}, err
	}
	if ans.kind == kindDefer {
		conn.Close()
		return nil, ans, nil
	}
	conn.SetDeadline(time.Time{})
	m.configure(conn)
	return conn, ans, nil
}

// addIncoming hands a connection this rank dialled to Progress: the peer
// sends on it too.
func (m *module) addIncoming(conn *net.TCPConn, rank, maxFrame int) {
	raw, err := conn.SyscallConn()
	m.inMu.Lock()
	if err != nil || m.closing.Load() {
		m.inMu.Unlock()
		conn.Close()
		return
	}
	m.adopt = append(m.adopt, newInConn(m, rank, conn, raw, maxFrame))
	m.adoptPending.Store(true)
	m.inMu.Unlock()
	m.bell.Ring()
}

// spareConn is a connection a peer dialled before this rank had an
// endpoint for it: the endpoint's first Send takes it.
type spareConn struct {
	conn *net.TCPConn
	raw  syscall.RawConn
}

// takeSpare takes rank's spare connection, if any.
func (m *module) takeSpare(rank int) (spareConn, bool) {
	m.inMu.Lock()
	defer m.inMu.Unlock()
	s, ok := m.spare[rank]
	if ok {
		delete(m.spare, rank)
	}
	return s, ok
}
