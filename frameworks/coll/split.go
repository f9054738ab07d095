package coll

// Splitter is an optional interface of a Comm, for components that run an
// operation as phases over parts of the communicator (coll han: the ranks
// of each node, then one leader per node), each part a communicator with a
// context and a slot table of its own, resolved as any communicator's is,
// so that every phase runs through the components that serve its part best
// (sm within a node, tuned over the network). Package mpi's communicators
// implement it; colltest's do not, and a component that needs it declines
// them.
type Splitter interface {
	Node
	// NodeOf returns the node index of the communicator's rank r: ranks of
	// equal indexes share a node (the launcher's mapping).
	NodeOf(r int) int
	// Split makes the part of the communicator this rank belongs to, among
	// disjoint parts: parts[k] lists the ranks of part k in the order the
	// part ranks them. It is collective: every rank calls it, with the same
	// parts, in the same order among the communicator's collectives. A rank
	// in no part gets nil. The ranks agree on a context id through agree,
	// an allreduce over the whole communicator: callers inside one of their
	// own slots pass the function below theirs (Stacker), so that making
	// parts never runs the slot that is making them.
	Split(parts [][]int, agree Func) (Sub, error)
}

// Sub is a part of a communicator made by Splitter.Split: a communicator
// of its own, seen as algorithms see any (Comm), with the calls of its own
// slot table.
type Sub interface {
	Comm
	// Call runs op on the part through the part's slot table.
	Call(op Op, a *Args) error
	// Start starts op's nonblocking form on the part, through the part's
	// nonblocking slots, and returns the wait for its end. a and its
	// buffers must stay as they are until the wait returns.
	Start(op Op, a *Args) (wait func() error, err error)
	// NBTag takes the base tag of the part's next nonblocking run (NBTag),
	// as Start's runs take theirs. A Plan that runs phases on the part
	// takes one per phase from its own Start, under the lock every Plan
	// method runs under: every rank of the part then takes them in the
	// order the communicator's collectives start, which MPI makes the same
	// on every rank.
	NBTag() int
	// Table is the part's slot table (its String shows who fills each).
	Table() *Table
	// Free releases the part's table and context. The component that made
	// the part frees it, from its module's Finalize.
	Free() error
}

// CallFunc runs f, a function of op's slot on this table or below it, as
// Call runs the slot's own: with the table's Op and Scratch set.
func (t *Table) CallFunc(op Op, f Func, c Comm, a *Args) error {
	a.Op, a.Scratch = op, &t.scratch
	return f(c, a)
}

// FuncOf returns the function that the named component's module gives
// op's slot on this table, for callers that choose a component for a phase
// (coll han's coll_han_<op>_low): nil when that module is not in the table
// or leaves the slot empty. fillers lists the components that do fill op
// here, for the error that names what is accepted.
func (t *Table) FuncOf(op Op, component string) (f Func, fillers string) {
	var names []string
	for _, s := range t.modules {
		g := s.Module.Func(op)
		if g == nil {
			continue
		}
		names = append(names, s.Entry.Info.Name)
		if s.Entry.Info.Name == component && f == nil {
			f = g
		}
	}
	return f, listOrNone(names)
}
