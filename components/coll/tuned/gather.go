package tuned

import (
	"github.com/gompi/gompi/datatype"
	"github.com/gompi/gompi/frameworks/coll"
)

// gatherBlock is the per-rank block size of allgather, gather and
// scatter, in place or not.
func gatherBlock(c coll.Comm, a *coll.Args, fromRecv bool) int {
	switch {
	case a.InPlace && fromRecv:
		return len(a.Recv) / c.Size()
	case a.InPlace:
		return len(a.Send) / c.Size()
	case fromRecv:
		return len(a.Send)
	}
	return len(a.Recv)
}

// allgatherRing (and allgatherv): n-1 steps, in each of which every rank
// passes the block it received last to the next rank.
func allgatherRing(c coll.Comm, a *coll.Args) error {
	me, n := c.Rank(), c.Size()
	displs, counts := coll.Layout(c, a, gatherBlock(c, a, true))
	block := func(r int) []byte {
		r = (r%n + n) % n
		return a.Recv[displs[r] : displs[r]+counts[r]]
	}
	if !a.InPlace {
		datatype.CopyCached(block(me), a.Send)
	}
	tag := coll.Tag(a.Op, 0)
	next, prev := (me+1)%n, (me-1+n)%n
	for step := 0; step < n-1; step++ {
		rb := me - step - 1
		got, err := coll.Exchange(c, block(me-step), next, block(rb), prev, tag)
		if err != nil {
			return err
		}
		if err := coll.Exactly(c, got, len(block(rb)), prev); err != nil {
			return err
		}
	}
	return nil
}

// allgatherBruck: rank r keeps the blocks of r, r+1, … in a buffer; in
// round k it sends its first min(2^k, n-2^k) blocks to r-2^k and appends
// as many from r+2^k; a rotation at the end puts them in rank order:
// ⌈log2 n⌉ rounds for any n.
func allgatherBruck(c coll.Comm, a *coll.Args) error {
	me, n := c.Rank(), c.Size()
	bs := gatherBlock(c, a, true)
	buf := a.Scratch.Get(n * bs)
	defer a.Scratch.Put(buf)
	if a.InPlace {
		datatype.CopyCached(buf, a.Recv[me*bs:(me+1)*bs])
	} else {
		datatype.CopyCached(buf, a.Send)
	}
	tag := coll.Tag(coll.Allgather, 1)
	for k := 1; k < n; k <<= 1 {
		cnt := min(k, n-k)
		got, err := coll.Exchange(c, buf[:cnt*bs], (me-k+n)%n, buf[k*bs:(k+cnt)*bs], (me+k)%n, tag)
		if err != nil {
			return err
		}
		if err := coll.Exactly(c, got, cnt*bs, (me+k)%n); err != nil {
			return err
		}
	}
	for i := 0; i < n; i++ { // buf's block i is rank me+i's
		datatype.CopyCached(a.Recv[((me+i)%n)*bs:], buf[i*bs:(i+1)*bs])
	}
	return nil
}

// allgatherRecursiveDoubling (powers of two; Bruck otherwise): in round k
// partners 2^k apart swap the 2^k blocks each has gathered.
func allgatherRecursiveDoubling(c coll.Comm, a *coll.Args) error {
	me, n := c.Rank(), c.Size()
	if n&(n-1) != 0 {
		return allgatherBruck(c, a)
	}
	bs := gatherBlock(c, a, true)
	if !a.InPlace {
		datatype.CopyCached(a.Recv[me*bs:], a.Send)
	}
	tag := coll.Tag(coll.Allgather, 2)
	for mask := 1; mask < n; mask <<= 1 {
		partner := me ^ mask
		mine := me &^ (mask - 1) // my group's first rank
		theirs := partner &^ (mask - 1)
		got, err := coll.Exchange(c, a.Recv[mine*bs:(mine+mask)*bs], partner, a.Recv[theirs*bs:(theirs+mask)*bs], partner, tag)
		if err != nil {
			return err
		}
		if err := coll.Exactly(c, got, mask*bs, partner); err != nil {
			return err
		}
	}
	return nil
}

// gatherBinomial: up a binomial tree rooted at the root, each rank
// forwarding the blocks of its whole subtree at once: ⌈log2 n⌉ rounds.
func gatherBinomial(c coll.Comm, a *coll.Args) error {
	me, n := c.Rank(), c.Size()
	vr := rel(me, a.Root, n)
	bs := len(a.Send)
	if me == a.Root && a.InPlace {
		bs = len(a.Recv) / n
	}
	tag := coll.Tag(coll.Gather, 1)
	// The subtree of vr is relative ranks [vr, vr+lowbit(vr)) ∩ [0, n).
	sub := 1
	for sub < n && vr&sub == 0 {
		sub <<= 1
	}
	size := min(sub, n-vr)
	buf := a.Scratch.Get(size * bs)
	defer a.Scratch.Put(buf)
	if me == a.Root && a.InPlace {
		datatype.CopyCached(buf, a.Recv[me*bs:(me+1)*bs])
	} else {
		datatype.CopyCached(buf, a.Send)
	}
	for mask := 1; mask < sub && vr+mask < n; mask <<= 1 {
		child := vr + mask
		cnt := min(mask, n-child)
		if err := coll.RecvExactly(c, buf[mask*bs:(mask+cnt)*bs], abs(child, a.Root, n), tag); err != nil {
			return err
		}
	}
	if vr != 0 {
		return c.Send(buf, abs(vr-sub, a.Root, n), tag)
	}
	for i := 0; i < n; i++ { // relative block i is rank root+i's
		datatype.CopyCached(a.Recv[abs(i, a.Root, n)*bs:], buf[i*bs:(i+1)*bs])
	}
	return nil
}

// scatterBinomial: down a binomial tree, each rank receiving its
// subtree's blocks and passing on its children's: ⌈log2 n⌉ rounds.
func scatterBinomial(c coll.Comm, a *coll.Args) error {
	me, n := c.Rank(), c.Size()
	vr := rel(me, a.Root, n)
	bs := gatherBlock(c, a, false)
	tag := coll.Tag(coll.Scatter, 1)
	sub := 1
	for sub < n && vr&sub == 0 {
		sub <<= 1
	}
	size := min(sub, n-vr)
	buf := a.Scratch.Get(size * bs)
	defer a.Scratch.Put(buf)
	if vr == 0 {
		for i := 0; i < n; i++ {
			datatype.CopyCached(buf[i*bs:], a.Send[abs(i, a.Root, n)*bs:(abs(i, a.Root, n)+1)*bs])
		}
	} else if err := coll.RecvExactly(c, buf, abs(vr-sub, a.Root, n), tag); err != nil {
		return err
	}
	reqs := a.Requests()
	defer func() { a.PutRequests(reqs) }()
	for mask := sub >> 1; mask > 0; mask >>= 1 {
		child := vr + mask
		if child >= n {
			continue
		}
		cnt := min(mask, n-child)
		q, err := c.Isend(buf[mask*bs:(mask+cnt)*bs], abs(child, a.Root, n), tag)
		if err != nil {
			coll.WaitAll(c, reqs...)
			return err
		}
		reqs = append(reqs, q)
	}
	if err := coll.WaitAll(c, reqs...); err != nil {
		return err
	}
	if !(me == a.Root && a.InPlace) {
		datatype.CopyCached(a.Recv, buf[:bs])
	}
	return nil
}
