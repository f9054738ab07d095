package mpi

// What every communicator is and how one is made (newComm: the PML learns
// its context, coll selects its table). Dup, Split, Create, CreateGroup and
// intercommunicators are in comm_*.go and intercomm.go.

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/gompi/gompi/frameworks/coll"
	"github.com/gompi/gompi/frameworks/group"
	"github.com/gompi/gompi/frameworks/pml"
	"github.com/gompi/gompi/mpierr"
)

// CommWorld returns the communicator of all the job's processes
// (MPI_COMM_WORLD).
func (i *Instance) CommWorld() *Comm { return i.world }

// CommSelf returns the communicator of this process alone (MPI_COMM_SELF).
func (i *Instance) CommSelf() *Comm { return i.self }

// Comm is a communicator: a group of processes and a context in which their
// messages match. Every method is safe for concurrent use by several
// goroutines. Ranks are ranks in the communicator.
//
// Errors wrap an MPI class, usable with errors.Is: ErrComm (a nil
// communicator, or a finalized instance), ErrRank (a rank outside 0..Size()-1
// that is not ProcNull, or AnySource for receives), ErrTag (a tag outside
// 0..MaxTag, or AnyTag for receives), ErrTruncate (a message longer than the
// receive buffer: the buffer holds its start, Status.Count says how much),
// ErrBuffer (buffered sends without room), ErrProcFailed (the peer is
// lost), ErrProcAborted (the job is lost), ErrPending (WaitContext gave up).
type Comm struct {
	inst  *Instance
	pc    pml.Comm
	name  string
	freed atomic.Bool
	// coll is the communicator's table of collectives (coll.go), and
	// argPool the collectives' reusable arguments.
	coll    *coll.Table
	argPool sync.Pool
	// local is, on an intercommunicator, a communicator of the local group
	// with a context of its own, for the local phases of collectives; nil
	// on an intracommunicator.
	local *Comm
	// nbSeq counts the runs of nonblocking collectives started on the
	// communicator: each run's tags are its number's (coll.NBTag); runPool
	// keeps the nonblocking runs their Waits gave back (nbc.go), and
	// nbReuse, per operation, the last of them whose plan may run the same
	// call again (nbc.go's reuse).
	nbSeq   uint32 // under the instance's nbc.mu
	runPool sync.Pool
	nbReuse [coll.NumOps]atomic.Pointer[nbcRun]
	nbPlans atomic.Uint64 // nonblocking and persistent collectives planned (tests)
	// ft is the communicator's failure state, revocation and agreements
	// (ft.go, agree.go).
	ft commFT
}

// newComm makes a communicator over g with a context id and tells the PML.
func (i *Instance) newComm(cid uint16, g *group.Group, name string) (*Comm, error) {
	c, err := i.newPart(cid, g, name)
	if err != nil {
		return nil, err
	}
	i.collTables.keep(c.coll)
	return c, nil
}

// newPart is newComm for a communicator that a coll module owns
// (coll.Splitter): the module frees it, at its own Finalize, so the
// instance does not keep its table.
func (i *Instance) newPart(cid uint16, g *group.Group, name string) (*Comm, error) {
	c := &Comm{inst: i, name: name}
	c.pc = pml.Comm{CID: cid, Group: g, Rank: g.MyRank(), Size: g.Size()}
	if err := i.pml.AddComm(&c.pc); err != nil {
		return nil, fmt.Errorf("mpi: %s: %w", name, err)
	}
	// Known to failures before its table is resolved: a component's
	// setup may wait on a member that is dead already.
	i.registerFT(c)
	t, err := coll.Resolve(i.base, collComm{c})
	if err != nil {
		i.unregisterFT(c)
		i.pml.DelComm(&c.pc)
		return nil, fmt.Errorf("mpi: %s: %w", name, err)
	}
	c.coll = t
	return c, nil
}

// Rank returns this process's rank in the communicator.
func (c *Comm) Rank() int { return c.pc.Rank }

// Size returns the number of processes in the communicator.
func (c *Comm) Size() int {
	if c.pc.Local != nil {
		return c.pc.Local.Size()
	}
	return c.pc.Size
}

// Group returns a new handle to the communicator's group (MPI_Comm_group).
func (c *Comm) Group() *Group {
	if c.pc.Local != nil {
		return newGroup(c.inst.groups.ops, c.pc.Local)
	}
	return newGroup(c.inst.groups.ops, c.pc.Group)
}

// Name returns the communicator's name (MPI_COMM_WORLD, MPI_COMM_SELF).
func (c *Comm) Name() string { return c.name }

// Instance returns the instance the communicator belongs to.
func (c *Comm) Instance() *Instance { return c.inst }

// check returns the ErrComm error of a nil communicator or a finalized
// instance.
func (c *Comm) check(op string) error {
	if c == nil || c.inst == nil {
		return mpierr.Errorf(mpierr.ErrComm, "mpi: %s: nil communicator: use Instance.CommWorld, CommSelf, or one made from them", op)
	}
	if c.inst.down.Load() {
		return mpierr.Errorf(mpierr.ErrComm, "mpi: %s on %s: the instance is finalized", op, c.name)
	}
	if c.freed.Load() {
		return mpierr.Errorf(mpierr.ErrComm, "mpi: %s on %s: the communicator was freed", op, c.name)
	}
	return nil
}
