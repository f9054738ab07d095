package ob1

import (
	"testing"
	"time"
)

// BenchmarkRDMAChoiceWay is what the receiver's choice costs an RGET of a
// settled class: the choice, and the note of a timed transfer, on a clock
// the benchmark sets (the clock reads themselves are not in it).
func BenchmarkRDMAChoiceWay(b *testing.B) {
	c := newRDMAChoice(true, 100*time.Millisecond, 8)
	now := time.Millisecond
	take := func() {
		w, timed := c.wayTimed(1, 32<<10, false, now)
		if timed {
			c.note(1, 32<<10, w, now, now+3*time.Microsecond)
		}
		now += 4 * time.Microsecond
	}
	for range 100 {
		take()
	}
	b.ResetTimer()
	for range b.N {
		take()
	}
}
