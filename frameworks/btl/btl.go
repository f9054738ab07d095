// Package btl declares the byte transfer layer framework: moving fragments
// between two processes. An instance uses every BTL that does not decline
// (multi select); per peer, the BML (bml.go) keeps the BTLs that reach it,
// ordered by exclusivity and then latency, not by priority.
//
// A BTL knows nothing of MPI: it moves fragments (a header and a payload,
// copied in by the sender, delivered to a callback chosen by a tag) in order
// per peer, and, optionally, moves large buffers with one copy (RDMA).
//
// # Who calls what
//
// Package mpi sets the layer up in Init, in this order:
//
//  1. Select, after the group framework's selection: every btl component
//     that the btl parameter keeps is opened (mca.Opener) and queried.
//     Query makes the module and publishes what peers need to reach it
//     (rt.Modex().PutProc or PutNode: tcp its addresses, shm its control
//     segment), or declines; every module that does not decline is used.
//  2. The llp framework's selection, then the modex fence: every rank's
//     business cards are out.
//  3. NewBML: for each module, Attributes (checked against RDMA, see
//     Flags), then AddProcs, once, with every rank of the job, its own
//     included; the module reads its peers' cards and returns an endpoint
//     per rank it reaches (tcp's connections and shm's rings are made on
//     first use). Per rank the BML keeps the routes of the highest
//     exclusivity (table below), lowest latency first; a rank that no
//     module reaches fails Init. From here on a failed Init finalizes
//     every module.
//  4. pml.Select, with the BML. ob1, as it is made and so before the
//     first Progress, registers through the BML its receive callbacks
//     (BML.RegisterRecv, one per PML tag), its steer for rendezvous
//     fragments (BML.RegisterSteer, on the modules that are Steerers) and
//     its lost-peer callback (BML.RegisterError, which tells the runtime
//     first), and looks for FragmentPeeker.
//
// Until Finalize the PML calls, from many goroutines at once: Send on the
// route it picks (Peer.Send[0]; eager messages take a peer's routes in turn
// when there are several); the RDMA calls for large messages (Expose by the
// sender, Get by the receiver); Peek and Done in blocking receives. Nothing
// in gompi calls Sendi today (tests and benchmarks do). The instance's
// progress engine calls Progress on every module (BML.Progress, inside
// pml.Module.Progress), and the callbacks run only there, on the goroutine
// that called it: a fragment that arrives before its callback is
// registered waits in the module, and a lost peer is reported from
// Progress, never from inside a Send whose caller may hold locks the
// callback takes.
//
// Tools and benchmarks (package mpi's Instance.TransportStats) read the
// send counts of the modules that keep them (SendCounter, through
// BML.SendCounts) at any time, concurrently with all of this.
//
// Finalize: Instance.Finalize, after its closing barrier, finalizes the
// communicators' coll tables, the PML and the LLPs, then BML.Finalize
// finalizes every module, and then the Base closes the components
// (mca.Closer). No call reaches a module after its Finalize.
//
// # Exclusivity
//
// The defaults of btl_<name>_exclusivity and btl_<name>_latency, and whom
// each BTL reaches:
//
//	BTL   exclusivity  latency  reaches
//	self        65536        0  this process only
//	shm         65536        1  the other processes of its node (declines when alone there)
//	tcp           100       10  every other process with a usable address, loopback included
//
// So a process reaches itself through self, the processes of its node
// through shm, and the others through tcp; with shm excluded (--mca btl
// ^shm) its node's processes go through tcp too.
package btl

import (
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/gompi/gompi/mca"
	"github.com/gompi/gompi/mpierr"
	"github.com/gompi/gompi/params"
	"github.com/gompi/gompi/release"
	"github.com/gompi/gompi/rte"
)

// Framework is the btl framework's declaration.
var Framework = &mca.Framework{
	Name:        "btl",
	Description: "Byte transfer layer: moves fragments between two processes",
	API:         mca.Version{Major: 1, Minor: 0, Patch: 0},
	Selection:   mca.MultiSelect,
	Check:       mca.Implements[Component](),
}

