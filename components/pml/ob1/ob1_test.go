package ob1_test

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/gompi/gompi/components/pml/ob1"
	"github.com/gompi/gompi/internal/p2pcheck"
	"github.com/gompi/gompi/internal/testutil"
	"github.com/gompi/gompi/mpi"
	"github.com/gompi/gompi/mpierr"
	"github.com/gompi/gompi/mpitest"
	"github.com/gompi/gompi/params"
)

// withLLP selects the test LLP alone (not tofu, which is built in): its
// refusals and late, reversed deliveries are what these tests are about.
func withLLP(refuseEvery int, more ...mpitest.Option) []mpitest.Option {
	return append([]mpitest.Option{
		mpitest.WithMCA("llp", "testllp"),
		mpitest.WithMCA("llp_testllp_enable", "1"),
		mpitest.WithMCA("llp_testllp_refuse_every", fmt.Sprint(refuseEvery)),
	}, more...)
}

// One stream from rank 0 to rank 1 mixes every kind of send
// (p2pcheck.LLPStream): blocking small ones (the LLP takes them, or refuses
// every third and they take the BTL), blocking large ones, non-blocking,
// synchronous and buffered ones, on both sides of the LLP and eager limits.
// The LLP delivers late and in reverse order; the receiver must still see
// the stream in the order sent. The counters must add up.
func TestLLPInterleavedWithTheNormalPath(t *testing.T) {
	for _, btls := range []string{"self,shm", "self,tloop"} {
		t.Run(btls, func(t *testing.T) {
			const n = 3000
			opts := withLLP(3, mpitest.WithMCA("btl", btls), mpitest.WithMCA("btl_tloop_enable", "1"))
			mpitest.Run(t, 2, func(r *mpitest.Rank) error {
				res, err := p2pcheck.LLPStream(r.CommWorld(), n, 0)
				if err != nil {
					return err
				}
				if r.Rank() == 1 {
					// The LLP delivers late and backwards: messages did
					// arrive out of order, and were put back in order.
					if s := r.PMLStats(); s.OutOfOrder == 0 {
						return fmt.Errorf("receiver counters %+v: nothing arrived out of order", s)
					}
					return nil
				}
				t.Logf("rank 0: %d LLP candidates, %+v", res.Candidates, res.After)
				// The sender waits for nothing but its own sends, so none
				// finds another queued: every candidate is offered, and
				// the test LLP refuses every third.
				hits, falls := res.Hits(), res.Fallbacks()
				if hits == 0 || int(hits+falls) != res.Candidates || int(falls) != res.Candidates/3 {
					return fmt.Errorf("LLP hits %d + fall-backs %d, want %d candidates with every third refused", hits, falls, res.Candidates)
				}
				return nil
			}, opts...)
		})
	}
}

// The counters (p2pcheck.LLPCounters): hits for small blocking sends
// between ranks; nothing for non-blocking sends, synchronous sends, sends to
// oneself and messages at or above pml_ob1_llp_max_payload_size.
func TestLLPCounters(t *testing.T) {
	mpitest.Run(t, 2, func(r *mpitest.Rank) error {
		return p2pcheck.LLPCounters(r.CommWorld(), true)
	}, withLLP(0, mpitest.WithMCA("btl", "self,shm"))...)
}

func wait(r *mpi.Request, err error) error {
	if err != nil {
		return err
	}
	_, err = r.Wait()
	return err
}

// The matching suite with the LLP on: its stream and the BTLs' interleave.
func TestSuiteWithLLP(t *testing.T) {
	mpitest.Run(t, 3, func(r *mpitest.Rank) error {
		return p2pcheck.Run(r.CommWorld(), p2pcheck.Options{})
	}, withLLP(2, mpitest.WithMCA("btl", "self,shm"))...)
}

// RGET that the receiver's transport refuses falls back to ACK and
// fragments, truncation included; the data still arrives whole.
func TestRGetRefused(t *testing.T) {
	mpitest.Run(t, 2, func(r *mpitest.Rank) error {
		if err := p2pcheck.Run(r.CommWorld(), p2pcheck.Options{Large: 100000}, "ordering", "truncation", "eagerlimit", "probe", "synchronous"); err != nil {
			return err
		}
		s := r.PMLStats()
		// RGETs to oneself (over self) work; those to the peer fall back.
		if s.RGetFallbacks == 0 {
			return fmt.Errorf("counters %+v: want RGETs to the peer to fall back", s)
		}
		return nil
	}, mpitest.WithMCA("btl", "self,tloop"), mpitest.WithMCA("btl_tloop_enable", "1"), mpitest.WithMCA("btl_tloop_get", "refuse"))
}

