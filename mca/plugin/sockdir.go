package plugin

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// A plugin's socket folder. go-plugin's server makes its socket in
// PLUGIN_UNIX_SOCKET_DIR, a folder of the plugin's own, which the host
// removes when the plugin ends. A host killed with -9 cannot, and the
// kernel kills its plugins with it (Pdeathsig): the folder would stay in
// $TMPDIR for ever, one per plugin of every killed process. So the folders
// live in one folder per user, and the host holds a shared flock on each of
// its own while it lives; the kernel drops the lock with the process
// however it ends. Every host that starts a plugin first removes the
// folders nobody holds that are older than sockAge: the age covers the
// moment between making a folder and locking it (the same rule as shmem's
// Sweep for named segments).

// sockAge is how old an unlocked socket folder must be to be a dead
// host's.
const sockAge = time.Minute

// sockDir is a plugin's socket folder, locked while its host lives.
type sockDir struct {
	path string
	lock *os.File // the folder itself, open, holding the shared flock
}

// makeSockDir sweeps the dead hosts' folders and makes a locked one in the
// user's folder under $TMPDIR.
func makeSockDir() (*sockDir, error) {
	parent, err := sockParent(os.TempDir())
	if err != nil {
		return nil, err
	}
	sweepSockDirs(parent, time.Now().Add(-sockAge))
	path, err := os.MkdirTemp(parent, "p")
	if err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if err == nil {
		if err = syscall.Flock(int(f.Fd()), syscall.LOCK_SH); err != nil {
			f.Close()
		}
	}
	if err != nil {
		os.Remove(path)
		return nil, fmt.Errorf("locking its socket folder %s: %w", path, err)
	}
	return &sockDir{path: path, lock: f}, nil
}

// remove removes the folder, then lets go of its lock.
func (d *sockDir) remove() {
	if d == nil {
		return
	}
	_ = os.RemoveAll(d.path)
	d.lock.Close()
}

// sockParent returns the user's folder of socket folders in tmp, made if
// need be. It must be a folder (not a link) of this user's that nobody else
// may enter: a folder another user made under that name would let them
// watch and replace the plugins' sockets.
func sockParent(tmp string) (string, error) {
	parent := filepath.Join(tmp, "gompi-plugins-"+strconv.Itoa(os.Getuid()))
	if err := os.Mkdir(parent, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", fmt.Errorf("making the plugins' socket folder: %w", err)
	}
	st, err := os.Lstat(parent)
	if err != nil {
		return "", fmt.Errorf("the plugins' socket folder: %w", err)
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !st.IsDir() || !ok || int(sys.Uid) != os.Getuid() || st.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("the plugins' socket folder %s is not a folder of this user's closed to others (mode %v); remove it", parent, st.Mode())
	}
	return parent, nil
}

// sweepSockDirs removes the folders in parent that no host holds and that
// were last changed before before. Errors leave a folder for a later sweep.
func sweepSockDirs(parent string, before time.Time) {
	entries, err := os.ReadDir(parent)
	if err != nil {
		return
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		info, err := e.Info()
		if err != nil || info.ModTime().After(before) {
			continue
		}
		path := filepath.Join(parent, e.Name())
		f, err := os.Open(path)
		if err != nil {
			continue
		}
		if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil {
			_ = os.RemoveAll(path)
		}
		f.Close()
	}
}
