package sm_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gompi/gompi/components/coll/sm"
	"github.com/gompi/gompi/components/common/shmem"
	"github.com/gompi/gompi/mpi"
	"github.com/gompi/gompi/mpitest"
)

// TestSetupFails: when rank 0 cannot make the communicator's segment, or
// one other rank cannot map it, every rank settles without sm: the
// collectives still give the right answers (through the modules below),
// each rank warns why, and no segment is left, neither as a file nor as a
// mapping.
func TestSetupFails(t *testing.T) {
	injected := errors.New("injected: no room for the segment")
	for _, c := range []struct {
		name    string
		failing int // the world rank whose setup fails
		reason  string
	}{
		{"rank 0 cannot make it", 0, injected.Error()},
		{"rank 2 cannot map it", 2, "could not map"},
	} {
		t.Run(c.name, func(t *testing.T) {
			logged := &logBuffer{}
			mpitest.Run(t, 3, func(r *mpitest.Rank) error {
				w := r.CommWorld()
				if w.Rank() == c.failing {
					sm.FailSetup(r.Runtime(), c.failing, injected)
				}
				if !fromSM(w, "allreduce") {
					return fmt.Errorf("slot table %q: want the allreduce from sm", w.CollTable())
				}
				for iter := 0; iter < 4; iter++ {
					for what := 0; what < 4; what++ {
						if err := checkOne(w, what, 3, iter%w.Size(), iter); err != nil {
							return fmt.Errorf("collective %d, iteration %d: %w", what, iter, err)
						}
					}
				}
				// Every rank is past its setup: nothing of the segment may
				// remain.
				if err := w.Barrier(); err != nil {
					return err
				}
				prefix := shmem.Path(r.JobID(), "collsm-")
				if m := segmentMaps(prefix); len(m) > 0 {
					return fmt.Errorf("the process still maps the segment:\n%s", strings.Join(m, "\n"))
				}
				files, err := filepath.Glob(prefix + "*")
				if err != nil {
					return err
				}
				if len(files) > 0 {
					return fmt.Errorf("segment files left: %v", files)
				}
				var sum [1]int64
				if err := mpi.Allreduce(w, []int64{int64(w.Rank() + 1)}, sum[:], mpi.Sum); err != nil {
					return err
				}
				if want := int64(w.Size() * (w.Size() + 1) / 2); sum[0] != want {
					return fmt.Errorf("allreduce: %d, want %d", sum[0], want)
				}
				return nil
			}, mpitest.WithMCA("btl", "self,shm"), mpitest.WithLogf(logged.Logf))
			out := logged.Text()
			const warning = "no shared segment for the communicator's collectives"
			if n := strings.Count(out, warning); n != 3 {
				t.Errorf("%d warnings %q, want one per rank; log:\n%s", n, warning, out)
			}
			if !strings.Contains(out, c.reason) {
				t.Errorf("no warning gives the reason %q; log:\n%s", c.reason, out)
			}
		})
	}
}
