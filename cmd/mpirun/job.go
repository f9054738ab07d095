package main

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gompi/gompi/components/common/shmem"
	"github.com/gompi/gompi/params"
	"github.com/gompi/gompi/rte"
	"github.com/gompi/gompi/rte/pmi"
)

// killGrace is how long a rank may take to end after SIGTERM before it gets
// SIGKILL; the whole job ends well within two seconds of a failure.
const killGrace = 500 * time.Millisecond

// JobIDEnv tells each rank the job's id.
const JobIDEnv = "GOMPI_JOB_ID"

// exitTimeout is mpirun's exit status when --timeout expires, as timeout(1).
const exitTimeout = 124

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

// placeRanks maps the ranks onto the hosts: all on this one without
// --host or --hostfile.
func (j *job) placeRanks() error {
	j.hosts = j.o.hosts
	if len(j.hosts) == 0 {
		j.hosts = []host{{name: j.host, slots: j.o.np}}
	}
	short, _, _ := strings.Cut(j.host, ".")
	for i := range j.hosts {
		n := j.hosts[i].name
		j.hosts[i].local = n == j.host || n == short || n == "localhost"
	}
	hostOf, err := mapBySlot(j.hosts, j.o.np)
	if err != nil {
		return err
	}
	j.hostOf = hostOf
	j.onHost = make([]int, len(j.hosts))
	j.localRank = make([]int, j.o.np)
	for r, h := range hostOf {
		j.localRank[r] = j.onHost[h]
		j.onHost[h]++
	}
	j.agent = strings.Fields(j.o.agent)
	return nil
}

// localRanks is how many ranks run on this machine.
func (j *job) localRanks() int {
	n := 0
	for i, h := range j.hosts {
		if h.local {
			n += j.onHost[i]
		}
	}
	return n
}

// remote reports whether some rank runs on another host.
func (j *job) remote() bool { return j.localRanks() < j.o.np }

// resolveProgram finds the executable, building a Go source directory first.
func (j *job) resolveProgram() error {
	p := j.o.program
	st, err := os.Stat(p)
	if err == nil && st.IsDir() {
		return j.build(p)
	}
	if !strings.Contains(p, "/") {
		path, err := exec.LookPath(p)
		if err != nil {
			return fmt.Errorf("program %q: not found in PATH", p)
		}
		j.program = path
		return nil
	}
	if err != nil {
		return fmt.Errorf("program %q: %v", p, errors.Unwrap(err))
	}
	if st.Mode()&0o111 == 0 {
		return fmt.Errorf("program %q is not executable (mode %v)", p, st.Mode().Perm())
	}
	j.program, _ = filepath.Abs(p)
	return nil
}

// build compiles a directory of Go source into a temporary executable.
func (j *job) build(dir string) error {
	matches, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	if len(matches) == 0 {
		return fmt.Errorf("program %q is a directory without Go source", dir)
	}
	tmp, err := os.MkdirTemp("", "gompi-build-")
	if err != nil {
		return err
	}
	j.buildDir = tmp
	abs, _ := filepath.Abs(dir)
	out := filepath.Join(tmp, filepath.Base(abs))
	cmd := exec.Command("go", "build", "-o", out, ".")
	cmd.Dir = abs
	cmd.Env = j.environ
	if msg, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building %s: %v\n%s", dir, err, msg)
	}
	j.program = out
	return nil
}

// planBinding chooses a core per rank: by default when there are no more
// ranks than cores, as Open MPI does.
func (j *job) planBinding() error {
	j.cores = rte.NodeCores()
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil // cannot tell: do not bind
	}
	var cpus []int
	for c := 0; c < 1024; c++ {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	j.cores = rte.LimitByQuota(len(cpus))
	switch j.o.bind {
	case "none":
		return nil
	case "core":
		if n := j.localRanks(); n > len(cpus) {
			return fmt.Errorf("--bind-to core: %d ranks on this host but only %d cores to bind them to; use --bind-to none", n, len(cpus))
		}
	default:
		if j.localRanks() > len(cpus) {
			return nil
		}
	}
	j.cpus = cpus
	return nil
}

