package tcp

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/gompi/gompi/frameworks/btl"
	"github.com/gompi/gompi/mca"
	"github.com/gompi/gompi/mpierr"
	"github.com/gompi/gompi/rte"
)

type epState uint8

const (
	epIdle       epState = iota // no connection yet
	epConnecting                // a goroutine is dialling; output queues
	epConnected
	epDown // lost, finalized, or this module closed: err says which
)

// maxIov bounds the buffers of one sendmsg.
const maxIov = 16

// endpoint is the sending side towards one peer: its outgoing connection
// and its output queue.
type endpoint struct {
	m     *module
	rank  int
	cands []candidate
	kick  chan struct{} // wakes the flusher when output is queued
	nb    *rte.Bell     // the peer's bell when it is a goroutine rank of this process

	mu     sync.Mutex
	state  epState
	err    error
	conn   *net.TCPConn
	raw    syscall.RawConn
	q      sendQueue
	queued atomic.Bool
	// claimed: a connection the peer dialled was taken for this endpoint
	// and its answer is on the way (state epConnecting: output queues, no
	// dial starts; a dial under way is dropped when it ends). waiting: the
	// peer deferred our dial and its own connection is awaited.
	claimed, waiting bool
	// Frames accepted and their bytes (header and payload, not the
	// frame header), for btl.SendCounter: added to under mu, read by
	// SendCounts without it.
	frames, bytes atomic.Uint64

	// Scratch for one sendmsg, used under mu so that a send allocates
	// nothing.
	fh   [frameHdrLen]byte
	iov  [maxIov]unix.Iovec
	msg  unix.Msghdr
	wfn  func(uintptr) bool
	wn   int
	werr error
}

func newEndpoint(m *module, rank int, cands []candidate) *endpoint {
	e := &endpoint{m: m, rank: rank, cands: cands, kick: make(chan struct{}, 1), nb: m.bell.Neighbor(rank)}
	e.wfn = e.sendmsg
	return e
}

func (e *endpoint) Rank() int        { return e.rank }
func (e *endpoint) Flags() btl.Flags { return 0 }

// errNoRoom is Sendi's private refusal.
var errNoRoom = errors.New("no room")

func (m *module) Send(ep btl.Endpoint, tag btl.Tag, hdr, payload []byte) error {
	if len(hdr)+len(payload) > m.attr.MaxSendSize {
		return btl.ErrTooLarge
	}
	e, ok := ep.(*endpoint)
	if !ok || e.m != m {
		return mpierr.Errorf(mpierr.ErrIntern, "btl tcp: Send to an endpoint of another module (%T)", ep)
	}
	return e.send(uint8(tag), hdr, payload, false)
}

func (m *module) Sendi(ep btl.Endpoint, tag btl.Tag, hdr, payload []byte) bool {
	e, ok := ep.(*endpoint)
	if !ok || e.m != m || len(hdr)+len(payload) > m.attr.EagerLimit {
		return false
	}
	return e.send(uint8(tag), hdr, payload, true) == nil
}

// send writes one frame, or queues it. immediate (Sendi) refuses instead of
// queuing.
func (e *endpoint) send(tag uint8, hdr, payload []byte, immediate bool) error {
	n := len(hdr) + len(payload)
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.state == epIdle {
		if err := e.connectLocked(); err != nil {
			return err
		}
	}
	switch e.state {
	case epConnected:
		if e.q.bytes > 0 {
			break
		}
		putFrameHeader(e.fh[:], frameData, tag, n)
		w, err := e.writev(e.fh[:], hdr, payload)
		if err != nil {
			return e.lostLocked(err)
		}
		if w == frameHdrLen+n {
			e.countLocked(n)
			e.nb.Ring()
			return nil
		}
		if w == 0 && immediate {
			return errNoRoom
		}
		// The kernel took part of the frame: the rest must follow it, in
		// order, whatever the queue's bound.
		e.enqueueLocked(tail(w, e.fh[:], hdr, payload))
		e.countLocked(n)
		return nil
	case epDown:
		return e.err
	}
	// Connecting, or earlier output is still queued: queue behind it.
	if immediate {
		return errNoRoom
	}
	if e.q.bytes > 0 && e.q.bytes+frameHdrLen+n > e.m.cfg.maxQueued {
		return btl.ErrWouldBlock
	}
	putFrameHeader(e.fh[:], frameData, tag, n)
	e.enqueueLocked([3][]byte{e.fh[:], hdr, payload})
	e.countLocked(n)
	return nil
}

