package main

import (
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gompi/gompi/frameworks/coll"
	"github.com/gompi/gompi/internal/testutil"
)

var bin struct{ mpirun, prog string }

func TestMain(m *testing.M) {
	testutil.Main(m, map[*string]string{&bin.mpirun: "../../../cmd/mpirun", &bin.prog: "."})
}

// job starts a job and returns its output and whether it exited 0.
func job(t *testing.T, args ...string) (stdout, stderr string, ok bool) {
	t.Helper()
	cmd := exec.Command(bin.mpirun, append([]string{"--timeout", "120"}, args...)...)
	var o, e strings.Builder
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	return o.String(), e.String(), err == nil
}

// table is the slot table with barrier from one module and every other
// operation from another, as Table.String prints it; tuned leaves gatherv
// and scatterv to basic.
func table(barrier, rest string) string { return smTable(false, barrier, rest) }

// smTable is table, with sm on top (sm) of barrier, bcast, reduce,
// allreduce, allgather, alltoall, gather and scatter, passing what it does
// not carry to the module below.
func smTable(sm bool, barrier, rest string) string {
	var s []string
	for _, op := range coll.Ops() {
		m := rest
		switch {
		case op == coll.Barrier:
			m = barrier
		case rest == "tuned" && (op == coll.Gatherv || op == coll.Scatterv):
			m = "basic"
		}
		if sm && (op == coll.Barrier || op == coll.Bcast || op == coll.Reduce || op == coll.Allreduce ||
			op == coll.Allgather || op == coll.Alltoall || op == coll.Gather || op == coll.Scatter) {
			m = "sm>" + m
		}
		s = append(s, fmt.Sprintf("%s=%s", op, m))
	}
	return strings.Join(s, " ")
}

var verboseTable = regexp.MustCompile(`slot table: rank=(\d+) comm=MPI_COMM_WORLD size=\d+ table="([^"]*)"`)

// The suite passes between processes with each selection, and the slot
// table coll_base_verbose=10 prints says which module fills each slot: sm
// the barrier, bcast, reduce, allreduce, allgather, alltoall, gather and
// scatter it carries where every rank is on the
// node and shared memory is allowed, over the tofu module's barrier (where
// the LLP reaches every rank), and the highest module that fills it every
// other slot.
func TestSelectionsUnderMpirun(t *testing.T) {
	for _, c := range []struct {
		name string
		np   int
		args []string
		want string
	}{
		{"default", 4, []string{"--mca", "btl", "self,shm"}, smTable(true, "tofu", "tuned")},
		{"no-sm", 4, []string{"--mca", "btl", "self,shm", "--mca", "coll", "^sm"}, table("tofu", "tuned")},
		{"tcp", 3, []string{"--mca", "btl", "self,tcp"}, table("tuned", "tuned")},
		{"no-llp", 3, []string{"--mca", "btl", "self,shm", "--mca", "llp", "^tofu"}, smTable(true, "tuned", "tuned")},
		{"basic", 4, []string{"--mca", "coll", "basic"}, table("basic", "basic")},
		{"not-tuned", 4, []string{"--mca", "coll", "^tuned"}, smTable(true, "tofu", "basic")},
	} {
		t.Run(c.name, func(t *testing.T) {
			if testing.Short() && c.name != "default" {
				t.Skip("-short: the default selection only")
			}
			args := append(append([]string{"-np", fmt.Sprint(c.np), "--mca", "coll_base_verbose", "10"}, c.args...), bin.prog)
			stdout, stderr, ok := job(t, args...)
			if !ok || strings.Count(stdout, "coll ok rank") != c.np {
				t.Fatalf("mpirun %s failed:\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), stdout, stderr)
			}
			seen := map[string]bool{}
			for _, m := range verboseTable.FindAllStringSubmatch(stderr, -1) {
				seen[m[1]] = true
				if m[2] != c.want {
					t.Errorf("rank %s's verbose slot table:\n  %s\nwant\n  %s", m[1], m[2], c.want)
				}
			}
			if len(seen) != c.np {
				t.Errorf("%d ranks printed the world's slot table, want %d:\n%s", len(seen), c.np, stderr)
			}
		})
	}
}

// A module that fills only a size-1 communicator's slots cannot serve 4
// ranks: the job fails at Init with an error naming the operations nobody
// fills and the modules asked.
func TestUnfilledSlotsUnderMpirun(t *testing.T) {
	stdout, stderr, ok := job(t, "-np", "4", "--mca", "coll", "self", bin.prog)
	if ok {
		t.Fatalf("--mca coll self on 4 ranks succeeded:\n%s", stdout)
	}
	for _, want := range []string{"no module fills barrier, bcast", "alltoallv", "self (communicator MPI_COMM_WORLD has 4 ranks"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr does not say %q:\n%s", want, stderr)
		}
	}
}

