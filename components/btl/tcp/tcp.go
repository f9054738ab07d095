// Package tcp is the TCP byte transfer layer: fragments to any rank whose
// published addresses this process can reach.
//
// # Connections
//
// One connection per pair of ranks carries both ranks' fragments, as Open
// MPI's btl tcp does: each segment then carries the acknowledgement of the
// last one the other way. With a connection per direction (this module
// before) the receiving side of each never sends data, so the kernel
// acknowledges every small segment with a segment of its own, sent from
// the reader's recv before it can answer: two segments per message instead
// of one, +2.1 µs per one-way 8-byte message in a C ping-pong on loopback
// (bench/tcptrace/tcp_conns.c), ~0.7 µs in gompi's. Connections are made
// lazily, by a goroutine started on the first Send to a peer that has not
// connected to us; fragments sent meanwhile wait in the endpoint's queue.
// A peer's connection that arrives first is taken for sending too (one
// that arrives before AddProcs waits as a spare for the first Send). When
// two ranks dial each other at once, the connection dialled by the lower
// rank is kept: the higher rank takes it (its own dial is then dropped or,
// if the lower rank accepted it all the same, only received from), and the
// lower rank answers the higher one's hello with a deferral. The choice is
// made before either side sends a fragment on either connection, and an
// endpoint never changes connection, so per-peer order is the order of one
// TCP stream.
//
// # Handshake
//
// The dialer sends a fixed-size hello (magic, version, job id, cookie, its
// rank, the rank it wants, the largest frame it will send); the acceptor
// checks every field, the cookie in constant time, and answers with its own
// hello, which the dialer checks in turn. Anything else (garbage, a short or
// slow hello, a wrong job, cookie or rank, a second connection from a rank
// already connected) is closed and logged at btl_base_verbose 10; the
// listener keeps serving. See wire.go for the formats.
//
// # Receiving: polling, not parking
//
// Progress polls every connection with one non-blocking read each
// (syscall.RawConn.Read with a function that reads once and returns true, so
// that the goroutine never parks in the netpoller: a wake-up costs more than
// the whole latency budget). Frames are length-checked against the maximum
// the sender announced before anything is allocated; a bad frame is a
// protocol error that closes the connection and reports the peer lost.
//
// # Sending and flow control
//
// Send writes the frame with one non-blocking sendmsg when nothing is queued
// for the peer; what the kernel does not take (or everything, while
// connecting or while earlier output waits) is copied to the endpoint's
// queue, bounded by btl_tcp_max_queued: when full, Send returns
// btl.ErrWouldBlock. Sendi never adds to a queue: it writes at once or
// refuses (only the tail of a frame the kernel took in part is kept, since
// bytes already sent cannot be withdrawn). Queued output is pushed by
// Progress and, so that it also drains while the caller is not progressing
// (a rank waiting in a barrier), by a per-connection goroutine that retries
// with a short, growing sleep: timers fire even when busy-polling goroutines
// keep the scheduler from polling the network.
//
// Every frame Send or Sendi accepts is counted with its bytes, by two
// atomic adds on its endpoint's counters; SendCounts (btl.SendCounter)
// sums them, for Instance.TransportStats.
//
// # Sleeping receivers
//
// The module is an rte.Watcher of its process's bell: while a waiting
// goroutine sleeps, a goroutine parked in the Go network poller on an epoll
// set of the incoming connections rings the bell when one of them becomes
// readable (watch.go). New connections and lost peers ring it too. A peer
// that is a goroutine rank of this process is rung directly after each send
// instead: a busy process reads the network poller only every 10 ms.
//
// # Lost peers
//
// A connection that ends without the peer's goodbye frame, a write error, a
// failed connect or a protocol error marks the peer lost: its endpoint fails
// every later Send with an error wrapping btl.ErrPeerLost, its queue is
// dropped, and the next Progress tells the RegisterError callback, once.
// Progress reads every connection, so a peer that only ever received from
// us is noticed too. An endpoint that fails shuts its connection down
// rather than closing it: Progress, which reads the descriptor itself,
// alone closes connections. At
// Finalize a module drains its queues (for a bounded time), says goodbye on
// every connection and closes them; a peer's goodbye is not an error.
package tcp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gompi/gompi/frameworks/btl"
	"github.com/gompi/gompi/mca"
	"github.com/gompi/gompi/mpierr"
	"github.com/gompi/gompi/params"
	"github.com/gompi/gompi/rte"
	"github.com/gompi/gompi/rte/handshakes"
)

