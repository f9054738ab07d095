package coll

import (
	"fmt"
	"strings"
	"unsafe"

	"github.com/gompi/gompi/mpierr"
)

// # Nonblocking and persistent collectives
//
// Every operation has a nonblocking form (MPI_Iallreduce) and a persistent
// one (MPI_Allreduce_init, then MPI_Start many times): both are a Plan,
// made by the function of the operation's nonblocking slot, started once or
// many times, and advanced by package mpi's progress (in every call into the
// instance, in Wait and Test, and on its progress goroutine) until
// complete. The nonblocking slots are filled as the blocking ones are: in
// priority order, by the modules that implement Nonblocking, with the same
// fall-through; a slot nobody fills is an error when the operation is
// called, naming it (Table.Plan). Component nbc fills every one by running
// the blocking slot's algorithm as a coroutine (Coroutine): whatever
// algorithm a communicator's blocking table holds is available
// nonblocking, with its shape and its decision rules.

// Plan is one rank's part of a nonblocking collective on given arguments.
// Package mpi calls its methods from one goroutine at a time, never two at
// once: Start, then Progress until it reports done, then Start again (a
// persistent collective) or Free. It calls them under one lock for all the
// plans of an instance, so that a module's state shared by its plans needs
// no locked instructions of its own between them (a fence each, on x86).
type Plan interface {
	// Start begins a run. tag is the base of the run's tags (NBTag): every
	// run of every nonblocking collective on a communicator has tags of its
	// own, so that runs in flight together, and blocking collectives beside
	// them, never take each other's messages. Start does what it can
	// without waiting (a first round's sends) and returns; a failure that
	// happens later comes from Progress.
	Start(tag int) error
	// Progress advances the run as far as it goes without waiting and
	// reports whether it is complete, with its error.
	Progress() (done bool, err error)
	// Free releases what the plan holds, after its last run or instead of
	// any.
	Free()
}

// Finisher is an optional interface of a Plan whose Start can complete the
// run (the last rank to arrive finds every other rank's part there):
// Finished reports, without advancing the run, whether it is complete and
// with what error, so that its request completes in Start rather than in
// the next progress pass.
type Finisher interface {
	Finished() (done bool, err error)
}

// NBFunc is a nonblocking slot's function: it plans op for c and a and
// returns the plan, moving no data yet. Package mpi has checked a's
// buffers, as for a blocking call, and keeps them alive and a unchanged for
// as long as the plan lives. Table.Plan sets a.Op, a.Scratch and
// a.Blocking first.
type NBFunc func(c Comm, a *Args) (Plan, error)

// Nonblocking is an optional interface of a Module, for modules that fill
// nonblocking slots. Resolve asks every module that implements it, in
// priority order, and each nonblocking slot takes the first non-nil
// function, as the blocking slots do. A module that does not implement it
// fills no nonblocking slot.
type Nonblocking interface {
	// NBFunc returns the module's function for op's nonblocking form, or
	// nil to leave the slot to lower-priority modules.
	NBFunc(op Op) NBFunc
}

// Serial is an optional interface of a Module whose blocking functions
// keep per-communicator state between their waits (coll sm's sequence of
// operations through one shared segment): one of its operations in flight
// at a time, never several. Table.Plan gives nonblocking functions, as
// Args.Blocking, the blocking function of the highest-priority module
// below such modules, so that a coroutine never runs one concurrently with
// another operation. A module that does not implement Serial is taken to
// run several operations at once (each in its own tags), as point-to-point
// algorithms do.
type Serial interface {
	Serial()
}

// NBSlots is the nonblocking half of a module made of tables: a component
// fills the nonblocking operations it implements and leaves the others
// nil.
type NBSlots [NumOps]NBFunc

// NBFunc returns the nonblocking slot's function.
func (s *NBSlots) NBFunc(op Op) NBFunc { return s[op] }

// NBTag is the base tag of run seq of a communicator's nonblocking
// collectives: below every blocking collective's tag, 4096 tags a run, in
// 2^18 windows before they are reused (runs that far apart are never in
// flight together). Coroutine maps an algorithm's Tag(op, phase) into the
// run's window.
func NBTag(seq uint32) int { return nbTagBase - int(seq%nbTagWindows)*nbTagSpan }

const (
	nbTagBase    = -1 << 20
	nbTagSpan    = 4096
	nbTagWindows = 1 << 18
	// blockingTagTop is the highest tag Tag gives: the window's offset 0.
	blockingTagTop = -1000
)

// RunTag maps tag t of an algorithm (Tag's range: Tag(op, phase)) into the
// window of the nonblocking run whose base tag is base (NBTag), as a
// coroutine's Comm maps its algorithm's tags: for a plan's own messages
// beside the collectives it runs in that window, in a phase they use not.
func RunTag(base, t int) (int, error) { return runTag(base, t) }

// runTag maps tag t of an algorithm (Tag's range) into the window of the
// run whose base tag is base.
func runTag(base, t int) (int, error) {
	off := blockingTagTop - t
	if off < 0 || off >= nbTagSpan {
		return 0, mpierr.Errorf(mpierr.ErrIntern, "coll: tag %d is outside the collectives' range (%d to %d)", t, blockingTagTop-nbTagSpan+1, blockingTagTop)
	}
	return base - off, nil
}

