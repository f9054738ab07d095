package main

import (
	"bytes"
	"fmt"
	"io"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gompi/gompi/mca"
	"github.com/gompi/gompi/mpi"
)

// The nbc benchmark measures the nonblocking collectives as
// mpi-anchors/nbc.c does (OSU's osu_ibarrier and osu_iallreduce define the
// figures), and prints the same lines, so that one parser reads Open
// MPI's, MPICH's and gompi's. Per operation and size every rank measures,
// as a mean per call over the iterations:
//
//	pure     Ixxx + Wait, back to back
//	cpu      the compute loop, calibrated to last the mean of pure over ranks
//	ovrl     Ixxx, the compute loop (no MPI call), Wait
//	ovrl_t   Ixxx, the compute loop in 64 slices with a Test between, Wait
//	overlap  100 * (1 - (ovrl - cpu) / pure), clamped to 0..100; so overlap_t
//
// and rank 0 prints the means over ranks:
//
//	# nbc ranks=<n> lib=<library>
//	ibarrier size=0 iters=.. pure_us=.. cpu_us=.. ovrl_us=.. overlap=.. ovrl_t_us=.. overlap_t=.. pre=.. post=..
//	iallreduce size=<bytes> …   (the same fields, per size)
//
// Then, per operation and size, lines nbc.c does not have (measured right
// after the operation's nbc.c line, printed after all of those):
//
//	ibarrier_persistent|iallreduce_persistent size=.. iters=.. start_wait_us=.. pre=.. post=..
//	barrier|allreduce size=.. iters=.. blocking_us=.. pre=.. post=..
//	ibarrier_w|iallreduce_w size=.. iters=.. w_us=.. done=.. compute_us=.. pure_cpu_us=.. test_us=.. pre=.. post=..
//
// The persistent line is BarrierInit or AllreduceInit, then Start + Wait
// back to back; the blocking line is Barrier or Allreduce back to back;
// both time as pure does.
//
// W (w_us) is the collective's own CPU time per call: what it costs the
// rank's process beyond waiting. A wait that polls is busy for the whole
// latency, so the CPU time around pure (pure_cpu_us, printed beside) says
// only whether more than one thread burns a core meanwhile. W is measured
// instead on runs that need not wait: Ixxx, a compute loop four times as
// long as pure (compute_us) in 64 slices with a Test between until the
// request is complete, Wait. The process's CPU time (every thread: the
// caller, the progress goroutine, the runtime) over those runs, minus that
// of the same compute loop alone, minus the Tests' own cost (test_us, a
// Test that finds nothing to do, measured on a receive that never
// matches), divided by the runs, is W. done is the fraction of runs whose
// request was complete before the Wait: below 1, some runs waited in Wait
// and W includes that polling.
//
// pre and post are the placement probe (mpi-anchors/placement.h) before
// and after each line's measurement: -1 unless --probe and exactly two
// ranks, as nbc.c's.

// nbcBaseIterations are nbc.c's: 20000 calls of 8 B (and of Ibarrier),
// 10000 of 1 KiB, 2000 of 64 KiB, 200 of 1 MiB.
func nbcBaseIterations(size int) int {
	switch {
	case size <= 8:
		return 20000
	case size <= 1024:
		return 10000
	case size <= 65536:
		return 2000
	}
	return 200
}

// nbcSlices is nbc.c's number of slices of ovrl_t's compute loop.
const nbcSlices = 64

// wComputeFactor is how many times pure the W runs compute: long enough
// that a collective progressed in the background is complete before the
// Wait.
const wComputeFactor = 4

// wTestCalls are the Tests that measure one Test's own cost.
const wTestCalls = 4096

// tagNBCIdle is the tag of the receive that never matches, on CommSelf.
const tagNBCIdle = 202

// sink keeps the compute loop's result, so that the compiler cannot drop
// the loop.
var sink float64

// spinFloat is nbc.c's spin: n steps of dependent floating-point work, no
// memory traffic.
func spinFloat(n int) {
	x := 1.0
	for i := 0; i < n; i++ {
		x = x*1.0000001 + 1e-9
	}
	sink = x
}

// calibrateSpin returns ns per step of spinFloat, measured now: the host
// moves the vCPUs, and their speed with them, so nbc.c measures again
// before each figure.
func calibrateSpin() float64 {
	const n = 1 << 21
	t0 := time.Now()
	spinFloat(n)
	return float64(time.Since(t0).Nanoseconds()) / n
}

// contextSwitches counts the process's context switches so far, voluntary
// (a thread slept) and not (it was preempted); -1 when unknown.
func contextSwitches() int64 {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return -1
	}
	return ru.Nvcsw + ru.Nivcsw
}

// processCPU is the CPU time of every thread of the process so far.
func processCPU() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_PROCESS_CPUTIME_ID, &ts); err != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}

