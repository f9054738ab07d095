package tofu_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gompi/gompi/components/common/shmem"
	"github.com/gompi/gompi/internal/p2pcheck"
	"github.com/gompi/gompi/internal/testutil"
	"github.com/gompi/gompi/mca"
	"github.com/gompi/gompi/mpi"
	"github.com/gompi/gompi/mpierr"
	"github.com/gompi/gompi/mpitest"
	"github.com/gompi/gompi/params"
)

// tofuFiles lists the job's tofu files in /dev/shm.
func tofuFiles(t testing.TB, job string) []string {
	t.Helper()
	return testutil.ShmFiles(t, job, "tofu-*")
}

// The counters: small blocking sends to the other rank on the node hit the
// LLP; non-blocking and synchronous sends, sends to oneself and messages at
// or above pml_ob1_llp_max_payload_size never reach it; nothing falls back.
// The BTLs underneath do not matter; with the LLP excluded nothing hits.
func TestCounters(t *testing.T) {
	for _, c := range []struct {
		name string
		hits bool
		opts []mpitest.Option
	}{
		{"shm", true, []mpitest.Option{mpitest.WithMCA("btl", "self,shm")}},
		// tcp carrying the normal path, shm selected but outranked.
		{"tcp under the LLP", true, []mpitest.Option{mpitest.WithMCA("btl", "self,shm,tcp"), mpitest.WithMCA("btl_shm_exclusivity", "10")}},
		// Without shm among the transports tofu declines: no shared memory.
		{"tcp alone", false, []mpitest.Option{mpitest.WithMCA("btl", "self,tcp")}},
		{"excluded", false, []mpitest.Option{mpitest.WithMCA("llp", "^tofu")}},
	} {
		t.Run(c.name, func(t *testing.T) {
			mpitest.Run(t, 2, func(r *mpitest.Rank) error {
				if err := p2pcheck.LLPCounters(r.CommWorld(), c.hits); err != nil {
					return err
				}
				if s := r.PMLStats(); c.hits && s.LLPHits == 0 {
					return fmt.Errorf("counters %+v: no LLP hit", s)
				}
				return nil
			}, append(c.opts, mpitest.WithMCA("pml_ob1_llp_max_payload_size", "64"))...)
		})
	}
}

// One stream from rank 0 to rank 1 mixes every kind of send while the
// receiver starts late and the box has two slots: the first small blocking
// sends take the LLP, the next fall back to the BTLs, and once the receiver
// drains, both paths carry messages again. The receiver sees the stream in
// the order sent.
func TestStreamInterleaved(t *testing.T) {
	n := 3000
	if testing.Short() {
		n = 700
	}
	for _, btls := range []string{"self,shm", "self,shm,tcp"} {
		t.Run(btls, func(t *testing.T) {
			mpitest.Run(t, 2, func(r *mpitest.Rank) error {
				res, err := p2pcheck.LLPStream(r.CommWorld(), n, 50*time.Millisecond)
				if err != nil {
					return err
				}
				if r.Rank() == 1 {
					// Messages of both paths overtake each other at times
					// (not always: it is a race), and wait their turn.
					t.Logf("rank 1: counters %+v", r.PMLStats())
					return nil
				}
				t.Logf("rank 0: %d candidates, %d LLP hits, %d fall-backs; counters %+v", res.Candidates, res.Hits(), res.Fallbacks(), res.After)
				if res.Hits() == 0 || res.Fallbacks() == 0 {
					return fmt.Errorf("LLP hits %d, fall-backs %d: want both", res.Hits(), res.Fallbacks())
				}
				return nil
			}, mpitest.WithMCA("btl", btls), mpitest.WithMCA("llp_tofu_slots", "2"),
				mpitest.WithMCA("pml_ob1_llp_max_payload_size", "256"),
				// With tcp, shm stays selected (tofu needs it) but tcp
				// carries the normal path.
				mpitest.WithMCA("btl_shm_exclusivity", "10"))
		})
	}
}

