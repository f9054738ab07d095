package netns

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gompi/gompi/internal/testutil"
)

// A prefix and a subnet of their own, so that a cluster someone made by
// hand with the defaults is left alone.
const (
	prefix = "gompit"
	subnet = "10.251.9"
)

var bin struct{ mpirun, ring, bench, coll string }

func TestMain(m *testing.M) {
	testutil.Main(m, map[*string]string{
		&bin.mpirun: "../../cmd/mpirun", &bin.ring: "../../examples/ring", &bin.bench: "../../cmd/gompi-bench",
		&bin.coll: "../../internal/testprogs/collprog",
	})
}

func script(name string) string {
	p, _ := filepath.Abs(name)
	return p
}

func env() []string {
	return append(os.Environ(), "NETNS_PREFIX="+prefix, "NETNS_NET="+subnet)
}

// hosts makes the simulated hosts a and b for the test and removes them
// when it ends, whatever happened.
func hosts(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to make network namespaces")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs iproute2's ip")
	}
	probe := fmt.Sprintf("%s-probe%d", prefix, os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", probe).CombinedOutput(); err != nil {
		// The prefix tells .ci/run that only another kernel would run it.
		t.Skipf("kernel: network namespaces: ip netns add is refused here: %v: %s", err, out)
	}
	exec.Command("ip", "netns", "del", probe).Run()
	teardown := func() {
		cmd := exec.Command(script("teardown.sh"))
		cmd.Env = env()
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("teardown.sh: %v\n%s", err, out)
		}
	}
	teardown()
	t.Cleanup(teardown)
	cmd := exec.Command(script("setup.sh"), "a", "b")
	cmd.Env = env()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("setup.sh: %v\n%s", err, out)
	}
}

var (
	// leftBox names an LLP box: gompi-<job>-tofu-<sender>-<receiver>.
	leftBox      = regexp.MustCompile(`^gompi-[0-9a-f]+-tofu-\d+-\d+$`)
	btlLine      = regexp.MustCompile(`using btl for peer: rank=(\d) btl=(\w+) peer=(\d)`)
	tcpPeerLine  = regexp.MustCompile(`btl\.tcp: peer addresses: rank=(\d) peer=(\d) best=(\S+) class=(\w+) loopback=(\w+)`)
	tcpConnected = regexp.MustCompile(`btl\.tcp: connected: rank=(\d) peer=(\d) address=(\S+) class=(\w+)`)
)

// checkTransports asserts, from the ranks' verbose BTL lines, self for a
// rank itself, shm between ranks of one host and tcp across hosts; hostOf
// gives each rank's host. Hosts have a network namespace each: tcp counts
// on loopback for the peers of its own host only, and connects across
// hosts by another address.
func checkTransports(t *testing.T, stderr string, hostOf []int) {
	t.Helper()
	peers := tcpPeerLine.FindAllStringSubmatch(stderr, -1)
	if len(peers) != len(hostOf)*(len(hostOf)-1) {
		t.Errorf("%d verbose tcp peer lines, want %d:\n%s", len(peers), len(hostOf)*(len(hostOf)-1), stderr)
	}
	for _, m := range peers {
		r, _ := strconv.Atoi(m[1])
		p, _ := strconv.Atoi(m[2])
		if want := strconv.FormatBool(hostOf[r] == hostOf[p]); m[5] != want {
			t.Errorf("rank %d counts on loopback to reach rank %d: %s, want %s (best address %s, %s)", r, p, m[5], want, m[3], m[4])
		}
	}
	conns := tcpConnected.FindAllStringSubmatch(stderr, -1)
	if len(conns) == 0 {
		t.Errorf("no tcp connection in the verbose lines:\n%s", stderr)
	}
	for _, m := range conns {
		if m[4] == "loopback" {
			t.Errorf("rank %s connected to rank %s on another host over loopback (%s)", m[1], m[2], m[3])
		}
	}
	lines := btlLine.FindAllStringSubmatch(stderr, -1)
	if len(lines) != len(hostOf)*len(hostOf) {
		t.Fatalf("%d verbose BTL lines, want %d:\n%s", len(lines), len(hostOf)*len(hostOf), stderr)
	}
	for _, m := range lines {
		r, _ := strconv.Atoi(m[1])
		p, _ := strconv.Atoi(m[3])
		want := "tcp"
		switch {
		case r == p:
			want = "self"
		case hostOf[r] == hostOf[p]:
			want = "shm"
		}
		if m[2] != want {
			t.Errorf("rank %d reaches rank %d by %s, want %s", r, p, m[2], want)
		}
	}
}

