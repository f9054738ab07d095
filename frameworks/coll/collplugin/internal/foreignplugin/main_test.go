package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gompi/gompi/internal/testutil"
	"github.com/gompi/gompi/mca"
	"github.com/gompi/gompi/mpi"
	"github.com/gompi/gompi/mpitest"
)

// pluginDir is the process's plugin folder (testutil.RunWithDir).
var pluginDir string

func TestMain(m *testing.M) { testutil.RunWithDir(m, "gompi-foreignplugin-", &pluginDir) }

// This plugin, written from plugin.proto and docs/plugin-wire.md alone,
// loads into real ranks: the host takes its handshake, registers its
// parameter from its description, gives it the instance's value through
// Open (true: its barrier fills the slot and runs; false: it declines and
// the barrier comes from another component), and stops it at Finalize.
// It runs in a test binary of its own: a process loads its plugins once.
func TestForeignPlugin(t *testing.T) {
	dir := pluginDir
	exe := filepath.Join(dir, "gompi-coll-foreign")
	testutil.Install(t, ".", exe)
	proto, err := filepath.Abs("../../../../../mca/plugin/plugin.proto")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("GOMPI_FOREIGN_PROTO", proto)
	const n = 4
	for _, enable := range []string{"true", "false"} {
		mpitest.Run(t, n, func(r *mpitest.Rank) error {
			w := r.CommWorld()
			if got := strings.Contains(w.CollTable(), "barrier=foreign "); got != (enable == "true") {
				t.Errorf("coll_foreign_enable=%s, rank %d: %s", enable, w.Rank(), w.CollTable())
			}
			for i := 0; i < 10; i++ {
				if err := w.Barrier(); err != nil {
					return err
				}
			}
			var sum [1]int64
			if err := mpi.Allreduce(w, []int64{int64(w.Rank())}, sum[:], mpi.Sum); err != nil {
				return err
			}
			if sum[0] != n*(n-1)/2 {
				t.Errorf("rank %d: sum %d", w.Rank(), sum[0])
			}
			return nil
		}, mpitest.WithMCA(mca.ComponentPathName, dir), mpitest.WithMCA("coll_foreign_enable", enable))
		if s := mca.Default().Skipped(); len(s) > 0 {
			t.Fatalf("skipped: %v", s)
		}
		out, _ := exec.Command("pgrep", "-f", exe).Output()
		if len(strings.TrimSpace(string(out))) > 0 {
			t.Errorf("plugin processes remain after Finalize: %s", out)
		}
	}
	p, ok := mca.Default().Params().Lookup("coll_foreign_enable")
	if !ok || p.Def().Help != "Whether foreign fills the barrier" || p.Def().Default != "true" {
		t.Errorf("the description's parameter is not registered as declared: %v", ok)
	}
}