// An RGET whose read fails (not a refusal) fails the receive and still
// releases the sender.
func TestRGetFails(t *testing.T) {
	mpitest.Run(t, 2, func(r *mpitest.Rank) error {
		c := r.CommWorld()
		if c.Rank() == 0 {
			return c.Send(make([]byte, 50000), 1, 3)
		}
		st, err := c.Recv(make([]byte, 50000), 0, 3)
		if err == nil || errors.Is(err, mpi.ErrTruncate) || st.Count != 0 {
			return fmt.Errorf("a failed read: %+v, %v", st, err)
		}
		return nil
	}, mpitest.WithMCA("btl", "self,tloop"), mpitest.WithMCA("btl_tloop_enable", "1"), mpitest.WithMCA("btl_tloop_get", "fail"))
}

// An RGET whose read finds the sender gone fails the receive with
// ErrProcFailed, as every operation on a lost peer does.
func TestRGetFindsPeerLost(t *testing.T) {
	mpitest.Run(t, 2, func(r *mpitest.Rank) error {
		c := r.CommWorld()
		if c.Rank() == 0 {
			return c.Send(make([]byte, 50000), 1, 3)
		}
		if _, err := c.Recv(make([]byte, 50000), 0, 3); !errors.Is(err, mpi.ErrProcFailed) {
			return fmt.Errorf("a read from a lost peer: %v, want ErrProcFailed", err)
		}
		return nil
	}, mpitest.WithMCA("btl", "self,tloop"), mpitest.WithMCA("btl_tloop_enable", "1"), mpitest.WithMCA("btl_tloop_get", "lost"))
}

// Small transport queues: sends wait for room, nothing is lost or
// reordered, and nothing deadlocks when every rank sends at once.
func TestSmallTransportQueue(t *testing.T) {
	mpitest.Run(t, 4, func(r *mpitest.Rank) error {
		return p2pcheck.Run(r.CommWorld(), p2pcheck.Options{Large: 40000}, "ordering", "anysource", "mprobe", "concurrent", "truncation")
	}, mpitest.WithMCA("btl", "self,tloop"), mpitest.WithMCA("btl_tloop_enable", "1"), mpitest.WithMCA("btl_tloop_queue", "1k"),
		mpitest.WithMCA("btl_tloop_eager_limit", "256"), mpitest.WithMCA("btl_tloop_max_send_size", "1k"))
}

// A lost peer fails what is pending on it, with ErrProcFailed, instead of
// hanging; the other peers go on.
func TestPeerLost(t *testing.T) {
	mpitest.Run(t, 3, func(r *mpitest.Rank) error {
		c := r.CommWorld()
		switch c.Rank() {
		case 2:
			if _, err := c.Recv(nil, 0, 1); err != nil {
				return err
			}
			theBTL.lose(r.JobID(), 2)
			return nil
		case 1:
			_, err := c.Recv(make([]byte, 8), 0, 5)
			return err
		}
		recv, err := c.Irecv(make([]byte, 8), 2, 4)
		if err != nil {
			return err
		}
		big, err := c.Isend(make([]byte, 100000), 2, 4) // a rendezvous: waits for an ACK
		if err != nil {
			return err
		}
		if err := c.Send(nil, 2, 1); err != nil {
			return err
		}
		for _, rq := range []*mpi.Request{recv, big} {
			if _, err := rq.Wait(); !errors.Is(err, mpi.ErrProcFailed) {
				return fmt.Errorf("pending operation on a lost rank: %v, want ErrProcFailed", err)
			}
		}
		if err := c.Send(make([]byte, 10), 2, 6); !errors.Is(err, mpi.ErrProcFailed) {
			return fmt.Errorf("send to a lost rank: %v, want ErrProcFailed", err)
		}
		if _, err := c.Recv(nil, 2, 6); !errors.Is(err, mpi.ErrProcFailed) {
			return fmt.Errorf("receive from a lost rank: %v, want ErrProcFailed", err)
		}
		return c.Send(make([]byte, 8), 1, 5)
	}, mpitest.WithMCA("btl", "self,tloop"), mpitest.WithMCA("btl_tloop_enable", "1"))
}

