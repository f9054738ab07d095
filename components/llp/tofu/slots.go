package tofu

import (
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/gompi/gompi/components/common/shmem"
	"github.com/gompi/gompi/release"
)

// The slots of a box are used round robin: message k (counting from 0 over
// the box's life) goes to slot k mod slots. A slot is
//
//	word 0, the stamp (atomic): k+1 once message k is complete
//	word 1 (little-endian):     len uint32 | check uint32
//	bytes 16…:                  the message (the PML's header, then the payload)
//
// The receiver polls the stamp of the slot its next message goes to: one
// load when idle, and for a small message one cache line from the sender
// (stamp, length and data share it). A stamp names its message, so a stamp
// left from an earlier lap never matches and nothing needs clearing. The
// receiver stores the count of consumed messages in the box's ack word, on a
// line of its own, after each message it peeks and as it polls (see poll);
// the sender loads it only when its cached copy says every slot is taken, so
// a sender that is not ahead of its receiver never touches a line the
// receiver writes.
//
// Everything the receiver reads was written by another process and is
// checked before use: a bad length is an error for that peer, never an
// access outside the slot.

const (
	slotHeader = 16
	firstLine  = cacheLine - slotHeader // message bytes on the stamp's line
	checkSeed  = 0x75666f74             // "tofu"
)

func check(n uint32, stamp uint64) uint32 { return n ^ uint32(stamp) ^ uint32(stamp>>32) ^ checkSeed }

func stampAt(b []byte, off int) *atomic.Uint64 { return (*atomic.Uint64)(unsafe.Pointer(&b[off])) }

// slotMessage decodes slot s, whose stamp says message stamp-1 is
// published: the message, when the length word holds a length that fits
// the slot and its check; the word itself otherwise. The sender wrote s:
// it may hold anything.
func slotMessage(s []byte, stamp uint64) (msg []byte, word uint64, ok bool) {
	v := binary.LittleEndian.Uint64(s[8:])
	n := uint32(v)
	if uint32(v>>32) != check(n, stamp) || int(n) > len(s)-slotHeader {
		return nil, v, false
	}
	end := slotHeader + int(n)
	return s[slotHeader:end:end], v, true
}

// checkSlots checks what the stamps' atomics need: slots of the announced
// geometry, 8-aligned.
func checkSlots(slots []byte, g geometry) error {
	if !g.valid() || len(slots) != g.slots*g.slotSize {
		return fmt.Errorf("%d bytes of slots for %d slots of %d bytes", len(slots), g.slots, g.slotSize)
	}
	if p := unsafe.Pointer(&slots[0]); uintptr(p)%8 != 0 {
		return fmt.Errorf("slots at %p are not 8-byte aligned", p)
	}
	return nil
}

// outbox is the sending side of a box. Its owner serializes calls (the
// peer's lock).
type outbox struct {
	slots    []byte
	slotSize int
	n, mask  uint64
	ack      *atomic.Uint64 // in the box
	sent     uint64         // messages written
	seenAck  uint64         // ack as last loaded
}

func newOutbox(slots []byte, g geometry, ack *atomic.Uint64) (*outbox, error) {
	if err := checkSlots(slots, g); err != nil {
		return nil, err
	}
	a := ack.Load()
	return &outbox{slots: slots, slotSize: g.slotSize, n: uint64(g.slots), mask: uint64(g.slots) - 1, ack: ack, sent: a, seenAck: a}, nil
}

