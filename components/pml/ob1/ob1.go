// Package ob1 is gompi's PML: MPI matching and protocols over the BTLs, with
// Fujitsu's low-latency path (LLP) tried first for small blocking sends.
//
// # Protocols (sender side, per message; hdr.go has the wire format)
//
//   - LLP: a blocking send in standard, buffered or ready mode, with a payload
//     shorter than pml_ob1_llp_max_payload_size, to a peer other than oneself
//     that an LLP reaches, is offered to the LLP first: no request object,
//     nothing queued. On llp.ErrNotAvailable the same message, with the same
//     sequence number, takes the paths below.
//   - Eager: a message that fits the eager route's eager limit with a MATCH
//     header goes in one fragment and completes at once. A non-blocking one
//     that the transport takes at once (sendi) returns a completed request
//     from a free list and makes no send request.
//   - Pipelined eager (PIPE, pipe.go): a message above the eager limit and up
//     to the route's btl.Attributes.PipelineLimit (shm: btl_shm_pipeline_limit),
//     not in synchronous mode, goes as a PIPE header with a first chunk and
//     PFRAGs of the max send size back to back, without waiting for the
//     receiver; it completes once the transport has it all. The receiver
//     places the PFRAGs by (sender, request) into the matched receive, or
//     holds them while the message is unexpected. With
//     pml_ob1_rdma_choice=measured and an RDMA route, the sender pipelines
//     only while the receiver says fragments are the cheaper (rdmachoice.go):
//     otherwise it offers an RGET, which the receiver takes as it measures.
//   - Rendezvous: otherwise (and always in synchronous mode) the sender sends
//     RNDV with a first chunk and waits for the receiver's ACK, which comes
//     after the receive matched and says which bytes it still wants; the rest
//     goes as FRAGs of the route's max send size, a few per progress pass.
//   - RGET: a message above the eager limit, when the peer's route offers
//     RDMA Get, goes as RGET carrying a description of the sender's buffer;
//     the receiver reads it with one copy straight into the receive buffer
//     and sends FIN, or (pml_ob1_rdma_choice=measured, where fragments
//     measured faster) answers with an ACK and takes FRAGs. If its Get fails
//     with btl.ErrNoRDMA it sends an ACK instead, and the rendezvous
//     continues with FRAGs.
//
// # Matching (receiver side, match.go)
//
// Per communicator, one lock guards matching. Per (communicator, peer) the
// receiver expects sequence numbers in order; a header that arrives early
// (messages of one peer can travel by the LLP and by the BTLs) is parked
// until the gap fills. An in-order header matches the earliest posted receive
// that fits (specific receives of that peer and AnySource receives, compared
// by posting order) or joins the unexpected queue. A newly posted receive
// first takes the earliest fitting unexpected message. This is MPI's
// non-overtaking rule. A blocking receive from one peer first tries the fast
// path (recv.go): it polls that peer's LLP slot and shm ring itself and
// takes the message in place when it is the one a posted request would
// have matched.
//
// Requests come from per-instance free lists; the Wait that returns a
// completed eager request gives it back.
//
// # Flow control
//
// Nothing on the send side queues without bound: a send that finds no room
// in the transport (btl.ErrWouldBlock) is queued on its peer with its
// request, and the caller (a blocking send) waits, progressing. The receiver
// drains its transports only when it progresses, which it does only while it
// waits for something that is not yet there; so what sits in its unexpected
// queue is bounded by what the transports buffer.
package ob1

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/gompi/gompi/frameworks/btl"
	"github.com/gompi/gompi/frameworks/llp"
	"github.com/gompi/gompi/frameworks/pml"
	"github.com/gompi/gompi/mca"
	"github.com/gompi/gompi/mpierr"
	"github.com/gompi/gompi/params"
	"github.com/gompi/gompi/release"
)

// Component is the ob1 PML component.
type Component struct {
	llpMax, useRDMA, pipeline, stats *params.Param
	rdmaChoice, rdmaRetry            *params.Param
}

