package main

import (
	"bufio"
	"fmt"
	"io"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gompi/gompi/internal/p2pcheck"
	"github.com/gompi/gompi/internal/testutil"
)

// The tests run real processes: TestMain builds mpirun, this program and
// examples/ring once.
var bin struct{ mpirun, prog, ring string }

func TestMain(m *testing.M) {
	testutil.Main(m, map[*string]string{
		&bin.mpirun: "../../../cmd/mpirun", &bin.prog: ".", &bin.ring: "../../../examples/ring"})
}

// mpirun runs a job and returns its standard output, failing the test when
// it does not exit 0.
func mpirun(t *testing.T, limit time.Duration, args ...string) string {
	t.Helper()
	return testutil.RunMpirun(t, bin.mpirun, limit, args...)
}

// The matching suite in real processes, over shared memory and over TCP,
// with the tofu LLP carrying the small blocking sends (the default) and
// without it (TCP alone).
func TestSuiteUnderMpirun(t *testing.T) {
	for _, c := range []struct {
		np       int
		btl, llp string
	}{{4, "self,shm", ""}, {3, "self,tcp", ""}, {3, "self,tcp", "^tofu"}} {
		t.Run(fmt.Sprintf("%d/%s/llp=%s", c.np, c.btl, c.llp), func(t *testing.T) {
			out := mpirun(t, 120*time.Second, "--mca", "btl", c.btl, "--mca", "llp", c.llp, "-np", fmt.Sprint(c.np), bin.prog, "suite")
			if got := strings.Count(out, "suite ok rank"); got != c.np {
				t.Fatalf("%d ranks passed, want %d:\n%s", got, c.np, out)
			}
			t.Log(out)
		})
	}
}

// Pipelined messages of several fragments (shm's pipeline, with fragments
// smaller than its limit) in real processes: the whole suite, whose
// "pipeline" check crosses every threshold. pml_ob1_rdma_choice=always
// keeps every message in the range pipelined (by default the receiver's
// measure may have some offered by RDMA Get; the other suites run so).
func TestPipelineUnderMpirun(t *testing.T) {
	out := mpirun(t, 120*time.Second, "--mca", "btl", "self,shm", "--mca", "btl_shm_max_send_size", "8k",
		"--mca", "btl_shm_pipeline_limit", "64k", "--mca", "pml_ob1_rdma_choice", "always", "-np", "3", bin.prog, "suite")
	if got := strings.Count(out, "suite ok rank"); got != 3 {
		t.Fatalf("%d ranks passed, want 3:\n%s", got, out)
	}
	if !regexp.MustCompile(`Pipelined:[1-9]`).MatchString(out) {
		t.Fatalf("no rank sent a pipelined message:\n%s", out)
	}
}

// A flood of a million small messages to a receiver that starts two seconds
// late completes, and neither side's resident memory grows by more than
// 64 MiB: the sender waits for room in the transport instead of queueing,
// and the receiver drains the transport only as fast as it receives.
func TestFloodBoundedMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a million messages")
	}
	out := mpirun(t, 120*time.Second, "--mca", "btl", "self,shm", "-np", "2", bin.prog, "flood", "1000000", "2s")
	re := regexp.MustCompile(`flood rank (\d): rss_before=(\d+) hwm=(\d+) growth=(-?\d+) took=(\S+)`)
	lines := re.FindAllStringSubmatch(out, -1)
	if len(lines) != 2 {
		t.Fatalf("want a report from both ranks:\n%s", out)
	}
	for _, l := range lines {
		growth, _ := strconv.ParseInt(l[4], 10, 64)
		t.Logf("rank %s: RSS %s MiB before, peak %s MiB, growth %.1f MiB, %s", l[1], mib(l[2]), mib(l[3]), float64(growth)/(1<<20), l[5])
		if growth > 64<<20 {
			t.Errorf("rank %s: resident memory grew by %.1f MiB, more than 64 MiB", l[1], float64(growth)/(1<<20))
		}
	}
}

func mib(s string) string {
	n, _ := strconv.ParseInt(s, 10, 64)
	return fmt.Sprintf("%.1f", float64(n)/(1<<20))
}

// examples/ring passes a token around every rank.
func TestRingExample(t *testing.T) {
	out := mpirun(t, 60*time.Second, "-np", "4", bin.ring)
	for r := 0; r < 4; r++ {
		if !strings.Contains(out, fmt.Sprintf("rank %d received the token", r)) {
			t.Errorf("no line for rank %d:\n%s", r, out)
		}
	}
	if !strings.Contains(out, "token went around 4 ranks") {
		t.Errorf("no final line:\n%s", out)
	}
}

