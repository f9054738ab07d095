package tcp_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gompi/gompi/frameworks/btl"
	"github.com/gompi/gompi/mpi"
	"github.com/gompi/gompi/mpitest"
)

// The benchmarks drive the BTL directly, as the PML will: Send, and
// Progress until the fragment has arrived, yielding when nothing moved.
// Goroutine ranks share one process; the Proc variants run two processes
// under mpirun, each a copy of this test binary (TestMain hands it to
// benchRank when benchProgEnv is set).

const benchProgEnv = "GOMPI_TCP_BENCH"

// pair is one rank's side of a two-rank benchmark.
type pair struct {
	bml   *btl.BML
	route btl.Route
	peer  int
	got   int // fragments received
	bytes int // bytes received
	sink  []byte
}

func newPair(bml *btl.BML, rank int) (*pair, error) {
	p := &pair{bml: bml, peer: 1 - rank, sink: make([]byte, 1<<20)}
	route := bml.Peer(p.peer).Send
	if len(route) == 0 || route[0].Attr.Name != "tcp" {
		return nil, fmt.Errorf("rank %d reaches rank %d by %v, not tcp", rank, p.peer, route)
	}
	p.route = route[0]
	bml.RegisterRecv(btl.TagUser, func(src int, tag btl.Tag, frag []byte) {
		// Copy out, as a receive into a user buffer would.
		p.bytes += copy(p.sink[p.bytes%len(p.sink):], frag)
		p.got++
	})
	return p, nil
}

func (p *pair) send(payload []byte) error {
	for {
		err := p.route.Module.Send(p.route.EP, btl.TagUser, nil, payload)
		if !errors.Is(err, btl.ErrWouldBlock) {
			return err
		}
		p.idle()
	}
}

func (p *pair) idle() {
	if p.bml.Progress() == 0 {
		runtime.Gosched()
	}
}

func (p *pair) waitFor(n int) {
	for p.got < n {
		p.idle()
	}
}

// pingPong runs iters round trips of size bytes and returns the one-way
// time. Rank 0 starts each trip; rank 1 echoes.
func (p *pair) pingPong(rank, iters, size int) time.Duration {
	msg := make([]byte, size)
	base := p.got
	var start time.Time
	const warmup = 200
	for i := range iters + warmup {
		if i == warmup {
			start = time.Now()
		}
		if rank == 0 {
			p.send(msg)
			p.waitFor(base + i + 1)
		} else {
			p.waitFor(base + i + 1)
			p.send(msg)
		}
	}
	return time.Since(start) / time.Duration(2*iters)
}

// stream sends count messages of size bytes from rank 0 to rank 1, each as
// fragments of the module's max send size, and waits for rank 1's
// acknowledgement of the last; it returns the time taken.
func (p *pair) stream(rank, count, size int) (time.Duration, error) {
	msg := make([]byte, size)
	frag := p.route.Attr.MaxSendSize
	perMsg := (size + frag - 1) / frag
	start := time.Now()
	if rank == 0 {
		for range count {
			for off := 0; off < size; off += frag {
				if err := p.send(msg[off:min(off+frag, size)]); err != nil {
					return 0, err
				}
			}
		}
		p.waitFor(1)
	} else {
		p.waitFor(count * perMsg)
		if p.bytes != count*size {
			return 0, fmt.Errorf("received %d bytes, want %d", p.bytes, count*size)
		}
		if err := p.send([]byte{1}); err != nil {
			return 0, err
		}
	}
	return time.Since(start), nil
}

func BenchmarkLatency8B(b *testing.B) {
	var oneWay time.Duration
	mpitest.Run(b, 2, func(r *mpitest.Rank) error {
		p, err := newPair(r.BML(), r.Rank())
		if err != nil {
			return err
		}
		if err := r.Runtime().Barrier(); err != nil {
			return err
		}
		d := p.pingPong(r.Rank(), b.N, 8)
		if r.Rank() == 0 {
			oneWay = d
		}
		return nil
	}, mpitest.WithMCA("btl", "self,tcp"))
	b.ReportMetric(float64(oneWay.Nanoseconds()), "ns/oneway")
}

