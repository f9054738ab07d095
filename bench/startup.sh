#!/usr/bin/env bash
# bench/startup.sh - how long a job takes to start and end: gompi's
# `mpirun -np 2 examples/hello` against MPICH's `mpiexec -n 2` and Open MPI's
# `mpirun -np 2` of mpi-anchors' C hello, in the same minutes.
#
# Builds gompi's mpirun and examples/hello twice (the plugin-capable build
# and -tags gompi_noplugins), mpi-anchors' hello.mpich and hello.ompi, and
# bench/runtime.c (a timer that spawns a command and waits for it, printing
# the wall time in microseconds). Then runs, interleaved (one of each in
# turn, each round starting one further along, REPS rounds):
#
#   gompi        mpirun -np 2 hello                (plugin-capable build)
#   gompi-np     mpirun -np 2 hello.noplugins      (-tags gompi_noplugins)
#   mpich        mpiexec.mpich -n 2 hello.mpich
#   ompi         mpirun.openmpi --allow-run-as-root -np 2 hello.ompi (reference)
#
# and, REPS64 rounds, NP64 ranks on this host's cores:
#
#   gompi-64     mpirun --oversubscribe -np NP64 hello.noplugins
#   gompi-64p    mpirun --oversubscribe -np NP64 hello
#   mpich-64     mpiexec.mpich -n NP64 hello.mpich
#
# It prints each configuration's median and its ratio to MPICH's, then the
# phases of gompi's start and end, from TRACE rounds of each gompi build run
# with GOMPI_STARTUP_TRACE=1 (the stamps of mpirun, its watchdog and every
# rank; bench/startup_phases.py sums them up): mpirun's own start, the
# watchdog, the spawn, each rank's exec and package inits, Init up to the
# modex, the modex, the rest of Init, Finalize and mpirun's end. Stamped runs
# are not timed: their figures are the stamps'.
#
# The host moves this VM's two vCPUs between a near and a far placement;
# `shm_limit probe` runs before and after (probe.log). Run it under the
# machine's measurement lock when others share it (`timed bench/startup.sh`).
#
# Environment:
#   ANCHORS  the mpi-anchors folder (default: ../shared/mpi-anchors beside the
#            repository); read only: copied and built in WORK
#   WORK     scratch folder (default: bench/.anchors, git-ignored)
#   OUT      results folder (default: $WORK/startup/<UTC stamp>)
#   REPS     rounds at 2 ranks (default 20)
#   REPS64   rounds at NP64 ranks (default 5: MPICH takes seconds a round)
#   NP64     ranks of the oversubscribed case (default 64; 0 skips it)
#   TRACE    stamped rounds of each gompi build (default 10; 0 skips them)
#   NOBUILD  1: use the binaries already in WORK
#
# Usage: bench/startup.sh            (about 1 minute with the defaults)
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
REPO="$(cd "$HERE/.." && pwd)"
ANCHORS="${ANCHORS:-$REPO/../shared/mpi-anchors}"
WORK="${WORK:-$HERE/.anchors}"
REPS="${REPS:-20}"
REPS64="${REPS64:-5}"
NP64="${NP64:-64}"
TRACE="${TRACE:-10}"
NOBUILD="${NOBUILD:-0}"

die() { echo "startup.sh: $*" >&2; exit 1; }

for v in REPS REPS64 NP64 TRACE; do
  [[ "${!v}" =~ ^[0-9]+$ ]] || die "$v=${!v}: want a whole number"
done
[ "$REPS" -ge 1 ] || die "REPS=$REPS: want at least 1"
for tool in go gcc python3 mpicc.openmpi mpirun.openmpi mpicc.mpich mpiexec.mpich; do
  command -v "$tool" >/dev/null ||
    die "$tool not found; needs go, gcc, python3 and: apt-get install openmpi-bin libopenmpi-dev mpich libmpich-dev"
done

STAMP="$(date -u +%Y%m%dT%H%M%SZ)"
OUT="${OUT:-$WORK/startup/$STAMP}"
A="$WORK/anchors"
B="$WORK/startup-bin"
mkdir -p "$A" "$B" "$OUT"

