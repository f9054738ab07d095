package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gompi/gompi/internal/testutil"
)

// The tests run gompi-bench under the real mpirun: TestMain builds both.
var bin struct{ mpirun, bench string }

func TestMain(m *testing.M) {
	testutil.Main(m, map[*string]string{&bin.mpirun: "../mpirun", &bin.bench: "."})
}

// row is one line of the table.
type row struct {
	size  int
	value float64
	line  string
}

// parseTable reads OSU-style output: '#' comment lines, then "<size>
// <value>" rows (the collectives add min and max columns); anything else
// is an error.
func parseTable(t *testing.T, out string) (rows []row, comments []string) {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			comments = append(comments, line)
			continue
		}
		f := strings.Fields(line)
		if len(f) != 2 && len(f) != 4 {
			t.Fatalf("line %q is neither a comment nor a row of two or four columns:\n%s", line, out)
		}
		size, err1 := strconv.Atoi(f[0])
		value, err2 := strconv.ParseFloat(f[1], 64)
		if err1 != nil || err2 != nil {
			t.Fatalf("row %q: %v %v", line, err1, err2)
		}
		rows = append(rows, row{size, value, line})
	}
	return rows, comments
}

func mpirun(t *testing.T, args ...string) string {
	t.Helper()
	return testutil.RunMpirun(t, bin.mpirun, 120*time.Second, args...)
}

// Each benchmark prints the OSU-style table for the sizes asked, with a
// positive value per size; the latency header names its unit.
func TestBenchmarks(t *testing.T) {
	for _, c := range []struct {
		kind, unit string
		extra      []string
	}{
		{"latency", "Latency (us)", []string{"--probe"}},
		{"bw", "Bandwidth (MB/s)", nil},
		{"bibw", "Bandwidth (MB/s)", []string{"--window", "8"}},
	} {
		t.Run(c.kind, func(t *testing.T) {
			args := append([]string{"-np", "2", bin.bench, c.kind, "--sizes", "0,8,1k,64k", "--iterations", "20", "--warmup", "2"}, c.extra...)
			out := mpirun(t, args...)
			rows, comments := parseTable(t, out)
			want := []int{0, 8, 1024, 65536}
			if len(rows) != len(want) {
				t.Fatalf("%d rows, want %d:\n%s", len(rows), len(want), out)
			}
			for i, r := range rows {
				if r.size != want[i] {
					t.Errorf("row %d: size %d, want %d", i, r.size, want[i])
				}
				// Empty messages move no bytes: 0 MB/s.
				if r.value < 0 || (r.size > 0 && r.value <= 0) {
					t.Errorf("row %d: value %v", i, r.value)
				}
			}
			joined := strings.Join(comments, "\n")
			if !strings.Contains(joined, c.unit) || !strings.Contains(joined, "# pml counters rank 0:") {
				t.Errorf("comments do not name the unit %q and the counters:\n%s", c.unit, joined)
			}
			if c.kind == "latency" && strings.Count(joined, "# probe size=") != len(want) {
				t.Errorf("want a probe line per size:\n%s", joined)
			}
			t.Log("\n" + out)
		})
	}
}

// pingpong prints latency's table, then bw's, from one job (as
// mpi-anchors/pingpong.c), each under its own header.
func TestPingpongIsLatencyThenBandwidth(t *testing.T) {
	out := mpirun(t, "-np", "2", bin.bench, "pingpong", "--sizes", "8,1k", "--iterations", "20", "--warmup", "2")
	lat, bw, ok := strings.Cut(out, "# gompi-bench bw:")
	if !ok || !strings.Contains(lat, "# gompi-bench latency:") {
		t.Fatalf("want the latency block, then the bw block:\n%s", out)
	}
	for _, b := range []struct{ name, block, unit string }{{"latency", lat, "Latency (us)"}, {"bw", "# gompi-bench bw:" + bw, "Bandwidth (MB/s)"}} {
		rows, comments := parseTable(t, b.block)
		if len(rows) != 2 || rows[0].size != 8 || rows[1].size != 1024 || rows[0].value <= 0 || rows[1].value <= 0 {
			t.Errorf("%s rows %+v, want sizes 8 and 1024 with positive values:\n%s", b.name, rows, out)
		}
		if !strings.Contains(strings.Join(comments, "\n"), b.unit) {
			t.Errorf("%s block does not name %q:\n%s", b.name, b.unit, out)
		}
	}
}

