package rte_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gompi/gompi/internal/strangers"
	"github.com/gompi/gompi/internal/testutil"
	"github.com/gompi/gompi/mpierr"
	"github.com/gompi/gompi/mpitest"
	"github.com/gompi/gompi/rte"
	"github.com/gompi/gompi/rte/pmi"
)

// All goroutine ranks of mpitest run on one node (rank 0 is its leader), so
// these tests exercise the local gather as well as the PMI exchange.

func procValue(key string, rank int) []byte {
	return []byte(fmt.Sprintf("%s of rank %d: \x00\xff%%;\\ end", key, rank))
}

func TestModexProc(t *testing.T) {
	keys := []string{"btl.tcp", "btl.shm", "arch"}
	mpitest.Run(t, 8, func(r *mpitest.Rank) error {
		m := r.Runtime().Modex()
		for _, k := range keys {
			if err := m.PutProc(k, procValue(k, r.Rank())); err != nil {
				return err
			}
		}
		// Not visible before the fence.
		if _, err := m.GetProc(r.Rank(), "btl.tcp"); !errors.Is(err, rte.ErrNotFound) {
			return fmt.Errorf("GetProc before the fence: %v, want ErrNotFound", err)
		}
		if err := m.Fence(t.Context()); err != nil {
			return err
		}
		for p := 0; p < r.Size(); p++ {
			for _, k := range keys {
				v, err := m.GetProc(p, k)
				if err != nil {
					return fmt.Errorf("GetProc(%d, %q): %w", p, k, err)
				}
				if !bytes.Equal(v, procValue(k, p)) {
					return fmt.Errorf("GetProc(%d, %q) = %q, want %q", p, k, v, procValue(k, p))
				}
			}
			if _, err := m.GetProc(p, "nosuchkey"); !errors.Is(err, rte.ErrNotFound) {
				return fmt.Errorf("GetProc(%d, unknown key): %v, want ErrNotFound", p, err)
			}
			if !errors.Is(rte.ErrNotFound, mpierr.ErrName) {
				return fmt.Errorf("ErrNotFound is not of class ErrName")
			}
			// A proc value is not a node value.
			if _, err := m.GetNode(p, "btl.tcp"); !errors.Is(err, rte.ErrNotFound) {
				return fmt.Errorf("GetNode(%d, a proc key): %v, want ErrNotFound", p, err)
			}
		}
		for _, bad := range []int{-1, r.Size(), r.Size() + 100} {
			if _, err := m.GetProc(bad, "btl.tcp"); !errors.Is(err, mpierr.ErrRank) {
				return fmt.Errorf("GetProc(%d): %v, want ErrRank", bad, err)
			}
			if _, err := m.GetNode(bad, "btl.tcp"); !errors.Is(err, mpierr.ErrRank) {
				return fmt.Errorf("GetNode(%d): %v, want ErrRank", bad, err)
			}
		}
		// The returned value is a copy.
		v, _ := m.GetProc(0, "arch")
		v[0] ^= 0xff
		if w, _ := m.GetProc(0, "arch"); !bytes.Equal(w, procValue("arch", 0)) {
			return fmt.Errorf("changing a returned value changed the modex")
		}
		return nil
	})
}

func TestModexPutCopiesAndReplaces(t *testing.T) {
	mpitest.Run(t, 3, func(r *mpitest.Rank) error {
		m := r.Runtime().Modex()
		buf := []byte("first")
		if err := m.PutProc("card", buf); err != nil {
			return err
		}
		copy(buf, "XXXXX") // the modex kept its own copy
		if err := m.PutProc("twice", []byte("old")); err != nil {
			return err
		}
		if err := m.PutProc("twice", []byte("new")); err != nil { // replaces before the fence
			return err
		}
		if err := m.Fence(t.Context()); err != nil {
			return err
		}
		for p := 0; p < r.Size(); p++ {
			if v, err := m.GetProc(p, "card"); err != nil || string(v) != "first" {
				return fmt.Errorf("GetProc(%d, card) = %q, %v", p, v, err)
			}
			if v, err := m.GetProc(p, "twice"); err != nil || string(v) != "new" {
				return fmt.Errorf("GetProc(%d, twice) = %q, %v", p, v, err)
			}
		}
		return nil
	})
}

func TestModexInvalidKeys(t *testing.T) {
	mpitest.Run(t, 2, func(r *mpitest.Rank) error {
		m := r.Runtime().Modex()
		for _, k := range []string{"", "has space", strings.Repeat("k", 65), "semi;colon", "per%cent", "back\\slash", "é"} {
			if err := m.PutProc(k, []byte("v")); !errors.Is(err, mpierr.ErrArg) {
				return fmt.Errorf("PutProc(%q): %v, want ErrArg", k, err)
			}
			if err := m.PutNode(k, []byte("v")); !errors.Is(err, mpierr.ErrArg) {
				return fmt.Errorf("PutNode(%q): %v, want ErrArg", k, err)
			}
		}
		for _, k := range []string{"a", strings.Repeat("k", 64), "btl.tcp.5-0_x", "PMI_ok_in_the_modex"} {
			if err := m.PutProc(k, []byte("v")); err != nil {
				return fmt.Errorf("PutProc(%q): %v", k, err)
			}
		}
		if err := m.Fence(t.Context()); err != nil {
			return err
		}
		if v, err := m.GetProc(1-r.Rank(), strings.Repeat("k", 64)); err != nil || string(v) != "v" {
			return fmt.Errorf("64-byte key: %q, %v", v, err)
		}
		return nil
	})
}

