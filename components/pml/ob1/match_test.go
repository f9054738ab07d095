package ob1

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gompi/gompi/frameworks/btl"
	"github.com/gompi/gompi/frameworks/group"
	"github.com/gompi/gompi/frameworks/llp"
	"github.com/gompi/gompi/frameworks/pml"
	"github.com/gompi/gompi/mca"
	"github.com/gompi/gompi/mpierr"
)

// newTestModule makes a module with no transport, for the matching engine:
// headers are fed to dispatch by hand and only eager messages are used. It
// has the world communicator (context id 0), in which this process is rank
// 0 of size.
func newTestModule(t testing.TB, size int) (*module, *pml.Comm) {
	t.Helper()
	var logs bytes.Buffer
	b, err := mca.NewBase(mca.Options{Output: &logs, Rank: 0})
	if err != nil {
		t.Fatal(err)
	}
	m := &module{
		base: b, log: b.Logger("pml").Named("ob1"), me: 0, size: size,
		llpOf: make([]llp.Module, size), lost: make([]atomic.Bool, size),
		sends: map[uint64]*sendReq{}, recvs: map[uint64]*recvReq{}, orphans: map[uint16][]*inMsg{},
		pipeline: 1, bml: new(btl.BML),
		rdma: newRDMAChoice(true, time.Second, size), offers: make([]atomic.Pointer[pipeOffers], size),
	}
	empty := []*comm{}
	m.comms.Store(&empty)
	m.eng = pml.NewEngine(nil, nil, func() int { return 0 }, nil)
	world := make([]int, size)
	for i := range world {
		world[i] = i
	}
	pc := &pml.Comm{CID: 0, Group: group.New(group.NewDense(world)), Rank: 0, Size: size}
	if err := m.AddComm(pc); err != nil {
		t.Fatal(err)
	}
	return m, pc
}

// matchFrag is a MATCH fragment whose payload is its text.
func matchFrag(ctx uint16, src, tag int, seq uint16, text string) []byte {
	var b [matchLen]byte
	return append(append([]byte(nil), putMatch(b[:], hdrMatch, ctx, src, tag, seq)...), text...)
}

func irecv(t *testing.T, m *module, pc *pml.Comm, src, tag int) *recvReq {
	t.Helper()
	c := pc.State.(*comm)
	c.mu.Lock()
	r := m.newRecvLocked(c, make([]byte, 64), src, tag, false)
	m.postLocked(c, r)
	return r
}

// text returns what a completed receive got, checking its status.
func text(t *testing.T, r *recvReq, m *module) string {
	t.Helper()
	if !r.Done() {
		t.Fatal("receive not complete")
	}
	st := r.Status()
	if st.Err != nil {
		t.Fatal(st.Err)
	}
	return string(r.buf[:st.Count])
}

func TestInOrderMatching(t *testing.T) {
	m, pc := newTestModule(t, 3)
	r1 := irecv(t, m, pc, 1, 5)
	m.dispatch(1, matchFrag(0, 1, 5, 0, "a"))
	m.dispatch(1, matchFrag(0, 1, 5, 1, "b")) // unexpected
	if got := text(t, r1, m); got != "a" {
		t.Errorf("first receive got %q", got)
	}
	st, ok, err := m.Iprobe(pc, 1, 5)
	if !ok || err != nil || st.Count != 1 || st.Source != 1 || st.Tag != 5 {
		t.Errorf("Iprobe: %+v %v %v", st, ok, err)
	}
	r2 := irecv(t, m, pc, pml.AnySource, pml.AnyTag)
	if got := text(t, r2, m); got != "b" {
		t.Errorf("second receive got %q", got)
	}
	if s := m.Stats(); s.Unexpected != 1 {
		t.Errorf("unexpected count %d", s.Unexpected)
	}
}