func init() { mca.RegisterFramework(Framework) }

// Tag routes an incoming fragment to the callback registered for it. The
// high bits say who owns a tag, as in Open MPI.
type Tag uint8

// Tag ranges.
const (
	TagBTL  Tag = 0x20 // BTL-internal messages, 0x20–0x3f
	TagPML  Tag = 0x40 // the PML, 0x40–0x7f
	TagUser Tag = 0x80 // tests and tools, 0x80–0xff
)

// Flags say which optional operations a module (or an endpoint) offers.
// FlagGet and FlagPut and the RDMA interface are one signal said twice, and
// NewBML checks that they agree: a module whose attributes have either flag
// implements RDMA, a module that implements RDMA has at least one of them,
// and an endpoint offers no flag its module lacks. Otherwise Init fails
// with an ErrIntern error naming the module.
type Flags uint32

const (
	// FlagGet: the module's RDMA.Get reads a peer's exposed buffer with
	// one copy.
	FlagGet Flags = 1 << iota
	// FlagPut: the module's RDMA.Put writes into one.
	FlagPut
)

func (f Flags) String() string {
	var names []string
	for _, n := range []struct {
		f    Flags
		name string
	}{{FlagGet, "FlagGet"}, {FlagPut, "FlagPut"}} {
		if f&n.f != 0 {
			names = append(names, n.name)
			f &^= n.f
		}
	}
	if f != 0 {
		names = append(names, fmt.Sprintf("%#x", uint32(f)))
	}
	if len(names) == 0 {
		return "no flags"
	}
	return strings.Join(names, "|")
}

// Attributes describe a module. The BML orders the modules that reach a peer
// by Exclusivity (highest first; only the highest are used) and then Latency.
type Attributes struct {
	// Name is the component's name (self, shm, tcp).
	Name string
	// Exclusivity: when several modules reach a peer, only those of the
	// highest exclusivity carry its traffic (self and shm 65536, tcp 100).
	Exclusivity int
	// Latency is the approximate one-way latency in microseconds, for
	// ordering modules of equal exclusivity.
	Latency int
	// Bandwidth is the approximate bandwidth in Mbit/s.
	Bandwidth int
	// EagerLimit is the largest fragment, header included, that the PML
	// sends without a rendezvous.
	EagerLimit int
	// RndvEagerLimit is the largest first fragment, header included, of a
	// rendezvous: the part of a large message sent before the receiver
	// answers (Open MPI's btl_rndv_eager_limit). At most EagerLimit.
	RndvEagerLimit int
	// MaxSendSize is the largest fragment, header included, Send accepts;
	// larger messages go by RDMA or as several fragments.
	MaxSendSize int
	// PipelineLimit is the largest message (payload bytes) above the eager
	// limit that the PML sends as fragments of MaxSendSize back to back,
	// without waiting for the receiver to match: its fragments' copies in
	// and out overlap, and no handshake or RDMA call stands before the
	// data (on shm, a system call costs as much as copying 8 KiB). 0: the
	// module does not want it (rendezvous above the eager limit).
	PipelineLimit int
	// Flags are the optional operations the module offers in general;
	// Endpoint.Flags says what it offers towards one peer.
	Flags Flags
}

// Endpoint is a module's handle for one peer it reaches. Callers treat it as
// opaque and pass it back to the module that made it.
type Endpoint interface {
	// Rank is the peer's world rank.
	Rank() int
	// Flags are the optional operations available towards this peer (an
	// RDMA mechanism may work towards some peers and not others).
	Flags() Flags
}

// RecvFunc receives one fragment: the header and payload as the sender
// passed them, concatenated. frag is valid only during the call (it may
// point into shared memory): copy what you keep. The callback runs on the
// goroutine that called Progress; it may call Send and Sendi, never
// Progress.
type RecvFunc func(src int, tag Tag, frag []byte)