func BenchmarkThroughput1MiB(b *testing.B) {
	var took time.Duration
	mpitest.Run(b, 2, func(r *mpitest.Rank) error {
		p, err := newPair(r.BML(), r.Rank())
		if err != nil {
			return err
		}
		if err := r.Runtime().Barrier(); err != nil {
			return err
		}
		if _, err := p.stream(r.Rank(), 4, 1<<20); err != nil { // warm-up
			return err
		}
		if err := r.Runtime().Barrier(); err != nil {
			return err
		}
		p.got, p.bytes = 0, 0
		d, err := p.stream(r.Rank(), b.N, 1<<20)
		if r.Rank() == 0 {
			took = d
		}
		return err
	}, mpitest.WithMCA("btl", "self,tcp"))
	b.SetBytes(1 << 20)
	b.ReportMetric(float64(b.N)*(1<<20)/took.Seconds()/1e6, "MB/s")
}

// Process benchmarks: two ranks under mpirun, reporting their own timing.

var benchOut = regexp.MustCompile(`bench result ns=(\d+)`)

func runProcBench(b *testing.B, mode string, n int) time.Duration {
	b.Helper()
	buildBins(b)
	cmd := exec.Command(bin.mpirun, "-np", "2", "--timeout", "300", "--mca", "btl", "self,tcp",
		"-x", fmt.Sprintf("%s=%s:%d", benchProgEnv, mode, n), os.Args[0])
	out, err := cmd.CombinedOutput()
	if err != nil {
		b.Fatalf("mpirun: %v\n%s", err, out)
	}
	m := benchOut.FindSubmatch(out)
	if m == nil {
		b.Fatalf("no result in:\n%s", out)
	}
	ns, _ := strconv.ParseInt(string(m[1]), 10, 64)
	return time.Duration(ns)
}

func BenchmarkProcLatency8B(b *testing.B) {
	d := runProcBench(b, "latency", max(b.N, 1000))
	b.ReportMetric(float64(d.Nanoseconds()), "ns/oneway")
}

func BenchmarkProcThroughput1MiB(b *testing.B) {
	n := max(b.N, 16)
	d := runProcBench(b, "stream", n)
	b.SetBytes(1 << 20)
	b.ReportMetric(float64(n)*(1<<20)/d.Seconds()/1e6, "MB/s")
}

// benchRank is a rank of a process benchmark: GOMPI_TCP_BENCH=mode:count.
func benchRank() int {
	mode, count, _ := strings.Cut(os.Getenv(benchProgEnv), ":")
	n, err := strconv.Atoi(count)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench: bad count", count)
		return 2
	}
	inst, err := mpi.Init()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	p, err := newPair(inst.BML(), inst.Rank())
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	if err := inst.Runtime().Barrier(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	var d time.Duration
	switch mode {
	case "latency":
		d = p.pingPong(inst.Rank(), n, 8)
	case "stream":
		if _, err := p.stream(inst.Rank(), 4, 1<<20); err == nil {
			if err = inst.Runtime().Barrier(); err == nil {
				p.got, p.bytes = 0, 0
				d, err = p.stream(inst.Rank(), n, 1<<20)
			}
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			return 1
		}
	default:
		fmt.Fprintln(os.Stderr, "bench: unknown mode", mode)
		return 2
	}
	if inst.Rank() == 0 {
		fmt.Printf("bench result ns=%d\n", d.Nanoseconds())
	}
	if err := inst.Finalize(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	return 0
}

// BenchmarkProgressIdle is the cost of one Progress that finds nothing: the
// price of polling an idle connection.
func BenchmarkProgressIdle(b *testing.B) {
	mpitest.Run(b, 2, func(r *mpitest.Rank) error {
		p, err := newPair(r.BML(), r.Rank())
		if err != nil {
			return err
		}
		if err := r.Runtime().Barrier(); err != nil {
			return err
		}
		// One round trip, so that both connections exist.
		p.pingPong(r.Rank(), 1, 8)
		if err := r.Runtime().Barrier(); err != nil {
			return err
		}
		if r.Rank() == 0 {
			mod := p.route.Module
			b.ResetTimer()
			for range b.N {
				mod.Progress()
			}
			b.StopTimer()
		}
		return r.Runtime().Barrier()
	}, mpitest.WithMCA("btl", "self,tcp"))
}
