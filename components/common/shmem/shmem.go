// Package shmem is the shared-memory mechanism of the components that talk
// through memory (btl shm, llp tofu, coll sm), as Open MPI's
// opal/mca/common/sm is the common part of its shared-memory components. It
// is not a component: it registers nothing but its parameter, and a
// component that uses it imports it as it imports its framework. What a
// component puts in its segments (rings, slots, its own header words)
// stays in the component.
//
// # Segments: memfds, or named files
//
// A segment is a memfd by default (shmem_backing, ChooseBacking): anonymous
// memory sealed to its size, which peers open through /proc/<maker
// pid>/fd/<n> (PathOf), told the pid and the number (a Ref) by a card in
// the modex, an announce slot, or a message. Its maker keeps the
// descriptor only until every peer that needs it has mapped it (Held), so
// nothing names the memory after that, and it goes with the last process
// that maps it, however the processes end: no launcher has to clean up,
// and /dev/shm's size does not bound it. Passing descriptors over a unix
// socket (SCM_RIGHTS) would need a socket between every pair of local
// ranks, which Hydra and Slurm do not give us; /proc needs only what
// reading a peer's /proc/<pid>/fd needs (the same user, a dumpable
// process), which Yama's ptrace scopes do not restrict (they govern
// attaching).
//
// Where memfds cannot be used (no memfd_create, no /proc, a /proc of
// another pid namespace), segments are named files in Dir, gompi-<jobid>-
// <name> (Path), made with O_EXCL and mode 0600, their pages reserved at
// once, and removed as soon as every process that needs them has mapped
// them. A crash before that leaves them: RemoveJobFiles, which mpirun calls
// at job end, removes a job's files, and Sweep, which the node's first
// rank calls at Init, removes those of jobs whose makers are gone (each
// maker holds a lock on its file, which the kernel drops with the
// process).
//
// # Control segments and boxes
//
// Each process makes one control segment per component at Query (CreateCtl)
// and announces it with a business card in the modex (PublishCard). In
// AddProcs each local peer reads the cards (ReadCards), maps each control
// segment (AttachCtl) and counts itself in its attach word; the peer that
// completes the count removes the file and rings the owner, whose next look
// at its doorbell closes its descriptor (Held.Settle). A control segment
// holds the owner's identity, a doorbell, a "finalized" word, and one
// announce slot and one Ref per local rank, through which a peer tells the
// owner about a box it made for it (Announce): the owner loads its
// doorbell, and looks at the slots when it changed.
//
// A box is a segment from one process to one local peer, made by its sender
// on its first send (CreateBox), so that memory grows with the pairs that
// talk rather than with the square of the local ranks. Its header names
// both ends; its receiver maps it (OpenBox), checks it, removes its file,
// marks it mapped and rings the sender (Adopt), which then closes its
// descriptor; at Finalize its sender removes a file the receiver never
// mapped (Release). What a box carries, and how, is the
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
	// Backing is what Create makes (ChooseBacking); SizeParam names the
	// parameter that sizes the owner's largest segments, for the error of
	// a segment there is no room for.
	Backing   Backing
	SizeParam string
	// Held, when set, keeps the descriptors of the owner's control
	// segment and boxes until their peers have mapped them (Settle).
	Held *Held
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

// A Segment is one mapping of shared memory: a memfd or a file under Dir.
type Segment struct {
	// Name is what a peer opens: /proc/<pid>/fd/<n> of its maker for a
	// memfd, the file's path for a named file.
	Name string
	Mem  []byte
	// ref tells peers how to find a segment beside its maker's pid: the
	// descriptor's number plus one for a memfd, 0 for a named file.
	ref   uint64
	named bool
	// fd is the maker's descriptor, kept while peers may still open it: a
	// memfd's only name, and for a named file the holder of the shared
	// flock that tells Sweep the maker lives. -1 once closed, and in a
	// peer's segment.
	fd   atomic.Int64
	held *Held    // the module that keeps fd, if any
	maps *Maps    // the cache its mapping is shared through, if any
	m    *mapping // its mapping; nil for a segment made by hand
}

// Ref is how peers find the segment besides its maker's pid (see
// Owner.PathOf): a number for cards and control slots.
func (s *Segment) Ref() uint64 { return s.ref }

// PathOf is what a peer opens to map the segment that pid made and
// announced with ref: its /proc descriptor for a memfd (ref > 0), the
// named file otherwise (the path the caller's naming gives).
func PathOf(pid int, ref uint64, named string) string {
	if ref == 0 {
		return named
	}
	return procFdPath(pid, int(ref-1))
}

