package mpi_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"github.com/gompi/gompi/mpi"
	"github.com/gompi/gompi/mpitest"
)

// TestIallreduceReusesItsRun: a loop of Iallreduce on the same buffers
// starts the run the last Wait gave back (no planning), with the send
// buffer's new contents each time; another buffer, another type or
// another op is planned afresh and still right.
func TestIallreduceReusesItsRun(t *testing.T) {
	mpitest.Run(t, 3, func(r *mpitest.Rank) error {
		w := r.CommWorld()
		if err := w.Barrier(); err != nil { // sets sm's segment up
			return err
		}
		n := w.Size()
		me := float64(w.Rank() + 1)
		send, recv := []float64{0, 1}, make([]float64, 2)
		for k := 0; k < 6; k++ {
			planned := w.NBPlans()
			send[0] = me * float64(k)
			req, err := mpi.Iallreduce(w, send, recv, mpi.Sum)
			if err != nil {
				return err
			}
			if k >= 1 && w.NBPlans() != planned {
				return fmt.Errorf("call %d: planned afresh, want the run the last Wait kept", k)
			}
			if _, err := req.Wait(); err != nil {
				return err
			}
			if want := float64(k * n * (n + 1) / 2); recv[0] != want || recv[1] != float64(n) {
				return fmt.Errorf("call %d: %v, want [%v %d]", k, recv, want, n)
			}
		}
		// Another receive buffer: planned afresh.
		planned := w.NBPlans()
		other := make([]float64, 2)
		req, err := mpi.Iallreduce(w, send, other, mpi.Max)
		if err != nil {
			return err
		}
		if w.NBPlans() != planned+1 {
			return fmt.Errorf("another buffer and op: not planned afresh")
		}
		if _, err := req.Wait(); err != nil {
			return err
		}
		if other[0] != 5*float64(n) || other[1] != 1 {
			return fmt.Errorf("max: %v, want [%d 1]", other, 5*n)
		}
		// The same buffers, another op: planned afresh (the reducer
		// differs).
		req, err = mpi.Iallreduce(w, send, other, mpi.Min)
		if err != nil {
			return err
		}
		if _, err := req.Wait(); err != nil {
			return err
		}
		if other[0] != 5 || other[1] != 1 {
			return fmt.Errorf("min: %v, want [5 1]", other)
		}
		// The same memory as another type of the same size.
		isend, irecv := []int64{int64(me), 2}, make([]int64, 2)
		req, err = mpi.Iallreduce(w, isend, irecv, mpi.Sum)
		if err != nil {
			return err
		}
		if _, err := req.Wait(); err != nil {
			return err
		}
		if irecv[0] != int64(n*(n+1)/2) || irecv[1] != int64(2*n) {
			return fmt.Errorf("int64 sum: %v", irecv)
		}
		return nil
	})
}

// TestReuseNeverOutlivesAPlanChoice: a run that sm passed to a coroutine
// (its segment was not set up yet) must not be started again once the
// segment is there: a rank that plans afresh would take sm's path, and
// the two ranks would never meet. Rank 0 repeats its first call on the
// same buffers; rank 1 calls on new ones.
func TestReuseNeverOutlivesAPlanChoice(t *testing.T) {
	mpitest.Run(t, 2, func(r *mpitest.Rank) error {
		w := r.CommWorld()
		send, recv := []int64{int64(w.Rank() + 1)}, make([]int64, 1)
		req, err := mpi.Iallreduce(w, send, recv, mpi.Sum)
		if err != nil {
			return err
		}
		if _, err := req.Wait(); err != nil {
			return err
		}
		if w.KeptIallreduce() {
			return fmt.Errorf("a coroutine's run was kept for reuse")
		}
		if err := w.Barrier(); err != nil { // sets sm's segment up
			return err
		}
		if w.Rank() == 1 {
			recv = make([]int64, 1)
		}
		if req, err = mpi.Iallreduce(w, send, recv, mpi.Sum); err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := req.WaitContext(ctx); err != nil {
			return fmt.Errorf("the second Iallreduce: %w", err)
		}
		if recv[0] != 3 {
			return fmt.Errorf("sum %d, want 3", recv[0])
		}
		if !w.KeptIallreduce() {
			return fmt.Errorf("sm's run was not kept: is sm this communicator's?")
		}
		return nil
	})
}

// TestNonblockingOnlyRunsSm: a program that makes only nonblocking calls
// gets sm's own path after its first call (which sets sm's segment up in
// its run): from the second call on the run is sm's, kept and started
// again, as after a blocking call.
func TestNonblockingOnlyRunsSm(t *testing.T) {
	mpitest.Run(t, 3, func(r *mpitest.Rank) error {
		w := r.CommWorld()
		n := w.Size()
		send, recv := []int64{int64(w.Rank() + 1)}, make([]int64, 1)
		for k := 0; k < 5; k++ {
			planned := w.NBPlans()
			req, err := mpi.Iallreduce(w, send, recv, mpi.Sum)
			if err != nil {
				return err
			}
			if k >= 2 && w.NBPlans() != planned {
				return fmt.Errorf("call %d planned afresh: sm's run was not kept", k)
			}
			if _, err := req.Wait(); err != nil {
				return err
			}
			if recv[0] != int64(n*(n+1)/2) {
				return fmt.Errorf("call %d: sum %d", k, recv[0])
			}
		}
		return nil
	})
}

