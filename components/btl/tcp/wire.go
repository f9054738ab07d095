package tcp

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"net/netip"

	"github.com/gompi/gompi/mpierr"
)

// Everything this file parses comes from outside the process (a peer, or a
// stranger who connected to our port), so every parser checks lengths and
// values before it uses them, and returns an error rather than panicking.
// All integers are little-endian except ports, which are in network order
// as everywhere else.

// ---- Handshake ----
//
// The dialer of a connection sends a hello; the acceptor checks it and
// answers with a hello of its own, so that the dialer knows it reached the
// process it meant: kindReply when the connection is to carry both ranks'
// fragments, kindDefer when the acceptor has dialled the dialer too and
// keeps its own connection instead (tcp.go: one connection per pair). All
// are helloLen bytes:
//
//	off len field
//	  0   4 magic "gTCP"
//	  4   2 version (helloVersion)
//	  6   1 kind: kindHello (dialer), kindReply or kindDefer (acceptor)
//	  7   1 reserved, 0
//	  8  16 job id (jobTag of rte.Job.ID)
//	 24  16 job cookie
//	 40   4 sender's world rank
//	 44   4 the world rank the sender wants to reach
//	 48   4 largest frame body the sender will send on this connection

const (
	helloLen     = 52
	helloVersion = 2 // 2: one connection per pair carries both directions
	kindHello    = 1
	kindReply    = 2
	kindDefer    = 3

	// minFrameMax and maxFrameMax bound the frame sizes a peer may announce:
	// the range btl.RegisterCommon accepts for max_send_size.
	minFrameMax = 256
	maxFrameMax = 1 << 30
)

const helloMagic = "gTCP"

type hello struct {
	kind     uint8
	job      [16]byte
	cookie   [16]byte
	from, to uint32
	maxFrame uint32
}

func (h *hello) encode() []byte {
	b := make([]byte, helloLen)
	copy(b, helloMagic)
	binary.LittleEndian.PutUint16(b[4:], helloVersion)
	b[6] = h.kind
	copy(b[8:24], h.job[:])
	copy(b[24:40], h.cookie[:])
	binary.LittleEndian.PutUint32(b[40:], h.from)
	binary.LittleEndian.PutUint32(b[44:], h.to)
	binary.LittleEndian.PutUint32(b[48:], h.maxFrame)
	return b
}

// errHandshake is wrapped by every handshake rejection.
var errHandshake = mpierr.Errorf(mpierr.ErrIntern, "btl tcp: handshake rejected")

// checkMagic checks the first bytes of a hello, so that an acceptor drops
// garbage without waiting for a whole hello's worth of it.
func checkMagic(b []byte) error {
	if len(b) < 6 {
		return fmt.Errorf("%d bytes are too short for a hello: %w", len(b), errHandshake)
	}
	if string(b[:4]) != helloMagic {
		return fmt.Errorf("bad magic %q: %w", printable(b[:4]), errHandshake)
	}
	if v := binary.LittleEndian.Uint16(b[4:]); v != helloVersion {
		return fmt.Errorf("protocol version %d, want %d: %w", v, helloVersion, errHandshake)
	}
	return nil
}

// parseHello decodes a hello and checks its shape (not its identity: see
// identity.check).
func parseHello(b []byte) (hello, error) {
	var h hello
	if len(b) != helloLen {
		return h, fmt.Errorf("hello of %d bytes, want %d: %w", len(b), helloLen, errHandshake)
	}
	if err := checkMagic(b); err != nil {
		return h, err
	}
	h.kind = b[6]
	if h.kind != kindHello && h.kind != kindReply && h.kind != kindDefer {
		return h, fmt.Errorf("unknown hello kind %d: %w", h.kind, errHandshake)
	}
	if b[7] != 0 {
		return h, fmt.Errorf("reserved byte is %d: %w", b[7], errHandshake)
	}
	copy(h.job[:], b[8:24])
	copy(h.cookie[:], b[24:40])
	h.from = binary.LittleEndian.Uint32(b[40:])
	h.to = binary.LittleEndian.Uint32(b[44:])
	h.maxFrame = binary.LittleEndian.Uint32(b[48:])
	if h.maxFrame < minFrameMax || h.maxFrame > maxFrameMax {
		return h, fmt.Errorf("announced frame size %d outside %d..%d: %w", h.maxFrame, minFrameMax, maxFrameMax, errHandshake)
	}
	return h, nil
}