// Component is the tcp BTL component.
type Component struct {
	common           btl.CommonParams
	ifInclude        *params.Param
	ifExclude        *params.Param
	disableFamily    *params.Param
	portMin          *params.Param
	portRange        *params.Param
	sndbuf, rcvbuf   *params.Param
	maxQueued        *params.Param
	handshakeTimeout *params.Param
	maxPending       *params.Param
	epollThreshold   *params.Param
	quickAckMin      *params.Param
	quickAckStream   *params.Param
}

// Info describes the component.
func (c *Component) Info() mca.Info {
	return mca.Info{Framework: "btl", Name: "tcp", Version: mca.GompiVersion, API: btl.Framework.API}
}

// Register declares the component's parameters.
func (c *Component) Register(r *mca.Registrar) {
	// A large max_send_size pays: on loopback, 1 MiB fragments stream at
	// ~1.6x the rate of Open MPI's 128 KiB (fewer, larger sendmsg calls);
	// tcp has no RDMA, so every large message moves as fragments.
	// A small first fragment of a rendezvous pays too: the receiver's
	// answer comes back before 64 KiB have crossed, and the rest streams
	// (256 KiB ping-pong, far placement: 144 µs with 4 KiB, 172 with the
	// 64 KiB eager limit, Open MPI 142).
	c.common = btl.RegisterCommon(r, "tcp", btl.Defaults{
		Exclusivity: 100, EagerLimit: 64 << 10, RndvEagerLimit: 4 << 10, MaxSendSize: 1 << 20, Latency: 10, Bandwidth: 10000,
	})
	c.ifInclude = r.Add(params.Def{Name: "btl_tcp_if_include", Type: params.List, Level: 1, Default: "",
		Help: "Comma-separated interface names and/or CIDR networks to use (e.g. \"eth0,192.168.0.0/16\"); mutually exclusive with btl_tcp_if_exclude. Empty: every interface that is up, loopback included"})
	c.ifExclude = r.Add(params.Def{Name: "btl_tcp_if_exclude", Type: params.List, Level: 1, Default: "",
		Help: "Comma-separated interface names and/or CIDR networks not to use (e.g. \"lo,10.0.0.0/8\"); every other interface that is up is used. Mutually exclusive with btl_tcp_if_include"})
	c.disableFamily = r.Add(params.Def{Name: "btl_tcp_disable_family", Type: params.Enum, Level: 2, Default: "none",
		Values: []params.EnumValue{{Value: familyNone, Name: "none"}, {Value: familyIPv4, Name: "ipv4"}, {Value: familyIPv6, Name: "ipv6"}},
		Help:   "Address family not to use: none, ipv4 (4) or ipv6 (6)"})
	c.portMin = r.Add(params.Def{Name: "btl_tcp_port_min", Type: params.Int, Level: 2, Default: "0", Range: &params.Range{Min: 0, Max: 65535},
		Help: "Lowest port to listen on; 0 lets the kernel choose any free port"})
	c.portRange = r.Add(params.Def{Name: "btl_tcp_port_range", Type: params.Int, Level: 2, Default: "0", Range: &params.Range{Min: 0, Max: 65535},
		Help: "Number of ports tried from btl_tcp_port_min; 0 means up to port 65535. Ignored when btl_tcp_port_min is 0"})
	c.sndbuf = r.Add(params.Def{Name: "btl_tcp_sndbuf", Type: params.Size, Level: 4, Default: "0",
		Help: "Socket send buffer size (SO_SNDBUF) of each connection; 0 leaves the kernel's automatic sizing"})
	c.rcvbuf = r.Add(params.Def{Name: "btl_tcp_rcvbuf", Type: params.Size, Level: 4, Default: "0",
		Help: "Socket receive buffer size (SO_RCVBUF) of each connection; 0 leaves the kernel's automatic sizing"})
	c.maxQueued = r.Add(params.Def{Name: "btl_tcp_max_queued", Type: params.Size, Level: 5, Default: "4m",
		Help: "Bytes that may wait in the output queue to one peer before Send reports that it has no room (flow control); one fragment is always accepted into an empty queue"})
	c.handshakeTimeout = r.Add(params.Def{Name: "btl_tcp_handshake_timeout", Type: params.Int, Level: 5, Default: "5000", Range: &params.Range{Min: 1, Max: 600000},
		Help: "Milliseconds allowed for connecting and for the handshake of a connection, both ways; a connection that has not completed its handshake by then is closed"})
	c.maxPending = r.Add(params.Def{Name: "btl_tcp_max_pending_handshakes", Type: params.Int, Level: 6, Default: "256", Range: &params.Range{Min: 1, Max: 65536},
		Help: "Accepted connections that may be waiting for their handshake at once; beyond it the oldest that has waited a sixteenth of btl_tcp_handshake_timeout (at most 250 ms) is closed, or the listener waits, so that silent strangers cannot hold the process's descriptors"})
	c.epollThreshold = r.Add(params.Def{Name: "btl_tcp_epoll_threshold", Type: params.Int, Level: 9, Default: "4", Range: &params.Range{Min: 0, Max: 1 << 20},
		Help: "Number of incoming connections from which Progress finds those with data with one epoll_wait rather than one read per connection; 0: never"})
	c.quickAckMin = r.Add(params.Def{Name: "btl_tcp_quickack_min", Type: params.Size, Level: 9, Default: "64k",
		Help: "Frames of at least this many bytes are acknowledged by the kernel segment by segment (TCP_QUICKACK, once per frame) instead of after a delay for an answer to carry the acknowledgement; 0: never"})
	c.quickAckStream = r.Add(params.Def{Name: "btl_tcp_quickack_stream_min", Type: params.Size, Level: 9, Default: "512k",
		Help: "Payloads of at least this many bytes read straight into place ask for quick acknowledgements (TCP_QUICKACK) before every read, which keeps a large transfer's sender going at a system call per read; 0: never"})
}

