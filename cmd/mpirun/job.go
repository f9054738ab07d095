package main

// The job: what mpirun knows of it and of each rank, and run, which takes it
// from its first rank's start to mpirun's exit status.

import (
	"fmt"
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

	"golang.org/x/sys/unix"

	"github.com/gompi/gompi/components/common/shmem"
	"github.com/gompi/gompi/rte/pmi"
)

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

type event struct {
	kind   string // "exit", "abort", "pmi-error"
	rank   int
	code   int
	msg    string
	status syscall.WaitStatus
	at     int64 // job.tick when it happened
}

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

	modexMu        sync.Mutex
	modexPuts      map[string]string
	modexLineBytes map[string]int64
}

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

// run starts the ranks, serves them, and returns mpirun's exit status.
func (j *job) run() int {
	defer j.cleanup()
	// Processes that ranks leave behind are reparented to mpirun rather
	// than to init, so that mpirun can reap them.
	unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)

	if err := j.startWatchdog(); err != nil {
		j.logf("%v", err)
		return 1
	}
	if err := j.startServer(); err != nil {
		j.logf("%v", err)
		j.finishWatchdog()
		return 1
	}

	var stdin0 io.WriteCloser
	var outputs sync.WaitGroup
	for r := 0; r < j.o.np; r++ {
		w, err := j.startRank(r, &outputs)
		if err != nil {
			j.logf("starting rank %d: %v", r, err)
			j.terminateAll()
			j.reapAll()
			j.finishWatchdog()
			return 1
		}
		if r == 0 {
			stdin0 = w
		}
	}
	if stdin0 != nil {
		go func() {
			if j.stdin != nil {
				io.Copy(stdin0, j.stdin)
			}
			stdin0.Close()
		}()
	}

	var timeout <-chan time.Time
	if j.o.timeout > 0 {
		t := time.NewTimer(time.Duration(j.o.timeout * float64(time.Second)))
		defer t.Stop()
		timeout = t.C
	}

	// What failed is reported once every rank has ended (cause.go): which
	// report arrives first is a race, and the first is not always the cause.
	failed := false
	terminate := func() {
		if !failed {
			failed = true
			go j.terminateAll()
		}
	}
	var own *failure // mpirun's own reason to end the job
	recoveryStatus := 0
	for j.running() > 0 {
		select {
		case ev := <-j.events:
			switch ev.kind {
			case "abort":
				j.mu.Lock()
				j.abortFailureLocked(j.ranks[ev.rank])
				j.mu.Unlock()
				terminate()
			case "pmi-error":
				j.logf("rank %d (pid %d) broke the PMI protocol: %s", ev.rank, j.pid(ev.rank), ev.msg)
			case "exit":
				rs := j.markExited(ev.rank, ev.status)
				// A rank that called Abort exits right after its abort
				// line; let the PMI server finish reading it, so that
				// the abort, not the exit code, is its failure. (A child
				// that inherited the socket can keep it open: wait only
				// briefly.)
				select {
				case <-rs.served:
				case <-time.After(200 * time.Millisecond):
				}
				j.mu.Lock()
				aborted := rs.abort != nil
				if aborted {
					j.abortFailureLocked(rs)
				}
				j.mu.Unlock()
				if aborted {
					terminate()
					continue
				}
				if j.o.recovery && !failed && j.died(ev.rank, ev.status, rs) {
					if recoveryStatus == 0 {
						recoveryStatus = deathStatus(ev.status)
					}
					j.srv.Failed(ev.rank)
					continue
				}
				j.mu.Lock()
				f := j.exitFailureLocked(rs, ev.status, ev.at)
				j.mu.Unlock()
				if f != nil {
					terminate()
				}
			}
		case <-timeout:
			timeout = nil
			if own == nil {
				own = &failure{rank: -1, at: j.tick(), status: exitTimeout,
					how: fmt.Sprintf("timeout after %gs: ending the job (ranks still running: %s)", j.o.timeout, j.stillRunning())}
			}
			terminate()
		case s := <-sigs:
			sig := s.(syscall.Signal)
			if own == nil {
				own = &failure{rank: -1, at: j.tick(), status: 128 + int(sig),
					how: fmt.Sprintf("received signal %d (%s): ending the job", int(sig), signalName(sig))}
			}
			terminate()
		}
	}
	// Ranks' background children and the output they hold go too.
	j.signalAll(syscall.SIGKILL)
	outputs.Wait()
	// The notices of lost peers that ranks sent before they ended are read
	// (their PMI conversations are over) unless a child holds the socket.
	deadline := time.After(200 * time.Millisecond)
	for _, rs := range j.ranks {
		select {
		case <-rs.served:
		case <-deadline:
		}
	}
	lines, status := j.verdict(own)
	for _, l := range lines {
		j.logf("%s", l)
	}
	if status == 0 {
		status = recoveryStatus
	}
	j.srv.Shutdown()
	j.finishWatchdog()
	reapOrphans(200 * time.Millisecond)
	// Shared-memory segments are unlinked as soon as every peer has mapped
	// them; a rank that died before that leaves one behind, so remove what
	// is left of the job's.
	shmem.RemoveJobFiles(j.jobID)
	if j.remote() {
		j.cleanRemote()
	}
	if j.o.reportModex {
		j.reportModex()
	}
	return status
}

func (j *job) pid(rank int) int {
	j.mu.Lock()
	defer j.mu.Unlock()
	if rank < len(j.ranks) && j.ranks[rank] != nil {
		return j.ranks[rank].pid
	}
	return 0
}

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

func (j *job) markExited(rank int, ws syscall.WaitStatus) *rankState {
	j.mu.Lock()
	defer j.mu.Unlock()
	rs := j.ranks[rank]
	rs.exited, rs.status = true, ws
	return rs
}
