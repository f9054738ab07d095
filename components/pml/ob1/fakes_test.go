package ob1_test

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gompi/gompi/frameworks/btl"
	"github.com/gompi/gompi/frameworks/llp"
	"github.com/gompi/gompi/mca"
	"github.com/gompi/gompi/mpierr"
	"github.com/gompi/gompi/params"
	"github.com/gompi/gompi/rte"
)

// Two test-only components for goroutine ranks, linked into this test
// binary only and off unless a test enables them:
//
//   - llp "testllp": an LLP that accepts or refuses by rule
//     (llp_testllp_refuse_every: every n-th attempt is refused) and holds
//     what it received for a few progress calls, then delivers it in
//     reverse order, so that LLP messages arrive after, and out of order
//     with, the BTL messages sent after them.
//   - btl "tloop": an in-process BTL with a small queue per receiver (flow
//     control), RDMA Get that works, is refused (btl.ErrNoRDMA) or fails
//     (btl_tloop_get = ok | refuse | fail | lost: the peer is lost | slow:
//     btl_tloop_slow_ms a read), a pipelined range (btl_tloop_pipeline_limit),
//     sends of large payloads made slow (btl_tloop_slow_payload: as long
//     from that many bytes), and a way to lose a rank.
//
// The ranks of one job find each other through the component value, which
// every instance in the process shares, by job id.
//
// A second copy of the BTL, "tloopb", with the same exclusivity, gives every
// peer two routes, so that ob1 stripes eager messages over both.
var (
	theLLP  = &testLLP{hubs: map[string]*llpHub{}}
	theBTL  = &tloop{name: "tloop", hubs: map[string]*tloopHub{}}
	theBTL2 = &tloop{name: "tloopb", hubs: map[string]*tloopHub{}}
)

func init() { mca.Register(theLLP); mca.Register(theBTL); mca.Register(theBTL2) }

type testLLP struct {
	enable, refuseEvery, hold, peek *params.Param
	mu                              sync.Mutex
	hubs                            map[string]*llpHub
}

type llpHub struct {
	mu   sync.Mutex
	mods map[int]*llpMod
}

func (c *testLLP) Info() mca.Info {
	return mca.Info{Framework: "llp", Name: "testllp", Version: mca.Version{Major: 0, Minor: 0, Patch: 1}, API: llp.Framework.API}
}

func (c *testLLP) Register(r *mca.Registrar) {
	c.enable = r.Add(params.Def{Name: "llp_testllp_enable", Type: params.Bool, Level: 9, Default: "false", Help: "test only"})
	c.refuseEvery = r.Add(params.Def{Name: "llp_testllp_refuse_every", Type: params.Uint, Level: 9, Default: "0", Help: "test only"})
	c.hold = r.Add(params.Def{Name: "llp_testllp_hold", Type: params.Uint, Level: 9, Default: "3", Help: "test only"})
	c.peek = r.Add(params.Def{Name: "llp_testllp_peek", Type: params.Bool, Level: 9, Default: "false", Help: "test only"})
}

// peeks returns how often the receive fast path of rank in job peeked at
// the test LLP (llp_testllp_peek).
func (c *testLLP) peeks(job string, rank int) int64 {
	c.mu.Lock()
	hub := c.hubs[job]
	c.mu.Unlock()
	hub.mu.Lock()
	defer hub.mu.Unlock()
	return hub.mods[rank].peeks.Load()
}

func (c *testLLP) Query(b *mca.Base, rt *rte.Runtime) (llp.Module, error) {
	if !b.Get(c.enable).Bool() {
		return nil, mca.Decline("test component, off")
	}
	c.mu.Lock()
	hub := c.hubs[rt.Job().ID]
	if hub == nil {
		hub = &llpHub{mods: map[int]*llpMod{}}
		c.hubs[rt.Job().ID] = hub
	}
	c.mu.Unlock()
	m := &llpMod{hub: hub, rank: rt.Job().Rank, size: rt.Job().Size,
		refuseEvery: b.Get(c.refuseEvery).Uint(), hold: max(1, int(b.Get(c.hold).Uint()))}
	hub.mu.Lock()
	hub.mods[m.rank] = m
	hub.mu.Unlock()
	if b.Get(c.peek).Bool() {
		return blindPeeker{m}, nil
	}
	return m, nil
}

// blindPeeker is the test LLP with llp.MessagePeeker, so that ob1's receive
// fast path polls it; its Peek finds nothing (messages still come through
// Progress) and counts the looks.
type blindPeeker struct{ *llpMod }

func (p blindPeeker) Peek(int) ([]byte, bool) { p.peeks.Add(1); return nil, false }
func (p blindPeeker) Done(int, bool)          {}

type llpMsg struct {
	src  int
	data []byte
}

type llpMod struct {
	hub               *llpHub
	rank, size        int
	refuseEvery       uint64
	hold              int
	fn                llp.RecvFunc
	attempts, refused atomic.Uint64
	peeks             atomic.Int64

	mu    sync.Mutex
	inbox []llpMsg

	progress sync.Mutex
	polls    int
}

