package tofu

import (
	"encoding/binary"

	"github.com/gompi/gompi/components/common/shmem"
	"github.com/gompi/gompi/mpierr"
)

// owner tells tofu's files and errors from another component's. Its file
// names start with tofu-, after the job's prefix.
var owner = shmem.Owner{Name: "llp tofu", CtlMagic: ctlMagic, BoxMagic: boxMagic, Version: version,
	CardKey: "llp.tofu", CtlFile: "tofu-ctl-%d", BoxFile: "tofu-%d-%d", SizeParam: "llp_tofu_slots and llp_tofu_slot_size"}

// Layouts: tofu's words in shmem's segments.
const (
	version = 3 // 3: memfd segments, their Refs in cards and control slots

	// The control segment, one per process, made at Query and mapped by the
	// local peers in AddProcs, is shmem's; its announce slots hold the
	// geometry of the box a peer made for the owner.
	ctlMagic = 0x6c74632d75666f74 // "tofu-ctl" little-endian

	// The box, one per ordered pair, made by its sender on the first Send:
	// an array of fixed-size message slots used round robin, after
	// shmem's header.
	boxMagic     = 0x786f622d75666f74  // "tofu-box"
	boxOffSlots  = shmem.BoxOffOwn     // uint32: number of slots
	boxOffSlotSz = shmem.BoxOffOwn + 4 // uint32: bytes per slot
	boxOffAck    = shmem.BoxOffData    // atomic: messages consumed (written by the receiver only)
	boxHeader    = 384                 // the slots follow, each on its own cache lines
)

func boxSize(g geometry) int { return boxHeader + g.slots*g.slotSize }

// geometry is a box's shape, as announced in a control slot.
type geometry struct{ slots, slotSize int }

func (g geometry) encode() uint64 { return uint64(g.slots)<<32 | uint64(g.slotSize) }

func decodeGeometry(v uint64) geometry { return geometry{int(v >> 32), int(uint32(v))} }

// valid bounds what a peer may announce, so that a bad value cannot make us
// map something huge or index outside the box.
func (g geometry) valid() bool {
	return g.slots >= minSlots && g.slots <= maxSlots && g.slots&(g.slots-1) == 0 &&
		g.slotSize >= minSlotSize && g.slotSize <= maxSlotSize && g.slotSize%cacheLine == 0
}

const (
	cacheLine   = 64
	minSlots    = 1
	maxSlots    = 1024
	minSlotSize = 64
	maxSlotSize = 64 << 10
)

type boxHeaderInfo struct {
	src, dst, pid int
	geo           geometry
}

func writeBoxHeader(mem []byte, h boxHeaderInfo) {
	binary.LittleEndian.PutUint32(mem[boxOffSlots:], uint32(h.geo.slots))
	binary.LittleEndian.PutUint32(mem[boxOffSlotSz:], uint32(h.geo.slotSize))
	owner.WriteBoxHeader(mem, shmem.BoxHeader{Src: h.src, Dst: h.dst, Pid: h.pid})
}

// parseBoxHeader reads the header of a box a peer made; mem may hold
// anything. Its errors are ErrIntern.
func parseBoxHeader(mem []byte) (boxHeaderInfo, error) {
	if len(mem) < boxHeader {
		return boxHeaderInfo{}, mpierr.Errorf(mpierr.ErrIntern, "box of %d bytes", len(mem))
	}
	c, err := owner.ParseBoxHeader(mem)
	if err != nil {
		return boxHeaderInfo{}, mpierr.Wrap(mpierr.ErrIntern, err)
	}
	le := binary.LittleEndian
	h := boxHeaderInfo{src: c.Src, dst: c.Dst, pid: c.Pid, geo: geometry{int(le.Uint32(mem[boxOffSlots:])), int(le.Uint32(mem[boxOffSlotSz:]))}}
	if !h.geo.valid() || len(mem) != boxSize(h.geo) {
		return boxHeaderInfo{}, mpierr.Errorf(mpierr.ErrIntern, "box of %d bytes claims %d slots of %d bytes", len(mem), h.geo.slots, h.geo.slotSize)
	}
	return h, nil
}