// countLocked counts one frame of n bytes accepted: two uncontended atomic
// adds on the endpoint's own counters (the caller holds mu).
func (e *endpoint) countLocked(n int) {
	e.frames.Add(1)
	e.bytes.Add(uint64(n))
}

// SendCounts sums the endpoints' counts (btl.SendCounter).
func (m *module) SendCounts() btl.SendCounts {
	var c btl.SendCounts
	if p := m.eps.Load(); p != nil {
		for _, e := range *p {
			if e != nil {
				c.Frames += e.frames.Load()
				c.Bytes += e.bytes.Load()
			}
		}
	}
	return c
}

// tail returns what is left of the buffers after the first w bytes.
func tail(w int, a, b, c []byte) [3][]byte {
	out := [3][]byte{a, b, c}
	for i := range out {
		k := min(w, len(out[i]))
		out[i] = out[i][k:]
		w -= k
	}
	return out
}

// writev sends the buffers with one non-blocking sendmsg and returns the
// bytes the kernel took; a full socket is not an error (0 bytes). The
// caller holds mu.
func (e *endpoint) writev(bufs ...[]byte) (int, error) {
	n := 0
	for _, b := range bufs {
		if len(b) == 0 || n == maxIov {
			continue
		}
		e.iov[n].Base = &b[0]
		e.iov[n].SetLen(len(b))
		n++
	}
	if n == 0 {
		return 0, nil
	}
	e.msg.Iov = &e.iov[0]
	e.msg.SetIovlen(n)
	err := e.raw.Write(e.wfn)
	for i := range n {
		e.iov[i].Base = nil // do not keep the caller's memory alive
	}
	if err != nil {
		return 0, err
	}
	if e.werr == unix.EAGAIN {
		return 0, nil
	}
	return e.wn, e.werr
}

// sendmsg is the RawConn.Write function: one attempt, never a wait in the
// netpoller. MSG_NOSIGNAL: a closed peer is an error, not a SIGPIPE.
func (e *endpoint) sendmsg(fd uintptr) bool {
	for {
		r, _, errno := unix.RawSyscall(unix.SYS_SENDMSG, fd, uintptr(unsafe.Pointer(&e.msg)), unix.MSG_NOSIGNAL|unix.MSG_DONTWAIT)
		if errno == unix.EINTR {
			continue
		}
		e.wn, e.werr = int(r), nil
		if errno != 0 {
			e.wn, e.werr = 0, errno
		}
		return true
	}
}

// lostLocked fails the endpoint after a write error and reports the peer.
func (e *endpoint) lostLocked(cause error) error {
	err := fmt.Errorf("btl tcp: sending to rank %d: %v: %w", e.rank, cause, btl.ErrPeerLost)
	e.failLocked(err)
	e.m.markLost(e.rank, err)
	return err
}

// connectLocked connects the endpoint: on the connection the peer dialled
// to us, when there is one, else by a goroutine that dials, and meanwhile
// output queues.
func (e *endpoint) connectLocked() error {
	if e.m.closing.Load() {
		e.state, e.err = epDown, fmt.Errorf("btl tcp: module finalized: %w", btl.ErrPeerLost)
		return e.err
	}
	if s, ok := e.m.takeSpare(e.rank); ok {
		e.useLocked(s.conn, s.raw)
		return nil
	}
	e.state = epConnecting
	e.m.wg.Add(1)
	go e.run()
	return nil
}

// useLocked makes conn the endpoint's connection, pushes what queued
// meanwhile and starts the goroutine that pushes queued output when
// Progress is not there to do it.
func (e *endpoint) useLocked(conn *net.TCPConn, raw syscall.RawConn) {
	e.conn, e.raw, e.state = conn, raw, epConnected
	e.claimed, e.waiting = false, false
	if err := e.pushLocked(); err != nil {
		e.lostLocked(err)
		return
	}
	if !e.m.closing.Load() {
		e.m.wg.Add(1)
		go e.flushLoop()
	}
}

