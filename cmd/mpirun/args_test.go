package main

import (
	"errors"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/gompi/gompi/mpierr"
)

// argsOf writes o back as a command line, in mpirun's own spelling.
func argsOf(o *options, env map[string]string) []string {
	a := []string{"-np", strconv.Itoa(o.np)}
	for _, s := range o.mca {
		a = append(a, "--mca", s.Name, s.Value)
	}
	agent := "ssh"
	if v := env["OMPI_MCA_"+agentParam]; v != "" {
		agent = v
	}
	if o.agent != agent {
		a = append(a, "--mca", agentParam, o.agent)
	}
	for _, kv := range o.export {
		a = append(a, "-x", kv)
	}
	if len(o.hosts) > 0 {
		a = append(a, "--host", hostItems(o.hosts))
	}
	if o.bind != "" {
		a = append(a, "--bind-to", o.bind)
	}
	if o.tagOutput {
		a = append(a, "--tag-output")
	}
	if o.timeout > 0 {
		a = append(a, "--timeout", strconv.FormatFloat(o.timeout, 'g', -1, 64))
	}
	if o.reportModex {
		a = append(a, "--report-modex")
	}
	if o.recovery {
		a = append(a, "--enable-recovery")
	}
	return append(append(a, "--", o.program), o.args...)
}

// hostItems writes hosts as --host's value; a host given more than
// maxRanks slots in several items takes several again.
func hostItems(hosts []host) string {
	var items []string
	for _, h := range hosts {
		for n := h.slots; n > 0; n -= maxRanks {
			items = append(items, h.name+":"+strconv.Itoa(min(n, maxRanks)))
		}
	}
	return strings.Join(items, ",")
}

func sameOptions(a, b *options) bool {
	return a.np == b.np && slices.Equal(a.mca, b.mca) && slices.Equal(a.export, b.export) && a.bind == b.bind &&
		a.tagOutput == b.tagOutput && a.timeout == b.timeout && a.reportModex == b.reportModex &&
		a.recovery == b.recovery && slices.Equal(a.hosts, b.hosts) && a.agent == b.agent &&
		a.program == b.program && slices.Equal(a.args, b.args) && a.help == b.help && a.version == b.version
}

// FuzzParseArgs: mpirun's command line (NUL-separated words), its
// environment (NUL-separated KEY=value) and the text of any hostfile named.
// parseArgs refuses with a usage error of class ErrArg, or returns options
// within bounds (ranks, slots, host names, a launch agent, exports of
// VAR=value, the program's words untouched) that, written back as a command
// line, parse to the same options.
func FuzzParseArgs(f *testing.F) {
	for _, c := range []struct{ args, env, hostfile string }{
		{"-np\x004\x00--mca\x00btl\x00self,tcp\x00./prog\x00-np\x002", "", ""},
		{"--timeout\x0060\x00--tag-output\x00--mca\x00plm_rsh_agent\x00./agent.sh\x00--host\x00elsewhere:2,me:2\x00-x\x00TEST_X=exported\x00prog\x00env\x00TEST_X",
			"TEST_INHERITED=yes\x00OMPI_MCA_btl_base_verbose=40", ""},
		{"-n\x002\x00--hostfile\x00hf\x00--bind-to=none\x00-x\x00HOME\x00--\x00-prog", "HOME=/root", "node1 slots=2 max_slots=4\nnode2 # one\n"},
		{"-np=3\x00--gmca\x00btl\x00\"self\"\x00--timeout\x001e9\x00--enable-recovery\x00--report-modex\x00prog", "OMPI_MCA_plm_rsh_agent=rsh -x", ""},
		{"--host\x00a,a:3\x00--machinefile\x00m\x00prog", "", "b\na slots=99999999999999999999\n"},
		{"--help", "", ""},
		{"-np\x00-1\x00prog", "", ""},
		{"-np\x002305843009213693953\x00prog", "", ""},
		{"--host\x00a:1048576,a:1048576\x00prog", "", ""},
		{"--mca\x00btl", "", ""},
	} {
		f.Add(c.args, c.env, []byte(c.hostfile))
	}
	f.Fuzz(func(t *testing.T, argText, envText string, hostfile []byte) {
		var args []string
		if argText != "" {
			args = strings.Split(argText, "\x00")
		}
		env := map[string]string{}
		for _, kv := range strings.Split(envText, "\x00") {
			if k, v, ok := strings.Cut(kv, "="); ok {
				env[k] = v
			}
		}
		readFile := func(string) ([]byte, error) { return hostfile, nil }
		o, err := parseArgs(args, env, readFile)
		if err != nil {
			var u *usageError
			if !errors.As(err, &u) || !errors.Is(err, mpierr.ErrArg) {
				t.Fatalf("parseArgs(%q): %v is not a usage error of class ErrArg", args, err)
			}
			return
		}
		if o.help || o.version {
			return
		}
		if o.np < 1 || o.np > maxRanks || o.program == "" || len(strings.Fields(o.agent)) == 0 {
			t.Fatalf("parseArgs(%q): %d ranks, program %q, agent %q", args, o.np, o.program, o.agent)
		}
		if k := len(args) - len(o.args); k < 1 || args[k-1] != o.program || !slices.Equal(args[k:], o.args) {
			t.Fatalf("parseArgs(%q): program %q with %q: not the command line's last words", args, o.program, o.args)
		}
		seen := map[string]bool{}
		for _, s := range o.mca {
			if seen[s.Name] || s.Name == agentParam {
				t.Fatalf("parseArgs(%q): MCA parameter %q passed on twice, or the agent's", args, s.Name)
			}
			seen[s.Name] = true
		}
		for _, kv := range o.export {
			if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
				t.Fatalf("parseArgs(%q): export %q", args, kv)
			}
		}
		names := map[string]bool{}
		for _, h := range o.hosts {
			if !hostNameRE.MatchString(h.name) || h.slots < 1 || names[h.name] {
				t.Fatalf("parseArgs(%q): host %+v", args, h)
			}
			names[h.name] = true
		}
		if (o.bind != "" && o.bind != "core" && o.bind != "none") || o.timeout < 0 || o.timeout > 1e9 {
			t.Fatalf("parseArgs(%q): bind %q, timeout %v", args, o.bind, o.timeout)
		}
		again := argsOf(o, env)
		o2, err := parseArgs(again, env, readFile)
		if err != nil {
			t.Fatalf("parseArgs(%q), written back as %q: %v", args, again, err)
		}
		if !sameOptions(o, o2) {
			t.Fatalf("parseArgs(%q) = %+v, written back as %q, parses as %+v", args, *o, again, *o2)
		}
	})
}