// nbcCase is one line of nbc.c: Ibarrier, or Iallreduce of count float64.
type nbcCase struct {
	barrier     bool
	count       int
	iters, warm int
}

func (k nbcCase) name() string {
	if k.barrier {
		return "ibarrier"
	}
	return "iallreduce"
}

func (k nbcCase) size() int { return k.count * 8 }

// nbcResult is what the first pass keeps for the extra lines.
type nbcResult struct {
	pureAll float64 // mean over ranks of pure, µs
	pureCPU float64 // this rank's process CPU per call during pure, µs
	pureCSW float64 // this rank's context switches per call during pure
}

// nbcRun is the benchmark on one rank.
type nbcRun struct {
	c, self    *mpi.Comm
	me, n      int
	p          *prober
	w          io.Writer
	send, recv []float64
	nsPerSpin  float64
}

// nbcBench runs the nbc benchmark on every rank; rank 0 prints.
func nbcBench(inst *mpi.Instance, o *options, w io.Writer) error {
	c := inst.CommWorld()
	r := &nbcRun{c: c, self: inst.CommSelf(), me: c.Rank(), n: c.Size(), w: w}
	var cases []nbcCase
	for i, size := range append([]int{0}, o.sizes...) {
		if size%8 != 0 {
			return usagef("nbc reduces float64: size %d is not a multiple of 8", size)
		}
		iters := o.iterations
		if iters == 0 {
			iters = max(int(float64(nbcBaseIterations(size))*o.scale), 10)
		}
		warm := o.warmup
		if warm < 0 {
			warm = iters/10 + 1
		}
		cases = append(cases, nbcCase{barrier: i == 0, count: size / 8, iters: iters, warm: warm})
	}
	// The probe, as nbc.c's, between exactly two ranks.
	if o.probe && r.n == 2 {
		nodeOf := inst.Runtime().Job().NodeOf
		if nodeOf[0] != nodeOf[1] {
			return usagef("--probe needs ranks 0 and 1 on one node")
		}
		var err error
		if r.p, err = newProber(c, inst.JobID()); err != nil {
			return err
		}
		defer r.p.close()
	}
	maxCount := 0
	for _, k := range cases {
		maxCount = max(maxCount, k.count)
	}
	r.send, r.recv = make([]float64, maxCount), make([]float64, maxCount)
	for i := range r.send {
		r.send[i] = float64(r.me + 1)
	}
	r.nsPerSpin = calibrateSpin()
	if r.me == 0 {
		// mpi_async_progress decides whether the collectives advance while
		// the ranks compute; auto follows the node's oversubscription.
		lib := fmt.Sprintf("gompi %s mpi_async_progress=%s(%v) oversubscribed=%v", mca.GompiVersion,
			inst.Base().Lookup(mpi.AsyncProgressParam), map[bool]string{true: "on", false: "off"}[inst.AsyncProgress()],
			inst.Runtime().Job().Oversubscribed)
		if len(lib) > 80 {
			lib = lib[:80]
		}
		fmt.Fprintf(w, "# nbc ranks=%d lib=%s\n", r.n, lib)
	}
	// Each case's own lines are measured right after its nbc.c line, so
	// that the forms of one size are compared in the same minute (the
	// host moves the vCPUs, and their speed with them), and printed after
	// every nbc.c line, which stay together as nbc.c prints them.
	var extra bytes.Buffer
	for _, k := range cases {
		res, err := r.measure(k)
		if err != nil {
			return fmt.Errorf("nbc %s, %d bytes: %w", k.name(), k.size(), err)
		}
		out := r.w
		r.w = &extra
		err = r.extras(k, res)
		r.w = out
		if err != nil {
			return fmt.Errorf("nbc %s, %d bytes: %w", k.name(), k.size(), err)
		}
	}
	if _, err := w.Write(extra.Bytes()); err != nil {
		return err
	}
	return c.Barrier()
}

// start starts the case's collective.
func (r *nbcRun) start(k nbcCase) (*mpi.Request, error) {
	if k.barrier {
		return r.c.Ibarrier()
	}
	return mpi.Iallreduce(r.c, r.send[:k.count], r.recv[:k.count], mpi.Sum)
}

func (r *nbcRun) startWait(k nbcCase) error {
	req, err := r.start(k)
	if err != nil {
		return err
	}
	_, err = req.Wait()
	return err
}

// check looks at the sum, so that a wrong one is an error rather than a
// fast number.
func (r *nbcRun) check(k nbcCase) error {
	if k.barrier || k.count == 0 {
		return nil
	}
	want := float64(r.n*(r.n+1)) / 2
	if got := r.recv[k.count-1]; r.recv[0] != want || got != want {
		return fmt.Errorf("the sum is %g, want %g", got, want)
	}
	return nil
}

