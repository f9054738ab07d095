package main

// Placement: which host each rank runs on, and its place among that host's
// ranks.

import "strings"

// placeRanks maps the ranks onto the hosts: all on this one without
// --host or --hostfile.
func (j *job) placeRanks() error {
	j.hosts = j.o.hosts
	if len(j.hosts) == 0 {
		j.hosts = []host{{name: j.host, slots: j.o.np}}
	}
	short, _, _ := strings.Cut(j.host, ".")
	for i := range j.hosts {
		n := j.hosts[i].name
		j.hosts[i].local = n == j.host || n == short || n == "localhost"
	}
	hostOf, err := mapBySlot(j.hosts, j.o.np)
	if err != nil {
		return err
	}
	j.hostOf = hostOf
	j.onHost = make([]int, len(j.hosts))
	j.localRank = make([]int, j.o.np)
	for r, h := range hostOf {
		j.localRank[r] = j.onHost[h]
		j.onHost[h]++
	}
	j.agent = strings.Fields(j.o.agent)
	return nil
}

// localRanks is how many ranks run on this machine.
func (j *job) localRanks() int {
	n := 0
	for i, h := range j.hosts {
		if h.local {
			n += j.onHost[i]
		}
	}
	return n
}

// remote reports whether some rank runs on another host.
func (j *job) remote() bool { return j.localRanks() < j.o.np }
