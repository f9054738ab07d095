package shm

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

// A segment is one mapped file under Dir. Its memory is shared with other
// processes (or with other goroutine ranks of this process, through mappings
// of their own), so it holds no Go pointers: only numbers and offsets.
type segment struct {
	name string
	mem  []byte
}

// File names. Every file of a job starts with "gompi-<jobid>-", the prefix
// RemoveJobFiles removes.
func ctlName(job string, rank int) string {
	return filepath.Join(Dir, fmt.Sprintf("gompi-%s-ctl-%d", job, rank))
}

func boxName(job string, src, dst int) string {
	return filepath.Join(Dir, fmt.Sprintf("gompi-%s-box-%d-%d", job, src, dst))
}

// createSegment makes a new file of size bytes, mode 0600, and maps it. The
// file must not exist (O_EXCL): a job's names are unique, so an existing one
// is someone else's. fallocate reserves the pages now, so that a full
// /dev/shm is an error here rather than a SIGBUS on first touch.
func createSegment(name string, size int) (*segment, error) {
	fd, err := unix.Open(name, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, mpierr.Errorf(mpierr.ErrIntern, "btl shm: creating %s: %w", name, err)
	}
	defer unix.Close(fd)
	if err := unix.Fallocate(fd, 0, 0, int64(size)); err != nil {
		// tmpfs supports fallocate; a file system that does not gets a
		// plain ftruncate.
		if !errors.Is(err, unix.EOPNOTSUPP) {
			unix.Unlink(name)
			return nil, mpierr.Errorf(mpierr.ErrNoMem, "btl shm: reserving %d bytes for %s: %w", size, name, err)
		}
		if err := unix.Ftruncate(fd, int64(size)); err != nil {
			unix.Unlink(name)
			return nil, mpierr.Errorf(mpierr.ErrNoMem, "btl shm: sizing %s to %d bytes: %w", name, size, err)
		}
	}
	mem, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		unix.Unlink(name)
		return nil, mpierr.Errorf(mpierr.ErrNoMem, "btl shm: mapping %s: %w", name, err)
	}
	return &segment{name: name, mem: mem}, nil
}

