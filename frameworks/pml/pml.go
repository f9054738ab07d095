// Package pml declares the point-to-point messaging layer framework: MPI
// matching and protocols on top of the byte transfer layer. An instance uses
// exactly one PML (single select); ob1 is the one gompi has.
//
// # Who calls what
//
// Package mpi selects the PML in Instance setup, after the BML exists, with
// Select. It then registers each communicator with AddComm before any traffic
// on it, and calls the Module's send, receive and probe methods with the
// communicator, Go slices, ranks in the communicator and tags. It validates
// every argument first (ranks in 0..size-1, tags, a live communicator) and
// handles ProcNull itself, so a PML may assume valid arguments. Requests,
// statuses and matched messages are the types of this package; package mpi
// re-exports them.
//
// Tags: user tags are 0..MaxTag. Negative tags other than AnyTag are reserved
// for gompi's own traffic on a communicator (collectives); AnyTag in a receive
// matches only tags >= 0, so internal messages are never taken by a user's
// wildcard receive.
//
// Progress: every wait in the instance goes through the module's Engine
// (wait.go), which calls Module.Progress (all BTLs, all LLPs, the PML's own
// queued work) and, when nothing moves, polls, yields or sleeps by one
// policy.
package pml

import (
	"fmt"

	"github.com/gompi/gompi/frameworks/btl"
	"github.com/gompi/gompi/frameworks/group"
	"github.com/gompi/gompi/frameworks/llp"
	"github.com/gompi/gompi/mca"
	"github.com/gompi/gompi/rte"
)

// Framework is the pml framework's declaration.
var Framework = &mca.Framework{
	Name:        "pml",
	Description: "Point-to-point messaging: MPI matching and protocols over the BTLs",
	API:         mca.Version{Major: 1, Minor: 0, Patch: 0},
	Selection:   mca.SingleSelect,
	Check:       mca.Implements[Component](),
	Params:      waitParams,
}

func init() { mca.RegisterFramework(Framework) }

// Special ranks and tags. The values are Open MPI's.
const (
	// AnySource in a receive or probe matches a message from any rank.
	AnySource = -1
	// ProcNull as a peer makes a send or receive complete at once, moving
	// nothing.
	ProcNull = group.ProcNull
	// AnyTag in a receive or probe matches any tag >= 0.
	AnyTag = -1
	// MaxTag is the largest tag a user may send with (MPI_TAG_UB): tags
	// travel as 32-bit integers.
	MaxTag = 1<<31 - 1
	// Undefined is MPI_UNDEFINED: the index Waitany returns when it has no
	// active request.
	Undefined = group.Undefined
)

// SendMode is MPI's send mode.
type SendMode uint8

const (
	// Standard: the send completes when the buffer may be reused; small
	// messages go at once (eager), large ones wait for the receiver
	// (rendezvous).
	Standard SendMode = iota
	// Buffered: the message is copied into the buffer attached with
	// BufferAttach when it cannot go at once; the send never waits for
	// the receiver.
	Buffered
	// Synchronous: the send completes only once the receiver has matched
	// the message.
	Synchronous
	// Ready: the receiver has already posted its receive (the caller
	// promises it); gompi treats it as Standard.
	Ready
)

func (m SendMode) String() string {
	switch m {
	case Standard:
		return "standard"
	case Buffered:
		return "buffered"
	case Synchronous:
		return "synchronous"
	case Ready:
		return "ready"
	}
	return fmt.Sprintf("SendMode(%d)", uint8(m))
}