// nodeValues collects what every rank read for a node key.
type nodeValues struct {
	mu   sync.Mutex
	seen map[string]int // value -> number of (reader, rank) reads
}

func (n *nodeValues) add(v []byte) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.seen == nil {
		n.seen = map[string]int{}
	}
	n.seen[string(v)]++
}

// only returns the single value every read gave.
func (n *nodeValues) only(t *testing.T, reads int) string {
	t.Helper()
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.seen) != 1 {
		t.Fatalf("ranks read different node values: %v", n.seen)
	}
	for v, c := range n.seen {
		if c != reads {
			t.Fatalf("%d reads of the node value, want %d", c, reads)
		}
		return v
	}
	return ""
}

func nodeValue(rank int) string { return fmt.Sprintf("gompi-job-seg-of-rank-%d", rank) }

func runNodePut(t *testing.T, size int, putters map[int]bool) string {
	t.Helper()
	var got nodeValues
	mpitest.Run(t, size, func(r *mpitest.Rank) error {
		m := r.Runtime().Modex()
		if putters[r.Rank()] {
			if err := m.PutNode("shm", []byte(nodeValue(r.Rank()))); err != nil {
				return err
			}
		}
		if err := m.Fence(t.Context()); err != nil {
			return err
		}
		for p := 0; p < r.Size(); p++ {
			v, err := m.GetNode(p, "shm")
			if err != nil {
				return fmt.Errorf("GetNode(%d, shm): %w", p, err)
			}
			got.add(v)
			if _, err := m.GetProc(p, "shm"); !errors.Is(err, rte.ErrNotFound) {
				return fmt.Errorf("GetProc(%d, a node key): %v, want ErrNotFound", p, err)
			}
		}
		return nil
	})
	v := got.only(t, size*size)
	for p := range putters {
		if v == nodeValue(p) {
			return v
		}
	}
	t.Fatalf("node value %q is none of the values put by %v", v, putters)
	return ""
}

func TestModexNodeAllPut(t *testing.T) {
	all := map[int]bool{}
	for r := 0; r < 8; r++ {
		all[r] = true
	}
	runNodePut(t, 8, all)
}

func TestModexNodeSomePut(t *testing.T) {
	v := runNodePut(t, 8, map[int]bool{5: true, 2: true})
	t.Logf("ranks 5 and 2 put; the node kept %q", v)
}

// TestModexNodeLeaderWins: the node's leader (its lowest rank, here rank 0)
// puts first, so its value is the one kept.
func TestModexNodeLeaderWins(t *testing.T) {
	for i := 0; i < 3; i++ { // the others' arrival order varies; the leader must always win
		if v := runNodePut(t, 6, map[int]bool{0: true, 3: true, 5: true}); v != nodeValue(0) {
			t.Fatalf("node value %q, want the leader's %q", v, nodeValue(0))
		}
	}
	all := map[int]bool{}
	for r := 0; r < 8; r++ {
		all[r] = true
	}
	if v := runNodePut(t, 8, all); v != nodeValue(0) {
		t.Fatalf("all put: node value %q, want the leader's %q", v, nodeValue(0))
	}
}

func TestModexTwoFences(t *testing.T) {
	mpitest.Run(t, 6, func(r *mpitest.Rank) error {
		m := r.Runtime().Modex()
		me := r.Rank()
		if err := m.PutProc("kept", []byte(fmt.Sprintf("kept-%d", me))); err != nil {
			return err
		}
		if err := m.PutProc("changed", []byte(fmt.Sprintf("v1-%d", me))); err != nil {
			return err
		}
		if me == 0 {
			if err := m.PutNode("node", []byte("n1")); err != nil {
				return err
			}
		}
		if err := m.Fence(t.Context()); err != nil {
			return err
		}
		// Read some of fence 1's data now, some only after fence 2, so that
		// both the incremental and the catch-up fetch are exercised.
		if me%2 == 0 {
			for p := 0; p < r.Size(); p++ {
				if v, err := m.GetProc(p, "changed"); err != nil || string(v) != fmt.Sprintf("v1-%d", p) {
					return fmt.Errorf("after fence 1: GetProc(%d, changed) = %q, %v", p, v, err)
				}
			}
		}
		if err := m.PutProc("changed", []byte(fmt.Sprintf("v2-%d", me))); err != nil {
			return err
		}
		if err := m.PutProc("new", []byte(fmt.Sprintf("new-%d", me))); err != nil {
			return err
		}
		if me == 0 {
			if err := m.PutNode("node", []byte("n2")); err != nil {
				return err
			}
		}
		if err := m.Fence(t.Context()); err != nil {
			return err
		}
		for p := 0; p < r.Size(); p++ {
			for k, want := range map[string]string{
				"kept":    fmt.Sprintf("kept-%d", p),
				"changed": fmt.Sprintf("v2-%d", p),
				"new":     fmt.Sprintf("new-%d", p),
			} {
				if v, err := m.GetProc(p, k); err != nil || string(v) != want {
					return fmt.Errorf("after fence 2: GetProc(%d, %s) = %q, %v; want %q", p, k, v, err, want)
				}
			}
			if v, err := m.GetNode(p, "node"); err != nil || string(v) != "n2" {
				return fmt.Errorf("after fence 2: GetNode(%d, node) = %q, %v; want n2", p, v, err)
			}
		}
		// A third fence with nothing put changes nothing.
		if err := m.Fence(t.Context()); err != nil {
			return err
		}
		if v, err := m.GetProc((me+1)%r.Size(), "kept"); err != nil || string(v) != fmt.Sprintf("kept-%d", (me+1)%r.Size()) {
			return fmt.Errorf("after an empty fence: %q, %v", v, err)
		}
		return nil
	})
}

