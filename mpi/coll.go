package mpi

import (
	"fmt"
	"reflect"
	"sync"
	"unsafe"

	"github.com/gompi/gompi/datatype"
	"github.com/gompi/gompi/frameworks/coll"
	"github.com/gompi/gompi/frameworks/pml"
	"github.com/gompi/gompi/mpierr"
	"github.com/gompi/gompi/rte"
)

// Op is a reduction operation: one of the predefined ops below, or a user
// function made with NewOp.
type Op = datatype.Op

// Pair is a value with its index, the element of MinLoc and MaxLoc
// (MPI_DOUBLE_INT and friends).
type Pair[V datatype.Real, I datatype.Integer] = datatype.Pair[V, I]

// The predefined reduction ops (MPI_SUM …). Sum and Prod take numbers;
// Min and Max integers and floats; LAnd, LOr, LXor integers and bool; BAnd,
// BOr, BXor integers; MinLoc and MaxLoc Pairs. Any other use is an ErrOp
// error.
var (
	Sum    = datatype.Sum
	Prod   = datatype.Prod
	Min    = datatype.Min
	Max    = datatype.Max
	LAnd   = datatype.LAnd
	LOr    = datatype.LOr
	LXor   = datatype.LXor
	BAnd   = datatype.BAnd
	BOr    = datatype.BOr
	BXor   = datatype.BXor
	MinLoc = datatype.MinLoc
	MaxLoc = datatype.MaxLoc
)

// NewOp makes a reduction op from a function over elements of T
// (MPI_Op_create): f sets inout[i] = in[i] op inout[i], in holding the
// contributions of lower ranks. With commutative false, the algorithms
// keep rank order: the result is x0 op x1 op … op x(n-1).
func NewOp[T Elem](name string, f func(in, inout []T), commutative bool) *Op {
	return datatype.NewOp(name, f, commutative)
}

// Collectives
//
// Every rank of the communicator calls a collective, in the same order, with
// matching arguments. Arguments a rank can check alone are checked before
// any message leaves: a bad root is ErrRoot, an op that does not apply to
// the element type ErrOp, buffers of the wrong length ErrCount, buffers
// that overlap other than in the in-place form ErrBuffer. A mismatch between
// ranks (one sends more than another expects) is an error on the rank that
// sees it (ErrCount or ErrTruncate).
//
// In-place forms (MPI_IN_PLACE) pass the same memory for input and output,
// as described on each function. An empty slice has no address to tell it
// by (nil, make([]T, 0) and an empty reslice may point anywhere, or at one
// shared place), so a rank that passes an empty send and an empty receive
// buffer makes the in-place form, whichever empty slices they are: it moves
// nothing of its own either way, and the arguments the in-place form
// ignores (Alltoallv's send counts and displacements) are ignored. A rank
// whose own block is empty in a non-empty buffer (a zero count of Gatherv,
// Allgatherv, Scatterv or ReduceScatter) sends and keeps nothing, in place
// or not.

// collTables are the collective tables of an instance's communicators that
// are not freed: Finalize finalizes them, so that what their modules hold (coll
// sm's shared segments) goes with the instance, not with the process.
type collTables struct {
	mu sync.Mutex
	m  map[*coll.Table]struct{}
}

func (s *collTables) keep(t *coll.Table) {
	s.mu.Lock()
	if s.m == nil {
		s.m = map[*coll.Table]struct{}{}
	}
	s.m[t] = struct{}{}
	s.mu.Unlock()
}

func (s *collTables) drop(t *coll.Table) {
	s.mu.Lock()
	delete(s.m, t)
	s.mu.Unlock()
}

// finalizeAll finalizes every table kept, at Finalize.
func (s *collTables) finalizeAll() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var first error
	for t := range s.m {
		if err := t.Finalize(); err != nil && first == nil {
			first = err
		}
	}
	s.m = nil
	return first
}

// collComm is a communicator as coll algorithms see it: its point-to-point
// in the collectives' own tags, which the checks of the user's calls refuse
// and AnyTag never matches.
type collComm struct{ c *Comm }

