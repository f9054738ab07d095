package shm_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gompi/gompi/components/common/shmem"
	"github.com/gompi/gompi/frameworks/btl"
	"github.com/gompi/gompi/frameworks/btl/btltest"
	"github.com/gompi/gompi/internal/p2pcheck"
	"github.com/gompi/gompi/internal/testutil"
	"github.com/gompi/gompi/mca"
	"github.com/gompi/gompi/mpi"
	"github.com/gompi/gompi/mpierr"
	"github.com/gompi/gompi/mpitest"
	"github.com/gompi/gompi/params"
)

func shmOnly(extra ...string) []mpitest.Option {
	opts := []mpitest.Option{mpitest.WithMCA("btl", "self,shm")}
	for i := 0; i+1 < len(extra); i += 2 {
		opts = append(opts, mpitest.WithMCA(extra[i], extra[i+1]))
	}
	return opts
}

// shmModule returns the rank's shm module.
func shmModule(r *mpitest.Rank) btl.Module {
	for _, m := range r.BML().Modules() {
		if m.Attributes().Name == "shm" {
			return m
		}
	}
	return nil
}

// jobFiles lists the job's files in /dev/shm.
func jobFiles(t testing.TB, job string) []string {
	t.Helper()
	return testutil.ShmFiles(t, job, "*")
}

// TestSweep exchanges 0 B, 1 B and every power of two up to 16 MiB (64 KiB
// under -short) between goroutine ranks, every pair in turn, checking content,
// per-peer order, that the route is shm, and which path large messages took:
// single copy with cma, fragments with none.
func TestSweep(t *testing.T) {
	max := 16 << 20
	if testing.Short() {
		max = 64 << 10
	}
	for _, c := range []struct {
		ranks int
		mech  string
		max   int
	}{
		{2, "cma", max}, {2, "none", max}, {4, "cma", max}, {4, "none", min(max, 1<<20)},
	} {
		t.Run(fmt.Sprintf("%d ranks %s", c.ranks, c.mech), func(t *testing.T) {
			mpitest.Run(t, c.ranks, func(r *mpitest.Rank) error {
				h := btltest.New(r.BML(), r.Rank(), btl.TagUser)
				if err := r.Runtime().Barrier(); err != nil {
					return err
				}
				// Rounds of pairs r^1, r^2, r^3: every pair once.
				for k := 1; k < c.ranks; k++ {
					peer := r.Rank() ^ k
					p := r.BML().Peer(peer)
					if got := p.Send[0].Attr.Name; got != "shm" {
						return fmt.Errorf("rank %d reaches %d through %s", r.Rank(), peer, got)
					}
					if rdma := len(p.RDMA) > 0; rdma != (c.mech == "cma") {
						return fmt.Errorf("rank %d: RDMA route to %d: %v with %s", r.Rank(), peer, rdma, c.mech)
					}
					before := h.Stats
					if err := h.Sweep(peer, btltest.Sizes(c.max), time.Minute); err != nil {
						return err
					}
					large := h.Stats.RDMA - before.RDMA + h.Stats.Fragmented - before.Fragmented
					switch {
					case large == 0:
						return fmt.Errorf("rank %d: no message above a fragment: %+v", r.Rank(), h.Stats)
					case c.mech == "cma" && (h.Stats.Fragmented != 0 || h.Stats.RDMARefused != 0):
						return fmt.Errorf("rank %d: single copy was not used for every large message: %+v", r.Rank(), h.Stats)
					case c.mech == "none" && h.Stats.RDMA != 0:
						return fmt.Errorf("rank %d: single copy used with none: %+v", r.Rank(), h.Stats)
					}
				}
				t.Logf("rank %d: %+v", r.Rank(), h.Stats)
				return nil
			}, shmOnly("btl_shm_single_copy_mechanism", c.mech)...)
		})
	}
}

