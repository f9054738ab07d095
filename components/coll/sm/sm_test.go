package sm_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gompi/gompi/components/common/shmem"
	"github.com/gompi/gompi/mpi"
	"github.com/gompi/gompi/mpitest"
	"github.com/gompi/gompi/rte"
)

// first is associative and not commutative: x op y = x. Reduced in rank
// order it gives rank 0's value; any other order gives another.
var first = mpi.NewOp("first", func(in, inout []int64) { copy(inout, in) }, false)

// checkOne runs one collective, chosen by what, on c and checks it. Every
// rank passes the same what, count and root (from a shared seed).
func checkOne(c *mpi.Comm, what, count, root, iter int) error {
	me, n := c.Rank(), c.Size()
	val := func(r, i int) int64 { return int64(r*1000 + i + iter) }
	switch what {
	case 0:
		return c.Barrier()
	case 1:
		buf := make([]int64, count)
		if me == root {
			for i := range buf {
				buf[i] = val(root, i)
			}
		}
		if err := mpi.Bcast(c, buf, root); err != nil {
			return err
		}
		for i, v := range buf {
			if v != val(root, i) {
				return fmt.Errorf("iteration %d: bcast of %d from %d: element %d is %d, want %d", iter, count, root, i, v, val(root, i))
			}
		}
	case 2, 3:
		send, recv := make([]int64, count), make([]int64, count)
		for i := range send {
			send[i] = val(me, i)
		}
		var err error
		if what == 2 {
			err = mpi.Allreduce(c, send, recv, mpi.Sum)
		} else {
			err = mpi.Reduce(c, send, recv, mpi.Sum, root)
		}
		if err != nil {
			return err
		}
		if what == 3 && me != root {
			return nil
		}
		for i, v := range recv {
			var want int64
			for r := 0; r < n; r++ {
				want += val(r, i)
			}
			if v != want {
				return fmt.Errorf("iteration %d: reduction %d of %d: element %d is %d, want %d", iter, what, count, i, v, want)
			}
		}
	case 4:
		buf := make([]int64, count) // in place
		for i := range buf {
			buf[i] = val(me, i)
		}
		if err := mpi.Allreduce(c, buf, buf, first); err != nil {
			return err
		}
		for i, v := range buf {
			if v != val(0, i) {
				return fmt.Errorf("iteration %d: allreduce of a non-commutative op over %d: element %d is %d, want rank 0's %d", iter, count, i, v, val(0, i))
			}
		}
	case 5, 6:
		// Allgather of count elements a rank; in place on odd iterations.
		recv := make([]int64, count*n)
		send := make([]int64, count)
		for i := range send {
			send[i] = val(me, i)
		}
		var err error
		if iter%2 == 1 {
			copy(recv[me*count:], send)
			err = mpi.Allgather(c, recv[me*count:(me+1)*count], recv)
		} else {
			err = mpi.Allgather(c, send, recv)
		}
		if err != nil {
			return err
		}
		for r := 0; r < n; r++ {
			for i := 0; i < count; i++ {
				if v := recv[r*count+i]; v != val(r, i) {
					return fmt.Errorf("iteration %d: allgather of %d: rank %d's element %d is %d, want %d", iter, count, r, i, v, val(r, i))
				}
			}
		}
	case 7, 8:
		// Alltoall of count elements to each rank; in place on odd
		// iterations. Element i of the block for rank d is val(me, d*count+i).
		send := make([]int64, count*n)
		for j := range send {
			send[j] = val(me, j)
		}
		recv := make([]int64, count*n)
		var err error
		if iter%2 == 1 {
			copy(recv, send)
			err = mpi.Alltoall(c, recv, recv)
		} else {
			err = mpi.Alltoall(c, send, recv)
		}
		if err != nil {
			return err
		}
		for r := 0; r < n; r++ {
			for i := 0; i < count; i++ {
				if v, want := recv[r*count+i], val(r, me*count+i); v != want {
					return fmt.Errorf("iteration %d: alltoall of %d: element %d from rank %d is %d, want %d", iter, count, i, r, v, want)
				}
			}
		}
	case 9:
		// Gather of count elements a rank to root; the root in place on
		// odd iterations.
		send := make([]int64, count)
		for i := range send {
			send[i] = val(me, i)
		}
		var recv []int64
		if me == root {
			recv = make([]int64, count*n)
		}
		var err error
		if me == root && iter%2 == 1 {
			copy(recv[me*count:], send)
			err = mpi.Gather(c, recv[me*count:(me+1)*count], recv, root)
		} else {
			err = mpi.Gather(c, send, recv, root)
		}
		if err != nil || me != root {
			return err
		}
		for r := 0; r < n; r++ {
			for i := 0; i < count; i++ {
				if v := recv[r*count+i]; v != val(r, i) {
					return fmt.Errorf("iteration %d: gather of %d to %d: rank %d's element %d is %d, want %d", iter, count, root, r, i, v, val(r, i))
				}
			}
		}
	case 10:
		// Scatter of count elements a rank from root; the root in place on
		// odd iterations. Element i of rank d's block is val(root, d*count+i).
		var send []int64
		if me == root {
			send = make([]int64, count*n)
			for j := range send {
				send[j] = val(root, j)
			}
		}
		recv := make([]int64, count)
		var err error
		if me == root && iter%2 == 1 {
			err = mpi.Scatter(c, send, send[me*count:(me+1)*count], root)
			copy(recv, send[me*count:(me+1)*count])
		} else {
			err = mpi.Scatter(c, send, recv, root)
		}
		if err != nil {
			return err
		}
		for i, v := range recv {
			if want := val(root, me*count+i); v != want {
				return fmt.Errorf("iteration %d: scatter of %d from %d: element %d is %d, want %d", iter, count, root, i, v, want)
			}
		}
	}
	return nil
}

