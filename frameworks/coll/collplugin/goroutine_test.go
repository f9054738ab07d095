package collplugin_test

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gompi/gompi/internal/testutil"
	"github.com/gompi/gompi/mca"
	"github.com/gompi/gompi/mpi"
	"github.com/gompi/gompi/mpitest"
)

// pluginDir is the process's plugin folder (testutil.RunWithDir).
var pluginDir string

func TestMain(m *testing.M) { testutil.RunWithDir(m, "gompi-collplugin-", &pluginDir) }

// Goroutine ranks, many instances in one process, each with its plugin
// process: the plugin's barrier fills the world's and a Dup's slot (the
// Dup from the cache: the plugin, "once", fails when asked twice for one
// shape), the ranks pass it and Allreduce right, and Finalize stops every
// plugin process; under -race too.
func TestPluginWithGoroutineRanks(t *testing.T) {
	dir := pluginDir
	exe := filepath.Join(dir, "gompi-coll-once")
	testutil.Install(t, "./internal/testplugin", exe)
	const n = 4
	mpitest.Run(t, n, func(r *mpitest.Rank) error {
		w := r.CommWorld()
		d, err := w.Dup()
		if err != nil {
			return err
		}
		for _, c := range []*mpi.Comm{w, d} {
			if !strings.Contains(c.CollTable(), "barrier=once ") {
				return fmt.Errorf("rank %d: the plugin's barrier is not in the table: %s", c.Rank(), c.CollTable())
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
				return fmt.Errorf("rank %d: sum %d, want %d", c.Rank(), sum[0], n*(n-1)/2)
			}
		}
		// Every instance is up and has its plugin: the count below is
		// the one Finalize must bring to zero.
		if r.Rank() == 0 {
			pids, err := pluginProcesses(exe)
			if err != nil {
				return err
			}
			if len(pids) != n {
				return fmt.Errorf("%d plugin processes (%v) while %d instances run, want one each", len(pids), pids, n)
			}
		}
		if err := w.Barrier(); err != nil {
			return err
		}
		return d.Free()
	}, mpitest.WithMCA(mca.ComponentPathName, dir))
	if s := mca.Default().Skipped(); len(s) > 0 {
		t.Errorf("skipped: %v", s)
	}
	pids, err := pluginProcesses(exe)
	if err != nil {
		t.Fatal(err)
	}
	if len(pids) > 0 {
		t.Errorf("plugin processes remain after Finalize: %v", pids)
	}
	pluginScheduleAfterDeath(t, dir, exe)
}

// A rank's death reaches the collectives a plugin process plans: the
// plugin's barrier runs as a schedule of the host's point-to-point, which
// the failure interrupts, so every survivor's Barrier fails with
// ErrProcFailed instead of waiting on a peer that left it; and no plugin
// process remains, the dead rank's included.
// TestPluginWithGoroutineRanks runs it after its own job: a process
// reads the plugin path once.
func pluginScheduleAfterDeath(t *testing.T, dir, exe string) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		mpitest.Run(t, 4, func(r *mpitest.Rank) error {
			w := r.CommWorld()
			if !strings.Contains(w.CollTable(), "barrier=once ") {
				return fmt.Errorf("rank %d: the plugin's barrier is not in the table: %s", w.Rank(), w.CollTable())
			}
			for i := 0; ; i++ {
				if w.Rank() == 2 && i == 5 {
					r.Die()
				}
				if err := w.Barrier(); err != nil {
					if !errors.Is(err, mpi.ErrProcFailed) {
						return fmt.Errorf("rank %d: Barrier %d: %v, want ErrProcFailed", w.Rank(), i, err)
					}
					return nil
				}
			}
		}, mpitest.WithMCA(mca.ComponentPathName, dir))
	}()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		panic(t.Name() + ": the job with a death hung")
	}
	pids, err := pluginProcesses(exe)
	if err != nil {
		t.Fatal(err)
	}
	if len(pids) > 0 {
		t.Errorf("plugin processes remain after the job: %v", pids)
	}
}

// pluginProcesses lists the live children of this process that run exe,
// from /proc. It is an error when /proc cannot be read, so that a check
// that could not look fails instead of finding nothing.
func pluginProcesses(exe string) ([]int, error) {
	gone := func(err error) bool { return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH) }
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("listing the processes: %w", err)
	}
	me, self := os.Getpid(), false
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if gone(err) {
			continue // exited meanwhile
		} else if err != nil {
			return nil, err
		}
		// The command name, in parentheses, may hold spaces and parentheses.
		s := string(stat)
		i := strings.LastIndexByte(s, ')')
		var f []string
		if i >= 0 && i+2 <= len(s) {
			f = strings.Fields(s[i+2:])
		}
		if len(f) < 2 {
			return nil, fmt.Errorf("/proc/%d/stat: unexpected %q", pid, s)
		}
		self = self || pid == me
		if ppid, _ := strconv.Atoi(f[1]); ppid != me || f[0] == "Z" {
			continue // not our child, or dead and waiting to be reaped
		}
		cmd, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if gone(err) {
			continue
		} else if err != nil {
			return nil, err
		}
		if strings.HasPrefix(string(cmd), exe+"\x00") {
			out = append(out, pid)
		}
	}
	if !self {
		return nil, fmt.Errorf("/proc does not list this process (%d): cannot look for its children", me)
	}
	return out, nil
}
