package tuned

import (
	"github.com/gompi/gompi/datatype"
	"github.com/gompi/gompi/frameworks/coll"
)

// unfold gives the ranks that sat out of a fold the result: each odd rank
// of the first 2·extra sends it to the even one below.
func unfold(c coll.Comm, result []byte, newrank, extra int, op coll.Op) error {
	me := c.Rank()
	tag := coll.Tag(op, 4)
	switch {
	case newrank < 0:
		return coll.RecvExactly(c, result, me+1, tag)
	case me < 2*extra:
		return c.Send(result, me-1, tag)
	}
	return nil
}

// allreduceRecursiveDoubling: fold to a power of two, then in each round
// exchange the whole vector with the partner 2^k away and combine, the
// lower ranks' data on the left, so that any op keeps rank order:
// log2 n rounds on a power of two, otherwise the fold and the unfold
// around ⌈log2 n⌉-1 doubling rounds: ⌈log2 n⌉+1 at most.
func allreduceRecursiveDoubling(c coll.Comm, a *coll.Args) error {
	work := a.Recv
	me, n := c.Rank(), c.Size()
	// On a power of two, the first round can send from Send and receive
	// into Recv, combining Send into what arrived: no copy of the input,
	// and a partner that reads the input itself (RDMA Get) reads the
	// program's buffer, not lines this core has just written. The
	// partner's data is the right operand of a non-commutative op only
	// when this rank is the lower one.
	direct := !a.InPlace && n > 1 && n == coll.Pow2Floor(n) && (a.Reducer.Commutative() || me&1 == 0)
	if !a.InPlace && !direct {
		datatype.CopyCached(work, a.Send)
	}
	tmp, scratch := a.Scratch.Get(len(work)), a.Scratch.Get(len(work))
	defer a.Scratch.Put(tmp, scratch)
	newrank, p2, extra, err := fold(c, a, work, tmp, scratch, coll.Allreduce)
	if err != nil {
		return err
	}
	if newrank >= 0 {
		h := halving{extra: extra}
		tag := coll.Tag(coll.Allreduce, 0)
		first := 1
		if direct {
			partner := h.rankOf(newrank ^ 1)
			got, err := coll.Exchange(c, a.Send, partner, work, partner, tag)
			if err != nil {
				return err
			}
			if err := coll.Exactly(c, got, len(work), partner); err != nil {
				return err
			}
			a.Reducer.Apply(a.Send, work) // work = Send op partner's
			first = 2
		}
		for mask := first; mask < p2; mask <<= 1 {
			pv := newrank ^ mask
			partner := h.rankOf(pv)
			n, err := coll.Exchange(c, work, partner, tmp, partner, tag)
			if err != nil {
				return err
			}
			if err := coll.Exactly(c, n, len(work), partner); err != nil {
				return err
			}
			coll.Combine(a, tmp, work, scratch, pv < newrank)
		}
	}
	return unfold(c, work, newrank, extra, coll.Allreduce)
}

// allreduceRabenseifner (commutative ops): reduce-scatter by recursive
// halving, then allgather by recursive doubling, on the power of two the
// fold leaves: each rank sends and receives about twice the vector in all,
// instead of log n times it.
func allreduceRabenseifner(c coll.Comm, a *coll.Args) error {
	work := a.Recv
	h, err := reduceScatterHalving(c, a, a.Input(), work, coll.Allreduce)
	if err != nil {
		return err
	}
	if h.active {
		span := func(lo, hi int) (int, int) {
			if lo >= hi {
				return 0, 0
			}
			return h.off[lo], h.off[hi-1] + h.len[hi-1]
		}
		tag := coll.Tag(coll.Allreduce, 5)
		// Doubling retraces the halving: the range held grows from the
		// rank's block to all of them.
		lo, hi := h.block, h.block+1
		for mask := 1; mask < h.p2; mask <<= 1 {
			partner := h.rankOf(h.newrank ^ mask)
			plo, phi := lo^mask, hi^mask // the partner's range: the mirror block range
			if h.newrank&mask != 0 {
				plo, phi = lo-mask, hi-mask
			} else {
				plo, phi = lo+mask, hi+mask
			}
			sb, se := span(lo, hi)
			rb, re := span(plo, phi)
			n, err := coll.Exchange(c, work[sb:se], partner, work[rb:re], partner, tag)
			if err != nil {
				return err
			}
			if err := coll.Exactly(c, n, re-rb, partner); err != nil {
				return err
			}
			lo, hi = min(lo, plo), max(hi, phi)
		}
	}
	return unfold(c, work, h.newrank, h.extra, coll.Allreduce)
}

