package plugin

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The sweep removes the socket folders of dead hosts only: a folder whose
// host holds its lock stays however old, an unlocked one stays while
// younger than the age (its host may be about to lock it), and an old
// unlocked one goes with what is in it.
func TestSweepSockDirs(t *testing.T) {
	parent := t.TempDir()
	old := time.Now().Add(-2 * sockAge)
	mk := func(name string, mtime time.Time) string {
		path := filepath.Join(parent, name)
		if err := os.Mkdir(path, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(path, "plugin123"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(path, mtime, mtime); err != nil {
			t.Fatal(err)
		}
		return path
	}
	live, dead, young := mk("plive", old), mk("pdead", old), mk("pyoung", time.Now())
	f, err := os.Open(live)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH); err != nil {
		t.Fatal(err)
	}
	sweepSockDirs(parent, time.Now().Add(-sockAge))
	for path, want := range map[string]bool{live: true, dead: false, young: true} {
		_, err := os.Stat(path)
		if got := err == nil; got != want {
			t.Errorf("%s: kept %v, want %v (%v)", filepath.Base(path), got, want, err)
		}
	}
}

// The user's folder of socket folders is made closed to others, and one
// that is not (another user's, or open to all) is refused with its name.
func TestSockParentRefusesAnOpenFolder(t *testing.T) {
	tmp := t.TempDir()
	parent, err := sockParent(tmp)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(parent); err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("%s: %v, %v; want a folder of mode 0700", parent, st.Mode(), err)
	}
	if err := os.Chmod(parent, 0o777); err != nil {
		t.Fatal(err)
	}
	if _, err := sockParent(tmp); err == nil || !strings.Contains(err.Error(), parent) {
		t.Errorf("a folder open to all: %v, want an error naming %s", err, parent)
	}
	os.Remove(parent)
	if err := os.Symlink(t.TempDir(), parent); err != nil {
		t.Fatal(err)
	}
	if _, err := sockParent(tmp); err == nil {
		t.Error("a link in the folder's place: accepted, want refused")
	}
}
