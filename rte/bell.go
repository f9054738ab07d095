package rte

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gompi/gompi/mpierr"
)

// A Bell lets the goroutines of a process that wait for communication sleep
// until something they may be waiting for happens, so that a rank with
// nothing to do gives its core to the ranks that have work (oversubscribed
// nodes) at no cost, and still wakes within tens of microseconds.
//
// # Who rings
//
//   - Peers of the same node. A transport whose peers write into this
//     process's memory (btl shm, llp tofu) registers a Watcher. While a
//     goroutine sleeps, the watchers are armed: each sets a word in its own
//     shared control segment that its peers load after every message they
//     write; a peer that finds it set calls its own Bell's RingPeer, which
//     sends one datagram to this process's socket, "@gompi-<job>-bell-<rank>"
//     in the abstract Unix namespace (no file, nothing to clean up). A
//     goroutine blocked in the Go network poller reads it and rings. Peers
//     that are goroutine ranks of this same process (tests) ring each other
//     directly through a Neighborhood instead.
//   - Transports the kernel tells about (btl tcp): when armed, a goroutine
//     parked in the network poller on the incoming connections rings.
//   - This process: a goroutine whose progress moved something, a request
//     completed for another goroutine, a fragment queued to oneself, the
//     launcher's answer to a barrier, the loss of the job. Ring costs one
//     atomic load when nobody sleeps.
//
// # No lost wake-up
//
// Sleep arms the watchers, then calls ready, the caller's last look for
// work, then blocks. A ringer publishes first (the message in the ring, the
// request's flag), then loads the armed word. With Go's atomics, which are
// sequentially consistent, either the ringer sees the word set and rings,
// or the sleeper's last look sees what was published. The transports
// publish with package release's plain store instead (a fence would cost
// every message a cache-line round trip), whose load of the armed word may
// pass the store: so a sleep looks once more after settleFor, when such a
// store has landed. Within the process the same holds for the sleeper
// count that Ring loads.
//
// Sleep also ends after a bounded time by itself, so that a peer that died
// without ringing is noticed by the caller's next progress.
type Bell struct {
	name  string // our socket's name
	local bool   // no socket: only this process rings
	job   string
	rank  int
	lost  <-chan struct{}
	hood  *Neighborhood

	sleepers atomic.Int32
	// bgArmed: the watchers are armed for a background goroutine
	// (ArmBackground), which rings reach through bg.
	bgArmed atomic.Bool
	bg      chan struct{}
	mu      sync.Mutex
	gen     chan struct{} // closed by the next ring; nil when nobody waits on it

	watchers atomic.Pointer[[]Watcher]
	wmu      sync.Mutex

	openOnce sync.Once
	openErr  error
	conn     *net.UnixConn
	raw      syscall.RawConn
	closed   atomic.Bool

	nSleeps, nRung, nTimeouts, nRingsSent atomic.Uint64
}

// A Watcher is a transport that wakes a sleeping process when something
// arrives through it. Arm is called by each goroutine that is about to
// sleep, before its last look for work; from Arm's return until its Disarm,
// anything that arrives through the transport must ring the bell (a peer's
// RingPeer, or Ring from within the process). Arms nest: two sleeping
// goroutines arm twice and disarm twice. Both are called often and must be
// cheap: a store or two.
type Watcher interface {
	Arm()
	Disarm()
}

// Neighborhood lets goroutine ranks of one process (mpitest) ring each other
// directly, without the kernel: a datagram between them would be read only
// when the Go scheduler next polls the network, which a process busy with
// other ranks does only every 10 ms. A launcher of goroutine ranks makes one
// per job and passes it in Options; processes have none.
//
// It also holds what components share among the goroutine ranks of the
// process (Shared): mappings of the same shared-memory file, for one.
type Neighborhood struct {
	mu     sync.RWMutex
	bells  map[int]*Bell
	shared map[any]any
}

// NewNeighborhood makes an empty neighborhood.
func NewNeighborhood() *Neighborhood {
	return &Neighborhood{bells: map[int]*Bell{}, shared: map[any]any{}}
}

