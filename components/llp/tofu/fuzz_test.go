package tofu

import (
	"bytes"
	"encoding/binary"
	"errors"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/gompi/gompi/mpierr"
)

// FuzzBoxHeader: a box's header and the geometry announced for it are
// written by the peer that made the box. parseBoxHeader refuses them with
// ErrIntern, or returns a valid geometry whose size is the box's and
// fields that writeBoxHeader writes back to the same bytes; an announced
// geometry that is valid encodes back to the announced word.
func FuzzBoxHeader(f *testing.F) {
	for _, g := range []geometry{{1, 64}, {4, 128}} {
		box := make([]byte, boxSize(g))
		writeBoxHeader(box, boxHeaderInfo{src: 1, dst: 2, pid: 7, geo: g})
		f.Add(box, g.encode())
		f.Add(box[:len(box)-64], geometry{3, 64}.encode())
	}
	f.Add([]byte{}, uint64(0))
	f.Fuzz(func(t *testing.T, mem []byte, announced uint64) {
		h, err := parseBoxHeader(mem)
		if err != nil {
			if !errors.Is(err, mpierr.ErrIntern) {
				t.Fatalf("parseBoxHeader: %v lacks ErrIntern", err)
			}
		} else {
			if !h.geo.valid() || len(mem) != boxSize(h.geo) {
				t.Fatalf("box of %d bytes parsed as %+v", len(mem), h)
			}
			again := make([]byte, len(mem))
			writeBoxHeader(again, h)
			if end := boxOffSlotSz + 4; !bytes.Equal(again[:end], mem[:end]) {
				t.Fatalf("header %x parsed as %+v, which writes back as %x", mem[:end], h, again[:end])
			}
		}
		if g := decodeGeometry(announced); g.valid() {
			if g.encode() != announced || boxSize(g) > boxHeader+maxSlots*maxSlotSize {
				t.Fatalf("announced %#x: geometry %+v, encoded %#x, box of %d bytes", announced, g, g.encode(), boxSize(g))
			}
		}
	})
}

