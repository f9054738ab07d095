package pml

import (
	"context"
	"sort"
	"sync"

	"github.com/gompi/gompi/mpierr"
)

// BsendOverhead is the bookkeeping space each buffered message takes in the
// attached buffer beyond its own bytes (MPI_BSEND_OVERHEAD): size an attached
// buffer as the sum of (message size + BsendOverhead) of the messages that
// may be buffered at once.
const BsendOverhead = 64

// BsendBuffer is the space attached for buffered sends (MPI_Buffer_attach):
// a buffered send that cannot go at once copies its message into a block of
// it and sends from there; the block is free again when that send completes.
// Blocks are allocated first fit from a free list kept in address order, so
// neighbours merge when freed. A PML keeps one per instance.
type BsendBuffer struct {
	mu   sync.Mutex
	buf  []byte
	free []span // in offset order, never adjacent
	used int    // blocks out, for Detach
}

type span struct{ off, n int }

// Attach gives the buffer its space. Attaching while a buffer is attached is
// an ErrBuffer error, as in MPI.
func (b *BsendBuffer) Attach(buf []byte) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.buf != nil {
		return mpierr.Errorf(mpierr.ErrBuffer, "mpi: BufferAttach: a buffer of %d bytes is already attached; detach it first", len(b.buf))
	}
	if len(buf) == 0 {
		return mpierr.Errorf(mpierr.ErrBuffer, "mpi: BufferAttach: an empty buffer; attach at least one message plus BsendOverhead (%d) bytes", BsendOverhead)
	}
	b.buf = buf
	b.free = []span{{0, len(buf)}}
	return nil
}

// Detach waits, with eng, until every buffered message has left, and returns
// the space. Without an attached buffer it returns nil and no error.
func (b *BsendBuffer) Detach(eng *Engine) ([]byte, error) {
	err := eng.Until(context.Background(), func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.used == 0
	})
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	buf := b.buf
	b.buf, b.free = nil, nil
	return buf, nil
}

// Copy copies msg into a free block and returns the copy and the function
// that frees the block (call it once the send of the copy has completed).
// It fails with ErrBuffer when no buffer is attached or no block is large
// enough.
func (b *BsendBuffer) Copy(msg []byte) ([]byte, func(), error) {
	need := len(msg) + BsendOverhead
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.buf == nil {
		return nil, nil, mpierr.Errorf(mpierr.ErrBuffer, "mpi: buffered send of %d bytes: no buffer is attached (BufferAttach)", len(msg))
	}
	for i, s := range b.free {
		if s.n < need {
			continue
		}
		off := s.off
		if s.n == need {
			b.free = append(b.free[:i], b.free[i+1:]...)
		} else {
			b.free[i] = span{s.off + need, s.n - need}
		}
		b.used++
		cp := b.buf[off : off+len(msg) : off+len(msg)]
		// The builtin copy, not datatype.CopyCached: a peer may read the
		// copy next (RDMA Get), and from 1 MiB the builtin's stores go to
		// memory, which a peer on a far core reads faster than lines in
		// this core's cache (a 2-rank 1 MiB allgather whose block was sent
		// from a cached copy: 290 µs against 164, cores apart).
		copy(cp, msg)
		var once sync.Once
		return cp, func() { once.Do(func() { b.release(span{off, need}) }) }, nil
	}
	return nil, nil, mpierr.Errorf(mpierr.ErrBuffer,
		"mpi: buffered send of %d bytes: the attached buffer (%d bytes) has no free block of %d bytes (message + BsendOverhead); attach a larger buffer",
		len(msg), len(b.buf), need)
}

func (b *BsendBuffer) release(s span) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used--
	i := sort.Search(len(b.free), func(i int) bool { return b.free[i].off > s.off })
	b.free = append(b.free, span{})
	copy(b.free[i+1:], b.free[i:])
	b.free[i] = s
	// Merge with the next, then with the previous neighbour.
	if i+1 < len(b.free) && b.free[i].off+b.free[i].n == b.free[i+1].off {
		b.free[i].n += b.free[i+1].n
		b.free = append(b.free[:i+1], b.free[i+2:]...)
	}
	if i > 0 && b.free[i-1].off+b.free[i-1].n == b.free[i].off {
		b.free[i-1].n += b.free[i].n
		b.free = append(b.free[:i], b.free[i+1:]...)
	}
}