// businessCard returns rank's realistic modex values.
func businessCard(jobID string, rank int) map[string]string {
	h := fnv.New32a()
	fmt.Fprintf(h, "%d", rank)
	return map[string]string{
		"btl.tcp": fmt.Sprintf("192.168.%d.%d:%d", 1+rank/32, 17+rank%32, 40001+rank),
		"btl.shm": fmt.Sprintf("gompi-%s-seg-%d", jobID, rank),
		"pml":     "ob1",
		"arch":    "x86_64-le",
		"hash":    fmt.Sprintf("%08x", h.Sum32()),
	}
}

type capturedPut struct {
	key, value string
	lineBytes  int
}

// TestModexBusinessCards: 64 ranks publish 5 realistic values each; every
// rank reads all 320, and the bytes the modex spends on the PMI wire beyond
// the values themselves stay under 4 per key and process.
func TestModexBusinessCards(t *testing.T) {
	const n, nkeys = 64, 5
	var (
		mu       sync.Mutex
		puts     []capturedPut
		rawBytes atomic.Int64
		jobID    string
		pub      *rte.ModexStats
		pubSeq   = -1
	)
	ev := pmi.Events{Put: func(rank int, key, value string, lineBytes int) {
		mu.Lock()
		puts = append(puts, capturedPut{key, value, lineBytes})
		mu.Unlock()
	}}
	mpitest.Run(t, n, func(r *mpitest.Rank) error {
		m := r.Runtime().Modex()
		card := businessCard(r.JobID(), r.Rank())
		if len(card) != nkeys {
			return fmt.Errorf("%d keys", len(card))
		}
		for k, v := range card {
			if err := m.PutProc(k, []byte(v)); err != nil {
				return err
			}
			rawBytes.Add(int64(len(v)))
		}
		if err := m.Fence(t.Context()); err != nil {
			return err
		}
		for p := 0; p < r.Size(); p++ {
			for k, want := range businessCard(r.JobID(), p) {
				v, err := m.GetProc(p, k)
				if err != nil {
					return fmt.Errorf("GetProc(%d, %s): %w", p, k, err)
				}
				if string(v) != want {
					return fmt.Errorf("GetProc(%d, %s) = %q, want %q", p, k, v, want)
				}
			}
		}
		if r.Rank() == 0 {
			// The leader knows what it published at each fence; the last is
			// this test's.
			mu.Lock()
			jobID = r.JobID()
			for s := 0; s < 100; s++ {
				if st := m.Published(s); st != nil {
					pub, pubSeq = st, s
				}
			}
			mu.Unlock()
		} else if m.Published(0) != nil {
			return fmt.Errorf("rank %d is not a leader but published", r.Rank())
		}
		return nil
	}, mpitest.WithPMIEvents(ev))

	if pub == nil || jobID == "" {
		t.Fatal("rank 0 published nothing")
	}
	// The modex puts of the test's fence.
	prefix := fmt.Sprintf("m%d.", pubSeq)
	chunks := map[string]string{}
	var lineBytes int64
	for _, p := range puts {
		if strings.HasPrefix(p.key, prefix) {
			chunks[p.key] = p.value
			lineBytes += int64(p.lineBytes)
			// Each put line is exactly what a PMI-1 client writes.
			wire := len(pmi.Cmd("put", "kvsname", rte.KVSPrefix+jobID, "key", p.key, "value", p.value).Encode())
			if wire != p.lineBytes {
				t.Errorf("put of %s: %d line bytes, want %d", p.key, p.lineBytes, wire)
			}
		}
	}
	if len(chunks) == 0 {
		t.Fatalf("no puts under %s*", prefix)
	}
	raw := rawBytes.Load()
	overhead := float64(lineBytes-raw) / float64(nkeys*n)
	t.Logf("modex of %d ranks x %d keys: %d value bytes, %d wire bytes in %d puts: naming overhead %.3f bytes per key and process",
		n, nkeys, raw, lineBytes, len(chunks), overhead)
	if overhead > 4.0 {
		t.Errorf("naming overhead %.3f bytes per key and process, want <= 4", overhead)
	}

	st, err := rte.StatsOfBlobs(chunks)
	if err != nil {
		t.Fatalf("StatsOfBlobs: %v", err)
	}
	if st.ValueBytes != raw || st.Entries != n*nkeys || st.Processes != n || st.Keys != nkeys || st.Puts != len(chunks) {
		t.Errorf("StatsOfBlobs = %+v; want %d value bytes, %d entries, %d processes, %d keys, %d puts",
			st, raw, n*nkeys, n, nkeys, len(chunks))
	}
	// What the leader measured agrees.
	if pub.WireBytes != lineBytes || pub.ValueBytes != raw || pub.Entries != n*nkeys || pub.Puts != len(chunks) {
		t.Errorf("Published(%d) = %+v; want %d wire bytes, %d value bytes, %d entries, %d puts",
			pubSeq, *pub, lineBytes, raw, n*nkeys, len(chunks))
	}
	if got := pub.NamingOverhead(); got != overhead {
		t.Errorf("NamingOverhead = %v, want %v", got, overhead)
	}
}

