package tcp

import (
	"bytes"
	"crypto/subtle"
	"encoding/binary"
	"errors"
	"net/netip"
	"slices"
	"testing"
)

// testIdentity is rank 1 of a job of 4.
func testIdentity() *identity {
	id := &identity{job: jobTag("a1b2c3d4"), rank: 1, size: 4}
	copy(id.cookie[:], "0123456789abcdef")
	id.checkCookie = func(b []byte) bool {
		return len(b) == len(id.cookie) && subtle.ConstantTimeCompare(b, id.cookie[:]) == 1
	}
	return id
}

func TestHelloChecks(t *testing.T) {
	id := testIdentity()
	good := hello{kind: kindHello, job: id.job, cookie: id.cookie, from: 2, to: 1, maxFrame: 1 << 17}
	if h, err := id.check(good.encode(), kindHello, -1); err != nil || h != good {
		t.Fatalf("good hello: %+v, %v", h, err)
	}
	if _, err := id.check(good.encode(), kindHello, 2); err != nil {
		t.Fatalf("good hello from the wanted rank: %v", err)
	}
	bad := map[string]func(h *hello) []byte{
		"wrong cookie":    func(h *hello) []byte { h.cookie[3] ^= 1; return h.encode() },
		"wrong job":       func(h *hello) []byte { h.job = jobTag("other"); return h.encode() },
		"rank too large":  func(h *hello) []byte { h.from = 4; return h.encode() },
		"own rank":        func(h *hello) []byte { h.from = 1; return h.encode() },
		"not for us":      func(h *hello) []byte { h.to = 3; return h.encode() },
		"huge rank":       func(h *hello) []byte { h.from = 1 << 31; return h.encode() },
		"unwanted sender": func(h *hello) []byte { h.from = 3; return h.encode() },
		"reply kind":      func(h *hello) []byte { h.kind = kindReply; return h.encode() },
		"frame too small": func(h *hello) []byte { h.maxFrame = 10; return h.encode() },
		"frame too large": func(h *hello) []byte { h.maxFrame = 1<<30 + 1; return h.encode() },
		"short":           func(h *hello) []byte { return h.encode()[:helloLen-1] },
		"long":            func(h *hello) []byte { return append(h.encode(), 0) },
		"bad magic":       func(h *hello) []byte { b := h.encode(); b[0] = 'x'; return b },
		"bad version":     func(h *hello) []byte { b := h.encode(); b[4] = 9; return b },
		"reserved":        func(h *hello) []byte { b := h.encode(); b[7] = 1; return b },
		"unknown kind":    func(h *hello) []byte { b := h.encode(); b[6] = 7; return b },
		"garbage":         func(h *hello) []byte { return bytes.Repeat([]byte{0xff}, helloLen) },
		"empty":           func(h *hello) []byte { return nil },
	}
	for name, mk := range bad {
		h := good
		want := -1
		if name == "unwanted sender" {
			want = 2
		}
		if _, err := id.check(mk(&h), kindHello, want); !errors.Is(err, errHandshake) {
			t.Errorf("%s: accepted or wrong error: %v", name, err)
		}
	}
}

// The dialer takes a reply or a deferral from the rank it called, and
// nothing else.
func TestAnswerChecks(t *testing.T) {
	id := testIdentity()
	for _, kind := range []uint8{kindReply, kindDefer} {
		ans := hello{kind: kind, job: id.job, cookie: id.cookie, from: 2, to: 1, maxFrame: 1 << 17}
		if h, err := id.checkAnswer(ans.encode(), 2); err != nil || h != ans {
			t.Errorf("answer of kind %d: %+v, %v", kind, h, err)
		}
		if _, err := id.checkAnswer(ans.encode(), 3); !errors.Is(err, errHandshake) {
			t.Errorf("answer of kind %d from a rank not called: %v", kind, err)
		}
		if _, err := id.check(ans.encode(), kindHello, -1); !errors.Is(err, errHandshake) {
			t.Errorf("answer of kind %d taken for a hello: %v", kind, err)
		}
	}
	h := hello{kind: kindHello, job: id.job, cookie: id.cookie, from: 2, to: 1, maxFrame: 1 << 17}
	if _, err := id.checkAnswer(h.encode(), 2); !errors.Is(err, errHandshake) {
		t.Errorf("a hello taken for an answer: %v", err)
	}
}

func TestJobTag(t *testing.T) {
	if a, b := jobTag("short"), jobTag("short"); a != b || printable(a[:]) != "short" {
		t.Errorf("short id: %q", printable(a[:]))
	}
	long1, long2 := jobTag("a-very-long-job-id-0001"), jobTag("a-very-long-job-id-0002")
	if long1 == long2 {
		t.Error("two long ids share a tag")
	}
}

func encodeFrame(kind, tag uint8, body []byte) []byte {
	b := make([]byte, frameHdrLen+len(body))
	putFrameHeader(b, kind, tag, len(body))
	copy(b[frameHdrLen:], body)
	return b
}