// Headers of one peer that arrive out of order (they may travel by
// different paths) are parked until their turn, across the 16-bit wrap.
func TestOutOfOrderAcrossSequenceWrap(t *testing.T) {
	for trial := 0; trial < 20; trial++ {
		m, pc := newTestModule(t, 2)
		c := pc.State.(*comm)
		const start, n = 65530, 12 // sequence numbers 65530..65535, 0..5
		c.peers[1].expected = start
		seqs := make([]int, n)
		for i := range seqs {
			seqs[i] = i
		}
		rand.New(rand.NewSource(int64(trial))).Shuffle(n, func(i, j int) { seqs[i], seqs[j] = seqs[j], seqs[i] })
		// Half the receives are posted first, the rest after.
		var reqs []*recvReq
		for i := 0; i < n/2; i++ {
			reqs = append(reqs, irecv(t, m, pc, 1, 9))
		}
		for _, i := range seqs {
			m.dispatch(1, matchFrag(0, 1, 9, uint16((start+i)%65536), fmt.Sprint(i)))
		}
		for i := n / 2; i < n; i++ {
			reqs = append(reqs, irecv(t, m, pc, pml.AnySource, 9))
		}
		for i, r := range reqs {
			if got := text(t, r, m); got != fmt.Sprint(i) {
				t.Fatalf("trial %d (arrival %v): receive %d got message %s", trial, seqs, i, got)
			}
		}
		if want := uint16((start + n) % 65536); c.peers[1].expected != want || len(c.peers[1].parked) != 0 {
			t.Errorf("expected %d, parked %d", c.peers[1].expected, len(c.peers[1].parked))
		}
	}
}

// A message matches the earliest posted receive that takes it, specific
// or AnySource.
func TestPostingOrder(t *testing.T) {
	m, pc := newTestModule(t, 3)
	rSpecific := irecv(t, m, pc, 2, 5)
	rWild := irecv(t, m, pc, pml.AnySource, pml.AnyTag)
	rTagAny := irecv(t, m, pc, 2, pml.AnyTag)
	m.dispatch(2, matchFrag(0, 2, 6, 0, "x")) // not tag 5: the wildcard
	m.dispatch(2, matchFrag(0, 2, 5, 1, "y")) // the specific one
	m.dispatch(2, matchFrag(0, 2, 5, 2, "z")) // the last
	for r, want := range map[*recvReq]string{rWild: "x", rSpecific: "y", rTagAny: "z"} {
		if got := text(t, r, m); got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	}
	// Unexpected messages go to receives in arrival order, per source.
	m.dispatch(1, matchFrag(0, 1, 7, 0, "p"))
	m.dispatch(2, matchFrag(0, 2, 7, 3, "q"))
	m.dispatch(1, matchFrag(0, 1, 8, 1, "r"))
	for _, want := range []string{"p", "q", "r"} {
		if got := text(t, irecv(t, m, pc, pml.AnySource, pml.AnyTag), m); got != want {
			t.Errorf("AnySource receive got %q, want %q", got, want)
		}
	}
}

// AnyTag never takes gompi's own negative tags.
func TestAnyTagSkipsReservedTags(t *testing.T) {
	m, pc := newTestModule(t, 2)
	m.dispatch(1, matchFrag(0, 1, -10, 0, "internal"))
	m.dispatch(1, matchFrag(0, 1, 3, 1, "user"))
	if got := text(t, irecv(t, m, pc, 1, pml.AnyTag), m); got != "user" {
		t.Errorf("AnyTag took %q", got)
	}
	if got := text(t, irecv(t, m, pc, 1, -10), m); got != "internal" {
		t.Errorf("tag -10 took %q", got)
	}
}

// A header that names a source whose world rank is not the sender's, or a
// source outside the communicator, is dropped.
func TestForgedSourceDropped(t *testing.T) {
	m, pc := newTestModule(t, 3)
	m.dispatch(2, matchFrag(0, 1, 0, 0, "forged"))
	m.dispatch(2, matchFrag(0, 7, 0, 0, "outside"))
	m.dispatch(2, matchFrag(0, -1, 0, 0, "negative"))
	if _, ok, _ := m.Iprobe(pc, pml.AnySource, pml.AnyTag); ok {
		t.Error("a forged header was queued")
	}
	if m.Stats().Unexpected != 0 {
		t.Errorf("stats %+v", m.Stats())
	}
}

// Truncation of an eager message: the buffer is filled, never overrun.
func TestEagerTruncation(t *testing.T) {
	m, pc := newTestModule(t, 2)
	full := bytes.Repeat([]byte{0xEE}, 16)
	c := pc.State.(*comm)
	c.mu.Lock()
	r := m.newRecvLocked(c, full[:4:4], 1, 0, false)
	m.postLocked(c, r)
	m.dispatch(1, matchFrag(0, 1, 0, 0, "0123456789"))
	st := r.Status()
	if st.Count != 4 || string(full[:4]) != "0123" || full[4] != 0xEE {
		t.Errorf("status %+v, buffer %q", st, full)
	}
	if st.Err == nil || !strings.Contains(st.Err.Error(), "truncated") {
		t.Errorf("error %v", st.Err)
	}
}

