#!/usr/bin/env bash
# bench/compare.sh - gompi against Open MPI on this machine, point to point.
#
# Builds the mpi-anchors benchmarks (Open MPI's pingpong.ompi and the
# shm_limit placement probe) and gompi's mpirun and gompi-bench, then runs,
# REPS times and interleaved, with the same message sizes and the same
# process binding (one core per rank) on both sides:
#
#   ompi-vader     Open MPI, --mca pml ob1 --mca btl vader,self
#   ompi-tcp       Open MPI, --mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo
#   gompi-shm      gompi, --mca btl self,shm            (tofu LLP on, the default)
#   gompi-shm-nollp  gompi, --mca btl self,shm --mca llp ^tofu
#   gompi-tcp      gompi, --mca btl self,tcp --mca llp ^tofu --mca btl_tcp_if_include lo
#   gompi-tcp-llp  gompi, --mca btl self,shm,tcp --mca btl_shm_exclusivity 10
#                  (tcp carries the normal path; small blocking sends take the LLP,
#                  which needs shm selected: with btl self,tcp tofu declines)
#
# Latency is a blocking ping-pong (one-way = round trip / 2, µs), bandwidth a
# window of 64 non-blocking sends then an ack (MB/s = 10^6 B/s), as
# pingpong.c and osu_latency/osu_bw. Both come from one job on each side
# (gompi-bench pingpong), latency first, as pingpong.c has them: the first
# ~100 ms of a job run slower on this machine, and a bandwidth measured
# there (gompi's, when bw was a job of its own) read a third lower at 1 B
# than the same job's later 1 B. The host moves this VM's two vCPUs
# between a near and a far placement and every number follows, so
# `shm_limit probe` runs before and after every run (probe.log), and both
# benchmarks probe before and after every measurement (pre=/post=, ns
# one-way); the summary (compare_summary.py) splits by placement as
# mpi-anchors/summarize.py does (near: both < 120 ns, far: both > 150 ns)
# and prints medians and gompi/Open MPI ratios.
#
# MODE=coll compares collectives instead: mpi-anchors/allreduce.c (Allreduce
# of float64 sums at 8 B, 1 KiB, 64 KiB and 1 MiB, then Barrier) under Open
# MPI (vader) and MPICH against gompi-bench allreduce and barrier (same
# method, same sizes), at NPS ranks (default "2 4"): 2 ranks bound one per
# core, 4 ranks on the 2 cores unbound on every side (Open MPI and gompi
# then yield when idle; MPICH polls). SCALE multiplies allreduce.c's
# iterations at 2 ranks, SCALE4 at more (default 1 and 0.05: MPICH's
# polling makes 4 ranks on 2 cores slow). The tables come from
# compare_coll_summary.py.
#
# MODE=nbc compares the nonblocking collectives: mpi-anchors/nbc.c (Ibarrier
# and Iallreduce of float64 sums at 8 B, 1 KiB, 64 KiB and 1 MiB: their
# latency and their overlap with a compute loop, as OSU defines it) under
# Open MPI (vader) and MPICH against gompi-bench nbc (the same lines, then
# gompi's persistent and blocking forms and the collective's own CPU time),
# at NPS ranks bound and unbound as MODE=coll, with the same SCALE and
# SCALE4; oversubscribed, Open MPI is told to yield (gompi decides so by
# itself, and turns its progress goroutine off). Beside each nbc.c run,
# bench/nbc_w.c (built with each MPI's mpicc, placement.h from the anchors)
# measures W, the collective's own CPU time per call, for Open MPI and MPICH
# as gompi-bench nbc's <op>_w line does for gompi (same binding, same
# SCALE): overlap with one core per rank cannot pass 100 * (1 - W / pure).
# The tables come from compare_nbc_summary.py.
#
# A tool, not part of CI. Needs: go, gcc, python3, and the Debian packages
# openmpi-bin libopenmpi-dev mpich libmpich-dev (mpi-anchors' build.sh builds
# the MPICH variants too).
#
# Environment:
#   ANCHORS  the mpi-anchors folder (default: ../shared/mpi-anchors beside the
#            repository); it is read only: it is copied and built in WORK
#   WORK     scratch folder (default: bench/.anchors, git-ignored)
#   OUT      results folder (default: $WORK/results/<UTC stamp>)
#   REPS     repetitions of every configuration (default 5)
#   SIZES    message sizes, bytes or with k/m (default pingpong.c's: 0,1,8,64,512,4k,32k,256k,1m,4m;
#            written into the copy of pingpong.c, so Open MPI measures the same ones)
#   ONLY     space-separated subset of the configurations above
#
# Every mode ends with SVG plots beside the tables in OUT (bench/plot.sh,
# which re-makes them from a results folder): latency and bandwidth against
# message size, log-log, per placement (p2p); µs per call against size per
# operation and rank count (coll); pure latency and overlap (nbc).
#
# Usage: bench/compare.sh            (about 6 minutes with REPS=5)
#        python3 bench/compare_summary.py <OUT>   (the tables again)
#        MODE=coll REPS=5 bench/compare.sh         (about 10 minutes)
#        python3 bench/compare_coll_summary.py <OUT>
#        MODE=nbc REPS=5 bench/compare.sh          (NPS=2 alone: about 1 minute; 4 ranks take longer, MPICH polling oversubscribed)
#        python3 bench/compare_nbc_summary.py <OUT>
#        bench/plot.sh <OUT>                       (the plots again)
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
REPO="$(cd "$HERE/.." && pwd)"
ANCHORS="${ANCHORS:-$REPO/../shared/mpi-anchors}"
WORK="${WORK:-$HERE/.anchors}"
REPS="${REPS:-5}"
SIZES="${SIZES:-0,1,8,64,512,4k,32k,256k,1m,4m}"
CONFIGS="${ONLY:-ompi-vader ompi-tcp gompi-shm gompi-shm-nollp gompi-tcp gompi-tcp-llp}"
MODE="${MODE:-p2p}"
NPS="${NPS:-2 4}"
SCALE="${SCALE:-1}"
SCALE4="${SCALE4:-0.05}"

