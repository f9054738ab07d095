package dense

import (
	"testing"

	"github.com/gompi/gompi/frameworks/group"
)

func TestModule(t *testing.T) {
	o := group.Ops{Module: Module{}, Me: 2}
	w, err := o.World(8)
	if err != nil {
		t.Fatal(err)
	}
	// Whatever the shape, dense stores 4 bytes per member and lookups
	// take the inline path.
	for _, ranges := range [][][3]int{{{0, 7, 2}}, {{0, 3, 1}}, {{7, 0, -1}}} {
		g, err := o.RangeIncl(w, ranges)
		if err != nil {
			t.Fatal(err)
		}
		if g.Store().Format() != "dense" || g.Store().Bytes() != 4*g.Size() {
			t.Errorf("%v: stored as %s in %d bytes", ranges, g.Store().Format(), g.Store().Bytes())
		}
		if _, ok := g.Store().(group.Denser); !ok {
			t.Errorf("%v: the store does not expose its slice", ranges)
		}
	}
	c := &Component{}
	if prio, _, err := c.Query(nil); err != nil || prio != c.Info().Priority {
		t.Errorf("Query gives priority %d (%v), Info %d", prio, err, c.Info().Priority)
	}
}
