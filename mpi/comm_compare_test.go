package mpi_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/gompi/gompi/mpi"
	"github.com/gompi/gompi/mpierr"
	"github.com/gompi/gompi/mpitest"
)

// wantCmp compares a with b both ways (the result is symmetric).
func wantCmp(what string, a, b *mpi.Comm, want mpi.Comparison) error {
	for _, p := range [][2]*mpi.Comm{{a, b}, {b, a}} {
		got, err := p[0].Compare(p[1])
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if got != want {
			return fmt.Errorf("%s: %s, want %s", what, got, want)
		}
	}
	return nil
}

// ifMany is many on more than one rank, one on one (where every order of
// the group is the same, and a half is the whole).
func ifMany(n int, many, one mpi.Comparison) mpi.Comparison {
	if n > 1 {
		return many
	}
	return one
}

// Compare of intracommunicators: a communicator is Ident to itself only;
// Dup, Create of the whole group and a Split that keeps the order are
// Congruent; a Split or CreateGroup that reorders is Similar; other
// members (a half, self beside a larger world) are Unequal. Freed and nil
// communicators are ErrComm errors, either side.
func TestCommCompare(t *testing.T) {
	sizes := []int{1, 2, 3, 4, 7}
	if testing.Short() {
		sizes = []int{1, 3, 4}
	}
	for _, n := range sizes {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			mpitest.Run(t, n, func(r *mpitest.Rank) error {
				w, self := r.CommWorld(), r.CommSelf()
				me := w.Rank()
				var made []*mpi.Comm
				defer func() {
					for _, c := range made {
						c.Free()
					}
				}()
				keep := func(c *mpi.Comm, err error) *mpi.Comm {
					if err == nil && c != nil {
						made = append(made, c)
					}
					return c
				}
				dup := keep(w.Dup())
				dupdup := keep(dup.Dup())
				inOrder := keep(w.Split(0, me))
				reversed := keep(w.Split(0, -me))
				half := keep(w.Split(me%2, 0))
				alone := keep(w.Split(me, 0))
				created := keep(w.Create(w.Group()))
				back := make([]int, n)
				for i := range back {
					back[i] = n - 1 - i
				}
				rg, err := w.Group().Incl(back)
				if err != nil {
					return err
				}
				grouped := keep(w.CreateGroup(rg, 3))
				if len(made) != 8 {
					return fmt.Errorf("made %d of 8 communicators", len(made))
				}
				cases := []struct {
					what string
					a, b *mpi.Comm
					want mpi.Comparison
				}{
					{"world and world", w, w, mpi.Ident},
					{"world and the instance's world again", w, r.Instance.CommWorld(), mpi.Ident},
					{"self and self", self, self, mpi.Ident},
					{"a dup and itself", dup, dup, mpi.Ident},
					{"world and its dup", w, dup, mpi.Congruent},
					{"world and a dup of its dup", w, dupdup, mpi.Congruent},
					{"a dup and its dup", dup, dupdup, mpi.Congruent},
					{"world and a split in its order", w, inOrder, mpi.Congruent},
					{"world and Create of its group", w, created, mpi.Congruent},
					{"world and a split in reverse order", w, reversed, ifMany(n, mpi.Similar, mpi.Congruent)},
					{"a dup and a split in reverse order", dup, reversed, ifMany(n, mpi.Similar, mpi.Congruent)},
					{"world and CreateGroup in reverse order", w, grouped, ifMany(n, mpi.Similar, mpi.Congruent)},
					{"two reorderings alike", reversed, grouped, mpi.Congruent},
					{"world and half of it", w, half, ifMany(n, mpi.Unequal, mpi.Congruent)},
					{"world and self", w, self, ifMany(n, mpi.Unequal, mpi.Congruent)},
					{"self and a split of one rank", self, alone, mpi.Congruent},
					{"world and a split of one rank", w, alone, ifMany(n, mpi.Unequal, mpi.Congruent)},
				}
				for _, c := range cases {
					if err := wantCmp(c.what, c.a, c.b, c.want); err != nil {
						return err
					}
				}
				// A freed communicator, or none, is an error on either side.
				gone := keep(w.Dup())
				made = made[:len(made)-1]
				if err := gone.Free(); err != nil {
					return err
				}
				for _, p := range []struct {
					what string
					a, b *mpi.Comm
				}{{"a freed communicator", gone, w}, {"with a freed communicator", w, gone}, {"nil", nil, w}, {"with nil", w, nil}} {
					if cmp, err := p.a.Compare(p.b); !errors.Is(err, mpierr.ErrComm) {
						return fmt.Errorf("Compare of %s: %v, %v; want an ErrComm error", p.what, cmp, err)
					}
				}
				return nil
			})
		})
	}
}

// Compare of intercommunicators: itself Ident; another between the same
// groups in the same orders Congruent; one whose local group, or remote
// group, or both, are in another order Similar; one with another remote
// group Unequal; an intercommunicator and an intracommunicator Unequal.
func TestIntercommCompare(t *testing.T) {
	sizes := []int{2, 4, 5, 8}
	if testing.Short() {
		sizes = []int{2, 5}
	}
	for _, n := range sizes {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			mpitest.Run(t, n, func(r *mpitest.Rank) error {
				w := r.CommWorld()
				local, ic, inA, err := halves(w)
				if err != nil {
					return err
				}
				defer local.Free()
				defer ic.Free()
				cut := n / 2
				// Another intercommunicator between the same groups.
				remoteLeader := 0
				if inA {
					remoteLeader = cut
				}
				again, err := local.IntercommCreate(0, w, remoteLeader, 8)
				if err != nil {
					return err
				}
				defer again.Free()
				// A's group reversed: A sees its local group reordered, B
				// its remote group.
				key := 0
				if inA {
					key = -w.Rank()
				}
				aBack, err := local.Split(0, key)
				if err != nil {
					return err
				}
				defer aBack.Free()
				// aBack's leader (rank 0) is A's last rank: B names it.
				remoteLeader = 0
				if inA {
					remoteLeader = cut
				} else {
					remoteLeader = cut - 1
				}
				icBack, err := aBack.IntercommCreate(0, w, remoteLeader, 9)
				if err != nil {
					return err
				}
				defer icBack.Free()
				if err := wantCmp("an intercommunicator and itself", ic, ic, mpi.Ident); err != nil {
					return err
				}
				if err := wantCmp("two between the same groups", ic, again, mpi.Congruent); err != nil {
					return err
				}
				if err := wantCmp("an intercommunicator and its local group", ic, local, mpi.Unequal); err != nil {
					return err
				}
				if err := wantCmp("an intercommunicator and the world", ic, w, mpi.Unequal); err != nil {
					return err
				}
				reordered := mpi.Similar
				if cut == 1 {
					reordered = mpi.Congruent // one rank in A: no other order
				}
				if err := wantCmp("A reversed", ic, icBack, reordered); err != nil {
					return err
				}
				if n < 4 {
					return nil
				}
				// B without its last rank: A's remote group, B's local
				// group, differ.
				color := 0
				switch {
				case w.Rank() == n-1:
					color = mpi.Undefined
				case !inA:
					color = 1
				}
				sub, err := w.Split(color, 0)
				if err != nil || sub == nil {
					return err
				}
				defer sub.Free()
				remoteLeader = 0
				if inA {
					remoteLeader = cut
				}
				icLess, err := sub.IntercommCreate(0, w, remoteLeader, 10)
				if err != nil {
					return err
				}
				defer icLess.Free()
				return wantCmp("B without its last rank", ic, icLess, mpi.Unequal)
			})
		})
	}
}
