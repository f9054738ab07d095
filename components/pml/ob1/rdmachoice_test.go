package ob1

import (
	"math/bits"
	"testing"
	"time"
)

// The receiver's choice between Get and fragments, on a clock the test
// sets: each way is tried in a burst first, the cheaper is kept, the other
// is tried again after waits that double up to the retry interval (so it
// costs a few trials a retry), and a change of which is cheaper (the
// processes moved) changes the choice within about one retry interval.
func TestRDMAChoiceTriesBothAndKeepsTheFaster(t *testing.T) {
	const retry = 20 * time.Millisecond
	const n = 1 << 20
	c := newRDMAChoice(true, retry, 8)
	now := time.Millisecond
	// trials bounds the receives the slower way takes over span: a burst
	// per doubling of the wait from minRetry to retry, then one per retry.
	trials := func(span time.Duration) int {
		return (bits.Len(uint(retry/minRetry)) + 1 + int(span/retry)) * trialBurst
	}
	// run receives from peer 3 for span, each taking its way's time
	// (transfers one after another), and counts the ways.
	run := func(span, get, frag time.Duration) (ways [2]int, first []int) {
		for end := now + span; now < end; {
			w := c.way(3, n, false, now)
			d := get
			if w == byFragments {
				d = frag
			}
			c.note(3, n, w, now, now+d)
			now += d + time.Microsecond
			ways[w]++
			if len(first) < 2*trialBurst {
				first = append(first, w)
			}
		}
		return ways, first
	}
	// Get first, for a burst; then fragments, for a burst.
	_, first := run(2*time.Millisecond, 70*time.Microsecond, 38*time.Microsecond)
	for i, w := range first {
		want := byGet
		if i >= trialBurst {
			want = byFragments
		}
		if w != want {
			t.Fatalf("receive %d of the first trials took way %d, want %d (ways %v)", i, w, want, first)
		}
	}
	// Fragments are cheaper: kept, with Get tried less and less often, and
	// still tried (a trial a retry interval, in the end).
	ways, _ := run(2*time.Second, 70*time.Microsecond, 38*time.Microsecond)
	if ways[byGet] > trials(2*time.Second) || ways[byGet] < int(2*time.Second/retry)*trialBurst/2 {
		t.Fatalf("over 2 s with fragments cheaper, Get took %d of %d receives, want trials only (at most %d), at least one a retry (%d)",
			ways[byGet], ways[byGet]+ways[byFragments], trials(2*time.Second), int(2*time.Second/retry)*trialBurst/2)
	}
	// One slow transfer by fragments (a busy sender) does not turn the
	// choice: the least of the last few leaves it out.
	if w := c.way(3, n, false, now); w != byFragments {
		t.Fatalf("way %d, want fragments", w)
	}
	c.note(3, n, byFragments, now, now+400*time.Microsecond)
	now += 401 * time.Microsecond
	if w := c.way(3, n, false, now); w != byFragments {
		t.Fatalf("one slow transfer by fragments turned the choice to way %d", w)
	}
	c.note(3, n, byFragments, now, now+38*time.Microsecond)
	now += 39 * time.Microsecond
	// The placement changes: fragments now take twice Get's time. Within
	// a retry interval and its trial the choice is Get, and stays so.
	run(retry+5*time.Millisecond, 70*time.Microsecond, 150*time.Microsecond)
	if ways, _ := run(time.Second, 70*time.Microsecond, 150*time.Microsecond); ways[byFragments] > trials(time.Second) {
		t.Fatalf("with Get the cheaper, %d of %d receives took fragments, want trials only (at most %d)",
			ways[byFragments], ways[byGet]+ways[byFragments], trials(time.Second))
	}
	// Other peers and other sizes have estimates of their own.
	if w := c.way(4, n, false, now); w != byGet {
		t.Fatalf("a new peer's first receive took way %d, want Get (its trial)", w)
	}
	if w := c.way(3, 64<<10, false, now); w != byGet {
		t.Fatalf("a new size class's first receive took way %d, want Get (its trial)", w)
	}
}

