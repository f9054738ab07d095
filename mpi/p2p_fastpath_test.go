package mpi_test

import (
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/gompi/gompi/mpi"
	"github.com/gompi/gompi/mpitest"
)

// fastSize gives message i a size on either side of the LLP's payload limit
// (256 by default) and of the shm eager limit, so that consecutive messages
// of one peer take the LLP, the shm ring, and the rendezvous in turn.
func fastSize(i int) int {
	switch i % 7 {
	case 0, 3:
		return 8 // LLP
	case 1:
		return 255 // LLP, at the limit
	case 2:
		return 256 // not LLP: eager on the ring
	case 4:
		return 0
	case 5:
		return 3000 // eager on the ring
	}
	return 70000 // rendezvous
}

// fastTag gives message i a tag: runs of one tag (where a message that
// overtook another would be taken by the wrong receive), then the other.
func fastTag(i int) int { return (i / 10) % 2 }

// Messages of one peer that alternate between the LLP and the normal path
// keep MPI's order, whether the receiver takes them by the blocking
// receive's fast path (polling the LLP slot and the ring itself), by posted
// receives, or by wildcard ones, and whether it is early or late. Tags
// alternate too, so that the fast path finds messages it must leave for
// another receive.
func TestLLPAndNormalPathKeepOrder(t *testing.T) {
	for _, tr := range []struct{ name, llp string }{{"llp", ""}, {"nollp", "^tofu"}} {
		t.Run(tr.name, func(t *testing.T) {
			const n = 700
			mpitest.Run(t, 2, func(r *mpitest.Rank) error {
				c := r.CommWorld()
				buf := make([]byte, 70000)
				if c.Rank() == 0 {
					for i := 0; i < n; i++ {
						b := buf[:fastSize(i)]
						if len(b) >= 4 {
							binary.LittleEndian.PutUint32(b, uint32(i))
						}
						var err error
						switch tag := fastTag(i); {
						case i%10 == 9:
							var req *mpi.Request
							if req, err = c.Isend(b, 1, tag); err == nil {
								_, err = req.Wait()
							}
						default:
							err = c.Send(b, 1, tag)
						}
						if err != nil {
							return err
						}
					}
					return nil
				}
				check := func(i int, st mpi.Status, b []byte) error {
					if st.Count != fastSize(i) || st.Tag != fastTag(i) || st.Source != 0 {
						return fmt.Errorf("message %d: got %d bytes, tag %d, from %d; want %d bytes, tag %d", i, st.Count, st.Tag, st.Source, fastSize(i), fastTag(i))
					}
					if st.Count >= 4 {
						if got := binary.LittleEndian.Uint32(b); got != uint32(i) {
							return fmt.Errorf("message %d: got message %d", i, got)
						}
					}
					return nil
				}
				for i := 0; i < n; {
					if i%35 < 2 {
						// Late now and then, so that messages pile up on
						// both paths and arrive out of order.
						time.Sleep(2 * time.Millisecond)
					}
					var err error
					switch k := i % 6; {
					case k <= 2 || i == n-1:
						// The fast path, for each message in turn.
						var st mpi.Status
						if st, err = c.Recv(buf, 0, fastTag(i)); err == nil {
							err = check(i, st, buf)
						}
						i++
					case k == 3:
						// The next two, the later one posted first: the
						// blocking receive then finds a posted receive and
						// takes the normal path (when their tags are equal,
						// the posted one takes the first).
						b2 := make([]byte, 70000)
						var req *mpi.Request
						if req, err = c.Irecv(b2, 0, fastTag(i+1)); err != nil {
							return err
						}
						first, second := i, i+1
						if fastTag(i) == fastTag(i+1) {
							first, second = i+1, i
						}
						var st mpi.Status
						if st, err = c.Recv(buf, 0, fastTag(i)); err == nil {
							err = check(first, st, buf)
						}
						if err == nil {
							if st, err = req.Wait(); err == nil {
								err = check(second, st, b2)
							}
						}
						i += 2
					default:
						var st mpi.Status
						if st, err = c.Recv(buf, mpi.AnySource, mpi.AnyTag); err == nil {
							err = check(i, st, buf)
						}
						i++
					}
					if err != nil {
						return err
					}
				}
				return nil
			}, mpitest.WithMCA("btl", "self,shm"), mpitest.WithMCA("llp", tr.llp))
		})
	}
}
