package tcp

import (
	"bytes"
	"errors"
	"testing"
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
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) >= 6 {
			if err := checkMagic(b[:6]); err != nil && !errors.Is(err, errHandshake) {
				t.Fatalf("checkMagic error without errHandshake: %v", err)
			}
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

// FuzzFrames feeds an arbitrary byte stream, cut at arbitrary places, to the
// frame reader: it must not panic, must never return a body longer than the
// maximum, must report bad frames as protocol errors, and must never grow
// its buffer beyond one maximal frame.
func FuzzFrames(f *testing.F) {
	const limit = 300
	var stream []byte
	stream = append(stream, encodeFrame(frameData, 1, []byte("hello"))...)
	stream = append(stream, encodeFrame(frameData, 2, bytes.Repeat([]byte{7}, limit))...)
	stream = append(stream, encodeFrame(frameBye, 0, nil)...)
	f.Add(stream, []byte{1, 5, 200})
	f.Add(encodeFrame(frameData, 3, make([]byte, limit+1)), []byte{8})
	f.Add([]byte{frameMagic, 0, 0, 0, 0xff, 0xff, 0xff, 0xff}, []byte{3})
	f.Add([]byte("garbage, not a frame"), []byte{})
	f.Fuzz(func(t *testing.T, stream, cuts []byte) {
		chunks := make([]int, len(cuts))
		for i, c := range cuts {
			chunks[i] = int(c)
		}
		fr := newFrameReader(limit)
		for i := 0; len(stream) > 0; i++ {
			space := fr.space()
			if len(space) == 0 {
				t.Fatal("no room to read into")
			}
			if len(fr.buf) > frameHdrLen+limit {
				t.Fatalf("buffer grew to %d", len(fr.buf))
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
					if !errors.Is(err, errProtocol) {
						t.Fatalf("error without errProtocol: %v", err)
					}
					return
				}
				if !ok {
					break
				}
				if len(body) > limit || len(body) != h.length {
					t.Fatalf("body of %d bytes (header says %d, limit %d)", len(body), h.length, limit)
				}
				if h.kind == frameBye && len(body) != 0 {
					t.Fatal("bye with a body")
				}
			}
		}
	})
}

// FuzzCard feeds arbitrary business cards to the parser.
func FuzzCard(f *testing.F) {
	f.Add(encodeCard(nil))
	f.Add([]byte{1, 1, 4, 127, 0, 0, 1, 0x10, 0})
	f.Add([]byte{1, 2, 6, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0x10, 1, 4, 10, 0, 0, 1, 0, 80})
	f.Fuzz(func(t *testing.T, b []byte) {
		addrs, err := parseCard(b)
		if err != nil {
			if !errors.Is(err, errCard) {
				t.Fatalf("error without errCard: %v", err)
			}
			return
		}
		if len(addrs) == 0 || len(addrs) > maxCardAddrs {
			t.Fatalf("%d addresses accepted", len(addrs))
		}
		if !bytes.Equal(encodeCard(addrs), b) {
			t.Fatalf("card does not re-encode to its bytes")
		}
	})
}
