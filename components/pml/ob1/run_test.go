package ob1

import (
	"fmt"
	"math/rand"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gompi/gompi/frameworks/group"
	"github.com/gompi/gompi/frameworks/pml"
)

// TestRunMatchesAsOneByOne: a run of fragments delivered at once (recvRun,
// the matching lock held across the run) ends exactly as the same
// fragments dispatched one at a time: the same receives complete with the
// same data and status, the same messages wait as unexpected, parked or
// orphaned. The runs mix two communicators, messages out of order, a
// communicator not created yet, a source that is not who it claims to be,
// truncation and receives posted for some tags only.
func TestRunMatchesAsOneByOne(t *testing.T) {
	for seed := int64(1); seed <= 200; seed++ {
		rng := rand.New(rand.NewSource(seed))
		frags, posts := randomRun(rng)
		want := outcome(t, frags, posts, false)
		got := outcome(t, frags, posts, true)
		if got != want {
			t.Fatalf("seed %d: as a run:\n%s\none by one:\n%s", seed, got, want)
		}
	}
}

type post struct {
	cid      uint16
	src, tag int
	size     int
}

// randomRun makes fragments from world rank 1 on communicators 0, 1 and 7
// (7 is never created), with sequence numbers shuffled a little, and
// receives to post before them.
func randomRun(rng *rand.Rand) ([][]byte, []post) {
	var frags [][]byte
	seq := map[uint16]uint16{}
	for i := 0; i < 1+rng.Intn(40); i++ {
		cid := []uint16{0, 0, 0, 1, 7}[rng.Intn(5)]
		src := 1
		if rng.Intn(20) == 0 {
			src = 2 // rank 2 is world rank 2, not 1: a forged source
		}
		tag := rng.Intn(3)
		frags = append(frags, matchFrag(cid, src, tag, seq[cid], fmt.Sprintf("m%d-%d", cid, i)))
		seq[cid]++
	}
	// Swap some neighbours: out of order within a run.
	for i := 0; i+1 < len(frags); i++ {
		if rng.Intn(6) == 0 {
			frags[i], frags[i+1] = frags[i+1], frags[i]
		}
	}
	var posts []post
	for i := 0; i < rng.Intn(30); i++ {
		src := []int{1, 1, pml.AnySource}[rng.Intn(3)]
		tag := []int{0, 1, 2, pml.AnyTag}[rng.Intn(4)]
		posts = append(posts, post{cid: uint16(rng.Intn(2)), src: src, tag: tag, size: []int{2, 64}[rng.Intn(2)]})
	}
	return frags, posts
}

// outcome feeds frags to a fresh module, one by one or as one run, and
// describes what became of every receive and message.
func outcome(t *testing.T, frags [][]byte, posts []post, asRun bool) string {
	m, pc0 := newTestModule(t, 3)
	pc1 := &pml.Comm{CID: 1, Group: group.New(group.NewDense([]int{0, 1, 2})), Rank: 0, Size: 3}
	if err := m.AddComm(pc1); err != nil {
		t.Fatal(err)
	}
	pcs := map[uint16]*pml.Comm{0: pc0, 1: pc1}
	var reqs []*recvReq
	for _, p := range posts {
		c := pcs[p.cid].State.(*comm)
		c.mu.Lock()
		r := m.newRecvLocked(c, make([]byte, p.size), p.src, p.tag, false)
		m.postLocked(c, r)
		reqs = append(reqs, r)
	}
	copies := make([][]byte, len(frags))
	for i, f := range frags {
		copies[i] = append([]byte(nil), f...)
	}
	if asRun {
		m.recvRun(1, tagOf(hdrMatch), copies)
	} else {
		for _, f := range copies {
			m.dispatch(1, f)
		}
	}
	// The fragments are valid only during the call: scribble over them.
	for _, f := range copies {
		clear(f)
	}
	var out string
	for i, r := range reqs {
		if !r.Done() {
			out += fmt.Sprintf("recv %d pending\n", i)
			continue
		}
		st := r.Status()
		out += fmt.Sprintf("recv %d: src %d tag %d count %d err %v data %q\n", i, st.Source, st.Tag, st.Count, st.Err, r.buf[:st.Count])
	}
	for _, cid := range []uint16{0, 1} {
		c := pcs[cid].State.(*comm)
		for msg := c.unexAll.head; msg != nil; msg = msg.allNext {
			out += fmt.Sprintf("comm %d unexpected: src %d tag %d seq %d %q\n", cid, msg.src, msg.tag, msg.seq, msg.data)
		}
		for src := range c.peers {
			p := &c.peers[src]
			out += fmt.Sprintf("comm %d peer %d: expected %d, %d parked\n", cid, src, p.expected, len(p.parked))
		}
	}
	out += fmt.Sprintf("orphans %d; stats %+v\n", len(m.orphans[7]), m.Stats())
	return out
}

