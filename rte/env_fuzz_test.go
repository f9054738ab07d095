package rte

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/gompi/gompi/mpierr"
	"github.com/gompi/gompi/rte/pmi"
)

// FuzzEnv: a rank's environment comes from its launcher. What rte reads of
// it is refused with an error of the class its reader documents, naming
// the variable, or read as written: a rank and size in decimal with the
// rank below the size, a PMI wire of 1 or 2, a foreign launcher named by a
// variable that is set, GOMPI_OVERSUBSCRIBED of 0 or 1.
func FuzzEnv(f *testing.F) {
	for _, e := range []string{
		"PMI_RANK=1\x00PMI_SIZE=4\x00PMI_FD=3",
		"PMI_RANK=0\x00PMI_SIZE=1\x00GOMPI_OVERSUBSCRIBED=1\x00GOMPI_PMI=2",
		"PMI_RANK=4\x00PMI_SIZE=4",
		"PMI_RANK= 1\x00PMI_SIZE=0x4",
		"PMI_RANK=1 2\x00PMI_SIZE=3",
		"SLURM_MPI_TYPE=pmi2\x00PMI_JOBID=5.0\x00SLURM_STEP_NUM_TASKS=2\x00GOMPI_OVERSUBSCRIBED=yes",
		"OMPI_COMM_WORLD_SIZE=2\x00GOMPI_PMI=3",
	} {
		f.Add(e)
	}
	f.Fuzz(func(t *testing.T, text string) {
		env := envMap(strings.Split(text, "\x00"))
		rank, size, err := rankSize(env)
		if err != nil {
			if !errors.Is(err, mpierr.ErrIntern) || !strings.Contains(err.Error(), "PMI_") {
				t.Fatalf("rankSize(%q): %v lacks ErrIntern or the variable", env, err)
			}
		} else {
			r, rerr := strconv.Atoi(env["PMI_RANK"])
			s, serr := strconv.Atoi(env["PMI_SIZE"])
			if rerr != nil || serr != nil || r != rank || s != size || rank < 0 || rank >= size {
				t.Fatalf("rankSize: PMI_RANK=%q PMI_SIZE=%q read as rank %d of %d", env["PMI_RANK"], env["PMI_SIZE"], rank, size)
			}
		}

		if v, err := pmi.WireVersion(env); err != nil {
			if !errors.Is(err, mpierr.ErrArg) || !strings.Contains(err.Error(), pmi.VersionEnv) {
				t.Fatalf("WireVersion(%q): %v lacks ErrArg or the variable", env, err)
			}
		} else if v != 1 && v != 2 || env[pmi.VersionEnv] != "" && strconv.Itoa(v) != env[pmi.VersionEnv] {
			t.Fatalf("WireVersion(%q) = %d", env, v)
		}

		if k := foreignLauncher(env); k != "" {
			name, _, _ := strings.Cut(k, "=")
			if _, ok := env[name]; !ok {
				t.Fatalf("foreignLauncher(%q) = %q, which is not set", env, k)
			}
		}

		if v, ok := env[OversubscribedEnv]; ok {
			rt := &Runtime{}
			err := rt.placeCores(env)
			switch {
			case err != nil && (!errors.Is(err, mpierr.ErrIntern) || !strings.Contains(err.Error(), OversubscribedEnv)):
				t.Fatalf("placeCores(%s=%q): %v lacks ErrIntern or the variable", OversubscribedEnv, v, err)
			case err == nil && (v != "0" && v != "1" || rt.job.Oversubscribed != (v == "1") || rt.job.OversubscribedBy != "mpirun"):
				t.Fatalf("placeCores(%s=%q): oversubscribed %v by %q", OversubscribedEnv, v, rt.job.Oversubscribed, rt.job.OversubscribedBy)
			}
		}
	})
}