// Comm is the record of a communicator that the PML keeps. Package mpi makes
// it and passes it to every call; the PML fills State in AddComm.
type Comm struct {
	// CID is the context id: 0 for the world, 1 for self. Every process of
	// the communicator uses the same id for it.
	CID uint16
	// Group maps communicator ranks to world ranks; the PML looks peers up
	// with Group.World on every message.
	Group *group.Group
	// Rank is this process's rank in Group, and Size the group's size.
	// On an intercommunicator (Local set) Group is the remote group, in
	// which peers are addressed, Size its size, and Rank this process's
	// rank in Local: what the remote side sees as the source.
	Rank, Size int
	// Local is an intercommunicator's local group; nil on an
	// intracommunicator.
	Local *group.Group
	// State is the PML's per-communicator state, set by AddComm.
	State any
}

// Scope is which of a communicator's operations Interrupt ends: by tag.
type Scope uint8

const (
	// ScopeCollective covers gompi's own traffic on the communicator
	// (negative tags other than AnyTag): its collectives.
	ScopeCollective Scope = 1 << iota
	// ScopePointToPoint covers the user's tags (0..MaxTag, and AnyTag in
	// receives).
	ScopePointToPoint
	// ScopeAll covers both.
	ScopeAll = ScopeCollective | ScopePointToPoint
)

// Covers reports whether s covers an operation with tag.
func (s Scope) Covers(tag int) bool {
	if tag >= 0 || tag == AnyTag {
		return s&ScopePointToPoint != 0
	}
	return s&ScopeCollective != 0
}

// Module is a selected PML: one per instance. Every method is safe for
// concurrent use by several goroutines. Arguments are valid (see the package
// comment); buffers belong to the PML from the call until the operation
// completes.
type Module interface {
	// AddComm prepares the PML for traffic on c; DelComm forgets it.
	AddComm(c *Comm) error
	DelComm(c *Comm) error

	// Send sends buf to rank dst of c and returns when buf may be reused.
	// It is the only entry that may use an LLP (small messages in standard,
	// buffered or ready mode to a peer other than oneself).
	Send(c *Comm, buf []byte, dst, tag int, mode SendMode) error
	// Isend starts a send; the request completes when buf may be reused
	// (and, in synchronous mode, the receiver has matched).
	Isend(c *Comm, buf []byte, dst, tag int, mode SendMode) (*Request, error)

	// Recv receives into buf a message from src (or AnySource) with tag (or
	// AnyTag), and returns the message's source and tag and the bytes
	// received. A longer message fills buf and fails with ErrTruncate.
	Recv(c *Comm, buf []byte, src, tag int) (Envelope, error)
	// Irecv starts a receive.
	Irecv(c *Comm, buf []byte, src, tag int) (*Request, error)

	// Iprobe reports whether a message matching (src, tag) has arrived,
	// without receiving it. Probe waits for one.
	Iprobe(c *Comm, src, tag int) (Status, bool, error)
	Probe(c *Comm, src, tag int) (Status, error)
	// Improbe is Iprobe that also takes the message out of matching: only
	// Mrecv or Imrecv with the returned Message can receive it. Mprobe
	// waits for one.
	Improbe(c *Comm, src, tag int) (*Message, Status, bool, error)
	Mprobe(c *Comm, src, tag int) (*Message, Status, error)
	// Mrecv receives a message taken by Improbe or Mprobe; Imrecv starts
	// that receive.
	Mrecv(buf []byte, m *Message) (Status, error)
	Imrecv(buf []byte, m *Message) (*Request, error)

	// BufferAttach gives the PML the space buffered sends copy messages
	// into; BufferDetach waits until the buffered messages have left and
	// returns the space.
	BufferAttach(buf []byte) error
	BufferDetach() ([]byte, error)

	// LLPReaches reports whether a low-latency path reaches every rank of c
	// but this process: a small blocking Send to any of them then goes
	// straight into a slot the peer polls (the tofu coll barrier relies
	// on it).
	LLPReaches(c *Comm) bool

	// Interrupt ends with err every operation on c that s covers and that
	// has not completed (posted receives, receives and rendezvous sends
	// under way), and makes every later one fail with err at once, for the
	// communicator's life: the failure of a member (mpi fails collectives,
	// ScopeCollective) or its revocation (ScopeAll) must wake ranks that
	// wait on live peers which will never answer. Sends still queued for
	// the transport go out: a hole in a pair's sequence would stall the
	// pair's later messages. Calls add scopes; the first err of a scope
	// stays.
	Interrupt(c *Comm, s Scope, err error)
	// FailAnySource completes with err every AnySource receive with a user
	// tag posted on c (ULFM's MPI_ERR_PROC_FAILED_PENDING); later ones are
	// the caller's to refuse.
	FailAnySource(c *Comm, err error)
	// Notify sends msg to world rank w as a notice: a control message,
	// outside every communicator's matching, that the handler given to
	// OnNotice receives at w when w progresses, in the order sent. It may
	// be called from a notice handler. msg is copied; it fails when msg is
	// longer than the route's eager limit or w is lost.
	Notify(w int, msg []byte) error
	// OnNotice sets the handler of notices, before any is sent; it runs
	// inside Progress, from whichever goroutine progresses.
	OnNotice(fn func(src int, msg []byte))

	// Progress moves every transport and the PML's own queued work once; it
	// returns how many things happened (0: nothing moved).
	Progress() int
	// Engine is the instance's wait loop, on which requests wait.
	Engine() *Engine
	// Stats returns the module's counters.
	Stats() Stats
	// Finalize releases the module; no other call follows.
	Finalize() error
}

