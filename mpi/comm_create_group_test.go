package mpi_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/gompi/gompi/frameworks/pml"
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
	sizes := []int{1, 2, 3, 5, 8, 13, 17, 33, 129}
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

// CreateGroup's lwgrp algorithm is one allreduce over the members, whose
// rounds (Lamport clocks on its messages) are exactly: log2 n on a power of
// two (recursive doubling); otherwise, with p the largest power of two
// below n, the e = n-p members past it first hand their data to members
// 0..e-1 (one round), the p members double (log2 p = ⌈log2 n⌉-1 rounds)
// and members 0..e-1 hand the result back. Member i's clock after the
// doubling is the longest chain into it: max(log2 p, 1+popcount(i^j)) over
// the members j < e that took a hand-over, which reaches 1+log2 p = ⌈log2 n⌉
// (j the complement of i); the hand-back adds a round only where such an i
// is below e itself, that is i+j = p-1 with i, j < e: e > p/2. So
// ⌈log2 n⌉+1 rounds when n > 3p/2, ⌈log2 n⌉ otherwise. The dinan algorithm
// sends, member by member, what dinanSends derives from it.
func TestCreateGroupRounds(t *testing.T) {
	// Powers of two, just above and below them, and both sides of 3p/2.
	ns := []int{2, 3, 5, 7, 8, 12, 13, 16, 33, 64}
	for _, n := range ns {
		var mu sync.Mutex
		var rounds int64
		mpitest.Run(t, n+2, func(r *mpitest.Rank) error {
			w := r.CommWorld()
			members := seq(0, n) // ranks n and n+1 are not members
			if w.Rank() >= n {
				return nil // not a member: never called
			}
			var lt *lwgrptest.Lamport
			r.WrapCreateGroupTransport(func(c *mpi.Comm) pml.Transport { lt = &lwgrptest.Lamport{Transport: c}; return lt })
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
		want := int64(bits(n - 1))
		if p := 1 << (bits(n) - 1); n != p && 2*n > 3*p {
			want++
		}
		if rounds != want {
			t.Errorf("lwgrp CreateGroup of %d members: %d rounds, want %d", n, rounds, want)
		}
		sent := make([]uint64, n)
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
			sent[w.Rank()] = sentBy(r.Instance) - before
			return c.Free()
		}, mpitest.WithMCA(mpi.CreateGroupAlgorithmParam, "dinan"), mpitest.WithMCA("coll", "basic,self"))
		want2 := dinanSends(n)
		if !slices.Equal(sent, want2) {
			t.Errorf("dinan CreateGroup of %d members over coll basic: members sent %v messages, want %v", n, sent, want2)
		}
		var total, wantTotal uint64
		for i := range sent {
			total, wantTotal = total+sent[i], wantTotal+want2[i]
		}
		if total != wantTotal {
			t.Errorf("dinan CreateGroup of %d members over coll basic: %d messages in all, want %d", n, total, wantTotal)
		}
	}
}

// dinanSends is the number of messages each member of a dinan CreateGroup
// of members 0..n-1 sends, over coll basic (and self on one rank): a bcast
// of s ranks is s-1 messages from the root; an allreduce a message to rank
// 0 from each other rank, then a bcast from rank 0.
//
// Each member starts with a Dup of self (no messages). At step i (1, 2,
// 4…) the block of i members at l = 2ki and the block at l+i (i members
// or fewer: the end) join, each side through its block's communicator of
// s ranks, whose rank 0 (the block's first member) leads:
//   - IntercommCreate: the leaders swap the sizes, then the members' world
//     ranks, and broadcast each in their block: 2s from the leader;
//   - its context id agreement over both blocks: per try two allreduces
//     and two swaps broadcast: 4s-2 from the leader, 2 from each other;
//   - the intercommunicator's local copy, a Dup of each block's
//     communicator: per try two allreduces: 2(s-1) from the leader, 2 from
//     each other;
//   - Merge: the leaders swap their high flags and broadcast them (s from
//     the leader), then agree on the merged context id as IntercommCreate.
//
// An agreement tries the largest of the members' lowest free context ids
// (from 2), then, while a member holds it, the largest lowest free above it.
// How many tries it takes depends on the ids each member holds, which the
// model follows: 0 and 1 (world and self), then the ids each step takes
// and frees (the intercommunicator, its local copy and the block's old
// communicator go; the merged one stays).
func dinanSends(n int) []uint64 {
	held := make([]map[int]bool, n)
	for p := range held {
		held[p] = map[int]bool{0: true, 1: true}
	}
	agree := func(procs []int) (cid int, tries uint64) {
		for from := 2; ; {
			tries++
			cid = from
			for _, p := range procs {
				low := from
				for held[p][low] {
					low++
				}
				cid = max(cid, low)
			}
			free := true
			for _, p := range procs {
				free = free && !held[p][cid]
			}
			if free {
				for _, p := range procs {
					held[p][cid] = true
				}
				return cid, tries
			}
			from = cid + 1
		}
	}
	sends := make([]uint64, n)
	cur := make([]int, n)
	for p := range n {
		cur[p], _ = agree([]int{p})
	}
	for i := 1; i < n; i *= 2 {
		for l := 0; l+i < n; l += 2 * i {
			both := seq(l, min(l+2*i, n))
			sides := [][]int{both[:i], both[i:]}
			ic, icTries := agree(both)
			dups, dupTries := make([]int, 2), make([]uint64, 2)
			for k, side := range sides {
				dups[k], dupTries[k] = agree(side)
			}
			merged, mergeTries := agree(both)
			for k, side := range sides {
				s := uint64(len(side))
				sends[side[0]] += 2*s + icTries*(4*s-2) + dupTries[k]*2*(s-1) + s + mergeTries*(4*s-2)
				for _, p := range side[1:] {
					sends[p] += 2*icTries + 2*dupTries[k] + 2*mergeTries
				}
				for _, p := range side {
					delete(held[p], ic)
					delete(held[p], dups[k])
					delete(held[p], cur[p])
					cur[p] = merged
				}
			}
		}
	}
	return sends
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
