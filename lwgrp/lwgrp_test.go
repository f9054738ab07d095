package lwgrp_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/gompi/gompi/datatype"
	"github.com/gompi/gompi/frameworks/pml"
	"github.com/gompi/gompi/lwgrp"
	"github.com/gompi/gompi/lwgrp/lwgrptest"
	"github.com/gompi/gompi/mpi"
	"github.com/gompi/gompi/mpierr"
	"github.com/gompi/gompi/mpitest"
)

// *mpi.Comm is a pml.Transport: mpi can use lwgrp, lwgrp needs no mpi.
var _ pml.Transport = (*mpi.Comm)(nil)

func sizes() []int {
	if testing.Short() {
		return []int{1, 2, 3, 5, 8, 13}
	}
	s := []int{129}
	for n := 1; n <= 33; n++ {
		s = append(s, n)
	}
	return s
}

// subset is a group a size is tested on.
type subset struct {
	name    string
	members []int
}

// subsets are the groups each size is tested on, in the same order on
// every rank: the world, every other rank, and a random subset in random
// order.
func subsets(n int) []subset {
	var even []int
	for r := 0; r < n; r += 2 {
		even = append(even, r)
	}
	rng := rand.New(rand.NewPCG(uint64(n), 5))
	return []subset{{"world", seq(n)}, {"even", even}, {"random", rng.Perm(n)[:1+rng.IntN(n)]}}
}

func seq(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}

// Every collective on every subset at every size matches a plain
// computation from the inputs (functions of the member's rank).
func TestCollectives(t *testing.T) {
	for _, n := range sizes() {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			mpitest.Run(t, n, func(r *mpitest.Rank) error {
				w := r.CommWorld()
				for _, s := range subsets(n) {
					if !slices.Contains(s.members, w.Rank()) {
						continue
					}
					if err := checkAll(w, s.members); err != nil {
						return fmt.Errorf("%s %v: %w", s.name, s.members, err)
					}
				}
				return nil
			})
		})
	}
}

// x is member i's input element j.
func x(i, j int) int64 { return int64(i*1000 + j + 1) }

