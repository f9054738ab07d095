// Package self is the BTL to oneself: a fragment a process sends to its own
// rank is queued and delivered by the next Progress (never from inside Send,
// so that a caller holding its own locks is not re-entered).
package self

import (
	"sync"
	"sync/atomic"

	"github.com/gompi/gompi/frameworks/btl"
	"github.com/gompi/gompi/mca"
	"github.com/gompi/gompi/params"
	"github.com/gompi/gompi/rte"
)

// Component is the self BTL component.
type Component struct {
	common   btl.CommonParams
	maxQueue *params.Param
}

// Info describes the component.
func (c *Component) Info() mca.Info {
	return mca.Info{Framework: "btl", Name: "self", Version: mca.GompiVersion, API: btl.Framework.API}
}

// Register declares the component's parameters.
func (c *Component) Register(r *mca.Registrar) {
	c.common = btl.RegisterCommon(r, "self", btl.Defaults{
		Exclusivity: 65536, EagerLimit: 64 << 10, MaxSendSize: 256 << 10, Latency: 0, Bandwidth: 100000,
	})
	c.maxQueue = r.Add(params.Def{Name: "btl_self_max_queued", Type: params.Size, Level: 5, Default: "16m",
		Help: "Bytes that may wait in the queue to oneself before Send reports that it has no room (flow control)"})
}

// Query returns a module for the instance.
func (c *Component) Query(b *mca.Base, rt *rte.Runtime) (btl.Module, error) {
	attr, err := c.common.Attributes(b, "self", btl.FlagGet|btl.FlagPut)
	if err != nil {
		return nil, err
	}
	return &module{attr: attr, rank: rt.Job().Rank, maxQueued: int(b.Get(c.maxQueue).Uint()), bell: rt.Bell()}, nil
}

type fragment struct {
	tag  btl.Tag
	data []byte
}

type module struct {
	attr      btl.Attributes
	rank      int
	maxQueued int
	cb        btl.Callbacks
	bell      *rte.Bell // rung after a send: a goroutine of ours may sleep on it

	mu       sync.Mutex
	queue    []fragment
	queued   int // bytes in queue
	progress sync.Mutex
	// nonEmpty is set under mu when the queue gets a fragment, so that an
	// idle Progress (every pass of every wait) costs a load, not two locks.
	nonEmpty atomic.Bool
}

type endpoint struct{ rank int }

func (e *endpoint) Rank() int                { return e.rank }
func (e *endpoint) Flags() btl.Flags         { return btl.FlagGet | btl.FlagPut }
func (m *module) Attributes() btl.Attributes { return m.attr }

// Reaches says, before the modex, that self reaches this process alone
// (btl.Reacher).
func (m *module) Reaches(rank int) bool { return rank == m.rank }

func (m *module) AddProcs(ranks []int) ([]btl.Endpoint, error) {
	eps := make([]btl.Endpoint, len(ranks))
	for i, r := range ranks {
		if r == m.rank {
			eps[i] = &endpoint{rank: r}
		}
	}
	return eps, nil
}

func (m *module) RegisterRecv(tag btl.Tag, fn btl.RecvFunc) { m.cb.RegisterRecv(tag, fn) }
func (m *module) RegisterError(fn btl.ErrorFunc)            { m.cb.RegisterError(fn) }

func (m *module) Send(ep btl.Endpoint, tag btl.Tag, hdr, payload []byte) error {
	n := len(hdr) + len(payload)
	if n > m.attr.MaxSendSize {
		return btl.ErrTooLarge
	}
	data := make([]byte, n)
	copy(data, hdr)
	copy(data[len(hdr):], payload)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.queued+n > m.maxQueued && m.queued > 0 {
		return btl.ErrWouldBlock
	}
	m.queue = append(m.queue, fragment{tag, data})
	m.queued += n
	m.nonEmpty.Store(true)
	m.bell.Ring()
	return nil
}

func (m *module) Sendi(ep btl.Endpoint, tag btl.Tag, hdr, payload []byte) bool {
	if len(hdr)+len(payload) > m.attr.EagerLimit {
		return false
	}
	return m.Send(ep, tag, hdr, payload) == nil
}

func (m *module) Progress() int {
	if !m.nonEmpty.Load() {
		return 0
	}
	if !m.progress.TryLock() {
		return 0
	}
	defer m.progress.Unlock()
	m.mu.Lock()
	q := m.queue
	m.queue, m.queued = nil, 0
	m.nonEmpty.Store(false)
	m.mu.Unlock()
	for _, f := range q {
		m.cb.Deliver(m.rank, f.tag, f.data)
	}
	return len(q)
}

func (m *module) Finalize() error { return nil }

var _ btl.RDMA = (*module)(nil)

// RDMA to oneself: process_vm_readv/writev on one's own pid, so that the
// description is the same as shm's and no registry of exposed buffers is
// needed.
func (m *module) Expose(buf []byte) []byte { return btl.ExposeCMA(buf) }

// AppendExpose is Expose appended to dst (btl.AppendExposer).
func (m *module) AppendExpose(dst, buf []byte) []byte { return btl.AppendCMA(dst, buf) }

func (m *module) Get(ep btl.Endpoint, desc []byte, off int, dst []byte) error {
	return btl.CMARead(desc, off, dst)
}

func (m *module) Put(ep btl.Endpoint, desc []byte, off int, src []byte) error {
	return btl.CMAWrite(desc, off, src)
}
