package tuned

import (
	"github.com/gompi/gompi/datatype"
	"github.com/gompi/gompi/frameworks/coll"
)

// alltoallLayout returns where each rank's block is sent from and
// received to: equal blocks, or the v variant's counts and displacements.
func alltoallLayout(c coll.Comm, a *coll.Args) (sd, sc, rd, rc []int, send []byte) {
	n := c.Size()
	send = a.Send
	if a.Counts != nil {
		rd, rc = a.Displs, a.Counts
		sd, sc = a.SendDispls, a.SendCounts
		if a.InPlace {
			send = append([]byte(nil), a.Recv...)
			sd, sc = rd, rc
		}
		return sd, sc, rd, rc, send
	}
	bs := len(a.Recv) / n
	if a.InPlace {
		send = append([]byte(nil), a.Recv...)
	}
	sd, sc = make([]int, n), make([]int, n)
	for i := range sd {
		sd[i], sc[i] = i*bs, bs
	}
	return sd, sc, sd, sc, send
}

// alltoallPairwise (and alltoallv): in step s every rank sends to rank+s
// and receives from rank-s, one pair at a time per rank: n-1 steps, no
// more than one message in flight each way.
func alltoallPairwise(c coll.Comm, a *coll.Args) error {
	me, n := c.Rank(), c.Size()
	sd, sc, rd, rc, send := alltoallLayout(c, a)
	datatype.CopyCached(a.Recv[rd[me]:rd[me]+rc[me]], send[sd[me]:sd[me]+sc[me]])
	tag := coll.Tag(a.Op, 1)
	for s := 1; s < n; s++ {
		dst, src := (me+s)%n, (me-s+n)%n
		got, err := coll.Exchange(c, send[sd[dst]:sd[dst]+sc[dst]], dst, a.Recv[rd[src]:rd[src]+rc[src]], src, tag)
		if err != nil {
			return err
		}
		if err := coll.Exactly(c, got, rc[src], src); err != nil {
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