// The matching suite with every rank's small blocking sends on the LLP,
// with one slot per pair (most fall back) and with the default.
func TestSuite(t *testing.T) {
	for _, slots := range []string{"1", "16"} {
		t.Run("slots="+slots, func(t *testing.T) {
			mpitest.Run(t, 3, func(r *mpitest.Rank) error {
				if err := p2pcheck.Run(r.CommWorld(), p2pcheck.Options{}); err != nil {
					return err
				}
				if s := r.PMLStats(); s.LLPHits == 0 {
					return fmt.Errorf("counters %+v: no LLP hit", s)
				}
				return nil
			}, mpitest.WithMCA("llp_tofu_slots", slots))
		})
	}
}

// The files: control segments are gone once Init is done; the box appears
// with the first send, mode 0600, and is gone once the receiver has mapped
// it; a box its receiver never mapped is removed at Finalize.
func TestFiles(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	for _, receive := range []bool{true, false} {
		t.Run(fmt.Sprintf("received=%v", receive), func(t *testing.T) {
			var job string
			var finalized sync.WaitGroup
			finalized.Add(2)
			mpitest.Run(t, 2, func(r *mpitest.Rank) error {
				c, rt := r.CommWorld(), r.Runtime()
				if err := rt.Barrier(); err != nil { // every rank is past Init
					return err
				}
				if r.Rank() == 0 {
					job = r.JobID()
					if files, err := testutil.FindShmFiles(job, "tofu-*"); err != nil || len(files) != 0 {
						return fmt.Errorf("files left after Init: %v (%v)", files, err)
					}
					before := r.PMLStats()
					if err := c.Send([]byte("hello"), 1, 1); err != nil {
						return err
					}
					if s := r.PMLStats(); s.LLPHits != before.LLPHits+1 {
						return fmt.Errorf("the first send did not take the LLP: %+v", s)
					}
					files, err := testutil.FindShmFiles(job, "tofu-*")
					if err != nil {
						return err
					}
					if len(files) != 1 || !strings.HasSuffix(files[0], "-tofu-0-1") {
						return fmt.Errorf("after the first send: files %v, want the box from 0 to 1", files)
					}
					st, err := os.Lstat(files[0])
					if err != nil {
						return err
					}
					if st.Mode() != 0o600 {
						return fmt.Errorf("%s has mode %v, want -rw-------", files[0], st.Mode())
					}
				}
				if err := rt.Barrier(); err != nil { // the box exists
					return err
				}
				if r.Rank() == 1 && receive {
					buf := make([]byte, 8)
					if st, err := c.Recv(buf, 0, 1); err != nil || string(buf[:st.Count]) != "hello" {
						return fmt.Errorf("received %q, %v", buf[:st.Count], err)
					}
					if files, err := testutil.FindShmFiles(job, "tofu-*"); err != nil || len(files) != 0 {
						return fmt.Errorf("files left once the box was mapped: %v (%v)", files, err)
					}
				}
				err := r.Finalize()
				finalized.Done()
				finalized.Wait()
				if files, err := testutil.FindShmFiles(job, "tofu-*"); err != nil || len(files) != 0 {
					return fmt.Errorf("files left after Finalize: %v (%v)", files, err)
				}
				return err
			}, mpitest.WithMCA(shmem.BackingParam, "file"))
		})
	}
}