// FuzzSlots: messages written into a box's slots through the sender's
// outbox, with the ack word (the receiver's, but in shared memory) starting
// anywhere, come out of the receiver's inbox whole and in order, lap after
// lap; peek shows the next one. Then bytes of garbage overwrite the slots
// where the fuzzer says: what the inbox delivers from then on stays inside
// its slot, and it delivers at most one lap.
//
// An ack a few laps short of 2^64 is the peer's garbage too (the receiver
// starts it at 0): the stamps cross 0 there, the value of a slot never
// written, which then reads as published and holds a bad length. Such a
// run is held to the same bounds as a box with garbage in its slots.
//
// Each message of msgs is a length byte, a byte that splits it into
// header and payload, then its bytes.
func FuzzSlots(f *testing.F) {
	f.Add(uint8(2), uint8(0), uint64(0), []byte("\x05\x02hello\x00\x00\x30\x10"+string(make([]byte, 48))), []byte{}, uint16(0))
	f.Add(uint8(0), uint8(3), uint64(1<<63-1), bytes.Repeat([]byte{0xf0, 0x40}, 40), []byte{}, uint16(0))
	f.Add(uint8(1), uint8(1), uint64(5), []byte("\x03\x01abc\x03\x01def"), []byte{0xff, 0xff, 0xff, 0xff}, uint16(8))
	f.Add(uint8(3), uint8(0), ^uint64(0), []byte("\x01\x00x"), []byte{1, 0, 0, 0, 0, 0, 0, 0}, uint16(0))
	// A length one byte too long for the slot, with its check.
	long := binary.LittleEndian.AppendUint64(nil, 49|uint64(check(49, 1))<<32)
	f.Add(uint8(0), uint8(0), uint64(0), []byte("\x01\x00x"), long, uint16(8))
	f.Fuzz(func(t *testing.T, slotsLog, lines uint8, ack uint64, msgs, garbage []byte, at uint16) {
		g := geometry{slots: 1 << (slotsLog % 4), slotSize: cacheLine * (1 + int(lines%4))}
		words := make([]uint64, 1+g.slots*g.slotSize/8)
		mem := unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), len(words)*8)
		ackWord := (*atomic.Uint64)(unsafe.Pointer(&mem[0]))
		ackWord.Store(ack)
		slots := mem[8:]
		o, err := newOutbox(slots, g, ackWord)
		if err != nil {
			t.Fatal(err)
		}
		in, err := newInbox(3, nil, slots, g, ackWord)
		if err != nil {
			t.Fatal(err)
		}
		next := func() (hdr, payload []byte, ok bool) {
			if len(msgs) < 2 {
				return nil, nil, false
			}
			n := int(msgs[0]) % (g.slotSize - slotHeader + 1)
			h := int(msgs[1]) % (n + 1)
			msgs = msgs[2:]
			m := make([]byte, n)
			msgs = msgs[copy(m, msgs):]
			return m[:h], m[h:], true
		}
		inSlot := func(msg []byte) {
			if len(msg) > g.slotSize-slotHeader {
				t.Fatalf("message of %d bytes from slots of %d", len(msg), g.slotSize)
			}
			if len(msg) == 0 {
				return
			}
			off := uintptr(unsafe.Pointer(&msg[0])) - uintptr(unsafe.Pointer(&slots[0]))
			if off >= uintptr(len(slots)) || int(off)%g.slotSize < slotHeader || int(off)%g.slotSize+cap(msg) > g.slotSize {
				t.Fatalf("message of %d bytes (cap %d) at offset %d of slots of %d bytes", len(msg), cap(msg), off, g.slotSize)
			}
		}
		broken := ack > ^uint64(0)-uint64(10*g.slots)
		for lap := 0; lap < 8; lap++ {
			var sent [][]byte
			for len(sent) < g.slots {
				hdr, payload, ok := next()
				if !ok {
					break
				}
				if !o.write(hdr, payload) {
					if broken {
						break // what garbage hides stays taken
					}
					t.Fatalf("lap %d: message %d refused with %d slots free", lap, len(sent), g.slots)
				}
				sent = append(sent, append(append([]byte(nil), hdr...), payload...))
			}
			if lap == 0 && len(garbage) > 0 {
				copy(slots[int(at)%len(slots):], garbage)
				broken = true
			}
			msg, ok := in.peek()
			if ok {
				inSlot(msg)
			}
			if !broken && (ok != (len(sent) > 0) || ok && !bytes.Equal(msg, sent[0])) {
				t.Fatalf("lap %d: peek gave %q, %v; sent %q", lap, msg, ok, sent)
			}
			var got [][]byte
			n, err := in.poll(func(src int, msg []byte) {
				if src != 3 {
					t.Fatalf("message from %d", src)
				}
				inSlot(msg)
				got = append(got, append([]byte(nil), msg...))
			})
			if n != len(got) || n > g.slots {
				t.Fatalf("lap %d: poll says %d, delivered %d, slots %d", lap, n, len(got), g.slots)
			}
			if broken && err != nil {
				return // a box that held garbage is read no more
			}
			if broken {
				continue
			}
			if err != nil || len(got) != len(sent) {
				t.Fatalf("lap %d: sent %d messages, %d arrived, %v", lap, len(sent), len(got), err)
			}
			for i := range got {
				if !bytes.Equal(got[i], sent[i]) {
					t.Fatalf("lap %d: message %d sent as %q arrived as %q", lap, i, sent[i], got[i])
				}
			}
			if a := ackWord.Load(); a != o.sent || a != in.next {
				t.Fatalf("lap %d: ack %d after %d messages sent, %d taken", lap, a, o.sent, in.next)
			}
			if len(sent) == 0 {
				return
			}
		}
	})
}

// The slot decoder takes exactly the words the sender writes: a length
// that fits with its check.
func TestSlotMessage(t *testing.T) {
	s := make([]byte, 64)
	for _, c := range []struct {
		n, check uint32
		ok       bool
	}{{0, check(0, 9), true}, {48, check(48, 9), true}, {49, check(49, 9), false}, {5, check(5, 8), false}, {5, check(5, 9) ^ 1, false}} {
		binary.LittleEndian.PutUint64(s[8:], uint64(c.n)|uint64(c.check)<<32)
		msg, _, ok := slotMessage(s, 9)
		if ok != c.ok || ok && (len(msg) != int(c.n) || cap(msg) != int(c.n) || c.n > 0 && &msg[0] != &s[slotHeader]) {
			t.Errorf("length %d, check %#x: %d bytes, %v", c.n, c.check, len(msg), ok)
		}
	}
}
