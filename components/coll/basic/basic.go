// Package basic is the coll component that fills every slot with a simple,
// linear algorithm: the floor under the others, correct at any size and for
// any op, commutative or not, and the reference the faster ones are
// compared with. Its priority is the lowest, so any module that fills a
// slot takes it.
package basic

import (
	"github.com/gompi/gompi/datatype"
	"github.com/gompi/gompi/frameworks/coll"
	"github.com/gompi/gompi/frameworks/pml"
	"github.com/gompi/gompi/mca"
)

// Priority is basic's default priority (Open MPI's too).
const Priority = 10

// Component is the basic coll component.
type Component struct{}

// Info describes the component.
func (c *Component) Info() mca.Info {
	return mca.Info{Framework: "coll", Name: "basic", Version: mca.GompiVersion, API: coll.Framework.API, Priority: Priority}
}

// Register declares the component's parameters: only the priority every coll
// component gets.
func (c *Component) Register(r *mca.Registrar) {}

// Query accepts every communicator.
func (c *Component) Query(b *mca.Base, comm coll.Comm) (int, coll.Module, error) {
	return Priority, &Module, nil
}

// Module fills every slot; it keeps no state.
var Module = coll.Slots{
	coll.Barrier:            Barrier,
	coll.Bcast:              Bcast,
	coll.Reduce:             Reduce,
	coll.Allreduce:          Allreduce,
	coll.Gather:             Gather,
	coll.Gatherv:            Gather,
	coll.Scatter:            Scatter,
	coll.Scatterv:           Scatter,
	coll.Allgather:          Allgather,
	coll.Allgatherv:         Allgather,
	coll.Alltoall:           Alltoall,
	coll.Alltoallv:          Alltoall,
	coll.Scan:               Scan,
	coll.Exscan:             Exscan,
	coll.ReduceScatter:      ReduceScatter,
	coll.ReduceScatterBlock: ReduceScatter,
}

// Barrier: every rank reports to rank 0, which then releases them all.
func Barrier(c coll.Comm, a *coll.Args) error {
	n, me := c.Size(), c.Rank()
	tag := coll.Tag(coll.Barrier, 0)
	if me != 0 {
		if err := c.Send(nil, 0, tag); err != nil {
			return err
		}
		_, err := c.Recv(nil, 0, tag)
		return err
	}
	for r := 1; r < n; r++ {
		if _, err := c.Recv(nil, r, tag); err != nil {
			return err
		}
	}
	return sendAll(c, a, nil, tag)
}

// sendAll sends buf to every other rank at once.
func sendAll(c coll.Comm, a *coll.Args, buf []byte, tag int) error {
	return sendEach(c, a, tag, func(int) []byte { return buf })
}

// sendEach sends block(r) to every rank r but this one, all at once, and
// waits for the sends; the requests in a's room (coll.Args.Requests).
func sendEach(c coll.Comm, a *coll.Args, tag int, block func(r int) []byte) error {
	reqs := a.Requests()
	defer func() { a.PutRequests(reqs) }()
	for r := 0; r < c.Size(); r++ {
		if r == c.Rank() {
			continue
		}
		q, err := c.Isend(block(r), r, tag)
		if err != nil {
			coll.WaitAll(c, reqs...)
			return err
		}
		reqs = append(reqs, q)
	}
	return coll.WaitAll(c, reqs...)
}

// Bcast: the root sends to every other rank.
func Bcast(c coll.Comm, a *coll.Args) error {
	tag := coll.Tag(coll.Bcast, 0)
	if c.Rank() == a.Root {
		return sendAll(c, a, a.Recv, tag)
	}
	return coll.RecvExactly(c, a.Recv, a.Root, tag)
}

