package shmem

import (
	"encoding/binary"
	"fmt"
	"sync/atomic"
)

// A box's layout, from its header on. The component's own header words
// say what the box carries (its geometry); its atomics and data start at
// BoxOffData.
const (
	boxOffMagic   = 0  // uint64: the owner's BoxMagic
	boxOffVersion = 8  // uint32: the owner's Version
	boxOffSrc     = 12 // uint32: the sender's rank
	boxOffDst     = 16 // uint32: the receiver's rank
	boxOffPid     = 20 // uint32: the sender's pid
	BoxOffOwn     = 24 // to BoxEndOwn: the component's own header words, immutable like the rest
	BoxEndOwn     = 128
	boxOffAttach  = 128 // atomic: 1 once the receiver has mapped the box
	BoxOffData    = 256 // the component's atomics and data
)

// Box is a mapped box, from this process or to it.
type Box struct {
	*Segment
	Attached *atomic.Uint64 // 1 once the receiver has mapped it
}

// BoxHeader is the identity in a box.
type BoxHeader struct {
	Src, Dst, Pid int
}

// WriteBoxHeader writes the identity, the version and, last, the magic.
func (o Owner) WriteBoxHeader(mem []byte, h BoxHeader) {
	le := binary.LittleEndian
	le.PutUint32(mem[boxOffVersion:], o.Version)
	le.PutUint32(mem[boxOffSrc:], uint32(h.Src))
	le.PutUint32(mem[boxOffDst:], uint32(h.Dst))
	le.PutUint32(mem[boxOffPid:], uint32(h.Pid))
	le.PutUint64(mem[boxOffMagic:], o.BoxMagic)
}

// ParseBoxHeader reads the header of a box a peer made; mem may hold
// anything.
func (o Owner) ParseBoxHeader(mem []byte) (BoxHeader, error) {
	if len(mem) < BoxOffData {
		return BoxHeader{}, fmt.Errorf("box of %d bytes", len(mem))
	}
	le := binary.LittleEndian
	if m := le.Uint64(mem[boxOffMagic:]); m != o.BoxMagic {
		return BoxHeader{}, fmt.Errorf("box magic %#x, want %#x", m, o.BoxMagic)
	}
	if v := le.Uint32(mem[boxOffVersion:]); v != o.Version {
		return BoxHeader{}, fmt.Errorf("box version %d, want %d", v, o.Version)
	}
	return BoxHeader{Src: int(le.Uint32(mem[boxOffSrc:])), Dst: int(le.Uint32(mem[boxOffDst:])), Pid: int(le.Uint32(mem[boxOffPid:]))}, nil
}

// CreateBox makes the box from src to dst, of size bytes. The caller
// writes its header (WriteBoxHeader and its own words), then announces the
// box, with its Ref, in the receiver's control segment. Its maker's
// descriptor stays until the receiver adopts it (Held.Settle).
func (o Owner) CreateBox(job string, src, dst, size int) (*Box, error) {
	seg, err := o.Create(o.BoxPath(job, src, dst), size)
	if err != nil {
		return nil, err
	}
	b, err := o.bindBox(seg)
	if err != nil {
		seg.Destroy()
		return nil, err
	}
	o.Held.hold(seg, func() bool { return b.Attached.Load() != 0 })
	return b, nil
}

// OpenBox maps the box from src (of pid) to dst that src announced with
// ref, of size bytes. The caller checks its header, then adopts it.
func (o Owner) OpenBox(job string, src, pid, dst int, ref uint64, size int) (*Box, error) {
	seg, err := o.open(PathOf(pid, ref, o.BoxPath(job, src, dst)), size)
	if err != nil {
		return nil, err
	}
	b, err := o.bindBox(seg)
	if err != nil {
		seg.Unmap()
		return nil, err
	}
	return b, nil
}

func (o Owner) bindBox(seg *Segment) (*Box, error) {
	w, err := o.Word(seg.Mem, boxOffAttach)
	if err != nil {
		return nil, err
	}
	return &Box{Segment: seg, Attached: w}, nil
}

// Adopt, by the receiver, removes the box's file if it has one, marks the
// box mapped and rings the sender's bell (sender, its control segment):
// the sender then closes its descriptor. Both sides have the box mapped
// now, so a crash leaves nothing behind. On error the box is unmapped.
func (o Owner) Adopt(b *Box, sender *Ctl) error {
	if err := o.Unlink(b.Name); err != nil {
		b.Unmap()
		return err
	}
	b.Attached.Store(1)
	if sender != nil {
		sender.Bell.Add(1)
	}
	return nil
}

// Release, by the sender at Finalize, removes the box's file if the
// receiver never mapped it (nobody else will), and unmaps it.
func (o Owner) Release(b *Box) error {
	var err error
	if b.named && b.Attached.Load() == 0 {
		err = o.Unlink(b.Name)
	}
	b.Unmap()
	return err
}
