package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/gompi/gompi/internal/testutil"
	"github.com/gompi/gompi/mca"
	"github.com/gompi/gompi/mpi"
	"github.com/gompi/gompi/mpitest"
)

// pluginDir is the process's plugin folder (testutil.RunWithDir).
var pluginDir string

func TestMain(m *testing.M) { testutil.RunWithDir(m, "gompi-testplugin-", &pluginDir) }

// Through real ranks, plugins whose schedules cannot be right for every
// call, or are right only if the host runs them with care: rooted fills
// bcast with a schedule written for root 0, which the host refuses (a
// schedule runs for every call, whatever the root), reporting the plugin
// with the reason, so that bcast from every root comes from gompi's
// components and is right; ringallgather's allgather reads its input
// after writing its output, and is right in place as well. It runs in a
// test binary of its own: a process loads its plugins once.
func TestSchedulesGiveRightResults(t *testing.T) {
	dir := pluginDir
	exe := filepath.Join(dir, "gompi-coll-rooted")
	testutil.Install(t, ".", exe)
	prog, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "gompi-coll-ringallgather"), prog, 0o700); err != nil {
		t.Fatal(err)
	}
	const n = 4
	var mu sync.Mutex
	var logged []string
	logf := func(format string, a ...any) {
		mu.Lock()
		defer mu.Unlock()
		logged = append(logged, fmt.Sprintf(format, a...))
	}
	mpitest.Run(t, n, func(r *mpitest.Rank) error {
		w := r.CommWorld()
		me := w.Rank()
		for root := 0; root < n; root++ {
			buf := make([]int32, 5)
			if me == root {
				for i := range buf {
					buf[i] = int32(100*root + i)
				}
			}
			if err := mpi.Bcast(w, buf, root); err != nil {
				return err
			}
			for i, v := range buf {
				if v != int32(100*root+i) {
					return fmt.Errorf("rank %d, bcast from root %d: %v", me, root, buf)
				}
			}
		}
		const blk = 3
		want := make([]int32, n*blk)
		for i := range want {
			want[i] = int32(1000*(i/blk) + i%blk)
		}
		// The schedule runs for the blocking form, and, as a coroutine of
		// coll nbc, for the nonblocking and persistent ones.
		for _, form := range []string{"Allgather", "Iallgather", "AllgatherInit"} {
			for _, inPlace := range []bool{false, true} {
				mine := []int32{int32(1000 * me), int32(1000*me + 1), int32(1000*me + 2)}
				recv := make([]int32, n*blk)
				send := mine
				if inPlace {
					send = recv[me*blk : (me+1)*blk]
					copy(send, mine)
				}
				var err error
				switch form {
				case "Allgather":
					err = mpi.Allgather(w, send, recv)
				case "Iallgather":
					var req *mpi.Request
					if req, err = mpi.Iallgather(w, send, recv); err == nil {
						_, err = req.Wait()
					}
				default:
					var req *mpi.Request
					if req, err = mpi.AllgatherInit(w, send, recv); err == nil {
						if err = req.Start(); err == nil {
							if _, err = req.Wait(); err == nil {
								err = req.Free()
							}
						}
					}
				}
				if err != nil {
					return err
				}
				if !slices.Equal(recv, want) {
					return fmt.Errorf("rank %d, %s in place %v: %v, want %v", me, form, inPlace, recv, want)
				}
			}
		}
		table := w.CollTable()
		if !strings.Contains(table, "allgather=ringallgather ") || strings.Contains(table, "=rooted") {
			return fmt.Errorf("rank %d: table %s, want allgather from ringallgather and nothing from rooted", me, table)
		}
		return nil
	}, mpitest.WithMCA(mca.ComponentPathName, dir), mpitest.WithLogf(logf))
	if s := mca.Default().Skipped(); len(s) > 0 {
		t.Errorf("skipped at load: %v", s)
	}
	const reason = "schedule for bcast, rank %d of 4: gompi runs no schedule for bcast: its calls differ by root"
	for r := 0; r < n; r++ {
		why := fmt.Sprintf(reason, r)
		if !slices.ContainsFunc(logged, func(l string) bool {
			return strings.Contains(l, "coll plugin skipped") && strings.Contains(l, exe) && strings.Contains(l, why)
		}) {
			t.Errorf("no rank reported %q:\n%s", why, strings.Join(logged, "\n"))
		}
	}
}