// TestRoutes: shm reaches every other rank of the node and not oneself
// (self does), with shm's attributes.
func TestRoutes(t *testing.T) {
	mpitest.Run(t, 3, func(r *mpitest.Rank) error {
		m := shmModule(r)
		if m == nil {
			return fmt.Errorf("no shm module")
		}
		a := m.Attributes()
		param := func(name string) int {
			_, v, ok := r.Params().Lookup("btl_shm_" + name)
			if !ok {
				return -1
			}
			return int(v.Uint())
		}
		want := btl.Attributes{Name: "shm", Exclusivity: param("exclusivity"), Latency: param("latency"), Bandwidth: param("bandwidth"),
			EagerLimit: param("eager_limit"), RndvEagerLimit: param("rndv_eager_limit"), MaxSendSize: param("max_send_size"),
			PipelineLimit: param("pipeline_limit"), Flags: btl.FlagGet | btl.FlagPut}
		if a != want {
			return fmt.Errorf("attributes %+v, want the parameters' %+v", a, want)
		}
		for p := 0; p < r.Size(); p++ {
			want := "shm"
			if p == r.Rank() {
				want = "self"
			}
			if got := r.BML().Peer(p).Send[0].Attr.Name; got != want || len(r.BML().Peer(p).Send) != 1 {
				return fmt.Errorf("rank %d to %d: %v", r.Rank(), p, r.BML().Peer(p).Send)
			}
		}
		return nil
	}, shmOnly()...)
}

// TestFiles follows the job's files: none left once Init is done (every
// peer mapped every control segment), a box with mode 0600 (under umask 0,
// so the mode is the code's) made by the first Send, and removed as soon as
// its receiver maps it.
func TestFiles(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	var job string
	mpitest.Run(t, 2, func(r *mpitest.Rank) error {
		rt := r.Runtime()
		var got atomic.Int64
		r.BML().RegisterRecv(btl.TagUser, func(int, btl.Tag, []byte) { got.Add(1) })
		if err := rt.Barrier(); err != nil {
			return err
		}
		if r.Rank() == 0 {
			job = r.JobID()
			if files, err := testutil.FindShmFiles(job, "*"); err != nil || len(files) != 0 {
				return fmt.Errorf("files left after Init: %v (%v)", files, err)
			}
			p := r.BML().Peer(1).Send[0]
			if err := p.Module.Send(p.EP, btl.TagUser, []byte("hdr"), []byte("payload")); err != nil {
				return err
			}
			files, err := testutil.FindShmFiles(job, "*")
			if err != nil {
				return err
			}
			if len(files) != 1 {
				return fmt.Errorf("after the first send: files %v, want one box", files)
			}
			st, err := os.Lstat(files[0])
			if err != nil {
				return err
			}
			if st.Mode() != 0o600 {
				return fmt.Errorf("%s has mode %v, want -rw-------", files[0], st.Mode())
			}
		}
		if err := rt.Barrier(); err != nil { // the box exists
			return err
		}
		if r.Rank() == 1 {
			if err := awaitFragment(r, &got); err != nil {
				return err
			}
			if files, err := testutil.FindShmFiles(job, "*"); err != nil || len(files) != 0 {
				return fmt.Errorf("files left once the box was mapped: %v (%v)", files, err)
			}
		}
		return finalizeAndCheck(r, job)
	}, shmOnly(shmem.BackingParam, "file")...)
}