// Random sequences of barrier, bcast, reduce, allreduce, allgather,
// alltoall, gather and scatter (in place and not), with random roots and
// sizes on both sides of coll_sm_max_bytes (64 bytes: 8 elements a rank,
// and an alltoall's or a scatter's blocks together), of
// coll_sm_split_bytes (32) and of coll_sm_gather_min_bytes (16), on the
// world and on a split: every result right. Roots that
// leave at once (bcast's root, reduce's others) run ahead of the readers
// of their slots, which is what the two slots per rank are for.
func TestRandomSequences(t *testing.T) {
	iters := 3000
	if testing.Short() {
		iters = 500
	}
	for _, n := range []int{2, 3, 4, 5} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			mpitest.Run(t, n, func(r *mpitest.Rank) error {
				w := r.CommWorld()
				table := w.CollTable()
				slots := []string{"barrier=sm>tofu", "bcast=sm>tuned", "reduce=sm>tuned", "allreduce=sm>tuned",
					"allgather=sm>tuned", "alltoall=sm>tuned", "gather=sm>tuned", "scatter=sm>tuned"}
				if n == 2 {
					slots = append(slots[:6], "gather=tuned", "scatter=tuned")
				}
				for _, slot := range slots {
					if !strings.Contains(" "+table+" ", " "+slot+" ") {
						return fmt.Errorf("slot table %q: want %s", table, slot)
					}
				}
				half, err := w.Split(w.Rank()%2, 0)
				if err != nil {
					return err
				}
				defer half.Free()
				rng := rand.New(rand.NewPCG(uint64(n), 1))
				for i := 0; i < iters; i++ {
					c := w
					if rng.IntN(4) == 0 {
						c = half
					}
					// Draws do not depend on the communicator: both halves
					// (of different sizes when n is odd) stay in step.
					what, count, root := rng.IntN(11), rng.IntN(12), rng.IntN(1000)
					if err := checkOne(c, what, count, root%c.Size(), i); err != nil {
						return fmt.Errorf("rank %d on %d ranks: %w", w.Rank(), c.Size(), err)
					}
				}
				return nil
			}, mpitest.WithMCA("coll_sm_max_bytes", "64"), mpitest.WithMCA("coll_sm_split_bytes", "32"),
				mpitest.WithMCA("coll_sm_gather_min_bytes", "16"))
		})
	}
}

