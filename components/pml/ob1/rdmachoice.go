package ob1

import (
	"math"
	"math/bits"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// rdmaChoice is a receiver's choice, for each RGET it is offered, between
// reading the sender's buffer itself (RDMA Get: one copy, by this process)
// and asking for fragments (two copies, the sender's and this process's,
// made at once). Which is faster depends on what neither side can see from
// its parameters: on this kind of machine, with the two processes' cores
// near each other, fragments took half the time from 32 KiB up (1 MiB 38
// µs against 72); with the cores far apart (the host moves its vCPUs
// between the two), twice the time (1 MiB 156 against 72-76); with both
// processes on one core, or a sender that computes instead of answering,
// fragments wait for the sender. So the receiver times both, per peer and
// size class, and takes the faster; the other is tried again once it has
// gone unused for a while, so that a change of placement is found. The
// while starts at a floor (1 ms, or what keeps a trial's cost within
// trialBudget of the time) and doubles each time a trial leaves the choice
// as it was, up to retry; a change of choice starts it over.
type rdmaChoice struct {
	measured bool          // pml_ob1_rdma_choice=measured; false: always Get
	retry    time.Duration // pml_ob1_rdma_retry_ms: the longest wait between trials
	epoch    time.Time     // the clock's origin (monotonic)

	mu    sync.Mutex
	peers []*peerCosts  // by world rank, made at a peer's first RGET
	last  time.Duration // the latest reading of the clock (wayNow)
	// busy counts the peers with transfers by fragments in flight, and
	// gets is the time this process has spent in Gets, summed: a Get
	// made while fragments are in flight is this process's time, not the
	// fragments' (note).
	busy int
	gets time.Duration
}

// peerCosts are one peer's estimates, per size class, and its transfers
// by fragments in flight: they share the sender's stream, so they are
// timed together (note).
type peerCosts struct {
	classes [sizeClasses]*classChoice // made at a class's first message
	// inFlight transfers by fragments asked of this peer and not ended;
	// busyFrom is when the first of them was asked, busyBytes what they
	// all move; last is the latest start or end among them.
	inFlight       int
	busyFrom, last time.Duration
	busyBytes      int
	getsFrom       time.Duration // rdmaChoice.gets when the first of them was asked
	// lastDone is when the last stamped message from this peer was
	// received (wall clock, ns), and lastCtx, lastSeq its communicator and
	// sequence number (endToEnd).
	lastDone int64
	lastCtx  uint16
	lastSeq  uint16
}

// lostFlight is how long a peer's transfers by fragments may go without
// an end before the count of those in flight is given up (a receive that
// failed or was cancelled never ends its transfer).
const lostFlight = time.Second

// classChoice is the choice for one peer and size class: the two ways'
// costs, the way that last won, and how long the loser now goes untried.
type classChoice struct {
	ways    [2]rdmaCost
	winner  int
	won     bool
	wait    time.Duration // 0: the floor (rdmaChoice.floor)
	settled int           // settled Gets chosen (wayTimed)
}

// minRetry is the first wait between trials of the slower way.
const minRetry = time.Millisecond

// Values of pml_ob1_rdma_choice.
const (
	rdmaAlways   = 0
	rdmaMeasured = 1
)

// The two ways a receiver takes an RGET's data.
const (
	byGet = iota
	byFragments
)

// sizeClasses: one per power of two of a message's length.
const sizeClasses = 64

// rdmaCost is what one way took lately, in nanoseconds per KiB, and when
// it was last chosen.
type rdmaCost struct {
	samples [costSamples]float32 // the last transfers, a ring
	n       int                  // samples ever taken
	least   float64              // of the last costSamples samples, kept by add
	chosen  time.Duration        // since epoch; 0: never
	burst   int                  // receives still to take this way in a trial
}

// costSamples is how many of a way's last transfers its estimate is the
// least of: a trial burst's worth, so that one burst refreshes it, and
// the slow first transfer after a pause, or one held up by a busy sender,
// does not count.
const costSamples = trialBurst

func (e *rdmaCost) measured() bool { return e.n > 0 }

// add takes a sample and updates the estimate, once here rather than at
// every choice.
func (e *rdmaCost) add(x float64) {
	e.samples[e.n%costSamples] = float32(x)
	e.n++
	k := min(e.n, costSamples)
	e.least = float64(slices.Min(e.samples[:k]))
}

// estimate is the least of the last costSamples samples. Noise here only
// ever slows a transfer (an interrupt, the host taking the core, a cold
// start after a pause), so the least is what the way costs; with the
// median, two slow transfers of four flipped the choice: near, 32 KiB
// ping-pongs took 14 % of their messages by Get, which costs 1.5× there.
func (e *rdmaCost) estimate() float64 { return e.least }

// newRDMAChoice makes the choice of a job of size ranks.
func newRDMAChoice(measured bool, retry time.Duration, size int) *rdmaChoice {
	return &rdmaChoice{measured: measured, retry: retry, epoch: time.Now(), peers: make([]*peerCosts, size)}
}

// now is the monotonic clock the choice's times are on.
func (c *rdmaChoice) now() time.Duration { return max(time.Since(c.epoch), 1) }

// at is t on that clock.
func (c *rdmaChoice) at(t time.Time) time.Duration { return max(t.Sub(c.epoch), 1) }

// way says how to take n bytes from world rank world now: byGet or
// byFragments. Each way is tried first (Get first); then the cheaper is
// chosen, and the other again once it has gone unused for the class's
// wait. A way counts as chosen when it is chosen, not when its transfer
// ends, so that a window of large receives started at once tries the
// other way in one burst, not for every receive of the window.
//
// pipelined says the message is in the sender's pipelined range: there
// fragments are the sender's PIPEs (pipeOffers), and both ways are timed
// end to end (endToEnd), not by note. Choosing fragments there answers
// the offer with ackPipeline, which starts a run of PIPEs: a trial of
// fragments is that run, not a burst, and puts nothing in flight.
func (c *rdmaChoice) way(world, n int, pipelined bool, now time.Duration) int {
	w, _ := c.wayTimed(world, n, pipelined, now)
	return w
}

// wayNow is wayTimed on the choice's own clock, read only where a time is
// needed: a transfer it times (from, nonzero) or a choice of fragments. For
// the rest (three settled Gets in four) it decides on the last reading,
// a few transfers old, which only delays a due trial by as much (a clock
// read is ~25 ns, nearly 1 % of a 16 KiB Get far apart).
func (c *rdmaChoice) wayNow(world, n int, pipelined bool) (way int, from time.Duration) {
	if !c.measured || n <= 0 {
		return byGet, 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.last
	if now == 0 {
		now = c.now()
	}
	w, timed, at := c.wayLocked(world, n, pipelined, now, true)
	if timed {
		return w, at
	}
	return w, 0
}

// wayTimed is way, and says whether the caller is to time a Get it chose
// (note): every one in a trial or while the estimates are young, one in
// getSampleEvery once Get is the settled choice. The second clock read and
// the lock of note cost a Get ~45 ns, 1 % of 32 KiB far apart; the least of
// four every few transfers still follows a change of placement.
func (c *rdmaChoice) wayTimed(world, n int, pipelined bool, now time.Duration) (way int, timed bool) {
	if !c.measured || n <= 0 {
		return byGet, false // nothing to move: nothing to time, nothing in flight
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	w, timed, _ := c.wayLocked(world, n, pipelined, now, false)
	return w, timed
}

// wayLocked is wayTimed under c.mu. With stale, now is the last reading
// of the choice's clock: it reads the clock where the choice needs the
// time (a timed transfer, fragments), and returns the time it used.
func (c *rdmaChoice) wayLocked(world, n int, pipelined bool, now time.Duration, stale bool) (way int, timed bool, at time.Duration) {
	p := c.peer(world)
	cc := p.class(n)
	w, trial, burst := -1, false, false
	for i := range cc.ways {
		if cc.ways[i].burst > 0 {
			cc.ways[i].burst--
			w, burst = i, true
			break
		}
	}
	if w < 0 {
		if w, trial = c.pick(cc, n, pipelined, now); trial && !(pipelined && w == byFragments) {
			cc.ways[w].burst = trialBurst - 1
		}
	}
	timed = true
	if w == byGet && !trial && !burst && cc.ways[w].n >= 2*costSamples {
		cc.settled++
		// Every Get is timed while fragments are in flight: its time
		// comes off theirs (note).
		timed = cc.settled%getSampleEvery == 0 || c.busy > 0
	}
	if stale && (timed || w == byFragments) {
		now = c.now()
	}
	c.last = max(c.last, now)
	cc.ways[w].chosen = now
	if w == byFragments && !pipelined {
		if p.inFlight > 0 && now-p.last > lostFlight {
			p.inFlight = 0
			c.busy--
		}
		if p.inFlight == 0 {
			p.busyFrom, p.busyBytes, p.getsFrom = now, 0, c.gets
			c.busy++
		}
		p.inFlight++
		p.busyBytes += n
		p.last = now
	}
	return w, timed, now
}

// getSampleEvery: once Get is the settled choice, one Get in this many is
// timed (wayTimed).
const getSampleEvery = 4

// endToEnd records a stamped message of n bytes in world's pipelined
// range, the seq-th on communicator ctx, that has just been received by
// way, at wall-clock time done, which the sender stamped at stamp when it
// began to send it (both clocks are the node's: CLOCK_REALTIME, one
// kernel). A receiver cannot time a PIPE by itself: one that fits a
// fragment is all there when its header is seen, its cost spent on the
// sender's side; and a Get's own time leaves out the header's trip and the
// FIN the sender waits for. So in the pipelined range both ways are timed
// from the sender's stamp, or from when the message before it on that
// communicator was received, whichever is later: alone (a ping-pong), a
// message's time is its whole trip; in a stream (a window), it waited
// behind the ones before it, and its time is what it added to the stream.
// Senders stamp messages in pairs (pipeOffers.next), so that the one
// before is known; a message that waited unexpected (not fresh) only
// marks the time for the next.
func (c *rdmaChoice) endToEnd(world, n, way int, stamp, done int64, fresh bool, ctx, seq uint16, now time.Duration) {
	if !c.measured || n <= 0 {
		return
	}
	c.mu.Lock()
	p := c.peer(world)
	from := stamp
	pair := p.lastDone != 0 && ctx == p.lastCtx && seq == p.lastSeq+1
	if pair && p.lastDone > from {
		from = p.lastDone
	}
	p.lastDone, p.lastCtx, p.lastSeq = done, ctx, seq
	if took := time.Duration(done - from); fresh && pair && took > 0 && took < lostFlight {
		e := &p.class(n).ways[way]
		e.add(float64(took.Nanoseconds()) * 1024 / float64(n))
		if way == byFragments {
			e.chosen = now // PIPEs the sender chose: fragments are in use
		}
	}
	c.mu.Unlock()
}

// trialBurst is how many receives in a row try a way that is new or has
// gone unused: its first transfers after a pause run slow (a 1 MiB Get
// took 690, then 260, 160 … down to 75 µs over a dozen calls), and one
// sample would keep it out until the next trial.
const trialBurst = 4

// pick chooses a way, and says whether it is a trial (the way is new or
// has gone unused for the class's wait).
func (c *rdmaChoice) pick(cc *classChoice, n int, pipelined bool, now time.Duration) (way int, trial bool) {
	get, frag := &cc.ways[byGet], &cc.ways[byFragments]
	wait := max(cc.wait, c.floor(cc, n, pipelined))
	stale := func(e *rdmaCost) bool { return e.chosen == 0 || now-e.chosen > wait }
	switch {
	case !get.measured() && stale(get):
		return byGet, true
	case !frag.measured() && stale(frag):
		return byFragments, true
	case !get.measured() || !frag.measured():
		// One is out and not back yet: the measured one, or Get.
		if frag.measured() {
			return byFragments, false
		}
		return byGet, false
	case stale(get) && get.chosen <= frag.chosen:
		cc.wait = min(2*wait, c.retry)
		return byGet, true
	case stale(frag) && frag.chosen < get.chosen:
		cc.wait = min(2*wait, c.retry)
		return byFragments, true
	}
	w := byFragments
	if get.estimate() <= frag.estimate() {
		w = byGet
	}
	if cc.won && w != cc.winner {
		cc.wait = 0 // the choice changed: look again soon
	}
	cc.winner, cc.won = w, true
	return w, false
}

// trialBudget is the share of the time a class's transfers take that its
// trials of the slower way may cost, at most, once the two ways' costs are
// known: the shortest wait between trials is what keeps it there. At 3 %,
// far apart, the measured choice read 1.09 and 1.065× vader at 32 and 64
// KiB against 1.06 and 1.01 for single copy alone: a trial costs more than
// its own transfers (the Gets after fragments run slower for a while).
const trialBudget = 0.01

// floor is the shortest wait between trials for messages of n bytes:
// minRetry, or longer where a trial of the slower way costs more than
// trialBudget of the wait (4 MiB far apart: 4 × 300 µs more by fragments,
// so 120 ms), but never above retry. A trial is a burst of trialBurst
// transfers; of fragments in the pipelined range, a run of pipeTrialRun.
func (c *rdmaChoice) floor(cc *classChoice, n int, pipelined bool) time.Duration {
	get, frag := &cc.ways[byGet], &cc.ways[byFragments]
	if !get.measured() || !frag.measured() {
		return minRetry
	}
	trial := trialBurst
	if pipelined && frag.estimate() > get.estimate() {
		trial = pipeTrialRun
	}
	extra := math.Abs(get.estimate()-frag.estimate()) * float64(n) / 1024 // ns more per transfer
	return min(max(minRetry, time.Duration(float64(trial)*extra/trialBudget)), c.retry)
}

// note records that a transfer of n bytes from world by way, begun at
// from, has just ended (now). A Get's time is its own: Gets run one after
// another. Transfers by fragments in flight at once share the sender's
// stream, which interleaves them: they end together, at the end of the
// whole (timed one by one, all but one looked nearly free, and fragments
// won where they were twice as slow as Get). So they are timed together:
// from the first one's start to the last one's end, over all their bytes,
// one sample when none is left in flight. The time this process spent
// in Gets meanwhile (of the other messages of a window, which the trial
// interleaves with its fragments) is not theirs and comes off: counted
// in, it made fragments look five times slower than they were in a
// window of 1 MiB messages near, where they move twice as fast as Get.
func (c *rdmaChoice) note(world, n, way int, from, now time.Duration) {
	if !c.measured || n <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.peer(world)
	e := &p.class(n).ways[way]
	if way == byGet {
		c.gets += now - from
		e.add(float64((now - from).Nanoseconds()) * 1024 / float64(n))
		return
	}
	if p.inFlight <= 0 || from < p.busyFrom {
		// Given up on as lost (lostFlight) and ended after all: it began
		// before the transfers now in flight, and is no longer counted.
		return
	}
	p.last = now
	if p.inFlight--; p.inFlight > 0 {
		return
	}
	c.busy--
	if p.busyBytes > 0 {
		// At least a tenth of the wall time: fragments move while Gets
		// run too (the sender copies into the ring), so the whole Get
		// time would overstate what came off.
		dt := max(now-p.busyFrom-(c.gets-p.getsFrom), (now-p.busyFrom)/10)
		e.add(float64(dt.Nanoseconds()) * 1024 / float64(p.busyBytes))
	}
}

// class returns the choice for messages of n bytes; the caller holds mu.
// Classes are made as they are used, so that a peer costs what its sizes
// need (a receiver of one size from ten thousand peers: about 7 MB; all
// 64 classes made at once: 72 MB).
func (p *peerCosts) class(n int) *classChoice {
	k := bits.Len(uint(n)) % sizeClasses
	if p.classes[k] == nil {
		p.classes[k] = new(classChoice)
	}
	return p.classes[k]
}

// peer returns world's estimates; the caller holds mu.
func (c *rdmaChoice) peer(world int) *peerCosts {
	p := c.peers[world]
	if p == nil {
		p = new(peerCosts)
		c.peers[world] = p
	}
	return p
}

// The sender's side, for messages in the pipelined range (above the eager
// limit, up to the route's PipelineLimit). A PIPE is fragments the sender
// sends without asking: near, it beat an RGET's single copy 3-4× at 8 and
// 16 KiB; far apart, it still won at 8 KiB (2.2 against 3.1 µs one-way)
// and lost at 16 KiB (4.1 against 3.6), and only the receiver, timing both
// from the sender's stamp (endToEnd), sees which holds. So the sender
// offers an RGET and stamps it, and the receiver answers with its choice:
// a FIN when it read the buffer, an ACK with ackPipeline when it takes
// fragments (its choice, or a trial of them). After such an ACK the sender
// sends a run of PIPEs, some stamped, and offers again; after a FIN it
// offers every message of the class. A run after a FIN is pipeTrialRun
// long (a trial of fragments costs no more), and each run after an answer
// of fragments twice the last, up to pipeRun.

// pipeRun is the longest run: how many messages of a class go as PIPEs
// after answers that said fragments, the offer that ends the run included
// (and those sent while its answer comes). Each offer the receiver answers
// with fragments costs the round trip of an ACK (8 KiB far apart: about
// 1.5 µs more than a PIPE), well under 1 % of a run.
const pipeRun = 256

// pipeTrialRun is the first run after an answer of Get: long enough for
// four stamped pairs (the receiver's estimate is the least of four).
const pipeTrialRun = 32

// pipeOffers is what a sender heard from one peer, per size class, made
// at the class's first message (a peer costs 512 bytes and ~100 a class in
// use, not 64 classes' worth).
type pipeOffers struct {
	classes [sizeClasses]atomic.Pointer[pipeClass]
}

// class returns the state of messages of n bytes.
func (o *pipeOffers) class(n int) *pipeClass {
	p := &o.classes[bits.Len(uint(n))%sizeClasses]
	c := p.Load()
	if c == nil {
		c = new(pipeClass)
		if !p.CompareAndSwap(nil, c) {
			c = p.Load()
		}
	}
	return c
}

type pipeClass struct {
	// left counts the PIPEs still to send before the next offer; asked
	// says that offer went and its answer has not come: the messages after
	// it go as PIPEs too (a window's would otherwise be offers, each
	// answered a round trip later).
	left  atomic.Int32
	asked atomic.Bool
	// every: two PIPEs in a row in every this many of the run are stamped.
	every atomic.Int32
	// mu orders the answers: offers are numbered (made), and since is the
	// number made when the last run began. In a window of offers, the
	// receiver's trial of fragments answers one and takes the next ones by
	// Get: their FINs, answers to offers made before the run began, must
	// not end the run it asked for.
	mu    sync.Mutex
	made  atomic.Uint32
	since uint32
	run   int32 // the run under way's length; 0 after an answer of Get
	// gets counts the answers of Get in a row: past offerThinAfter, only
	// two offers in a row in every offerStampEvery carry a stamp (a stamp
	// costs the sender a clock read and the receiver one and its lock,
	// ~70 ns, 2 % of a 16 KiB Get far apart).
	gets atomic.Int32
	// answered counts the answers: at most trialBurst offers go
	// unanswered, the messages beyond them go as PIPEs (a window would
	// otherwise be all offers, each answered a round trip later).
	answered atomic.Uint32
}

// next says whether the next message of n bytes goes as a PIPE (pipe) or
// is offered, and whether it carries the sender's stamp: every offer does,
// and eight pairs of PIPEs in a run, enough for the receiver's estimate at
// a fraction of the clock reads (a stamp costs a clock read on both sides
// and the receiver's lock, ~70 ns, a tenth of an 8 KiB PIPE near; the first
// of a pair tells the receiver when the second may start for its time to
// count, endToEnd). An offer's number is offer (0 for a PIPE), for heard.
func (o *pipeOffers) next(n int) (pipe, stamp bool, offer uint32) {
	c := o.class(n)
	if c.left.Load() <= 0 {
		if c.asked.Load() {
			return true, false, 0
		}
		return c.offer()
	}
	k := c.left.Add(-1)
	if k < 0 {
		return true, false, 0 // another sender took the last one
	}
	if k == 0 {
		c.asked.Store(true)
		return c.offer() // the run's last: the offer
	}
	return true, k%c.every.Load() <= 1, 0
}

// offer numbers an offer (never 0), or says the message goes as a PIPE
// when trialBurst offers are unanswered.
func (c *pipeClass) offer() (pipe, stamp bool, offer uint32) {
	for {
		k := c.made.Load()
		if k-c.answered.Load() >= trialBurst {
			return true, false, 0
		}
		if c.made.CompareAndSwap(k, k+1) {
			k++
			return false, c.gets.Load() < offerThinAfter || k%offerStampEvery <= 1, k
		}
	}
}

// After offerThinAfter answers of Get in a row, two offers in a row in
// every offerStampEvery are stamped: the receiver's estimate of Get, a
// least of four, still sees a pair every few messages.
const (
	offerThinAfter  = 16
	offerStampEvery = 8
)

// heard records the receiver's answer to offer, of n bytes: whether it
// took it by fragments (a run begins) or by Get (every message is offered,
// unless the offer was made before the run under way began). An answer to
// a message that was no numbered offer (a synchronous send's) is dropped.
func (o *pipeOffers) heard(n int, offer uint32, fragments bool) {
	if offer == 0 {
		return
	}
	c := o.class(n)
	c.answered.Add(1)
	if !fragments && c.left.Load() <= 0 && !c.asked.Load() {
		// Get, and every message offered already: only the count moves
		// (no lock on the FIN of every Get far apart).
		c.gets.Add(1)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !fragments && c.since != 0 && int32(offer-c.since) <= 0 {
		return
	}
	if fragments {
		c.run = min(max(2*c.run, pipeTrialRun), pipeRun)
		c.since = c.made.Load()
		c.every.Store(c.run / 8)
		c.gets.Store(0)
	} else {
		c.run = 0
		c.gets.Add(1)
	}
	c.left.Store(c.run)
	c.asked.Store(false)
}

// pipelined says whether a message of n bytes to world, in the pipelined
// range, goes as a PIPE or is offered as an RGET for the receiver to
// choose (then numbered offer), and whether it carries a stamp. With
// pml_ob1_rdma_choice=always, or no RDMA route to the peer, it is always an
// unstamped PIPE, as before the choice existed.
func (m *module) pipelined(world, n int) (pipe, stamp bool, offer uint32) {
	if !m.rdma.measured || !m.useRDMA {
		return true, false, 0
	}
	if _, ok := m.rdmaRoute(world); !ok {
		return true, false, 0
	}
	return m.offersTo(world).next(n)
}

// offersTo returns what this process heard from world, made at first use.
func (m *module) offersTo(world int) *pipeOffers {
	o := m.offers[world].Load()
	if o == nil {
		o = new(pipeOffers)
		if !m.offers[world].CompareAndSwap(nil, o) {
			o = m.offers[world].Load()
		}
	}
	return o
}

// heard records world's answer to offer, an RGET of n bytes in the
// pipelined range.
func (m *module) heard(world, n int, offer uint32, fragments bool) {
	m.offersTo(world).heard(n, offer, fragments)
}
