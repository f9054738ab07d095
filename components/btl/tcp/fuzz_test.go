package tcp

import (
	"bytes"
	"errors"
	"io"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/gompi/gompi/frameworks/btl"
	"github.com/gompi/gompi/mca"
	"github.com/gompi/gompi/mpierr"
	"github.com/gompi/gompi/params"
)

// Fuzz targets for everything the tcp BTL reads from outside: the
// handshake, the frame stream, the business card. Run one with
//
//	go test -run XXX -fuzz FuzzHandshake -fuzztime 30s ./components/btl/tcp

// FuzzHandshake feeds arbitrary hellos to the acceptor's check: it must not
// panic, must reject with errHandshake, and may accept only a hello whose
// every field is right.
func FuzzHandshake(f *testing.F) {
	id := testIdentity()
	good := hello{kind: kindHello, job: id.job, cookie: id.cookie, from: 2, to: 1, maxFrame: 1 << 17}
	f.Add(good.encode())
	wrong := good
	wrong.cookie[0] ^= 0xff
	f.Add(wrong.encode())
	f.Add([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
	f.Add(good.encode()[:10])
	f.Add([]byte{})
	deferral := good
	deferral.kind = kindDefer
	f.Add(deferral.encode())
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) >= 6 {
			if err := checkMagic(b[:6]); err != nil && !errors.Is(err, errHandshake) {
				t.Fatalf("checkMagic error without errHandshake: %v", err)
			}
		}
		if a, err := id.checkAnswer(b, 2); err != nil {
			if !errors.Is(err, errHandshake) {
				t.Fatalf("answer rejected without errHandshake: %v", err)
			}
		} else if (a.kind != kindReply && a.kind != kindDefer) || a.from != 2 || int(a.to) != id.rank || !bytes.Equal(a.encode(), b) {
			t.Fatalf("accepted a bad answer: %+v", a)
		}
		h, err := id.check(b, kindHello, -1)
		if err != nil {
			if !errors.Is(err, errHandshake) {
				t.Fatalf("rejection without errHandshake: %v", err)
			}
			return
		}
		// Accepted: it must be exactly a good hello from another rank of the
		// job to this one.
		if !bytes.Equal(h.encode(), b) {
			t.Fatalf("accepted a hello that does not re-encode to its bytes")
		}
		if h.job != id.job || h.cookie != id.cookie || h.kind != kindHello || int(h.to) != id.rank ||
			int(h.from) == id.rank || int(h.from) >= id.size || h.maxFrame < minFrameMax || h.maxFrame > maxFrameMax {
			t.Fatalf("accepted a bad hello: %+v", h)
		}
	})
}

// frameOut is what the receive path made of one frame.
type frameOut struct {
	placed bool // through the steer's Placed, else through the tag's callback
	tag    uint8
	hdr    []byte // placed: the PML header Placed was given
	body   []byte // the frame's body, or (placed) the payload in the buffer
}

// offer is one call of the steer's Where.
type offer struct {
	hdr       []byte
	dst       []byte
	g         *btl.Guard
	withdrawn []byte // the buffer when withdrawn, nil if it was not
	placed    bool
}

