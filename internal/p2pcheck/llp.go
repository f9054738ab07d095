package p2pcheck

import (
	"fmt"
	"time"

	"github.com/gompi/gompi/components/pml/ob1"
	"github.com/gompi/gompi/mpi"
)

// The checks of the low-latency path (LLP) below run between ranks 0 and 1
// of a communicator (other ranks only take part in its barriers); they hold
// with any LLP, or none, and say what they saw so that a test can ask for
// hits and fall-backs.

// StreamResult is what LLPStream saw on rank 0.
type StreamResult struct {
	// Candidates counts the sends that may be offered to the LLP:
	// blocking standard and buffered sends shorter than the LLP limit.
	Candidates int
	// Before and After are rank 0's counters around the stream.
	Before, After mpi.PMLStats
}

// Hits and Fallbacks are the LLP's counts over the stream.
func (s StreamResult) Hits() uint64      { return s.After.LLPHits - s.Before.LLPHits }
func (s StreamResult) Fallbacks() uint64 { return s.After.LLPFallbacks - s.Before.LLPFallbacks }

// LLPLimit is the instance's pml_ob1_llp_max_payload_size: blocking sends
// with a shorter payload are offered to the LLP.
func LLPLimit(inst *mpi.Instance) (int, error) {
	_, v, ok := inst.Params().Lookup("pml_ob1_llp_max_payload_size")
	if !ok {
		return 0, fmt.Errorf("pml_ob1_llp_max_payload_size is not registered")
	}
	return int(v.Uint()), nil
}

// EagerPayload is the longest payload that goes eager to world rank peer:
// the largest eager limit of the routes that carry its messages, less the
// MATCH header.
func EagerPayload(inst *mpi.Instance, peer int) int {
	limit := 0
	for _, rt := range inst.BML().Peer(peer).Send {
		limit = max(limit, rt.Attr.EagerLimit)
	}
	return limit - ob1.MatchHeaderLen
}

// streamSizes are the sizes of the LLP stream, taken from the limits of
// the job: mostly below the LLP limit, some at it and just below it, some
// one byte above the eager limit.
type streamSizes struct{ llpMax, eager int }

func (s streamSizes) size(i int) int {
	switch {
	case i%50 == 49:
		return s.eager + 1
	case i%11 == 10:
		return s.llpMax
	case i%13 == 12:
		return s.llpMax - 1
	}
	return 16 + i%min(200, s.llpMax-16)
}

