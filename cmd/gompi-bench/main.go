// Command gompi-bench measures point-to-point latency and bandwidth between
// ranks 0 and 1 of a job, the way the OSU micro-benchmarks (and
// mpi-anchors/pingpong.c) do, so that its numbers compare with Open MPI's.
//
//	mpirun -np 2 gompi-bench latency [--sizes 0:4m] [--iterations N] [--warmup N] [--probe]
//	mpirun -np 2 gompi-bench bw      [--sizes …] [--window 64] …
//	mpirun -np 2 gompi-bench bibw    [--sizes …] [--window 64] …
//	mpirun -np N gompi-bench idle    [--in recv|wait|finalize|barrier] [--loops N]
//	mpirun -np N gompi-bench commcreate [--iterations N]   (or gompi-bench commcreate --goroutines N)
//	mpirun -np N gompi-bench barrier|bcast|reduce|allreduce|allgather|alltoall|gather|scatter [--sizes 8,1k,64k,1m] [--scale F] [--probe]
//	mpirun -np N gompi-bench nbc [--sizes 8,1k,64k,1m] [--scale F] [--probe]
//
// GOMPI_BENCH_CPUPROFILE=prefix writes a CPU profile of each rank to
// prefix.<rank>.
//
// latency: blocking Send/Recv ping-pong; the one-way time is half the round
// trip, in µs. bw: per iteration rank 0 starts a window of non-blocking
// sends, rank 1 as many receives, both wait for all, then rank 1 sends a
// 4-byte ack; MB/s = 10^6 bytes/s. bibw: both ranks send a window to each
// other at once. As in osu_bw, every message of a window uses one send and
// one receive buffer, and the send buffer never changes.
//
// Rank 0 prints, OSU style, comment lines starting with '#', then one row
// per size: "<size> <value>". With --probe, a comment line after each row
// gives the placement probe (mpi-anchors/placement.h: a cache-line
// ping-pong between ranks 0 and 1, in ns one-way) just before and after the
// measurement: "# probe size=<n> pre=<ns> post=<ns>". The last comment line
// gives rank 0's point-to-point counters (LLP hits, eager, rendezvous…).
//
// The collectives (barrier, bcast, reduce, allreduce, allgather, alltoall,
// gather, scatter) are measured as mpi-anchors/allreduce.c measures (and
// bench/coll.c, its form for the other operations): every rank times its
// calls back to back; the row is "<size> <avg> <min> <max>", the mean over
// ranks of each rank's µs per call and the extremes. After each row (and
// its probe line) a comment line gives what btl tcp sent during the timed
// calls, per call and summed over ranks, as counted by
// Instance.TransportStats: "# tcp size=<n> msgs=<frames> bytes=<bytes>"
// (bytes are the PML's headers and payloads, without tcp's framing; 0 when
// no rank uses tcp).
//
// nbc: Ibarrier and Iallreduce, their overlap with computation as
// mpi-anchors/nbc.c (and OSU) define it, in nbc.c's lines; then the
// persistent and blocking forms and the collective's own CPU time (nbc.go
// says how each is measured).
//
// idle: rank 0 times a fixed CPU loop while the other ranks wait for it;
// the row is "<ranks waiting> <ms>". Compare with -np 1 (the loop alone):
// that ratio is what waiting ranks cost a working one on an oversubscribed
// node.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gompi/gompi/mca"
	"github.com/gompi/gompi/mpi"
	"github.com/gompi/gompi/mpitest"
)

