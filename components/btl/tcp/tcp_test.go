package tcp_test

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gompi/gompi/components/btl/tcp"
	"github.com/gompi/gompi/frameworks/btl"
	"github.com/gompi/gompi/frameworks/btl/btltest"
	"github.com/gompi/gompi/internal/testutil"
	"github.com/gompi/gompi/mpitest"
)

// The process tests run the real mpirun on real processes: buildBins
// builds mpirun and btlprog once, when the first of them needs it. A test
// binary started with benchProgEnv set is a rank of a process benchmark
// instead (see bench_test.go).
var bin struct {
	once                 sync.Once
	err                  error
	dir, mpirun, btlprog string
}

func buildBins(tb testing.TB) {
	tb.Helper()
	bin.once.Do(func() {
		bin.dir, bin.err = testutil.Build("btl-tcp-test-",
			map[*string]string{&bin.mpirun: "../../../cmd/mpirun", &bin.btlprog: "../../../internal/testprogs/btlprog"})
	})
	if bin.err != nil {
		tb.Fatal(bin.err)
	}
}

func TestMain(m *testing.M) {
	if os.Getenv(benchProgEnv) != "" {
		os.Exit(benchRank())
	}
	code := m.Run()
	if bin.dir != "" {
		os.RemoveAll(bin.dir)
	}
	os.Exit(code)
}

// maxSweep is the largest message of a sweep: every size to 16 MiB, a few
// under -short.
func maxSweep() int {
	if testing.Short() {
		return 64 << 10
	}
	return 16 << 20
}

// tcpRoute returns the module that carries rank's traffic to peer, checking
// that it is tcp.
func tcpRoute(r *mpitest.Rank, peer int) (btl.Module, error) {
	p := r.BML().Peer(peer)
	if len(p.Send) == 0 || p.Send[0].Attr.Name != "tcp" {
		return nil, fmt.Errorf("rank %d reaches rank %d by %v, not tcp", r.Rank(), peer, p.Send)
	}
	return p.Send[0].Module, nil
}

// sweepAll has every pair of ranks exchange every size, pair by pair in
// rounds (partner = rank XOR round), and checks that the traffic went over
// tcp.
func sweepAll(t *testing.T, n, max int, opts ...mpitest.Option) {
	sizes := btltest.Sizes(max)
	mpitest.Run(t, n, func(r *mpitest.Rank) error {
		h := btltest.New(r.BML(), r.Rank(), btl.TagUser)
		if err := r.Runtime().Barrier(); err != nil {
			return err
		}
		var mod btl.Module
		for round := 1; round < n; round++ {
			peer := r.Rank() ^ round
			if peer >= n {
				continue
			}
			m, err := tcpRoute(r, peer)
			if err != nil {
				return err
			}
			mod = m
			if err := h.Sweep(peer, sizes, 2*time.Minute); err != nil {
				return err
			}
		}
		if mod != nil {
			sent, received := tcp.Stats(mod)
			if sent == 0 || received == 0 {
				return fmt.Errorf("rank %d: tcp moved %d frames out and %d in", r.Rank(), sent, received)
			}
			t.Logf("rank %d: %+v; tcp frames sent %d, received %d", r.Rank(), h.Stats, sent, received)
		}
		return nil
	}, append([]mpitest.Option{mpitest.WithMCA("btl", "self,tcp")}, opts...)...)
}

func TestSweepTwoRanks(t *testing.T) {
	sweepAll(t, 2, maxSweep())
}

// A rendezvous whose first fragment is as large as an eager message (the
// default sends 4 KiB first) moves every size as well.
func TestSweepLargeFirstFragment(t *testing.T) {
	sweepAll(t, 2, maxSweep(), mpitest.WithMCA("btl_tcp_rndv_eager_limit", "64k"))
}

func TestSweepFourRanks(t *testing.T) {
	max := 1 << 20
	if testing.Short() {
		max = 16 << 10
	}
	// Each rank has three incoming connections: read one by one, and found
	// through epoll.
	for _, epoll := range []string{"0", "1"} {
		t.Run("epoll_threshold="+epoll, func(t *testing.T) {
			sweepAll(t, 4, max, mpitest.WithMCA("btl_tcp_epoll_threshold", epoll))
		})
	}
}

// Small fragments and a small queue: many fragments per message, and Send
// runs into its flow control.
func TestSweepSmallFragments(t *testing.T) {
	max := 1 << 20
	if testing.Short() {
		max = 64 << 10
	}
	sweepAll(t, 2, max,
		mpitest.WithMCA("btl_tcp_max_send_size", "4k"), mpitest.WithMCA("btl_tcp_eager_limit", "1k"),
		mpitest.WithMCA("btl_tcp_max_queued", "16k"))
}

// Interface selection decides what a rank publishes and listens on, and the
// ranks still reach each other.
func TestInterfaceSelection(t *testing.T) {
	for _, tc := range []struct {
		name, param, value string
		ok                 func(netip.Addr) bool
		needOther          bool // needs an interface other than loopback
	}{
		{"include lo", "btl_tcp_if_include", "lo", netip.Addr.IsLoopback, false},
		{"include ::1 alone", "btl_tcp_if_include", "::1", func(a netip.Addr) bool { return a == netip.IPv6Loopback() }, false},
		{"include 127.0.0.0/8", "btl_tcp_if_include", "127.0.0.0/8", func(a netip.Addr) bool { return a.Is4() && a.IsLoopback() }, false},
		{"exclude lo", "btl_tcp_if_exclude", "lo", func(a netip.Addr) bool { return !a.IsLoopback() }, true},
		{"disable ipv6", "btl_tcp_disable_family", "ipv6", netip.Addr.Is4, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.needOther && !haveNonLoopback() {
				t.Skip("no interface other than loopback is up")
			}
			mpitest.Run(t, 2, func(r *mpitest.Rank) error {
				h := btltest.New(r.BML(), r.Rank(), btl.TagUser)
				if err := r.Runtime().Barrier(); err != nil {
					return err
				}
				if _, err := tcpRoute(r, 1-r.Rank()); err != nil {
					return err
				}
				addrs, err := cardOf(r, r.Rank())
				if err != nil {
					return err
				}
				for _, a := range addrs {
					if !tc.ok(a.Addr()) {
						return fmt.Errorf("rank %d listens on %v despite %s=%s (card %v)", r.Rank(), a, tc.param, tc.value, addrs)
					}
				}
				return h.Sweep(1-r.Rank(), btltest.Sizes(64<<10), time.Minute)
			}, mpitest.WithMCA("btl", "self,tcp"), mpitest.WithMCA(tc.param, tc.value))
		})
	}
}

func haveNonLoopback() bool {
	ifs, _ := net.Interfaces()
	for _, i := range ifs {
		if i.Flags&net.FlagUp == 0 || i.Flags&net.FlagLoopback != 0 {
			continue
		}
		if addrs, _ := i.Addrs(); len(addrs) > 0 {
			return true
		}
	}
	return false
}

func TestSweepProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("process sweep skipped under -short (the goroutine sweeps cover -short)")
	}
	buildBins(t)
	max := maxSweep()
	out, err := exec.Command(bin.mpirun, "-np", "2", "--timeout", "120", "--mca", "btl", "self,tcp",
		bin.btlprog, "sweep", fmt.Sprint(max)).CombinedOutput()
	if err != nil {
		t.Fatalf("mpirun: %v\n%s", err, out)
	}
	for rank := range 2 {
		want := fmt.Sprintf("btl ok rank %d via tcp", rank)
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
