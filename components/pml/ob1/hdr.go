package ob1

import (
	"encoding/binary"
	"fmt"

	"github.com/gompi/gompi/frameworks/btl"
)

// Wire format. Every header starts with its type and a flags byte; integers
// are little endian (gompi jobs are homogeneous, and every machine it runs
// on is little endian). The types keep ob1's numbers, and each travels on
// BTL tag TagPML + type.
//
//	MATCH  (16)  type flags ctx:u16 src:i32 tag:i32 seq:u16 pad:u16, then the payload
//	RNDV   (32)  MATCH + msglen:u64 srcreq:u64, then the first chunk
//	RGET   (32)  as RNDV, then len:u8 + the RDMA route's BTL name + its Expose description
//	ACK    (40)  type flags pad:6 srcreq:u64 dstreq:u64 offset:u64 want:u64 (flags: ackPipeline)
//	FRAG   (24)  type flags pad:6 dstreq:u64 offset:u64, then data
//	FIN    (16)  type flags pad:6 srcreq:u64
//	PIPE   (32)  as RNDV, then the first chunk; the rest follows unasked
//
// An RGET or PIPE with flagStamp in its flags carries 8 more bytes after
// its 32, stamp:i64, the sender's wall clock (ns) when it began the send;
// what follows the header comes after them. (rdmachoice.go: the receiver
// times a message in the sender's pipelined range from it.)
//
//	PFRAG  (24)  as FRAG, naming the sender's srcreq instead of dstreq
//
// ctx is the communicator's context id, src the sender's rank in it, seq the
// per-(communicator, sender) sequence number (wrapping at 65536). srcreq and
// dstreq name the sender's and the receiver's request in their own tables;
// they are numbers, never pointers, and a number the table does not hold is
// dropped. ACK asks the sender for bytes [offset, want) of its message, sent
// as FRAGs to dstreq; offset >= want means "nothing more: you are done".
// An ACK that answers an RGET sets ackPipeline when fragments are the
// receiver's choice for messages of its size from this sender
// (rdmachoice.go). FIN
// tells an RGET's sender that its buffer has been read. PIPE is a message
// sent eagerly in several fragments: its PFRAGs follow without an ACK, and
// the receiver places them by (sender, srcreq) into the matched receive, or
// holds them while the message is unexpected.
const (
	hdrMatch = 1
	hdrRndv  = 2
	hdrRget  = 3
	hdrAck   = 4
	hdrFrag  = 6
	hdrFin   = 9
	hdrPipe  = 11
	hdrPFrag = 12
)

// flagStamp, in an RGET's or PIPE's flags, says a stamp follows the header.
const flagStamp = 1

// stampLen is the length of the stamp that follows a header with flagStamp.
const stampLen = 8

// Header lengths.
const (
	matchLen = 16
	rndvLen  = 32
	ackLen   = 40
	fragLen  = 24
	finLen   = 16
	// maxHdr is the longest header (a stamped one's as long as an ACK);
	// per-peer scratch buffers hold one.
	maxHdr = max(ackLen, rndvLen+stampLen)
)

// maxMsgLen bounds a rendezvous length read from the wire, so that it fits
// an int with room to add offsets.
const maxMsgLen = 1 << 48

func tagOf(typ byte) btl.Tag { return btl.TagPML + btl.Tag(typ) }

// matchHdr is a decoded MATCH, RNDV or RGET header.
type matchHdr struct {
	typ    byte
	flags  byte
	ctx    uint16
	src    int32
	tag    int32
	seq    uint16
	msgLen uint64 // RNDV, RGET, PIPE
	srcReq uint64 // RNDV, RGET, PIPE
	stamp  int64  // RGET, PIPE with flagStamp; 0 without
}

var le = binary.LittleEndian

// putMatch writes a MATCH-shaped header of type typ into b and returns it.
func putMatch(b []byte, typ byte, ctx uint16, src, tag int, seq uint16) []byte {
	b = b[:matchLen]
	b[0], b[1] = typ, 0
	le.PutUint16(b[2:], ctx)
	le.PutUint32(b[4:], uint32(int32(src)))
	le.PutUint32(b[8:], uint32(int32(tag)))
	le.PutUint16(b[12:], seq)
	b[14], b[15] = 0, 0
	return b
}

