package tcp_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gompi/gompi/components/btl/tcp"
	"github.com/gompi/gompi/frameworks/btl"
	"github.com/gompi/gompi/frameworks/btl/btltest"
	"github.com/gompi/gompi/internal/strangers"
	"github.com/gompi/gompi/internal/testutil"
	"github.com/gompi/gompi/mca"
	"github.com/gompi/gompi/mpi"
	"github.com/gompi/gompi/mpierr"
	"github.com/gompi/gompi/mpitest"
	"github.com/gompi/gompi/params"
)

// liveness bounds every wait for something that must happen; it is
// generous, and no test asserts a duration.
const liveness = 10 * time.Second

// initErr starts a singleton with the tcp BTL and the given parameters and
// returns Init's error.
func initErr(t *testing.T, kv ...string) error {
	t.Helper()
	settings := []params.Setting{{Name: "btl", Value: "self,tcp"}}
	for i := 0; i+1 < len(kv); i += 2 {
		settings = append(settings, params.Setting{Name: kv[i], Value: kv[i+1]})
	}
	var out bytes.Buffer
	inst, err := mpi.InitWith(mpi.Options{
		Env: []string{"HOME=" + t.TempDir()}, MCA: settings, Output: &out,
		Exit: func(int) { runtime.Goexit() },
	})
	if err == nil {
		if ferr := inst.Finalize(); ferr != nil {
			t.Fatal(ferr)
		}
	}
	return err
}

func TestParameterErrors(t *testing.T) {
	p, ok := mca.Default().Params().Lookup("btl_tcp_max_send_size")
	if !ok {
		t.Fatal("btl_tcp_max_send_size is not registered")
	}
	maxSend, err := params.ParseSize(p.Def().Default)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	ifs, _ := net.Interfaces()
	for _, i := range ifs {
		names = append(names, i.Name)
	}
	for _, tc := range []struct {
		name string
		kv   []string
		want []string
	}{
		{"include and exclude", []string{"btl_tcp_if_include", "lo", "btl_tcp_if_exclude", "eth0"},
			[]string{"btl_tcp_if_include", "btl_tcp_if_exclude", "mutually exclusive"}},
		{"unknown interface", []string{"btl_tcp_if_include", "nosuch0"},
			append([]string{"btl_tcp_if_include", `no network interface "nosuch0"`}, names...)},
		{"bad network", []string{"btl_tcp_if_include", "10.1.0.0/40"},
			[]string{"btl_tcp_if_include", "10.1.0.0/40", "accepted"}},
		{"port range past 65535", []string{"btl_tcp_port_min", "60000", "btl_tcp_port_range", "10000"},
			[]string{"btl_tcp_port_min", "btl_tcp_port_range", "60000", "10000", "accepted"}},
		{"port too large", []string{"btl_tcp_port_min", "70000"},
			[]string{"btl_tcp_port_min", "70000", "accepted"}},
		{"zero timeout", []string{"btl_tcp_handshake_timeout", "0"},
			[]string{"btl_tcp_handshake_timeout", `"0"`, "accepted"}},
		{"bad family", []string{"btl_tcp_disable_family", "ipv5"},
			[]string{"btl_tcp_disable_family", "ipv5", "ipv4", "ipv6"}},
		{"huge socket buffer", []string{"btl_tcp_sndbuf", "4g"},
			[]string{"btl_tcp_sndbuf", "accepted"}},
		{"eager above max send", []string{"btl_tcp_eager_limit", fmt.Sprint(2 * maxSend)},
			[]string{fmt.Sprintf("btl_tcp_eager_limit = %d", 2*maxSend), fmt.Sprintf("btl_tcp_max_send_size (%d)", maxSend)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := initErr(t, tc.kv...)
			if err == nil {
				t.Fatal("Init succeeded")
			}
			if !errors.Is(err, mpierr.ErrUnsupportedParam) {
				t.Errorf("error is not of class %s: %v", mpierr.ErrUnsupportedParam.Name(), err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q: %v", w, err)
				}
			}
		})
	}
}

