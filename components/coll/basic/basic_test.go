package basic

import (
	"testing"

	"github.com/gompi/gompi/frameworks/coll"
	"github.com/gompi/gompi/frameworks/coll/colltest"
)

// Every slot of basic matches the reference at sizes 1-17 and 65, every
// root, in place or not, for commutative and non-commutative ops.
func TestConformance(t *testing.T) {
	for _, op := range coll.Ops() {
		t.Run(op.String(), func(t *testing.T) {
			t.Parallel()
			o := colltest.Options{AllRoots: true}
			if testing.Short() {
				o.Sizes = []int{1, 2, 3, 4, 5, 8, 9, 16, 17}
				o.AllRoots = false
			}
			colltest.Conformance(t, op, Module.Func(op), o)
		})
	}
}
