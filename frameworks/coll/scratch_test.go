package coll

import (
	"testing"
	"unsafe"
)

func TestScratchReusesBuffers(t *testing.T) {
	s := &Scratch{Keep: 1 << 20}
	a := s.Get(4096)
	if len(a) != 4096 {
		t.Fatalf("Get(4096) has length %d", len(a))
	}
	s.Put(a)
	b := s.Get(1000)
	if len(b) != 1000 || unsafe.SliceData(b) != unsafe.SliceData(a) {
		t.Fatalf("a smaller Get after Put did not reuse the kept buffer")
	}
	c := s.Get(1000) // the kept one is lent: a new one
	if unsafe.SliceData(c) == unsafe.SliceData(b) {
		t.Fatalf("one buffer lent twice")
	}
	s.Put(b, c)
	if n := testing.AllocsPerRun(100, func() { x, y := s.Get(4000), s.Get(900); s.Put(x, y) }); n != 0 {
		t.Errorf("steady Get/Put allocates %v times per call", n)
	}
}

func TestScratchKeepsAtMostKeep(t *testing.T) {
	s := &Scratch{Keep: 10 << 10}
	small, big := s.Get(4<<10), s.Get(8<<10)
	s.Put(small, big) // 12 KiB > Keep: the small one makes room
	if s.kept > s.Keep {
		t.Fatalf("kept %d bytes, Keep is %d", s.kept, s.Keep)
	}
	if got := s.Get(8 << 10); unsafe.SliceData(got) != unsafe.SliceData(big) {
		t.Fatalf("the large buffer was not the one kept")
	}
	huge := s.Get(1 << 20)
	s.Put(huge)
	if s.kept > s.Keep {
		t.Fatalf("a buffer larger than Keep was kept: %d bytes", s.kept)
	}
	s.Release()
	if s.kept != 0 || len(s.free) != 0 {
		t.Fatalf("Release left %d bytes", s.kept)
	}
	var none *Scratch // algorithms run with a nil Scratch outside a Table
	if b := none.Get(16); len(b) != 16 {
		t.Fatalf("nil Scratch Get(16) has length %d", len(b))
	}
	none.Put(make([]byte, 16))
}
