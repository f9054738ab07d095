package shm_test

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
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
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/gompi/gompi/components/common/shmem"
	"github.com/gompi/gompi/internal/testutil"
	"github.com/gompi/gompi/rte"
	"github.com/gompi/gompi/rte/pmi"
)

// The process tests run the real mpirun, btlprog and shmprog, built once on
// first use.
var bins struct {
	once                     sync.Once
	err                      error
	mpirun, btlprog, shmprog string
	collprog                 string
}

func build(t testing.TB) {
	t.Helper()
	bins.once.Do(func() {
		bins.err = testutil.Build(map[*string]string{&bins.mpirun: "../../../cmd/mpirun",
			&bins.btlprog: "../../../internal/testprogs/btlprog", &bins.shmprog: "../../../internal/testprogs/shmprog",
			&bins.collprog: "../../../internal/testprogs/collprog"})
	})
	if bins.err != nil {
		t.Fatal(bins.err)
	}
}

func mpirun(t testing.TB, args ...string) *testutil.Proc {
	t.Helper()
	build(t)
	cmd := exec.Command(bins.mpirun, args...)
	cmd.Env = testutil.CleanEnv()
	return testutil.Start(t, cmd)
}

// TestProcessSweep: every size up to 16 MiB (64 KiB under -short) between
// two processes under mpirun, over shm, by single copy and by fragments.
func TestProcessSweep(t *testing.T) {
	build(t)
	max := "16777216"
	if testing.Short() {
		max = "65536"
	}
	for _, mech := range []string{"cma", "none"} {
		t.Run(mech, func(t *testing.T) {
			p := mpirun(t, "-np", "2", "--mca", "btl", "self,shm", "--mca", "btl_shm_single_copy_mechanism", mech,
				bins.btlprog, "sweep", max)
			p.Wait(t, time.Minute)
			if p.Err != nil {
				t.Fatalf("%v\nstdout:\n%s\nstderr:\n%s", p.Err, p.Stdout, p.Stderr)
			}
			m := regexp.MustCompile(`btl ok rank (\d) via shm: \{Whole:\d+ Fragmented:(\d+) RDMA:(\d+) RDMARefused:(\d+)\}`).
				FindAllStringSubmatch(p.Stdout.String(), -1)
			if len(m) != 2 {
				t.Fatalf("not two ranks ok via shm:\n%s\n%s", p.Stdout, p.Stderr)
			}
			for _, l := range m {
				frag, rdma, refused := l[2], l[3], l[4]
				if mech == "cma" && (rdma == "0" || frag != "0" || refused != "0") || mech == "none" && (rdma != "0" || frag == "0") {
					t.Errorf("with %s: %s", mech, l[0])
				}
			}
		})
	}
}

// watcher records every file of a job created in /dev/shm, with its mode
// when it still existed at the notification.
type watcher struct {
	fd   int
	stop chan struct{}
	done chan struct{}

	mu    sync.Mutex
	files map[string]os.FileMode // 0: gone before it could be seen
}

func watch(t testing.TB) *watcher {
	t.Helper()
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		t.Skipf("inotify: %v", err)
	}
	// IN_ATTRIB too: a named segment is made with mode 0 and given 0600
	// once its maker holds its lock (shmem.Sweep's sign of a live maker).
	if _, err := unix.InotifyAddWatch(fd, shmem.Dir, unix.IN_CREATE|unix.IN_ATTRIB); err != nil {
		unix.Close(fd)
		t.Skipf("inotify on %s: %v", shmem.Dir, err)
	}
	w := &watcher{fd: fd, stop: make(chan struct{}), done: make(chan struct{}), files: map[string]os.FileMode{}}
	go w.run()
	t.Cleanup(w.close)
	return w
}

func (w *watcher) run() {
	defer close(w.done)
	buf := make([]byte, 64<<10)
	fds := []unix.PollFd{{Fd: int32(w.fd), Events: unix.POLLIN}}
	for {
		select {
		case <-w.stop:
			return
		default:
		}
		if n, _ := unix.Poll(fds, 10); n <= 0 {
			continue
		}
		n, err := unix.Read(w.fd, buf)
		if err != nil {
			continue
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			nameStart := off + unix.SizeofInotifyEvent
			end := nameStart + int(ev.Len)
			if end > n {
				break
			}
			name := string(bytes.TrimRight(buf[nameStart:end], "\x00"))
			off = end
			if !strings.HasPrefix(name, "gompi-") {
				continue
			}
			var mode os.FileMode
			if st, err := os.Lstat(filepath.Join(shmem.Dir, name)); err == nil {
				mode = st.Mode()
			}
			w.mu.Lock()
			if mode&0o777 != 0 || w.files[name] == 0 {
				w.files[name] = mode
			}
			w.mu.Unlock()
		}
	}
}

