package sm_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/gompi/gompi/components/coll/sm"
	"github.com/gompi/gompi/components/common/shmem"
	"github.com/gompi/gompi/mpi"
	"github.com/gompi/gompi/mpitest"
)

// TestNonblockingSetsTheSegmentUp: a program whose first collectives on a
// communicator are nonblocking, several in flight at once and a blocking
// one among them, gets the right answers, and its first sm call sets the
// segment up (it is mapped after); when a rank's setup fails, every rank
// runs them below sm, still right, and nothing stays mapped.
func TestNonblockingSetsTheSegmentUp(t *testing.T) {
	injected := errors.New("injected: no room for the segment")
	for _, c := range []struct {
		name    string
		failing int // -1: none
	}{{"setup succeeds", -1}, {"rank 0 cannot make it", 0}, {"rank 2 cannot map it", 2}} {
		t.Run(c.name, func(t *testing.T) {
			logged := &logBuffer{}
			mpitest.Run(t, 3, func(r *mpitest.Rank) error {
				w := r.CommWorld()
				if w.Rank() == c.failing {
					sm.FailSetup(r.Runtime(), c.failing, injected)
				}
				n := int64(w.Size())
				me := int64(w.Rank() + 1)
				for round := 0; round < 3; round++ {
					sum, sum2 := make([]int64, 2), make([]int64, 1)
					val := []int64{0}
					if w.Rank() == round%w.Size() {
						val[0] = 42 + int64(round)
					}
					var reqs []*mpi.Request
					add := func(q *mpi.Request, err error) error {
						reqs = append(reqs, q)
						return err
					}
					if err := add(mpi.Iallreduce(w, []int64{me, 1}, sum, mpi.Sum)); err != nil {
						return err
					}
					if err := add(w.Ibarrier()); err != nil {
						return err
					}
					if err := add(mpi.Ibcast(w, val, round%w.Size())); err != nil {
						return err
					}
					// From the second round, a blocking call among them (in the
					// first, only nonblocking calls: they must set sm up).
					blocking := [1]int64{n}
					if round > 0 {
						if err := mpi.Allreduce(w, []int64{me}, blocking[:], mpi.Max); err != nil {
							return err
						}
					}
					if err := add(mpi.Iallreduce(w, []int64{2 * me}, sum2, mpi.Sum)); err != nil {
						return err
					}
					for _, k := range rand.Perm(len(reqs)) {
						if _, err := reqs[k].Wait(); err != nil {
							return err
						}
					}
					if round == 0 {
						out := logged.Text()
						done := strings.Count(out, "shared segment mapped") +
							strings.Count(out, "no shared segment for the communicator's collectives")
						if done == 0 {
							return fmt.Errorf("the first round's nonblocking calls did not set sm up")
						}
					}
					want := n * (n + 1) / 2
					if sum[0] != want || sum[1] != n || sum2[0] != 2*want || blocking[0] != n || val[0] != 42+int64(round) {
						return fmt.Errorf("round %d: sums %v %v, max %d, bcast %d", round, sum, sum2, blocking[0], val[0])
					}
				}
				if err := w.Barrier(); err != nil {
					return err
				}
				if maps := segmentMaps(shmem.Path(r.JobID(), "collsm-")); len(maps) > 0 {
					return fmt.Errorf("the segment's file is still mapped: %v", maps)
				}
				return nil
			}, mpitest.WithMCA("btl", "self,shm"), mpitest.WithMCA("coll_base_verbose", "40"), mpitest.WithLogf(logged.Logf))
			// Each rank set its world's segment up once (or warned once).
			out := logged.Text()
			mapped := strings.Count(out, "shared segment mapped")
			warned := strings.Count(out, "no shared segment for the communicator's collectives")
			if c.failing < 0 && (mapped != 3 || warned != 0) || c.failing >= 0 && (mapped != 0 || warned != 3) {
				t.Errorf("%d ranks mapped the segment and %d warned, want %s; log:\n%s", mapped, warned,
					map[bool]string{true: "3 and 0", false: "0 and 3"}[c.failing < 0], out)
			}
		})
	}
}

// TestPersistentFirstCall: a persistent collective planned before anything
// else on the communicator sets sm up in its first run and runs sm's own
// steps from the second on (no message: the ranks talk over tcp alone, so
// the module below's algorithm would show in tcp's counts); one that is
// kept unstarted holds nothing back (the calls made meanwhile set sm up
// and run through it), and its first run is then sm's too; one freed
// without a run leaves sm as it found it; the calls after either are right.
func TestPersistentFirstCall(t *testing.T) {
	for _, started := range []bool{true, false} {
		t.Run(fmt.Sprintf("started=%v", started), func(t *testing.T) {
			mpitest.Run(t, 3, func(r *mpitest.Rank) error {
				w := r.CommWorld()
				n := int64(w.Size())
				send, recv := []int64{int64(w.Rank() + 1)}, make([]int64, 1)
				p, err := mpi.AllreduceInit(w, send, recv, mpi.Sum)
				if err != nil {
					return err
				}
				iallreduce := func(what string, k int) error {
					sum := make([]int64, 1)
					q, err := mpi.Iallreduce(w, []int64{2}, sum, mpi.Sum)
					if err != nil {
						return err
					}
					if err := w.Barrier(); err != nil {
						return err
					}
					if _, err := q.Wait(); err != nil {
						return err
					}
					if sum[0] != 2*n {
						return fmt.Errorf("Iallreduce %d %s: %d", k, what, sum[0])
					}
					return nil
				}
				if !started {
					// Calls beside the unstarted request: the first sets
					// sm up; the request runs through it after.
					for k := 0; k < 2; k++ {
						if err := iallreduce("beside the unstarted request", k); err != nil {
							return err
						}
					}
				}
				for k := 0; k < 4; k++ {
					before := r.Instance.TransportStats()["tcp"].Frames
					if err := p.Start(); err != nil {
						return err
					}
					if _, err := p.Wait(); err != nil {
						return err
					}
					if recv[0] != n*(n+1)/2 {
						return fmt.Errorf("run %d: %d", k, recv[0])
					}
					sent := r.Instance.TransportStats()["tcp"].Frames - before
					if (k > 0 || !started) && sent != 0 {
						return fmt.Errorf("run %d of the persistent Allreduce sent %d tcp frames, want none: not sm's own steps", k, sent)
					}
				}
				// A second one, freed unstarted beside the first: it
				// counts no run (the blocking calls after would wait for it).
				q, err := mpi.AllreduceInit(w, send, recv, mpi.Sum)
				if err != nil {
					return err
				}
				if err := q.Free(); err != nil {
					return err
				}
				if err := p.Free(); err != nil {
					return err
				}
				for k := 0; k < 3; k++ {
					if err := iallreduce("after", k); err != nil {
						return err
					}
				}
				return nil
			}, mpitest.WithMCA("btl", "self,shm,tcp"), mpitest.WithMCA("btl_shm_exclusivity", "10"), mpitest.WithMCA("llp", "^tofu"))
		})
	}
}

// logBuffer collects the log lines of a job's goroutine ranks
// (mpitest.WithLogf).
type logBuffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (l *logBuffer) Logf(format string, a ...any) {
	l.mu.Lock()
	fmt.Fprintf(&l.buf, format+"\n", a...)
	l.mu.Unlock()
}

// Text is what was logged so far.
func (l *logBuffer) Text() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}