// config is a module's reading of its parameters.
type config struct {
	maxQueued        int
	handshakeTimeout time.Duration
	maxPending       int
	sndbuf, rcvbuf   int
	portMin, portMax int // portMin 0: any port
	disabledFamily   int
	epollMin         int // 0: never
	quickAckMin      int // 0: never
	quickAckStream   int // 0: never
}

const maxSocketBuffer = 1 << 30

func (c *Component) config(b *mca.Base) (config, error) {
	cfg := config{
		maxQueued:        int(min(b.Get(c.maxQueued).Uint(), 1<<40)),
		handshakeTimeout: time.Duration(b.Get(c.handshakeTimeout).Int()) * time.Millisecond,
		maxPending:       int(b.Get(c.maxPending).Int()),
		portMin:          int(b.Get(c.portMin).Int()),
		disabledFamily:   int(b.Get(c.disableFamily).Int()),
		epollMin:         int(b.Get(c.epollThreshold).Int()),
		quickAckMin:      int(min(b.Get(c.quickAckMin).Uint(), maxFrameMax)),
		quickAckStream:   int(min(b.Get(c.quickAckStream).Uint(), maxFrameMax)),
	}
	for _, s := range []struct {
		p   *params.Param
		dst *int
	}{{c.sndbuf, &cfg.sndbuf}, {c.rcvbuf, &cfg.rcvbuf}} {
		v := b.Get(s.p)
		if v.Uint() > maxSocketBuffer {
			return cfg, mpierr.Errorf(mpierr.ErrUnsupportedParam, "%s: accepted: 0 (the kernel's sizing) to %d bytes",
				describe(s.p.Name(), v), maxSocketBuffer)
		}
		*s.dst = int(v.Uint())
	}
	if cfg.portMin > 0 {
		n := int(b.Get(c.portRange).Int())
		cfg.portMax = 65535
		if n > 0 {
			cfg.portMax = cfg.portMin + n - 1
		}
		if cfg.portMax > 65535 {
			return cfg, mpierr.Errorf(mpierr.ErrUnsupportedParam,
				"%s with %s reaches port %d: accepted: btl_tcp_port_min + btl_tcp_port_range - 1 at most 65535",
				describe(c.portRange.Name(), b.Get(c.portRange)), describe(c.portMin.Name(), b.Get(c.portMin)), cfg.portMax)
		}
	}
	return cfg, nil
}