// Transfers by fragments in flight at once share the sender's stream,
// which interleaves them, so they end together: timed one by one, the
// first looked slow and the rest free. They are timed together: one sample
// from the first start to the last end, over all their bytes.
func TestRDMAChoiceTimesFragmentsInFlightTogether(t *testing.T) {
	c := newRDMAChoice(true, time.Second, 8)
	const n = 1 << 20
	now := time.Millisecond
	// Trials: Get at 70 µs, fragments at 38, one at a time.
	for i := 0; i < 2*trialBurst; i++ {
		w := c.way(1, n, false, now)
		d := map[int]time.Duration{byGet: 70 * time.Microsecond, byFragments: 38 * time.Microsecond}[w]
		c.note(1, n, w, now, now+d)
		now += d
	}
	// A window: eight asked at once, ending within 2 µs of each other
	// after 8 × 150 µs (the stream's real rate: slower than Get's).
	// Receives that take Get meanwhile (its trials) read at once.
	frags := 0
	for round := 0; frags < costSamples*8 && round < 100; round++ {
		k := 0
		for i := 0; i < 8; i++ {
			if w := c.way(1, n, false, now); w == byGet {
				c.note(1, n, byGet, now, now+70*time.Microsecond)
				now += 70 * time.Microsecond
				continue
			}
			k++
		}
		end := now + time.Duration(k)*150*time.Microsecond
		for i := 0; i < k; i++ {
			c.note(1, n, byFragments, now, end+time.Duration(i)*250*time.Nanosecond)
		}
		frags += k
		now = end + 2*time.Microsecond
	}
	// About 150 µs a message (more where Get's trials held the window up),
	// not the quarter microsecond between two ends.
	got := c.peer(1).class(n).ways[byFragments].estimate()
	if want := 150e3 * 1024 / float64(n); got < 0.95*want || got > 1.5*want {
		t.Fatalf("fragments cost %.1f ns/KiB after windows of eight, want about %.1f (150 µs a message)", got, want)
	}
	if w := c.way(1, n, false, now); w != byGet {
		t.Fatalf("way %d after the windows showed fragments slower, want Get", w)
	}
}

// In a window of large receives a trial of fragments runs beside the
// window's other receives, which take Get: the receiver copies those
// meanwhile, and its fragments wait. That time is the Gets', not the
// fragments': counted in, fragments twice as fast as Get (near, 1 MiB:
// 35 against 64 µs) looked slower, and windowed bandwidth stayed at Get's.
// Every Get made while fragments are in flight is timed, for that.
func TestRDMAChoiceFragmentsBesideAWindowOfGets(t *testing.T) {
	c := newRDMAChoice(true, 100*time.Millisecond, 8)
	const n, window = 1 << 20, 16
	get, frag := 64*time.Microsecond, 35*time.Microsecond
	now := time.Millisecond
	byFrag, total := 0, 0
	for round := 0; round < 200; round++ {
		k := 0
		for i := 0; i < window; i++ {
			w, timed := c.wayTimed(1, n, false, now)
			if w == byFragments {
				k++
				continue
			}
			if c.busy > 0 && !timed {
				t.Fatalf("round %d: a Get made while fragments are in flight is not timed", round)
			}
			if timed {
				c.note(1, n, byGet, now, now+get)
			}
			now += get
		}
		// The fragments end after the receiver's Gets, at their own rate.
		end := now + time.Duration(k)*frag
		for i := 0; i < k; i++ {
			c.note(1, n, byFragments, now, end)
		}
		now = end + time.Microsecond
		if round >= 150 {
			byFrag += k
			total += window
		}
	}
	if byFrag < total*9/10 {
		t.Fatalf("%d of the last %d receives by fragments (35 µs against Get's 64), want nine in ten or more; estimates Get %.0f, fragments %.0f ns/KiB",
			byFrag, total, c.peer(1).class(n).ways[byGet].estimate(), c.peer(1).class(n).ways[byFragments].estimate())
	}
}