// RunRecvFunc receives a run of fragments: consecutive fragments from one
// peer with one tag, in order, that a module found in one pass over the
// peer's queue. Each is valid only during the call. The same rules as
// RecvFunc's apply; a PML matches a window of small messages under one hold
// of its matching lock this way, instead of taking the lock per message.
type RunRecvFunc func(src int, tag Tag, frags [][]byte)

// RunReceiver is implemented by modules that deliver fragments in runs. A
// PML that registers a run callback for a tag registers its per-fragment
// callback too: modules without runs, and a module's other paths, use it.
type RunReceiver interface {
	RegisterRecvRun(tag Tag, fn RunRecvFunc)
}

// ErrorFunc is told that a peer can no longer be reached: it disconnected or
// died. Operations towards it fail from then on.
type ErrorFunc func(rank int, err error)

// Errors of the byte transfer layer.
var (
	// ErrWouldBlock: the module has no room for the fragment now; retry
	// after Progress. Nothing was sent.
	ErrWouldBlock = mpierr.Errorf(mpierr.ErrPending, "btl: no room to send now")
	// ErrPeerLost is wrapped by the errors of operations towards a peer that
	// disconnected or died.
	ErrPeerLost = mpierr.Errorf(mpierr.ErrProcAborted, "btl: peer lost")
	// ErrUnreachable: no selected BTL reaches a peer.
	ErrUnreachable = mpierr.Errorf(mpierr.ErrUnsupportedOp, "btl: peer unreachable")
	// ErrNoRDMA: Get or Put is not available towards this peer; send
	// fragments instead.
	ErrNoRDMA = mpierr.Errorf(mpierr.ErrUnsupportedOp, "btl: no single-copy path to this peer")
	// ErrTooLarge: a fragment exceeds MaxSendSize.
	ErrTooLarge = mpierr.Errorf(mpierr.ErrCount, "btl: fragment larger than the module's max send size")
)

// Module is one BTL of one instance. Send, Sendi, Progress and the RDMA
// calls are safe for concurrent use by several goroutines.
type Module interface {
	// Attributes describe the module; they do not change after Query.
	Attributes() Attributes

	// AddProcs is called once, at Init after the modex fence, with every
	// rank of the job (this process's own included). It returns, per rank,
	// an endpoint when the module reaches it and nil when it does not.
	// What can wait is set up lazily, on first use (tcp's connections,
	// shm's rings).
	AddProcs(ranks []int) ([]Endpoint, error)

	// RegisterRecv installs the callback for tag, before any traffic. A tag
	// has one callback; registering it twice panics.
	RegisterRecv(tag Tag, fn RecvFunc)

	// RegisterError installs the callback told of lost peers.
	RegisterError(fn ErrorFunc)

	// Send delivers one fragment, hdr followed by payload, to ep, after the
	// fragments sent to ep before it (per-peer order). It copies both slices
	// before it returns. It returns ErrWouldBlock when it has no room now (the
	// caller retries after Progress), ErrTooLarge above MaxSendSize, or an
	// error wrapping ErrPeerLost.
	Send(ep Endpoint, tag Tag, hdr, payload []byte) error

	// Sendi is Send's immediate form for small fragments: it delivers at once,
	// without queuing, and returns true, or does nothing and returns false.
	Sendi(ep Endpoint, tag Tag, hdr, payload []byte) bool

	// Progress moves data: it delivers arrived fragments to their callbacks
	// and pushes queued output. It returns the number of fragments delivered.
	// It never blocks; a call that finds another goroutine progressing the
	// module may return 0 at once.
	Progress() int

	// Finalize releases the module's resources. No other call follows it.
	Finalize() error
}

