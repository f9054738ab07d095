// Package testutil holds what the tests that run real processes share:
// building the programs, running mpirun and other processes with a time
// limit, looking at /proc, and listing a job's files in /dev/shm. It only
// gathers and waits; what to assert stays in each test.
package testutil

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gompi/gompi/components/common/shmem"
)

// Build builds each package of bins (a path relative to the test's
// directory) and stores the program's path where its key points; the
// program is named after the package's directory.
//
// The programs live in one folder per checkout under the temporary
// directory (programDir), one subfolder per package, and go build does not
// relink a program that is up to date where it is asked to write it: the
// programs a whole `go test ./...` runs are linked once, not once per test
// package that runs them (linking was a tenth of the suite's time). A lock
// file serialises the builds of one program by test processes that run at
// once; go build puts a new program in place by renaming it over the old
// one, so a process still running the old one keeps it.
func Build(bins map[*string]string) error {
	root, err := programDir()
	if err != nil {
		return err
	}
	for out, pkg := range bins {
		path, err := buildProgram(root, pkg)
		if err != nil {
			return err
		}
		*out = path
	}
	return nil
}

// Program builds the package at pkg (as Build) and returns the program's
// path. Callers that need it under another name copy it.
func Program(pkg string) (string, error) {
	root, err := programDir()
	if err != nil {
		return "", err
	}
	return buildProgram(root, pkg)
}

// Install puts a copy of the package's program (built as Build builds it)
// at dst, executable, for a test that needs it under a name of its own (a
// plugin's), and fails the test if it cannot.
func Install(t testing.TB, pkg, dst string) {
	t.Helper()
	src, err := Program(pkg)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, data, 0o755); err != nil {
		t.Fatal(err)
	}
}

// programDir is the folder of this checkout's test programs: named after
// the module's folder, so that checkouts side by side do not share it.
func programDir() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %v", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", fmt.Errorf("not inside a Go module")
	}
	sum := sha256.Sum256([]byte(filepath.Dir(mod)))
	dir := filepath.Join(os.TempDir(), "gompi-test-programs", hex.EncodeToString(sum[:8]))
	return dir, os.MkdirAll(dir, 0o755)
}

func buildProgram(root, pkg string) (string, error) {
	abs, err := filepath.Abs(pkg)
	if err != nil {
		return "", err
	}
	list, err := exec.Command("go", "list", "-f", "{{.ImportPath}}", pkg).Output()
	if err != nil {
		return "", fmt.Errorf("go list %s: %v", pkg, err)
	}
	dir := filepath.Join(root, strings.ReplaceAll(strings.TrimSpace(string(list)), "/", "_"))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	lock, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", fmt.Errorf("locking %s: %v", lock.Name(), err)
	}
	path := filepath.Join(dir, filepath.Base(abs))
	if msg, err := exec.Command("go", "build", "-o", path, pkg).CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %v\n%s", pkg, err, msg)
	}
	return path, nil
}

// Main is the TestMain of a package whose tests all run built programs:
// it builds bins (as Build), runs the tests and exits.
func Main(m *testing.M, bins map[*string]string) {
	if err := Build(bins); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// CleanEnv is the environment without a launcher's variables: a program
// started with it, or mpi.InitWith given it, makes a singleton.
func CleanEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); !strings.HasPrefix(k, "PMI_") && !strings.HasPrefix(k, "OMPI_") {
			out = append(out, kv)
		}
	}
	return out
}

// LogWriter writes each line to the test's log: mpi.Options.Output for a
// rank made in the test.
type LogWriter struct{ T testing.TB }