// FuzzFrames feeds an arbitrary byte stream, cut at arbitrary places, to a
// connection's receive path (inConn.poll, reading a pipe), with a steer on
// one tag whose Where, as the fuzzer chooses, declines, answers with a
// buffer of the wrong length, places the payload, or places it and takes
// the buffer back after the poll. Every frame of the stream up to the
// first bad one, a goodbye or the end must come out once and in order:
// whole through its tag's callback, or its header through Placed and its
// payload in the buffer Where gave, or not at all when its buffer was taken
// back first; nothing is written into a buffer once it is taken back. A
// bad frame loses the peer with a protocol error, and so does an end in
// the middle of a frame; a goodbye finalizes it. The read buffer never
// grows beyond one maximal frame.
func FuzzFrames(f *testing.F) {
	const limit, steerTag, hdrLen = 300, 9, 8
	frame := func(kind, tag uint8, body []byte) []byte {
		b := make([]byte, frameHdrLen, frameHdrLen+len(body))
		putFrameHeader(b, kind, tag, len(body))
		return append(b, body...)
	}
	seq := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(i*7 + 1)
		}
		return b
	}
	var stream []byte
	stream = append(stream, frame(frameData, 1, []byte("hello"))...)
	stream = append(stream, frame(frameData, steerTag, seq(200))...)
	stream = append(stream, frame(frameData, steerTag, seq(hdrLen+1))...)
	stream = append(stream, frame(frameData, 2, seq(limit))...)
	stream = append(stream, frame(frameData, steerTag, seq(limit))...)
	stream = append(stream, frame(frameBye, 0, nil)...)
	for _, choices := range []string{"\x02", "\x00\x01", "\x03", "\x02\x03\x00"} {
		f.Add(stream, []byte{1, 5, 200, 13}, []byte(choices))
	}
	f.Add(stream, []byte{}, []byte{2})
	// A byte at a time: the reader sees a steerable frame's header before
	// the PML header after it, and reads no further than that.
	f.Add(stream, []byte{1}, []byte{2, 3})
	f.Add(frame(frameData, 3, make([]byte, limit+1)), []byte{8}, []byte{})
	f.Add([]byte{frameMagic, 0, 0, 0, 0xff, 0xff, 0xff, 0xff}, []byte{3}, []byte{})
	f.Add(frame(frameData, steerTag, seq(100))[:60], []byte{20}, []byte{2})
	f.Add([]byte("garbage, not a frame"), []byte{}, []byte{})
	b, err := mca.NewBase(mca.Options{Output: io.Discard})
	if err != nil {
		f.Fatal(err)
	}
	log := b.Logger("btl").Named("tcp")
	f.Fuzz(func(t *testing.T, stream, cuts, choices []byte) {
		var want []frameOut
		end := "eof" // how the stream ends for the reader: eof, bye or bad
		for rest := stream; ; {
			if len(rest) < frameHdrLen {
				break
			}
			h, err := parseFrameHeader(rest, limit)
			if err != nil {
				end = "bad"
				break
			}
			if h.kind == frameBye {
				end = "bye"
				break
			}
			if len(rest) < frameHdrLen+h.length {
				break
			}
			want = append(want, frameOut{tag: h.tag, body: rest[frameHdrLen : frameHdrLen+h.length]})
			rest = rest[frameHdrLen+h.length:]
		}

		m := &module{gone: map[int]bool{}, log: log}
		var got []frameOut
		for tag := range 256 {
			m.RegisterRecv(btl.Tag(tag), func(src int, tag btl.Tag, frag []byte) {
				got = append(got, frameOut{tag: uint8(tag), body: append([]byte(nil), frag...)})
			})
		}
		var offers []*offer
		var withdraw *offer
		m.RegisterSteer(steerTag, btl.Steer{HdrLen: hdrLen, Min: 1,
			Where: func(src int, hdr []byte, n int) ([]byte, *btl.Guard) {
				o := &offer{hdr: append([]byte(nil), hdr...), g: &btl.Guard{}}
				offers = append(offers, o)
				choice := byte(0)
				if len(choices) > 0 {
					choice = choices[(len(offers)-1)%len(choices)] % 4
				}
				switch choice {
				case 0:
					return nil, nil
				case 1:
					return make([]byte, n+1), o.g
				case 3:
					withdraw = o
				}
				o.dst = make([]byte, n)
				return o.dst, o.g
			},
			Placed: func(src int, hdr []byte, n int) {
				o := offers[len(offers)-1]
				if o.withdrawn != nil || o.placed || n != len(o.dst) || !bytes.Equal(hdr, o.hdr) {
					t.Fatalf("Placed(%x, %d) for the offer of %x, %d bytes (withdrawn %v, placed %v)", hdr, n, o.hdr, len(o.dst), o.withdrawn != nil, o.placed)
				}
				o.placed = true
				got = append(got, frameOut{placed: true, tag: steerTag, hdr: o.hdr, body: append([]byte(nil), o.dst...)})
			},
		})

		var fds [2]int
		if err := unix.Pipe2(fds[:], unix.O_NONBLOCK|unix.O_CLOEXEC); err != nil {
			t.Fatal(err)
		}
		defer unix.Close(fds[0])
		c := &inConn{m: m, rank: 1, fr: newFrameReader(limit), fd: int32(fds[0])}
		c.fr.steerable = m.steerable
		c.rfn = c.read
		poll := func() bool {
			_, alive := c.poll()
			if withdraw != nil {
				withdraw.g.Withdraw()
				withdraw.withdrawn = append([]byte(nil), withdraw.dst...)
				withdraw = nil
			}
			if len(c.fr.buf) > frameHdrLen+limit {
				t.Fatalf("read buffer grew to %d", len(c.fr.buf))
			}
			return alive
		}
		alive := true
		for i := 0; len(stream) > 0 && alive; i++ {
			n := len(stream)
			if len(cuts) > 0 {
				n = min(n, max(1, int(cuts[i%len(cuts)])))
			}
			if k, err := unix.Write(fds[1], stream[:n]); err == nil {
				stream = stream[k:]
			} else if err != unix.EAGAIN {
				t.Fatal(err)
			}
			alive = poll()
		}
		unix.Close(fds[1])
		for i := 0; alive; i++ {
			if i > 1<<16 {
				t.Fatal("the connection is still alive after its writer closed")
			}
			alive = poll()
		}

		next := 0 // in offers, for frames dropped
		for i, w := range want {
			if len(got) > 0 && got[0].tag == w.tag && (!got[0].placed && bytes.Equal(got[0].body, w.body) ||
				got[0].placed && bytes.Equal(got[0].hdr, w.body[:hdrLen]) && bytes.Equal(got[0].body, w.body[hdrLen:])) {
				got = got[1:]
				continue
			}
			for next < len(offers) && (offers[next].withdrawn == nil || offers[next].placed) {
				next++
			}
			if next == len(offers) || w.tag != steerTag || !bytes.Equal(offers[next].hdr, w.body[:hdrLen]) || len(offers[next].dst) != len(w.body)-hdrLen {
				t.Fatalf("frame %d (tag %d, %d bytes) did not come out, and was not dropped", i, w.tag, len(w.body))
			}
			next++
		}
		if len(got) > 0 {
			t.Fatalf("%d frames more than the stream holds came out", len(got))
		}
		for _, o := range offers {
			if o.withdrawn != nil && !bytes.Equal(o.dst, o.withdrawn) {
				t.Fatal("a buffer was written after it was taken back")
			}
		}
		switch {
		case !m.gone[1]:
			t.Fatal("the peer is not gone at the end of its stream")
		case end == "bye" && len(m.lostQ) != 0:
			t.Fatalf("a goodbye lost the peer: %v", m.lostQ[0].err)
		case end != "bye" && len(m.lostQ) != 1:
			t.Fatalf("the stream ended (%s) without the peer lost", end)
		case end == "bad" && !strings.Contains(m.lostQ[0].err.Error(), "protocol error"):
			t.Fatalf("a bad frame lost the peer with %v", m.lostQ[0].err)
		}
	})
}

