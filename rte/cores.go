package rte

import (
	"fmt"
	"math"
	"os"
	"runtime"
	"strconv"
	"strings"

	"github.com/gompi/gompi/mpierr"
)

// OversubscribedEnv is the variable through which mpirun tells each rank
// whether its node runs more ranks than the cores mpirun may use: "1" or
// "0". Without it (other launchers, singletons) a rank decides from its
// node's cores.
const OversubscribedEnv = "GOMPI_OVERSUBSCRIBED"

// placeCores decides whether this node is oversubscribed.
func (rt *Runtime) placeCores(env map[string]string) error {
	j := &rt.job
	if v, ok := env[OversubscribedEnv]; ok {
		switch v {
		case "1", "0":
			j.Oversubscribed = v == "1"
		default:
			return mpierr.Errorf(mpierr.ErrIntern, "rte: %s=%q: accepted: 0 or 1", OversubscribedEnv, v)
		}
		j.OversubscribedBy = "mpirun"
		return nil
	}
	cores := NodeCores()
	j.Oversubscribed = j.LocalSize > cores
	j.OversubscribedBy = fmt.Sprintf("this rank: %d ranks on the node, %d usable cores", j.LocalSize, cores)
	return nil
}

// NodeCores is the number of cores the ranks of this node may use: the
// machine's online CPUs (not this process's affinity: a rank bound to one
// core by its launcher still has peers on the others), bounded by the CPU
// quota of this process's cgroup.
func NodeCores() int {
	n := runtime.NumCPU()
	if b, err := os.ReadFile("/sys/devices/system/cpu/online"); err == nil {
		if c, err := ParseCPUList(string(b)); err == nil {
			n = c
		}
	}
	return LimitByQuota(n)
}

// LimitByQuota bounds a count of cores by the CPU quota of this process's
// cgroup (cgroup v2 cpu.max), so that a container given 2 CPUs of a large
// machine counts 2.
func LimitByQuota(cores int) int {
	b, err := os.ReadFile("/sys/fs/cgroup/cpu.max")
	if err != nil {
		return cores
	}
	q, ok, err := ParseCPUMax(string(b))
	if err != nil || !ok {
		return cores
	}
	return max(1, min(cores, int(math.Ceil(q))))
}

// ParseCPUList counts the CPUs of a list in the kernel's form ("0-3,6").
func ParseCPUList(s string) (int, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, fmt.Errorf("empty CPU list")
	}
	n := 0
	for _, r := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(r, "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 {
			return 0, fmt.Errorf("CPU list %q: %q is not a CPU number", s, lo)
		}
		if !isRange {
			n++
			continue
		}
		z, err := strconv.Atoi(hi)
		if err != nil || z < a {
			return 0, fmt.Errorf("CPU list %q: %q is not a range", s, r)
		}
		if z-a >= 1<<20 || n+z-a+1 > 1<<20 {
			return 0, fmt.Errorf("CPU list %q: too many CPUs", s)
		}
		n += z - a + 1
	}
	return n, nil
}

// ParseCPUMax reads cgroup v2's cpu.max ("max 100000" or "<quota>
// <period>") and returns the quota in CPUs; ok is false when there is none.
func ParseCPUMax(s string) (cpus float64, ok bool, err error) {
	f := strings.Fields(s)
	if len(f) != 2 {
		return 0, false, fmt.Errorf("cpu.max %q: want two fields", s)
	}
	if f[0] == "max" {
		return 0, false, nil
	}
	q, err1 := strconv.ParseUint(f[0], 10, 63)
	p, err2 := strconv.ParseUint(f[1], 10, 63)
	if err1 != nil || err2 != nil || p == 0 {
		return 0, false, fmt.Errorf("cpu.max %q: want a quota and a period in microseconds", s)
	}
	return float64(q) / float64(p), true, nil
}