// jobTag turns a job id into the hello's 16-byte field: the id itself when it
// fits (readable in a packet capture), a hash of it otherwise.
func jobTag(id string) [16]byte {
	var t [16]byte
	if len(id) <= len(t) {
		copy(t[:], id)
		return t
	}
	h := fnv.New128a()
	h.Write([]byte(id))
	copy(t[:], h.Sum(nil))
	return t
}

// identity is what a hello is checked against.
type identity struct {
	job         [16]byte
	checkCookie func([]byte) bool // rte.Job.CheckCookie: constant time
	cookie      [16]byte
	rank, size  int
}

// hello returns this process's hello of kind to rank to.
func (id *identity) hello(kind uint8, to int, maxFrame int) hello {
	return hello{kind: kind, job: id.job, cookie: id.cookie, from: uint32(id.rank), to: uint32(to), maxFrame: uint32(maxFrame)}
}

// check parses b and checks that it is a hello of kind from a rank of this
// job (other than this one) to this rank. want, when not negative, is the
// only rank accepted as the sender (the dialer knows whom it called).
func (id *identity) check(b []byte, kind uint8, want int) (hello, error) {
	return id.checkKinds(b, kind, kind, want)
}

// checkAnswer checks the acceptor's answer to a dialer's hello to rank
// want: a reply or a deferral.
func (id *identity) checkAnswer(b []byte, want int) (hello, error) {
	return id.checkKinds(b, kindReply, kindDefer, want)
}

func (id *identity) checkKinds(b []byte, kind, alt uint8, want int) (hello, error) {
	h, err := parseHello(b)
	if err != nil {
		return h, err
	}
	switch {
	case h.kind != kind && h.kind != alt:
		return h, fmt.Errorf("hello kind %d, want %d: %w", h.kind, kind, errHandshake)
	case h.job != id.job:
		// The cookie is checked even so, in constant time, so that the
		// answer's timing says nothing about it.
		id.checkCookie(h.cookie[:])
		return h, fmt.Errorf("job %q is not this job: %w", printable(h.job[:]), errHandshake)
	case !id.checkCookie(h.cookie[:]):
		return h, fmt.Errorf("wrong cookie: %w", errHandshake)
	case int64(h.from) >= int64(id.size) || int(h.from) == id.rank:
		return h, fmt.Errorf("sender rank %d is impossible (job of %d, this is rank %d): %w", h.from, id.size, id.rank, errHandshake)
	case want >= 0 && int(h.from) != want:
		return h, fmt.Errorf("reached rank %d, wanted %d: %w", h.from, want, errHandshake)
	case int(h.to) != id.rank || int64(h.to) >= int64(id.size):
		return h, fmt.Errorf("hello is for rank %d, this is rank %d: %w", h.to, id.rank, errHandshake)
	}
	return h, nil
}

// printable shows a job tag in a log line: text when it is text.
func printable(b []byte) string {
	end := len(b)
	for end > 0 && b[end-1] == 0 {
		end--
	}
	for _, c := range b[:end] {
		if c < 0x20 || c > 0x7e {
			return fmt.Sprintf("%x", b)
		}
	}
	return string(b[:end])
}

// ---- Frames ----
//
// After the handshake a connection carries frames, each a frameHdrLen-byte
// header and a body:
//
//	off len field
//	  0   1 frameMagic
//	  1   1 kind: frameData, or frameBye (the sender is finalizing; no body)
//	  2   1 tag (btl.Tag) of a data frame; 0 for bye
//	  3   1 reserved, 0
//	  4   4 body length: at most the maximum announced in the hello
//
// The magic and reserved bytes cost nothing and turn a desynchronised stream
// into an error at once rather than a misread length.

const (
	frameHdrLen = 8
	frameMagic  = 0xc7
	frameData   = 0
	frameBye    = 1
)

type frameHeader struct {
	kind, tag uint8
	length    int
}

// errProtocol is wrapped by every malformed frame.
var errProtocol = mpierr.Errorf(mpierr.ErrIntern, "btl tcp: protocol error")

func putFrameHeader(b []byte, kind, tag uint8, length int) {
	b[0], b[1], b[2], b[3] = frameMagic, kind, tag, 0
	binary.LittleEndian.PutUint32(b[4:], uint32(length))
}

