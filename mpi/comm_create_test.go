package mpi_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/gompi/gompi/mpi"
	"github.com/gompi/gompi/mpitest"
)

// TestCommCreate: members get a communicator of the group's ranks, others
// nil; messages on it match only on it; ids are reused after Free; with
// mpi_use_sparse_groups the groups are stored sparsely.
func TestCommCreate(t *testing.T) {
	for _, sparse := range []string{"0", "1"} {
		t.Run("sparse="+sparse, func(t *testing.T) {
			mpitest.Run(t, 4, func(r *mpitest.Rank) error {
				world := r.CommWorld()
				wg := world.Group()
				evens, err := wg.Incl([]int{2, 0})
				if err != nil {
					return err
				}
				odds, err := wg.Excl([]int{0, 2})
				if err != nil {
					return err
				}
				// Sparse stores the reversed world as a stride (12 bytes
				// against 16); groups of two stay dense either way.
				rev, err := wg.Incl([]int{3, 2, 1, 0})
				if err != nil {
					return err
				}
				if format, _, err := rev.Storage(); err != nil || (format == "dense") != (sparse == "0") {
					return fmt.Errorf("mpi_use_sparse_groups=%s: the reversed world's group is stored %s (%v)", sparse, format, err)
				}
				ce, err := world.Create(evens)
				if err != nil {
					return err
				}
				co, err := world.Create(odds)
				if err != nil {
					return err
				}
				me := world.Rank()
				mine, other := ce, co
				if me%2 == 1 {
					mine, other = co, ce
				}
				if other != nil || mine == nil {
					return fmt.Errorf("rank %d: member comm %v, non-member comm %v", me, mine, other)
				}
				// evens = (2, 0): world rank 2 is rank 0 of ce.
				wantRank := map[int]int{0: 1, 2: 0, 1: 0, 3: 1}[me]
				if mine.Rank() != wantRank || mine.Size() != 2 {
					return fmt.Errorf("rank %d: rank %d of %d in the new comm, want %d of 2", me, mine.Rank(), mine.Size(), wantRank)
				}
				// The same tag on world and on the new comm must not mix.
				peer := 1 - mine.Rank()
				if err := world.Send([]byte{byte(me)}, (me+2)%4, 5); err != nil {
					return err
				}
				if err := mine.Send([]byte{byte(me), 9}, peer, 5); err != nil {
					return err
				}
				buf := make([]byte, 8)
				st, err := mine.Recv(buf, mpi.AnySource, 5)
				if err != nil {
					return err
				}
				if st.Count != 2 || buf[1] != 9 || int(buf[0]) != (me+2)%4 {
					return fmt.Errorf("rank %d: on the new comm got %v", me, buf[:st.Count])
				}
				if st, err = world.Recv(buf, mpi.AnySource, 5); err != nil || st.Count != 1 {
					return fmt.Errorf("rank %d: on world got %d bytes, %v", me, st.Count, err)
				}
				mg := mine.Group()
				if cmp, _ := mg.Compare(map[bool]*mpi.Group{true: evens, false: odds}[me%2 == 0]); cmp != mpi.Ident {
					return fmt.Errorf("rank %d: the new comm's group compares %v to the group it was made from", me, cmp)
				}
				if cmp, _ := mg.Compare(wg); cmp != mpi.Unequal {
					return fmt.Errorf("rank %d: half's group compares %v to the world's", me, cmp)
				}
				if err := mine.Free(); err != nil {
					return err
				}
				if err := mine.Send([]byte{1}, 0, 1); !errors.Is(err, mpi.ErrComm) {
					return fmt.Errorf("rank %d: send on a freed comm: %v, want ErrComm", me, err)
				}
				if err := world.Free(); !errors.Is(err, mpi.ErrComm) {
					return fmt.Errorf("rank %d: freeing the world: %v, want ErrComm", me, err)
				}
				// Many creations: each takes the id the first took, freed
				// by the one before. A communicator of the whole world
				// group (a dup) compares IDENT to the world's group, and
				// CONGRUENT to the world.
				first := -1
				for i := 0; i < 100; i++ {
					c, err := world.Create(wg)
					if err != nil {
						return err
					}
					if first < 0 {
						first = c.ContextID()
					} else if c.ContextID() != first {
						return fmt.Errorf("rank %d: creation %d took context id %d, the first %d", me, i, c.ContextID(), first)
					}
					if cmp, _ := c.Group().Compare(wg); cmp != mpi.Ident {
						return fmt.Errorf("rank %d: dup's group compares %v to the world's", me, cmp)
					}
					if cmp, err := c.Compare(world); cmp != mpi.Congruent || err != nil {
						return fmt.Errorf("rank %d: dup compares %v (%v) to the world", me, cmp, err)
					}
					if err := c.Free(); err != nil {
						return err
					}
				}

				return nil
			}, mpitest.WithMCA("mpi_use_sparse_groups", sparse), mpitest.WithMCA("btl", "self,shm"))
		})
	}
}