// Headers for a communicator this process has not created yet wait for it.
func TestHeadersBeforeTheCommunicator(t *testing.T) {
	m, _ := newTestModule(t, 2)
	m.dispatch(1, matchFrag(5, 1, 0, 1, "second"))
	m.dispatch(1, matchFrag(5, 1, 0, 0, "first"))
	pc := &pml.Comm{CID: 5, Group: group.New(group.NewDense([]int{0, 1})), Rank: 0, Size: 2}
	if err := m.AddComm(pc); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"first", "second"} {
		if got := text(t, irecv(t, m, pc, 1, 0), m); got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	}
	if err := m.AddComm(pc); err == nil {
		t.Error("a second AddComm of context id 5 succeeded")
	}
}

// Matched probes take a message out of matching: later receives and probes
// do not see it, and it is received once.
func TestMatchedProbe(t *testing.T) {
	m, pc := newTestModule(t, 2)
	m.dispatch(1, matchFrag(0, 1, 4, 0, "mine"))
	m.dispatch(1, matchFrag(0, 1, 4, 1, "next"))
	msg, st, ok, err := m.Improbe(pc, pml.AnySource, 4)
	if !ok || err != nil || st.Count != 4 {
		t.Fatalf("Improbe: %+v %v %v", st, ok, err)
	}
	if got := text(t, irecv(t, m, pc, 1, 4), m); got != "next" {
		t.Errorf("a receive after Improbe took %q", got)
	}
	buf := make([]byte, 8)
	st, err = m.Mrecv(buf, msg)
	if err != nil || string(buf[:st.Count]) != "mine" {
		t.Errorf("Mrecv: %+v %q %v", st, buf, err)
	}
	if _, err := m.Mrecv(buf, msg); err == nil {
		t.Error("a second Mrecv of one message succeeded")
	}
}

// Cancel takes back a receive that has not matched; it then takes nothing.
func TestCancel(t *testing.T) {
	m, pc := newTestModule(t, 2)
	r := irecv(t, m, pc, 1, 0)
	if !r.Cancel() {
		t.Fatal("Cancel failed")
	}
	if st := r.Status(); !st.Cancelled || st.Err != nil {
		t.Errorf("status %+v", st)
	}
	if r.Cancel() {
		t.Error("a second Cancel succeeded")
	}
	m.dispatch(1, matchFrag(0, 1, 0, 0, "late"))
	if _, ok, _ := m.Iprobe(pc, 1, 0); !ok {
		t.Error("the cancelled receive took the message")
	}
}

