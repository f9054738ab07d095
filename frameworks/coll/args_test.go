package coll

import (
	"slices"
	"testing"
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
func TestClearKeepsTheRoomOnly(t *testing.T) {
	var a Args
	ints := a.Ints(2, 5)
	reqs := append(a.Requests(), nil, nil)
	a.PutRequests(reqs)
	a.Op, a.Send, a.Recv, a.InPlace, a.Root = Bcast, make([]byte, 8), make([]byte, 8), true, 3
	a.Counts, a.Displs, a.SendCounts, a.SendDispls = []int{1}, []int{2}, []int{3}, []int{4}
	a.Scratch, a.Blocking = &Scratch{}, func(Comm, *Args) error { return nil }
	a.Clear()
	var zero Args
	zero.reqs, zero.ints = a.reqs, a.ints
	if a.Op != zero.Op || a.Send != nil || a.Recv != nil || a.InPlace || a.Root != 0 || a.Counts != nil || a.Displs != nil ||
		a.SendCounts != nil || a.SendDispls != nil || a.Scratch != nil || a.Blocking != nil || a.Reducer.Op != nil || a.coroutines != nil {
		t.Errorf("after Clear: %+v, want every field a call sets empty", a)
	}
	if cap(a.ints[2]) != cap(ints) || &a.ints[2][:1][0] != &ints[0] {
		t.Error("Clear dropped the ints' room")
	}
	if got := a.Requests(); cap(got) < 2 {
		t.Errorf("Clear dropped the requests' room: cap %d", cap(got))
	}
}