// Reduce: the root receives every contribution and folds them in rank
// order, from the last: acc = x(r) op acc.
func Reduce(c coll.Comm, a *coll.Args) error {
	n, me := c.Size(), c.Rank()
	tag := coll.Tag(coll.Reduce, 0)
	in := a.Input()
	if me != a.Root {
		return c.Send(in, a.Root, tag)
	}
	acc, tmp := a.Scratch.Get(len(in)), a.Scratch.Get(len(in))
	defer a.Scratch.Put(acc, tmp)
	for r := n - 1; r >= 0; r-- {
		src := in
		if r != me {
			if err := coll.RecvExactly(c, tmp, r, tag); err != nil {
				return err
			}
			src = tmp
		}
		if r == n-1 {
			datatype.CopyCached(acc, src)
		} else {
			a.Reducer.Apply(src, acc)
		}
	}
	datatype.CopyCached(a.Recv, acc)
	return nil
}

// Allreduce: Reduce to rank 0, then Bcast.
func Allreduce(c coll.Comm, a *coll.Args) error {
	r := *a
	r.Root = 0
	if c.Rank() == 0 && !a.InPlace {
		datatype.CopyCached(a.Recv, a.Send)
		r.Send, r.InPlace = nil, true
	}
	if err := Reduce(c, &r); err != nil {
		return err
	}
	return Bcast(c, &coll.Args{Op: coll.Bcast, Recv: a.Recv, Root: 0})
}

// gatherBlock is the block size of gather and allgather.
func gatherBlock(c coll.Comm, a *coll.Args) int {
	if a.InPlace {
		return len(a.Recv) / c.Size()
	}
	return len(a.Send)
}

// Gather (and Gatherv): the root receives every block in place.
func Gather(c coll.Comm, a *coll.Args) error {
	tag := coll.Tag(a.Op, 0)
	me := c.Rank()
	if me != a.Root {
		return c.Send(a.Send, a.Root, tag)
	}
	displs, counts := coll.Layout(c, a, gatherBlock(c, a))
	reqs := a.Requests()
	defer func() { a.PutRequests(reqs) }()
	for r := 0; r < c.Size(); r++ {
		dst := a.Recv[displs[r] : displs[r]+counts[r]]
		if r == me {
			if !a.InPlace {
				datatype.CopyCached(dst, a.Send)
			}
			continue
		}
		q, err := c.Irecv(dst, r, tag)
		if err != nil {
			coll.WaitAll(c, reqs...)
			return err
		}
		reqs = append(reqs, q)
	}
	return coll.WaitCounts(c, reqs, counts, me)
}

// Scatter (and Scatterv): the root sends every block.
func Scatter(c coll.Comm, a *coll.Args) error {
	tag := coll.Tag(a.Op, 0)
	me := c.Rank()
	if me != a.Root {
		return coll.RecvExactly(c, a.Recv, a.Root, tag)
	}
	block := len(a.Recv)
	if a.InPlace {
		block = len(a.Send) / c.Size()
	}
	displs, counts := coll.Layout(c, a, block)
	if !a.InPlace {
		datatype.CopyCached(a.Recv, a.Send[displs[me]:displs[me]+counts[me]])
	}
	return sendEach(c, a, tag, func(r int) []byte { return a.Send[displs[r] : displs[r]+counts[r]] })
}

// Allgather (and Allgatherv): every rank sends its block to every other.
func Allgather(c coll.Comm, a *coll.Args) error {
	tag := coll.Tag(a.Op, 0)
	me := c.Rank()
	displs, counts := coll.Layout(c, a, gatherBlock(c, a))
	mine := a.Recv[displs[me] : displs[me]+counts[me]]
	if !a.InPlace {
		datatype.CopyCached(mine, a.Send)
	}
	return exchangeAll(c, tag, func(r int) []byte { return mine }, a.Recv, displs, counts)
}

// exchangeAll sends block(r) to every other rank r and receives rank r's
// counts[r] bytes at displs[r] of recv, all at once, and waits for all:
// allgather's and alltoall's one round.
func exchangeAll(c coll.Comm, tag int, block func(r int) []byte, recv []byte, displs, counts []int) error {
	me, n := c.Rank(), c.Size()
	var recvs, sends []*pml.Request
	defer func() { coll.WaitAll(c, append(recvs, sends...)...) }()
	for r := 0; r < n; r++ {
		if r == me {
			continue
		}
		q, err := c.Irecv(recv[displs[r]:displs[r]+counts[r]], r, tag)
		if err != nil {
			return err
		}
		recvs = append(recvs, q)
	}
	for r := 0; r < n; r++ {
		if r == me {
			continue
		}
		q, err := c.Isend(block(r), r, tag)
		if err != nil {
			return err
		}
		sends = append(sends, q)
	}
	err := coll.WaitCounts(c, recvs, counts, me)
	recvs = nil
	return err
}

