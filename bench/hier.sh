#!/usr/bin/env bash
# bench/hier.sh - collectives on a communicator that spans two hosts: gompi
# with coll han (the default selection) and without it (--mca coll ^han:
# flat tuned over shm and tcp), beside Open MPI 4.1.4 with tuned and with
# han (--mca coll_han_priority 100), on two simulated hosts of two ranks
# each (test/netns: network, UTS and IPC namespaces joined by a bridge; the
# agent runs a command "on" a host as ssh would). Per operation and size:
# µs per call (median of REPS runs) and, for gompi, the messages and bytes
# btl tcp sent per call summed over ranks, counted by the ranks
# (Instance.TransportStats, gompi-bench's "# tcp" lines).
#
# Each table prints the coll table of MPI_COMM_WORLD of both gompi runs.
#
# The exact command lines (NS = test/netns, absolute; W = $WORK; NET =
# $NETNS_NET; hosts a and b, 2 slots each; every run with NETNS_PREFIX and
# NETNS_NET in the environment, which the agent passes on):
#
#   gompi han:  W/bin/mpirun --mca plm_rsh_agent NS/agent.sh --host a:2,b:2 -np 4 --bind-to none
#                 --mca mpi_yield_when_idle yes -x GOMAXPROCS=1 -x GOMPI_OVERSUBSCRIBED=1
#                 W/bin/gompi-bench OP --sizes SIZES --scale SCALE
#                 (which runs Allreduces for 100 ms first: gompi-bench --settle)
#   gompi flat: the same with --mca coll ^han before the program
#   ompi tuned: mpirun.openmpi --allow-run-as-root --oversubscribe --mca plm_rsh_agent NS/agent.sh
#                 --host a:2,b:2 -np 4 --bind-to none
#                 --mca btl_tcp_if_include NET.0/24 --mca oob_tcp_if_include NET.0/24
#                 --mca mpi_yield_when_idle 1
#                 W/anchors/allreduce.ompi SCALE            (allreduce and barrier: mpi-anchors)
#                 W/anchors/coll.ompi OP SIZES SCALE        (the others: bench/coll.c)
#   ompi han:   the same with --mca coll_han_priority 100 before the program
#
# Open MPI needs nothing more here: its mpirun runs in this machine's
# namespace, which setup.sh puts on the bridge as NET.1 (the orteds connect
# back to it; oob_tcp_if_include keeps mpirun from advertising the real NIC
# first), the agent starts orted from /usr/bin (its clean PATH has it), and
# the ranks run in the caller's working directory, which every host sees
# (the hosts share the filesystem). Both MPIs yield when idle: the 4
# processes share 2 cores.
#
# With the defaults a REP takes about 20 s, and the script about 1.5 minutes
# with the builds, on 2 cores. The hosts are removed at the end, whatever
# happens (trap).
#
# Environment:
#   REPS     runs of every configuration, interleaved (default 5); cells are medians
#            (a cell's ratio moves by up to 0.3 between runs of three)
#   OPS      operations (default "barrier bcast reduce allreduce allgather gather scatter")
#   SIZES    bytes per rank, gompi-bench's syntax (default 8,1k,64k,1m; allreduce.c
#            always runs its own four, and only those in SIZES are shown)
#   SCALE    times allreduce.c's iterations (100000 calls at 8 B ... 500 at 1 MiB;
#            default 0.1)
#   ANCHORS  the mpi-anchors folder (default ../shared/mpi-anchors beside the repository)
#   WORK     scratch folder (default bench/.hier, git-ignored); OUT the results
#            (default $WORK/results/<UTC stamp>)
#   NETNS_PREFIX, NETNS_NET  the simulated hosts' names and /24 (default hier and
#            10.251.23, so that a cluster made with setup.sh's defaults, or the tests',
#            is left alone)
#
# Usage: sudo bench/hier.sh                         (needs root for the namespaces)
#        REPS=1 SIZES=8,64k bench/hier.sh
#        python3 bench/hier_summary.py <OUT>        (the tables again)
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
REPO="$(cd "$HERE/.." && pwd)"
NS="$REPO/test/netns"
ANCHORS="${ANCHORS:-$REPO/../shared/mpi-anchors}"
[ -d "$ANCHORS" ] || ANCHORS=/work/shared/mpi-anchors
WORK="${WORK:-$HERE/.hier}"
REPS="${REPS:-5}"
OPS="${OPS:-barrier bcast reduce allreduce allgather gather scatter}"
SIZES="${SIZES:-8,1k,64k,1m}"
SCALE="${SCALE:-0.1}"
export NETNS_PREFIX="${NETNS_PREFIX:-hier}"
export NETNS_NET="${NETNS_NET:-10.251.23}"