// Shared returns the value the goroutine ranks of the process share under
// key, made by mk at the first call; nil without a neighborhood (one rank
// per process shares with nobody). Keys are the callers' own types, as
// context keys are.
func (n *Neighborhood) Shared(key any, mk func() any) any {
	if n == nil {
		return nil
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	v, ok := n.shared[key]
	if !ok {
		v = mk()
		n.shared[key] = v
	}
	return v
}

func (n *Neighborhood) join(rank int, b *Bell) {
	n.mu.Lock()
	n.bells[rank] = b
	n.mu.Unlock()
}

func (n *Neighborhood) leave(rank int, b *Bell) {
	n.mu.Lock()
	if n.bells[rank] == b {
		delete(n.bells, rank)
	}
	n.mu.Unlock()
}

func (n *Neighborhood) bell(rank int) *Bell {
	if n == nil {
		return nil
	}
	n.mu.RLock()
	defer n.mu.RUnlock()
	return n.bells[rank]
}

// Wake says why Sleep returned.
type Wake int

const (
	// WakeReady: the caller's last look found work; Sleep did not block.
	WakeReady Wake = iota
	// WakeRung: the bell rang.
	WakeRung
	// WakeTimeout: the longest sleep passed.
	WakeTimeout
	// WakeDone: the context ended.
	WakeDone
	// WakeLost: the job was lost.
	WakeLost
)

func (w Wake) String() string {
	return [...]string{"ready", "rung", "timeout", "done", "lost"}[w]
}

// BellStats count a bell's sleeps and how they ended.
type BellStats struct {
	// Sleeps counts the times a goroutine blocked; Rung those ended by a
	// ring, Timeouts those that reached the longest sleep.
	Sleeps, Rung, Timeouts uint64
	// RingsSent counts the datagrams sent to wake sleeping peers.
	RingsSent uint64
}

// NewBell makes the bell of rank in job. lost (may be nil) is closed when
// the job is lost; hood (may be nil) holds the goroutine ranks of this
// process. Its socket is made when first needed.
func NewBell(job string, rank int, lost <-chan struct{}, hood *Neighborhood) *Bell {
	b := &Bell{job: job, rank: rank, lost: lost, hood: hood, name: bellName(job, rank), bg: make(chan struct{}, 1)}
	empty := []Watcher{}
	b.watchers.Store(&empty)
	if hood != nil {
		hood.join(rank, b)
	}
	return b
}

// NewLocalBell makes a bell that only this process rings: no socket, no
// peers, for a layer tested alone.
func NewLocalBell(lost <-chan struct{}) *Bell {
	b := &Bell{local: true, lost: lost, bg: make(chan struct{}, 1)}
	empty := []Watcher{}
	b.watchers.Store(&empty)
	return b
}

func bellName(job string, rank int) string { return fmt.Sprintf("@gompi-%s-bell-%d", job, rank) }

// Watch registers a watcher, before the transport carries traffic.
func (b *Bell) Watch(w Watcher) {
	b.wmu.Lock()
	defer b.wmu.Unlock()
	ws := append(append([]Watcher{}, *b.watchers.Load()...), w)
	b.watchers.Store(&ws)
}

// Unwatch removes a watcher, when its transport finalizes (before it
// releases what Arm writes to).
func (b *Bell) Unwatch(w Watcher) {
	b.wmu.Lock()
	defer b.wmu.Unlock()
	var ws []Watcher
	for _, x := range *b.watchers.Load() {
		if x != w {
			ws = append(ws, x)
		}
	}
	b.watchers.Store(&ws)
}

// Sleeping reports whether a goroutine of this process sleeps on the bell.
func (b *Bell) Sleeping() bool { return b.sleepers.Load() != 0 }

// Ring wakes the goroutines sleeping on the bell; it costs one atomic load
// when none does. Call it after publishing what a sleeper may wait for. A
// nil bell rings nobody.
func (b *Bell) Ring() {
	if b == nil {
		return
	}
	if b.sleepers.Load() != 0 {
		b.wake()
	}
	if b.bgArmed.Load() {
		select {
		case b.bg <- struct{}{}:
		default:
		}
	}
}

// ArmBackground arms the watchers for a goroutine that does not sleep in
// Sleep but waits on Background's channel (package mpi's progress
// goroutine, while the program computes with nonblocking collectives in
// flight): from its return until DisarmBackground, what arrives through the
// transports, and any Ring, sends on that channel. The armer then looks for
// what arrived before (no lost wake-up, as for Sleep). Arming twice is
// arming once. An error says that the bell cannot be woken from outside.
func (b *Bell) ArmBackground() error {
	if err := b.open(); err != nil {
		return err
	}
	if b.bgArmed.CompareAndSwap(false, true) {
		for _, w := range *b.watchers.Load() {
			w.Arm()
		}
	}
	return nil
}

// DisarmBackground undoes ArmBackground (nothing when not armed): the
// program is back in a call that progresses by itself.
func (b *Bell) DisarmBackground() {
	if b.bgArmed.CompareAndSwap(true, false) {
		for _, w := range *b.watchers.Load() {
			w.Disarm()
		}
	}
}

// BackgroundArmed reports whether ArmBackground is in force.
func (b *Bell) BackgroundArmed() bool { return b.bgArmed.Load() }

// Background is the channel that rings reach while ArmBackground is in
// force; one pending ring is kept.
func (b *Bell) Background() <-chan struct{} { return b.bg }

func (b *Bell) wake() {
	b.mu.Lock()
	if b.gen != nil {
		close(b.gen)
		b.gen = nil
	}
	b.mu.Unlock()
}

// RingPeer wakes rank, a peer of this node that a watcher of its found
// sleeping: directly when it is a goroutine rank of this process, otherwise
// with a datagram to its socket. A peer that is gone or not listening is
// not an error: it was not asleep, or will never need waking.
func (b *Bell) RingPeer(rank int) {
	if p := b.hood.bell(rank); p != nil {
		p.Ring()
		return
	}
	if b.local || b.open() != nil {
		return
	}
	addr := &unix.SockaddrUnix{Name: bellName(b.job, rank)}
	b.raw.Write(func(fd uintptr) bool {
		// One byte, never waiting: a full socket already holds a ring.
		if unix.Sendto(int(fd), []byte{1}, unix.MSG_DONTWAIT, addr) == nil {
			b.nRingsSent.Add(1)
		}
		return true
	})
}

// Neighbor returns the bell of rank when it is a goroutine rank of this
// process, nil otherwise. Transports whose peers cannot arm a shared word
// (tcp) ring it after each send: the kernel's wake-up of a busy process
// waits for the Go scheduler's next network poll, up to 10 ms.
func (b *Bell) Neighbor(rank int) *Bell { return b.hood.bell(rank) }

// open binds the bell's socket and starts the goroutine that turns
// datagrams into rings. Until it runs, peers' datagrams are refused, which
// is fine: only armed watchers make peers ring, and Sleep opens first.
func (b *Bell) open() error {
	b.openOnce.Do(func() {
		if b.local {
			return
		}
		if b.closed.Load() {
			b.openErr = mpierr.Errorf(mpierr.ErrOther, "rte: bell of rank %d used after Close", b.rank)
			return
		}
		conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: b.name, Net: "unixgram"})
		if err != nil {
			b.openErr = mpierr.Errorf(mpierr.ErrIntern, "rte: the wake-up socket %s: %w", b.name, err)
			return
		}
		raw, err := conn.SyscallConn()
		if err != nil {
			conn.Close()
			b.openErr = mpierr.Errorf(mpierr.ErrIntern, "rte: the wake-up socket %s: %w", b.name, err)
			return
		}
		b.conn, b.raw = conn, raw
		go b.listen()
	})
	return b.openErr
}

