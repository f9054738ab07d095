// Package llp declares the low-latency path framework of Fujitsu's K
// computer MPI: a way to send a small blocking message at once, with no
// request object, that may refuse with ErrNotAvailable so that the PML takes
// its normal path. An instance may use no LLP at all (multi select, empty
// allowed).
//
// # Who calls what
//
//  1. Query, by package mpi in Init, after the btl framework's Select and
//     before the modex fence: make the module and publish what peers need
//     to reach it (rt.Modex().PutProc/PutNode).
//  2. AddProcs, once, by ob1 as it is made (after the fence and the BML):
//     say which ranks the module reaches; it reads the peers' business
//     cards here. ob1 also looks for MessagePeeker then.
//  3. RegisterRecv, once, by ob1 right after, before the first Progress:
//     the callback that receives what peers sent. A module that is no
//     peer's LLP (it reaches none, or an earlier module reaches them all)
//     gets no RegisterRecv and no Send or Progress: only Finalize.
//  4. Send (by ob1's blocking Send, many goroutines at once) and Progress
//     (by the instance's progress engine, inside pml.Module.Progress, many
//     goroutines at once); Peek and Done in blocking receives.
//  5. Finalize, by package mpi in Instance.Finalize, after the PML's and
//     before the BTLs'.
//
// # How the PML (ob1) uses it
//
// ob1 offers a message to the LLP only for a blocking send (never Isend) in
// standard, buffered or ready mode (never synchronous), whose payload is
// shorter than pml_ob1_llp_max_payload_size, to a peer other than itself that
// the module reaches (the first selected module that reaches a peer is that
// peer's LLP), when no earlier send to that peer is queued and the BTLs
// have not found the peer lost. The header is ob1's 16-byte match header
// carrying the next sequence number of the (communicator, peer) pair; ob1
// holds that pair's send lock across the attempt, so no other message to
// the peer takes a sequence number meanwhile. On nil the message is sent
// and the sequence advances; on ErrNotAvailable ob1 sends the same message,
// with the same sequence number, through the BTLs. Messages of one peer
// thus arrive by two paths in any relative order, and ob1's receiver
// restores MPI order from the sequence numbers: an LLP need not order its
// messages with the BTLs', only deliver each exactly once.
package llp

import (
	"github.com/gompi/gompi/mca"
	"github.com/gompi/gompi/mpierr"
	"github.com/gompi/gompi/rte"
)

// Framework is the llp framework's declaration.
var Framework = &mca.Framework{
	Name:        "llp",
	Description: "Low-latency path: immediate sends of small blocking messages, with fall-back to the PML",
	API:         mca.Version{Major: 1, Minor: 0, Patch: 0},
	Selection:   mca.MultiSelect,
	AllowEmpty:  true,
	Check:       mca.Implements[Component](),
}

func init() { mca.RegisterFramework(Framework) }

// ErrNotAvailable is returned by an LLP that cannot send a message at once;
// the caller then takes the PML's normal path. Nothing was sent.
var ErrNotAvailable = mpierr.Errorf(mpierr.ErrPending, "llp: not available")

// RecvFunc receives one message: the header and payload the sender passed to
// Send, concatenated. msg is valid only during the call (it may point into
// the slot): the PML copies what it keeps. src is the sender's world rank.
// The callback runs on the goroutine that called Progress; it may send (LLP
// or BTL), never call Progress.
type RecvFunc func(src int, msg []byte)

// Module is one LLP of one instance.
type Module interface {
	// Name is the component's name, for logs.
	Name() string

	// AddProcs is called once, after the modex fence of Init, with every
	// rank of the job (this process's own included). It returns, per rank,
	// whether the module reaches it. ob1 never offers it a send to its own
	// rank.
	AddProcs(ranks []int) ([]bool, error)

	// RegisterRecv installs the PML's callback, before any traffic.
	RegisterRecv(fn RecvFunc)

	// Send delivers hdr followed by payload to peer (a world rank the module
	// reaches) at once: it copies both into a slot the peer polls before it
	// returns nil. When it cannot do so at once (no free slot, message too
	// large for a slot, peer not ready) it returns ErrNotAvailable, having
	// sent nothing. Any other error (the peer is lost) fails the send. Safe
	// for concurrent use; it never blocks and never calls back into the PML.
	Send(peer int, hdr, payload []byte) error

	// Progress delivers what peers wrote into this process's slots to the
	// callback and returns the number of messages delivered. It never
	// blocks; a call that finds another goroutine progressing may return 0
	// at once.
	Progress() int

	// Finalize releases the module's resources. No other call follows it.
	Finalize() error
}

// MessagePeeker is an optional interface of a Module, for ob1's receive fast
// path: a blocking receive that waits for one peer looks at that peer's
// next message itself and, when it is the one it waits for, takes it in
// place, with no request and no trip through Progress and the matching
// queues.
//
// ob1 looks for it once, when it is made (after AddProcs), on the module
// that is each peer's LLP. If that module does not implement
// MessagePeeker, blocking receives from the peer do not peek at the LLP:
// its messages reach ob1 through Progress and the RecvFunc (a BTL's
// btl.FragmentPeeker may still serve the fast path).
type MessagePeeker interface {
	// Peek returns the next message from src (a world rank), the PML's
	// header and payload as Send wrote them, without taking it. It returns
	// false at once when none is published or another goroutine is
	// receiving on the module. On true the module's receiving side is held
	// until Done, and msg is valid until then; the caller must call Done.
	// An idle Peek may take and drop the lock: a look at mapped memory must
	// not race with Finalize's unmapping.
	Peek(src int) (msg []byte, ok bool)
	// Done ends a successful Peek: consume frees the message (the caller
	// took it); otherwise it stays for Progress to deliver.
	Done(src int, consume bool)
}

// Component is what an llp component implements.
type Component interface {
	mca.Component
	// Query is called once per instance, after Open and before the modex
	// fence of Init. It returns the component's module, or an error wrapping
	// mca.ErrDeclined.
	Query(b *mca.Base, rt *rte.Runtime) (Module, error)
}

// Select returns the modules of every LLP the instance uses; none is fine.
func Select(b *mca.Base, rt *rte.Runtime) ([]mca.Selected[Module], error) {
	return mca.Select(b, Framework, func(c mca.Component) (int, Module, error) {
		m, err := c.(Component).Query(b, rt)
		return 0, m, err
	})
}