// compute is nbc.c's: the loop for us µs, in slices with a Test of req
// between (none with one slice). A completed request is not tested again
// (MPI_Test sets it to MPI_REQUEST_NULL). It returns how many Tests it
// made and whether req was complete at the end.
func (r *nbcRun) compute(us float64, req *mpi.Request, slices int) (tests int, done bool, err error) {
	n := int(us * 1000 / r.nsPerSpin)
	if slices <= 1 {
		spinFloat(n)
		return 0, false, nil
	}
	for s := 0; s < slices; s++ {
		spinFloat(n / slices)
		if req != nil && !done {
			tests++
			if _, done, err = req.Test(); err != nil {
				return tests, done, err
			}
		}
	}
	return tests, done, nil
}

// mean returns, on rank 0, the mean over ranks of v.
func (r *nbcRun) mean(v float64) (float64, error) {
	var sum [1]float64
	if err := mpi.Reduce(r.c, []float64{v}, sum[:], mpi.Sum, 0); err != nil {
		return 0, err
	}
	return sum[0] / float64(r.n), nil
}

// timed runs f iters times after a barrier and returns µs per call.
func (r *nbcRun) timed(iters int, f func() error) (float64, error) {
	if err := r.c.Barrier(); err != nil {
		return 0, err
	}
	t0 := time.Now()
	for i := 0; i < iters; i++ {
		if err := f(); err != nil {
			return 0, err
		}
	}
	return float64(time.Since(t0).Nanoseconds()) / 1e3 / float64(iters), nil
}

// overlapPct is OSU's overlap, clamped to 0..100.
func overlapPct(ovrl, cpu, pure float64) float64 {
	return min(max(100*(1-(ovrl-cpu)/pure), 0), 100)
}

// measure is nbc.c's measure: one line.
func (r *nbcRun) measure(k nbcCase) (nbcResult, error) {
	var res nbcResult
	pre := r.p.ns(r.c)
	for i := 0; i < k.warm; i++ {
		if err := r.startWait(k); err != nil {
			return res, err
		}
	}
	if err := r.check(k); err != nil {
		return res, err
	}
	cpu0, csw0 := processCPU(), contextSwitches()
	pure, err := r.timed(k.iters, func() error { return r.startWait(k) })
	if err != nil {
		return res, err
	}
	res.pureCPU = float64((processCPU() - cpu0).Nanoseconds()) / 1e3 / float64(k.iters)
	res.pureCSW = float64(contextSwitches()-csw0) / float64(k.iters)
	// Every rank computes for the same time: the mean pure latency.
	var sum [1]float64
	if err := mpi.Allreduce(r.c, []float64{pure}, sum[:], mpi.Sum); err != nil {
		return res, err
	}
	res.pureAll = sum[0] / float64(r.n)

	r.nsPerSpin = calibrateSpin()
	cpu, err := r.timed(k.iters, func() error {
		_, _, err := r.compute(res.pureAll, nil, 1)
		return err
	})
	if err != nil {
		return res, err
	}
	overlapped := func(slices int) func() error {
		return func() error {
			req, err := r.start(k)
			if err != nil {
				return err
			}
			if slices > 1 {
				_, _, err = r.compute(res.pureAll, req, slices)
			} else {
				_, _, err = r.compute(res.pureAll, nil, 1)
			}
			if err != nil {
				return err
			}
			_, err = req.Wait()
			return err
		}
	}
	ovrl, err := r.timed(k.iters, overlapped(1))
	if err != nil {
		return res, err
	}
	ovrlT, err := r.timed(k.iters, overlapped(nbcSlices))
	if err != nil {
		return res, err
	}
	post := r.p.ns(r.c)

	var m [4]float64
	for i, v := range []float64{pure, cpu, ovrl, ovrlT} {
		if m[i], err = r.mean(v); err != nil {
			return res, err
		}
	}
	if r.me == 0 {
		mp, mc, mo, mt := m[0], m[1], m[2], m[3]
		fmt.Fprintf(r.w, "%s size=%d iters=%d pure_us=%.3f cpu_us=%.3f ovrl_us=%.3f overlap=%.1f ovrl_t_us=%.3f overlap_t=%.1f pre=%.1f post=%.1f\n",
			k.name(), k.size(), k.iters, mp, mc, mo, overlapPct(mo, mc, mp), mt, overlapPct(mt, mc, mp), pre, post)
	}
	return res, nil
}