// Query selects the interfaces, starts listening on them and publishes the
// business card. It declines when no interface has a usable address (and
// none was asked for by name).
func (c *Component) Query(b *mca.Base, rt *rte.Runtime) (btl.Module, error) {
	log := b.Logger("btl").Named("tcp")
	attr, err := c.common.Attributes(b, "tcp", 0)
	if err != nil {
		return nil, err
	}
	cfg, err := c.config(b)
	if err != nil {
		return nil, err
	}
	ifaces, err := systemInterfaces()
	if err != nil {
		return nil, err
	}
	sel, err := selectAddrs(ifaces, c.ifInclude.Name(), b.Get(c.ifInclude), c.ifExclude.Name(), b.Get(c.ifExclude), cfg.disabledFamily)
	if err != nil {
		return nil, err
	}
	if len(sel.unknownExclude) > 0 {
		log.Log(mca.VerboseComponent, "btl_tcp_if_exclude names interfaces that do not exist",
			"names", strings.Join(sel.unknownExclude, ","), "interfaces", interfaceNames(ifaces))
	}
	if len(sel.addrs) == 0 {
		return nil, mca.Decline("no network interface has a usable address (interfaces: %s)", interfaceNames(ifaces))
	}
	if rt.Job().Size == 1 {
		// Nobody to talk to: no listeners for a singleton (the parameters
		// above were still checked, so that a mistake shows at once).
		return nil, mca.Decline("the job has no other process")
	}
	m := newModule(attr, cfg, rt, log)
	if err := m.openWatch(); err != nil {
		m.shutdown(false)
		return nil, err
	}
	if err := m.listen(sel.addrs); err != nil {
		m.shutdown(false)
		return nil, err
	}
	var cd card
	for _, ln := range m.listeners {
		cd.addrs = append(cd.addrs, ln.Addr().(*net.TCPAddr).AddrPort())
	}
	// Without a namespace, peers use loopback to reach this process only
	// when they are on its node.
	ns, nsErr := thisNetNS()
	if nsErr == nil {
		m.ns, cd.ns = ns, ns
	}
	if err := rt.Modex().PutProc(cardKey, encodeCard(cd)); err != nil {
		m.shutdown(false)
		return nil, err
	}
	if log.V(mca.VerboseComponent) {
		var shown []string
		for _, ap := range cd.addrs {
			shown = append(shown, ap.String())
		}
		log.Log(mca.VerboseComponent, "listening", "addresses", strings.Join(shown, ","), "namespace", m.ns.String())
		if nsErr != nil {
			log.Log(mca.VerboseComponent, "network namespace unknown; peers use loopback by node", "error", nsErr)
		}
	}
	for _, ln := range m.listeners {
		m.wg.Add(1)
		go m.acceptLoop(ln)
	}
	rt.Bell().Watch(m)
	return m, nil
}