// The recovery scenario: with --enable-recovery, kill -9 of one of 6 ranks
// does not end the job; the five others get MPI_ERR_PROC_FAILED from a
// receive from it, make a communicator of themselves with CreateGroup,
// Allreduce on it and finish; mpirun exits non-zero, naming the dead rank.
// Without the flag the job ends as before.
func TestRecoveryUnderMpirun(t *testing.T) {
	for _, btl := range []string{"self,shm", "self,tcp"} {
		t.Run(btl, func(t *testing.T) {
			start := time.Now()
			stdout, stderr, ok := job(t, "-np", "6", "--enable-recovery", "--mca", "btl", btl, bin.prog, "recover", "3")
			if ok {
				t.Errorf("mpirun exited 0 after a rank's death")
			}
			if got := strings.Count(stdout, "of 5: sum 12 error MPI_ERR_PROC_FAILED"); got != 5 {
				t.Errorf("%d survivors recovered, want 5:\nstdout:\n%s\nstderr:\n%s", got, stdout, stderr)
			}
			if !strings.Contains(stderr, "rank 3 (pid ") || !strings.Contains(stderr, "signal 9 (Killed)") {
				t.Errorf("mpirun does not name the dead rank and its signal:\n%s", stderr)
			}
			if d := time.Since(start); d > 20*time.Second {
				t.Errorf("the job took %v", d)
			}
		})
	}
	stdout, stderr, ok := job(t, "-np", "6", bin.prog, "recover", "3")
	if ok || strings.Contains(stdout, "recovered") || !strings.Contains(stderr, "rank 3 (pid ") {
		t.Errorf("without --enable-recovery the job went on:\nstdout:\n%s\nstderr:\n%s", stdout, stderr)
	}
}

// The nonblocking and persistent forms pass the suite between processes at
// 2-6 ranks, over shared memory and over TCP, with the progress goroutine
// as mpi_async_progress=auto decides (on at 2 ranks on this node's cores,
// off when oversubscribed) and forced on. Each size runs one mode over
// each transport, the other mode over the other, so that both modes meet
// both transports and every size.
func TestNonblockingUnderMpirun(t *testing.T) {
	modes := []string{"nonblocking", "persistent"}
	for np := 2; np <= 6; np++ {
		for i, btl := range []string{"self,shm", "self,tcp"} {
			mode := modes[(np+i)%2]
			async := "auto"
			if i == 0 {
				async = "yes"
			}
			t.Run(fmt.Sprintf("%d/%s/%s/async=%s", np, btl, mode, async), func(t *testing.T) {
				if testing.Short() && np > 3 {
					t.Skip("-short: 2 and 3 ranks")
				}
				args := []string{"-np", fmt.Sprint(np), "--mca", "btl", btl, "--mca", "mpi_async_progress", async, bin.prog, mode}
				stdout, stderr, ok := job(t, args...)
				if !ok || strings.Count(stdout, "coll ok rank") != np || strings.Count(stdout, "mode="+mode+" ") != np {
					t.Fatalf("mpirun %s failed:\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), stdout, stderr)
				}
			})
		}
	}
}