// The send that finds a peer lost, before the transport has reported it,
// fails with ErrProcFailed as the later ones do, blocking or not.
func TestSendFindsPeerLost(t *testing.T) {
	mpitest.Run(t, 3, func(r *mpitest.Rank) error {
		c := r.CommWorld()
		switch c.Rank() {
		case 2:
			_, err := c.Recv(nil, 0, 1)
			return err
		case 1:
			if _, err := c.Recv(nil, 0, 1); err != nil {
				return err
			}
			theBTL.dieQuietly(r.JobID(), 1)
			return nil
		}
		if err := c.Send(nil, 1, 1); err != nil {
			return err
		}
		if err := c.Send(nil, 2, 1); err != nil {
			return err
		}
		for !theBTL.isDead(r.JobID(), 1) {
			runtime.Gosched()
		}
		if err := c.Send(make([]byte, 10), 1, 6); !errors.Is(err, mpi.ErrProcFailed) {
			return fmt.Errorf("first send to a rank lost unreported: %v, want ErrProcFailed", err)
		}
		return nil
	}, mpitest.WithMCA("btl", "self,tloop"), mpitest.WithMCA("btl_tloop_enable", "1"))
}

// With two BTLs of equal rank to every peer, eager messages take both in
// turn and arrive out of order; matching restores MPI order. The LLP adds a
// third path.
func TestOutOfOrderAcrossBTLs(t *testing.T) {
	mpitest.Run(t, 3, func(r *mpitest.Rank) error {
		if err := p2pcheck.Run(r.CommWorld(), p2pcheck.Options{Large: 50000}, "ordering", "anysource", "postorder", "concurrent", "mprobe", "eagerlimit"); err != nil {
			return err
		}
		if err := p2pcheck.Barrier(r.CommWorld()); err != nil {
			return err
		}
		a, b := theBTL.sent(r.JobID())[r.Rank()], theBTL2.sent(r.JobID())[r.Rank()]
		if a == 0 || b == 0 {
			return fmt.Errorf("fragments sent by tloop %d, by tloopb %d: want both routes used", a, b)
		}
		if s := r.PMLStats(); s.OutOfOrder == 0 {
			return fmt.Errorf("counters %+v: no message arrived out of order", s)
		}
		return nil
	}, withLLP(4, mpitest.WithMCA("btl", "self,tloop,tloopb"), mpitest.WithMCA("btl_tloop_enable", "1"), mpitest.WithMCA("btl_tloopb_enable", "1"),
		mpitest.WithMCA("btl_tloopb_latency", "5"))...)
}

// The send counters live with each communicator's peers (a shared atomic
// would cost every message a locked instruction): messages sent on a
// communicator still count once it is freed, and count once.
func TestCountersOutliveTheirCommunicator(t *testing.T) {
	const n = 10
	mpitest.Run(t, 2, func(r *mpitest.Rank) error {
		world := r.CommWorld()
		before := r.PMLStats()
		dup, err := world.Dup()
		if err != nil {
			return err
		}
		buf := make([]byte, 8)
		for i := 0; i < n; i++ {
			if r.Rank() == 0 {
				q, err := dup.Isend(buf, 1, i)
				if err != nil {
					return err
				}
				if _, err := q.Wait(); err != nil {
					return err
				}
			} else if _, err := dup.Recv(buf, 0, i); err != nil {
				return err
			}
		}
		during := r.PMLStats()
		if err := dup.Free(); err != nil {
			return err
		}
		after := r.PMLStats()
		if r.Rank() == 0 && during.Eager-before.Eager < n {
			return fmt.Errorf("eager sends counted %d -> %d while %d were sent", before.Eager, during.Eager, n)
		}
		if after.Eager != during.Eager || after.LLPHits != during.LLPHits {
			return fmt.Errorf("counters changed when the communicator was freed: %+v -> %+v", during, after)
		}
		return nil
	}, mpitest.WithMCA("btl", "self,shm"))
}