// TestMemfdDescriptors follows a job's memfd segments (the default): no
// file in /dev/shm ever; each process holds its control segment's
// descriptor until every peer has mapped it, and a box's until its
// receiver has: after that nothing can open them, and the memory goes
// with the processes that map it. The descriptors close at the maker's
// next Progress after its peers ring it, not at Finalize: 129 goroutine
// ranks would hold 33,000.
func TestMemfdDescriptors(t *testing.T) {
	mpitest.Run(t, 2, func(r *mpitest.Rank) error {
		rt := r.Runtime()
		job := r.JobID()
		var got atomic.Int64
		r.BML().RegisterRecv(btl.TagUser, func(int, btl.Tag, []byte) { got.Add(1) })
		if err := rt.Barrier(); err != nil {
			return err
		}
		// until progresses until the process holds no descriptor of the
		// job's segments named like prefix.
		until := func(prefix string) error {
			deadline := time.Now().Add(10 * time.Second)
			for len(testutil.ShmDescriptors(0, job, prefix)) != 0 {
				if time.Now().After(deadline) {
					return fmt.Errorf("rank %d: descriptors still open: %v", r.Rank(), testutil.ShmDescriptors(0, job, prefix))
				}
				if r.BML().Progress() == 0 {
					runtime.Gosched()
				}
			}
			return nil
		}
		if err := until("ctl-"); err != nil {
			return err
		}
		if err := rt.Barrier(); err != nil {
			return err
		}
		if r.Rank() == 0 {
			p := r.BML().Peer(1).Send[0]
			if err := p.Module.Send(p.EP, btl.TagUser, []byte("hdr"), []byte("payload")); err != nil {
				return err
			}
			if fds := testutil.ShmDescriptors(0, job, "box-0-1"); len(fds) != 1 {
				return fmt.Errorf("after the first send: descriptors %v, want the box's", fds)
			}
		}
		if r.Rank() == 1 {
			if err := awaitFragment(r, &got); err != nil {
				return err
			}
		}
		if err := until("box-"); err != nil {
			return err
		}
		if files, err := testutil.FindShmFiles(job, "*"); err != nil || len(files) != 0 {
			return fmt.Errorf("files of a job with memfd segments: %v (%v)", files, err)
		}
		return r.Finalize()
	}, shmOnly(shmem.BackingParam, "memfd")...)
}

// awaitFragment progresses r's BML until got counts a fragment.
func awaitFragment(r *mpitest.Rank, got *atomic.Int64) error {
	deadline := time.Now().Add(10 * time.Second)
	for got.Load() == 0 {
		if time.Now().After(deadline) {
			return fmt.Errorf("the fragment did not arrive")
		}
		if r.BML().Progress() == 0 {
			runtime.Gosched()
		}
	}
	return nil
}