// FuzzCard feeds arbitrary business cards to the parser: it must not
// panic, must reject with errCard, and may accept only a card that
// re-encodes to its bytes (addresses, and a network namespace or none).
func FuzzCard(f *testing.F) {
	ns := netNS{boot: [16]byte{0x56, 0xc2, 0x68, 0xde, 15: 0x35}, inode: 4026531833}
	lo := []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:4096")}
	f.Add(encodeCard(card{}))
	f.Add(encodeCard(card{addrs: lo}))
	f.Add(encodeCard(card{addrs: lo, ns: ns}))
	f.Add(encodeCard(card{addrs: lo, ns: ns})[:2+7+netNSLen-1])
	f.Add(append(encodeCard(card{addrs: lo}), make([]byte, netNSLen)...)) // a zero namespace
	f.Add([]byte{1, 1, 4, 127, 0, 0, 1, 0x10, 0})                         // version 1
	f.Add([]byte{2, 1, 4, 127, 0, 0, 1, 0x10, 0})
	f.Add([]byte{2, 2, 6, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0x10, 1, 4, 10, 0, 0, 1, 0, 80})
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := parseCard(b)
		if err != nil {
			if !errors.Is(err, errCard) {
				t.Fatalf("error without errCard: %v", err)
			}
			return
		}
		if len(c.addrs) == 0 || len(c.addrs) > maxCardAddrs {
			t.Fatalf("%d addresses accepted", len(c.addrs))
		}
		if !bytes.Equal(encodeCard(c), b) {
			t.Fatalf("card does not re-encode to its bytes")
		}
	})
}

