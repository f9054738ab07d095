package main

// The rank's environment: what it inherits from mpirun, what -x and --mca
// add, and the variables that tell it its rank, its job and how to reach
// mpirun's PMI server.

import (
	"strconv"
	"strings"

	"github.com/gompi/gompi/internal/stamp"
	"github.com/gompi/gompi/params"
	"github.com/gompi/gompi/rte"
	"github.com/gompi/gompi/rte/pmi"
)

// JobIDEnv tells each rank the job's id.
const JobIDEnv = "GOMPI_JOB_ID"

// rankEnv is the environment of one rank.
func (j *job) rankEnv(rank int) []string {
	drop := func(k string) bool {
		return strings.HasPrefix(k, "PMI_") || strings.HasPrefix(k, "OMPI_COMM_WORLD_") ||
			strings.HasPrefix(k, params.EnvSourcePrefix) || k == watchdogEnv || k == rte.OversubscribedEnv || k == JobIDEnv ||
			k == pmi.AuthEnv || k == params.EnvPrefix+agentParam || k == stamp.WhoEnv
	}
	h := j.hostOf[rank]
	remote := !j.hosts[h].local
	if remote {
		// As ssh and Open MPI do: a remote rank gets what gompi needs and
		// what the user asked for, not mpirun's whole environment.
		inner := drop
		drop = func(k string) bool {
			return inner(k) || !(strings.HasPrefix(k, params.EnvPrefix) || strings.HasPrefix(k, "GOMPI_") || k == "GOMAXPROCS")
		}
	}
	set := map[string]string{}
	var order []string
	put := func(k, v string) {
		if _, ok := set[k]; !ok {
			order = append(order, k)
		}
		set[k] = v
	}
	for _, kv := range j.environ {
		k, v, _ := strings.Cut(kv, "=")
		if !drop(k) {
			put(k, v)
		}
	}
	for _, kv := range j.o.export {
		k, v, _ := strings.Cut(kv, "=")
		put(k, v)
	}
	// --mca beats -x OMPI_MCA_… and the inherited environment: the command
	// line is the highest source.
	for _, s := range j.o.mca {
		put(params.EnvPrefix+s.Name, s.Value)
		put(params.EnvSourcePrefix+s.Name, params.CommandLineMark)
	}
	n := strconv.Itoa(j.o.np)
	r := strconv.Itoa(rank)
	if remote {
		put("PMI_PORT", j.pmiPort)
		put("PMI_ID", r)
	} else {
		put("PMI_FD", "3")
		put("PMI_RANK", r)
		put("PMI_SIZE", n)
	}
	if len(j.hosts) > 1 || remote {
		// The node is the host the rank was placed on, never a guess from
		// what it can reach.
		put("PMI_HOSTNAME", j.hosts[h].name)
	}
	put("OMPI_COMM_WORLD_RANK", r)
	put("OMPI_COMM_WORLD_SIZE", n)
	put("OMPI_COMM_WORLD_LOCAL_RANK", strconv.Itoa(j.localRank[rank]))
	put("OMPI_COMM_WORLD_LOCAL_SIZE", strconv.Itoa(j.onHost[h]))
	// The job's id, which names its files in /dev/shm (gompi-<id>-…).
	put(JobIDEnv, j.jobID)
	// Whether waiting ranks must give their core away: more ranks on this
	// node than cores mpirun may use.
	over := "0"
	if remote {
		// Another host's cores are its ranks' to count.
	} else if j.localRanks() > j.cores {
		over = "1"
		// And the Go runtime of each rank runs on one thread at a time:
		// with a processor per core in every rank, idle processors spin
		// looking for goroutines and take the core from the rank being
		// waited for (a 4-rank barrier on 2 cores: 8 µs instead of 25).
		// A GOMAXPROCS the user set wins.
		if _, ok := set["GOMAXPROCS"]; !ok {
			put("GOMAXPROCS", "1")
		}
	}
	if !remote {
		put(rte.OversubscribedEnv, over)
	}
	if stamp.On() {
		// The ranks' stamps count from mpirun's origin.
		put(stamp.Env, "1")
		put(stamp.T0Env, strconv.FormatInt(stamp.Origin(), 10))
	}
	out := make([]string, len(order))
	for i, k := range order {
		out[i] = k + "=" + set[k]
	}
	return out
}
