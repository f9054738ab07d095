package group

import (
	"fmt"
	"math"
	"strconv"

	"github.com/gompi/gompi/mpierr"
)

// ExpandRanges expands MPI range triplets (first, last, stride) over a group
// of size members into the list of ranks they denote, in triplet order.
//
// A triplet denotes first, first+stride, …, first+⌊(last-first)/stride⌋·stride.
// As the MPI standard says, only the computed ranks must be valid: last
// itself may lie past the end of the group when the last computed rank
// does not (Open MPI rejects last == size; MPICH and the standard accept it).
//
// Errors, with their classes:
//   - ErrArg: a malformed triplet: stride 0, or a stride whose sign does not
//     lead from first to last (first > last needs a negative stride, first <
//     last a positive one; first == last is one rank with any stride).
//   - ErrRank: a computed rank outside 0..size-1 (first itself, or the last
//     computed rank), or a rank computed twice (overlapping triplets).
//
// It never allocates more than size ranks: every check is made before the
// expansion and duplicates are caught as they appear.
func ExpandRanges(size int, ranges [][3]int) ([]int, error) {
	var out []int
	var seen bitset
	for i, t := range ranges {
		first, last, stride := t[0], t[1], t[2]
		n, err := tripletCount(size, i, first, last, stride)
		if err != nil {
			return nil, err
		}
		if out == nil {
			out = make([]int, 0, min(n, size))
			seen = newBitset(size)
		}
		for k := 0; k < n; k++ {
			r := first + k*stride // in range, as tripletCount checked
			if seen.has(r) {
				return nil, mpierr.Errorf(mpierr.ErrRank,
					"triplet %d %s computes rank %d, which an earlier triplet also computes: the computed ranks of all triplets must be distinct",
					i, showTriplet(t), r)
			}
			seen.set(r)
			out = append(out, r)
		}
	}
	return out, nil
}

// tripletCount validates triplet i and returns how many ranks it computes.
func tripletCount(size, i, first, last, stride int) (int, error) {
	t := [3]int{first, last, stride}
	switch {
	case stride == 0:
		return 0, mpierr.Errorf(mpierr.ErrArg, "triplet %d %s: the stride must not be 0", i, showTriplet(t))
	case first > last && stride > 0:
		return 0, mpierr.Errorf(mpierr.ErrArg,
			"triplet %d %s: first > last needs a negative stride (a positive one never reaches last)", i, showTriplet(t))
	case first < last && stride < 0:
		return 0, mpierr.Errorf(mpierr.ErrArg,
			"triplet %d %s: first < last needs a positive stride (a negative one never reaches last)", i, showTriplet(t))
	case first < 0 || first >= size:
		return 0, mpierr.Errorf(mpierr.ErrRank, "triplet %d %s: first rank %d is out of range: %s",
			i, showTriplet(t), first, validRanks(size))
	}
	// Unsigned arithmetic: last-first and -stride may not fit an int.
	var span, step uint64
	if stride > 0 {
		span, step = uint64(last)-uint64(first), uint64(stride)
	} else {
		span, step = uint64(first)-uint64(last), -uint64(stride)
	}
	steps := span / step
	// The last computed rank is first ± steps·step; it is in range iff
	// steps·step stays within the room left on that side of first (which
	// also bounds steps·step, so the product cannot overflow).
	room := uint64(size - 1 - first)
	if stride < 0 {
		room = uint64(first)
	}
	// steps·step <= span, so the product cannot overflow.
	if steps*step > room {
		return 0, mpierr.Errorf(mpierr.ErrRank, "triplet %d %s computes rank %s, which is out of range: %s",
			i, showTriplet(t), offsetRank(first, steps*step, stride > 0), validRanks(size))
	}
	return int(steps) + 1, nil
}

// offsetRank prints first+d (up) or first-d exactly, or says which way it
// leaves the int range.
func offsetRank(first int, d uint64, up bool) string {
	switch {
	case up && d <= uint64(math.MaxInt-first):
		return strconv.Itoa(first + int(d))
	case up:
		return "beyond " + strconv.Itoa(math.MaxInt)
	case d <= uint64(first)+1<<63:
		return strconv.FormatInt(int64(uint64(first)-d), 10)
	}
	return "below " + strconv.Itoa(math.MinInt)
}

func showTriplet(t [3]int) string {
	return fmt.Sprintf("(first %d, last %d, stride %d)", t[0], t[1], t[2])
}

// validRanks says what ranks a group of size members accepts.
func validRanks(size int) string {
	if size == 0 {
		return "the group is empty and has no ranks"
	}
	return fmt.Sprintf("the group has %d members, ranks 0..%d", size, size-1)
}