func checkAll(t pml.Transport, members []int) error {
	ring, err := lwgrp.RingFromList(t, members)
	if err != nil {
		return err
	}
	g, err := lwgrp.LogRingFromRing(ring, 1)
	if err != nil {
		return err
	}
	local, err := lwgrp.LogRingFromList(t, members)
	if err != nil {
		return err
	}
	if g.String() != local.String() {
		return fmt.Errorf("pointer jumping built %v, the list says %v", g, local)
	}
	chain := lwgrp.LogChainFromLogRing(g)
	jumped, err := lwgrp.LogChainFromChain(lwgrp.ChainFromRing(ring), 2)
	if err != nil {
		return err
	}
	if jumped.String() != chain.String() {
		return fmt.Errorf("logchain by pointer jumping %v, from the logring %v", jumped, chain)
	}
	me, n := g.Rank(), g.Size()
	const tag = 3
	if err := g.Barrier(tag); err != nil {
		return err
	}
	for _, count := range []int{0, 1, 7} {
		in := make([]int64, count)
		for j := range in {
			in[j] = x(me, j)
		}
		// Bcast from every root.
		for root := 0; root < n; root++ {
			buf := make([]int64, count)
			if me == root {
				copy(buf, in)
			}
			if err := lwgrp.Bcast(g, buf, root, tag); err != nil {
				return err
			}
			for j := range buf {
				if buf[j] != x(root, j) {
					return fmt.Errorf("bcast from %d, %d elements: %v", root, count, buf)
				}
			}
		}
		// Allreduce, Reduce, Scan, Exscan with Sum and a non-commutative op.
		for _, op := range []*lwgrp.Op{datatype.Sum, firstNonZero} {
			want := func(lo, hi, j int) int64 { // members lo..hi-1 in order
				var acc int64
				for i := lo; i < hi; i++ {
					if op == datatype.Sum {
						acc += x(i, j)
					} else if acc == 0 {
						acc = x(i, j)
					}
				}
				return acc
			}
			out := make([]int64, count)
			if err := lwgrp.Allreduce(chain, in, out, op, tag); err != nil {
				return err
			}
			for j := range out {
				if out[j] != want(0, n, j) {
					return fmt.Errorf("allreduce %s: %v", op, out)
				}
			}
			root := n / 2
			out = make([]int64, count)
			if err := lwgrp.Reduce(chain, in, out, op, root, tag); err != nil {
				return err
			}
			for j := range out {
				if me == root && out[j] != want(0, n, j) {
					return fmt.Errorf("reduce %s at %d: %v", op, root, out)
				}
			}
			if err := lwgrp.Scan(chain, in, out, op, tag); err != nil {
				return err
			}
			for j := range out {
				if out[j] != want(0, me+1, j) {
					return fmt.Errorf("scan %s: %v", op, out)
				}
			}
			out = make([]int64, count)
			if err := lwgrp.Exscan(chain, in, out, op, tag); err != nil {
				return err
			}
			for j := range out {
				if me > 0 && out[j] != want(0, me, j) {
					return fmt.Errorf("exscan %s: %v", op, out)
				}
			}
		}
		// Allgather, Gather, Allgatherv, Alltoall, Alltoallv.
		all := make([]int64, count*n)
		if err := lwgrp.Allgather(g, in, all, tag); err != nil {
			return err
		}
		for i := 0; i < n; i++ {
			for j := 0; j < count; j++ {
				if all[i*count+j] != x(i, j) {
					return fmt.Errorf("allgather, %d elements: %v", count, all)
				}
			}
		}
		for root := 0; root < n; root += max(1, n/3) {
			got := make([]int64, count*n)
			if err := lwgrp.Gather(g, in, got, root, tag); err != nil {
				return err
			}
			if me == root && !slices.Equal(got, all) {
				return fmt.Errorf("gather at %d: %v, want %v", root, got, all)
			}
		}
		counts := make([]int, n)
		total := 0
		for i := range counts {
			counts[i] = (i + count) % 4
			total += counts[i]
		}
		vin := make([]int64, counts[me])
		for j := range vin {
			vin[j] = x(me, j)
		}
		vall := make([]int64, total)
		if err := lwgrp.Allgatherv(g, vin, vall, counts, tag); err != nil {
			return err
		}
		pos := 0
		for i := 0; i < n; i++ {
			for j := 0; j < counts[i]; j++ {
				if vall[pos] != x(i, j) {
					return fmt.Errorf("allgatherv: %v", vall)
				}
				pos++
			}
		}
		send := make([]int64, count*n)
		for dst := 0; dst < n; dst++ {
			for j := 0; j < count; j++ {
				send[dst*count+j] = int64(me*100000 + dst*100 + j)
			}
		}
		recv := make([]int64, count*n)
		if err := lwgrp.Alltoall(g, send, recv, tag); err != nil {
			return err
		}
		for src := 0; src < n; src++ {
			for j := 0; j < count; j++ {
				if recv[src*count+j] != int64(src*100000+me*100+j) {
					return fmt.Errorf("alltoall: %v", recv)
				}
			}
		}
		// Alltoallv: member i sends (i+j)%3 elements to member j.
		sc, rc := make([]int, n), make([]int, n)
		var vs []int64
		st, rt := 0, 0
		for j := 0; j < n; j++ {
			sc[j], rc[j] = (me+j+count)%3, (j+me+count)%3
			for e := 0; e < sc[j]; e++ {
				vs = append(vs, int64(me*100000+j*100+e))
			}
			st, rt = st+sc[j], rt+rc[j]
		}
		vr := make([]int64, rt)
		if err := lwgrp.Alltoallv(g, vs, sc, vr, rc, tag); err != nil {
			return err
		}
		pos = 0
		for src := 0; src < n; src++ {
			for e := 0; e < rc[src]; e++ {
				if vr[pos] != int64(src*100000+me*100+e) {
					return fmt.Errorf("alltoallv: %v", vr)
				}
				pos++
			}
		}
	}
	// Split by color me%3, key -me; SplitBin into 2 by parity.
	sub, err := lwgrp.Split(g, me%3, -me, tag)
	if err != nil {
		return err
	}
	var wantMembers []int
	for i := n - 1; i >= 0; i-- {
		if i%3 == me%3 {
			wantMembers = append(wantMembers, i)
		}
	}
	if sub.Size() != len(wantMembers) || wantMembers[sub.Rank()] != me {
		return fmt.Errorf("split: size %d rank %d, want %v", sub.Size(), sub.Rank(), wantMembers)
	}
	ids := make([]int64, sub.Size())
	if err := lwgrp.Allgather(sub, []int64{int64(me)}, ids, tag+1); err != nil {
		return err
	}
	for i, m := range wantMembers {
		if ids[i] != int64(m) {
			return fmt.Errorf("split order %v, want %v", ids, wantMembers)
		}
	}
	bin := me % 2
	if me == n-1 && n > 1 {
		bin = lwgrp.Undefined
	}
	half, err := lwgrp.SplitBin(g, 2, bin, tag)
	if err != nil {
		return err
	}
	if bin == lwgrp.Undefined {
		if half != nil {
			return errors.New("SplitBin gave a group to an Undefined bin")
		}
		return nil
	}
	size := 0
	for i := 0; i < n; i++ {
		if i%2 == bin && !(i == n-1 && n > 1) {
			size++
		}
	}
	if half.Size() != size || half.Rank() != me/2 {
		return fmt.Errorf("splitbin: size %d rank %d, want %d and %d", half.Size(), half.Rank(), size, me/2)
	}
	return nil
}