// openSegment maps an existing file made by a peer. The size comes from the
// file itself and is checked against [minSize, maxSize] before mapping, so a
// truncated or foreign file is an error, not a fault on access.
func openSegment(name string, minSize, maxSize int) (*segment, error) {
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
	if st.Size < int64(minSize) || st.Size > int64(maxSize) {
		return nil, mpierr.Errorf(mpierr.ErrIntern, "%s has %d bytes, want %d to %d", name, st.Size, minSize, maxSize)
	}
	mem, err := unix.Mmap(fd, 0, int(st.Size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
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

// unlink removes the file; the mappings stay valid. A file already gone is
// fine: several parties may race to remove it.
func unlinkFile(name string) error {
	if err := unix.Unlink(name); err != nil && !errors.Is(err, unix.ENOENT) {
		return mpierr.Errorf(mpierr.ErrIntern, "btl shm: removing %s: %w", name, err)
	}
	return nil
}

// word returns the 64-bit atomic at offset off of mem. Misalignment is an
// error, not a slow path: a split atomic is slow on amd64, may raise SIGBUS
// under split-lock detection, and faults on arm64. The pointer refers to
// mapped memory, not the Go heap, so the collector ignores it.
func word(mem []byte, off int) (*atomic.Uint64, error) {
	if off < 0 || off+8 > len(mem) {
		return nil, mpierr.Errorf(mpierr.ErrIntern, "btl shm: atomic word at %d outside a segment of %d bytes", off, len(mem))
	}
	p := unsafe.Pointer(&mem[off])
	if uintptr(p)%8 != 0 {
		return nil, mpierr.Errorf(mpierr.ErrIntern, "btl shm: atomic word at %p is not 8-byte aligned", p)
	}
	return (*atomic.Uint64)(p), nil
}

// Layouts. Words written by different parties sit 128 bytes apart: adjacent
// lines are often fetched in pairs, so 64 bytes would still share traffic.
const (
	cacheLine = 64
	version   = 1

	// The control segment, one per process, made at Query: its identity,
	// and the slots through which local peers announce boxes to it.
	ctlMagic      = 0x6c74632d69706d67 // "gmpi-ctl" little-endian
	ctlOffMagic   = 0                  // uint64
	ctlOffVersion = 8                  // uint32
	ctlOffRank    = 12                 // uint32
	ctlOffPid     = 16                 // uint32
	ctlOffLocal   = 20                 // uint32: local size, the number of slots
	ctlOffProbe   = 24                 // uint64: the owner's address of the nonce word
	ctlOffNonce   = 32                 // uint64: random, read by peers through CMA to probe it
	ctlOffAttach  = 128                // atomic: peers that have mapped the segment
	ctlOffBell    = 256                // atomic: bumped by a peer after it announces a box
	ctlOffGone    = 384                // atomic: 1 once the owner has finalized
	ctlOffSlots   = 512                // atomic per local rank: size of the ring it made for the owner, 0 for none

	// The box, one per ordered pair, made by its sender on first Send: a
	// single-producer single-consumer ring of records.
	boxMagic      = 0x786f622d69706d67 // "gmpi-box"
	boxOffMagic   = 0                  // uint64
	boxOffVersion = 8                  // uint32
	boxOffSrc     = 12                 // uint32
	boxOffDst     = 16                 // uint32
	boxOffPid     = 20                 // uint32: the sender's pid
	boxOffSize    = 24                 // uint64: ring bytes
	boxOffAttach  = 128                // atomic: 1 once the receiver has mapped it
	boxOffTail    = 256                // atomic: bytes ever consumed (written by the consumer only)
	boxHeader     = 512                // the ring follows (the producer's position lives in the records' stamps)
)

func ctlSize(localSize int) int {
	n := ctlOffSlots + 8*localSize
	return (n + 4095) &^ 4095
}

// ctlSeg is a mapped control segment, one's own or a peer's.
type ctlSeg struct {
	*segment
	attached, bell, gone *atomic.Uint64
	slots                []*atomic.Uint64
}

func (c *ctlSeg) bind(localSize int) error {
	var err error
	if c.attached, err = word(c.mem, ctlOffAttach); err != nil {
		return err
	}
	if c.bell, err = word(c.mem, ctlOffBell); err != nil {
		return err
	}
	if c.gone, err = word(c.mem, ctlOffGone); err != nil {
		return err
	}
	c.slots = make([]*atomic.Uint64, localSize)
	for i := range c.slots {
		if c.slots[i], err = word(c.mem, ctlOffSlots+8*i); err != nil {
			return err
		}
	}
	return nil
}

// ctlHeader is the immutable part of a control segment.
type ctlHeader struct {
	rank, pid, localSize int
	probe, nonce         uint64
}

func writeCtlHeader(mem []byte, h ctlHeader) {
	le := binary.LittleEndian
	le.PutUint32(mem[ctlOffVersion:], version)
	le.PutUint32(mem[ctlOffRank:], uint32(h.rank))
	le.PutUint32(mem[ctlOffPid:], uint32(h.pid))
	le.PutUint32(mem[ctlOffLocal:], uint32(h.localSize))
	le.PutUint64(mem[ctlOffProbe:], h.probe)
	le.PutUint64(mem[ctlOffNonce:], h.nonce)
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
	h := ctlHeader{
		rank: int(le.Uint32(mem[ctlOffRank:])), pid: int(le.Uint32(mem[ctlOffPid:])),
		localSize: int(le.Uint32(mem[ctlOffLocal:])),
		probe:     le.Uint64(mem[ctlOffProbe:]), nonce: le.Uint64(mem[ctlOffNonce:]),
	}
	if h.localSize < 1 || ctlSize(h.localSize) > len(mem) {
		return ctlHeader{}, fmt.Errorf("control segment of %d bytes claims %d local ranks", len(mem), h.localSize)
	}
	return h, nil
}

// boxHeaderInfo is the immutable part of a box.
type boxHeaderInfo struct {
	src, dst, pid int
	size          uint64
}

func writeBoxHeader(mem []byte, h boxHeaderInfo) {
	le := binary.LittleEndian
	le.PutUint32(mem[boxOffVersion:], version)
	le.PutUint32(mem[boxOffSrc:], uint32(h.src))
	le.PutUint32(mem[boxOffDst:], uint32(h.dst))
	le.PutUint32(mem[boxOffPid:], uint32(h.pid))
	le.PutUint64(mem[boxOffSize:], h.size)
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
		src: int(le.Uint32(mem[boxOffSrc:])), dst: int(le.Uint32(mem[boxOffDst:])),
		pid: int(le.Uint32(mem[boxOffPid:])), size: le.Uint64(mem[boxOffSize:]),
	}
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

// The business card a process publishes in the modex: that it runs shm,
// with which layout, and its pid (checked against its control segment, so
// that a stale file is not taken for the peer's).
const (
	cardKey = "btl.shm"
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