// Create makes a new segment of size bytes and maps it: a memfd, sealed to
// its size, or a file of mode 0600 at name, which must not exist (O_EXCL: a
// job's names are unique, so an existing one is someone else's). name, a
// path under Dir, also names a memfd (it shows in /proc/<pid>/maps).
// fallocate reserves the pages now, so that a full /dev/shm or a memory
// limit is an error here, naming the size and SizeParam, rather than a
// SIGBUS on first touch.
func (o Owner) Create(name string, size int) (*Segment, error) {
	if o.Backing == BackingMemfd {
		return o.createMemfd(name, size)
	}
	return o.createFile(name, size)
}

func (o Owner) createMemfd(name string, size int) (*Segment, error) {
	fd, err := unix.MemfdCreate(filepath.Base(name), unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, mpierr.Errorf(mpierr.ErrIntern, "%s: memfd_create %s: %w", o.Name, filepath.Base(name), err)
	}
	fail := func(err error) (*Segment, error) {
		unix.Close(fd)
		return nil, err
	}
	if err := unix.Fallocate(fd, 0, 0, int64(size)); err != nil {
		return fail(o.noRoom(err, size, "memfd "+filepath.Base(name)))
	}
	// Sealed: a peer can neither shrink it (a SIGBUS for everyone mapping
	// it) nor grow it, nor change the seals.
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_SEAL); err != nil {
		return fail(mpierr.Errorf(mpierr.ErrIntern, "%s: sealing memfd %s: %w", o.Name, filepath.Base(name), err))
	}
	seg, err := o.mapNew(fd, size, procFdPath(os.Getpid(), fd))
	if err != nil {
		return fail(err)
	}
	seg.ref = uint64(fd) + 1
	seg.fd.Store(int64(fd))
	return seg, nil
}

func (o Owner) createFile(name string, size int) (*Segment, error) {
	// Mode 0 until the shared lock is held: Sweep takes a file that is
	// neither locked nor half-made for a dead maker's.
	fd, err := unix.Open(name, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, mpierr.Errorf(mpierr.ErrIntern, "%s: creating %s: %w", o.Name, name, err)
	}
	fail := func(err error) (*Segment, error) {
		unix.Unlink(name)
		unix.Close(fd)
		return nil, err
	}
	if err := unix.Flock(fd, unix.LOCK_SH); err != nil {
		return fail(mpierr.Errorf(mpierr.ErrIntern, "%s: locking %s: %w", o.Name, name, err))
	}
	if err := unix.Fchmod(fd, 0o600); err != nil {
		return fail(mpierr.Errorf(mpierr.ErrIntern, "%s: chmod %s: %w", o.Name, name, err))
	}
	if err := unix.Fallocate(fd, 0, 0, int64(size)); err != nil {
		// tmpfs supports fallocate; a file system that does not gets a
		// plain ftruncate.
		if !errors.Is(err, unix.EOPNOTSUPP) {
			return fail(o.noRoom(err, size, name))
		}
		if err := unix.Ftruncate(fd, int64(size)); err != nil {
			return fail(mpierr.Errorf(mpierr.ErrNoMem, "%s: sizing %s to %d bytes: %w", o.Name, name, size, err))
		}
	}
	seg, err := o.mapNew(fd, size, name)
	if err != nil {
		return fail(err)
	}
	seg.named = true
	seg.fd.Store(int64(fd))
	return seg, nil
}

// noRoom is the error of a reservation that failed: with no room left, it
// names what is full, the size asked and the parameter that lowers it.
func (o Owner) noRoom(err error, size int, what string) error {
	if !errors.Is(err, unix.ENOSPC) && !errors.Is(err, unix.ENOMEM) {
		return mpierr.Errorf(mpierr.ErrNoMem, "%s: reserving %d bytes for %s: %w", o.Name, size, what, err)
	}
	where := "memory (a memory limit of the job's cgroup?)"
	if o.Backing == BackingFile {
		where = Dir
		var fs unix.Statfs_t
		if unix.Statfs(Dir, &fs) == nil {
			where = fmt.Sprintf("%s (%d bytes free of %d)", Dir, fs.Bavail*uint64(fs.Bsize), fs.Blocks*uint64(fs.Bsize))
		}
	}
	hint := ""
	if o.SizeParam != "" {
		hint = "; " + o.SizeParam + " sets the size"
	}
	if o.Backing == BackingFile {
		hint += "; " + BackingParam + "=memfd does not use " + Dir
	}
	return mpierr.Errorf(mpierr.ErrNoMem, "%s: no room in %s for %d bytes for %s%s: %w", o.Name, where, size, what, hint, err)
}

// mapNew maps a new descriptor and records the mapping.
func (o Owner) mapNew(fd, size int, name string) (*Segment, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, mpierr.Errorf(mpierr.ErrIntern, "%s: fstat %s: %w", o.Name, name, err)
	}
	mem, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, mpierr.Errorf(mpierr.ErrNoMem, "%s: mapping %s: %w", o.Name, name, err)
	}
	seg := &Segment{Name: name, Mem: mem, maps: o.Maps, m: o.Maps.add(idOf(&st), mem)}
	seg.fd.Store(-1)
	return seg, nil
}

