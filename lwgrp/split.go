package lwgrp

import (
	"cmp"
	"slices"

	"github.com/gompi/gompi/frameworks/pml"
	"github.com/gompi/gompi/mpierr"
)

// Undefined (MPI_UNDEFINED), as a color or bin, puts a member in no
// group: Split and SplitBin give it nil.
const Undefined = pml.Undefined

// Split partitions the group by color: the members that pass one color
// form a new LogRing, ordered by key and then by rank in this group. No
// communicator is made and no context id is spent: the new groups run
// over the same parent, with the tags their users pick. Collective over
// the group, ⌈log2 n⌉ rounds (an Allgather of the colors and keys).
//
// Unlike LLNL's, which sorts, this gathers every member's color and key
// (O(n) memory for one call), then keeps O(log n) addresses.
func Split(r *LogRing, color, key, tag int) (*LogRing, error) {
	if color < 0 && color != Undefined {
		return nil, mpierr.Errorf(mpierr.ErrArg, "lwgrp: Split: color %d: accepted: 0 or more, or Undefined", color)
	}
	return split(r, color, key, tag, "Split")
}

// SplitBin partitions the group into bins groups: a member passes its bin,
// 0 to bins-1 (or Undefined), and the members of one bin keep their order.
func SplitBin(r *LogRing, bins, bin, tag int) (*LogRing, error) {
	if bins < 1 || (bin != Undefined && (bin < 0 || bin >= bins)) {
		return nil, mpierr.Errorf(mpierr.ErrArg, "lwgrp: SplitBin: bin %d of %d: accepted: 0 to %d, or Undefined", bin, bins, bins-1)
	}
	return split(r, bin, 0, tag, "SplitBin")
}

func split(r *LogRing, color, key, tag int, name string) (*LogRing, error) {
	l, err := ringOf(name, r, tag)
	if err != nil {
		return nil, err
	}
	n := l.size
	all := make([]int64, 3*n)
	mine := []int64{int64(color), int64(key), int64(l.t.Rank())}
	if err := Allgather(r, mine, all, tag); err != nil {
		return nil, err
	}
	if color == Undefined {
		return nil, nil
	}
	var members []int // group ranks of my color
	for i := 0; i < n; i++ {
		if all[3*i] == int64(color) {
			members = append(members, i)
		}
	}
	slices.SortStableFunc(members, func(a, b int) int { return cmp.Compare(all[3*a+1], all[3*b+1]) })
	ranks := make([]int, len(members))
	for i, m := range members {
		ranks[i] = int(all[3*m+2])
	}
	g, err := LogRingFromList(l.t, ranks)
	if err != nil {
		return nil, mpierr.Errorf(mpierr.ErrIntern, "lwgrp: %s: %w", name, err)
	}
	return g, nil
}
