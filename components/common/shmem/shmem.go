// Package shmem is the shared-memory mechanism of the components that talk
// through files in /dev/shm (btl shm, llp tofu), as Open MPI's
// opal/mca/common/sm is the common part of its shared-memory components. It
// is not a component: it registers nothing, and a component that uses it
// imports it as it imports its framework. What a component puts in its
// segments (rings, slots, its own header words) stays in the component.
//
// # Files
//
// Every file of a job is named gompi-<jobid>-<name> (Path), so that
// RemoveJobFiles, which launchers call at job end, removes the files of
// every component whatever happened to the ranks. A file is made with
// O_EXCL and mode 0600, its pages reserved at once, and removed as soon as
// every process that needs it has mapped it, so that a crash after that
// leaves nothing behind.
//
// # Control segments and boxes
//
// Each process makes one control segment per component at Query (CreateCtl)
// and announces it with a business card in the modex (PublishCard). In
// AddProcs each local peer reads the cards (ReadCards), maps each control
// segment (AttachCtl) and counts itself in its attach word; the peer that
// completes the count removes the file. A control segment holds the owner's identity, a doorbell, a
// "finalized" word, and one announce slot per local rank, through which a
// peer tells the owner about a box it made for it (Announce): the owner
// loads its doorbell, and looks at the slots when it changed.
//
// A box is a segment from one process to one local peer, made by its sender
// on its first send (CreateBox), so that memory grows with the pairs that
// talk rather than with the square of the local ranks. Its header names
// both ends; its receiver maps it (OpenBox), checks it, and marks it mapped
// and removes its file (Adopt); at Finalize its sender removes it if the
// receiver never did (Release). What a box carries, and how, is the
// component's.
//
// Mapped memory is shared with other processes (or with other goroutine
// ranks of this process, through mappings of their own), so it holds no Go
// pointers: only numbers and offsets. Everything read from it, and from a
// card, was written by another process and is checked before use.
package shmem

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/gompi/gompi/mca"
	"github.com/gompi/gompi/mpierr"
)

// Dir is where the segments live.
const Dir = "/dev/shm"

// Owner is a user of the mechanism, a component mostly: what tells its
// files from another's, and what its errors start with. A user that only
// makes and maps files (Create, Open, Unlink) needs only Name.
type Owner struct {
	Name     string // starts error messages: "btl shm"
	CtlMagic uint64 // the first word of its control segments
	BoxMagic uint64 // the first word of its boxes
	Version  uint32 // of its layouts: checked in its segments and cards
	CardKey  string // the modex key of its business card
	// Its file names after the job's prefix: a control segment's, of the
	// owner's rank ("ctl-%d"), and a box's, of the sender's and the
	// receiver's ("box-%d-%d").
	CtlFile, BoxFile string
	// Maps, when set, shares each file's mapping with the other goroutine
	// ranks of the process (MapsFor).
	Maps *Maps
}

// CtlPath is the file of rank's control segment.
func (o Owner) CtlPath(job string, rank int) string {
	return Path(job, fmt.Sprintf(o.CtlFile, rank))
}

// BoxPath is the file of the box from src to dst.
func (o Owner) BoxPath(job string, src, dst int) string {
	return Path(job, fmt.Sprintf(o.BoxFile, src, dst))
}

// ValidJobID keeps the job id, which comes from the launcher, from making a
// path outside Dir.
func ValidJobID(id string) bool {
	return id != "" && len(id) <= 64 && !strings.ContainsFunc(id, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '.')
	})
}

// AllowedBy declines, with the reason, when the user kept btl shm out of
// the transports (btl = self,tcp, say): components other than btl shm that
// move data through shared memory (llp tofu, coll sm) are kept out with
// it. who names the component in the reason.
func AllowedBy(b *mca.Base, who string) error {
	sel := b.Lookup("btl")
	if len(sel.List()) == 0 {
		return nil
	}
	exclude, names, _ := mca.ParseSelection(sel.List())
	listed := false
	for _, n := range names {
		listed = listed || n == "shm"
	}
	if exclude == listed {
		return mca.Decline("btl = %q (source: %s) leaves out shm, and %s uses shared memory as shm does", sel.String(), sel.Source, who)
	}
	return nil
}

// Usable declines, with the reason, when the job's segments cannot be
// made: a job id that cannot be part of a file name, or no Dir.
func Usable(jobID string) error {
	if !ValidJobID(jobID) {
		return mca.Decline("the job id %q cannot be part of a file name", jobID)
	}
	if st, err := os.Stat(Dir); err != nil || !st.IsDir() {
		return mca.Decline("no %s directory for the segments", Dir)
	}
	return nil
}

// Path is the file of a job's segment: Dir/gompi-<job>-<name>. Callers
// check job with ValidJobID first.
func Path(job, name string) string {
	return filepath.Join(Dir, "gompi-"+job+"-"+name)
}

// RemoveJobFiles removes every segment file of a job, of every component,
// for launchers to call when the job has ended, whatever happened to its
// ranks.
func RemoveJobFiles(jobID string) error {
	files, err := filepath.Glob(Path(jobID, "*"))
	if err != nil {
		return mpierr.Errorf(mpierr.ErrArg, "shmem: job id %q: %w", jobID, err)
	}
	var first error
	for _, f := range files {
		if err := os.Remove(f); err != nil && !os.IsNotExist(err) && first == nil {
			first = mpierr.Errorf(mpierr.ErrIntern, "shmem: %w", err)
		}
	}
	return first
}

