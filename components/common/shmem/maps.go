package shmem

import (
	"sync"

	"golang.org/x/sys/unix"

	"github.com/gompi/gompi/rte"
)

// Maps shares mappings of one file among the goroutine ranks of a process
// (mpitest). Without it every rank maps every peer's box and control
// segment on its own: about 2n² mappings for n ranks, and Linux's default
// vm.max_map_count (65530) ends a process near 130 ranks. With it a file
// is mapped once per process, whoever opens it. Mappings are keyed by the
// file's identity (device and inode), not its name: a box's name is reused
// by a new file once the old one is removed.
type Maps struct {
	mu    sync.Mutex
	files map[fileID]*mapping
}

type fileID struct{ dev, ino uint64 }

// mapping is one mmap of a file, shared by the segments that hold it.
type mapping struct {
	id   fileID
	mem  []byte
	refs int
}

// NewMaps makes an empty cache.
func NewMaps() *Maps { return &Maps{files: map[fileID]*mapping{}} }

type mapsKey struct{}

// MapsFor returns the cache the goroutine ranks of rt's process share, or
// nil in a process of its own (nothing to share: each file is mapped once
// anyway).
func MapsFor(rt *rte.Runtime) *Maps {
	v := rt.Neighborhood().Shared(mapsKey{}, func() any { return NewMaps() })
	if v == nil {
		return nil
	}
	return v.(*Maps)
}

func idOf(st *unix.Stat_t) fileID { return fileID{uint64(st.Dev), uint64(st.Ino)} }

// lookup returns a held mapping of the file of size bytes, counted once
// more; nil when there is none.
func (m *Maps) lookup(id fileID, size int) *mapping {
	if m == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if e := m.files[id]; e != nil && len(e.mem) == size {
		e.refs++
		return e
	}
	return nil
}

// add records a new mapping, held once.
func (m *Maps) add(id fileID, mem []byte) *mapping {
	e := &mapping{id: id, mem: mem, refs: 1}
	if m != nil {
		m.mu.Lock()
		m.files[id] = e
		m.mu.Unlock()
	}
	return e
}

// release drops one hold and unmaps after the last.
func (m *Maps) release(e *mapping) {
	if m != nil {
		m.mu.Lock()
		e.refs--
		last := e.refs == 0
		if last && m.files[e.id] == e {
			delete(m.files, e.id)
		}
		m.mu.Unlock()
		if !last {
			return
		}
	}
	unix.Munmap(e.mem)
}

// Held is the segments a module made whose descriptors it keeps until the
// peers that need them have mapped them: a memfd cannot be opened once its
// maker closes it, and a named file's lock tells Sweep its maker lives.
// Closing them then, not at Finalize, keeps a process's descriptors to the
// segments in the making: 129 goroutine ranks talking in every pair would
// otherwise hold 33,000. The zero value is ready; a nil *Held holds
// nothing (the descriptors stay until Unmap).
type Held struct {
	mu   sync.Mutex
	segs map[*Segment]func() bool
}

// hold keeps seg's descriptor until done, which reads seg's memory,
// reports true at a Settle.
func (h *Held) hold(seg *Segment, done func() bool) {
	if h == nil || seg.fd.Load() < 0 {
		return
	}
	h.mu.Lock()
	if h.segs == nil {
		h.segs = map[*Segment]func() bool{}
	}
	h.segs[seg] = done
	seg.held = h
	h.mu.Unlock()
}

// Settle closes the descriptors of the held segments that every peer has
// mapped. Modules call it when their bell rings: peers ring it after
// mapping a segment.
func (h *Held) Settle() {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for seg, done := range h.segs {
		if done() {
			seg.closeFd()
			delete(h.segs, seg)
		}
	}
}

// Len is the number of descriptors held.
func (h *Held) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.segs)
}

// forget drops seg before it is unmapped: Settle reads its memory.
func (h *Held) forget(seg *Segment) {
	h.mu.Lock()
	delete(h.segs, seg)
	h.mu.Unlock()
}
