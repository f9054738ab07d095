package schedule

import (
	"errors"
	"strings"
	"testing"

	"github.com/gompi/gompi/frameworks/coll"
	"github.com/gompi/gompi/frameworks/coll/colltest"
	"github.com/gompi/gompi/mpierr"
)

// disseminationBarrier is what a plugin would send for a barrier.
func disseminationBarrier(n, me int) *Schedule {
	s := &Schedule{Op: coll.Barrier, Size: n, Rank: me, Parts: 1}
	for k := 1; k < n; k <<= 1 {
		s.Rounds = append(s.Rounds, []Step{{Kind: Send, Peer: (me + k) % n}, {Kind: Recv, Peer: (me - k + n) % n}})
	}
	return s
}

// ringAllreduce: reduce-scatter then allgather round a ring, n blocks.
func ringAllreduce(n, me int) *Schedule {
	s := &Schedule{Op: coll.Allreduce, Size: n, Rank: me, Parts: n}
	s.Rounds = append(s.Rounds, []Step{{Kind: Copy, Src: Input, Dst: Output, First: 0, End: n}})
	blk := func(b int) int { return ((b % n) + n) % n }
	next, prev := (me+1)%n, (me-1+n)%n
	for step := 0; step < n-1; step++ {
		sb, rb := blk(me-step), blk(me-step-1)
		s.Rounds = append(s.Rounds, []Step{
			{Kind: Send, Peer: next, Src: Output, First: sb, End: sb + 1},
			{Kind: Recv, Peer: prev, Dst: Scratch, First: rb, End: rb + 1},
			{Kind: Reduce, Src: Scratch, Dst: Output, First: rb, End: rb + 1},
		})
	}
	for step := 0; step < n-1; step++ {
		sb, rb := blk(me+1-step), blk(me-step)
		s.Rounds = append(s.Rounds, []Step{
			{Kind: Send, Peer: next, Src: Output, First: sb, End: sb + 1},
			{Kind: Recv, Peer: prev, Dst: Output, First: rb, End: rb + 1},
		})
	}
	return s
}

// scheduled runs gen's schedule, through the wire form and Validate as a
// plugin's would come.
func scheduled(op coll.Op, gen func(n, me int) *Schedule) coll.Func {
	return func(c coll.Comm, a *coll.Args) error {
		s, err := Decode(gen(c.Size(), c.Rank()).Encode())
		if err != nil {
			return err
		}
		if err := s.Validate(op, c.Size(), c.Rank()); err != nil {
			return err
		}
		return Run(c, a, s)
	}
}

// Schedules run natively give the operation's results at every size.
func TestSchedulesConform(t *testing.T) {
	o := colltest.Options{}
	if testing.Short() {
		o.Sizes = []int{1, 2, 3, 5, 8}
	}
	colltest.Conformance(t, coll.Barrier, scheduled(coll.Barrier, disseminationBarrier), o)
	o.Commutative = true // the ring combines out of rank order
	colltest.Conformance(t, coll.Allreduce, scheduled(coll.Allreduce, ringAllreduce), o)
}

// The barrier schedule takes ⌈log2 n⌉ rounds, as tuned's native one.
func TestScheduleRounds(t *testing.T) {
	for _, n := range []int{2, 3, 8, 13} {
		w := colltest.NewWorld(n, false)
		if err := w.Run(func(c coll.Comm) error {
			return scheduled(coll.Barrier, disseminationBarrier)(c, &coll.Args{Op: coll.Barrier})
		}); err != nil {
			t.Fatal(err)
		}
		if got, want := w.Rounds(), coll.CeilLog2(n); got != want {
			t.Errorf("%d ranks: %d rounds, want %d", n, got, want)
		}
	}
}

// Validate refuses what would be wrong or unsafe to run, naming it.
func TestValidate(t *testing.T) {
	good := ringAllreduce(4, 1)
	if err := good.Validate(coll.Allreduce, 4, 1); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		edit func(s *Schedule)
		says string // what the error names
	}{
		{"another operation", func(s *Schedule) { s.Op = coll.Bcast }, "made for bcast, rank 1 of 4"},
		{"another rank", func(s *Schedule) { s.Rank = 2 }, "made for allreduce, rank 2 of 4"},
		{"no parts", func(s *Schedule) { s.Parts = 0 }, "0 parts"},
		{"a peer outside", func(s *Schedule) { s.Rounds[1][0].Peer = 4 }, "round 1, step 0 (send): peer 4"},
		{"itself as peer", func(s *Schedule) { s.Rounds[1][0].Peer = 1 }, "round 1, step 0 (send): peer 1"},
		{"blocks past the end", func(s *Schedule) { s.Rounds[1][0].End = 5 }, "round 1, step 0 (send): blocks [1, 5): accepted within [0, 4)"},
		{"a receive into the input", func(s *Schedule) { s.Rounds[1][1].Dst = Input }, "round 1, step 1 (recv): a receive writes Output or Scratch"},
		{"a send that reads what the round receives", func(s *Schedule) {
			s.Rounds[1][0].Src, s.Rounds[1][0].First, s.Rounds[1][0].End = Scratch, s.Rounds[1][1].First, s.Rounds[1][1].End
		}, "round 1, step 0 (send): reads block 0, which a receive of the round writes"},
		{"two receives into one block", func(s *Schedule) { s.Rounds[1] = append(s.Rounds[1], s.Rounds[1][1]) }, "round 1, step 3 (recv): two receives of the round write block 0"},
		{"an unknown kind", func(s *Schedule) { s.Rounds[1][2].Kind = 9 }, "round 1, step 2 (kind(9)): unknown kind"},
		{"a copy onto itself", func(s *Schedule) { s.Rounds[0][0].Src = Output }, "round 0, step 0 (copy): source and destination are the same blocks"},
	} {
		s, _ := Decode(good.Encode())
		c.edit(s)
		err := s.Validate(coll.Allreduce, 4, 1)
		if !errors.Is(err, mpierr.ErrArg) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: %v, want ErrArg saying %q", c.name, err, c.says)
		}
	}
}

func TestDecodeRefuses(t *testing.T) {
	b := ringAllreduce(3, 0).Encode()
	for _, bad := range [][]byte{nil, []byte("GSC2"), b[:len(b)-1], append(append([]byte(nil), b...), 0)} {
		if _, err := Decode(bad); !errors.Is(err, mpierr.ErrArg) {
			t.Errorf("Decode of %d bytes: %v, want ErrArg", len(bad), err)
		}
	}
}

// Decode's refusal of a header names the magic it wants, whatever it is.
func TestDecodeNamesTheMagic(t *testing.T) {
	b := ringAllreduce(3, 0).Encode()
	defer func(m [4]byte) { magic = m }(magic)
	magic = [4]byte{'T', 'E', 'S', 'T'}
	if _, err := Decode(b); !errors.Is(err, mpierr.ErrArg) || !strings.Contains(err.Error(), "not a schedule: no TEST header") {
		t.Errorf("Decode of a GSC1 schedule where TEST is wanted: %v", err)
	}
}