// --phases prints, after each size's row, where ranks 0 and 1 spend their
// time per message; the three parts of an iteration add up to no more than
// the iteration (a few slow iterations raise the mean, which the row is
// made from, above the sum of the medians, never the other way by much).
func TestPhases(t *testing.T) {
	out := mpirun(t, "-np", "2", bin.bench, "bw", "--sizes", "8,1k", "--iterations", "200", "--warmup", "2", "--window", "16", "--phases")
	sc := bufio.NewScanner(strings.NewReader(out))
	var lastSize int
	var lastMBps float64
	seen := 0
	for sc.Scan() {
		line := sc.Text()
		f := strings.Fields(line)
		if !strings.HasPrefix(line, "#") && len(f) == 2 {
			lastSize, _ = strconv.Atoi(f[0])
			lastMBps, _ = strconv.ParseFloat(f[1], 64)
			continue
		}
		if !strings.HasPrefix(line, "# phases ") {
			continue
		}
		seen++
		var size, win int
		var v [6]float64
		if n, err := fmt.Sscanf(line, "# phases size=%d window=%d rank0 post_ns=%g waitall_ns=%g ack_ns=%g rank1 post_ns=%g waitall_ns=%g ack_ns=%g",
			&size, &win, &v[0], &v[1], &v[2], &v[3], &v[4], &v[5]); err != nil || n != 8 {
			t.Fatalf("phases line %q: %v", line, err)
		}
		if size != lastSize || win != 16 {
			t.Errorf("phases line %q after the row of %d bytes, window 16", line, lastSize)
		}
		if v[0] <= 0 || v[3] <= 0 || slices.ContainsFunc(v[:], func(x float64) bool { return x < 0 }) {
			t.Errorf("phases line %q: want positive posting times and no negative part", line)
		}
		period := float64(size) / lastMBps * 1e3 // ns a message
		for r, sum := range []float64{v[0] + v[1] + v[2], v[3] + v[4] + v[5]} {
			if sum > 3*period {
				t.Errorf("rank %d's parts add up to %.1f ns a message, the row's rate gives %.1f: %q", r, sum, period, line)
			}
		}
	}
	if seen != 2 {
		t.Errorf("%d phases lines, want one per size:\n%s", seen, out)
	}
}

// The collectives print a row per size (one for barrier) with the mean,
// min and max over ranks, the mean between the two, and a tcp line after
// it; reductions check their sum.
func TestCollectiveBenchmarks(t *testing.T) {
	for _, kind := range []string{"barrier", "bcast", "reduce", "allreduce", "allgather", "alltoall", "gather", "scatter"} {
		t.Run(kind, func(t *testing.T) {
			out := mpirun(t, "-np", "3", bin.bench, kind, "--sizes", "8,1k,64k", "--iterations", "20", "--warmup", "2")
			rows, comments := parseTable(t, out)
			want := []int{8, 1024, 65536}
			if kind == "barrier" {
				want = []int{0}
			}
			if len(rows) != len(want) {
				t.Fatalf("%d rows, want %d:\n%s", len(rows), len(want), out)
			}
			for i, r := range rows {
				f := strings.Fields(r.line)
				lo, _ := strconv.ParseFloat(f[2], 64)
				hi, _ := strconv.ParseFloat(f[3], 64)
				if r.size != want[i] || r.value <= 0 || lo > r.value || r.value > hi {
					t.Errorf("row %q: want size %d and 0 < min <= avg <= max", r.line, want[i])
				}
			}
			if tcp := tcpLines(t, comments); len(tcp) != len(want) {
				t.Errorf("%d tcp lines, want one per size:\n%s", len(tcp), out)
			}
			if joined := strings.Join(comments, "\n"); !strings.Contains(joined, "Avg (us)") || !strings.Contains(joined, "coll table of MPI_COMM_WORLD: barrier=") {
				t.Errorf("comments do not name the unit and the slot table:\n%s", joined)
			}
		})
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"allreduce", "--sizes", "12"}, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), "not a multiple of 8") {
		t.Errorf("allreduce of 12 bytes: status %d, %s", code, stderr.String())
	}
}

// tcpLines reads the "# tcp size=N msgs=M bytes=B" comment lines: messages
// and bytes per call by size.
func tcpLines(t *testing.T, comments []string) map[int][2]float64 {
	t.Helper()
	out := make(map[int][2]float64)
	for _, c := range comments {
		if !strings.HasPrefix(c, "# tcp size=") {
			continue
		}
		var size int
		var msgs, bytes float64
		if _, err := fmt.Sscanf(c, "# tcp size=%d msgs=%g bytes=%g", &size, &msgs, &bytes); err != nil {
			t.Fatalf("tcp line %q: %v", c, err)
		}
		out[size] = [2]float64{msgs, bytes}
	}
	return out
}

