package tcp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
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
// answers it and hands the connection to Progress.
func (m *module) handshakeIn(conn *net.TCPConn) {
	defer m.wg.Done()
	remote := conn.RemoteAddr().String()
	ic, err := m.acceptHello(conn)
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
		}
		conn.Close()
		return
	}
	m.adopt = append(m.adopt, ic)
	m.adoptPending.Store(true)
	m.inMu.Unlock()
	m.bell.Ring()
	if m.log.V(mca.VerboseInfo) {
		m.log.Log(mca.VerboseInfo, "accepted a connection", "peer", ic.rank, "from", remote)
	}
}

// acceptHello reads and checks a hello and answers it. Once the sender's
// rank is reserved (so that a second connection from it is refused), it
// returns the connection even with an error, for the caller to release the
// rank.
func (m *module) acceptHello(conn *net.TCPConn) (*inConn, error) {
	// The deadline (btl_tcp_handshake_timeout) was set by m.handshakes.Add.
	buf := make([]byte, helloLen)
	// The first bytes alone tell garbage apart: no need to wait for more.
	if _, err := io.ReadFull(conn, buf[:6]); err != nil {
		return nil, fmt.Errorf("reading the hello: %v: %w", err, errHandshake)
	}
	if err := checkMagic(buf[:6]); err != nil {
		return nil, err
	}
	if _, err := io.ReadFull(conn, buf[6:]); err != nil {
		return nil, fmt.Errorf("reading the hello: %v: %w", err, errHandshake)
	}
	h, err := m.id.check(buf, kindHello, -1)
	if err != nil {
		return nil, err
	}
	rank := int(h.from)
	if m.isGone(rank) {
		return nil, fmt.Errorf("rank %d was lost or has finalized: %w", rank, errHandshake)
	}
	m.inMu.Lock()
	dup := m.from[rank]
	m.from[rank] = true
	m.inMu.Unlock()
	if dup {
		return nil, fmt.Errorf("rank %d is already connected: %w", rank, errHandshake)
	}
	raw, err := conn.SyscallConn()
	if err != nil {
		return nil, err
	}
	ic := newInConn(m, rank, conn, raw, int(h.maxFrame))
	reply := m.id.hello(kindReply, rank, m.attr.MaxSendSize)
	if _, err := conn.Write(reply.encode()); err != nil {
		return ic, fmt.Errorf("rank %d: sending the reply: %v: %w", rank, err, errHandshake)
	}
	conn.SetDeadline(time.Time{})
	m.configure(conn)
	return ic, nil
}

// dial connects to rank, trying its usable addresses best first.
func (m *module) dial(rank int, cands []candidate) (*net.TCPConn, error) {
	var failures []string
	for _, c := range cands {
		conn, err := m.dialOne(rank, c.remote)
		if err == nil {
			if m.log.V(mca.VerboseInfo) {
				m.log.Log(mca.VerboseInfo, "connected", "peer", rank, "address", c.remote, "class", c.class)
			}
			return conn, nil
		}
		failures = append(failures, fmt.Sprintf("%v: %v", c.remote, err))
		if m.log.V(mca.VerboseInfo) {
			m.log.Log(mca.VerboseInfo, "cannot connect", "peer", rank, "address", c.remote, "class", c.class, "error", err)
		}
		if m.closing.Load() {
			break
		}
	}
	return nil, fmt.Errorf("btl tcp: cannot connect to rank %d (%s): %w", rank, strings.Join(failures, "; "), btl.ErrPeerLost)
}

func (m *module) dialOne(rank int, ap netip.AddrPort) (*net.TCPConn, error) {
	d := net.Dialer{Timeout: m.cfg.handshakeTimeout}
	nc, err := d.DialContext(m.ctx, "tcp", ap.String())
	if err != nil {
		return nil, err
	}
	conn := nc.(*net.TCPConn)
	// Finalize must not wait out a handshake in progress.
	stop := context.AfterFunc(m.ctx, func() { conn.Close() })
	defer stop()
	conn.SetDeadline(time.Now().Add(m.cfg.handshakeTimeout))
	h := m.id.hello(kindHello, rank, m.attr.MaxSendSize)
	if _, err := conn.Write(h.encode()); err != nil {
		conn.Close()
		return nil, fmt.Errorf("sending the hello: %w", err)
	}
	buf := make([]byte, helloLen)
	if _, err := io.ReadFull(conn, buf); err != nil {
		conn.Close()
		return nil, fmt.Errorf("reading the reply (the peer refused the hello?): %w", err)
	}
	if _, err := m.id.check(buf, kindReply, rank); err != nil {
		conn.Close()
		return nil, err
	}
	conn.SetDeadline(time.Time{})
	m.configure(conn)
	return conn, nil
}
