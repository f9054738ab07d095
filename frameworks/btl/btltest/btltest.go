// Package btltest exercises the byte transfer layer of a running instance:
// messages of chosen sizes between two ranks, in both directions at once,
// with their content and the per-peer order of fragments checked. Messages
// larger than a fragment go by RDMA Get where the route offers it (falling
// back to fragments when the kernel refuses), and as several fragments
// otherwise, the way the PML uses a BTL.
//
// Each rank makes a Harness (which registers its receive callback), waits at
// a barrier so that no fragment arrives before the callback exists, then
// calls Sweep.
package btltest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/gompi/gompi/frameworks/btl"
)

// Sizes returns 0, 1 and every power of two up to max.
func Sizes(max int) []int {
	out := []int{0, 1}
	for s := 2; s <= max; s *= 2 {
		out = append(out, s)
	}
	return out
}

// Pattern is the byte at offset i of message msg: different for every
// message and offset, so that a misplaced or stale fragment is caught.
func Pattern(msg, i int) byte { return byte(i*7 + msg*13 + i>>8 + i>>16) }

// HeaderLen is the harness's header on every fragment: a message of up to
// the route's max send size less HeaderLen goes whole (Stats.Whole).
const HeaderLen = hdrLen

const hdrLen = 32

// Fragment kinds.
const (
	kindWhole   = iota + 1 // the whole message in one fragment
	kindFrag               // one piece of a message
	kindRDMA               // a description to Get the message from
	kindFin                // the receiver is done with an RDMA message
	kindRefused            // the receiver could not Get: send fragments instead
)

type header struct {
	seq    uint32 // per-sender fragment sequence, for the order check
	kind   uint8
	msg    uint32
	total  uint64
	offset uint64
}

func (h header) encode() []byte {
	b := make([]byte, hdrLen)
	binary.LittleEndian.PutUint32(b[0:], h.seq)
	b[4] = h.kind
	binary.LittleEndian.PutUint32(b[8:], h.msg)
	binary.LittleEndian.PutUint64(b[16:], h.total)
	binary.LittleEndian.PutUint64(b[24:], h.offset)
	return b
}

func decode(b []byte) (header, []byte, error) {
	if len(b) < hdrLen {
		return header{}, nil, fmt.Errorf("fragment of %d bytes is shorter than the header", len(b))
	}
	return header{
		seq:    binary.LittleEndian.Uint32(b[0:]),
		kind:   b[4],
		msg:    binary.LittleEndian.Uint32(b[8:]),
		total:  binary.LittleEndian.Uint64(b[16:]),
		offset: binary.LittleEndian.Uint64(b[24:]),
	}, b[hdrLen:], nil
}

// Harness is one rank's side of the exercise.
type Harness struct {
	bml *btl.BML
	me  int
	tag btl.Tag

	mu       sync.Mutex
	nextSeq  map[int]uint32        // per peer, the next sequence we send
	wantSeq  map[int]uint32        // per peer, the next sequence we expect
	incoming map[[2]int]*inMessage // (peer, msg) → partly received message
	done     map[[2]int]bool       // (peer, msg) received and checked
	finished map[[2]int]bool       // (peer, msg) we sent by RDMA and the peer finished
	refused  map[[2]int]bool       // (peer, msg) the peer could not Get
	control  []func() error        // sends the callback could not make at once
	failure  error
	// Stats counts how the messages travelled.
	Stats struct{ Whole, Fragmented, RDMA, RDMARefused int }
}

type inMessage struct {
	buf      []byte
	received int
}

// New registers the harness's callback for tag on every module of bml.
func New(bml *btl.BML, me int, tag btl.Tag) *Harness {
	h := &Harness{
		bml: bml, me: me, tag: tag,
		nextSeq: map[int]uint32{}, wantSeq: map[int]uint32{},
		incoming: map[[2]int]*inMessage{}, done: map[[2]int]bool{},
		finished: map[[2]int]bool{}, refused: map[[2]int]bool{},
	}
	bml.RegisterRecv(tag, h.receive)
	return h
}

func (h *Harness) fail(err error) {
	if h.failure == nil {
		h.failure = err
	}
}

// receive is the BTL callback. It runs inside Progress.
func (h *Harness) receive(src int, tag btl.Tag, frag []byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	hd, payload, err := decode(frag)
	if err != nil {
		h.fail(fmt.Errorf("rank %d from %d: %v", h.me, src, err))
		return
	}
	if hd.seq != h.wantSeq[src] {
		h.fail(fmt.Errorf("rank %d from %d: fragment %d arrived when %d was due: per-peer order broken", h.me, src, hd.seq, h.wantSeq[src]))
		return
	}
	h.wantSeq[src]++
	key := [2]int{src, int(hd.msg)}
	switch hd.kind {
	case kindWhole, kindFrag:
		m := h.incoming[key]
		if m == nil {
			m = &inMessage{buf: make([]byte, hd.total)}
			h.incoming[key] = m
		}
		if hd.offset+uint64(len(payload)) > hd.total {
			h.fail(fmt.Errorf("rank %d from %d: fragment at %d of %d bytes overruns a message of %d", h.me, src, hd.offset, len(payload), hd.total))
			return
		}
		copy(m.buf[hd.offset:], payload)
		m.received += len(payload)
		if m.received == int(hd.total) {
			h.check(src, int(hd.msg), m.buf)
		}
	case kindRDMA:
		route := h.bml.Peer(src).RDMA
		buf := make([]byte, hd.total)
		var err error = btl.ErrNoRDMA
		if len(route) > 0 {
			err = route[0].Module.(btl.RDMA).Get(route[0].EP, payload, 0, buf)
		}
		reply := kindFin
		if errors.Is(err, btl.ErrNoRDMA) {
			reply = kindRefused
			h.Stats.RDMARefused++
		} else if err != nil {
			h.fail(fmt.Errorf("rank %d: Get of message %d from %d: %v", h.me, hd.msg, src, err))
			return
		} else {
			h.check(src, int(hd.msg), buf)
		}
		msg := hd.msg
		h.control = append(h.control, func() error { return h.sendFrag(src, header{kind: uint8(reply), msg: msg}, nil) })
	case kindFin:
		h.finished[key] = true
	case kindRefused:
		h.refused[key] = true
	default:
		h.fail(fmt.Errorf("rank %d from %d: unknown fragment kind %d", h.me, src, hd.kind))
	}
}