// finalizeAndCheck finalizes the rank and checks, on rank 0, that the job's
// files are gone by then (before mpitest's own clean-up could hide a leak).
func finalizeAndCheck(r *mpitest.Rank, job string) error {
	if err := r.Finalize(); err != nil {
		return err
	}
	if r.Rank() != 0 {
		return nil
	}
	// The peers finalize at the same time: give them a moment.
	deadline := time.Now().Add(5 * time.Second)
	for {
		files, err := testutil.FindShmFiles(job, "*")
		if err != nil {
			return err
		}
		if len(files) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("files left after Finalize: %v", files)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// progressUntil progresses r's transports until got reaches n, and fails
// after 30 s instead of hanging until go test's timeout.
func progressUntil(r *mpitest.Rank, got *atomic.Int64, n int64) error {
	deadline := time.Now().Add(30 * time.Second)
	for got.Load() < n {
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d fragments arrived in 30 s", got.Load(), n)
		}
		if r.BML().Progress() == 0 {
			runtime.Gosched()
		}
	}
	return nil
}

// TestFlowControl: a sender whose receiver does not progress is refused
// (ErrWouldBlock) once the ring is full, having written no more than the
// ring holds; when the receiver drains, everything arrives in order and the
// sender can go on.
func TestFlowControl(t *testing.T) {
	const ring = 16 << 10
	const perRing = (ring - 8) / 1016
	mpitest.Run(t, 2, func(r *mpitest.Rank) error {
		var got, want atomic.Int64
		var bad atomic.Value
		r.BML().RegisterRecv(btl.TagUser, func(_ int, _ btl.Tag, frag []byte) {
			if len(frag) != 1000 || int64(frag[0]) != want.Load()%251 {
				bad.CompareAndSwap(nil, fmt.Sprintf("fragment %d: %d bytes starting %d", want.Load(), len(frag), frag[0]))
			}
			want.Add(1)
			got.Add(1)
		})
		rt := r.Runtime()
		if err := rt.Barrier(); err != nil {
			return err
		}
		sent := 0
		if r.Rank() == 0 {
			p := r.BML().Peer(1).Send[0]
			frag := make([]byte, 1000)
			for {
				frag[0] = byte(sent % 251)
				err := p.Module.Send(p.EP, btl.TagUser, nil, frag)
				if errors.Is(err, btl.ErrWouldBlock) {
					break
				}
				if err != nil {
					return err
				}
				sent++
			}
			if sent != perRing { // a 1000-byte fragment takes 1016 bytes of ring; 8 stay free
				return fmt.Errorf("%d fragments of 1000 bytes accepted into a ring of %d", sent, ring)
			}
			if !errors.Is(btl.ErrWouldBlock, mpierr.ErrPending) {
				return fmt.Errorf("ErrWouldBlock does not carry MPI_ERR_PENDING")
			}
			if p.Module.Sendi(p.EP, btl.TagUser, nil, frag) {
				return fmt.Errorf("Sendi succeeded into a full ring")
			}
		}
		if err := rt.Barrier(); err != nil {
			return err
		}
		if r.Rank() == 1 {
			if err := progressUntil(r, &got, perRing); err != nil {
				return err
			}
		}
		if err := rt.Barrier(); err != nil {
			return err
		}
		if r.Rank() == 0 {
			// Room again: the receiver drained.
			p := r.BML().Peer(1).Send[0]
			frag := make([]byte, 1000)
			frag[0] = byte(sent % 251)
			if err := p.Module.Send(p.EP, btl.TagUser, nil, frag); err != nil {
				return fmt.Errorf("send after the receiver drained: %v", err)
			}
		}
		if err := rt.Barrier(); err != nil {
			return err
		}
		if r.Rank() == 1 {
			if err := progressUntil(r, &got, perRing+1); err != nil {
				return err
			}
			if b := bad.Load(); b != nil {
				return fmt.Errorf("%v", b)
			}
		}
		return nil
	}, shmOnly("btl_shm_ring_size", "16k", "btl_shm_max_send_size", "4k", "btl_shm_eager_limit", "2k")...)
}

// TestSendToFinalizedPeer: a sender blocked on a full box to a peer that
// finalizes gets ErrPeerLost, not ErrWouldBlock forever.
func TestSendToFinalizedPeer(t *testing.T) {
	mpitest.Run(t, 2, func(r *mpitest.Rank) error {
		rt := r.Runtime()
		if err := rt.Barrier(); err != nil {
			return err
		}
		if r.Rank() == 1 {
			if err := shmModule(r).Finalize(); err != nil {
				return err
			}
		}
		if err := rt.Barrier(); err != nil {
			return err
		}
		if r.Rank() == 0 {
			p := r.BML().Peer(1).Send[0]
			frag := make([]byte, 1000)
			deadline := time.Now().Add(10 * time.Second)
			for {
				err := p.Module.Send(p.EP, btl.TagUser, nil, frag)
				if err == nil || errors.Is(err, btl.ErrWouldBlock) {
					if time.Now().After(deadline) {
						return fmt.Errorf("still %v after 10 s", err)
					}
					r.BML().Progress()
					continue
				}
				if !errors.Is(err, btl.ErrPeerLost) || !errors.Is(err, mpierr.ErrProcAborted) {
					return fmt.Errorf("send to a finalized peer: %v, want ErrPeerLost", err)
				}
				break
			}
		}
		// Rank 0's box to rank 1 was never mapped: rank 0's Finalize
		// removes it.
		return finalizeAndCheck(r, r.JobID())
	}, shmOnly("btl_shm_liveness_polls", "100")...)
}

// TestConcurrentSenders: several goroutines of one rank send to one peer
// at once (one producer lock), while another progresses; everything arrives
// and each goroutine's fragments stay in order.
func TestConcurrentSenders(t *testing.T) {
	const senders, each = 4, 2000
	n := each
	if testing.Short() {
		n = 300
	}
	mpitest.Run(t, 2, func(r *mpitest.Rank) error {
		next := make([]int, senders)
		var bad atomic.Value
		var got atomic.Int64
		r.BML().RegisterRecv(btl.TagUser, func(_ int, _ btl.Tag, frag []byte) {
			g, i := int(frag[0]), int(frag[1])|int(frag[2])<<8
			if i != next[g] {
				bad.CompareAndSwap(nil, fmt.Sprintf("sender %d: fragment %d when %d was due", g, i, next[g]))
			}
			next[g]++
			got.Add(1)
		})
		if err := r.Runtime().Barrier(); err != nil {
			return err
		}
		if r.Rank() == 0 {
			p := r.BML().Peer(1).Send[0]
			errs := make(chan error, senders)
			for g := 0; g < senders; g++ {
				go func() {
					frag := make([]byte, 64+g*300)
					for i := 0; i < n; i++ {
						frag[0], frag[1], frag[2] = byte(g), byte(i), byte(i>>8)
						for {
							err := p.Module.Send(p.EP, btl.TagUser, nil, frag)
							if err == nil {
								break
							}
							if !errors.Is(err, btl.ErrWouldBlock) {
								errs <- err
								return
							}
							r.BML().Progress()
							runtime.Gosched()
						}
					}
					errs <- nil
				}()
			}
			for g := 0; g < senders; g++ {
				if err := <-errs; err != nil {
					return err
				}
			}
		} else {
			deadline := time.Now().Add(30 * time.Second)
			for got.Load() < int64(senders*n) {
				if time.Now().After(deadline) {
					return fmt.Errorf("%d of %d fragments arrived", got.Load(), senders*n)
				}
				if r.BML().Progress() == 0 {
					runtime.Gosched()
				}
			}
			if b := bad.Load(); b != nil {
				return fmt.Errorf("%v", b)
			}
		}
		return r.Runtime().Barrier()
	}, shmOnly()...)
}

// TestCallbackSends: a callback may send to the peer it heard from: a
// ping-pong driven from inside the callbacks.
func TestCallbackSends(t *testing.T) {
	const rounds = 1000
	mpitest.Run(t, 2, func(r *mpitest.Rank) error {
		peer := 1 - r.Rank()
		p := r.BML().Peer(peer).Send[0]
		var count atomic.Int64
		var sendErr atomic.Value
		r.BML().RegisterRecv(btl.TagUser, func(src int, _ btl.Tag, frag []byte) {
			if count.Add(1) < rounds {
				if err := p.Module.Send(p.EP, btl.TagUser, frag, nil); err != nil {
					sendErr.CompareAndSwap(nil, err)
				}
			}
		})
		if err := r.Runtime().Barrier(); err != nil {
			return err
		}
		if r.Rank() == 0 {
			if err := p.Module.Send(p.EP, btl.TagUser, []byte("ball"), nil); err != nil {
				return err
			}
		}
		deadline := time.Now().Add(20 * time.Second)
		for count.Load() < rounds/2 {
			if e := sendErr.Load(); e != nil {
				return e.(error)
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%d rounds", count.Load())
			}
			if r.BML().Progress() == 0 {
				runtime.Gosched()
			}
		}
		return nil
	}, shmOnly()...)
}

// TestSingletonDeclines: alone on its node, shm declines (self serves the
// only peer) and makes no file.
func TestSingletonDeclines(t *testing.T) {
	var job string
	mpitest.Run(t, 1, func(r *mpitest.Rank) error {
		job = r.JobID()
		if shmModule(r) != nil {
			return fmt.Errorf("shm selected for a job of one")
		}
		return nil
	}, shmOnly()...)
	if files := jobFiles(t, job); len(files) != 0 {
		t.Errorf("files: %v", files)
	}
}

// settings is btl self,shm and the name, value pairs kv.
func settings(kv ...string) []params.Setting {
	out := []params.Setting{{Name: "btl", Value: "self,shm"}}
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, params.Setting{Name: kv[i], Value: kv[i+1]})
	}
	return out
}