// A blocking receive whose message comes over a BTL the fast path cannot
// peek at (here tloop; tcp beside tofu in a job), while the peer has an LLP
// the fast path polls, must notice the BTL's message long before the
// polling budget runs out: the whole budget cost a 4 KiB tcp message ~30 µs.
func TestFastPathSeesUnpeekedBTL(t *testing.T) {
	const size = 2048               // above pml_ob1_llp_max_payload_size, below tloop's eager limit
	sent := make(chan struct{}, 20) // rank 0 never blocks on it, even when rank 1 fails
	mpitest.Run(t, 2, func(r *mpitest.Rank) error {
		c := r.CommWorld()
		for round := range 20 {
			if r.Rank() == 0 {
				if err := mpi.Send(c, make([]byte, size), 1, round); err != nil {
					return err
				}
				sent <- struct{}{}
				continue
			}
			<-sent // the message waits in the BTL before the receive starts
			before := theLLP.peeks(r.JobID(), 1)
			buf := make([]byte, size)
			if _, err := mpi.Recv(c, buf, 0, round); err != nil {
				return err
			}
			if n := theLLP.peeks(r.JobID(), 1) - before; n >= ob1.FastPolls {
				return fmt.Errorf("round %d: the fast path peeked at the LLP %d times before it looked at the BTL (budget %d)", round, n, ob1.FastPolls)
			}
		}
		return nil
	}, withLLP(0, mpitest.WithMCA("btl", "self,tloop"), mpitest.WithMCA("btl_tloop_enable", "1"),
		mpitest.WithMCA("llp_testllp_peek", "1"))...)
}

// A bad pml_ob1_rdma_retry_ms or pml_ob1_rdma_choice fails Init with an
// error that names the parameter and what it accepts.
func TestBadRDMAChoiceParameters(t *testing.T) {
	for _, c := range []struct{ name, value, want string }{
		{"pml_ob1_rdma_retry_ms", "0", "pml_ob1_rdma_retry_ms = 0: accepted: 1 to 60000"},
		{"pml_ob1_rdma_retry_ms", "60001", "pml_ob1_rdma_retry_ms = 60001: accepted: 1 to 60000"},
		{"pml_ob1_rdma_choice", "sometimes", "pml_ob1_rdma_choice"},
	} {
		t.Run(c.name+"="+c.value, func(t *testing.T) {
			inst, err := mpi.InitWith(mpi.Options{Env: testutil.CleanEnv(), Output: testutil.LogWriter{T: t},
				MCA:  []params.Setting{{Name: c.name, Value: c.value}},
				Exit: func(int) { runtime.Goexit() }})
			if err == nil {
				inst.Finalize()
				t.Fatal("Init succeeded")
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q does not contain %q", err, c.want)
			}
			if c.value != "sometimes" && !errors.Is(err, mpierr.ErrUnsupportedParam) {
				t.Errorf("error %q is not of class %v", err, mpierr.ErrUnsupportedParam)
			}
		})
	}
}

