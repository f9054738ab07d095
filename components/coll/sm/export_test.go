package sm

import "github.com/gompi/gompi/rte"

// FailSetup makes the segment setups of world rank rank, in rt's job of
// goroutine ranks, fail with err: on rank 0 the making of the segment, on
// another rank its mapping. Call it on that rank before its first
// collective through sm.
func FailSetup(rt *rte.Runtime, rank int, err error) {
	rt.Neighborhood().Shared(faultKey{rank}, func() any { return err })
}