// LLPStream sends n messages from rank 0 to rank 1 of the world that mix
// every kind of send: blocking small and large, non-blocking, synchronous
// and buffered, on both sides of the LLP limit and of the eager limit.
// Rank 1 starts receiving delay late (so that an LLP with few slots fills
// and refuses, and the normal path takes over) and checks that the stream
// arrives whole and in the order sent, whichever path each message took.
// Rank 0 returns what it saw.
func LLPStream(c *mpi.Comm, n int, delay time.Duration) (StreamResult, error) {
	const tag = 7
	var res StreamResult
	inst := c.Instance()
	if c.Size() < 2 || c != inst.CommWorld() {
		return res, fmt.Errorf("the LLP stream needs the world of 2 ranks or more")
	}
	llpMax, err := LLPLimit(inst)
	if err != nil {
		return res, err
	}
	if llpMax <= 16 {
		// Every message carries a 16-byte header.
		return res, fmt.Errorf("the LLP stream needs an LLP limit above 16 bytes, not %d", llpMax)
	}
	peer := 1
	if c.Rank() == 1 {
		peer = 0
	}
	sz := streamSizes{llpMax: llpMax, eager: EagerPayload(inst, peer)}
	if err := Barrier(c); err != nil {
		return res, err
	}
	switch c.Rank() {
	case 1:
		time.Sleep(delay)
		buf := make([]byte, max(sz.eager+1, llpMax))
		for i := 0; i < n; i++ {
			h, err := recvMsg(c, buf, 0, tag)
			if err != nil {
				return res, fmt.Errorf("message %d: %w", i, err)
			}
			if h.idx != i || h.size != max(sz.size(i), 16) {
				return res, fmt.Errorf("message %d: got message %d of %d bytes (want %d)", i, h.idx, h.size, sz.size(i))
			}
		}
	case 0:
		if err := inst.BufferAttach(make([]byte, 1<<20+sz.eager)); err != nil {
			return res, err
		}
		res.Before = inst.PMLStats()
		var reqs []*mpi.Request
		for i := 0; i < n; i++ {
			b := msg(0, tag, i, sz.size(i))
			small := len(b) < llpMax
			var err error
			switch kind := i % 7; {
			case kind == 3:
				var rq *mpi.Request
				rq, err = c.Isend(b, 1, tag)
				reqs = append(reqs, rq)
			case kind == 5 && i%2 == 0:
				err = c.Ssend(b, 1, tag)
			case kind == 6:
				err = c.Bsend(b, 1, tag)
				res.Candidates += boolInt(small)
			default:
				err = c.Send(b, 1, tag)
				res.Candidates += boolInt(small)
			}
			if err != nil {
				return res, fmt.Errorf("message %d: %w", i, err)
			}
		}
		if err := mpi.Waitall(reqs, nil); err != nil {
			return res, err
		}
		if _, err := inst.BufferDetach(); err != nil {
			return res, err
		}
		res.After = inst.PMLStats()
		// A send that finds earlier sends to its peer still queued (the
		// transport was full) is not offered to the LLP: it would overtake
		// them. So hits and fall-backs add up to at most the candidates.
		if h, f := res.Hits(), res.Fallbacks(); h+f > uint64(res.Candidates) {
			return res, fmt.Errorf("LLP hits %d + fall-backs %d: more than the %d sends that could be offered to it", h, f, res.Candidates)
		}
	}
	return res, Barrier(c)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// LLPCounters checks the LLP counters of ranks 0 and 1, each sending to the
// other: small blocking sends in standard, ready and buffered mode hit the
// LLP when wantHits (an LLP that reaches the peer is in use); non-blocking
// and synchronous sends, sends to oneself and messages at or above the LLP
// limit (pml_ob1_llp_max_payload_size) never reach it. No send may fall
// back: the peer keeps receiving.
func LLPCounters(c *mpi.Comm, wantHits bool) error {
	if c.Size() < 2 {
		return fmt.Errorf("the LLP counter check needs 2 ranks")
	}
	llpMax, err := LLPLimit(c.Instance())
	if err != nil {
		return err
	}
	me := c.Rank()
	if me > 1 {
		for i := 0; i < 18; i++ { // the barriers below
			if err := Barrier(c); err != nil {
				return err
			}
		}
		return nil
	}
	inst := c.Instance()
	peer := 1 - me
	if err := inst.BufferAttach(make([]byte, 1<<16)); err != nil {
		return err
	}
	defer inst.BufferDetach()
	small, limit, above := make([]byte, max(llpMax/2, 1)), make([]byte, llpMax), make([]byte, llpMax+1)
	if llpMax == 0 {
		small = nil
	}
	type step struct {
		name     string
		send     func() error
		received int // messages the peer receives
		hits     bool
	}
	steps := []step{
		{"blocking small", func() error { return c.Send(small, peer, 1) }, 1, wantHits && llpMax > 0},
		{"ready small", func() error { return c.Rsend(small, peer, 1) }, 1, wantHits && llpMax > 0},
		{"buffered small", func() error { return c.Bsend(small, peer, 1) }, 1, wantHits && llpMax > 0},
		{"non-blocking small", func() error { return wait(c.Isend(small, peer, 1)) }, 1, false},
		{"synchronous small", func() error { return c.Ssend(small, peer, 1) }, 1, false},
		{"to oneself", func() error {
			if err := c.Send(small, me, 2); err != nil {
				return err
			}
			_, err := c.Recv(small, me, 2)
			return err
		}, 0, false},
		{"at the limit", func() error { return c.Send(limit, peer, 1) }, 1, false},
		{"above the limit", func() error { return c.Send(above, peer, 1) }, 1, false},
		{"blocking small again", func() error { return c.Send(small, peer, 1) }, 1, wantHits && llpMax > 0},
	}
	buf := make([]byte, llpMax+1)
	for _, s := range steps {
		// Receives first: a synchronous send waits for them, and a
		// message that finds its receive posted leaves the slot at once.
		var reqs []*mpi.Request
		for k := 0; k < s.received; k++ {
			rq, err := c.Irecv(buf, peer, 1)
			if err != nil {
				return err
			}
			reqs = append(reqs, rq)
		}
		if err := Barrier(c); err != nil {
			return err
		}
		before := inst.PMLStats()
		if err := s.send(); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		after := inst.PMLStats()
		if err := mpi.Waitall(reqs, nil); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		hits, falls := after.LLPHits-before.LLPHits, after.LLPFallbacks-before.LLPFallbacks
		if (hits > 0) != s.hits || falls != 0 {
			return fmt.Errorf("%s: %d LLP hits and %d fall-backs, want hits %v and no fall-back", s.name, hits, falls, s.hits)
		}
		if err := Barrier(c); err != nil {
			return err
		}
	}
	return nil
}
