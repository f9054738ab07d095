package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The tests run real processes: TestMain builds mpirun, this program and
// examples/ring once.
var bin struct{ mpirun, prog, ring string }

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "p2pprog-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin.mpirun = filepath.Join(dir, "mpirun")
	bin.prog = filepath.Join(dir, "p2pprog")
	bin.ring = filepath.Join(dir, "ring")
	for out, pkg := range map[string]string{bin.mpirun: "../../../cmd/mpirun", bin.prog: ".", bin.ring: "../../../examples/ring"} {
		if msg, err := exec.Command("go", "build", "-o", out, pkg).CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "go build %s: %v\n%s", pkg, err, msg)
			os.Exit(1)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// mpirun runs a job and returns its standard output, failing the test when
// it does not exit 0.
func mpirun(t *testing.T, limit time.Duration, args ...string) string {
	t.Helper()
	args = append([]string{"--timeout", fmt.Sprint(int(limit.Seconds()))}, args...)
	cmd := exec.Command(bin.mpirun, args...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("mpirun %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, &stdout, &stderr)
	}
	return stdout.String()
}

// The matching suite in real processes, over shared memory and over TCP.
func TestSuiteUnderMpirun(t *testing.T) {
	for _, c := range []struct {
		np  int
		btl string
	}{{4, "self,shm"}, {3, "self,tcp"}} {
		t.Run(fmt.Sprintf("%d/%s", c.np, c.btl), func(t *testing.T) {
			out := mpirun(t, 120*time.Second, "--mca", "btl", c.btl, "-np", fmt.Sprint(c.np), bin.prog, "suite")
			if got := strings.Count(out, "suite ok rank"); got != c.np {
				t.Fatalf("%d ranks passed, want %d:\n%s", got, c.np, out)
			}
			t.Log(out)
		})
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
