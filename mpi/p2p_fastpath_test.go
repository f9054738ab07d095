package mpi_test

import (
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/gompi/gompi/components/pml/ob1"
	"github.com/gompi/gompi/mpi"
	"github.com/gompi/gompi/mpitest"
)

// fastSizes are the message sizes of the order test, taken from the
// instance's limits so that they cross them whatever their defaults: on
// either side of the LLP's payload limit (pml_ob1_llp_max_payload_size),
// at the eager route's eager limit and one byte past it, and several
// fragments long.
type fastSizes struct {
	llpMax, eager, large int
}

func fastSizesOf(r *mpitest.Rank, peer int) (fastSizes, error) {
	_, v, ok := r.Params().Lookup("pml_ob1_llp_max_payload_size")
	if !ok {
		return fastSizes{}, fmt.Errorf("pml_ob1_llp_max_payload_size is not registered")
	}
	route := r.BML().Peer(peer).Send[0].Attr
	s := fastSizes{
		llpMax: int(v.Uint()),
		eager:  route.EagerLimit - ob1.MatchHeaderLen,
		large:  2*route.MaxSendSize + 100,
	}
	// The sizes below must fall on three different paths: LLP, eager,
	// rendezvous.
	if s.llpMax < 2 || s.llpMax > s.eager || s.eager+1 > s.large {
		return s, fmt.Errorf("limits the test cannot cross in order: LLP below %d bytes, eager up to %d, large %d", s.llpMax, s.eager, s.large)
	}
	return s, nil
}

// size gives message i a size: the LLP's, then the eager path's, then the
// rendezvous's, so that consecutive messages of one peer change path.
func (s fastSizes) size(i int) int {
	switch i % 8 {
	case 0, 3:
		return 8 // LLP
	case 1:
		return s.llpMax - 1 // LLP, at its limit
	case 2:
		return s.llpMax // not LLP: eager
	case 4:
		return 0 // LLP
	case 5:
		return s.eager // eager, at its limit
	case 6:
		return s.eager + 1 // rendezvous, at its start
	}
	return s.large // rendezvous, several fragments
}

// fastTag gives message i a tag: runs of one tag (where a message that
// overtook another would be taken by the wrong receive), then the other.
func fastTag(i int) int { return (i / 10) % 2 }

