// Package mpitest runs a job's ranks as goroutines of one test, over the real
// components, with an in-process PMI server speaking the real protocol.
//
//	mpitest.Run(t, 4, func(r *mpitest.Rank) error {
//		if r.Size() != 4 { return fmt.Errorf("size %d", r.Size()) }
//		return nil
//	}, mpitest.WithMCA("btl", "self,shm"))
//
// Each rank gets its own Instance with its own parameter values. The first
// rank to fail (return an error, panic, or call Abort) fails the test; the
// others are aborted: their pending and later calls into the runtime fail.
// Run finalizes the ranks whose function returned nil without finalizing.
//
// Start with Run in a test, or RunErr where there is no testing.T (the
// examples of package mpi run on it). Options set what a launcher would:
// WithMCA an MCA parameter, WithNodes a layout of ranks on pretend nodes,
// WithEnv the environment. Rank.Die kills a rank as SIGKILL would, to test
// recovery.
package mpitest

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/gompi/gompi/components/common/shmem"
	"github.com/gompi/gompi/internal/mpihook"
	"github.com/gompi/gompi/mpi"
	"github.com/gompi/gompi/mpierr"
	"github.com/gompi/gompi/params"
	"github.com/gompi/gompi/rte"
	"github.com/gompi/gompi/rte/pmi"
)

// Rank is one goroutine rank.
type Rank struct {
	*mpi.Instance
	die func()
}

// Die ends the rank as a process killed with SIGKILL under mpirun
// --enable-recovery would end: its transports close with no goodbye, the
// launcher (the in-process PMI server) tells the other ranks it died and
// lets their launcher barriers go on without it, and the rank's goroutine
// stops. Run counts the rank neither failed nor finalized. It does not
// return.
func (r *Rank) Die() { r.die() }

// Option configures Run.
type Option func(*config)

type config struct {
	logf   func(string, ...any)
	mca    []params.Setting
	env    []string
	events pmi.Events
	nodeOf []int // WithNodes; nil: every rank on one node
	nodes  bool  // WithNodes was given
}

// WithMCA sets an MCA parameter for every rank, at command-line precedence.
func WithMCA(name, value string) Option {
	return func(c *config) { c.mca = append(c.mca, params.Setting{Name: name, Value: value}) }
}

// WithEnv adds KEY=value entries to every rank's environment snapshot.
func WithEnv(kv ...string) Option {
	return func(c *config) { c.env = append(c.env, kv...) }
}

// WithNodes makes the ranks believe they run on several nodes: rank r is on
// node nodeOf[r]. The in-process PMI server publishes the layout as a
// launcher would (PMI_process_mapping), so that everything that derives
// from it (Job.NodeOf, LocalRank, LocalSize, the modex's per-node
// publication, which peers shared memory reaches, SplitType(SplitShared),
// coll sm) sees separate nodes; each node gets a host name of its own,
// "<host>-node<k>", in PMI_HOSTNAME. Ranks of a node need not be
// contiguous: []int{0, 1, 0, 2, 1, 0} is three nodes of 3, 2 and 1 ranks.
//
// nodeOf needs one entry per rank, and its node indexes must be 0..k-1 with
// every node holding a rank, as launchers number nodes (in any order: node 1
// may come first). Run fails the test otherwise, and RunErr returns the
// error (of class ErrArg).
//
// Ranks on different fake nodes still share this process: btl shm refuses
// them as on real nodes, and btl tcp reaches them over loopback, since its
// peers publish one network namespace.
func WithNodes(nodeOf []int) Option {
	nodeOf = append([]int(nil), nodeOf...)
	return func(c *config) { c.nodeOf, c.nodes = nodeOf, true }
}

