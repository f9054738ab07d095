package coll

import (
	"reflect"
	"slices"
	"testing"

	"github.com/gompi/gompi/datatype"
)

// A run's arguments made with Own keep their counts when the call's
// arguments they came from are reused for the next call; counts that are
// not in the call's room (the caller's own slices) are shared, not copied.
func TestOwnCopiesWhatIsInTheRoom(t *testing.T) {
	var call Args
	counts, displs := call.Ints(0, 3), call.Ints(1, 3)
	copy(counts, []int{1, 2, 3})
	copy(displs, []int{0, 1, 3})
	theirs := []int{7, 7, 7}
	call.Counts, call.Displs, call.SendCounts = counts, displs, theirs

	var run Args
	run.Own(&call)
	call.Reuse(Args{})
	copy(call.Ints(0, 3), []int{9, 9, 9}) // the next call
	copy(call.Ints(1, 3), []int{9, 9, 9})
	if !slices.Equal(run.Counts, []int{1, 2, 3}) || !slices.Equal(run.Displs, []int{0, 1, 3}) {
		t.Errorf("after the call's room was reused: counts %v, displacements %v; want [1 2 3] and [0 1 3]", run.Counts, run.Displs)
	}
	if &run.SendCounts[0] != &theirs[0] {
		t.Error("send counts outside the room were copied; want them shared")
	}
}

// Clear empties every field a call sets (the user's buffers are not kept
// alive by a pooled Args) and keeps the room: the requests' and the ints'.
// Clear names the fields one by one, so a field added to Args must be added
// there: the count below says when.
func TestClearKeepsTheRoomOnly(t *testing.T) {
	if n := reflect.TypeFor[Args]().NumField(); n != 15 {
		t.Fatalf("Args has %d fields, 15 when Clear was written: clear the new one in Clear, set it here, and update the count", n)
	}
	var a Args
	ints := a.Ints(2, 5)
	reqs := append(a.Requests(), nil, nil)
	a.PutRequests(reqs)
	a.Op, a.Send, a.Recv, a.InPlace, a.Root = Bcast, make([]byte, 8), make([]byte, 8), true, 3
	a.Counts, a.Displs, a.SendCounts, a.SendDispls = []int{1}, []int{2}, []int{3}, []int{4}
	a.Reducer = datatype.Reducer{Op: datatype.Sum, Size: 8, Apply: func(in, inout []byte) {}}
	a.Scratch, a.coroutines, a.Blocking = &Scratch{}, &coPool{}, func(Comm, *Args) error { return nil }
	v := reflect.ValueOf(&a).Elem()
	for i := range v.NumField() {
		if v.Field(i).IsZero() {
			t.Fatalf("the test left field %s empty before Clear", v.Type().Field(i).Name)
		}
	}
	a.Clear()
	for i := range v.NumField() {
		name := v.Type().Field(i).Name
		if name != "reqs" && name != "ints" && !v.Field(i).IsZero() {
			t.Errorf("after Clear, %s is %v; want it empty", name, v.Field(i))
		}
	}
	if cap(a.ints[2]) != cap(ints) || &a.ints[2][:1][0] != &ints[0] {
		t.Error("Clear dropped the ints' room")
	}
	if got := a.Requests(); cap(got) < 2 {
		t.Errorf("Clear dropped the requests' room: cap %d", cap(got))
	}
}
