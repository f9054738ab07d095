package mpi_test

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/gompi/gompi/mpi"
	"github.com/gompi/gompi/mpitest"
)

// Goroutine ranks on fake nodes (mpitest.WithNodes) behave as on separate
// nodes: nodes of 3, 2 and 1 ranks, none contiguous in the world. Every
// pair exchanges a small and a 1 MiB message, over shm within a node and
// over tcp across, where tcp uses loopback (the ranks share a network
// namespace), also when loopback is the only interface, as in a bare
// container. SplitType(SplitShared) gives each node's ranks, coll sm serves
// a node's communicator and not the world.
func TestFakeNodes(t *testing.T) {
	nodeOf := []int{0, 1, 0, 2, 1, 0}
	n := len(nodeOf)
	for _, tc := range []struct {
		name string
		mca  []string
	}{
		{"every interface", nil},
		{"loopback only", []string{"btl_tcp_if_include", "lo"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var log []string
			opts := []mpitest.Option{
				mpitest.WithNodes(nodeOf), mpitest.WithMCA("btl", "self,shm,tcp"), mpitest.WithMCA("btl_base_verbose", "40"),
				mpitest.WithLogf(func(format string, a ...any) {
					mu.Lock()
					log = append(log, fmt.Sprintf(format, a...))
					mu.Unlock()
				}),
			}
			for i := 0; i+1 < len(tc.mca); i += 2 {
				opts = append(opts, mpitest.WithMCA(tc.mca[i], tc.mca[i+1]))
			}
			err := mpitest.RunErr(n, func(r *mpitest.Rank) error { return onFakeNode(r, nodeOf) }, opts...)
			text := strings.Join(log, "\n")
			if err != nil {
				t.Fatalf("%v\nlog:\n%s", err, text)
			}
			checkFakeNodeTransports(t, text, nodeOf)
		})
	}
}

// onFakeNode is one rank's part of TestFakeNodes.
func onFakeNode(r *mpitest.Rank, nodeOf []int) error {
	me, n := r.Rank(), r.Size()
	job := r.Runtime().Job()
	var local []int
	for w, node := range nodeOf {
		if node == nodeOf[me] {
			local = append(local, w)
		}
	}
	if !slices.Equal(job.NodeOf, nodeOf) || job.NodeIndex != nodeOf[me] {
		return fmt.Errorf("NodeOf %v NodeIndex %d, want %v and %d", job.NodeOf, job.NodeIndex, nodeOf, nodeOf[me])
	}
	if got := job.LocalRanks(nodeOf[me]); !slices.Equal(got, local) {
		return fmt.Errorf("LocalRanks %v, want %v", got, local)
	}
	if r.LocalSize() != len(local) || r.LocalRank() != slices.Index(local, me) {
		return fmt.Errorf("local rank %d of %d, want %d of %d", r.LocalRank(), r.LocalSize(), slices.Index(local, me), len(local))
	}
	if want := fmt.Sprintf("-node%d", nodeOf[me]); !strings.HasSuffix(r.Node(), want) {
		return fmt.Errorf("host name %q, want one ending in %q", r.Node(), want)
	}

	// Every ordered pair, in rounds of shifts so that nobody waits on a
	// rank that waits on someone else.
	w := r.CommWorld()
	fill := func(b []byte, from, to int) {
		for i := range b {
			b[i] = byte(from*31 + to*7 + i)
		}
	}
	for _, size := range []int{13, 1 << 20} {
		send, recv, want := make([]byte, size), make([]byte, size), make([]byte, size)
		for d := 1; d < n; d++ {
			dst, src := (me+d)%n, (me-d+n)%n
			fill(send, me, dst)
			fill(want, src, me)
			clear(recv)
			st, err := w.Sendrecv(send, dst, size, recv, src, size)
			if err != nil {
				return fmt.Errorf("%d bytes to %d, from %d: %w", size, dst, src, err)
			}
			if st.Source != src || !slices.Equal(recv, want) {
				return fmt.Errorf("%d bytes from %d: source %d, content differs: %t", size, src, st.Source, !slices.Equal(recv, want))
			}
		}
	}

	node, err := w.SplitType(mpi.SplitShared, me)
	if err != nil {
		return err
	}
	defer node.Free()
	if node.Size() != len(local) || node.Rank() != slices.Index(local, me) {
		return fmt.Errorf("shared: rank %d of %d, want %d of %d", node.Rank(), node.Size(), slices.Index(local, me), len(local))
	}
	members := make([]int64, node.Size())
	if err := mpi.Allgather(node, []int64{int64(me)}, members); err != nil {
		return err
	}
	for i, m := range members {
		if int(m) != local[i] {
			return fmt.Errorf("shared communicator of %v, want %v", members, local)
		}
	}
	if s := slotFrom(w, "allreduce"); strings.Contains(s, "sm") {
		return fmt.Errorf("the world, on 3 nodes, has allreduce=%s", s)
	}
	if s := slotFrom(node, "allreduce"); len(local) > 1 && !strings.HasPrefix(s, "sm") {
		return fmt.Errorf("node %d's communicator of %d has allreduce=%s, want sm", nodeOf[me], len(local), s)
	}
	sum := make([]int64, 1)
	if err := mpi.Allreduce(node, []int64{int64(me)}, sum, mpi.Sum); err != nil {
		return err
	}
	want := int64(0)
	for _, l := range local {
		want += int64(l)
	}
	if sum[0] != want {
		return fmt.Errorf("allreduce on node %d: %d, want %d", nodeOf[me], sum[0], want)
	}
	if err := mpi.Allreduce(w, []int64{int64(me)}, sum, mpi.Sum); err != nil {
		return err
	}
	if sum[0] != int64(n*(n-1)/2) {
		return fmt.Errorf("allreduce on the world: %d, want %d", sum[0], n*(n-1)/2)
	}
	return nil
}

var (
	fakeNodeBTL  = regexp.MustCompile(`using btl for peer: rank=(\d+) btl=(\w+) peer=(\d+)`)
	fakeNodeConn = regexp.MustCompile(`connected: rank=(\d+) peer=(\d+) address=(\S+) class=(\w+)`)
)

// checkFakeNodeTransports reads from the ranks' verbose lines which BTL
// each pair uses (self, shm within a node, tcp across) and how tcp
// connected (loopback: the ranks share a network namespace).
func checkFakeNodeTransports(t *testing.T, log string, nodeOf []int) {
	t.Helper()
	lines := fakeNodeBTL.FindAllStringSubmatch(log, -1)
	if len(lines) != len(nodeOf)*len(nodeOf) {
		t.Fatalf("%d verbose BTL lines, want %d:\n%s", len(lines), len(nodeOf)*len(nodeOf), log)
	}
	for _, m := range lines {
		r, _ := strconv.Atoi(m[1])
		p, _ := strconv.Atoi(m[3])
		want := "tcp"
		switch {
		case r == p:
			want = "self"
		case nodeOf[r] == nodeOf[p]:
			want = "shm"
		}
		if m[2] != want {
			t.Errorf("rank %d reaches rank %d by %s, want %s", r, p, m[2], want)
		}
	}
	conns := fakeNodeConn.FindAllStringSubmatch(log, -1)
	t.Logf("%d BTL lines, %d tcp connections", len(lines), len(conns))
	if len(conns) == 0 {
		t.Errorf("no tcp connection logged:\n%s", log)
	}
	for _, m := range conns {
		if m[4] != "loopback" {
			t.Errorf("rank %s connected to rank %s at %s, class %s: want loopback", m[1], m[2], m[3], m[4])
		}
	}
}
