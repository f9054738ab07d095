package pmi_test

import (
	"errors"
	"fmt"
	"net"
	"os"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gompi/gompi/mpierr"
	"github.com/gompi/gompi/rte/pmi"
	"github.com/gompi/gompi/rte/pmi/pmi2test"
)

// These tests run the PMI-2 client against pmi2test's Slurm-like server.

const liveness = 5 * time.Second

// connect serves rank over a socketpair and returns the rank's end.
func connect(t *testing.T, s *pmi2test.Server, rank int) net.Conn {
	t.Helper()
	task, stepd, err := pmi2test.SocketPair()
	if err != nil {
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(task), "task")
	tc, err := net.FileConn(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	s.Start(rank, stepd)
	return tc
}

type lostCounter struct {
	mu sync.Mutex
	n  int
}

func (l *lostCounter) onLost(error) { l.mu.Lock(); l.n++; l.mu.Unlock() }

func (l *lostCounter) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n
}

func checkServer(t *testing.T, s *pmi2test.Server) {
	t.Helper()
	if u := s.Unknown(); len(u) > 0 {
		t.Errorf("the client sent commands Slurm does not know: %q", u)
	}
	if b := s.Broken(); len(b) > 0 {
		t.Errorf("the client broke the protocol: %q", b)
	}
}

