package coll

import (
	"fmt"
	"strings"

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
// persistent collective) or Free.
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
