package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gompi/gompi/internal/testutil"
	"github.com/gompi/gompi/mpierr"
)

func TestParseHosts(t *testing.T) {
	hs, err := parseHostList(nil, "a:2,b,a")
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(hs); got != "[{a 3 false} {b 1 false}]" {
		t.Errorf("--host a:2,b,a gave %s", got)
	}
	for _, bad := range []string{"a:0", "a:x", "", "a b", "a:2,"} {
		if _, err := parseHostList(nil, bad); err == nil {
			t.Errorf("--host %q accepted", bad)
		}
	}
	hs, err = parseHostfile("hf", []byte("# cluster\nnode1 slots=2 max_slots=4\n\nnode2   # one slot\nnode1\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(hs); got != "[{node1 3 false} {node2 1 false}]" {
		t.Errorf("hostfile gave %s", got)
	}
	for _, c := range []struct{ text, want string }{
		{"n1 slots=0\n", "hostfile hf, line 1"},
		{"n1\nn2 cpus=2\n", `line 2: "cpus=2": accepted: slots=N`},
		{"# nothing\n", "names no host"},
		{"bad/name\n", "not a host name"},
	} {
		if _, err := parseHostfile("hf", []byte(c.text)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("hostfile %q: %v, want an error saying %q", c.text, err, c.want)
		}
	}
	hostOf, err := mapBySlot([]host{{name: "a", slots: 2}, {name: "b", slots: 2}}, 3)
	if err != nil || fmt.Sprint(hostOf) != "[0 0 1]" {
		t.Errorf("by slot: %v %v", hostOf, err)
	}
	if _, err := mapBySlot([]host{{name: "a", slots: 2}}, 3); err == nil || !strings.Contains(err.Error(), "2 slots (a:2)") {
		t.Errorf("too many ranks: %v", err)
	}
}

// FuzzParseHostfile: a hostfile is refused with a usage error of class
// ErrArg that names the file, or gives at least one host, each once, with
// a host name and slots, and the hosts written back as a hostfile parse to
// the same hosts.
func FuzzParseHostfile(f *testing.F) {
	f.Add([]byte("node1 slots=2\nnode2 max_slots=3 # x\n"))
	f.Add([]byte("a\n\n#\nb slots=99999999999999999999\n"))
	f.Add([]byte("# cluster\nnode1 slots=2 max_slots=4\n\nnode2   # one slot\nnode1\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		hs, err := parseHostfile("fuzz", b)
		if err != nil {
			var u *usageError
			if !errors.As(err, &u) || !errors.Is(err, mpierr.ErrArg) || !strings.HasPrefix(err.Error(), "hostfile fuzz") {
				t.Fatalf("%q: %v is not a usage error of class ErrArg naming the file", b, err)
			}
			return
		}
		if len(hs) == 0 {
			t.Fatal("no error and no host")
		}
		var text strings.Builder
		names := map[string]bool{}
		for _, h := range hs {
			if !hostNameRE.MatchString(h.name) || h.slots < 1 || names[h.name] {
				t.Fatalf("%q: host %+v", b, h)
			}
			names[h.name] = true
			for n := h.slots; n > 0; n -= maxRanks {
				fmt.Fprintf(&text, "%s slots=%d\n", h.name, min(n, maxRanks))
			}
		}
		again, err := parseHostfile("again", []byte(text.String()))
		if err != nil || !slices.Equal(again, hs) {
			t.Fatalf("%q gave %+v, written back as %q: %+v, %v", b, hs, text.String(), again, err)
		}
	})
}

func TestShellQuote(t *testing.T) {
	for in, want := range map[string]string{"plain-1.0/x": "plain-1.0/x", "a b": "'a b'", "it's": `'it'\''s'`, "": "''", "$HOME": "'$HOME'"} {
		if got := shellQuote(in); got != want {
			t.Errorf("shellQuote(%q) = %s, want %s", in, got, want)
		}
	}
}

// Ranks on "another host" (started through a launch agent that runs them
// here, with another host name): each host's ranks are one node (shm among
// them, tcp to the others'), the remote ranks get the gompi and OMPI_MCA_
// variables and -x ones but not mpirun's whole environment, and their local
// ranks count per host.
func TestRemoteRanks(t *testing.T) {
	me, _ := os.Hostname()
	agent, _ := filepath.Abs("testdata/localagent.sh")
	j := startJob(t, nil, []string{"TEST_INHERITED=yes", "OMPI_MCA_btl_base_verbose=40"}, "--timeout", "60", "--tag-output",
		"--mca", "plm_rsh_agent", agent, "--host", "elsewhere:2,"+me+":2", "-x", "TEST_X=exported",
		bin.rankprog, "env", "TEST_INHERITED", "TEST_X", "OMPI_COMM_WORLD_LOCAL_RANK", "PMI_HOSTNAME")
	j.Wait(t, 60*time.Second)
	if j.Code != 0 {
		t.Fatalf("status %d\nstdout:\n%s\nstderr:\n%s", j.Code, j.Stdout, j.Stderr)
	}
	out := j.Stdout.String()
	for _, want := range []string{
		"[0] TEST_INHERITED=(unset)", "[2] TEST_INHERITED=yes", "[1] TEST_X=exported",
		"[1] OMPI_COMM_WORLD_LOCAL_RANK=1", "[2] OMPI_COMM_WORLD_LOCAL_RANK=0", "[3] OMPI_COMM_WORLD_LOCAL_RANK=1",
		"[0] PMI_HOSTNAME=elsewhere", "[3] PMI_HOSTNAME=" + me,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in the ranks' output:\n%s", want, out)
		}
	}
	hostOf := []int{0, 0, 1, 1}
	lines := regexp.MustCompile(`using btl for peer: rank=(\d) btl=(\w+) peer=(\d)`).FindAllStringSubmatch(j.Stderr.String(), -1)
	if len(lines) != 16 {
		t.Fatalf("%d verbose BTL lines, want 16:\n%s", len(lines), j.Stderr)
	}
	for _, m := range lines {
		r, p := int(m[1][0]-'0'), int(m[3][0]-'0')
		want := map[bool]string{true: "shm", false: "tcp"}[hostOf[r] == hostOf[p]]
		if r == p {
			want = "self"
		}
		if m[2] != want {
			t.Errorf("rank %d reaches rank %d by %s, want %s", r, p, m[2], want)
		}
	}
}