// parseFrameHeader decodes and checks a frame header against max, the
// largest body the connection may carry, before anything is allocated for
// the body.
func parseFrameHeader(b []byte, max int) (frameHeader, error) {
	if len(b) < frameHdrLen {
		return frameHeader{}, fmt.Errorf("frame header of %d bytes: %w", len(b), errProtocol)
	}
	h := frameHeader{kind: b[1], tag: b[2], length: int(binary.LittleEndian.Uint32(b[4:]))}
	switch {
	case b[0] != frameMagic:
		return h, fmt.Errorf("bad frame magic 0x%02x: %w", b[0], errProtocol)
	case b[3] != 0:
		return h, fmt.Errorf("reserved frame byte is %d: %w", b[3], errProtocol)
	case h.kind == frameData:
		if h.length > max {
			return h, fmt.Errorf("frame of %d bytes exceeds the maximum of %d: %w", h.length, max, errProtocol)
		}
	case h.kind == frameBye:
		if h.length != 0 || h.tag != 0 {
			return h, fmt.Errorf("bye frame with tag %d and %d bytes: %w", h.tag, h.length, errProtocol)
		}
	default:
		return h, fmt.Errorf("unknown frame kind %d: %w", h.kind, errProtocol)
	}
	return h, nil
}

// frameReader turns the bytes read from a connection into frames. Bytes are
// read into space() and committed with advance; next returns the complete
// frames, whose bodies point into the reader's buffer and stay valid until
// the next call to space.
type frameReader struct {
	buf  []byte
	r, w int // unread bytes are buf[r:w]
	max  int // largest body accepted
	// steerable, when set, says how many bytes of a frame's body to read
	// before it can be steered (btl.Steer): space() then grows or moves
	// buf for no more than that, so that a large payload does not make buf
	// large. It still returns all the free room, so a read may take some
	// payload bytes along, which the steer copies once to their place.
	// 0: not steerable.
	steerable func(tag uint8, length int) int
	// declined: the frame at r was offered and not steered; read it whole.
	declined bool
}

// initialReadBuf is a connection's first read buffer; it grows, up to one
// maximal frame, only when a frame needs it.
const initialReadBuf = 16 << 10

// minReadRoom: with less free room than this at the end of the buffer, the
// unread bytes move to the front so that reads stay large.
const minReadRoom = 4 << 10

func newFrameReader(max int) *frameReader {
	return &frameReader{buf: make([]byte, min(initialReadBuf, frameHdrLen+max)), max: max}
}

// space returns where to read next: never empty.
func (f *frameReader) space() []byte {
	if f.r == f.w {
		f.r, f.w = 0, 0
	}
	need := frameHdrLen // room for the frame being received
	if f.w-f.r >= frameHdrLen {
		if h, err := parseFrameHeader(f.buf[f.r:f.w], f.max); err == nil {
			need += h.length
			if f.steerable != nil && !f.declined {
				if k := f.steerable(h.tag, h.length); k > 0 {
					need = frameHdrLen + k
				}
			}
		}
	}
	switch {
	case need > len(f.buf):
		// need is at most frameHdrLen+max: the header was checked.
		nb := make([]byte, max(need, min(2*len(f.buf), frameHdrLen+f.max)))
		f.w = copy(nb, f.buf[f.r:f.w])
		f.r, f.buf = 0, nb
	case f.r > 0 && (f.r+need > len(f.buf) || len(f.buf)-f.w < minReadRoom):
		f.w = copy(f.buf, f.buf[f.r:f.w])
		f.r = 0
	}
	return f.buf[f.w:]
}

// advance commits n bytes read into space().
func (f *frameReader) advance(n int) { f.w += n }

// next returns the next complete frame; ok is false when more bytes are
// needed. After an error the stream is unusable.
func (f *frameReader) next() (h frameHeader, body []byte, ok bool, err error) {
	if f.w-f.r < frameHdrLen {
		return h, nil, false, nil
	}
	h, err = parseFrameHeader(f.buf[f.r:f.w], f.max)
	if err != nil {
		return h, nil, false, err
	}
	end := f.r + frameHdrLen + h.length
	if end > f.w {
		return h, nil, false, nil
	}
	body = f.buf[f.r+frameHdrLen : end]
	f.r = end
	f.declined = false
	return h, body, true, nil
}

