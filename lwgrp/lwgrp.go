// Package lwgrp is light-weight groups (LLNL's lwgrp): ordered sets of a
// parent communicator's ranks that run collectives without creating a
// communicator. A Chain or Ring records each member's neighbours; a
// LogChain or LogRing also the members 2^d hops away, which is all the
// log-time collectives need: each member holds O(log n) addresses, and
// making or splitting a group costs no context id and no agreement.
//
// Groups run over a parent's point-to-point calls (pml.Transport, which
// *mpi.Comm satisfies), with a tag the caller picks: the tag is the
// group's context, so collectives that may run at the same time on
// overlapping groups need different tags. Package mpi uses lwgrp inside
// Comm.CreateGroup.
//
// Start with LogRingFromComm (every rank of a communicator) or
// LogRingFromList (chosen ranks, made locally by the members alone), then
// split with Split or SplitBin, and run collectives on the group or its
// LogChain.
//
// A recursive-halving sort shows the point (Example_recursiveHalvingSort):
// at every level a group splits in two with SplitBin and each half sorts
// on, where communicators would cost a context-id agreement per level.
//
// Collectives are generic over slices of basic types (datatype.Elem) with
// the predefined reduction ops and user ones (datatype.NewOp); an op that
// does not apply to the type, a negative tag, a rank outside the parent,
// or mismatched counts is an error with an MPI class, never a panic.
package lwgrp

import (
	"fmt"
	"slices"

	"github.com/gompi/gompi/frameworks/pml"
	"github.com/gompi/gompi/mpierr"
)

// ProcNull is the address of no member: past the ends of a chain.
const ProcNull = pml.ProcNull

// Chain is a group in which each member knows its left and right
// neighbours' parent ranks; the ends have ProcNull outside.
type Chain struct {
	t           pml.Transport
	rank, size  int // in the group
	left, right int // parent ranks
}

// Ring is a Chain whose ends are joined.
type Ring struct{ Chain }

// LogChain is a group in which each member knows the parent ranks of the
// members 2^d hops left and right, d = 0 … ⌈log2 n⌉-1 (ProcNull past the
// ends).
type LogChain struct {
	t           pml.Transport
	rank, size  int
	left, right []int
}

// LogRing is a LogChain whose hops wrap around.
type LogRing struct{ LogChain }

// Rank is this member's rank in the group, Size the group's size.
func (c *Chain) Rank() int    { return c.rank }
func (c *Chain) Size() int    { return c.size }
func (l *LogChain) Rank() int { return l.rank }
func (l *LogChain) Size() int { return l.size }

// Left and Right are the neighbours' parent ranks (ProcNull past a
// chain's ends).
func (c *Chain) Left() int  { return c.left }
func (c *Chain) Right() int { return c.right }

// Left and Right give the parent rank of the member 2^d hops away
// (ProcNull past a logchain's ends or beyond the group).
func (l *LogChain) Left(d int) int  { return hop(l.left, d) }
func (l *LogChain) Right(d int) int { return hop(l.right, d) }

func hop(list []int, d int) int {
	if d < 0 || d >= len(list) {
		return ProcNull
	}
	return list[d]
}

// Copy returns an independent copy.
func (c *Chain) Copy() *Chain { cp := *c; return &cp }
func (r *Ring) Copy() *Ring   { return &Ring{*r.Chain.Copy()} }
func (l *LogChain) Copy() *LogChain {
	return &LogChain{t: l.t, rank: l.rank, size: l.size, left: slices.Clone(l.left), right: slices.Clone(l.right)}
}
func (l *LogRing) Copy() *LogRing { return &LogRing{*l.LogChain.Copy()} }

// Free forgets the group; it holds nothing else.
func (c *Chain) Free()    { *c = Chain{left: ProcNull, right: ProcNull} }
func (l *LogChain) Free() { *l = LogChain{} }

// levels is ⌈log2 n⌉.
func levels(n int) int {
	k := 0
	for 1<<k < n {
		k++
	}
	return k
}