func (m *llpMod) Name() string { return "testllp" }

func (m *llpMod) AddProcs(ranks []int) ([]bool, error) {
	out := make([]bool, len(ranks))
	for i := range out {
		out[i] = true
	}
	return out, nil
}

func (m *llpMod) RegisterRecv(fn llp.RecvFunc) { m.fn = fn }

func (m *llpMod) Send(peer int, hdr, payload []byte) error {
	if peer == m.rank {
		panic("testllp: ob1 offered a send to oneself")
	}
	if n := m.attempts.Add(1); m.refuseEvery > 0 && n%m.refuseEvery == 0 {
		m.refused.Add(1)
		return llp.ErrNotAvailable
	}
	m.hub.mu.Lock()
	dst := m.hub.mods[peer]
	m.hub.mu.Unlock()
	data := append(append([]byte(nil), hdr...), payload...)
	dst.mu.Lock()
	dst.inbox = append(dst.inbox, llpMsg{m.rank, data})
	dst.mu.Unlock()
	return nil
}

func (m *llpMod) Progress() int {
	if !m.progress.TryLock() {
		return 0
	}
	defer m.progress.Unlock()
	m.polls++
	if m.polls%m.hold != 0 {
		return 0
	}
	m.mu.Lock()
	in := m.inbox
	m.inbox = nil
	m.mu.Unlock()
	slices.Reverse(in)
	for _, msg := range in {
		m.fn(msg.src, msg.data)
	}
	return len(in)
}

func (m *llpMod) Finalize() error { return nil }

// tloop is the in-process test BTL.
type tloop struct {
	name                  string
	common                btl.CommonParams
	enable, queue         *params.Param
	get, pipeLim, slowPay *params.Param
	slowMS                *params.Param
	mu                    sync.Mutex
	hubs                  map[string]*tloopHub
}

type tloopHub struct {
	mu   sync.Mutex
	mods map[int]*tloopMod
	dead map[int]bool
}

func (c *tloop) Info() mca.Info {
	return mca.Info{Framework: "btl", Name: c.name, Version: mca.Version{Major: 0, Minor: 0, Patch: 1}, API: btl.Framework.API}
}

func (c *tloop) Register(r *mca.Registrar) {
	p := "btl_" + c.name + "_"
	c.common = btl.RegisterCommon(r, c.name, btl.Defaults{Exclusivity: 1000, EagerLimit: 4096, MaxSendSize: 16384, Latency: 5, Bandwidth: 1000})
	c.enable = r.Add(params.Def{Name: p + "enable", Type: params.Bool, Level: 9, Default: "false", Help: "test only"})
	c.queue = r.Add(params.Def{Name: p + "queue", Type: params.Size, Level: 9, Default: "64k", Help: "test only"})
	c.get = r.Add(params.Def{Name: p + "get", Type: params.String, Level: 9, Default: "ok", Help: "test only: ok, refuse, fail, lost, slow"})
	c.pipeLim = r.Add(params.Def{Name: p + "pipeline_limit", Type: params.Size, Level: 9, Default: "0", Help: "test only"})
	c.slowPay = r.Add(params.Def{Name: p + "slow_payload", Type: params.Size, Level: 9, Default: "0", Help: "test only"})
	c.slowMS = r.Add(params.Def{Name: p + "slow_ms", Type: params.Uint, Level: 9, Default: "2", Help: "test only"})
}

func (c *tloop) Query(b *mca.Base, rt *rte.Runtime) (btl.Module, error) {
	if !b.Get(c.enable).Bool() {
		return nil, mca.Decline("test component, off")
	}
	attr, err := c.common.Attributes(b, c.name, btl.FlagGet)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	hub := c.hubs[rt.Job().ID]
	if hub == nil {
		hub = &tloopHub{mods: map[int]*tloopMod{}, dead: map[int]bool{}}
		c.hubs[rt.Job().ID] = hub
	}
	c.mu.Unlock()
	attr.PipelineLimit = int(b.Get(c.pipeLim).Uint())
	m := &tloopMod{hub: hub, rank: rt.Job().Rank, attr: attr, cap: int(b.Get(c.queue).Uint()), get: b.Get(c.get).Str(),
		slowPay: int(b.Get(c.slowPay).Uint()), slow: time.Duration(b.Get(c.slowMS).Uint()) * time.Millisecond}
	hub.mu.Lock()
	hub.mods[m.rank] = m
	hub.mu.Unlock()
	return m, nil
}

// sent returns how many fragments each rank's module of a job sent.
func (c *tloop) sent(jobID string) map[int]uint64 {
	c.mu.Lock()
	hub := c.hubs[jobID]
	c.mu.Unlock()
	hub.mu.Lock()
	defer hub.mu.Unlock()
	out := map[int]uint64{}
	for r, m := range hub.mods {
		out[r] = m.sent.Load()
	}
	return out
}