// FuzzSelectAddrs: btl_tcp_if_include and btl_tcp_if_exclude are the
// user's text. One list, as either parameter, is refused with an
// ErrUnsupportedParam error naming the parameter, or selects usable
// addresses of the interfaces, each once, none of the disabled family;
// when it works as both, what it includes and what it excludes split the
// usable addresses between them.
func FuzzSelectAddrs(f *testing.F) {
	for _, s := range []string{"lo", "192.0.2.0/24,eth1", "127.0.0.1", "fd00::/8", "lo,10.0.0.0/8", "127.0.0.1/8,nosuch", "10.0.0.0/99",
		"ifb0", "::ffff:10.1.2.3", "fe80::/10,eth0", " eth0 , lo "} {
		f.Add(s, uint8(0))
	}
	f.Add("eth0", uint8(2)) // IPv6 disabled
	f.Fuzz(func(t *testing.T, list string, family uint8) {
		disabled := []int{familyNone, familyIPv4, familyIPv6}[family%3]
		reg := params.NewRegistry()
		p := reg.Register(params.Def{Name: "btl_tcp_test_list", Framework: "btl", Component: "tcp", Type: params.List, Level: 1})
		reg.Freeze()
		vals, err := params.Resolve(reg, params.Sources{CommandLine: []params.Setting{{Name: p.Name(), Value: list}}})
		if err != nil {
			return // not a list: the parameter system refuses it
		}
		v, none := vals.Get(p), listValue(t, "")
		var usable []string
		for _, ifc := range testIfaces {
			for _, pr := range ifc.addrs {
				if a := pr.Addr(); ifc.up && familyOf(a) != disabled && !(a.Is6() && a.IsLinkLocalUnicast()) {
					usable = append(usable, ifc.name+"="+a.String())
				}
			}
		}
		sel := func(inc, exc params.Value) ([]string, bool) {
			s, err := selectAddrs(testIfaces, "btl_tcp_if_include", inc, "btl_tcp_if_exclude", exc, disabled)
			if err != nil {
				if !errors.Is(err, mpierr.ErrUnsupportedParam) || !strings.Contains(err.Error(), "btl_tcp_if_") {
					t.Fatalf("%q: %v lacks ErrUnsupportedParam or the parameter", list, err)
				}
				return nil, false
			}
			got := addrsOf(s)
			for i, a := range got {
				if !slices.Contains(usable, a) || slices.Contains(got[:i], a) {
					t.Fatalf("%q selected %s: not usable, or twice (usable: %s)", list, a, usable)
				}
			}
			return got, true
		}
		all, _ := sel(none, none)
		inc, incOK := sel(v, none)
		exc, excOK := sel(none, v)
		if !slices.Equal(all, usable) {
			t.Fatalf("no list selected %s, want %s", all, usable)
		}
		if incOK && excOK && len(v.List()) > 0 { // an empty list includes all
			for _, a := range all {
				if slices.Contains(inc, a) == slices.Contains(exc, a) {
					t.Fatalf("%q both includes and excludes %s, or neither (included %s, the rest %s)", list, a, inc, exc)
				}
			}
		}
	})
}