// A transfer by fragments given up on as lost (no end for lostFlight)
// that ends after all neither adds a sample nor uncounts the peer's
// transfers in flight since: the count of peers with fragments in flight,
// which decides whether Gets are timed for them, stays right.
func TestRDMAChoiceLateEndOfALostTransfer(t *testing.T) {
	c := newRDMAChoice(true, time.Second, 8)
	const n = 1 << 20
	now := time.Millisecond
	fragments := func() time.Duration { // the next transfer by fragments, left in flight
		for i := 0; i < 1000; i++ {
			if c.way(1, n, false, now) == byFragments {
				return now
			}
			c.note(1, n, byGet, now, now+64*time.Microsecond)
			now += 65 * time.Microsecond
		}
		t.Fatal("no transfer by fragments in 1000 choices")
		return 0
	}
	lost := fragments()
	now += 2 * lostFlight
	fresh := fragments()
	if c.busy != 1 {
		t.Fatalf("after a lost transfer and a new one: %d peers busy, want 1", c.busy)
	}
	samples := c.peer(1).class(n).ways[byFragments].n
	c.note(1, n, byFragments, lost, now+time.Microsecond)
	if c.busy != 1 || c.peer(1).inFlight != 1 {
		t.Fatalf("after the lost one's late end: %d peers busy, %d in flight; want 1 and 1 (the new one)", c.busy, c.peer(1).inFlight)
	}
	c.note(1, n, byFragments, fresh, now+40*time.Microsecond)
	if c.busy != 0 || c.peer(1).class(n).ways[byFragments].n != samples+1 {
		t.Fatalf("after the new one's end: %d peers busy, %d samples; want 0 and %d", c.busy, c.peer(1).class(n).ways[byFragments].n, samples+1)
	}
}

// With pml_ob1_rdma_choice=always, every receive takes Get.
func TestRDMAChoiceAlways(t *testing.T) {
	c := newRDMAChoice(false, time.Millisecond, 8)
	for i := 0; i < 3*trialBurst; i++ {
		if w := c.way(0, 1<<20, false, time.Duration(i+1)*time.Second); w != byGet {
			t.Fatalf("receive %d took way %d with the choice off", i, w)
		}
		c.note(0, 1<<20, byGet, 0, time.Hour)
	}
}

// Where the slower way costs much more per transfer (4 MiB, Get 300 µs and
// fragments 600, as far apart), trials come less often: their time stays
// within trialBudget of the whole, short runs included.
func TestRDMAChoiceTrialsWithinBudget(t *testing.T) {
	const n = 4 << 20
	for _, span := range []time.Duration{60 * time.Millisecond, 2 * time.Second} {
		c := newRDMAChoice(true, 100*time.Millisecond, 8)
		now := time.Millisecond
		var slow time.Duration
		for end := now + span; now < end; {
			w := c.way(5, n, false, now)
			d := 300 * time.Microsecond
			if w == byFragments {
				d = 600 * time.Microsecond
				slow += 300 * time.Microsecond
			}
			c.note(5, n, w, now, now+d)
			now += d
		}
		// The first trial (4 transfers) is the price of knowing; past it,
		// the budget.
		first := trialBurst * 300 * time.Microsecond
		if limit := first + time.Duration(2*trialBudget*float64(span)); slow > limit {
			t.Fatalf("over %v the slower way cost %v more, want at most %v", span, slow, limit)
		}
	}
}