// The tcp lines count what crossed tcp: with every rank on tcp, a Gather
// to rank 0 of 3 ranks moves at least the other two ranks' blocks, each in
// at least one message per call, and with a header per message; on shared
// memory alone, nothing.
func TestCollectiveTCPCounts(t *testing.T) {
	sizes := []int{8, 1024, 65536}
	out := mpirun(t, "-np", "3", "--mca", "btl", "self,tcp", "--mca", "llp", "^tofu", bin.bench, "gather", "--sizes", "8,1k,64k", "--iterations", "20", "--warmup", "2")
	_, comments := parseTable(t, out)
	got := tcpLines(t, comments)
	for _, size := range sizes {
		c, ok := got[size]
		if !ok || c[0] < 2 || c[1] <= float64(2*size) || c[1] > float64(2*size)+64*c[0] {
			t.Errorf("size %d: %v messages and bytes per call, want at least 2 messages carrying the %d bytes with at most 64 bytes of header each:\n%s",
				size, c, 2*size, out)
		}
	}
	out = mpirun(t, "-np", "3", "--mca", "btl", "self,shm", bin.bench, "gather", "--sizes", "8", "--iterations", "20", "--warmup", "2")
	if !strings.Contains(out, "# tcp size=8 msgs=0.00 bytes=0.0 (btl tcp is not in use)") {
		t.Errorf("with btl self,shm, want a tcp line that says tcp is not in use:\n%s", out)
	}
	t.Log("\n" + out)
}

// --nonblocking times the nonblocking forms with their Wait, --root moves a
// rooted collective's root; the header says both, the reduction still
// checks its sum at the root, and a root outside the job is a usage error.
func TestNonblockingAndRoot(t *testing.T) {
	out := mpirun(t, "-np", "3", bin.bench, "reduce", "--nonblocking", "--root", "2", "--sizes", "8,1k", "--iterations", "20", "--warmup", "2")
	rows, comments := parseTable(t, out)
	if len(rows) != 2 || rows[0].size != 8 || rows[1].size != 1024 {
		t.Fatalf("want rows for 8 and 1024 bytes:\n%s", out)
	}
	if !strings.Contains(strings.Join(comments, "\n"), "the nonblocking form, then its Wait: Reduce of SIZE bytes of float64, Sum, to rank 2") {
		t.Errorf("the header does not say nonblocking and rank 2:\n%s", out)
	}
	// The calls are the nonblocking forms: with no component to fill
	// them, the benchmark fails naming the operation.
	cmd := exec.Command(bin.mpirun, "--timeout", "30", "--mca", "coll", "^nbc,sm", "-np", "2", bin.bench, "reduce", "--nonblocking", "--sizes", "8")
	cmd.Env = testutil.CleanEnv()
	if b, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(b), "no module fills ireduce") {
		t.Errorf("without nbc and sm: %v, want the benchmark to fail for want of ireduce\n%s", err, b)
	}
	cmd = exec.Command(bin.mpirun, "--timeout", "30", "-np", "2", bin.bench, "gather", "--root", "2", "--sizes", "8")
	cmd.Env = testutil.CleanEnv()
	b, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(b), "--root 2: accepted: a rank of the job, 0 to 1") {
		t.Errorf("a root outside the job: %v\n%s", err, b)
	}
}

// The command of the issue: mpirun builds the benchmark from its source
// folder and runs it with the defaults; here with fewer iterations.
func TestFromSource(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds from source")
	}
	out := mpirun(t, "-np", "2", ".", "latency", "--sizes", "0:4m", "--iterations", "5")
	rows, _ := parseTable(t, out)
	if len(rows) != 24 || rows[0].size != 0 || rows[23].size != 4<<20 {
		t.Fatalf("want 24 rows from 0 to 4 MiB:\n%s", out)
	}
}

// More ranks than two: the others wait, rank 0 prints.
func TestThreeRanks(t *testing.T) {
	out := mpirun(t, "-np", "3", bin.bench, "latency", "--sizes", "8", "--iterations", "50")
	rows, _ := parseTable(t, out)
	if len(rows) != 1 || rows[0].size != 8 {
		t.Fatalf("want one row:\n%s", out)
	}
}

// --settle keeps the ranks in Allreduces for its duration before the first
// measurement, and 0 skips it: a job of a few calls lasts at least that
// long with it (a bound on behaviour, not a speed).
func TestSettle(t *testing.T) {
	const d = 2 * time.Second
	start := time.Now()
	out := mpirun(t, "-np", "2", bin.bench, "bcast", "--sizes", "8", "--iterations", "10", "--settle", d.String())
	took := time.Since(start)
	if rows, _ := parseTable(t, out); len(rows) != 1 {
		t.Fatalf("want one row:\n%s", out)
	}
	if took < d {
		t.Errorf("--settle %v: the job took %v", d, took)
	}
	start = time.Now()
	mpirun(t, "-np", "2", bin.bench, "bcast", "--sizes", "8", "--iterations", "10", "--settle", "0")
	if took := time.Since(start); took >= d {
		t.Errorf("--settle 0: the job took %v, as long as a settled one", took)
	}
}

