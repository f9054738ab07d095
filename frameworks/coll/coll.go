// Package coll declares the collectives framework: a communicator's table
// of collective operations, filled slot by slot from the modules of several
// components.
//
// # Selection, per communicator
//
// When package mpi makes a communicator it calls Resolve. Every coll
// component that the `coll` parameter keeps is queried (Query) for that
// communicator; those that accept return a priority and a Module. Modules
// are ordered by priority (coll_<component>_priority overrides what Query
// returns), and each operation's slot takes the function of the
// highest-priority module that fills it. A module leaves a slot empty by
// returning nil for it, and the slot falls through to the next module: a
// component may implement barrier alone. A slot that no module fills is an
// error naming the operations and the modules asked. coll_base_verbose >=
// 10 logs, per communicator, which module fills each slot. An
// intercommunicator's table is resolved the same way by ResolveInter,
// which asks only the components that implement InterComponent and needs
// only barrier filled.
//
// Optional interfaces: a Component may implement InterComponent, a Module
// Stacker and Finalizer, a Comm Node; each says what happens without it.
//
// # What an algorithm sees
//
// Algorithms see a communicator through Comm: its size, this process's
// rank, and point-to-point calls in a context of their own (tags that no
// user receive can match), never package mpi. Buffers are bytes; counts and
// displacements are in bytes; reductions come as a datatype.Reducer. Every
// rank of the communicator calls the same operation, in the same order,
// with matching arguments (MPI's rule); package mpi has checked each rank's
// arguments locally before the call.
package coll

import (
	"fmt"
	"strings"
	"unsafe"

	"github.com/gompi/gompi/datatype"
	"github.com/gompi/gompi/frameworks/pml"
	"github.com/gompi/gompi/mca"
	"github.com/gompi/gompi/mpierr"
	"github.com/gompi/gompi/params"
	"github.com/gompi/gompi/rte"
)

// Framework is the coll framework's declaration. Selection may end empty
// here: Resolve then reports the unfilled operations itself.
var Framework = &mca.Framework{
	Name:        "coll",
	Description: "Collective operations, selected per communicator slot by slot",
	API:         mca.Version{Major: 1, Minor: 0, Patch: 0},
	Selection:   mca.MultiSelect,
	Priorities:  true,
	AllowEmpty:  true,
	Check:       mca.Implements[Component](),
	Params: []params.Def{{
		Name: ScratchKeepParam, Type: params.Size, Level: 6, Default: "64m",
		Help: "Bytes of collectives' temporary buffers a communicator keeps between calls, so that large collectives " +
			"in a loop reuse memory instead of faulting in fresh pages each call; larger needs are allocated per call",
	}},
}

// ScratchKeepParam bounds a communicator's Scratch (Scratch.Keep).
const ScratchKeepParam = "coll_base_scratch_keep"

func init() { mca.RegisterFramework(Framework) }

// Op is a collective operation: one slot of a communicator's table.
type Op int

// The operations, in the order the table lists them.
const (
	Barrier Op = iota
	Bcast
	Reduce
	Allreduce
	Gather
	Gatherv
	Scatter
	Scatterv
	Allgather
	Allgatherv
	Alltoall
	Alltoallv
	Scan
	Exscan
	ReduceScatter
	ReduceScatterBlock
	NumOps
)

var opNames = [NumOps]string{"barrier", "bcast", "reduce", "allreduce", "gather", "gatherv", "scatter", "scatterv",
	"allgather", "allgatherv", "alltoall", "alltoallv", "scan", "exscan", "reduce_scatter", "reduce_scatter_block"}

func (o Op) String() string {
	if o >= 0 && o < NumOps {
		return opNames[o]
	}
	return fmt.Sprintf("coll.Op(%d)", int(o))
}

// Ops lists every operation.
func Ops() []Op {
	out := make([]Op, NumOps)
	for i := range out {
		out[i] = Op(i)
	}
	return out
}