// Info describes the component.
func (c *Component) Info() mca.Info {
	return mca.Info{Framework: "pml", Name: "ob1", Version: mca.GompiVersion, API: pml.Framework.API, Priority: 20}
}

// Register declares the component's parameters.
func (c *Component) Register(r *mca.Registrar) {
	// 544: what a slot of tofu's default size holds. With the receive fast
	// path the LLP beat the shm ring at every size up to 960 bytes in the
	// near placement (0.14 against 0.17 µs at 8 bytes, 0.21 against 0.28
	// at 512).
	c.llpMax = r.Add(params.Def{Name: "pml_ob1_llp_max_payload_size", Type: params.Size, Level: 4, Default: "544",
		Help: "Blocking sends with a payload shorter than this many bytes try the low-latency path (LLP) first; 0 never uses it"})
	c.useRDMA = r.Add(params.Def{Name: "pml_ob1_use_rdma", Type: params.Bool, Level: 5, Default: "true",
		Help: "Send messages above the eager limit by RDMA Get (the receiver reads the sender's buffer with one copy) where the BTL offers it; " +
			"otherwise as pipelined fragments"})
	c.rdmaChoice = r.Add(params.Def{Name: "pml_ob1_rdma_choice", Type: params.Enum, Level: 5, Default: "measured",
		Values: []params.EnumValue{{Value: rdmaAlways, Name: "always"}, {Value: rdmaMeasured, Name: "measured"}},
		Help: "How a receiver takes a message the sender offers by RDMA Get: always (reads the sender's buffer, one copy) or " +
			"measured (times that and asking for fragments, per peer and power-of-two size, and takes the faster; the other " +
			"is tried again now and then, pml_ob1_rdma_retry_ms). Which wins depends on where the two processes run: on 2 cores near " +
			"each other fragments took half the time from 32 KiB up, far apart twice the time, on one core longer. With measured, " +
			"messages up to the BTL's pipeline limit (btl_shm_pipeline_limit) go pipelined only while the receiver measures " +
			"fragments the faster, timed from the sender's stamp; with always, they always do"})
	c.rdmaRetry = r.Add(params.Def{Name: "pml_ob1_rdma_retry_ms", Type: params.Uint, Level: 6, Default: "100",
		Help: "With pml_ob1_rdma_choice=measured, the longest the slower way goes untried: a receive tries it after 1 ms, " +
			"then after twice as long each time it is still the slower, up to this (milliseconds, 1 to 60000). A trial is " +
			"4 transfers the slower way: at 100, about 1 % of the time of 4 MiB messages where fragments lose"})
	c.pipeline = r.Add(params.Def{Name: "pml_ob1_send_pipeline_depth", Type: params.Uint, Level: 6, Default: "4",
		Help: "Fragments of one rendezvous message pushed per progress pass, so that one large message does not hold up the others"})
	c.stats = r.Add(params.Def{Name: "pml_ob1_stats", Type: params.Bool, Level: 5, Default: "false",
		Help: "Log the protocol counters (LLP hits and fall-backs, eager, rendezvous, RGET, unexpected) at Finalize; " +
			"pml_base_verbose >= 10 logs them too"})
}

