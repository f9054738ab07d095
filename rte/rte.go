// Package rte is gompi's run-time environment: who this process is in its
// job, the connection to the process manager (PMI-1 or PMI-2), the modex
// through which components exchange their business cards, and abort.
//
// A process finds its launcher in its environment: PMI_FD or PMI_PORT (gompi's
// mpirun, MPICH's mpiexec, or anything else that speaks PMI-1; srun
// --mpi=pmi2, whose PMI-2 pmi.WireVersion recognises). With neither, it is a
// singleton, rank 0 of 1, served by an in-process PMI server so that every
// path is the same. Started by a launcher gompi cannot speak to (Open MPI's
// mpirun sets OMPI_COMM_WORLD_SIZE but no PMI; srun without --mpi=pmi2 starts
// several tasks without one), it fails rather than run as one of many
// unrelated singletons.
package rte

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"io"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/gompi/gompi/internal/stamp"
	"github.com/gompi/gompi/mca"
	"github.com/gompi/gompi/mpierr"
	"github.com/gompi/gompi/rte/pmi"
)

func init() {
	mca.RegisterProject(&mca.Project{Name: "rte", Description: "Run-time environment: process identity, PMI, modex"})
}

// CookieKey is the PMI key that holds the job's secret cookie, in hex.
const CookieKey = "gompi-cookie"

// KVSPrefix starts the KVS name of a job started by gompi's mpirun; the job
// id follows it.
const KVSPrefix = "gompi-"

// CookieLen is the length of a job cookie in bytes.
const CookieLen = 16

// Job is this process's identity.
type Job struct {
	// ID names the job in shared-memory files and sockets: the id mpirun
	// chose, a hash of a foreign launcher's KVS name, or a random id for a
	// singleton.
	ID string
	// Cookie is a random secret shared by the job's processes; everything a
	// stranger could connect to checks it.
	Cookie [CookieLen]byte
	Rank   int
	Size   int
	// Node is the host name the launcher placed this process on, and
	// NodeIndex its position among the job's nodes.
	Node      string
	NodeIndex int
	// LocalRank and LocalSize place this process among the job's processes
	// on its node.
	LocalRank, LocalSize int
	// NodeOf gives every rank's node index.
	NodeOf []int
	// Singleton is true for a process started without a launcher.
	Singleton bool
	// Oversubscribed is true when this node runs more ranks than it has
	// cores for them, so that waiting ranks must give their core away;
	// OversubscribedBy says who decided: "mpirun" (from the cores it may
	// use, GOMPI_OVERSUBSCRIBED) or "this rank" (local ranks against the
	// node's usable cores).
	Oversubscribed   bool
	OversubscribedBy string
}

// CheckCookie compares a presented cookie with the job's in constant time.
func (j *Job) CheckCookie(b []byte) bool {
	return len(b) == CookieLen && subtle.ConstantTimeCompare(b, j.Cookie[:]) == 1
}

// LocalRanks returns the ranks on a node, in order.
func (j *Job) LocalRanks(node int) []int {
	var out []int
	for r, n := range j.NodeOf {
		if n == node {
			out = append(out, r)
		}
	}
	return out
}

// Options configure Start.
type Options struct {
	// Env is the environment snapshot to read PMI_* and friends from.
	Env []string
	// PMI, when set, is an established connection to a PMI server (goroutine
	// ranks); rank and size come from PMI_RANK and PMI_SIZE in Env.
	PMI io.ReadWriteCloser
	// OnLost is called when the connection to the process manager closes
	// before Finalize: the launcher is gone or aborted the job.
	OnLost func(error)
	// Neighborhood, when set, holds the other goroutine ranks of this
	// process, so that their bells ring each other directly.
	Neighborhood *Neighborhood
}

// Runtime is one process's run-time environment.
type Runtime struct {
	job   Job
	pmi   *pmi.Client
	modex *Modex

	singleton *pmi.Server // the in-process server of a singleton
	bell      *Bell
	hood      *Neighborhood

	mu        sync.Mutex
	log       *mca.Logger
	finalized bool

	lostMu sync.Mutex
	lost   []int // peers this process lost its connection to, in order

	failMu   sync.Mutex
	me, size int              // the job's, for the reader goroutine
	failed   []int            // ranks the launcher reported dead, in order
	onFailed []func(rank int) // who to tell
}

