package sm

import "testing"

// The combining is shared out from coll_sm_split_bytes on three ranks or
// more, never on two (splits' comment says why).
func TestSplitsFromThreeRanks(t *testing.T) {
	for _, c := range []struct {
		n, bytes int
		want     bool
	}{
		{2, 8, false}, {2, 16 << 10, false}, {2, 64 << 10, false},
		{3, 8, false}, {3, 16<<10 - 1, false}, {3, 16 << 10, true}, {5, 64 << 10, true},
	} {
		m := &module{n: c.n, split: 16 << 10}
		if got := m.splits(c.bytes); got != c.want {
			t.Errorf("%d ranks, %d bytes: split %v, want %v", c.n, c.bytes, got, c.want)
		}
	}
}