die() { echo "compare.sh: $*" >&2; exit 1; }

[ -f "$ANCHORS/pingpong.c" ] && [ -f "$ANCHORS/build.sh" ] ||
  die "no mpi-anchors at $ANCHORS (pingpong.c, build.sh): set ANCHORS=/path/to/mpi-anchors"
for tool in go gcc python3 mpicc.openmpi mpirun.openmpi mpicc.mpich; do
  command -v "$tool" >/dev/null ||
    die "$tool not found; needs go, gcc, python3 and: apt-get install openmpi-bin libopenmpi-dev mpich libmpich-dev"
done
[[ "$REPS" =~ ^[1-9][0-9]*$ ]] || die "REPS=$REPS: want a whole number of at least 1"
[ "$MODE" = p2p ] || [ "$MODE" = coll ] || [ "$MODE" = nbc ] || die "MODE=$MODE: accepted: p2p, coll, nbc"

STAMP="$(date -u +%Y%m%dT%H%M%SZ)"
OUT="${OUT:-$WORK/results/$STAMP}"
mkdir -p "$WORK/anchors" "$WORK/bin" "$OUT"

# Build: the anchors in a copy (the source folder is read only), gompi from
# this checkout.
cp "$ANCHORS"/*.c "$ANCHORS"/*.h "$ANCHORS"/build.sh "$WORK/anchors/"
# pingpong.c has its sizes in a table and no option for them: the copy gets
# SIZES written into that table, so that both sides measure the same sizes
# (4k,8k,16k... for the mid-size rendezvous) with pingpong.c's own iteration
# counts.
bytes=()
IFS=, read -ra words <<<"$SIZES"
for w in "${words[@]}"; do
  case $w in
    *[kK]) bytes+=($((${w%?} * 1024))) ;;
    *[mM]) bytes+=($((${w%?} * 1048576))) ;;
    *) [[ "$w" =~ ^[0-9]+$ ]] || die "SIZES=$SIZES: $w is not a size (bytes, or with a k or m suffix)"
       bytes+=("$w") ;;
  esac
  [ "${bytes[-1]}" -le 4194304 ] || die "SIZES=$SIZES: $w is above pingpong.c's 4 MiB buffers"
done
table="$(IFS=,; echo "${bytes[*]}")"
sed -i "s/^static const long sizes\[\] = {[^}]*};/static const long sizes[] = {$table};/" "$WORK/anchors/pingpong.c"
grep -q "^static const long sizes\[\] = {$table};" "$WORK/anchors/pingpong.c" ||
  die "could not write SIZES into pingpong.c's size table (its form changed?)"
(cd "$WORK/anchors" && ./build.sh) >"$OUT/build.log" 2>&1 || die "building the anchors failed: see $OUT/build.log"
(cd "$REPO" && go build -o "$WORK/bin/mpirun" ./cmd/mpirun && go build -o "$WORK/bin/gompi-bench" ./cmd/gompi-bench) ||
  die "building gompi failed"
if [ "$MODE" = nbc ]; then
  # nbc_w.c is gompi's: built as the anchors are, beside them.
  {
    mpicc.openmpi -O2 -Wall -I"$WORK/anchors" -o "$WORK/anchors/nbc_w.ompi" "$HERE/nbc_w.c" &&
      mpicc.mpich -O2 -Wall -Wno-stringop-overflow -I"$WORK/anchors" -o "$WORK/anchors/nbc_w.mpich" "$HERE/nbc_w.c"
  } >>"$OUT/build.log" 2>&1 || die "building bench/nbc_w.c failed: see $OUT/build.log"
fi
PROBE="$WORK/anchors/shm_limit"
PINGPONG="$WORK/anchors/pingpong.ompi"
GMPIRUN="$WORK/bin/mpirun"
GBENCH="$WORK/bin/gompi-bench"

{
  echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
  echo "nproc: $(nproc)"
  lscpu | grep -E 'Model name|^CPU\(s\)|Thread|L2|L3' || true
  uname -a
  mpirun.openmpi --version | head -1
  go version
  (cd "$REPO" && git describe --always --dirty 2>/dev/null) || true
  echo "mode: $MODE; sizes: $SIZES; reps: $REPS; configurations: $CONFIGS; ranks (coll): $NPS"
} >"$OUT/machine.txt" 2>&1

# Both sides: 2 ranks, each bound to a core of its own.
OMPI=(mpirun.openmpi --allow-run-as-root --oversubscribe -np 2 --bind-to core --mca pml ob1)
GOMPI=("$GMPIRUN" -np 2 --bind-to core)
# pingpong.c's size table is SIZES (written above); gompi-bench gets them as an option.
gbench() { "${GOMPI[@]}" "$@"; }

# run LABEL REP OUTFILE CMD... : one run between two placement probes.
run() {
  local label=$1 rep=$2 out=$3
  shift 3
  echo "$label rep=$rep when=pre $("$PROBE" probe)" >>"$OUT/probe.log"
  echo "[$(date -u +%T)] rep $rep/$REPS: $label" >&2
  local rc=0
  timeout 900 "$@" >"$out" 2>"$out.err" || rc=$?
  echo "$label rep=$rep when=post $("$PROBE" probe)" >>"$OUT/probe.log"
  [ $rc -eq 0 ] || echo "  !! $label rep $rep failed rc=$rc (see $out.err)" >&2
  [ -s "$out.err" ] || rm -f "$out.err"
}

gompi_cfg() {
  case $1 in
    gompi-shm) echo "--mca btl self,shm" ;;
    gompi-shm-nollp) echo "--mca btl self,shm --mca llp ^tofu" ;;
    gompi-tcp) echo "--mca btl self,tcp --mca llp ^tofu --mca btl_tcp_if_include lo" ;;
    gompi-tcp-llp) echo "--mca btl self,shm,tcp --mca btl_shm_exclusivity 10 --mca btl_tcp_if_include lo" ;;
  esac
}

# coll NP: the collectives at NP ranks, every side, REPS times interleaved.
coll() {
  local np=$1 scale=$SCALE bind=(--bind-to core) mbind=(-bind-to core)
  if [ "$np" -gt "$(nproc)" ]; then
    scale=$SCALE4 bind=(--bind-to none) mbind=(-bind-to none)
  fi
  local ompi=(mpirun.openmpi --allow-run-as-root --oversubscribe -np "$np" "${bind[@]}" --mca pml ob1 --mca btl vader,self)
  local mpich=(mpiexec.mpich -n "$np" "${mbind[@]}")
  local gompi=("$GMPIRUN" -np "$np" "${bind[@]}" --mca btl self,shm)
  for r in $(seq 1 "$REPS"); do
    run "ompi.np$np" "$r" "$OUT/coll.ompi.np$np.$r.txt" "${ompi[@]}" "$WORK/anchors/allreduce.ompi" "$scale"
    run "mpich.np$np" "$r" "$OUT/coll.mpich.np$np.$r.txt" "${mpich[@]}" "$WORK/anchors/allreduce.mpich" "$scale"
    run "gompi.np$np" "$r" "$OUT/coll.gompi.np$np.$r.allreduce.txt" "${gompi[@]}" "$GBENCH" allreduce --sizes 8,1k,64k,1m --scale "$scale" --probe
    run "gompi.np$np" "$r" "$OUT/coll.gompi.np$np.$r.barrier.txt" "${gompi[@]}" "$GBENCH" barrier --scale "$scale" --probe
  done
}

# nbc NP: the nonblocking collectives at NP ranks, every side, REPS times
# interleaved.
nbc() {
  local np=$1 scale=$SCALE bind=(--bind-to core) mbind=(-bind-to core) yield=()
  if [ "$np" -gt "$(nproc)" ]; then
    scale=$SCALE4 bind=(--bind-to none) mbind=(-bind-to none) yield=(--mca mpi_yield_when_idle 1)
  fi
  local ompi=(mpirun.openmpi --allow-run-as-root --oversubscribe -np "$np" "${bind[@]}" "${yield[@]}" --mca pml ob1 --mca btl vader,self)
  local mpich=(mpiexec.mpich -n "$np" "${mbind[@]}")
  local gompi=("$GMPIRUN" -np "$np" "${bind[@]}" --mca btl self,shm)
  for r in $(seq 1 "$REPS"); do
    run "ompi.np$np" "$r" "$OUT/nbc.ompi.np$np.$r.txt" "${ompi[@]}" "$WORK/anchors/nbc.ompi" "$scale"
    run "ompi_w.np$np" "$r" "$OUT/nbc_w.ompi.np$np.$r.txt" "${ompi[@]}" "$WORK/anchors/nbc_w.ompi" "$scale"
    run "mpich.np$np" "$r" "$OUT/nbc.mpich.np$np.$r.txt" "${mpich[@]}" "$WORK/anchors/nbc.mpich" "$scale"
    run "mpich_w.np$np" "$r" "$OUT/nbc_w.mpich.np$np.$r.txt" "${mpich[@]}" "$WORK/anchors/nbc_w.mpich" "$scale"
    run "gompi.np$np" "$r" "$OUT/nbc.gompi.np$np.$r.txt" "${gompi[@]}" "$GBENCH" nbc --scale "$scale" --probe
  done
}

# plots: the SVG plots beside the tables (bench/plot.sh, which can also
# re-make them later from the folder). A run is long: if drawing fails, the
# raw files and tables stay and the run still succeeds.
plots() {
  bash "$HERE/plot.sh" "$OUT" >"$OUT/plots.log" 2>&1 ||
    echo "compare.sh: the plots failed (see $OUT/plots.log); re-make them with bench/plot.sh $OUT" >&2
  grep -h '\.svg$' "$OUT/plots.log" | sed 's/^/plot: /' >&2 || true
}

if [ "$MODE" = nbc ]; then
  "$GMPIRUN" -np 2 "$GBENCH" nbc --sizes 8 --iterations 100 >/dev/null || die "gompi-bench does not run"
  for np in $NPS; do nbc "$np"; done
  python3 "$HERE/compare_nbc_summary.py" "$OUT" | tee "$OUT/tables.md"
  plots
  echo "raw results: $OUT" >&2
  exit 0
fi

if [ "$MODE" = coll ]; then
  "$GMPIRUN" -np 2 "$GBENCH" allreduce --sizes 8 --iterations 100 >/dev/null || die "gompi-bench does not run"
  for np in $NPS; do coll "$np"; done
  python3 "$HERE/compare_coll_summary.py" "$OUT" | tee "$OUT/tables.md"
  plots
  echo "raw results: $OUT" >&2
  exit 0
fi

# A warm-up of each side first: the first runs after a build or install are
# slow.
"${OMPI[@]}" --mca btl vader,self "$PINGPONG" 0.05 >/dev/null 2>&1 || die "Open MPI's pingpong does not run"
gbench "$GBENCH" latency --sizes 8 --iterations 1000 >/dev/null || die "gompi-bench does not run"

for r in $(seq 1 "$REPS"); do
  for cfg in $CONFIGS; do
    case $cfg in
      ompi-vader) run "$cfg" "$r" "$OUT/pp.$cfg.$r.txt" "${OMPI[@]}" --mca btl vader,self "$PINGPONG" ;;
      ompi-tcp) run "$cfg" "$r" "$OUT/pp.$cfg.$r.txt" "${OMPI[@]}" --mca btl tcp,self --mca btl_tcp_if_include lo "$PINGPONG" ;;
      gompi-*)
        # One job, latency then bw, as pingpong.c (see the header).
        # shellcheck disable=SC2046 # the options are words
        run "$cfg" "$r" "$OUT/pp.$cfg.$r.txt" "${GOMPI[@]}" $(gompi_cfg "$cfg") "$GBENCH" pingpong --sizes "$SIZES" --probe
        awk -v lat="$OUT/lat.$cfg.$r.txt" -v bw="$OUT/bw.$cfg.$r.txt" \
          '/^# communicator:/ { n++ } { print > (n <= 1 ? lat : bw) }' "$OUT/pp.$cfg.$r.txt"
        rm -f "$OUT/pp.$cfg.$r.txt"
        ;;
      *) die "unknown configuration $cfg" ;;
    esac
  done
done

python3 "$HERE/compare_summary.py" "$OUT" | tee "$OUT/tables.md"
plots
echo "raw results: $OUT" >&2