func (x collComm) Rank() int    { return x.c.pc.Rank }
func (x collComm) Size() int    { return x.c.pc.Size }
func (x collComm) Name() string { return x.c.name }
func (x collComm) LLP() bool    { return x.c.inst.pml.LLPReaches(&x.c.pc) }

func (x collComm) Send(buf []byte, dst, tag int) error {
	return x.c.inst.pml.Send(&x.c.pc, buf, dst, tag, pml.Standard)
}

func (x collComm) Recv(buf []byte, src, tag int) (st pml.Status, err error) {
	env, err := x.c.inst.pml.Recv(&x.c.pc, buf, src, tag)
	// Field by field, as Comm.Recv does (see pml.Envelope).
	st.Source, st.Tag, st.Count, st.Err = env.Source, env.Tag, env.Count, err
	return st, err
}

func (x collComm) Sendrecv(sbuf []byte, dst, stag int, rbuf []byte, src, rtag int) (pml.Status, error) {
	return pml.PostedSendrecv(x, sbuf, dst, stag, rbuf, src, rtag)
}

func (x collComm) Isend(buf []byte, dst, tag int) (*pml.Request, error) {
	return x.c.inst.pml.Isend(&x.c.pc, buf, dst, tag, pml.Standard)
}

func (x collComm) Irecv(buf []byte, src, tag int) (*pml.Request, error) {
	return x.c.inst.pml.Irecv(&x.c.pc, buf, src, tag)
}

// The coll.Node methods, for components that work through shared memory
// (they check themselves that every rank is on this node).

var _ coll.Node = collComm{}

func (x collComm) Runtime() *rte.Runtime { return x.c.inst.rt }

func (x collComm) WorldRank(r int) int { return x.c.pc.Group.World(r) }

// Until also ends when the communicator's collectives fail (a member died,
// or it was revoked): shared memory shows no death, and a survivor must not
// wait for ever on a sequence number that will not move.
func (x collComm) Until(cond func() bool) error {
	c := x.c
	if err := c.inst.pml.Engine().Until(nil, func() bool { return cond() || c.ft.state.Load() != 0 }); err != nil {
		return err
	}
	if !cond() {
		return c.brokenCause()
	}
	return nil
}

// Broken returns the error the communicator's collectives fail with (a
// member died, or it was revoked), or nil.
func (x collComm) Broken() error { return x.c.brokenCause() }

// CollTable says which component fills each collective slot of c, as
// "barrier=tuned bcast=tuned …" (coll_base_verbose 10 logs the same).
func (c *Comm) CollTable() string {
	if c == nil || c.coll == nil {
		return ""
	}
	return c.coll.String()
}

// newArgs returns empty arguments from the communicator's pool, for the
// caller to fill: a collective's arguments are large enough that
// allocating them cost an 8-byte Allreduce a tenth of its time, and filling
// them field by field spares copying all of them (336 bytes) twice, which
// cost a 2-rank alltoall a tenth of its time. Whoever puts arguments back
// empties them first (Reuse with none), as collective does.
func (c *Comm) newArgs() *coll.Args {
	if a, _ := c.argPool.Get().(*coll.Args); a != nil {
		return a
	}
	return new(coll.Args)
}

// argsOwning is newArgs holding a copy of v that outlives v: a run's
// arguments, made from a call's, which go back to the pool at once
// (coll.Args.Own).
func (c *Comm) argsOwning(v *coll.Args) *coll.Args {
	a := c.newArgs()
	a.Own(v)
	return a
}

// collective runs op after the common checks.
func (c *Comm) collective(op coll.Op, name string, a *coll.Args) error {
	if err := c.check(name); err != nil {
		return err
	}
	if err := c.broken(name); err != nil {
		return err
	}
	var cc coll.Comm = collComm{c}
	if c.local != nil {
		cc = interColl{collComm{c}}
	}
	err := c.coll.Call(op, cc, a)
	a.Clear() // drop the user's buffers before reuse
	c.argPool.Put(a)
	if err != nil {
		return fmt.Errorf("mpi: %s on %s: %w", name, c.name, err)
	}
	return nil
}

