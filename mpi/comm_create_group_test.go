package mpi_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/gompi/gompi/lwgrp"
	"github.com/gompi/gompi/lwgrp/lwgrptest"
	"github.com/gompi/gompi/mpi"
	"github.com/gompi/gompi/mpierr"
	"github.com/gompi/gompi/mpitest"
)

// createGroupCase is one CreateGroup of a test: its members (world ranks,
// in the group's order) and its tag.
type createGroupCase struct {
	members []int
	tag     int
}

// randomGroups draws k groups of random members and order over n ranks,
// with tags 10, 11…
func randomGroups(n, k int, seed uint64) []createGroupCase {
	rng := rand.New(rand.NewPCG(seed, 3))
	var cs []createGroupCase
	for i := 0; i < k; i++ {
		perm := rng.Perm(n)
		cs = append(cs, createGroupCase{members: perm[:1+rng.IntN(n)], tag: 10 + i})
	}
	return cs
}

// runCreateGroups has every rank run, at once in goroutines of its own, the
// CreateGroups it is a member of, while it sends a stream of messages to
// the next rank on the parent (which the next rank receives): each new
// communicator must hold exactly its members in order and sum over them.
func runCreateGroups(t *testing.T, n int, cases []createGroupCase, opts ...mpitest.Option) {
	mpitest.Run(t, n, func(r *mpitest.Rank) error {
		w := r.CommWorld()
		me := w.Rank()
		var wg sync.WaitGroup
		errs := make([]error, len(cases)+1)
		for i, cs := range cases {
			if !slices.Contains(cs.members, me) {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = checkCreateGroup(w, cs)
			}()
		}
		// User traffic on the parent beside the CreateGroups.
		const stream = 50
		for i := 0; i < stream; i++ {
			if _, err := mpi.Isend(w, []int32{int32(i)}, (me+1)%n, 0); err != nil {
				return err
			}
		}
		for i := 0; i < stream; i++ {
			var v [1]int32
			if _, err := mpi.Recv(w, v[:], (me+n-1)%n, 0); err != nil || v[0] != int32(i) {
				return fmt.Errorf("user message %d: %v %v", i, v[0], err)
			}
		}
		wg.Wait()
		return errors.Join(errs...)
	}, opts...)
}

func checkCreateGroup(w *mpi.Comm, cs createGroupCase) error {
	g, err := w.Group().Incl(cs.members)
	if err != nil {
		return err
	}
	c, err := w.CreateGroup(g, cs.tag)
	if err != nil {
		return err
	}
	if c == nil || c.Size() != len(cs.members) || cs.members[c.Rank()] != w.Rank() {
		return fmt.Errorf("tag %d: a member got %v", cs.tag, c)
	}
	var sum [1]int64
	if err := mpi.Allreduce(c, []int64{int64(w.Rank())}, sum[:], mpi.Sum); err != nil {
		return err
	}
	want := int64(0)
	for _, m := range cs.members {
		want += int64(m)
	}
	if sum[0] != want {
		return fmt.Errorf("tag %d: sum over the new communicator %d, want %d", cs.tag, sum[0], want)
	}
	return c.Free()
}

// CreateGroup, called by the members only, on random subsets, several at
// once on overlapping groups with different tags, beside user traffic.
func TestCreateGroup(t *testing.T) {
	sizes := []int{1, 2, 3, 5, 8, 13, 17, 33, 256}
	if testing.Short() {
		sizes = []int{1, 3, 8}
	}
	for _, alg := range []string{"lwgrp", "dinan"} {
		for _, n := range sizes {
			t.Run(fmt.Sprintf("%s/%d", alg, n), func(t *testing.T) {
				runCreateGroups(t, n, randomGroups(n, 3, uint64(n)), mpitest.WithMCA(mpi.CreateGroupAlgorithmParam, alg))
			})
		}
	}
}

// A rank outside the group gets nil at once; bad input is an error.
func TestCreateGroupErrors(t *testing.T) {
	mpitest.Run(t, 3, func(r *mpitest.Rank) error {
		w := r.CommWorld()
		g, err := w.Group().Incl([]int{0, 1})
		if err != nil {
			return err
		}
		if w.Rank() == 2 {
			if c, err := w.CreateGroup(g, 1); c != nil || err != nil {
				return fmt.Errorf("a non-member got %v, %v; want nil, nil", c, err)
			}
		}
		if _, err := w.CreateGroup(g, -1); !errors.Is(err, mpierr.ErrTag) {
			return fmt.Errorf("tag -1: %v, want ErrTag", err)
		}
		return nil
	})
}

// CreateGroup's lwgrp algorithm takes at most 2⌈log2 n⌉+2 rounds among the
// members (Lamport clocks on its messages; it needs ⌈log2 n⌉, two more
// when n is not a power of two); beside it, the messages each member of
// the dinan algorithm sends.
func TestCreateGroupRounds(t *testing.T) {
	ns := []int{2, 3, 5, 8, 13, 16, 33, 64}
	if !testing.Short() {
		ns = append(ns, 256)
	}
	for _, n := range ns {
		var mu sync.Mutex
		var rounds int64
		var dinanMsgs uint64
		mpitest.Run(t, n+2, func(r *mpitest.Rank) error {
			w := r.CommWorld()
			members := seq(0, n) // ranks n and n+1 are not members
			if w.Rank() >= n {
				return nil // not a member: never called
			}
			var lt *lwgrptest.Lamport
			r.WrapCreateGroupTransport(func(c *mpi.Comm) lwgrp.Transport { lt = &lwgrptest.Lamport{Transport: c}; return lt })
			g, err := w.Group().Incl(members)
			if err != nil {
				return err
			}
			c, err := w.CreateGroup(g, 5)
			if err != nil {
				return err
			}
			mu.Lock()
			rounds = max(rounds, lt.Clock())
			mu.Unlock()
			return c.Free()
		})
		limit := int64(2*bits(n-1) + 2)
		if rounds > limit || rounds < int64(bits(n-1)) {
			t.Errorf("lwgrp CreateGroup of %d members: %d rounds, want %d..%d", n, rounds, bits(n-1), limit)
		}
		mpitest.Run(t, n+2, func(r *mpitest.Rank) error {
			w := r.CommWorld()
			members := seq(0, n) // ranks n and n+1 are not members
			if w.Rank() >= n {
				return nil
			}
			g, err := w.Group().Incl(members)
			if err != nil {
				return err
			}
			before := sentBy(r.Instance)
			c, err := w.CreateGroup(g, 5)
			if err != nil {
				return err
			}
			mu.Lock()
			dinanMsgs = max(dinanMsgs, sentBy(r.Instance)-before)
			mu.Unlock()
			return c.Free()
		}, mpitest.WithMCA(mpi.CreateGroupAlgorithmParam, "dinan"))
		t.Logf("%d members: lwgrp %d rounds (⌈log2 n⌉ = %d); dinan: at most %d messages sent by a member", n, rounds, bits(n-1), dinanMsgs)
	}
}

func sentBy(i *mpi.Instance) uint64 {
	s := i.PMLStats()
	return s.LLPHits + s.Eager + s.Rendezvous + s.RGet
}

// bits(n-1) is ⌈log2 n⌉.
func bits(v int) int {
	k := 0
	for v > 0 {
		k++
		v >>= 1
	}
	return k
}