// checkList validates a list of parent ranks and finds this process in it.
func checkList(t pml.Transport, ranks []int) (me int, err error) {
	if t == nil {
		return 0, mpierr.Errorf(mpierr.ErrComm, "lwgrp: no parent")
	}
	if len(ranks) == 0 {
		return 0, mpierr.Errorf(mpierr.ErrGroup, "lwgrp: an empty list of ranks")
	}
	n := t.Size()
	seen := make(map[int]int, len(ranks))
	me = -1
	for i, r := range ranks {
		if r < 0 || r >= n {
			return 0, mpierr.Errorf(mpierr.ErrRank, "lwgrp: rank %d (at %d of the list): accepted: 0 to %d, the parent's ranks", r, i, n-1)
		}
		if j, dup := seen[r]; dup {
			return 0, mpierr.Errorf(mpierr.ErrGroup, "lwgrp: rank %d is in the list twice (at %d and %d)", r, j, i)
		}
		seen[r] = i
		if r == t.Rank() {
			me = i
		}
	}
	if me < 0 {
		return 0, mpierr.Errorf(mpierr.ErrGroup, "lwgrp: this process (parent rank %d) is not in the list", t.Rank())
	}
	return me, nil
}

func allRanks(t pml.Transport) []int {
	r := make([]int, t.Size())
	for i := range r {
		r[i] = i
	}
	return r
}

// ChainFromList makes the chain of the given parent ranks, in that order;
// this process must be one of them. Local: no message.
func ChainFromList(t pml.Transport, ranks []int) (*Chain, error) {
	me, err := checkList(t, ranks)
	if err != nil {
		return nil, err
	}
	c := &Chain{t: t, rank: me, size: len(ranks), left: ProcNull, right: ProcNull}
	if me > 0 {
		c.left = ranks[me-1]
	}
	if me+1 < len(ranks) {
		c.right = ranks[me+1]
	}
	return c, nil
}

// RingFromList is ChainFromList with the ends joined.
func RingFromList(t pml.Transport, ranks []int) (*Ring, error) {
	c, err := ChainFromList(t, ranks)
	if err != nil {
		return nil, err
	}
	n := len(ranks)
	c.left, c.right = ranks[(c.rank-1+n)%n], ranks[(c.rank+1)%n]
	return &Ring{*c}, nil
}

// LogChainFromList makes the logchain of the given parent ranks. Local.
func LogChainFromList(t pml.Transport, ranks []int) (*LogChain, error) {
	return logFromList(t, ranks, false)
}

// LogRingFromList makes the logring of the given parent ranks. Local.
func LogRingFromList(t pml.Transport, ranks []int) (*LogRing, error) {
	l, err := logFromList(t, ranks, true)
	if err != nil {
		return nil, err
	}
	return &LogRing{*l}, nil
}

func logFromList(t pml.Transport, ranks []int, wrap bool) (*LogChain, error) {
	me, err := checkList(t, ranks)
	if err != nil {
		return nil, err
	}
	n := len(ranks)
	l := &LogChain{t: t, rank: me, size: n, left: make([]int, levels(n)), right: make([]int, levels(n))}
	for d := range l.left {
		lo, hi := me-1<<d, me+1<<d
		l.left[d], l.right[d] = ProcNull, ProcNull
		switch {
		case wrap:
			l.left[d], l.right[d] = ranks[((lo%n)+n)%n], ranks[hi%n]
		default:
			if lo >= 0 {
				l.left[d] = ranks[lo]
			}
			if hi < n {
				l.right[d] = ranks[hi]
			}
		}
	}
	return l, nil
}

// The groups of every parent rank, in the parent's order. Local.
func ChainFromComm(t pml.Transport) (*Chain, error)       { return ChainFromList(t, allRanks(t)) }
func RingFromComm(t pml.Transport) (*Ring, error)         { return RingFromList(t, allRanks(t)) }
func LogChainFromComm(t pml.Transport) (*LogChain, error) { return LogChainFromList(t, allRanks(t)) }
func LogRingFromComm(t pml.Transport) (*LogRing, error)   { return LogRingFromList(t, allRanks(t)) }

// ChainFromRing cuts a ring between its last and first members. Local.
func ChainFromRing(r *Ring) *Chain {
	c := r.Chain
	if c.rank == 0 {
		c.left = ProcNull
	}
	if c.rank == c.size-1 {
		c.right = ProcNull
	}
	return &c
}

