// Command mpirun starts a gompi job: N ranks of a program on this host,
// served by an in-process PMI-1 server.
//
//	mpirun -np 4 [--mca name value]… [-x VAR[=value]]… [--bind-to core|none]
//	       [--oversubscribe] [--tag-output] [--timeout S] [--report-modex]
//	       [--enable-recovery] program [args…]
//
// A program that is a directory of Go source is built first. When a rank
// fails (non-zero exit, a signal, Abort, or exit without Finalize), the other
// ranks are ended within two seconds and mpirun exits with the rank's code
// (128+signal for a signal). With --enable-recovery (Open MPI 5's flag) a
// rank that dies does not end the job: the others are told, their
// operations with it fail with MPI_ERR_PROC_FAILED, and mpirun exits with
// the dead rank's code once the survivors are done (Abort still ends the
// job). Each rank runs in its own process group; a
// watchdog process ("mpirun [watchdog of <pid>]" in ps) ends every rank's
// group if mpirun itself is killed, and mpirun replaces it if it dies.
package main

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/gompi/gompi/internal/stamp"
	"github.com/gompi/gompi/mca"
	"github.com/gompi/gompi/mpierr"
	"github.com/gompi/gompi/params"
)

const usage = `Usage: mpirun [options] program [args...]

Starts a gompi job on this host, or on several.

  -np, -n <N>               number of ranks (at least 1; default with --host/--hostfile: all their slots)
  --host, -H <h[:n],...>    hosts to run on, each with n slots (default 1); ranks fill the slots in order
  --hostfile <file>         hosts from a file, one per line: "name [slots=N]" ('#' comments)
  --mca <name> <value>      set an MCA parameter in every rank (command-line source)
  -x <VAR>[=<value>]        export VAR (with value, or mpirun's own) to every rank
  --bind-to core|none       bind each rank to one core (default: core when ranks <= cores)
  --oversubscribe           allow more ranks than cores (always allowed on this host)
  --tag-output              prefix every output line with [rank]
  --timeout <seconds>       end the job after this long (exit status 124)
  --report-modex            print what the modex put on the PMI wire at the end
  --enable-recovery         a rank that dies does not end the job: the others are told and go on;
                            mpirun still exits non-zero, naming it
  --allow-run-as-root       accepted for compatibility with Open MPI; no effect
  --version                 print the version and exit
  -h, --help                print this help and exit

Ranks on another host than this one are started through the launch agent,
--mca plm_rsh_agent "<command>" (default ssh), as "<command> <host> <command
line>"; they find mpirun's PMI server over TCP (PMI_PORT, mpirun's host name)
and present the job's secret, and receive only the gompi and OMPI_MCA_
variables, -x ones and GOMAXPROCS, not mpirun's whole environment (as with
Open MPI). The program's path and the working directory must be the same on
every host.

A program that is a directory of Go source is built with 'go build' first.
Each rank gets PMI_FD, PMI_RANK, PMI_SIZE, OMPI_COMM_WORLD_RANK,
OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_RANK and OMPI_COMM_WORLD_LOCAL_SIZE;
--mca name value arrives as OMPI_MCA_name=value with
OMPI_MCA_SOURCE_name=command line. Standard input goes to rank 0.
`

// maxRanks bounds -np and a host's slots: mpirun keeps state per rank and
// starts a process for each, so a larger number is a typo, not a job.
const maxRanks = 1 << 20

// agentParam names the command that starts ranks on other hosts; it is
// called with the host and the command line, as ssh is.
const agentParam = "plm_rsh_agent"

// options are mpirun's parsed command line.
type options struct {
	np            int
	mca           []params.Setting
	export        []string // KEY=value, resolved
	bind          string   // "", "core", "none"
	tagOutput     bool
	timeout       float64 // seconds; 0 = none
	reportModex   bool
	recovery      bool   // --enable-recovery
	hosts         []host // --host, --hostfile; none: every rank on this host
	agent         string // plm_rsh_agent: how ranks are started on other hosts
	program       string
	args          []string
	help, version bool
}

type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

// Unwrap gives a usage error its MPI class: a bad argument.
func (e *usageError) Unwrap() error { return mpierr.ErrArg }

func usagef(format string, a ...any) error { return &usageError{fmt.Sprintf(format, a...)} }