func run(t *testing.T, limit time.Duration, name string, args ...string) (string, string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(env(), "OMPI_MCA_btl_base_verbose=40")
	p := testutil.Start(t, cmd)
	p.Wait(t, limit)
	if p.Code != 0 {
		t.Fatalf("%s %s: status %d\nstdout:\n%s\nstderr:\n%s", name, strings.Join(args, " "), p.Code, p.Stdout, p.Stderr)
	}
	if !strings.Contains(p.Stdout.String(), "token went around 4 ranks") {
		t.Errorf("the token did not go round:\n%s", p.Stdout)
	}
	return p.Stdout.String(), p.Stderr.String()
}

// gompi's mpirun, in this machine's namespace, starts two ranks on each
// host through the agent; ranks find each other, shm within a host, tcp
// across.
func TestMpirunTwoHosts(t *testing.T) {
	hosts(t)
	_, stderr := run(t, 60*time.Second, bin.mpirun, "--mca", "plm_rsh_agent", script("agent.sh"), "--host", "a:2,b:2", bin.ring)
	checkTransports(t, stderr, []int{0, 0, 1, 1})
}

// MPICH's Hydra starts the same program on the two hosts through the agent
// (PMI-1 from its proxies): the same choice of transports.
func TestHydraTwoHosts(t *testing.T) {
	if _, err := exec.LookPath("mpiexec.mpich"); err != nil {
		t.Skip("needs MPICH's mpiexec.mpich (apt-get install mpich)")
	}
	hosts(t)
	_, stderr := run(t, 60*time.Second, "mpiexec.mpich", "-launcher", "ssh", "-launcher-exec", script("agent.sh"),
		"-hosts", "a:2,b:2", "-n", "4", bin.ring)
	checkTransports(t, stderr, []int{0, 0, 1, 1})
}

// Collectives across the two hosts go through coll han: the collectives
// suite (Allreduce, Bcast, Allgather and the rest) is right on every rank,
// the world's slot table shows han over the components below it, and the
// communicators han makes for a host's ranks do not (sm there), under
// gompi's mpirun and under Hydra.
func TestHierarchicalCollectives(t *testing.T) {
	verbose := func(t *testing.T, launcher string, args ...string) string {
		cmd := exec.Command(launcher, args...)
		cmd.Env = append(env(), "OMPI_MCA_coll_base_verbose=10")
		p := testutil.Start(t, cmd)
		p.Wait(t, 120*time.Second)
		if p.Code != 0 {
			t.Fatalf("%s: status %d\nstdout:\n%s\nstderr:\n%s", launcher, p.Code, p.Stdout, p.Stderr)
		}
		checkHan(t, p.Stdout.String(), p.Stderr.String())
		return p.Stderr.String()
	}
	hosts(t)
	t.Run("mpirun", func(t *testing.T) {
		_ = verbose(t, bin.mpirun, "--mca", "plm_rsh_agent", script("agent.sh"), "--host", "a:2,b:2", bin.coll)
	})
	// The spread forms (every rank of a host on the network) at every size
	// the suite runs, not only the large ones they take by default.
	for _, mode := range []string{"", "nonblocking"} {
		t.Run(strings.TrimSpace("mpirun spread "+mode), func(t *testing.T) {
			args := []string{"--mca", "plm_rsh_agent", script("agent.sh"), "--host", "a:2,b:2",
				"--mca", "coll_han_allreduce_spread_bytes", "8", "--mca", "coll_han_bcast_spread_bytes", "1",
				"--mca", "coll_han_allgather_spread_bytes", "1", "--mca", "coll_han_scatter_spread_bytes", "1", bin.coll}
			if mode != "" {
				args = append(args, mode)
			}
			_ = verbose(t, bin.mpirun, args...)
		})
	}
	// han's nonblocking and persistent phases between processes on two
	// hosts (several in flight, beside blocking ones and point-to-point).
	for _, mode := range []string{"nonblocking", "persistent"} {
		t.Run("mpirun "+mode, func(t *testing.T) {
			stderr := verbose(t, bin.mpirun, "--mca", "plm_rsh_agent", script("agent.sh"), "--host", "a:2,b:2", bin.coll, mode)
			if n := len(worldNB.FindAllString(stderr, -1)); n != 4 {
				t.Errorf("%d ranks' world tables fill iallreduce with han, want 4:\n%s", n, stderr)
			}
		})
	}
	t.Run("hydra", func(t *testing.T) {
		if _, err := exec.LookPath("mpiexec.mpich"); err != nil {
			t.Skip("needs MPICH's mpiexec.mpich (apt-get install mpich)")
		}
		_ = verbose(t, "mpiexec.mpich", "-launcher", "ssh", "-launcher-exec", script("agent.sh"), "-hosts", "a:2,b:2", "-n", "4", bin.coll)
	})
}

