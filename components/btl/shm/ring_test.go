package shm

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/gompi/gompi/components/common/shmem"
)

// unsafeBytes views words as bytes: an 8-aligned buffer like a mapping.
func unsafeBytes(w []uint64) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(&w[0])), len(w)*8)
}

// testRing is a ring in ordinary memory with its tail counter; the aligned
// backing array lets owner.Word and checkRing accept them.
func testRing(t testing.TB, size int) (ring []byte, tail *atomic.Uint64) {
	t.Helper()
	mem := make([]uint64, (boxHeader+size)/8)
	b := unsafeBytes(mem)
	var err error
	if tail, err = owner.Word(b, boxOffTail); err != nil {
		t.Fatal(err)
	}
	return b[boxHeader:], tail
}

func pair(t testing.TB, ring []byte, tail *atomic.Uint64) (*producer, *consumer) {
	t.Helper()
	p, err := newProducer(ring, tail)
	if err != nil {
		t.Fatal(err)
	}
	c, err := newConsumer(ring, tail)
	if err != nil {
		t.Fatal(err)
	}
	return p, c
}

// TestRingOrderAndWrap pushes fragments of random sizes (0 up to the
// largest a ring carries) through a small ring, producer and consumer on two
// goroutines, and checks that each arrives whole, in order, with its tag,
// however the records fall against the end of the ring.
func TestRingOrderAndWrap(t *testing.T) {
	for _, size := range []int{minRingSize, 64 << 10} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			ring, tail := testRing(t, size)
			p, c := pair(t, ring, tail)
			max := maxFragment(uint64(size))
			n := 20000
			if testing.Short() {
				n = 2000
			}
			rng := rand.New(rand.NewPCG(1, uint64(size)))
			lens := make([]int, n)
			for i := range lens {
				switch rng.IntN(4) {
				case 0:
					lens[i] = rng.IntN(16)
				case 1:
					lens[i] = max - rng.IntN(16)
				default:
					lens[i] = rng.IntN(max + 1)
				}
			}
			frag := func(i int) []byte {
				b := make([]byte, lens[i])
				for j := range b {
					b[j] = byte(i*31 + j)
				}
				return b
			}
			done := make(chan error, 1)
			go func() {
				got := 0
				var err error
				for got < n && err == nil {
					k, perr := c.poll(pollBatch, each(func(tag uint8, b []byte) {
						if err == nil && (tag != uint8(got) || !bytes.Equal(b, frag(got))) {
							err = fmt.Errorf("fragment %d: tag %d, %d bytes; want tag %d, %d bytes", got, tag, len(b), uint8(got), lens[got])
						}
						got++
					}))
					if perr != nil {
						err = perr
					}
					if k == 0 {
						runtime.Gosched()
					}
				}
				done <- err
			}()
			full := 0
			for i := 0; i < n; i++ {
				f := frag(i)
				hdr, payload := f[:len(f)/3], f[len(f)/3:]
				for !p.write(uint8(i), hdr, payload) {
					full++
					runtime.Gosched()
				}
			}
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if p.pos != tail.Load() {
				t.Errorf("written %d, tail %d after draining", p.pos, tail.Load())
			}
			t.Logf("%d fragments, the producer found the ring full %d times", n, full)
		})
	}
}

// TestRingFlowControl: a producer never writes more than the ring holds
// (less the spare stamp word) before the consumer frees room, and an empty
// ring always takes a fragment of the largest size, whatever its position.
func TestRingFlowControl(t *testing.T) {
	const size = minRingSize
	ring, tail := testRing(t, size)
	p, c := pair(t, ring, tail)
	frag := make([]byte, 100)
	written := 0
	for p.write(1, nil, frag) {
		written++
	}
	if want := (size - 8) / int(recordSize(100)); written != want || p.pos-tail.Load() > size-8 {
		t.Fatalf("wrote %d fragments (%d bytes) into a ring of %d, want %d", written, p.pos-tail.Load(), size, want)
	}
	if n, err := c.poll(1<<30, func(uint8, [][]byte) {}); err != nil || n != written {
		t.Fatalf("drained %d of %d: %v", n, written, err)
	}
	max := make([]byte, maxFragment(size))
	for shift := 0; shift < size; shift += 8 {
		if !p.write(2, max, nil) {
			t.Fatalf("an empty ring at index %d refused a fragment of %d bytes", p.pos%size, len(max))
		}
		if n, err := c.poll(1, func(uint8, [][]byte) {}); err != nil || n != 1 {
			t.Fatalf("at index %d: %d, %v", p.pos%size, n, err)
		}
		// Move the start by 8 bytes (a 0-byte fragment takes 16) for the
		// next round.
		if shift%16 == 0 {
			if !p.write(3, nil, nil) {
				t.Fatal("an empty ring refused an empty fragment")
			}
			c.poll(1, func(uint8, [][]byte) {})
		}
		if !p.write(4, make([]byte, 8), nil) {
			t.Fatal("an empty ring refused an 8-byte fragment")
		}
		c.poll(1, func(uint8, [][]byte) {})
	}
}

