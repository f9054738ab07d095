#!/bin/sh
# run.sh [go test flags] — the multi-host tests on simulated hosts (network
# namespaces made by setup.sh, removed afterwards even when a test fails).
# Needs root and iproute2; when it cannot run here it says why on its last
# line, "skipped: <why>", and exits 77 (a why that begins "kernel:" names
# a kernel feature this machine lacks). MPICH's mpiexec.mpich, when
# installed, is tested too. The flags (default -v) go to go test: .ci/run
# passes -json.
cd "$(dirname "$0")/../.."
if [ "$(id -u)" != 0 ]; then
	echo "test/netns: skipped: needs root to make network namespaces"
	exit 77
fi
if ! command -v ip >/dev/null 2>&1; then
	echo "test/netns: skipped: needs iproute2 (apt-get install iproute2)"
	exit 77
fi
if ! ip netns add gompi-probe$$ 2>/dev/null; then
	echo "test/netns: skipped: kernel: network namespaces: ip netns add is refused on this machine"
	exit 77
fi
ip netns del gompi-probe$$
command -v mpiexec.mpich >/dev/null 2>&1 || echo "test/netns: mpiexec.mpich is not installed: the Hydra test skips"
[ $# -eq 0 ] && set -- -v
exec go test -count=1 "$@" ./test/netns