// LogChainFromLogRing drops the hops that wrap around. Local.
func LogChainFromLogRing(r *LogRing) *LogChain {
	l := r.LogChain.Copy()
	for d := range l.left {
		if l.rank-1<<d < 0 {
			l.left[d] = ProcNull
		}
		if l.rank+1<<d >= l.size {
			l.right[d] = ProcNull
		}
	}
	return l
}

// checkTag refuses tags a parent's user messages cannot carry.
func checkTag(op string, tag int) error {
	if tag < 0 || tag > pml.MaxTag {
		return mpierr.Errorf(mpierr.ErrTag, "lwgrp: %s: tag %d: accepted: 0 to %d", op, tag, pml.MaxTag)
	}
	return nil
}

// LogRingFromRing builds the logring of a ring by pointer jumping: in
// round d each member sends its 2^d-left neighbour's address to its
// 2^d-right neighbour and the other way round, and so learns the
// 2^(d+1) neighbours: ⌈log2 n⌉ rounds of two small exchanges. Collective
// over the ring's members.
func LogRingFromRing(r *Ring, tag int) (*LogRing, error) {
	if r == nil {
		return nil, mpierr.Errorf(mpierr.ErrGroup, "lwgrp: build: the group is nil or freed")
	}
	l, err := jump(&r.Chain, tag, true)
	if err != nil {
		return nil, err
	}
	return &LogRing{*l}, nil
}

// LogChainFromChain is LogRingFromRing for a chain (ProcNull past the
// ends). Collective over the chain's members.
func LogChainFromChain(c *Chain, tag int) (*LogChain, error) { return jump(c, tag, false) }

func jump(c *Chain, tag int, ring bool) (*LogChain, error) {
	if c == nil || c.t == nil {
		return nil, mpierr.Errorf(mpierr.ErrGroup, "lwgrp: build: the group is nil or freed")
	}
	if err := checkTag("build", tag); err != nil {
		return nil, err
	}
	n := c.size
	l := &LogChain{t: c.t, rank: c.rank, size: n, left: make([]int, levels(n)), right: make([]int, levels(n))}
	if n == 1 {
		return l, nil
	}
	l.left[0], l.right[0] = c.left, c.right
	var out, in [8]byte
	for d := 0; d+1 < len(l.left); d++ {
		// To the right goes my left hop (the right one's left at 2^(d+1));
		// from the left comes its left hop.
		next := func(to, from, what int) (int, error) {
			put(out[:], what)
			switch {
			case to != ProcNull && from != ProcNull:
				if _, err := c.t.Sendrecv(out[:], to, tag, in[:], from, tag); err != nil {
					return 0, err
				}
			case to != ProcNull:
				return ProcNull, c.t.Send(out[:], to, tag)
			case from != ProcNull:
				if _, err := c.t.Recv(in[:], from, tag); err != nil {
					return 0, err
				}
			default:
				return ProcNull, nil
			}
			return get(in[:]), nil
		}
		left, err := next(l.right[d], l.left[d], l.left[d])
		if err != nil {
			return nil, err
		}
		right, err := next(l.left[d], l.right[d], l.right[d])
		if err != nil {
			return nil, err
		}
		if !ring { // a hop past an end is ProcNull, whatever came
			if c.rank-2<<d < 0 {
				left = ProcNull
			}
			if c.rank+2<<d >= n {
				right = ProcNull
			}
		}
		l.left[d+1], l.right[d+1] = left, right
	}
	return l, nil
}

func put(b []byte, v int) {
	u := uint64(int64(v))
	for i := 0; i < 8; i++ {
		b[i] = byte(u >> (8 * i))
	}
}

func get(b []byte) int {
	var u uint64
	for i := 0; i < 8; i++ {
		u |= uint64(b[i]) << (8 * i)
	}
	return int(int64(u))
}

func (l *LogChain) String() string {
	return fmt.Sprintf("lwgrp rank %d of %d (left %v, right %v)", l.rank, l.size, l.left, l.right)
}