const usage = `Usage: mpirun -np 2 gompi-bench latency|bw|bibw|pingpong [options]
       mpirun -np N gompi-bench barrier|bcast|reduce|allreduce|allgather|alltoall|gather|scatter [options]
       mpirun -np N gompi-bench nbc [--sizes 8,1k,64k,1m] [--scale F] [--probe]
       mpirun -np N gompi-bench idle [--in recv|wait|finalize|barrier] [--loops N]
       mpirun -np N gompi-bench commcreate [--iterations N]
       gompi-bench commcreate --goroutines N [--iterations N]

Point-to-point benchmarks between ranks 0 and 1, OSU style (rank 0 prints).

  latency        blocking ping-pong; one-way time = round trip / 2 (µs)
  bw             windowed non-blocking sends from rank 0 to rank 1, then an ack (MB/s = 10^6 B/s)
  bibw           both ranks send a window to each other at once (MB/s, both directions)
  pingpong       latency, then bw, in one job, as mpi-anchors/pingpong.c runs them: its
                 bandwidth is measured seconds into the job, not in its first milliseconds
  barrier, bcast, reduce, allreduce, allgather, alltoall, gather, scatter
                 collectives over every rank, as mpi-anchors/allreduce.c: the mean over
                 ranks of each rank's time per call (µs), with the min and max; reduce
                 and allreduce sum float64 (sizes in multiples of 8); rooted ones at
                 rank 0 (--root); then a comment line per size with the messages and bytes
                 btl tcp sent per call, summed over ranks ("# tcp size=N msgs=M bytes=B");
                 with --nonblocking, each call is the nonblocking form and its Wait
  nbc            Ibarrier and Iallreduce (float64 sums) as mpi-anchors/nbc.c, in its lines:
                 pure (Ixxx + Wait), cpu (a compute loop as long), ovrl (Ixxx, compute,
                 Wait), ovrl_t (the compute in 64 slices with a Test between), overlap =
                 100*(1-(ovrl-cpu)/pure); then, per size, Start + Wait of the persistent
                 form, the blocking form, and W, the collective's own CPU time per call
  commcreate     time per call of Dup, Split, Create and CreateGroup (then Free), and messages
                 sent per rank; CreateGroup with mpi_comm_create_group_algorithm, or with
                 --goroutines N each algorithm in turn over N goroutine ranks of one process
  idle           rank 0 times a fixed CPU loop while the others wait for it (ms); with -np 1,
                 the loop alone

Options:
  --sizes LIST|MIN:MAX   message sizes in bytes: a comma-separated list, or every power of
                         two from MIN to MAX (0 first when MIN is 0); k and m suffixes are
                         binary; at most 4m (default 0:4m; for the collectives and nbc
                         8,1k,64k,1m, allreduce.c's; per rank for allgather, alltoall,
                         gather and scatter)
  --iterations N         timed iterations per size, at least 1 (default: by size, as
                         mpi-anchors/pingpong.c: 20000 up to 4 KiB ... 100 at 4 MiB for
                         latency, 400 ... 4 for bw and bibw; for the collectives
                         allreduce.c's: 100000 at 8 B ... 500 at 1 MiB; for nbc nbc.c's:
                         20000 at 8 B ... 200 at 1 MiB)
  --scale F              collectives and nbc: multiply the default iterations by F, above 0
                         (allreduce.c's and nbc.c's scale argument; default 1; nbc runs at
                         least 10)
  --warmup N             untimed iterations first, 0 or more (default: a tenth, at least 2;
                         for nbc a tenth plus one, as nbc.c)
  --window N             messages in flight per iteration of bw and bibw, 1 to 1024 (default 64)
  --comm world|incl      the communicator: the world (default), or one made by Comm.Create
                         from an Incl of every world rank but the last, whose group
                         mpi_use_sparse_groups=1 stores as a range when there are 4 or more
                         ranks (ranks other than 0 and 1 wait idle in either case)
  --in WAIT              idle: where the other ranks wait: recv (blocking Recv, the default),
                         wait (Irecv then Wait), finalize (in Finalize's barrier), barrier
                         (in Barrier, which rank 0 joins after its loop)
  --loops N              idle: steps of rank 0's loop, at least 1 (default 210000000, about
                         190 ms on the 2-core machines gompi is measured on)
  --nonblocking          collectives: time Ibarrier, Ibcast, ... each followed by its Wait
  --root R               bcast, reduce, gather, scatter: the root, a rank of the job
                         (default 0)
  --goroutines N         commcreate and the collectives: run N goroutine ranks in this process
                         (1 to 1024) instead of the processes mpirun started
  --probe                measure the placement of ranks 0 and 1 (cache-line ping-pong, ns
                         one-way) before and after each size; needs them on one node; nbc
                         probes only when there are exactly 2 ranks (pre=/post= are -1
                         otherwise, as nbc.c's)
  --phases               bw, bibw, pingpong: after each size's line, where each of ranks 0
                         and 1 spends its time per message, medians over the iterations
                         ("# phases size=N window=W rank0 post_ns=P waitall_ns=A ack_ns=K
                         rank1 ..."): posting the window (Isend or Irecv), its Waitall, and
                         the rest of the iteration (the ack, and waiting for it); the rank
                         that never waits bounds the rate. bench/bw_phases.c prints the
                         same line for another MPI. Two clock reads a window more.
  --settle D             before the first measurement, every rank runs Allreduces for D
                         (a Go duration, 0 to 10s; default 100ms; processes only, not
                         idle): the Go runtime's monitor thread wakes every 20 µs after a
                         process's last system call and backs off to 10 ms over ~20 ms,
                         in each rank and in mpirun after the job's start, and on a rank
                         bound to one core each wake takes the core; within that time
                         a loop of small calls reads up to 40 % slow. 0 measures from
                         the start
  -h, --help             print this help
`