// worldNB is a verbose slot table of the world whose nonblocking allreduce
// is han's.
var worldNB = regexp.MustCompile(`slot table: rank=\d+ comm="?MPI_COMM_WORLD"? size=4 table="[^"]*" nonblocking="[^"]*\biallreduce=han\b`)

var partTable = regexp.MustCompile(`slot table: rank=\d+ comm="?([^"\s]+\.part\([^)]*\))"? size=(\d+) table="([^"]*)"`)

// checkHan reads collprog's lines and the verbose slot tables.
func checkHan(t *testing.T, stdout, stderr string) {
	t.Helper()
	for r := 0; r < 4; r++ {
		line := regexp.MustCompile(fmt.Sprintf(`coll ok rank %d mode=\S+ table=(.*)`, r)).FindStringSubmatch(stdout)
		if line == nil {
			t.Errorf("rank %d did not pass the suite:\n%s\n%s", r, stdout, stderr)
			continue
		}
		for _, op := range []string{"barrier", "bcast", "reduce", "allreduce", "gather", "scatter", "allgather"} {
			if !strings.Contains(" "+line[1]+" ", " "+op+"=han>") {
				t.Errorf("rank %d's world table has no han for %s: %s", r, op, line[1])
			}
		}
	}
	parts := partTable.FindAllStringSubmatch(stderr, -1)
	hostParts := 0
	for _, m := range parts {
		if strings.Contains(m[3], "han") {
			t.Errorf("han's part %s has han in its table: %s", m[1], m[3])
		}
		if m[2] == "2" && strings.Contains(m[3], "allreduce=sm>") {
			hostParts++
		}
	}
	// Each rank logs its host's part, and the leaders the leaders' part.
	if hostParts < 4 {
		t.Errorf("%d host parts with sm in their table, want one per rank (4); parts logged: %q\n%s", hostParts, parts, stderr)
	}
}

// kill -9 of a rank on host b ends the job on both hosts within 3 s, with
// a non-zero status and a report that names the rank's pid and host b (for
// gompi's mpirun, its first line); no process is left on either host, and
// no file in their /dev/shm. Under gompi's mpirun and under Hydra.
func TestKillRankOnOtherHost(t *testing.T) {
	idle := []string{bin.bench, "idle", "--in", "barrier", "--loops", "100000000000"}
	t.Run("mpirun", func(t *testing.T) {
		args := append([]string{"--mca", "plm_rsh_agent", script("agent.sh"), "--host", "a:2,b:2", "--mca", "btl_base_verbose", "40"}, idle...)
		killOnB(t, exec.Command(bin.mpirun, args...), func(victim int, stderr string) error {
			// The first line but the ranks' verbose logs (set to see
			// the hosts connect): mpirun's cause, before any
			// consequence a rank reports.
			var first string
			for _, l := range strings.Split(stderr, "\n") {
				if !strings.HasPrefix(l, "[INFO]") && !strings.HasPrefix(l, "[DEBUG]") && !strings.HasPrefix(l, "[TRACE]") {
					first = l
					break
				}
			}
			if !regexp.MustCompile(`^mpirun: rank [23] \(pid ` + strconv.Itoa(victim) + `, host b\) exited on signal 9`).MatchString(first) {
				return fmt.Errorf("first line %q does not name the killed rank on host b", first)
			}
			return nil
		})
	})
	t.Run("hydra", func(t *testing.T) {
		if _, err := exec.LookPath("mpiexec.mpich"); err != nil {
			t.Skip("needs MPICH's mpiexec.mpich (apt-get install mpich)")
		}
		args := append([]string{"-launcher", "ssh", "-launcher-exec", script("agent.sh"), "-hosts", "a:2,b:2", "-n", "4",
			"-genv", "OMPI_MCA_btl_base_verbose", "40"}, idle...)
		killOnB(t, exec.Command("mpiexec.mpich", args...), func(victim int, out string) error {
			if !strings.Contains(out, fmt.Sprintf("PID %d RUNNING AT b", victim)) {
				return fmt.Errorf("Hydra's report does not name pid %d on host b", victim)
			}
			return nil
		})
	})
}