// defaultSize is the default of a size parameter, from the registry.
func defaultSize(t *testing.T, name string) int {
	t.Helper()
	p, ok := mca.Default().Params().Lookup(name)
	if !ok {
		t.Fatalf("%s is not registered", name)
	}
	n, err := params.ParseSize(p.Def().Default)
	if err != nil {
		t.Fatalf("%s's default %q: %v", name, p.Def().Default, err)
	}
	return int(n)
}

// TestLoweredMaxSendSize: lowering max_send_size alone lowers the eager
// limit left at its default with it (and the rendezvous eager limit with
// that), rather than failing on a parameter the user did not set, and the
// PML goes eager up to the lowered limit and no further. An eager limit the
// user set is kept: below the fragment it stands, above it is an error.
func TestLoweredMaxSendSize(t *testing.T) {
	eager, rndv := defaultSize(t, "btl_shm_eager_limit"), defaultSize(t, "btl_shm_rndv_eager_limit")
	lowered := eager - 64 // below the default eager limit, whatever it is
	if lowered < 256 {
		t.Fatalf("btl_shm_eager_limit's default %d leaves no max_send_size below it to test", eager)
	}
	for _, c := range []struct {
		name                       string
		set                        []string
		wantEager, wantRndv, wantM int
	}{
		{"eager limit left at its default", []string{"btl_shm_max_send_size", fmt.Sprint(lowered)}, lowered, min(rndv, lowered), lowered},
		{"eager limit set below", []string{"btl_shm_max_send_size", fmt.Sprint(lowered), "btl_shm_eager_limit", fmt.Sprint(lowered - 32)},
			lowered - 32, min(rndv, lowered-32), lowered},
	} {
		t.Run(c.name, func(t *testing.T) {
			mpitest.Run(t, 2, func(r *mpitest.Rank) error {
				a := r.BML().Peer(1 - r.Rank()).Send[0].Attr
				if a.Name != "shm" || a.MaxSendSize != c.wantM || a.EagerLimit != c.wantEager || a.RndvEagerLimit != c.wantRndv {
					return fmt.Errorf("route %s: max_send_size %d, eager limit %d, rendezvous eager limit %d; want shm, %d, %d, %d",
						a.Name, a.MaxSendSize, a.EagerLimit, a.RndvEagerLimit, c.wantM, c.wantEager, c.wantRndv)
				}
				return p2pcheck.Run(r.CommWorld(), p2pcheck.Options{}, "eagerlimit")
			}, shmOnly(c.set...)...)
		})
	}
	// Set by the user above the lowered fragment: not silently lowered.
	inst, err := mpi.InitWith(mpi.Options{Env: testutil.CleanEnv(), Output: testutil.LogWriter{T: t},
		MCA:  settings("btl_shm_max_send_size", fmt.Sprint(lowered), "btl_shm_eager_limit", fmt.Sprint(eager)),
		Exit: func(int) { runtime.Goexit() }})
	if err == nil {
		inst.Finalize()
		t.Fatalf("Init with btl_shm_eager_limit %d set above btl_shm_max_send_size %d succeeded", eager, lowered)
	}
	if want := fmt.Sprintf("btl_shm_eager_limit = %d: accepted: 256 to btl_shm_max_send_size (%d)", eager, lowered); !strings.Contains(err.Error(), want) ||
		!errors.Is(err, mpierr.ErrUnsupportedParam) {
		t.Errorf("error %q: want %q, of class %v", err, want, mpierr.ErrUnsupportedParam)
	}
}