// Args are one rank's arguments to a collective. Sizes are in bytes. Which
// fields an operation reads:
//
//   - barrier: none.
//   - bcast: Recv is the buffer (the root's holds the data), Root.
//   - reduce, allreduce, scan, exscan: Send and Recv of equal length,
//     Reducer; reduce also Root (Recv matters at the root only). With
//     InPlace, Send is nil and Recv holds the input (reduce: at the root).
//   - reduce_scatter_block: Send holds size blocks of len(Recv) bytes; the
//     rank receives the reduction of its block. With InPlace, Recv holds
//     the input (size blocks) and receives the result in its first block.
//   - reduce_scatter: as reduce_scatter_block with Counts[i] bytes for rank
//     i; Send holds sum(Counts) bytes; len(Recv) is Counts[rank]. With
//     InPlace, Recv holds the input and receives the result at its start.
//   - gather: every rank sends len(Send) bytes; the root's Recv receives
//     rank i's block at i*len(Send). With InPlace (root only), Send is nil
//     and the root's block is in place already; the block size is
//     len(Recv)/size.
//   - gatherv: rank i sends Counts[i] bytes, which the root receives at
//     Displs[i] of Recv; Counts and Displs matter at the root only, except
//     that every rank passes its own count as len(Send). InPlace as gather.
//   - scatter: the root's Send holds size blocks of len(Recv) bytes; rank i
//     receives block i. With InPlace (root only), Recv is nil and the
//     root's block stays in Send; the block size is len(Send)/size.
//   - scatterv: the root sends Counts[i] bytes from Displs[i] of Send to
//     rank i, which receives len(Recv) bytes. InPlace as scatter.
//   - allgather: as gather, with every rank receiving. InPlace: the rank's
//     own block of Recv holds its input.
//   - allgatherv: as gatherv, with every rank receiving (Counts and Displs
//     on every rank). InPlace as allgather.
//   - alltoall: Send holds size blocks of len(Send)/size bytes, block j for
//     rank j; Recv receives block i from rank i. InPlace: Recv holds the
//     input and receives the output.
//   - alltoallv: rank i sends SendCounts[j] bytes from SendDispls[j] to
//     rank j, and receives Counts[j] bytes from rank j at Displs[j] of
//     Recv. InPlace: Recv holds the input, laid out by Counts and Displs,
//     and SendCounts and SendDispls are nil.
type Args struct {
	// Op is the operation being run: Table.Call sets it, so that one
	// function may fill several slots (gather and gatherv) and still tell
	// them apart on ranks whose arguments look alike (a gatherv's non-root
	// has no Counts).
	Op         Op
	Send, Recv []byte
	InPlace    bool
	Root       int
	// Counts and Displs are per rank: the receive side of gatherv,
	// allgatherv and alltoallv, the send side of scatterv, the blocks of
	// reduce_scatter.
	Counts, Displs []int
	// SendCounts and SendDispls are alltoallv's send side.
	SendCounts, SendDispls []int
	// Reducer combines elements for the reductions.
	Reducer datatype.Reducer
	// Scratch lends temporary buffers that live with the communicator;
	// Table.Call sets it. Algorithms Get what they need and Put it back
	// before they return.
	Scratch *Scratch
	// coroutines are the communicator's idle coroutines (Coroutine);
	// Table.Plan sets it.
	coroutines *coPool
	// Blocking is, for a nonblocking slot's function, the blocking
	// function of the operation that may run beside other operations on
	// the communicator (the highest-priority filler that is not Serial);
	// Table.Plan sets it, nil when there is none.
	Blocking Func
	// reqs is room for an algorithm's requests, kept from call to call
	// (Requests).
	reqs []*pml.Request
	// ints is room for the counts and displacements a caller computes
	// for each call, kept likewise (Ints).
	ints [4][]int
}

// Ints returns n ints, their values undefined, from the arguments' room
// k (0 to 3), which Reuse keeps from call to call: package mpi turns a v
// form's element counts and displacements into bytes there, without an
// allocation per call. What it returns stays valid until the next Ints(k)
// on these arguments.
func (a *Args) Ints(k, n int) []int {
	if cap(a.ints[k]) < n {
		a.ints[k] = make([]int, n)
	}
	return a.ints[k][:n]
}

// Requests returns an empty slice for an algorithm to collect its requests
// in, with the room the last call on these arguments gave back
// (PutRequests): a collective in a loop then allocates none. A local
// array would not do: the slice reaches an Awaiter, an interface, and
// escapes. Until it is given back, a second Requests (a nested algorithm
// on the same arguments) gets a slice of its own.
func (a *Args) Requests() []*pml.Request {
	r := a.reqs[:0]
	a.reqs = nil
	return r
}

// PutRequests gives back what Requests returned, once its requests are
// waited for; it drops them, so that a recycled request is not kept.
func (a *Args) PutRequests(r []*pml.Request) {
	clear(r)
	a.reqs = r[:0]
}