// module is the tcp BTL of one instance.
type module struct {
	attr btl.Attributes
	cfg  config
	id   identity
	job  *rte.Job
	mdx  *rte.Modex
	log  *mca.Logger
	cb   btl.Callbacks
	// steers are the PML's btl.Steers, by tag.
	steers [256]atomic.Pointer[btl.Steer]

	local     []localAddr
	listeners []*net.TCPListener
	ns        netNS // this process's network namespace, as published; zero: unknown

	ctx     context.Context // cancelled when the module shuts down
	cancel  context.CancelFunc
	closing atomic.Bool // set once, by Finalize or a test's crash
	wg      sync.WaitGroup
	chunks  sync.Pool // *[]byte of cap chunkSize, for send queues

	eps atomic.Pointer[[]*endpoint] // by rank, set by AddProcs

	// The receive side belongs to whoever holds progress.
	progress sync.Mutex
	in       []*inConn
	nIn      atomic.Int32 // len(in), for the lock-free idle check
	received uint64       // frames delivered (tests)
	placed   uint64       // of them, payloads read straight into place (btl.Steer; tests)
	epfd     int          // -1 until there are btl_tcp_epoll_threshold connections
	byFD     map[int32]*inConn
	events   [64]unix.EpollEvent

	inMu         sync.Mutex
	adopt        []*inConn         // handshaken, not yet polled
	adoptPending atomic.Bool       // adopt is not empty
	from         map[int]bool      // ranks whose connection to us we accepted
	spare        map[int]spareConn // peers' connections accepted before AddProcs, for the first Send
	handshakes   *handshakes.Set   // accepted, handshake under way

	outPending atomic.Int32 // endpoints with queued output

	lostMu      sync.Mutex
	gone        map[int]bool // ranks lost or finalized: reported at most once
	lostQ       []lostPeer
	lostPending atomic.Bool

	rejected atomic.Int64 // connections refused at the handshake
	deferred atomic.Int64 // peers' connections declined for our own (placeIncoming)

	// Waking a sleeping process (watch.go).
	bell      *rte.Bell
	armed     atomic.Int32
	armCh     chan struct{}
	watchOnce sync.Once
	wfd       int      // epoll set of the incoming connections, level-triggered; -1 without
	wfile     *os.File // wfd, parked on by the watcher through the Go network poller
	wraw      syscall.RawConn
}

type lostPeer struct {
	rank int
	err  error
}

func newModule(attr btl.Attributes, cfg config, rt *rte.Runtime, log *mca.Logger) *module {
	job := rt.Job()
	ctx, cancel := context.WithCancel(context.Background())
	m := &module{
		attr: attr, cfg: cfg, job: job, mdx: rt.Modex(), log: log,
		id: identity{
			job: jobTag(job.ID), checkCookie: job.CheckCookie, cookie: job.Cookie,
			rank: job.Rank, size: job.Size,
		},
		ctx: ctx, cancel: cancel, epfd: -1, wfd: -1, bell: rt.Bell(), armCh: make(chan struct{}, 1),
		from: map[int]bool{}, spare: map[int]spareConn{}, handshakes: handshakes.New(cfg.maxPending, cfg.handshakeTimeout), gone: map[int]bool{},
	}
	m.chunks.New = func() any { b := make([]byte, 0, chunkSize); return &b }
	return m
}

// chunkSize is the size of the pooled send-queue chunks; a larger piece of a
// frame gets a chunk of its own size, so that what a queue holds is what was
// queued.
const chunkSize = 64 << 10

// listen opens one listener per selected address.
func (m *module) listen(addrs []localAddr) error {
	var failures []string
	for _, la := range addrs {
		if len(m.listeners) == maxCardAddrs {
			m.log.Log(mca.VerboseComponent, "too many addresses; the rest are not used", "max", maxCardAddrs)
			break
		}
		ln, err := m.listenOne(la.addr())
		if err != nil {
			failures = append(failures, err.Error())
			m.log.Log(mca.VerboseComponent, "cannot listen", "address", la.addr(), "interface", la.iface, "error", err)
			continue
		}
		m.listeners = append(m.listeners, ln)
		m.local = append(m.local, la)
	}
	if len(m.listeners) == 0 {
		return mpierr.Errorf(mpierr.ErrIntern, "btl tcp: cannot listen on any selected address: %s", strings.Join(failures, "; "))
	}
	return nil
}

