package shm_test

import (
	"errors"
	"fmt"
	"regexp"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/gompi/gompi/frameworks/btl"
	"github.com/gompi/gompi/mpitest"
)

// spin progresses until done reports true, yielding when nothing moved.
func spin(r *mpitest.Rank, done func() bool) {
	for !done() {
		if r.BML().Progress() == 0 {
			runtime.Gosched()
		}
	}
}

func sendAll(r *mpitest.Rank, p btl.Route, frag []byte) error {
	for {
		err := p.Module.Send(p.EP, btl.TagUser, nil, frag)
		if !errors.Is(err, btl.ErrWouldBlock) {
			return err
		}
		if r.BML().Progress() == 0 {
			runtime.Gosched()
		}
	}
}

// BenchmarkPingPong8B: an 8-byte fragment bounced between two goroutine
// ranks over shm (Sendi, then Progress until the answer); ns/oneway is half
// a round trip.
func BenchmarkPingPong8B(b *testing.B) {
	var oneway float64
	mpitest.Run(b, 2, func(r *mpitest.Rank) error {
		got := 0 // touched by the callback, on this goroutine
		r.BML().RegisterRecv(btl.TagUser, func(int, btl.Tag, []byte) { got++ })
		if err := r.Runtime().Barrier(); err != nil {
			return err
		}
		p := r.BML().Peer(1 - r.Rank()).Send[0]
		if p.Attr.Name != "shm" {
			return fmt.Errorf("route %s", p.Attr.Name)
		}
		buf := make([]byte, 8)
		const warm = 1000
		var start time.Time
		for i := 0; i < warm+b.N; i++ {
			if i == warm {
				start = time.Now()
			}
			if r.Rank() == 0 {
				for !p.Module.Sendi(p.EP, btl.TagUser, nil, buf) {
					r.BML().Progress()
				}
			}
			spin(r, func() bool { return got > i })
			if r.Rank() == 1 {
				for !p.Module.Sendi(p.EP, btl.TagUser, nil, buf) {
					r.BML().Progress()
				}
			}
		}
		if r.Rank() == 0 {
			oneway = float64(time.Since(start).Nanoseconds()) / float64(2*b.N)
		}
		return nil
	}, shmOnly()...)
	b.ReportMetric(oneway, "ns/oneway")
}

// BenchmarkThroughput1MiB: 1 MiB messages from rank 0 to rank 1, each
// acknowledged, as max_send_size fragments through the ring (copied out on
// arrival, as a PML would) or by one Get (single copy).
func BenchmarkThroughput1MiB(b *testing.B) {
	for _, path := range []string{"fragments", "get"} {
		b.Run(path, func(b *testing.B) {
			const size = 1 << 20
			b.SetBytes(size)
			var perSec float64
			mpitest.Run(b, 2, func(r *mpitest.Rank) error {
				buf := make([]byte, size)
				var got, bytes int
				var desc []byte
				r.BML().RegisterRecv(btl.TagUser, func(_ int, _ btl.Tag, frag []byte) {
					got++
					if r.Rank() == 1 {
						if path == "get" {
							desc = append(desc[:0], frag...)
						} else {
							copy(buf[bytes%size:], frag)
							bytes += len(frag)
						}
					}
				})
				if err := r.Runtime().Barrier(); err != nil {
					return err
				}
				p := r.BML().Peer(1 - r.Rank()).Send[0]
				room := p.Attr.MaxSendSize
				start := time.Now()
				for i := 0; i < b.N; i++ {
					if r.Rank() == 0 {
						if path == "get" {
							if err := sendAll(r, p, p.Module.(btl.RDMA).Expose(buf)); err != nil {
								return err
							}
						} else {
							for off := 0; off < size; off += room {
								if err := sendAll(r, p, buf[off:min(off+room, size)]); err != nil {
									return err
								}
							}
						}
						spin(r, func() bool { return got > i })
					} else {
						if path == "get" {
							spin(r, func() bool { return got > i })
							if err := p.Module.(btl.RDMA).Get(p.EP, desc, 0, buf); err != nil {
								return err
							}
						} else {
							spin(r, func() bool { return bytes >= (i+1)*size })
						}
						if err := sendAll(r, p, buf[:8]); err != nil {
							return err
						}
					}
				}
				runtime.KeepAlive(buf)
				if r.Rank() == 0 {
					perSec = float64(b.N) * size / time.Since(start).Seconds()
				}
				return nil
			}, shmOnly()...)
			b.ReportMetric(perSec/1e6, "MB/s-measured")
		})
	}
}

// The process benchmarks run whole jobs under mpirun (shmprog pingpong and
// stream), each timing itself; they report the mean of what the jobs
// measured, not the start-up.
func benchProcess(b *testing.B, unit string, scale float64, re string, args ...string) {
	build(b)
	var sum float64
	for i := 0; i < b.N; i++ {
		p := mpirun(b, append([]string{"-np", "2", "--mca", "btl", "self,shm", bins.shmprog}, args...)...)
		p.Wait(b, time.Minute)
		m := regexp.MustCompile(re).FindStringSubmatch(p.Stdout.String())
		if p.Err != nil || m == nil {
			b.Fatalf("%v\n%s\n%s", p.Err, p.Stdout, p.Stderr)
		}
		v, _ := strconv.ParseFloat(m[1], 64)
		sum += v * scale
	}
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(sum/float64(b.N), unit)
}

func BenchmarkProcessPingPong8B(b *testing.B) {
	benchProcess(b, "ns/oneway", 1, `ns_per_oneway ([\d.]+)`, "pingpong", "200000", "8")
}

func BenchmarkProcessThroughput1MiB(b *testing.B) {
	b.Run("fragments", func(b *testing.B) {
		benchProcess(b, "MB/s", 1e-6, `bytes_per_second ([\d.]+)`, "stream", "2000", strconv.Itoa(1<<20))
	})
	b.Run("get", func(b *testing.B) {
		benchProcess(b, "MB/s", 1e-6, `bytes_per_second ([\d.]+)`, "stream", "2000", strconv.Itoa(1<<20), "get")
	})
}