// Own makes a hold v (as Reuse), with copies in a's own room of the counts
// and displacements that v holds in v's room: v may then be reused for
// another call while a is in use (a nonblocking collective's run).
func (a *Args) Own(v *Args) {
	a.Reuse(*v)
	for k, f := range [4]*[]int{&a.Counts, &a.Displs, &a.SendCounts, &a.SendDispls} {
		for _, room := range v.ints {
			if len(*f) > 0 && unsafe.SliceData(*f) == unsafe.SliceData(room) {
				mine := a.Ints(k, len(*f))
				copy(mine, *f)
				*f = mine
				break
			}
		}
	}
}

// Reuse makes a hold v, with a's room (Requests, Ints) kept: the
// arguments of a communicator's pool, filled for each call.
func (a *Args) Reuse(v Args) {
	reqs, ints := a.reqs, a.ints
	*a = v
	a.reqs, a.ints = reqs, ints
}

// Clear empties a, its room kept, as Reuse(Args{}) does, field by field:
// Reuse(Args{}) builds a zero value and copies it over a (336 bytes read and
// written, a tenth of a small collective's own cost on two ranks), and
// *a = Args{} clears them all through the runtime's bulk clearing. A field
// added to Args must be added here (TestClearKeepsTheRoomOnly counts them).
func (a *Args) Clear() {
	a.Op, a.Send, a.Recv, a.InPlace, a.Root = 0, nil, nil, false, 0
	a.Counts, a.Displs, a.SendCounts, a.SendDispls = nil, nil, nil, nil
	a.Reducer = datatype.Reducer{}
	a.Scratch, a.coroutines, a.Blocking = nil, nil, nil
}

// Func is one slot's function: it runs the operation on this rank and
// returns when the rank's part is done (its Recv holds its result). An
// error ends this rank's part; other ranks may then wait for it, as in MPI.
type Func func(c Comm, a *Args) error

// Comm is what an algorithm sees of a communicator: the point-to-point
// calls of pml.Transport in the collectives' own context (tags are those of
// Tag, and no user receive ever matches them), its name, and whether a
// low-latency path reaches every rank. Its methods are safe for concurrent
// use; an algorithm may have several requests in flight.
type Comm interface {
	// Send is blocking and, when LLP reports true, takes the low-latency
	// path for small messages; Isend never does.
	pml.Transport

	// Name names the communicator in logs and errors.
	Name() string

	// LLP reports whether a low-latency path reaches every other rank of
	// the communicator: a small blocking Send then goes straight into a
	// slot that the peer polls.
	LLP() bool
}

// Inter is what an algorithm sees of an intercommunicator. Rank and Size
// are the local group's; Send, Recv, Isend and Irecv address ranks of the
// remote group.
type Inter interface {
	Comm
	// RemoteSize is the size of the remote group.
	RemoteSize() int
	// Local is the local group as a communicator of its own, with a
	// context of its own, for the local phases of an algorithm.
	Local() Comm
}

// InterComponent is an optional interface of a Component: it has
// algorithms for intercommunicators. ResolveInter, for every new
// intercommunicator, asks only the components that implement it. A
// component that does not implement InterComponent serves
// intracommunicators only: ResolveInter counts it as declining ("no
// intercommunicator algorithms"), which coll_base_verbose 10 logs and
// ResolveInter's error lists.
type InterComponent interface {
	QueryInter(b *mca.Base, comm Inter) (priority int, m Module, err error)
}

// Root and ProcNull are the roots of a rooted operation on an
// intercommunicator: the root passes Root, the other ranks of its group
// ProcNull, and the ranks of the other group the root's rank there
// (MPI_ROOT and MPI_PROC_NULL, Open MPI's values).
const (
	Root     = -4
	ProcNull = pml.ProcNull
)

// Tag is the tag of an operation's messages; phase tells apart the
// messages of an algorithm's phases where their order between a pair
// could otherwise be confused. Tags are negative: the PML reserves them for
// collectives, and a user's AnyTag never matches them.
func Tag(op Op, phase int) int { return -1000 - 16*int(op) - phase }

// Module is what a component gives one communicator: the operations it
// implements.
type Module interface {
	// Func returns the module's function for op, or nil to leave the slot
	// to lower-priority modules.
	Func(op Op) Func
}

// Stacker is an optional interface of a Module, for modules that fill a
// slot for some calls only (small messages, say) and hand the others to
// the module below them: Resolve and ResolveInter, as they fill a table,
// call Stack for every slot the module fills, with the function of the
// next module down that fills it (nil when none does), before the table
// is used. Open MPI's coll modules keep their predecessor's function the
// same way. A module that does not implement Stacker takes every call of
// the slots it fills, and the slot table shows it alone ("op=sm", not
// "op=sm>tuned").
type Stacker interface {
	Stack(op Op, below Func)
}