// parseArgs parses Open MPI-style options: one or two leading dashes, each
// option followed by its arguments; the first non-option word is the
// program, everything after it belongs to the program. readFile reads a
// hostfile (readHostfile).
func parseArgs(args []string, env map[string]string, readFile func(string) ([]byte, error)) (*options, error) {
	o := &options{np: -1}
	seenMCA := map[string]bool{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			i++
			if i < len(args) {
				o.program, o.args = args[i], args[i+1:]
			}
			break
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			o.program, o.args = a, args[i+1:]
			break
		}
		name, inline, hasInline := strings.Cut(strings.TrimLeft(a, "-"), "=")
		value := func() (string, error) {
			if hasInline {
				return inline, nil
			}
			if i+1 >= len(args) {
				return "", usagef("option %s needs a value", a)
			}
			i++
			return args[i], nil
		}
		switch name {
		case "np", "n", "c":
			v, err := value()
			if err != nil {
				return nil, err
			}
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > maxRanks {
				return nil, usagef("-np %q: the number of ranks must be a whole number of at least 1 and at most %d", v, maxRanks)
			}
			o.np = n
		case "mca", "gmca":
			if hasInline || i+2 >= len(args) {
				return nil, usagef("option %s needs a name and a value (--mca btl self,tcp)", a)
			}
			k, v := args[i+1], strings.Trim(args[i+2], `"`)
			i += 2
			if seenMCA[k] {
				return nil, usagef("MCA parameter %q is given more than once on the command line", k)
			}
			seenMCA[k] = true
			o.mca = append(o.mca, params.Setting{Name: k, Value: v})
		case "x":
			v, err := value()
			if err != nil {
				return nil, err
			}
			k, val, has := strings.Cut(v, "=")
			if k == "" {
				return nil, usagef("-x %q: expected VAR or VAR=value", v)
			}
			if !has {
				var ok bool
				if val, ok = env[k]; !ok {
					return nil, usagef("-x %s: %s is not set in mpirun's environment; use -x %s=value", k, k, k)
				}
			}
			o.export = append(o.export, k+"="+val)
		case "host", "H":
			v, err := value()
			if err != nil {
				return nil, err
			}
			if o.hosts, err = parseHostList(o.hosts, v); err != nil {
				return nil, err
			}
		case "hostfile", "machinefile", "default-hostfile":
			v, err := value()
			if err != nil {
				return nil, err
			}
			data, err := readFile(v)
			if err != nil {
				return nil, usagef("--hostfile: %v", err)
			}
			hs, err := parseHostfile(v, data)
			if err != nil {
				return nil, err
			}
			for _, h := range hs {
				o.hosts = addHost(o.hosts, h.name, h.slots)
			}
		case "bind-to":
			v, err := value()
			if err != nil {
				return nil, err
			}
			if v != "core" && v != "none" {
				return nil, usagef("--bind-to %q: accepted values are core and none", v)
			}
			o.bind = v
		case "oversubscribe", "allow-run-as-root":
		case "tag-output":
			o.tagOutput = true
		case "timeout":
			v, err := value()
			if err != nil {
				return nil, err
			}
			t, err := strconv.ParseFloat(v, 64)
			if err != nil || t <= 0 || t > 1e9 {
				return nil, usagef("--timeout %q: expected a positive number of seconds", v)
			}
			o.timeout = t
		case "report-modex":
			o.reportModex = true
		case "enable-recovery":
			o.recovery = true
		case "version", "V":
			o.version = true
		case "help", "h":
			o.help = true
		default:
			return nil, usagef("unknown option %q (mpirun --help lists the options)", a)
		}
	}
	if o.help || o.version {
		return o, nil
	}
	// plm_rsh_agent is mpirun's own parameter, as in Open MPI: it is read
	// here and not passed to the ranks.
	o.agent = "ssh"
	if v, ok := env[params.EnvPrefix+agentParam]; ok && v != "" {
		o.agent = v
	}
	for i, s := range o.mca {
		if s.Name == agentParam {
			o.agent = s.Value
			o.mca = append(o.mca[:i:i], o.mca[i+1:]...)
			break
		}
	}
	if len(strings.Fields(o.agent)) == 0 {
		return nil, usagef("%s is empty: give the command that runs a command on a host, like ssh", agentParam)
	}
	if o.np < 0 && len(o.hosts) > 0 {
		for _, h := range o.hosts {
			o.np += h.slots
		}
		o.np++ // from -1
	}
	if o.np < 0 {
		return nil, usagef("no number of ranks: give -np N (or --host/--hostfile, whose slots it then fills)")
	}
	if o.np > maxRanks {
		return nil, usagef("the hosts have %d slots: give -np N, at most %d", o.np, maxRanks)
	}
	if o.program == "" {
		return nil, usagef("no program to run")
	}
	return o, nil
}

func main() {
	if os.Getenv(watchdogEnv) == "1" {
		os.Exit(watchdog(os.Stdin))
	}
	stamp.Mark("main entered")
	status := run(os.Args[1:], os.Environ(), os.Stdin, os.Stdout, os.Stderr)
	stamp.Mark("exit")
	os.Exit(status)
}

func run(args, environ []string, stdin io.Reader, stdout, stderr io.Writer) int {
	env := map[string]string{}
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	o, err := parseArgs(args, env, readHostfile)
	if err != nil {
		fmt.Fprintf(stderr, "mpirun: %v\n", err)
		return 1
	}
	if o.help {
		fmt.Fprint(stdout, usage)
		return 0
	}
	if o.version {
		fmt.Fprintf(stdout, "mpirun (gompi) %s\n", mca.GompiVersion)
		return 0
	}
	j, err := newJob(o, environ, stdin, stdout, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "mpirun: %v\n", err)
		return 1
	}
	stamp.Mark("job planned")
	return j.run()
}