func (m *module) listenOne(a netip.Addr) (*net.TCPListener, error) {
	network := "tcp4"
	if familyOf(a) == familyIPv6 {
		network = "tcp6"
	}
	if m.cfg.portMin == 0 {
		return net.ListenTCP(network, net.TCPAddrFromAddrPort(netip.AddrPortFrom(a, 0)))
	}
	var last error
	for port := m.cfg.portMin; port <= m.cfg.portMax; port++ {
		ln, err := net.ListenTCP(network, net.TCPAddrFromAddrPort(netip.AddrPortFrom(a, uint16(port))))
		if err == nil {
			return ln, nil
		}
		last = err
	}
	return nil, fmt.Errorf("no free port in %d..%d (btl_tcp_port_min, btl_tcp_port_range) on %v: %w", m.cfg.portMin, m.cfg.portMax, a, last)
}

func (m *module) Attributes() btl.Attributes { return m.attr }

func (m *module) RegisterRecv(tag btl.Tag, fn btl.RecvFunc) { m.cb.RegisterRecv(tag, fn) }
func (m *module) RegisterError(fn btl.ErrorFunc)            { m.cb.RegisterError(fn) }

var (
	_ btl.Steerer     = (*module)(nil)
	_ btl.SendCounter = (*module)(nil)
)

// RegisterSteer makes the module a btl.Steerer: large payloads of tag's
// fragments are read straight into the place s says.
func (m *module) RegisterSteer(tag btl.Tag, s btl.Steer) {
	if s.HdrLen <= 0 || s.HdrLen > len(inConn{}.placeHdr) || s.Where == nil || s.Placed == nil {
		panic(fmt.Sprintf("btl tcp: a steer for tag 0x%02x needs a header of 1 to %d bytes, Where and Placed", uint8(tag), len(inConn{}.placeHdr)))
	}
	m.steers[tag].Store(&s)
}

// steerable says how much of a frame's body to read before offering it to
// its tag's Steer (the PML's header), or 0 when it is not offered: no
// steer, or a payload under its Min.
func (m *module) steerable(tag uint8, length int) int {
	if s := m.steers[tag].Load(); s != nil && length-s.HdrLen >= max(s.Min, 1) {
		return s.HdrLen
	}
	return 0
}

// AddProcs reads every other rank's business card and keeps the addresses
// this process can use. A rank without a card (its tcp BTL is not in use)
// or without a usable address is unreachable.
func (m *module) AddProcs(ranks []int) ([]btl.Endpoint, error) {
	out := make([]btl.Endpoint, len(ranks))
	eps := make([]*endpoint, m.job.Size)
	for i, r := range ranks {
		if r == m.job.Rank || r < 0 || r >= m.job.Size {
			continue
		}
		raw, err := m.mdx.GetProc(r, cardKey)
		if err != nil {
			if errors.Is(err, rte.ErrNotFound) {
				m.log.Log(mca.VerboseComponent, "peer published no tcp address; unreachable", "peer", r)
				continue
			}
			return nil, err
		}
		cd, err := parseCard(raw)
		if err != nil {
			return nil, fmt.Errorf("btl tcp: business card of rank %d: %w", r, err)
		}
		loopback, why := loopbackReaches(m.job.NodeOf[r] == m.job.NodeIndex, m.ns, cd.ns)
		cands := candidates(m.local, cd.addrs, loopback)
		if len(cands) == 0 {
			m.log.Log(mca.VerboseComponent, "no address of the peer is usable from here; unreachable",
				"peer", r, "addresses", fmt.Sprint(cd.addrs), "loopback", loopback, "because", why)
			continue
		}
		if m.log.V(mca.VerboseInfo) {
			m.log.Log(mca.VerboseInfo, "peer addresses", "peer", r, "best", cands[0].remote, "class", cands[0].class,
				"loopback", loopback, "because", why)
		}
		e := newEndpoint(m, r, cands)
		eps[r] = e
		out[i] = e
	}
	// Under inMu: a peer's connection accepted meanwhile either finds its
	// endpoint or is left as a spare that the endpoint's first Send finds.
	m.inMu.Lock()
	m.eps.Store(&eps)
	m.inMu.Unlock()
	return out, nil
}