// Query builds the instance's module.
func (c *Component) Query(b *mca.Base, env *pml.Env) (int, pml.Module, error) {
	if env == nil || env.BML == nil || env.Runtime == nil {
		return 0, nil, mca.Decline("no byte transfer layer")
	}
	job := env.Runtime.Job()
	retry := b.Get(c.rdmaRetry).Uint()
	if retry < 1 || retry > 60000 {
		return 0, nil, mpierr.Errorf(mpierr.ErrUnsupportedParam, "pml_ob1_rdma_retry_ms = %d: accepted: 1 to 60000", retry)
	}
	m := &module{
		rdma:     newRDMAChoice(b.Get(c.rdmaChoice).Int() == rdmaMeasured, time.Duration(retry)*time.Millisecond, job.Size),
		base:     b,
		log:      b.Logger("pml").Named("ob1"),
		bml:      env.BML,
		me:       job.Rank,
		size:     job.Size,
		llpMax:   int(b.Get(c.llpMax).Uint()),
		useRDMA:  b.Get(c.useRDMA).Bool(),
		pipeline: max(1, int(b.Get(c.pipeline).Uint())),
		dump:     b.Get(c.stats).Bool(),
		tellLost: env.Runtime.PeerLost,
		llpOf:    make([]llp.Module, job.Size),
		peekOf:   make([]llp.MessagePeeker, job.Size),
		peekBTL:  make([]btlPeek, job.Size),
		viaBTL:   make([]atomic.Uint64, job.Size),
		unpeeked: make([][]btl.Module, job.Size),
		lost:     make([]atomic.Bool, job.Size),
		offers:   make([]atomic.Pointer[pipeOffers], job.Size),
		sends:    map[uint64]*sendReq{},
		recvs:    map[uint64]*recvReq{},
		quietIDs: map[uint64]struct{}{},
		orphans:  map[uint16][]*inMsg{},
	}
	empty := []*comm{}
	m.comms.Store(&empty)
	m.eng = pml.NewEngine(b, env.Runtime, m.Progress, m.busy)

	// The LLP of a peer is the first selected module that reaches it; never
	// one for oneself (self-sends always take the BTL path).
	ranks := make([]int, job.Size)
	for i := range ranks {
		ranks[i] = i
	}
	for _, l := range env.LLP {
		reach, err := l.AddProcs(ranks)
		if err != nil {
			return 0, nil, fmt.Errorf("llp %s: adding the job's processes: %w", l.Name(), err)
		}
		if len(reach) != len(ranks) {
			return 0, nil, mpierr.Errorf(mpierr.ErrIntern, "llp %s: AddProcs returned %d answers for %d ranks", l.Name(), len(reach), len(ranks))
		}
		used := false
		for r, ok := range reach {
			if ok && r != m.me && m.llpOf[r] == nil {
				m.llpOf[r] = l
				m.peekOf[r], _ = l.(llp.MessagePeeker)
				used = true
			}
		}
		if used {
			m.llps = append(m.llps, l)
			l.RegisterRecv(m.dispatch)
		}
		if m.log.V(mca.VerboseComponent) {
			m.log.Log(mca.VerboseComponent, "llp module", "llp", l.Name(), "used", used, "max_payload", m.llpMax)
		}
	}
	m.pipeLim = make([]int, job.Size)
	for w := range m.pipeLim {
		if routes := m.bml.Peer(w).Send; len(routes) > 0 {
			m.pipeLim[w] = routes[0].Attr.PipelineLimit
		}
	}
	for w := range m.peekBTL {
		// Several routes stripe eager messages: then only Progress sees
		// them all.
		if routes := m.bml.Peer(w).Send; w != m.me && len(routes) == 1 {
			if p, ok := routes[0].Module.(btl.FragmentPeeker); ok {
				m.peekBTL[w] = btlPeek{p, routes[0].EP}
			}
		}
		if w != m.me && m.peekOf[w] != nil && m.peekBTL[w].p == nil {
			for _, r := range m.bml.Peer(w).Send {
				if !slices.Contains(m.unpeeked[w], r.Module) {
					m.unpeeked[w] = append(m.unpeeked[w], r.Module)
				}
			}
		}
	}
	for _, t := range []byte{hdrMatch, hdrRndv, hdrRget, hdrAck, hdrFrag, hdrFin, hdrNotice, hdrPipe, hdrPFrag} {
		env.BML.RegisterRecv(tagOf(t), m.recvBTL)
	}
	env.BML.RegisterRecvRun(tagOf(hdrMatch), m.recvRun)
	env.BML.RegisterSteer(tagOf(hdrFrag), m.fragSteer())
	env.BML.RegisterError(m.peerLost)
	if env.Runtime != nil {
		// A rank the launcher reports dead (mpirun --enable-recovery): no
		// transport may notice (shared memory does not), so fail what
		// waits on it now, and wake the waits.
		env.Runtime.OnProcFailed(func(world int) {
			m.peerLost(world, errors.New("the launcher reports it dead"))
			m.eng.Wake()
		})
	}
	return 20, m, nil
}

