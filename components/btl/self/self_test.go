package self_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/gompi/gompi/frameworks/btl"
	"github.com/gompi/gompi/frameworks/btl/btltest"
	"github.com/gompi/gompi/mpitest"
)

// Every size to oneself, with the default limits and with small ones:
// the route is self with the limits set, messages up to a fragment go
// whole and the rest in pieces (or by Get), and every one arrives intact.
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
			a := r.BML().Peer(r.Rank()).Send[0].Attr
			if a.Name != "self" {
				return fmt.Errorf("rank %d reaches itself with %s", r.Rank(), a.Name)
			}
			if flags != nil && (a.MaxSendSize != 4<<10 || a.EagerLimit != 1<<10) {
				return fmt.Errorf("max send size %d, eager limit %d: want the 4k and 1k set", a.MaxSendSize, a.EagerLimit)
			}
			sizes := btltest.Sizes(max)
			if err := h.Sweep(r.Rank(), sizes, time.Minute); err != nil {
				return err
			}
			whole := 0
			for _, s := range sizes {
				if s <= a.MaxSendSize-btltest.HeaderLen {
					whole++
				}
			}
			if s := h.Stats; s.Whole != whole || s.Whole+s.Fragmented+s.RDMA != len(sizes) {
				return fmt.Errorf("stats %+v: want %d whole of %d messages, the rest in pieces or by Get", s, whole, len(sizes))
			}
			return nil
		}, append(opts, mpitest.WithMCA("btl", "self"))...)
	}
}