// ranksOpts configure runRanks.
type ranksOpts struct {
	preput map[string]string
	events pmi.Events
	// maxValue is the vallen_max the server advertises (0: the default).
	maxValue int
	// hydraStore, when set, makes the server keep only the first
	// maxValue-1 bytes of a put value, as Hydra does: it copies values
	// with snprintf(val, PMI_MAXVALLEN, "%s", value) into a buffer of
	// PMI_MAXVALLEN (1024) bytes, the NUL included, while advertising
	// vallen_max=1024.
	hydraStore bool
}

var kvsCount atomic.Int64

// uniqueKVS returns a Hydra-style KVS name no other job of this process
// uses (the job id, and so the modex's socket names, derive from it).
func uniqueKVS() string {
	return fmt.Sprintf("kvs_%d_%d_%d_testhost", os.Getpid(), kvsCount.Add(1), time.Now().UnixNano()%1e9)
}

// withCookie adds a job cookie to the preput keys, as gompi's mpirun does.
// (Without one, rte.Start has rank 0 make it; see TestStartCookieRace.)
func withCookie(preput map[string]string) map[string]string {
	out := map[string]string{rte.CookieKey: strings.Repeat("5a", rte.CookieLen)}
	for k, v := range preput {
		out[k] = v
	}
	return out
}

// runRanks runs size ranks as goroutines over rte.Start directly, with a PMI
// server whose preput keys the test chooses (mpitest always maps every rank
// to one node).
func runRanks(t *testing.T, size int, o ranksOpts, fn func(rt *rte.Runtime) error) {
	t.Helper()
	srv := pmi.NewServer(pmi.ServerConfig{KVSName: uniqueKVS(), Size: size, MaxValue: o.maxValue, Preput: withCookie(o.preput), Events: o.events})
	defer srv.Shutdown()
	errs := make(chan error, size)
	for r := 0; r < size; r++ {
		client, server := net.Pipe()
		if o.hydraStore {
			server = hydraTruncate(server, o.maxValue-1)
		}
		go srv.Serve(r, server)
		go func(rank int) {
			rt, err := rte.Start(rte.Options{
				Env: []string{fmt.Sprintf("PMI_RANK=%d", rank), fmt.Sprintf("PMI_SIZE=%d", size), "PMI_HOSTNAME=testhost"},
				PMI: client,
			})
			if err != nil {
				errs <- fmt.Errorf("rank %d: Start: %w", rank, err)
				client.Close()
				return
			}
			if err := fn(rt); err != nil {
				errs <- fmt.Errorf("rank %d: %w", rank, err)
				srv.Shutdown() // release the others
				return
			}
			if err := rt.Barrier(); err != nil {
				errs <- fmt.Errorf("rank %d: final barrier: %w", rank, err)
				return
			}
			errs <- rt.Finalize()
		}(r)
	}
	var first error
	for r := 0; r < size; r++ {
		select {
		case err := <-errs:
			if err != nil && first == nil {
				first = err
			}
		case <-time.After(30 * time.Second):
			t.Fatal("ranks did not finish within 30 s")
		}
	}
	if first != nil {
		t.Fatal(first)
	}
}