// RDMA is an optional interface of a Module: large buffers move with one
// copy instead of as fragments. It goes with FlagGet and FlagPut, which say
// to whom it works (see Flags; NewBML rejects a module where they disagree).
//
// The PML (ob1) looks for it per large message: a sender whose peer has a
// route in Peer.RDMA whose endpoint offers FlagGet Exposes the buffer and
// sends the description in its rendezvous header; the receiver Gets it
// through the route of the BTL named there. If no module that carries a
// peer's traffic implements RDMA (or pml_ob1_use_rdma is off), large
// messages to that peer go as a rendezvous of pipelined fragments instead,
// and so does one whose Get fails with ErrNoRDMA. Nothing in gompi calls
// Put today; a module implements it for the interface.
type RDMA interface {
	// Expose describes buf so that a peer can Get from it (or Put into it)
	// through this module; the description travels in a PML header. buf
	// must stay alive and unchanged until the peer is done.
	Expose(buf []byte) []byte
	// Get copies len(dst) bytes, from offset off of the memory desc
	// describes, into dst. It returns an error wrapping ErrNoRDMA when the
	// path is not available (the caller falls back to fragments).
	Get(ep Endpoint, desc []byte, off int, dst []byte) error
	// Put copies src to offset off of the memory desc describes.
	Put(ep Endpoint, desc []byte, off int, src []byte) error
}

// AppendExposer is an optional interface of an RDMA module: Expose's
// description appended to dst, so that a PML that keeps room for it in its
// request allocates nothing per message (garbage per message grows the heap,
// and on the paravirtualized machines gompi runs on the page faults of a
// growing heap cost more than an RGET's software path).
type AppendExposer interface {
	AppendExpose(dst, buf []byte) []byte
}

// FragmentPeeker is an optional interface of a Module, for the PML's
// receive fast path: a blocking receive that waits for one peer looks at
// the next fragment from that peer itself and, when it is the message it
// waits for, takes it in place, with no trip through Progress and the
// callbacks.
//
// ob1 looks for it once, when it is made (after AddProcs), for every peer
// but itself whose traffic one module alone carries (several stripe eager
// messages, and then only Progress sees them all). If that module does not
// implement FragmentPeeker, blocking receives from the peer do not peek at
// the BTL: its fragments reach the PML through Progress and the RecvFunc
// (an LLP's MessagePeeker may still serve the fast path).
type FragmentPeeker interface {
	// Peek returns the next fragment from the peer of ep, with its tag,
	// without taking it. It returns false at once when none is there or
	// another goroutine is receiving on the module. On true the module's
	// receiving side is held until Done, and frag is valid until then; the
	// caller must call Done. An idle Peek may take and drop the lock: a
	// look at mapped memory must not race with Finalize's unmapping.
	Peek(ep Endpoint) (tag Tag, frag []byte, ok bool)
	// Done ends a successful Peek: consume frees the fragment (the caller
	// took it); otherwise it stays for Progress to deliver.
	Done(ep Endpoint, consume bool)
}

// Steer lets a module that reads fragments from a byte stream (tcp) put a
// large payload straight where it belongs, instead of reading it into its
// own buffer for the PML to copy: one copy fewer per byte. For fragments of
// the tag it was registered for, once the first HdrLen bytes (the PML's
// header) are in and at least Min bytes of payload follow, the module calls
// Where; a non-nil answer of exactly n bytes is where the payload goes, and
// Placed is called once it is all there, instead of the tag's RecvFunc. A
// nil answer delivers the fragment as usual. Both run inside Progress; hdr
// is valid only during the call.
//
// The destination is a user's receive buffer, which the PML may take back
// before the payload is all there (the sender was found lost by another
// path, and the receive failed): the module writes into it only between
// g.Enter and g.Exit of the Guard that Where returns, and when Enter says
// no, it reads the rest of the payload into its own space, drops it, and
// does not call Placed.
type Steer struct {
	HdrLen, Min int
	Where       func(src int, hdr []byte, n int) (dst []byte, g *Guard)
	Placed      func(src int, hdr []byte, n int)
}

// Guard keeps a module from writing into a buffer the PML has taken back.
// The zero value lets writers in.
type Guard struct {
	mu        sync.Mutex
	withdrawn bool
}

// Enter reports whether the buffer may still be written; on true the
// writer holds the guard until Exit, and must not call into the PML
// meanwhile.
func (g *Guard) Enter() bool {
	g.mu.Lock()
	if g.withdrawn {
		g.mu.Unlock()
		return false
	}
	return true
}

