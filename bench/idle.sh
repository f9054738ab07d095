#!/usr/bin/env bash
# What waiting ranks cost a working one on an oversubscribed node: rank 0
# times a fixed CPU loop while the other ranks wait in Recv, Wait, Finalize
# or Barrier; the ratio is against the loop alone (-np 1), median of REPS
# runs, for gompi, Open MPI and MPICH side by side.
#
#   bench/idle.sh                      # REPS=5, WAITING="15 63", MODES="recv wait finalize barrier"
#   REPS=3 WAITING=63 MODES=finalize bench/idle.sh
#
# Needs openmpi-bin libopenmpi-dev mpich libmpich-dev (MPICH is skipped
# above MPICH_MAX waiting ranks, 15 by default: it busy-polls and takes
# minutes there). Not part of the tests.
set -euo pipefail
cd "$(dirname "$0")/.."
REPS=${REPS:-5}
WAITING=${WAITING:-"15 63"}
MODES=${MODES:-"recv wait finalize barrier"}
MPICH_MAX=${MPICH_MAX:-15}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/mpirun" ./cmd/mpirun
go build -o "$tmp/gompi-bench" ./cmd/gompi-bench
mpicc.openmpi -O2 -o "$tmp/idle.ompi" bench/idle.c
mpicc.mpich -O2 -Wno-stringop-overflow -o "$tmp/idle.mpich" bench/idle.c
run() { # impl mode np -> ms
  local impl=$1 mode=$2 np=$3
  case $impl in
    gompi) "$tmp/mpirun" -np "$np" "$tmp/gompi-bench" idle --in "$mode" ;;
    ompi) mpirun --allow-run-as-root --oversubscribe -np "$np" "$tmp/idle.ompi" "$mode" ;;
    mpich) mpiexec.mpich -n "$np" "$tmp/idle.mpich" "$mode" ;;
  esac | awk '!/^#/ {print $2}'
}
out="$tmp/results"
for rep in $(seq "$REPS"); do
  for impl in gompi ompi mpich; do
    for mode in $MODES; do
      echo "$impl $mode 0 $(run "$impl" "$mode" 1)" >>"$out"
      for w in $WAITING; do
        if [ "$impl" = mpich ] && [ "$w" -gt "$MPICH_MAX" ]; then continue; fi
        echo "$impl $mode $w $(run "$impl" "$mode" $((w + 1)))" >>"$out"
      done
    done
  done
done
python3 - "$out" <<'PY'
import sys, statistics, collections
d = collections.defaultdict(list)
for line in open(sys.argv[1]):
    impl, mode, w, ms = line.split()
    d[(impl, mode, int(w))].append(float(ms))
impls = ["gompi", "ompi", "mpich"]
waits = sorted({w for (_, _, w) in d if w})
print("| waiting | in | " + " | ".join(f"{i} ms (× alone)" for i in impls) + " |")
print("|---|---|" + "---|" * len(impls))
for mode in dict.fromkeys(m for (_, m, _) in d):
    for w in waits:
        cells = []
        for i in impls:
            if (i, mode, w) not in d:
                cells.append("—"); continue
            t, alone = statistics.median(d[(i, mode, w)]), statistics.median(d[(i, mode, 0)])
            cells.append(f"{t:.0f} ({t/alone:.2f}×)")
        print(f"| {w} | {mode} | " + " | ".join(cells) + " |")
PY
