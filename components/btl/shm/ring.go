package shm

import (
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/gompi/gompi/release"
)

// A ring is the data area of a box: records laid one after another at
// positions that only grow (a position counts bytes ever written; its index
// in the ring is pos & (size-1)). A record is an 8-byte header word and its
// data, padded to 8 bytes, and never straddles the end of the ring. The
// header word (atomic, little-endian) is
//
//	bits  0–31: the stamp, the low 32 bits of pos+1
//	bits 32–55: the data's length; all ones (padLen) marks padding: the
//	            rest of the ring is unused and the next record is at 0
//	bits 56–63: the fragment's tag
//
// One word, not a stamp word and a length word: with the PML's 16-byte
// match header an 8-byte message is a 32-byte record, two to a cache line,
// and streams of small messages are bound by the lines that cross from the
// producer's core to the consumer's (a 16-byte header made them 40 bytes,
// 1.6 to a line, and cost a fifth of the message rate where the crossing is
// slow, the far placement).
//
// The consumer polls the header word at its own position: a message costs it
// one cache line from the producer (header and a small payload share it),
// where a separate head counter would cost two. The producer clears the word
// at the next position before it publishes a record (the store that
// publishes orders the clearing before it), so the consumer finds there
// either zero or the next record's header, never payload bytes of an earlier
// lap; the stamp, which zero never equals (pos+1 is odd), only guards
// against a peer's garbage. The producer therefore keeps 8 bytes of room
// beyond every record. The consumer stores its tail after each record it
// peeks and as it polls (see poll); the producer loads the tail only when
// its cached copy says the ring is full.
//
// Everything the consumer reads was written by another process and is
// checked before use (parseRecord): a peer with a bug, or memory that is not
// what it should be, is an error for that peer, never a panic or an access
// outside the ring.

const (
	recHeader = 8
	padLen    = 1<<24 - 1
	// maxLen is the longest fragment a header can describe.
	maxLen = padLen - 1
)

func align8(n uint64) uint64 { return (n + 7) &^ 7 }

// recordSize is the ring space a fragment of n bytes takes.
func recordSize(n int) uint64 { return align8(recHeader + uint64(n)) }

// maxFragment is the largest fragment a ring of size bytes carries: one
// whose record, with 8 bytes to spare, fits in half the ring, so that an
// empty ring always has room for it wherever its positions fall (a record
// that does not fit before the end starts past the middle, so the ring holds
// the padding, the record and the spare word); and at most maxLen.
func maxFragment(size uint64) int { return int(min(size/2-recHeader-8, maxLen)) }

// header is the header word of a record of n bytes with tag at pos.
func header(pos uint64, n int, tag uint8) uint64 {
	return uint64(uint32(pos+1)) | uint64(n)<<32 | uint64(tag)<<56
}

// padHeader is the header word of the padding at pos.
func padHeader(pos uint64) uint64 { return uint64(uint32(pos+1)) | padLen<<32 }

// stamped reports whether w is a header word written for pos.
func stamped(w, pos uint64) bool { return uint32(w) == uint32(pos+1) }

// record is a parsed record header.
type record struct {
	tag  uint8
	n    int    // data bytes
	size uint64 // ring bytes the record takes, header and padding included
}

// parseRecord checks the header word w of the record at index idx of ring
// (its stamp already matched), with fragments of at most maxFrag bytes. Its
// inputs may be anything: it checks every bound and reports garbage as an
// error. On success the record lies inside ring[idx:idx+size].
func parseRecord(ring []byte, idx, w uint64, maxFrag int) (record, error) {
	size := uint64(len(ring))
	if idx%8 != 0 || idx >= size || size-idx < recHeader {
		return record{}, fmt.Errorf("record index %d in a ring of %d bytes", idx, size)
	}
	n, tag := int(w>>32)&padLen, uint8(w>>56)
	if maxFrag < 0 || n > maxFrag {
		return record{}, fmt.Errorf("fragment of %d bytes (header %#016x) at index %d: the ring carries at most %d", n, w, idx, maxFrag)
	}
	r := record{tag: tag, n: n, size: recordSize(n)}
	if r.size > size-idx {
		return record{}, fmt.Errorf("fragment of %d bytes at index %d runs past the end of a ring of %d", n, idx, size)
	}
	return r, nil
}

// stampAt is the header word at index idx, a multiple of 8 below len(ring);
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
	wrapAt, wrapPos := idx, p.pos
	if pad > 0 {
		p.pos += pad
		idx = 0
	}
	copy(p.ring[idx+recHeader:], hdr)
	copy(p.ring[idx+recHeader+uint64(len(hdr)):], payload)
	// A plain store: the header's store below publishes it with the record
	// (one release per message).
	binary.LittleEndian.PutUint64(p.ring[(idx+rec)&p.mask:], 0)
	// The header word publishes the record: a consumer that loads it sees
	// everything written before it. A release store, not atomic.Store,
	// whose fence would wait for the consumer to give up the lines just
	// written, a cache-line round trip per message (package release).
	release.Store(stampAt(p.ring, idx), header(p.pos, n, tag))
	if pad > 0 {
		// The consumer waits at the padding, whose word was cleared with
		// the previous record; it finds the record at 0 complete.
		release.Store(stampAt(p.ring, wrapAt), padHeader(wrapPos))
	}
	p.pos += rec
	// Take the lines the next records will use from the consumer, which
	// read them a lap ago, now: otherwise the next fence (the endpoint's
	// unlock) waits for each of them in turn, a cache-line round trip per
	// line, which was half a sender's time in a window of small messages.
	if rec <= prefetchMaxRecord {
		for off := uint64(cacheLine); off <= rec+cacheLine; off += cacheLine {
			release.PrefetchW(&p.ring[(p.pos+off)&p.mask])
		}
	}
	return true
}

