package main

// Binding: the cores this host's ranks are bound to, one each, and starting a
// rank on a thread bound to its core so that it inherits the binding.

import (
	"fmt"
	"os/exec"
	"runtime"

	"golang.org/x/sys/unix"

	"github.com/gompi/gompi/rte"
)

// planBinding chooses a core per rank: by default when there are no more
// ranks than cores, as Open MPI does.
func (j *job) planBinding() error {
	j.cores = rte.NodeCores()
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil // cannot tell: do not bind
	}
	var cpus []int
	for c := 0; c < 1024; c++ {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	j.cores = rte.LimitByQuota(len(cpus))
	switch j.o.bind {
	case "none":
		return nil
	case "core":
		if n := j.localRanks(); n > len(cpus) {
			return fmt.Errorf("--bind-to core: %d ranks on this host but only %d cores to bind them to; use --bind-to none", n, len(cpus))
		}
	default:
		if j.localRanks() > len(cpus) {
			return nil
		}
	}
	j.cpus = cpus
	return nil
}

// startOn starts cmd on a thread bound to cpu, so that the child (and every
// thread it makes) inherits the binding; -1 means no binding.
func startOn(cmd *exec.Cmd, cpu int) error {
	if cpu < 0 {
		return cmd.Start()
	}
	done := make(chan error, 1)
	go func() {
		// The thread's mask is changed for good, so it must not run other
		// goroutines: it stays locked and ends with this goroutine.
		runtime.LockOSThread()
		var set unix.CPUSet
		set.Set(cpu)
		if err := unix.SchedSetaffinity(0, &set); err != nil {
			done <- fmt.Errorf("binding to core %d: %w", cpu, err)
			return
		}
		done <- cmd.Start()
	}()
	return <-done
}