func (c *Comm) checkRoot(name string, root int) error {
	if err := c.check(name); err != nil {
		return err
	}
	if c.IsInter() {
		if root != Root && root != ProcNull && (root < 0 || root >= c.pc.Size) {
			return mpierr.Errorf(mpierr.ErrRoot, "mpi: %s on %s: root %d: accepted on an intercommunicator: Root, ProcNull, or 0 to %d",
				name, c.name, root, c.pc.Size-1)
		}
		return nil
	}
	if root < 0 || root >= c.pc.Size {
		return mpierr.Errorf(mpierr.ErrRoot, "mpi: %s on %s: root %d: accepted: 0 to %d", name, c.name, root, c.pc.Size-1)
	}
	return nil
}

func reducer[T Elem](c *Comm, name string, op *Op) (datatype.Reducer, error) {
	if err := c.check(name); err != nil {
		return datatype.Reducer{}, err
	}
	// Binding an op to a type builds closures: once per instance, op and
	// type, not per call (an 8-byte Allreduce spent a fifth of its time
	// there).
	key := reducerKey{op, reflect.TypeFor[T]()}
	if e := c.inst.lastReducer.Load(); e != nil && e.key == key {
		return e.r, nil
	}
	cache := &c.inst.reducers
	if r, ok := cache.Load(key); ok {
		c.inst.lastReducer.Store(&reducerEntry{key, r.(datatype.Reducer)})
		return r.(datatype.Reducer), nil
	}
	r, err := datatype.ReducerFor[T](op)
	if err != nil {
		return r, fmt.Errorf("mpi: %s on %s: %w", name, c.name, err)
	}
	cache.Store(key, r)
	c.inst.lastReducer.Store(&reducerEntry{key, r})
	return r, nil
}

// reducerKey names a bound reducer in an instance's cache.
type reducerKey struct {
	op *Op
	t  reflect.Type
}

// reducerEntry is a cached binding.
type reducerEntry struct {
	key reducerKey
	r   datatype.Reducer
}

// addr is where a non-empty slice starts.
func addr(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }

// overlap reports whether two slices share memory.
func overlap(a, b []byte) bool {
	if len(a) == 0 || len(b) == 0 {
		return false
	}
	return addr(a) < addr(b)+uintptr(len(b)) && addr(b) < addr(a)+uintptr(len(a))
}

// inPlace says whether send is the in-place form: it starts where the rank's
// part of recv (recv[at:]) starts, or both are empty (see Collectives).
// Other overlaps are ErrBuffer errors.
func (c *Comm) inPlace(name string, send, recv []byte, at int) (bool, error) {
	if len(send) == 0 && len(recv) == 0 {
		return true, nil
	}
	if len(send) > 0 && at >= 0 && at < len(recv) && addr(send) == addr(recv[at:]) {
		return true, nil
	}
	if overlap(send, recv) {
		return false, mpierr.Errorf(mpierr.ErrBuffer, "mpi: %s on %s: the send and receive buffers overlap; "+
			"the in-place form passes the receive buffer's own part (see the function's documentation) as the send buffer", name, c.name)
	}
	return false, nil
}

func countErr(c *Comm, name, format string, a ...any) error {
	return mpierr.Errorf(mpierr.ErrCount, "mpi: %s on %s: %s", name, c.name, fmt.Sprintf(format, a...))
}

// bytesOf converts per-rank element counts and displacements to bytes, in
// a's rooms room and room+1 (coll.Args.Ints), checking that there is one
// of each per rank, that counts are not negative, and that every block
// lies within a buffer of n bytes.
func bytesOf(c *Comm, a *coll.Args, room int, name, what string, counts, displs []int, size, n int) ([]int, []int, error) {
	p := c.pc.Size
	if len(counts) != p || len(displs) != p {
		return nil, nil, countErr(c, name, "%d %s counts and %d displacements: want one of each per rank (%d)", len(counts), what, len(displs), p)
	}
	bc, bd := a.Ints(room, p), a.Ints(room+1, p)
	for i := range counts {
		if counts[i] < 0 || displs[i] < 0 {
			return nil, nil, countErr(c, name, "%s count %d and displacement %d of rank %d: accepted: 0 or more", what, counts[i], displs[i], i)
		}
		bc[i], bd[i] = counts[i]*size, displs[i]*size
		if bd[i]+bc[i] > n {
			return nil, nil, countErr(c, name, "%s block of rank %d (%d elements at %d) ends past the buffer of %d elements",
				what, i, counts[i], displs[i], n/size)
		}
	}
	return bc, bd, nil
}