// checkNodes validates WithNodes' layout for a job of n ranks.
func checkNodes(nodeOf []int, n int) error {
	if len(nodeOf) != n {
		return mpierr.Errorf(mpierr.ErrArg, "mpitest: WithNodes(%v): %d node indexes for %d ranks: give one per rank", nodeOf, len(nodeOf), n)
	}
	used := make([]bool, n)
	for r, node := range nodeOf {
		if node < 0 || node >= n {
			return mpierr.Errorf(mpierr.ErrArg, "mpitest: WithNodes(%v): rank %d is on node %d: node indexes of %d ranks are 0..%d", nodeOf, r, node, n, n-1)
		}
		used[node] = true
	}
	k := slices.Max(nodeOf) + 1
	if i := slices.Index(used[:k], false); i >= 0 {
		return mpierr.Errorf(mpierr.ErrArg, "mpitest: WithNodes(%v): node %d has no rank while node %d has: node indexes must be 0..k-1 with every node holding a rank, as launchers number them", nodeOf, i, k-1)
	}
	// What the ranks will read must be what was asked for.
	mapping := rte.FormatMapping(nodeOf)
	back, err := rte.ParseMapping(mapping, n)
	if err != nil || !slices.Equal(back, nodeOf) {
		return mpierr.Errorf(mpierr.ErrArg, "mpitest: WithNodes(%v): PMI_process_mapping %q reads back as %v (%v)", nodeOf, mapping, back, err)
	}
	return nil
}

// WithPMIEvents observes the in-process PMI server (puts, barriers, aborts),
// for tests of the runtime itself.
func WithPMIEvents(ev pmi.Events) Option {
	return func(c *config) { c.events = ev }
}

// Run starts n ranks, runs fn on each, and waits for all of them. What
// ranks log goes to the test's log, or where WithLogf says.
func Run(t testing.TB, n int, fn func(r *Rank) error, opts ...Option) {
	t.Helper()
	var cfg config
	for _, o := range opts {
		o(&cfg)
	}
	logf := t.Logf
	if cfg.logf != nil {
		logf = cfg.logf
	}
	if err := run(n, fn, logf, opts...); err != nil {
		t.Fatal(err)
	}
}

// RunErr is Run outside a test (examples, tools) and for tests that expect
// a failure: it returns the first rank's error. What ranks log is dropped
// unless WithLogf says where it goes.
func RunErr(n int, fn func(r *Rank) error, opts ...Option) error {
	var cfg config
	for _, o := range opts {
		o(&cfg)
	}
	logf := cfg.logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	return run(n, fn, logf, opts...)
}

// WithLogf sends what ranks log to logf (by default Run logs to the test,
// RunErr nowhere).
func WithLogf(logf func(format string, a ...any)) Option {
	return func(c *config) { c.logf = logf }
}

// failure keeps the first rank error; later ones are usually consequences.
type failure struct {
	mu    sync.Mutex
	first error
	all   []error
}

func (f *failure) add(err error) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.all = append(f.all, err)
	if f.first == nil {
		f.first = err
		return true
	}
	return false
}