// A receive with nothing to place (a zero-length buffer, the message
// truncated to nothing) takes Get, which ends at once, and leaves nothing
// in flight: counted as a transfer by fragments that never ends, it held
// every later one's timing open for a second.
func TestRDMAChoiceNothingToMove(t *testing.T) {
	c := newRDMAChoice(true, time.Second, 8)
	now := time.Millisecond
	for i := 0; i < 3*trialBurst; i++ {
		if w := c.way(2, 0, false, now); w != byGet {
			t.Fatalf("receive %d of nothing took way %d, want Get", i, w)
		}
		now += time.Microsecond
	}
	if p := c.peer(2); p.inFlight != 0 {
		t.Fatalf("%d transfers by fragments in flight after receives of nothing", p.inFlight)
	}
}

// In the sender's pipelined range both ways are timed from the sender's
// stamp, or from when the message before it (on its communicator, stamped
// too) was received if that is later (endToEnd): in a window, a message
// counts for what it added to the stream, not for its whole wait. A trial of fragments there is one choice (the run of
// PIPEs it starts are its samples), not a burst; and the waits between
// trials count a trial run's cost: fragments 10 µs slower a transfer cost
// a run of 32 PIPEs 320 µs, so the first retry comes after 320 µs / 3 %.
func TestRDMAChoicePipelinedRange(t *testing.T) {
	const n = 16 << 10
	c := newRDMAChoice(true, 100*time.Millisecond, 8)
	now := time.Millisecond
	wall := int64(1e18) // the wall clock, ns; the tests keep it in step with now
	var seq uint16      // the messages' sequence numbers on communicator 3
	// recv receives one message the sender began at the wall clock's now,
	// taking d by the way the receiver chooses (want) or the sender's PIPE
	// (pipe), and reports the choice.
	recv := func(pipe bool, d time.Duration) int {
		t.Helper()
		w := byFragments
		if !pipe {
			w = c.way(1, n, true, now)
		}
		stamp := wall
		now += d
		wall += int64(d)
		seq++
		c.endToEnd(1, n, w, stamp, wall, true, 3, seq, now)
		now += time.Microsecond
		wall += int64(time.Microsecond)
		return w
	}
	take := func(want int, d time.Duration) {
		t.Helper()
		if w := recv(false, d); w != want {
			t.Fatalf("at %v: way %d, want %d", now, w, want)
		}
	}
	for range trialBurst {
		take(byGet, 3*time.Microsecond)
	}
	take(byFragments, 5*time.Microsecond) // the trial: an ACK, then a run
	// No burst: the trial's ACK is not timed (a PIPE does not pay its round
	// trip), and with no sample of fragments yet the offer goes to Get.
	for range pipeRun - 2 {
		recv(true, 1200*time.Nanosecond)
	}
	take(byFragments, 1900*time.Nanosecond)

	// A window: the sender begins all its messages at once, and each is
	// received 0.5 µs after the one before: each counts for 0.5 µs (what
	// it added to the stream), not for its whole wait. 0.5 µs is cheaper
	// than the PIPEs' 1.2 µs alone, and the estimate (the least of four) shows it.
	stamp := wall
	for range 8 {
		now += 500 * time.Nanosecond
		wall += int64(500 * time.Nanosecond)
		seq++
		c.endToEnd(1, n, byFragments, stamp, wall, true, 3, seq, now)
	}
	if got := c.peer(1).class(n).ways[byFragments].estimate() * n / 1024; got != 500 {
		t.Fatalf("fragments after a window: %.0f ns a message, want 500", got)
	}
	take(byFragments, 1900*time.Nanosecond)
	// A message that waited unexpected (not fresh), one whose predecessor
	// was not stamped (a gap in the sequence), one on another
	// communicator: none counts, slow as they are.
	seq++
	c.endToEnd(1, n, byFragments, wall, wall+int64(time.Millisecond), false, 3, seq, now)
	seq += 2
	c.endToEnd(1, n, byFragments, wall+int64(2*time.Millisecond), wall+int64(3*time.Millisecond), true, 3, seq, now)
	seq++
	c.endToEnd(1, n, byFragments, wall+int64(4*time.Millisecond), wall+int64(5*time.Millisecond), true, 4, seq, now)
	wall += int64(6 * time.Millisecond)
	if got := c.peer(1).class(n).ways[byFragments].estimate() * n / 1024; got > 1200 {
		t.Fatalf("fragments after three messages that do not count: %.0f ns a message, want at most 1200", got)
	}
	take(byFragments, 1900*time.Nanosecond)

	// The other way round: fragments 10 µs slower. A trial of them costs a
	// run, so the next comes after pipeRun × 10 µs / trialBudget.
	c = newRDMAChoice(true, 10*time.Second, 8)
	now = time.Millisecond
	for range trialBurst {
		take(byGet, 3*time.Microsecond)
	}
	take(byFragments, 13*time.Microsecond)
	for range pipeRun - 2 {
		recv(true, 13*time.Microsecond)
	}
	take(byGet, 3*time.Microsecond)
	floor := time.Duration(pipeTrialRun) * 10 * time.Microsecond * 100 / time.Duration(trialBudget*100)
	for end := now + floor/2; now < end; {
		take(byGet, 3*time.Microsecond)
	}
	now += floor/2 + time.Millisecond
	take(byFragments, 13*time.Microsecond)
}