// module is ob1 for one instance.
type module struct {
	base     *mca.Base
	log      *mca.Logger
	bml      *btl.BML
	eng      *pml.Engine
	me, size int
	llpMax   int
	useRDMA  bool
	// rdma chooses, for each RGET offered, between Get and fragments.
	rdma     *rdmaChoice
	pipeline int
	dump     bool
	// tellLost tells the run-time environment of a lost peer
	// (rte.Runtime.PeerLost), so that the launcher can tell a failure of
	// this process that follows from its cause.
	tellLost func(world int)

	llpOf []llp.Module // per world rank: its LLP, nil when none
	// peekOf is llpOf's llp.MessagePeeker, and peekBTL the BTL route a
	// peer's eager messages all take when it is a btl.FragmentPeeker, for
	// the receive fast path (found once: a type assertion per receive cost
	// it 5 %).
	peekOf  []llp.MessagePeeker
	peekBTL []btlPeek
	// viaBTL is, per world rank with both, 1 when the last message the
	// fast path took from it came through its BTL route, not its LLP: the
	// next receive polls that one on every turn and the other every
	// fastOtherPathEvery turns (a hint; any goroutine may set it).
	viaBTL []atomic.Uint64
	// unpeeked are, per world rank whose LLP the fast path peeks at but
	// whose BTL route it cannot (tcp, or eager striped over several), the
	// modules that carry its other messages: the fast path progresses
	// them now and then, or a message that took them would wait out its
	// whole polling budget.
	unpeeked [][]btl.Module
	llps     []llp.Module // the modules in use, for progress
	// llpTurn counts Progress passes, for llpPolled: a hint, stored without
	// a locked instruction (concurrent passes may lose a count).
	llpTurn atomic.Uint64
	lost    []atomic.Bool
	// anyLost is set after the first lost: a receive posted while it is
	// false looks no further (peerLost fails the receives posted before it
	// comes, under each communicator's matching lock).
	anyLost atomic.Bool

	// comms is indexed by context id (copy on write: the receive path
	// reads it without a lock). orphans holds headers that arrived for a
	// context id this process has not created yet.
	comms   atomic.Pointer[[]*comm]
	commsMu sync.Mutex
	orphans map[uint16][]*inMsg

	// The request tables name rendezvous requests on the wire.
	reqMu  sync.Mutex
	nextID uint64
	sends  map[uint64]*sendReq
	recvs  map[uint64]*recvReq
	// quietIDs are the requests Interrupt failed: their peer's late
	// control messages and fragments are dropped without a word.
	quietIDs map[uint64]struct{}
	// notice is OnNotice's handler.
	notice noticeHandler

	// pipes are the pipelined messages whose PFRAGs are arriving (pipe.go);
	// pipeID numbers this process's pipelined sends.
	pipeMu sync.Mutex
	pipes  map[pipeKey]*pipeIn
	pipeID atomic.Uint64
	// pipeLim is each world rank's first route's PipelineLimit: the
	// largest PIPE a peer may send us (its own parameters are the job's).
	pipeLim []int
	// offers is, per world rank, what its answers to RGET offers in the
	// pipelined range said (rdmachoice.go); nil until one came.
	offers []atomic.Pointer[pipeOffers]

	// Queued work, pushed by Progress: control messages that found no
	// room, rendezvous sends with fragments to push, peers whose queue holds
	// sends that found no room. work counts them all, so that Progress skips
	// the lock when there is none.
	work    atomic.Int64
	workMu  sync.Mutex
	ctl     []ctlMsg
	streams []*sendReq
	queued  []*sendPeer
	pushing sync.Mutex
	// Scratch copies of streams and queued, used by the pusher only.
	scratchS []*sendReq
	scratchQ []*sendPeer

	bsend pml.BsendBuffer
	// The free lists of requests (per instance: instances do not share
	// requests).
	sendPool freeList[sendReq]
	pipePool freeList[pipeIn]
	// msgPool holds unexpected eager messages once received: a rank that
	// runs ahead of its peers (the root of a loop of small rooted
	// collectives) sends them one after another.
	msgPool freeList[inMsg]
	// pipeDoneHook, when set (tests only), runs as a pipelined receive
	// with every byte in place is about to complete.
	pipeDoneHook func()

	nLLPHits, nLLPFallbacks, nEager, nRndv, nRget, nRgetFallbacks, nUnexpected, nOutOfOrder, nPipe atomic.Uint64
}

