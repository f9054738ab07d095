package tofu

import (
	"testing"

	"github.com/gompi/gompi/frameworks/coll"
	"github.com/gompi/gompi/frameworks/coll/colltest"
	"github.com/gompi/gompi/mca"
)

func TestBarrier(t *testing.T) {
	colltest.Conformance(t, coll.Barrier, Barrier, colltest.Options{})
}

// Dissemination takes ⌈log2 n⌉ rounds of one message per rank.
func TestBarrierRounds(t *testing.T) {
	for n := 1; n <= 33; n++ {
		w := colltest.NewWorld(n, true)
		if err := w.Run(func(c coll.Comm) error { return Barrier(c, &coll.Args{}) }); err != nil {
			t.Fatal(err)
		}
		if want := coll.CeilLog2(n); w.Rounds() != want || w.MaxSent() != want {
			t.Errorf("%d ranks: %d rounds, %d messages per rank; want %d", n, w.Rounds(), w.MaxSent(), want)
		}
	}
}

// Only barrier: every other slot falls through; communicators the LLP does
// not reach are declined.
func TestFillsBarrierOnly(t *testing.T) {
	var c Component
	_, m, err := c.Query(nil, colltest.NewWorld(4, true).Comm(0))
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range coll.Ops() {
		if (m.Func(op) != nil) != (op == coll.Barrier) {
			t.Errorf("slot %s filled: %v", op, m.Func(op) != nil)
		}
	}
	if _, _, err := c.Query(nil, colltest.NewWorld(4, false).Comm(0)); !mca.IsDeclined(err) {
		t.Errorf("without the LLP: %v, want a decline", err)
	}
}
