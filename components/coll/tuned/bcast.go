package tuned

import (
	"github.com/gompi/gompi/frameworks/coll"
)

// barrierDissemination: in round k every rank signals rank+2^k and waits
// for rank-2^k; after ⌈log2 n⌉ rounds each has heard, through some chain,
// from every other.
func barrierDissemination(c coll.Comm, _ *coll.Args) error {
	me, n := c.Rank(), c.Size()
	tag := coll.Tag(coll.Barrier, 0)
	for k := 1; k < n; k <<= 1 {
		if _, err := coll.Exchange(c, nil, (me+k)%n, nil, (me-k+n)%n, tag); err != nil {
			return err
		}
	}
	return nil
}

// barrierRecursiveDoubling: the ranks beyond the largest power of two
// check in with a partner below it, the power of two exchange pairwise in
// log rounds, and the partners release them.
func barrierRecursiveDoubling(c coll.Comm, _ *coll.Args) error {
	me, n := c.Rank(), c.Size()
	p2 := coll.Pow2Floor(n)
	fold, xchg, release := coll.Tag(coll.Barrier, 1), coll.Tag(coll.Barrier, 2), coll.Tag(coll.Barrier, 3)
	if me >= p2 {
		if err := c.Send(nil, me-p2, fold); err != nil {
			return err
		}
		_, err := c.Recv(nil, me-p2, release)
		return err
	}
	if me+p2 < n {
		if _, err := c.Recv(nil, me+p2, fold); err != nil {
			return err
		}
	}
	for mask := 1; mask < p2; mask <<= 1 {
		if _, err := coll.Exchange(c, nil, me^mask, nil, me^mask, xchg); err != nil {
			return err
		}
	}
	if me+p2 < n {
		return c.Send(nil, me+p2, release)
	}
	return nil
}

// rel and abs convert between ranks and ranks relative to a root.
func rel(r, root, n int) int { return (r - root + n) % n }
func abs(v, root, n int) int { return (v + root) % n }

// bcastBinomial: the root's data goes down a binomial tree rooted at it;
// each rank receives once from its parent, then sends to its children,
// the farthest first: ⌈log2 n⌉ rounds.
func bcastBinomial(c coll.Comm, a *coll.Args) error {
	me, n := c.Rank(), c.Size()
	tag := coll.Tag(coll.Bcast, 0)
	vr := rel(me, a.Root, n)
	mask := 1
	for ; mask < n; mask <<= 1 {
		if vr&mask != 0 {
			if err := coll.RecvExactly(c, a.Recv, abs(vr-mask, a.Root, n), tag); err != nil {
				return err
			}
			break
		}
	}
	reqs := a.Requests()
	defer func() { a.PutRequests(reqs) }()
	for mask >>= 1; mask > 0; mask >>= 1 {
		if vr+mask < n {
			q, err := c.Isend(a.Recv, abs(vr+mask, a.Root, n), tag)
			if err != nil {
				coll.WaitAll(c, reqs...)
				return err
			}
			reqs = append(reqs, q)
		}
	}
	return coll.WaitAll(c, reqs...)
}

// bcastPipeline: the data flows down the chain root, root+1, … in
// segments, so that every link is busy at once: about n-1+segments steps
// of one segment each.
func bcastPipeline(c coll.Comm, a *coll.Args) error {
	me, n := c.Rank(), c.Size()
	tag := coll.Tag(coll.Bcast, 1)
	vr := rel(me, a.Root, n)
	prev, next := abs(vr-1, a.Root, n), abs(vr+1, a.Root, n)
	seg := segmentOf(c)
	reqs := a.Requests()
	defer func() { a.PutRequests(reqs) }()
	for off := 0; off < len(a.Recv) || (off == 0 && len(a.Recv) == 0); off += seg {
		part := a.Recv[off:min(off+seg, len(a.Recv))]
		if vr > 0 {
			if err := coll.RecvExactly(c, part, prev, tag); err != nil {
				coll.WaitAll(c, reqs...)
				return err
			}
		}
		if vr < n-1 {
			q, err := c.Isend(part, next, tag)
			if err != nil {
				coll.WaitAll(c, reqs...)
				return err
			}
			reqs = append(reqs, q)
		}
		if len(a.Recv) == 0 {
			break
		}
	}
	return coll.WaitAll(c, reqs...)
}

// bcastScatterAllgather (van de Geijn): the root scatters n blocks down a
// binomial tree, then the blocks go round a ring until every rank has all:
// about 2× the data moved once, in log n + n-1 steps, for large messages.
func bcastScatterAllgather(c coll.Comm, a *coll.Args) error {
	me, n := c.Rank(), c.Size()
	vr := rel(me, a.Root, n)
	off, length := coll.Blocks(len(a.Recv), 1, n)
	span := func(from, to int) []byte { // blocks [from, to) in relative order
		to = min(to, n)
		if from >= to {
			return a.Recv[:0]
		}
		return a.Recv[off[from] : off[to-1]+length[to-1]]
	}
	// Scatter: the subtree of vr holds relative blocks [vr, vr+size).
	tag := coll.Tag(coll.Bcast, 2)
	mask := 1
	for ; mask < n; mask <<= 1 {
		if vr&mask != 0 {
			if err := coll.RecvExactly(c, span(vr, vr+mask), abs(vr-mask, a.Root, n), tag); err != nil {
				return err
			}
			break
		}
	}
	for mask >>= 1; mask > 0; mask >>= 1 {
		if vr+mask < n {
			if err := c.Send(span(vr+mask, vr+2*mask), abs(vr+mask, a.Root, n), tag); err != nil {
				return err
			}
		}
	}
	// Ring allgather of the blocks, in relative order.
	tag = coll.Tag(coll.Bcast, 3)
	next, prev := abs(vr+1, a.Root, n), abs(vr-1+n, a.Root, n)
	for step := 0; step < n-1; step++ {
		sb := (vr - step + n) % n
		rb := (vr - step - 1 + n) % n
		if _, err := coll.Exchange(c, span(sb, sb+1), next, span(rb, rb+1), prev, tag); err != nil {
			return err
		}
	}
	return nil
}
