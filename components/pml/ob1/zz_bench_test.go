package ob1

import (
	"testing"
	"time"
)

func BenchmarkRDMAChoiceWay(b *testing.B) {
	c := newRDMAChoice(true, 100*time.Millisecond, 8)
	now := time.Millisecond
	for i := 0; i < 100; i++ {
		w := c.way(1, 32<<10, false, now)
		c.note(1, 32<<10, w, now, now+3*time.Microsecond)
		now += 4 * time.Microsecond
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		w := c.way(1, 32<<10, false, now)
		c.note(1, 32<<10, w, now, now+3*time.Microsecond)
		now += 4 * time.Microsecond
	}
}