// firstNonZero is associative, not commutative: the leftmost non-zero.
var firstNonZero = datatype.NewOp("first", func(in, inout []int64) {
	for i := range inout {
		if in[i] != 0 {
			inout[i] = in[i]
		}
	}
}, false)

// Several groups over overlapping members, each running its collectives
// in goroutines of its own with its own tag, at once: none sees another's
// messages.
func TestConcurrentGroups(t *testing.T) {
	const n = 12
	groups := [][]int{seq(n), {0, 2, 4, 6, 8, 10}, {11, 9, 7, 5, 3, 1, 0}, {3, 4, 5, 6}}
	mpitest.Run(t, n, func(r *mpitest.Rank) error {
		w := r.CommWorld()
		var wg sync.WaitGroup
		errs := make([]error, len(groups))
		for gi, members := range groups {
			if !slices.Contains(members, w.Rank()) {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				g, err := lwgrp.LogRingFromList(w, members)
				if err == nil {
					for i := 0; i < 20 && err == nil; i++ {
						var sum [1]int64
						err = lwgrp.Allreduce(&g.LogChain, []int64{int64(w.Rank())}, sum[:], datatype.Sum, 10+gi)
						want := int64(0)
						for _, m := range members {
							want += int64(m)
						}
						if err == nil && sum[0] != want {
							err = fmt.Errorf("group %d: sum %d, want %d", gi, sum[0], want)
						}
						if err == nil {
							err = g.Barrier(10 + gi)
						}
					}
				}
				errs[gi] = err
			}()
		}
		wg.Wait()
		return errors.Join(errs...)
	})
}

