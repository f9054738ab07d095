package mpi

import "github.com/gompi/gompi/frameworks/coll"

// The nonblocking collectives (MPI-3) and the persistent ones (MPI-4).
//
// Each nonblocking form takes the blocking form's arguments, checks them
// as it does, starts the operation and returns its request, which Wait,
// Test, Waitall, Waitany, Testall and WaitContext complete like any other:
// the buffers belong to the collective until then (do not read or change
// them). Every rank starts the nonblocking collectives of a communicator
// in the same order, as with the blocking ones; several may be in flight
// at once, beside blocking collectives and point-to-point messages. They
// advance in every call into the instance and, unless mpi_async_progress
// says no, on a goroutine of the instance while the program computes.
//
// Each persistent form (AllreduceInit, …) checks and plans the operation
// once and returns an inactive request; Start (or Startall) runs it, Wait
// completes the run and leaves the request inactive for the next Start,
// on the same buffers, and Free releases it. Persistent collectives are
// started in the same order on every rank too.

// Ibarrier starts a barrier (MPI_Ibarrier): the request completes once
// every rank of c has started it.
func (c *Comm) Ibarrier() (*Request, error) {
	var a coll.Args
	return c.nonblockingCall(coll.Barrier, "Ibarrier", &a)
}

// Ibarrier is Comm.Ibarrier.
func Ibarrier(c *Comm) (*Request, error) { return c.Ibarrier() }

// BarrierInit plans a persistent barrier (MPI_Barrier_init).
func (c *Comm) BarrierInit() (*Request, error) {
	return c.persistent(coll.Barrier, "BarrierInit", c.newArgs())
}

// BarrierInit is Comm.BarrierInit.
func BarrierInit(c *Comm) (*Request, error) { return c.BarrierInit() }

// Ibcast starts Bcast (MPI_Ibcast) and returns its request.
func Ibcast[T Elem](c *Comm, buf []T, root int) (*Request, error) {
	var k rawCall
	setReduction(&k, nil, buf, nil, root)
	if req, err, ok := c.startRepeat(coll.Bcast, "Ibcast", &k); ok {
		return req, err
	}
	var a coll.Args
	if err := bcastCall(c, &a, "Ibcast", buf, root); err != nil {
		return nil, err
	}
	return c.nonblockingRaw(coll.Bcast, "Ibcast", &a, &k)
}

// BcastInit plans a persistent Bcast (MPI_Bcast_init) on these
// buffers; Start runs it.
func BcastInit[T Elem](c *Comm, buf []T, root int) (*Request, error) {
	a, err := bcastArgs(c, "BcastInit", buf, root)
	if err != nil {
		return nil, err
	}
	return c.persistent(coll.Bcast, "BcastInit", a)
}

// Ireduce starts Reduce (MPI_Ireduce) and returns its request.
func Ireduce[T Elem](c *Comm, send, recv []T, op *Op, root int) (*Request, error) {
	var k rawCall
	setReduction(&k, send, recv, op, root)
	if req, err, ok := c.startRepeat(coll.Reduce, "Ireduce", &k); ok {
		return req, err
	}
	var a coll.Args
	if err := reduceCall(c, &a, "Ireduce", send, recv, op, root); err != nil {
		return nil, err
	}
	return c.nonblockingRaw(coll.Reduce, "Ireduce", &a, &k)
}

// ReduceInit plans a persistent Reduce (MPI_Reduce_init) on these
// buffers; Start runs it.
func ReduceInit[T Elem](c *Comm, send, recv []T, op *Op, root int) (*Request, error) {
	a, err := reduceArgs(c, "ReduceInit", send, recv, op, root)
	if err != nil {
		return nil, err
	}
	return c.persistent(coll.Reduce, "ReduceInit", a)
}

// Iallreduce starts Allreduce (MPI_Iallreduce) and returns its request.
func Iallreduce[T Elem](c *Comm, send, recv []T, op *Op) (*Request, error) {
	var k rawCall
	setReduction(&k, send, recv, op, 0)
	if req, err, ok := c.startRepeat(coll.Allreduce, "Iallreduce", &k); ok {
		return req, err
	}
	var a coll.Args
	if err := reductionCall(c, &a, "Iallreduce", send, recv, op, true); err != nil {
		return nil, err
	}
	return c.nonblockingRaw(coll.Allreduce, "Iallreduce", &a, &k)
}

// AllreduceInit plans a persistent Allreduce (MPI_Allreduce_init) on these
// buffers; Start runs it.
func AllreduceInit[T Elem](c *Comm, send, recv []T, op *Op) (*Request, error) {
	a, err := reductionArgs(c, "AllreduceInit", send, recv, op, true)
	if err != nil {
		return nil, err
	}
	return c.persistent(coll.Allreduce, "AllreduceInit", a)
}

// Iscan starts Scan (MPI_Iscan) and returns its request.
func Iscan[T Elem](c *Comm, send, recv []T, op *Op) (*Request, error) {
	var k rawCall
	setReduction(&k, send, recv, op, 0)
	if req, err, ok := c.startRepeat(coll.Scan, "Iscan", &k); ok {
		return req, err
	}
	var a coll.Args
	if err := reductionCall(c, &a, "Iscan", send, recv, op, true); err != nil {
		return nil, err
	}
	return c.nonblockingRaw(coll.Scan, "Iscan", &a, &k)
}