// Barrier waits until every rank of c has called it (MPI_Barrier).
func (c *Comm) Barrier() error {
	return c.collective(coll.Barrier, "Barrier", c.newArgs())
}

// Barrier waits until every rank of c has called it (Comm.Barrier).
func Barrier(c *Comm) error { return c.Barrier() }

// Bcast sends the root's buf to every rank's buf (MPI_Bcast); every rank
// passes the same length.
func Bcast[T Elem](c *Comm, buf []T, root int) error {
	a, err := bcastArgs(c, "Bcast", buf, root)
	if err != nil {
		return err
	}
	return c.collective(coll.Bcast, "Bcast", a)
}

func bcastArgs[T Elem](c *Comm, name string, buf []T, root int) (*coll.Args, error) {
	a := c.newArgs()
	if err := bcastCall(c, a, name, buf, root); err != nil {
		return nil, err
	}
	return a, nil
}

// bcastCall is bcastArgs's check, setting a's fields (reductionCall).
func bcastCall[T Elem](c *Comm, a *coll.Args, name string, buf []T, root int) error {
	if err := c.checkRoot(name, root); err != nil {
		return err
	}
	a.Recv, a.Root = datatype.Bytes(buf), root
	return nil
}

// reductionArgs checks the buffers of an element-wise reduction and builds
// its arguments; recvNeeded says whether this rank's recv matters.
func reductionArgs[T Elem](c *Comm, name string, send, recv []T, op *Op, recvNeeded bool) (*coll.Args, error) {
	a := c.newArgs()
	if err := reductionCall(c, a, name, send, recv, op, recvNeeded); err != nil {
		return nil, err
	}
	return a, nil
}

// reductionCall is reductionArgs's checks, setting a's fields: a
// nonblocking call fills arguments of its own on the stack, so that a call
// that repeats the last one (Comm.reuse) takes none from the pool.
func reductionCall[T Elem](c *Comm, a *coll.Args, name string, send, recv []T, op *Op, recvNeeded bool) error {
	r, err := reducer[T](c, name, op)
	if err != nil {
		return err
	}
	s, d := datatype.Bytes(send), datatype.Bytes(recv)
	a.Send, a.Reducer = s, r
	if !recvNeeded {
		return nil
	}
	ip, err := c.inPlace(name, s, d, 0)
	if err != nil {
		return err
	}
	if len(recv) != len(send) {
		return countErr(c, name, "%d elements to send, %d to receive: want as many", len(send), len(recv))
	}
	a.Recv = d
	if ip {
		a.Send, a.InPlace = nil, true
	}
	return nil
}

// Reduce combines every rank's send with op, element by element, into the
// root's recv (MPI_Reduce). Only the root's recv matters (others may pass
// nil). In place: the root passes the same slice as send and recv.
func Reduce[T Elem](c *Comm, send, recv []T, op *Op, root int) error {
	a, err := reduceArgs(c, "Reduce", send, recv, op, root)
	if err != nil {
		return err
	}
	return c.collective(coll.Reduce, "Reduce", a)
}

func reduceArgs[T Elem](c *Comm, name string, send, recv []T, op *Op, root int) (*coll.Args, error) {
	a := c.newArgs()
	if err := reduceCall(c, a, name, send, recv, op, root); err != nil {
		return nil, err
	}
	return a, nil
}

func reduceCall[T Elem](c *Comm, a *coll.Args, name string, send, recv []T, op *Op, root int) error {
	if err := c.checkRoot(name, root); err != nil {
		return err
	}
	a.Root = root
	return reductionCall(c, a, name, send, recv, op, c.pc.Rank == root)
}