// TestRepeatMatchesTheWholeCall: a call that repeats the kept run's
// buffers but differs in what else makes its arguments (the element type
// over the same memory, the lengths, the root of a reduce or a bcast) is
// not started as a repeat: each result is its own call's.
func TestRepeatMatchesTheWholeCall(t *testing.T) {
	mpitest.Run(t, 3, func(r *mpitest.Rank) error {
		w := r.CommWorld()
		if err := w.Barrier(); err != nil { // sets sm's segment up
			return err
		}
		n, me := w.Size(), w.Rank()
		wait := func(req *mpi.Request, err error) error {
			if err != nil {
				return err
			}
			_, err = req.Wait()
			return err
		}
		send, recv := []float64{float64(me + 1), 1}, make([]float64, 2)
		for k := 0; k < 3; k++ {
			if err := wait(mpi.Iallreduce(w, send, recv, mpi.Sum)); err != nil {
				return err
			}
		}
		// The same memory as int64: the same pointers, lengths and op.
		isend := unsafe.Slice((*int64)(unsafe.Pointer(&send[0])), 2)
		irecv := unsafe.Slice((*int64)(unsafe.Pointer(&recv[0])), 2)
		// Values whose float64 sum is not their int64 sum.
		isend[0], isend[1] = int64(me+1)<<52, 2
		if err := wait(mpi.Iallreduce(w, isend, irecv, mpi.Sum)); err != nil {
			return err
		}
		if irecv[0] != int64(n*(n+1)/2)<<52 || irecv[1] != int64(2*n) {
			return fmt.Errorf("int64 sum over the float64 call's memory: %v", irecv)
		}
		// Shorter slices of the same memory.
		send[0], send[1], recv[1] = float64(me+1), 1, -1
		for k := 0; k < 2; k++ {
			if err := wait(mpi.Iallreduce(w, send, recv, mpi.Sum)); err != nil {
				return err
			}
		}
		recv[1] = -1
		if err := wait(mpi.Iallreduce(w, send[:1], recv[:1], mpi.Sum)); err != nil {
			return err
		}
		if recv[0] != float64(n*(n+1)/2) || recv[1] != -1 {
			return fmt.Errorf("one element of two: %v, want [%d -1]", recv, n*(n+1)/2)
		}
		// Ireduce to rank 0 twice, then to rank 1 on the same buffers.
		for _, root := range []int{0, 0, 1} {
			recv[0] = -1
			if err := wait(mpi.Ireduce(w, send[:1], recv[:1], mpi.Sum, root)); err != nil {
				return err
			}
			want := -1.0
			if me == root {
				want = float64(n * (n + 1) / 2)
			}
			if recv[0] != want {
				return fmt.Errorf("Ireduce to %d: rank %d has %v, want %v", root, me, recv[0], want)
			}
		}
		// Ibcast from rank 0 twice, then from rank 2, on the same buffer.
		for _, root := range []int{0, 0, 2} {
			buf := recv[:1]
			buf[0] = float64(10*root + me)
			if err := wait(mpi.Ibcast(w, buf, root)); err != nil {
				return err
			}
			if buf[0] != float64(11*root) {
				return fmt.Errorf("Ibcast from %d: rank %d has %v, want %v", root, me, buf[0], 11*root)
			}
		}
		return nil
	}, mpitest.WithMCA("coll_sm_rooted_min_bytes", "0")) // sm's own reduce and bcast even where ranks outnumber cores
}

// A persistent collective freed after its communicator leaves no goroutine
// behind: the communicator's pool of parked coroutines has ended by then,
// and the plan's coroutine, given back, is stopped rather than parked for
// the process's life.
func TestPersistentFreedAfterItsCommunicator(t *testing.T) {
	const cycles = 40
	var grew int
	mpitest.Run(t, 2, func(r *mpitest.Rank) error {
		w := r.CommWorld()
		cycle := func() error {
			dup, err := w.Dup()
			if err != nil {
				return err
			}
			sum := []int64{0}
			req, err := mpi.AllreduceInit(dup, []int64{1}, sum, mpi.Sum)
			if err != nil {
				return err
			}
			if err := req.Start(); err != nil {
				return err
			}
			if _, err := req.Wait(); err != nil {
				return err
			}
			if sum[0] != 2 {
				return fmt.Errorf("sum %d, want 2", sum[0])
			}
			if err := dup.Free(); err != nil {
				return err
			}
			return req.Free()
		}
		if err := cycle(); err != nil {
			return err
		}
		if err := w.Barrier(); err != nil {
			return err
		}
		before := runtime.NumGoroutine()
		for i := 0; i < cycles; i++ {
			if err := cycle(); err != nil {
				return err
			}
		}
		if err := w.Barrier(); err != nil {
			return err
		}
		if w.Rank() == 0 {
			time.Sleep(50 * time.Millisecond) // stopped coroutines' goroutines return
			grew = runtime.NumGoroutine() - before
		}
		return w.Barrier()
	}, mpitest.WithMCA("coll", "^sm")) // tuned's algorithm as a coroutine
	// Two ranks' cycles: a coroutine left parked per plan would be 2 × cycles.
	if grew >= cycles/2 {
		t.Errorf("%d more goroutines after %d persistent collectives freed after their communicators; want none left", grew, cycles)
	}
}
