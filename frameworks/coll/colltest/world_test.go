package colltest_test

import (
	"testing"

	"github.com/gompi/gompi/components/coll/basic"
	"github.com/gompi/gompi/datatype"
	"github.com/gompi/gompi/frameworks/coll"
	"github.com/gompi/gompi/frameworks/coll/colltest"
)

// The world counts messages and rounds: basic's linear barrier is 2 rounds
// (in to rank 0, out from it), with n-1 messages from rank 0; its linear
// scan is n-1 rounds of one message each.
func TestWorldCountsRoundsAndMessages(t *testing.T) {
	for _, n := range []int{1, 2, 7, 16} {
		w := colltest.NewWorld(n, false)
		if err := w.Run(func(c coll.Comm) error { return basic.Barrier(c, &coll.Args{}) }); err != nil {
			t.Fatal(err)
		}
		wantRounds := 2
		if n == 1 {
			wantRounds = 0
		}
		if r, m := w.Rounds(), w.MaxSent(); r != wantRounds || m != n-1 {
			t.Errorf("barrier, %d ranks: %d rounds, at most %d messages; want %d and %d", n, r, m, wantRounds, n-1)
		}
		w.Reset()
		sum := mustReducer(t) // here: Run's ranks are goroutines, where t.Fatal may not be called
		err := w.Run(func(c coll.Comm) error {
			a := &coll.Args{Send: make([]byte, 8), Recv: make([]byte, 8), Reducer: sum}
			return basic.Scan(c, a)
		})
		if err != nil {
			t.Fatal(err)
		}
		if r, m := w.Rounds(), w.MaxSent(); r != n-1 || m != min(1, n-1) {
			t.Errorf("scan, %d ranks: %d rounds, at most %d messages; want %d and %d", n, r, m, n-1, min(1, n-1))
		}
		if err := w.Leftover(); err != nil {
			t.Error(err)
		}
	}
}

func mustReducer(t *testing.T) datatype.Reducer {
	r, err := datatype.ReducerFor[int64](datatype.Sum)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