// extras prints the lines nbc.c does not have: persistent, blocking, W.
func (r *nbcRun) extras(k nbcCase, res nbcResult) error {
	// Persistent: planned once, then Start + Wait back to back.
	pre := r.p.ns(r.c)
	var preq *mpi.Request
	var err error
	if k.barrier {
		preq, err = r.c.BarrierInit()
	} else {
		preq, err = mpi.AllreduceInit(r.c, r.send[:k.count], r.recv[:k.count], mpi.Sum)
	}
	if err != nil {
		return err
	}
	startWait := func() error {
		if err := preq.Start(); err != nil {
			return err
		}
		_, err := preq.Wait()
		return err
	}
	for i := 0; i < k.warm; i++ {
		if err := startWait(); err != nil {
			return err
		}
	}
	if err := r.check(k); err != nil {
		return err
	}
	persistent, err := r.timed(k.iters, startWait)
	if err != nil {
		return err
	}
	if err := preq.Free(); err != nil {
		return err
	}
	if err := r.line(fmt.Sprintf("%s_persistent size=%d iters=%d", k.name(), k.size(), k.iters), pre, "start_wait_us", persistent); err != nil {
		return err
	}

	// Blocking, as pure.
	pre = r.p.ns(r.c)
	blocking := func() error {
		if k.barrier {
			return r.c.Barrier()
		}
		return mpi.Allreduce(r.c, r.send[:k.count], r.recv[:k.count], mpi.Sum)
	}
	for i := 0; i < k.warm; i++ {
		if err := blocking(); err != nil {
			return err
		}
	}
	if err := r.check(k); err != nil {
		return err
	}
	us, err := r.timed(k.iters, blocking)
	if err != nil {
		return err
	}
	if err := r.line(fmt.Sprintf("%s size=%d iters=%d", k.name()[1:], k.size(), k.iters), pre, "blocking_us", us); err != nil {
		return err
	}

	// W: see the comment at the top of this file.
	pre = r.p.ns(r.c)
	computeUS := wComputeFactor * res.pureAll
	testUS, err := r.testCost()
	if err != nil {
		return err
	}
	r.nsPerSpin = calibrateSpin()
	if err := r.c.Barrier(); err != nil {
		return err
	}
	cpu0 := processCPU()
	for i := 0; i < k.iters; i++ {
		r.compute(computeUS, nil, nbcSlices) // the same loop without a request: no Test
	}
	alone := processCPU() - cpu0
	if err := r.c.Barrier(); err != nil {
		return err
	}
	tests, complete := 0, 0
	cpu0 = processCPU()
	for i := 0; i < k.iters; i++ {
		req, err := r.start(k)
		if err != nil {
			return err
		}
		n, done, err := r.compute(computeUS, req, nbcSlices)
		if err != nil {
			return err
		}
		tests += n
		if done {
			complete++
		}
		if _, err := req.Wait(); err != nil {
			return err
		}
	}
	with := processCPU() - cpu0
	wUS := (float64((with-alone).Nanoseconds())/1e3 - float64(tests)*testUS) / float64(k.iters)
	post := r.p.ns(r.c)
	var m [6]float64
	for i, v := range []float64{wUS, float64(complete) / float64(k.iters), computeUS, res.pureCPU, res.pureCSW, testUS} {
		if m[i], err = r.mean(v); err != nil {
			return err
		}
	}
	if r.me == 0 {
		fmt.Fprintf(r.w, "%s_w size=%d iters=%d w_us=%.3f done=%.2f compute_us=%.3f pure_cpu_us=%.3f pure_csw=%.2f test_us=%.3f pre=%.1f post=%.1f\n",
			k.name(), k.size(), k.iters, m[0], m[1], m[2], m[3], m[4], m[5], pre, post)
	}
	return nil
}

// line prints, on rank 0, head, then the mean over ranks of v as key, and
// the probe before (pre) and now.
func (r *nbcRun) line(head string, pre float64, key string, v float64) error {
	post := r.p.ns(r.c)
	mv, err := r.mean(v)
	if err != nil {
		return err
	}
	if r.me == 0 {
		fmt.Fprintf(r.w, "%s %s=%.3f pre=%.1f post=%.1f\n", head, key, mv, pre, post)
	}
	return nil
}

// testCost returns the CPU time, in µs, of a Test that finds nothing to
// do: of a receive on CommSelf that never matches, cancelled after.
func (r *nbcRun) testCost() (float64, error) {
	var b [1]byte
	req, err := r.self.Irecv(b[:], 0, tagNBCIdle)
	if err != nil {
		return 0, err
	}
	cpu0 := processCPU()
	for i := 0; i < wTestCalls; i++ {
		if _, done, err := req.Test(); err != nil || done {
			return 0, fmt.Errorf("a receive that nobody sends to completed: %v", err)
		}
	}
	us := float64((processCPU() - cpu0).Nanoseconds()) / 1e3 / wTestCalls
	if !req.Cancel() {
		return 0, fmt.Errorf("the idle receive could not be cancelled")
	}
	_, err = req.Wait()
	return us, err
}