// A sender in its pipelined range: after an answer of fragments, a run of
// pipeRun-1 PIPEs and then an offer; after any other answer, or none yet,
// an offer for every message. Size classes are apart.
func TestPipeOffers(t *testing.T) {
	const n = 16 << 10
	var o pipeOffers
	offer := func(what string) uint32 {
		t.Helper()
		pipe, stamp, k := o.next(n)
		if pipe || !stamp || k == 0 {
			t.Fatalf("%s: pipelined %v, stamped %v, offer %d; want a stamped, numbered offer", what, pipe, stamp, k)
		}
		return k
	}
	// run sends the PIPEs of a run that should be want long (the offer
	// that ends it excluded), and checks that eight pairs are stamped.
	run := func(want int) {
		t.Helper()
		stamped := 0
		for i := 1; i < want; i++ {
			pipe, stamp, k := o.next(n)
			if !pipe || k != 0 {
				t.Fatalf("message %d of a run of %d offered", i, want)
			}
			if stamp {
				stamped++
			}
			if i == 1 && want == pipeTrialRun {
				if pipe, _, _ := o.next(2 * n); pipe {
					t.Fatal("another size class pipelined on this one's answer")
				}
			}
		}
		if stamped != 16-1 { // the last pair's second is the offer
			t.Fatalf("%d PIPEs of a run of %d stamped, want 15 (eight pairs, the offer the last's second)", stamped, want)
		}
	}
	// A window of three offers: the receiver takes the first by Get, tries
	// fragments on the second, and takes the third by Get again. The
	// third's FIN, an answer to an offer made before the run began, must
	// not end the run the second's ACK asked for. The run is a trial's.
	first := offer("nothing heard")
	second := offer("nothing heard yet, a second message")
	third := offer("nothing heard yet, a third message")
	o.heard(n, first, false)
	o.heard(n, second, true)
	o.heard(n, third, false)
	run(pipeTrialRun)
	last := offer("the trial run's end")
	// Until the offer's answer comes, PIPEs again, unstamped.
	for i := 0; i < 3; i++ {
		if pipe, stamp, _ := o.next(n); !pipe || stamp {
			t.Fatalf("message %d while the offer's answer is coming: pipelined %v, stamped %v; want an unstamped PIPE", i, pipe, stamp)
		}
	}
	// Fragments again: runs double, up to pipeRun.
	for want := 2 * pipeTrialRun; ; want = min(2*want, pipeRun) {
		o.heard(n, last, true)
		run(want)
		last = offer("a run's end")
		if want == pipeRun {
			o.heard(n, last, true)
			run(pipeRun)
			last = offer("a run's end")
			break
		}
	}
	o.heard(n, last, false)
	for i := 0; i < 3; i++ {
		if pipe, _, _ := o.next(n); pipe {
			t.Fatal("after an answer of Get: pipelined, want an offer")
		}
	}
	o.heard(n, 0, true) // a synchronous send's answer: no offer of the run
	if pipe, _, _ := o.next(n); pipe {
		t.Fatal("an answer to a message that was no offer started a run")
	}
	// trialBurst offers unanswered (the four above): the next messages go
	// as PIPEs, unstamped, until an answer comes.
	if pipe, stamp, _ := o.next(n); !pipe || stamp {
		t.Fatalf("with %d offers unanswered: pipelined %v, stamped %v; want an unstamped PIPE", trialBurst, pipe, stamp)
	}
	// After Get, the next run is a trial's again.
	o.heard(n, o.class(n).made.Load(), true)
	run(pipeTrialRun)
	last = offer("a run's end")

	// Answers of Get in a row: every offer stamped, then, past
	// offerThinAfter of them, two in a row in every offerStampEvery.
	stamped := 0
	for i := 1; i < offerThinAfter+4*offerStampEvery; i++ {
		o.heard(n, last, false) // the i-th answer of Get in a row
		pipe, stamp, k := o.next(n)
		if pipe || k == 0 {
			t.Fatalf("offer after %d answers of Get: pipelined", i)
		}
		if i < offerThinAfter && !stamp {
			t.Fatalf("offer after %d answers of Get unstamped, want stamped", i)
		}
		if i >= offerThinAfter && stamp {
			stamped++
		}
		last = k
	}
	if stamped != 2*4 {
		t.Fatalf("%d of %d offers stamped past %d answers of Get, want %d (pairs)", stamped, 4*offerStampEvery, offerThinAfter, 2*4)
	}
}