// run dials the peer and then sends on that connection, unless the peer's
// own connection was taken meanwhile or the peer defers to it.
func (e *endpoint) run() {
	defer e.m.wg.Done()
	conn, ans, err := e.m.dial(e.rank, e.cands)
	e.mu.Lock()
	if e.state != epConnecting || e.claimed {
		// The peer dialled us too and its connection carries both ways;
		// a dial the peer accepted all the same is received from, since
		// the peer may send on it.
		e.mu.Unlock()
		if err == nil && conn != nil {
			if ans.kind == kindReply {
				e.m.addIncoming(conn, e.rank, int(ans.maxFrame))
			} else {
				conn.Close()
			}
		}
		return
	}
	if err != nil {
		e.mu.Unlock()
		e.m.peerLost(e.rank, err)
		return
	}
	if ans.kind == kindDefer {
		e.waiting = true
		e.mu.Unlock()
		e.awaitPeer()
		return
	}
	raw, err := conn.SyscallConn()
	if err != nil {
		e.mu.Unlock()
		conn.Close()
		e.m.peerLost(e.rank, fmt.Errorf("btl tcp: connection to rank %d: %v: %w", e.rank, err, btl.ErrPeerLost))
		return
	}
	e.useLocked(conn, raw)
	e.mu.Unlock()
	e.m.addIncoming(conn, e.rank, int(ans.maxFrame))
}

// awaitPeer waits, after the peer deferred our dial, for the peer's own
// connection (handshakeIn takes it, or it came before the endpoint
// existed and waits among the spares), for at most btl_tcp_handshake_timeout.
func (e *endpoint) awaitPeer() {
	deadline := time.Now().Add(e.m.cfg.handshakeTimeout)
	for {
		e.mu.Lock()
		if e.state != epConnecting || e.claimed {
			e.mu.Unlock()
			return
		}
		if s, ok := e.m.takeSpare(e.rank); ok {
			e.useLocked(s.conn, s.raw)
			e.mu.Unlock()
			return
		}
		e.mu.Unlock()
		if time.Now().After(deadline) {
			e.m.peerLost(e.rank, fmt.Errorf("btl tcp: rank %d deferred our connection to its own, which did not come within %v: %w",
				e.rank, e.m.cfg.handshakeTimeout, btl.ErrPeerLost))
			return
		}
		t := time.NewTimer(time.Millisecond)
		select {
		case <-t.C:
		case <-e.m.ctx.Done():
			t.Stop()
			return
		}
	}
}

// adoptAccepted makes conn, which the peer dialled and whose answer has
// left, the endpoint's connection (placeIncoming claimed it).
func (e *endpoint) adoptAccepted(conn *net.TCPConn, raw syscall.RawConn) {
	e.mu.Lock()
	if e.state == epConnecting && e.claimed {
		e.useLocked(conn, raw)
	}
	e.mu.Unlock()
}

// flushLoop waits for queued output and pushes it, sleeping a little longer
// each time the socket stays full.
func (e *endpoint) flushLoop() {
	defer e.m.wg.Done()
	done := e.m.ctx.Done()
	for {
		select {
		case <-e.kick:
		case <-done:
			return
		}
		delay := 20 * time.Microsecond
		for {
			e.mu.Lock()
			if e.state != epConnected {
				e.mu.Unlock()
				return
			}
			if err := e.pushLocked(); err != nil {
				e.lostLocked(err)
				e.mu.Unlock()
				return
			}
			left := e.q.bytes
			e.mu.Unlock()
			if left == 0 {
				break
			}
			t := time.NewTimer(delay)
			select {
			case <-t.C:
			case <-done:
				t.Stop()
				return
			}
			delay = min(2*delay, 2*time.Millisecond)
		}
	}
}

// fail takes the endpoint down (idempotent).
func (e *endpoint) fail(err error) {
	e.mu.Lock()
	e.failLocked(err)
	e.mu.Unlock()
}

func (e *endpoint) failLocked(err error) {
	if e.state == epDown {
		return
	}
	e.state, e.err = epDown, err
	e.dropQueueLocked()
	if e.raw != nil {
		// Shut down, not closed: Progress reads the descriptor itself and
		// alone may close it (it then reads the end of the stream and
		// drops the connection), so that its number is not reused under
		// a read.
		e.raw.Control(func(fd uintptr) { unix.Shutdown(int(fd), unix.SHUT_RDWR) })
	}
}