// Good settings work: loopback only, a port range, socket buffers.
func TestLoopbackPortRange(t *testing.T) {
	mpitest.Run(t, 2, func(r *mpitest.Rank) error {
		h := btltest.New(r.BML(), r.Rank(), btl.TagUser)
		if err := r.Runtime().Barrier(); err != nil {
			return err
		}
		if _, err := tcpRoute(r, 1-r.Rank()); err != nil {
			return err
		}
		card, err := r.Runtime().Modex().GetProc(r.Rank(), tcp.CardKey)
		if err != nil {
			return err
		}
		addrs, err := tcp.ParseCard(card)
		if err != nil {
			return err
		}
		for _, a := range addrs {
			if !a.Addr().IsLoopback() || a.Port() < 41000 || a.Port() >= 41100 {
				return fmt.Errorf("rank %d listens on %v: outside lo and ports 41000-41099", r.Rank(), a)
			}
		}
		return h.Sweep(1-r.Rank(), btltest.Sizes(64<<10), liveness)
	}, mpitest.WithMCA("btl", "self,tcp"), mpitest.WithMCA("btl_tcp_if_include", "lo"),
		mpitest.WithMCA("btl_tcp_port_min", "41000"), mpitest.WithMCA("btl_tcp_port_range", "100"),
		mpitest.WithMCA("btl_tcp_sndbuf", "256k"), mpitest.WithMCA("btl_tcp_rcvbuf", "256k"))
}

func TestParameterErrorProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("process test skipped under -short")
	}
	buildBins(t)
	cmd := exec.Command(bin.mpirun, "-np", "2", "--timeout", "60", "--mca", "btl", "self,tcp",
		"--mca", "btl_tcp_if_include", "lo", "--mca", "btl_tcp_if_exclude", "eth0", bin.btlprog, "routes")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("mpirun succeeded:\n%s", out)
	}
	for _, w := range []string{"btl_tcp_if_include", "btl_tcp_if_exclude", "mutually exclusive"} {
		if !strings.Contains(string(out), w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
}

// attack connects to target, writes data (closing its side when
// closeWrite), and checks that the rank closes the connection without
// answering.
func attack(target netip.AddrPort, data []byte, closeWrite bool) error {
	conn, err := net.DialTimeout("tcp", target.String(), liveness)
	if err != nil {
		return err
	}
	defer conn.Close()
	if len(data) > 0 {
		conn.Write(data) // an error here means the rank already closed
	}
	if closeWrite {
		conn.(*net.TCPConn).CloseWrite()
	}
	conn.SetReadDeadline(time.Now().Add(liveness))
	n, err := io.ReadFull(conn, make([]byte, tcp.HelloLen))
	switch {
	case n > 0:
		return fmt.Errorf("the rank answered with %d bytes: the handshake was accepted", n)
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || isReset(err):
		return nil
	default:
		return fmt.Errorf("the connection was not closed: %v", err)
	}
}

// attackInsider sends a correct hello of a rank that is connected already:
// the connection must end, with at most a deferral for an answer.
func attackInsider(target netip.AddrPort, hello []byte) error {
	conn, err := net.DialTimeout("tcp", target.String(), liveness)
	if err != nil {
		return err
	}
	defer conn.Close()
	conn.Write(hello)
	conn.SetReadDeadline(time.Now().Add(liveness))
	ans := make([]byte, tcp.HelloLen)
	n, err := io.ReadFull(conn, ans)
	if n == tcp.HelloLen {
		if !tcp.IsDeferral(ans) {
			return fmt.Errorf("the rank accepted the handshake")
		}
		n, err = conn.Read(make([]byte, 1))
	}
	switch {
	case n > 0:
		return fmt.Errorf("the rank answered with %d more bytes", n)
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || isReset(err):
		return nil
	default:
		return fmt.Errorf("the connection was not closed: %v", err)
	}
}

func isReset(err error) bool {
	var oe *net.OpError
	return errors.As(err, &oe) && !oe.Timeout()
}

// onLoopback keeps a test's listeners on loopback. The tests that dial the
// addresses a rank published would otherwise also dial the bridges that
// simulated hosts (test/netns, the guide's checks in internal/doccheck) add
// to this namespace, and those packages' tests remove them at any moment:
// "network is unreachable".
var onLoopback = mpitest.WithMCA("btl_tcp_if_include", "lo")

func cardOf(r *mpitest.Rank, rank int) ([]netip.AddrPort, error) {
	card, err := r.Runtime().Modex().GetProc(rank, tcp.CardKey)
	if err != nil {
		return nil, err
	}
	return tcp.ParseCard(card)
}

// A stranger connects to rank 0's port with garbage and with forged
// handshakes; every one is refused and counted, and the job goes on.
func TestHandshakeAttacks(t *testing.T) {
	mpitest.Run(t, 2, func(r *mpitest.Rank) error {
		me, peer := r.Rank(), 1-r.Rank()
		rt := r.Runtime()
		job := rt.Job()
		h := btltest.New(r.BML(), me, btl.TagUser)
		h2 := btltest.New(r.BML(), me, btl.TagUser+1)
		mod, err := tcpRoute(r, peer)
		if err != nil {
			return err
		}
		if err := rt.Barrier(); err != nil {
			return err
		}
		const max = 128 << 10
		wrongCookie := job.Cookie
		wrongCookie[5] ^= 0x40
		attacks := []struct {
			name       string
			data       []byte
			closeWrite bool
		}{
			{"garbage", bytes.Repeat([]byte{0xab}, 64), false},
			{"http", []byte("GET / HTTP/1.0\r\n\r\n"), false},
			{"short hello", tcp.Hello(job.ID, job.Cookie, 1, 0, max)[:20], true},
			{"silence", nil, false}, // closed after btl_tcp_handshake_timeout
			{"wrong cookie", tcp.Hello(job.ID, wrongCookie, 1, 0, max), false},
			{"wrong job", tcp.Hello("not-this-job", job.Cookie, 1, 0, max), false},
			{"impossible rank", tcp.Hello(job.ID, job.Cookie, 7, 0, max), false},
			{"own rank", tcp.Hello(job.ID, job.Cookie, 0, 0, max), false},
			{"wrong target", tcp.Hello(job.ID, job.Cookie, 1, 1, max), false},
			{"bad frame size", tcp.Hello(job.ID, job.Cookie, 1, 0, 1), false},
		}
		if me == 1 {
			addrs, err := cardOf(r, 0)
			if err != nil {
				return err
			}
			for i, a := range attacks {
				target := addrs[i%len(addrs)] // every listener gets some
				if err := attack(target, a.data, a.closeWrite); err != nil {
					return fmt.Errorf("attack %q on %v: %w", a.name, target, err)
				}
			}
		}
		if err := rt.Barrier(); err != nil {
			return err
		}
		if me == 0 {
			if got := tcp.Rejected(mod); got != int64(len(attacks)) {
				return fmt.Errorf("rank 0 rejected %d connections, want %d", got, len(attacks))
			}
		}
		if err := h.Sweep(peer, btltest.Sizes(64<<10), liveness); err != nil {
			return err
		}
		// Now that rank 1 is connected, an insider's second connection as
		// rank 1 (right cookie, job and ranks) is refused too: closed, or,
		// when the pair's connection is the one rank 0 dialled, closed
		// after a deferral to that one (what a crossing dial of rank 1's
		// would get).
		if err := rt.Barrier(); err != nil {
			return err
		}
		refusedBefore := tcp.Rejected(mod) + tcp.Deferred(mod)
		if err := rt.Barrier(); err != nil {
			return err
		}
		if me == 1 {
			addrs, err := cardOf(r, 0)
			if err != nil {
				return err
			}
			if err := attackInsider(addrs[0], tcp.Hello(job.ID, job.Cookie, 1, 0, max)); err != nil {
				return fmt.Errorf("second connection as rank 1: %w", err)
			}
		}
		if err := rt.Barrier(); err != nil {
			return err
		}
		if me == 0 {
			if got := tcp.Rejected(mod) + tcp.Deferred(mod) - refusedBefore; got != 1 {
				return fmt.Errorf("rank 0 refused or deferred %d connections of the insider, want 1", got)
			}
		}
		return h2.Sweep(peer, btltest.Sizes(64<<10), liveness)
	}, mpitest.WithMCA("btl", "self,tcp"), mpitest.WithMCA("btl_tcp_handshake_timeout", "300"),
		mpitest.WithMCA("btl_base_verbose", "10"), onLoopback)
}

// errorRecorder keeps the first lost-peer report; the callback runs inside
// Progress on the rank's own goroutine.
type errorRecorder struct {
	rank int
	err  error
}

func (e *errorRecorder) record(rank int, err error) {
	if e.err == nil {
		e.rank, e.err = rank, err
	}
}

func progressUntil(bml *btl.BML, done func() bool, what string) error {
	deadline := time.Now().Add(liveness)
	for !done() {
		if bml.Progress() == 0 {
			runtime.Gosched()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not within %v", what, liveness)
		}
	}
	return nil
}

// After a correct handshake, a bad frame is a protocol error: rank 0 closes
// the connection and reports the sender lost.
func TestProtocolError(t *testing.T) {
	for _, tc := range []struct {
		name  string
		frame []byte
		want  string
	}{
		{"frame longer than announced", append(tcp.FrameHeader(byte(btl.TagUser), 1000), make([]byte, 1000)...), "exceeds the maximum"},
		{"garbage frame", bytes.Repeat([]byte{0x5a}, 16), "bad frame magic"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mpitest.Run(t, 2, func(r *mpitest.Rank) error {
				me := r.Rank()
				rt := r.Runtime()
				job := rt.Job()
				var lost errorRecorder
				r.BML().RegisterRecv(btl.TagUser, func(int, btl.Tag, []byte) {})
				r.BML().RegisterError(lost.record)
				if err := rt.Barrier(); err != nil {
					return err
				}
				if me == 1 {
					// Rank 1 itself never sends to rank 0: this test speaks
					// for it, announcing frames of at most 256 bytes.
					addrs, err := cardOf(r, 0)
					if err != nil {
						return err
					}
					conn, err := net.DialTimeout("tcp", addrs[0].String(), liveness)
					if err != nil {
						return err
					}
					defer conn.Close()
					conn.SetDeadline(time.Now().Add(liveness))
					conn.Write(tcp.Hello(job.ID, job.Cookie, 1, 0, 256))
					if _, err := io.ReadFull(conn, make([]byte, tcp.HelloLen)); err != nil {
						return fmt.Errorf("the handshake was refused: %v", err)
					}
					conn.Write(tc.frame)
					if n, err := conn.Read(make([]byte, 1)); n != 0 || err == nil {
						return fmt.Errorf("rank 0 kept the connection: %d bytes, %v", n, err)
					}
				} else {
					if err := progressUntil(r.BML(), func() bool { return lost.err != nil }, "lost-peer report"); err != nil {
						return err
					}
					if lost.rank != 1 || !errors.Is(lost.err, btl.ErrPeerLost) || !strings.Contains(lost.err.Error(), tc.want) {
						return fmt.Errorf("lost report: rank %d, %v", lost.rank, lost.err)
					}
					route := r.BML().Peer(1).Send[0]
					if err := route.Module.Send(route.EP, btl.TagUser, []byte("x"), nil); !errors.Is(err, btl.ErrPeerLost) {
						return fmt.Errorf("Send to the lost rank: %v", err)
					}
				}
				return rt.Barrier()
			}, mpitest.WithMCA("btl", "self,tcp"), onLoopback)
		})
	}
}

