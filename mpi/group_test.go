package mpi_test

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/gompi/gompi/mpi"
	"github.com/gompi/gompi/mpierr"
	"github.com/gompi/gompi/mpitest"
	"github.com/gompi/gompi/params"
)

func TestWorldAndSelfGroups(t *testing.T) {
	mpitest.Run(t, 1, func(r *mpitest.Rank) error {
		w, s := r.WorldGroup(), r.SelfGroup()
		for _, g := range []*mpi.Group{w, s} {
			if n, err := g.Size(); n != 1 || err != nil {
				t.Errorf("size %d, %v", n, err)
			}
			if me, err := g.Rank(); me != 0 || err != nil {
				t.Errorf("rank %d, %v", me, err)
			}
		}
		if c, err := w.Compare(s); c != mpi.Ident || err != nil {
			t.Errorf("world vs self: %v, %v", c, err)
		}
		if got, err := s.TranslateRanks([]int{0, mpi.ProcNull}, w); !slices.Equal(got, []int{0, mpi.ProcNull}) || err != nil {
			t.Errorf("self → world: %v, %v", got, err)
		}
		// Each call makes a new handle: freeing one leaves the next valid.
		if err := w.Free(); err != nil {
			return err
		}
		if _, err := w.Size(); !errors.Is(err, mpierr.ErrGroup) {
			t.Errorf("a freed handle: %v", err)
		}
		if n, err := r.WorldGroup().Size(); n != 1 || err != nil {
			t.Errorf("a new world handle after Free: %d, %v", n, err)
		}
		return nil
	})
}

// singleton starts an instance with no launcher and the given settings,
// returning what it logged.
func singleton(t *testing.T, settings ...string) (*mpi.Instance, *bytes.Buffer, error) {
	t.Helper()
	var mca []params.Setting
	for i := 0; i+1 < len(settings); i += 2 {
		mca = append(mca, params.Setting{Name: settings[i], Value: settings[i+1]})
	}
	var out bytes.Buffer
	inst, err := mpi.InitWith(mpi.Options{Env: []string{"OMPI_MCA_mca_base_param_files=none"}, MCA: mca, Output: &out,
		Exit: func(int) { t.Error("the instance exited") }})
	return inst, &out, err
}

func TestSparseGroupsAtInit(t *testing.T) {
	for _, c := range []struct {
		settings []string
		want     string
	}{
		{nil, "component=dense"},
		{[]string{"mpi_use_sparse_groups", "1"}, "component=sparse"},
		{[]string{"mpi_use_sparse_group_storage", "on"}, "component=sparse"},
	} {
		inst, out, err := singleton(t, append(c.settings, "group_base_verbose", "10")...)
		if err != nil {
			t.Fatal(err)
		}
		// Every component queried is named in the log: only the line of
		// the selection tells which one won.
		selected := ""
		for _, l := range strings.Split(out.String(), "\n") {
			if strings.Contains(l, "selected component:") {
				selected = l
			}
		}
		if !strings.Contains(selected, " "+c.want+" ") {
			t.Errorf("%v: the log says %q, not %s:\n%s", c.settings, selected, c.want, out)
		}
		if n, err := inst.WorldGroup().Size(); n != 1 || err != nil {
			t.Errorf("world size %d, %v", n, err)
		}
		if err := inst.Finalize(); err != nil {
			t.Fatal(err)
		}
	}
}

// Asking for sparse groups while excluding the sparse component stops Init
// with an error that names both parameters.
func TestSparseExcludedFailsInit(t *testing.T) {
	_, _, err := singleton(t, "group", "^sparse", "mpi_use_sparse_groups", "1")
	if err == nil {
		t.Fatal("Init succeeded")
	}
	for _, p := range []string{"mpi_use_sparse_groups = true (source: command line)", `group = "^sparse" (source: command line)`} {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("error %q does not say %q", err, p)
		}
	}
	if !errors.Is(err, mpierr.ErrUnsupportedParam) {
		t.Errorf("error %q has class %s", err, mpierr.ClassOf(err).Name())
	}
}