// TestReusedReceiveStartsClean: a receive's request comes back from its
// pool for the next receive, zeroed only when its use went past an eager
// match; a cancelled one leaves its completion mark set, and a receive
// that kept it could never be cancelled (its completion would be taken
// for a second one). Each use here takes the same request.
func TestReusedReceiveStartsClean(t *testing.T) {
	m, pc := newTestModule(t, 2)
	first := irecv(t, m, pc, 1, 0)
	if !first.Cancel() {
		t.Fatal("Cancel failed")
	}
	if _, err := first.Wait(); err != nil {
		t.Fatal(err)
	}
	again := irecv(t, m, pc, 1, 0)
	if again != first {
		t.Fatal("the pool handed out another request: the test needs the one that came back")
	}
	if !again.Cancel() {
		t.Fatal("Cancel of the reused receive failed")
	}
	if st := again.Status(); !again.Done() || !st.Cancelled {
		t.Fatalf("the reused receive, cancelled: done %v, status %+v; want complete and cancelled", again.Done(), st)
	}
	if _, err := again.Wait(); err != nil {
		t.Fatal(err)
	}
	// Then an eager message into it, and once more after that (reused as
	// it came back from an eager match: Request.Reuse).
	for i, want := range []string{"eager", "eager again"} {
		r := irecv(t, m, pc, 1, 0)
		if r.Done() {
			t.Fatalf("receive %d is complete before its message", i)
		}
		m.dispatch(1, matchFrag(0, 1, 0, uint16(i), want))
		if got := text(t, r, m); got != want {
			t.Errorf("receive %d got %q, want %q", i, got, want)
		}
		if _, err := r.Wait(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestLostPeerTakesPlacementBack: a rendezvous receive whose payload a BTL
// is placing (btl.Steer) fails when its peer is lost; from then on neither
// the BTL nor a late FRAG writes into the buffer, and peerLost waits for a
// write in progress before it fails the receive.
func TestLostPeerTakesPlacementBack(t *testing.T) {
	m, pc := newTestModule(t, 2)
	c := pc.State.(*comm)
	buf := make([]byte, 96<<10)
	r := m.newRecv(c, buf, 1, 0, false)
	// The state askRest leaves: matched, the ACK sent, FRAGs expected.
	r.world, r.msgLen, r.want = 1, len(buf), len(buf)
	m.reqMu.Lock()
	r.id = m.newIDLocked()
	m.recvs[r.id] = r
	m.reqMu.Unlock()

	var hdr [fragLen]byte
	putFrag(hdr[:], fragHdr{dstReq: r.id, offset: 0})
	steer := m.fragSteer()
	dst, g := steer.Where(1, hdr[:], 64<<10)
	if len(dst) != 64<<10 || g == nil {
		t.Fatalf("Where answered %d bytes and guard %v for a 64 KiB FRAG of a posted rendezvous", len(dst), g)
	}
	if !g.Enter() {
		t.Fatal("the guard refused the BTL before any loss")
	}
	lost := make(chan struct{})
	go func() {
		m.peerLost(1, errors.New("test: the launcher reports it dead"))
		close(lost)
	}()
	time.Sleep(20 * time.Millisecond)
	if r.Done() {
		t.Fatal("the receive failed while the BTL was writing into its buffer")
	}
	dst[0] = 'x' // the write in progress
	g.Exit()
	<-lost
	if _, err := r.Wait(); !errors.Is(err, mpierr.ErrProcFailed) {
		t.Fatalf("Wait = %v, want ErrProcFailed", err)
	}
	if g.Enter() {
		t.Fatal("the guard let the BTL write after the receive failed")
	}
	// A FRAG that was already on its way is dropped, not copied.
	buf[1] = 0
	late := make([]byte, fragLen+32)
	putFrag(late, fragHdr{dstReq: r.id, offset: 0})
	for i := fragLen; i < len(late); i++ {
		late[i] = 'L'
	}
	m.dispatch(1, late)
	if buf[1] != 0 {
		t.Fatal("a late FRAG was copied into the buffer of a failed receive")
	}
}

// TestPipeCompletedAsItsPeerIsLost: a pipelined receive whose last PFRAG
// is in belongs to the call that completes it. A peer lost just then does
// not fail it as well: that finished it twice, and once a receive goes
// back to its free list through the first Wait, the second finish would
// complete whatever operation took it next.
func TestPipeCompletedAsItsPeerIsLost(t *testing.T) {
	m, pc := newTestModule(t, 2)
	c := pc.State.(*comm)
	buf := make([]byte, 64)
	r := m.newRecv(c, buf, 1, 0, false)
	// The state pipeMatched leaves: matched, half the message in place.
	r.world, r.msgLen, r.want = 1, len(buf), len(buf)
	r.st = pml.Status{Source: 1, Tag: 0, Count: len(buf)}
	k := pipeKey{world: 1, id: 7}
	m.pipeMu.Lock()
	if m.pipes == nil {
		m.pipes = map[pipeKey]*pipeIn{}
	}
	m.pipes[k] = &pipeIn{first: 32, msgLen: len(buf), r: r}
	m.pipeMu.Unlock()
	m.pipeDoneHook = func() { m.peerLost(1, errors.New("test: lost as its last PFRAG is placed")) }

	frag := make([]byte, fragLen+32)
	putFragOf(frag, hdrPFrag, fragHdr{dstReq: k.id, offset: 32})
	for i := fragLen; i < len(frag); i++ {
		frag[i] = 'P'
	}
	m.dispatch(1, frag)
	st, err := r.Wait()
	if err != nil || st.Count != len(buf) || buf[63] != 'P' {
		t.Fatalf("Wait = %+v, %v; want the whole message (every byte arrived before the loss)", st, err)
	}
}