// Allreduce combines every rank's send with op into every rank's recv
// (MPI_Allreduce). In place: the same slice as send and recv.
func Allreduce[T Elem](c *Comm, send, recv []T, op *Op) error {
	a, err := reductionArgs(c, "Allreduce", send, recv, op, true)
	if err != nil {
		return err
	}
	return c.collective(coll.Allreduce, "Allreduce", a)
}

// Scan gives rank i the combination of the sends of ranks 0..i
// (MPI_Scan). In place: the same slice as send and recv.
func Scan[T Elem](c *Comm, send, recv []T, op *Op) error {
	a, err := reductionArgs(c, "Scan", send, recv, op, true)
	if err != nil {
		return err
	}
	return c.collective(coll.Scan, "Scan", a)
}

// Exscan gives rank i the combination of the sends of ranks 0..i-1
// (MPI_Exscan); rank 0's recv is left as it was. In place: the same slice
// as send and recv.
func Exscan[T Elem](c *Comm, send, recv []T, op *Op) error {
	a, err := reductionArgs(c, "Exscan", send, recv, op, true)
	if err != nil {
		return err
	}
	return c.collective(coll.Exscan, "Exscan", a)
}

// ReduceScatterBlock combines every rank's send, which holds Size() blocks
// of len(recv) elements, and gives rank i block i of the result
// (MPI_Reduce_scatter_block). In place: recv is send's first block
// (send[:block]); send holds the input and recv receives the result.
func ReduceScatterBlock[T Elem](c *Comm, send, recv []T, op *Op) error {
	a, err := reduceScatterBlockArgs(c, "ReduceScatterBlock", send, recv, op)
	if err != nil {
		return err
	}
	return c.collective(coll.ReduceScatterBlock, "ReduceScatterBlock", a)
}

func reduceScatterBlockArgs[T Elem](c *Comm, name string, send, recv []T, op *Op) (*coll.Args, error) {
	r, err := reducer[T](c, name, op)
	if err != nil {
		return nil, err
	}
	if len(send) != len(recv)*c.pc.Size {
		return nil, countErr(c, name, "%d elements to send for blocks of %d on %d ranks: want %d", len(send), len(recv), c.pc.Size, len(recv)*c.pc.Size)
	}
	s, d := datatype.Bytes(send), datatype.Bytes(recv)
	ip, err := c.inPlace(name, d, s, 0)
	if err != nil {
		return nil, err
	}
	a := c.newArgs()
	a.Send, a.Recv, a.Reducer = s, d, r
	if ip {
		a.Send, a.Recv, a.InPlace = nil, s, true
	}
	return a, nil
}

// ReduceScatter combines every rank's send, which holds sum(counts)
// elements, and gives rank i the counts[i] elements of the result that
// follow those of ranks before it (MPI_Reduce_scatter); len(recv) is
// counts[Rank()]. In place: recv is send's start (send[:counts[Rank()]]).
func ReduceScatter[T Elem](c *Comm, send, recv []T, counts []int, op *Op) error {
	a, err := reduceScatterArgs(c, "ReduceScatter", send, recv, counts, op)
	if err != nil {
		return err
	}
	return c.collective(coll.ReduceScatter, "ReduceScatter", a)
}

func reduceScatterArgs[T Elem](c *Comm, name string, send, recv []T, counts []int, op *Op) (*coll.Args, error) {
	r, err := reducer[T](c, name, op)
	if err != nil {
		return nil, err
	}
	if len(counts) != c.pc.Size {
		return nil, countErr(c, name, "%d counts: want one per rank (%d)", len(counts), c.pc.Size)
	}
	// The byte counts in the pooled arguments' room, taken before the
	// checks: an error leaves the arguments to the collector.
	a := c.newArgs()
	a.Reducer = r
	total := 0
	bc := a.Ints(0, len(counts))
	for i, k := range counts {
		if k < 0 {
			return nil, countErr(c, name, "count %d of rank %d: accepted: 0 or more", k, i)
		}
		total += k
		bc[i] = k * r.Size
	}
	if len(send) != total || len(recv) != counts[c.pc.Rank] {
		return nil, countErr(c, name, "%d elements to send and %d to receive: want sum(counts) = %d and counts[%d] = %d",
			len(send), len(recv), total, c.pc.Rank, counts[c.pc.Rank])
	}
	s, d := datatype.Bytes(send), datatype.Bytes(recv)
	ip, err := c.inPlace(name, d, s, 0)
	if err != nil {
		return nil, err
	}
	a.Send, a.Recv, a.Counts = s, d, bc
	if ip {
		a.Send, a.Recv, a.InPlace = nil, s, true
	}
	return a, nil
}

