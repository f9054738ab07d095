package ob1

import (
	"math"
	"math/bits"
	"slices"
	"sync"
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
	peers map[int]*peerCosts
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
}

// lostFlight is how long a peer's transfers by fragments may go without
// an end before the count of those in flight is given up (a receive that
// failed or was cancelled never ends its transfer).
const lostFlight = time.Second

// classChoice is the choice for one peer and size class: the two ways'
// costs, the way that last won, and how long the loser now goes untried.
type classChoice struct {
	ways   [2]rdmaCost
	winner int
	won    bool
	wait   time.Duration // 0: the floor (rdmaChoice.floor)
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
	chosen  time.Duration        // since epoch; 0: never
	burst   int                  // receives still to take this way in a trial
}

// costSamples is how many of a way's last transfers its estimate is the
// median of: a trial burst's worth, so that one burst refreshes it, and
// the slow first transfer after a pause, or one held up by a busy sender,
// is outvoted.
const costSamples = trialBurst

func (e *rdmaCost) measured() bool { return e.n > 0 }

func (e *rdmaCost) add(x float64) {
	e.samples[e.n%costSamples] = float32(x)
	e.n++
}

// estimate is the median of the samples taken (of the last costSamples).
func (e *rdmaCost) estimate() float64 {
	k := min(e.n, costSamples)
	var s [costSamples]float32
	copy(s[:], e.samples[:k])
	slices.Sort(s[:k])
	if k%2 == 1 {
		return float64(s[k/2])
	}
	return (float64(s[k/2-1]) + float64(s[k/2])) / 2
}

func newRDMAChoice(measured bool, retry time.Duration) *rdmaChoice {
	return &rdmaChoice{measured: measured, retry: retry, epoch: time.Now(), peers: map[int]*peerCosts{}}
}

// now is the monotonic clock the choice's times are on.
func (c *rdmaChoice) now() time.Duration { return max(time.Since(c.epoch), 1) }

// way says how to take n bytes from world rank world now: byGet or
// byFragments. Each way is tried first (Get first); then the cheaper is
// chosen, and the other again once it has gone unused for the class's
// wait. A way counts as chosen when it is chosen, not when its transfer
// ends, so that a window of large receives started at once tries the
// other way in one burst, not for every receive of the window.
func (c *rdmaChoice) way(world, n int, now time.Duration) int {
	if !c.measured || n <= 0 {
		return byGet // nothing to move: nothing to time, nothing in flight
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.peer(world)
	cc := p.class(n)
	w, trial := -1, false
	for i := range cc.ways {
		if cc.ways[i].burst > 0 {
			cc.ways[i].burst--
			w = i
			break
		}
	}
	if w < 0 {
		if w, trial = c.pick(cc, n, now); trial {
			cc.ways[w].burst = trialBurst - 1
		}
	}
	cc.ways[w].chosen = now
	if w == byFragments {
		if p.inFlight > 0 && now-p.last > lostFlight {
			p.inFlight = 0
		}
		if p.inFlight == 0 {
			p.busyFrom, p.busyBytes = now, 0
		}
		p.inFlight++
		p.busyBytes += n
		p.last = now
	}
	return w
}

// trialBurst is how many receives in a row try a way that is new or has
// gone unused: its first transfers after a pause run slow (a 1 MiB Get
// took 690, then 260, 160 … down to 75 µs over a dozen calls), and one
// sample would keep it out until the next trial.
const trialBurst = 4

// pick chooses a way, and says whether it is a trial (the way is new or
// has gone unused for the class's wait).
func (c *rdmaChoice) pick(cc *classChoice, n int, now time.Duration) (way int, trial bool) {
	get, frag := &cc.ways[byGet], &cc.ways[byFragments]
	wait := max(cc.wait, c.floor(cc, n))
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
// known: the shortest wait between trials is what keeps it there.
const trialBudget = 0.03

// floor is the shortest wait between trials for messages of n bytes:
// minRetry, or longer where a trial's burst costs more than trialBudget
// of the wait (4 MiB far apart: 4 × 300 µs more by fragments, so 40 ms),
// but never above retry.
func (c *rdmaChoice) floor(cc *classChoice, n int) time.Duration {
	get, frag := &cc.ways[byGet], &cc.ways[byFragments]
	if !get.measured() || !frag.measured() {
		return minRetry
	}
	extra := math.Abs(get.estimate()-frag.estimate()) * float64(n) / 1024 // ns more per transfer
	return min(max(minRetry, time.Duration(trialBurst*extra/trialBudget)), c.retry)
}

// note records that a transfer of n bytes from world by way, begun at
// from, has just ended (now). A Get's time is its own: Gets run one after
// another. Transfers by fragments in flight at once share the sender's
// stream, which interleaves them: they end together, at the end of the
// whole (timed one by one, all but one looked nearly free, and fragments
// won where they were twice as slow as Get). So they are timed together:
// from the first one's start to the last one's end, over all their bytes,
// one sample when none is left in flight.
func (c *rdmaChoice) note(world, n, way int, from, now time.Duration) {
	if !c.measured || n <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.peer(world)
	e := &p.class(n).ways[way]
	if way == byGet {
		e.add(float64((now - from).Nanoseconds()) * 1024 / float64(n))
		return
	}
	p.last = now
	if p.inFlight--; p.inFlight > 0 {
		return
	}
	p.inFlight = 0
	if p.busyBytes > 0 {
		e.add(float64((now - p.busyFrom).Nanoseconds()) * 1024 / float64(p.busyBytes))
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