type btlPeek struct {
	p  btl.FragmentPeeker // nil when the peer's messages cannot be peeked
	ep btl.Endpoint
}

type ctlMsg struct {
	world int
	typ   byte
	hdr   []byte
}

func (m *module) Engine() *pml.Engine { return m.eng }

// LLPReaches reports whether every other rank of c has an LLP here.
func (m *module) LLPReaches(pc *pml.Comm) bool {
	if pc.Size < 2 || m.llpMax == 0 {
		return false
	}
	for r := 0; r < pc.Size; r++ {
		if (pc.Local != nil || r != pc.Rank) && m.llpOf[pc.Group.World(r)] == nil {
			return false
		}
	}
	return true
}

// llpPollEvery is how often a Progress pass whose BTLs delivered something
// polls the LLPs too. An LLP carries blocking sends, which a blocking
// receive's fast path finds by itself; polling it beside a window of
// messages that the BTLs deliver cost the receiver a lock (a locked
// instruction) and a look at each box per pass: 4 % of a windowed
// receiver's profile, and the windowed rate at 1 B rose 1.5 % without it.
// Open MPI calls its low-priority progress callbacks every 8th pass the
// same way (opal_progress_lp_call_ratio).
const llpPollEvery = 8

// llpPolled says whether the pass numbered turn, whose BTLs delivered
// `delivered` fragments, polls the LLPs: always when they delivered none
// (the LLP's message may be what the caller waits for), otherwise every
// llpPollEvery-th pass (its messages wait a few passes at most, behind
// fragments that keep the receiver busy anyway).
func llpPolled(delivered int, turn uint64) bool {
	return delivered == 0 || turn%llpPollEvery == 0
}

// busy reports queued output that only this process's progress pushes: a
// wait must not sleep on it, since no peer would ring when the transport
// has room again.
func (m *module) busy() bool { return m.work.Load() != 0 }

// Progress moves every transport once, then the queued work. The LLPs are
// polled on every pass that found nothing in the BTLs, and on every
// llpPollEvery-th one that did (llpPolled).
func (m *module) Progress() int {
	n := m.bml.Progress()
	if len(m.llps) > 0 {
		turn := m.llpTurn.Load() + 1
		release.Store(&m.llpTurn, turn)
		if llpPolled(n, turn) {
			for _, l := range m.llps {
				n += l.Progress()
			}
		}
	}
	if m.work.Load() != 0 {
		n += m.pushWork()
	}
	return n
}

func (m *module) Stats() pml.Stats {
	// Live communicators count their own sends; freed ones added theirs
	// to the module's counters.
	m.commsMu.Lock()
	eager, llpHits := m.nEager.Load(), m.nLLPHits.Load()
	for _, c := range *m.comms.Load() {
		if c != nil {
			e, l := c.sendCounts()
			eager, llpHits = eager+e, llpHits+l
		}
	}
	m.commsMu.Unlock()
	return pml.Stats{
		LLPHits: llpHits, LLPFallbacks: m.nLLPFallbacks.Load(),
		Eager: eager, Rendezvous: m.nRndv.Load(), RGet: m.nRget.Load(), RGetFallbacks: m.nRgetFallbacks.Load(),
		Unexpected: m.nUnexpected.Load(), OutOfOrder: m.nOutOfOrder.Load(), Pipelined: m.nPipe.Load(),
	}
}