func (h *Harness) check(src, msg int, buf []byte) {
	for i, b := range buf {
		if b != Pattern(msg, i) {
			h.fail(fmt.Errorf("rank %d: message %d of %d bytes from rank %d differs at offset %d: got %d, want %d",
				h.me, msg, len(buf), src, i, b, Pattern(msg, i)))
			return
		}
	}
	key := [2]int{src, msg}
	h.done[key] = true
	delete(h.incoming, key)
}

// sendFrag sends one fragment to peer on its eager route, retrying while
// the module has no room. Callers hold no lock.
func (h *Harness) sendFrag(peer int, hd header, payload []byte) error {
	route := h.bml.Peer(peer).Send[0]
	h.mu.Lock()
	hd.seq = h.nextSeq[peer]
	h.nextSeq[peer]++
	// The sequence is taken and the fragment sent under one lock, so that
	// two goroutines cannot reorder them.
	defer h.mu.Unlock()
	for {
		err := route.Module.Send(route.EP, h.tag, hd.encode(), payload)
		if err == nil {
			return nil
		}
		if !errors.Is(err, btl.ErrWouldBlock) {
			return fmt.Errorf("rank %d: send to %d: %w", h.me, peer, err)
		}
		h.mu.Unlock()
		h.idle()
		h.mu.Lock()
	}
}

// idle progresses every module, yielding the processor when nothing moved
// (goroutine ranks outnumber cores).
func (h *Harness) idle() {
	if h.bml.Progress() == 0 {
		runtime.Gosched()
	}
}

// flushControl sends what the callback queued.
func (h *Harness) flushControl() error {
	h.mu.Lock()
	ctl := h.control
	h.control = nil
	h.mu.Unlock()
	for _, f := range ctl {
		if err := f(); err != nil {
			return err
		}
	}
	return nil
}

// Sweep exchanges one message of each size with peer, both ranks sending at
// once, and checks what arrives. Both ranks call it with the same sizes.
func (h *Harness) Sweep(peer int, sizes []int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	route := h.bml.Peer(peer).Send[0]
	room := route.Attr.MaxSendSize - hdrLen
	for msg, size := range sizes {
		buf := make([]byte, size)
		for i := range buf {
			buf[i] = Pattern(msg, i)
		}
		key := [2]int{peer, msg}
		useRDMA := size > room && len(h.bml.Peer(peer).RDMA) > 0
		switch {
		case size <= room:
			h.Stats.Whole++
			if err := h.sendFrag(peer, header{kind: kindWhole, msg: uint32(msg), total: uint64(size)}, buf); err != nil {
				return err
			}
		case useRDMA:
			h.Stats.RDMA++
			r := h.bml.Peer(peer).RDMA[0]
			desc := r.Module.(btl.RDMA).Expose(buf)
			if err := h.sendFrag(peer, header{kind: kindRDMA, msg: uint32(msg), total: uint64(size)}, desc); err != nil {
				return err
			}
		default:
			if err := h.sendFragments(peer, msg, buf, room); err != nil {
				return err
			}
		}
		// Wait until the peer's message of this size has arrived and ours
		// is done with.
		for {
			if err := h.flushControl(); err != nil {
				return err
			}
			h.mu.Lock()
			failure := h.failure
			received := h.done[key]
			finished, refused := h.finished[key], h.refused[key]
			if refused {
				delete(h.refused, key)
			}
			h.mu.Unlock()
			if failure != nil {
				return failure
			}
			if refused {
				// The kernel would not let the peer read our memory: send
				// the message as fragments instead.
				if err := h.sendFragments(peer, msg, buf, room); err != nil {
					return err
				}
				useRDMA = false
			}
			if received && (!useRDMA || finished) {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("rank %d: message %d of %d bytes with rank %d: timed out (received %v, finished %v)",
					h.me, msg, size, peer, received, finished)
			}
			h.idle()
		}
		runtime.KeepAlive(buf)
	}
	return nil
}

func (h *Harness) sendFragments(peer, msg int, buf []byte, room int) error {
	h.Stats.Fragmented++
	for off := 0; off < len(buf); off += room {
		end := min(off+room, len(buf))
		hd := header{kind: kindFrag, msg: uint32(msg), total: uint64(len(buf)), offset: uint64(off)}
		if err := h.sendFrag(peer, hd, buf[off:end]); err != nil {
			return err
		}
	}
	return nil
}
