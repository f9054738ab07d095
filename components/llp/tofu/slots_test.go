package tofu

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"unsafe"
)

// pair is a box's slots and ack word in ordinary memory, 8-aligned, with
// both ends.
func pair(t *testing.T, g geometry) (*outbox, *inbox, []byte) {
	t.Helper()
	words := make([]uint64, (g.slots*g.slotSize+8)/8)
	mem := unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), len(words)*8)
	ack := (*atomic.Uint64)(unsafe.Pointer(&mem[0]))
	slots := mem[8 : 8+g.slots*g.slotSize]
	o, err := newOutbox(slots, g, ack)
	if err != nil {
		t.Fatal(err)
	}
	in, err := newInbox(3, nil, slots, g, ack)
	if err != nil {
		t.Fatal(err)
	}
	return o, in, slots
}

// ready reports whether the next message is published, as the ack word
// (the next message's number) and its stamp say.
func (in *inbox) ready() bool {
	k := in.ack.Load()
	return stampAt(in.slots, int(k&in.mask)*in.slotSize).Load() == k+1
}

type got struct {
	src int
	msg string
}

func drain(t *testing.T, in *inbox) []got {
	t.Helper()
	var out []got
	if _, err := in.poll(func(src int, msg []byte) { out = append(out, got{src, string(msg)}) }); err != nil {
		t.Fatal(err)
	}
	return out
}

// Messages go round the slots for many laps, in order; a full box refuses
// without writing; the receiver frees slots as it consumes them.
func TestSlotsRoundTrip(t *testing.T) {
	g := geometry{slots: 4, slotSize: 64}
	o, in, _ := pair(t, g)
	if in.ready() {
		t.Fatal("an empty box is ready")
	}
	next := 0
	for lap := 0; lap < 50; lap++ {
		sent := 0
		for o.write([]byte("hdr:"), []byte(fmt.Sprint(next+sent))) {
			sent++
			if sent > g.slots {
				t.Fatalf("wrote %d messages into %d slots", sent, g.slots)
			}
		}
		if sent != g.slots {
			t.Fatalf("lap %d: %d messages fit, want %d", lap, sent, g.slots)
		}
		if !in.ready() {
			t.Fatal("a full box is not ready")
		}
		for _, m := range drain(t, in) {
			if want := fmt.Sprintf("hdr:%d", next); m.msg != want || m.src != 3 {
				t.Fatalf("got %+v, want %q from 3", m, want)
			}
			next++
		}
	}
	if in.ready() {
		t.Fatal("a drained box is ready")
	}
}

// A message that fills a slot exactly arrives whole; the stamps of earlier
// laps never match.
func TestSlotsFullSizeAndStaleStamps(t *testing.T) {
	g := geometry{slots: 2, slotSize: 128}
	o, in, _ := pair(t, g)
	big := bytes.Repeat([]byte{0xab}, g.slotSize-slotHeader-16)
	for i := 0; i < 10; i++ {
		if !o.write(make([]byte, 16), big) {
			t.Fatalf("message %d refused", i)
		}
		ms := drain(t, in)
		if len(ms) != 1 || len(ms[0].msg) != g.slotSize-slotHeader || !strings.HasSuffix(ms[0].msg, string(big)) {
			t.Fatalf("message %d: got %d messages", i, len(ms))
		}
		// Nothing more, although every slot holds an old stamp.
		if in.ready() || len(drain(t, in)) != 0 {
			t.Fatalf("after message %d: a stale slot was taken for a new message", i)
		}
	}
}

