package tcp

import (
	"errors"
	"fmt"
	"net"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/gompi/gompi/frameworks/btl"
	"github.com/gompi/gompi/mca"
)

// inConn is a connection a peer dialled to us: fragments from that peer
// arrive on it. It belongs to whoever holds the module's progress lock.
type inConn struct {
	m    *module
	rank int
	conn *net.TCPConn
	raw  syscall.RawConn
	fd   int32 // for epoll; the descriptor stays ours until Progress drops the connection
	fr   *frameReader

	// The RawConn.Read function and its arguments and results, kept here so
	// that a poll allocates nothing.
	rfn  func(uintptr) bool
	dst  []byte
	rn   int
	rerr syscall.Errno
	// quick: quickAck was called for the frame being received.
	quick bool

	// A payload being read straight into its place (btl.Steer): where,
	// how much of it has arrived, and the PML header it came with.
	placing []byte
	placed  int
	placeBy *btl.Steer
	placeG  *btl.Guard
	// dropping: the PML took placing back (placeG said no); the rest of
	// the payload is read into discard and dropped.
	dropping  bool
	discard   []byte
	placeHdr  [64]byte
	placeHdrN int
}

func newInConn(m *module, rank int, conn *net.TCPConn, raw syscall.RawConn, maxFrame int) *inConn {
	c := &inConn{m: m, rank: rank, conn: conn, raw: raw, fr: newFrameReader(maxFrame), fd: -1}
	c.fr.steerable = m.steerable
	c.rfn = c.read
	raw.Control(func(fd uintptr) { c.fd = int32(fd) })
	return c
}

// read is the RawConn.Read function: one non-blocking read, and true, so
// that RawConn.Read never waits in the netpoller.
func (c *inConn) read(fd uintptr) bool {
	for {
		r, _, errno := unix.RawSyscall(unix.SYS_READ, fd, uintptr(unsafe.Pointer(&c.dst[0])), uintptr(len(c.dst)))
		if errno == unix.EINTR {
			continue
		}
		c.rn, c.rerr = int(r), errno
		return true
	}
}

// pollRounds bounds the reads of one connection in one Progress, so that a
// fast sender cannot starve the others.
const pollRounds = 4

// poll reads what has arrived and delivers the complete frames. It returns
// the frames delivered, and false when the connection has ended (lost or
// said goodbye): the caller then drops it.
func (c *inConn) poll() (int, bool) {
	delivered := 0
	for range pollRounds {
		entered := false
		if c.placing != nil {
			c.dst = c.placing[c.placed:]
			if !c.dropping && !c.placeG.Enter() {
				c.dropping = true
			}
			if c.dropping {
				if c.discard == nil {
					c.discard = make([]byte, 64<<10)
				}
				c.dst = c.discard[:min(len(c.discard), len(c.placing)-c.placed)]
			} else {
				entered = true
			}
		} else {
			c.dst = c.fr.space()
		}
		// The descriptor itself, not RawConn.Read, whose locks and poll
		// descriptor checks cost each poll ~70 ns: every close of an
		// incoming connection holds progress, as its poll does.
		var rerr error
		if c.fd >= 0 {
			if c.placing != nil && c.m.cfg.quickAckStream > 0 && len(c.placing) >= c.m.cfg.quickAckStream {
				// Before every read of a long payload: see quickAck.
				c.quickAck()
			}
			c.read(uintptr(c.fd))
		} else {
			rerr = c.raw.Read(c.rfn)
		}
		if entered {
			c.placeG.Exit()
		}
		if rerr != nil {
			c.lost(rerr)
			return delivered, false
		}
		switch {
		case c.rerr == unix.EAGAIN:
			return delivered, true
		case c.rerr != 0:
			c.lost(c.rerr)
			return delivered, false
		case c.rn == 0:
			c.lost(errors.New("the peer closed the connection without saying goodbye"))
			return delivered, false
		}
		if c.placing != nil {
			if c.placed += c.rn; c.placed == len(c.placing) {
				s, n, dropped := c.placeBy, len(c.placing), c.dropping
				c.placing, c.placeBy, c.placeG, c.dropping, c.quick = nil, nil, nil, false, false
				if !dropped {
					s.Placed(c.rank, c.placeHdr[:c.placeHdrN], n)
					c.m.placed++
					delivered++
				}
			}
			if c.rn < len(c.dst) {
				return delivered, true // the socket is drained
			}
			continue
		}
		c.fr.advance(c.rn)
		for {
			h, body, ok, err := c.fr.next()
			if err != nil {
				c.lost(err)
				return delivered, false
			}
			if !ok {
				break
			}
			c.quick = false
			if h.kind == frameBye {
				c.m.peerFinalized(c.rank)
				return delivered, false
			}
			if !c.m.cb.Deliver(c.rank, btl.Tag(h.tag), body) && c.m.log.V(mca.VerboseComponent) {
				c.m.log.Log(mca.VerboseComponent, "fragment dropped: no callback for its tag", "peer", c.rank, "tag", h.tag)
			}
			delivered++
		}
		c.steer()
		if c.rn < len(c.dst) {
			return delivered, true // the socket is drained
		}
	}
	return delivered, true
}

