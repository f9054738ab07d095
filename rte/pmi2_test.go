package rte_test

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/gompi/gompi/rte"
	"github.com/gompi/gompi/rte/pmi/pmi2test"
)

// TestStartPMI2 starts four ranks the way srun --mpi=pmi2 does (PMI_FD,
// PMI_RANK, PMI_SIZE, PMI_JOBID, SLURM_MPI_TYPE=pmi2) against a server that
// behaves as Slurm's: rank 0 makes the cookie, the mapping comes from
// info-getjobattr, and the modex's business cards, whose bytes include ';',
// cross two fences without a ';' or an unknown command on the wire.
func TestStartPMI2(t *testing.T) {
	const n = 4
	s := pmi2test.NewServer(n)
	s.JobID = "42.0"
	var wg sync.WaitGroup
	errs := make(chan error, n)
	cookies := make([][rte.CookieLen]byte, n)
	for rank := 0; rank < n; rank++ {
		task, stepd, err := pmi2test.SocketPair()
		if err != nil {
			t.Fatal(err)
		}
		s.Start(rank, stepd)
		env := []string{fmt.Sprintf("PMI_FD=%d", task), fmt.Sprintf("PMI_RANK=%d", rank), fmt.Sprintf("PMI_SIZE=%d", n),
			"PMI_JOBID=42.0", "SLURM_MPI_TYPE=pmi2", "SLURMD_NODENAME=n1"}
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := func() error {
				rt, err := rte.Start(rte.Options{Env: env})
				if err != nil {
					return err
				}
				j := rt.Job()
				if j.Rank != rank || j.Size != n || j.Singleton || j.LocalSize != n || j.LocalRank != rank || j.NodeIndex != 0 || j.Node != "n1" {
					return fmt.Errorf("job %+v", *j)
				}
				cookies[rank] = j.Cookie
				m := rt.Modex()
				for fence := 0; fence < 2; fence++ {
					if err := m.PutProc("card", procValue(fmt.Sprintf("card%d", fence), rank)); err != nil {
						return err
					}
					if err := m.Fence(t.Context()); err != nil {
						return fmt.Errorf("fence %d: %w", fence, err)
					}
					for p := 0; p < n; p++ {
						v, err := m.GetProc(p, "card")
						if err != nil || !bytes.Equal(v, procValue(fmt.Sprintf("card%d", fence), p)) {
							return fmt.Errorf("fence %d: GetProc(%d) = %q, %v", fence, p, v, err)
						}
					}
				}
				return rt.Finalize()
			}()
			if err != nil {
				errs <- fmt.Errorf("rank %d: %w", rank, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	s.Wait()
	if u := s.Unknown(); len(u) > 0 {
		t.Errorf("commands Slurm does not know: %q", u)
	}
	if b := s.Broken(); len(b) > 0 {
		t.Errorf("protocol broken: %q", b)
	}
	for r := 1; r < n; r++ {
		if cookies[r] != cookies[0] {
			t.Errorf("rank %d has another cookie than rank 0", r)
		}
	}
	if cookies[0] == [rte.CookieLen]byte{} {
		t.Error("no cookie")
	}
	puts := 0
	for _, f := range s.Received() {
		if strings.HasPrefix(f, "cmd=kvs-put;") {
			puts++
			// The only ';' of a put ends its pairs.
			if strings.Count(f, ";") != 3 {
				t.Errorf("put %q: a value holds ';'", f)
			}
		}
	}
	// The cookie, and one node blob per fence (all ranks on one node).
	if puts != 3 {
		t.Errorf("%d puts, want 3", puts)
	}
}

// TestStartUnderSrunWithoutPMI: srun without --mpi=pmi2 starts several
// tasks with no PMI; each must fail at Start rather than run as a singleton.
// A step of one task may.
func TestStartUnderSrunWithoutPMI(t *testing.T) {
	_, err := rte.Start(rte.Options{Env: []string{"SLURM_STEP_NUM_TASKS=4", "SLURM_PROCID=2", "SLURM_MPI_TYPE=none"}})
	if !errors.Is(err, rte.ErrForeignLauncher) || !strings.Contains(err.Error(), "SLURM_STEP_NUM_TASKS=4") || !strings.Contains(err.Error(), "srun --mpi=pmi2") {
		t.Errorf("Start under srun -n 4 without PMI: %v", err)
	}
	rt, err := rte.Start(rte.Options{Env: []string{"SLURM_STEP_NUM_TASKS=1", "SLURM_PROCID=0"}})
	if err != nil {
		t.Fatalf("Start under srun -n 1: %v", err)
	}
	if !rt.Job().Singleton {
		t.Error("a step of one task without PMI is not a singleton")
	}
	if err := rt.Finalize(); err != nil {
		t.Error(err)
	}
}
