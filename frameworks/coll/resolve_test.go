package coll_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/gompi/gompi/frameworks/coll"
	"github.com/gompi/gompi/frameworks/coll/colltest"
	"github.com/gompi/gompi/mca"
	"github.com/gompi/gompi/mpierr"
	"github.com/gompi/gompi/params"
)

// fakeComp is a coll component whose module fills the slots the test
// names; interComp is one that implements coll.InterComponent too.
type fakeComp struct {
	name    string
	prio    int
	ops     []coll.Op
	decline string
	mods    []*fakeMod
}

func (c *fakeComp) Info() mca.Info {
	return mca.Info{Framework: "coll", Name: c.name, API: coll.Framework.API, Priority: c.prio}
}
func (c *fakeComp) Register(r *mca.Registrar) {}

func (c *fakeComp) Query(b *mca.Base, comm coll.Comm) (int, coll.Module, error) { return c.query() }

func (c *fakeComp) query() (int, coll.Module, error) {
	if c.decline != "" {
		return 0, nil, mca.Decline("%s", c.decline)
	}
	m := &fakeMod{name: c.name}
	for _, op := range c.ops {
		m.slots[op] = func(coll.Comm, *coll.Args) error { return nil }
	}
	c.mods = append(c.mods, m)
	return c.prio, m, nil
}

type interComp struct{ fakeComp }

func (c *interComp) QueryInter(b *mca.Base, comm coll.Inter) (int, coll.Module, error) {
	return c.query()
}

// fakeMod stacks on the module below it and counts its end.
type fakeMod struct {
	name      string
	slots     coll.Slots
	below     map[coll.Op]bool
	finalized int
}

func (m *fakeMod) Func(op coll.Op) coll.Func { return m.slots[op] }
func (m *fakeMod) Stack(op coll.Op, below coll.Func) {
	if m.below == nil {
		m.below = map[coll.Op]bool{}
	}
	m.below[op] = below != nil
}
func (m *fakeMod) Finalize() error { m.finalized++; return nil }

// inter is an intercommunicator view of a colltest rank, enough for
// resolving a table.
type inter struct {
	coll.Comm
	remote int
}

func (c inter) RemoteSize() int  { return c.remote }
func (c inter) Local() coll.Comm { return c.Comm }