// Finalize logs the counters when asked (pml_ob1_stats, or pml_base_verbose
// >= 10). A logger of its own, at Info level, prints them whatever the
// framework's verbosity, since the user asked for them.
func (m *module) Finalize() error {
	if m.dump || m.log.V(mca.VerboseComponent) {
		s := m.Stats()
		h := m.log.HCLog().Named("stats")
		h.SetLevel(hclog.Info)
		h.Info("counters", "llp_hits", s.LLPHits, "llp_fallbacks", s.LLPFallbacks,
			"eager", s.Eager, "rendezvous", s.Rendezvous, "rget", s.RGet, "rget_fallbacks", s.RGetFallbacks,
			"unexpected", s.Unexpected, "out_of_order", s.OutOfOrder, "pipelined", s.Pipelined)
	}
	return nil
}

func (m *module) BufferAttach(buf []byte) error { return m.bsend.Attach(buf) }
func (m *module) BufferDetach() ([]byte, error) { return m.bsend.Detach(m.eng) }

// updateWork recounts the queued work; callers hold workMu.
func (m *module) updateWork() {
	m.work.Store(int64(len(m.ctl) + len(m.streams) + len(m.queued)))
}

// pushWork sends what was queued, until the transports have no room. One
// goroutine pushes at a time; the others go on with their own progress.
func (m *module) pushWork() int {
	if !m.pushing.TryLock() {
		return 0
	}
	defer m.pushing.Unlock()
	n := 0

	m.workMu.Lock()
	ctl := m.ctl
	m.ctl = nil
	m.updateWork()
	m.workMu.Unlock()
	for i, c := range ctl {
		err := m.sendNow(c.world, c.typ, c.hdr)
		if isWouldBlock(err) {
			m.workMu.Lock()
			m.ctl = append(ctl[i:len(ctl):len(ctl)], m.ctl...)
			m.updateWork()
			m.workMu.Unlock()
			break
		}
		n++
	}

	// Work on copies (scratch space of the pusher), so that workMu is never
	// held while calling into a transport.
	m.workMu.Lock()
	m.scratchS = append(m.scratchS[:0], m.streams...)
	m.workMu.Unlock()
	for _, r := range m.scratchS {
		sent, finished := m.pushStream(r)
		n += sent
		if finished {
			m.workMu.Lock()
			for i, s := range m.streams {
				if s == r {
					m.streams = append(m.streams[:i], m.streams[i+1:]...)
					break
				}
			}
			m.updateWork()
			m.workMu.Unlock()
			m.endStream(r)
		}
	}

	m.workMu.Lock()
	m.scratchQ = append(m.scratchQ[:0], m.queued...)
	m.workMu.Unlock()
	for _, sp := range m.scratchQ {
		if !sp.mu.TryLock() {
			continue // its owner is sending; it will be back
		}
		n += m.drainQueue(sp)
		empty := len(sp.queue) == 0
		if empty {
			sp.inQueued = false
		}
		sp.mu.Unlock()
		if empty {
			m.workMu.Lock()
			for i, q := range m.queued {
				if q == sp {
					m.queued = append(m.queued[:i], m.queued[i+1:]...)
					break
				}
			}
			m.updateWork()
			m.workMu.Unlock()
		}
	}
	clear(m.scratchS)
	clear(m.scratchQ)
	return n
}

// sendNow sends a header-only control message to a world rank on its eager
// route.
func (m *module) sendNow(world int, typ byte, hdr []byte) error {
	r := &m.bml.Peer(world).Send[0]
	return r.Module.Send(r.EP, tagOf(typ), hdr, nil)
}

// sendCtl sends a control message (ACK, FIN), queueing it for Progress when
// the transport has no room. It may be called from a receive callback.
func (m *module) sendCtl(world int, typ byte, hdr []byte) {
	if m.lost[world].Load() {
		return
	}
	err := m.sendNow(world, typ, hdr)
	switch {
	case err == nil:
	case isWouldBlock(err):
		m.workMu.Lock()
		// A copy: callers may pass scratch space they reuse.
		m.ctl = append(m.ctl, ctlMsg{world, typ, append([]byte(nil), hdr...)})
		m.updateWork()
		m.workMu.Unlock()
	default:
		// The peer is lost or the transport broke: the requests on that
		// peer fail through peerLost; nothing else to do here.
		m.noteLost(world, err)
		if m.log.V(mca.VerboseWarn) {
			m.log.Log(mca.VerboseWarn, "control message not sent", "peer", world, "type", typ, "error", err)
		}
	}
}