// Gather collects every rank's send into the root's recv, rank i's at
// i*len(send) (MPI_Gather); the root's recv holds Size()*len(send)
// elements, others may pass nil. In place: the root passes its own block of
// recv (recv[root*len(send):]) as send.
func Gather[T Elem](c *Comm, send, recv []T, root int) error {
	a, err := gatherArgs(c, "Gather", send, recv, root)
	if err != nil {
		return err
	}
	return c.collective(coll.Gather, "Gather", a)
}

func gatherArgs[T Elem](c *Comm, name string, send, recv []T, root int) (*coll.Args, error) {
	if err := c.checkRoot(name, root); err != nil {
		return nil, err
	}
	s, d := datatype.Bytes(send), datatype.Bytes(recv)
	a := c.newArgs()
	a.Send, a.Root = s, root
	if c.pc.Rank == root {
		if len(recv) != len(send)*c.pc.Size {
			return nil, countErr(c, name, "the root receives %d elements for blocks of %d on %d ranks: want %d", len(recv), len(send), c.pc.Size, len(send)*c.pc.Size)
		}
		ip, err := c.inPlace(name, s, d, root*len(s))
		if err != nil {
			return nil, err
		}
		a.Recv = d
		if ip {
			a.Send, a.InPlace = nil, true
		}
	}
	return a, nil
}

// Gatherv collects rank i's send (counts[i] elements) into the root's recv
// at displs[i] (MPI_Gatherv). counts and displs matter at the root only; in
// place, the root passes recv[displs[root]:][:counts[root]] as send.
func Gatherv[T Elem](c *Comm, send, recv []T, counts, displs []int, root int) error {
	a, err := gathervArgs(c, "Gatherv", send, recv, counts, displs, root)
	if err != nil {
		return err
	}
	return c.collective(coll.Gatherv, "Gatherv", a)
}

func gathervArgs[T Elem](c *Comm, name string, send, recv []T, counts, displs []int, root int) (*coll.Args, error) {
	if err := c.checkRoot(name, root); err != nil {
		return nil, err
	}
	s, d := datatype.Bytes(send), datatype.Bytes(recv)
	a := c.newArgs()
	a.Send, a.Root = s, root
	if c.pc.Rank == root {
		var err error
		if a.Counts, a.Displs, err = bytesOf(c, a, 0, name, "receive", counts, displs, datatype.Size[T](), len(d)); err != nil {
			return nil, err
		}
		if len(send) != counts[root] {
			return nil, countErr(c, name, "the root sends %d elements but counts[%d] is %d", len(send), root, counts[root])
		}
		ip, err := c.inPlace(name, s, d, a.Displs[root])
		if err != nil {
			return nil, err
		}
		a.Recv = d
		if ip {
			a.Send, a.InPlace = nil, true
		}
	}
	return a, nil
}

// Scatter sends block i of the root's send (len(recv) elements at
// i*len(recv)) to rank i's recv (MPI_Scatter); only the root's send
// matters. In place: the root passes its own block of send
// (send[root*len(recv):]) as recv.
func Scatter[T Elem](c *Comm, send, recv []T, root int) error {
	a, err := scatterArgs(c, "Scatter", send, recv, root)
	if err != nil {
		return err
	}
	return c.collective(coll.Scatter, "Scatter", a)
}