// Open maps an existing segment a peer made (a file or /proc/<pid>/fd/<n>),
// after checking that it is a regular file of this user of exactly size
// bytes: a truncated or foreign file is an error, not a fault on access.
// Its errors name the file; callers say whose it is.
func Open(name string, size int) (*Segment, error) { return Owner{}.open(name, size) }

// OpenShared is Open through the owner's Maps: a segment another goroutine
// rank of the process holds is not mapped again.
func (o Owner) OpenShared(name string, size int) (*Segment, error) { return o.open(name, size) }

// ValidPath reports whether name is a segment's path as Create makes them:
// a file directly in Dir named gompi-<job>-<rest>, with nothing that
// leaves Dir, or a descriptor /proc/<pid>/fd/<n>. Check a name a peer sent
// before opening it.
func ValidPath(name string) bool {
	var pid, fd int
	var rest string
	if n, _ := fmt.Sscanf(name, "/proc/%d/fd/%d%s", &pid, &fd, &rest); n == 2 && pid > 0 && fd >= 0 {
		return name == procFdPath(pid, fd)
	}
	dir, file := filepath.Split(name)
	if filepath.Clean(dir) != Dir || !strings.HasPrefix(file, "gompi-") || len(file) > 255 {
		return false
	}
	return !strings.ContainsFunc(file, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '.' || r == '-')
	}) && !strings.Contains(file, "..")
}

// open is Open through the owner's Maps: a segment another goroutine rank
// of the process holds is not mapped again.
func (o Owner) open(name string, size int) (*Segment, error) {
	proc := strings.HasPrefix(name, "/proc/")
	flags := unix.O_RDWR | unix.O_CLOEXEC
	if !proc {
		// A /proc descriptor is a link by nature; a file in Dir must not be.
		flags |= unix.O_NOFOLLOW
	}
	fd, err := unix.Open(name, flags, 0)
	if err != nil {
		if proc && (errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM)) {
			return nil, mpierr.Errorf(mpierr.ErrIntern, "opening %s, a peer's memfd: %w (where peers cannot open each other's /proc/<pid>/fd, set %s=file)", name, err, BackingParam)
		}
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
	if proc {
		// Only a segment sealed to its size: nobody can truncate it under
		// our mapping.
		const want = unix.F_SEAL_SHRINK | unix.F_SEAL_GROW
		if seals, err := unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0); err != nil || seals&want != want {
			return nil, mpierr.Errorf(mpierr.ErrIntern, "%s is not a memfd sealed to its size (seals %#x, %v)", name, seals, err)
		}
	}
	if e := o.Maps.lookup(idOf(&st), size); e != nil {
		seg := &Segment{Name: name, Mem: e.mem, maps: o.Maps, m: e}
		seg.fd.Store(-1)
		return seg, nil
	}
	mem, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, mpierr.Errorf(mpierr.ErrNoMem, "mapping %s: %w", name, err)
	}
	seg := &Segment{Name: name, Mem: mem, maps: o.Maps, m: o.Maps.add(idOf(&st), mem)}
	seg.fd.Store(-1)
	return seg, nil
}

// Unmap unmaps the segment, once (a mapping shared through Maps goes with
// its last segment), and closes its maker's descriptor; a named file, if
// still there, stays.
func (s *Segment) Unmap() {
	if s == nil {
		return
	}
	if s.held != nil {
		s.held.forget(s)
	}
	s.closeFd()
	if s.Mem != nil {
		if s.m != nil {
			s.maps.release(s.m)
		} else {
			unix.Munmap(s.Mem)
		}
		s.Mem = nil
	}
}

// closeFd closes the maker's descriptor, once: for a memfd, no peer can
// open the segment after this.
func (s *Segment) closeFd() {
	if fd := s.fd.Swap(-1); fd >= 0 {
		unix.Close(int(fd))
	}
}

// Drop, by the segment's maker, ends what peers open it by once every peer
// that needs it has mapped it: a named file is removed, a memfd's
// descriptor closed. The mapping stays valid.
func (s *Segment) Drop() error {
	var err error
	if s.named {
		if e := unix.Unlink(s.Name); e != nil && !errors.Is(e, unix.ENOENT) {
			err = mpierr.Errorf(mpierr.ErrIntern, "removing %s: %w", s.Name, e)
		}
	}
	s.closeFd()
	return err
}

// Destroy unmaps a segment its caller made and drops its name, ignoring
// errors: for the error paths between Create and the peers' mapping.
func (s *Segment) Destroy() {
	s.Drop()
	s.Unmap()
}

// Unlink removes a named file; its mappings stay valid. A file already
// gone is fine: several parties may race to remove it. A memfd's /proc
// path is no file to remove: its maker drops it.
func (o Owner) Unlink(name string) error {
	if strings.HasPrefix(name, "/proc/") {
		return nil
	}
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
