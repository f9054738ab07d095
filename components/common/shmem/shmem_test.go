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

// backings runs a test once per backing, with testOwner making that kind.
func backings(t *testing.T, f func(t *testing.T, o Owner)) {
	for _, b := range []Backing{BackingFile, BackingMemfd} {
		t.Run(b.String(), func(t *testing.T) {
			if b == BackingMemfd {
				if err := memfdUsable(); err != nil {
					t.Skipf("memfd segments unusable here: %v", err)
				}
			}
			o := testOwner
			o.Backing, o.Held = b, &Held{}
			f(t, o)
		})
	}
}

// exists reports whether a segment can still be opened by its name, as a
// peer would: a named file, or a memfd through its maker's descriptor.
func exists(name string) bool {
	_, err := os.Stat(name)
	return err == nil
}

// The control segment: the owner makes it and publishes its card; each
// peer maps it and checks that it names the owner; the last of them drops
// its name (removes the file; the owner's Settle closes the memfd's
// descriptor); announcements reach the owner through its slots and
// doorbell.
func TestControlSegment(t *testing.T) {
	backings(t, func(t *testing.T, o Owner) {
		job := testJob(t)
		b, err := mca.NewBase(mca.Options{Output: io.Discard})
		if err != nil {
			t.Fatal(err)
		}
		log := b.Logger("mca")
		h := CtlHeader{Rank: 0, Pid: os.Getpid(), LocalSize: 3}
		ctl, err := o.CreateCtl(job, h)
		if err != nil {
			t.Fatal(err)
		}
		defer ctl.Unmap()
		card, err := o.ParseCard(o.EncodeCard(Card{Pid: h.Pid, CtlBytes: len(ctl.Mem), Ref: ctl.Ref()}))
		if err != nil || card.Pid != h.Pid || card.CtlBytes != CtlSize(3) || card.Ref != ctl.Ref() {
			t.Fatalf("card: %+v %v", card, err)
		}
		if (card.Ref != 0) != (o.Backing == BackingMemfd) {
			t.Errorf("%s segment with ref %d", o.Backing, card.Ref)
		}
		name := o.CtlPathOf(job, card)
		if name != ctl.Name {
			t.Errorf("peers open %s, the segment is %s", name, ctl.Name)
		}
		// The owner holds its descriptor until both peers have mapped it.
		o.Held.hold(ctl.Segment, func() bool { return ctl.Attached.Load() >= 2 })
		other := o
		other.CtlMagic++
		if _, err := other.AttachCtl(log, job, card, h, 2); err == nil {
			t.Error("another owner's control segment attached")
		}
		if _, err := o.AttachCtl(log, job, card, CtlHeader{Rank: 0, Pid: 99, LocalSize: 3}, 2); err == nil ||
			!strings.Contains(err.Error(), fmt.Sprintf("names rank 0 (pid %d, 3 local ranks)", h.Pid)) {
			t.Errorf("a control segment of another pid attached: %v", err)
		}
		var peers []*Ctl
		for i := 1; i <= 2; i++ {
			bell := ctl.Bell.Load()
			c, err := o.AttachCtl(log, job, card, h, 2)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Unmap()
			peers = append(peers, c)
			o.Held.Settle()
			// The last attacher drops the name and rings the owner.
			if exists(name) != (i < 2) || (ctl.Bell.Load() != bell) != (i == 2) {
				t.Errorf("after attacher %d: segment there %v, bell %d -> %d", i, exists(name), bell, ctl.Bell.Load())
			}
		}
		if o.Held.Len() != 0 {
			t.Errorf("%d descriptors held after every peer mapped", o.Held.Len())
		}
		bell := ctl.Bell.Load()
		peers[1].Announce(2, 77, 5)
		if ctl.Bell.Load() != bell+1 || ctl.Slots[2].Load() != 77 || ctl.Refs[2].Load() != 5 || ctl.Slots[1].Load() != 0 {
			t.Errorf("announcement: bell %d, slots %d %d, ref %d", ctl.Bell.Load(), ctl.Slots[1].Load(), ctl.Slots[2].Load(), ctl.Refs[2].Load())
		}
		ctl.Gone.Store(1)
		if peers[0].Gone.Load() != 1 {
			t.Error("the peer does not see the owner finalized")
		}
	})
}