func (j *job) cleanup() {
	if j.buildDir != "" {
		os.RemoveAll(j.buildDir)
	}
}

// rankEnv is the environment of one rank.
func (j *job) rankEnv(rank int) []string {
	drop := func(k string) bool {
		return strings.HasPrefix(k, "PMI_") || strings.HasPrefix(k, "OMPI_COMM_WORLD_") ||
			strings.HasPrefix(k, params.EnvSourcePrefix) || k == watchdogEnv || k == rte.OversubscribedEnv || k == JobIDEnv ||
			k == pmi.AuthEnv || k == params.EnvPrefix+agentParam
	}
	h := j.hostOf[rank]
	remote := !j.hosts[h].local
	if remote {
		// As ssh and Open MPI do: a remote rank gets what gompi needs and
		// what the user asked for, not mpirun's whole environment.
		inner := drop
		drop = func(k string) bool {
			return inner(k) || !(strings.HasPrefix(k, params.EnvPrefix) || strings.HasPrefix(k, "GOMPI_") || k == "GOMAXPROCS")
		}
	}
	set := map[string]string{}
	var order []string
	put := func(k, v string) {
		if _, ok := set[k]; !ok {
			order = append(order, k)
		}
		set[k] = v
	}
	for _, kv := range j.environ {
		k, v, _ := strings.Cut(kv, "=")
		if !drop(k) {
			put(k, v)
		}
	}
	for _, kv := range j.o.export {
		k, v, _ := strings.Cut(kv, "=")
		put(k, v)
	}
	// --mca beats -x OMPI_MCA_… and the inherited environment: the command
	// line is the highest source.
	for _, s := range j.o.mca {
		put(params.EnvPrefix+s.Name, s.Value)
		put(params.EnvSourcePrefix+s.Name, params.CommandLineMark)
	}
	n := strconv.Itoa(j.o.np)
	r := strconv.Itoa(rank)
	if remote {
		put("PMI_PORT", j.pmiPort)
		put("PMI_ID", r)
	} else {
		put("PMI_FD", "3")
		put("PMI_RANK", r)
		put("PMI_SIZE", n)
	}
	if len(j.hosts) > 1 || remote {
		// The node is the host the rank was placed on, never a guess from
		// what it can reach.
		put("PMI_HOSTNAME", j.hosts[h].name)
	}
	put("OMPI_COMM_WORLD_RANK", r)
	put("OMPI_COMM_WORLD_SIZE", n)
	put("OMPI_COMM_WORLD_LOCAL_RANK", strconv.Itoa(j.localRank[rank]))
	put("OMPI_COMM_WORLD_LOCAL_SIZE", strconv.Itoa(j.onHost[h]))
	// The job's id, which names its files in /dev/shm (gompi-<id>-…).
	put(JobIDEnv, j.jobID)
	// Whether waiting ranks must give their core away: more ranks on this
	// node than cores mpirun may use.
	over := "0"
	if remote {
		// Another host's cores are its ranks' to count.
	} else if j.localRanks() > j.cores {
		over = "1"
		// And the Go runtime of each rank runs on one thread at a time:
		// with a processor per core in every rank, idle processors spin
		// looking for goroutines and take the core from the rank being
		// waited for (a 4-rank barrier on 2 cores: 8 µs instead of 25).
		// A GOMAXPROCS the user set wins.
		if _, ok := set["GOMAXPROCS"]; !ok {
			put("GOMAXPROCS", "1")
		}
	}
	if !remote {
		put(rte.OversubscribedEnv, over)
	}
	out := make([]string, len(order))
	for i, k := range order {
		out[i] = k + "=" + set[k]
	}
	return out
}