// TestBadParameters: a bad value fails Init with a message that names the
// parameter and what is accepted.
func TestBadParameters(t *testing.T) {
	// A ring one power of two too small for the default max_send_size, and
	// an eager limit above it.
	maxSend := defaultSize(t, "btl_shm_max_send_size")
	ring := 4096
	for ring*2 < 2*maxSend+32 {
		ring *= 2
	}
	cases := []struct {
		set  []string
		want string
	}{
		{[]string{"btl_shm_ring_size", "100000"}, "btl_shm_ring_size = 100000: accepted: a power of two from 4096 to 1073741824"},
		{[]string{"btl_shm_ring_size", "2g"}, "btl_shm_ring_size = 2147483648: accepted: a power of two"},
		{[]string{"btl_shm_ring_size", fmt.Sprint(ring)}, fmt.Sprintf("btl_shm_ring_size = %d is too small for btl_shm_max_send_size = %d: "+
			"accepted: a ring of at least twice max_send_size plus 32 (%d", ring, maxSend, 2*maxSend+32)},
		{[]string{"btl_shm_max_send_size", "32m", "btl_shm_ring_size", "128m"}, "btl_shm_max_send_size = 33554432: accepted: up to 16777214"},
		{[]string{"btl_shm_liveness_polls", "0"}, "btl_shm_liveness_polls = 0: accepted: 1 to"},
		{[]string{"btl_shm_pipeline_limit", "65m"}, "btl_shm_pipeline_limit = 68157440: accepted: 0 to 67108864 (64m)"},
		{[]string{"btl_shm_single_copy_mechanism", "xpmem"}, "btl_shm_single_copy_mechanism"},
		{[]string{"btl_shm_eager_limit", fmt.Sprint(2 * maxSend)}, fmt.Sprintf("btl_shm_eager_limit = %d: accepted: 256 to btl_shm_max_send_size (%d)", 2*maxSend, maxSend)},
		{[]string{"btl_shm_eager_limit", "4k", "btl_shm_rndv_eager_limit", "8k"}, "btl_shm_rndv_eager_limit = 8192: accepted: 256 to btl_shm_eager_limit (4096)"},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.set, "="), func(t *testing.T) {
			inst, err := mpi.InitWith(mpi.Options{
				Env: testutil.CleanEnv(), Output: testutil.LogWriter{T: t},
				MCA:  settings(c.set...),
				Exit: func(int) { runtime.Goexit() },
			})
			if err == nil {
				inst.Finalize()
				t.Fatal("Init succeeded")
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q does not contain %q", err, c.want)
			}
			if c.set[0] != "btl_shm_single_copy_mechanism" && !errors.Is(err, mpierr.ErrUnsupportedParam) {
				t.Errorf("error %q is not of class %v", err, mpierr.ErrUnsupportedParam)
			}
		})
	}
	// The enum's message lists what it accepts.
	inst, err := mpi.InitWith(mpi.Options{Env: testutil.CleanEnv(), Output: testutil.LogWriter{T: t},
		MCA:  []params.Setting{{Name: "btl_shm_single_copy_mechanism", Value: "xpmem"}},
		Exit: func(int) { runtime.Goexit() }})
	if err == nil {
		inst.Finalize()
		t.Fatal("Init succeeded")
	}
	if !strings.Contains(err.Error(), "none") || !strings.Contains(err.Error(), "cma") {
		t.Errorf("error %q does not list none and cma", err)
	}
}

