package ob1

import (
	"bytes"
	"testing"
)

func TestMatchHeaderRoundTrip(t *testing.T) {
	var b [maxHdr]byte
	for _, c := range []struct {
		ctx      uint16
		src, tag int
		seq      uint16
	}{{0, 0, 0, 0}, {65535, 1 << 30, 1<<31 - 1, 65535}, {7, 3, -5, 1}, {1, 0, -1, 40000}} {
		h := putMatch(b[:], hdrMatch, c.ctx, c.src, c.tag, c.seq)
		if len(h) != matchLen {
			t.Fatalf("MATCH header of %d bytes", len(h))
		}
		frag := append(append([]byte(nil), h...), "payload"...)
		got, payload, err := decodeMatch(frag)
		if err != nil {
			t.Fatal(err)
		}
		if got.typ != hdrMatch || got.ctx != c.ctx || int(got.src) != c.src || int(got.tag) != c.tag || got.seq != c.seq {
			t.Errorf("%+v decoded as %+v", c, got)
		}
		if string(payload) != "payload" {
			t.Errorf("payload %q", payload)
		}
	}
}

func TestRendezvousHeaderRoundTrip(t *testing.T) {
	var b [maxHdr]byte
	h := putRndv(b[:], hdrRndv, 3, 2, 99, 65535, 1<<40, 0xdeadbeef)
	frag := append(append([]byte(nil), h...), 1, 2, 3)
	got, chunk, err := decodeMatch(frag)
	if err != nil {
		t.Fatal(err)
	}
	if got.typ != hdrRndv || got.msgLen != 1<<40 || got.srcReq != 0xdeadbeef || got.seq != 65535 || len(chunk) != 3 {
		t.Errorf("decoded %+v, chunk %v", got, chunk)
	}

	desc := []byte{9, 8, 7, 6}
	h = putRndv(b[:], hdrRget, 0, 0, 0, 1, 1<<20, 42)
	frag = append(append([]byte(nil), h...), rgetPayload(nil, "shm", desc)...)
	got, rest, err := decodeMatch(frag)
	if err != nil {
		t.Fatal(err)
	}
	name, d, err := decodeRget(rest)
	if err != nil || string(name) != "shm" || !bytes.Equal(d, desc) || got.typ != hdrRget || got.srcReq != 42 {
		t.Errorf("RGET decoded as %+v, %q, %v, %v", got, name, d, err)
	}

	// Stamped: the stamp comes back, and what follows it is the payload.
	h = putStamp(putRndv(b[:], hdrRget, 0, 0, 0, 1, 1<<20, 43), 1_700_000_000_123_456_789)
	frag = append(append([]byte(nil), h...), rgetPayload(nil, "shm", desc)...)
	got, rest, err = decodeMatch(frag)
	if err != nil || got.stamp != 1_700_000_000_123_456_789 || got.srcReq != 43 {
		t.Fatalf("stamped RGET decoded as %+v, %v", got, err)
	}
	if name, d, err := decodeRget(rest); err != nil || string(name) != "shm" || !bytes.Equal(d, desc) {
		t.Errorf("stamped RGET's payload decoded as %q, %v, %v", name, d, err)
	}
	h = putStamp(putRndv(b[:], hdrPipe, 0, 0, 0, 2, 5, 44), 7)
	if got, chunk, err := decodeMatch(append(append([]byte(nil), h...), 1, 2, 3)); err != nil || got.stamp != 7 || len(chunk) != 3 {
		t.Errorf("stamped PIPE decoded as %+v, chunk %v, %v", got, chunk, err)
	}
	if _, _, err := decodeMatch(h[:rndvLen+stampLen-1]); err == nil {
		t.Error("a stamped PIPE cut inside its stamp decoded")
	}
}

func TestControlHeadersRoundTrip(t *testing.T) {
	var b [maxHdr]byte
	a := ackHdr{srcReq: 1, dstReq: 2, offset: 3, want: 1 << 33, flags: ackPipeline}
	got, err := decodeAck(putAck(b[:], a))
	if err != nil || got != a {
		t.Errorf("ACK %+v decoded as %+v, %v", a, got, err)
	}
	f := fragHdr{dstReq: 77, offset: 1 << 20}
	frag := append(append([]byte(nil), putFrag(b[:], f)...), "data"...)
	gf, data, err := decodeFrag(frag)
	if err != nil || gf != f || string(data) != "data" {
		t.Errorf("FRAG %+v decoded as %+v %q, %v", f, gf, data, err)
	}
	id, err := decodeFin(putFin(b[:], 12345))
	if err != nil || id != 12345 {
		t.Errorf("FIN decoded as %d, %v", id, err)
	}
}

