package tofu

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/gompi/gompi/mpierr"
)

// Dir is where the segments live; their names start with gompi-<jobid>-, the
// prefix that btl shm's RemoveJobFiles (called by mpirun and mpitest at job
// end) removes.
const Dir = "/dev/shm"

// A segment is one mapped file under Dir. It is shared with other processes
// (or other goroutine ranks, through mappings of their own), so it holds no
// Go pointers: only numbers.
type segment struct {
	name string
	mem  []byte
}

func ctlName(job string, rank int) string {
	return filepath.Join(Dir, fmt.Sprintf("gompi-%s-tofu-ctl-%d", job, rank))
}

func boxName(job string, src, dst int) string {
	return filepath.Join(Dir, fmt.Sprintf("gompi-%s-tofu-%d-%d", job, src, dst))
}

// createSegment makes a new file of size bytes, mode 0600, and maps it.
// O_EXCL: a job's names are unique, so an existing file is someone else's.
// fallocate makes a full /dev/shm an error here rather than a SIGBUS later.
func createSegment(name string, size int) (*segment, error) {
	fd, err := unix.Open(name, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, mpierr.Errorf(mpierr.ErrIntern, "llp tofu: creating %s: %w", name, err)
	}
	defer unix.Close(fd)
	if err := unix.Fallocate(fd, 0, 0, int64(size)); err != nil {
		if !errors.Is(err, unix.EOPNOTSUPP) {
			unix.Unlink(name)
			return nil, mpierr.Errorf(mpierr.ErrNoMem, "llp tofu: reserving %d bytes for %s: %w", size, name, err)
		}
		if err := unix.Ftruncate(fd, int64(size)); err != nil {
			unix.Unlink(name)
			return nil, mpierr.Errorf(mpierr.ErrNoMem, "llp tofu: sizing %s to %d bytes: %w", name, size, err)
		}
	}
	mem, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		unix.Unlink(name)
		return nil, mpierr.Errorf(mpierr.ErrNoMem, "llp tofu: mapping %s: %w", name, err)
	}
	return &segment{name: name, mem: mem}, nil
}