// TestModexMultiNode: ranks on 2 nodes, round-robin, each node's leader
// gathering its node's records and publishing one blob.
func TestModexMultiNode(t *testing.T) {
	const size = 7
	var mu sync.Mutex
	putsByFence := map[string]int{}
	ev := pmi.Events{Put: func(rank int, key, value string, lineBytes int) {
		mu.Lock()
		defer mu.Unlock()
		if seq, _, ok := strings.Cut(key, "."); ok && strings.HasPrefix(key, "m") {
			putsByFence[seq]++
		}
	}}
	var cookies sync.Map
	runRanks(t, size, ranksOpts{preput: map[string]string{rte.ProcessMappingKey: "(vector,(0,2,1))"}, events: ev}, func(rt *rte.Runtime) error {
		j := rt.Job()
		cookies.Store(j.Rank, j.Cookie)
		if j.NodeIndex != j.Rank%2 {
			return fmt.Errorf("node index %d", j.NodeIndex)
		}
		wantLocal := []int{4, 3}[j.NodeIndex]
		if j.LocalSize != wantLocal || j.LocalRank != j.Rank/2 {
			return fmt.Errorf("local rank %d of %d, want %d of %d", j.LocalRank, j.LocalSize, j.Rank/2, wantLocal)
		}
		if j.Node != "testhost" {
			return fmt.Errorf("node %q", j.Node)
		}
		m := rt.Modex()
		if err := m.PutProc("card", []byte(fmt.Sprintf("card-%d", j.Rank))); err != nil {
			return err
		}
		// Node 0: its leader (rank 0) and rank 4 put; node 1: ranks 3 and
		// 5, not the leader (rank 1).
		if j.Rank == 0 || j.Rank == 4 || j.Rank == 3 || j.Rank == 5 {
			if err := m.PutNode("shm", []byte(fmt.Sprintf("seg-%d", j.Rank))); err != nil {
				return err
			}
		}
		if err := m.Fence(context.Background()); err != nil {
			return err
		}
		for p := 0; p < j.Size; p++ {
			if v, err := m.GetProc(p, "card"); err != nil || string(v) != fmt.Sprintf("card-%d", p) {
				return fmt.Errorf("GetProc(%d) = %q, %v", p, v, err)
			}
			v, err := m.GetNode(p, "shm")
			if err != nil {
				return fmt.Errorf("GetNode(%d): %w", p, err)
			}
			switch {
			case p%2 == 0 && string(v) != "seg-0":
				return fmt.Errorf("GetNode(%d) = %q, want the leader's seg-0", p, v)
			case p%2 == 1 && string(v) != "seg-3" && string(v) != "seg-5":
				return fmt.Errorf("GetNode(%d) = %q, want seg-3 or seg-5", p, v)
			}
			if q := (p + 2) % j.Size; q%2 == p%2 {
				if w, _ := m.GetNode(q, "shm"); !bytes.Equal(v, w) {
					return fmt.Errorf("ranks %d and %d of one node see %q and %q", p, q, v, w)
				}
			}
		}
		if (m.Published(0) != nil) != (j.LocalRank == 0) {
			return fmt.Errorf("Published(0) = %v for local rank %d", m.Published(0), j.LocalRank)
		}
		return nil
	})
	// One blob per node, not per process.
	if putsByFence["m0"] != 2 {
		t.Errorf("%d modex puts at fence 0, want one per node (2)", putsByFence["m0"])
	}
	// Every rank has the launcher's cookie.
	var want [rte.CookieLen]byte
	for i := range want {
		want[i] = 0x5a
	}
	cookies.Range(func(k, v any) bool {
		if v != want {
			t.Errorf("rank %v has cookie %x", k, v)
		}
		return true
	})
}

// TestModexNoMapping: without PMI_process_mapping every rank is its own
// node, and every rank publishes.
func TestModexNoMapping(t *testing.T) {
	const size = 4
	var mu sync.Mutex
	var modexPuts int
	ev := pmi.Events{Put: func(rank int, key, value string, lineBytes int) {
		if strings.HasPrefix(key, "m0.") {
			mu.Lock()
			modexPuts++
			mu.Unlock()
		}
	}}
	runRanks(t, size, ranksOpts{events: ev}, func(rt *rte.Runtime) error {
		j := rt.Job()
		if j.NodeIndex != j.Rank || j.LocalSize != 1 || j.LocalRank != 0 {
			return fmt.Errorf("node %d, local %d of %d", j.NodeIndex, j.LocalRank, j.LocalSize)
		}
		m := rt.Modex()
		if err := m.PutProc("card", []byte(fmt.Sprintf("card-%d", j.Rank))); err != nil {
			return err
		}
		if err := m.PutNode("node", []byte(fmt.Sprintf("node-%d", j.Rank))); err != nil {
			return err
		}
		if err := m.Fence(context.Background()); err != nil {
			return err
		}
		for p := 0; p < size; p++ {
			if v, err := m.GetProc(p, "card"); err != nil || string(v) != fmt.Sprintf("card-%d", p) {
				return fmt.Errorf("GetProc(%d) = %q, %v", p, v, err)
			}
			if v, err := m.GetNode(p, "node"); err != nil || string(v) != fmt.Sprintf("node-%d", p) {
				return fmt.Errorf("GetNode(%d) = %q, %v", p, v, err)
			}
		}
		return nil
	})
	if modexPuts != size {
		t.Errorf("%d modex puts, want %d", modexPuts, size)
	}
}