// Bad command lines fail with exit status 2 and a message that names what
// is accepted; a job of one rank fails too.
func TestBadArguments(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "no benchmark: accepted: latency, bw, bibw, pingpong, idle, commcreate, nbc, barrier, bcast, reduce, allreduce, allgather, alltoall, gather, scatter"},
		{[]string{"nbc", "--goroutines", "2"}, "nbc measures each rank's process (its CPU time): run it under mpirun, without --goroutines"},
		{[]string{"nbc", "--sizes", "12"}, "nbc reduces float64: size 12 is not a multiple of 8"},
		{[]string{"pingpongs"}, `unknown benchmark "pingpongs": accepted: latency, bw, bibw, pingpong`},
		{[]string{"allreduce", "--scale", "0"}, `--scale "0": accepted: a number above 0`},
		{[]string{"latency", "bw"}, "give one benchmark"},
		{[]string{"latency", "--sizes", "x"}, "accepted: a comma-separated list of sizes, or MIN:MAX"},
		{[]string{"latency", "--sizes", "8m"}, "from 0 to 4m"},
		{[]string{"latency", "--sizes", "64:8"}, "MIN above MAX"},
		{[]string{"latency", "--iterations", "0"}, "--iterations \"0\": accepted: a whole number from 1"},
		{[]string{"latency", "--warmup", "-1"}, "--warmup \"-1\": accepted: a whole number from 0"},
		{[]string{"bw", "--window", "5000"}, "--window \"5000\": accepted: a whole number from 1 to 1024"},
		{[]string{"latency", "--size", "8"}, `unknown option "--size": accepted: --sizes`},
		{[]string{"latency", "--sizes"}, "option --sizes needs a value"},
		{[]string{"latency", "--nonblocking"}, "--nonblocking: accepted with barrier, bcast, reduce, allreduce, allgather, alltoall, gather and scatter, not latency"},
		{[]string{"allreduce", "--root", "1"}, "--root: accepted with bcast, reduce, gather and scatter, not allreduce"},
		{[]string{"gather", "--root", "-1"}, `--root "-1": accepted: a rank`},
		{[]string{"gather", "--nonblocking=maybe"}, `--nonblocking="maybe": accepted: true or false`},
		{[]string{"latency", "--phases"}, "--phases: accepted with bw, bibw and pingpong, not latency"},
		{[]string{"bw", "--phases=often"}, `--phases="often": accepted: true or false`},
		{[]string{"bcast", "--settle", "-5ms"}, `--settle "-5ms": accepted: a duration from 0 to 10s`},
		{[]string{"bcast", "--settle", "100"}, `--settle "100": accepted: a duration from 0 to 10s`},
		{[]string{"bcast", "--settle", "1h"}, `--settle "1h": accepted: a duration from 0 to 10s`},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(c.args, &stdout, &stderr); code != 2 {
				t.Errorf("exit status %d, want 2", code)
			}
			if !strings.Contains(stderr.String(), c.want) {
				t.Errorf("message %q does not contain %q", stderr.String(), c.want)
			}
		})
	}
	// A singleton has no peer.
	cmd := exec.Command(bin.bench, "latency", "--sizes", "8")
	cmd.Env = testutil.CleanEnv()
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "needs at least 2 ranks") {
		t.Errorf("a singleton: %v\n%s", err, out)
	}
	// Under mpirun, every rank rejects the line; one message, and mpirun
	// fails.
	cmd = exec.Command(bin.mpirun, "--timeout", "30", "-np", "2", bin.bench, "latency", "--sizes", "x")
	done := make(chan struct{})
	var combined []byte
	go func() { combined, err = cmd.CombinedOutput(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		t.Fatal("mpirun did not end")
	}
	if err == nil || strings.Count(string(combined), "accepted: a comma-separated list") != 1 {
		t.Errorf("under mpirun: %v\n%s", err, combined)
	}
}

func TestSizes(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []int
	}{
		{"0:8", []int{0, 1, 2, 4, 8}},
		{"3:20", []int{4, 8, 16}},
		{"1k:4k", []int{1024, 2048, 4096}},
		{"8, 64,1m", []int{8, 64, 1 << 20}},
		{"4m", []int{4 << 20}},
	} {
		got, err := parseSizes(c.in)
		if err != nil || fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("%q: %v %v, want %v", c.in, got, err, c.want)
		}
	}
	if got, _ := parseSizes("0:4m"); len(got) != 24 {
		t.Errorf("0:4m: %d sizes, want 24", len(got))
	}
}