func killOnB(t *testing.T, cmd *exec.Cmd, named func(victim int, report string) error) {
	hosts(t)
	cmd.Env = env()
	job := testutil.Start(t, cmd)
	var victim int
	for deadline := time.Now().Add(30 * time.Second); victim == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no rank on host b after 30 s\nstderr:\n%s", job.Stderr)
		}
		out, _ := exec.Command("ip", "netns", "pids", prefix+"-b").Output()
		for _, f := range strings.Fields(string(out)) {
			pid, _ := strconv.Atoi(f)
			if exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); err == nil && exe == bin.bench {
				victim = pid
				break
			}
		}
	}
	// Into the barrier, past Init: a kill inside Init is another case
	// (the fault suite's), and under load Init outlasts any fixed sleep.
	// The ranks are past it once the first tcp connection between the
	// hosts is made (btl_base_verbose, set by killOnB's callers): tcp
	// connects at the first message, a collective's.
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(job.Stderr.String()+job.Stdout.String(), "btl.tcp: connected"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no tcp connection between the hosts within 30 s\nstderr:\n%s", job.Stderr)
		}
	}
	time.Sleep(100 * time.Millisecond)
	killed := time.Now()
	if err := exec.Command("kill", "-9", strconv.Itoa(victim)).Run(); err != nil {
		t.Fatal(err)
	}
	job.Wait(t, 10*time.Second)
	if took := time.Since(killed); took > 3*time.Second {
		t.Errorf("the job ended %v after the kill, want within 3 s", took)
	}
	if job.Code == 0 {
		t.Errorf("the launcher exited 0 after a rank was killed")
	}
	if err := named(victim, job.Stderr.String()+job.Stdout.String()); err != nil {
		t.Errorf("%v\nstdout:\n%s\nstderr:\n%s", err, job.Stdout, job.Stderr)
	}
	for _, h := range []string{"a", "b"} {
		for deadline := time.Now().Add(3 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			// An error would read as no process: it fails the check.
			out, err := exec.Command("ip", "netns", "pids", prefix+"-"+h).Output()
			if err != nil {
				t.Errorf("listing host %s's processes: %v", h, err)
				break
			}
			if len(strings.TrimSpace(string(out))) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("processes left on host %s: %s", h, out)
				break
			}
		}
		// The host's /dev/shm (agent.sh mounts it there): it must exist,
		// or an empty listing proves nothing.
		shm := filepath.Join("/run", prefix+"-netns-hosts", "shm", h)
		if _, err := os.Stat(shm); err != nil {
			t.Errorf("host %s's /dev/shm: %v", h, err)
		}
		files, err := filepath.Glob(filepath.Join(shm, "*"))
		files = slices.DeleteFunc(files, func(f string) bool {
			if !leftBox.MatchString(filepath.Base(f)) || !strings.Contains(filepath.Base(cmd.Path), "mpiexec") {
				return false
			}
			// A box the LLP's sender made for a receiver that never
			// progressed since (rank 0 computes without calling MPI): its
			// receiver unlinks it, and Hydra's signals end both first.
			// Named files cannot be made safe against that: issue
			// [shmlife] (memory with no name) is where it ends.
			t.Logf("host %s: %s left by a killed job under Hydra (known: [shmlife])", h, filepath.Base(f))
			return true
		})
		if err != nil || len(files) > 0 {
			t.Errorf("files left in host %s's /dev/shm: %v %v", h, files, err)
		}
	}
	t.Logf("ended %v after the kill of pid %d on host b (status %d)", time.Since(killed), victim, job.Code)
}
