package tcp_test

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gompi/gompi/components/btl/tcp"
	"github.com/gompi/gompi/components/pml/ob1"
	"github.com/gompi/gompi/frameworks/btl"
	"github.com/gompi/gompi/frameworks/btl/btltest"
	"github.com/gompi/gompi/internal/testutil"
	"github.com/gompi/gompi/mpi"
	"github.com/gompi/gompi/mpitest"
)

// The process tests run the real mpirun on real processes: buildBins
// builds mpirun and btlprog once, when the first of them needs it. A test
// binary started with benchProgEnv set is a rank of a process benchmark
// instead (see bench_test.go).
var bin struct {
	once            sync.Once
	err             error
	mpirun, btlprog string
}

func buildBins(tb testing.TB) {
	tb.Helper()
	bin.once.Do(func() {
		bin.err = testutil.Build(map[*string]string{&bin.mpirun: "../../../cmd/mpirun", &bin.btlprog: "../../../internal/testprogs/btlprog"})
	})
	if bin.err != nil {
		tb.Fatal(bin.err)
	}
}

func TestMain(m *testing.M) {
	if os.Getenv(benchProgEnv) != "" {
		os.Exit(benchRank())
	}
	os.Exit(m.Run())
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

// Large messages through the PML over tcp: their fragments' payloads are
// read straight into the receive buffers (btl.Steer), several in flight
// at once in both directions, odd sizes included, every FRAG of them; a
// receive too small for its message gets what fits and ErrTruncate, the
// rest of its buffer untouched (it asks only for what fits, which is
// placed too). The sizes come from the tcp route's limits: every FRAG is larger
// than any frame the connection reads whole (an eager message), so none
// can arrive entirely before its header is seen.
func TestLargeMessagesPlaced(t *testing.T) {
	fill := func(b []byte, seed int) {
		for i := range b {
			b[i] = byte(i*7 + seed)
		}
	}
	mpitest.Run(t, 2, func(r *mpitest.Rank) error {
		w := r.CommWorld()
		me, peer := w.Rank(), 1-w.Rank()
		m, err := tcpRoute(r, peer)
		if err != nil {
			return err
		}
		a := r.BML().Peer(peer).Send[0].Attr
		chunk, frag := a.RndvEagerLimit-ob1.RndvHeaderLen, a.MaxSendSize-ob1.FragHeaderLen
		if frag/2 <= a.EagerLimit {
			return fmt.Errorf("tcp's max send size %d leaves no FRAG above its eager limit %d to place", a.MaxSendSize, a.EagerLimit)
		}
		// One FRAG (odd), one FRAG (full), three FRAGs (the last odd).
		sizes := []int{chunk + frag/2 + 3, chunk + frag, chunk + 2*frag + frag/2 + 5}
		frags := 0
		for _, n := range sizes {
			frags += (n - chunk + frag - 1) / frag
		}
		before := tcp.Placed(m)
		var reqs []*mpi.Request
		recvs := make([][]byte, len(sizes))
		for i, n := range sizes {
			recvs[i] = make([]byte, n)
			q, err := w.Irecv(recvs[i], peer, i)
			if err != nil {
				return err
			}
			reqs = append(reqs, q)
		}
		for i, n := range sizes {
			b := make([]byte, n)
			fill(b, me*31+i)
			q, err := w.Isend(b, peer, i)
			if err != nil {
				return err
			}
			reqs = append(reqs, q)
		}
		if err := mpi.Waitall(reqs, nil); err != nil {
			return err
		}
		for i, n := range sizes {
			want := make([]byte, n)
			fill(want, peer*31+i)
			if !bytes.Equal(recvs[i], want) {
				return fmt.Errorf("rank %d: message %d of %d bytes arrived wrong", me, i, n)
			}
		}
		// Truncation: a message of one FRAG into a buffer that ends half
		// way through it, plus a guard.
		long, keep := chunk+frag, chunk+frag/2
		if me == 0 {
			b := make([]byte, long)
			fill(b, 5)
			if err := w.Send(b, 1, 99); err != nil {
				return err
			}
		} else {
			buf := make([]byte, keep+16)
			for i := range buf[keep:] {
				buf[keep+i] = 0xee
			}
			frags += (keep - chunk + frag - 1) / frag
			_, err := w.Recv(buf[:keep], 0, 99)
			if !errors.Is(err, mpi.ErrTruncate) {
				return fmt.Errorf("%d bytes into %d: %v, want ErrTruncate", long, keep, err)
			}
			want := make([]byte, long)
			fill(want, 5)
			if !bytes.Equal(buf[:keep], want[:keep]) || !bytes.Equal(buf[keep:], bytes.Repeat([]byte{0xee}, 16)) {
				return fmt.Errorf("truncated receive: wrong bytes, or the guard after the buffer was written")
			}
		}
		if got := tcp.Placed(m) - before; got != uint64(frags) {
			return fmt.Errorf("%d payloads read straight into their receive buffers, want the %d FRAGs of messages of %v bytes", got, frags, sizes)
		}
		return w.Barrier()
	}, mpitest.WithMCA("btl", "self,tcp"), mpitest.WithMCA("llp", "^tofu"))
}

// TestWithdrawnPlacementIsDropped: when the PML takes back a buffer that a
// payload is being read into (btl.Guard.Withdraw, as ob1 does when the
// sender is found lost by another path), the module writes nothing more
// into it, does not report the payload placed, and reads on in step: the
// next frame arrives whole.
func TestWithdrawnPlacementIsDropped(t *testing.T) {
	const tag = btl.TagUser + 7
	const hdrLen = 8
	mpitest.Run(t, 2, func(r *mpitest.Rank) error {
		me, peer := r.Rank(), 1-r.Rank()
		mod, err := tcpRoute(r, peer)
		if err != nil {
			return err
		}
		// A frame of the route's max send size: far more than the socket
		// buffers below hold, so that the payload cannot be in place
		// before the receiver withdraws it.
		size := mod.Attributes().MaxSendSize - hdrLen
		ep := r.BML().Peer(peer).Send[0].EP
		dst := make([]byte, size)
		var g btl.Guard
		wheres, placed := 0, 0
		var tail []byte
		if me == 1 {
			mod.RegisterRecv(tag, func(_ int, _ btl.Tag, frag []byte) { tail = append([]byte(nil), frag...) })
			mod.(btl.Steerer).RegisterSteer(tag, btl.Steer{
				HdrLen: hdrLen, Min: 1,
				Where: func(_ int, _ []byte, n int) ([]byte, *btl.Guard) {
					wheres++
					if n != size {
						return nil, nil
					}
					return dst, &g
				},
				Placed: func(int, []byte, int) { placed++ },
			})
		}
		if err := r.CommWorld().Barrier(); err != nil {
			return err
		}
		if me == 0 {
			payload := make([]byte, size)
			for i := range payload {
				payload[i] = byte(i%251 + 1) // never 0
			}
			for _, frame := range [][2][]byte{{make([]byte, hdrLen), payload}, {[]byte("tail-hdr"), []byte("the next frame")}} {
				for {
					err := mod.Send(ep, tag, frame[0], frame[1])
					if !errors.Is(err, btl.ErrWouldBlock) {
						if err != nil {
							return err
						}
						break
					}
					r.BML().Progress()
				}
			}
			return r.CommWorld().Barrier()
		}
		// Progress until part of the payload is in place, take the
		// buffer back, and progress until the next frame arrives.
		deadline := time.Now().Add(20 * time.Second)
		for dst[0] == 0 {
			if time.Now().After(deadline) {
				return errors.New("no byte of the payload was placed")
			}
			if r.BML().Progress() == 0 {
				runtime.Gosched()
			}
		}
		g.Withdraw()
		snapshot := append([]byte(nil), dst...)
		if bytes.IndexByte(snapshot, 0) < 0 {
			return errors.New("the whole payload was in place before the withdrawal: nothing was left to drop")
		}
		for tail == nil {
			if time.Now().After(deadline) {
				return errors.New("the frame after the withdrawn payload never arrived")
			}
			if r.BML().Progress() == 0 {
				runtime.Gosched()
			}
		}
		switch {
		case wheres != 1:
			return fmt.Errorf("Where was asked %d times, want 1", wheres)
		case placed != 0:
			return fmt.Errorf("a withdrawn payload was reported placed %d times", placed)
		case !bytes.Equal(dst, snapshot):
			return errors.New("the module wrote into the buffer after it was withdrawn")
		case string(tail) != "tail-hdrthe next frame":
			return fmt.Errorf("the next frame arrived as %q", tail)
		}
		return r.CommWorld().Barrier()
	}, mpitest.WithMCA("btl", "self,tcp"), mpitest.WithMCA("llp", "^tofu"), mpitest.WithMCA("btl_tcp_if_include", "lo"),
		mpitest.WithMCA("btl_tcp_rcvbuf", "16k"), mpitest.WithMCA("btl_tcp_sndbuf", "16k"))
}

// SendCounts (btl.SendCounter) counts every frame Send and Sendi accept,
// with the bytes of its header and payload (not the frame header),
// whichever way it leaves: written at once, written in part with the rest
// queued (a frame far larger than the socket buffers), or queued behind
// earlier output; a Sendi that refuses is not counted, and a rank that only
// receives counts nothing. What the sender counted, what it handed over and
// what the receiver got must be the same frames and bytes.
func TestSendCounts(t *testing.T) {
	const tag = btl.TagUser + 9
	// What rank 0 handed over, for rank 1 to compare with; nil when rank 0
	// failed before the end.
	handed := make(chan *btl.SendCounts, 1)
	mpitest.Run(t, 2, func(r *mpitest.Rank) error {
		me, peer := r.Rank(), 1-r.Rank()
		mod, err := tcpRoute(r, peer)
		if err != nil {
			return err
		}
		counter, ok := mod.(btl.SendCounter)
		if !ok {
			return fmt.Errorf("the tcp module %T is not a btl.SendCounter", mod)
		}
		ep := r.BML().Peer(peer).Send[0].EP
		var got btl.SendCounts
		done := false
		if me == 1 {
			mod.RegisterRecv(tag, func(_ int, _ btl.Tag, frag []byte) {
				got.Frames++
				got.Bytes += uint64(len(frag))
				done = done || bytes.HasPrefix(frag, []byte("end!"))
			})
		}
		if err := r.CommWorld().Barrier(); err != nil {
			return err
		}
		before := counter.SendCounts()
		deadline := time.Now().Add(30 * time.Second)
		if me == 0 {
			want, err := sendCounted(r, mod, ep, tag, deadline)
			if err != nil {
				handed <- nil
				return err
			}
			handed <- &want
			after := counter.SendCounts()
			if delta := (btl.SendCounts{Frames: after.Frames - before.Frames, Bytes: after.Bytes - before.Bytes}); delta != want {
				return fmt.Errorf("SendCounts went from %+v to %+v: %+v sent, want %+v", before, after, delta, want)
			}
			return r.CommWorld().Barrier()
		}
		var want *btl.SendCounts
		for want == nil || !done {
			if want == nil {
				select {
				case w := <-handed:
					if w == nil {
						return errors.New("rank 0 failed to send")
					}
					want = w
				default:
				}
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("the last frame did not arrive in 30 s (%+v so far)", got)
			}
			if r.BML().Progress() == 0 {
				runtime.Gosched()
			}
		}
		if got != *want {
			return fmt.Errorf("received %+v, but the sender handed over %+v", got, *want)
		}
		if after := counter.SendCounts(); after != before {
			return fmt.Errorf("a rank that only received counted %+v, then %+v", before, after)
		}
		return r.CommWorld().Barrier()
	}, mpitest.WithMCA("btl", "self,tcp"), mpitest.WithMCA("llp", "^tofu"), mpitest.WithMCA("btl_tcp_if_include", "lo"),
		mpitest.WithMCA("btl_tcp_rcvbuf", "16k"), mpitest.WithMCA("btl_tcp_sndbuf", "16k"))
}

// sendCounted sends TestSendCounts' frames, the last one's header "end!",
// and returns what Send and Sendi accepted.
func sendCounted(r *mpitest.Rank, mod btl.Module, ep btl.Endpoint, tag btl.Tag, deadline time.Time) (btl.SendCounts, error) {
	var want btl.SendCounts
	send := func(hdr, payload []byte) error {
		for {
			err := mod.Send(ep, tag, hdr, payload)
			if !errors.Is(err, btl.ErrWouldBlock) {
				if err == nil {
					want.Frames++
					want.Bytes += uint64(len(hdr) + len(payload))
				}
				return err
			}
			if time.Now().After(deadline) {
				return errors.New("Send would block for 30 s")
			}
			r.BML().Progress()
		}
	}
	sendi := func(hdr, payload []byte) bool {
		if !mod.Sendi(ep, tag, hdr, payload) {
			return false
		}
		want.Frames++
		want.Bytes += uint64(len(hdr) + len(payload))
		return true
	}
	// Sendi refuses until the connection is up (nothing counted), then
	// writes at once.
	for !sendi([]byte("sendi-hdr"), []byte("first")) {
		if time.Now().After(deadline) {
			return want, errors.New("Sendi refused for 30 s")
		}
		r.BML().Progress()
		runtime.Gosched()
	}
	big := make([]byte, mod.Attributes().MaxSendSize-8)
	for _, f := range [][2][]byte{
		{[]byte("hdr only"), nil},
		{nil, []byte("payload only")},
		{[]byte("big-hdr!"), big}, // the kernel takes part: the rest is queued
		{[]byte("after"), []byte("the big one, queued behind it")},
		{[]byte("after"), make([]byte, 3000)},
	} {
		if err := send(f[0], f[1]); err != nil {
			return want, err
		}
	}
	sendi([]byte("maybe"), []byte("refused while output is queued; counted if not"))
	return want, send([]byte("end!"), []byte("the last"))
}
