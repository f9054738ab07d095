package shmem

import (
	"fmt"
	"os"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/gompi/gompi/mca"
	"github.com/gompi/gompi/mpierr"
	"github.com/gompi/gompi/params"
)

// Backing is what a segment is made of.
type Backing int

const (
	// BackingFile: named files in Dir, removed once every peer has mapped
	// them. A crash before that leaves them to the launcher (mpirun) or to
	// the next job's sweep on the node (Sweep). The zero value: an Owner
	// that does not choose makes files, as before memfd.
	BackingFile Backing = iota
	// BackingMemfd: anonymous shared memory (memfd_create), sealed to its
	// size, that peers open through /proc/<creator pid>/fd/<n>. It has no
	// name a crash can leave: its memory goes with the last process that
	// maps it, whatever kills it, and /dev/shm's size does not bound it.
	BackingMemfd
)

func (b Backing) String() string {
	if b == BackingFile {
		return "file"
	}
	return "memfd"
}

// BackingParam chooses the backing of every component's segments.
const BackingParam = "shmem_backing"

const backingAuto = 2

func init() {
	mca.RegisterProject(&mca.Project{Name: "shmem", Description: "Shared-memory segments of the components that talk through memory (btl shm, llp tofu, coll sm)"})
	mca.RegisterProjectParams("shmem", params.Def{
		Name: BackingParam, Type: params.Enum, Default: "auto", Level: 5, Scope: params.ScopeLocal,
		Values: []params.EnumValue{{Value: int64(BackingMemfd), Name: "memfd"}, {Value: int64(BackingFile), Name: "file"}, {Value: backingAuto, Name: "auto"}},
		Help: "What shared-memory segments are made of: memfd (anonymous memory from memfd_create that local peers open " +
			"through /proc/<pid>/fd of its maker: nothing is left behind when a process is killed, whatever the launcher, " +
			"and the size of /dev/shm does not matter), file (named files in /dev/shm, removed once mapped; a crash " +
			"before that leaves them until the launcher or the next job's sweep removes them), or auto (memfd when " +
			"memfd_create works and this process can open its own memfd through /proc, file otherwise, said at verbosity 10)",
	})
}

// ChooseBacking reads shmem_backing for a component; log says, at
// verbosity 10, what auto chose and why. An explicit memfd that this
// process cannot use is an error naming the reason and the other values.
func ChooseBacking(b *mca.Base, log *mca.Logger) (Backing, error) {
	v := b.Lookup(BackingParam)
	switch v.Int() {
	case int64(BackingFile):
		log.Log(mca.VerboseComponent, "shared memory in named files", "shmem_backing", "file", "source", v.Source)
		return BackingFile, nil
	case int64(BackingMemfd):
		if err := memfdUsable(); err != nil {
			return 0, mpierr.Errorf(mpierr.ErrUnsupportedParam, "%s = memfd (source: %s): %w; accepted values: memfd, file, auto", BackingParam, v.Source, err)
		}
		return BackingMemfd, nil
	}
	if err := memfdUsable(); err != nil {
		log.Log(mca.VerboseComponent, "memfd segments unusable here: shared memory in named files in "+Dir+", which a crash can leave until the next job's sweep",
			"shmem_backing", "auto", "reason", err.Error())
		return BackingFile, nil
	}
	log.Log(mca.VerboseComponent, "shared memory in memfd segments, opened by peers through /proc", "shmem_backing", "auto")
	return BackingMemfd, nil
}

// memfdUsable is probeMemfd's verdict, found once per process: it is the
// kernel's and the mounts', the same for every instance, and coll sm asks
// at every communicator's creation.
var memfdUsable = sync.OnceValue(probeMemfd)

// probeMemfd makes a memfd and opens it again through /proc/<pid>/fd, as a
// peer will: a kernel without memfd_create, a /proc not mounted or of
// another pid namespace (the path would name another process's
// descriptor: the inode check sees it) all refuse here. Opening a peer's
// descriptor needs what reading its /proc/<pid>/fd needs (the same user,
// a dumpable process); Yama's ptrace scope restricts attaching only, not
// this.
func probeMemfd() error {
	fd, err := unix.MemfdCreate("gompi-probe", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return fmt.Errorf("memfd_create: %w", err)
	}
	defer unix.Close(fd)
	path := procFdPath(os.Getpid(), fd)
	peer, err := unix.Open(path, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("opening %s: %w", path, err)
	}
	defer unix.Close(peer)
	var a, b unix.Stat_t
	if err := unix.Fstat(fd, &a); err != nil {
		return fmt.Errorf("fstat: %w", err)
	}
	if err := unix.Fstat(peer, &b); err != nil {
		return fmt.Errorf("fstat %s: %w", path, err)
	}
	if a.Dev != b.Dev || a.Ino != b.Ino {
		return fmt.Errorf("%s is not this process's descriptor (a /proc of another pid namespace?)", path)
	}
	return nil
}

func procFdPath(pid, fd int) string { return fmt.Sprintf("/proc/%d/fd/%d", pid, fd) }

// CheckRoom, for named files, fails when Dir has less room than the most
// that the owner's segments of every local rank can take: each a control
// segment and a box of boxBytes to every peer (box says what a box holds,
// for the message). An error at Init that names the sizes and the
// parameters that lower them, rather than a send that fails later, or a
// SIGBUS. memfd segments are not in Dir: nothing to check.
func (o Owner) CheckRoom(localSize int, boxBytes uint64, box string) error {
	if o.Backing != BackingFile {
		return nil
	}
	local := uint64(localSize)
	need := local * (uint64(CtlSize(localSize)) + (local-1)*boxBytes)
	what := fmt.Sprintf("%d local ranks, each a control segment and a box of %s to each peer", local, box)
	var fs unix.Statfs_t
	if err := unix.Statfs(Dir, &fs); err != nil {
		return mpierr.Errorf(mpierr.ErrIntern, "%s: statfs %s: %w", o.Name, Dir, err)
	}
	free := fs.Bavail * uint64(fs.Bsize)
	if free >= need {
		return nil
	}
	hint := ""
	if o.SizeParam != "" {
		hint = "; lower " + o.SizeParam
	}
	return mpierr.Errorf(mpierr.ErrNoMem, "%s: %s has %d bytes free (of %d), and the node's segments may need %d (%s)%s, or use %s=memfd, which does not use %s",
		o.Name, Dir, free, fs.Blocks*uint64(fs.Bsize), need, what, hint, BackingParam, Dir)
}
