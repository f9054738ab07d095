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
