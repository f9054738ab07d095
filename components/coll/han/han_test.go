package han_test

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/gompi/gompi/components/coll/han"
	"github.com/gompi/gompi/internal/collcheck"
	"github.com/gompi/gompi/mpi"
	"github.com/gompi/gompi/mpierr"
	"github.com/gompi/gompi/mpitest"
)

// layouts are fake node layouts: node k of rank r is nodes[r].
var layouts = []struct {
	name  string
	nodes []int
}{
	{"2x2", []int{0, 0, 1, 1}},
	{"2 nodes interleaved", []int{0, 1, 0, 1, 0}},
	{"nodes of 1,2,3,5 consecutive", []int{0, 1, 1, 2, 2, 2, 3, 3, 3, 3, 3}},
	{"nodes of 5,2,3,1 scattered", []int{0, 1, 0, 2, 0, 3, 2, 0, 1, 2, 0}},
	{"8 nodes", []int{0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3}},
}

// hanOps are the checks of the operations han fills (gather and allgather
// include their v forms, which han fills for allgatherv only).
var hanOps = []string{"barrier", "bcast", "reduce", "allreduce", "gather", "scatter", "allgather"}

func opts(nodes []int, extra ...mpitest.Option) []mpitest.Option {
	return append([]mpitest.Option{mpitest.WithNodes(nodes), mpitest.WithMCA("btl", "self,shm,tcp")}, extra...)
}

// hanOn checks that han fills c's slots over the components below it.
func hanOn(c *mpi.Comm) error {
	table := c.CollTable()
	for _, op := range []string{"barrier", "bcast", "reduce", "allreduce", "gather", "scatter", "allgather", "allgatherv"} {
		if !strings.Contains(" "+table+" ", " "+op+"=han>") {
			return fmt.Errorf("%s's table %q: %s is not han's", c.Name(), table, op)
		}
	}
	return nil
}

// TestConformance runs the collectives suite through han on fake node
// layouts (2 to 8 nodes, nodes of 1, 2, 3 and 5 ranks, ranks of a node not
// consecutive), every root, in place, with segments much smaller than the
// larger messages so that the pipeline runs; on the world and on a split
// communicator that spans nodes too; and checks that a node's own
// communicator is not han's.
func TestConformance(t *testing.T) {
	for _, l := range layouts {
		if testing.Short() && len(l.nodes) > 5 {
			continue
		}
		t.Run(l.name, func(t *testing.T) {
			n := len(l.nodes)
			o := collcheck.Options{AllRoots: true, Only: hanOps, Counts: []int{0, 1, 7, 1000}}
			if testing.Short() {
				o.Counts, o.AllRoots = []int{1, 1000}, false
			}
			mpitest.Run(t, n, func(r *mpitest.Rank) error {
				w := r.CommWorld()
				if err := hanOn(w); err != nil {
					return err
				}
				if err := collcheck.Run(w, o); err != nil {
					return err
				}
				// Half the ranks, still over several nodes (or one: then
				// no han).
				half, err := w.Split(w.Rank()%2, w.Size()-w.Rank())
				if err != nil {
					return err
				}
				if err := collcheck.Run(half, o); err != nil {
					return err
				}
				node, err := w.SplitType(mpi.SplitShared, 0)
				if err != nil {
					return err
				}
				if strings.Contains(node.CollTable(), "han") {
					return fmt.Errorf("a node's communicator %s has han in its table: %s", node.Name(), node.CollTable())
				}
				// Nonblocking and persistent collectives: han's phases for
				// barrier, bcast, reduce and allreduce (the components below
				// it for the rest and for the calls it passes on), several
				// in flight, beside blocking ones and point-to-point.
				for _, mode := range []collcheck.Mode{collcheck.Nonblocking, collcheck.Persistent} {
					no := o
					no.Mode, no.Runs = mode, 2
					for _, cm := range []*mpi.Comm{w, half} {
						if err := collcheck.Run(cm, no); err != nil {
							return fmt.Errorf("%s on %s: %w", mode, cm.Name(), err)
						}
					}
				}
				return errors.Join(half.Free(), node.Free())
			}, opts(l.nodes, mpitest.WithMCA("coll_han_segment_bytes", "1k"),
				// The largest count's nonblocking calls go below han.
				mpitest.WithMCA(han.NonblockingMaxParam, "4k"))...)
		})
	}
}

