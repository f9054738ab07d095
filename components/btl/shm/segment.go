package shm

import (
	"encoding/binary"
	"fmt"

	"github.com/gompi/gompi/components/common/shmem"
)

// owner tells shm's files and errors from another component's.
var owner = shmem.Owner{Name: "btl shm", CtlMagic: ctlMagic, BoxMagic: boxMagic, Version: version,
	CardKey: "btl.shm", CtlFile: "ctl-%d", BoxFile: "box-%d-%d", SizeParam: "btl_shm_ring_size"}

// Layouts: shm's words in shmem's segments.
const (
	version = 3 // 3: memfd segments, their Refs in cards and control slots

	// The control segment, one per process, made at Query, is shmem's; shm
	// adds the words through which peers probe single copy.
	ctlMagic    = 0x6c74632d69706d67  // "gmpi-ctl" little-endian
	ctlOffProbe = shmem.CtlOffOwn     // uint64: the owner's address of the nonce word
	ctlOffNonce = shmem.CtlOffOwn + 8 // uint64: random, read by peers through CMA to probe it

	// The box, one per ordered pair, made by its sender on first Send: a
	// single-producer single-consumer ring of records, after shmem's
	// header.
	boxMagic   = 0x786f622d69706d67 // "gmpi-box"
	boxOffSize = shmem.BoxOffOwn    // uint64: ring bytes
	boxOffTail = shmem.BoxOffData   // atomic: bytes ever consumed (written by the consumer only)
	boxHeader  = 512                // the ring follows (the producer's position lives in the records' stamps)
)

// putProbe writes shm's words of a control segment; probeOf reads them.
func putProbe(mem []byte, probe, nonce uint64) {
	binary.LittleEndian.PutUint64(mem[ctlOffProbe:], probe)
	binary.LittleEndian.PutUint64(mem[ctlOffNonce:], nonce)
}

func probeOf(mem []byte) (probe, nonce uint64) {
	return binary.LittleEndian.Uint64(mem[ctlOffProbe:]), binary.LittleEndian.Uint64(mem[ctlOffNonce:])
}

// boxHeaderInfo is the immutable part of a box.
type boxHeaderInfo struct {
	src, dst, pid int
	size          uint64
}

func writeBoxHeader(mem []byte, h boxHeaderInfo) {
	binary.LittleEndian.PutUint64(mem[boxOffSize:], h.size)
	owner.WriteBoxHeader(mem, shmem.BoxHeader{Src: h.src, Dst: h.dst, Pid: h.pid})
}

// parseBoxHeader reads the header of a box a peer made; mem may hold
// anything.
func parseBoxHeader(mem []byte) (boxHeaderInfo, error) {
	if len(mem) < boxHeader {
		return boxHeaderInfo{}, fmt.Errorf("box of %d bytes", len(mem))
	}
	c, err := owner.ParseBoxHeader(mem)
	if err != nil {
		return boxHeaderInfo{}, err
	}
	h := boxHeaderInfo{src: c.Src, dst: c.Dst, pid: c.Pid, size: binary.LittleEndian.Uint64(mem[boxOffSize:])}
	if !validRingSize(h.size) || uint64(len(mem)) != boxHeader+h.size {
		return boxHeaderInfo{}, fmt.Errorf("box of %d bytes claims a ring of %d", len(mem), h.size)
	}
	return h, nil
}

// Ring sizes: powers of two, so that a position maps to an index with a
// mask.
const (
	minRingSize = 4 << 10
	maxRingSize = 1 << 30
)

func validRingSize(n uint64) bool {
	return n >= minRingSize && n <= maxRingSize && n&(n-1) == 0
}
