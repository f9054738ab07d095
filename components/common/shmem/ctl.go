package shmem

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/gompi/gompi/mca"
	"github.com/gompi/gompi/mpierr"
	"github.com/gompi/gompi/rte"
)

// The control segment's layout. Words written by different parties sit 128
// bytes apart: adjacent lines are often fetched in pairs, so 64 bytes would
// still share traffic.
const (
	ctlOffMagic   = 0  // uint64: the owner's CtlMagic
	ctlOffVersion = 8  // uint32: the owner's Version
	ctlOffRank    = 12 // uint32
	ctlOffPid     = 16 // uint32
	ctlOffLocal   = 20 // uint32: local ranks, the number of announce slots
	CtlOffOwn     = 24 // to CtlEndOwn: the owner's own header words, immutable like the rest
	CtlEndOwn     = 128
	ctlOffAttach  = 128 // atomic: peers that have mapped the segment
	ctlOffBell    = 256 // atomic: bumped by a peer after it announces
	ctlOffGone    = 384 // atomic: 1 once the owner has finalized
	ctlOffSleep   = 392 // atomic: goroutines of the owner asleep, which senders wake (owner-written, like Gone)
	ctlOffSlots   = 512 // atomic per local rank: what it announced, 0 for nothing
	// then, after the slots, per local rank: the Ref of the box it
	// announced, written before its slot
)

// CtlSize is the size of a control segment for localSize local ranks: a
// page for up to 224.
func CtlSize(localSize int) int {
	n := ctlOffSlots + 16*localSize
	return (n + 4095) &^ 4095
}

// Ctl is a mapped control segment, one's own or a peer's.
type Ctl struct {
	*Segment
	Attached *atomic.Uint64   // peers that have mapped it
	Bell     *atomic.Uint64   // bumped after each announcement
	Gone     *atomic.Uint64   // 1 once the owner has finalized
	Sleep    *atomic.Uint64   // non-zero while the owner sleeps: a peer that writes to it then rings its bell
	Slots    []*atomic.Uint64 // by local rank: what it announced, 0 for nothing
	Refs     []*atomic.Uint64 // by local rank: the Ref of the box it announced

	// armMu keeps Arm and Disarm off the memory once Unmap has begun: a
	// goroutine that armed before another finalized disarms after.
	armMu    sync.Mutex
	unmapped bool
}

// Unmap unmaps the control segment, after any Arm or Disarm under way.
func (c *Ctl) Unmap() {
	c.armMu.Lock()
	c.unmapped = true
	c.armMu.Unlock()
	c.Segment.Unmap()
}

func (o Owner) bindCtl(seg *Segment, localSize int) (*Ctl, error) {
	offs := []int{ctlOffAttach, ctlOffBell, ctlOffGone, ctlOffSleep}
	for i := 0; i < 2*localSize; i++ {
		offs = append(offs, ctlOffSlots+8*i)
	}
	w := make([]*atomic.Uint64, len(offs))
	for i, off := range offs {
		var err error
		if w[i], err = o.Word(seg.Mem, off); err != nil {
			return nil, err
		}
	}
	return &Ctl{Segment: seg, Attached: w[0], Bell: w[1], Gone: w[2], Sleep: w[3], Slots: w[4 : 4+localSize], Refs: w[4+localSize:]}, nil
}

// CtlHeader is the identity in a control segment.
type CtlHeader struct {
	Rank, Pid, LocalSize int
}

// WriteCtlHeader writes the identity, the version and, last, the magic.
func (o Owner) WriteCtlHeader(mem []byte, h CtlHeader) {
	le := binary.LittleEndian
	le.PutUint32(mem[ctlOffVersion:], o.Version)
	le.PutUint32(mem[ctlOffRank:], uint32(h.Rank))
	le.PutUint32(mem[ctlOffPid:], uint32(h.Pid))
	le.PutUint32(mem[ctlOffLocal:], uint32(h.LocalSize))
	le.PutUint64(mem[ctlOffMagic:], o.CtlMagic)
}