func (w *watcher) close() {
	select {
	case <-w.stop:
		return
	default:
	}
	close(w.stop)
	<-w.done
	unix.Close(w.fd)
}

// check fails the test for any file of the job whose mode is not 0600 and
// returns how many files were seen and how many of them with their mode.
func (w *watcher) check(t testing.TB, job string) (seen, stated int) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	for name, mode := range w.files {
		if !strings.HasPrefix(name, "gompi-"+job+"-") {
			continue
		}
		seen++
		if mode == 0 {
			continue
		}
		stated++
		if mode != 0o600 {
			t.Errorf("%s was created with mode %v, want -rw-------", name, mode)
		}
	}
	return seen, stated
}

// rankPids returns the pids of mpirun's children that run prog, by rank.
func rankPids(t testing.TB, mpirunPid int, prog string) map[int]int {
	t.Helper()
	out := map[int]int{}
	for _, p := range testutil.Processes(t) {
		if p.Ppid != mpirunPid {
			continue
		}
		dir := fmt.Sprintf("/proc/%d/", p.Pid)
		if cmdline, _ := os.ReadFile(dir + "cmdline"); !strings.HasPrefix(string(cmdline), prog+"\x00") {
			continue
		}
		env, _ := os.ReadFile(dir + "environ")
		for _, kv := range strings.Split(string(env), "\x00") {
			if v, ok := strings.CutPrefix(kv, "PMI_RANK="); ok {
				r, _ := strconv.Atoi(v)
				out[r] = p.Pid
			}
		}
	}
	return out
}

// jobOfPid finds the job whose control segment a process made.
func jobOfPid(t testing.TB, pid int) string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(shmem.Dir, "gompi-*-ctl-*"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil || len(b) < 20 {
			continue
		}
		if int(uint32(b[16])|uint32(b[17])<<8|uint32(b[18])<<16|uint32(b[19])<<24) == pid {
			name := strings.TrimPrefix(filepath.Base(f), "gompi-")
			return name[:strings.Index(name, "-")]
		}
	}
	// A memfd control segment: the process's descriptor names it.
	dir := fmt.Sprintf("/proc/%d/fd/", pid)
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		l, err := os.Readlink(dir + e.Name())
		if name, ok := strings.CutPrefix(l, "/memfd:gompi-"); err == nil && ok && strings.Contains(name, "-ctl-") {
			return name[:strings.Index(name, "-")]
		}
	}
	return ""
}

