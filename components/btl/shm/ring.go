package shm

import (
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/gompi/gompi/internal/release"
)

// A ring is the data area of a box: records laid one after another at
// positions that only grow (a position counts bytes ever written; its index
// in the ring is pos & (size-1)). A record is a 16-byte header and its data,
// padded to 8 bytes, and never straddles the end of the ring.
//
//	word 0, the stamp (atomic): pos+1 once the record at pos is complete;
//	        (pos+1)|wrapBit when the rest of the ring is padding and the
//	        next record is at index 0
//	word 1 (little-endian):     len uint32 | kind uint8 | tag uint8 | check uint16
//
// The consumer polls the stamp at its own position: a message costs it one
// cache line from the producer (stamp, header and a small payload share it),
// where a separate head counter would cost two. A stamp names its position,
// so one left from an earlier lap never matches; and the producer clears the
// stamp of the next position before it publishes a record, so the payload
// bytes of an earlier lap that lie where the next record will start cannot
// look like a stamp either. The producer therefore keeps 8 bytes of room
// beyond every record. The consumer stores its tail after each record it
// peeks and after each batch it polls; the producer loads the tail only when
// its cached copy says the ring is full.
//
// Everything the consumer reads was written by another process and is
// checked before use (parseRecord): a peer with a bug, or memory that is not
// what it should be, is an error for that peer, never a panic or an access
// outside the ring.

const (
	recHeader = 16
	kindFrag  = 1
	wrapBit   = 1 << 63
	checkSeed = 0x5348 // "SH"
)

func align8(n uint64) uint64 { return (n + 7) &^ 7 }

// recordSize is the ring space a fragment of n bytes takes.
func recordSize(n int) uint64 { return align8(recHeader + uint64(n)) }

// maxFragment is the largest fragment a ring of size bytes carries: one
// whose record, with 8 bytes to spare, fits in half the ring, so that an
// empty ring always has room for it wherever its positions fall (a record
// that does not fit before the end starts past the middle, so the ring holds
// the padding, the record and the spare word).
func maxFragment(size uint64) int { return int(size/2 - recHeader - 8) }

func check(n uint32, kind, tag uint8) uint16 {
	return uint16(n) ^ uint16(n>>16) ^ uint16(kind)<<8 ^ uint16(tag) ^ checkSeed
}

func putInfo(b []byte, n uint32, kind, tag uint8) {
	binary.LittleEndian.PutUint64(b, uint64(n)|uint64(kind)<<32|uint64(tag)<<40|uint64(check(n, kind, tag))<<48)
}

// record is a parsed record header.
type record struct {
	tag  uint8
	n    int    // data bytes
	size uint64 // ring bytes the record takes, header and padding included
}

// parseRecord reads the header of the record at index idx of ring (its
// stamp already matched), with fragments of at most maxFrag bytes. Its inputs
// may be anything: it checks every bound and reports garbage as an error. On
// success the record lies inside ring[idx:idx+size].
func parseRecord(ring []byte, idx uint64, maxFrag int) (record, error) {
	size := uint64(len(ring))
	if idx%8 != 0 || idx >= size || size-idx < recHeader {
		return record{}, fmt.Errorf("record index %d in a ring of %d bytes", idx, size)
	}
	v := binary.LittleEndian.Uint64(ring[idx+8:])
	n, kind, tag := uint32(v), uint8(v>>32), uint8(v>>40)
	if got, want := uint16(v>>48), check(n, kind, tag); got != want {
		return record{}, fmt.Errorf("record header %#016x at index %d: check %#04x, want %#04x", v, idx, got, want)
	}
	if kind != kindFrag {
		return record{}, fmt.Errorf("record of unknown kind %d at index %d", kind, idx)
	}
	if maxFrag < 0 || uint64(n) > uint64(maxFrag) {
		return record{}, fmt.Errorf("fragment of %d bytes at index %d: the ring carries at most %d", n, idx, maxFrag)
	}
	r := record{tag: tag, n: int(n), size: recordSize(int(n))}
	if r.size > size-idx {
		return record{}, fmt.Errorf("fragment of %d bytes at index %d runs past the end of a ring of %d", n, idx, size)
	}
	return r, nil
}

// stampAt is the stamp word at index idx, a multiple of 8 below len(ring);
// the ring's base is 8-aligned (checkRing).
func stampAt(ring []byte, idx uint64) *atomic.Uint64 {
	return (*atomic.Uint64)(unsafe.Pointer(&ring[idx]))
}

// checkRing checks what the stamps' atomics need: a power-of-two size and
// an 8-aligned base.
func checkRing(ring []byte) error {
	if !validRingSize(uint64(len(ring))) {
		return fmt.Errorf("ring of %d bytes", len(ring))
	}
	if p := unsafe.Pointer(&ring[0]); uintptr(p)%8 != 0 {
		return fmt.Errorf("ring at %p is not 8-byte aligned", p)
	}
	return nil
}

// producer is the sending side of a box. Its owner serializes calls (the
// endpoint's lock).
type producer struct {
	ring     []byte
	mask     uint64
	tail     *atomic.Uint64 // in the box
	pos      uint64         // bytes ever written
	seenTail uint64         // tail as last loaded
}

func newProducer(ring []byte, tail *atomic.Uint64) (*producer, error) {
	if err := checkRing(ring); err != nil {
		return nil, err
	}
	t := tail.Load()
	return &producer{ring: ring, mask: uint64(len(ring)) - 1, tail: tail, pos: t, seenTail: t}, nil
}