// TestClient2Job runs four ranks against the fake Slurm: puts, fences across
// ranks, read-your-writes before the fence, two epochs, finalize.
func TestClient2Job(t *testing.T) {
	const n = 4
	s := pmi2test.NewServer(n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	lost := make([]*lostCounter, n)
	for rank := 0; rank < n; rank++ {
		lost[rank] = &lostCounter{}
		conn := connect(t, s, rank)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := runRank2(conn, rank, n, lost[rank]); err != nil {
				errs <- fmt.Errorf("rank %d: %w", rank, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	s.Wait()
	checkServer(t, s)
	for r, l := range lost {
		if l.count() != 0 {
			t.Errorf("rank %d: OnLost called after Finalize", r)
		}
	}
}

func runRank2(conn net.Conn, rank, n int, lost *lostCounter) error {
	c, err := pmi.NewClient2(conn, rank, n, "8.0", pmi.ClientOptions{OnLost: lost.onLost})
	if err != nil {
		return err
	}
	defer c.Close()
	if c.Rank != rank || c.Size != n {
		return fmt.Errorf("rank %d of %d", c.Rank, c.Size)
	}
	if v, found, err := c.Get("PMI_process_mapping"); err != nil || !found || v != fmt.Sprintf("(vector,(0,1,%d))", n) {
		return fmt.Errorf("mapping %q, %v, %v", v, found, err)
	}
	// A 1024-byte value is the largest PMI-2 takes.
	card := fmt.Sprintf("card-%d-", rank) + strings.Repeat("x", pmi.MaxValue2-len(fmt.Sprintf("card-%d-", rank)))
	if err := c.Put(fmt.Sprintf("bc-%d", rank), card); err != nil {
		return err
	}
	if v, found, err := c.Get(fmt.Sprintf("bc-%d", rank)); err != nil || !found || v != card {
		return fmt.Errorf("own put before the fence: %v, %v", found, err)
	}
	for epoch := 0; epoch < 2; epoch++ {
		if epoch == 1 {
			if err := c.Put(fmt.Sprintf("e1-%d", rank), strconv.Itoa(rank*10)); err != nil {
				return err
			}
		}
		if err := c.Barrier(); err != nil {
			return err
		}
		for p := 0; p < n; p++ {
			want := fmt.Sprintf("card-%d-", p) + strings.Repeat("x", pmi.MaxValue2-len(fmt.Sprintf("card-%d-", p)))
			if v, found, err := c.Get(fmt.Sprintf("bc-%d", p)); err != nil || !found || v != want {
				return fmt.Errorf("epoch %d: bc-%d: %d bytes, %v, %v", epoch, p, len(v), found, err)
			}
			v, found, err := c.Get(fmt.Sprintf("e1-%d", p))
			if err != nil || found != (epoch == 1) || (found && v != strconv.Itoa(p*10)) {
				return fmt.Errorf("epoch %d: e1-%d = %q, %v, %v", epoch, p, v, found, err)
			}
		}
	}
	return c.Finalize()
}

// TestClient2PutRefused: what PMI-2 cannot carry is refused before anything
// is sent, with ErrArg.
func TestClient2PutRefused(t *testing.T) {
	s := pmi2test.NewServer(1)
	c, err := pmi.NewClient2(connect(t, s, 0), 0, 1, "8.0", pmi.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	before := c.BytesWritten()
	for _, kv := range [][2]string{
		{"k", "a;b"},
		{"k", strings.Repeat("v", pmi.MaxValue2+1)},
		{strings.Repeat("k", pmi.MaxKey2+1), "v"},
		{"k=x", "v"},
		{"", "v"},
		{"PMI_process_mapping", "(vector,(0,1,1))"},
		{"universeSize", "3"},
	} {
		if err := c.Put(kv[0], kv[1]); err == nil || !errors.Is(err, mpierr.ErrArg) {
			t.Errorf("Put(%.20q, %.20q) = %v, want an ErrArg error", kv[0], kv[1], err)
		}
	}
	if _, _, err := c.Get("a;b"); err == nil || !errors.Is(err, mpierr.ErrArg) {
		t.Errorf("Get(a;b) = %v, want an ErrArg error", err)
	}
	if c.BytesWritten() != before {
		t.Errorf("refused requests wrote %d bytes", c.BytesWritten()-before)
	}
	if err := c.Put(strings.Repeat("k", pmi.MaxKey2), strings.Repeat("v", pmi.MaxValue2)); err != nil {
		t.Errorf("Put at the limits: %v", err)
	}
}

// TestClient2Abort: abort carries the message (';' replaced), no exit code
// and no lost ranks, gets no answer, and goes out while a fence that will
// never complete waits for its answer.
func TestClient2Abort(t *testing.T) {
	s := pmi2test.NewServer(2)
	c, err := pmi.NewClient2(connect(t, s, 0), 0, 2, "8.0", pmi.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fenced := make(chan error, 1)
	go func() { fenced <- c.Barrier() }() // rank 1 never comes
	time.Sleep(20 * time.Millisecond)
	if err := c.PeerLost(1); err != nil {
		t.Errorf("PeerLost: %v", err)
	}
	if err := c.Abort(3, "lost rank 1; giving up", 1); err != nil {
		t.Fatalf("Abort: %v", err)
	}
	deadline := time.Now().Add(liveness)
	for len(s.Aborts()) == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	aborts := s.Aborts()
	if len(aborts) != 1 || !reflect.DeepEqual(aborts[0], pmi.Cmd("abort", "isworld", "TRUE", "msg", "lost rank 1, giving up")) {
		t.Errorf("the server got aborts %#v", aborts)
	}
	checkServer(t, s)
	c.Close()
	select {
	case err := <-fenced:
		if !errors.Is(err, pmi.ErrLost) {
			t.Errorf("the fence cut short by Close: %v, want pmi.ErrLost", err)
		}
	case <-time.After(liveness):
		t.Fatal("the fence did not end with the connection")
	}
}

// TestDial2 connects the way a task under srun --mpi=pmi2 does.
func TestDial2(t *testing.T) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(fds[1]), "server")
	sc, err := net.FileConn(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	s := pmi2test.NewServer(2)
	s.JobID = "3.0"
	s.Start(1, sc)
	env := map[string]string{"PMI_FD": strconv.Itoa(fds[0]), "PMI_RANK": "1", "PMI_SIZE": "2", "PMI_JOBID": "3.0", "SLURM_MPI_TYPE": "pmi2"}
	c, err := pmi.Dial(env, pmi.ClientOptions{})
	if err != nil {
		syscall.Close(fds[0])
		t.Fatalf("pmi.Dial: %v", err)
	}
	if c.Version != 2 || c.Rank != 1 || c.Size != 2 || c.KVSName != "3.0" {
		t.Errorf("version %d rank %d size %d kvsname %q", c.Version, c.Rank, c.Size, c.KVSName)
	}
	if err := c.Finalize(); err != nil {
		t.Errorf("Finalize: %v", err)
	}
	first := s.Received()[0]
	if first != "cmd=fullinit;pmijobid=3.0;pmirank=1;threaded=FALSE;" {
		t.Errorf("fullinit %q", first)
	}

	if _, err := pmi.Dial(map[string]string{pmi.VersionEnv: "2", "PMI_PORT": "127.0.0.1:1"}, pmi.ClientOptions{}); !errors.Is(err, mpierr.ErrArg) {
		t.Errorf("PMI-2 over PMI_PORT: %v, want ErrArg", err)
	}
	if _, err := pmi.Dial(map[string]string{pmi.VersionEnv: "2"}, pmi.ClientOptions{}); err != pmi.ErrNoPMI {
		t.Errorf("PMI-2 without PMI_FD: %v, want pmi.ErrNoPMI", err)
	}
}
