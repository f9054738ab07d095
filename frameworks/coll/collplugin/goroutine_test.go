package collplugin_test

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gompi/gompi/mca"
	"github.com/gompi/gompi/mpi"
	"github.com/gompi/gompi/mpitest"
)

// Goroutine ranks, many instances in one process, each with its plugin
// process: the plugin's barrier fills the world's and a Dup's slot (the
// Dup from the cache: the plugin, "once", fails when asked twice for one
// shape), the ranks pass it and Allreduce right, and Finalize stops every
// plugin process; under -race too.
func TestPluginWithGoroutineRanks(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "gompi-coll-once")
	if out, err := exec.Command("go", "build", "-o", exe, "./internal/testplugin").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	const n = 4
	mpitest.Run(t, n, func(r *mpitest.Rank) error {
		w := r.CommWorld()
		d, err := w.Dup()
		if err != nil {
			return err
		}
		for _, c := range []*mpi.Comm{w, d} {
			if !strings.Contains(c.CollTable(), "barrier=once ") {
				t.Errorf("rank %d: %s", c.Rank(), c.CollTable())
			}
			for i := 0; i < 20; i++ {
				if err := c.Barrier(); err != nil {
					return err
				}
			}
			var sum [1]int64
			if err := mpi.Allreduce(c, []int64{int64(c.Rank())}, sum[:], mpi.Sum); err != nil {
				return err
			}
			if sum[0] != n*(n-1)/2 {
				t.Errorf("rank %d: sum %d", c.Rank(), sum[0])
			}
		}
		return d.Free()
	}, mpitest.WithMCA(mca.ComponentPathName, dir))
	if s := mca.Default().Skipped(); len(s) > 0 {
		t.Errorf("skipped: %v", s)
	}
	out, _ := exec.Command("pgrep", "-f", exe).Output()
	if len(strings.TrimSpace(string(out))) > 0 {
		t.Errorf("plugin processes remain after Finalize: %s", out)
	}
}
