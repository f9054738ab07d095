package self_test

import (
	"testing"
	"time"

	"github.com/gompi/gompi/frameworks/btl"
	"github.com/gompi/gompi/frameworks/btl/btltest"
	"github.com/gompi/gompi/mpitest"
)

func TestSweepToSelf(t *testing.T) {
	max := 16 << 20
	if testing.Short() {
		max = 64 << 10
	}
	for _, flags := range [][]string{nil, {"btl_self_max_send_size", "4k", "btl_self_eager_limit", "1k"}} {
		var opts []mpitest.Option
		for i := 0; i+1 < len(flags); i += 2 {
			opts = append(opts, mpitest.WithMCA(flags[i], flags[i+1]))
		}
		mpitest.Run(t, 1, func(r *mpitest.Rank) error {
			h := btltest.New(r.BML(), r.Rank(), btl.TagUser)
			if err := r.Runtime().Barrier(); err != nil {
				return err
			}
			if got := r.BML().Peer(r.Rank()).Send[0].Attr.Name; got != "self" {
				t.Errorf("rank %d reaches itself with %s", r.Rank(), got)
			}
			err := h.Sweep(r.Rank(), btltest.Sizes(max), time.Minute)
			t.Logf("rank %d: %+v", r.Rank(), h.Stats)
			return err
		}, append(opts, mpitest.WithMCA("btl", "self"))...)
	}
}