// TestOmpiInfo: every parameter is visible at level 9.
func TestOmpiInfo(t *testing.T) {
	if testing.Short() {
		t.Skip("builds ompi_info")
	}
	// Without the caller's OMPI_MCA_ settings: the values shown are the
	// defaults.
	cmd := exec.Command("go", "run", "../../../cmd/ompi_info", "--param", "btl", "shm", "--level", "9")
	cmd.Env = testutil.CleanEnv()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, name := range []string{"btl_shm_exclusivity", "btl_shm_eager_limit", "btl_shm_max_send_size", "btl_shm_latency",
		"btl_shm_bandwidth", "btl_shm_ring_size", "btl_shm_single_copy_mechanism", "btl_shm_liveness_polls"} {
		if !strings.Contains(string(out), `"`+name+`"`) {
			t.Errorf("ompi_info does not show %s:\n%s", name, out)
		}
	}
	if want := fmt.Sprintf(`"btl_shm_exclusivity" (current value: "%d"`, defaultSize(t, "btl_shm_exclusivity")); !strings.Contains(string(out), want) {
		t.Errorf("ompi_info lacks %s:\n%s", want, out)
	}
}

// TestNoAllocations: the fragment path allocates nothing, on either side.
func TestNoAllocations(t *testing.T) {
	mpitest.Run(t, 2, func(r *mpitest.Rank) error {
		got := 0 // the callback runs on this goroutine, inside Progress
		r.BML().RegisterRecv(btl.TagUser, func(int, btl.Tag, []byte) { got++ })
		if err := r.Runtime().Barrier(); err != nil {
			return err
		}
		m := shmModule(r)
		if r.Rank() == 0 {
			p := r.BML().Peer(1).Send[0]
			buf := make([]byte, 8)
			if err := m.Send(p.EP, btl.TagUser, nil, buf); err != nil { // makes the box
				return err
			}
			var err error
			if a := testing.AllocsPerRun(1000, func() {
				if e := m.Send(p.EP, btl.TagUser, nil, buf); e != nil {
					err = e
				}
				m.Progress()
			}); a != 0 || err != nil {
				return fmt.Errorf("%v allocations per Send and Progress (%v)", a, err)
			}
		}
		if err := r.Runtime().Barrier(); err != nil {
			return err
		}
		if r.Rank() == 1 {
			for got < 1001 {
				if m.Progress() == 0 {
					runtime.Gosched()
				}
			}
			if a := testing.AllocsPerRun(100, func() { m.Progress() }); a != 0 {
				return fmt.Errorf("%v allocations per idle Progress", a)
			}
		}
		return nil
	}, shmOnly()...)
}

