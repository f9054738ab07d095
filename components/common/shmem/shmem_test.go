package shmem

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"github.com/gompi/gompi/mca"
	"github.com/gompi/gompi/mpierr"
)

var testOwner = Owner{Name: "test shm", CtlMagic: 0x6c7463, BoxMagic: 0x786f62, Version: 3, CtlFile: "ctl-%d", BoxFile: "box-%d-%d"}

// testJob is a job id of this test alone; its files are removed at the end.
func testJob(t *testing.T) string {
	t.Helper()
	job := fmt.Sprintf("shmemtest%d", os.Getpid())
	t.Cleanup(func() {
		RemoveJobFiles(job)
		if files, _ := filepath.Glob(Path(job, "*")); len(files) != 0 {
			t.Errorf("files left: %v", files)
		}
	})
	if err := Usable(job); err != nil {
		t.Skip(err)
	}
	return job
}

// Create makes a mode 0600 file of the size asked, refuses an existing
// one, and Open maps it only at exactly that size.
func TestCreateOpen(t *testing.T) {
	job := testJob(t)
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	name := Path(job, "seg")
	seg, err := testOwner.Create(name, 8192)
	if err != nil {
		t.Fatal(err)
	}
	defer seg.Unmap()
	if st, err := os.Lstat(name); err != nil || st.Mode() != 0o600 || st.Size() != 8192 {
		t.Fatalf("%s: %v, %v", name, st, err)
	}
	if _, err := testOwner.Create(name, 4096); err == nil || !strings.HasPrefix(err.Error(), "test shm: creating ") {
		t.Errorf("a second Create: %v", err)
	}
	seg.Mem[100] = 42
	peer, err := Open(name, 8192)
	if err != nil {
		t.Fatal(err)
	}
	if peer.Mem[100] != 42 {
		t.Error("the peer's mapping does not show the write")
	}
	peer.Unmap()
	peer.Unmap() // once only
	if _, err := Open(name, 4096); err == nil || !errors.Is(err, mpierr.ErrIntern) {
		t.Errorf("a file of another size opened: %v", err)
	}
	if err := testOwner.Unlink(name); err != nil {
		t.Fatal(err)
	}
	if err := testOwner.Unlink(name); err != nil {
		t.Errorf("removing a file already gone: %v", err)
	}
	if _, err := Open(name, 8192); err == nil {
		t.Error("a removed file opened")
	}
	if seg.Mem[100] != 42 {
		t.Error("the mapping did not outlive the file")
	}
}