// sm fills the world's barrier and sets its segment up at the first one:
// once every rank has mapped the segment its name is gone (the process
// maps it, marked deleted; the directory has no file of it; no descriptor
// of the process opens it), so that a crash leaves nothing behind. After
// Finalize the mapping is gone too, even of the world, which is never
// freed: a process that runs many jobs of goroutine ranks does not keep
// their segments. A memfd segment never had a file: it shows in the maps
// as /memfd:<name>.
func TestSegmentNameDropped(t *testing.T) {
	if _, err := os.ReadFile("/proc/self/maps"); err != nil {
		t.Skipf("no /proc/self/maps: %v", err)
	}
	for _, backing := range []string{"file", "memfd"} {
		t.Run(backing, func(t *testing.T) {
			var job string
			mapsPrefix := func(job string) string {
				if backing == "memfd" {
					return "/memfd:" + filepath.Base(shmem.Path(job, "collsm-"))
				}
				return shmem.Path(job, "collsm-")
			}
			mpitest.Run(t, 3, func(r *mpitest.Rank) error {
				w := r.CommWorld()
				if w.Rank() == 0 {
					job = r.JobID()
				}
				if !fromSM(w, "barrier") {
					return fmt.Errorf("slot table %q: want the barrier from sm", w.CollTable())
				}
				if err := w.Barrier(); err != nil {
					return err
				}
				prefix := mapsPrefix(r.JobID())
				mapped := segmentMaps(prefix)
				if len(mapped) == 0 {
					return fmt.Errorf("after the first barrier the process maps no %s* segment: sm never made one", prefix)
				}
				for _, m := range mapped {
					if !strings.HasSuffix(m, " (deleted)") {
						return fmt.Errorf("after the first barrier the segment's file is still there: %s", m)
					}
				}
				files, err := filepath.Glob(shmem.Path(r.JobID(), "collsm-*"))
				if err != nil {
					return err
				}
				if len(files) > 0 {
					return fmt.Errorf("after the first barrier: %v remain", files)
				}
				if fds := openSegments(prefix); len(fds) > 0 {
					return fmt.Errorf("after the first barrier the process still opens the segment: %v", fds)
				}
				return w.Barrier()
			}, mpitest.WithMCA(shmem.BackingParam, backing))
			if m := segmentMaps(mapsPrefix(job)); len(m) > 0 {
				t.Errorf("after Finalize, the process still maps job %s's segment:\n%s", job, strings.Join(m, "\n"))
			}
		})
	}
}

// openSegments lists the process's descriptors whose target starts with
// prefix.
func openSegments(prefix string) []string {
	ents, _ := os.ReadDir("/proc/self/fd")
	var out []string
	for _, e := range ents {
		if l, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && strings.HasPrefix(l, prefix) {
			out = append(out, e.Name()+" -> "+l)
		}
	}
	return out
}

// fromSM says whether c's slot table has op from sm (over the module
// below it).
func fromSM(c *mpi.Comm, op string) bool {
	for _, f := range strings.Fields(c.CollTable()) {
		if strings.HasPrefix(f, op+"=sm>") {
			return true
		}
	}
	return false
}

// segmentMaps returns the lines of /proc/self/maps that map a file whose
// path starts with prefix.
func segmentMaps(prefix string) []string {
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return nil
	}
	var out []string
	for _, l := range strings.Split(string(maps), "\n") {
		if strings.Contains(l, " "+prefix) {
			out = append(out, l)
		}
	}
	return out
}

// Ranks that wait long in an sm collective sleep, and the last rank to
// arrive wakes them: the job ends long before the sleeps' own limit would
// have let them look.
func TestSleepersWake(t *testing.T) {
	const rounds = 5
	var slept [4]uint64
	start := time.Now()
	mpitest.Run(t, 4, func(r *mpitest.Rank) error {
		w := r.CommWorld()
		// The waits must be sm's: below it, the PML's own bells would wake
		// the sleepers.
		for _, op := range []string{"barrier", "allreduce"} {
			if !fromSM(w, op) {
				return fmt.Errorf("slot table %q: want %s from sm", w.CollTable(), op)
			}
		}
		for i := 0; i < rounds; i++ {
			if w.Rank() == i%4 {
				time.Sleep(30 * time.Millisecond) // the others go to sleep meanwhile
			}
			if err := w.Barrier(); err != nil {
				return err
			}
			sum := []int64{0}
			if err := mpi.Allreduce(w, []int64{int64(i)}, sum, mpi.Sum); err != nil {
				return err
			}
			if sum[0] != int64(4*i) {
				return fmt.Errorf("round %d: sum %d, want %d", i, sum[0], 4*i)
			}
		}
		slept[w.Rank()] = r.WaitStats().Sleeps
		return nil
	}, mpitest.WithMCA("mpi_yield_when_idle", "yes"), mpitest.WithMCA("mpi_wait_yield_us", "100"),
		mpitest.WithMCA("mpi_wait_sleep_max_ms", "10000"))
	if total := slept[0] + slept[1] + slept[2] + slept[3]; total < rounds {
		t.Errorf("waits slept %d times in %d rounds in which three ranks waited 30 ms: they did not sleep", total, rounds)
	}
	// Without a ring each sleep would last 10 s.
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the job took %v: sleeping ranks were not woken", d)
	}
}