// TestSegmentSizes: segments of one element, of a size that does not
// divide the elements, and none.
func TestSegmentSizes(t *testing.T) {
	for _, c := range []struct {
		seg    string
		counts []int
	}{{"8", []int{1, 3}}, {"100", []int{1, 7, 33}}, {"0", []int{1, 7, 33}}} {
		t.Run(c.seg, func(t *testing.T) {
			if testing.Short() && c.seg == "8" {
				t.Skip("a nonblocking start per element: slow under -race; the plain run covers it")
			}
			mpitest.Run(t, 5, func(r *mpitest.Rank) error {
				return collcheck.Run(r.CommWorld(), collcheck.Options{Only: []string{"bcast", "reduce", "allreduce"}, Counts: c.counts})
			}, opts([]int{0, 1, 0, 1, 0}, mpitest.WithMCA("coll_han_segment_bytes", c.seg))...)
		})
	}
}

// TestPhaseComponents: a component named for a phase runs it (the results
// stay right); a name that is no component, or one that does not fill the
// phase's operation there, is an error naming what is accepted.
func TestPhaseComponents(t *testing.T) {
	nodes := []int{0, 0, 1, 1, 1}
	mpitest.Run(t, len(nodes), func(r *mpitest.Rank) error {
		return collcheck.Run(r.CommWorld(), collcheck.Options{Only: hanOps, Counts: []int{1, 1000}})
	}, opts(nodes, mpitest.WithMCA("coll_han_allreduce_low", "tuned"), mpitest.WithMCA("coll_han_allreduce_up", "basic"),
		mpitest.WithMCA("coll_han_bcast_up", "basic"), mpitest.WithMCA("coll_han_segment_bytes", "1k"))...)

	err := mpitest.RunErr(len(nodes), func(r *mpitest.Rank) error { return nil },
		opts(nodes, mpitest.WithMCA("coll_han_reduce_up", "tunde"))...)
	if !errors.Is(err, mpierr.ErrArg) || !strings.Contains(err.Error(), "coll_han_reduce_up") || !strings.Contains(err.Error(), "tuned") {
		t.Errorf("a phase naming no component: %v; want ErrArg naming the parameter and the accepted components", err)
	}

	// Only the leaders have the leaders' part to find sm missing from;
	// every rank must still get the error, none waiting in a phase.
	errs := make([]error, len(nodes))
	mpitest.Run(t, len(nodes), func(r *mpitest.Rank) error {
		errs[r.Rank()] = mpi.Allreduce(r.CommWorld(), []int64{1}, make([]int64, 1), mpi.Sum)
		return nil
	}, opts(nodes, mpitest.WithMCA("coll_han_allreduce_up", "sm"))...)
	for rank, err := range errs {
		if !errors.Is(err, mpierr.ErrArg) || !strings.Contains(err.Error(), "coll_han_allreduce_up") {
			t.Errorf("rank %d, a phase naming a component that does not fill it: %v; want ErrArg naming the parameter", rank, err)
		}
		if leader := rank == 0 || rank == 2; leader && !strings.Contains(err.Error(), "accepted there: tuned") {
			t.Errorf("leader %d: %v; want the components that fill allreduce there", rank, err)
		}
	}
}

// TestOneNode: han declines a communicator within one node and one whose
// every rank is on a node of its own.
func TestOneNode(t *testing.T) {
	for _, nodes := range [][]int{{0, 0, 0}, {0, 1, 2}} {
		mpitest.Run(t, len(nodes), func(r *mpitest.Rank) error {
			if table := r.CommWorld().CollTable(); strings.Contains(table, "han") {
				return fmt.Errorf("nodes %v: han in the world's table: %s", nodes, table)
			}
			return nil
		}, opts(nodes)...)
	}
}