// allreduceRing (commutative ops): the vector cut in n blocks goes round
// the ring twice, reduced on the first lap (reduce-scatter) and copied on
// the second (allgather): 2(n-1) steps of one block each, the least data
// any allreduce moves.
//
// Out of place, nothing is copied but what crosses: a rank's first send
// comes from its input, each block arriving on the first lap lands in its
// place in Recv and takes the rank's input there (out = input op partial;
// the op commutes), and the second lap fills the last block. Copying the
// input to Recv first and receiving into a temporary, the textbook way,
// moved half as much again through memory: at 2 ranks and 1 MiB that copy
// alone was a third of the time.
func allreduceRing(c coll.Comm, a *coll.Args) error {
	me, n := c.Rank(), c.Size()
	work := a.Recv
	off, length := coll.Blocks(len(work), a.Reducer.Size, n)
	block := func(buf []byte, b int) []byte { b = (b%n + n) % n; return buf[off[b] : off[b]+length[b]] }
	var tmp []byte
	if a.InPlace {
		tmp = a.Scratch.Get(length[0])
		defer a.Scratch.Put(tmp)
	}
	next, prev := (me+1)%n, (me-1+n)%n
	tag := coll.Tag(coll.Allreduce, 6)
	for step := 0; step < n-1; step++ {
		sb, rb := me-step, me-step-1
		out := block(work, sb)
		if step == 0 && !a.InPlace {
			out = block(a.Send, sb)
		}
		in := block(work, rb)
		if a.InPlace {
			in = tmp[:len(in)]
		}
		got, err := coll.Exchange(c, out, next, in, prev, tag)
		if err != nil {
			return err
		}
		if err := coll.Exactly(c, got, len(in), prev); err != nil {
			return err
		}
		if a.InPlace {
			a.Reducer.Apply(in, block(work, rb))
		} else {
			a.Reducer.Apply(block(a.Send, rb), in)
		}
	}
	if n == 1 && !a.InPlace {
		datatype.CopyCached(work, a.Send)
	}
	tag = coll.Tag(coll.Allreduce, 7)
	for step := 0; step < n-1; step++ {
		sb, rb := me+1-step, me-step
		if _, err := coll.Exchange(c, block(work, sb), next, block(work, rb), prev, tag); err != nil {
			return err
		}
	}
	return nil
}

// reduceScatterAllreduce: the whole vector is allreduced (recursive
// doubling, any op) and each rank keeps its block: log rounds, for the
// small vectors reduce_scatter mostly sees.
func reduceScatterAllreduce(c coll.Comm, a *coll.Args) error {
	me, n := c.Rank(), c.Size()
	counts := a.Counts
	if counts == nil { // reduce_scatter_block: equal blocks
		counts = make([]int, n)
		for i := range counts {
			counts[i] = len(a.Recv)
		}
		if a.InPlace {
			for i := range counts {
				counts[i] = len(a.Recv) / n
			}
		}
	}
	total, at := 0, 0
	for r, k := range counts {
		if r == me {
			at = total
		}
		total += k
	}
	in := a.Send
	if a.InPlace {
		in = a.Recv[:total]
	}
	whole := a.Scratch.Get(total)
	defer a.Scratch.Put(whole)
	if err := allreduceRecursiveDoubling(c, &coll.Args{Op: coll.Allreduce, Send: in[:total], Recv: whole, Reducer: a.Reducer, Scratch: a.Scratch}); err != nil {
		return err
	}
	datatype.CopyCached(a.Recv[:counts[me]], whole[at:at+counts[me]])
	return nil
}