// TestStalePayloadIsNoStamp: payload bytes left by an earlier lap, equal to
// the stamp the consumer expects next, are not taken for a record.
func TestStalePayloadIsNoStamp(t *testing.T) {
	const size = minRingSize
	ring, tail := testRing(t, size)
	p, c := pair(t, ring, tail)
	// Lap 1: one fragment covering the ring's second half, filled with the
	// stamps the next lap's records will expect at every index there.
	p.write(0, make([]byte, 16), nil) // move off index 0
	c.poll(1, func(uint8, [][]byte) {})
	big := make([]byte, maxFragment(size))
	base := p.pos + recHeader // where big's payload starts
	for i := 0; i+8 <= len(big); i += 8 {
		binary.LittleEndian.PutUint64(big[i:], header(base+uint64(i)+size, 8, 2))
	}
	if !p.write(1, big, nil) {
		t.Fatal("refused")
	}
	c.poll(1, func(uint8, [][]byte) {})
	// Lap 2: small fragments walk over the stale payload; the consumer must
	// see exactly those written, one at a time.
	for i := 0; i < 300; i++ {
		if n, _ := c.poll(10, func(uint8, [][]byte) {}); n != 0 {
			t.Fatalf("after %d fragments, %d more delivered from stale bytes", i, n)
		}
		if !p.write(2, make([]byte, 8), nil) {
			t.Fatal("refused")
		}
		if n, err := c.poll(10, func(uint8, [][]byte) {}); n != 1 || err != nil {
			t.Fatalf("fragment %d: %d delivered, %v", i, n, err)
		}
	}
}

// TestConsumerRejectsGarbage: a stamp that matches over a header that makes
// no sense is an error, not a panic nor a delivery.
func TestConsumerRejectsGarbage(t *testing.T) {
	ring, tail := testRing(t, minRingSize)
	_, c := pair(t, ring, tail)
	binary.LittleEndian.PutUint64(ring, header(0, minRingSize, 0))
	if _, err := c.poll(10, func(uint8, [][]byte) { t.Error("delivered garbage") }); err == nil {
		t.Error("a record longer than the ring was accepted")
	}
	if _, _, ok := c.peek(); ok {
		t.Error("peek took a record longer than the ring")
	}
}

func TestRingSizes(t *testing.T) {
	for _, n := range []uint64{0, 1, 4095, 4097, 3 << 12, 2 << 30} {
		if validRingSize(n) {
			t.Errorf("%d accepted", n)
		}
	}
	for _, n := range []uint64{4096, 128 << 10, 1 << 30} {
		if !validRingSize(n) {
			t.Errorf("%d refused", n)
		}
	}
	if got := maxFragment(128 << 10); recordSize(got)+8 != 64<<10 || recordSize(got+1)+8 <= 64<<10 {
		t.Errorf("maxFragment(128k) = %d", got)
	}
}

// FuzzParseRecord: whatever a peer left in the ring, parseRecord either
// errs or describes a record inside the ring.
func FuzzParseRecord(f *testing.F) {
	f.Add(make([]byte, 64), uint64(0), header(0, 10, 7), 100)
	f.Add([]byte{1, 2, 3}, uint64(0), uint64(1), 0)
	f.Add(make([]byte, 32), uint64(1<<63), header(5, padLen, 0), -1)
	f.Fuzz(func(t *testing.T, ring []byte, idx, w uint64, maxFrag int) {
		r, err := parseRecord(ring, idx, w, maxFrag)
		if err != nil {
			return
		}
		size := uint64(len(ring))
		if idx+r.size > size || r.size < recHeader || r.n > maxFrag {
			t.Fatalf("record %+v at %d of a ring of %d", r, idx, size)
		}
		_ = ring[idx+recHeader : idx+recHeader+uint64(r.n)]
	})
}

