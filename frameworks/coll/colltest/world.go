// Package colltest tests collective algorithms without the runtime: a World
// of goroutine ranks exchanging messages through memory, which counts what
// each rank sends, and a conformance suite that runs a slot function at
// many sizes and roots and compares every rank's result with a plain
// reference computation.
package colltest

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/gompi/gompi/frameworks/coll"
	"github.com/gompi/gompi/frameworks/pml"
	"github.com/gompi/gompi/mpierr"
)

// World is n ranks that exchange messages through memory: a send is
// queued at its destination at once (eagerly, without bound) and completes;
// a receive is matched, in order per pair and tag, when its rank waits
// (progresses), as in the runtime.
//
// Each message carries a Lamport stamp: one more than its sender's clock,
// which advances to the stamp of every message the rank receives. The
// largest clock after a collective is its number of rounds: the longest
// chain of messages each of which was sent after the previous one arrived.
type World struct {
	n     int
	mu    sync.Mutex
	ranks []*rankState
	llp   bool
}

type rankState struct {
	eng    *pml.Engine
	msgs   []message // arrived, not yet received
	posted []*posted
	clock  int
	sent   int
}

type message struct {
	src, tag, stamp int
	data            []byte
}

type posted struct {
	src, tag int
	buf      []byte
	req      *pml.Request
}

// NewWorld makes n ranks. llp is what their Comm.LLP reports.
func NewWorld(n int, llp bool) *World {
	w := &World{n: n, ranks: make([]*rankState, n), llp: llp}
	for i := range w.ranks {
		rs := &rankState{}
		// Waits sleep at once on the rank's bell, which a send to it
		// rings: a test of 65 goroutine ranks then costs no polling.
		rs.eng = pml.NewEngine(nil, nil, func() int { return w.progress(i) }, nil)
		rs.eng.SetPolicy(pml.Policy{Yield: true, SleepMax: time.Second})
		w.ranks[i] = rs
	}
	return w
}

// Comm returns rank's view of the world.
func (w *World) Comm(rank int) coll.Comm { return &comm{w: w, rank: rank} }

// Sent returns the messages each rank has sent so far.
func (w *World) Sent() []int {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]int, w.n)
	for i, rs := range w.ranks {
		out[i] = rs.sent
	}
	return out
}

// MaxSent is the most messages any rank has sent.
func (w *World) MaxSent() int { return slices.Max(w.Sent()) }

// Rounds is the largest clock: the longest chain of dependent messages
// since the world was made (or Reset).
func (w *World) Rounds() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	m := 0
	for _, rs := range w.ranks {
		m = max(m, rs.clock)
	}
	return m
}

// Reset zeroes the counts and clocks.
func (w *World) Reset() {
	w.mu.Lock()
	for _, rs := range w.ranks {
		rs.sent, rs.clock = 0, 0
	}
	w.mu.Unlock()
}

// Run runs fn on every rank, each in its own goroutine, and returns the
// first rank's error (nil when all succeed). A run that takes longer than a
// minute is reported as hung.
func (w *World) Run(fn func(c coll.Comm) error) error {
	errs := make([]error, w.n)
	var wg sync.WaitGroup
	for r := 0; r < w.n; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				if p := recover(); p != nil {
					errs[r] = fmt.Errorf("rank %d panicked: %v", r, p)
				}
			}()
			if err := fn(w.Comm(r)); err != nil {
				errs[r] = fmt.Errorf("rank %d: %w", r, err)
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		return fmt.Errorf("colltest: %d ranks: hung for a minute", w.n)
	}
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// progress matches rank's posted receives, in posting order, with the
// messages that arrived, in arrival order per sender and tag.
func (w *World) progress(rank int) int {
	type match struct {
		p *posted
		m message
	}
	var done []match
	w.mu.Lock()
	rs := w.ranks[rank]
	for i := 0; i < len(rs.posted); {
		p := rs.posted[i]
		k := slices.IndexFunc(rs.msgs, func(m message) bool { return m.src == p.src && m.tag == p.tag })
		if k < 0 {
			i++
			continue
		}
		done = append(done, match{p, rs.msgs[k]})
		rs.clock = max(rs.clock, rs.msgs[k].stamp)
		rs.msgs = slices.Delete(rs.msgs, k, k+1)
		rs.posted = slices.Delete(rs.posted, i, i+1)
	}
	w.mu.Unlock()
	for _, d := range done {
		n := copy(d.p.buf, d.m.data)
		st := pml.Status{Source: d.p.src, Tag: d.p.tag, Count: n}
		if len(d.m.data) > len(d.p.buf) {
			st.Err = mpierr.Errorf(mpierr.ErrTruncate, "colltest: a message of %d bytes into %d", len(d.m.data), len(d.p.buf))
		}
		d.p.req.Complete(st)
	}
	return len(done)
}