// ParseCtlHeader reads a peer's control segment header; mem may hold
// anything.
func (o Owner) ParseCtlHeader(mem []byte) (CtlHeader, error) {
	if len(mem) < ctlOffSlots {
		return CtlHeader{}, fmt.Errorf("control segment of %d bytes", len(mem))
	}
	le := binary.LittleEndian
	if m := le.Uint64(mem[ctlOffMagic:]); m != o.CtlMagic {
		return CtlHeader{}, fmt.Errorf("control segment magic %#x, want %#x", m, o.CtlMagic)
	}
	if v := le.Uint32(mem[ctlOffVersion:]); v != o.Version {
		return CtlHeader{}, fmt.Errorf("control segment version %d, want %d", v, o.Version)
	}
	h := CtlHeader{Rank: int(le.Uint32(mem[ctlOffRank:])), Pid: int(le.Uint32(mem[ctlOffPid:])), LocalSize: int(le.Uint32(mem[ctlOffLocal:]))}
	if h.LocalSize < 1 || CtlSize(h.LocalSize) > len(mem) {
		return CtlHeader{}, fmt.Errorf("control segment of %d bytes claims %d local ranks", len(mem), h.LocalSize)
	}
	return h, nil
}

// CreateCtl makes rank's control segment, with h in its header. The
// owner's own words (CtlOffOwn to CtlEndOwn) are zero: the caller fills them
// before it publishes its card.
func (o Owner) CreateCtl(job string, h CtlHeader) (*Ctl, error) {
	seg, err := o.Create(o.CtlPath(job, h.Rank), CtlSize(h.LocalSize))
	if err != nil {
		return nil, err
	}
	c, err := o.bindCtl(seg, h.LocalSize)
	if err != nil {
		seg.Destroy()
		return nil, err
	}
	o.WriteCtlHeader(seg.Mem, h)
	return c, nil
}

// CtlPathOf is what a peer opens to map the control segment of the owner
// of card: its memfd through /proc, or its named file.
func (o Owner) CtlPathOf(job string, card Card) string {
	return PathOf(card.Pid, card.Ref, o.CtlPath(job, card.Rank))
}

// AttachCtl maps the control segment of the peer of card, checks that it
// is this owner's and names want, and counts this process in its attach
// word. The attacher that brings the count to attachers (every peer that
// read the card) removes a named file, which nobody needs any more, logs
// it, and rings the owner's bell: the owner then closes its descriptor
// (Held.Settle).
func (o Owner) AttachCtl(log *mca.Logger, job string, card Card, want CtlHeader, attachers int) (*Ctl, error) {
	name := o.CtlPathOf(job, card)
	seg, err := o.open(name, card.CtlBytes)
	if err != nil {
		return nil, fmt.Errorf("%s: control segment of rank %d: %w", o.Name, want.Rank, err)
	}
	h, err := o.ParseCtlHeader(seg.Mem)
	if err == nil && h != want {
		err = fmt.Errorf("control segment of rank %d (pid %d, %d local ranks) names rank %d (pid %d, %d local ranks)",
			want.Rank, want.Pid, want.LocalSize, h.Rank, h.Pid, h.LocalSize)
	}
	if err != nil {
		seg.Unmap()
		return nil, mpierr.Errorf(mpierr.ErrIntern, "%s: %s: %w", o.Name, name, err)
	}
	c, err := o.bindCtl(seg, h.LocalSize)
	if err != nil {
		seg.Unmap()
		return nil, err
	}
	if n := c.Attached.Add(1); n == uint64(attachers) {
		if err := o.Unlink(name); err != nil {
			seg.Unmap()
			return nil, err
		}
		c.Bell.Add(1)
		log.Log(mca.VerboseInfo, "every local peer has mapped the control segment: dropped its name", "owner", want.Rank, "segment", name)
	}
	return c, nil
}

// Announce tells the owner of c, a peer's control segment, that this
// process (local rank index local) made a box for it; v, not 0, says what
// (its size, say), and ref how to map it (the box's Ref). The slot's store
// publishes what was written to the box and ref before it; the doorbell
// tells the owner to look at its slots.
func (c *Ctl) Announce(local int, v, ref uint64) {
	c.Refs[local].Store(ref)
	c.Slots[local].Store(v)
	c.Bell.Add(1)
}

// Arm and Disarm make the owner of c, this process's own control segment,
// an rte.Watcher: while armed, peers that write to the owner ring its bell
// (see Asleep).
// They take a lock (a sleeper's cost, not a message's): the bell's
// sleepers arm and disarm whatever watched when they fell asleep, and
// Finalize may unmap the segment in between.
func (c *Ctl) Arm() { c.addSleep(1) }

func (c *Ctl) Disarm() { c.addSleep(^uint64(0)) }

func (c *Ctl) addSleep(d uint64) {
	c.armMu.Lock()
	if !c.unmapped {
		c.Sleep.Add(d)
	}
	c.armMu.Unlock()
}