// In the pipelined range the sender follows the receiver's measure
// (rdmachoice.go): where the receiver's Get is slow it takes fragments, and
// the sender pipelines runs of messages with an RDMA Get offer between
// them, so that the receiver can look again; where fragments are slow the
// receiver reads, and the sender offers every message but the run of
// PIPEs that is the receiver's first trial of fragments. With pml_ob1_rdma_choice=always every
// message in the range goes pipelined, as before the choice. Every byte
// arrives either way.
func TestPipelinedFollowsTheReceiversChoice(t *testing.T) {
	const n, count = 12000, 1000
	for _, c := range []struct {
		name string
		mca  []string
		// check the sender's counters: pipelined messages and RGET offers.
		check func(piped, offered uint64) error
	}{
		// The slow way takes 20 ms a message: far beyond what a machine
		// busy with other tests adds to the fast one (at 2 ms, two
		// other busy threads on the two cores flipped the choice).
		{"get slow", []string{"btl_tloop_get", "slow", "btl_tloop_slow_ms", "20"}, func(piped, offered uint64) error {
			if piped < count*3/4 || offered < count/ob1.PipeRun {
				return fmt.Errorf("%d pipelined, %d offered: want most pipelined, and an offer at least every %d", piped, offered, ob1.PipeRun)
			}
			return nil
		}},
		{"fragments slow", []string{"btl_tloop_slow_payload", "8k", "btl_tloop_slow_ms", "20", "pml_ob1_rdma_retry_ms", "60000"}, func(piped, offered uint64) error {
			// The first trial of fragments is a run of PIPEs; the next
			// would come after a wait longer than the test (the retry).
			// A second run is allowed: two slow Gets of the last four (a
			// collection, goroutine ranks sharing the cores) can make
			// fragments look the cheaper for a run.
			if piped > 3*ob1.PipeTrialRun || offered < count-3*ob1.PipeTrialRun {
				return fmt.Errorf("%d pipelined, %d offered: want all offered but a trial's run of %d, or two", piped, offered, ob1.PipeTrialRun-1)
			}
			return nil
		}},
		{"always", []string{"pml_ob1_rdma_choice", "always"}, func(piped, offered uint64) error {
			if piped != count || offered != 0 {
				return fmt.Errorf("%d pipelined, %d offered: want all pipelined", piped, offered)
			}
			return nil
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			opts := []mpitest.Option{mpitest.WithMCA("btl", "self,tloop"), mpitest.WithMCA("btl_tloop_enable", "1"),
				mpitest.WithMCA("btl_tloop_pipeline_limit", "64k")}
			for i := 0; i < len(c.mca); i += 2 {
				opts = append(opts, mpitest.WithMCA(c.mca[i], c.mca[i+1]))
			}
			mpitest.Run(t, 2, func(r *mpitest.Rank) error {
				w := r.CommWorld()
				buf, ack := make([]byte, n), make([]byte, 1)
				before := r.PMLStats()
				for i := 0; i < count; i++ {
					if w.Rank() == 0 {
						for k := range buf {
							buf[k] = byte(k*7 + i)
						}
						if err := w.Send(buf, 1, i); err != nil {
							return err
						}
						if _, err := w.Recv(ack, 1, i); err != nil {
							return err
						}
						continue
					}
					if _, err := w.Recv(buf, 0, i); err != nil {
						return err
					}
					for k := range buf {
						if buf[k] != byte(k*7+i) {
							return fmt.Errorf("message %d: byte %d is %d, want %d", i, k, buf[k], byte(k*7+i))
						}
					}
					if err := w.Send(ack, 0, i); err != nil {
						return err
					}
				}
				if w.Rank() != 0 {
					return nil
				}
				after := r.PMLStats()
				piped, offered := after.Pipelined-before.Pipelined, after.RGet-before.RGet
				t.Logf("%d pipelined, %d offered, %d taken by fragments", piped, offered, after.RGetFallbacks-before.RGetFallbacks)
				if piped+offered != count {
					return fmt.Errorf("%d pipelined and %d offered of %d messages", piped, offered, count)
				}
				if raceEnabled && c.name != "always" {
					return nil // the choice measures the scheduler here (raceEnabled)
				}
				return c.check(piped, offered)
			}, opts...)
		})
	}
}

// A blocking receive does not take a message in place (the fast path)
// while a receive posted before it could take that message: the earlier
// receive gets it, as MPI's order says, whichever way it came (the LLP's
// slot, the shm ring) and whether the earlier receive names the source or
// is AnySource. The sender's messages wait unprogressed in the transports
// when the blocking receive starts (the ranks are goroutines of one
// process: a channel orders them without progressing either rank), so the
// fast path finds them there at once.
func TestFastPathYieldsToPostedReceive(t *testing.T) {
	for _, c := range []struct {
		name, llp string
		src       int
	}{
		{"llp/from-rank", "", 0}, {"llp/anysource", "", mpi.AnySource},
		{"ring/from-rank", "^tofu", 0}, {"ring/anysource", "^tofu", mpi.AnySource},
	} {
		t.Run(c.name, func(t *testing.T) {
			posted, sent := make(chan struct{}), make(chan struct{})
			opts := []mpitest.Option{mpitest.WithMCA("btl", "self,shm")}
			if c.llp != "" {
				opts = append(opts, mpitest.WithMCA("llp", c.llp))
			}
			mpitest.Run(t, 2, func(r *mpitest.Rank) error {
				w := r.CommWorld()
				if err := w.Barrier(); err != nil { // the boxes are made
					return err
				}
				if r.Rank() == 0 {
					<-posted
					for _, m := range []string{"first", "second"} {
						if err := w.Send([]byte(m), 1, 5); err != nil {
							return err
						}
					}
					close(sent)
					return nil
				}
				early := make([]byte, 8)
				q, err := w.Irecv(early, c.src, mpi.AnyTag)
				if err != nil {
					return err
				}
				close(posted)
				<-sent
				late := make([]byte, 8)
				st, err := w.Recv(late, 0, 5)
				if err != nil {
					return err
				}
				qst, err := q.Wait()
				if err != nil {
					return err
				}
				if got := string(early[:qst.Count]); got != "first" {
					return fmt.Errorf("the receive posted first got %q, the blocking one %q: want first, second", got, late[:st.Count])
				}
				if got := string(late[:st.Count]); got != "second" {
					return fmt.Errorf("the blocking receive got %q, want second", got)
				}
				return nil
			}, opts...)
		})
	}
}