// close ends the endpoint at shutdown: gracefully, queued output leaves
// (until deadline) and a goodbye follows it.
func (e *endpoint) close(graceful bool, deadline time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for graceful && e.state == epConnected && e.q.bytes > 0 && time.Now().Before(deadline) {
		if err := e.pushLocked(); err != nil {
			break
		}
		if e.q.bytes > 0 {
			e.mu.Unlock()
			time.Sleep(50 * time.Microsecond)
			e.mu.Lock()
		}
	}
	if graceful && e.state == epConnected && e.q.bytes == 0 {
		var bye [frameHdrLen]byte
		putFrameHeader(bye[:], frameBye, 0, 0)
		e.writev(bye[:])
	}
	if e.state == epConnected && e.m.log.V(mca.VerboseInfo) {
		e.m.log.Log(mca.VerboseInfo, "closing connection", "peer", e.rank, "frames_sent", e.frames.Load())
	}
	e.failLocked(fmt.Errorf("btl tcp: module finalized: %w", btl.ErrPeerLost))
}

// ---- The output queue ----

// sendQueue holds output that the socket did not take yet, in chunks from
// the module's pool; a frame may span chunks.
type sendQueue struct {
	chunks []*[]byte
	off    int // bytes of chunks[0] already written
	bytes  int // bytes waiting
}

// enqueueLocked copies the buffers to the end of the queue.
func (e *endpoint) enqueueLocked(bufs [3][]byte) {
	q := &e.q
	was := q.bytes
	for _, b := range bufs {
		for len(b) > 0 {
			var last *[]byte
			if len(q.chunks) > 0 {
				last = q.chunks[len(q.chunks)-1]
			}
			if last == nil || len(*last) == cap(*last) {
				if len(b) > chunkSize {
					c := make([]byte, 0, len(b))
					last = &c
				} else {
					last = e.m.chunks.Get().(*[]byte)
					*last = (*last)[:0]
				}
				q.chunks = append(q.chunks, last)
			}
			k := min(len(b), cap(*last)-len(*last))
			*last = append(*last, b[:k]...)
			b = b[k:]
			q.bytes += k
		}
	}
	if was == 0 && q.bytes > 0 {
		e.queued.Store(true)
		e.m.outPending.Add(1)
		select {
		case e.kick <- struct{}{}:
		default:
		}
	}
}

// pushLocked writes queued output until the queue is empty or the socket
// is full. It returns the write error, if any.
func (e *endpoint) pushLocked() error {
	q := &e.q
	for q.bytes > 0 && e.state == epConnected {
		var bufs [maxIov][]byte
		n := 0
		for i, c := range q.chunks {
			if n == maxIov {
				break
			}
			b := *c
			if i == 0 {
				b = b[q.off:]
			}
			bufs[n] = b
			n++
		}
		w, err := e.writev(bufs[:n]...)
		if err != nil {
			return err
		}
		if w == 0 {
			return nil
		}
		e.nb.Ring()
		q.bytes -= w
		for w > 0 {
			c := q.chunks[0]
			left := len(*c) - q.off
			if w < left {
				q.off += w
				break
			}
			w -= left
			q.off = 0
			q.chunks[0] = nil
			q.chunks = q.chunks[1:]
			e.m.putChunk(c)
		}
	}
	if q.bytes == 0 && e.queued.Load() {
		e.queued.Store(false)
		e.m.outPending.Add(-1)
		q.chunks, q.off = q.chunks[:0], 0
	}
	return nil
}

func (e *endpoint) dropQueueLocked() {
	q := &e.q
	for _, c := range q.chunks {
		e.m.putChunk(c)
	}
	q.chunks, q.off, q.bytes = nil, 0, 0
	if e.queued.Load() {
		e.queued.Store(false)
		e.m.outPending.Add(-1)
	}
}

// putChunk returns a pooled chunk to the pool; an outsized one goes to the
// garbage collector.
func (m *module) putChunk(c *[]byte) {
	if cap(*c) == chunkSize {
		m.chunks.Put(c)
	}
}

// pushOutput pushes every endpoint's queued output (from Progress).
func (m *module) pushOutput() {
	p := m.eps.Load()
	if p == nil {
		return
	}
	for _, e := range *p {
		if e == nil || !e.queued.Load() {
			continue
		}
		e.mu.Lock()
		if err := e.pushLocked(); err != nil {
			e.lostLocked(err)
		}
		e.mu.Unlock()
	}
}