// Garbage in a published slot is an error, never an access outside it.
func TestSlotsGarbage(t *testing.T) {
	for _, c := range []struct {
		name string
		word func(stamp uint64) uint64
	}{
		{"length beyond the slot", func(s uint64) uint64 { return 1000 | uint64(check(1000, s))<<32 }},
		{"bad check", func(s uint64) uint64 { return 8 | uint64(check(8, s)^1)<<32 }},
		{"zero", func(uint64) uint64 { return 0 }},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := geometry{slots: 2, slotSize: 64}
			_, in, slots := pair(t, g)
			binary.LittleEndian.PutUint64(slots[8:], c.word(1))
			stampAt(slots, 0).Store(1)
			n, err := in.poll(func(int, []byte) { t.Fatal("garbage delivered") })
			if err == nil || n != 0 {
				t.Fatalf("poll: %d delivered, error %v", n, err)
			}
		})
	}
}

// A garbage ack (above what was sent) reads as a full box: the sender
// refuses rather than overwrite.
func TestSlotsGarbageAck(t *testing.T) {
	g := geometry{slots: 4, slotSize: 64}
	o, _, _ := pair(t, g)
	for i := 0; i < g.slots; i++ {
		if !o.write(nil, []byte("x")) {
			t.Fatalf("message %d of %d refused by an empty box", i, g.slots)
		}
	}
	// Every message taken, but the ack says more than was sent.
	o.ack.Store(1 << 40)
	if o.write(nil, []byte("y")) {
		t.Fatal("wrote after a garbage ack")
	}
	// The true ack frees the box: the refusal was the garbage's.
	o.ack.Store(uint64(g.slots))
	if !o.write(nil, []byte("z")) {
		t.Fatal("refused after every message was acknowledged")
	}
}

func TestGeometry(t *testing.T) {
	for _, g := range []geometry{{1, 64}, {16, 320}, {1024, 64 << 10}} {
		if !g.valid() || decodeGeometry(g.encode()) != g {
			t.Errorf("%+v: valid %v, round trip %+v", g, g.valid(), decodeGeometry(g.encode()))
		}
	}
	for _, g := range []geometry{{0, 64}, {3, 64}, {2048, 64}, {2, 32}, {2, 100}, {2, 128 << 10}} {
		if g.valid() {
			t.Errorf("%+v is valid", g)
		}
	}
}

// Box headers made by peers may hold anything: parsing checks every field
// (shmem's tests check control headers and cards).
func TestParseForeignData(t *testing.T) {
	g := geometry{4, 128}
	box := make([]byte, boxSize(g))
	writeBoxHeader(box, boxHeaderInfo{src: 1, dst: 2, pid: 7, geo: g})
	if h, err := parseBoxHeader(box); err != nil || h != (boxHeaderInfo{1, 2, 7, g}) {
		t.Errorf("box header: %+v, %v", h, err)
	}
	if _, err := parseBoxHeader(box[:len(box)-64]); err == nil {
		t.Error("a box shorter than its geometry parsed")
	}
	bad := append([]byte(nil), box...)
	binary.LittleEndian.PutUint64(bad[0:], 1) // the magic
	if _, err := parseBoxHeader(bad); err == nil {
		t.Error("a box with a bad magic parsed")
	}
}

// A message spread over several lines arrives whole whatever the split
// between header and payload (the lines after the first are written
// first).
func TestSlotsSplits(t *testing.T) {
	g := geometry{slots: 2, slotSize: 256}
	o, in, _ := pair(t, g)
	for _, h := range []int{0, 1, 16, 47, 48, 49, 100} {
		for _, p := range []int{0, 1, 31, 32, 33, 100, g.slotSize - slotHeader - h} {
			if h+p > g.slotSize-slotHeader || p < 0 {
				continue
			}
			hdr, payload := make([]byte, h), make([]byte, p)
			for i := range hdr {
				hdr[i] = byte(i + 1)
			}
			for i := range payload {
				payload[i] = byte(200 - i)
			}
			if !o.write(hdr, payload) {
				t.Fatalf("header %d, payload %d: refused", h, p)
			}
			ms := drain(t, in)
			if want := string(hdr) + string(payload); len(ms) != 1 || ms[0].msg != want {
				t.Fatalf("header %d, payload %d: got %d messages: %+v", h, p, len(ms), ms)
			}
		}
	}
}