// TestCommCreateNested: a communicator made from a made communicator, and a
// group with a process outside the parent, which is an error.
func TestCommCreateNested(t *testing.T) {
	mpitest.Run(t, 4, func(r *mpitest.Rank) error {
		world := r.CommWorld()
		wg := world.Group()
		first3, _ := wg.Incl([]int{0, 1, 2})
		sub, err := world.Create(first3)
		if err != nil {
			return err
		}
		if r.Rank() == 3 {
			if sub != nil {
				return fmt.Errorf("rank 3 got a comm it is not in")
			}
			return nil
		}
		pair, _ := wg.Incl([]int{0, 3})
		if _, err := sub.Create(pair); !errors.Is(err, mpi.ErrGroup) {
			return fmt.Errorf("rank %d: Create with a group outside the parent: %v, want ErrGroup", r.Rank(), err)
		}
		two, _ := wg.Incl([]int{1, 2})
		c, err := sub.Create(two)
		if err != nil {
			return err
		}
		if (c != nil) != (r.Rank() == 1 || r.Rank() == 2) {
			return fmt.Errorf("rank %d: membership of the nested comm is %v", r.Rank(), c != nil)
		}
		if c != nil {
			v := []int32{int32(r.Rank())}
			got := make([]int32, 1)
			if _, err := mpi.Sendrecv(c, v, 1-c.Rank(), 3, got, 1-c.Rank(), 3); err != nil {
				return err
			}
			if got[0] != int32(3-r.Rank()) {
				return fmt.Errorf("rank %d: got %d from the nested comm", r.Rank(), got[0])
			}
		}
		return nil
	}, mpitest.WithMCA("btl", "self,shm"))
}

// Free refuses a communicator with a point-to-point operation not complete,
// as it does one with a nonblocking collective in flight: a receive posted
// there would never complete once the context id is forgotten, and the
// message meant for it could reach the next communicator given that id. A
// cancelled receive, and a send complete for the program but not yet
// received, do not stop it; that send still arrives.
func TestFreeWithPointToPointPending(t *testing.T) {
	for _, btl := range []string{"self,shm", "self,tcp"} {
		t.Run(btl, func(t *testing.T) {
			mpitest.Run(t, 2, func(r *mpitest.Rank) error {
				w := r.CommWorld()
				dup, err := w.Dup()
				if err != nil {
					return err
				}
				buf := make([]byte, 8)
				if w.Rank() == 1 {
					if _, err := w.Recv(nil, 0, 9); err != nil {
						return err
					}
					if _, err := dup.Recv(buf, 0, 4); err != nil { // the Issend
						return err
					}
					if _, err := w.Recv(nil, 0, 10); err != nil {
						return err
					}
					if st, err := dup.Recv(buf, 0, 5); err != nil || st.Count != 1 || buf[0] != 2 {
						return fmt.Errorf("the send made before the peer's Free: %v, %v, %d", st, err, buf[0])
					}
					return dup.Free()
				}
				pending := func(what string) error {
					if err := dup.Free(); !errors.Is(err, mpi.ErrPending) || !strings.Contains(err.Error(), "1 point-to-point operation") {
						return fmt.Errorf("Free with %s: %v, want ErrPending naming 1 point-to-point operation", what, err)
					}
					return nil
				}
				rr, err := dup.Irecv(buf, 1, 3)
				if err != nil {
					return err
				}
				if err := pending("a receive posted"); err != nil {
					return err
				}
				if !rr.Cancel() {
					return fmt.Errorf("the posted receive could not be cancelled")
				}
				if _, err := rr.Wait(); err != nil {
					return err
				}
				sr, err := dup.Issend([]byte{1}, 1, 4)
				if err != nil {
					return err
				}
				if err := pending("a synchronous send not received"); err != nil {
					return err
				}
				if err := w.Send(nil, 1, 9); err != nil {
					return err
				}
				if _, err := sr.Wait(); err != nil {
					return err
				}
				if err := dup.Send([]byte{2}, 1, 5); err != nil {
					return err
				}
				if err := dup.Free(); err != nil {
					return fmt.Errorf("Free after a send complete for the program: %v", err)
				}
				return w.Send(nil, 1, 10)
			}, mpitest.WithMCA("btl", btl))
		})
	}
}