// Node is an optional interface of a Comm, for components that work
// through shared memory: it gives the instance's runtime and the ranks'
// world ranks, from which a component tells whether every rank runs on
// this node. Package mpi's communicators implement it; colltest's do not.
// coll's sm component looks for it in its Query, for every communicator; a
// Comm without it makes sm decline ("offers no shared memory"), and the
// slots go to the other modules.
type Node interface {
	Comm
	// Runtime is the instance's runtime: the job (its id names shared
	// files) and the bell that sleeping ranks wait on.
	Runtime() *rte.Runtime
	// WorldRank is the job-wide rank of the communicator's rank r.
	WorldRank(r int) int
	// Until waits through the instance's progress engine until cond holds,
	// polling, yielding and sleeping as its wait policy says, so that a
	// wait on shared memory behaves as every other blocking call. Writers
	// of what cond reads ring sleeping readers (rte.Bell.RingPeer) after
	// publishing. It also ends, with the error Broken returns, when the
	// communicator's collectives fail.
	Until(cond func() bool) error
	// Broken returns the error the communicator's collectives fail with
	// once a member died or it was revoked, nil before: a component that
	// polls shared memory without Until (a nonblocking plan's Progress)
	// looks at it, since a dead peer's sequence number never moves.
	Broken() error
}

// Finalizer is an optional interface of a Module, for modules that hold
// resources. Table.Finalize calls it: when package mpi frees the
// communicator (Comm.Free), at Instance.Finalize for the communicators
// not freed, and when resolving a table fails. A module that does not
// implement Finalizer is dropped with its table and left to the garbage
// collector.
type Finalizer interface {
	Finalize() error
}

// Component is what a coll component implements.
type Component interface {
	mca.Component
	// Query is called for every new communicator, with the communicator
	// already able to carry point-to-point traffic. It returns a priority
	// and a module for it, or an error wrapping mca.ErrDeclined (the reason
	// shows at coll_base_verbose 10 and in Resolve's errors).
	Query(b *mca.Base, comm Comm) (priority int, m Module, err error)
}

// Table is a communicator's resolved slot table.
type Table struct {
	scratch Scratch
	fns     [NumOps]Func
	from    [NumOps]string // the component that fills each slot
	under   [NumOps]string // the one below it, when that is a Stacker
	modules []mca.Selected[Module]
	// The nonblocking slots (nonblocking.go): their functions and fillers,
	// and each operation's blocking function that may run beside others.
	coroutines   coPool
	nbFns        [NumOps]NBFunc
	nbFrom       [NumOps]string
	parallel     [NumOps]Func
	parallelFrom [NumOps]string
}

// Resolve queries the coll components for comm and fills its table, slot by
// slot, from the highest-priority module that fills each. A slot nobody
// fills is an ErrComponentNotFound error naming the operations, the modules
// asked, and the components excluded or declining.
func Resolve(b *mca.Base, comm Comm) (*Table, error) {
	return resolve(b, comm, selection{
		kind: "communicator",
		query: func(c mca.Component) (int, Module, error) {
			return c.(Component).Query(b, comm)
		},
		required: Ops(),
		sizes:    fmt.Sprintf("%d ranks", comm.Size()),
	})
}

// ResolveInter is Resolve for an intercommunicator: it asks only the
// components that implement InterComponent. Slots nobody fills are
// allowed (MPI defines fewer operations there than gompi implements):
// calling one is an ErrUnsupportedOp error. At least barrier must be
// filled.
func ResolveInter(b *mca.Base, comm Inter) (*Table, error) {
	return resolve(b, comm, selection{
		kind: "intercommunicator",
		query: func(c mca.Component) (int, Module, error) {
			ic, ok := c.(InterComponent)
			if !ok {
				return 0, nil, mca.Decline("no intercommunicator algorithms")
			}
			return ic.QueryInter(b, comm)
		},
		required: []Op{Barrier},
		sizes:    fmt.Sprintf("%d ranks, remote group of %d", comm.Size(), comm.RemoteSize()),
		logKV:    []any{"remote_size", comm.RemoteSize()},
	})
}

