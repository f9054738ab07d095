// Package handshakes bounds the connections that a listener accepted and
// that have not completed their handshake: the tcp BTL's, the PMI server's,
// the modex node socket's.
package handshakes

import (
	"net"
	"sync"
	"time"
)

// Set keeps the connections a listener accepted that have not
// completed their handshake yet (the tcp BTL's hello, a PMI_PORT client's
// initack, a modex record's cookie), so that strangers cannot hold a
// process's descriptors or stall its listener:
//
//   - each has Timeout to complete its handshake, as a deadline on the
//     connection set by Add: a silent connection is closed when it expires;
//   - at most max are pending (plus one per listener that shares the set).
//     When a listener wants one more, the oldest that has been pending for
//     longer than a grace period (a sixteenth of the timeout, at most 250
//     ms) is closed to make room; if none is that old, the listener waits
//     (new connections queue in the kernel) until one is or a handshake
//     ends.
//
// A peer's handshake arrives with its connection and ends in microseconds,
// far within the grace period, so a flood of silent connections evicts
// only its own kind, and delays a peer's connection by at most (connections
// ahead of it) × grace / max: 1000 ahead cost a quarter of the timeout.
type Set struct {
	max     int
	timeout time.Duration
	grace   time.Duration

	mu      sync.Mutex
	pending map[net.Conn]time.Time // when each was accepted
	closed  bool
	freed   chan struct{} // a slot may have freed
	peak    int
	evicted int64
}

// DefaultMax is the bound used when none is given.
const DefaultMax = 256

// maxGrace bounds how long a pending handshake is safe from eviction.
const maxGrace = 250 * time.Millisecond

// New returns a set of at most max pending handshakes (max < 1:
// DefaultMax), each allowed timeout.
func New(max int, timeout time.Duration) *Set {
	if max < 1 {
		max = DefaultMax
	}
	grace := timeout / 16
	if grace > maxGrace {
		grace = maxGrace
	}
	return &Set{max: max, timeout: timeout, grace: grace,
		pending: map[net.Conn]time.Time{}, freed: make(chan struct{}, 1)}
}

// Room waits until one more connection may be accepted, closing the oldest
// pending one if it must. It returns false once done is closed or Close was
// called.
func (h *Set) Room(done <-chan struct{}) bool {
	for {
		h.mu.Lock()
		if h.closed {
			h.mu.Unlock()
			return false
		}
		if len(h.pending) < h.max {
			h.mu.Unlock()
			return true
		}
		var oldest net.Conn
		var since time.Time
		for c, t := range h.pending {
			if oldest == nil || t.Before(since) {
				oldest, since = c, t
			}
		}
		wait := h.grace - time.Since(since)
		if wait <= 0 {
			delete(h.pending, oldest)
			h.evicted++
			h.mu.Unlock()
			oldest.Close() // its handshake goroutine sees the error and calls Done
			return true
		}
		h.mu.Unlock()
		t := time.NewTimer(wait)
		select {
		case <-done:
			t.Stop()
			return false
		case <-h.freed:
		case <-t.C:
		}
		t.Stop()
	}
}

// Add records conn as pending and sets its deadline. It returns false, having
// closed conn, after Close.
func (h *Set) Add(conn net.Conn) bool {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		conn.Close()
		return false
	}
	h.pending[conn] = time.Now()
	if n := len(h.pending); n > h.peak {
		h.peak = n
	}
	h.mu.Unlock()
	conn.SetDeadline(time.Now().Add(h.timeout))
	return true
}

// Done removes conn, whose handshake has ended (well or not: the caller
// clears the deadline or closes it). It reports whether conn was still
// pending: false when it was evicted or closed by Close meanwhile.
func (h *Set) Done(conn net.Conn) bool {
	h.mu.Lock()
	_, ok := h.pending[conn]
	delete(h.pending, conn)
	h.mu.Unlock()
	select {
	case h.freed <- struct{}{}:
	default:
	}
	return ok
}

// Close closes every pending connection and refuses new ones.
func (h *Set) Close() {
	h.mu.Lock()
	h.closed = true
	conns := make([]net.Conn, 0, len(h.pending))
	for c := range h.pending {
		conns = append(conns, c)
	}
	clear(h.pending)
	h.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
	select {
	case h.freed <- struct{}{}:
	default:
	}
}

// Timeout is the time each handshake is allowed.
func (h *Set) Timeout() time.Duration { return h.timeout }

// Stats returns how many are pending now, the most that ever were at once,
// and how many were closed to make room.
func (h *Set) Stats() (pending, peak int, evicted int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.pending), h.peak, h.evicted
}