func scatterArgs[T Elem](c *Comm, name string, send, recv []T, root int) (*coll.Args, error) {
	if err := c.checkRoot(name, root); err != nil {
		return nil, err
	}
	s, d := datatype.Bytes(send), datatype.Bytes(recv)
	a := c.newArgs()
	a.Recv, a.Root = d, root
	if c.pc.Rank == root {
		if len(send) != len(recv)*c.pc.Size {
			return nil, countErr(c, name, "the root sends %d elements for blocks of %d on %d ranks: want %d", len(send), len(recv), c.pc.Size, len(recv)*c.pc.Size)
		}
		ip, err := c.inPlace(name, d, s, root*len(d))
		if err != nil {
			return nil, err
		}
		a.Send = s
		if ip {
			a.Recv, a.InPlace = nil, true
		}
	}
	return a, nil
}

// Scatterv sends counts[i] elements at displs[i] of the root's send to
// rank i's recv (MPI_Scatterv); counts and displs matter at the root only.
// In place: the root passes send[displs[root]:][:counts[root]] as recv.
func Scatterv[T Elem](c *Comm, send []T, counts, displs []int, recv []T, root int) error {
	a, err := scattervArgs(c, "Scatterv", send, counts, displs, recv, root)
	if err != nil {
		return err
	}
	return c.collective(coll.Scatterv, "Scatterv", a)
}

func scattervArgs[T Elem](c *Comm, name string, send []T, counts, displs []int, recv []T, root int) (*coll.Args, error) {
	if err := c.checkRoot(name, root); err != nil {
		return nil, err
	}
	s, d := datatype.Bytes(send), datatype.Bytes(recv)
	a := c.newArgs()
	a.Recv, a.Root = d, root
	if c.pc.Rank == root {
		var err error
		if a.Counts, a.Displs, err = bytesOf(c, a, 0, name, "send", counts, displs, datatype.Size[T](), len(s)); err != nil {
			return nil, err
		}
		if len(recv) != counts[root] {
			return nil, countErr(c, name, "the root receives %d elements but counts[%d] is %d", len(recv), root, counts[root])
		}
		ip, err := c.inPlace(name, d, s, a.Displs[root])
		if err != nil {
			return nil, err
		}
		a.Send = s
		if ip {
			a.Recv, a.InPlace = nil, true
		}
	}
	return a, nil
}

// Allgather collects every rank's send into every rank's recv, rank i's at
// i*len(send) (MPI_Allgather). In place: each rank passes its own block of
// recv (recv[Rank()*len(send):]) as send.
func Allgather[T Elem](c *Comm, send, recv []T) error {
	a, err := allgatherArgs(c, "Allgather", send, recv)
	if err != nil {
		return err
	}
	return c.collective(coll.Allgather, "Allgather", a)
}

func allgatherArgs[T Elem](c *Comm, name string, send, recv []T) (*coll.Args, error) {
	if err := c.check(name); err != nil {
		return nil, err
	}
	if len(recv) != len(send)*c.pc.Size {
		return nil, countErr(c, name, "%d elements to receive for blocks of %d on %d ranks: want %d", len(recv), len(send), c.pc.Size, len(send)*c.pc.Size)
	}
	s, d := datatype.Bytes(send), datatype.Bytes(recv)
	ip, err := c.inPlace(name, s, d, c.pc.Rank*len(s))
	if err != nil {
		return nil, err
	}
	a := c.newArgs()
	a.Send, a.Recv = s, d
	if ip {
		a.Send, a.InPlace = nil, true
	}
	return a, nil
}

// Allgatherv collects rank i's send (counts[i] elements) into every rank's
// recv at displs[i] (MPI_Allgatherv). In place: each rank passes
// recv[displs[Rank()]:][:counts[Rank()]] as send.
func Allgatherv[T Elem](c *Comm, send, recv []T, counts, displs []int) error {
	a, err := allgathervArgs(c, "Allgatherv", send, recv, counts, displs)
	if err != nil {
		return err
	}
	return c.collective(coll.Allgatherv, "Allgatherv", a)
}