// Asleep reports whether the owner of c, a peer's control segment, has a
// goroutine asleep: the caller, which has just published a message for it,
// then rings its bell. One load of a line that changes only when the owner
// falls asleep or wakes.
func (c *Ctl) Asleep() bool { return c.Sleep.Load() != 0 }

// PublishCard puts this process's business card in the modex, announcing
// ctl, its control segment. On error ctl is removed: nobody will map it.
func (o Owner) PublishCard(modex *rte.Modex, pid int, ctl *Ctl) error {
	if err := modex.PutProc(o.CardKey, o.EncodeCard(Card{Pid: pid, CtlBytes: len(ctl.Mem), Ref: ctl.Ref()})); err != nil {
		ctl.Destroy()
		return err
	}
	return nil
}

// A Card is what a local peer published: its rank, its index among the
// local ranks, its pid, the size of its control segment and how to map it
// (the segment's Ref).
type Card struct {
	Rank, Local, Pid, CtlBytes int
	Ref                        uint64
}

// ReadCards reads the cards of the local ranks but self (after the modex
// fence). A rank that published none does not run the component: it is
// logged and skipped. When no peer has a card, nobody will map ctl, this
// process's control segment, so its file is removed.
func (o Owner) ReadCards(log *mca.Logger, modex *rte.Modex, localRanks []int, self int, ctl *Ctl) ([]Card, error) {
	var cards []Card
	for i, r := range localRanks {
		if r == self {
			continue
		}
		b, err := modex.GetProc(r, o.CardKey)
		if errors.Is(err, rte.ErrNotFound) {
			log.Log(mca.VerboseComponent, "local peer does not run "+o.Name+": not reaching it", "peer", r)
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%s: business card of rank %d: %w", o.Name, r, err)
		}
		card, err := o.ParseCard(b)
		if err != nil {
			return nil, mpierr.Errorf(mpierr.ErrIntern, "%s: rank %d: %w", o.Name, r, err)
		}
		card.Rank, card.Local = r, i
		cards = append(cards, card)
	}
	if len(cards) == 0 {
		if err := ctl.Drop(); err != nil {
			return nil, fmt.Errorf("%s: %w", o.Name, err)
		}
		return nil, nil
	}
	// The descriptor stays until every peer with a card has mapped the
	// segment; the last of them rings our bell.
	n := uint64(len(cards))
	o.Held.hold(ctl.Segment, func() bool { return ctl.Attached.Load() >= n })
	// Peers that attached before we held it rang a bell that a Progress
	// may already have seen: look now.
	o.Held.Settle()
	return cards, nil
}

// CardLen is the length of a business card.
const CardLen = 16

// EncodeCard makes the business card a process publishes in the modex,
// under its owner's CardKey: that it runs the component, with which layout,
// its pid (checked against its control segment, so that a stale file is
// not taken for the peer's), the size of that segment and its Ref. Rank
// and Local are not in it: the modex says whose card it is.
func (o Owner) EncodeCard(c Card) []byte {
	b := make([]byte, CardLen)
	binary.LittleEndian.PutUint32(b[0:], o.Version)
	binary.LittleEndian.PutUint32(b[4:], uint32(c.Pid))
	binary.LittleEndian.PutUint32(b[8:], uint32(c.CtlBytes))
	binary.LittleEndian.PutUint32(b[12:], uint32(c.Ref))
	return b
}

// ParseCard reads a peer's business card; b may hold anything.
func (o Owner) ParseCard(b []byte) (Card, error) {
	if len(b) != CardLen {
		return Card{}, fmt.Errorf("business card of %d bytes, want %d", len(b), CardLen)
	}
	if v := binary.LittleEndian.Uint32(b); v != o.Version {
		return Card{}, fmt.Errorf("business card version %d, want %d", v, o.Version)
	}
	c := Card{
		Pid:      int(binary.LittleEndian.Uint32(b[4:])),
		CtlBytes: int(binary.LittleEndian.Uint32(b[8:])),
		Ref:      uint64(binary.LittleEndian.Uint32(b[12:])),
	}
	if c.Pid <= 0 || c.Pid > 1<<30 || c.CtlBytes < CtlSize(1) || c.CtlBytes > CtlSize(1<<20) || c.Ref > 1<<30 {
		return Card{}, fmt.Errorf("business card with pid %d, a control segment of %d bytes and ref %d", c.Pid, c.CtlBytes, c.Ref)
	}
	return c, nil
}