// newBase makes a Base over a private catalogue of comps, with
// coll_base_verbose 10 and the settings (name, value, ...).
func newBase(t *testing.T, settings []string, comps ...mca.Component) (*mca.Base, *bytes.Buffer) {
	t.Helper()
	sets := []params.Setting{{Name: "coll_base_verbose", Value: "10"}}
	for i := 0; i+1 < len(settings); i += 2 {
		sets = append(sets, params.Setting{Name: settings[i], Value: settings[i+1]})
	}
	cat := mca.NewCatalog()
	cat.RegisterFramework(coll.Framework)
	for _, c := range comps {
		cat.Register(c, mca.Builtin)
	}
	var out bytes.Buffer
	b, err := mca.NewBase(mca.Options{Catalog: cat, Output: &out, Rank: 0, Reporter: true,
		Sources: params.Sources{Env: []string{"OMPI_MCA_mca_base_param_files=none"},
			CommandLine: sets}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b, &out
}

// TestResolve: each slot comes from the highest-priority module that fills
// it, a Stacker learns what lies below it, the table is logged, and its
// modules end with it.
func TestResolve(t *testing.T) {
	hi := &fakeComp{name: "hi", prio: 30, ops: []coll.Op{coll.Barrier, coll.Bcast}}
	lo := &fakeComp{name: "lo", prio: 10, ops: coll.Ops()}
	no := &fakeComp{name: "no", prio: 50, decline: "not today"}
	b, out := newBase(t, nil, hi, lo, no)
	tbl, err := coll.Resolve(b, colltest.NewWorld(3, false).Comm(0))
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range coll.Ops() {
		want := "lo"
		if op == coll.Barrier || op == coll.Bcast {
			want = "hi"
		}
		if got := tbl.From(op); got != want {
			t.Errorf("%s from %q, want %q", op, got, want)
		}
	}
	if !strings.Contains(tbl.String(), "barrier=hi>lo bcast=hi>lo reduce=lo ") {
		t.Errorf("table %q: want barrier and bcast from hi over lo", tbl.String())
	}
	if h := hi.mods[0]; !h.below[coll.Barrier] || !h.below[coll.Bcast] || len(h.below) != 2 {
		t.Errorf("hi was stacked on %v, want barrier and bcast with a function below", h.below)
	}
	if l := lo.mods[0]; len(l.below) != int(coll.NumOps) || l.below[coll.Barrier] {
		t.Errorf("lo was stacked on %v, want every slot with nothing below", l.below)
	}
	if !strings.Contains(out.String(), `slot table`) || !strings.Contains(out.String(), "comm=colltest size=3 table=") {
		t.Errorf("no slot table in the log:\n%s", out)
	}
	if err := tbl.Finalize(); err != nil {
		t.Fatal(err)
	}
	if hi.mods[0].finalized != 1 || lo.mods[0].finalized != 1 {
		t.Errorf("modules ended %d and %d times, want once each", hi.mods[0].finalized, lo.mods[0].finalized)
	}
}

// TestResolveInter: only InterComponents are asked; slots nobody fills are
// allowed but fail when called; barrier must be filled.
func TestResolveInter(t *testing.T) {
	ic := &interComp{fakeComp{name: "ic", prio: 5, ops: []coll.Op{coll.Barrier}}}
	intra := &fakeComp{name: "intra", prio: 90, ops: coll.Ops()}
	b, out := newBase(t, nil, ic, intra)
	c := inter{colltest.NewWorld(2, false).Comm(0), 3}
	tbl, err := coll.ResolveInter(b, c)
	if err != nil {
		t.Fatal(err)
	}
	defer tbl.Finalize()
	if tbl.From(coll.Barrier) != "ic" || tbl.From(coll.Bcast) != "" || len(intra.mods) != 0 {
		t.Errorf("table %q, intra asked %d times: want the barrier from ic alone", tbl, len(intra.mods))
	}
	if err := tbl.Call(coll.Bcast, c, &coll.Args{}); !errors.Is(err, mpierr.ErrUnsupportedOp) {
		t.Errorf("an unfilled slot's call: %v, want ErrUnsupportedOp", err)
	}
	if !strings.Contains(out.String(), "size=2 remote_size=3 table=") {
		t.Errorf("no intercommunicator slot table in the log:\n%s", out)
	}
}

// TestResolveMissing: a required slot nobody fills is an error that names
// the communicator, the slots, the modules asked and the components excluded
// and declining; the modules that were made end.
func TestResolveMissing(t *testing.T) {
	cases := []struct {
		name  string
		inter bool
		parts []string
	}{
		{"intra", false, []string{"coll: communicator colltest (4 ranks): no module fills reduce, allreduce, gather",
			"reduce_scatter_block;", "modules asked: some (priority 20), ic (priority 5);", `excluded: gone (by coll = "^gone"`,
			"declined: no (not today)"}},
		{"inter", true, []string{"coll: intercommunicator colltest (4 ranks, remote group of 2): no module fills barrier;",
			"modules asked: none;", `excluded: gone (by coll = "^gone"`, "declined: ic (refuses),", "no (no intercommunicator algorithms)",
			"some (no intercommunicator algorithms)"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			some := &fakeComp{name: "some", prio: 20, ops: []coll.Op{coll.Barrier, coll.Bcast}}
			ic := &interComp{fakeComp{name: "ic", prio: 5, ops: []coll.Op{coll.Bcast}}}
			if tc.inter {
				ic.decline = "refuses"
			}
			no := &fakeComp{name: "no", decline: "not today"}
			gone := &fakeComp{name: "gone", ops: coll.Ops()}
			b, _ := newBase(t, []string{"coll", "^gone"}, some, ic, no, gone)
			c := colltest.NewWorld(4, false).Comm(1)
			var err error
			if tc.inter {
				_, err = coll.ResolveInter(b, inter{c, 2})
			} else {
				_, err = coll.Resolve(b, c)
			}
			if !errors.Is(err, mpierr.ErrComponentNotFound) {
				t.Fatalf("error %v, want ErrComponentNotFound", err)
			}
			for _, p := range tc.parts {
				if !strings.Contains(err.Error(), p) {
					t.Errorf("error %q does not say %q", err, p)
				}
			}
			for _, m := range append(some.mods, ic.mods...) {
				if m.finalized != 1 {
					t.Errorf("module of %s ended %d times, want once", m.name, m.finalized)
				}
			}
		})
	}
}