// A Segment is one mapped file under Dir.
type Segment struct {
	Name string
	Mem  []byte
	maps *Maps    // the cache its mapping is shared through, if any
	m    *mapping // its mapping; nil for a segment made by hand
}

// Create makes a new file of size bytes, mode 0600, and maps it. The file
// must not exist (O_EXCL): a job's names are unique, so an existing one is
// someone else's. fallocate reserves the pages now, so that a full /dev/shm
// is an error here rather than a SIGBUS on first touch.
func (o Owner) Create(name string, size int) (*Segment, error) {
	fd, err := unix.Open(name, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, mpierr.Errorf(mpierr.ErrIntern, "%s: creating %s: %w", o.Name, name, err)
	}
	defer unix.Close(fd)
	if err := unix.Fallocate(fd, 0, 0, int64(size)); err != nil {
		// tmpfs supports fallocate; a file system that does not gets a
		// plain ftruncate.
		if !errors.Is(err, unix.EOPNOTSUPP) {
			unix.Unlink(name)
			return nil, mpierr.Errorf(mpierr.ErrNoMem, "%s: reserving %d bytes for %s: %w", o.Name, size, name, err)
		}
		if err := unix.Ftruncate(fd, int64(size)); err != nil {
			unix.Unlink(name)
			return nil, mpierr.Errorf(mpierr.ErrNoMem, "%s: sizing %s to %d bytes: %w", o.Name, name, size, err)
		}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Unlink(name)
		return nil, mpierr.Errorf(mpierr.ErrIntern, "%s: fstat %s: %w", o.Name, name, err)
	}
	mem, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		unix.Unlink(name)
		return nil, mpierr.Errorf(mpierr.ErrNoMem, "%s: mapping %s: %w", o.Name, name, err)
	}
	return &Segment{Name: name, Mem: mem, maps: o.Maps, m: o.Maps.add(idOf(&st), mem)}, nil
}

// Open maps an existing file made by a peer, after checking that it is a
// regular file of this user of exactly size bytes: a truncated or foreign
// file is an error, not a fault on access. Its errors name the file;
// callers say whose it is.
func Open(name string, size int) (*Segment, error) { return Owner{}.open(name, size) }

// OpenShared is Open through the owner's Maps: a file another goroutine
// rank of the process holds is not mapped again.
func (o Owner) OpenShared(name string, size int) (*Segment, error) { return o.open(name, size) }

// ValidPath reports whether name is a segment file's path as Path makes
// them: in Dir, named gompi-<job>-<rest>, with nothing that leaves Dir.
// Check a name a peer sent before opening it.
func ValidPath(name string) bool {
	dir, file := filepath.Split(name)
	if filepath.Clean(dir) != Dir || !strings.HasPrefix(file, "gompi-") || len(file) > 255 {
		return false
	}
	return !strings.ContainsFunc(file, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '.' || r == '-')
	}) && !strings.Contains(file, "..")
}

// open is Open through the owner's Maps: a file another goroutine rank of
// the process holds is not mapped again.
func (o Owner) open(name string, size int) (*Segment, error) {
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
	if e := o.Maps.lookup(idOf(&st), size); e != nil {
		return &Segment{Name: name, Mem: e.mem, maps: o.Maps, m: e}, nil
	}
	mem, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, mpierr.Errorf(mpierr.ErrNoMem, "mapping %s: %w", name, err)
	}
	return &Segment{Name: name, Mem: mem, maps: o.Maps, m: o.Maps.add(idOf(&st), mem)}, nil
}

// Unmap unmaps the segment, once (a mapping shared through Maps goes with
// its last segment); the file, if still there, stays.
func (s *Segment) Unmap() {
	if s != nil && s.Mem != nil {
		if s.m != nil {
			s.maps.release(s.m)
		} else {
			unix.Munmap(s.Mem)
		}
		s.Mem = nil
	}
}

// Destroy unmaps a segment its caller made and removes the file, ignoring
// errors: for the error paths between Create and the peers' mapping.
func (s *Segment) Destroy() {
	s.Unmap()
	unix.Unlink(s.Name)
}

// Unlink removes a file; its mappings stay valid. A file already gone is
// fine: several parties may race to remove it.
func (o Owner) Unlink(name string) error {
	if err := unix.Unlink(name); err != nil && !errors.Is(err, unix.ENOENT) {
		return mpierr.Errorf(mpierr.ErrIntern, "%s: removing %s: %w", o.Name, name, err)
	}
	return nil
}

// Word returns the 64-bit atomic at offset off of mem. Misalignment is an
// error, not a slow path: a split atomic is slow on amd64, may raise SIGBUS
// under split-lock detection, and faults on arm64. The pointer refers to
// mapped memory, not the Go heap, so the collector ignores it.
func (o Owner) Word(mem []byte, off int) (*atomic.Uint64, error) {
	if off < 0 || off+8 > len(mem) {
		return nil, mpierr.Errorf(mpierr.ErrIntern, "%s: atomic word at %d outside a segment of %d bytes", o.Name, off, len(mem))
	}
	p := unsafe.Pointer(&mem[off])
	if uintptr(p)%8 != 0 {
		return nil, mpierr.Errorf(mpierr.ErrIntern, "%s: atomic word at %p is not 8-byte aligned", o.Name, p)
	}
	return (*atomic.Uint64)(p), nil
}