// ScanInit plans a persistent Scan (MPI_Scan_init) on these
// buffers; Start runs it.
func ScanInit[T Elem](c *Comm, send, recv []T, op *Op) (*Request, error) {
	a, err := reductionArgs(c, "ScanInit", send, recv, op, true)
	if err != nil {
		return nil, err
	}
	return c.persistent(coll.Scan, "ScanInit", a)
}

// Iexscan starts Exscan (MPI_Iexscan) and returns its request.
func Iexscan[T Elem](c *Comm, send, recv []T, op *Op) (*Request, error) {
	var k rawCall
	setReduction(&k, send, recv, op, 0)
	if req, err, ok := c.startRepeat(coll.Exscan, "Iexscan", &k); ok {
		return req, err
	}
	var a coll.Args
	if err := reductionCall(c, &a, "Iexscan", send, recv, op, true); err != nil {
		return nil, err
	}
	return c.nonblockingRaw(coll.Exscan, "Iexscan", &a, &k)
}

// ExscanInit plans a persistent Exscan (MPI_Exscan_init) on these
// buffers; Start runs it.
func ExscanInit[T Elem](c *Comm, send, recv []T, op *Op) (*Request, error) {
	a, err := reductionArgs(c, "ExscanInit", send, recv, op, true)
	if err != nil {
		return nil, err
	}
	return c.persistent(coll.Exscan, "ExscanInit", a)
}

// IreduceScatterBlock starts ReduceScatterBlock (MPI_Ireduce_scatter_block) and returns its request.
func IreduceScatterBlock[T Elem](c *Comm, send, recv []T, op *Op) (*Request, error) {
	a, err := reduceScatterBlockArgs(c, "IreduceScatterBlock", send, recv, op)
	if err != nil {
		return nil, err
	}
	return c.nonblocking(coll.ReduceScatterBlock, "IreduceScatterBlock", a)
}

// ReduceScatterBlockInit plans a persistent ReduceScatterBlock (MPI_Reduce_scatter_block_init) on these
// buffers; Start runs it.
func ReduceScatterBlockInit[T Elem](c *Comm, send, recv []T, op *Op) (*Request, error) {
	a, err := reduceScatterBlockArgs(c, "ReduceScatterBlockInit", send, recv, op)
	if err != nil {
		return nil, err
	}
	return c.persistent(coll.ReduceScatterBlock, "ReduceScatterBlockInit", a)
}

// IreduceScatter starts ReduceScatter (MPI_Ireduce_scatter) and returns its request.
func IreduceScatter[T Elem](c *Comm, send, recv []T, counts []int, op *Op) (*Request, error) {
	a, err := reduceScatterArgs(c, "IreduceScatter", send, recv, counts, op)
	if err != nil {
		return nil, err
	}
	return c.nonblocking(coll.ReduceScatter, "IreduceScatter", a)
}

// ReduceScatterInit plans a persistent ReduceScatter (MPI_Reduce_scatter_init) on these
// buffers; Start runs it.
func ReduceScatterInit[T Elem](c *Comm, send, recv []T, counts []int, op *Op) (*Request, error) {
	a, err := reduceScatterArgs(c, "ReduceScatterInit", send, recv, counts, op)
	if err != nil {
		return nil, err
	}
	return c.persistent(coll.ReduceScatter, "ReduceScatterInit", a)
}

// Igather starts Gather (MPI_Igather) and returns its request.
func Igather[T Elem](c *Comm, send, recv []T, root int) (*Request, error) {
	a, err := gatherArgs(c, "Igather", send, recv, root)
	if err != nil {
		return nil, err
	}
	return c.nonblocking(coll.Gather, "Igather", a)
}

// GatherInit plans a persistent Gather (MPI_Gather_init) on these
// buffers; Start runs it.
func GatherInit[T Elem](c *Comm, send, recv []T, root int) (*Request, error) {
	a, err := gatherArgs(c, "GatherInit", send, recv, root)
	if err != nil {
		return nil, err
	}
	return c.persistent(coll.Gather, "GatherInit", a)
}

// Igatherv starts Gatherv (MPI_Igatherv) and returns its request.
func Igatherv[T Elem](c *Comm, send, recv []T, counts, displs []int, root int) (*Request, error) {
	a, err := gathervArgs(c, "Igatherv", send, recv, counts, displs, root)
	if err != nil {
		return nil, err
	}
	return c.nonblocking(coll.Gatherv, "Igatherv", a)
}

// GathervInit plans a persistent Gatherv (MPI_Gatherv_init) on these
// buffers; Start runs it.
func GathervInit[T Elem](c *Comm, send, recv []T, counts, displs []int, root int) (*Request, error) {
	a, err := gathervArgs(c, "GathervInit", send, recv, counts, displs, root)
	if err != nil {
		return nil, err
	}
	return c.persistent(coll.Gatherv, "GathervInit", a)
}

