// Package stamp prints start-up timestamps, for finding where the time of
// a job's start and end goes: `GOMPI_STARTUP_TRACE=1 mpirun -np 2 hello`
// makes mpirun, its watchdog and every rank write lines
//
//	gompi-startup <ms since t0> <who> <pid> <what>
//
// to standard error, t0 being mpirun's start (or, when GOMPI_STARTUP_T0
// holds a CLOCK_MONOTONIC time in nanoseconds, that time: a harness that
// sets it just before starting mpirun sees mpirun's exec too). Every
// process on the host reads the same monotonic clock, so the lines of all
// of them sort into one timeline (bench/startup.sh sums them up).
//
// Off (the variable unset), Mark costs one load and a branch: the switch is
// read once, at this package's init, which runs before every gompi
// package's.
package stamp

import (
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// Env switches the stamps on; T0Env carries the time they count from;
// WhoEnv, when set, names the process in its lines (mpirun names its
// watchdog so, which has no rank).
const (
	Env    = "GOMPI_STARTUP_TRACE"
	T0Env  = "GOMPI_STARTUP_T0"
	WhoEnv = "GOMPI_STARTUP_WHO"
)

// The switch and the origin are the process's, fixed at init and read
// only after: like GODEBUG, a diagnostic of the process, not job state.
var (
	on  bool
	t0  int64 // CLOCK_MONOTONIC ns of the origin
	who string
	pid string
)

func init() {
	if v := os.Getenv(Env); v == "" || v == "0" {
		return
	}
	on = true
	now := Now()
	t0 = now
	if v, err := strconv.ParseInt(os.Getenv(T0Env), 10, 64); err == nil && v > 0 && v <= now {
		t0 = v
	}
	who = "mpirun"
	if r, ok := os.LookupEnv("PMI_RANK"); ok {
		who = "rank" + r
	} else if r, ok := os.LookupEnv("PMI_ID"); ok {
		who = "rank" + r
	}
	if w := os.Getenv(WhoEnv); w != "" {
		who = w
	}
	pid = strconv.Itoa(os.Getpid())
	Mark("process init")
}

// On reports whether stamps are printed; a caller that formats its label
// checks it first, so that nothing is formatted when they are not.
func On() bool { return on }

// Origin is the CLOCK_MONOTONIC time in nanoseconds the stamps count from,
// for mpirun to hand to the processes it starts (T0Env).
func Origin() int64 { return t0 }

// Now is the CLOCK_MONOTONIC time in nanoseconds.
func Now() int64 {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

// Mark prints one stamp; what must be one line. A single write, so that
// the lines of processes sharing a stream do not interleave.
func Mark(what string) {
	if !on {
		return
	}
	d := Now() - t0
	b := make([]byte, 0, 64+len(what))
	b = append(b, "gompi-startup "...)
	b = strconv.AppendFloat(b, float64(d)/1e6, 'f', 3, 64)
	b = append(b, ' ')
	b = append(b, who...)
	b = append(b, ' ')
	b = append(b, pid...)
	b = append(b, ' ')
	b = append(b, what...)
	b = append(b, '\n')
	os.Stderr.Write(b)
}