// A box: the sender makes it and writes its header; the receiver maps it,
// reads the header and adopts it, which drops its name (the file; the
// memfd's descriptor at the sender's next Settle); the sender's Release
// removes a file only when the receiver never adopted the box.
func TestBox(t *testing.T) {
	backings(t, func(t *testing.T, o Owner) {
		job := testJob(t)
		h := BoxHeader{Src: 1, Dst: 2, Pid: os.Getpid()}
		senderCtl, err := o.CreateCtl(job, CtlHeader{Rank: 1, Pid: h.Pid, LocalSize: 3})
		if err != nil {
			t.Fatal(err)
		}
		defer senderCtl.Destroy()
		out, err := o.CreateBox(job, h.Src, h.Dst, 4096)
		if err != nil {
			t.Fatal(err)
		}
		o.WriteBoxHeader(out.Mem, h)
		in, err := o.OpenBox(job, h.Src, h.Pid, h.Dst, out.Ref(), 4096)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := o.ParseBoxHeader(in.Mem); err != nil || got != h {
			t.Errorf("box header: %+v, %v", got, err)
		}
		bell := senderCtl.Bell.Load()
		if err := o.Adopt(in, senderCtl); err != nil {
			t.Fatal(err)
		}
		if out.Attached.Load() != 1 || senderCtl.Bell.Load() != bell+1 {
			t.Error("the sender does not see the box mapped, or was not rung")
		}
		o.Held.Settle()
		if exists(out.Name) {
			t.Error("an adopted box can still be opened by its name")
		}
		in.Unmap()
		if err := o.Release(out); err != nil {
			t.Fatal(err)
		}

		// Never adopted: the sender removes it.
		out, err = o.CreateBox(job, h.Dst, h.Src, 4096)
		if err != nil {
			t.Fatal(err)
		}
		name := out.Name
		if err := o.Release(out); err != nil {
			t.Fatal(err)
		}
		if exists(name) {
			t.Error("Release left a box nobody mapped")
		}
		if o.Held.Len() != 0 {
			t.Errorf("%d descriptors held after Release", o.Held.Len())
		}
	})

	bad := make([]byte, BoxOffData)
	h := BoxHeader{Src: 1, Dst: 2, Pid: 77}
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

	card := Card{Pid: 42, CtlBytes: CtlSize(3), Ref: 9}
	if c, err := testOwner.ParseCard(testOwner.EncodeCard(card)); err != nil || c != card {
		t.Errorf("card: %+v %v", c, err)
	}
	for _, b := range [][]byte{nil, make([]byte, CardLen), testOwner.EncodeCard(Card{Pid: 0, CtlBytes: 4096}), testOwner.EncodeCard(Card{Pid: 1, CtlBytes: 10})} {
		if _, err := testOwner.ParseCard(b); err == nil {
			t.Errorf("card %x parsed", b)
		}
	}
}

// FuzzHeaders: headers and cards are other processes' data.
func FuzzHeaders(f *testing.F) {
	ctl := make([]byte, CtlSize(2))
	testOwner.WriteCtlHeader(ctl, CtlHeader{Rank: 1, Pid: 42, LocalSize: 2})
	f.Add(ctl)
	f.Add(testOwner.EncodeCard(Card{Pid: 42, CtlBytes: CtlSize(2), Ref: 4}))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		if h, err := testOwner.ParseCtlHeader(b); err == nil && CtlSize(h.LocalSize) > len(b) {
			t.Fatalf("control header %+v in %d bytes", h, len(b))
		}
		testOwner.ParseBoxHeader(b)
		if c, err := testOwner.ParseCard(b); err == nil && (c.Pid <= 0 || c.CtlBytes < CtlSize(1)) {
			t.Fatalf("card %+v", c)
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
	for _, s := range []string{"/dev/shm/gompi-j1-collsm-00ff", "/dev/shm/../etc/passwd", "/dev/shm/gompi-x/../../y", "gompi-a", "", "/dev/shm/",
		"/proc/12/fd/7", "/proc/12/fd/7/../../../etc/passwd", "/proc/self/fd/3", "/proc/12/fd/07"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		if !ValidPath(name) {
			return
		}
		var pid, fd int
		if n, _ := fmt.Sscanf(name, "/proc/%d/fd/%d", &pid, &fd); n == 2 && name == procFdPath(pid, fd) {
			return
		}
		if filepath.Dir(name) != Dir || strings.Contains(name, "..") {
			t.Fatalf("accepted %q, which is neither a file in %s nor a /proc descriptor", name, Dir)
		}
	})
}

// A goroutine that armed the bell's watchers before another finalized
// disarms them after: Arm and Disarm of an unmapped control segment touch
// nothing (they used to fault).
func TestArmAfterUnmap(t *testing.T) {
	job := testJob(t)
	ctl, err := testOwner.CreateCtl(job, CtlHeader{Rank: 0, Pid: os.Getpid(), LocalSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	ctl.Arm()
	if ctl.Sleep.Load() != 1 {
		t.Fatalf("armed: sleep count %d", ctl.Sleep.Load())
	}
	ctl.Drop()
	ctl.Unmap()
	ctl.Disarm()
	ctl.Arm()
}