// FuzzParseHostList: --host's value. parseHostList refuses it with a usage
// error that quotes it, or returns each host once with its slots, within
// bounds, as many in all as the items say, and the list written back
// parses to the same hosts.
func FuzzParseHostList(f *testing.F) {
	for _, s := range []string{"a:2,b,a", "elsewhere:2,node-1.example.com:2", "a:0", "a:x", "", "a b", "a:2,", "a:1048577", " a : 2", "-a"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, value string) {
		hs, err := parseHostList(nil, value)
		if err != nil {
			var u *usageError
			if !errors.As(err, &u) || !errors.Is(err, mpierr.ErrArg) || !strings.Contains(err.Error(), strconv.Quote(value)) {
				t.Fatalf("parseHostList(%q): %v is not a usage error of class ErrArg quoting the value", value, err)
			}
			return
		}
		slots, names := 0, map[string]bool{}
		for _, h := range hs {
			if !hostNameRE.MatchString(h.name) || h.slots < 1 || h.slots > maxRanks*(strings.Count(value, ",")+1) || names[h.name] {
				t.Fatalf("parseHostList(%q): host %+v", value, h)
			}
			names[h.name] = true
			slots += h.slots
		}
		want := 0
		for _, it := range strings.Split(value, ",") {
			want++
			if _, n, ok := strings.Cut(strings.TrimSpace(it), ":"); ok {
				k, _ := strconv.Atoi(n)
				want += k - 1
			}
		}
		if slots != want {
			t.Fatalf("parseHostList(%q): %d slots, the items give %d", value, slots, want)
		}
		again, err := parseHostList(nil, hostItems(hs))
		if err != nil || !slices.Equal(again, hs) {
			t.Fatalf("parseHostList(%q) = %+v, written back as %q: %+v, %v", value, hs, hostItems(hs), again, err)
		}
	})
}

// A hostfile is read up to a bound: --hostfile /dev/zero is an error, not
// all of memory.
func TestHostfileBounded(t *testing.T) {
	_, err := parseArgs([]string{"--hostfile", "/dev/zero", "prog"}, nil, readHostfile)
	if want := "/dev/zero is larger than " + strconv.Itoa(maxHostfile>>20) + " MiB"; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("--hostfile /dev/zero: %v", err)
	}
	hf := t.TempDir() + "/hf"
	if err := os.WriteFile(hf, []byte("a slots=2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if o, err := parseArgs([]string{"--hostfile", hf, "prog"}, nil, readHostfile); err != nil || o.np != 2 {
		t.Fatalf("--hostfile %s: %+v, %v", hf, o, err)
	}
}