func run(n int, fn func(r *Rank) error, logf func(string, ...any), opts ...Option) error {
	if n < 1 {
		return fmt.Errorf("mpitest: %d ranks: need at least 1", n)
	}
	var cfg config
	for _, o := range opts {
		o(&cfg)
	}
	var idb [4]byte
	rand.Read(idb[:])
	var cookie [rte.CookieLen]byte
	rand.Read(cookie[:])
	nodeOf := make([]int, n)
	if cfg.nodes {
		if err := checkNodes(cfg.nodeOf, n); err != nil {
			return err
		}
		nodeOf = cfg.nodeOf
	}

	var fail failure
	var srv *pmi.Server
	events := cfg.events
	userAbort := events.Abort
	events.Abort = func(rank, code int, msg string) {
		if userAbort != nil {
			userAbort(rank, code, msg)
		}
		if fail.add(fmt.Errorf("rank %d called Abort(%d): %s", rank, code, msg)) {
			srv.Shutdown()
		}
	}
	jobID := hex.EncodeToString(idb[:])
	defer shmem.RemoveJobFiles(jobID)
	srv = pmi.NewServer(pmi.ServerConfig{
		KVSName: rte.KVSPrefix + jobID, Size: n,
		Preput: map[string]string{rte.CookieKey: hex.EncodeToString(cookie[:]), rte.ProcessMappingKey: rte.FormatMapping(nodeOf)},
		Events: events,
	})
	defer srv.Shutdown()

	base := baseEnv()
	// Goroutine ranks share this process's processors: the job is
	// oversubscribed (its waits yield and sleep) when they outnumber them.
	cores := min(runtime.GOMAXPROCS(0), rte.NodeCores())
	over := "0"
	if n > cores {
		over = "1"
	}
	base = append(base, rte.OversubscribedEnv+"="+over)
	hood := rte.NewNeighborhood()
	host := ""
	if cfg.nodes {
		h, err := os.Hostname()
		if err != nil {
			return mpierr.Errorf(mpierr.ErrIntern, "mpitest: WithNodes: no host name to name the nodes after: %w", err)
		}
		host = h
	}
	var wg sync.WaitGroup
	for r := 0; r < n; r++ {
		client, server, err := socketPair()
		if err != nil {
			return err
		}
		go srv.Serve(r, server)
		env := append([]string(nil), base...)
		if cfg.nodes {
			// Before WithEnv's entries, which may name the nodes otherwise.
			env = append(env, fmt.Sprintf("PMI_HOSTNAME=%s-node%d", host, nodeOf[r]))
		}
		env = append(env, cfg.env...)
		env = append(env, fmt.Sprintf("PMI_RANK=%d", r), fmt.Sprintf("PMI_SIZE=%d", n))
		wg.Add(1)
		go func(rank int) {
			defer wg.Done()
			dead := func() {
				client.Close()
				srv.Failed(rank)
			}
			if err := runRank(rank, env, client, hood, &cfg, fn, logf, dead); err != nil {
				if fail.add(err) {
					srv.Shutdown()
				}
			}
		}(r)
	}
	wg.Wait()
	return fail.first
}

// runRank runs one rank and turns its failures (error, panic, Abort) into an
// error.
func runRank(rank int, env []string, conn net.Conn, hood *rte.Neighborhood, cfg *config, fn func(*Rank) error, logf func(string, ...any), dead func()) (err error) {
	// What a rank logs goes to the test's log, one line at a time.
	w := writerFunc(func(p []byte) (int, error) {
		logf("%s", strings.TrimSuffix(string(p), "\n"))
		return len(p), nil
	})
	exited := false // set by Exit, on this goroutine
	died := false   // set by Die, on this goroutine
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("rank %d panicked: %v\n%s", rank, p, debug.Stack())
		} else if died {
			err = nil
		} else if exited && err == nil {
			err = fmt.Errorf("rank %d stopped (Abort or the job ended)", rank)
		}
	}()
	inst, err := mpi.InitWith(mpi.Options{
		Env: env, MCA: cfg.mca, PMI: conn, Output: w, Neighborhood: hood,
		Exit: func(code int) { exited = true; runtime.Goexit() },
	})
	if err != nil {
		return fmt.Errorf("rank %d: %w", rank, err)
	}
	die := func() {
		died = true
		mpihook.Crash(inst)
		dead()
		runtime.Goexit()
	}
	if err := fn(&Rank{Instance: inst, die: die}); err != nil {
		return fmt.Errorf("rank %d: %w", rank, err)
	}
	if !inst.Finalized() {
		if err := inst.Finalize(); err != nil {
			return fmt.Errorf("rank %d: %w", rank, err)
		}
	}
	return nil
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// baseEnv is the test process's environment without anything that says the
// test itself runs under a launcher.
func baseEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "PMI_") || strings.HasPrefix(k, "OMPI_COMM_WORLD_") || strings.HasPrefix(k, "PMIX_") || k == rte.OversubscribedEnv {
			continue
		}
		out = append(out, kv)
	}
	return out
}

// socketPair returns two connected Unix stream sockets, as a launcher would
// give a rank (PMI_FD).
func socketPair() (net.Conn, net.Conn, error) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("mpitest: socketpair: %w", err)
	}
	var conns [2]net.Conn
	for i, fd := range fds {
		f := os.NewFile(uintptr(fd), "pmi")
		c, err := net.FileConn(f)
		f.Close()
		if err != nil {
			return nil, nil, fmt.Errorf("mpitest: %w", err)
		}
		conns[i] = c
	}
	return conns[0], conns[1], nil
}
