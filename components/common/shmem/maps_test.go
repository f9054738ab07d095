package shmem

import (
	"testing"
	"unsafe"
)

// With Maps, opening a file the process already maps shares that mapping;
// the last Unmap ends it; a new file under a removed file's name gets a
// mapping of its own.
func TestMapsShareOneMapping(t *testing.T) {
	job := testJob(t)
	o := testOwner
	o.Maps = NewMaps()
	name := Path(job, "shared")
	seg, err := o.Create(name, 4096)
	if err != nil {
		t.Fatal(err)
	}
	a, err := o.open(name, 4096)
	if err != nil {
		t.Fatal(err)
	}
	b, err := o.open(name, 4096)
	if err != nil {
		t.Fatal(err)
	}
	if unsafe.SliceData(a.Mem) != unsafe.SliceData(seg.Mem) || unsafe.SliceData(b.Mem) != unsafe.SliceData(seg.Mem) {
		t.Fatal("a second open of a mapped file mapped it again")
	}
	if _, err := o.open(name, 8192); err == nil {
		t.Error("a shared file opened at another size")
	}
	seg.Unmap()
	a.Unmap()
	b.Mem[7] = 1 // still mapped: b holds it
	b.Unmap()
	if len(o.Maps.files) != 0 {
		t.Errorf("%d mappings left after the last Unmap", len(o.Maps.files))
	}

	// The name again, for a new file, while the old one is still held.
	old, err := o.open(name, 4096)
	if err != nil {
		t.Fatal(err)
	}
	old.Mem[0] = 'o'
	if err := o.Unlink(name); err != nil {
		t.Fatal(err)
	}
	fresh, err := o.Create(name, 4096)
	if err != nil {
		t.Fatal(err)
	}
	again, err := o.open(name, 4096)
	if err != nil {
		t.Fatal(err)
	}
	if unsafe.SliceData(again.Mem) != unsafe.SliceData(fresh.Mem) || again.Mem[0] == 'o' {
		t.Error("the new file under the old name opened as the old mapping")
	}
	for _, s := range []*Segment{old, fresh, again} {
		s.Unmap()
	}
	if len(o.Maps.files) != 0 {
		t.Errorf("%d mappings left", len(o.Maps.files))
	}
}
