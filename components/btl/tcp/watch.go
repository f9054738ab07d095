package tcp

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/gompi/gompi/mpierr"
)

// A process whose waits sleep must wake when a fragment comes in on a
// connection. The module keeps the incoming connections in an epoll set of
// its own (level-triggered, so that unread data keeps it readable), and,
// while a goroutine sleeps, a watcher goroutine parks in the Go network
// poller on that set and rings the bell when it becomes readable. The
// watcher is started by the first sleep; a process that never sleeps never
// starts it.

// openWatch makes the epoll set and hands it to the network poller.
func (m *module) openWatch() error {
	fd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return mpierr.Errorf(mpierr.ErrIntern, "btl tcp: epoll_create1 for waking sleepers: %w", err)
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return mpierr.Errorf(mpierr.ErrIntern, "btl tcp: epoll set: %w", err)
	}
	f := os.NewFile(uintptr(fd), fmt.Sprintf("btl-tcp-watch-%d", m.job.Rank))
	raw, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return mpierr.Errorf(mpierr.ErrIntern, "btl tcp: epoll set: %w", err)
	}
	m.wfd, m.wfile, m.wraw = fd, f, raw
	return nil
}

// closeWatch releases the set; the watcher's wait then fails and it ends.
// The caller holds progress.
func (m *module) closeWatch() {
	if m.wfile != nil {
		m.wfile.Close()
		m.wfile, m.wfd = nil, -1
	}
}

// watchAdd and watchDel keep the set equal to the incoming connections.
// The caller holds progress.
func (m *module) watchAdd(c *inConn) {
	if m.wfd >= 0 {
		ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP, Fd: c.fd}
		unix.EpollCtl(m.wfd, unix.EPOLL_CTL_ADD, int(c.fd), &ev)
	}
}

func (m *module) watchDel(c *inConn) {
	if m.wfd >= 0 {
		unix.EpollCtl(m.wfd, unix.EPOLL_CTL_DEL, int(c.fd), nil)
	}
}

// Arm is called by each goroutine of the process before it sleeps; the
// first one sets the watcher watching.
func (m *module) Arm() {
	if m.armed.Add(1) != 1 {
		return
	}
	m.watchOnce.Do(func() {
		m.wg.Add(1)
		go m.watch()
	})
	select {
	case m.armCh <- struct{}{}:
	default:
	}
}

// Disarm is called by each sleeper as it wakes.
func (m *module) Disarm() { m.armed.Add(-1) }

// watch waits, while armed, for a connection to become readable, and rings.
// A wait that began for an earlier sleep goes on across a disarm: the
// readiness that ends it is then ignored.
func (m *module) watch() {
	defer m.wg.Done()
	var ev [1]unix.EpollEvent
	done := m.ctx.Done()
	for {
		select {
		case <-m.armCh:
		case <-done:
			return
		}
		err := m.wraw.Read(func(fd uintptr) bool {
			if m.armed.Load() == 0 {
				return true
			}
			n, _ := unix.EpollWait(int(fd), ev[:], 0)
			return n > 0
		})
		if err != nil {
			return
		}
		m.bell.Ring()
	}
}
