package btl_test

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/gompi/gompi/frameworks/btl"
	"github.com/gompi/gompi/mca"
	"github.com/gompi/gompi/mpierr"
	"github.com/gompi/gompi/params"
	"github.com/gompi/gompi/rte"
)

// plain is a module that moves nothing; it reaches every rank with an
// endpoint offering epFlags.
type plain struct {
	attr      btl.Attributes
	epFlags   btl.Flags
	added     bool
	finalized bool
}

type endpoint struct {
	rank  int
	flags btl.Flags
}

func (e endpoint) Rank() int        { return e.rank }
func (e endpoint) Flags() btl.Flags { return e.flags }

func (m *plain) Attributes() btl.Attributes { return m.attr }
func (m *plain) AddProcs(ranks []int) ([]btl.Endpoint, error) {
	m.added = true
	eps := make([]btl.Endpoint, len(ranks))
	for i, r := range ranks {
		eps[i] = endpoint{r, m.epFlags}
	}
	return eps, nil
}
func (m *plain) RegisterRecv(btl.Tag, btl.RecvFunc)               {}
func (m *plain) RegisterError(btl.ErrorFunc)                      {}
func (m *plain) Send(btl.Endpoint, btl.Tag, []byte, []byte) error { return nil }
func (m *plain) Sendi(btl.Endpoint, btl.Tag, []byte, []byte) bool { return false }
func (m *plain) Progress() int                                    { return 0 }
func (m *plain) Finalize() error                                  { m.finalized = true; return nil }

// withRDMA is plain with btl.RDMA.
type withRDMA struct{ plain }

func (m *withRDMA) Expose(buf []byte) []byte                                    { return nil }
func (m *withRDMA) Get(ep btl.Endpoint, desc []byte, off int, dst []byte) error { return nil }
func (m *withRDMA) Put(ep btl.Endpoint, desc []byte, off int, src []byte) error { return nil }

// newBML builds a BML of one module, named fake, for a singleton job.
func newBML(t *testing.T, m btl.Module) (*btl.BML, error) {
	t.Helper()
	rt, err := rte.Start(rte.Options{Env: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Finalize() })
	cat := mca.NewCatalog()
	cat.RegisterFramework(btl.Framework)
	b, err := mca.NewBase(mca.Options{Catalog: cat, Output: io.Discard, Reporter: true,
		Sources: params.Sources{Env: []string{"OMPI_MCA_mca_base_param_files=none"}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	sel := []mca.Selected[btl.Module]{{Entry: &mca.Entry{Info: mca.Info{Framework: "btl", Name: "fake"}}, Module: m}}
	return btl.NewBML(b, rt, sel)
}

// TestRDMASignalsAgree: a module's RDMA flags (its attributes', and its
// endpoints') and its btl.RDMA methods must say the same. A module where
// they differ is rejected before it reaches any peer, with an ErrIntern
// error naming it and what differs, and is finalized; one where they agree
// is used, with RDMA routes exactly when its endpoints offer RDMA.
func TestRDMASignalsAgree(t *testing.T) {
	get, put, both := btl.FlagGet, btl.FlagPut, btl.FlagGet|btl.FlagPut
	cases := []struct {
		name       string
		rdma       bool
		attr, ep   btl.Flags
		want       string // in the error; "" when accepted
		beforeAdds bool   // rejected before AddProcs
	}{
		{"neither", false, 0, 0, "", false},
		{"both", true, both, both, "", false},
		{"get only", true, get, get, "", false},
		{"endpoint offers less", true, both, 0, "", false},
		{"get without the methods", false, get, 0, "btl fake: its attributes offer FlagGet, but *btl_test.plain does not implement btl.RDMA", true},
		{"put without the methods", false, put, 0, "btl fake: its attributes offer FlagPut, but *btl_test.plain does not implement btl.RDMA", true},
		{"methods without flags", true, 0, 0, "btl fake: *btl_test.withRDMA implements btl.RDMA, but its attributes offer neither FlagGet nor FlagPut", true},
		{"endpoint offers more", true, get, both, "btl fake: the endpoint of rank 0 offers FlagGet|FlagPut, beyond the module's FlagGet", false},
		{"endpoint offers without the module", false, 0, get, "btl fake: the endpoint of rank 0 offers FlagGet, beyond the module's no flags", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var m btl.Module
			var p *plain
			if c.rdma {
				w := &withRDMA{plain{attr: btl.Attributes{Name: "fake", Flags: c.attr}, epFlags: c.ep}}
				m, p = w, &w.plain
			} else {
				p = &plain{attr: btl.Attributes{Name: "fake", Flags: c.attr}, epFlags: c.ep}
				m = p
			}
			bml, err := newBML(t, m)
			if c.want == "" {
				if err != nil {
					t.Fatalf("rejected: %v", err)
				}
				defer bml.Finalize()
				if rdma := len(bml.Peer(0).RDMA) > 0; rdma != (c.ep != 0) {
					t.Errorf("RDMA route: %v, want one exactly when the endpoint offers RDMA (%v)", rdma, c.ep)
				}
				return
			}
			if err == nil {
				bml.Finalize()
				t.Fatalf("accepted, want an error saying %q", c.want)
			}
			if !errors.Is(err, mpierr.ErrIntern) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q, want ErrIntern saying %q", err, c.want)
			}
			if !p.finalized {
				t.Errorf("the rejected module was not finalized")
			}
			if c.beforeAdds && p.added {
				t.Errorf("the module's AddProcs ran before it was rejected")
			}
		})
	}
}

// counting is plain with btl.SendCounter.
type counting struct {
	plain
	c btl.SendCounts
}

func (m *counting) SendCounts() btl.SendCounts { return m.c }

// BML.SendCounts reports, by name, the modules that count what they send,
// leaves out those that do not (rather than reporting zero), and is empty
// after Finalize.
func TestBMLSendCounts(t *testing.T) {
	want := btl.SendCounts{Frames: 3, Bytes: 1234}
	bml, err := newBML(t, &counting{plain{attr: btl.Attributes{Name: "fake"}}, want})
	if err != nil {
		t.Fatal(err)
	}
	if got := bml.SendCounts(); len(got) != 1 || got["fake"] != want {
		t.Errorf("SendCounts = %+v, want fake: %+v alone", got, want)
	}
	bml.Finalize()
	if got := bml.SendCounts(); len(got) != 0 {
		t.Errorf("SendCounts after Finalize = %+v, want empty", got)
	}
	quiet, err := newBML(t, &plain{attr: btl.Attributes{Name: "fake"}})
	if err != nil {
		t.Fatal(err)
	}
	defer quiet.Finalize()
	if got := quiet.SendCounts(); got == nil || len(got) != 0 {
		t.Errorf("SendCounts of a module that does not count = %#v, want an empty map", got)
	}
}