// maxSize is the largest message: 4 MiB, as the OSU benchmarks and
// pingpong.c.
const maxSize = 4 << 20

type benchKind int

const (
	latency benchKind = iota
	bw
	bibw
	pingpongKind
	idleKind
	commCreateKind
	nbcKind
	// The collectives; isColl relies on them coming last.
	barrierKind
	bcastKind
	reduceKind
	allreduceKind
	allgatherKind
	alltoallKind
	gatherKind
	scatterKind
)

var kindNames = [...]string{"latency", "bw", "bibw", "pingpong", "idle", "commcreate", "nbc", "barrier", "bcast", "reduce", "allreduce", "allgather", "alltoall", "gather", "scatter"}

func (k benchKind) String() string {
	return kindNames[k]
}

// kindOf names a benchmark.
func kindOf(name string) (benchKind, bool) {
	for k, n := range kindNames {
		if n == name {
			return benchKind(k), true
		}
	}
	return 0, false
}

// options are the parsed command line.
type options struct {
	kind       benchKind
	sizes      []int
	iterations int // 0: by size
	warmup     int // -1: a tenth of the iterations, at least 2
	window     int
	probe      bool
	scale      float64 // collectives: times the default iterations
	comm       string  // "world" or "incl"
	in         string  // idle: where the others wait
	loops      int     // idle: steps of rank 0's loop
	goroutines int     // commcreate: goroutine ranks of this process instead of mpirun's
	nonblock   bool    // collectives: the nonblocking forms, each with its Wait
	root       int     // rooted collectives' root
	phases     bool    // bw, bibw: where each rank's time per message goes
	settle     time.Duration
}

// defaultSettle is --settle's default: several times what the Go runtime's
// monitor thread takes to back off to its longest sleep (~20 ms).
const defaultSettle = 100 * time.Millisecond

// maxSettle bounds --settle.
const maxSettle = 10 * time.Second

// usageError is a bad command line: the message says what was wrong and
// what is accepted.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, a ...any) error { return &usageError{fmt.Sprintf(format, a...)} }