type comm struct {
	w    *World
	rank int
}

func (c *comm) Rank() int    { return c.rank }
func (c *comm) Size() int    { return c.w.n }
func (c *comm) Name() string { return "colltest" }
func (c *comm) LLP() bool    { return c.w.llp }

func (c *comm) check(peer int) error {
	if peer < 0 || peer >= c.w.n {
		return mpierr.Errorf(mpierr.ErrRank, "colltest: rank %d of %d", peer, c.w.n)
	}
	return nil
}

func (c *comm) Isend(buf []byte, dst, tag int) (*pml.Request, error) {
	if err := c.check(dst); err != nil {
		return nil, err
	}
	w := c.w
	me := w.ranks[c.rank]
	data := append([]byte(nil), buf...)
	w.mu.Lock()
	me.sent++
	w.ranks[dst].msgs = append(w.ranks[dst].msgs, message{src: c.rank, tag: tag, stamp: me.clock + 1, data: data})
	w.mu.Unlock()
	w.ranks[dst].eng.Wake()
	r := new(pml.Request)
	r.Init(me.eng, nil)
	r.Complete(pml.Status{Source: dst, Tag: tag})
	return r, nil
}

func (c *comm) Irecv(buf []byte, src, tag int) (*pml.Request, error) {
	if err := c.check(src); err != nil {
		return nil, err
	}
	rs := c.w.ranks[c.rank]
	r := new(pml.Request)
	r.Init(rs.eng, nil)
	c.w.mu.Lock()
	rs.posted = append(rs.posted, &posted{src: src, tag: tag, buf: buf, req: r})
	c.w.mu.Unlock()
	return r, nil
}

func (c *comm) Send(buf []byte, dst, tag int) error {
	r, err := c.Isend(buf, dst, tag)
	if err != nil {
		return err
	}
	_, err = r.Wait()
	return err
}

func (c *comm) Recv(buf []byte, src, tag int) (pml.Status, error) {
	r, err := c.Irecv(buf, src, tag)
	if err != nil {
		return pml.Status{}, err
	}
	return r.Wait()
}

func (c *comm) Sendrecv(sbuf []byte, dst, stag int, rbuf []byte, src, rtag int) (pml.Status, error) {
	return pml.PostedSendrecv(c, sbuf, dst, stag, rbuf, src, rtag)
}

// Leftover reports messages nobody received and receives nobody matched:
// after a collective, both must be empty.
func (w *World) Leftover() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	for r, rs := range w.ranks {
		if len(rs.msgs) > 0 {
			m := rs.msgs[0]
			return fmt.Errorf("colltest: rank %d has %d messages nobody received (the first from rank %d, tag %d, %d bytes)",
				r, len(rs.msgs), m.src, m.tag, len(m.data))
		}
		if len(rs.posted) > 0 {
			return fmt.Errorf("colltest: rank %d has %d receives nothing matched", r, len(rs.posted))
		}
	}
	return nil
}