// A stranger on the PMI port, which remote ranks reach over TCP, is
// refused without the job's secret (it cannot take a rank's place, nor hold
// the port), and the job goes on to its end.
func TestPMIPortStranger(t *testing.T) {
	me, _ := os.Hostname()
	agent, _ := filepath.Abs("testdata/localagent.sh")
	j := startJob(t, nil, nil, "--timeout", "60", "--mca", "plm_rsh_agent", agent, "--host", "elsewhere:1,"+me+":1",
		bin.bench, "idle", "--in", "barrier", "--loops", "1500000000")
	var port string
	for deadline := time.Now().Add(20 * time.Second); port == ""; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no rank with PMI_PORT after 20 s\nstderr:\n%s", j.Stderr)
		}
		for _, g := range testutil.RankGroups(t, j.Cmd.Process.Pid) {
			env, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", g))
			for _, kv := range strings.Split(string(env), "\x00") {
				if v, ok := strings.CutPrefix(kv, "PMI_PORT="); ok {
					port = v
				}
			}
		}
	}
	for _, hello := range []string{"cmd=initack pmiid=0\n", "cmd=initack pmiid=1 auth=0000\n", ""} {
		conn, err := net.Dial("tcp", port)
		if err != nil {
			t.Fatalf("connecting to the PMI port %s: %v", port, err)
		}
		conn.Write([]byte(hello))
		conn.SetReadDeadline(time.Now().Add(15 * time.Second))
		n, err := conn.Read(make([]byte, 64))
		if n > 0 || err == nil || os.IsTimeout(err) {
			t.Errorf("stranger %q: read %d bytes, %v; want the connection closed", hello, n, err)
		}
		conn.Close()
	}
	j.Wait(t, 60*time.Second)
	if j.Code != 0 || !strings.Contains(j.Stdout.String(), "# gompi-bench idle") {
		t.Errorf("the job did not go on: status %d\nstdout:\n%s\nstderr:\n%s", j.Code, j.Stdout, j.Stderr)
	}
}
