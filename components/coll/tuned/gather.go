package tuned

import (
	"github.com/gompi/gompi/datatype"
	"github.com/gompi/gompi/frameworks/coll"
	"github.com/gompi/gompi/frameworks/pml"
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
	tag := coll.Tag(a.Op, 0)
	next, prev := (me+1)%n, (me-1+n)%n
	for step := 0; step < n-1; step++ {
		rb := me - step - 1
		out := block(me - step)
		if step == 0 && !a.InPlace {
			// This rank's block goes out from Send: the peer reads the
			// program's buffer, not a copy just made (see
			// allgatherRecursiveDoubling); the copy is made at the end.
			out = a.Send
		}
		got, err := coll.Exchange(c, out, next, block(rb), prev, tag)
		if err != nil {
			return err
		}
		if err := coll.Exactly(c, got, len(block(rb)), prev); err != nil {
			return err
		}
	}
	if !a.InPlace {
		datatype.CopyCached(block(me), a.Send)
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
	if n == 1 && !a.InPlace {
		datatype.CopyCached(a.Recv, a.Send)
	}
	tag := coll.Tag(coll.Allgather, 2)
	for mask := 1; mask < n; mask <<= 1 {
		partner := me ^ mask
		mine := me &^ (mask - 1) // my group's first rank
		theirs := partner &^ (mask - 1)
		out := a.Recv[mine*bs : (mine+mask)*bs]
		if mask == 1 && !a.InPlace {
			// The first round sends this rank's block from Send, and
			// the copy into Recv comes after it: a peer that reads the
			// block itself (RDMA Get) then reads the program's buffer,
			// not lines this core has just written, which far cores
			// fetch one by one from its cache (2 ranks, 1 MiB, cores
			// apart: 250 µs against 148).
			out = a.Send
		}
		got, err := coll.Exchange(c, out, partner, a.Recv[theirs*bs:(theirs+mask)*bs], partner, tag)
		if mask == 1 && !a.InPlace {
			datatype.CopyCached(a.Recv[me*bs:], a.Send)
		}
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
// A leaf sends its own buffer; the root receives each child's subtree
// straight into its place in Recv when the subtree's ranks do not wrap
// past n-1 (always, with root 0): a copy of the data less at each end.
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
	if vr == 0 {
		return gatherRoot(c, a, bs, tag)
	}
	if sub == 1 || vr+1 == n {
		// A leaf: no child's blocks to put beside its own.
		return c.Send(a.Send, abs(vr-sub, a.Root, n), tag)
	}
	size := min(sub, n-vr)
	buf := a.Scratch.Get(size * bs)
	defer a.Scratch.Put(buf)
	datatype.CopyCached(buf, a.Send)
	for mask := 1; mask < sub && vr+mask < n; mask <<= 1 {
		child := vr + mask
		cnt := min(mask, n-child)
		if err := coll.RecvExactly(c, buf[mask*bs:(mask+cnt)*bs], abs(child, a.Root, n), tag); err != nil {
			return err
		}
	}
	return c.Send(buf, abs(vr-sub, a.Root, n), tag)
}

// gatherRoot is gatherBinomial at the root: its own block into place,
// then each child's subtree, relative ranks [mask, mask+cnt), received
// into Recv where they lie in order there and through scratch where they
// wrap from rank n-1 to rank 0.
func gatherRoot(c coll.Comm, a *coll.Args, bs, tag int) error {
	me, n := c.Rank(), c.Size()
	if !a.InPlace {
		datatype.CopyCached(a.Recv[me*bs:(me+1)*bs], a.Send)
	}
	for mask := 1; mask < n; mask <<= 1 {
		cnt := min(mask, n-mask)
		first := abs(mask, me, n) // the child, first rank of its subtree
		if first+cnt <= n {
			if err := coll.RecvExactly(c, a.Recv[first*bs:(first+cnt)*bs], first, tag); err != nil {
				return err
			}
			continue
		}
		tmp := a.Scratch.Get(cnt * bs)
		err := coll.RecvExactly(c, tmp, first, tag)
		if err == nil {
			head := (n - first) * bs // ranks first..n-1, then 0..
			datatype.CopyCached(a.Recv[first*bs:], tmp[:head])
			datatype.CopyCached(a.Recv, tmp[head:])
		}
		a.Scratch.Put(tmp)
		if err != nil {
			return err
		}
	}
	return nil
}

// scatterBinomial: down a binomial tree, each rank receiving its
// subtree's blocks and passing on its children's: ⌈log2 n⌉ rounds. The
// root sends each child's subtree straight from Send where its ranks lie
// in order there (always, with root 0), and a leaf receives straight into
// Recv: a copy of the data less at each end.
func scatterBinomial(c coll.Comm, a *coll.Args) error {
	me, n := c.Rank(), c.Size()
	vr := rel(me, a.Root, n)
	bs := gatherBlock(c, a, false)
	tag := coll.Tag(coll.Scatter, 1)
	sub := 1
	for sub < n && vr&sub == 0 {
		sub <<= 1
	}
	if vr == 0 {
		return scatterRoot(c, a, bs, tag)
	}
	parent := abs(vr-sub, a.Root, n)
	if sub == 1 || vr+1 == n {
		return coll.RecvExactly(c, a.Recv[:bs], parent, tag)
	}
	size := min(sub, n-vr)
	buf := a.Scratch.Get(size * bs)
	defer a.Scratch.Put(buf)
	if err := coll.RecvExactly(c, buf, parent, tag); err != nil {
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
		var err error
		if reqs, err = postSend(c, reqs, buf[mask*bs:(mask+cnt)*bs], abs(child, a.Root, n), tag); err != nil {
			return err
		}
	}
	if err := coll.WaitAll(c, reqs...); err != nil {
		return err
	}
	datatype.CopyCached(a.Recv, buf[:bs])
	return nil
}

// scatterRoot is scatterBinomial at the root: each child's subtree,
// relative ranks [mask, mask+cnt), the farthest first, sent from Send
// where they lie in order there and through scratch where they wrap from
// rank n-1 to rank 0; then its own block, unless in place.
func scatterRoot(c coll.Comm, a *coll.Args, bs, tag int) error {
	me, n := c.Rank(), c.Size()
	top := 1 << coll.CeilLog2(n)
	reqs := a.Requests()
	var wrapped []byte // at most one subtree wraps
	defer func() {
		a.PutRequests(reqs)
		if wrapped != nil {
			a.Scratch.Put(wrapped)
		}
	}()
	for mask := top >> 1; mask > 0; mask >>= 1 {
		if mask >= n {
			continue
		}
		cnt := min(mask, n-mask)
		first := abs(mask, me, n)
		part := a.Send[first*bs : min(first+cnt, n)*bs]
		if first+cnt > n {
			wrapped = a.Scratch.Get(cnt * bs)
			head := datatype.CopyCached(wrapped, part)
			datatype.CopyCached(wrapped[head:], a.Send[:(first+cnt-n)*bs])
			part = wrapped
		}
		var err error
		if reqs, err = postSend(c, reqs, part, first, tag); err != nil {
			return err
		}
	}
	if err := coll.WaitAll(c, reqs...); err != nil {
		return err
	}
	if !a.InPlace {
		datatype.CopyCached(a.Recv, a.Send[me*bs:(me+1)*bs])
	}
	return nil
}

// postSend starts a send of buf to dst and adds its request to reqs; if
// it cannot start, it waits for those started and returns the error.
func postSend(c coll.Comm, reqs []*pml.Request, buf []byte, dst, tag int) ([]*pml.Request, error) {
	q, err := c.Isend(buf, dst, tag)
	if err != nil {
		coll.WaitAll(c, reqs...)
		return reqs, err
	}
	return append(reqs, q), nil
}

// gatherLinear: every rank sends its block straight to the root, which
// receives them all at once, in place: one step, each block moved once.
// On a few ranks, and whenever ranks share cores, it beats the binomial
// tree, whose inner ranks forward their subtrees (4 ranks on 2 cores, 64
// KiB blocks: 21–23 µs against 27–38; 1 MiB 199–207 against 263–470).
func gatherLinear(c coll.Comm, a *coll.Args) error {
	me, n := c.Rank(), c.Size()
	tag := coll.Tag(coll.Gather, 2)
	if me != a.Root {
		return c.Send(a.Send, a.Root, tag)
	}
	bs := len(a.Recv) / n
	reqs := a.Requests()
	defer func() { a.PutRequests(reqs) }()
	for r := 0; r < n; r++ {
		if r == me {
			continue
		}
		q, err := c.Irecv(a.Recv[r*bs:(r+1)*bs], r, tag)
		if err != nil {
			coll.WaitAll(c, reqs...)
			return err
		}
		reqs = append(reqs, q)
	}
	if !a.InPlace {
		datatype.CopyCached(a.Recv[me*bs:(me+1)*bs], a.Send)
	}
	return coll.WaitBlocks(c, reqs, bs, me)
}

// scatterLinear: the root sends every rank its block at once, straight
// from Send: gatherLinear's mirror.
func scatterLinear(c coll.Comm, a *coll.Args) error {
	me, n := c.Rank(), c.Size()
	tag := coll.Tag(coll.Scatter, 2)
	if me != a.Root {
		return coll.RecvExactly(c, a.Recv, a.Root, tag)
	}
	bs := gatherBlock(c, a, false)
	reqs := a.Requests()
	defer func() { a.PutRequests(reqs) }()
	for r := 0; r < n; r++ {
		if r == me {
			continue
		}
		var err error
		if reqs, err = postSend(c, reqs, a.Send[r*bs:(r+1)*bs], r, tag); err != nil {
			return err
		}
	}
	if !a.InPlace {
		datatype.CopyCached(a.Recv, a.Send[me*bs:(me+1)*bs])
	}
	return coll.WaitAll(c, reqs...)
}
