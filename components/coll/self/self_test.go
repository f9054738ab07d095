package self

import (
	"testing"

	"github.com/gompi/gompi/frameworks/coll"
	"github.com/gompi/gompi/frameworks/coll/colltest"
)

func TestConformance(t *testing.T) {
	for _, op := range coll.Ops() {
		colltest.Conformance(t, op, module.Func(op), colltest.Options{Sizes: []int{1}})
	}
}