// A peer that disappears: whatever waits on it fails with ErrPeerLost and
// the error callback hears of it, whichever connections existed.
func TestPeerLost(t *testing.T) {
	for _, tc := range []struct {
		name                string
		zeroSends, oneSends bool // traffic before the crash
		fill                bool // rank 0 fills its queue to rank 1 first
	}{
		{"only an incoming connection", false, true, false},
		{"only an outgoing connection", true, false, false},
		{"both connections", true, true, false},
		{"send blocked on a full queue", false, false, true},
	} {
		for _, epoll := range []string{"0", "1"} {
			t.Run(tc.name+"/epoll_threshold="+epoll, func(t *testing.T) {
				testPeerLost(t, tc.zeroSends, tc.oneSends, tc.fill, mpitest.WithMCA("btl_tcp_epoll_threshold", epoll))
			})
		}
	}
}

// testPeerLost runs one case of TestPeerLost: traffic that sets up the
// connections, rank 1 crashes, rank 0 must hear of it.
func testPeerLost(t *testing.T, zeroSends, oneSends, fill bool, opt mpitest.Option) {
	mpitest.Run(t, 2, func(r *mpitest.Rank) error {
		me, peer := r.Rank(), 1-r.Rank()
		rt := r.Runtime()
		mod, err := tcpRoute(r, peer)
		if err != nil {
			return err
		}
		route := r.BML().Peer(peer).Send[0]
		got := 0
		var lost errorRecorder
		r.BML().RegisterRecv(btl.TagUser, func(int, btl.Tag, []byte) { got++ })
		r.BML().RegisterError(lost.record)
		if err := rt.Barrier(); err != nil {
			return err
		}
		const msgs = 10
		if me == 0 && zeroSends || me == 1 && oneSends {
			for range msgs {
				if err := route.Module.Send(route.EP, btl.TagUser, []byte("hello"), nil); err != nil {
					return err
				}
			}
		}
		if me == 1 && zeroSends || me == 0 && oneSends {
			if err := progressUntil(r.BML(), func() bool { return got == msgs }, "traffic before the crash"); err != nil {
				return err
			}
		}
		big := make([]byte, route.Attr.MaxSendSize)
		if fill && me == 0 {
			// Rank 1 is not progressing: the socket and then the
			// queue fill up.
			for n := 0; ; n++ {
				err := route.Module.Send(route.EP, btl.TagUser, nil, big)
				if errors.Is(err, btl.ErrWouldBlock) {
					break
				}
				if err != nil {
					return err
				}
				if n > 256 {
					return fmt.Errorf("Send took %d fragments without reporting a full queue", n)
				}
			}
		}
		if err := rt.Barrier(); err != nil {
			return err
		}
		if me == 1 {
			tcp.Crash(mod)
			return nil
		}
		var sendErr error
		err = progressUntil(r.BML(), func() bool {
			if fill && sendErr == nil {
				if err := route.Module.Send(route.EP, btl.TagUser, nil, big); err != nil && !errors.Is(err, btl.ErrWouldBlock) {
					sendErr = err
				}
			}
			return lost.err != nil && (!fill || sendErr != nil)
		}, "lost-peer report")
		if err != nil {
			return err
		}
		if lost.rank != 1 || !errors.Is(lost.err, btl.ErrPeerLost) {
			return fmt.Errorf("lost report: rank %d, %v", lost.rank, lost.err)
		}
		if fill && !errors.Is(sendErr, btl.ErrPeerLost) {
			return fmt.Errorf("the blocked Send ended with %v", sendErr)
		}
		if err := route.Module.Send(route.EP, btl.TagUser, []byte("x"), nil); !errors.Is(err, btl.ErrPeerLost) {
			return fmt.Errorf("Send after the loss: %v", err)
		}
		if route.Module.Sendi(route.EP, btl.TagUser, []byte("x"), nil) {
			return fmt.Errorf("Sendi to a lost peer succeeded")
		}
		t.Logf("rank 0 was told: %v", lost.err)
		return nil
	}, mpitest.WithMCA("btl", "self,tcp"), opt, onLoopback)
}