// openSegment maps a file a peer made, after checking that it is a regular
// file of this user of exactly size bytes: a truncated or foreign file is an
// error, not a fault on access.
func openSegment(name string, size int) (*segment, error) {
	fd, err := unix.Open(name, unix.O_RDWR|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, mpierr.Errorf(mpierr.ErrIntern, "opening %s: %w", name, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, mpierr.Errorf(mpierr.ErrIntern, "fstat %s: %w", name, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Uid != uint32(os.Geteuid()) {
		return nil, mpierr.Errorf(mpierr.ErrIntern, "%s is not a regular file of this user", name)
	}
	if st.Size != int64(size) {
		return nil, mpierr.Errorf(mpierr.ErrIntern, "%s has %d bytes, want %d", name, st.Size, size)
	}
	mem, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, mpierr.Errorf(mpierr.ErrNoMem, "mapping %s: %w", name, err)
	}
	return &segment{name: name, mem: mem}, nil
}

func (s *segment) unmap() {
	if s != nil && s.mem != nil {
		unix.Munmap(s.mem)
		s.mem = nil
	}
}

// unlinkFile removes a file; its mappings stay valid. A file already gone is
// fine: both sides may race to remove it.
func unlinkFile(name string) error {
	if err := unix.Unlink(name); err != nil && !errors.Is(err, unix.ENOENT) {
		return mpierr.Errorf(mpierr.ErrIntern, "llp tofu: removing %s: %w", name, err)
	}
	return nil
}

// word returns the 64-bit atomic at offset off of mem, refusing misaligned
// ones (split atomics are slow on amd64 and fault on arm64).
func word(mem []byte, off int) (*atomic.Uint64, error) {
	if off < 0 || off+8 > len(mem) {
		return nil, mpierr.Errorf(mpierr.ErrIntern, "llp tofu: atomic word at %d outside a segment of %d bytes", off, len(mem))
	}
	p := unsafe.Pointer(&mem[off])
	if uintptr(p)%8 != 0 {
		return nil, mpierr.Errorf(mpierr.ErrIntern, "llp tofu: atomic word at %p is not 8-byte aligned", p)
	}
	return (*atomic.Uint64)(p), nil
}

// Layouts. Words written by different parties sit 128 bytes apart, since
// adjacent cache lines are often fetched in pairs.
const (
	version = 1

	// The control segment, one per process, made at Query and mapped by the
	// local peers in AddProcs: its identity, and the slots through which
	// peers announce the boxes they made for it.
	ctlMagic      = 0x6c74632d75666f74 // "tofu-ctl" little-endian
	ctlOffMagic   = 0                  // uint64
	ctlOffVersion = 8                  // uint32
	ctlOffRank    = 12                 // uint32
	ctlOffPid     = 16                 // uint32
	ctlOffLocal   = 20                 // uint32: local ranks, the number of announce slots
	ctlOffAttach  = 128                // atomic: peers that have mapped the segment
	ctlOffBell    = 256                // atomic: bumped by a peer after it announces a box
	ctlOffGone    = 384                // atomic: 1 once the owner has finalized
	ctlOffSlots   = 512                // atomic per local rank: geometry of the box it made for the owner, 0 for none

	// The box, one per ordered pair, made by its sender on the first Send:
	// an array of fixed-size message slots used round robin.
	boxMagic      = 0x786f622d75666f74 // "tofu-box"
	boxOffMagic   = 0                  // uint64
	boxOffVersion = 8                  // uint32
	boxOffSrc     = 12                 // uint32
	boxOffDst     = 16                 // uint32
	boxOffPid     = 20                 // uint32: the sender's pid
	boxOffSlots   = 24                 // uint32: number of slots
	boxOffSlotSz  = 28                 // uint32: bytes per slot
	boxOffAttach  = 128                // atomic: 1 once the receiver has mapped the box
	boxOffAck     = 256                // atomic: messages consumed (written by the receiver only)
	boxHeader     = 384                // the slots follow, each on its own cache lines
)

func ctlSize(localSize int) int {
	n := ctlOffSlots + 8*localSize
	return (n + 4095) &^ 4095
}

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

// ctlSeg is a mapped control segment, one's own or a peer's.
type ctlSeg struct {
	*segment
	attached, bell, gone *atomic.Uint64
	slots                []*atomic.Uint64
}

func bindCtl(seg *segment, localSize int) (*ctlSeg, error) {
	c := &ctlSeg{segment: seg}
	var err error
	if c.attached, err = word(seg.mem, ctlOffAttach); err != nil {
		return nil, err
	}
	if c.bell, err = word(seg.mem, ctlOffBell); err != nil {
		return nil, err
	}
	if c.gone, err = word(seg.mem, ctlOffGone); err != nil {
		return nil, err
	}
	c.slots = make([]*atomic.Uint64, localSize)
	for i := range c.slots {
		if c.slots[i], err = word(seg.mem, ctlOffSlots+8*i); err != nil {
			return nil, err
		}
	}
	return c, nil
}

type ctlHeader struct{ rank, pid, localSize int }

func writeCtlHeader(mem []byte, h ctlHeader) {
	le := binary.LittleEndian
	le.PutUint32(mem[ctlOffVersion:], version)
	le.PutUint32(mem[ctlOffRank:], uint32(h.rank))
	le.PutUint32(mem[ctlOffPid:], uint32(h.pid))
	le.PutUint32(mem[ctlOffLocal:], uint32(h.localSize))
	le.PutUint64(mem[ctlOffMagic:], ctlMagic)
}

// parseCtlHeader reads a peer's control segment header; mem may hold
// anything.
func parseCtlHeader(mem []byte) (ctlHeader, error) {
	if len(mem) < ctlOffSlots {
		return ctlHeader{}, fmt.Errorf("control segment of %d bytes", len(mem))
	}
	le := binary.LittleEndian
	if m := le.Uint64(mem[ctlOffMagic:]); m != ctlMagic {
		return ctlHeader{}, fmt.Errorf("control segment magic %#x, want %#x", m, uint64(ctlMagic))
	}
	if v := le.Uint32(mem[ctlOffVersion:]); v != version {
		return ctlHeader{}, fmt.Errorf("control segment version %d, want %d", v, version)
	}
	h := ctlHeader{rank: int(le.Uint32(mem[ctlOffRank:])), pid: int(le.Uint32(mem[ctlOffPid:])), localSize: int(le.Uint32(mem[ctlOffLocal:]))}
	if h.localSize < 1 || ctlSize(h.localSize) > len(mem) {
		return ctlHeader{}, fmt.Errorf("control segment of %d bytes claims %d local ranks", len(mem), h.localSize)
	}
	return h, nil
}

type boxHeaderInfo struct {
	src, dst, pid int
	geo           geometry
}

func writeBoxHeader(mem []byte, h boxHeaderInfo) {
	le := binary.LittleEndian
	le.PutUint32(mem[boxOffVersion:], version)
	le.PutUint32(mem[boxOffSrc:], uint32(h.src))
	le.PutUint32(mem[boxOffDst:], uint32(h.dst))
	le.PutUint32(mem[boxOffPid:], uint32(h.pid))
	le.PutUint32(mem[boxOffSlots:], uint32(h.geo.slots))
	le.PutUint32(mem[boxOffSlotSz:], uint32(h.geo.slotSize))
	le.PutUint64(mem[boxOffMagic:], boxMagic)
}

// parseBoxHeader reads the header of a box a peer made; mem may hold
// anything.
func parseBoxHeader(mem []byte) (boxHeaderInfo, error) {
	if len(mem) < boxHeader {
		return boxHeaderInfo{}, fmt.Errorf("box of %d bytes", len(mem))
	}
	le := binary.LittleEndian
	if m := le.Uint64(mem[boxOffMagic:]); m != boxMagic {
		return boxHeaderInfo{}, fmt.Errorf("box magic %#x, want %#x", m, uint64(boxMagic))
	}
	if v := le.Uint32(mem[boxOffVersion:]); v != version {
		return boxHeaderInfo{}, fmt.Errorf("box version %d, want %d", v, version)
	}
	h := boxHeaderInfo{
		src: int(le.Uint32(mem[boxOffSrc:])), dst: int(le.Uint32(mem[boxOffDst:])), pid: int(le.Uint32(mem[boxOffPid:])),
		geo: geometry{int(le.Uint32(mem[boxOffSlots:])), int(le.Uint32(mem[boxOffSlotSz:]))},
	}
	if !h.geo.valid() || len(mem) != boxSize(h.geo) {
		return boxHeaderInfo{}, fmt.Errorf("box of %d bytes claims %d slots of %d bytes", len(mem), h.geo.slots, h.geo.slotSize)
	}
	return h, nil
}

// The business card a process publishes in the modex: that it runs tofu,
// with which layout, its pid (checked against its control segment, so that
// a stale file is not taken for the peer's) and the size of that segment.
const (
	cardKey = "llp.tofu"
	cardLen = 12
)

func encodeCard(pid, ctlBytes int) []byte {
	b := make([]byte, cardLen)
	binary.LittleEndian.PutUint32(b[0:], version)
	binary.LittleEndian.PutUint32(b[4:], uint32(pid))
	binary.LittleEndian.PutUint32(b[8:], uint32(ctlBytes))
	return b
}

func parseCard(b []byte) (pid, ctlBytes int, err error) {
	if len(b) != cardLen {
		return 0, 0, fmt.Errorf("business card of %d bytes, want %d", len(b), cardLen)
	}
	if v := binary.LittleEndian.Uint32(b); v != version {
		return 0, 0, fmt.Errorf("business card version %d, want %d", v, version)
	}
	pid = int(binary.LittleEndian.Uint32(b[4:]))
	ctlBytes = int(binary.LittleEndian.Uint32(b[8:]))
	if pid <= 0 || ctlBytes < ctlSize(1) || ctlBytes > ctlSize(1<<20) {
		return 0, 0, fmt.Errorf("business card with pid %d and a control segment of %d bytes", pid, ctlBytes)
	}
	return pid, ctlBytes, nil
}