// Exit ends a write that Enter let in.
func (g *Guard) Exit() { g.mu.Unlock() }

// Withdraw takes the buffer back: it waits for a write in progress to end,
// and every Enter after it says no.
func (g *Guard) Withdraw() {
	g.mu.Lock()
	g.withdrawn = true
	g.mu.Unlock()
}

// Withdrawn reports whether Withdraw was called. A module may still hold
// the guard's address then: the PML must not reuse it for another buffer.
func (g *Guard) Withdrawn() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.withdrawn
}

// Steerer is an optional interface of a Module: it takes Steers.
//
// BML.RegisterSteer looks for it on every module in use; ob1 calls that
// once, when it is made, for its rendezvous fragments. If a module does
// not implement Steerer, RegisterSteer skips it: its fragments of the tag
// reach the tag's RecvFunc as any other, and the PML copies the payload
// out of them (one copy more per byte).
type Steerer interface {
	RegisterSteer(tag Tag, s Steer)
}

// SendCounts are a module's counts of what it sent since it was made, for
// every peer together.
type SendCounts struct {
	// Frames counts the fragments Send and Sendi accepted (each one
	// message on the wire: a PML fragment, an eager message, a rendezvous
	// header, an acknowledgement), whether written at once or queued; a
	// refused Sendi or a Send that returned an error is not counted.
	Frames uint64
	// Bytes is the sum of their lengths as the caller gave them, header
	// plus payload; the module's own framing is not included.
	Bytes uint64
}

// HeldSender is an optional interface of a Module whose Send serializes the
// senders of an endpoint with a lock of its own (shm's ring producer). A PML
// that guards its own per-peer send state with a lock (ob1's sequence
// numbers) may use the endpoint's lock for it instead, and send with
// SendHeld while it holds it: a message then costs one locked instruction
// on the sender, not two, where that instruction is most of a small
// message's software cost (the compare-and-swap waits for every store
// before it, a ring record's among them, to leave the core).
//
// ob1 looks for it once per communicator and peer, on the peer's eager
// route. A PML that holds SendLock(ep) must not call Send or Sendi towards
// ep (they take the lock: a goroutine would wait for itself), nor
// Progress on any module (a receive callback may send towards ep), and
// must hold it for no longer than its bookkeeping of a send: other senders
// to the peer, of every communicator, wait for it. Send and Sendi stay
// safe for callers that do not hold the lock; they take it.
type HeldSender interface {
	// SendLock returns the lock that serializes sends towards ep; the same
	// lock for the endpoint's life.
	SendLock(ep Endpoint) *release.Mutex
	// SendHeld is Send for a caller that holds SendLock(ep): the same
	// order, copies, errors and ErrWouldBlock.
	SendHeld(ep Endpoint, tag Tag, hdr, payload []byte) error
}

// SendCounter is an optional interface of a Module: it counts what it
// sends, so that tools and benchmarks can report messages and bytes per
// operation (counted, not estimated). The counts only grow; take the
// difference of two readings for an interval.
//
// BML.SendCounts looks for it on every module in use; package mpi's
// Instance.TransportStats returns that, by BTL name. If a module does not
// implement SendCounter, it is left out: its traffic is not reported (not
// reported as zero). Counting must be cheap enough to stay on in
// production (an uncontended atomic add per fragment or less): SendCounts
// may be called at any time, from any goroutine, concurrently with Send,
// and with no other call in progress; it takes no lock that Send holds for
// long.
type SendCounter interface {
	SendCounts() SendCounts
}

// Component is what a btl component implements.
type Component interface {
	mca.Component
	// Query is called once per instance, after Open and before the modex
	// fence of Init: a module publishes its business card with
	// rt.Modex().PutProc or PutNode here, and reads its peers' in AddProcs.
	// It returns the module, or an error wrapping mca.ErrDeclined.
	Query(b *mca.Base, rt *rte.Runtime) (Module, error)
}

// Reacher is implemented by a module that knows at Query, before the
// modex, which ranks it will reach: AddProcs gives each of them an endpoint,
// or fails. self reaches this process, shm the other ranks of its node.
type Reacher interface {
	Reaches(rank int) bool
}

