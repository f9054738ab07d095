// Command shmkill is the program of the shared-memory lifetime measurements
// (test/shmlife/run.sh and internal/faulttest TestShmLife): ranks that are
// killed from outside while their segments in /dev/shm exist, under any
// launcher (gompi's mpirun, MPICH's Hydra, srun --mpi=pmi2), so that what a
// killed job leaves behind can be counted.
//
//	shmkill [-dir DIR] [-hold RANK] [-loop D] init|coll
//
//	init   Init, a barrier and a few collectives, Finalize
//	coll   Init, then a loop of collectives for D (default 2 s) over sizes
//	       that go through coll sm (small), coll tuned over btl shm (large)
//	       and llp tofu (tuned's small point-to-point messages), Finalize
//
// Every rank, whatever the launcher, creates DIR/<pid>.pid before Init and
// DIR/<pid>.ready after it (a script needs no launcher-specific way to find
// the ranks' pids), and prints:
//
//	query <rank> <pid> <job>   from the llp Query of a probe component linked
//	                           in (zz_probe), which runs after btl shm's and
//	                           llp tofu's Query: their control segments exist
//	                           and no peer can map them before the modex fence
//	ready <rank> <pid> <job>   Init returned
//	hold <rank> <pid> <job>    rank -hold stops here (see below)
//
// -hold RANK keeps one rank still where its segments' files provably
// exist, so that a kill there shows whether they outlive the job: in init,
// inside the probe's Query (before the fence, so no peer has mapped its
// control segments); in coll, after Init and before its first collective,
// which the others enter (rank 0 makes the communicator's coll sm segment
// and sends its name, making a box to RANK; neither file goes before RANK
// maps them). It holds for a minute, far longer than a test waits.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/gompi/gompi/frameworks/llp"
	"github.com/gompi/gompi/mca"
	"github.com/gompi/gompi/mpi"
	"github.com/gompi/gompi/rte"
)

var (
	dir  = flag.String("dir", "", "directory for the <pid>.pid and <pid>.ready files")
	hold = flag.Int("hold", -1, "rank to hold where its segments exist")
	loop = flag.Duration("loop", 2*time.Second, "how long coll runs its loop")
)

// holdFor is far longer than any test or script waits for a held rank.
const holdFor = time.Minute

func say(what string, rank int, job string) {
	fmt.Printf("%s %d %d %s\n", what, rank, os.Getpid(), job)
}

func mark(suffix string) {
	if *dir == "" {
		return
	}
	if err := os.WriteFile(filepath.Join(*dir, fmt.Sprintf("%d.%s", os.Getpid(), suffix)), nil, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "shmkill:", err)
		os.Exit(1)
	}
}

// probe is an llp component that only reports, and declines. Components
// are queried in name order: zz_probe comes after tofu.
type probe struct{}

func (probe) Info() mca.Info {
	return mca.Info{Framework: "llp", Name: "zz_probe", Version: mca.Version{Major: 1}, API: llp.Framework.API}
}

func (probe) Register(*mca.Registrar) {}

func (probe) Query(_ *mca.Base, rt *rte.Runtime) (llp.Module, error) {
	j := rt.Job()
	say("query", j.Rank, j.ID)
	if mode == "init" && j.Rank == *hold {
		say("hold", j.Rank, j.ID)
		time.Sleep(holdFor)
	}
	return nil, mca.Decline("a probe of shmkill")
}

func init() { mca.Register(probe{}) }

var mode string

func main() {
	flag.Parse()
	if flag.NArg() != 1 || flag.Arg(0) != "init" && flag.Arg(0) != "coll" {
		fmt.Fprintln(os.Stderr, "usage: shmkill [-dir DIR] [-hold RANK] [-loop D] init|coll")
		os.Exit(2)
	}
	mode = flag.Arg(0)
	mark("pid")
	inst, err := mpi.Init()
	if err != nil {
		fmt.Fprintln(os.Stderr, "shmkill:", err)
		os.Exit(1)
	}
	w := inst.CommWorld()
	me, n := w.Rank(), w.Size()
	fail := func(err error) {
		fmt.Fprintf(os.Stderr, "shmkill: rank %d: %v\n", me, err)
		inst.Abort(1)
	}
	say("ready", me, inst.JobID())
	mark("ready")
	if mode == "coll" && me == *hold {
		say("hold", me, inst.JobID())
		time.Sleep(holdFor)
	}
	// Small sizes go through coll sm's segment; large ones through tuned's
	// messages (btl shm's boxes, and llp tofu for the small blocking ones).
	sizes := []int{1, 128, 64 << 10}
	if mode == "init" {
		sizes = sizes[:2]
	}
	start := time.Now()
	for it := 0; it == 0 || mode == "coll" && time.Since(start) < *loop; it++ {
		if err := w.Barrier(); err != nil {
			fail(err)
		}
		for _, k := range sizes {
			in, out := make([]float64, k), make([]float64, k)
			for i := range in {
				in[i] = float64(me)
			}
			if err := mpi.Allreduce(w, in, out, mpi.Sum); err != nil {
				fail(err)
			}
			if want := float64(n * (n - 1) / 2); out[0] != want || out[k-1] != want {
				fail(fmt.Errorf("allreduce of %d: got %v, want %v", k, out[0], want))
			}
			if err := mpi.Bcast(w, in, it%n); err != nil {
				fail(err)
			}
			a2a, got := make([]float64, k*n), make([]float64, k*n)
			if err := mpi.Alltoall(w, a2a, got); err != nil {
				fail(err)
			}
		}
	}
	if err := inst.Finalize(); err != nil {
		fmt.Fprintf(os.Stderr, "shmkill: rank %d: %v\n", me, err)
		os.Exit(1)
	}
}