// hydraTruncate sits between a rank and the server: it cuts the value of
// every put to keep bytes, as Hydra's KVS does.
func hydraTruncate(server net.Conn, keep int) net.Conn {
	return relayLines(server, func(line string) string {
		if c, err := pmi.ParseLine(strings.TrimSuffix(line, "\n")); err == nil && c.Name == "put" {
			for i, a := range c.Args {
				if a.Key == "value" && len(a.Value) > keep {
					c.Args[i].Value = a.Value[:keep]
				}
			}
			line = string(c.Encode())
		}
		return line
	})
}

// TestModexHydraValueLimit runs the modex against a server that stores
// values the way Hydra does (at most vallen_max-1 bytes) and advertises
// Hydra's vallen_max=1024. A node blob longer than one chunk is cut into
// chunks of exactly 1024 bytes, whose last byte Hydra drops.
func TestModexHydraValueLimit(t *testing.T) {
	const size = 4
	oneNode := map[string]string{rte.ProcessMappingKey: "(vector,(0,1,4))"} // one blob of ~2.8 KB
	runRanks(t, size, ranksOpts{preput: oneNode, maxValue: 1024, hydraStore: true}, func(rt *rte.Runtime) error {
		m := rt.Modex()
		me := rt.Job().Rank
		if err := m.PutProc("ucx", bytes.Repeat([]byte{byte('a' + me)}, 700)); err != nil {
			return err
		}
		if err := m.Fence(context.Background()); err != nil {
			return err
		}
		for p := 0; p < size; p++ {
			v, err := m.GetProc(p, "ucx")
			if err != nil {
				return fmt.Errorf("GetProc(%d): %w", p, err)
			}
			if !bytes.Equal(v, bytes.Repeat([]byte{byte('a' + p)}, 700)) {
				return fmt.Errorf("GetProc(%d) is wrong", p)
			}
		}
		return nil
	})
}

// TestModexSmallValueLimit: with a small vallen_max, a node blob spans many
// chunks (more than 31, so that the chunk count takes two letters), and
// comes back intact.
func TestModexSmallValueLimit(t *testing.T) {
	const size = 4
	var mu sync.Mutex
	chunks := 0
	ev := pmi.Events{Put: func(rank int, key, value string, lineBytes int) {
		if strings.HasPrefix(key, "m0.") {
			mu.Lock()
			chunks++
			mu.Unlock()
			if len(value) > 100 {
				t.Errorf("put of %d bytes with vallen_max=100", len(value))
			}
		}
	}}
	oneNode := map[string]string{rte.ProcessMappingKey: "(vector,(0,1,4))"}
	want := func(p int) []byte { return bytes.Repeat([]byte{byte('a' + p), ' '}, 500) }
	runRanks(t, size, ranksOpts{preput: oneNode, maxValue: 100, events: ev}, func(rt *rte.Runtime) error {
		m := rt.Modex()
		if err := m.PutProc("ucx", want(rt.Job().Rank)); err != nil {
			return err
		}
		if err := m.Fence(context.Background()); err != nil {
			return err
		}
		for p := 0; p < size; p++ {
			v, err := m.GetProc(p, "ucx")
			if err != nil {
				return fmt.Errorf("GetProc(%d): %w", p, err)
			}
			if !bytes.Equal(v, want(p)) {
				return fmt.Errorf("GetProc(%d) is wrong", p)
			}
		}
		return nil
	})
	if chunks <= 32 {
		t.Errorf("%d chunks, want more than 32", chunks)
	}
}

// startRank runs rte.Start for one rank of srv's job in the background;
// with before, the rank's lines pass through watchLines.
func startRank(srv *pmi.Server, rank, size int, before func(line string)) (<-chan *rte.Runtime, <-chan error) {
	client, server := net.Pipe()
	if before != nil {
		server = watchLines(server, before)
	}
	go srv.Serve(rank, server)
	rts, errs := make(chan *rte.Runtime, 1), make(chan error, 1)
	go func() {
		rt, err := rte.Start(rte.Options{
			Env: []string{fmt.Sprintf("PMI_RANK=%d", rank), fmt.Sprintf("PMI_SIZE=%d", size), "PMI_HOSTNAME=testhost"},
			PMI: client,
		})
		if err != nil {
			errs <- err
			return
		}
		rts <- rt
	}()
	return rts, errs
}

func waitStart(t *testing.T, rank int, rts <-chan *rte.Runtime, errs <-chan error) *rte.Runtime {
	t.Helper()
	select {
	case rt := <-rts:
		return rt
	case err := <-errs:
		t.Fatalf("rank %d: Start: %v", rank, err)
	case <-time.After(5 * time.Second):
		t.Fatalf("rank %d: Start did not return within 5 s", rank)
	}
	return nil
}