type item struct {
	id   int
	back atomic.Uint64
}

func (x *item) poolMark() *atomic.Uint64 { return &x.back }

// TestLockedPool: requests given back from many goroutines at once while the
// owner takes them are each handed out once, never to two holders, and the
// ones given back are handed out again: the pool makes about as many as are
// out at once, not one a get.
func TestLockedPool(t *testing.T) {
	var (
		owner sync.Mutex
		pool  lockedPool[item, *item]
		held  sync.Map
		wg    sync.WaitGroup
	)
	const workers, rounds, inFlight = 4, 2000, 64
	back := make(chan *item, inFlight)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for x := range back {
				held.Delete(x)
				pool.put(x)
			}
		}()
	}
	next := 0
	for i := 0; i < rounds*workers; i++ {
		owner.Lock()
		x := pool.get()
		owner.Unlock()
		if x.id == 0 {
			next++
			x.id = next
		}
		if _, dup := held.LoadOrStore(x, true); dup {
			t.Fatalf("item %d handed out twice", x.id)
		}
		back <- x
	}
	close(back)
	wg.Wait()
	// The ring grows past the ones out each time get comes round to one
	// that is not back yet: a few laps' worth, not thousands.
	if limit := 4 * (inFlight + workers + 1); next > limit {
		t.Errorf("%d items made for %d gets with at most %d out: the returned ones are not reused", next, rounds*workers, inFlight+workers+1)
	}
}

// A request that is never given back costs one new request a lap while the
// ring has room, and none once it is dropped; one dropped is never handed
// out again, and is not kept.
func TestLockedPoolKeepsNoneDropped(t *testing.T) {
	var pool lockedPool[item, *item]
	stuck := pool.get()
	for lap := 0; lap < 5; lap++ {
		x := pool.get()
		if x == stuck {
			t.Fatal("a request still out was handed out again")
		}
		pool.put(x)
	}
	if n := len(pool.ring); n > 3 {
		t.Errorf("ring of %d after 5 laps around one request still out, want at most 3", n)
	}
	pool.drop(stuck)
	for i := 0; i < 2*len(pool.ring); i++ {
		x := pool.get()
		if x == stuck {
			t.Fatal("a dropped request was handed out")
		}
		pool.put(x)
	}
	for _, x := range pool.ring {
		if x == stuck {
			t.Fatal("a dropped request is still in the ring")
		}
	}
}

// A receive that a run completes wakes the goroutine asleep on it: a run's
// completions are batched (pml.Request.CompleteBatched), and the run rings
// the bell once at its end. Without that ring the waiter sleeps out its
// SleepMax, a minute here.
func TestRunWakesASleepingReceiver(t *testing.T) {
	m, pc0 := newTestModule(t, 3)
	m.eng.SetPolicy(pml.Policy{Yield: true, YieldFor: time.Millisecond, SleepMax: time.Minute})
	c := pc0.State.(*comm)
	c.mu.Lock()
	buf := make([]byte, 8)
	r := m.newRecvLocked(c, buf, 1, 0, false)
	m.postLocked(c, r)
	got := make(chan pml.Status, 1)
	go func() {
		st, _ := r.Wait()
		got <- st
	}()
	for deadline := time.Now().Add(10 * time.Second); !m.eng.Bell().Sleeping(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the receiver never went to sleep")
		}
	}
	m.recvRun(1, tagOf(hdrMatch), [][]byte{matchFrag(0, 1, 0, 0, "hello")})
	select {
	case st := <-got:
		if st.Source != 1 || st.Count != 5 || string(buf[:5]) != "hello" {
			t.Errorf("the receiver got %+v, %q", st, buf)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the receiver still sleeps 10 s after the run completed it")
	}
}