// ErrForeignLauncher is returned by Start when the environment shows a
// launcher gompi cannot speak to.
var ErrForeignLauncher = mpierr.Errorf(mpierr.ErrSpawn, "rte: started by a launcher gompi cannot speak to")

// Start connects to the process manager and establishes the job's identity.
func Start(o Options) (*Runtime, error) {
	env := envMap(o.Env)
	rt := &Runtime{}
	var err error
	copts := pmi.ClientOptions{OnLost: o.OnLost, OnProcFailed: rt.procFailed}
	switch {
	case o.PMI != nil:
		rank, size, rerr := rankSize(env)
		if rerr != nil {
			return nil, rerr
		}
		rt.pmi, err = pmi.NewClient(o.PMI, rank, size, copts)
	default:
		rt.pmi, err = pmi.Dial(env, copts)
		if err == pmi.ErrNoPMI {
			if foreign := foreignLauncher(env); foreign != "" {
				return nil, fmt.Errorf("%w: %s is set but there is no PMI_FD or PMI_PORT; start gompi programs with gompi's mpirun (go run ./cmd/mpirun -np N prog), MPICH's mpiexec or srun --mpi=pmi2",
					ErrForeignLauncher, foreign)
			}
			rt.pmi, rt.singleton, err = startSingleton()
			rt.job.Singleton = true
		}
	}
	if err != nil {
		return nil, err
	}
	stamp.Mark("rte: pmi connected")
	if err := rt.identify(env); err != nil {
		rt.pmi.Close()
		return nil, err
	}
	if err := rt.placeCores(env); err != nil {
		rt.pmi.Close()
		return nil, err
	}
	rt.failMu.Lock()
	rt.me, rt.size = rt.job.Rank, rt.job.Size
	rt.failMu.Unlock()
	rt.modex = newModex(rt)
	rt.bell = NewBell(rt.job.ID, rt.job.Rank, rt.pmi.Lost(), o.Neighborhood)
	rt.hood = o.Neighborhood
	return rt, nil
}

// foreignLauncher names the variable that betrays a launcher without a PMI
// gompi speaks.
func foreignLauncher(env map[string]string) string {
	for _, k := range []string{"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMIX_NAMESPACE"} {
		if _, ok := env[k]; ok {
			return k
		}
	}
	// srun with --mpi=none (Slurm's default) or pmix: a step of several
	// tasks. One task alone may run as a singleton.
	if v := env["SLURM_STEP_NUM_TASKS"]; v != "" && v != "1" && v != "0" {
		return "SLURM_STEP_NUM_TASKS=" + v
	}
	return ""
}

func envMap(env []string) map[string]string {
	m := make(map[string]string, len(env))
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return m
}

// rankSize reads PMI_RANK and PMI_SIZE as decimal numbers, as pmi.Dial
// does: "1 2" or "0x4" is no rank or size.
func rankSize(env map[string]string) (int, int, error) {
	rank, err := strconv.Atoi(env["PMI_RANK"])
	if err != nil {
		return 0, 0, mpierr.Errorf(mpierr.ErrIntern, "rte: PMI_RANK=%q is not a number", env["PMI_RANK"])
	}
	size, err := strconv.Atoi(env["PMI_SIZE"])
	if err != nil {
		return 0, 0, mpierr.Errorf(mpierr.ErrIntern, "rte: PMI_SIZE=%q is not a number", env["PMI_SIZE"])
	}
	if size < 1 || rank < 0 || rank >= size {
		return 0, 0, mpierr.Errorf(mpierr.ErrIntern, "rte: PMI_RANK=%d is not in 0..PMI_SIZE-1 (PMI_SIZE=%d)", rank, size)
	}
	return rank, size, nil
}

// startSingleton serves a job of one process in-process, so that a singleton
// takes the same paths as a launched rank.
func startSingleton() (*pmi.Client, *pmi.Server, error) {
	id := randomID()
	var cookie [CookieLen]byte
	rand.Read(cookie[:])
	srv := pmi.NewServer(pmi.ServerConfig{
		KVSName: KVSPrefix + id, Size: 1,
		Preput: map[string]string{CookieKey: hex.EncodeToString(cookie[:]), ProcessMappingKey: FormatMapping([]int{0})},
	})
	a, b := net.Pipe()
	go srv.Serve(0, b)
	c, err := pmi.NewClient(a, 0, 1, pmi.ClientOptions{})
	return c, srv, err
}

