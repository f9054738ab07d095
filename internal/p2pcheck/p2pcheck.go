// Package p2pcheck is the point-to-point matching suite: checks that every
// rank of a communicator runs together, over whatever transports the job
// uses. The tests of package mpi run it with goroutine ranks, and the
// p2pprog test program runs it in real processes under mpirun.
//
// Each check is collective: every rank calls it with the same options, and a
// barrier separates checks, so that a check's messages never meet another
// check's receives (every check also uses its own tags).
package p2pcheck

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gompi/gompi/components/pml/ob1"
	"github.com/gompi/gompi/mpi"
)

// Options tune the suite.
type Options struct {
	// Large is the size of the large (rendezvous) messages; 0 means 256 KiB.
	Large int
	// PerPair is the number of messages each rank sends each peer in the
	// ordering check; 0 means 6.
	PerPair int
	// Logf, when set, receives progress lines.
	Logf func(format string, a ...any)
}

func (o *Options) defaults() {
	if o.Large == 0 {
		o.Large = 256 << 10
	}
	if o.PerPair == 0 {
		o.PerPair = 6
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
}

// Check is one collective check.
type Check struct {
	Name string
	Run  func(c *mpi.Comm, o Options) error
}

// Checks are the suite, in the order Run runs them.
var Checks = []Check{
	{"errors", checkErrors},
	{"zerobyte", checkZeroByte},
	{"self", checkSelf},
	{"ordering", checkOrdering},
	{"anysource", checkAnySource},
	{"postorder", checkPostOrder},
	{"probe", checkProbe},
	{"truncation", checkTruncation},
	{"synchronous", checkSynchronous},
	{"eagerlimit", checkEagerLimit},
	{"pipeline", checkPipeline},
	{"mprobe", checkMprobe},
	{"concurrent", checkConcurrent},
	{"concurrentcomms", checkConcurrentComms},
	{"bsend", checkBsend},
	{"waitany", checkWaitany},
	{"waitcontext", checkWaitContext},
	{"typed", checkTyped},
}

// Run runs the checks named (all when names is empty), with a barrier before
// each. The error names the check and the rank.
func Run(c *mpi.Comm, o Options, names ...string) error {
	o.defaults()
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	for _, ch := range Checks {
		if len(want) > 0 && !want[ch.Name] {
			continue
		}
		if err := Barrier(c); err != nil {
			return fmt.Errorf("barrier before %s: %w", ch.Name, err)
		}
		start := time.Now()
		if err := ch.Run(c, o); err != nil {
			return fmt.Errorf("check %s, rank %d of %d: %w", ch.Name, c.Rank(), c.Size(), err)
		}
		o.Logf("rank %d: %s ok (%v)", c.Rank(), ch.Name, time.Since(start).Round(time.Millisecond))
	}
	return Barrier(c)
}

const tagBarrier = 1000

// Barrier waits for every rank of c, with point-to-point messages only.
func Barrier(c *mpi.Comm) error {
	n, me := c.Size(), c.Rank()
	if n == 1 {
		return nil
	}
	if me == 0 {
		for i := 1; i < n; i++ {
			if _, err := c.Recv(nil, mpi.AnySource, tagBarrier); err != nil {
				return err
			}
		}
		for i := 1; i < n; i++ {
			if err := c.Send(nil, i, tagBarrier); err != nil {
				return err
			}
		}
		return nil
	}
	if err := c.Send(nil, 0, tagBarrier); err != nil {
		return err
	}
	_, err := c.Recv(nil, 0, tagBarrier)
	return err
}

// msg makes a message of size bytes (at least 16) that says who sent it,
// with which tag, as which one: a header, then a pattern.
func msg(src, tag, idx, size int) []byte {
	b := make([]byte, max(size, 16))
	binary.LittleEndian.PutUint32(b[0:], uint32(src))
	binary.LittleEndian.PutUint32(b[4:], uint32(tag))
	binary.LittleEndian.PutUint32(b[8:], uint32(idx))
	binary.LittleEndian.PutUint32(b[12:], uint32(len(b)))
	for i := 16; i < len(b); i++ {
		b[i] = pattern(src, idx, i)
	}
	return b
}

func pattern(src, idx, i int) byte { return byte(i*7 + src*31 + idx*13 + i>>8) }

type header struct{ src, tag, idx, size int }

// parse checks a received message and returns its header.
func parse(b []byte) (header, error) {
	if len(b) < 16 {
		return header{}, fmt.Errorf("message of %d bytes, shorter than its header", len(b))
	}
	h := header{
		src: int(binary.LittleEndian.Uint32(b[0:])), tag: int(binary.LittleEndian.Uint32(b[4:])),
		idx: int(binary.LittleEndian.Uint32(b[8:])), size: int(binary.LittleEndian.Uint32(b[12:])),
	}
	if h.size != len(b) {
		return h, fmt.Errorf("message %+v received with %d bytes", h, len(b))
	}
	for i := 16; i < len(b); i++ {
		if b[i] != pattern(h.src, h.idx, i) {
			return h, fmt.Errorf("message %+v differs at byte %d", h, i)
		}
	}
	return h, nil
}

// recvMsg receives one message and checks that it comes from the status's
// source and carries the status's tag.
func recvMsg(c *mpi.Comm, buf []byte, src, tag int) (header, error) {
	st, err := c.Recv(buf, src, tag)
	if err != nil {
		return header{}, err
	}
	h, err := parse(buf[:st.Count])
	if err != nil {
		return h, err
	}
	if h.src != st.Source || h.tag != st.Tag {
		return h, fmt.Errorf("message %+v arrived with status source %d tag %d", h, st.Source, st.Tag)
	}
	return h, nil
}

func checkErrors(c *mpi.Comm, o Options) error {
	n := c.Size()
	expect := func(what string, err error, class error) error {
		if !errors.Is(err, class) {
			return fmt.Errorf("%s: got %v, want an error of class %v", what, err, class)
		}
		return nil
	}
	for _, e := range []struct {
		what  string
		err   error
		class error
	}{
		{"Send to rank size", c.Send(nil, n, 0), mpi.ErrRank},
		{"Send to rank -5", c.Send(nil, -5, 0), mpi.ErrRank},
		{"Send to AnySource", c.Send(nil, mpi.AnySource, 0), mpi.ErrRank},
		{"Send with tag -3", c.Send(nil, 0, -3), mpi.ErrTag},
		{"Send with AnyTag", c.Send(nil, 0, mpi.AnyTag), mpi.ErrTag},
		{"Send with tag MaxTag+1", c.Send(nil, 0, mpi.MaxTag+1), mpi.ErrTag},
		{"Ssend to rank size", c.Ssend(nil, n, 0), mpi.ErrRank},
		{"Recv from rank size", second(c.Recv(nil, n, 0)), mpi.ErrRank},
		{"Recv with tag -7", second(c.Recv(nil, 0, -7)), mpi.ErrTag},
		{"Irecv from rank -3", second(c.Irecv(nil, -3, 0)), mpi.ErrRank},
		{"Isend with tag -2", second(c.Isend(nil, 0, -2)), mpi.ErrTag},
		{"Probe from rank size", second(c.Probe(n, 0)), mpi.ErrRank},
		{"Send on a nil communicator", (*mpi.Comm)(nil).Send(nil, 0, 0), mpi.ErrComm},
		{"Recv on a nil communicator", second((*mpi.Comm)(nil).Recv(nil, 0, 0)), mpi.ErrComm},
		{"Bsend without a buffer", c.Bsend(make([]byte, 4096), c.Rank(), 0), mpi.ErrBuffer},
		{"Mrecv of a nil message", second(c.Mrecv(nil, nil)), mpi.ErrRequest},
	} {
		if err := expect(e.what, e.err, e.class); err != nil {
			return err
		}
	}
	// ProcNull: sends and receives complete at once, moving nothing.
	if err := c.Send([]byte("x"), mpi.ProcNull, 5); err != nil {
		return fmt.Errorf("Send to ProcNull: %v", err)
	}
	st, err := c.Recv(make([]byte, 8), mpi.ProcNull, mpi.AnyTag)
	if err != nil || st.Source != mpi.ProcNull || st.Tag != mpi.AnyTag || st.Count != 0 {
		return fmt.Errorf("Recv from ProcNull: %+v, %v", st, err)
	}
	r, err := c.Irecv(make([]byte, 8), mpi.ProcNull, 3)
	if err != nil {
		return err
	}
	if st, err := r.Wait(); err != nil || st.Source != mpi.ProcNull || st.Count != 0 {
		return fmt.Errorf("Irecv from ProcNull: %+v, %v", st, err)
	}
	m, st, err := c.Mprobe(mpi.ProcNull, 0)
	if err != nil || st.Source != mpi.ProcNull {
		return fmt.Errorf("Mprobe of ProcNull: %+v, %v", st, err)
	}
	if st, err := c.Mrecv(nil, m); err != nil || st.Source != mpi.ProcNull {
		return fmt.Errorf("Mrecv of ProcNull: %+v, %v", st, err)
	}
	return nil
}

func second[T any](_ T, err error) error { return err }

// Zero-byte messages to every rank, self included, received into nil and
// into non-empty buffers.
func checkZeroByte(c *mpi.Comm, o Options) error {
	n, me := c.Size(), c.Rank()
	var reqs []*mpi.Request
	for p := 0; p < n; p++ {
		for k, tag := range []int{7, 8} {
			var buf []byte
			if k == 1 {
				buf = []byte{}
			}
			r, err := c.Isend(buf, p, tag)
			if err != nil {
				return err
			}
			reqs = append(reqs, r)
		}
	}
	for p := 0; p < n; p++ {
		st, err := c.Recv(nil, p, 7)
		if err != nil || st.Count != 0 || st.Source != p || st.Tag != 7 {
			return fmt.Errorf("zero-byte receive from %d: %+v, %v", p, st, err)
		}
		st, err = c.Recv(make([]byte, 10), mpi.AnySource, 8)
		if err != nil || st.Count != 0 || st.Tag != 8 {
			return fmt.Errorf("zero-byte receive from AnySource: %+v, %v", st, err)
		}
	}
	_ = me
	return mpi.Waitall(reqs, nil)
}

// Messages to oneself, small and large, blocking and not.
func checkSelf(c *mpi.Comm, o Options) error {
	me := c.Rank()
	buf := make([]byte, o.Large+100)
	for i, size := range []int{16, 100, o.Large} {
		r, err := c.Isend(msg(me, 9, i, size), me, 9)
		if err != nil {
			return err
		}
		h, err := recvMsg(c, buf, me, 9)
		if err != nil {
			return err
		}
		if h.idx != i {
			return fmt.Errorf("self message %d arrived as %d", i, h.idx)
		}
		if _, err := r.Wait(); err != nil {
			return err
		}
	}
	// A small blocking send to oneself completes before its receive.
	if err := c.Send(msg(me, 10, 0, 64), me, 10); err != nil {
		return err
	}
	if _, err := recvMsg(c, buf, mpi.AnySource, 10); err != nil {
		return err
	}
	// Synchronous to oneself: complete only after the receive.
	r, err := c.Issend(msg(me, 11, 0, 32), me, 11)
	if err != nil {
		return err
	}
	if r.Done() {
		return errors.New("Issend to oneself completed before its receive was posted")
	}
	if _, err := recvMsg(c, buf, me, 11); err != nil {
		return err
	}
	_, err = r.Wait()
	return err
}

// Every rank sends PerPair messages to every rank over three tags, with
// sizes that cross the protocols (a large one to its right neighbour and to
// itself), all at once; the receiver takes them tag by tag in reverse order,
// then checks that each (source, tag) stream arrives in the order sent.
func checkOrdering(c *mpi.Comm, o Options) error {
	n, me := c.Size(), c.Rank()
	tags := []int{21, 22, 23}
	sizes := []int{16, 100, 1000, 5000, 40000}
	size := func(src, dst, idx int) int {
		if idx == o.PerPair/2 && (dst == (src+1)%n || dst == src) {
			return o.Large
		}
		return sizes[(idx+src+dst)%len(sizes)]
	}
	var reqs []*mpi.Request
	for p := 0; p < n; p++ {
		for idx := 0; idx < o.PerPair; idx++ {
			tag := tags[idx%len(tags)]
			r, err := c.Isend(msg(me, tag, idx, size(me, p, idx)), p, tag)
			if err != nil {
				return err
			}
			reqs = append(reqs, r)
		}
	}
	buf := make([]byte, o.Large+100)
	for s := 0; s < n; s++ {
		for t := len(tags) - 1; t >= 0; t-- {
			last := -1
			for idx := t; idx < o.PerPair; idx += len(tags) {
				h, err := recvMsg(c, buf, s, tags[t])
				if err != nil {
					return err
				}
				if h.src != s || h.tag != tags[t] || h.idx <= last || h.idx != idx {
					return fmt.Errorf("from %d tag %d: got message %+v after %d, want message %d", s, tags[t], h, last, idx)
				}
				if h.size != max(16, size(s, me, idx)) {
					return fmt.Errorf("message %+v has size %d, want %d", h, h.size, size(s, me, idx))
				}
				last = h.idx
			}
		}
	}
	return mpi.Waitall(reqs, nil)
}

// Every rank sends to rank 0, which receives with AnySource and AnyTag: each
// sender's messages must come in the order sent, and each exactly once.
// Half the receives are posted before the messages exist.
func checkAnySource(c *mpi.Comm, o Options) error {
	n, me := c.Size(), c.Rank()
	const per = 8
	if me != 0 {
		// Wait for rank 0's receives to be posted.
		if _, err := c.Recv(nil, 0, 31); err != nil {
			return err
		}
		for idx := 0; idx < per; idx++ {
			size := 16 + idx*100
			if idx == per-1 {
				size = o.Large / 4
			}
			if err := c.Send(msg(me, 30+idx%2, idx, size), 0, 30+idx%2); err != nil {
				return err
			}
		}
		// Stay until rank 0 has everything: its AnyTag receives must not
		// meet the next barrier's message.
		_, err := c.Recv(nil, 0, 32)
		return err
	}
	total := (n - 1) * per
	posted := total / 2
	bufs := make([][]byte, total)
	reqs := make([]*mpi.Request, posted)
	for i := range reqs {
		bufs[i] = make([]byte, o.Large/4+16)
		r, err := c.Irecv(bufs[i], mpi.AnySource, mpi.AnyTag)
		if err != nil {
			return err
		}
		reqs[i] = r
	}
	for p := 1; p < n; p++ {
		if err := c.Send(nil, p, 31); err != nil {
			return err
		}
	}
	last := make([]int, n)
	for i := range last {
		last[i] = -1
	}
	seen := 0
	take := func(b []byte, st mpi.Status) error {
		h, err := parse(b[:st.Count])
		if err != nil {
			return err
		}
		if h.src != st.Source || h.tag != st.Tag {
			return fmt.Errorf("message %+v with status %+v", h, st)
		}
		if h.idx != last[h.src]+1 {
			return fmt.Errorf("from %d: message %d after %d", h.src, h.idx, last[h.src])
		}
		last[h.src] = h.idx
		seen++
		return nil
	}
	for i, r := range reqs {
		st, err := r.Wait()
		if err != nil {
			return err
		}
		if err := take(bufs[i], st); err != nil {
			return fmt.Errorf("posted receive %d: %w", i, err)
		}
	}
	buf := make([]byte, o.Large/4+16)
	for seen < total {
		st, err := c.Recv(buf, mpi.AnySource, mpi.AnyTag)
		if err != nil {
			return err
		}
		if err := take(buf, st); err != nil {
			return err
		}
	}
	for p := 1; p < n; p++ {
		if err := c.Send(nil, p, 32); err != nil {
			return err
		}
	}
	return nil
}

// A message matches the earliest posted receive that fits it: rank 0 posts
// (1, tag 5), (AnySource, AnyTag), (1, AnyTag); rank 1 sends tags 5, 6, 5.
func checkPostOrder(c *mpi.Comm, o Options) error {
	if c.Size() < 2 {
		return nil
	}
	if c.Rank() > 1 {
		// Stay until rank 0 is done: its AnySource receive must not meet
		// the next barrier's message.
		_, err := c.Recv(nil, 0, 42)
		return err
	}
	if c.Rank() == 1 {
		if _, err := c.Recv(nil, 0, 41); err != nil {
			return err
		}
		for i, tag := range []int{5, 6, 5} {
			if err := c.Send(msg(1, tag, i, 40), 0, tag); err != nil {
				return err
			}
		}
		return nil
	}
	bufs := [3][]byte{make([]byte, 64), make([]byte, 64), make([]byte, 64)}
	var reqs [3]*mpi.Request
	var err error
	if reqs[0], err = c.Irecv(bufs[0], 1, 5); err != nil {
		return err
	}
	if reqs[1], err = c.Irecv(bufs[1], mpi.AnySource, mpi.AnyTag); err != nil {
		return err
	}
	if reqs[2], err = c.Irecv(bufs[2], 1, mpi.AnyTag); err != nil {
		return err
	}
	if err := c.Send(nil, 1, 41); err != nil {
		return err
	}
	for i, r := range reqs {
		h, err := waitMsg(r, bufs[i])
		if err != nil {
			return err
		}
		if h.idx != i {
			return fmt.Errorf("receive %d (posted %d-th) got message %d (tag %d)", i, i, h.idx, h.tag)
		}
	}
	for p := 2; p < c.Size(); p++ {
		if err := c.Send(nil, p, 42); err != nil {
			return err
		}
	}
	return nil
}

// Probe and Iprobe describe a message without receiving it; the receive
// that follows gets the same message.
func checkProbe(c *mpi.Comm, o Options) error {
	n, me := c.Size(), c.Rank()
	right, left := (me+1)%n, (me+n-1)%n
	var reqs []*mpi.Request
	for i, size := range []int{100 + me, o.Large + me} {
		r, err := c.Isend(msg(me, 50+i, i, size), right, 50+i)
		if err != nil {
			return err
		}
		reqs = append(reqs, r)
	}
	st, err := c.Probe(mpi.AnySource, 50)
	if err != nil {
		return err
	}
	if st.Source != left || st.Tag != 50 || st.Count != 100+left {
		return fmt.Errorf("Probe: %+v, want source %d tag 50 count %d", st, left, 100+left)
	}
	var ok bool
	for !ok {
		if st, ok, err = c.Iprobe(left, mpi.AnyTag); err != nil {
			return err
		}
	}
	if st.Tag != 50 {
		return fmt.Errorf("Iprobe(AnyTag) found tag %d, want the earlier message's 50", st.Tag)
	}
	if _, err := recvMsg(c, make([]byte, st.Count), st.Source, st.Tag); err != nil {
		return err
	}
	if st, err = c.Probe(left, 51); err != nil {
		return err
	}
	if st.Count != o.Large+left {
		return fmt.Errorf("Probe of the large message: count %d, want %d", st.Count, o.Large+left)
	}
	if _, err := recvMsg(c, make([]byte, st.Count), left, 51); err != nil {
		return err
	}
	return mpi.Waitall(reqs, nil)
}

// A message longer than the buffer fills the buffer, never more, and fails
// with ErrTruncate; the sender completes normally. Eager, rendezvous and
// (where the transport offers it) RGET sizes, blocking and not.
func checkTruncation(c *mpi.Comm, o Options) error {
	n, me := c.Size(), c.Rank()
	right, left := (me+1)%n, (me+n-1)%n
	// 100 bytes go eager on any route (an eager limit is at least 256);
	// one byte past the largest eager limit of the job goes by rendezvous
	// on every route.
	eager := 0
	inst := c.Instance()
	for w := 0; w < inst.Size(); w++ {
		eager = max(eager, EagerPayload(inst, w))
	}
	sizes := []int{100, eager + 1, o.Large}
	var reqs []*mpi.Request
	for i, size := range sizes {
		for k := 0; k < 2; k++ {
			r, err := c.Isend(msg(me, 60+k, i, size), right, 60+k)
			if err != nil {
				return err
			}
			reqs = append(reqs, r)
		}
	}
	const keep, guard = 20, 64
	for i, size := range sizes {
		for k := 0; k < 2; k++ {
			full := make([]byte, keep+guard)
			for j := range full {
				full[j] = 0xEE
			}
			buf := full[:keep:keep]
			var st mpi.Status
			var err error
			if k == 0 {
				st, err = c.Recv(buf, left, 60)
			} else {
				var r *mpi.Request
				if r, err = c.Irecv(buf, left, 61); err != nil {
					return err
				}
				st, err = r.Wait()
			}
			if !errors.Is(err, mpi.ErrTruncate) {
				return fmt.Errorf("%d-byte message into %d bytes: error %v, want ErrTruncate", size, keep, err)
			}
			if st.Count != keep || st.Source != left || st.Tag != 60+k {
				return fmt.Errorf("truncated %d-byte message: status %+v", size, st)
			}
			want := msg(left, 60+k, i, size)[:keep]
			if string(buf) != string(want) {
				return fmt.Errorf("truncated %d-byte message: the kept bytes differ", size)
			}
			for j := keep; j < len(full); j++ {
				if full[j] != 0xEE {
					return fmt.Errorf("truncated %d-byte message: byte %d past the buffer was written", size, j)
				}
			}
		}
	}
	// And into no buffer at all.
	r, err := c.Isend(msg(me, 62, 0, o.Large), right, 62)
	if err != nil {
		return err
	}
	if st, err := c.Recv(nil, left, 62); !errors.Is(err, mpi.ErrTruncate) || st.Count != 0 {
		return fmt.Errorf("large message into no buffer: %+v, %v", st, err)
	}
	reqs = append(reqs, r)
	return mpi.Waitall(reqs, nil)
}

// A synchronous send completes only once the receiver has matched: the
// sender's request stays pending until it lets the receiver post.
func checkSynchronous(c *mpi.Comm, o Options) error {
	n, me := c.Size(), c.Rank()
	peer := me ^ 1
	if peer >= n {
		return nil
	}
	for i, size := range []int{0, 16, 3000, o.Large} {
		if me%2 == 0 {
			r, err := c.Issend(make([]byte, size), peer, 70)
			if err != nil {
				return err
			}
			deadline := time.Now().Add(20 * time.Millisecond)
			for time.Now().Before(deadline) {
				_, done, err := r.Test()
				if err != nil {
					return err
				}
				if done {
					return fmt.Errorf("Issend of %d bytes (#%d) completed before the receiver posted its receive", size, i)
				}
				runtime.Gosched()
			}
			if err := c.Send(nil, peer, 71); err != nil {
				return err
			}
			if _, err := r.Wait(); err != nil {
				return err
			}
		} else {
			if _, err := c.Recv(nil, peer, 71); err != nil {
				return err
			}
			st, err := c.Recv(make([]byte, size), peer, 70)
			if err != nil || st.Count != size {
				return fmt.Errorf("synchronous message of %d bytes: %+v, %v", size, st, err)
			}
		}
	}
	// Blocking Ssend too: it returns, since the receiver posts.
	if me%2 == 0 {
		return c.Ssend(make([]byte, 10), peer, 72)
	}
	_, err := c.Recv(make([]byte, 10), peer, 72)
	return err
}

// At the eager limit a message goes eager; one byte more goes pipelined
// where the route has a pipeline limit above it, by rendezvous (or RGET)
// otherwise. The sender's counters say which.
func checkEagerLimit(c *mpi.Comm, o Options) error {
	n, me := c.Size(), c.Rank()
	right, left := (me+1)%n, (me+n-1)%n
	inst := c.Instance()
	if c != inst.CommWorld() {
		return nil // the route lookup below takes world ranks
	}
	limit := inst.BML().Peer(right).Send[0].Attr.EagerLimit - ob1.MatchHeaderLen
	leftLimit := inst.BML().Peer(left).Send[0].Attr.EagerLimit - ob1.MatchHeaderLen
	// A blocking send of a rendezvous message waits for its receive: post
	// the receives first.
	var rreqs []*mpi.Request
	var bufs [][]byte
	for i := 0; i < 2; i++ {
		b := make([]byte, leftLimit+1)
		r, err := c.Irecv(b, left, 80+i)
		if err != nil {
			return err
		}
		rreqs, bufs = append(rreqs, r), append(bufs, b)
	}
	if err := Barrier(c); err != nil {
		return err
	}
	// Non-blocking sends: a blocking one may take the low-latency path,
	// which has no eager limit of its own.
	before := inst.PMLStats()
	if err := wait(c.Isend(msg(me, 80, 0, limit), right, 80)); err != nil {
		return err
	}
	mid := inst.PMLStats()
	if err := wait(c.Isend(msg(me, 81, 1, limit+1), right, 81)); err != nil {
		return err
	}
	after := inst.PMLStats()
	if mid.Eager != before.Eager+1 || mid.Rendezvous+mid.RGet != before.Rendezvous+before.RGet {
		return fmt.Errorf("a %d-byte message (the eager limit) did not go eager: %+v then %+v", limit, before, mid)
	}
	if inst.BML().Peer(right).Send[0].Attr.PipelineLimit > limit {
		// Pipelined, or offered by RDMA Get while the receiver's measure
		// (pml_ob1_rdma_choice) has not said fragments win.
		piped, offered := after.Pipelined-mid.Pipelined, after.RGet-mid.RGet
		if after.Eager != mid.Eager || piped+offered != 1 || after.Rendezvous != mid.Rendezvous {
			return fmt.Errorf("a %d-byte message (the eager limit + 1) went neither pipelined nor by RDMA Get: %+v then %+v", limit+1, mid, after)
		}
	} else if after.Eager != mid.Eager || after.Rendezvous+after.RGet != mid.Rendezvous+mid.RGet+1 {
		return fmt.Errorf("a %d-byte message (the eager limit + 1) did not go by rendezvous: %+v then %+v", limit+1, mid, after)
	}
	for i, r := range rreqs {
		h, err := waitMsg(r, bufs[i])
		if err != nil {
			return err
		}
		if h.size != leftLimit+i {
			return fmt.Errorf("eager-limit message %d: %d bytes, want %d", i, h.size, leftLimit+i)
		}
	}
	return nil
}

// Several goroutines of each rank take messages with Mprobe/Improbe and
// Mrecv at once: every message is received exactly once, whole.
func checkMprobe(c *mpi.Comm, o Options) error {
	n, me := c.Size(), c.Rank()
	const per, workers = 12, 4
	var reqs []*mpi.Request
	for p := 0; p < n; p++ {
		for idx := 0; idx < per; idx++ {
			size := 16 + idx*37
			if idx == per-1 && p == (me+1)%n {
				size = o.Large
			}
			r, err := c.Isend(msg(me, 90, idx, size), p, 90)
			if err != nil {
				return err
			}
			reqs = append(reqs, r)
		}
	}
	total := int64(n * per)
	var got atomic.Int64
	var mu sync.Mutex
	seen := map[[2]int]bool{}
	var wg sync.WaitGroup
	errs := make([]error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for got.Load() < total {
				m, st, ok, err := c.Improbe(mpi.AnySource, 90)
				if err != nil {
					errs[w] = err
					return
				}
				if !ok {
					runtime.Gosched()
					continue
				}
				buf := make([]byte, st.Count)
				rst, err := c.Mrecv(buf, m)
				if err != nil {
					errs[w] = err
					return
				}
				h, err := parse(buf[:rst.Count])
				if err != nil {
					errs[w] = err
					return
				}
				if h.src != st.Source || rst.Source != st.Source || rst.Count != st.Count {
					errs[w] = fmt.Errorf("probed %+v, received %+v, message %+v", st, rst, h)
					return
				}
				mu.Lock()
				dup := seen[[2]int{h.src, h.idx}]
				seen[[2]int{h.src, h.idx}] = true
				mu.Unlock()
				if dup {
					errs[w] = fmt.Errorf("message %+v received twice", h)
					return
				}
				got.Add(1)
			}
		}(w)
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return mpi.Waitall(reqs, nil)
}

// Several goroutines per rank send and receive at once, each on its own tag,
// with blocking calls: each stream stays in order.
func checkConcurrent(c *mpi.Comm, o Options) error {
	n, me := c.Size(), c.Rank()
	right, left := (me+1)%n, (me+n-1)%n
	const workers, per = 4, 30
	var wg sync.WaitGroup
	errs := make([]error, 2*workers)
	for w := 0; w < workers; w++ {
		tag := 100 + w
		wg.Add(2)
		go func(w int) {
			defer wg.Done()
			for idx := 0; idx < per; idx++ {
				size := 16 + (idx*61+w*7)%300
				if idx%10 == 9 {
					size = 20000
				}
				if err := c.Send(msg(me, tag, idx, size), right, tag); err != nil {
					errs[2*w] = err
					return
				}
			}
		}(w)
		go func(w int) {
			defer wg.Done()
			buf := make([]byte, 20000)
			for idx := 0; idx < per; idx++ {
				h, err := recvMsg(c, buf, left, tag)
				if err != nil {
					errs[2*w+1] = err
					return
				}
				if h.idx != idx {
					errs[2*w+1] = fmt.Errorf("tag %d: message %d arrived as the %d-th", tag, h.idx, idx)
					return
				}
			}
		}(w)
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Several goroutines per rank send to the same peer at once, each on a
// communicator of its own and all with the same tag, mixing blocking and
// nonblocking sends of every protocol (eager, pipelined, rendezvous):
// each communicator's stream stays in order. ob1's sends to a peer of
// every communicator share one lock with the transport (btl.HeldSender);
// this is where a send path that took the transport's lock again under it
// would hang, and where a lost sequence number would show.
func checkConcurrentComms(c *mpi.Comm, o Options) error {
	n, me := c.Size(), c.Rank()
	if n < 2 {
		return nil
	}
	right, left := (me+1)%n, (me+n-1)%n
	const workers, per, tag = 4, 24, 7
	comms := make([]*mpi.Comm, workers)
	for w := range comms {
		d, err := c.Dup()
		if err != nil {
			return err
		}
		defer d.Free()
		comms[w] = d
	}
	sizes := []int{16, 200, 4000, 20000, 70000, o.Large}
	var wg sync.WaitGroup
	errs := make([]error, 2*workers)
	for w, d := range comms {
		wg.Add(2)
		go func() {
			defer wg.Done()
			var reqs []*mpi.Request
			for idx := 0; idx < per; idx++ {
				m := msg(me, tag, idx, sizes[(idx+w)%len(sizes)])
				if idx%2 == 0 {
					if err := d.Send(m, right, tag); err != nil {
						errs[2*w] = err
						return
					}
					continue
				}
				q, err := d.Isend(m, right, tag)
				if err != nil {
					errs[2*w] = err
					return
				}
				reqs = append(reqs, q)
			}
			errs[2*w] = mpi.Waitall(reqs, nil)
		}()
		go func() {
			defer wg.Done()
			buf := make([]byte, max(o.Large, 70000))
			for idx := 0; idx < per; idx++ {
				h, err := recvMsg(d, buf, left, tag)
				if err != nil {
					errs[2*w+1] = fmt.Errorf("communicator %d: %w", w, err)
					return
				}
				if h.idx != idx {
					errs[2*w+1] = fmt.Errorf("communicator %d: message %d arrived as the %d-th", w, h.idx, idx)
					return
				}
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Buffered sends copy into the attached buffer and return; Detach waits for
// them to leave. Too little room is an ErrBuffer error.
func checkBsend(c *mpi.Comm, o Options) error {
	n, me := c.Size(), c.Rank()
	right, left := (me+1)%n, (me+n-1)%n
	inst := c.Instance()
	const per, size = 5, 3000
	space := make([]byte, per*(size+mpi.BsendOverhead))
	if err := inst.BufferAttach(space); err != nil {
		return err
	}
	if err := inst.BufferAttach(space); !errors.Is(err, mpi.ErrBuffer) {
		return fmt.Errorf("a second BufferAttach: %v, want ErrBuffer", err)
	}
	for idx := 0; idx < per; idx++ {
		if err := c.Bsend(msg(me, 110, idx, size), right, 110); err != nil {
			return err
		}
	}
	// A message larger than the whole buffer can never fit.
	if err := c.Bsend(make([]byte, len(space)), right, 111); !errors.Is(err, mpi.ErrBuffer) {
		return fmt.Errorf("Bsend larger than the buffer: %v, want ErrBuffer", err)
	}
	if err := Barrier(c); err != nil { // the receivers post only now
		return err
	}
	buf := make([]byte, size)
	for idx := 0; idx < per; idx++ {
		h, err := recvMsg(c, buf, left, 110)
		if err != nil {
			return err
		}
		if h.idx != idx {
			return fmt.Errorf("buffered message %d arrived as the %d-th", h.idx, idx)
		}
	}
	got, err := inst.BufferDetach()
	if err != nil {
		return err
	}
	if len(got) != len(space) || &got[0] != &space[0] {
		return errors.New("BufferDetach did not return the attached buffer")
	}
	r, err := c.Ibsend(msg(me, 112, 0, 100), right, 112)
	if !errors.Is(err, mpi.ErrBuffer) || r != nil {
		return fmt.Errorf("Ibsend after detach: %v, want ErrBuffer", err)
	}
	return nil
}

// Waitany returns each request once; Testall reports completion.
func checkWaitany(c *mpi.Comm, o Options) error {
	n, me := c.Size(), c.Rank()
	reqs := make([]*mpi.Request, n)
	bufs := make([][]byte, n)
	for p := 0; p < n; p++ {
		bufs[p] = make([]byte, 64)
		r, err := c.Irecv(bufs[p], p, 120)
		if err != nil {
			return err
		}
		reqs[p] = r
	}
	var sends []*mpi.Request
	for p := n - 1; p >= 0; p-- {
		r, err := c.Isend(msg(me, 120, p, 64), p, 120)
		if err != nil {
			return err
		}
		sends = append(sends, r)
	}
	all := append([]*mpi.Request(nil), reqs...)
	seen := map[int]bool{}
	for range n {
		i, st, err := mpi.Waitany(reqs)
		if err != nil {
			return err
		}
		if seen[i] || reqs[i] != nil || st.Source != i {
			return fmt.Errorf("Waitany returned %d (%+v) again or with the wrong status", i, st)
		}
		seen[i] = true
	}
	if i, _, err := mpi.Waitany(reqs); i != mpi.Undefined || err != nil {
		return fmt.Errorf("Waitany with no active request: %d, %v", i, err)
	}
	sts := make([]mpi.Status, n)
	for {
		done, err := mpi.Testall(sends, nil)
		if err != nil {
			return err
		}
		if done {
			break
		}
	}
	if done, err := mpi.Testall(all, sts); !done || err != nil {
		return fmt.Errorf("Testall of completed receives: %v, %v", done, err)
	}
	for p, st := range sts {
		if st.Source != p || st.Count != 64 {
			return fmt.Errorf("Testall status %d: %+v", p, st)
		}
	}
	return nil
}

// WaitContext gives up when its context ends, leaving the receive pending;
// Cancel then takes it back.
func checkWaitContext(c *mpi.Comm, o Options) error {
	n, me := c.Size(), c.Rank()
	r, err := c.Irecv(make([]byte, 8), (me+1)%n, 130)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err = r.WaitContext(ctx)
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, mpi.ErrPending) {
		return fmt.Errorf("WaitContext past its deadline: %v, want DeadlineExceeded with class ErrPending", err)
	}
	if r.Done() {
		return errors.New("the receive completed although nothing was sent")
	}
	if !r.Cancel() {
		return errors.New("Cancel of an unmatched receive failed")
	}
	st, err := r.Wait()
	if err != nil || !st.Cancelled {
		return fmt.Errorf("cancelled receive: %+v, %v", st, err)
	}
	// A cancelled receive takes nothing: the next message goes to the next
	// receive. (Everyone cancels before anyone sends.)
	if err := Barrier(c); err != nil {
		return err
	}
	if err := c.Send(msg(me, 130, 0, 20), (me+n-1)%n, 130); err != nil {
		return err
	}
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	r2, err := c.Irecv(make([]byte, 20), (me+1)%n, 130)
	if err != nil {
		return err
	}
	st, err = r2.WaitContext(ctx2)
	if err != nil || st.Count != 20 {
		return fmt.Errorf("receive after a cancelled one: %+v, %v", st, err)
	}
	return nil
}

// Typed calls view slices as bytes; Count converts back, and a message that
// is not a whole number of elements is an ErrCount error.
func checkTyped(c *mpi.Comm, o Options) error {
	n, me := c.Size(), c.Rank()
	right, left := (me+1)%n, (me+n-1)%n
	f := make([]float64, 100)
	for i := range f {
		f[i] = float64(me*1000 + i)
	}
	r, err := mpi.Isend(c, f, right, 140)
	if err != nil {
		return err
	}
	got := make([]float64, 200)
	st, err := mpi.Recv(c, got, left, 140)
	if err != nil {
		return err
	}
	cnt, err := mpi.Count[float64](st)
	if err != nil || cnt != 100 || got[99] != float64(left*1000+99) {
		return fmt.Errorf("typed receive: count %d, %v, last %v", cnt, err, got[99])
	}
	if _, err := r.Wait(); err != nil {
		return err
	}
	// 7 bytes are not a whole number of int32s.
	if err := mpi.Send(c, []byte("1234567"), right, 141); err != nil {
		return err
	}
	ints := make([]int32, 4)
	if _, err := mpi.Recv(c, ints, left, 141); !errors.Is(err, mpi.ErrCount) {
		return fmt.Errorf("7 bytes into int32s: %v, want ErrCount", err)
	}
	// Sendrecv of two types.
	out := []uint16{uint16(me), 2, 3}
	in := make([]uint16, 3)
	if _, err := mpi.Sendrecv(c, out, right, 142, in, left, 142); err != nil || in[0] != uint16(left) {
		return fmt.Errorf("typed Sendrecv: %v, %v", in, err)
	}
	return nil
}

// wait waits for a request that was started without error.
// waitMsg waits for a receive posted into buf and parses the message.
func waitMsg(r *mpi.Request, buf []byte) (header, error) {
	st, err := r.Wait()
	if err != nil {
		return header{}, err
	}
	return parse(buf[:st.Count])
}

func wait(r *mpi.Request, err error) error {
	if err != nil {
		return err
	}
	_, err = r.Wait()
	return err
}