// everyMode runs o's checks blocking, nonblocking and persistent (several
// in flight, beside blocking calls and point-to-point): the spread forms
// run as plans of the same steps.
func everyMode(c *mpi.Comm, o collcheck.Options) error {
	for _, mode := range []collcheck.Mode{collcheck.Blocking, collcheck.Nonblocking, collcheck.Persistent} {
		o.Mode, o.Runs = mode, 2
		if err := collcheck.Run(c, o); err != nil {
			return fmt.Errorf("%s: %w", mode, err)
		}
	}
	return nil
}

// TestSpreadForms: the allreduce, allgather(v) and bcast that spread their
// network phase over every rank of a node, and the scatter that spreads
// the root's sending, blocking, nonblocking and persistent (several in
// flight), on nodes of equal sizes, consecutive and not, in place and not,
// from every root. With the threshold at its lowest every call spreads;
// at 64 bytes the small counts do not, so spread and leader calls are in
// flight together. Allreduce: blocks of zero elements (one element over
// two ranks) and a non-commutative op (collcheck's affine, on consecutive
// nodes only: han passes it below otherwise); allgatherv: zero counts.
func TestSpreadForms(t *testing.T) {
	forms := []struct {
		check, param, lowest string
		counts               []int
	}{
		{"allreduce", han.SpreadBytesParam, "8", []int{1, 7, 1000}},
		{"allgather", han.GatherSpreadParam, "1", []int{0, 1, 7, 1000}},
		{"bcast", han.BcastSpreadParam, "1", []int{0, 1, 2, 7, 1000}},
		{"scatter", han.ScatterSpreadParam, "1", []int{1, 7, 1000}},
	}
	for _, form := range forms {
		for _, threshold := range []string{form.lowest, "64"} {
			for _, nodes := range [][]int{{0, 0, 1, 1}, {0, 0, 0, 1, 1, 1}, {0, 1, 2, 0, 1, 2}} {
				t.Run(fmt.Sprint(form.check, "/", threshold, "/", nodes), func(t *testing.T) {
					mpitest.Run(t, len(nodes), func(r *mpitest.Rank) error {
						o := collcheck.Options{Only: []string{form.check}, AllRoots: true, Counts: form.counts}
						return everyMode(r.CommWorld(), o)
					}, opts(nodes, mpitest.WithMCA(form.param, threshold))...)
				})
			}
		}
	}
}

// A nonblocking allreduce on two nodes of two ranks runs han's phases: only
// the leaders exchange over tcp (one message each a call), where the flat
// algorithm below han has every rank send one (four a call), as it does
// for calls above coll_han_nonblocking_max_bytes. Persistent runs the same.
func TestNonblockingPhasesCrossOnce(t *testing.T) {
	const calls = 20
	for _, c := range []struct {
		name string
		mca  []mpitest.Option
		want float64 // tcp messages a call, all ranks
	}{
		{"han", nil, 2},
		{"flat", []mpitest.Option{mpitest.WithMCA("coll", "^han")}, 4},
		{"above the bound", []mpitest.Option{mpitest.WithMCA(han.NonblockingMaxParam, "7")}, 4},
	} {
		t.Run(c.name, func(t *testing.T) {
			mpitest.Run(t, 4, func(r *mpitest.Rank) error {
				w := r.CommWorld()
				in, out := []float64{float64(w.Rank())}, []float64{0}
				pers, err := mpi.AllreduceInit(w, in, out, mpi.Sum)
				if err != nil {
					return err
				}
				// Warm up: the parts, the connections.
				if err := mpi.Allreduce(w, in, out, mpi.Sum); err != nil {
					return err
				}
				tcp := func() float64 { return float64(w.Instance().TransportStats()["tcp"].Frames) }
				if err := mpi.Barrier(w); err != nil {
					return err
				}
				before := tcp()
				for i := 0; i < calls; i++ {
					req, err := mpi.Iallreduce(w, in, out, mpi.Sum)
					if err != nil {
						return err
					}
					if _, err := req.Wait(); err != nil {
						return err
					}
					if err := pers.Start(); err != nil {
						return err
					}
					if _, err := pers.Wait(); err != nil {
						return err
					}
					if out[0] != 6 {
						return fmt.Errorf("sum %v, want 6", out[0])
					}
				}
				sent := []float64{(tcp() - before) / (2 * calls)}
				if err := mpi.Allreduce(w, sent, sent, mpi.Sum); err != nil {
					return err
				}
				if w.Rank() == 0 && math.Abs(sent[0]-c.want) > 0.1 {
					return fmt.Errorf("%.2f tcp messages a call over all ranks; want %v", sent[0], c.want)
				}
				if c.name == "han" && w.Rank() == 0 {
					t.Logf("%.2f tcp messages a call", sent[0])
				}
				return pers.Free()
			}, opts([]int{0, 0, 1, 1}, c.mca...)...)
		})
	}
}

