package self_test

import (
	"errors"
	"testing"

	"github.com/gompi/gompi/frameworks/btl"
	"github.com/gompi/gompi/mpitest"
)

// BenchmarkLatency8B: an 8-byte fragment to oneself, sent and delivered by
// the next Progress; ns/hop is one send plus its delivery.
func BenchmarkLatency8B(b *testing.B) {
	mpitest.Run(b, 1, func(r *mpitest.Rank) error {
		got := 0
		r.BML().RegisterRecv(btl.TagUser, func(int, btl.Tag, []byte) { got++ })
		p := r.BML().Peer(0).Send[0]
		buf := make([]byte, 8)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if err := p.Module.Send(p.EP, btl.TagUser, nil, buf); err != nil {
				return err
			}
			for got <= i {
				r.BML().Progress()
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/hop")
		return nil
	}, mpitest.WithMCA("btl", "self"))
}

// BenchmarkThroughput1MiB: a 1 MiB message to oneself, as fragments of the
// largest size the module takes, and by Get (process_vm_readv on oneself).
func BenchmarkThroughput1MiB(b *testing.B) {
	const size = 1 << 20
	b.Run("fragments", func(b *testing.B) {
		mpitest.Run(b, 1, func(r *mpitest.Rank) error {
			got := 0
			r.BML().RegisterRecv(btl.TagUser, func(_ int, _ btl.Tag, f []byte) { got += len(f) })
			p := r.BML().Peer(0).Send[0]
			msg := make([]byte, size)
			frag := p.Attr.MaxSendSize
			b.SetBytes(size)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				got = 0
				for off := 0; off < size; off += frag {
					for {
						err := p.Module.Send(p.EP, btl.TagUser, nil, msg[off:min(off+frag, size)])
						if err == nil {
							break
						}
						if !errors.Is(err, btl.ErrWouldBlock) {
							return err
						}
						r.BML().Progress()
					}
				}
				for got < size {
					r.BML().Progress()
				}
			}
			return nil
		}, mpitest.WithMCA("btl", "self"))
	})
	b.Run("get", func(b *testing.B) {
		mpitest.Run(b, 1, func(r *mpitest.Rank) error {
			p := r.BML().Peer(0).Send[0]
			rdma := p.Module.(btl.RDMA)
			src, dst := make([]byte, size), make([]byte, size)
			desc := rdma.Expose(src)
			b.SetBytes(size)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := rdma.Get(p.EP, desc, 0, dst); err != nil {
					return err
				}
			}
			return nil
		}, mpitest.WithMCA("btl", "self"))
	})
}