// Iscatter starts Scatter (MPI_Iscatter) and returns its request.
func Iscatter[T Elem](c *Comm, send, recv []T, root int) (*Request, error) {
	a, err := scatterArgs(c, "Iscatter", send, recv, root)
	if err != nil {
		return nil, err
	}
	return c.nonblocking(coll.Scatter, "Iscatter", a)
}

// ScatterInit plans a persistent Scatter (MPI_Scatter_init) on these
// buffers; Start runs it.
func ScatterInit[T Elem](c *Comm, send, recv []T, root int) (*Request, error) {
	a, err := scatterArgs(c, "ScatterInit", send, recv, root)
	if err != nil {
		return nil, err
	}
	return c.persistent(coll.Scatter, "ScatterInit", a)
}

// Iscatterv starts Scatterv (MPI_Iscatterv) and returns its request.
func Iscatterv[T Elem](c *Comm, send []T, counts, displs []int, recv []T, root int) (*Request, error) {
	a, err := scattervArgs(c, "Iscatterv", send, counts, displs, recv, root)
	if err != nil {
		return nil, err
	}
	return c.nonblocking(coll.Scatterv, "Iscatterv", a)
}

// ScattervInit plans a persistent Scatterv (MPI_Scatterv_init) on these
// buffers; Start runs it.
func ScattervInit[T Elem](c *Comm, send []T, counts, displs []int, recv []T, root int) (*Request, error) {
	a, err := scattervArgs(c, "ScattervInit", send, counts, displs, recv, root)
	if err != nil {
		return nil, err
	}
	return c.persistent(coll.Scatterv, "ScattervInit", a)
}

// Iallgather starts Allgather (MPI_Iallgather) and returns its request.
func Iallgather[T Elem](c *Comm, send, recv []T) (*Request, error) {
	a, err := allgatherArgs(c, "Iallgather", send, recv)
	if err != nil {
		return nil, err
	}
	return c.nonblocking(coll.Allgather, "Iallgather", a)
}

// AllgatherInit plans a persistent Allgather (MPI_Allgather_init) on these
// buffers; Start runs it.
func AllgatherInit[T Elem](c *Comm, send, recv []T) (*Request, error) {
	a, err := allgatherArgs(c, "AllgatherInit", send, recv)
	if err != nil {
		return nil, err
	}
	return c.persistent(coll.Allgather, "AllgatherInit", a)
}

// Iallgatherv starts Allgatherv (MPI_Iallgatherv) and returns its request.
func Iallgatherv[T Elem](c *Comm, send, recv []T, counts, displs []int) (*Request, error) {
	a, err := allgathervArgs(c, "Iallgatherv", send, recv, counts, displs)
	if err != nil {
		return nil, err
	}
	return c.nonblocking(coll.Allgatherv, "Iallgatherv", a)
}

// AllgathervInit plans a persistent Allgatherv (MPI_Allgatherv_init) on these
// buffers; Start runs it.
func AllgathervInit[T Elem](c *Comm, send, recv []T, counts, displs []int) (*Request, error) {
	a, err := allgathervArgs(c, "AllgathervInit", send, recv, counts, displs)
	if err != nil {
		return nil, err
	}
	return c.persistent(coll.Allgatherv, "AllgathervInit", a)
}

// Ialltoall starts Alltoall (MPI_Ialltoall) and returns its request.
func Ialltoall[T Elem](c *Comm, send, recv []T) (*Request, error) {
	a, err := alltoallArgs(c, "Ialltoall", send, recv)
	if err != nil {
		return nil, err
	}
	return c.nonblocking(coll.Alltoall, "Ialltoall", a)
}

// AlltoallInit plans a persistent Alltoall (MPI_Alltoall_init) on these
// buffers; Start runs it.
func AlltoallInit[T Elem](c *Comm, send, recv []T) (*Request, error) {
	a, err := alltoallArgs(c, "AlltoallInit", send, recv)
	if err != nil {
		return nil, err
	}
	return c.persistent(coll.Alltoall, "AlltoallInit", a)
}

// Ialltoallv starts Alltoallv (MPI_Ialltoallv) and returns its request.
func Ialltoallv[T Elem](c *Comm, send []T, sendCounts, sendDispls []int, recv []T, recvCounts, recvDispls []int) (*Request, error) {
	a, err := alltoallvArgs(c, "Ialltoallv", send, sendCounts, sendDispls, recv, recvCounts, recvDispls)
	if err != nil {
		return nil, err
	}
	return c.nonblocking(coll.Alltoallv, "Ialltoallv", a)
}

// AlltoallvInit plans a persistent Alltoallv (MPI_Alltoallv_init) on these
// buffers; Start runs it.
func AlltoallvInit[T Elem](c *Comm, send []T, sendCounts, sendDispls []int, recv []T, recvCounts, recvDispls []int) (*Request, error) {
	a, err := alltoallvArgs(c, "AlltoallvInit", send, sendCounts, sendDispls, recv, recvCounts, recvDispls)
	if err != nil {
		return nil, err
	}
	return c.persistent(coll.Alltoallv, "AlltoallvInit", a)
}
