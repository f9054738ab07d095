package mpi_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/gompi/gompi/mpi"
	"github.com/gompi/gompi/mpierr"
	"github.com/gompi/gompi/mpitest"
)

// halves splits the world into its first half (A, color 0) and the rest
// (B), and joins them with IntercommCreate over the world.
func halves(w *mpi.Comm) (local, inter *mpi.Comm, inA bool, err error) {
	n, me := w.Size(), w.Rank()
	cut := n / 2
	inA = me < cut
	color, remoteLeader := 1, 0
	if inA {
		color, remoteLeader = 0, cut
	}
	if local, err = w.Split(color, 0); err != nil {
		return nil, nil, false, err
	}
	inter, err = local.IntercommCreate(0, w, remoteLeader, 7)
	return local, inter, inA, err
}

// An intercommunicator between two halves: sizes and groups seen from both
// sides, point-to-point addressed in the remote group, Barrier, Bcast and
// Allreduce with the remote group's data, and Merge in both orders.
func TestIntercommunicators(t *testing.T) {
	sizes := []int{2, 3, 4, 5, 8, 9, 17}
	if testing.Short() {
		sizes = []int{2, 5, 8}
	}
	for _, n := range sizes {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			mpitest.Run(t, n, func(r *mpitest.Rank) error {
				w := r.CommWorld()
				me := w.Rank()
				local, ic, inA, err := halves(w)
				if err != nil {
					return err
				}
				cut := n / 2
				a, b := seq(0, cut), seq(cut, n)
				mine, other := a, b
				if !inA {
					mine, other = b, a
				}
				if !ic.IsInter() || local.IsInter() || ic.Size() != len(mine) || ic.RemoteSize() != len(other) || ic.Rank() != slices.Index(mine, me) {
					return fmt.Errorf("inter %v size %d remote %d rank %d; want true, %d, %d, %d", ic.IsInter(), ic.Size(), ic.RemoteSize(), ic.Rank(), len(mine), len(other), slices.Index(mine, me))
				}
				if got := worldRanks(ic.RemoteGroup(), w); !slices.Equal(got, other) {
					return fmt.Errorf("remote group %v, want %v", got, other)
				}
				if got := worldRanks(ic.Group(), w); !slices.Equal(got, mine) {
					return fmt.Errorf("local group %v, want %v", got, mine)
				}
				if err := interP2P(ic, me, mine, other); err != nil {
					return err
				}
				if err := ic.Barrier(); err != nil {
					return err
				}
				// Bcast from A's rank 0 to B.
				buf := []int32{-1, -1, -1}
				root := 0
				if inA {
					root = mpi.ProcNull
					if ic.Rank() == 0 {
						root, buf = mpi.Root, []int32{7, 8, 9}
					}
				}
				if err := mpi.Bcast(ic, buf, root); err != nil {
					return err
				}
				if !inA && !slices.Equal(buf, []int32{7, 8, 9}) {
					return fmt.Errorf("bcast: %v", buf)
				}
				// Allreduce: each side gets the other's sum.
				var sum [2]int64
				if err := mpi.Allreduce(ic, []int64{int64(me + 1), 1}, sum[:], mpi.Sum); err != nil {
					return err
				}
				want := int64(0)
				for _, q := range other {
					want += int64(q + 1)
				}
				if sum[0] != want || sum[1] != int64(len(other)) {
					return fmt.Errorf("allreduce: %v, want [%d %d]", sum, want, len(other))
				}
				for _, c := range []struct {
					highA, highB bool
					aFirst       bool
				}{{false, true, true}, {true, false, false}, {false, false, true}} {
					high := c.highB
					if inA {
						high = c.highA
					}
					m, err := ic.Merge(high)
					if err != nil {
						return err
					}
					order := append(slices.Clone(b), a...)
					if c.aFirst {
						order = append(slices.Clone(a), b...)
					}
					got := make([]int64, n)
					if err := mpi.Allgather(m, []int64{int64(me)}, got); err != nil {
						return err
					}
					if m.Size() != n || m.IsInter() || !slices.Equal(got, toInt64(order)) {
						return fmt.Errorf("merge A high %v, B high %v: order %v, want %v", c.highA, c.highB, got, order)
					}
					if err := m.Free(); err != nil {
						return err
					}
				}
				if _, err := ic.Split(0, 0); !errors.Is(err, mpierr.ErrComm) {
					return fmt.Errorf("Split of an intercommunicator: %v, want ErrComm", err)
				}
				if _, err := w.Merge(false); !errors.Is(err, mpierr.ErrComm) {
					return fmt.Errorf("Merge of an intracommunicator: %v, want ErrComm", err)
				}
				if err := mpi.Bcast(ic, buf, len(other)); !errors.Is(err, mpierr.ErrRoot) {
					return fmt.Errorf("Bcast from remote rank %d of %d: %v, want ErrRoot", len(other), len(other), err)
				}
				return errors.Join(ic.Free(), local.Free())
			})
		})
	}
}

// interP2P: every rank sends its world rank to remote rank (its rank mod
// the remote size), and receives from any source what is meant for it; the
// status names the sender in the remote group.
func interP2P(ic *mpi.Comm, me int, mine, other []int) error {
	dst := ic.Rank() % len(other)
	if _, err := mpi.Isend(ic, []int64{int64(me)}, dst, 3); err != nil {
		return err
	}
	expect := 0
	for i := range other {
		if i%len(mine) == ic.Rank() {
			expect++
		}
	}
	for ; expect > 0; expect-- {
		var v [1]int64
		st, err := mpi.Recv(ic, v[:], mpi.AnySource, 3)
		if err != nil {
			return err
		}
		if st.Source < 0 || st.Source >= len(other) || other[st.Source] != int(v[0]) {
			return fmt.Errorf("a message from world rank %d says it came from remote rank %d (remote group %v)", v[0], st.Source, other)
		}
	}
	return nil
}

func seq(lo, hi int) []int {
	var s []int
	for i := lo; i < hi; i++ {
		s = append(s, i)
	}
	return s
}

func toInt64(s []int) []int64 {
	out := make([]int64, len(s))
	for i, v := range s {
		out[i] = int64(v)
	}
	return out
}

// worldRanks lists g's members as ranks of w.
func worldRanks(g *mpi.Group, w *mpi.Comm) []int {
	n, _ := g.Size()
	ranks, _ := g.TranslateRanks(seq(0, n), w.Group())
	return ranks
}