// partial returns the header of the frame being received and the part of
// its body read so far; ok is false when no header is complete or the
// frame is (then next returns it).
func (f *frameReader) partial() (h frameHeader, body []byte, ok bool) {
	if f.w-f.r < frameHdrLen {
		return h, nil, false
	}
	h, err := parseFrameHeader(f.buf[f.r:f.w], f.max)
	if err != nil || f.r+frameHdrLen+h.length <= f.w {
		return h, nil, false
	}
	return h, f.buf[f.r+frameHdrLen : f.w], true
}

// drop forgets the partial frame (its body is being read elsewhere): the
// buffer holds nothing else, since the frame is incomplete.
func (f *frameReader) drop() { f.r, f.w, f.declined = 0, 0, false }

// ---- Business card ----
//
// What a module publishes in the modex under cardKey: the addresses it
// listens on, and the network namespace it is in when it knows it
// (netns.go).
//
//	off len field
//	  0   1 cardVersion
//	  1   1 n, the number of addresses (1..maxCardAddrs)
//	  2     n entries: family (4 or 6), the address (4 or 16 bytes), the
//	        port (2 bytes, network order)
//	        then nothing (namespace unknown), or the namespace: the boot
//	        id (16 bytes), the namespace's inode (8 bytes, network order),
//	        not both zero
//
// Version 1 had no namespace; it is refused like any other version, since
// every process of a job runs one build.

const (
	cardKey      = "btl.tcp.addr" // not "btl.tcp": rte's modex tests use that name for their own values
	cardVersion  = 2
	maxCardAddrs = 64
)

var errCard = mpierr.Errorf(mpierr.ErrIntern, "btl tcp: malformed business card")

// card is a business card.
type card struct {
	addrs []netip.AddrPort
	ns    netNS // zero: unknown
}

func encodeCard(c card) []byte {
	b := []byte{cardVersion, byte(len(c.addrs))}
	for _, ap := range c.addrs {
		a := ap.Addr().Unmap()
		if a.Is4() {
			b = append(b, 4)
		} else {
			b = append(b, 6)
		}
		b = append(b, a.AsSlice()...)
		b = binary.BigEndian.AppendUint16(b, ap.Port())
	}
	if c.ns.known() {
		b = c.ns.append(b)
	}
	return b
}

func parseCard(b []byte) (card, error) {
	if len(b) < 2 {
		return card{}, fmt.Errorf("%d bytes: %w", len(b), errCard)
	}
	if b[0] != cardVersion {
		return card{}, fmt.Errorf("version %d, want %d: %w", b[0], cardVersion, errCard)
	}
	n := int(b[1])
	if n == 0 || n > maxCardAddrs {
		return card{}, fmt.Errorf("%d addresses: %w", n, errCard)
	}
	out := make([]netip.AddrPort, 0, n)
	p := b[2:]
	for i := 0; i < n; i++ {
		if len(p) < 1 {
			return card{}, fmt.Errorf("truncated at address %d: %w", i, errCard)
		}
		alen := 0
		switch p[0] {
		case 4:
			alen = 4
		case 6:
			alen = 16
		default:
			return card{}, fmt.Errorf("address %d has family %d: %w", i, p[0], errCard)
		}
		if len(p) < 1+alen+2 {
			return card{}, fmt.Errorf("truncated at address %d: %w", i, errCard)
		}
		a, _ := netip.AddrFromSlice(p[1 : 1+alen])
		port := binary.BigEndian.Uint16(p[1+alen:])
		if port == 0 || a.IsUnspecified() || a.Is4In6() {
			return card{}, fmt.Errorf("address %d is %v port %d: %w", i, a, port, errCard)
		}
		out = append(out, netip.AddrPortFrom(a, port))
		p = p[1+alen+2:]
	}
	c := card{addrs: out}
	switch len(p) {
	case 0:
	case netNSLen:
		c.ns = netNSFrom(p)
		if !c.ns.known() {
			return card{}, fmt.Errorf("a zero network namespace: %w", errCard)
		}
	default:
		return card{}, fmt.Errorf("%d bytes after the last address (a network namespace is %d): %w", len(p), netNSLen, errCard)
	}
	return c, nil
}