// peerLost marks rank lost: its endpoint fails, and the next Progress tells
// the error callback. It does nothing for a rank already lost or finalized,
// or once this module is shutting down.
func (m *module) peerLost(rank int, err error) {
	if m.closing.Load() || m.isGone(rank) {
		return
	}
	// The endpoint fails before the report is queued: whoever hears of the
	// loss from Progress must find Send failing already.
	if e := m.endpoint(rank); e != nil {
		e.fail(err)
	}
	m.markLost(rank, err)
}

// markLost records rank as lost and queues the report; it reports whether
// the rank was not gone yet. It takes lostMu only, so an endpoint may call it
// under its own lock.
func (m *module) markLost(rank int, err error) bool {
	if m.closing.Load() {
		return false
	}
	m.lostMu.Lock()
	if m.gone[rank] {
		m.lostMu.Unlock()
		return false
	}
	m.gone[rank] = true
	m.lostQ = append(m.lostQ, lostPeer{rank, err})
	m.lostPending.Store(true)
	m.lostMu.Unlock()
	m.bell.Ring() // a sleeping wait must hear of it from Progress
	m.log.Log(mca.VerboseComponent, "peer lost", "peer", rank, "error", err)
	return true
}

// peerFinalized marks rank gone without an error: it said goodbye.
func (m *module) peerFinalized(rank int) {
	m.lostMu.Lock()
	already := m.gone[rank]
	m.gone[rank] = true
	m.lostMu.Unlock()
	if already {
		return
	}
	if m.log.V(mca.VerboseInfo) {
		m.log.Log(mca.VerboseInfo, "peer finalized", "peer", rank)
	}
	if e := m.endpoint(rank); e != nil {
		e.fail(fmt.Errorf("btl tcp: rank %d has finalized: %w", rank, btl.ErrPeerLost))
	}
}

func (m *module) isGone(rank int) bool {
	m.lostMu.Lock()
	defer m.lostMu.Unlock()
	return m.gone[rank]
}

func (m *module) endpoint(rank int) *endpoint {
	if p := m.eps.Load(); p != nil && rank >= 0 && rank < len(*p) {
		return (*p)[rank]
	}
	return nil
}

// reportLost tells the error callback of the peers lost since the last call.
// The caller holds progress.
func (m *module) reportLost() {
	m.lostMu.Lock()
	q := m.lostQ
	m.lostQ = nil
	m.lostPending.Store(false)
	m.lostMu.Unlock()
	for _, l := range q {
		m.cb.Lost(l.rank, l.err)
	}
}

// configure sets the options of a new connection.
func (m *module) configure(c *net.TCPConn) {
	// Go sets TCP_NODELAY on every TCP connection already; say so anyway,
	// since small fragments must never wait for Nagle.
	c.SetNoDelay(true)
	if m.cfg.sndbuf > 0 {
		c.SetWriteBuffer(m.cfg.sndbuf)
	}
	if m.cfg.rcvbuf > 0 {
		c.SetReadBuffer(m.cfg.rcvbuf)
	}
}

// finalizeDrain bounds how long Finalize waits for queued output to leave.
const finalizeDrain = 5 * time.Second

// Finalize drains the queues, says goodbye on every connection, closes
// everything and waits for the module's goroutines.
func (m *module) Finalize() error {
	m.shutdown(true)
	m.wg.Wait()
	return nil
}

// shutdown closes the module once: gracefully (drain, goodbye) for
// Finalize, abruptly (as if the process died) for a test's crash.
func (m *module) shutdown(graceful bool) {
	if !m.closing.CompareAndSwap(false, true) {
		return
	}
	m.bell.Unwatch(m)
	m.cancel()
	for _, ln := range m.listeners {
		ln.Close()
	}
	deadline := time.Now().Add(finalizeDrain)
	if p := m.eps.Load(); p != nil {
		for _, e := range *p {
			if e != nil {
				e.close(graceful, deadline)
			}
		}
	}
	m.progress.Lock()
	m.inMu.Lock()
	all := append(m.in, m.adopt...)
	m.in, m.adopt = nil, nil
	m.handshakes.Close()
	m.inMu.Unlock()
	for _, c := range all {
		c.close(graceful)
	}
	m.stopEpoll()
	m.closeWatch()
	m.progress.Unlock()
}