// Sendi never queues: with output waiting, it refuses; Send then reports
// that the queue is full once it is.
func TestSendiAndFlowControl(t *testing.T) {
	mpitest.Run(t, 2, func(r *mpitest.Rank) error {
		me, peer := r.Rank(), 1-r.Rank()
		rt := r.Runtime()
		if _, err := tcpRoute(r, peer); err != nil {
			return err
		}
		route := r.BML().Peer(peer).Send[0]
		got, bytes := 0, 0
		r.BML().RegisterRecv(btl.TagUser, func(_ int, _ btl.Tag, frag []byte) { got++; bytes += len(frag) })
		// The last fragment says how many there were, and their bytes.
		var want struct{ frags, bytes int }
		r.BML().RegisterRecv(btl.TagUser+1, func(_ int, _ btl.Tag, frag []byte) {
			fmt.Sscan(string(frag), &want.frags, &want.bytes)
			got++
			bytes += len(frag)
		})
		if err := rt.Barrier(); err != nil {
			return err
		}
		small := []byte("0123456789abcdef")
		sent, sentBytes := 0, 0
		if me == 0 {
			// Before any connection exists Sendi refuses (it would have to
			// queue) and starts connecting.
			if route.Module.Sendi(route.EP, btl.TagUser, small, nil) {
				return fmt.Errorf("Sendi succeeded before a connection to rank 1 existed")
			}
			big := make([]byte, route.Attr.MaxSendSize)
			for {
				err := route.Module.Send(route.EP, btl.TagUser, nil, big)
				if errors.Is(err, btl.ErrWouldBlock) {
					break
				}
				if err != nil {
					return err
				}
				sent++
				sentBytes += len(big)
				if sent > 256 {
					return fmt.Errorf("Send took %d fragments of %d bytes without reporting a full queue", sent, len(big))
				}
			}
			if route.Module.Sendi(route.EP, btl.TagUser, small, nil) {
				return fmt.Errorf("Sendi succeeded with a full queue")
			}
			if err := route.Module.Send(route.EP, btl.TagUser, make([]byte, route.Attr.MaxSendSize+1), nil); !errors.Is(err, btl.ErrTooLarge) {
				return fmt.Errorf("Send above max_send_size: %v", err)
			}
		}
		// Rank 1 waits here without progressing while rank 0 fills up.
		if err := rt.Barrier(); err != nil {
			return err
		}
		if me == 0 {
			if err := progressUntil(r.BML(), func() bool {
				return route.Module.Sendi(route.EP, btl.TagUser, small, nil)
			}, "Sendi once the queue drained"); err != nil {
				return err
			}
			sent++
			sentBytes += len(small)
			hdr := fmt.Appendf(nil, "%d %d", sent+1, sentBytes+20)
			for len(hdr) < 20 {
				hdr = append(hdr, ' ')
			}
			if err := route.Module.Send(route.EP, btl.TagUser+1, hdr, nil); err != nil {
				return err
			}
			return rt.Barrier()
		}
		if err := progressUntil(r.BML(), func() bool { return want.frags > 0 && got == want.frags }, "every fragment"); err != nil {
			return fmt.Errorf("%v (got %d, want %+v)", err, got, want)
		}
		if bytes != want.bytes {
			return fmt.Errorf("received %d bytes, want %d", bytes, want.bytes)
		}
		return rt.Barrier()
	}, mpitest.WithMCA("btl", "self,tcp"), mpitest.WithMCA("btl_tcp_max_queued", "1m"))
}