// write appends a fragment, hdr then payload, and publishes it. It reports
// false, writing nothing, when the ring has no room for it now. The caller
// has checked that the fragment is at most maxFragment(len(ring)).
func (p *producer) write(tag uint8, hdr, payload []byte) bool {
	n := len(hdr) + len(payload)
	size := uint64(len(p.ring))
	rec := recordSize(n)
	idx := p.pos & p.mask
	need, pad := rec+8, uint64(0) // 8: the next stamp, cleared below
	if idx+rec > size {
		pad = size - idx
		need += pad
	}
	if p.pos-p.seenTail+need > size {
		p.seenTail = p.tail.Load()
		if p.pos-p.seenTail+need > size {
			return false
		}
	}
	wrapAt, wrapStamp := idx, (p.pos+1)|wrapBit
	if pad > 0 {
		p.pos += pad
		idx = 0
	}
	putInfo(p.ring[idx+8:], uint32(n), kindFrag, tag)
	copy(p.ring[idx+recHeader:], hdr)
	copy(p.ring[idx+recHeader+uint64(len(hdr)):], payload)
	// A plain store: the stamp's store below publishes it with the record
	// (one atomic, a full barrier on x86, per message instead of two).
	binary.LittleEndian.PutUint64(p.ring[(idx+rec)&p.mask:], 0)
	// The stamp publishes the record: a consumer that loads it sees
	// everything written before it. A release store, not atomic.Store,
	// whose fence would wait for the consumer to give up the lines just
	// written, a cache-line round trip per message (package release).
	release.Store(stampAt(p.ring, idx), p.pos+1)
	if pad > 0 {
		// The consumer waits at the padding, whose stamp was cleared with
		// the previous record; it finds the record at 0 complete.
		release.Store(stampAt(p.ring, wrapAt), wrapStamp)
	}
	p.pos += rec
	return true
}

// consumer is the receiving side of a box. Its owner serializes calls (the
// module's progress lock).
type consumer struct {
	ring    []byte
	mask    uint64
	maxFrag int
	tail    *atomic.Uint64
	pos     uint64 // bytes ever consumed
	peeked  uint64 // ring bytes of the record peek returned
}

func newConsumer(ring []byte, tail *atomic.Uint64) (*consumer, error) {
	if err := checkRing(ring); err != nil {
		return nil, err
	}
	return &consumer{ring: ring, mask: uint64(len(ring)) - 1, maxFrag: maxFragment(uint64(len(ring))),
		tail: tail, pos: tail.Load() &^ 7}, nil
}

// ready reports whether a record (or the padding before one) is published
// at the consumer's position, reading the tail word rather than pos: it
// runs without the owner's lock, and a wrong answer costs a locked look.
func (c *consumer) ready() bool {
	t := c.tail.Load()
	s := stampAt(c.ring, t&c.mask&^7).Load()
	return s == t+1 || s == (t+1)|wrapBit
}

// peek returns the next fragment without taking it, stepping over the
// padding at the end of the ring; false when none is published or the ring
// holds garbage (poll reports it). The owner serializes calls.
func (c *consumer) peek() (uint8, []byte, bool) {
	for {
		idx := c.pos & c.mask
		switch stampAt(c.ring, idx).Load() {
		case c.pos + 1:
		case (c.pos + 1) | wrapBit:
			c.pos += uint64(len(c.ring)) - idx
			c.tail.Store(c.pos)
			continue
		default:
			return 0, nil, false
		}
		r, err := parseRecord(c.ring, idx, c.maxFrag)
		if err != nil {
			return 0, nil, false
		}
		start := idx + recHeader
		end := start + uint64(r.n)
		c.peeked = r.size
		return r.tag, c.ring[start:end:end], true
	}
}

// consume frees the record peek returned.
func (c *consumer) consume() {
	c.pos += c.peeked
	c.tail.Store(c.pos)
}

// poll delivers up to max published fragments to fn, each valid only during
// the call, and frees their room after fn returns. It returns the number
// delivered, and an error when the ring holds garbage (nothing more should
// be read from it then).
//
// The tail is stored once, when poll returns, not after each record: the
// store is a locked exchange on x86, a third of the cost of a small
// record's delivery. The producer sees the room a little later; the idle
// check (ready), which reads the tail, may meanwhile see a record already
// delivered and take a locked look for nothing.
func (c *consumer) poll(max int, fn func(tag uint8, frag []byte)) (int, error) {
	delivered := 0
	from := c.pos
	for delivered < max {
		idx := c.pos & c.mask
		s := stampAt(c.ring, idx).Load()
		switch s {
		case c.pos + 1:
		case (c.pos + 1) | wrapBit:
			c.pos += uint64(len(c.ring)) - idx
			continue
		default:
			c.storeTail(from)
			return delivered, nil
		}
		r, err := parseRecord(c.ring, idx, c.maxFrag)
		if err != nil {
			c.storeTail(from)
			return delivered, err
		}
		start := idx + recHeader
		end := start + uint64(r.n)
		fn(r.tag, c.ring[start:end:end])
		delivered++
		c.pos += r.size
	}
	c.storeTail(from)
	return delivered, nil
}

// storeTail publishes pos as the tail when it moved since from.
func (c *consumer) storeTail(from uint64) {
	if c.pos != from {
		c.tail.Store(c.pos)
	}
}