// pipeFragments are parameters under which pipelined messages travel in
// several fragments: 8 KiB fragments up to 64 KiB (by default the 16 KiB
// limit fits a message in its first fragment).
var pipeFragments = []string{"btl_shm_max_send_size", "8k", "btl_shm_pipeline_limit", "64k"}

// TestPipelineFragments: pipelined messages of several fragments, at and
// around every threshold, unexpected and posted, both ways, by AnySource
// after Probe, by Mprobe, truncated, and in order with the other protocols,
// on goroutine ranks (the same checks run under mpirun in p2pprog). With
// pml_ob1_rdma_choice=always, so that every message in the range is
// pipelined; by default the receiver's measure may have some offered by
// RDMA Get instead (the suites run that way).
func TestPipelineFragments(t *testing.T) {
	mpitest.Run(t, 3, func(r *mpitest.Rank) error {
		before := r.PMLStats()
		if err := p2pcheck.Run(r.CommWorld(), p2pcheck.Options{Large: 50000}, "pipeline", "ordering", "anysource", "probe",
			"truncation", "mprobe", "eagerlimit", "concurrent"); err != nil {
			return err
		}
		if s := r.PMLStats(); s.Pipelined == before.Pipelined {
			return fmt.Errorf("nothing went pipelined: %+v", s)
		}
		return nil
	}, shmOnly(append([]string{"pml_ob1_rdma_choice", "always"}, pipeFragments...)...)...)
}
