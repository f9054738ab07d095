package tuned

import (
	"unsafe"

	"github.com/gompi/gompi/datatype"
	"github.com/gompi/gompi/frameworks/coll"
)

// reduceBinomial: a binomial tree over ranks in order, so that every
// partial result covers a contiguous run of ranks and any op, commutative
// or not, combines in rank order: in round k a rank with bit k set sends
// its run to the rank 2^k below and is done. The tree is rooted at rank 0
// for a non-commutative op (then 0 sends the result to the root: one more
// step), at the root itself for a commutative one.
//
// Nothing is copied for its own sake: a leaf sends its input, a rank's
// first child's run is received and combined with the input in one
// buffer (the root's: Recv), which then holds the partial result.
func reduceBinomial(c coll.Comm, a *coll.Args) error {
	me, n := c.Rank(), c.Size()
	tag := coll.Tag(coll.Reduce, 0)
	center := 0
	if a.Reducer.Commutative() {
		center = a.Root
	}
	vr := rel(me, center, n)
	in := a.Input()
	atRoot := me == a.Root && center == a.Root
	// acc is the partial result of this rank's run so far; nil while the
	// run is this rank alone (its input).
	var acc, tmp, scratch []byte
	if atRoot && a.InPlace {
		acc = in // the input is Recv, where the result goes
	}
	var held [3][]byte
	kept := 0
	get := func() []byte {
		held[kept] = a.Scratch.Get(len(in))
		kept++
		return held[kept-1]
	}
	defer func() { a.Scratch.Put(held[:kept]...) }()
	for mask := 1; mask < n; mask <<= 1 {
		if vr&mask != 0 {
			out := acc
			if out == nil {
				out = in
			}
			if err := c.Send(out, abs(vr-mask, center, n), tag); err != nil {
				return err
			}
			acc = nil
			break
		}
		if vr+mask >= n {
			continue
		}
		child := abs(vr+mask, center, n)
		if acc == nil {
			first := a.Recv
			if !atRoot {
				first = get()
			}
			if err := coll.RecvExactly(c, first, child, tag); err != nil {
				return err
			}
			// in covers the lower ranks: first = in op first.
			coll.Combine(a, in, first, nil, true)
			acc = first
			continue
		}
		if tmp == nil {
			tmp = get()
		}
		if err := coll.RecvExactly(c, tmp, child, tag); err != nil {
			return err
		}
		if scratch == nil && !a.Reducer.Commutative() {
			scratch = get()
		}
		// tmp covers higher ranks: acc = acc op tmp.
		coll.Combine(a, tmp, acc, scratch, false)
	}
	switch {
	case atRoot:
		if acc == nil && !a.InPlace {
			datatype.CopyCached(a.Recv, in) // one rank: its input is the result
		}
	case me == center:
		if acc == nil {
			acc = in
		}
		return c.Send(acc, a.Root, coll.Tag(coll.Reduce, 1))
	case me == a.Root:
		return coll.RecvExactly(c, a.Recv, center, coll.Tag(coll.Reduce, 1))
	}
	return nil
}

// reduceRabenseifner (commutative ops): the reduce-scatter of
// allreduceRabenseifner leaves each of the largest power of two of ranks
// with one reduced block; they send their blocks to the root: the data
// crosses each link about twice instead of log n times.
func reduceRabenseifner(c coll.Comm, a *coll.Args) error {
	me := c.Rank()
	in := a.Input()
	work := a.Scratch.Get(len(in))
	defer a.Scratch.Put(work)
	rs, err := reduceScatterHalving(c, a, in, work, coll.Reduce)
	if err != nil {
		return err
	}
	tag := coll.Tag(coll.Reduce, 5)
	if me != a.Root {
		if rs.active {
			return c.Send(work[rs.off[rs.block]:rs.off[rs.block]+rs.len[rs.block]], a.Root, tag)
		}
		return nil
	}
	// The root collects every block from the rank that holds it.
	for b := range rs.off {
		dst := a.Recv[rs.off[b] : rs.off[b]+rs.len[b]]
		holder := rs.holder(b)
		if holder == me {
			datatype.CopyCached(dst, work[rs.off[b]:rs.off[b]+rs.len[b]])
			continue
		}
		if err := coll.RecvExactly(c, dst, holder, tag); err != nil {
			return err
		}
	}
	return nil
}

