#!/bin/sh
# run.sh — the multi-host tests on simulated hosts (network namespaces made
# by setup.sh, removed afterwards even when a test fails). Needs root and
# iproute2; says why and exits 0 when it cannot run here. MPICH's
# mpiexec.mpich, when installed, is tested too.
cd "$(dirname "$0")/../.."
if [ "$(id -u)" != 0 ]; then
	echo "test/netns: skipped: needs root to make network namespaces"
	exit 0
fi
if ! command -v ip >/dev/null 2>&1; then
	echo "test/netns: skipped: needs iproute2 (apt-get install iproute2)"
	exit 0
fi
if ! ip netns add gompi-probe$$ 2>/dev/null; then
	echo "test/netns: skipped: ip netns add is refused on this machine"
	exit 0
fi
ip netns del gompi-probe$$
command -v mpiexec.mpich >/dev/null 2>&1 || echo "test/netns: mpiexec.mpich is not installed: the Hydra test skips"
exec go test -count=1 -v ./test/netns