// The control segment: the owner makes it and publishes its card; each
// peer maps it and checks that it names the owner; the last of them removes
// the file; announcements reach the owner through its slots and doorbell.
func TestControlSegment(t *testing.T) {
	job := testJob(t)
	b, err := mca.NewBase(mca.Options{Output: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	log := b.Logger("mca")
	name := testOwner.CtlPath(job, 0)
	h := CtlHeader{Rank: 0, Pid: 1234, LocalSize: 3}
	ctl, err := testOwner.CreateCtl(job, h)
	if err != nil {
		t.Fatal(err)
	}
	defer ctl.Unmap()
	pid, size, err := testOwner.ParseCard(testOwner.EncodeCard(h.Pid, len(ctl.Mem)))
	if err != nil || pid != h.Pid || size != CtlSize(3) {
		t.Fatalf("card: %d %d %v", pid, size, err)
	}
	other := testOwner
	other.CtlMagic++
	if _, err := other.AttachCtl(log, job, size, h, 2); err == nil {
		t.Error("another owner's control segment attached")
	}
	if _, err := testOwner.AttachCtl(log, job, size, CtlHeader{Rank: 0, Pid: 99, LocalSize: 3}, 2); err == nil ||
		!strings.Contains(err.Error(), "names rank 0 (pid 1234, 3 local ranks)") {
		t.Errorf("a control segment of another pid attached: %v", err)
	}
	var peers []*Ctl
	for i := 1; i <= 2; i++ {
		c, err := testOwner.AttachCtl(log, job, size, h, 2)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Unmap()
		peers = append(peers, c)
		// The last attacher removes the file.
		if _, err := os.Stat(name); (err == nil) != (i < 2) {
			t.Errorf("after attacher %d: file: %v", i, err)
		}
	}
	bell := ctl.Bell.Load()
	peers[1].Announce(2, 77)
	if ctl.Bell.Load() != bell+1 || ctl.Slots[2].Load() != 77 || ctl.Slots[1].Load() != 0 {
		t.Errorf("announcement: bell %d, slots %d %d", ctl.Bell.Load(), ctl.Slots[1].Load(), ctl.Slots[2].Load())
	}
	ctl.Gone.Store(1)
	if peers[0].Gone.Load() != 1 {
		t.Error("the peer does not see the owner finalized")
	}
}

// A box: the sender makes it and writes its header; the receiver maps it,
// reads the header and adopts it, which removes the file; the sender's
// Release removes the file only when the receiver never adopted the box.
func TestBox(t *testing.T) {
	job := testJob(t)
	h := BoxHeader{Src: 1, Dst: 2, Pid: 77}
	out, err := testOwner.CreateBox(job, h.Src, h.Dst, 4096)
	if err != nil {
		t.Fatal(err)
	}
	testOwner.WriteBoxHeader(out.Mem, h)
	in, err := testOwner.OpenBox(job, h.Src, h.Dst, 4096)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := testOwner.ParseBoxHeader(in.Mem); err != nil || got != h {
		t.Errorf("box header: %+v, %v", got, err)
	}
	if err := testOwner.Adopt(in); err != nil {
		t.Fatal(err)
	}
	if out.Attached.Load() != 1 {
		t.Error("the sender does not see the box mapped")
	}
	if _, err := os.Stat(out.Name); err == nil {
		t.Error("an adopted box's file is still there")
	}
	in.Unmap()
	if err := testOwner.Release(out); err != nil {
		t.Fatal(err)
	}

	// Never adopted: the sender removes it.
	out, err = testOwner.CreateBox(job, h.Dst, h.Src, 4096)
	if err != nil {
		t.Fatal(err)
	}
	if err := testOwner.Release(out); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(testOwner.BoxPath(job, h.Dst, h.Src)); err == nil {
		t.Error("Release left a box nobody mapped")
	}

	bad := make([]byte, BoxOffData)
	testOwner.WriteBoxHeader(bad, h)
	binary.LittleEndian.PutUint32(bad[boxOffVersion:], 9)
	if _, err := testOwner.ParseBoxHeader(bad); err == nil {
		t.Error("a box of another version parsed")
	}
	if _, err := testOwner.ParseBoxHeader(bad[:100]); err == nil {
		t.Error("a short box parsed")
	}
}

// Headers and cards made by peers may hold anything: parsing checks every
// field.
func TestParseForeignData(t *testing.T) {
	ctl := make([]byte, CtlSize(4))
	testOwner.WriteCtlHeader(ctl, CtlHeader{Rank: 2, Pid: 99, LocalSize: 4})
	if h, err := testOwner.ParseCtlHeader(ctl); err != nil || h != (CtlHeader{2, 99, 4}) {
		t.Errorf("control header: %+v, %v", h, err)
	}
	bad := append([]byte(nil), ctl...)
	binary.LittleEndian.PutUint32(bad[ctlOffLocal:], 100000)
	if _, err := testOwner.ParseCtlHeader(bad); err == nil {
		t.Error("a control header claiming more ranks than it has room for parsed")
	}
	if _, err := testOwner.ParseCtlHeader(ctl[:100]); err == nil {
		t.Error("a short control segment parsed")
	}

	if pid, n, err := testOwner.ParseCard(testOwner.EncodeCard(42, CtlSize(3))); err != nil || pid != 42 || n != CtlSize(3) {
		t.Errorf("card: %d %d %v", pid, n, err)
	}
	for _, b := range [][]byte{nil, make([]byte, CardLen), testOwner.EncodeCard(0, 4096), testOwner.EncodeCard(1, 10)} {
		if _, _, err := testOwner.ParseCard(b); err == nil {
			t.Errorf("card %x parsed", b)
		}
	}
}

// FuzzHeaders: headers and cards are other processes' data.
func FuzzHeaders(f *testing.F) {
	ctl := make([]byte, CtlSize(2))
	testOwner.WriteCtlHeader(ctl, CtlHeader{Rank: 1, Pid: 42, LocalSize: 2})
	f.Add(ctl)
	f.Add(testOwner.EncodeCard(42, CtlSize(2)))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		if h, err := testOwner.ParseCtlHeader(b); err == nil && CtlSize(h.LocalSize) > len(b) {
			t.Fatalf("control header %+v in %d bytes", h, len(b))
		}
		testOwner.ParseBoxHeader(b)
		if pid, n, err := testOwner.ParseCard(b); err == nil && (pid <= 0 || n < CtlSize(1)) {
			t.Fatalf("card pid %d, %d bytes", pid, n)
		}
	})
}

func TestWordAlignment(t *testing.T) {
	w := make([]uint64, 8)
	mem := unsafe.Slice((*byte)(unsafe.Pointer(&w[0])), len(w)*8)
	if _, err := testOwner.Word(mem, 8); err != nil {
		t.Errorf("aligned word refused: %v", err)
	}
	if _, err := testOwner.Word(mem, 3); err == nil {
		t.Error("a misaligned word was accepted")
	}
	if _, err := testOwner.Word(mem, 60); err == nil {
		t.Error("a word past the end was accepted")
	}
}

func TestValidJobID(t *testing.T) {
	for _, id := range []string{"0a1b2c3d", "abc_DEF.9"} {
		if !ValidJobID(id) {
			t.Errorf("%q refused", id)
		}
	}
	for _, id := range []string{"", "../x", "a/b", "a b", "a*"} {
		if ValidJobID(id) {
			t.Errorf("%q accepted", id)
		}
		if err := Usable(id); !mca.IsDeclined(err) {
			t.Errorf("Usable(%q) = %v, want a decline", id, err)
		}
	}
}

// RemoveJobFiles removes every file of the job, whoever made it, and no
// other job's.
func TestRemoveJobFiles(t *testing.T) {
	job := testJob(t)
	other := job + "x"
	for _, name := range []string{Path(job, "ctl-0"), Path(job, "tofu-0-1"), Path(other, "ctl-0")} {
		if err := os.WriteFile(name, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	defer os.Remove(Path(other, "ctl-0"))
	if err := RemoveJobFiles(job); err != nil {
		t.Fatal(err)
	}
	if files, _ := filepath.Glob(Path(job, "*")); len(files) != 0 {
		t.Errorf("left: %v", files)
	}
	if _, err := os.Stat(Path(other, "ctl-0")); err != nil {
		t.Errorf("another job's file: %v", err)
	}
}

// ValidPath takes names from peers: it never panics, and what it accepts
// is a file directly in Dir.
func FuzzValidPath(f *testing.F) {
	for _, s := range []string{"/dev/shm/gompi-j1-collsm-00ff", "/dev/shm/../etc/passwd", "/dev/shm/gompi-x/../../y", "gompi-a", "", "/dev/shm/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		if !ValidPath(name) {
			return
		}
		if filepath.Dir(name) != Dir || strings.Contains(name, "..") {
			t.Fatalf("accepted %q, which is not a file in %s", name, Dir)
		}
	})
}