// portSockets counts this process's TCP sockets whose local port is one
// of ports: rank 0's listeners and the connections they accepted. Counting
// every descriptor made the test flaky: a rank whose wait sleeps for the
// first time opens its bell's socket then, and keeps it to Finalize.
func portSockets(ports map[uint16]bool) (int, error) {
	inodes, err := testutil.SocketInodes()
	if err != nil {
		return 0, err
	}
	n, tables := 0, 0
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		data, err := os.ReadFile(table)
		if err != nil {
			continue // no IPv6, say
		}
		tables++
		for _, line := range strings.Split(string(data), "\n")[1:] {
			// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
			f := strings.Fields(line)
			if len(f) < 10 || !inodes[f[9]] {
				continue
			}
			_, hexPort, _ := strings.Cut(f[1], ":")
			if port, err := strconv.ParseUint(hexPort, 16, 16); err == nil && ports[uint16(port)] {
				n++
			}
		}
	}
	if tables == 0 {
		return 0, errors.New("neither /proc/net/tcp nor /proc/net/tcp6 can be read")
	}
	return n, nil
}

// TestSilentConnections: 1000 connections to rank 0's port that never say
// a word. Rank 0 never holds more than btl_tcp_max_pending_handshakes of
// them, closes each within btl_tcp_handshake_timeout of accepting it, and
// meanwhile accepts rank 1's own connection, made while the flood waits:
// the traffic arrives intact, and afterwards the process has the
// descriptors it had before.
func TestSilentConnections(t *testing.T) {
	const (
		silent  = 1000
		timeout = time.Second
	)
	// The count needs /proc: without it, skip here, on the test's
	// goroutine (the ranks' goroutines cannot).
	if _, err := portSockets(nil); err != nil {
		t.Skipf("cannot count sockets: %v", err)
	}
	var before int
	mpitest.Run(t, 2, func(r *mpitest.Rank) error {
		me, peer := r.Rank(), 1-r.Rank()
		rt := r.Runtime()
		h := btltest.New(r.BML(), me, btl.TagUser)
		mod, err := tcpRoute(r, peer)
		if err != nil {
			return err
		}
		addrs, err := cardOf(r, 0)
		if err != nil {
			return err
		}
		ports := map[uint16]bool{}
		for _, a := range addrs {
			ports[a.Port()] = true
		}
		if err := rt.Barrier(); err != nil {
			return err
		}
		if me == 0 {
			if before, err = portSockets(ports); err != nil { // no connection between the ranks yet
				return err
			}
		}
		if err := rt.Barrier(); err != nil {
			return err
		}
		var flood *strangers.Flood
		if me == 1 {
			flood, err = strangers.Start(silent, liveness, func(i int) (net.Conn, error) {
				return net.DialTimeout("tcp", addrs[i%len(addrs)].String(), liveness)
			})
			if err != nil {
				return err
			}
		}
		// The ranks' first traffic: rank 1 connects to rank 0 behind the
		// flood, and rank 0 to rank 1.
		if err := h.Sweep(peer, btltest.Sizes(256<<10), liveness); err != nil {
			return fmt.Errorf("traffic during the flood: %w", err)
		}
		if me == 1 {
			longest, err := flood.Wait()
			if err != nil {
				return err
			}
			// Accepted after waiting in the kernel's queue, each was closed
			// within the timeout of its accept: a second of slack covers
			// the queue.
			if longest > timeout+time.Second {
				return fmt.Errorf("a silent connection stayed open %v (btl_tcp_handshake_timeout %v)", longest, timeout)
			}
			t.Logf("longest-lived silent connection: %v", longest)
		}
		if err := rt.Barrier(); err != nil {
			return err
		}
		if me == 0 {
			pending, peak, evicted := tcp.Handshakes(mod)
			t.Logf("rank 0: %d pending, at most %d at once, %d closed to make room, %d refused", pending, peak, evicted, tcp.Rejected(mod))
			if limit := 256 + len(addrs); peak > limit {
				return fmt.Errorf("rank 0 held %d handshakes at once, more than %d", peak, limit)
			}
			if got := tcp.Rejected(mod); got != silent {
				return fmt.Errorf("rank 0 refused %d connections, want %d", got, silent)
			}
			// The ranks' own connections, one each way, both ends in this
			// process, are all that is left.
			deadline := time.Now().Add(liveness)
			for {
				n, err := portSockets(ports)
				if err != nil {
					return err
				}
				if n <= before+1 {
					break
				}
				if time.Now().After(deadline) {
					return fmt.Errorf("%d sockets on rank 0's ports, %d before the flood (+1 for rank 1's connection)", n, before)
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
		return h.Sweep(peer, btltest.Sizes(64<<10), liveness)
	}, mpitest.WithMCA("btl", "self,tcp"), mpitest.WithMCA("btl_tcp_handshake_timeout", fmt.Sprint(timeout.Milliseconds())), onLoopback)
}

// establishedSockets counts this process's established TCP sockets with
// either port in ports: both ends of a connection between goroutine ranks.
func establishedSockets(ports map[uint16]bool) (int, error) {
	inodes, err := testutil.SocketInodes()
	if err != nil {
		return 0, err
	}
	n := 0
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		data, err := os.ReadFile(table)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n")[1:] {
			f := strings.Fields(line)
			if len(f) < 10 || !inodes[f[9]] || f[3] != "01" { // 01: ESTABLISHED
				continue
			}
			for _, a := range f[1:3] {
				_, hexPort, _ := strings.Cut(a, ":")
				if port, err := strconv.ParseUint(hexPort, 16, 16); err == nil && ports[uint16(port)] {
					n++
					break
				}
			}
		}
	}
	return n, nil
}

// TestOneConnectionPerPair: both ranks' fragments travel on one connection
// per pair (each segment then carries the acknowledgement of the last one
// the other way: no segment of its own for it, which costs a small
// message's round trip about a microsecond a side on loopback), even when
// every rank dials every other at once: the crossing dials are resolved to
// one, and traffic goes on both ways, in order, on it.
func TestOneConnectionPerPair(t *testing.T) {
	if _, err := establishedSockets(nil); err != nil {
		t.Skipf("cannot count sockets: %v", err)
	}
	const n = 4
	for round := range 4 {
		var deferred atomic.Int64
		mpitest.Run(t, n, func(r *mpitest.Rank) error {
			me := r.Rank()
			rt := r.Runtime()
			ports := map[uint16]bool{}
			for rank := range n {
				addrs, err := cardOf(r, rank)
				if err != nil {
					return err
				}
				for _, a := range addrs {
					ports[a.Port()] = true
				}
			}
			mod, err := tcpRoute(r, (me+1)%n)
			if err != nil {
				return err
			}
			got := make([]int, n)
			var bad error
			r.BML().RegisterRecv(btl.TagUser, func(src int, _ btl.Tag, frag []byte) {
				if (len(frag) != 1 || int(frag[0]) != got[src]) && bad == nil {
					bad = fmt.Errorf("rank %d: fragment %v from rank %d, want [%d]", me, frag, src, got[src])
				}
				got[src]++
			})
			if err := rt.Barrier(); err != nil {
				return err
			}
			// Every rank dials every other at once.
			const msgs = 20
			for i := range msgs {
				for peer := range n {
					if peer == me {
						continue
					}
					route := r.BML().Peer(peer).Send[0]
					for {
						err := route.Module.Send(route.EP, btl.TagUser, []byte{byte(i)}, nil)
						if !errors.Is(err, btl.ErrWouldBlock) {
							if err != nil {
								return err
							}
							break
						}
						r.BML().Progress()
					}
				}
			}
			err = progressUntil(r.BML(), func() bool {
				for peer := range n {
					if peer != me && got[peer] < msgs {
						return false
					}
				}
				return true
			}, "the fragments of every peer")
			if err != nil {
				return err
			}
			if bad != nil {
				return bad
			}
			deferred.Add(tcp.Deferred(mod))
			if err := rt.Barrier(); err != nil {
				return err
			}
			if me == 0 {
				// Two ends per connection, all in this process; a declined
				// dial closes within a moment.
				want := n * (n - 1)
				deadline := time.Now().Add(liveness)
				for {
					k, err := establishedSockets(ports)
					if err != nil {
						return err
					}
					if k == want {
						break
					}
					if time.Now().After(deadline) {
						return fmt.Errorf("%d connection ends among the %d ranks, want %d (one connection per pair)", k, n, want)
					}
					time.Sleep(10 * time.Millisecond)
				}
			}
			return rt.Barrier()
		}, mpitest.WithMCA("btl", "self,tcp"), onLoopback)
		t.Logf("round %d: %d crossing dials deferred", round, deferred.Load())
	}
}
