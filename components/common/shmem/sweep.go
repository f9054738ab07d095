package shmem

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gompi/gompi/mca"
)

// sweepAge is how old an unlocked file must be for Sweep to take it for a
// dead maker's. The lock is the proof; the age guards what no lock can
// speak for: a file of mode 0 (made, not yet locked: a microsecond's
// window in createFile), and files of makers that never lock (an older
// gompi on the same node, whose running jobs must not lose their files in
// set-up).
const sweepAge = time.Minute

// Sweep removes the segment files in Dir of this user's jobs that have no
// live maker left: what a crash leaves when segments are named files. A
// file's maker holds a shared flock on it from creation until its peers
// have mapped it, and the kernel drops the lock with the process, however
// it dies; so a job is gone when none of its files is locked, nor younger
// than a minute (sweepAge). A job with one live file keeps them all: never
// a file of a running job. The
// node's first rank calls it at Init; it returns how many files it
// removed, and logs each job it swept.
func Sweep(log *mca.Logger) int {
	files, err := filepath.Glob(filepath.Join(Dir, "gompi-*"))
	if err != nil {
		return 0
	}
	jobs := map[string][]string{}
	for _, f := range files {
		job, _, ok := strings.Cut(strings.TrimPrefix(filepath.Base(f), "gompi-"), "-")
		if ok && ValidJobID(job) {
			jobs[job] = append(jobs[job], f)
		}
	}
	removed := 0
	for job, names := range jobs {
		var locked []int
		live := false
		for _, name := range names {
			fd, held, err := lockDead(name)
			if err != nil || held {
				live = true
				break
			}
			locked = append(locked, fd)
		}
		if !live {
			for _, name := range names {
				if unix.Unlink(name) == nil {
					removed++
				}
			}
			if log != nil {
				log.Log(mca.VerboseComponent, "removed the shared-memory files of a job whose processes are gone", "job", job, "files", len(names))
			}
		}
		for _, fd := range locked {
			unix.Close(fd)
		}
	}
	return removed
}

// lockDead takes an exclusive lock on a segment file when nobody holds one
// (its maker is gone) and returns the descriptor that holds it; held says
// a maker lives, or the file is being made, or it is not this user's (not
// ours to judge).
func lockDead(name string) (fd int, held bool, err error) {
	fd, err = unix.Open(name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return -1, false, err
		}
		return -1, true, nil
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || st.Uid != uint32(os.Geteuid()) {
		unix.Close(fd)
		return -1, true, nil
	}
	if time.Since(time.Unix(st.Mtim.Unix())) < sweepAge {
		unix.Close(fd)
		return -1, true, nil
	}
	if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		unix.Close(fd)
		return -1, true, nil
	}
	return fd, false, nil
}