// parseArgs parses "KIND [options]"; options take one or two dashes and
// their value as the next word or after '='.
func parseArgs(args []string) (*options, bool, error) {
	o := &options{warmup: -1, window: 64, scale: 1, comm: "world", in: "recv", loops: defaultLoops, settle: defaultSettle}
	var kindSet bool
	sizes := ""
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			k, ok := kindOf(a)
			if !ok || kindSet {
				if kindSet {
					return nil, false, usagef("unexpected argument %q: give one benchmark, then options", a)
				}
				return nil, false, usagef("unknown benchmark %q: accepted: %s", a, strings.Join(kindNames[:], ", "))
			}
			o.kind, kindSet = k, true
			continue
		}
		name, inline, hasInline := strings.Cut(strings.TrimLeft(a, "-"), "=")
		value := func() (string, error) {
			if hasInline {
				return inline, nil
			}
			if i+1 >= len(args) {
				return "", usagef("option %s needs a value", a)
			}
			i++
			return args[i], nil
		}
		switch name {
		case "h", "help":
			return nil, true, nil
		case "probe", "nonblocking", "phases":
			b := true
			if hasInline {
				var err error
				if b, err = strconv.ParseBool(inline); err != nil {
					return nil, false, usagef("--%s=%q: accepted: true or false", name, inline)
				}
			}
			switch name {
			case "probe":
				o.probe = b
			case "nonblocking":
				o.nonblock = b
			default:
				o.phases = b
			}
		case "root":
			v, err := value()
			if err != nil {
				return nil, false, err
			}
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 || n > 1<<20 {
				return nil, false, usagef("--root %q: accepted: a rank, a whole number from 0 to 1048576", v)
			}
			o.root = n
		case "in":
			v, err := value()
			if err != nil {
				return nil, false, err
			}
			if !slices.Contains(idleWaits, v) {
				return nil, false, usagef("--in %q: accepted: %s", v, strings.Join(idleWaits, ", "))
			}
			o.in = v
		case "loops":
			v, err := value()
			if err != nil {
				return nil, false, err
			}
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > 1e12 {
				return nil, false, usagef("--loops %q: accepted: a whole number from 1 to 1000000000000", v)
			}
			o.loops = n
		case "settle":
			v, err := value()
			if err != nil {
				return nil, false, err
			}
			d, err := time.ParseDuration(v)
			if v == "0" {
				d, err = 0, nil
			}
			if err != nil || d < 0 || d > maxSettle {
				return nil, false, usagef("--settle %q: accepted: a duration from 0 to 10s, such as 100ms", v)
			}
			o.settle = d
		case "scale":
			v, err := value()
			if err != nil {
				return nil, false, err
			}
			f, err := strconv.ParseFloat(v, 64)
			if err != nil || !(f > 0 && f <= 1e6) {
				return nil, false, usagef("--scale %q: accepted: a number above 0, at most 1000000", v)
			}
			o.scale = f
		case "goroutines":
			v, err := value()
			if err != nil {
				return nil, false, err
			}
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > 1024 {
				return nil, false, usagef("--goroutines %q: accepted: a whole number from 1 to 1024", v)
			}
			o.goroutines = n
		case "comm":
			v, err := value()
			if err != nil {
				return nil, false, err
			}
			if v != "world" && v != "incl" {
				return nil, false, usagef("--comm %q: accepted: world, incl", v)
			}
			o.comm = v
		case "sizes", "iterations", "warmup", "window":
			v, err := value()
			if err != nil {
				return nil, false, err
			}
			switch name {
			case "sizes":
				sizes = v
			case "iterations":
				n, err := strconv.Atoi(v)
				if err != nil || n < 1 || n > 1e9 {
					return nil, false, usagef("--iterations %q: accepted: a whole number from 1 to 1000000000", v)
				}
				o.iterations = n
			case "warmup":
				n, err := strconv.Atoi(v)
				if err != nil || n < 0 || n > 1e9 {
					return nil, false, usagef("--warmup %q: accepted: a whole number from 0 to 1000000000", v)
				}
				o.warmup = n
			case "window":
				n, err := strconv.Atoi(v)
				if err != nil || n < 1 || n > 1024 {
					return nil, false, usagef("--window %q: accepted: a whole number from 1 to 1024", v)
				}
				o.window = n
			}
		default:
			return nil, false, usagef("unknown option %q: accepted: --sizes, --iterations, --warmup, --scale, --window, --comm, --probe, --in, --loops, --goroutines, --nonblocking, --root, --phases, --settle, --help", a)
		}
	}
	if !kindSet {
		return nil, false, usagef("no benchmark: accepted: %s", strings.Join(kindNames[:], ", "))
	}
	if o.nonblock && !o.kind.isColl() {
		return nil, false, usagef("--nonblocking: accepted with barrier, bcast, reduce, allreduce, allgather, alltoall, gather and scatter, not %s", o.kind)
	}
	if o.phases && o.kind != bw && o.kind != bibw && o.kind != pingpongKind {
		return nil, false, usagef("--phases: accepted with bw, bibw and pingpong, not %s", o.kind)
	}
	if o.root != 0 && !slices.Contains([]benchKind{bcastKind, reduceKind, gatherKind, scatterKind}, o.kind) {
		return nil, false, usagef("--root: accepted with bcast, reduce, gather and scatter, not %s", o.kind)
	}
	if o.kind == nbcKind && o.goroutines > 0 {
		return nil, false, usagef("nbc measures each rank's process (its CPU time): run it under mpirun, without --goroutines")
	}
	if sizes == "" {
		sizes = "0:4m"
		if o.kind.isColl() || o.kind == nbcKind {
			sizes = defaultCollSizes
		}
	}
	var err error
	if o.sizes, err = parseSizes(sizes); err != nil {
		return nil, false, err
	}
	return o, false, nil
}