func (j *job) logf(format string, a ...any) {
	j.outMu.Lock()
	defer j.outMu.Unlock()
	fmt.Fprintf(j.stderr, "mpirun: "+format+"\n", a...)
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

// died reports whether a rank's exit is a death that --enable-recovery
// survives (a signal, a non-zero code, or no Finalize), and says so.
func (j *job) died(rank int, ws syscall.WaitStatus, rs *rankState) bool {
	var how string
	switch {
	case ws.Signaled():
		how = fmt.Sprintf("exited on signal %d (%s)", int(ws.Signal()), signalName(ws.Signal()))
	case ws.ExitStatus() != 0:
		how = fmt.Sprintf("exited with code %d", ws.ExitStatus())
	case rs.initialized && !rs.finalized:
		how = "exited with code 0 without calling Finalize"
	default:
		return false
	}
	j.logf("rank %d (pid %d) %s; --enable-recovery: the other ranks are told and go on", rank, rs.pid, how)
	return true
}

// deathStatus is mpirun's exit status for a rank's death.
func deathStatus(ws syscall.WaitStatus) int {
	switch {
	case ws.Signaled():
		return 128 + int(ws.Signal())
	case ws.ExitStatus() != 0:
		return ws.ExitStatus()
	}
	return 1
}

func signalName(s syscall.Signal) string {
	n := s.String()
	if n == "" {
		return "unknown"
	}
	return strings.ToUpper(n[:1]) + n[1:]
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

// startServer makes the job's PMI server, and its TCP listener when ranks
// run on other hosts.
func (j *job) startServer() error {
	var idb [4]byte
	rand.Read(idb[:])
	var cookie [rte.CookieLen]byte
	rand.Read(cookie[:])
	j.jobID = hex.EncodeToString(idb[:])
	if j.remote() {
		var secret [16]byte
		rand.Read(secret[:])
		j.auth = hex.EncodeToString(secret[:])
	}
	j.srv = pmi.NewServer(pmi.ServerConfig{
		KVSName: rte.KVSPrefix + j.jobID,
		Size:    j.o.np,
		Preput: map[string]string{
			rte.CookieKey:         hex.EncodeToString(cookie[:]),
			rte.ProcessMappingKey: rte.FormatMapping(j.hostOf),
		},
		Auth: j.auth,
		Events: pmi.Events{
			Init:     func(r int) { j.mu.Lock(); j.ranks[r].initialized = true; j.mu.Unlock() },
			Finalize: func(r int) { j.mu.Lock(); j.ranks[r].finalized = true; j.mu.Unlock() },
			Abort: func(r, code int, msg string) {
				ev := event{kind: "abort", rank: r, code: code, msg: msg, at: j.tick()}
				j.mu.Lock()
				j.ranks[r].abort = &ev
				j.mu.Unlock()
				j.events <- ev
			},
			PeerLost: j.peerLost,
			Ended: func(r int) {
				j.mu.Lock()
				rs := j.ranks[r]
				j.mu.Unlock()
				rs.servedOnce.Do(func() { close(rs.served) })
			},
			Error: func(r int, err error) { j.events <- event{kind: "pmi-error", rank: r, msg: err.Error()} },
			Put: func(r int, key, value string, n int) {
				if !j.o.reportModex || !strings.HasPrefix(key, "m") {
					return
				}
				j.modexMu.Lock()
				j.modexPuts[key] = value
				j.modexLineBytes[key] = int64(n)
				j.modexMu.Unlock()
			},
		},
	})
	if !j.remote() {
		return nil
	}
	ln, err := net.Listen("tcp", ":0")
	if err != nil {
		return fmt.Errorf("listening for remote ranks' PMI connections: %w", err)
	}
	// Remote ranks reach mpirun by its host name, as Hydra's proxies do.
	j.pmiPort = net.JoinHostPort(j.host, strconv.Itoa(ln.Addr().(*net.TCPAddr).Port))
	go j.srv.ServeListener(ln, pmi.ListenConfig{})
	return nil
}

// startRank starts one rank in its own process group, bound to its core,
// with its PMI socket as fd 3. It returns the write end of its stdin for
// rank 0.
func (j *job) startRank(rank int, outputs *sync.WaitGroup) (io.WriteCloser, error) {
	if h := j.hosts[j.hostOf[rank]]; !h.local {
		return j.startRemote(rank, h.name, outputs)
	}
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("socketpair: %w", err)
	}
	childPMI := os.NewFile(uintptr(fds[1]), "pmi-child")
	ourPMI := os.NewFile(uintptr(fds[0]), "pmi")
	conn, err := net.FileConn(ourPMI)
	ourPMI.Close()
	if err != nil {
		childPMI.Close()
		return nil, err
	}
	outR, outW, errR, errW, err := outputPipes()
	if err != nil {
		childPMI.Close()
		conn.Close()
		return nil, err
	}
	cmd := exec.Command(j.program, j.o.args...)
	cmd.Args[0] = j.o.program
	cmd.Env = j.rankEnv(rank)
	cmd.ExtraFiles = []*os.File{childPMI}
	cmd.Stdout, cmd.Stderr = outW, errW
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var stdinW io.WriteCloser
	var stdinR *os.File
	if rank == 0 {
		if stdinR, stdinW, err = os.Pipe(); err != nil {
			return nil, err
		}
		cmd.Stdin = stdinR
	}
	rs := &rankState{rank: rank, cmd: cmd, pmiConn: conn, served: make(chan struct{}), host: j.host}
	j.mu.Lock()
	j.ranks = append(j.ranks, rs)
	j.mu.Unlock()

	cpu := -1
	if j.cpus != nil {
		cpu = j.cpus[rank%len(j.cpus)]
	}
	err = startOn(cmd, cpu)
	childPMI.Close()
	outW.Close()
	errW.Close()
	if stdinR != nil {
		stdinR.Close()
	}
	if err != nil {
		j.mu.Lock()
		rs.exited = true
		j.mu.Unlock()
		conn.Close()
		return nil, err
	}
	j.mu.Lock()
	rs.pid = cmd.Process.Pid
	j.mu.Unlock()
	j.registerGroup(rs.pid)

	go func() {
		j.srv.Serve(rank, conn)
		rs.servedOnce.Do(func() { close(rs.served) })
	}()
	j.watch(rank, cmd, outR, errR, outputs)
	return stdinW, nil
}

// watch forwards a started rank's output and reports its exit.
func (j *job) watch(rank int, cmd *exec.Cmd, outR, errR *os.File, outputs *sync.WaitGroup) {
	outputs.Add(2)
	go j.forward(rank, outR, j.stdout, outputs)
	go j.forward(rank, errR, j.stderr, outputs)
	go func() {
		cmd.Wait()
		at := j.tick()
		ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
		j.events <- event{kind: "exit", rank: rank, status: ws, at: at}
	}()
}

// outputPipes makes the pipes of a rank's standard output and error.
func outputPipes() (outR, outW, errR, errW *os.File, err error) {
	if outR, outW, err = os.Pipe(); err != nil {
		return
	}
	if errR, errW, err = os.Pipe(); err != nil {
		outR.Close()
		outW.Close()
	}
	return
}

// startOn starts cmd on a thread bound to cpu, so that the child (and every
// thread it makes) inherits the binding; -1 means no binding.
func startOn(cmd *exec.Cmd, cpu int) error {
	if cpu < 0 {
		return cmd.Start()
	}
	done := make(chan error, 1)
	go func() {
		// The thread's mask is changed for good, so it must not run other
		// goroutines: it stays locked and ends with this goroutine.
		runtime.LockOSThread()
		var set unix.CPUSet
		set.Set(cpu)
		if err := unix.SchedSetaffinity(0, &set); err != nil {
			done <- fmt.Errorf("binding to core %d: %w", cpu, err)
			return
		}
		done <- cmd.Start()
	}()
	return <-done
}

// forward copies a rank's output line by line, so that lines of different
// ranks do not interleave, prefixed with [rank] under --tag-output.
func (j *job) forward(rank int, r *os.File, w io.Writer, wg *sync.WaitGroup) {
	defer wg.Done()
	defer r.Close()
	br := bufio.NewReaderSize(r, 64<<10)
	prefix := ""
	if j.o.tagOutput {
		prefix = fmt.Sprintf("[%d] ", rank)
	}
	for {
		line, err := br.ReadSlice('\n')
		if len(line) > 0 {
			j.outMu.Lock()
			io.WriteString(w, prefix)
			w.Write(line)
			if err != nil && err != bufio.ErrBufferFull && prefix != "" && line[len(line)-1] != '\n' {
				io.WriteString(w, "\n")
			}
			j.outMu.Unlock()
		}
		if err != nil && err != bufio.ErrBufferFull {
			return
		}
	}
}

// groups returns the process group of every rank that was started.
func (j *job) groups() []int {
	j.mu.Lock()
	defer j.mu.Unlock()
	var pids []int
	for _, r := range j.ranks {
		if r.pid > 0 {
			pids = append(pids, r.pid)
		}
	}
	return pids
}

// signalAll sends sig to every rank's process group. A rank not reaped yet
// is marked first, so that its death by sig is known as mpirun's doing.
func (j *job) signalAll(sig syscall.Signal) {
	j.markSignalled(sig)
	for _, p := range j.groups() {
		syscall.Kill(-p, sig)
	}
}

// markSignalled records that every rank not reaped yet is being sent sig.
func (j *job) markSignalled(sig syscall.Signal) {
	at := j.tick()
	j.mu.Lock()
	for _, r := range j.ranks {
		switch {
		case r.pid <= 0 || r.exited:
		case sig == syscall.SIGTERM && r.termAt == 0:
			r.termAt = at
		case sig == syscall.SIGKILL && r.killAt == 0:
			r.killAt = at
		}
	}
	j.mu.Unlock()
}

// terminateAll ends every rank's process group: SIGTERM, then SIGKILL for
// what is still there after a grace period.
func (j *job) terminateAll() {
	j.signalAll(syscall.SIGTERM)
	deadline := time.Now().Add(killGrace)
	for j.running() > 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	j.signalAll(syscall.SIGKILL)
}

// reapOrphans reaps the dead processes that ranks left behind (mpirun is
// their subreaper), until none is left or the time is up.
func reapOrphans(limit time.Duration) {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		switch {
		case err == syscall.ECHILD:
			return
		case pid > 0:
			continue
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// reapAll waits for the ranks that were started.
func (j *job) reapAll() {
	for j.running() > 0 {
		ev := <-j.events
		if ev.kind == "exit" {
			j.markExited(ev.rank, ev.status)
		}
	}
}

func (j *job) reportModex() {
	j.modexMu.Lock()
	defer j.modexMu.Unlock()
	// Group the chunks by fence: "m<fence>.<node>.<chunk>".
	fences := map[int]map[string]string{}
	bytes := map[int]int64{}
	for k, v := range j.modexPuts {
		var seq, node, chunk int
		if _, err := fmt.Sscanf(k, "m%d.%d.%d", &seq, &node, &chunk); err != nil {
			continue
		}
		if fences[seq] == nil {
			fences[seq] = map[string]string{}
		}
		fences[seq][k] = v
		bytes[seq] += j.modexLineBytes[k]
	}
	if len(fences) == 0 {
		j.logf("modex: nothing was published")
		return
	}
	seqs := make([]int, 0, len(fences))
	for seq := range fences {
		seqs = append(seqs, seq)
	}
	sort.Ints(seqs)
	for _, seq := range seqs {
		st, err := rte.StatsOfBlobs(fences[seq])
		if err != nil {
			j.logf("modex report: %v", err)
			return
		}
		st.WireBytes = bytes[seq]
		j.logf("modex fence %d: %d processes, %d values of %d keys, %d value bytes; %d bytes in %d puts on the PMI wire; naming overhead %.2f bytes per key and process",
			seq, st.Processes, st.Entries, st.Keys, st.ValueBytes, st.WireBytes, st.Puts, st.NamingOverhead())
	}
}