// TestStartCookieRace: under a launcher that provides no cookie (MPICH's
// Hydra, Slurm), rank 0 makes one, puts it, and enters a barrier; the other
// ranks enter that barrier only if their first Get missed the key. A rank
// that starts after rank 0's put finds the cookie and skips the barrier, so
// rank 0's Start waits for that rank's next, unrelated barrier, and from
// then on the ranks' barriers are paired wrongly.
func TestStartCookieRace(t *testing.T) {
	srv := pmi.NewServer(pmi.ServerConfig{KVSName: uniqueKVS(), Size: 2,
		Preput: map[string]string{rte.ProcessMappingKey: "(vector,(0,1,2))"}}) // no cookie, as under Hydra
	defer srv.Shutdown()
	rts0, errs0 := startRank(srv, 0, 2, nil)
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, ok := srv.Value(rte.CookieKey); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("rank 0 did not publish a cookie")
		}
		time.Sleep(time.Millisecond)
	}
	rts1, errs1 := startRank(srv, 1, 2, nil) // starts after rank 0's put
	rt1 := waitStart(t, 1, rts1, errs1)
	rt0 := waitStart(t, 0, rts0, errs0) // fails here: rank 0 is still in its cookie barrier
	if rt0.Job().Cookie != rt1.Job().Cookie {
		t.Error("the ranks have different cookies")
	}
	done := make(chan error, 2)
	for _, rt := range []*rte.Runtime{rt0, rt1} {
		go func() { done <- rt.Barrier() }()
	}
	for i := 0; i < 2; i++ {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("barrier did not complete")
		}
	}
	rt0.Finalize()
	rt1.Finalize()
}

// TestStartCookieMadeByRank0: when every rank's first Get misses the cookie
// (the case rte.Start is written for), rank 0's cookie reaches every rank.
func TestStartCookieMadeByRank0(t *testing.T) {
	const size = 4
	srv := pmi.NewServer(pmi.ServerConfig{KVSName: uniqueKVS(), Size: size})
	defer srv.Shutdown()
	// Hold rank 0's put of the cookie until every other rank has entered
	// the cookie barrier, that is, has missed the cookie: otherwise a rank
	// may see the put early (see TestStartCookieRace).
	var missed sync.WaitGroup
	missed.Add(size - 1)
	var rts []<-chan *rte.Runtime
	var errs []<-chan error
	for r := 0; r < size; r++ {
		var before func(line string)
		if r == 0 {
			before = func(line string) {
				if strings.HasPrefix(line, "cmd=put ") {
					missed.Wait()
				}
			}
		} else {
			var once sync.Once
			before = func(line string) {
				if strings.HasPrefix(line, "cmd=barrier_in") {
					once.Do(missed.Done)
				}
			}
		}
		rc, ec := startRank(srv, r, size, before)
		rts, errs = append(rts, rc), append(errs, ec)
	}
	var cookie [rte.CookieLen]byte
	for r := 0; r < size; r++ {
		rt := waitStart(t, r, rts[r], errs[r])
		j := rt.Job()
		if r == 0 {
			cookie = j.Cookie
			if cookie == [rte.CookieLen]byte{} {
				t.Error("zero cookie")
			}
		} else if j.Cookie != cookie {
			t.Errorf("rank %d has another cookie", r)
		}
		if !j.CheckCookie(cookie[:]) || j.CheckCookie(make([]byte, rte.CookieLen)) || j.CheckCookie(cookie[:5]) {
			t.Errorf("rank %d: CheckCookie is wrong", r)
		}
		// Without a mapping, each rank is its own node.
		if j.NodeIndex != r || j.LocalSize != 1 {
			t.Errorf("rank %d: node %d, local size %d", r, j.NodeIndex, j.LocalSize)
		}
		defer rt.Finalize()
	}
}

// watchLines passes a rank's lines to the server, calling before with each
// line before it is passed on.
func watchLines(server net.Conn, before func(line string)) net.Conn {
	return relayLines(server, func(line string) string {
		before(line)
		return line
	})
}

// relayLines sits between a rank and the server: it passes the server's
// lines to the rank verbatim, and the rank's to the server through edit.
func relayLines(server net.Conn, edit func(line string) string) net.Conn {
	toServer, mine := net.Pipe()
	go func() { // server -> rank, verbatim
		io.Copy(server, toServer)
		server.Close()
	}()
	go func() {
		defer toServer.Close()
		r := bufio.NewReader(server)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			if _, err := io.WriteString(toServer, edit(line)); err != nil {
				return
			}
		}
	}()
	return mine
}

// fakeTB records a Fatal instead of ending the test, so that a test can
// check that mpitest.Run fails.
type fakeTB struct {
	testing.TB
	mu    sync.Mutex
	fatal []any
}

func (f *fakeTB) Helper()                   {}
func (f *fakeTB) Logf(string, ...any)       {}
func (f *fakeTB) Fatal(args ...any)         { f.mu.Lock(); f.fatal = append(f.fatal, args...); f.mu.Unlock() }
func (f *fakeTB) Fatalf(s string, a ...any) { f.Fatal(fmt.Sprintf(s, a...)) }