// halving is where reduceScatterHalving left the blocks: the power of two
// p2 of active ranks, each holding reduced block newrank (in rank order,
// since halving keeps each rank's range of blocks contiguous).
type halving struct {
	p2, extra int
	active    bool
	newrank   int
	block     int // the block this rank holds, when active
	off, len  []int
}

// rankOf is the rank whose new rank is v.
func (h *halving) rankOf(v int) int {
	if v < h.extra {
		return 2*v + 1
	}
	return v + h.extra
}

// holder is the rank that holds reduced block b.
func (h *halving) holder(b int) int { return h.rankOf(b) }

// fold brings n ranks to a power of two: of the first 2·extra ranks the
// even ones give their data to the odd one above and sit out. It returns
// the new rank (-1 for those who sit out).
func fold(c coll.Comm, a *coll.Args, work, tmp, scratch []byte, op coll.Op) (newrank, p2, extra int, err error) {
	me, n := c.Rank(), c.Size()
	p2 = coll.Pow2Floor(n)
	extra = n - p2
	tag := coll.Tag(op, 2)
	switch {
	case me < 2*extra && me%2 == 0:
		return -1, p2, extra, c.Send(work, me+1, tag)
	case me < 2*extra:
		if err := coll.RecvExactly(c, tmp, me-1, tag); err != nil {
			return 0, p2, extra, err
		}
		coll.Combine(a, tmp, work, scratch, true) // tmp is the lower rank's
		return me / 2, p2, extra, nil
	}
	return me - extra, p2, extra, nil
}

// reduceScatterHalving folds to a power of two, then halves: in each
// round a rank keeps half of its range of blocks, sends the other half to
// its partner and combines the partner's half of its own. Blocks are cut
// with coll.Blocks over p2 parts. Ops must be commutative.
//
// The rank's data is in src, work is where the blocks are reduced (they
// may be one buffer). When they differ and no rank folds, the first round
// sends from src and receives into work, and nothing is copied; otherwise
// src is copied to work first. The reduced block is then in work.
func reduceScatterHalving(c coll.Comm, a *coll.Args, src, work []byte, op coll.Op) (*halving, error) {
	tmp, scratch := a.Scratch.Get(len(work)), a.Scratch.Get(len(work))
	defer a.Scratch.Put(tmp, scratch)
	n := c.Size()
	direct := len(src) > 0 && unsafe.SliceData(src) != unsafe.SliceData(work) && n == coll.Pow2Floor(n) && n > 1
	if !direct {
		datatype.CopyCached(work, src)
	}
	newrank, p2, extra, err := fold(c, a, work, tmp, scratch, op)
	if err != nil {
		return nil, err
	}
	h := &halving{p2: p2, extra: extra, newrank: newrank, active: newrank >= 0}
	h.off, h.len = coll.Blocks(len(work), a.Reducer.Size, p2)
	if !h.active {
		return h, nil
	}
	span := func(lo, hi int) (int, int) { // byte range of blocks [lo, hi)
		if lo >= hi {
			return 0, 0
		}
		return h.off[lo], h.off[hi-1] + h.len[hi-1]
	}
	tag := coll.Tag(op, 3)
	lo, hi := 0, p2
	for mask := p2 / 2; mask > 0; mask >>= 1 {
		partner := h.rankOf(newrank ^ mask)
		mid := lo + (hi-lo)/2
		keepLo, keepHi, sendLo, sendHi := lo, mid, mid, hi
		if newrank&mask != 0 {
			keepLo, keepHi, sendLo, sendHi = mid, hi, lo, mid
		}
		sb, se := span(sendLo, sendHi)
		kb, ke := span(keepLo, keepHi)
		from, into := work, tmp
		firstDirect := direct && mask == p2/2
		if firstDirect {
			// The partner's half arrives where it is reduced, and src's
			// is combined into it: work = src op partner's (commutative).
			from, into = src, work
		}
		got, err := coll.Exchange(c, from[sb:se], partner, into[kb:ke], partner, tag)
		if err != nil {
			return nil, err
		}
		if err := coll.Exactly(c, got, ke-kb, partner); err != nil {
			return nil, err
		}
		if firstDirect {
			a.Reducer.Apply(src[kb:ke], work[kb:ke])
		} else {
			a.Reducer.Apply(tmp[kb:ke], work[kb:ke])
		}
		lo, hi = keepLo, keepHi
	}
	h.block = lo
	return h, nil
}