// lose makes a rank unreachable: the others' modules report it lost.
func (c *tloop) lose(jobID string, rank int) {
	c.mu.Lock()
	hub := c.hubs[jobID]
	c.mu.Unlock()
	hub.mu.Lock()
	hub.dead[rank] = true
	var others []*tloopMod
	for r, m := range hub.mods {
		if r != rank {
			others = append(others, m)
		}
	}
	hub.mu.Unlock()
	for _, m := range others {
		m.cb.Lost(rank, fmt.Errorf("tloop: rank %d lost: %w", rank, btl.ErrPeerLost))
	}
}

// dieQuietly makes a rank unreachable without a report: the others find
// out at their next send to it, as a TCP connection's first write after
// the peer's death does.
func (c *tloop) dieQuietly(jobID string, rank int) {
	c.mu.Lock()
	hub := c.hubs[jobID]
	c.mu.Unlock()
	hub.mu.Lock()
	hub.dead[rank] = true
	hub.mu.Unlock()
}

// isDead reports whether a rank was made unreachable.
func (c *tloop) isDead(jobID string, rank int) bool {
	c.mu.Lock()
	hub := c.hubs[jobID]
	c.mu.Unlock()
	hub.mu.Lock()
	defer hub.mu.Unlock()
	return hub.dead[rank]
}

type tloopEP struct{ rank int }

func (e *tloopEP) Rank() int        { return e.rank }
func (e *tloopEP) Flags() btl.Flags { return btl.FlagGet }

type tloopFrag struct {
	src  int
	tag  btl.Tag
	data []byte
}

type tloopMod struct {
	sent atomic.Uint64 // fragments sent
	hub  *tloopHub
	rank int
	attr btl.Attributes
	cap  int
	get  string
	cb   btl.Callbacks
	// slowPay: sends of payloads of at least this many bytes take slow
	// (0: none); so does a Get when get is "slow".
	slowPay int
	slow    time.Duration

	mu     sync.Mutex
	inbox  []tloopFrag
	queued int

	progress sync.Mutex
}

func (m *tloopMod) Attributes() btl.Attributes { return m.attr }

func (m *tloopMod) AddProcs(ranks []int) ([]btl.Endpoint, error) {
	eps := make([]btl.Endpoint, len(ranks))
	for i, r := range ranks {
		eps[i] = &tloopEP{r}
	}
	return eps, nil
}

func (m *tloopMod) RegisterRecv(tag btl.Tag, fn btl.RecvFunc) { m.cb.RegisterRecv(tag, fn) }
func (m *tloopMod) RegisterError(fn btl.ErrorFunc)            { m.cb.RegisterError(fn) }

func (m *tloopMod) Send(ep btl.Endpoint, tag btl.Tag, hdr, payload []byte) error {
	n := len(hdr) + len(payload)
	if n > m.attr.MaxSendSize {
		return btl.ErrTooLarge
	}
	m.hub.mu.Lock()
	dst, dead := m.hub.mods[ep.Rank()], m.hub.dead[ep.Rank()] || m.hub.dead[m.rank]
	m.hub.mu.Unlock()
	if dead {
		return fmt.Errorf("tloop: send to rank %d: %w", ep.Rank(), btl.ErrPeerLost)
	}
	if m.slowPay > 0 && len(payload) >= m.slowPay {
		time.Sleep(m.slow)
	}
	dst.mu.Lock()
	defer dst.mu.Unlock()
	if dst.queued+n > dst.cap && dst.queued > 0 {
		return btl.ErrWouldBlock
	}
	dst.inbox = append(dst.inbox, tloopFrag{m.rank, tag, append(append([]byte(nil), hdr...), payload...)})
	dst.queued += n
	m.sent.Add(1)
	return nil
}

func (m *tloopMod) Sendi(ep btl.Endpoint, tag btl.Tag, hdr, payload []byte) bool {
	return m.Send(ep, tag, hdr, payload) == nil
}

func (m *tloopMod) Progress() int {
	if !m.progress.TryLock() {
		return 0
	}
	defer m.progress.Unlock()
	m.mu.Lock()
	in := m.inbox
	m.inbox, m.queued = nil, 0
	m.mu.Unlock()
	for _, f := range in {
		m.cb.Deliver(f.src, f.tag, f.data)
	}
	return len(in)
}

func (m *tloopMod) Finalize() error { return nil }

func (m *tloopMod) Expose(buf []byte) []byte { return btl.ExposeCMA(buf) }

func (m *tloopMod) Get(ep btl.Endpoint, desc []byte, off int, dst []byte) error {
	switch m.get {
	case "refuse":
		return fmt.Errorf("tloop: refused by configuration: %w", btl.ErrNoRDMA)
	case "fail":
		return mpierr.Errorf(mpierr.ErrIntern, "tloop: Get failed by configuration")
	case "lost":
		return fmt.Errorf("tloop: Get from rank %d: %w", ep.Rank(), btl.ErrPeerLost)
	case "slow":
		time.Sleep(m.slow)
	}
	return btl.CMARead(desc, off, dst)
}

func (m *tloopMod) Put(ep btl.Endpoint, desc []byte, off int, src []byte) error {
	return btl.CMAWrite(desc, off, src)
}