// write copies hdr then payload into the next slot and publishes it. It
// reports false, writing nothing, when every slot holds a message the
// receiver has not consumed. The caller has checked that the message fits a
// slot.
func (o *outbox) write(hdr, payload []byte) bool {
	if o.sent-o.seenAck >= o.n {
		// A peer's garbage ack (above sent) also reads as full: safe.
		o.seenAck = o.ack.Load()
		if o.sent-o.seenAck >= o.n {
			return false
		}
	}
	off := int(o.sent&o.mask) * o.slotSize
	s := o.slots[off : off+o.slotSize : off+o.slotSize]
	n := uint32(len(hdr) + len(payload))
	stamp := o.sent + 1
	// The lines after the first go first, so that the stores to the first
	// line and the stamp come back to back: the receiver polls that line,
	// and a store to another line in between would let it take the line
	// back before the stamp, costing a second transfer.
	if h := len(hdr); int(n) > firstLine {
		if h >= firstLine {
			copy(s[cacheLine:], hdr[firstLine:])
			copy(s[slotHeader+h:], payload)
		} else {
			copy(s[cacheLine:], payload[firstLine-h:])
		}
	}
	binary.LittleEndian.PutUint64(s[8:], uint64(n)|uint64(check(n, stamp))<<32)
	head := s[slotHeader : min(int(n), firstLine)+slotHeader]
	copy(head[copy(head, hdr):], payload)
	// The stamp publishes the message: a receiver that loads it sees what
	// was written before it. A release store (package release): an
	// atomic.Store's fence would wait for the receiver to give up the line.
	release.Store(stampAt(s, 0), stamp)
	o.sent = stamp
	return true
}

// inbox is the receiving side of a box.
type inbox struct {
	src      int
	box      *shmem.Box // nil in tests
	slots    []byte
	slotSize int
	n, mask  uint64
	// ack, in the box, counts the messages consumed: the receiver writes
	// it (under the module's progress lock) after each message, the sender
	// reads it when it runs out of slots.
	ack    *atomic.Uint64
	next   uint64 // ack's value, under the progress lock
	failed bool
}

func newInbox(src int, box *shmem.Box, slots []byte, g geometry, ack *atomic.Uint64) (*inbox, error) {
	if err := checkSlots(slots, g); err != nil {
		return nil, err
	}
	in := &inbox{src: src, box: box, slots: slots, slotSize: g.slotSize, n: uint64(g.slots), mask: uint64(g.slots) - 1, ack: ack}
	in.next = ack.Load()
	return in, nil
}

// peek returns the next message when it is published and well formed,
// without taking it. Callers hold the module's progress lock.
func (in *inbox) peek() ([]byte, bool) {
	k := in.next
	off := int(k&in.mask) * in.slotSize
	s := in.slots[off : off+in.slotSize : off+in.slotSize]
	if stampAt(s, 0).Load() != k+1 {
		return nil, false
	}
	msg, _, ok := slotMessage(s, k+1) // garbage: poll reports it
	return msg, ok
}

// consume frees the slot peek returned. Callers hold the module's progress
// lock.
func (in *inbox) consume() {
	in.next++
	release.Store(in.ack, in.next)
}

// poll delivers the published messages, at most one lap of the slots, to
// fn, each valid only during the call, and frees each slot after fn
// returns. It returns the number delivered, and an error when a slot holds
// garbage (nothing more should be read from the box then). Callers hold the
// module's progress lock.
//
// The ack is stored when poll returns and after every quarter of the slots
// (a locked exchange on x86 per message cost more than the delivery of a
// small one); until then the sender sees the slots still taken.
func (in *inbox) poll(fn func(src int, msg []byte)) (int, error) {
	done := 0
	for uint64(done) < in.n {
		k := in.next
		off := int(k&in.mask) * in.slotSize
		s := in.slots[off : off+in.slotSize : off+in.slotSize]
		if stampAt(s, 0).Load() != k+1 {
			break
		}
		msg, v, ok := slotMessage(s, k+1)
		if !ok {
			if done > 0 {
				release.Store(in.ack, in.next)
			}
			return done, fmt.Errorf("slot of message %d holds %#016x: not a length of at most %d bytes with its check",
				k, v, in.slotSize-slotHeader)
		}
		fn(in.src, msg)
		in.next = k + 1
		done++
		if uint64(done)%ackEvery(in.n) == 0 {
			// A sender that filled the slots goes on meanwhile.
			release.Store(in.ack, in.next)
		}
	}
	if uint64(done)%ackEvery(in.n) != 0 {
		release.Store(in.ack, in.next)
	}
	return done, nil
}

// ackEvery is how many messages a poll delivers between stores of the ack:
// a quarter of the slots.
func ackEvery(slots uint64) uint64 { return max(1, slots/4) }