// parseSizes reads "a,b,c" or "min:max".
func parseSizes(s string) ([]int, error) {
	bad := func(why string) error {
		return usagef("--sizes %q: %s; accepted: a comma-separated list of sizes, or MIN:MAX for every power of two from MIN to MAX, "+
			"each a number of bytes with an optional k or m suffix (binary), from 0 to 4m", s, why)
	}
	if lo, hi, ok := strings.Cut(s, ":"); ok {
		a, err1 := parseSize(lo)
		b, err2 := parseSize(hi)
		if err1 != nil || err2 != nil {
			return nil, bad("not two sizes")
		}
		if a > b {
			return nil, bad("MIN above MAX")
		}
		var out []int
		if a == 0 {
			out = append(out, 0)
			a = 1
		}
		p := 1
		for p < a {
			p <<= 1
		}
		for ; p <= b; p <<= 1 {
			out = append(out, p)
		}
		if len(out) == 0 {
			return nil, bad("no power of two in the range")
		}
		return out, nil
	}
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := parseSize(strings.TrimSpace(f))
		if err != nil {
			return nil, bad(err.Error())
		}
		out = append(out, n)
	}
	return out, nil
}

func parseSize(s string) (int, error) {
	mult := 1
	switch {
	case strings.HasSuffix(s, "k") || strings.HasSuffix(s, "K"):
		mult, s = 1<<10, s[:len(s)-1]
	case strings.HasSuffix(s, "m") || strings.HasSuffix(s, "M"):
		mult, s = 1<<20, s[:len(s)-1]
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n > maxSize/mult {
		return 0, fmt.Errorf("%q is not a size from 0 to 4m", s)
	}
	return n * mult, nil
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is the command; it returns the exit status: 0, 1 for a failure, 2
// for a bad command line.
func run(args []string, stdout, stderr io.Writer) int {
	o, help, err := parseArgs(args)
	if help {
		fmt.Fprint(stdout, usage)
		return 0
	}
	if err != nil {
		// Every rank parses the same line; one message is enough. The
		// others wait a moment, so that mpirun does not end the job (and
		// rank 0 with it) before rank 0 has said why.
		if r := os.Getenv("OMPI_COMM_WORLD_RANK"); r == "" || r == "0" {
			fmt.Fprintf(stderr, "gompi-bench: %v\n(gompi-bench --help lists the options)\n", err)
		} else {
			time.Sleep(500 * time.Millisecond)
		}
		return 2
	}
	if o.kind.isColl() && o.goroutines > 0 {
		// The collective over goroutine ranks of this process.
		if o.probe {
			fmt.Fprintf(stderr, "gompi-bench: --probe needs processes, not --goroutines\n")
			return 2
		}
		var mu sync.Mutex
		lw := &lockedWriter{mu: &mu, w: stdout}
		if err := mpitest.RunErr(o.goroutines, func(r *mpitest.Rank) error { return collBench(r.Instance, o, lw) }); err != nil {
			fmt.Fprintf(stderr, "gompi-bench: %s: %v\n", o.kind, err)
			return 1
		}
		return 0
	}
	if o.kind == commCreateKind {
		// It starts its own instances: goroutine ranks, or this process's.
		if err := commCreate(o, stdout); err != nil {
			fmt.Fprintf(stderr, "gompi-bench: commcreate: %v\n", err)
			return 1
		}
		return 0
	}
	inst, err := mpi.Init()
	if err != nil {
		fmt.Fprintf(stderr, "gompi-bench: %v\n", err)
		return 1
	}
	// GOMPI_BENCH_CPUPROFILE=prefix writes a CPU profile per rank,
	// prefix.<rank>, for finding where the time goes.
	if prefix := os.Getenv("GOMPI_BENCH_CPUPROFILE"); prefix != "" {
		f, err := os.Create(fmt.Sprintf("%s.%d", prefix, inst.Rank()))
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintf(stderr, "gompi-bench: CPU profile: %v\n", err)
			inst.Finalize()
			return 1
		}
		defer f.Close()
		defer pprof.StopCPUProfile()
	}
	if o.kind != idleKind {
		err = settle(inst.CommWorld(), o.settle)
	}
	switch {
	case err != nil:
	case o.kind == idleKind:
		err = idle(inst, o, stdout)
	case o.kind == nbcKind:
		err = nbcBench(inst, o, stdout)
	case o.kind.isColl():
		err = collBench(inst, o, stdout)
	case o.kind == pingpongKind:
		// mpi-anchors/pingpong.c's shape: latency, then bw, in one job.
		for _, k := range []benchKind{latency, bw} {
			if o.kind = k; err == nil {
				err = bench(inst, o, stdout)
			}
		}
	default:
		err = bench(inst, o, stdout)
	}
	if ferr := inst.Finalize(); err == nil {
		err = ferr
	}
	if err != nil {
		fmt.Fprintf(stderr, "gompi-bench: rank %d: %v\n", inst.Rank(), err)
		var ue *usageError
		if errors.As(err, &ue) {
			return 2
		}
		return 1
	}
	return 0
}

// header prints the comment lines that describe the run.
func header(w io.Writer, inst *mpi.Instance, o *options, sameNode bool) {
	iters := "by size"
	if o.iterations > 0 {
		iters = strconv.Itoa(o.iterations)
	}
	warm := "a tenth (at least 2)"
	if o.warmup >= 0 {
		warm = strconv.Itoa(o.warmup)
	}
	where := "the same node"
	if !sameNode {
		where = "different nodes"
	}
	switch o.kind {
	case latency:
		fmt.Fprintf(w, "# gompi-bench latency: blocking Send/Recv ping-pong between ranks 0 and 1, one-way time = round trip / 2\n")
	case bw:
		fmt.Fprintf(w, "# gompi-bench bw: rank 0 sends a window of %d Isend, rank 1 receives with %d Irecv, then a 4-byte ack; MB/s = 10^6 B/s\n", o.window, o.window)
	case bibw:
		fmt.Fprintf(w, "# gompi-bench bibw: ranks 0 and 1 both send a window of %d Isend to each other; MB/s = 10^6 B/s in both directions together\n", o.window)
	}
	fmt.Fprintf(w, "# gompi %s, %d ranks, ranks 0 and 1 on %s, iterations: %s, warm-up: %s\n", mca.GompiVersion, inst.Size(), where, iters, warm)
	if o.kind == latency {
		fmt.Fprintf(w, "# %-8s %14s\n", "Size", "Latency (us)")
	} else {
		fmt.Fprintf(w, "# %-8s %14s\n", "Size", "Bandwidth (MB/s)")
	}
}

// counts returns the timed and warm-up iterations for a size.
func (o *options) counts(size int) (iters, warm int) {
	iters = o.iterations
	if iters == 0 {
		iters = defaultIterations(o.kind, size)
	}
	warm = o.warmup
	if warm < 0 {
		warm = max(iters/10, 2)
	}
	return iters, warm
}

// defaultIterations are mpi-anchors/pingpong.c's.
func defaultIterations(k benchKind, size int) int {
	lat := k == latency
	switch {
	case size <= 4096:
		return pick(lat, 20000, 400)
	case size <= 32768:
		return pick(lat, 5000, 100)
	case size <= 262144:
		return pick(lat, 1000, 30)
	case size <= 1048576:
		return pick(lat, 300, 10)
	}
	return pick(lat, 100, 4)
}

func pick(lat bool, a, b int) int {
	if lat {
		return a
	}
	return b
}

// timer measures an interval in µs.
type timer struct{ t0 time.Time }

func (t *timer) start()      { t.t0 = time.Now() }
func (t *timer) us() float64 { return float64(time.Since(t.t0).Nanoseconds()) / 1e3 }

// settle runs Allreduces on c for d (rank 0's clock decides, and every rank
// stops at the same call): the runtime's monitor threads back off
// meanwhile (--settle), and the first figure measures what the later ones
// do.
func settle(c *mpi.Comm, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	start := time.Now()
	done := []int32{0}
	for done[0] == 0 {
		if c.Rank() == 0 && time.Since(start) >= d {
			done[0] = 1
		}
		if err := mpi.Allreduce(c, done, done, mpi.Max); err != nil {
			return fmt.Errorf("settling: %w", err)
		}
	}
	return nil
}
