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
	c := newRDMAChoice(true, retry)
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
			w := c.way(3, n, now)
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
	// choice: the median of the last few outvotes it.
	if w := c.way(3, n, now); w != byFragments {
		t.Fatalf("way %d, want fragments", w)
	}
	c.note(3, n, byFragments, now, now+400*time.Microsecond)
	now += 401 * time.Microsecond
	if w := c.way(3, n, now); w != byFragments {
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
	if w := c.way(4, n, now); w != byGet {
		t.Fatalf("a new peer's first receive took way %d, want Get (its trial)", w)
	}
	if w := c.way(3, 64<<10, now); w != byGet {
		t.Fatalf("a new size class's first receive took way %d, want Get (its trial)", w)
	}
}

// Transfers by fragments in flight at once share the sender's stream,
// which interleaves them, so they end together: timed one by one, the
// first looked slow and the rest free. They are timed together: one sample
// from the first start to the last end, over all their bytes.
func TestRDMAChoiceTimesFragmentsInFlightTogether(t *testing.T) {
	c := newRDMAChoice(true, time.Second)
	const n = 1 << 20
	now := time.Millisecond
	// Trials: Get at 70 µs, fragments at 38, one at a time.
	for i := 0; i < 2*trialBurst; i++ {
		w := c.way(1, n, now)
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
			if w := c.way(1, n, now); w == byGet {
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
	if w := c.way(1, n, now); w != byGet {
		t.Fatalf("way %d after the windows showed fragments slower, want Get", w)
	}
}

// With pml_ob1_rdma_choice=always, every receive takes Get.
func TestRDMAChoiceAlways(t *testing.T) {
	c := newRDMAChoice(false, time.Millisecond)
	for i := 0; i < 3*trialBurst; i++ {
		if w := c.way(0, 1<<20, time.Duration(i+1)*time.Second); w != byGet {
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
		c := newRDMAChoice(true, 100*time.Millisecond)
		now := time.Millisecond
		var slow time.Duration
		for end := now + span; now < end; {
			w := c.way(5, n, now)
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
	c := newRDMAChoice(true, time.Second)
	now := time.Millisecond
	for i := 0; i < 3*trialBurst; i++ {
		if w := c.way(2, 0, now); w != byGet {
			t.Fatalf("receive %d of nothing took way %d, want Get", i, w)
		}
		now += time.Microsecond
	}
	if p := c.peer(2); p.inFlight != 0 {
		t.Fatalf("%d transfers by fragments in flight after receives of nothing", p.inFlight)
	}
}