func (b *Bell) listen() {
	var buf [16]byte
	for {
		if _, err := b.conn.Read(buf[:]); err != nil {
			if b.closed.Load() || errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		b.Ring()
	}
}

// settleFor is when a sleep looks once more: later than a store can wait in
// a store buffer (a cache-line round trip or a few, 60–300 ns here), with
// margin. Sleeping rather than polling until then keeps a wait with no
// spin budget (mpi_wait_spin_us and mpi_wait_yield_us 0) a sleep at once,
// off the core.
const settleFor = 10 * time.Microsecond

// Sleep blocks the calling goroutine until the bell rings, ctx (which may
// be nil) ends, the job is lost, or max passes. It first arms the watchers
// and calls ready, the caller's last look for work (its progress and its
// condition): when ready returns true it returns WakeReady at once, and
// again when it does after settleFor of the sleep. An error says that
// sleeping is not possible here (the socket could not be made); the caller
// should then only yield.
func (b *Bell) Sleep(ctx context.Context, max time.Duration, ready func() bool) (Wake, error) {
	if err := b.open(); err != nil {
		return WakeReady, err
	}
	b.mu.Lock()
	if b.gen == nil {
		b.gen = make(chan struct{})
	}
	ch := b.gen
	b.mu.Unlock()

	b.sleepers.Add(1)
	ws := *b.watchers.Load()
	for _, w := range ws {
		w.Arm()
	}
	defer func() {
		for _, w := range ws {
			w.Disarm()
		}
		b.sleepers.Add(-1)
	}()
	if ready() {
		return WakeReady, nil
	}
	var done <-chan struct{}
	if ctx != nil {
		done = ctx.Done()
	}
	b.nSleeps.Add(1)
	// A peer publishes with a plain store (package release) and then
	// loads the armed word; its load may be served before its store
	// leaves its core, while this goroutine arms and looks, and each then
	// misses the other. Such a store lands once the peer's store buffer
	// drains: the sleep's first settleFor ends in one more look.
	settled := settleFor >= max
	t := time.NewTimer(min(settleFor, max))
	defer t.Stop()
	for {
		select {
		case <-ch:
			b.nRung.Add(1)
			return WakeRung, nil
		case <-t.C:
			if !settled {
				settled = true
				if ready() {
					return WakeReady, nil
				}
				t.Reset(max - settleFor)
				continue
			}
			b.nTimeouts.Add(1)
			return WakeTimeout, nil
		case <-done:
			return WakeDone, nil
		case <-b.lost:
			return WakeLost, nil
		}
	}
}

// Stats returns the bell's counters.
func (b *Bell) Stats() BellStats {
	return BellStats{Sleeps: b.nSleeps.Load(), Rung: b.nRung.Load(), Timeouts: b.nTimeouts.Load(), RingsSent: b.nRingsSent.Load()}
}

// Close releases the socket and leaves the neighborhood; sleepers are woken.
func (b *Bell) Close() error {
	if !b.closed.CompareAndSwap(false, true) {
		return nil
	}
	b.hood.leaveIfSet(b.rank, b)
	b.wake()
	b.openOnce.Do(func() { b.openErr = mpierr.Errorf(mpierr.ErrOther, "rte: bell closed") })
	if b.conn != nil {
		return b.conn.Close()
	}
	return nil
}

func (n *Neighborhood) leaveIfSet(rank int, b *Bell) {
	if n != nil {
		n.leave(rank, b)
	}
}