// Select queries every btl component the instance may use. A component
// is not queried, and declines, when the modules queried before it reach
// every rank of the job with a higher exclusivity than its own, unless one
// of its parameters is set: the BML would give it no peer (the rule of
// NewBML, applied before the modex), and its Query may cost much (tcp's:
// the interfaces over netlink, a listening socket, an accept goroutine:
// `mpirun -np 2 hello` took 15.1 ms with it, 12.9 without).
func Select(b *mca.Base, rt *rte.Runtime) ([]mca.Selected[Module], error) {
	var reachers []outranking
	return mca.Select(b, Framework, func(c mca.Component) (int, Module, error) {
		name := c.Info().Name
		if excl, ok := exclusivityOf(b, name); ok && !configured(b, name) {
			if by := outrankedEverywhere(reachers, excl, rt.Job().Size); by != nil {
				return 0, nil, mca.Decline("not opened: every rank of the job is reached by btl %s, whose exclusivity is above %s's %d",
					strings.Join(by, " and "), name, excl)
			}
		}
		m, err := c.(Component).Query(b, rt)
		if err == nil && m != nil {
			if r, ok := m.(Reacher); ok {
				a := m.Attributes()
				reachers = append(reachers, outranking{name: a.Name, excl: a.Exclusivity, r: r})
			}
		}
		return 0, m, err
	})
}

// outranking is a module queried so far that says what it reaches.
type outranking struct {
	name string
	excl int
	r    Reacher
}

// configured says whether a btl_<name>_ parameter is set anywhere but in
// its default: a component the user set up is queried, so that what its
// Query checks is checked (a bad btl_tcp_if_include is an error on one
// node too).
func configured(b *mca.Base, name string) bool {
	prefix := "btl_" + name + "_"
	for _, p := range b.Catalog().Params().Params() {
		if strings.HasPrefix(p.Name(), prefix) && b.Get(p).Source.Kind != params.FromDefault {
			return true
		}
	}
	return false
}

// exclusivityOf is the btl_<name>_exclusivity a component registered.
func exclusivityOf(b *mca.Base, name string) (int, bool) {
	p, ok := b.Catalog().Params().Lookup("btl_" + name + "_exclusivity")
	if !ok {
		return 0, false
	}
	return int(b.Get(p).Uint()), true
}

// outrankedEverywhere returns the modules that together reach every one of
// size ranks with an exclusivity above excl, or nil when some rank has none.
func outrankedEverywhere(reachers []outranking, excl, size int) []string {
	if len(reachers) == 0 {
		return nil
	}
	used := map[string]bool{}
	var names []string
	for r := 0; r < size; r++ {
		found := false
		for _, o := range reachers {
			if o.excl > excl && o.r.Reaches(r) {
				if !used[o.name] {
					used[o.name] = true
					names = append(names, o.name)
				}
				found = true
				break
			}
		}
		if !found {
			return nil
		}
	}
	sort.Strings(names)
	return names
}

// CommonParams are the parameters every BTL has, registered by
// RegisterCommon.
type CommonParams struct {
	Exclusivity, EagerLimit, RndvEagerLimit, MaxSendSize, Latency, Bandwidth *params.Param
}

// Defaults of a BTL's common parameters. RndvEagerLimit 0 means
// EagerLimit.
type Defaults struct {
	Exclusivity, EagerLimit, RndvEagerLimit, MaxSendSize, Latency, Bandwidth int
}