// waitNoFiles waits (up to a few seconds: processes are still exiting) for
// the job's files to be gone.
func waitNoFiles(t testing.TB, job string, what string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		files := jobFiles(t, job)
		if len(files) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("%s: files of job %s left: %v", what, job, files)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitGone waits for processes to disappear (or become zombies).
func waitGone(t testing.TB, pids map[int]int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for _, pid := range pids {
		for {
			stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
			if err != nil || strings.Contains(string(stat), ") Z ") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("pid %d still runs", pid)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// ctlFiles lists the job's shm control segments (other components, such as
// the tofu LLP, make files of their own).
func ctlFiles(t testing.TB, job string) []string {
	t.Helper()
	return testutil.ShmFiles(t, job, "ctl-*")
}

// TestKillLeavesNoFiles kills a rank with SIGKILL during set-up, mid-transfer
// and at finalize (and mpirun itself mid-transfer, so that nothing cleans up
// but the ranks' own unlinking), under umask 0, recording every file the job
// makes in /dev/shm. With named files (shmem_backing=file), every file must
// have mode 0600; once Init is done and data flows, no file of the job may
// exist (a crash from then on leaves nothing behind); and none may be left
// after the job. With memfd segments (the default), the job makes no file
// at all.
func TestKillLeavesNoFiles(t *testing.T) {
	if testing.Short() {
		t.Skip("runs several jobs")
	}
	build(t)
	cases := []struct {
		name, mode string
		np         int
		kill       string // "rank", "mpirun"
	}{
		{"set-up", "setup", 3, "rank"},
		{"mid-transfer", "transfer", 2, "rank"},
		{"mid-transfer, mpirun killed", "transfer", 2, "mpirun"},
		{"at finalize", "finalize", 2, "rank"},
	}
	for _, backing := range []string{"file", "memfd"} {
		for _, c := range cases {
			t.Run(backing+"/"+c.name, func(t *testing.T) {
				w := watch(t)
				old := syscall.Umask(0)
				p := mpirun(t, "-np", strconv.Itoa(c.np), "--mca", "btl", "self,shm", "--mca", shmem.BackingParam, backing, bins.shmprog, c.mode)
				syscall.Umask(old)
				var job string
				var pids map[int]int
				victim := 1
				if c.mode == "setup" {
					// Ranks 0 and 1 wait in Init's fence for rank 2, with their
					// control segments made.
					victim = 0
					deadline := time.Now().Add(20 * time.Second)
					for {
						pids = rankPids(t, p.Cmd.Process.Pid, bins.shmprog)
						if job == "" && pids[0] != 0 {
							job = jobOfPid(t, pids[0])
						}
						if job != "" && ctlSegments(t, job, backing, pids) == 2 {
							break
						}
						if time.Now().After(deadline) {
							t.Fatalf("no control segments: pids %v, job %q\n%s", pids, job, p.Stderr)
						}
						time.Sleep(5 * time.Millisecond)
					}
				} else {
					m := p.WaitOutput(t, `(?m)^ready (\d) job (\w+)$`, map[string]int{"transfer": 2, "finalize": 1}[c.mode], 20*time.Second)
					job = m[0][2]
					pids = rankPids(t, p.Cmd.Process.Pid, bins.shmprog)
					// Every peer has mapped everything: nothing is on disk.
					if files := jobFiles(t, job); len(files) != 0 {
						t.Errorf("files of the running job: %v", files)
					}
				}
				if len(pids) != c.np {
					t.Fatalf("rank pids %v", pids)
				}
				if c.kill == "mpirun" {
					p.Cmd.Process.Kill()
				} else {
					syscall.Kill(pids[victim], syscall.SIGKILL)
				}
				p.Wait(t, 15*time.Second)
				waitGone(t, pids)
				// mpirun names the killed rank as the cause, even when a
				// survivor that noticed first failed before it was reaped.
				if c.kill == "rank" && !regexp.MustCompile(fmt.Sprintf(`mpirun: rank %d \(pid %d, host [^)]+\) exited on signal 9`, victim, pids[victim])).MatchString(p.Stderr.String()) {
					t.Errorf("mpirun did not report the kill:\n%s", p.Stderr)
				}
				if p.Err == nil {
					t.Errorf("mpirun exited 0 after a rank was killed")
				}
				waitNoFiles(t, job, "after the job")
				time.Sleep(20 * time.Millisecond) // let the watcher catch up
				seen, stated := w.check(t, job)
				t.Logf("job %s made %d files, %d seen with their mode", job, seen, stated)
				switch {
				case backing == "memfd" && seen != 0:
					t.Errorf("job %s made %d files with memfd segments", job, seen)
				case backing == "file" && stated == 0:
					t.Errorf("no file of job %s was seen: the mode check checked nothing", job)
				}
			})
		}
	}
}

// ctlSegments counts the job's shm control segments that exist: its files
// (other components, such as the tofu LLP, make files of their own), or
// with memfd segments the ranks' descriptors to them.
func ctlSegments(t testing.TB, job, backing string, pids map[int]int) int {
	t.Helper()
	if backing == "file" {
		return len(ctlFiles(t, job))
	}
	n := 0
	for _, pid := range pids {
		n += len(testutil.ShmDescriptors(pid, job, "ctl-"))
	}
	return n
}

// TestSmallDevShm runs a job of 16 ranks, every pair talking (the
// collectives suite: its alltoalls make every box), in a mount namespace
// whose /dev/shm is a tmpfs of a container's usual 64 MiB, or smaller.
// With memfd segments the job runs whatever /dev/shm's size; with named
// files it runs where they fit and otherwise fails at Init with an error
// that names the room, the need and the parameters that change them; never
// a SIGBUS. It needs root (a mount namespace and a tmpfs mount) and
// unshare(1) from util-linux, and skips without them.
func TestSmallDevShm(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: jobs of 16 ranks")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root: it mounts a small tmpfs on /dev/shm in a mount namespace of its own")
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skip("no unshare(1) (util-linux) to make the mount namespace")
	}
	build(t)
	for _, c := range []struct {
		backing, size string
		fails         bool
	}{
		{"memfd", "64m", false},
		{"file", "64m", false}, // the boxes fit; coll sm's second segment does not, and says so
		{"file", "16m", true},
	} {
		t.Run(c.backing+"/"+c.size, func(t *testing.T) {
			cmd := exec.Command(unshare, "--mount", "--propagation", "private", "--", "sh", "-c",
				`mount -t tmpfs -o size=$0 tmpfs /dev/shm && exec "$@"`, c.size,
				bins.mpirun, "-np", "16", "--mca", "btl", "self,shm", "--mca", shmem.BackingParam, c.backing, bins.collprog)
			cmd.Env = testutil.CleanEnv()
			p := testutil.Start(t, cmd)
			p.Wait(t, 3*time.Minute)
			out := p.Stdout.String() + p.Stderr.String()
			if strings.Contains(out, "SIGBUS") || strings.Contains(out, "signal 7") || strings.Contains(out, "bus error") {
				t.Fatalf("a SIGBUS:\n%s", out)
			}
			if !c.fails {
				if p.Err != nil || strings.Count(p.Stdout.String(), "coll ok rank") != 16 {
					t.Fatalf("%v\n%s", p.Err, out)
				}
				return
			}
			if p.Err == nil {
				t.Fatalf("the job ran in a /dev/shm of %s with named files:\n%s", c.size, out)
			}
			for _, want := range []string{"mpi: Init", "/dev/shm has ", "btl_shm_ring_size", shmem.BackingParam + "=memfd"} {
				if !strings.Contains(p.Stderr.String(), want) {
					t.Errorf("the error does not say %q:\n%s", want, p.Stderr)
				}
			}
		})
	}
}

// TestFallsBackWithoutProc runs ranks that cannot open /proc/<pid>/fd (each
// in a mount namespace whose /proc is an empty tmpfs): shmem_backing=auto
// says so at verbosity 10 and uses named files in /dev/shm, and the job
// runs and leaves none. Needs root and unshare(1), as TestSmallDevShm.
func TestFallsBackWithoutProc(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a job under mount namespaces")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root: it mounts an empty /proc in a mount namespace per rank")
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skip("no unshare(1) (util-linux) to make the mount namespaces")
	}
	build(t)
	w := watch(t)
	p := mpirun(t, "-np", "2", "--mca", "btl", "self,shm", "--mca", "btl_base_verbose", "10",
		unshare, "--mount", "--propagation", "private", "--", "sh", "-c", `mount -t tmpfs none /proc && exec "$@"`, "sh", bins.collprog)
	p.Wait(t, time.Minute)
	if p.Err != nil || strings.Count(p.Stdout.String(), "coll ok rank") != 2 {
		t.Fatalf("%v\n%s\n%s", p.Err, p.Stdout, p.Stderr)
	}
	if n := strings.Count(p.Stderr.String(), "memfd segments unusable here: shared memory in named files"); n != 2 {
		t.Errorf("%d ranks said they fall back to named files, want 2:\n%s", n, p.Stderr)
	}
	m := regexp.MustCompile(`control_segment=/dev/shm/gompi-(\w+)-ctl-`).FindStringSubmatch(p.Stderr.String())
	if m == nil {
		t.Fatalf("no control segment file in the log:\n%s", p.Stderr)
	}
	waitNoFiles(t, m[1], "after the job")
	if seen, _ := w.check(t, m[1]); seen == 0 {
		t.Errorf("job %s made no file: it did not fall back", m[1])
	}
}