// FuzzConsumer: a ring full of anything, with the consumer anywhere in it,
// yields errors or fragments inside the ring, never a panic.
func FuzzConsumer(f *testing.F) {
	f.Add([]byte{}, uint64(0))
	valid := make([]byte, 64)
	binary.LittleEndian.PutUint64(valid, header(0, 20, 3))
	binary.LittleEndian.PutUint64(valid[32:], padHeader(32))
	f.Add(valid, uint64(0))
	f.Add(valid, uint64(32))
	f.Fuzz(func(t *testing.T, data []byte, pos uint64) {
		ring, tail := testRing(t, minRingSize)
		copy(ring, data)
		if len(data) > 8 {
			copy(ring[minRingSize-len(data)/2:], data) // also near the end
		}
		tail.Store(pos)
		_, c := pair(t, ring, tail)
		c.poll(1000, each(func(_ uint8, frag []byte) {
			if len(frag) > maxFragment(minRingSize) {
				t.Fatalf("fragment of %d bytes", len(frag))
			}
		}))
	})
}

// ctlHeader is a control segment's header as shm writes it: shmem's
// identity and shm's probe words.
type ctlHeader struct {
	rank, pid, localSize int
	probe, nonce         uint64
}

func writeCtlHeader(mem []byte, h ctlHeader) {
	owner.WriteCtlHeader(mem, shmem.CtlHeader{Rank: h.rank, Pid: h.pid, LocalSize: h.localSize})
	putProbe(mem, h.probe, h.nonce)
}

func parseCtlHeader(mem []byte) (ctlHeader, error) {
	h, err := owner.ParseCtlHeader(mem)
	if err != nil {
		return ctlHeader{}, err
	}
	probe, nonce := probeOf(mem)
	return ctlHeader{rank: h.Rank, pid: h.Pid, localSize: h.LocalSize, probe: probe, nonce: nonce}, nil
}

// FuzzHeaders: the headers of segments and the modex card are other
// processes' data too.
func FuzzHeaders(f *testing.F) {
	ctl := make([]byte, shmem.CtlSize(2))
	writeCtlHeader(ctl, ctlHeader{rank: 1, pid: 42, localSize: 2, probe: 0x1000, nonce: 9})
	f.Add(ctl)
	box := make([]byte, boxHeader+minRingSize)
	writeBoxHeader(box, boxHeaderInfo{src: 0, dst: 1, pid: 42, size: minRingSize})
	f.Add(box)
	f.Add(owner.EncodeCard(shmem.Card{Pid: 42, CtlBytes: shmem.CtlSize(2), Ref: 8}))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		if h, err := parseCtlHeader(b); err == nil && shmem.CtlSize(h.localSize) > len(b) {
			t.Fatalf("control header %+v in %d bytes", h, len(b))
		}
		if h, err := parseBoxHeader(b); err == nil && (!validRingSize(h.size) || boxHeader+h.size != uint64(len(b))) {
			t.Fatalf("box header %+v in %d bytes", h, len(b))
		}
		if c, err := owner.ParseCard(b); err == nil && (c.Pid <= 0 || c.CtlBytes < shmem.CtlSize(1)) {
			t.Fatalf("card %+v", c)
		}
	})
}

func TestHeadersRoundTrip(t *testing.T) {
	ctl := make([]byte, shmem.CtlSize(3))
	want := ctlHeader{rank: 5, pid: 1234, localSize: 3, probe: 0xabc0, nonce: 77}
	writeCtlHeader(ctl, want)
	if got, err := parseCtlHeader(ctl); err != nil || got != want {
		t.Errorf("control header: %+v, %v", got, err)
	}
	box := make([]byte, boxHeader+minRingSize)
	wb := boxHeaderInfo{src: 3, dst: 4, pid: 99, size: minRingSize}
	writeBoxHeader(box, wb)
	if got, err := parseBoxHeader(box); err != nil || got != wb {
		t.Errorf("box header: %+v, %v", got, err)
	}
	if _, err := parseBoxHeader(box[:len(box)-8]); err == nil {
		t.Error("a truncated box was accepted")
	}
	card := shmem.Card{Pid: 1234, CtlBytes: shmem.CtlSize(3), Ref: 12}
	if c, err := owner.ParseCard(owner.EncodeCard(card)); err != nil || c != card {
		t.Errorf("card: %+v %v", c, err)
	}
}

// each adapts a per-fragment function to poll's runs.
func each(fn func(tag uint8, frag []byte)) func(uint8, [][]byte) {
	return func(tag uint8, frags [][]byte) {
		for _, f := range frags {
			fn(tag, f)
		}
	}
}