// steer offers the frame being received to its tag's Steer, once its PML
// header is in: a payload the PML places is read straight into its place
// from then on.
func (c *inConn) steer() {
	h, body, ok := c.fr.partial()
	if !ok {
		return
	}
	if !c.quick && c.m.cfg.quickAckMin > 0 && h.length >= c.m.cfg.quickAckMin {
		c.quickAck()
	}
	if c.fr.declined {
		return
	}
	s := c.m.steers[h.tag].Load()
	if s == nil || c.m.steerable(h.tag, h.length) == 0 || len(body) < s.HdrLen {
		return
	}
	n := h.length - s.HdrLen
	dst, g := s.Where(c.rank, body[:s.HdrLen], n)
	if len(dst) != n || g == nil || !g.Enter() {
		c.fr.declined = true
		return
	}
	c.placeHdrN = copy(c.placeHdr[:], body[:s.HdrLen])
	c.placed = copy(dst, body[s.HdrLen:])
	g.Exit()
	c.placing, c.placeBy, c.placeG = dst, s, g
	c.fr.drop()
}

// quickAck makes the kernel acknowledge a large frame's segments as they
// come, once per frame. Both ranks' fragments share the connection, so
// small messages' acknowledgements ride on the answers, which puts the
// socket in the kernel's interactive (pingpong) mode: acknowledgements
// delayed for an answer to carry them. A large frame's sender needs them
// at once to go on (4 MiB ping-pong: 1200-1400 µs against 640-670 with a
// connection per direction; with this, 680-710). TCP_QUICKACK leaves that
// mode until this side next answers, so once per frame keeps the
// acknowledgements coming; for long payloads (btl_tcp_quickack_stream_min)
// it is asked again before every read, which sends the acknowledgement
// pending at once and keeps the kernel acknowledging each segment: 1 MiB
// windowed bandwidth +57 %, 4 MiB +12 % (median of ten, far), for a system
// call per read that costs 256 KiB messages ~2 % if done for them too.
func (c *inConn) quickAck() {
	c.quick = true
	unix.SetsockoptInt(int(c.fd), unix.IPPROTO_TCP, unix.TCP_QUICKACK, 1)
}

func (c *inConn) lost(cause error) {
	c.m.peerLost(c.rank, fmt.Errorf("btl tcp: connection from rank %d: %v: %w", c.rank, cause, btl.ErrPeerLost))
}

// close ends the connection at shutdown, with a goodbye on the way back
// when graceful (the peer's watcher reads it).
func (c *inConn) close(graceful bool) {
	if graceful {
		var bye [frameHdrLen]byte
		putFrameHeader(bye[:], frameBye, 0, 0)
		c.conn.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
		c.conn.Write(bye[:])
	}
	c.conn.Close()
}