func (w LogWriter) Write(p []byte) (int, error) {
	w.T.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// RunMpirun runs mpirun (the path of a built one) with --timeout limit
// before args, and returns its standard output, failing the test when it
// does not exit 0.
func RunMpirun(t testing.TB, mpirun string, limit time.Duration, args ...string) string {
	t.Helper()
	args = append([]string{"--timeout", fmt.Sprint(int(limit.Seconds()))}, args...)
	cmd := exec.Command(mpirun, args...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("mpirun %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, &stdout, &stderr)
	}
	return stdout.String()
}

// LockedBuffer is a buffer that a process writes while the test reads it.
type LockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *LockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *LockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Proc is a started process with its output and exit.
type Proc struct {
	Cmd            *exec.Cmd
	Stdout, Stderr *LockedBuffer
	Done           chan struct{} // closed once the process has ended
	Err            error         // what Wait returned, once Done is closed
	Code           int           // the exit status, 128+n after signal n (a shell's $?), once Done is closed
}

// Start starts cmd with its output collected, and kills it when the test
// ends. It fails the test if cmd cannot start: call it on the test's
// goroutine (TryStart elsewhere).
func Start(t testing.TB, cmd *exec.Cmd) *Proc {
	t.Helper()
	p, err := TryStart(t, cmd)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TryStart is Start for any goroutine: it returns the error.
func TryStart(t testing.TB, cmd *exec.Cmd) (*Proc, error) {
	p := &Proc{Cmd: cmd, Stdout: &LockedBuffer{}, Stderr: &LockedBuffer{}, Done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.Stdout, p.Stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		p.Err = cmd.Wait()
		if ee, ok := p.Err.(*exec.ExitError); ok {
			p.Code = ee.ExitCode()
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				p.Code = 128 + int(ws.Signal())
			}
		}
		close(p.Done)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-p.Done
	})
	return p, nil
}

// Wait waits for the process to end, killing it and failing the test after
// limit.
func (p *Proc) Wait(t testing.TB, limit time.Duration) {
	t.Helper()
	select {
	case <-p.Done:
	case <-time.After(limit):
		p.Cmd.Process.Kill()
		<-p.Done
		t.Fatalf("%s did not end within %v\nstdout:\n%s\nstderr:\n%s", p.Cmd.Path, limit, p.Stdout, p.Stderr)
	}
}

// WaitOutput waits, up to limit, until stdout matches re n times, and
// returns the matches; it fails the test when the process ends first.
func (p *Proc) WaitOutput(t testing.TB, re string, n int, limit time.Duration) [][]string {
	t.Helper()
	r := regexp.MustCompile(re)
	deadline := time.Now().Add(limit)
	for {
		if m := r.FindAllStringSubmatch(p.Stdout.String(), -1); len(m) >= n {
			return m
		}
		select {
		case <-p.Done:
			t.Fatalf("%s ended (status %d, %v) before %d lines matched %q\nstdout:\n%s\nstderr:\n%s",
				p.Cmd.Path, p.Code, p.Err, n, re, p.Stdout, p.Stderr)
		case <-time.After(5 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %d lines matching %q\nstdout:\n%s\nstderr:\n%s", n, re, p.Stdout, p.Stderr)
		}
	}
}

// Process is a line of /proc/<pid>/stat.
type Process struct {
	Pid, Ppid, Pgid, Sid int
	State                byte
}

// Processes lists the processes of the machine, as /proc shows them now.
func Processes(t testing.TB) []Process {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var out []Process
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// The command name, in parentheses, may hold spaces and parentheses.
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
		if len(f) < 4 {
			continue
		}
		p := Process{Pid: pid, State: f[0][0]}
		p.Ppid, _ = strconv.Atoi(f[1])
		p.Pgid, _ = strconv.Atoi(f[2])
		p.Sid, _ = strconv.Atoi(f[3])
		out = append(out, p)
	}
	return out
}

// ShmFiles lists a job's files in /dev/shm that match pattern after the
// job's prefix (shmem.Path): "*" for all of them. It fails the test on a
// bad pattern: call it on the test's goroutine (FindShmFiles elsewhere).
func ShmFiles(t testing.TB, job, pattern string) []string {
	t.Helper()
	files, err := FindShmFiles(job, pattern)
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// FindShmFiles is ShmFiles for any goroutine (a rank's): it returns the
// error.
func FindShmFiles(job, pattern string) ([]string, error) {
	return filepath.Glob(shmem.Path(job, pattern))
}

// ShmDescriptors lists the descriptors of process pid (0: this one) to
// memfd segments of job whose names, after the job's prefix, start with
// prefix ("" for all): what a process holds of a job's segments when they
// are memfds, which have no file in /dev/shm.
func ShmDescriptors(pid int, job, prefix string) []string {
	dir := "/proc/self/fd/"
	if pid != 0 {
		dir = fmt.Sprintf("/proc/%d/fd/", pid)
	}
	want := "/memfd:" + filepath.Base(shmem.Path(job, prefix))
	ents, _ := os.ReadDir(dir)
	var out []string
	for _, e := range ents {
		if l, err := os.Readlink(dir + e.Name()); err == nil && strings.HasPrefix(l, want) {
			out = append(out, l)
		}
	}
	return out
}

// A Window holds the first goroutine that reaches a test hook (Hold) there
// until the test has begun what must race with it (Begin), then a while
// longer, or until the test says it is over (End): it makes a window of a
// few nanoseconds (a poller between its check and its read of memory that
// Finalize unmaps) wide enough to hit every time.
type Window struct {
	once, begun, ended atomic.Bool
	in                 chan struct{}
}

// NewWindow makes a window no goroutine is in yet.
func NewWindow() *Window { return &Window{in: make(chan struct{})} }

// Hold is the hook: the first caller waits in it; later ones pass.
func (w *Window) Hold() {
	if !w.once.CompareAndSwap(false, true) {
		return
	}
	close(w.in)
	for !w.begun.Load() {
		runtime.Gosched()
	}
	// Long enough for what races to run, not forever: what it races with
	// may wait for the holder.
	for i := 0; i < 1000 && !w.ended.Load(); i++ {
		runtime.Gosched()
	}
}

// In is closed once a goroutine waits in Hold.
func (w *Window) In() <-chan struct{} { return w.in }

// Begin lets the holder go on, a while later; End, at once.
func (w *Window) Begin() { w.begun.Store(true) }
func (w *Window) End()   { w.ended.Store(true) }

// RankGroups returns the process groups of mpirun's ranks: its children
// that lead their own group, run another program than mpirun's, and are not
// its watchdog. A child is left out while what it is cannot be told: between
// its fork and its exec it runs mpirun's binary, and in the middle of its
// exec it has its new executable but no command line yet; a watchdog caught
// in either would pass for a rank. A rank caught there is left out too:
// callers that need them all poll until they are there.
func RankGroups(t testing.TB, mpirunPid int) []int {
	t.Helper()
	self, err := os.Readlink("/proc/" + strconv.Itoa(mpirunPid) + "/exe")
	if err != nil {
		return nil // mpirun is gone (or a zombie): it has no children left
	}
	var groups []int
	for _, p := range Processes(t) {
		if p.Ppid != mpirunPid || p.Pgid != p.Pid {
			continue
		}
		// A zombie has neither executable nor command line: it was a
		// rank, since the watchdog outlives the ranks.
		if p.State != 'Z' {
			proc := "/proc/" + strconv.Itoa(p.Pid)
			exe, err := os.Readlink(proc + "/exe")
			if err != nil || exe == self {
				continue
			}
			if cmdline, err := os.ReadFile(proc + "/cmdline"); err != nil || len(cmdline) == 0 || IsWatchdog(p.Pid) {
				continue
			}
		}
		groups = append(groups, p.Pgid)
	}
	sort.Ints(groups)
	return groups
}

// IsWatchdog reports whether pid is a watchdog of gompi's mpirun, by the
// command line it shows ("mpirun [watchdog of <pid>]"): it leads a process
// group of its own beside the ranks' groups, but is not a rank.
func IsWatchdog(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	return err == nil && strings.HasPrefix(string(b), "mpirun [watchdog of ")
}

// SocketInodes returns the inodes of this process's open sockets, as
// /proc/net/{tcp,tcp6,unix} name them: tests count the sockets of one kind
// that the process holds by joining the two.
func SocketInodes() (map[string]bool, error) {
	inodes := map[string]bool{}
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return nil, err
	}
	for _, e := range ents {
		if l, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil {
			if in, ok := strings.CutPrefix(l, "socket:["); ok {
				inodes[strings.TrimSuffix(in, "]")] = true
			}
		}
	}
	return inodes, nil
}

// RunWithDir runs a package's tests (TestMain) with *dir set to a folder
// made for the process and removed after them. Tests that load plugins
// into goroutine ranks install them there: a process reads its plugin path
// once, so a second run of a test (go test -count) must find the same
// folder, which a test's own TempDir is not.
func RunWithDir(m *testing.M, pattern string, dir *string) {
	d, err := os.MkdirTemp("", pattern)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testutil:", err)
		os.Exit(1)
	}
	*dir = d
	code := m.Run()
	os.RemoveAll(d)
	os.Exit(code)
}
