package mpitest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gompi/gompi/mpierr"
	"github.com/gompi/gompi/params"
)

func TestRanksAndSize(t *testing.T) {
	var seen [8]atomic.Int32
	Run(t, 8, func(r *Rank) error {
		if r.Size() != 8 || r.LocalSize() != 8 || r.LocalRank() != r.Rank() {
			return fmt.Errorf("size %d, local %d/%d", r.Size(), r.LocalRank(), r.LocalSize())
		}
		seen[r.Rank()].Add(1)
		return nil
	})
	for i := range seen {
		if seen[i].Load() != 1 {
			t.Errorf("rank %d ran %d times", i, seen[i].Load())
		}
	}
}

// Each Run has its own parameters, even when two run at once in one process.
func TestParametersPerRun(t *testing.T) {
	check := func(v string) func(*Rank) error {
		return func(r *Rank) error {
			_, got, _ := r.Params().Lookup("btl_base_verbose")
			if got.String() != v || got.Source.Kind != params.FromCommandLine {
				return fmt.Errorf("btl_base_verbose = %s from %s, want %s from the command line", got, got.Source, v)
			}
			return nil
		}
	}
	done := make(chan error)
	go func() { done <- run(3, check("7"), t.Logf, WithMCA("btl_base_verbose", "7")) }()
	Run(t, 3, check("9"), WithMCA("btl_base_verbose", "9"))
	if err := <-done; err != nil {
		t.Error(err)
	}
}

func TestFirstErrorFailsAndAbortsTheOthers(t *testing.T) {
	boom := errors.New("boom")
	start := time.Now()
	err := run(4, func(r *Rank) error {
		if r.Rank() == 2 {
			return boom
		}
		// The others wait in a collective that rank 2 never joins; the
		// abort must get them out.
		return r.Runtime().Modex().Fence(context.Background())
	}, t.Logf)
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "rank 2") {
		t.Fatalf("got %v, want rank 2's error", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("aborting took %v", d)
	}
}

func TestAbortStopsTheRank(t *testing.T) {
	after := atomic.Bool{}
	err := run(3, func(r *Rank) error {
		if r.Rank() == 1 {
			r.Abort(5)
			after.Store(true) // not reached
		}
		return r.Runtime().Barrier()
	}, t.Logf)
	if err == nil || !strings.Contains(err.Error(), "rank 1 called Abort(5)") {
		t.Fatalf("got %v", err)
	}
	if after.Load() {
		t.Error("Abort returned to its caller")
	}
}

func TestPanicIsAnError(t *testing.T) {
	err := run(2, func(r *Rank) error {
		if r.Rank() == 0 {
			panic("oops")
		}
		return r.Runtime().Barrier()
	}, t.Logf)
	if err == nil || !strings.Contains(err.Error(), "rank 0 panicked: oops") {
		t.Fatalf("got %v", err)
	}
}

func TestBadParameterFailsInit(t *testing.T) {
	err := run(2, func(r *Rank) error { return nil }, t.Logf, WithMCA("btl_base_verbose", "loud"))
	if err == nil || !strings.Contains(err.Error(), `invalid value "loud"`) {
		t.Fatalf("got %v", err)
	}
}

func TestManyRanks(t *testing.T) {
	n := 64
	if testing.Short() {
		n = 16
	}
	start := time.Now()
	Run(t, n, func(r *Rank) error {
		m := r.Runtime().Modex()
		m.PutProc("id", []byte(fmt.Sprint(r.Rank())))
		if err := m.Fence(context.Background()); err != nil {
			return err
		}
		v, err := m.GetProc((r.Rank()+1)%r.Size(), "id")
		if err != nil || string(v) != fmt.Sprint((r.Rank()+1)%r.Size()) {
			return fmt.Errorf("neighbour's id %q, %v", v, err)
		}
		return nil
	})
	t.Logf("%d goroutine ranks: init, fence, finalize in %v", n, time.Since(start))
}

// WithNodes: what each rank reads of the layout is what was given, ranks
// of a node need not be contiguous, and nodes may come in any order.
func TestWithNodes(t *testing.T) {
	for _, nodeOf := range [][]int{{0, 1, 0, 2, 1, 0}, {1, 1, 0}, {0, 1, 2, 3, 4}, {0, 0, 0}} {
		t.Run(fmt.Sprint(nodeOf), func(t *testing.T) {
			Run(t, len(nodeOf), func(r *Rank) error {
				job := r.Runtime().Job()
				var local []int
				for w, node := range nodeOf {
					if node == nodeOf[r.Rank()] {
						local = append(local, w)
					}
				}
				if !slices.Equal(job.NodeOf, nodeOf) || job.NodeIndex != nodeOf[r.Rank()] ||
					r.LocalSize() != len(local) || r.LocalRank() != slices.Index(local, r.Rank()) {
					return fmt.Errorf("NodeOf %v NodeIndex %d local %d/%d, want %v %d %d/%d", job.NodeOf, job.NodeIndex,
						r.LocalRank(), r.LocalSize(), nodeOf, nodeOf[r.Rank()], slices.Index(local, r.Rank()), len(local))
				}
				if want := fmt.Sprintf("-node%d", nodeOf[r.Rank()]); !strings.HasSuffix(r.Node(), want) {
					return fmt.Errorf("host name %q, want one ending in %q", r.Node(), want)
				}
				return nil
			}, WithNodes(nodeOf), WithMCA("btl", "self,shm,tcp"))
		})
	}
	// Without WithNodes, one node, as before.
	Run(t, 2, func(r *Rank) error {
		if got := r.Runtime().Job().NodeOf; !slices.Equal(got, []int{0, 0}) {
			return fmt.Errorf("NodeOf %v, want [0 0]", got)
		}
		return nil
	})
	// The option keeps its own copy.
	nodeOf := []int{0, 1}
	opt := WithNodes(nodeOf)
	nodeOf[1] = 7
	Run(t, 2, func(r *Rank) error {
		if got := r.Runtime().Job().NodeOf; !slices.Equal(got, []int{0, 1}) {
			return fmt.Errorf("NodeOf %v, want [0 1]", got)
		}
		return nil
	}, opt)
}

// A layout that does not fit the job is refused before any rank starts,
// with an ErrArg error that names what is wrong.
func TestWithNodesBadInput(t *testing.T) {
	for _, tc := range []struct {
		n      int
		nodeOf []int
		want   string
	}{
		{3, []int{0, 1}, "2 node indexes for 3 ranks"},
		{2, []int{0, 1, 0}, "3 node indexes for 2 ranks"},
		{2, nil, "0 node indexes for 2 ranks"},
		{3, []int{0, -1, 0}, "rank 1 is on node -1"},
		{3, []int{0, 3, 1}, "rank 1 is on node 3"},
		{3, []int{0, 2, 0}, "node 1 has no rank while node 2 has"},
		{4, []int{1, 1, 2, 2}, "node 0 has no rank while node 2 has"},
	} {
		started := false
		err := RunErr(tc.n, func(r *Rank) error { started = true; return nil }, WithNodes(tc.nodeOf))
		if !errors.Is(err, mpierr.ErrArg) || !strings.Contains(err.Error(), tc.want) ||
			!strings.Contains(err.Error(), fmt.Sprintf("WithNodes(%v)", tc.nodeOf)) {
			t.Errorf("%d ranks, WithNodes(%v): %v, want ErrArg saying %q", tc.n, tc.nodeOf, err, tc.want)
		}
		if started {
			t.Errorf("%d ranks, WithNodes(%v): a rank ran", tc.n, tc.nodeOf)
		}
	}
}
