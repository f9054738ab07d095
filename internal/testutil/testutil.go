// Package testutil holds what the tests that run real processes share:
// building the programs, running mpirun and other processes with a time
// limit, looking at /proc, and listing a job's files in /dev/shm. It only
// gathers and waits; what to assert stays in each test.
package testutil

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gompi/gompi/components/common/shmem"
)

// Build builds each package of bins (a path relative to the test's
// directory) into a new temporary directory named after prefix, and stores
// the program's path where its key points. The program is named after the
// package's directory. On error the directory is gone.
func Build(prefix string, bins map[*string]string) (dir string, err error) {
	if dir, err = os.MkdirTemp("", prefix); err != nil {
		return "", err
	}
	for out, pkg := range bins {
		abs, err := filepath.Abs(pkg)
		if err != nil {
			os.RemoveAll(dir)
			return "", err
		}
		*out = filepath.Join(dir, filepath.Base(abs))
		if msg, err := exec.Command("go", "build", "-o", *out, pkg).CombinedOutput(); err != nil {
			os.RemoveAll(dir)
			return "", fmt.Errorf("go build %s: %v\n%s", pkg, err, msg)
		}
	}
	return dir, nil
}

// Main is the TestMain of a package whose tests all run built programs:
// it builds bins (as Build), runs the tests, removes the programs and
// exits.
func Main(m *testing.M, prefix string, bins map[*string]string) {
	dir, err := Build(prefix, bins)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
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