// RegisterCommon registers btl_<name>_exclusivity, _eager_limit,
// _rndv_eager_limit, _max_send_size, _latency and _bandwidth for a
// component.
func RegisterCommon(r *mca.Registrar, name string, d Defaults) CommonParams {
	p := "btl_" + name + "_"
	if d.RndvEagerLimit == 0 {
		d.RndvEagerLimit = d.EagerLimit
	}
	return CommonParams{
		Exclusivity: r.Add(params.Def{Name: p + "exclusivity", Type: params.Uint, Level: 7, Default: fmt.Sprint(d.Exclusivity),
			Help: "When several BTLs reach a peer, only those of the highest exclusivity carry its traffic"}),
		EagerLimit: r.Add(params.Def{Name: p + "eager_limit", Type: params.Size, Level: 4, Default: fmt.Sprint(d.EagerLimit),
			Help: "Largest message (header included) sent without a rendezvous, in bytes; at most " + p + "max_send_size " +
				"(left at its default, it is lowered to a smaller max_send_size)"}),
		RndvEagerLimit: r.Add(params.Def{Name: p + "rndv_eager_limit", Type: params.Size, Level: 4, Default: fmt.Sprint(d.RndvEagerLimit),
			Help: "Largest first fragment (header included) of a rendezvous, sent before the receiver answers, in bytes; " +
				"at most " + p + "eager_limit (left at its default, it is lowered to a smaller eager_limit)"}),
		MaxSendSize: r.Add(params.Def{Name: p + "max_send_size", Type: params.Size, Level: 4, Default: fmt.Sprint(d.MaxSendSize),
			Help: "Largest fragment (header included), in bytes; larger messages go by RDMA or as several fragments"}),
		Latency: r.Add(params.Def{Name: p + "latency", Type: params.Uint, Level: 5, Default: fmt.Sprint(d.Latency),
			Help: "Approximate one-way latency in microseconds, to order BTLs of equal exclusivity"}),
		Bandwidth: r.Add(params.Def{Name: p + "bandwidth", Type: params.Uint, Level: 5, Default: fmt.Sprint(d.Bandwidth),
			Help: "Approximate bandwidth in Mbit/s"}),
	}
}

// Attributes reads the common parameters into attributes, checking that
// they make sense together.
func (c CommonParams) Attributes(b *mca.Base, name string, flags Flags) (Attributes, error) {
	a := Attributes{
		Name:           name,
		Exclusivity:    int(b.Get(c.Exclusivity).Uint()),
		EagerLimit:     int(b.Get(c.EagerLimit).Uint()),
		RndvEagerLimit: int(b.Get(c.RndvEagerLimit).Uint()),
		MaxSendSize:    int(b.Get(c.MaxSendSize).Uint()),
		Latency:        int(b.Get(c.Latency).Uint()),
		Bandwidth:      int(b.Get(c.Bandwidth).Uint()),
		Flags:          flags,
	}
	const minFrag = 256 // room for any PML header and some payload
	if ev := b.Get(c.EagerLimit); ev.Source.Kind == params.FromDefault && a.EagerLimit > a.MaxSendSize {
		// The same for a user who lowered max_send_size alone.
		a.EagerLimit = a.MaxSendSize
	}
	if rv := b.Get(c.RndvEagerLimit); rv.Source.Kind == params.FromDefault && a.RndvEagerLimit > a.EagerLimit {
		// A user who lowered eager_limit alone gets a first fragment that
		// fits, not an error about a parameter they did not set.
		a.RndvEagerLimit = a.EagerLimit
	}
	switch {
	case a.MaxSendSize < minFrag || a.MaxSendSize > 1<<30:
		return a, mpierr.Errorf(mpierr.ErrUnsupportedParam, "btl_%s_max_send_size = %d: accepted: %d to %d", name, a.MaxSendSize, minFrag, 1<<30)
	case a.EagerLimit < minFrag || a.EagerLimit > a.MaxSendSize:
		return a, mpierr.Errorf(mpierr.ErrUnsupportedParam, "btl_%s_eager_limit = %d: accepted: %d to btl_%s_max_send_size (%d)",
			name, a.EagerLimit, minFrag, name, a.MaxSendSize)
	case a.RndvEagerLimit < minFrag || a.RndvEagerLimit > a.EagerLimit:
		return a, mpierr.Errorf(mpierr.ErrUnsupportedParam, "btl_%s_rndv_eager_limit = %d: accepted: %d to btl_%s_eager_limit (%d)",
			name, a.RndvEagerLimit, minFrag, name, a.EagerLimit)
	}
	return a, nil
}