func TestMalformedHeaders(t *testing.T) {
	var b [maxHdr]byte
	rndv := func(msgLen int, chunk int) []byte {
		h := putRndv(b[:], hdrRndv, 0, 0, 0, 0, msgLen, 1)
		return append(append([]byte(nil), h...), make([]byte, chunk)...)
	}
	for name, frag := range map[string][]byte{
		"empty":                  nil,
		"short match":            make([]byte, matchLen-1),
		"short rndv":             append([]byte{hdrRndv}, make([]byte, rndvLen-2)...),
		"chunk beyond length":    rndv(2, 3),
		"absurd length":          rndv(maxMsgLen+1, 0),
		"rget without desc":      putRndv(b[:], hdrRget, 0, 0, 0, 0, 100, 1),
		"rget name cut":          append(append([]byte(nil), putRndv(b[:], hdrRget, 0, 0, 0, 0, 100, 1)...), 10, 'a'),
		"not a match type":       append([]byte{hdrAck}, make([]byte, 40)...),
		"unknown type as match:": append([]byte{200}, make([]byte, 40)...),
	} {
		if _, _, err := decodeMatch(frag); err == nil {
			t.Errorf("%s: decoded without error", name)
		}
	}
	if _, err := decodeAck(make([]byte, ackLen-1)); err == nil {
		t.Error("short ACK decoded")
	}
	if _, _, err := decodeFrag(make([]byte, fragLen-1)); err == nil {
		t.Error("short FRAG decoded")
	}
	if _, err := decodeFin(nil); err == nil {
		t.Error("empty FIN decoded")
	}
}

// FuzzHeader feeds arbitrary bytes to every decoder, and to the receive
// path of a module: nothing may panic, and a header that decodes encodes
// back to the same bytes.
func FuzzHeader(f *testing.F) {
	var b [maxHdr]byte
	f.Add(append([]byte(nil), putMatch(b[:], hdrMatch, 0, 1, 5, 3)...))
	f.Add(append(append([]byte(nil), putRndv(b[:], hdrRndv, 0, 1, 5, 0, 10, 9)...), 1, 2))
	f.Add(append(append([]byte(nil), putRndv(b[:], hdrRget, 0, 1, 5, 0, 10, 9)...), rgetPayload(nil, "self", []byte{1})...))
	f.Add(append([]byte(nil), putAck(b[:], ackHdr{1, 2, 3, 4, 0})...))
	f.Add(append(append([]byte(nil), putFrag(b[:], fragHdr{1, 0})...), 5))
	f.Add(append([]byte(nil), putFin(b[:], 7)...))
	// A PIPE with its first chunk, then PFRAGs that fit, overrun, or name
	// no message.
	f.Add(append(append([]byte(nil), putRndv(b[:], hdrPipe, 0, 1, 5, 0, 20, 9)...), 1, 2, 3, 4))
	// Stamped: a PIPE and an RGET in the sender's pipelined range.
	f.Add(append(append([]byte(nil), putStamp(putRndv(b[:], hdrPipe, 0, 1, 5, 1, 20, 10), 1<<60)...), 1, 2, 3, 4))
	f.Add(append(append([]byte(nil), putStamp(putRndv(b[:], hdrRget, 0, 1, 5, 1, 10, 11), 12345)...), rgetPayload(nil, "self", []byte{1})...))
	f.Add(append(append([]byte(nil), putFragOf(b[:], hdrPFrag, fragHdr{9, 4})...), 5, 6, 7))
	f.Add(append(append([]byte(nil), putFragOf(b[:], hdrPFrag, fragHdr{9, 18})...), 5, 6, 7))
	f.Add(append(append([]byte(nil), putFragOf(b[:], hdrPFrag, fragHdr{77, 0})...), 5))
	f.Add([]byte{})
	m, _ := newTestModule(f, 2)
	m.pipeLim = []int{1 << 16, 1 << 16} // PIPEs up to 64 KiB enter the table
	f.Fuzz(func(t *testing.T, frag []byte) {
		if h, rest, err := decodeMatch(frag); err == nil {
			var again []byte
			var hb [maxHdr]byte
			if h.typ == hdrMatch {
				again = putMatch(hb[:], h.typ, h.ctx, int(h.src), int(h.tag), h.seq)
			} else {
				again = putRndv(hb[:], h.typ, h.ctx, int(h.src), int(h.tag), h.seq, int(h.msgLen), h.srcReq)
			}
			stamped := h.typ != hdrMatch && h.typ != hdrRndv && frag[1]&flagStamp != 0
			if stamped {
				again = putStamp(again, h.stamp)
			}
			// Flags but the stamp's, and padding, are not kept.
			got := append(append([]byte(nil), again...), rest...)
			want := append([]byte(nil), frag...)
			want[1] = 0
			if stamped {
				want[1] = flagStamp
			}
			want[14], want[15] = 0, 0
			if !bytes.Equal(got, want) {
				t.Errorf("%x re-encodes as %x", frag, got)
			}
		}
		decodeAck(frag)
		decodeFrag(frag)
		decodeFragOf(frag, hdrPFrag)
		decodeFin(frag)
		// The receive path must drop what it cannot use, never panic.
		m.dispatch(1, frag)
	})
}