func randomID() string {
	var b [4]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// identify establishes the job id, cookie, node and local placement.
func (rt *Runtime) identify(env map[string]string) error {
	c := rt.pmi
	j := &rt.job
	j.Rank, j.Size = c.Rank, c.Size
	if err := rt.cookie(); err != nil {
		return err
	}
	if id, ok := strings.CutPrefix(c.KVSName, KVSPrefix); ok && id != "" {
		j.ID = id
	} else {
		// Another launcher's KVS name can repeat (Slurm's "5.0" does in
		// a new cluster): with rank 0's random cookie in the hash, the
		// job's /dev/shm names never meet a dead earlier job's files.
		h := fnv.New32a()
		h.Write([]byte(c.KVSName))
		h.Write(j.Cookie[:])
		j.ID = fmt.Sprintf("%08x", h.Sum32())
	}
	// Hydra names the node in PMI_HOSTNAME, Slurm in SLURMD_NODENAME (which
	// differs from the host name when one host runs several slurmd).
	j.Node = env["PMI_HOSTNAME"]
	if j.Node == "" {
		j.Node = env["SLURMD_NODENAME"]
	}
	if j.Node == "" {
		host, err := os.Hostname()
		if err != nil {
			return mpierr.Errorf(mpierr.ErrIntern, "rte: no host name: %w", err)
		}
		j.Node = host
	}
	mapping, found, err := c.Get(ProcessMappingKey)
	if err != nil {
		return err
	}
	if found {
		if j.NodeOf, err = ParseMapping(mapping, j.Size); err != nil {
			return err
		}
	} else {
		// Without a mapping, assume every rank has a node of its own: the
		// modex then publishes per process, which is correct, only larger.
		j.NodeOf = make([]int, j.Size)
		for r := range j.NodeOf {
			j.NodeOf[r] = r
		}
	}
	j.NodeIndex = j.NodeOf[j.Rank]
	local := j.LocalRanks(j.NodeIndex)
	j.LocalSize = len(local)
	for i, r := range local {
		if r == j.Rank {
			j.LocalRank = i
		}
	}
	return nil
}

// cookie reads the job cookie. gompi's launchers (mpirun, mpitest, the
// singleton server) put it in the KVS before the job starts. Under any other
// launcher rank 0 makes one and puts it, and every rank waits at a barrier
// before reading it: whether a rank joins that barrier must not depend on
// whether its first read raced rank 0's put.
func (rt *Runtime) cookie() error {
	c := rt.pmi
	ours := strings.HasPrefix(c.KVSName, KVSPrefix)
	if !ours {
		if c.Rank == 0 {
			_, found, err := c.Get(CookieKey)
			if err != nil {
				return err
			}
			if !found {
				var b [CookieLen]byte
				rand.Read(b[:])
				if err := c.Put(CookieKey, hex.EncodeToString(b[:])); err != nil {
					return err
				}
			}
		}
		if err := c.Barrier(); err != nil {
			return err
		}
	}
	v, found, err := c.Get(CookieKey)
	if err != nil {
		return err
	}
	if !found {
		return mpierr.Errorf(mpierr.ErrIntern, "rte: the job has no %s (KVS %s)", CookieKey, c.KVSName)
	}
	b, err := hex.DecodeString(v)
	if err != nil || len(b) != CookieLen {
		return mpierr.Errorf(mpierr.ErrIntern, "rte: %s is not %d hex bytes", CookieKey, CookieLen)
	}
	copy(rt.job.Cookie[:], b)
	return nil
}

// Job returns this process's identity.
func (rt *Runtime) Job() *Job { return &rt.job }

// Modex returns the job's business-card exchange.
func (rt *Runtime) Modex() *Modex { return rt.modex }

// Bell returns the bell this process's waits sleep on and its transports
// ring.
func (rt *Runtime) Bell() *Bell { return rt.bell }

// SetLogger gives the runtime its logger (rte_base_verbose) once the MCA base
// exists.
func (rt *Runtime) SetLogger(l *mca.Logger) {
	rt.mu.Lock()
	rt.log = l
	rt.mu.Unlock()
}

func (rt *Runtime) logger() *mca.Logger {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return rt.log
}

// Barrier waits for every process of the job.
func (rt *Runtime) Barrier() error { return rt.pmi.Barrier() }

// Lost is closed when the connection to the process manager has ended.
func (rt *Runtime) Lost() <-chan struct{} { return rt.pmi.Lost() }

// Finalize tells the process manager that this process ends normally.
func (rt *Runtime) Finalize() error {
	rt.mu.Lock()
	if rt.finalized {
		rt.mu.Unlock()
		return mpierr.Errorf(mpierr.ErrOther, "rte: Finalize called twice")
	}
	rt.finalized = true
	rt.mu.Unlock()
	err := rt.pmi.Finalize()
	rt.bell.Close()
	if rt.singleton != nil {
		rt.singleton.Shutdown()
	}
	return err
}

// Abort asks the process manager to end the job with code. The caller exits
// (or, for a goroutine rank, stops) next. gompi's own launchers are also
// told which peers this process had lost (PeerLost), so that they report
// this abort as a consequence of those peers' failure.
func (rt *Runtime) Abort(code int, msg string) error {
	rt.mu.Lock()
	rt.finalized = true
	rt.mu.Unlock()
	var lost []int
	if rt.gompiLauncher() {
		lost = rt.LostPeers()
	}
	return rt.pmi.Abort(code, msg, lost...)
}

// gompiLauncher reports whether the PMI server is gompi's own (mpirun,
// mpitest, a singleton's), which knows gompi's extensions of PMI-1.
func (rt *Runtime) gompiLauncher() bool {
	return strings.HasPrefix(rt.pmi.KVSName, KVSPrefix)
}

// PeerLost records that this process has lost its connection to rank (a
// transport saw it die or break its connection), and tells a gompi launcher
// at once: should this process fail next, the launcher then knows it as a
// consequence and names rank as the cause. The first report of each rank
// counts; it does not block on a PMI request in flight.
func (rt *Runtime) PeerLost(rank int) {
	rt.lostMu.Lock()
	if rank < 0 || rank >= rt.job.Size || rank == rt.job.Rank || slices.Contains(rt.lost, rank) {
		rt.lostMu.Unlock()
		return
	}
	rt.lost = append(rt.lost, rank)
	rt.lostMu.Unlock()
	if rt.gompiLauncher() {
		rt.pmi.PeerLost(rank) // a launcher that is gone is noticed elsewhere
	}
}

// LostPeers returns the ranks PeerLost recorded, in order.
func (rt *Runtime) LostPeers() []int {
	rt.lostMu.Lock()
	defer rt.lostMu.Unlock()
	return slices.Clone(rt.lost)
}

// PMIBytesWritten is the number of bytes this process wrote to the PMI
// connection.
func (rt *Runtime) PMIBytesWritten() int64 { return rt.pmi.BytesWritten() }

// Neighborhood returns the goroutine ranks of this process that the
// launcher (mpitest) put together; nil in a process of its own.
func (rt *Runtime) Neighborhood() *Neighborhood { return rt.hood }

// procFailed is the launcher's notice that rank died while the job goes on
// (mpirun --enable-recovery).
func (rt *Runtime) procFailed(rank int) {
	rt.failMu.Lock()
	if rank >= rt.size || rank == rt.me {
		rt.failMu.Unlock()
		return
	}
	for _, r := range rt.failed {
		if r == rank {
			rt.failMu.Unlock()
			return
		}
	}
	rt.failed = append(rt.failed, rank)
	fns := append([]func(int){}, rt.onFailed...)
	rt.failMu.Unlock()
	if log := rt.logger(); log != nil {
		log.Warn("the launcher reports a rank dead; the job goes on without it", "dead", rank)
	}
	for _, f := range fns {
		f(rank)
	}
}

// OnProcFailed registers f to be told of every rank the launcher reports
// dead, those reported already included (at once, from this goroutine).
// The PML fails what is pending on such a rank with a process-failure
// error.
func (rt *Runtime) OnProcFailed(f func(rank int)) {
	rt.failMu.Lock()
	rt.onFailed = append(rt.onFailed, f)
	past := append([]int{}, rt.failed...)
	rt.failMu.Unlock()
	for _, r := range past {
		f(r)
	}
}

// Failed returns the ranks the launcher has reported dead.
func (rt *Runtime) Failed() []int {
	rt.failMu.Lock()
	defer rt.failMu.Unlock()
	return append([]int{}, rt.failed...)
}