// Bad input is an error with the class that says what was wrong.
func TestErrors(t *testing.T) {
	mpitest.Run(t, 3, func(r *mpitest.Rank) error {
		w := r.CommWorld()
		cases := []struct {
			what  string
			class mpierr.Class
			err   error
		}{
			{"a rank outside the parent", mpierr.ErrRank, second(lwgrp.LogRingFromList(w, []int{0, 1, 2, 3}))},
			{"a rank twice", mpierr.ErrGroup, second(lwgrp.RingFromList(w, []int{0, 1, 1, 2}))},
			{"a list without this process", mpierr.ErrGroup, second(lwgrp.ChainFromList(w, []int{(w.Rank() + 1) % 3}))},
		}
		g, err := lwgrp.LogRingFromComm(w)
		if err != nil {
			return err
		}
		var out [2]int64
		cases = append(cases, []struct {
			what  string
			class mpierr.Class
			err   error
		}{
			{"a negative tag", mpierr.ErrTag, g.Barrier(-1)},
			{"a root past the size", mpierr.ErrRoot, lwgrp.Bcast(g, out[:], 3, 1)},
			{"sum of bool", mpierr.ErrOp, lwgrp.Allreduce(&g.LogChain, []bool{true}, []bool{false}, datatype.Sum, 1)},
			{"allreduce of 1 into 2", mpierr.ErrCount, lwgrp.Allreduce(&g.LogChain, []int64{1}, out[:], datatype.Sum, 1)},
			{"allgather into the wrong size", mpierr.ErrCount, lwgrp.Allgather(g, []int64{1}, out[:], 1)},
			{"a negative color", mpierr.ErrArg, second(lwgrp.Split(g, -3, 0, 1))},
			{"a bin past the bins", mpierr.ErrArg, second(lwgrp.SplitBin(g, 2, 2, 1))},
		}...)
		for _, c := range cases {
			if !errors.Is(c.err, c.class) {
				return fmt.Errorf("%s: %v, want %s", c.what, c.err, c.class.Name())
			}
		}
		// Mismatched counts between the two members of a pair: each sees it
		// in the one exchange (in a larger group a member that stops early
		// would leave others waiting, as in MPI).
		if w.Rank() == 2 {
			return nil
		}
		pair, err := lwgrp.LogRingFromList(w, []int{0, 1})
		if err != nil {
			return err
		}
		mine := make([]int64, 1+w.Rank())
		all := make([]int64, 2*len(mine))
		err = lwgrp.Allgather(pair, mine, all, 7)
		if !errors.Is(err, mpierr.ErrCount) && !errors.Is(err, mpierr.ErrTruncate) {
			return fmt.Errorf("allgather with mismatched counts: %v", err)
		}
		return nil
	})
}

func second[T any](_ T, err error) error { return err }

// The rounds each collective takes (Lamport clocks), exactly:
//   - Barrier (dissemination), Allgather and Alltoall (Bruck): ⌈log2 n⌉ at
//     every size: every member sends and receives in every round;
//   - Bcast: the depth of its binomial tree, whose deepest member has the
//     most bits set below n: log2 n on a power of two, ⌈log2 n⌉-1
//     otherwise (the root's sends to its children are one round);
//   - Allreduce: log2 n on a power of two; otherwise the e = n-p members
//     past the largest power of two p hand over to members 0..e-1, the p
//     double (⌈log2 n⌉-1 rounds) and hand back. Member i ends the doubling
//     at max(log2 p, 1+popcount(i^j)) over the j < e that took a hand-over,
//     at most ⌈log2 n⌉; the hand-back adds a round only where such an i is
//     below e itself, i+j = p-1 with i, j < e: e > p/2, n > 3p/2.
func TestRounds(t *testing.T) {
	ceil := func(n int) int { return bitsLen(n - 1) }
	tree := func(n int) int {
		if n&(n-1) == 0 {
			return ceil(n)
		}
		return ceil(n) - 1
	}
	folded := func(n int) int {
		if p := 1 << (bitsLen(n) - 1); n != p && 2*n > 3*p {
			return ceil(n) + 1
		}
		return ceil(n)
	}
	ops := []struct {
		name   string
		rounds func(n int) int
		run    func(g *lwgrp.LogRing) error
	}{
		{"barrier", ceil, func(g *lwgrp.LogRing) error { return g.Barrier(1) }},
		{"bcast", tree, func(g *lwgrp.LogRing) error { return lwgrp.Bcast(g, make([]int64, 4), 0, 1) }},
		{"allgather", ceil, func(g *lwgrp.LogRing) error {
			return lwgrp.Allgather(g, make([]int64, 2), make([]int64, 2*g.Size()), 1)
		}},
		{"alltoall", ceil, func(g *lwgrp.LogRing) error {
			return lwgrp.Alltoall(g, make([]int64, g.Size()), make([]int64, g.Size()), 1)
		}},
		{"allreduce", folded, func(g *lwgrp.LogRing) error {
			return lwgrp.Allreduce(&g.LogChain, make([]int64, 3), make([]int64, 3), datatype.Sum, 1)
		}},
	}
	ns := []int{2, 3, 4, 5, 7, 8, 9, 12, 13, 16, 17, 31, 32, 33}
	if !testing.Short() {
		ns = append(ns, 64, 65, 129)
	}
	for _, n := range ns {
		// One job per size; each operation counts on clocks of its own,
		// after a barrier of the world (whose messages are not counted).
		var mu sync.Mutex
		most := make([]int64, len(ops))
		mpitest.Run(t, n, func(r *mpitest.Rank) error {
			for i, op := range ops {
				if err := r.CommWorld().Barrier(); err != nil {
					return err
				}
				lt := &lwgrptest.Lamport{Transport: r.CommWorld()}
				g, err := lwgrp.LogRingFromComm(lt)
				if err != nil {
					return err
				}
				if err := op.run(g); err != nil {
					return fmt.Errorf("%s: %w", op.name, err)
				}
				mu.Lock()
				most[i] = max(most[i], lt.Clock())
				mu.Unlock()
			}
			return nil
		})
		for i, op := range ops {
			if want := int64(op.rounds(n)); most[i] != want {
				t.Errorf("%s at %d members: %d rounds, want %d", op.name, n, most[i], want)
			}
		}
	}
}