// TestFloodMemory: a sender that offers 1 GiB to a receiver that sleeps
// 2 s first raises neither process's resident memory by more than 64 MiB:
// the rings are the flow control.
func TestFloodMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("moves 1 GiB")
	}
	build(t)
	w := watch(t)
	old := syscall.Umask(0)
	// Named files, whose modes the watcher checks.
	p := mpirun(t, "-np", "2", "--mca", "btl", "self,shm", "--mca", shmem.BackingParam, "file", bins.shmprog, "flood", strconv.Itoa(1<<30))
	syscall.Umask(old)
	p.Wait(t, time.Minute)
	// The receiver slept: the sender's box waited to be mapped long enough
	// for the watcher to see its mode.
	if m := regexp.MustCompile(`flood job (\w+)`).FindStringSubmatch(p.Stdout.String()); m != nil {
		seen, stated := w.check(t, m[1])
		t.Logf("job %s made %d files, %d seen with their mode", m[1], seen, stated)
		if stated < 3 {
			t.Errorf("only %d files of job %s seen with their mode: want both control segments and the box", stated, m[1])
		}
	} else {
		t.Errorf("no job id in the output")
	}
	if p.Err != nil {
		t.Fatalf("%v\nstdout:\n%s\nstderr:\n%s", p.Err, p.Stdout, p.Stderr)
	}
	m := regexp.MustCompile(`memory rank (\d): rss_before (\d+) rss_after (\d+) hwm (\d+)`).FindAllStringSubmatch(p.Stdout.String(), -1)
	if len(m) != 2 || !strings.Contains(p.Stdout.String(), "flood receiver: 1073741824 bytes") {
		t.Fatalf("output:\n%s\n%s", p.Stdout, p.Stderr)
	}
	for _, l := range m {
		before, _ := strconv.ParseInt(l[2], 10, 64)
		after, _ := strconv.ParseInt(l[3], 10, 64)
		hwm, _ := strconv.ParseInt(l[4], 10, 64)
		if after-before > 64<<20 || hwm-before > 64<<20 {
			t.Errorf("rank %s: resident memory %d before, %d after, peak %d: grew by more than 64 MiB", l[1], before, after, hwm)
		}
	}
	t.Logf("%s", p.Stdout)
}