// feed runs a stream through a frameReader in chunks of the given sizes
// (cycled), returning the frames and the first error.
func feed(stream []byte, chunks []int, limit int) (frames [][]byte, tags []uint8, err error) {
	fr := newFrameReader(limit)
	for i := 0; len(stream) > 0; i++ {
		space := fr.space()
		if len(space) == 0 {
			return frames, tags, errors.New("space() returned no room")
		}
		n := len(space)
		if len(chunks) > 0 {
			n = min(n, max(1, chunks[i%len(chunks)]))
		}
		n = copy(space[:n], stream)
		stream = stream[n:]
		fr.advance(n)
		for {
			h, body, ok, err := fr.next()
			if err != nil {
				return frames, tags, err
			}
			if !ok {
				break
			}
			frames = append(frames, append([]byte(nil), body...))
			tags = append(tags, h.tag)
		}
	}
	return frames, tags, nil
}

func TestFrameReader(t *testing.T) {
	const max = 1000
	var stream []byte
	var want [][]byte
	for i, n := range []int{0, 1, 7, 8, 999, 1000, 3, 500, 1000, 0} {
		body := bytes.Repeat([]byte{byte(i + 1)}, n)
		want = append(want, body)
		stream = append(stream, encodeFrame(frameData, uint8(i), body)...)
	}
	for _, chunks := range [][]int{nil, {1}, {3, 5, 7}, {8}, {1000, 1}, {4096}} {
		got, tags, err := feed(stream, chunks, max)
		if err != nil {
			t.Fatalf("chunks %v: %v", chunks, err)
		}
		if len(got) != len(want) {
			t.Fatalf("chunks %v: %d frames, want %d", chunks, len(got), len(want))
		}
		for i := range want {
			if !bytes.Equal(got[i], want[i]) || tags[i] != uint8(i) {
				t.Fatalf("chunks %v: frame %d differs", chunks, i)
			}
		}
	}
	// Too long, bad magic, bad kind, a bye with a body: protocol errors.
	for name, b := range map[string][]byte{
		"too long":  encodeFrame(frameData, 1, make([]byte, max+1)),
		"bad magic": append([]byte{0x00}, encodeFrame(frameData, 1, nil)[1:]...),
		"bad kind":  encodeFrame(9, 1, nil),
		"bye body":  encodeFrame(frameBye, 0, []byte{1}),
		"reserved":  func() []byte { b := encodeFrame(frameData, 1, nil); b[3] = 1; return b }(),
	} {
		if _, _, err := feed(b, nil, max); !errors.Is(err, errProtocol) {
			t.Errorf("%s: %v", name, err)
		}
	}
	// A header announcing 4 GiB is refused before anything is allocated.
	h := make([]byte, frameHdrLen)
	putFrameHeader(h, frameData, 0, 0)
	binary.LittleEndian.PutUint32(h[4:], ^uint32(0))
	fr := newFrameReader(max)
	copy(fr.space(), h)
	fr.advance(len(h))
	if _, _, _, err := fr.next(); !errors.Is(err, errProtocol) {
		t.Errorf("4 GiB frame: %v", err)
	}
	if len(fr.space()) > initialReadBuf {
		t.Errorf("reader grew to %d for a refused frame", len(fr.buf))
	}
}

func TestCard(t *testing.T) {
	addrs := []netip.AddrPort{
		netip.MustParseAddrPort("127.0.0.1:4000"),
		netip.MustParseAddrPort("[::1]:4001"),
		netip.MustParseAddrPort("192.0.2.2:65535"),
	}
	ns := netNS{boot: [16]byte{1, 2, 3, 15: 16}, inode: 1<<40 + 7}
	for _, c := range []card{{addrs: addrs}, {addrs: addrs, ns: ns}} {
		b := encodeCard(c)
		want := 2 + 7 + 19 + 7
		if c.ns.known() {
			want += netNSLen
		}
		if len(b) != want {
			t.Errorf("card of %d bytes, want %d", len(b), want)
		}
		got, err := parseCard(b)
		if err != nil || !slices.Equal(got.addrs, c.addrs) || got.ns != c.ns {
			t.Errorf("parse: %v %v %v, want %v %v", got.addrs, got.ns, err, c.addrs, c.ns)
		}
	}
	b := encodeCard(card{addrs: addrs})
	withNS := encodeCard(card{addrs: addrs, ns: ns})
	for name, bad := range map[string][]byte{
		"empty":       nil,
		"version":     {9, 1, 4, 127, 0, 0, 1, 0, 1},
		"version 1":   {1, 1, 4, 127, 0, 0, 1, 0, 1},
		"no address":  {2, 0},
		"truncated":   b[:len(b)-1],
		"trailing":    append(append([]byte(nil), b...), 0),
		"family":      {2, 1, 5, 127, 0, 0, 1, 0, 1},
		"port 0":      {2, 1, 4, 127, 0, 0, 1, 0, 0},
		"any addr":    {2, 1, 4, 0, 0, 0, 0, 0, 1},
		"short netns": withNS[:len(withNS)-1],
		"long netns":  append(append([]byte(nil), withNS...), 0),
		"zero netns":  append(append([]byte(nil), b...), make([]byte, netNSLen)...),
	} {
		if _, err := parseCard(bad); !errors.Is(err, errCard) {
			t.Errorf("%s: %v", name, err)
		}
	}
}
