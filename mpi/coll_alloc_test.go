package mpi_test

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/gompi/gompi/mpi"
	"github.com/gompi/gompi/mpitest"
)

// smallCollectives are the collectives a program calls in a loop on small
// data, one float64 a rank, each followed by a Barrier: a rooted call's
// senders could otherwise run ahead without bound, and the messages waiting
// at its root would be memory the program asked for.
var smallCollectives = []struct {
	name string
	call func(c *mpi.Comm, b *collBufs) error
}{
	{"barrier", func(c *mpi.Comm, _ *collBufs) error { return c.Barrier() }},
	{"bcast", func(c *mpi.Comm, b *collBufs) error { return mpi.Bcast(c, b.one, 0) }},
	{"reduce", func(c *mpi.Comm, b *collBufs) error { return mpi.Reduce(c, b.one, b.res, mpi.Sum, 0) }},
	{"allreduce", func(c *mpi.Comm, b *collBufs) error { return mpi.Allreduce(c, b.one, b.res, mpi.Sum) }},
	{"gather", func(c *mpi.Comm, b *collBufs) error { return mpi.Gather(c, b.one, b.all, 0) }},
	{"scatter", func(c *mpi.Comm, b *collBufs) error { return mpi.Scatter(c, b.all, b.one, 0) }},
	{"allgather", func(c *mpi.Comm, b *collBufs) error { return mpi.Allgather(c, b.one, b.all) }},
	{"alltoall", func(c *mpi.Comm, b *collBufs) error { return mpi.Alltoall(c, b.all, b.all2) }},
	// Blocks above coll_tuned_alltoall_small_bytes: pairwise exchange.
	{"alltoall pairwise", func(c *mpi.Comm, b *collBufs) error { return mpi.Alltoall(c, b.wide, b.wide2) }},
	{"alltoall pairwise in place", func(c *mpi.Comm, b *collBufs) error { return mpi.Alltoall(c, b.wide, b.wide) }},
	{"gatherv", func(c *mpi.Comm, b *collBufs) error { return mpi.Gatherv(c, b.one, b.all, b.ones, b.iota, 0) }},
	{"scatterv", func(c *mpi.Comm, b *collBufs) error { return mpi.Scatterv(c, b.all, b.ones, b.iota, b.one, 0) }},
	{"allgatherv", func(c *mpi.Comm, b *collBufs) error { return mpi.Allgatherv(c, b.one, b.all, b.ones, b.iota) }},
	{"alltoallv", func(c *mpi.Comm, b *collBufs) error {
		return mpi.Alltoallv(c, b.all, b.ones, b.iota, b.all2, b.ones, b.iota)
	}},
	{"scan", func(c *mpi.Comm, b *collBufs) error { return mpi.Scan(c, b.one, b.res, mpi.Sum) }},
	{"exscan", func(c *mpi.Comm, b *collBufs) error { return mpi.Exscan(c, b.one, b.res, mpi.Sum) }},
	{"reducescatter", func(c *mpi.Comm, b *collBufs) error { return mpi.ReduceScatter(c, b.all, b.res, b.ones, mpi.Sum) }},
	// Nonblocking ones, waited for at once: a run is kept for the same
	// call made again, and its algorithm's coroutine with it.
	{"ibarrier", func(c *mpi.Comm, _ *collBufs) error { return wait(c.Ibarrier()) }},
	{"ibcast", func(c *mpi.Comm, b *collBufs) error { return wait(mpi.Ibcast(c, b.one, 0)) }},
	{"iallreduce", func(c *mpi.Comm, b *collBufs) error { return wait(mpi.Iallreduce(c, b.one, b.res, mpi.Sum)) }},
	{"igather", func(c *mpi.Comm, b *collBufs) error { return wait(mpi.Igather(c, b.one, b.all, 0)) }},
	{"ireduce", func(c *mpi.Comm, b *collBufs) error { return wait(mpi.Ireduce(c, b.one, b.res, mpi.Sum, 0)) }},
	{"iscan", func(c *mpi.Comm, b *collBufs) error { return wait(mpi.Iscan(c, b.one, b.res, mpi.Sum)) }},
	{"iscatter", func(c *mpi.Comm, b *collBufs) error { return wait(mpi.Iscatter(c, b.all, b.one, 0)) }},
	{"iallgather", func(c *mpi.Comm, b *collBufs) error { return wait(mpi.Iallgather(c, b.one, b.all)) }},
	{"ialltoall", func(c *mpi.Comm, b *collBufs) error { return wait(mpi.Ialltoall(c, b.all, b.all2)) }},
	// Completed with Test alone, then freed: Free gives the run back as
	// Wait does.
	{"iallreduce tested", func(c *mpi.Comm, b *collBufs) error { return testFree(mpi.Iallreduce(c, b.one, b.res, mpi.Sum)) }},
	{"ibcast tested", func(c *mpi.Comm, b *collBufs) error { return testFree(mpi.Ibcast(c, b.one, 0)) }},
}