// PendingCounter is an optional interface of a Module: Pending counts the
// operations on c that have not completed for the program (receives posted
// or under way, sends waiting for their receiver). Package mpi's Comm.Free
// refuses to free a communicator that has any: a receive posted there
// would never complete once its context id is forgotten. A send that is
// complete for the program (eager, buffered) but still on its way does not
// count: it goes out after the free.
type PendingCounter interface {
	Pending(c *Comm) int
}

// Stats are a PML's counters, read with Module.Stats. The LLP counters are
// the low-latency path's hits (blocking sends that went through an LLP) and
// fall-backs (sends the LLP was offered and refused with ErrNotAvailable, which
// then took the normal path).
type Stats struct {
	LLPHits, LLPFallbacks uint64
	// Eager, Rendezvous and RGet count messages sent by each protocol
	// (Rendezvous: a first fragment then pipelined fragments; RGet: offered
	// for the receiver to read with one copy). RGetFallbacks counts RGets
	// the receiver answered by asking for fragments instead: it could not
	// read the buffer, or it measured fragments faster from this peer
	// (ob1's pml_ob1_rdma_choice).
	Eager, Rendezvous, RGet, RGetFallbacks uint64
	// Pipelined counts messages sent eagerly in several fragments, without
	// waiting for the receiver (ob1's PIPE, up to the route's
	// btl.Attributes.PipelineLimit).
	Pipelined uint64
	// Unexpected counts messages that arrived before their receive;
	// OutOfOrder those that arrived before an earlier message of the same
	// sender (by another path) and waited for it.
	Unexpected, OutOfOrder uint64
}

// Env is what a PML component is given to build its module.
type Env struct {
	Runtime *rte.Runtime
	// BML reaches every rank of the job.
	BML *btl.BML
	// LLP are the low-latency path modules the instance selected (often
	// none), in selection order.
	LLP []llp.Module
}

// Component is what a pml component implements.
type Component interface {
	mca.Component
	// Query is called once per instance, after Open and after the BML
	// exists. It returns the component's priority and its module, or an
	// error wrapping mca.ErrDeclined when it cannot serve this instance.
	Query(b *mca.Base, env *Env) (priority int, m Module, err error)
}

// Select picks the instance's PML.
func Select(b *mca.Base, env *Env) (Module, *mca.Entry, error) {
	sel, err := mca.Select(b, Framework, func(c mca.Component) (int, Module, error) {
		return c.(Component).Query(b, env)
	})
	if err != nil {
		return nil, nil, err
	}
	return sel[0].Module, sel[0].Entry, nil
}
