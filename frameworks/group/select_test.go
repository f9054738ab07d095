package group_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/gompi/gompi/components/group/dense"
	"github.com/gompi/gompi/components/group/sparse"
	"github.com/gompi/gompi/frameworks/group"
	"github.com/gompi/gompi/mca"
	"github.com/gompi/gompi/mpierr"
	"github.com/gompi/gompi/params"
)

// newBase makes a Base over a private catalogue with the group framework
// and the given components, with the settings at command-line precedence
// and env as the environment.
func newBase(t *testing.T, comps []mca.Component, env []string, settings ...string) (*mca.Base, *bytes.Buffer, error) {
	t.Helper()
	cat := mca.NewCatalog()
	cat.RegisterFramework(group.Framework)
	for _, c := range comps {
		cat.Register(c, mca.Builtin)
	}
	var sets []params.Setting
	for i := 0; i+1 < len(settings); i += 2 {
		sets = append(sets, params.Setting{Name: settings[i], Value: settings[i+1]})
	}
	var out bytes.Buffer
	b, err := mca.NewBase(mca.Options{Catalog: cat, Output: &out, Rank: 0, Reporter: true,
		Sources: params.Sources{Env: append([]string{"OMPI_MCA_mca_base_param_files=none"}, env...), CommandLine: sets}})
	return b, &out, err
}

func both() []mca.Component { return []mca.Component{&dense.Component{}, &sparse.Component{}} }

func TestSelect(t *testing.T) {
	cases := []struct {
		name     string
		comps    []mca.Component
		env      []string
		settings []string
		want     string   // selected component, or "" for an error
		parts    []string // in the error, or in the output
	}{
		{"dense by default", both(), nil, nil, "dense", nil},
		{"sparse when asked", both(), nil, []string{"mpi_use_sparse_groups", "1"}, "sparse", nil},
		{"sparse from the environment", both(), []string{"OMPI_MCA_mpi_use_sparse_groups=yes"}, nil, "sparse", nil},
		{"sparse through the deprecated synonym", both(), nil, []string{"mpi_use_sparse_group_storage", "true"}, "sparse",
			[]string{"mpi_use_sparse_group_storage"}},
		{"sparse off explicitly", both(), nil, []string{"mpi_use_sparse_groups", "off"}, "dense", nil},
		{"excluding sparse without asking for it", both(), nil, []string{"group", "^sparse"}, "dense", nil},
		{"only dense", both(), nil, []string{"group", "dense"}, "dense", nil},
		{"sparse excluded while asked for", both(), nil, []string{"group", "^sparse", "mpi_use_sparse_groups", "1"}, "",
			[]string{"mpi_use_sparse_groups = true (source: command line)", `group = "^sparse" (source: command line)`, "excludes the sparse component"}},
		{"sparse left out of an inclusion while asked for", both(), []string{"OMPI_MCA_group=dense"}, []string{"mpi_use_sparse_groups", "1"}, "",
			[]string{"mpi_use_sparse_groups = true", `group = "dense" (source: environment)`}},
		{"only sparse but not asked for", both(), nil, []string{"group", "sparse"}, "",
			[]string{"no component of the group framework", "sparse (mpi_use_sparse_groups = false (source: default); set it to 1"}},
		{"asked for sparse in a build without it", []mca.Component{&dense.Component{}}, nil, []string{"mpi_use_sparse_groups", "1"}, "",
			[]string{"has no group sparse component", "dense"}},
		{"priority parameter overrides", both(), nil, []string{"mpi_use_sparse_groups", "1", "group_dense_priority", "50"}, "dense", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b, out, err := newBase(t, c.comps, c.env, c.settings...)
			if err != nil {
				t.Fatal(err)
			}
			m, e, err := group.Select(b)
			if c.want == "" {
				if err == nil {
					t.Fatalf("selected %s, want an error", e.Info.Name)
				}
				for _, p := range c.parts {
					if !strings.Contains(err.Error(), p) {
						t.Errorf("error %q does not say %q", err, p)
					}
				}
				if !errors.Is(err, mpierr.ErrUnsupportedParam) && !errors.Is(err, mpierr.ErrComponentNotFound) {
					t.Errorf("error %q has class %s", err, mpierr.ClassOf(err).Name())
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if e.Info.Name != c.want {
				t.Fatalf("selected %s, want %s", e.Info.Name, c.want)
			}
			switch m.(type) {
			case dense.Module:
				if c.want != "dense" {
					t.Errorf("module %T", m)
				}
			case sparse.Module:
				if c.want != "sparse" {
					t.Errorf("module %T", m)
				}
			default:
				t.Errorf("module %T", m)
			}
			for _, p := range c.parts {
				if !strings.Contains(out.String(), p) {
					t.Errorf("output %q does not say %q", out, p)
				}
			}
		})
	}
}

func TestExclusionErrorClass(t *testing.T) {
	b, _, err := newBase(t, both(), nil, "group", "^sparse", "mpi_use_sparse_groups", "1")
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = group.Select(b)
	if mpierr.ClassOf(err) != mpierr.ErrUnsupportedParam {
		t.Fatalf("error %v has class %s, want GOMPI_ERR_PARAM", err, mpierr.ClassOf(err).Name())
	}
}

func TestDeclineIsLogged(t *testing.T) {
	b, out, err := newBase(t, both(), nil, "group_base_verbose", "10")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := group.Select(b); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"component declined", "component=sparse", "mpi_use_sparse_groups = false", "selected component", "component=dense"} {
		if !strings.Contains(out.String(), p) {
			t.Errorf("verbose output %q does not say %q", out, p)
		}
	}
}

// The sparse module logs each group's storage at verbosity 60.
func TestSparseLogsStorage(t *testing.T) {
	b, out, err := newBase(t, both(), nil, "group_base_verbose", "60", "mpi_use_sparse_groups", "1")
	if err != nil {
		t.Fatal(err)
	}
	m, _, err := group.Select(b)
	if err != nil {
		t.Fatal(err)
	}
	o := group.Ops{Module: m}
	w, _ := o.World(100)
	if _, err := o.RangeIncl(w, [][3]int{{0, 99, 2}}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "stored group") || !strings.Contains(out.String(), "format=stride") {
		t.Errorf("output %q does not log the stride group", out)
	}
}