// TestGatherScatterBound: gathers and scatters with blocks above
// coll_han_gather_max_bytes go below han, at every rank alike (a root in
// place too), and stay right. Two nodes of two ranks, root 0: through han
// one tcp message crosses a call (node 1's leader's), below it two (each
// rank of node 1 its own; tuned's scatter is kept linear across nodes
// for that, coll_tuned_scatter_across_nodes_bytes 0).
func TestGatherScatterBound(t *testing.T) {
	const calls = 20
	for _, c := range []struct {
		name  string
		bound string
		want  float64 // tcp messages a call, all ranks
	}{{"han", "128k", 1}, {"below", "8", 2}} {
		t.Run(c.name, func(t *testing.T) {
			mpitest.Run(t, 4, func(r *mpitest.Rank) error {
				w := r.CommWorld()
				me := w.Rank()
				block := []float64{float64(me), float64(me) + 0.5} // 16 bytes
				all := make([]float64, 8)
				tcp := func() float64 { return float64(w.Instance().TransportStats()["tcp"].Frames) }
				if err := mpi.Gather(w, block, all, 0); err != nil { // warm up: the parts, the connections
					return err
				}
				if err := mpi.Barrier(w); err != nil {
					return err
				}
				before := tcp()
				for i := 0; i < calls; i++ {
					var err error
					if me == 0 {
						clear(all)
						copy(all[:2], block)
						err = mpi.Gather(w, all[:2], all, 0) // in place: the root's block of recv
					} else {
						err = mpi.Gather(w, block, nil, 0)
					}
					if err != nil {
						return err
					}
					for k := 0; me == 0 && k < 8; k++ {
						if want := float64(k/2) + 0.5*float64(k%2); all[k] != want {
							return fmt.Errorf("gathered %v", all)
						}
					}
					got := make([]float64, 2)
					if err := mpi.Scatter(w, all, got, 0); err != nil {
						return err
					}
					if got[0] != float64(me) || got[1] != float64(me)+0.5 {
						return fmt.Errorf("rank %d scattered %v", me, got)
					}
				}
				sent := []float64{(tcp() - before) / (2 * calls)}
				if err := mpi.Allreduce(w, sent, sent, mpi.Sum); err != nil {
					return err
				}
				if me == 0 && math.Abs(sent[0]-c.want) > 0.1 {
					return fmt.Errorf("%.2f tcp messages a call over all ranks; want %v", sent[0], c.want)
				}
				return nil
			}, opts([]int{0, 0, 1, 1}, mpitest.WithMCA(han.GatherMaxParam, c.bound),
				mpitest.WithMCA("coll_tuned_scatter_across_nodes_bytes", "0"))...)
		})
	}
}