// Progress delivers what arrived on every incoming connection, pushes
// queued output, and reports lost peers. A caller that finds another
// goroutine progressing returns 0 at once.
func (m *module) Progress() int {
	// Idle (no incoming connection, nothing to adopt, push or report): a
	// few loads rather than a lock, since every pass of every wait calls
	// Progress, and a node's ranks usually talk over shm.
	if m.nIn.Load() == 0 && !m.adoptPending.Load() && m.outPending.Load() == 0 && !m.lostPending.Load() {
		return 0
	}
	if !m.progress.TryLock() {
		return 0
	}
	defer m.progress.Unlock()
	if m.adoptPending.Load() {
		m.adoptIncoming()
	}
	n := 0
	if m.epfd >= 0 {
		n = m.pollEpoll()
	} else {
		for i := 0; i < len(m.in); {
			c := m.in[i]
			d, alive := c.poll()
			n += d
			if alive {
				i++
				continue
			}
			m.drop(c)
		}
	}
	m.received += uint64(n)
	if m.outPending.Load() > 0 {
		m.pushOutput()
	}
	if m.lostPending.Load() {
		m.reportLost()
	}
	return n
}

// adoptIncoming takes the connections the handshakes completed. The caller
// holds progress.
func (m *module) adoptIncoming() {
	m.inMu.Lock()
	fresh := m.adopt
	m.adopt = nil
	m.adoptPending.Store(false)
	m.inMu.Unlock()
	for _, c := range fresh {
		m.in = append(m.in, c)
		if m.epfd >= 0 {
			m.epollAdd(c)
		}
		m.watchAdd(c)
	}
	m.nIn.Store(int32(len(m.in)))
	if m.epfd < 0 && m.cfg.epollMin > 0 && len(m.in) >= m.cfg.epollMin {
		m.startEpoll()
	}
}

// drop closes an ended connection and forgets it. The caller holds
// progress.
func (m *module) drop(c *inConn) {
	if m.epfd >= 0 {
		unix.EpollCtl(m.epfd, unix.EPOLL_CTL_DEL, int(c.fd), nil)
		delete(m.byFD, c.fd)
	}
	m.watchDel(c)
	c.conn.Close()
	for i, x := range m.in {
		if x == c {
			last := len(m.in) - 1
			m.in[i], m.in[last] = m.in[last], nil
			m.in = m.in[:last]
			m.nIn.Store(int32(last))
			break
		}
	}
}

// With many incoming connections, reading each one per Progress costs a
// system call per peer; past btl_tcp_epoll_threshold connections one
// non-blocking epoll_wait finds those with data instead (level-triggered,
// so data left unread by pollRounds is found again next time).

func (m *module) startEpoll() {
	fd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		m.log.Log(mca.VerboseComponent, "epoll unavailable; reading every connection instead", "error", err)
		m.cfg.epollMin = 0
		return
	}
	m.epfd, m.byFD = fd, make(map[int32]*inConn, len(m.in))
	for _, c := range m.in {
		m.epollAdd(c)
	}
	if m.log.V(mca.VerboseInfo) {
		m.log.Log(mca.VerboseInfo, "polling incoming connections through epoll", "connections", len(m.in))
	}
}

func (m *module) epollAdd(c *inConn) {
	ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP, Fd: c.fd}
	if err := unix.EpollCtl(m.epfd, unix.EPOLL_CTL_ADD, int(c.fd), &ev); err != nil {
		m.log.Log(mca.VerboseComponent, "epoll_ctl failed; reading every connection instead", "error", err)
		m.stopEpoll()
		m.cfg.epollMin = 0
		return
	}
	m.byFD[c.fd] = c
}

func (m *module) stopEpoll() {
	if m.epfd >= 0 {
		unix.Close(m.epfd)
		m.epfd, m.byFD = -1, nil
	}
}

func (m *module) pollEpoll() int {
	k, err := unix.EpollWait(m.epfd, m.events[:], 0)
	if err != nil {
		if err != unix.EINTR {
			m.log.Log(mca.VerboseComponent, "epoll_wait failed; reading every connection instead", "error", err)
			m.stopEpoll()
			m.cfg.epollMin = 0
		}
		return 0
	}
	n := 0
	for _, ev := range m.events[:k] {
		c := m.byFD[ev.Fd]
		if c == nil {
			continue
		}
		d, alive := c.poll()
		n += d
		if !alive {
			m.drop(c)
		}
	}
	return n
}
