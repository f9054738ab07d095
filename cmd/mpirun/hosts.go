package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gompi/gompi/components/common/shmem"
	"github.com/gompi/gompi/rte/pmi"
)

// host is a place ranks run: a name the launch agent understands and how
// many ranks it takes.
type host struct {
	name  string
	slots int
	local bool // this machine: ranks are started directly, not through the agent
}

var hostNameRE = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$`)

// addHost adds slots on name to hosts, merging a name given twice (as
// Open MPI does: --host a,a is two slots on a).
func addHost(hosts []host, name string, slots int) []host {
	for i := range hosts {
		if hosts[i].name == name {
			hosts[i].slots += slots
			return hosts
		}
	}
	return append(hosts, host{name: name, slots: slots})
}

// parseHostList reads --host's value: "a:2,b" (a name without slots has
// one).
func parseHostList(hosts []host, value string) ([]host, error) {
	for _, item := range strings.Split(value, ",") {
		name, slotText, hasSlots := strings.Cut(strings.TrimSpace(item), ":")
		slots := 1
		if hasSlots {
			n, err := strconv.Atoi(slotText)
			if err != nil || n < 1 || n > maxRanks {
				return nil, usagef("--host %q: %q: the slots after ':' are a whole number of at least 1 and at most %d", value, item, maxRanks)
			}
			slots = n
		}
		if !hostNameRE.MatchString(name) {
			return nil, usagef("--host %q: %q is not a host name (letters, digits, '.', '-' and '_')", value, item)
		}
		hosts = addHost(hosts, name, slots)
	}
	return hosts, nil
}

// parseHostfile reads a hostfile in Open MPI's form: one host per line,
// "name [slots=N] [max_slots=M]", '#' starting a comment. It never panics
// on what it reads; its errors name the file and line.
func parseHostfile(path string, data []byte) ([]host, error) {
	var hosts []host
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	sc.Buffer(make([]byte, 4096), 1<<20)
	line := 0
	for sc.Scan() {
		line++
		text, _, _ := strings.Cut(sc.Text(), "#")
		fields := strings.Fields(text)
		if len(fields) == 0 {
			continue
		}
		bad := func(format string, a ...any) error {
			return usagef("hostfile %s, line %d: %s", path, line, fmt.Sprintf(format, a...))
		}
		name := fields[0]
		if !hostNameRE.MatchString(name) {
			return nil, bad("%q is not a host name", name)
		}
		slots := 1
		for _, f := range fields[1:] {
			k, v, ok := strings.Cut(f, "=")
			n, err := strconv.Atoi(v)
			switch {
			case !ok || (k != "slots" && k != "max_slots" && k != "max-slots"):
				return nil, bad("%q: accepted: slots=N, max_slots=N", f)
			case err != nil || n < 1 || n > maxRanks:
				return nil, bad("%q: N is a whole number of at least 1 and at most %d", f, maxRanks)
			case k == "slots":
				slots = n
			}
		}
		hosts = addHost(hosts, name, slots)
	}
	if err := sc.Err(); err != nil {
		return nil, usagef("hostfile %s: %v", path, err)
	}
	if len(hosts) == 0 {
		return nil, usagef("hostfile %s names no host", path)
	}
	return hosts, nil
}

// maxHostfile bounds what readHostfile reads: a line per host takes tens
// of bytes, and --hostfile /dev/zero must not take all memory.
const maxHostfile = 16 << 20

// readHostfile reads a hostfile of at most maxHostfile bytes.
func readHostfile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxHostfile+1))
	if err == nil && len(data) > maxHostfile {
		err = fmt.Errorf("%s is larger than %d MiB", path, maxHostfile>>20)
	}
	return data, err
}

// mapBySlot places np ranks on the hosts in order, filling each host's
// slots before the next (Open MPI's --map-by slot). It returns each rank's
// host index.
func mapBySlot(hosts []host, np int) ([]int, error) {
	total := 0
	for _, h := range hosts {
		total += h.slots
	}
	if np > total {
		var list []string
		for _, h := range hosts {
			list = append(list, fmt.Sprintf("%s:%d", h.name, h.slots))
		}
		return nil, usagef("-np %d: the hosts have %d slots (%s); give fewer ranks or more slots", np, total, strings.Join(list, ","))
	}
	hostOf := make([]int, 0, np)
	for i, h := range hosts {
		for s := 0; s < h.slots && len(hostOf) < np; s++ {
			hostOf = append(hostOf, i)
		}
	}
	return hostOf, nil
}

// shellQuote quotes s for a POSIX shell: the launch agent, like ssh, joins
// its arguments and hands them to a shell on the remote host.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:,+@%", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// remoteCommand is the shell command line that starts rank on another
// host: in mpirun's working directory when the host has it (as Open MPI),
// reading the job's secret from its first line of input (so that it never
// shows in ps), with the rank's environment.
func (j *job) remoteCommand(rank int) string {
	cwd, _ := os.Getwd()
	var b strings.Builder
	fmt.Fprintf(&b, "cd %s 2>/dev/null || cd; IFS= read -r %s && export %s && exec env", shellQuote(cwd), pmi.AuthEnv, pmi.AuthEnv)
	for _, kv := range j.rankEnv(rank) {
		b.WriteString(" " + shellQuote(kv))
	}
	b.WriteString(" " + shellQuote(j.program))
	for _, a := range j.o.args {
		b.WriteString(" " + shellQuote(a))
	}
	return b.String()
}

// startRemote starts a rank on another host through the launch agent. The
// agent's process stands for the rank here: its exit is the rank's (ssh
// and agents like it return the remote command's status), and ending its
// group ends the rank, whose PMI connection then closes too.
func (j *job) startRemote(rank int, hostName string, outputs *sync.WaitGroup) (io.WriteCloser, error) {
	args := append(append([]string(nil), j.agent[1:]...), hostName, j.remoteCommand(rank))
	cmd := exec.Command(j.agent[0], args...)
	outR, outW, errR, errW, err := outputPipes()
	if err != nil {
		return nil, err
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		for _, f := range []*os.File{outR, outW, errR, errW} {
			f.Close()
		}
		return nil, err
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	rs := &rankState{rank: rank, cmd: cmd, served: make(chan struct{}), host: hostName}
	j.mu.Lock()
	j.ranks = append(j.ranks, rs)
	j.mu.Unlock()
	err = cmd.Start()
	inR.Close()
	outW.Close()
	errW.Close()
	if err != nil {
		j.mu.Lock()
		rs.exited = true
		j.mu.Unlock()
		inW.Close()
		return nil, fmt.Errorf("launch agent %q for host %s: %w", j.o.agent, hostName, err)
	}
	j.mu.Lock()
	rs.pid = cmd.Process.Pid
	j.mu.Unlock()
	j.registerGroup(rs.pid)
	io.WriteString(inW, j.auth+"\n")
	j.watch(rank, cmd, outR, errR, outputs)
	if rank == 0 {
		return inW, nil
	}
	inW.Close()
	return nil, nil
}

// cleanRemote removes what ranks that died left of the job in the other
// hosts' /dev/shm, as shmem.RemoveJobFiles does here.
func (j *job) cleanRemote() {
	var wg sync.WaitGroup
	for _, h := range j.hosts {
		if h.local {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			args := append(append([]string(nil), j.agent[1:]...), h.name, "rm -f "+shmem.Path(j.jobID, "*"))
			cmd := exec.Command(j.agent[0], args...)
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			if err := cmd.Start(); err != nil {
				return
			}
			done := make(chan struct{})
			go func() { cmd.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				<-done
			}
		}()
	}
	wg.Wait()
}