// testFree polls the request a nonblocking call returned with Test until
// it is complete, then frees it. It yields between Tests, as a program
// computes between them: the goroutine ranks outnumber the cores.
func testFree(r *mpi.Request, err error) error {
	if err != nil {
		return err
	}
	for ; ; runtime.Gosched() {
		_, done, err := r.Test()
		if err != nil {
			return err
		}
		if done {
			return r.Free()
		}
	}
}

// wait waits for the request a nonblocking call returned.
func wait(r *mpi.Request, err error) error {
	if err != nil {
		return err
	}
	_, err = r.Wait()
	return err
}

// collAllocRuns is how many calls AllocsPerRun averages over: fewer than
// the point-to-point tests' (72 cases here), still enough that one
// allocation a call shows.
const collAllocRuns = 50

// collBufs are a rank's buffers for smallCollectives: one element, its
// result, one element per rank twice, wideBlock elements per rank twice,
// and the v forms' counts (one each) and displacements (0, 1, 2, …).
type collBufs struct {
	one, res, all, all2, wide, wide2 []float64
	ones, iota                       []int
}

// wideBlock is an alltoall block of 512 bytes, above tuned's
// coll_tuned_alltoall_small_bytes (256).
const wideBlock = 64

// TestSmallCollectivesAllocs: a small collective allocates nothing once
// running, on one node (sm, and tuned over point-to-point without it) and
// across two nodes (han over sm and tcp). An allocation per call is garbage
// at the rate of the calls: the collector's work grows with the program's
// heap, not with the collective's few bytes. Counted on rank 0 with
// testing.AllocsPerRun, which counts every rank's goroutine. Waits poll
// without sleeping (mpi_yield_when_idle no, which still lets the other
// goroutine ranks run): a wait that sleeps makes a timer, which a machine
// busy with other tests would otherwise count here.
func TestSmallCollectivesAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes free lists allocate")
	}
	layouts := []struct {
		name string
		opts []mpitest.Option
		coll string // the world's slot table must name it
	}{
		{"one node", []mpitest.Option{mpitest.WithMCA("btl", "self,shm")}, "sm"},
		{"one node without sm", []mpitest.Option{mpitest.WithMCA("btl", "self,shm"), mpitest.WithMCA("coll", "^sm")}, "tuned"},
		{"two nodes", []mpitest.Option{mpitest.WithNodes([]int{0, 0, 1, 1}), mpitest.WithMCA("btl", "self,shm,tcp")}, "han"},
	}
	for _, l := range layouts {
		for _, op := range smallCollectives {
			t.Run(l.name+"/"+op.name, func(t *testing.T) {
				var got float64
				mpitest.Run(t, 4, func(r *mpitest.Rank) error {
					c := r.CommWorld()
					if tab := c.CollTable(); !strings.Contains(tab, "="+l.coll) {
						return fmt.Errorf("the world's slot table %q: want %s in it", tab, l.coll)
					}
					b := &collBufs{one: []float64{1}, res: []float64{0}, all: make([]float64, c.Size()), all2: make([]float64, c.Size()),
						wide: make([]float64, wideBlock*c.Size()), wide2: make([]float64, wideBlock*c.Size()),
						ones: make([]int, c.Size()), iota: make([]int, c.Size())}
					for r := range b.ones {
						b.ones[r], b.iota[r] = 1, r
					}
					call := func() error {
						if err := op.call(c, b); err != nil {
							return err
						}
						return c.Barrier()
					}
					// Warm up: free lists, scratch, the shared segment.
					for i := 0; i < 20; i++ {
						if err := call(); err != nil {
							return err
						}
					}
					if c.Rank() != 0 {
						for i := 0; i < collAllocRuns+1; i++ {
							if err := call(); err != nil {
								return err
							}
						}
						return nil
					}
					var err error
					got = testing.AllocsPerRun(collAllocRuns, func() {
						if err == nil {
							err = call()
						}
					})
					return err
				}, append(l.opts, mpitest.WithMCA("mpi_yield_when_idle", "no"))...)
				if got != 0 {
					t.Errorf("%v allocations per call of 8 bytes a rank, on all ranks; want none in steady state", got)
				}
			})
		}
	}
}
