package mca_test

import (
	"testing"

	"github.com/gompi/gompi/frameworks/btl"
	"github.com/gompi/gompi/frameworks/coll"
	"github.com/gompi/gompi/frameworks/group"
	"github.com/gompi/gompi/frameworks/llp"
	"github.com/gompi/gompi/frameworks/pml"
	"github.com/gompi/gompi/mca"
	"github.com/gompi/gompi/rte"
)

// bare is a component with no framework's Query.
type bare struct{}

func (bare) Info() mca.Info            { return mca.Info{Framework: "btl", Name: "bare"} }
func (bare) Register(r *mca.Registrar) {}

// withQuery is a btl component.
type withQuery struct{ bare }

func (withQuery) Query(b *mca.Base, rt *rte.Runtime) (btl.Module, error) { return nil, nil }

// TestFrameworkChecks: registering a component that lacks its framework's
// Query fails with a message that names the interface and the signature to
// write; one that has it passes.
func TestFrameworkChecks(t *testing.T) {
	for _, c := range []struct {
		fw   *mca.Framework
		want string
	}{
		{btl.Framework, "mca_test.bare does not implement btl.Component (Query(*mca.Base, *rte.Runtime) (btl.Module, error))"},
		{coll.Framework, "mca_test.bare does not implement coll.Component (Query(*mca.Base, coll.Comm) (int, coll.Module, error))"},
		{group.Framework, "mca_test.bare does not implement group.Component (Query(*mca.Base) (int, group.Module, error))"},
		{llp.Framework, "mca_test.bare does not implement llp.Component (Query(*mca.Base, *rte.Runtime) (llp.Module, error))"},
		{pml.Framework, "mca_test.bare does not implement pml.Component (Query(*mca.Base, *pml.Env) (int, pml.Module, error))"},
	} {
		err := c.fw.Check(bare{})
		if err == nil || err.Error() != c.want {
			t.Errorf("%s: Check(bare) = %v, want %q", c.fw.Name, err, c.want)
		}
	}
	if err := btl.Framework.Check(withQuery{}); err != nil {
		t.Errorf("btl: Check of a component with btl's Query: %v", err)
	}
	if err := llp.Framework.Check(withQuery{}); err == nil {
		t.Errorf("llp: Check of a btl component passed (its Query returns btl.Module, not llp.Module)")
	}
}

// TestImplementsNeedsAnInterface: a framework declared with a concrete
// component type is a programming error, reported at once.
func TestImplementsNeedsAnInterface(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Errorf("Implements of a struct type did not panic")
		}
	}()
	mca.Implements[withQuery]()
}