die() { echo "hier.sh: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "needs root to make network namespaces (test/netns/setup.sh)"
for tool in go gcc python3 ip mpicc.openmpi mpirun.openmpi mpicc.mpich; do
  command -v "$tool" >/dev/null ||
    die "$tool not found; needs go, gcc, python3, iproute2 and: apt-get install openmpi-bin libopenmpi-dev mpich libmpich-dev"
done
[ -f "$ANCHORS/allreduce.c" ] && [ -f "$ANCHORS/build.sh" ] ||
  die "no mpi-anchors at $ANCHORS (allreduce.c, build.sh): set ANCHORS=/path/to/mpi-anchors"
[[ "$REPS" =~ ^[1-9][0-9]*$ ]] || die "REPS=$REPS: want a whole number of at least 1"
for op in $OPS; do
  case $op in barrier | bcast | reduce | allreduce | allgather | gather | scatter | alltoall) ;;
    *) die "OPS: unknown operation $op: accepted: barrier bcast reduce allreduce allgather gather scatter alltoall" ;;
  esac
done
# Another cluster on the same /24 would take the uplink's address and route.
if ip -br -4 addr | grep -v "^$NETNS_PREFIX-up" | grep -q " $NETNS_NET\.1/24"; then
  die "$NETNS_NET.0/24 is in use by another interface ($(ip -br -4 addr | grep " $NETNS_NET\.1/24" | cut -d' ' -f1)): set NETNS_NET (and NETNS_PREFIX)"
fi

STAMP="$(date -u +%Y%m%dT%H%M%SZ)"
OUT="${OUT:-$WORK/results/$STAMP}"
mkdir -p "$WORK/anchors" "$WORK/bin" "$OUT"