// putRndv writes an RNDV or RGET header into b and returns it.
func putRndv(b []byte, typ byte, ctx uint16, src, tag int, seq uint16, msgLen int, srcReq uint64) []byte {
	putMatch(b, typ, ctx, src, tag, seq)
	b = b[:rndvLen]
	le.PutUint64(b[16:], uint64(msgLen))
	le.PutUint64(b[24:], srcReq)
	return b
}

// putStamp appends the stamp to an RGET or PIPE header made by putRndv in
// b (which has room for it), and flags it.
func putStamp(b []byte, stamp int64) []byte {
	b[1] |= flagStamp
	b = b[:rndvLen+stampLen]
	le.PutUint64(b[rndvLen:], uint64(stamp))
	return b
}

// decodeMatch parses a MATCH, RNDV, RGET or PIPE header and returns it with
// what follows it.
func decodeMatch(frag []byte) (matchHdr, []byte, error) {
	if len(frag) < matchLen {
		return matchHdr{}, nil, fmt.Errorf("match header of %d bytes, want %d", len(frag), matchLen)
	}
	var h matchHdr
	matchFields(&h, frag)
	switch h.typ {
	case hdrMatch:
		return h, frag[matchLen:], nil
	case hdrRndv, hdrRget, hdrPipe:
		if len(frag) < rndvLen {
			return h, nil, fmt.Errorf("rendezvous header of %d bytes, want %d", len(frag), rndvLen)
		}
		h.msgLen = le.Uint64(frag[16:])
		h.srcReq = le.Uint64(frag[24:])
		rest := frag[rndvLen:]
		if h.flags&flagStamp != 0 && h.typ != hdrRndv {
			if len(rest) < stampLen {
				return h, nil, fmt.Errorf("stamped rendezvous header of %d bytes, want %d", len(frag), rndvLen+stampLen)
			}
			h.stamp, rest = int64(le.Uint64(rest)), rest[stampLen:]
		}
		if h.msgLen > maxMsgLen {
			return h, nil, fmt.Errorf("rendezvous of %d bytes: larger than %d", h.msgLen, uint64(maxMsgLen))
		}
		if h.typ != hdrRget && uint64(len(rest)) > h.msgLen {
			return h, nil, fmt.Errorf("rendezvous first chunk of %d bytes for a message of %d", len(rest), h.msgLen)
		}
		if h.typ == hdrRget {
			if _, _, err := decodeRget(rest); err != nil {
				return h, nil, err
			}
		}
		return h, rest, nil
	}
	return h, nil, fmt.Errorf("header type %d is not a match header", h.typ)
}

// matchFields reads the fields every match header has from frag, of at
// least matchLen bytes, into h. Small enough to inline: dispatch decodes a
// MATCH with it alone (decodeMatch's call and results cost a windowed
// message ~15 ns). It fills h in place rather than returning a matchHdr,
// which the caller would copy 16 bytes at a time out of the narrower
// stores that built it, stalling store forwarding (~5 ns a message).
func matchFields(h *matchHdr, frag []byte) {
	_ = frag[matchLen-1]
	h.typ, h.flags, h.ctx, h.src = frag[0], frag[1], le.Uint16(frag[2:]), int32(le.Uint32(frag[4:]))
	h.tag, h.seq = int32(le.Uint32(frag[8:])), le.Uint16(frag[12:])
}

// rgetPayload appends to b what follows an RGET header: the name of the BTL
// whose RDMA module exposed the buffer, and its description.
func rgetPayload(b []byte, btlName string, desc []byte) []byte {
	return append(rgetName(b, btlName), desc...)
}

// rgetName appends the BTL name part of an RGET's payload to b.
func rgetName(b []byte, btlName string) []byte {
	b = append(b, byte(len(btlName)))
	return append(b, btlName...)
}