// Messages of one peer that alternate between the LLP and the normal path
// keep MPI's order, whether the receiver takes them by the blocking
// receive's fast path (polling the LLP slot and the ring itself), by posted
// receives, or by wildcard ones, and whether it is early or late. Tags
// alternate too, so that the fast path finds messages it must leave for
// another receive. The sender's counters show that the messages took the
// paths their sizes call for.
func TestLLPAndNormalPathKeepOrder(t *testing.T) {
	for _, tr := range []struct {
		name, llp string
		withLLP   bool
	}{{"llp", "", true}, {"nollp", "^tofu", false}} {
		t.Run(tr.name, func(t *testing.T) {
			const n = 700
			mpitest.Run(t, 2, func(r *mpitest.Rank) error {
				c := r.CommWorld()
				sz, err := fastSizesOf(r, 1-c.Rank())
				if err != nil {
					return err
				}
				buf := make([]byte, sz.large)
				if c.Rank() == 0 {
					before := r.PMLStats()
					var offered, large int
					for i := 0; i < n; i++ {
						b := buf[:sz.size(i)]
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
							if len(b) < sz.llpMax {
								offered++
							}
						}
						if err != nil {
							return err
						}
						if len(b) > sz.eager {
							large++
						}
					}
					return checkFastPaths(before, r.PMLStats(), n, offered, large, tr.withLLP)
				}
				check := func(i int, st mpi.Status, b []byte) error {
					if st.Count != sz.size(i) || st.Tag != fastTag(i) || st.Source != 0 {
						return fmt.Errorf("message %d: got %d bytes, tag %d, from %d; want %d bytes, tag %d", i, st.Count, st.Tag, st.Source, sz.size(i), fastTag(i))
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
						b2 := make([]byte, sz.large)
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

// checkFastPaths checks the sender's counters over the n messages of the
// order test: every blocking send below the LLP limit was offered to the LLP
// (taken or refused; each send completes before the next, so none finds
// another queued), none other was, the large ones went by rendezvous, and
// the rest eager.
func checkFastPaths(before, after mpi.PMLStats, n, offered, large int, withLLP bool) error {
	hits, falls := after.LLPHits-before.LLPHits, after.LLPFallbacks-before.LLPFallbacks
	eager := after.Eager - before.Eager
	// Above the eager limit: pipelined up to the route's pipeline limit
	// (eager + 1), by rendezvous or RGET above it (large).
	rndv := after.Rendezvous + after.RGet + after.Pipelined - before.Rendezvous - before.RGet - before.Pipelined
	want := uint64(offered)
	if !withLLP {
		want = 0
	}
	switch {
	case hits+falls != want:
		return fmt.Errorf("%d LLP hits and %d fall-backs, want %d sends offered to the LLP", hits, falls, want)
	case withLLP && hits == 0:
		return fmt.Errorf("no send took the LLP (%d fall-backs)", falls)
	case rndv != uint64(large):
		return fmt.Errorf("%d messages pipelined or by rendezvous, want %d", rndv, large)
	case eager+hits != uint64(n-large):
		return fmt.Errorf("%d eager messages and %d LLP hits, want %d together", eager, hits, n-large)
	}
	return nil
}

// handOver waits for the other goroutine rank's next step (a channel it
// closes): the stream tests order their ranks outside MPI, so that no
// progress of the receiver's delivers a message before the test says. A
// rank that failed leaves the other waiting: that ends after a while.
func handOver(ch chan struct{}) error {
	select {
	case <-ch:
		return nil
	case <-time.After(20 * time.Second):
		return fmt.Errorf("the other rank did not get to its next step")
	}
}

// mapPaths sends rank 1 one blocking message of each size from rank 0:
// the sender makes its LLP box at its first blocking send, the receiver
// maps that box and the ring at its first progress on them, and until then
// sees nothing in them. Rank 0 then waits until rank 1 closes mapped, after
// its receives have returned (their progress would take what came
// meanwhile).
func mapPaths(c *mpi.Comm, mapped chan struct{}, sizes ...int) error {
	for _, size := range sizes {
		b := make([]byte, size)
		var err error
		if c.Rank() == 0 {
			err = c.Send(b, 1, 9)
		} else {
			_, err = c.Recv(b, 0, 9)
		}
		if err != nil {
			return err
		}
	}
	if c.Rank() == 0 {
		return handOver(mapped)
	}
	close(mapped)
	return nil
}

// A stream of messages that arrive before their receives is taken by
// Irecv + Wait as by Recv: each Irecv takes the peer's next message from
// the transport itself, so none goes through the unexpected queue (a copy
// and an allocation each, which made such a stream 5× slower than Recv).
// The sender's messages all wait in the transport before the receiver
// posts its first Irecv; they are read in order with the right tags.
// After an Irecv posted before its message (whose look found nothing, so
// that Irecvs stop looking), the stream's Irecvs look again once one finds
// its message unexpected.
// (Failed with Irecv always posting: 47 of 48 went through the queue; and
// without the look coming back: 22 of the second part's 24.)
func TestIrecvTakesAStreamInPlace(t *testing.T) {
	for _, tr := range []struct{ name, llp string }{{"llp", ""}, {"nollp", "^tofu"}} {
		t.Run(tr.name, func(t *testing.T) {
			const n, early = 24, 4
			// The ranks' steps, in order: what each waits for is made
			// by the other outside MPI, so that no progress of the
			// receiver's delivers a message before the step says.
			mapped, sent, posted, sentEarly, drained, sentLate := make(chan struct{}), make(chan struct{}),
				make(chan struct{}), make(chan struct{}), make(chan struct{}), make(chan struct{})
			mpitest.Run(t, 2, func(r *mpitest.Rank) error {
				c := r.CommWorld()
				sz, err := fastSizesOf(r, 1-c.Rank())
				if err != nil {
					return err
				}
				// Below the LLP's limit and between it and the eager one.
				sizes := []int{max(sz.llpMax/2, 4), max(sz.llpMax, 4) + 8}
				send := func(size, from, to int) error {
					for i := from; i < to; i++ {
						b := make([]byte, size)
						binary.LittleEndian.PutUint32(b, uint32(i))
						if err := c.Send(b, 1, i%3); err != nil {
							return err
						}
					}
					return nil
				}
				check := func(size, i int, st mpi.Status, b []byte) error {
					if got := binary.LittleEndian.Uint32(b); st.Count != size || st.Tag != i%3 || got != uint32(i) {
						return fmt.Errorf("%d-byte message %d: got message %d, %d bytes, tag %d", size, i, got, st.Count, st.Tag)
					}
					return nil
				}
				receive := func(size, from, to int) error {
					for i := from; i < to; i++ {
						b := make([]byte, size)
						req, err := c.Irecv(b, 0, i%3)
						if err != nil {
							return err
						}
						st, err := req.Wait()
						if err == nil {
							err = check(size, i, st, b)
						}
						if err != nil {
							return err
						}
					}
					return nil
				}
				if err := mapPaths(c, mapped, sizes...); err != nil {
					return err
				}
				big := sizes[1]
				if c.Rank() == 0 {
					for _, size := range sizes {
						if err := send(size, 0, n); err != nil {
							return err
						}
					}
					close(sent)
					if err := handOver(posted); err != nil {
						return err
					}
					if err := send(big, 0, 1+early); err != nil {
						return err
					}
					close(sentEarly)
					if err := handOver(drained); err != nil {
						return err
					}
					if err := send(big, 1+early, n); err != nil {
						return err
					}
					close(sentLate)
					return nil
				}
				if err := handOver(sent); err != nil {
					return err
				}
				before := r.PMLStats()
				for _, size := range sizes {
					if err := receive(size, 0, n); err != nil {
						return err
					}
				}
				if d := r.PMLStats().Unexpected - before.Unexpected; d != 0 {
					return fmt.Errorf("%d of %d messages that waited in the transport went through the unexpected queue, want none", d, 2*n)
				}
				// An Irecv before its message: its wait delivers the
				// early ones that follow to the unexpected queue.
				before = r.PMLStats()
				b := make([]byte, big)
				req, err := c.Irecv(b, 0, 0)
				if err != nil {
					return err
				}
				close(posted)
				if err := handOver(sentEarly); err != nil {
					return err
				}
				st, err := req.Wait()
				if err == nil {
					err = check(big, 0, st, b)
				}
				if err == nil {
					err = receive(big, 1, 1+early)
				}
				if err != nil {
					return err
				}
				close(drained)
				if err := handOver(sentLate); err != nil {
					return err
				}
				if err := receive(big, 1+early, n); err != nil {
					return err
				}
				if d := r.PMLStats().Unexpected - before.Unexpected; d != early {
					return fmt.Errorf("after an Irecv posted early, %d of %d messages went through the unexpected queue, want the %d that came with it", d, n, early)
				}
				return nil
			}, mpitest.WithMCA("btl", "self,shm"), mpitest.WithMCA("llp", tr.llp))
		})
	}
}

// Rendezvous messages whose headers wait in the ring before their receives
// are started by the Irecv that matches them (the single copy, or the
// pipeline's first chunk), as by a blocking Recv: none of their headers goes
// through the unexpected queue, and the data arrives whole and in order.
// One size, one past the eager limit: a burst of messages that each take
// several fragments interleaves one message's fragments with the next
// one's header in the ring, and the wait that drains those fragments
// finds the header before its receive is posted.
// (Failed with Irecv taking eager messages only: 5 of 6.)
func TestIrecvStartsARendezvousInPlace(t *testing.T) {
	const n = 6
	mapped, sent := make(chan struct{}), make(chan struct{})
	mpitest.Run(t, 2, func(r *mpitest.Rank) error {
		c := r.CommWorld()
		sz, err := fastSizesOf(r, 1-c.Rank())
		if err != nil {
			return err
		}
		sizes := []int{sz.eager + 1}
		if err := mapPaths(c, mapped, sz.llpMax+8); err != nil {
			return err
		}
		if c.Rank() == 0 {
			var reqs []*mpi.Request
			for _, size := range sizes {
				for i := 0; i < n; i++ {
					b := make([]byte, size)
					binary.LittleEndian.PutUint32(b, uint32(i))
					b[size-1] = byte(i + 1)
					req, err := c.Isend(b, 1, i%3)
					if err != nil {
						return err
					}
					reqs = append(reqs, req)
				}
			}
			close(sent)
			return mpi.Waitall(reqs, nil)
		}
		if err := handOver(sent); err != nil {
			return err
		}
		before := r.PMLStats()
		for _, size := range sizes {
			for i := 0; i < n; i++ {
				b := make([]byte, size)
				req, err := c.Irecv(b, 0, i%3)
				if err != nil {
					return err
				}
				st, err := req.Wait()
				if err != nil {
					return err
				}
				if got := binary.LittleEndian.Uint32(b); st.Count != size || st.Tag != i%3 || got != uint32(i) || b[size-1] != byte(i+1) {
					return fmt.Errorf("%d-byte message %d: got message %d (last byte %d), %d bytes, tag %d", size, i, got, b[size-1], st.Count, st.Tag)
				}
			}
		}
		if d := r.PMLStats().Unexpected - before.Unexpected; d != 0 {
			return fmt.Errorf("%d of %d rendezvous headers that waited in the ring went through the unexpected queue, want none", d, n*len(sizes))
		}
		return nil
	}, mpitest.WithMCA("btl", "self,shm"))
}

// A blocking receive whose next message went into the ring while the LLP,
// full a moment before, took the one after it finds that later message at
// the LLP's head: it looks in the ring, rather than leaving to the normal
// path, whose progress would move the rest of the peer's stream to the
// unexpected queue (a stream of 8-byte Sends that alternate between a full
// LLP and the ring went there nearly whole, at twice the time a message).
// Here the ring holds messages n and m and the LLP n+1 … m-1: the receive
// of n meets n+1 at the LLP's head, and the receive of n+1 meets m at the
// ring's. (Failed without the look: 1 of 19.)
func TestRecvLooksTheOtherWayForItsMessage(t *testing.T) {
	mapped, full, freed, sent := make(chan struct{}), make(chan struct{}), make(chan struct{}), make(chan struct{})
	var total int
	mpitest.Run(t, 2, func(r *mpitest.Rank) error {
		c := r.CommWorld()
		sz, err := fastSizesOf(r, 1-c.Rank())
		if err != nil {
			return err
		}
		msg := make([]byte, 8)
		if err := mapPaths(c, mapped, len(msg), sz.llpMax+8); err != nil {
			return err
		}
		if c.Rank() == 0 {
			send := func(i int) (viaLLP bool, err error) {
				before := r.PMLStats().LLPHits
				binary.LittleEndian.PutUint32(msg, uint32(i))
				err = c.Send(msg, 1, 5)
				return r.PMLStats().LLPHits > before, err
			}
			// Fill the LLP: the first message it refuses goes into the
			// ring.
			n := 0
			for ; ; n++ {
				viaLLP, err := send(n)
				if err != nil {
					return err
				}
				if !viaLLP {
					break
				}
				if n > 1<<12 {
					return fmt.Errorf("the LLP took %d messages with none received", n)
				}
			}
			close(full)
			// The receiver takes the first, which frees its slot: the
			// next message takes it, behind the one in the ring.
			if err := handOver(freed); err != nil {
				return err
			}
			// Then until the LLP is full again: the ring holds n and the
			// last, the LLP the ones between at its end.
			m := n + 1
			for ; ; m++ {
				viaLLP, err := send(m)
				if err != nil {
					return err
				}
				if !viaLLP {
					break
				}
			}
			if m == n+1 {
				return fmt.Errorf("message %d did not take the slot the receiver freed", m)
			}
			total = m + 1
			close(sent)
			return nil
		}
		if err := handOver(full); err != nil {
			return err
		}
		before := r.PMLStats()
		check := func(i int) error {
			st, err := c.Recv(msg, 0, 5)
			if err != nil {
				return err
			}
			if got := binary.LittleEndian.Uint32(msg); got != uint32(i) || st.Count != 8 {
				return fmt.Errorf("message %d: got %d (%d bytes)", i, got, st.Count)
			}
			return nil
		}
		if err := check(0); err != nil {
			return err
		}
		close(freed)
		if err := handOver(sent); err != nil {
			return err
		}
		for i := 1; i < total; i++ {
			if err := check(i); err != nil {
				return err
			}
		}
		if d := r.PMLStats().Unexpected - before.Unexpected; d != 0 {
			return fmt.Errorf("%d of %d messages went through the unexpected queue, want none", d, total)
		}
		return nil
	}, mpitest.WithMCA("btl", "self,shm"))
}