// noteLost tells the run-time environment at once when err, a transport's
// answer about world, says the peer is lost: the transport's own report
// comes with a later Progress, and the caller may fail (and abort) before
// that. It takes no lock of ob1's.
func (m *module) noteLost(world int, err error) {
	if err != nil && m.tellLost != nil && errors.Is(err, btl.ErrPeerLost) {
		m.tellLost(world)
	}
}

func isWouldBlock(err error) bool {
	return err == btl.ErrWouldBlock || (err != nil && errors.Is(err, btl.ErrWouldBlock))
}

// newID registers a rendezvous request under a fresh number; callers hold
// reqMu.
func (m *module) newIDLocked() uint64 {
	m.nextID++
	return m.nextID
}

// comm returns the communicator of a context id, or nil.
func (m *module) comm(cid uint16) *comm {
	cs := *m.comms.Load()
	if int(cid) < len(cs) {
		return cs[cid]
	}
	return nil
}

// bad logs a header this process cannot use; it is dropped.
func (m *module) bad(src int, err error) {
	m.log.Error("dropping a malformed or unexpected PML header", "from", src, "error", err)
}

// peerLost fails everything pending on a peer that can no longer be
// reached. It runs from a BTL (inside Progress or a BTL goroutine).
func (m *module) peerLost(world int, cause error) {
	if world < 0 || world >= len(m.lost) || m.lost[world].Swap(true) {
		return
	}
	m.anyLost.Store(true)
	m.log.Log(mca.VerboseComponent, "peer lost: failing its pending operations", "peer", world, "error", cause)
	fail := func() error {
		return mpierr.Errorf(mpierr.ErrProcFailed, "ob1: rank %d is lost: %w", world, cause)
	}

	// Rendezvous in progress.
	var sends []*sendReq
	var recvs []*recvReq
	m.reqMu.Lock()
	for id, r := range m.sends {
		if r.world == world {
			sends = append(sends, r)
			delete(m.sends, id)
		}
	}
	for id, r := range m.recvs {
		if r.world == world {
			recvs = append(recvs, r)
			delete(m.recvs, id)
		}
	}
	m.reqMu.Unlock()
	m.workMu.Lock()
	for i := 0; i < len(m.streams); i++ {
		if r := m.streams[i]; r.world == world {
			if r.proto == hdrPipe {
				sends = append(sends, r) // in no table: fail it here
			}
			m.streams = append(m.streams[:i], m.streams[i+1:]...)
			i--
		}
	}
	m.updateWork()
	m.workMu.Unlock()
	for _, r := range sends {
		r.finish(fail())
	}
	for _, r := range recvs {
		// A BTL may be placing the peer's data into r.buf (data it sent
		// before it was lost): take buf back first (see btl.Steer).
		r.guard.Withdraw()
		r.finish(fail())
	}
	m.pipesLost(world, fail)

	// Queued sends and posted receives, on every communicator.
	for _, c := range *m.comms.Load() {
		if c == nil {
			continue
		}
		cr := c.group.Rank(world)
		if cr < 0 || cr >= c.size {
			continue
		}
		sp := &c.send[cr]
		sp.mu.Lock()
		q := sp.queue
		sp.queue = nil
		sp.mu.Unlock()
		for _, r := range q {
			if r.id != 0 {
				continue // already failed above, through the table
			}
			r.finish(fail())
		}
		c.mu.Lock()
		var posted []*recvReq
		for r := c.peers[cr].posted.head; r != nil; r = r.next {
			posted = append(posted, r)
		}
		for _, r := range posted {
			c.peers[cr].posted.remove(r)
			r.posted = false
		}
		c.peers[cr].noteQueued()
		c.mu.Unlock()
		for _, r := range posted {
			r.Complete(pml.Status{Source: cr, Tag: pml.AnyTag, Err: fail()})
		}
	}
}
