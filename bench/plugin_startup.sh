#!/bin/bash
# What plugin support costs at start-up: examples/hello as a singleton and
# under `mpirun -np 2`, built plugin-capable (the default) and with
# -tags gompi_noplugins, run interleaved (one run of each in turn, REPS
# rounds). Prints each variant's median and quartiles in ms, and the
# placement probe before and after.
#
#   bench/plugin_startup.sh [DIR...]
#
# Each DIR holds prebuilt hello, hello-noplug, mpirun and mpirun-noplug
# (for comparing builds of two commits); with none, this tree is built
# into a temporary directory. RUNTIME is a timer that runs a command N
# times and prints each wall time in µs (default /tmp/su/runtime); REPS
# defaults to 20. MPICH_HELLO, a C hello built with MPICH's mpicc, adds
# `mpiexec.mpich -n 2` of it to each round, for the side-by-side figure.
set -eu
REPS=${REPS:-20}
RUNTIME=${RUNTIME:-/tmp/su/runtime}
PROBE=${PROBE:-/tmp/anchors/shm_limit}
cd "$(dirname "$0")/.."
if [ $# -eq 0 ]; then
	T=$(mktemp -d)
	trap 'rm -rf "$T"' EXIT
	go build -o "$T/hello" ./examples/hello
	go build -tags gompi_noplugins -o "$T/hello-noplug" ./examples/hello
	go build -o "$T/mpirun" ./cmd/mpirun
	go build -tags gompi_noplugins -o "$T/mpirun-noplug" ./cmd/mpirun
	set -- "$T"
fi
out=$(mktemp)
probe() { [ -x "$PROBE" ] && "$PROBE" probe 2>&1 | tail -1 || echo "no probe"; }
echo "# probe before: $(probe)"
for ((i = 0; i < REPS; i++)); do
	for d in "$@"; do
		for v in "" -noplug; do
			echo "$d singleton$v $("$RUNTIME" 1 "$d/hello$v")" >>"$out"
			echo "$d mpirun-np2$v $("$RUNTIME" 1 "$d/mpirun$v" -np 2 "$d/hello$v")" >>"$out"
		done
	done
	if [ -n "${MPICH_HELLO:-}" ]; then
		echo "mpich mpiexec-n2 $("$RUNTIME" 1 mpiexec.mpich -n 2 "$MPICH_HELLO")" >>"$out"
	fi
done
echo "# probe after: $(probe)"
sort -k1,2 -k3n "$out" | awk '
	{ k = $1 " " $2; v[k, ++n[k]] = $3 }
	END {
		for (k in n) {
			c = n[k]
			printf "%-60s n=%d median %.1f ms (q1 %.1f, q3 %.1f)\n", k, c,
				v[k, int((c + 1) / 2)] / 1000, v[k, int((c + 3) / 4)] / 1000, v[k, int((3 * c + 3) / 4)] / 1000
		}
	}' | sort
rm -f "$out"
