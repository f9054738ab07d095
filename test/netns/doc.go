// Package netns runs gompi jobs across simulated hosts: network namespaces
// made by setup.sh, each with its own interfaces, host name, IPC space and
// /dev/shm, joined by a bridge; agent.sh runs a command on one as ssh would.
// The tests need root and iproute2, and skip without them.
//
// Run them with test/netns/run.sh (as root): it checks what the machine
// allows, then runs go test here. setup.sh and agent.sh also serve by hand,
// to try a job on several simulated hosts; teardown.sh removes them.
package netns