// Alltoall (and Alltoallv): every rank sends each other rank its block.
// In place, the input is copied first.
func Alltoall(c coll.Comm, a *coll.Args) error {
	tag := coll.Tag(a.Op, 0)
	me, n := c.Rank(), c.Size()
	send := a.Send
	sdispls, scounts := a.SendDispls, a.SendCounts
	rdispls, rcounts := a.Displs, a.Counts
	if a.InPlace {
		send = append([]byte(nil), a.Recv...)
		sdispls, scounts = rdispls, rcounts
	}
	if a.Counts == nil {
		block := len(send) / n
		sdispls, scounts = coll.Layout(c, &coll.Args{}, block)
		rdispls, rcounts = sdispls, scounts
	}
	datatype.CopyCached(a.Recv[rdispls[me]:rdispls[me]+rcounts[me]], send[sdispls[me]:sdispls[me]+scounts[me]])
	return exchangeAll(c, tag, func(r int) []byte { return send[sdispls[r] : sdispls[r]+scounts[r]] }, a.Recv, rdispls, rcounts)
}

// Scan: rank r receives the prefix of ranks 0..r-1 from r-1, combines its
// own on the right, keeps it and passes it on.
func Scan(c coll.Comm, a *coll.Args) error {
	me, n := c.Rank(), c.Size()
	tag := coll.Tag(coll.Scan, 0)
	if !a.InPlace {
		datatype.CopyCached(a.Recv, a.Send)
	}
	if me > 0 {
		prefix := a.Scratch.Get(len(a.Recv))
		defer a.Scratch.Put(prefix)
		if err := coll.RecvExactly(c, prefix, me-1, tag); err != nil {
			return err
		}
		a.Reducer.Apply(prefix, a.Recv)
	}
	if me < n-1 {
		return c.Send(a.Recv, me+1, tag)
	}
	return nil
}

// Exscan: as Scan, but each rank keeps the prefix before its own
// contribution; rank 0's result is undefined (left as is).
func Exscan(c coll.Comm, a *coll.Args) error {
	me, n := c.Rank(), c.Size()
	tag := coll.Tag(coll.Exscan, 0)
	mine := a.Scratch.Get(len(a.Input()))
	defer a.Scratch.Put(mine)
	datatype.CopyCached(mine, a.Input())
	if me > 0 {
		if err := coll.RecvExactly(c, a.Recv, me-1, tag); err != nil {
			return err
		}
	}
	if me == n-1 {
		return nil
	}
	if me > 0 {
		a.Reducer.Apply(a.Recv, mine) // prefix op mine
	}
	return c.Send(mine, me+1, tag)
}

// ReduceScatter (and ReduceScatterBlock): Reduce the whole vector to rank
// 0, then Scatter(v) the blocks.
func ReduceScatter(c coll.Comm, a *coll.Args) error {
	n, me := c.Size(), c.Rank()
	in := a.Input()
	counts := a.Counts
	if counts == nil {
		block := len(in) / n
		if !a.InPlace {
			block = len(a.Recv)
		}
		counts = make([]int, n)
		for i := range counts {
			counts[i] = block
		}
	}
	displs := make([]int, n)
	total := 0
	for i, k := range counts {
		displs[i] = total
		total += k
	}
	var whole []byte
	if me == 0 {
		whole = a.Scratch.Get(total)
		defer a.Scratch.Put(whole)
	}
	if err := Reduce(c, &coll.Args{Op: coll.Reduce, Send: in[:total], Recv: whole, Root: 0, Reducer: a.Reducer, Scratch: a.Scratch}); err != nil {
		return err
	}
	return Scatter(c, &coll.Args{Op: coll.Scatterv, Send: whole, Recv: a.Recv[:counts[me]], Root: 0, Counts: counts, Displs: displs})
}