// The producer asks for every line from just past its position to one line
// beyond a record of the size it just wrote (streams repeat sizes): two
// lines ahead only lost 10 % at 512 B, where the whole next record pays.
// Not after records over prefetchMaxRecord, where the copy itself is the
// cost.
const (
	cacheLine         = 64
	prefetchMaxRecord = 8192
	prefetchAhead     = 2 * cacheLine // the consumer's read prefetch (poll), after records up to this size
)

// consumer is the receiving side of a box. Its owner serializes calls (the
// module's progress lock).
type consumer struct {
	ring    []byte
	mask    uint64
	maxFrag int
	tail    *atomic.Uint64
	pos     uint64   // bytes ever consumed
	peeked  uint64   // ring bytes of the record peek returned
	run     [][]byte // poll's scratch: the fragments of one run
}

func newConsumer(ring []byte, tail *atomic.Uint64) (*consumer, error) {
	if err := checkRing(ring); err != nil {
		return nil, err
	}
	return &consumer{ring: ring, mask: uint64(len(ring)) - 1, maxFrag: maxFragment(uint64(len(ring))),
		tail: tail, pos: tail.Load() &^ 7}, nil
}

// peek returns the next fragment without taking it, stepping over the
// padding at the end of the ring; false when none is published or the ring
// holds garbage (poll reports it). The owner serializes calls.
func (c *consumer) peek() (uint8, []byte, bool) {
	for {
		idx := c.pos & c.mask
		w := stampAt(c.ring, idx).Load()
		if !stamped(w, c.pos) {
			return 0, nil, false
		}
		if w>>32&padLen == padLen {
			c.pos += uint64(len(c.ring)) - idx
			release.Store(c.tail, c.pos)
			continue
		}
		r, err := parseRecord(c.ring, idx, w, c.maxFrag)
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
	release.Store(c.tail, c.pos)
}

// poll delivers up to max published fragments to fn, in runs: consecutive
// fragments with the same tag go to one call, so that the PML matches a
// window of small messages under one hold of its lock. Fragments are valid
// only during the call; their room is freed after it returns. poll returns
// the number delivered, and an error when the ring holds garbage (nothing
// more should be read from it then).
//
// The tail is stored when poll returns and whenever an eighth of the ring
// has been freed, not after each record: the store is a locked exchange on
// x86, a third of the cost of a small record's delivery. The producer sees
// the room a little later; the idle check (ready), which reads the tail, may
// meanwhile see a record already delivered and take a locked look for
// nothing. A run is handed over before the tail moves past it.
func (c *consumer) poll(max int, fn func(tag uint8, frags [][]byte)) (int, error) {
	delivered := 0
	from := c.pos
	run := c.run[:0]
	var runTag uint8
	flush := func() {
		if len(run) > 0 {
			fn(runTag, run)
			clear(run)
			run = run[:0]
		}
	}
	for delivered < max {
		idx := c.pos & c.mask
		w := stampAt(c.ring, idx).Load()
		if !stamped(w, c.pos) {
			break
		}
		if w>>32&padLen == padLen {
			c.pos += uint64(len(c.ring)) - idx
			continue
		}
		r, err := parseRecord(c.ring, idx, w, c.maxFrag)
		if err != nil {
			flush()
			c.run = run
			c.storeTail(from)
			return delivered, err
		}
		if len(run) > 0 && r.tag != runTag {
			flush()
		}
		start := idx + recHeader
		end := start + uint64(r.n)
		runTag = r.tag
		run = append(run, c.ring[start:end:end])
		delivered++
		c.pos += r.size
		if r.size <= prefetchAhead {
			// The next stamp's place is known only from this record:
			// without asking early, each line of small records would come
			// from the producer's core after the one before.
			release.Prefetch(&c.ring[(c.pos+prefetchAhead)&c.mask])
		}
		if c.pos-from >= uint64(len(c.ring))/tailEvery {
			// Large records: the producer may be waiting for this room.
			flush()
			release.Store(c.tail, c.pos)
			from = c.pos
		}
	}
	flush()
	c.run = run
	c.storeTail(from)
	return delivered, nil
}

// tailEvery: a poll stores the tail whenever it has freed this fraction of
// the ring, so that a producer of large records, which fills the ring in a
// few, goes on while the consumer works through them.
const tailEvery = 8

// storeTail publishes pos as the tail when it moved since from.
func (c *consumer) storeTail(from uint64) {
	if c.pos != from {
		release.Store(c.tail, c.pos)
	}
}