// TestModexLeaderSeesJobEnd: a rank fails instead of joining a fence; the
// job ends (mpitest shuts the PMI server down), and every rank's pending
// Fence must fail, the node leader's included, which is waiting in the
// local gather for the failed rank's record.
func TestModexLeaderSeesJobEnd(t *testing.T) {
	tb := &fakeTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		mpitest.Run(tb, 4, func(r *mpitest.Rank) error {
			if r.Rank() == 3 {
				return errors.New("rank 3 fails before the fence")
			}
			return r.Runtime().Modex().Fence(context.Background())
		})
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("mpitest.Run did not return within 10 s after a rank failed")
	}
	tb.mu.Lock()
	defer tb.mu.Unlock()
	if len(tb.fatal) == 0 || !strings.Contains(fmt.Sprint(tb.fatal...), "rank 3 fails before the fence") {
		t.Errorf("mpitest.Run reported %v, want rank 3's error", tb.fatal)
	}
}

// TestModexFenceContext: a Fence whose context ends while the node's records
// are gathered returns the context's error.
func TestModexFenceContext(t *testing.T) {
	mpitest.Run(t, 3, func(r *mpitest.Rank) error {
		if r.Rank() != 0 {
			return nil // never join the fence; Run finalizes these ranks, which waits for rank 0
		}
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		err := r.Runtime().Modex().Fence(ctx)
		if !errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("Fence with an expired context: %v, want DeadlineExceeded", err)
		}
		return nil
	})
}

// modexSockets counts this process's descriptors that are unix sockets on
// a modex node socket name of job (listeners and accepted connections,
// which carry the listener's name in /proc/net/unix). Counting all
// descriptors instead made the test flaky: a rank whose wait sleeps for
// the first time opens its bell's socket then, and keeps it to Finalize.
func modexSockets(job string) (int, error) {
	inodes, err := testutil.SocketInodes()
	if err != nil {
		return 0, err
	}
	data, err := os.ReadFile("/proc/net/unix")
	if err != nil {
		return 0, err
	}
	n := 0
	for _, line := range strings.Split(string(data), "\n")[1:] {
		f := strings.Fields(line)
		// Num RefCount Protocol Flags Type St Inode [Path]
		if len(f) >= 8 && inodes[f[6]] && strings.HasPrefix(f[7], "@gompi-"+job+"-modex-") {
			n++
		}
	}
	return n, nil
}

// TestModexSilentConnections: while the node leader gathers a fence's
// records, 1000 connections to its node socket say nothing. They are
// closed within the handshake timeout, the fence completes with every
// record (rank 1's and rank 2's connections come behind the flood), and
// the process has the modex sockets it had before.
func TestModexSilentConnections(t *testing.T) {
	const (
		silent  = 1000
		timeout = time.Second
	)
	// The count needs /proc: without it, skip here, on the test's
	// goroutine (the ranks' goroutines cannot).
	if _, err := modexSockets("none"); err != nil {
		t.Skipf("cannot count sockets: %v", err)
	}
	defer rte.SetModexHandshakeTimeout(timeout)()
	flooded := make(chan struct{})
	var before int
	mpitest.Run(t, 3, func(r *mpitest.Rank) error {
		rt := r.Runtime()
		m := rt.Modex()
		me := r.Rank()
		if err := m.PutProc("card", procValue("card", me)); err != nil {
			return err
		}
		if err := rt.Barrier(); err != nil {
			return err
		}
		if me == 0 {
			var err error
			if before, err = modexSockets(r.JobID()); err != nil {
				return err
			}
		}
		if err := rt.Barrier(); err != nil {
			return err
		}
		var flood *strangers.Flood
		switch me {
		case 1:
			name := rte.NextFenceSocket(m)
			deadline := time.Now().Add(10 * time.Second)
			var err error
			flood, err = strangers.Start(silent, 10*time.Second, func(int) (net.Conn, error) {
				for {
					conn, err := net.Dial("unix", name)
					// Not listening yet, or its queue is full: try again.
					if err == nil || time.Now().After(deadline) {
						return conn, err
					}
					time.Sleep(time.Millisecond)
				}
			})
			if err != nil {
				return err
			}
			close(flooded)
		case 2:
			<-flooded
		}
		// Served one at a time, each silent connection would hold the
		// gather for its whole timeout.
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		if err := m.Fence(ctx); err != nil {
			return err
		}
		for p := 0; p < r.Size(); p++ {
			if v, err := m.GetProc(p, "card"); err != nil || !bytes.Equal(v, procValue("card", p)) {
				return fmt.Errorf("GetProc(%d) = %q, %v", p, v, err)
			}
		}
		if me == 1 {
			longest, err := flood.Wait()
			if err != nil {
				return err
			}
			t.Logf("longest-lived silent connection: %v", longest)
			if longest > timeout+time.Second {
				return fmt.Errorf("a silent connection stayed open %v (handshake timeout %v)", longest, timeout)
			}
		}
		if err := rt.Barrier(); err != nil {
			return err
		}
		if me == 0 {
			deadline := time.Now().Add(10 * time.Second)
			for {
				n, err := modexSockets(r.JobID())
				if err != nil {
					return err
				}
				if n <= before {
					break
				}
				if time.Now().After(deadline) {
					return fmt.Errorf("%d modex socket descriptors open, %d before", n, before)
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
		return nil
	})
}