// bitsLen(n-1) is ⌈log2 n⌉.
func bitsLen(v int) int {
	k := 0
	for v > 0 {
		k++
		v >>= 1
	}
	return k
}

// A nil or freed group is an ErrGroup error from every collective and
// builder, never a nil dereference (the package promises errors).
func TestNilAndFreedGroups(t *testing.T) {
	mpitest.Run(t, 2, func(r *mpitest.Rank) error {
		w := r.CommWorld()
		freed, err := lwgrp.LogRingFromComm(w)
		if err != nil {
			return err
		}
		freed.Free()
		freedChain := &lwgrp.Ring{}
		for _, ring := range []*lwgrp.LogRing{nil, freed} {
			buf := []int64{1}
			chain := (*lwgrp.LogChain)(nil)
			if ring != nil {
				chain = &ring.LogChain
			}
			calls := map[string]error{
				"Bcast":      lwgrp.Bcast(ring, buf, 0, 1),
				"Allreduce":  lwgrp.Allreduce(chain, buf, []int64{0}, datatype.Sum, 1),
				"Reduce":     lwgrp.Reduce(chain, buf, []int64{0}, datatype.Sum, 0, 1),
				"Scan":       lwgrp.Scan(chain, buf, []int64{0}, datatype.Sum, 1),
				"Exscan":     lwgrp.Exscan(chain, buf, []int64{0}, datatype.Sum, 1),
				"Allgather":  lwgrp.Allgather(ring, buf, []int64{0, 0}, 1),
				"Allgatherv": lwgrp.Allgatherv(ring, buf, []int64{0, 0}, []int{1, 1}, 1),
				"Gather":     lwgrp.Gather(ring, buf, []int64{0, 0}, 0, 1),
				"Alltoall":   lwgrp.Alltoall(ring, []int64{1, 2}, []int64{0, 0}, 1),
				"Alltoallv":  lwgrp.Alltoallv(ring, []int64{1, 2}, []int{1, 1}, []int64{0, 0}, []int{1, 1}, 1),
			}
			_, calls["Split"] = lwgrp.Split(ring, 0, 0, 1)
			_, calls["LogRingFromRing"] = lwgrp.LogRingFromRing(freedChain, 1)
			_, calls["LogRingFromRing(nil)"] = lwgrp.LogRingFromRing(nil, 1)
			calls["Barrier"] = ring.Barrier(1)
			for name, err := range calls {
				if !errors.Is(err, mpierr.ErrGroup) {
					return fmt.Errorf("%s on a nil or freed group: %v, want an ErrGroup error", name, err)
				}
			}
		}
		return nil
	})
}