// The LLP in real processes: a stream of every kind of send from rank 0 to
// rank 1, whose receiver starts late while the box has two slots, arrives
// in order with both LLP hits and fall-backs to the BTLs.
func TestLLPStreamUnderMpirun(t *testing.T) {
	for _, btl := range []string{"self,shm", "self,shm,tcp"} {
		t.Run(btl, func(t *testing.T) {
			// With tcp, shm stays selected (tofu needs it) but tcp carries
			// the normal path.
			out := mpirun(t, 60*time.Second, "--mca", "btl", btl, "--mca", "btl_shm_exclusivity", "10", "--mca", "llp_tofu_slots", "2",
				"--mca", "pml_ob1_llp_max_payload_size", "256", "-np", "2", bin.prog, "llpstream", "3000", "100ms")
			m := regexp.MustCompile(`llpstream rank 0: candidates=(\d+) hits=(\d+) fallbacks=(\d+)`).FindStringSubmatch(out)
			if m == nil || !strings.Contains(out, "llpstream rank 1: in order") {
				t.Fatalf("no report from both ranks:\n%s", out)
			}
			t.Log(strings.TrimSpace(out))
			if m[2] == "0" || m[3] == "0" {
				t.Errorf("LLP hits %s, fall-backs %s: want both", m[2], m[3])
			}
		})
	}
}

// The LLP counters in real processes: hits for small blocking sends to the
// other rank, none for non-blocking and synchronous sends, sends to oneself
// and messages at or above the limit; none at all with the LLP excluded.
func TestLLPCountersUnderMpirun(t *testing.T) {
	for _, c := range []struct {
		llp, hits string
	}{{"", "true"}, {"^tofu", "false"}} {
		t.Run("llp="+c.llp, func(t *testing.T) {
			out := mpirun(t, 60*time.Second, "--mca", "llp", c.llp, "--mca", "pml_ob1_llp_max_payload_size", "64", "-np", "2",
				bin.prog, "llpcounters", c.hits)
			if got := strings.Count(out, "llpcounters ok rank"); got != 2 {
				t.Fatalf("%d ranks passed, want 2:\n%s", got, out)
			}
			t.Log(strings.TrimSpace(out))
		})
	}
}

// The LLP's files in real processes: once the boxes exist both ways and
// have been used, no file of the job is left in /dev/shm (a crash from then
// on leaves nothing behind); after a rank is killed, mpirun fails and
// nothing is left either.
func TestLLPFilesUnderMpirun(t *testing.T) {
	cmd := exec.Command(bin.mpirun, "--timeout", "60", "-np", "2", bin.prog, "llphold")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	re := regexp.MustCompile(`llphold rank (\d) pid (\d+) job (\w+) hits (\d+)`)
	pids := map[string]int{}
	var job string
	sc := bufio.NewScanner(stdout)
	for len(pids) < 2 && sc.Scan() {
		m := re.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		pid, _ := strconv.Atoi(m[2])
		pids[m[1]], job = pid, m[3]
		if m[4] == "0" {
			t.Errorf("rank %s: no LLP hit", m[1])
		}
	}
	if len(pids) < 2 {
		t.Fatalf("no report from both ranks; stderr:\n%s", &stderr)
	}
	files := func() []string { return testutil.ShmFiles(t, job, "*") }
	// Rank 0 printed after its last receive: rank 1 may still be mapping
	// the box rank 0 made; give it a moment.
	deadline := time.Now().Add(5 * time.Second)
	for len(files()) > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if f := files(); len(f) != 0 {
		t.Errorf("files of the running job: %v", f)
	}
	syscall.Kill(pids["1"], syscall.SIGKILL)
	go io.Copy(io.Discard, stdout)
	if err := cmd.Wait(); err == nil {
		t.Errorf("mpirun exited 0 after a rank was killed")
	}
	if f := files(); len(f) != 0 {
		t.Errorf("files left after the job: %v", f)
	}
}

// sleepArgs make every wait of a job sleep at once and for long (see
// p2pcheck.SleepParams).
func sleepArgs(btl, llp string) []string {
	args := []string{"--mca", "btl", btl, "--mca", "llp", llp}
	for _, p := range p2pcheck.SleepParams {
		args = append(args, "--mca", p[0], p[1])
	}
	return args
}

// Processes asleep for a second wake when their message comes (in Recv,
// Wait or Probe), and a thousand rounds of sleep and wake between two
// processes all end with a ring: over shared memory with and without the
// LLP, and over TCP (the kernel's readiness rings).
func TestSleepingProcessesWake(t *testing.T) {
	for _, c := range []struct{ name, btl, llp string }{
		{"shm+tofu", "self,shm", ""}, {"shm", "self,shm", "^tofu"}, {"tcp", "self,tcp", "^tofu"},
	} {
		t.Run(c.name, func(t *testing.T) {
			start := time.Now()
			args := append(sleepArgs(c.btl, c.llp), "-np", "4", bin.prog, "latesender", "1s")
			out := mpirun(t, 60*time.Second, args...)
			if got := strings.Count(out, "woken rank"); got != 4 {
				t.Fatalf("%d ranks reported, want 4:\n%s", got, out)
			}
			if d := time.Since(start); d > 20*time.Second {
				t.Errorf("the job took %v: sleepers were not woken by their message", d)
			}
			args = append(sleepArgs(c.btl, c.llp), "-np", "3", bin.prog, "sleeppingpong", "1000")
			out = mpirun(t, 60*time.Second, args...)
			if got := strings.Count(out, "woken rank"); got != 3 {
				t.Fatalf("%d ranks reported, want 3:\n%s", got, out)
			}
			t.Log(out)
		})
	}
}