# Build once: the anchors in a copy (the source folder is read only), the
# C benchmark for the other operations, gompi from this checkout.
cp "$ANCHORS"/*.c "$ANCHORS"/*.h "$ANCHORS"/build.sh "$WORK/anchors/"
(cd "$WORK/anchors" && ./build.sh) >"$OUT/build.log" 2>&1 || die "building the anchors failed: see $OUT/build.log"
mpicc.openmpi -O2 -Wall -o "$WORK/anchors/coll.ompi" "$HERE/coll.c" >>"$OUT/build.log" 2>&1 ||
  die "building bench/coll.c failed: see $OUT/build.log"
(cd "$REPO" && go build -o "$WORK/bin/mpirun" ./cmd/mpirun && go build -o "$WORK/bin/gompi-bench" ./cmd/gompi-bench) ||
  die "building gompi failed"

teardown() { "$NS/teardown.sh" || echo "hier.sh: teardown.sh failed: hosts may be left (NETNS_PREFIX=$NETNS_PREFIX)" >&2; }
trap teardown EXIT
trap 'exit 130' INT TERM
"$NS/setup.sh" a b >"$OUT/setup.log" 2>&1 || die "setup.sh failed: see $OUT/setup.log"

NET="$NETNS_NET.0/24"
# The simulated hosts share this machine's cores, which mpirun cannot see
# (each host reports all of them): GOMPI_OVERSUBSCRIBED=1 says so, as
# mpirun does on a host with more ranks than cores (coll sm then lets small
# rooted calls through point-to-point, whose root runs ahead), and
# mpi_yield_when_idle yes is what it implies for waits.
GOMPI=("$WORK/bin/mpirun" --mca plm_rsh_agent "$NS/agent.sh" --host a:2,b:2 -np 4 --bind-to none
  --mca mpi_yield_when_idle yes -x GOMAXPROCS=1 -x GOMPI_OVERSUBSCRIBED=1)
OMPI=(mpirun.openmpi --allow-run-as-root --oversubscribe --mca plm_rsh_agent "$NS/agent.sh" --host a:2,b:2 -np 4 --bind-to none
  --mca btl_tcp_if_include "$NET" --mca oob_tcp_if_include "$NET" --mca mpi_yield_when_idle 1)

{
  echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
  echo "nproc: $(nproc)"
  lscpu | grep -E 'Model name' || true
  uname -r
  mpirun.openmpi --version | head -1
  go version
  (cd "$REPO" && git describe --always --dirty 2>/dev/null) || true
  echo "ops: $OPS; sizes: $SIZES; scale: $SCALE; reps: $REPS; hosts: a b on $NET (prefix $NETNS_PREFIX)"
} >"$OUT/machine.txt" 2>&1

# run LABEL REP OUTFILE CMD... : one run, its command line logged.
run() {
  local label=$1 rep=$2 out=$3
  shift 3
  echo "[$(date -u +%T)] rep $rep/$REPS: $label" >&2
  printf '%s:' "$label" >>"$OUT/commands.txt"
  printf ' %q' "$@" >>"$OUT/commands.txt"
  echo >>"$OUT/commands.txt"
  local rc=0
  timeout 900 "$@" >"$out" 2>"$out.err" || rc=$?
  if [ $rc -ne 0 ]; then
    echo "  !! $label rep $rep failed rc=$rc (see $out.err)" >&2
    echo "rc=$rc" >>"$out.err"
  fi
  [ -s "$out.err" ] || rm -f "$out.err"
}

# Both sides must start across the hosts before anything is measured; these
# runs are the warm-up too (the first job after the builds was seen 3x slow).
"${GOMPI[@]}" "$WORK/bin/gompi-bench" barrier --iterations 2000 >"$OUT/check.gompi.txt" 2>&1 ||
  die "gompi does not run on the simulated hosts: see $OUT/check.gompi.txt"
"${OMPI[@]}" "$WORK/anchors/coll.ompi" barrier 8 0.02 >"$OUT/check.ompi.txt" 2>&1 ||
  echo "hier.sh: Open MPI does not run on the simulated hosts: see $OUT/check.ompi.txt (its columns will say fail)" >&2

# Open MPI's allreduce comes from allreduce.c (its four sizes); sizes of
# SIZES it lacks come from coll.c.
extra_allreduce=$(python3 - "$SIZES" <<'EOF'
import sys
def size(s):
    s = s.strip().lower()
    m = {"k": 1 << 10, "m": 1 << 20}.get(s[-1:], 1)
    return int(s[:-1] if m > 1 else s) * m
anchor = {8, 1024, 65536, 1 << 20}
print(",".join(str(n) for n in (size(s) for s in sys.argv[1].split(",")) if n not in anchor))
EOF
)

for r in $(seq 1 "$REPS"); do
  anchor_done=
  for op in $OPS; do
    run "gompi-han $op" "$r" "$OUT/gompi.han.$op.$r.txt" "${GOMPI[@]}" "$WORK/bin/gompi-bench" "$op" --sizes "$SIZES" --scale "$SCALE"
    run "gompi-flat $op" "$r" "$OUT/gompi.flat.$op.$r.txt" "${GOMPI[@]}" --mca coll ^han "$WORK/bin/gompi-bench" "$op" --sizes "$SIZES" --scale "$SCALE"
    for cfg in tuned han; do
      cfg_opts=()
      [ $cfg = han ] && cfg_opts=(--mca coll_han_priority 100)
      case $op in
        allreduce | barrier)
          if [ -z "$anchor_done" ]; then
            run "ompi-$cfg allreduce.c" "$r" "$OUT/ompi.$cfg.anchor.$r.txt" "${OMPI[@]}" "${cfg_opts[@]}" "$WORK/anchors/allreduce.ompi" "$SCALE"
          fi
          if [ $op = allreduce ] && [ -n "$extra_allreduce" ]; then
            run "ompi-$cfg allreduce" "$r" "$OUT/ompi.$cfg.allreduce.$r.txt" "${OMPI[@]}" "${cfg_opts[@]}" "$WORK/anchors/coll.ompi" allreduce "$extra_allreduce" "$SCALE"
          fi
          ;;
        *) run "ompi-$cfg $op" "$r" "$OUT/ompi.$cfg.$op.$r.txt" "${OMPI[@]}" "${cfg_opts[@]}" "$WORK/anchors/coll.ompi" "$op" "$SIZES" "$SCALE" ;;
      esac
    done
    case $op in allreduce | barrier) anchor_done=1 ;; esac
  done
done

python3 "$HERE/hier_summary.py" "$OUT" "$OPS" "$SIZES" | tee "$OUT/tables.txt"
echo "raw results: $OUT" >&2
