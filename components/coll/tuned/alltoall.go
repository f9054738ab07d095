package tuned

import (
	"github.com/gompi/gompi/datatype"
	"github.com/gompi/gompi/frameworks/coll"
)

// alltoallBlocks is where each rank's block is sent from and received
// to: equal blocks of bs bytes, or the v variant's counts and
// displacements. Equal blocks need no slices, so the common call
// allocates nothing.
type alltoallBlocks struct {
	sd, sc, rd, rc []int // nil for equal blocks
	bs             int
	send           []byte
}

func (b *alltoallBlocks) sendBlock(i int) []byte {
	if b.sd == nil {
		return b.send[i*b.bs : (i+1)*b.bs]
	}
	return b.send[b.sd[i] : b.sd[i]+b.sc[i]]
}

func (b *alltoallBlocks) recvBlock(recv []byte, i int) []byte {
	if b.rd == nil {
		return recv[i*b.bs : (i+1)*b.bs]
	}
	return recv[b.rd[i] : b.rd[i]+b.rc[i]]
}

// alltoallPairwise (and alltoallv): in step s every rank sends to rank+s
// and receives from rank-s, one pair at a time per rank: n-1 steps, no
// more than one message in flight each way.
func alltoallPairwise(c coll.Comm, a *coll.Args) error {
	me, n := c.Rank(), c.Size()
	b := alltoallBlocks{send: a.Send}
	if a.Counts != nil {
		b.rd, b.rc, b.sd, b.sc = a.Displs, a.Counts, a.SendDispls, a.SendCounts
		if a.InPlace {
			b.sd, b.sc = b.rd, b.rc
		}
	} else {
		b.bs = len(a.Recv) / n
	}
	if a.InPlace {
		// Blocks still to send are overwritten by those received: send
		// from a copy.
		b.send = a.Scratch.Get(len(a.Recv))
		defer a.Scratch.Put(b.send)
		datatype.CopyCached(b.send, a.Recv)
	}
	datatype.CopyCached(b.recvBlock(a.Recv, me), b.sendBlock(me))
	tag := coll.Tag(a.Op, 1)
	for s := 1; s < n; s++ {
		dst, src := (me+s)%n, (me-s+n)%n
		in := b.recvBlock(a.Recv, src)
		got, err := coll.Exchange(c, b.sendBlock(dst), dst, in, src, tag)
		if err != nil {
			return err
		}
		if err := coll.Exactly(c, got, len(in), src); err != nil {
			return err
		}
	}
	return nil
}

// alltoallBruck: rotate the blocks so that block i is for rank me+i; in
// round k send every block whose index has bit k set to rank me+2^k (in
// one message) and take as many from rank me-2^k in their place; a last
// rotation puts the received blocks in rank order. ⌈log2 n⌉ rounds of
// about n/2 blocks: for small blocks, where a message's cost is its
// latency.
func alltoallBruck(c coll.Comm, a *coll.Args) error {
	me, n := c.Rank(), c.Size()
	bs := len(a.Recv) / n
	send := a.Send
	if a.InPlace {
		send = a.Recv
	}
	tmp, pack, in := a.Scratch.Get(n*bs), a.Scratch.Get(n*bs), a.Scratch.Get(n*bs)
	defer a.Scratch.Put(tmp, pack, in)
	for i := 0; i < n; i++ {
		datatype.CopyCached(tmp[i*bs:], send[((me+i)%n)*bs:((me+i)%n+1)*bs])
	}
	tag := coll.Tag(coll.Alltoall, 2)
	for k := 1; k < n; k <<= 1 {
		cnt := 0
		for i := 0; i < n; i++ {
			if i&k != 0 {
				datatype.CopyCached(pack[cnt*bs:], tmp[i*bs:(i+1)*bs])
				cnt++
			}
		}
		got, err := coll.Exchange(c, pack[:cnt*bs], (me+k)%n, in[:cnt*bs], (me-k+n)%n, tag)
		if err != nil {
			return err
		}
		if err := coll.Exactly(c, got, cnt*bs, (me-k+n)%n); err != nil {
			return err
		}
		cnt = 0
		for i := 0; i < n; i++ {
			if i&k != 0 {
				datatype.CopyCached(tmp[i*bs:(i+1)*bs], in[cnt*bs:])
				cnt++
			}
		}
	}
	for i := 0; i < n; i++ { // block from rank i is tmp[(me-i) mod n]
		datatype.CopyCached(a.Recv[i*bs:(i+1)*bs], tmp[((me-i+n)%n)*bs:])
	}
	return nil
}

// scanRecursiveDoubling (scan and exscan): in round k partners 2^k apart
// swap the combination of everything each has seen; the lower one's comes
// first, so any op keeps rank order. The prefix takes only what came from
// lower ranks: ⌈log2 n⌉ rounds.
func scanRecursiveDoubling(c coll.Comm, a *coll.Args) error {
	me, n := c.Rank(), c.Size()
	exclusive := a.Op == coll.Exscan
	in := a.Input()
	partial := a.Scratch.Get(len(in))
	defer a.Scratch.Put(partial)
	datatype.CopyCached(partial, in)
	result := a.Recv
	have := !exclusive // the prefix so far: my input for scan, nothing yet for exscan
	if !exclusive && !a.InPlace {
		datatype.CopyCached(result, in)
	}
	tmp, scratch := a.Scratch.Get(len(in)), a.Scratch.Get(len(in))
	defer a.Scratch.Put(tmp, scratch)
	tag := coll.Tag(a.Op, 1)
	for mask := 1; mask < n; mask <<= 1 {
		partner := me ^ mask
		if partner >= n {
			continue
		}
		got, err := coll.Exchange(c, partial, partner, tmp, partner, tag)
		if err != nil {
			return err
		}
		if err := coll.Exactly(c, got, len(tmp), partner); err != nil {
			return err
		}
		if partner < me {
			coll.Combine(a, tmp, partial, scratch, true)
			if have {
				coll.Combine(a, tmp, result, scratch, true)
			} else {
				datatype.CopyCached(result, tmp)
				have = true
			}
		} else {
			coll.Combine(a, tmp, partial, scratch, false)
		}
	}
	return nil
}