// NBName is the name of op's nonblocking form in tables and errors:
// "iallreduce".
func NBName(op Op) string { return "i" + op.String() }

// Plan plans op's nonblocking form on c with the function of its
// nonblocking slot. A slot nobody fills is an ErrUnsupportedOp error that
// names the operation and the modules the table holds.
func (t *Table) Plan(op Op, c Comm, a *Args) (Plan, error) {
	if op < 0 || op >= NumOps {
		return nil, mpierr.Errorf(mpierr.ErrUnsupportedOp, "coll: %s is not an operation", op)
	}
	f := t.nbFns[op]
	if f == nil {
		var names []string
		for _, m := range t.modules {
			names = append(names, m.Entry.Info.Name)
		}
		return nil, mpierr.Errorf(mpierr.ErrUnsupportedOp,
			"coll: %s on %s: no module fills %s (modules of this communicator: %s; coll nbc fills every nonblocking operation unless excluded)",
			NBName(op), c.Name(), NBName(op), listOrNone(names))
	}
	a.Op, a.Scratch, a.Blocking, a.coroutines = op, &t.scratch, t.parallel[op], &t.coroutines
	return f(c, a)
}

// PlanCoroutine plans op's nonblocking form on c as coll nbc fills a slot,
// whatever fills it here: the blocking algorithm of the highest module that
// is not Serial, run as a coroutine in the run's tags. Runs planned so may
// start in a different order on different ranks, which a Serial module's
// native plans may not (sm's runs take their turns in its shared segment in
// the order they start): a component that starts the phases of several
// runs on a part as each becomes ready (han) plans them so.
func (t *Table) PlanCoroutine(op Op, c Comm, a *Args) (Plan, error) {
	if op < 0 || op >= NumOps {
		return nil, mpierr.Errorf(mpierr.ErrUnsupportedOp, "coll: %s is not an operation", op)
	}
	a.Op, a.Scratch, a.Blocking, a.coroutines = op, &t.scratch, t.parallel[op], &t.coroutines
	return Coroutine(c, a, a.Blocking)
}

// fillNonblocking fills the nonblocking slots from the modules that
// implement Nonblocking, and finds for each operation the blocking function
// that a coroutine may run beside other operations (Args.Blocking).
func (t *Table) fillNonblocking() {
	for op := Op(0); op < NumOps; op++ {
		for _, s := range t.modules {
			nb, ok := s.Module.(Nonblocking)
			if !ok {
				continue
			}
			if f := nb.NBFunc(op); f != nil {
				t.nbFns[op], t.nbFrom[op] = f, s.Entry.Info.Name
				break
			}
		}
		for _, s := range t.modules {
			if _, serial := s.Module.(Serial); serial {
				continue
			}
			if f := s.Module.Func(op); f != nil {
				t.parallel[op] = f
				t.parallelFrom[op] = s.Entry.Info.Name
				break
			}
		}
	}
}

// NBString lists the nonblocking slots as String lists the blocking ones:
// "iallreduce=nbc(tuned)", the module that fills the slot and, in
// brackets, the blocking algorithm's module that a coroutine would run
// (Args.Blocking).
func (t *Table) NBString() string {
	parts := make([]string, NumOps)
	for op := Op(0); op < NumOps; op++ {
		from := t.nbFrom[op]
		switch {
		case from == "":
			from = "none"
		case t.parallelFrom[op] != "":
			from = fmt.Sprintf("%s(%s)", from, t.parallelFrom[op])
		}
		parts[op] = NBName(op) + "=" + from
	}
	return strings.Join(parts, " ")
}

// Reusable is an optional interface of a Plan: the plan stays right for
// the same call made again, whatever happened on the communicator between
// (package mpi then keeps a nonblocking collective's plan after its Wait
// and starts it again for an identical call, as if the program had made it
// persistent). A plan whose choice depends on state that can change, such
// as sm's fall-back to a coroutine while its segment is not set up, must
// not claim it: another rank, planning afresh, would choose otherwise and
// the two would never meet.
type Reusable interface {
	Plan
	// Reusable reports whether the plan may be started again for the
	// same call.
	Reusable() bool
}

// SameCall reports whether b is the call a (a plan's arguments) was made
// for, made again: the same buffers (the same memory, as a plan may keep
// pointers into them), in-place form and root, and the same bound reducer;
// Table.Plan's own fields are not compared. Calls with count arrays (the v
// forms, reduce_scatter) never match: a plan may have derived its blocks
// from them, and the program may have changed them in place since.
func (a *Args) SameCall(b *Args) bool {
	return a.Counts == nil && b.Counts == nil && a.Displs == nil && b.Displs == nil &&
		a.SendCounts == nil && b.SendCounts == nil && a.SendDispls == nil && b.SendDispls == nil &&
		sameBuf(a.Send, b.Send) && sameBuf(a.Recv, b.Recv) && a.InPlace == b.InPlace && a.Root == b.Root &&
		a.Reducer.Same(b.Reducer)
}

// sameBuf reports whether x and y are the same memory, of the same length.
func sameBuf(x, y []byte) bool {
	return len(x) == len(y) && unsafe.SliceData(x) == unsafe.SliceData(y)
}