func decodeRget(p []byte) (name, desc []byte, err error) {
	if len(p) < 1 || len(p) < 1+int(p[0]) {
		return nil, nil, fmt.Errorf("RGET description of %d bytes is cut short", len(p))
	}
	return p[1 : 1+int(p[0])], p[1+int(p[0]):], nil
}

// ackHdr is an ACK.
type ackHdr struct {
	srcReq, dstReq, offset, want uint64
	flags                        byte
}

// ackPipeline, in an ACK's flags, says the receiver takes messages of this
// size from the sender by fragments: in the pipelined range, send them as
// PIPEs for a while (pipeOffers).
const ackPipeline = 1

func putAck(b []byte, a ackHdr) []byte {
	b = b[:ackLen]
	clear(b[:8])
	b[0], b[1] = hdrAck, a.flags
	le.PutUint64(b[8:], a.srcReq)
	le.PutUint64(b[16:], a.dstReq)
	le.PutUint64(b[24:], a.offset)
	le.PutUint64(b[32:], a.want)
	return b
}

func decodeAck(frag []byte) (ackHdr, error) {
	if len(frag) != ackLen || frag[0] != hdrAck {
		return ackHdr{}, fmt.Errorf("ACK of %d bytes, want %d", len(frag), ackLen)
	}
	a := ackHdr{le.Uint64(frag[8:]), le.Uint64(frag[16:]), le.Uint64(frag[24:]), le.Uint64(frag[32:]), frag[1]}
	if a.want > maxMsgLen || a.offset > maxMsgLen {
		return a, fmt.Errorf("ACK for bytes [%d, %d): out of range", a.offset, a.want)
	}
	return a, nil
}

type fragHdr struct{ dstReq, offset uint64 }

func putFrag(b []byte, f fragHdr) []byte { return putFragOf(b, hdrFrag, f) }

// putFragOf writes a FRAG-shaped header of type typ (FRAG, PFRAG).
func putFragOf(b []byte, typ byte, f fragHdr) []byte {
	b = b[:fragLen]
	clear(b[:8])
	b[0] = typ
	le.PutUint64(b[8:], f.dstReq)
	le.PutUint64(b[16:], f.offset)
	return b
}

func decodeFrag(frag []byte) (fragHdr, []byte, error) { return decodeFragOf(frag, hdrFrag) }

// decodeFragOf parses a FRAG-shaped header of type typ (a PFRAG's dstReq
// field holds the sender's request).
func decodeFragOf(frag []byte, typ byte) (fragHdr, []byte, error) {
	if len(frag) < fragLen || frag[0] != typ {
		return fragHdr{}, nil, fmt.Errorf("fragment of %d bytes, want a header of type %d (%d bytes) and data", len(frag), typ, fragLen)
	}
	f := fragHdr{le.Uint64(frag[8:]), le.Uint64(frag[16:])}
	if f.offset > maxMsgLen {
		return f, nil, fmt.Errorf("FRAG at offset %d: out of range", f.offset)
	}
	return f, frag[fragLen:], nil
}

func putFin(b []byte, srcReq uint64) []byte {
	b = b[:finLen]
	clear(b[:8])
	b[0] = hdrFin
	le.PutUint64(b[8:], srcReq)
	return b
}

func decodeFin(frag []byte) (uint64, error) {
	if len(frag) != finLen || frag[0] != hdrFin {
		return 0, fmt.Errorf("FIN of %d bytes, want %d", len(frag), finLen)
	}
	return le.Uint64(frag[8:]), nil
}

// Header lengths that decide the protocol, for tests and tools: a standard
// message goes eager when MatchHeaderLen + its length fits the route's eager
// limit; a synchronous one sends its whole payload with the RNDV header when
// RndvHeaderLen + its length fits. A rendezvous sends the route's rendezvous
// eager limit less RndvHeaderLen with its RNDV, and the rest in FRAGs of the
// route's max send size less FragHeaderLen.
const (
	MatchHeaderLen = matchLen
	RndvHeaderLen  = rndvLen
	FragHeaderLen  = fragLen
)