if [ "$NOBUILD" != 1 ]; then
  [ -f "$ANCHORS/hello.c" ] && [ -f "$ANCHORS/build.sh" ] ||
    die "no mpi-anchors at $ANCHORS (hello.c, build.sh): set ANCHORS=/path/to/mpi-anchors"
  cp "$ANCHORS"/*.c "$ANCHORS"/*.h "$ANCHORS"/build.sh "$A/"
  (cd "$A" && ./build.sh) >"$OUT/build.log" 2>&1 || die "building the anchors failed: see $OUT/build.log"
  gcc -O2 -Wall -o "$B/runtime" "$HERE/runtime.c" || die "building bench/runtime.c failed"
  (cd "$REPO" &&
    go build -o "$B/mpirun" ./cmd/mpirun &&
    go build -o "$B/hello" ./examples/hello &&
    go build -tags gompi_noplugins -o "$B/hello.noplugins" ./examples/hello) || die "building gompi failed"
fi
RT="$B/runtime"
PROBE="$A/shm_limit"

{
  echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
  echo "nproc: $(nproc)"
  uname -a
  go version
  (cd "$REPO" && git describe --always --dirty 2>/dev/null) || true
  ls -l "$B/hello" "$B/hello.noplugins" "$B/mpirun"
  echo "reps: $REPS; reps at $NP64 ranks: $REPS64; stamped rounds: $TRACE"
} >"$OUT/machine.txt" 2>&1

# CMD[NAME]: the command line of a configuration.
declare -A CMD
CMD[gompi]="$B/mpirun -np 2 $B/hello"
CMD[gompi-np]="$B/mpirun -np 2 $B/hello.noplugins"
CMD[mpich]="mpiexec.mpich -n 2 $A/hello.mpich"
CMD[ompi]="mpirun.openmpi --allow-run-as-root -np 2 $A/hello.ompi"
CMD[gompi-64]="$B/mpirun --oversubscribe -np $NP64 $B/hello.noplugins"
CMD[gompi-64p]="$B/mpirun --oversubscribe -np $NP64 $B/hello"
CMD[mpich-64]="mpiexec.mpich -n $NP64 $A/hello.mpich"

# once NAME: one timed run of a configuration, appended to OUT/NAME.us.
once() {
  # shellcheck disable=SC2086
  "$RT" 1 ${CMD[$1]} >>"$OUT/$1.us" 2>>"$OUT/$1.err" || echo "  !! $1 failed (see $OUT/$1.err)" >&2
}

echo "pre $("$PROBE" probe)" >>"$OUT/probe.log"
# A round of each first, untimed: the page cache, not the start-up, would
# be measured otherwise.
for c in gompi gompi-np mpich ompi; do
  # shellcheck disable=SC2086
  "$RT" 1 ${CMD[$c]} >/dev/null 2>&1 || true
done
# round I of the configurations NAMES...: one run of each, starting at the
# I-th, so that each follows each other one as often: in a fixed order the
# plugin-capable build always ran right after Open MPI's job and read 5-9 %
# slower than the other build, where alternating the two alone read them
# equal (9.35 against 9.51 ms, 50 pairs).
round() {
  local i=$1
  shift
  local names=("$@") n=$#
  for ((j = 0; j < n; j++)); do once "${names[$(((i + j) % n))]}"; done
}
echo "[$(date -u +%T)] $REPS rounds at 2 ranks" >&2
for ((i = 0; i < REPS; i++)); do
  round "$i" gompi gompi-np mpich ompi
done
if [ "$NP64" -gt 0 ] && [ "$REPS64" -gt 0 ]; then
  echo "[$(date -u +%T)] $REPS64 rounds at $NP64 ranks" >&2
  for ((i = 0; i < REPS64; i++)); do
    round "$i" gompi-64 gompi-64p mpich-64
  done
fi
if [ "$TRACE" -gt 0 ]; then
  echo "[$(date -u +%T)] $TRACE stamped rounds" >&2
  for ((i = 0; i < TRACE; i++)); do
    for c in gompi gompi-np; do
      echo run >>"$OUT/$c.stamps"
      # shellcheck disable=SC2086
      GOMPI_STARTUP_TRACE=1 "$RT" -t 1 ${CMD[$c]} >/dev/null 2>>"$OUT/$c.stamps" || true
    done
  done
fi
echo "post $("$PROBE" probe)" >>"$OUT/probe.log"

python3 - "$OUT" <<'EOF'
import os, statistics, sys
out = sys.argv[1]
def med(name):
    p = os.path.join(out, name + '.us')
    if not os.path.exists(p):
        return None, 0
    v = [int(l) for l in open(p) if l.strip().isdigit()]
    return (statistics.median(v) / 1000, len(v)) if v else (None, 0)
print('placement probe (one-way ns): ' + '; '.join(l.strip() for l in open(os.path.join(out, 'probe.log'))))
for group, ref in ((('gompi', 'gompi-np', 'mpich', 'ompi'), 'mpich'), (('gompi-64', 'gompi-64p', 'mpich-64'), 'mpich-64')):
    r, _ = med(ref)
    for c in group:
        m, n = med(c)
        if m is None:
            continue
        ratio = '  %.2fx %s' % (m / r, ref) if r and c != ref else ''
        print('%-10s median %9.1f ms of %2d%s' % (c, m, n, ratio))
EOF
for c in gompi gompi-np; do
  if [ -s "$OUT/$c.stamps" ]; then
    echo
    echo "== $c: ${CMD[$c]}"
    python3 "$HERE/startup_phases.py" "$OUT/$c.stamps" | sed -n '/^phases/,$p'
  fi
done
echo
echo "results: $OUT (python3 bench/startup_phases.py $OUT/gompi-np.stamps: every stamp)"
