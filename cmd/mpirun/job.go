package main

// The job: what mpirun knows of it and of each rank, and run, which takes it
// from its first rank's start to mpirun's exit status.

import (
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gompi/gompi/components/common/shmem"
	"github.com/gompi/gompi/internal/stamp"
	"github.com/gompi/gompi/rte/pmi"
)

// rankState is what mpirun knows of one rank; what changes is guarded by
// job.mu.
type rankState struct {
	rank        int
	cmd         *exec.Cmd
	pid         int
	initialized bool
	finalized   bool
	exited      bool
	status      syscall.WaitStatus
	pmiConn     net.Conn
	served      chan struct{} // closed when the rank's PMI conversation has ended
	servedOnce  sync.Once
	host        string // the host it runs on
	abort       *event // the rank's Abort, once the PMI server has read it
	lost        []int  // peers the rank told mpirun it lost, in order
	namedLost   int64  // when a peer first reported this rank lost (job.tick); 0: never
	// termAt and killAt are when mpirun (about to) sent the rank's group
	// SIGTERM and SIGKILL (job.tick; 0: not): a death by one sent before
	// the rank was reaped is mpirun's doing, not a failure.
	termAt, killAt int64
	failure        *failure // how the rank failed, once known (cause.go)
}

// event is what supervise hears of a rank: from the goroutine that waits
// for its process (exit) and from the PMI server (abort, pmi-error).
type event struct {
	kind   string // "exit", "abort", "pmi-error"
	rank   int
	code   int
	msg    string
	status syscall.WaitStatus
	at     int64 // job.tick when it happened
}

// job is one run of mpirun: its options, where its ranks run, and their
// state.
type job struct {
	o       *options
	environ []string
	stdin   io.Reader
	stdout  io.Writer
	stderr  io.Writer
	outMu   sync.Mutex

	program  string
	buildDir string
	jobID    string
	cpus     []int // the cores ranks are bound to; nil for no binding
	cores    int   // the cores the ranks may use: mpirun's affinity, bounded by its cgroup's quota

	host  string       // this host's name, in failure reports
	clock atomic.Int64 // orders what mpirun learns (tick)

	hosts     []host // where ranks run; one local host without --host
	hostOf    []int  // each rank's host index
	localRank []int  // each rank's place among its host's ranks
	onHost    []int  // ranks per host
	agent     []string
	pmiPort   string // host:port of the PMI listener, for remote ranks
	auth      string // the secret remote ranks present (pmi.ServerConfig.Auth)

	mu     sync.Mutex
	ranks  []*rankState
	events chan event
	srv    *pmi.Server

	wdMu sync.Mutex
	wd   watchdogState

	// killed are the groups drain sent SIGKILL, whose dead tearDown reaps.
	killed []int

	modexMu        sync.Mutex
	modexPuts      map[string]string
	modexLineBytes map[string]int64
}

// newJob prepares the job before any process starts: it places the ranks
// on the hosts, finds or builds the program, and plans the ranks' binding,
// in that order (the binding counts the ranks placed on this host).
func newJob(o *options, environ []string, stdin io.Reader, stdout, stderr io.Writer) (*job, error) {
	j := &job{o: o, environ: environ, stdin: stdin, stdout: stdout, stderr: stderr,
		events: make(chan event, 4*o.np+16), modexPuts: map[string]string{}, modexLineBytes: map[string]int64{}}
	j.host, _ = os.Hostname()
	if err := j.placeRanks(); err != nil {
		return nil, err
	}
	if err := j.resolveProgram(); err != nil {
		j.cleanup()
		return nil, err
	}
	if err := j.planBinding(); err != nil {
		j.cleanup()
		return nil, err
	}
	return j, nil
}

// run is the launcher's life once newJob has placed the ranks, found or
// built the program and planned the binding: it starts the ranks, serves
// them until every one has ended, says what failed, and returns mpirun's
// exit status. Each step's comment says why it comes where it does.
func (j *job) run() int {
	defer j.cleanup()
	becomeSubreaper()
	sigs := catchSignals()
	defer signal.Stop(sigs)

	// The watchdog starts beside the PMI server (startWatchdog says why),
	// and is up before the first rank exists.
	watchdogUp := j.startWatchdog()
	serverErr := j.startServer()
	if err := <-watchdogUp; err != nil || serverErr != nil {
		j.logf("%v", errors.Join(serverErr, err))
		j.finishWatchdog()
		return 1
	}
	stamp.Mark("watchdog started")
	var outputs sync.WaitGroup
	stdin0, err := j.startRanks(&outputs)
	if err != nil {
		j.logf("%v", err)
		j.terminateAll()
		j.reapAll()
		return 1
	}
	j.feedStdin(stdin0)
	stamp.Mark("ranks started")

	own, recoveryStatus := j.supervise(sigs)
	stamp.Mark("ranks reaped")
	j.drain(&outputs)
	stamp.Mark("drained")
	status := j.reportFailures(own, recoveryStatus)
	j.tearDown()
	stamp.Mark("torn down")
	if j.o.reportModex {
		j.reportModex()
	}
	return status
}

// tearDown releases what the job holds once its ranks have ended: the PMI
// server, the watchdog (told that the job ended normally, so that it kills
// nothing), the dead processes ranks left behind, and the job's
// shared-memory files here and on the other hosts. It comes after drain:
// the watchdog lets go only once every rank's group has been killed, and
// the server stops only once the ranks' last notices have been read.
func (j *job) tearDown() {
	j.srv.Shutdown()
	j.finishWatchdog()
	reapOrphans(j.killed, 200*time.Millisecond)
	// Shared-memory segments are unlinked as soon as every peer has mapped
	// them; a rank that died before that leaves one behind, so remove what
	// is left of the job's.
	shmem.RemoveJobFiles(j.jobID)
	if j.remote() {
		j.cleanRemote()
	}
}

// pid is rank's process id; 0 before it started.
func (j *job) pid(rank int) int {
	j.mu.Lock()
	defer j.mu.Unlock()
	if rank < len(j.ranks) && j.ranks[rank] != nil {
		return j.ranks[rank].pid
	}
	return 0
}

// running is how many ranks have not been reaped.
func (j *job) running() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	n := 0
	for _, r := range j.ranks {
		if !r.exited {
			n++
		}
	}
	return n
}

// stillRunning lists the ranks not reaped, for the timeout's message.
func (j *job) stillRunning() string {
	j.mu.Lock()
	defer j.mu.Unlock()
	var out []string
	for _, r := range j.ranks {
		if !r.exited {
			out = append(out, strconv.Itoa(r.rank))
		}
	}
	return strings.Join(out, ", ")
}

// markExited records that rank was reaped with status ws.
func (j *job) markExited(rank int, ws syscall.WaitStatus) *rankState {
	j.mu.Lock()
	defer j.mu.Unlock()
	rs := j.ranks[rank]
	rs.exited, rs.status = true, ws
	return rs
}
