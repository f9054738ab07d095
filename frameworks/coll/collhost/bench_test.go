package collhost

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/gompi/gompi/frameworks/coll"
	"github.com/gompi/gompi/frameworks/pml"
	"github.com/gompi/gompi/internal/testutil"
	"github.com/gompi/gompi/mca"
	"github.com/gompi/gompi/params"
)

// shape is a communicator as Query sees it: a size and a rank.
type shape struct{ size, rank int }

func (s shape) Rank() int                                 { return s.rank }
func (s shape) Size() int                                 { return s.size }
func (s shape) Name() string                              { return "bench" }
func (s shape) LLP() bool                                 { return false }
func (s shape) Send([]byte, int, int) error               { panic("not for sending") }
func (s shape) Recv([]byte, int, int) (pml.Status, error) { panic("not for sending") }
func (s shape) Sendrecv([]byte, int, int, []byte, int, int) (pml.Status, error) {
	panic("not for sending")
}
func (s shape) Isend([]byte, int, int) (*pml.Request, error) { panic("not for sending") }
func (s shape) Irecv([]byte, int, int) (*pml.Request, error) { panic("not for sending") }

var _ coll.Comm = shape{}

// openPlugin builds the test plugin, loads it through the default
// catalogue and opens it for a new Base.
func openPlugin(b *testing.B) (*mca.Base, *component) {
	dir := b.TempDir()
	testutil.Install(b, "../collplugin/internal/testplugin", filepath.Join(dir, "gompi-coll-good"))
	base, err := mca.NewBase(mca.Options{Rank: -1, Output: os.Stderr, Sources: params.Sources{
		CommandLine: []params.Setting{{Name: mca.ComponentPathName, Value: dir}},
		Env:         []string{"OMPI_MCA_mca_base_param_files=none"}}})
	if err != nil {
		b.Fatal(err)
	}
	es := mca.Default().Components("coll")
	if len(es) != 1 {
		b.Fatalf("components %v, skipped %v", es, mca.Default().Skipped())
	}
	c := es[0].Component.(*component)
	if err := c.Open(base); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close(base) })
	return base, c
}

// The set-up cost of a plugin per communicator: the first communicator of
// a shape costs one call to the plugin (its schedules, decoded and
// validated); later ones of that shape are answered from the cache.
func BenchmarkPluginQuery(b *testing.B) {
	base, c := openPlugin(b)
	b.Run("new-shape", func(b *testing.B) {
		for i := range b.N {
			if _, _, err := c.Query(base, shape{size: 64 + i, rank: i % 64}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("cached", func(b *testing.B) {
		for range b.N {
			if _, _, err := c.Query(base, shape{size: 64, rank: 3}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