// A slot over the limit is an error at Init that names the parameter, the
// value and what is accepted.
func TestMaxBytesOutOfRange(t *testing.T) {
	err := mpitest.RunErr(2, func(r *mpitest.Rank) error { return nil }, mpitest.WithMCA("coll_sm_max_bytes", "2m"))
	if err == nil || !strings.Contains(err.Error(), "coll_sm_max_bytes = 2097152") || !strings.Contains(err.Error(), "accepted: 0 to 1048576") {
		t.Fatalf("Init with coll_sm_max_bytes=2m: %v; want an error naming the value and the accepted range", err)
	}
}

// TestPairBcastRouting: on two ranks with a core each, a blocking bcast
// under coll_sm_pair_bcast_min_bytes goes to the module below (point-to-
// point messages, whose ring lets the root run ahead of the reader), one
// at or above it through sm's slot (no message); a nonblocking one stays
// sm's (its own path, not a coroutine), and with the parameter 0 sm takes
// the small blocking one too. Blocking allgathers and alltoalls go below,
// their nonblocking forms stay sm's. Counted as the messages rank 0 sends.
func TestPairBcastRouting(t *testing.T) {
	const calls = 20
	for _, c := range []struct {
		name, min string
		bytes     int
		form      string
		wantSent  bool
	}{
		{"8 bytes below", "", 8, "blocking", true},
		{"under the default", "", 1023, "blocking", true},
		{"at the default", "", 1024, "blocking", false},
		{"nonblocking", "", 8, "nonblocking", false},
		{"parameter 0", "0", 8, "blocking", false},
		// Blocking allgathers and alltoalls on two ranks go below too; their
		// nonblocking forms stay sm's.
		{"allgather", "", 1024, "allgather", true},
		{"alltoall", "", 1024, "alltoall", true},
		{"iallgather", "", 1024, "iallgather", false},
		{"ialltoall", "", 1024, "ialltoall", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			// A core each, as mpirun says where it can (on a machine of
			// one core mpitest would say otherwise, and every small bcast
			// would go below).
			opts := []mpitest.Option{mpitest.WithMCA("btl", "self,shm"), mpitest.WithMCA("mpi_yield_when_idle", "no"),
				mpitest.WithEnv(rte.OversubscribedEnv + "=0")}
			if c.min != "" {
				opts = append(opts, mpitest.WithMCA("coll_sm_pair_bcast_min_bytes", c.min))
			}
			mpitest.Run(t, 2, func(r *mpitest.Rank) error {
				w := r.CommWorld()
				if r.Runtime().Job().Oversubscribed {
					return fmt.Errorf("the job counts as oversubscribed, where every small bcast goes below")
				}
				// The first sm call sets the segment up (with messages).
				if err := mpi.Allreduce(w, []int64{1}, make([]int64, 1), mpi.Sum); err != nil {
					return err
				}
				buf := make([]byte, c.bytes)
				sent := func() uint64 {
					s := r.Instance.PMLStats()
					return s.LLPHits + s.Eager + s.Pipelined + s.Rendezvous + s.RGet
				}
				before := sent()
				all := make([]byte, 2*c.bytes)
				for i := 0; i < calls; i++ {
					var err error
					var req *mpi.Request
					switch c.form {
					case "blocking":
						err = mpi.Bcast(w, buf, 0)
					case "nonblocking":
						req, err = mpi.Ibcast(w, buf, 0)
					case "allgather":
						err = mpi.Allgather(w, buf, all)
					case "alltoall":
						err = mpi.Alltoall(w, all, make([]byte, len(all)))
					case "iallgather":
						req, err = mpi.Iallgather(w, buf, all)
					case "ialltoall":
						req, err = mpi.Ialltoall(w, all, make([]byte, len(all)))
					}
					if err == nil && req != nil {
						_, err = req.Wait()
					}
					if err != nil {
						return err
					}
				}
				if w.Rank() != 0 {
					return nil
				}
				if got := sent() - before; (got >= calls) != c.wantSent {
					return fmt.Errorf("rank 0 sent %d messages for %d calls (%s) of %d bytes: want through point-to-point %v",
						got, calls, c.form, c.bytes, c.wantSent)
				}
				return nil
			}, opts...)
		})
	}
}