// selection is what differs between resolving the table of an
// intracommunicator and of an intercommunicator.
type selection struct {
	// kind names the communicator's kind in errors: "communicator".
	kind string
	// query asks one component for a module.
	query func(c mca.Component) (priority int, m Module, err error)
	// required are the slots that must be filled.
	required []Op
	// sizes describes the communicator's size in errors: "4 ranks".
	sizes string
	// logKV are the log's key-value pairs beyond the name and size.
	logKV []any
}

// resolve is Resolve and ResolveInter: select, fill, check the required
// slots, log the table.
func resolve(b *mca.Base, comm Comm, s selection) (*Table, error) {
	sel, rep, err := mca.SelectReport(b, Framework, s.query)
	if err != nil {
		return nil, fmt.Errorf("coll: %s %s: %w", s.kind, comm.Name(), err)
	}
	t := &Table{modules: sel}
	t.scratch.Keep = int(b.Lookup(ScratchKeepParam).Uint())
	t.fill()
	t.fillNonblocking()
	var missing []string
	for _, op := range s.required {
		if t.fns[op] == nil {
			missing = append(missing, op.String())
		}
	}
	if len(missing) > 0 {
		t.Finalize()
		var asked []string
		for _, m := range sel {
			asked = append(asked, fmt.Sprintf("%s (priority %d)", m.Entry.Info.Name, m.Priority))
		}
		return nil, mpierr.Errorf(mpierr.ErrComponentNotFound,
			"coll: %s %s (%s): no module fills %s; modules asked: %s; excluded: %s; declined: %s",
			s.kind, comm.Name(), s.sizes, strings.Join(missing, ", "), listOrNone(asked), listOrNone(rep.Excluded), listOrNone(rep.Declined))
	}
	if log := b.Logger("coll"); log.V(mca.VerboseComponent) {
		kv := append([]any{"comm", comm.Name(), "size", comm.Size()}, s.logKV...)
		log.Log(mca.VerboseComponent, "slot table", append(kv, "table", t.String(), "nonblocking", t.NBString())...)
	}
	return t, nil
}

// fill gives each slot the function of the highest-priority module that
// fills it, and tells every Stacker that fills a slot what lies below it.
func (t *Table) fill() {
	for op := Op(0); op < NumOps; op++ {
		var fillers []mca.Selected[Module]
		var fns []Func
		for _, s := range t.modules {
			if f := s.Module.Func(op); f != nil {
				fillers, fns = append(fillers, s), append(fns, f)
			}
		}
		if len(fillers) == 0 {
			continue
		}
		t.fns[op], t.from[op] = fns[0], fillers[0].Entry.Info.Name
		if _, stacks := fillers[0].Module.(Stacker); stacks && len(fillers) > 1 {
			t.under[op] = fillers[1].Entry.Info.Name
		}
		for i, s := range fillers {
			if st, ok := s.Module.(Stacker); ok {
				var below Func
				if i+1 < len(fns) {
					below = fns[i+1]
				}
				st.Stack(op, below)
			}
		}
	}
}

func listOrNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

// Call runs op on c.
func (t *Table) Call(op Op, c Comm, a *Args) error {
	a.Op, a.Scratch = op, &t.scratch
	if t.fns[op] == nil {
		return mpierr.Errorf(mpierr.ErrUnsupportedOp, "coll: %s is not implemented on intercommunicators", op)
	}
	return t.fns[op](c, a)
}

// From names the component that fills op's slot.
func (t *Table) From(op Op) string { return t.from[op] }

// String lists the blocking slots as "op=component", in table order: what
// coll_base_verbose prints per communicator (NBString lists the
// nonblocking ones). A slot whose module passes some calls to the module
// below (a Stacker) shows both: "op=sm>tuned".
func (t *Table) String() string {
	parts := make([]string, NumOps)
	for op := Op(0); op < NumOps; op++ {
		from := t.from[op]
		if from == "" {
			from = "none"
		}
		if t.under[op] != "" {
			from += ">" + t.under[op]
		}
		parts[op] = op.String() + "=" + from
	}
	return strings.Join(parts, " ")
}

// Finalize releases the modules that hold resources.
func (t *Table) Finalize() error {
	var first error
	for _, s := range t.modules {
		if f, ok := s.Module.(Finalizer); ok {
			if err := f.Finalize(); err != nil && first == nil {
				first = err
			}
		}
	}
	t.modules = nil
	t.scratch.Release()
	t.coroutines.end()
	return first
}

// Slots is a Module made of a table: a component fills the operations it
// implements and leaves the others nil.
type Slots [NumOps]Func

// Func returns the slot's function.
func (s *Slots) Func(op Op) Func { return s[op] }