// miniJob runs shmprog ranks under an in-test PMI server rather than
// mpirun, so that a rank's death does not end the others: the test can see
// what the BTL does about it.
type miniJob struct {
	id    string
	srv   *pmi.Server
	ranks []*testutil.Proc
}

func startMini(t *testing.T, np int, args ...string) *miniJob {
	t.Helper()
	build(t)
	var idb [4]byte
	rand.Read(idb[:])
	var cookie [rte.CookieLen]byte
	rand.Read(cookie[:])
	j := &miniJob{id: hex.EncodeToString(idb[:])}
	j.srv = pmi.NewServer(pmi.ServerConfig{
		KVSName: rte.KVSPrefix + j.id, Size: np,
		Preput: map[string]string{rte.CookieKey: hex.EncodeToString(cookie[:]), rte.ProcessMappingKey: rte.FormatMapping(make([]int, np))},
	})
	t.Cleanup(func() {
		j.srv.Shutdown()
		shmem.RemoveJobFiles(j.id)
	})
	for r := 0; r < np; r++ {
		fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		ours, theirs := os.NewFile(uintptr(fds[0]), "pmi"), os.NewFile(uintptr(fds[1]), "pmi")
		conn, err := net.FileConn(ours)
		ours.Close()
		if err != nil {
			t.Fatal(err)
		}
		go j.srv.Serve(r, conn)
		cmd := exec.Command(bins.shmprog, args...)
		cmd.Env = append(testutil.CleanEnv(), "PMI_FD=3", fmt.Sprintf("PMI_RANK=%d", r), fmt.Sprintf("PMI_SIZE=%d", np),
			"OMPI_MCA_btl=self,shm")
		cmd.ExtraFiles = []*os.File{theirs}
		j.ranks = append(j.ranks, testutil.Start(t, cmd))
		theirs.Close()
	}
	return j
}

// TestPeerDeath: between processes, a rank whose peer is killed with
// SIGKILL while it waits on it gets errors, not a hang: a Send refused on a
// full box returns ErrPeerLost, and a rank waiting in Progress for data is
// told through the error callback. Files the dead peer never mapped are
// removed by the survivor's Finalize.
func TestPeerDeath(t *testing.T) {
	for _, c := range []struct{ mode, waiting, want string }{
		{"blocked-send", "blocked 0", `(?s)send error: peer_lost=true: btl shm: rank 1 \(pid \d+\) died.*lost callback: rank 1: btl shm: rank 1 \(pid \d+\) died`},
		{"wait-recv", "waiting 0", `lost callback: rank 1: btl shm: rank 1 \(pid \d+\) died`},
	} {
		t.Run(c.mode, func(t *testing.T) {
			j := startMini(t, 2, c.mode)
			j.ranks[1].WaitOutput(t, `(?m)^ready 1$`, 1, 20*time.Second)
			j.ranks[0].WaitOutput(t, "(?m)^"+c.waiting+"$", 1, 20*time.Second)
			killed := time.Now()
			j.ranks[1].Cmd.Process.Kill()
			j.ranks[0].Wait(t, 10*time.Second)
			if j.ranks[0].Err != nil || !regexp.MustCompile(c.want).MatchString(j.ranks[0].Stdout.String()) {
				t.Fatalf("rank 0: %v\nstdout:\n%s\nstderr:\n%s", j.ranks[0].Err, j.ranks[0].Stdout, j.ranks[0].Stderr)
			}
			t.Logf("rank 0 noticed in %v:\n%s", time.Since(killed).Round(time.Millisecond), j.ranks[0].Stdout)
			if files := jobFiles(t, j.id); len(files) != 0 {
				t.Errorf("files left by the survivor: %v", files)
			}
		})
	}
}
