#!/bin/sh
# Plugin-scheduled barrier against tuned's native one, run alternately in
# one session: REPS runs of each at 2 and at 4 ranks, each run with the
# placement probe. Prints one line per run: ranks, which, µs, probe pre/post.
#
#   bench/plugin_barrier.sh [REPS]   (builds what it needs into $TMPDIR)
set -eu
REPS=${1:-5}
cd "$(dirname "$0")/.."
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
go build -o "$T/mpirun" ./cmd/mpirun
go build -o "$T/gompi-bench" ./cmd/gompi-bench
mkdir "$T/plugins"
(cd examples/outoftree/plugin && go build -o "$T/plugins/gompi-coll-plugbarrier" .)
run() { # ranks label args...
	np=$1 label=$2
	shift 2
	"$T/mpirun" -np "$np" "$@" "$T/gompi-bench" barrier --probe 2>/dev/null |
		awk -v np="$np" -v l="$label" '/^0 /{t=$2} /# probe/{split($4,a,"=");split($5,b,"="); p=a[2]"/"b[2]} END{printf "%s %-7s %8.3f us  probe %s\n", np, l, t, p}'
}
for np in 2 4; do
	i=0
	while [ $i -lt "$REPS" ]; do
		run "$np" tuned --mca coll '^tofu'
		run "$np" plugin --mca mca_base_component_path "$T/plugins"
		i=$((i + 1))
	done
done