func allgathervArgs[T Elem](c *Comm, name string, send, recv []T, counts, displs []int) (*coll.Args, error) {
	if err := c.check(name); err != nil {
		return nil, err
	}
	s, d := datatype.Bytes(send), datatype.Bytes(recv)
	a := c.newArgs()
	a.Send, a.Recv = s, d
	var err error
	if a.Counts, a.Displs, err = bytesOf(c, a, 0, name, "receive", counts, displs, datatype.Size[T](), len(d)); err != nil {
		return nil, err
	}
	if me := c.pc.Rank; len(send) != counts[me] {
		return nil, countErr(c, name, "rank %d sends %d elements but counts[%d] is %d", me, len(send), me, counts[me])
	}
	ip, err := c.inPlace(name, s, d, a.Displs[c.pc.Rank])
	if err != nil {
		return nil, err
	}
	if ip {
		a.Send, a.InPlace = nil, true
	}
	return a, nil
}

// Alltoall sends block j of send (len(send)/Size() elements) to rank j,
// which receives it as block i of its recv (MPI_Alltoall). In place: the
// same slice as send and recv.
func Alltoall[T Elem](c *Comm, send, recv []T) error {
	a, err := alltoallArgs(c, "Alltoall", send, recv)
	if err != nil {
		return err
	}
	return c.collective(coll.Alltoall, "Alltoall", a)
}

func alltoallArgs[T Elem](c *Comm, name string, send, recv []T) (*coll.Args, error) {
	if err := c.check(name); err != nil {
		return nil, err
	}
	if len(send) != len(recv) || len(send)%c.pc.Size != 0 {
		return nil, countErr(c, name, "%d elements to send and %d to receive on %d ranks: want equal lengths, a multiple of the size",
			len(send), len(recv), c.pc.Size)
	}
	s, d := datatype.Bytes(send), datatype.Bytes(recv)
	ip, err := c.inPlace(name, s, d, 0)
	if err != nil {
		return nil, err
	}
	a := c.newArgs()
	a.Send, a.Recv = s, d
	if ip {
		a.Send, a.InPlace = nil, true
	}
	return a, nil
}

// Alltoallv sends sendCounts[j] elements at sendDispls[j] of send to rank
// j, and receives recvCounts[j] elements from rank j at recvDispls[j] of
// recv (MPI_Alltoallv). In place: the same slice as send and recv, laid
// out by recvCounts and recvDispls; sendCounts and sendDispls are then
// ignored (nil will do). Rank i then sends recvCounts[j] elements to rank
// j and receives as many from it, so rank j's recvCounts[i] must be
// recvCounts[j] here. A rank with nothing to receive may pass nil or any
// empty slices as send and recv: that too is the in-place form.
func Alltoallv[T Elem](c *Comm, send []T, sendCounts, sendDispls []int, recv []T, recvCounts, recvDispls []int) error {
	a, err := alltoallvArgs(c, "Alltoallv", send, sendCounts, sendDispls, recv, recvCounts, recvDispls)
	if err != nil {
		return err
	}
	return c.collective(coll.Alltoallv, "Alltoallv", a)
}

func alltoallvArgs[T Elem](c *Comm, name string, send []T, sendCounts, sendDispls []int, recv []T, recvCounts, recvDispls []int) (*coll.Args, error) {
	if err := c.check(name); err != nil {
		return nil, err
	}
	size := datatype.Size[T]()
	s, d := datatype.Bytes(send), datatype.Bytes(recv)
	a := c.newArgs()
	a.Send, a.Recv = s, d
	var err error
	if a.Counts, a.Displs, err = bytesOf(c, a, 0, name, "receive", recvCounts, recvDispls, size, len(d)); err != nil {
		return nil, err
	}
	ip, err := c.inPlace(name, s, d, 0)
	if err != nil {
		return nil, err
	}
	if ip {
		a.Send, a.InPlace = nil, true
		return a, nil
	}
	if a.SendCounts, a.SendDispls, err = bytesOf(c, a, 2, name, "send", sendCounts, sendDispls, size, len(s)); err != nil {
		return nil, err
	}
	return a, nil
}