// Once Get is the settled choice, one Get in getSampleEvery is timed; the
// first ones, and every one of a trial, are.
func TestRDMAChoiceSamplesSettledGets(t *testing.T) {
	const n = 64 << 10
	c := newRDMAChoice(true, 100*time.Millisecond, 8)
	now := time.Millisecond
	timedGets, gets := 0, 0
	for end := now + 50*time.Millisecond; now < end; {
		w, timed := c.wayTimed(1, n, false, now)
		d := 5 * time.Microsecond // Get
		if w == byFragments {
			d = 10 * time.Microsecond
			if !timed {
				t.Fatalf("at %v: a transfer by fragments not timed", now)
			}
		} else {
			gets++
			if timed {
				timedGets++
			}
		}
		if timed {
			c.note(1, n, w, now, now+d)
		}
		now += d + time.Microsecond
	}
	if lo, hi := gets/getSampleEvery, gets/getSampleEvery+4*trialBurst; timedGets < lo || timedGets > hi {
		t.Fatalf("%d of %d Gets timed, want about one in %d (%d to %d)", timedGets, gets, getSampleEvery, lo, hi)
	}
}

// wayNow, on the choice's own clock, gives a start time (from) exactly to
// the transfers it times: every transfer by fragments, one settled Get in
// getSampleEvery.
func TestRDMAChoiceWayNowTimesWhatItSamples(t *testing.T) {
	const n = 64 << 10
	c := newRDMAChoice(true, 100*time.Millisecond, 8)
	timedGets, gets := 0, 0
	for range 400 {
		w, from := c.wayNow(1, n, false)
		switch {
		case w == byFragments && from == 0:
			t.Fatal("a transfer by fragments without a start time")
		case w == byFragments:
			c.note(1, n, w, from, from+10*time.Microsecond)
		case from != 0:
			timedGets++
			gets++
			c.note(1, n, w, from, from+5*time.Microsecond)
		default:
			gets++
		}
	}
	if lo, hi := gets/getSampleEvery, gets/getSampleEvery+4*trialBurst; timedGets < lo || timedGets > hi {
		t.Fatalf("%d of %d Gets timed, want about one in %d (%d to %d)", timedGets, gets, getSampleEvery, lo, hi)
	}
}