// With memfd segments (the default) tofu makes no file: the box of the
// first send is a descriptor of its sender, closed once the receiver has
// mapped it and rung the sender; after Finalize no descriptor of the job
// is left.
func TestMemfdBox(t *testing.T) {
	mpitest.Run(t, 2, func(r *mpitest.Rank) error {
		c, rt, job := r.CommWorld(), r.Runtime(), r.JobID()
		if err := rt.Barrier(); err != nil {
			return err
		}
		if r.Rank() == 0 {
			if err := c.Send([]byte("hello"), 1, 1); err != nil {
				return err
			}
			// The sender keeps the box open until rung. Both ranks share
			// this process, so a receiver adopting the box right now holds
			// a second descriptor of it for the moment between opening it
			// through /proc/<pid>/fd and mapping it.
			if fds := testutil.ShmDescriptors(0, job, "tofu-0-1"); len(fds) < 1 || len(fds) > 2 {
				return fmt.Errorf("after the first send: descriptors %v, want the box's (and at most the receiver's while it maps it)", fds)
			}
			// The receiver's answer comes after it adopted the box; the
			// Recv's progress then settles it.
			if _, err := c.Recv(nil, 1, 2); err != nil {
				return err
			}
			if fds := testutil.ShmDescriptors(0, job, "tofu-0-1"); len(fds) != 0 {
				return fmt.Errorf("the receiver has mapped the box: descriptors %v still open", fds)
			}
		} else {
			buf := make([]byte, 8)
			if _, err := c.Recv(buf, 0, 1); err != nil {
				return err
			}
			if err := c.Send(nil, 0, 2); err != nil {
				return err
			}
		}
		if files, err := testutil.FindShmFiles(job, "*"); err != nil || len(files) != 0 {
			return fmt.Errorf("files of a job with memfd segments: %v (%v)", files, err)
		}
		return nil
	}, mpitest.WithMCA(shmem.BackingParam, "memfd"))
}

// A bad value fails Init with a message that names the parameter and what
// it accepts.
func TestBadParameters(t *testing.T) {
	for _, c := range []struct{ name, value, want string }{
		{"llp_tofu_slots", "3", "llp_tofu_slots = 3: accepted: a power of two from 1 to 1024"},
		{"llp_tofu_slots", "0", "llp_tofu_slots = 0: accepted"},
		{"llp_tofu_slot_size", "100", "llp_tofu_slot_size = 100: accepted: a multiple of 64 from 64 to 65536"},
		{"llp_tofu_slot_size", "1m", "llp_tofu_slot_size = 1048576: accepted"},
	} {
		t.Run(c.name+"="+c.value, func(t *testing.T) {
			inst, err := mpi.InitWith(mpi.Options{
				Env: testutil.CleanEnv(), Output: testutil.LogWriter{T: t},
				MCA:  []params.Setting{{Name: c.name, Value: c.value}},
				Exit: func(int) { runtime.Goexit() },
			})
			if err == nil {
				inst.Finalize()
				t.Fatal("Init succeeded")
			}
			if !strings.Contains(err.Error(), c.want) || !errors.Is(err, mpierr.ErrUnsupportedParam) {
				t.Errorf("error %q: want %q, of class %v", err, c.want, mpierr.ErrUnsupportedParam)
			}
		})
	}
}

// A job of one has no peer to reach: the component declines and makes no
// file.
func TestSingletonDeclines(t *testing.T) {
	var job string
	mpitest.Run(t, 1, func(r *mpitest.Rank) error {
		job = r.JobID()
		if err := r.CommWorld().Send([]byte("x"), 0, 1); err != nil {
			return err
		}
		if _, err := r.CommWorld().Recv(make([]byte, 1), 0, 1); err != nil {
			return err
		}
		if s := r.PMLStats(); s.LLPHits+s.LLPFallbacks != 0 {
			return fmt.Errorf("counters %+v: the LLP was used", s)
		}
		return nil
	})
	if files := tofuFiles(t, job); len(files) != 0 {
		t.Errorf("files: %v", files)
	}
}

// TestOmpiInfo: the parameters are visible.
func TestOmpiInfo(t *testing.T) {
	if testing.Short() {
		t.Skip("builds ompi_info")
	}
	// Without the caller's OMPI_MCA_ settings: the values shown are the
	// defaults.
	cmd := exec.Command("go", "run", "../../../cmd/ompi_info", "--param", "llp", "tofu", "--level", "9")
	cmd.Env = testutil.CleanEnv()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, name := range []string{"llp_tofu_slots", "llp_tofu_slot_size"} {
		p, ok := mca.Default().Params().Lookup(name)
		if !ok {
			t.Fatalf("%s is not registered", name)
		}
		if want := fmt.Sprintf("%q (current value: %q", name, p.Def().Default); !strings.Contains(string(out), want) {
			t.Errorf("ompi_info does not show %s:\n%s", want, out)
		}
	}
}
