#!/usr/bin/env bash
# Starts gompi programs with Slurm's srun --mpi=pmi2 on a one-node Slurm that
# this script brings up on this machine, then on a Slurm of two nodes that
# are both this host, checks their output, and stops the daemons it started,
# also on failure.
#
#   sudo test/slurm/run.sh            (from anywhere; CI runs it as root)
#
# Exit status: 0 passed, 1 failed, 77 skipped (not root, Slurm's packages not
# installable); the reason is printed on the last line as "skipped: <why>".
#
# It needs root (slurmd launches tasks as their user) and Debian's slurmctld,
# slurmd and slurm-client, which it installs with apt-get when they are
# missing (never removing any). The cluster is private to this run and
# brought up by cluster.sh (beside this script; test/shmlife/run.sh uses it
# too), which says how. Every srun runs under a timeout: Slurm's failures
# hang rather than fail.
#
# The abort case also checks that the aborted job left no file in /dev/shm
# (issue [shmlife]): under srun nobody sweeps what the ranks' segments left.
set -uo pipefail

SRUN_TIMEOUT=${SRUN_TIMEOUT:-60}

root=$(cd "$(dirname "$0")/../.." && pwd)
skip() { echo "skipped: $*"; exit 77; }
say() { echo "slurm-test: $*"; }
# shellcheck source=test/slurm/cluster.sh
. "$root/test/slurm/cluster.sh"

command -v go >/dev/null || skip "no go on PATH"
command -v timeout >/dev/null || skip "no timeout(1) (coreutils)"
slurm_prepare || skip "$slurm_skip_reason"

dir=$(mktemp -d /tmp/gompi-slurm.XXXXXX)
failed=0
cleanup() {
  stop_cluster
  [ "$failed" != 0 ] && cluster_logs
  rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

say "building the examples"
(cd "$root" && go build -o "$dir/bin/ring" ./examples/ring && go build -o "$dir/bin/collectives" ./examples/collectives &&
  go build -o "$dir/bin/hello" ./examples/hello && go build -o "$dir/bin/abort" ./test/slurm/abort) || { failed=1; say "FAIL: go build"; exit 1; }

# run NAME EXPECTED-STATUS SRUN-ARGS…: srun under a timeout; output in $out.
# A task that fails ends the step at once (--kill-on-bad-exit) unless kob is
# emptied.
out=
kob=--kill-on-bad-exit=1
run() {
  local name=$1 want=$2
  shift 2
  local t0=$EPOCHREALTIME st
  out=$(timeout -k 5 "$SRUN_TIMEOUT" srun $kob "$@" 2>&1)
  st=$?
  echo "\$ srun $kob $* (exit $st, $(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.2f", b - a }') s)"
  sed 's/^/    /' <<<"$out"
  if [ "$st" = 124 ] || [ "$st" = 137 -a "$want" != fail ]; then
    say "FAIL: $name: srun timed out after ${SRUN_TIMEOUT}s"
    failed=1
    return 1
  fi
  if [ "$want" = ok ] && [ "$st" != 0 ]; then
    say "FAIL: $name: srun exited $st"
    failed=1
    return 1
  fi
  if [ "$want" = fail ] && [ "$st" = 0 ]; then
    say "FAIL: $name: srun exited 0, want a failure"
    failed=1
    return 1
  fi
  if grep -q 'mpi/pmi2: \(invalid\|no value\|unsupported\)' <<<"$out"; then
    say "FAIL: $name: Slurm's PMI-2 server complained"
    failed=1
    return 1
  fi
  return 0
}
# shm_files lists gompi's files in /dev/shm, sorted (for comm).
shm_files() { find /dev/shm -maxdepth 1 -name 'gompi-*' 2>/dev/null | sort; }
expect() { # NAME PATTERN: a line of $out must match the extended regexp
  if ! grep -Eq "$2" <<<"$out"; then
    say "FAIL: $1: no line matches /$2/"
    failed=1
  fi
}

start_cluster 1

# The token goes round 4 ranks: rank r (r>0) gets value r-1 from r-1, rank 0
# gets 3 from rank 3.
if run ring ok -O --mpi=pmi2 -n 4 "$dir/bin/ring"; then
  for r in 1 2 3; do expect ring "^rank $r received the token \(value $((r - 1))\) from rank $((r - 1))\$"; done
  expect ring '^rank 0 received the token \(value 3\) from rank 3$'
  expect ring '^token went around 4 ranks$'
fi

# An Allreduce of the ranks' numbers: 0+1+2+3 = 6 on every rank.
if run collectives ok -O --mpi=pmi2 -n 4 "$dir/bin/collectives"; then
  for r in 0 1 2 3; do expect collectives "^rank $r: sum 6; "; done
fi

# Each rank's place: 4 ranks, one node.
if run hello ok -O --mpi=pmi2 -n 4 "$dir/bin/hello"; then
  for r in 0 1 2 3; do expect hello "^hello from rank $r of 4 on "; done
fi

# Without --mpi=pmi2 the tasks have no PMI: each must refuse to start rather
# than run as one of 2 singletons.
if run no-pmi fail -O --mpi=none -n 2 "$dir/bin/ring"; then
  expect no-pmi 'SLURM_STEP_NUM_TASKS=2 is set but there is no PMI_FD or PMI_PORT'
  expect no-pmi 'srun --mpi=pmi2'
fi

# Abort over PMI-2: rank 1 aborts while the others wait in a barrier it never
# joins. Without --kill-on-bad-exit only the abort command can end the step
# (Slurm cancels it) before the timeout.
kob=
shm_before=$(shm_files)
if run abort fail -O --mpi=pmi2 -n 3 "$dir/bin/abort"; then
  expect abort '^rank 1 calls Abort\(3\)$'
  expect abort 'CANCELLED'
  if grep -q 'passed a barrier' <<<"$out"; then
    say "FAIL: abort: a rank passed the barrier"
    failed=1
  fi
fi
kob=--kill-on-bad-exit=1
# The aborted job must leave nothing in /dev/shm: under srun no launcher
# removes a job's files, so the ranks' segments must go by themselves
# (issue [shmlife]). Its files are those new since before the case (the
# steps run one at a time); the tasks may outlive srun a moment.
for _ in $(seq 40); do
  left=$(comm -13 <(echo "$shm_before") <(shm_files))
  [ -z "$left" ] && break
  sleep 0.05
done
if [ -n "$left" ]; then
  say "FAIL: abort: the job left files in /dev/shm (removing them):"
  sed 's/^/    /' <<<"$left"
  xargs rm -f <<<"$left"
  failed=1
fi

# GOMPI_PMI=1 chooses PMI-1, which Slurm's pmi2 plugin also serves on the
# same descriptor.
if run pmi1 ok -O --mpi=pmi2 -n 2 --export=ALL,GOMPI_PMI=1 "$dir/bin/ring"; then
  expect pmi1 '^token went around 2 ranks$'
fi

# The override: a wrong value is refused with a message saying what to use.
if run bad-override fail -O --mpi=pmi2 -n 2 --export=ALL,GOMPI_PMI=3 "$dir/bin/ring"; then
  expect bad-override 'GOMPI_PMI="3": use 1'
fi

# Which wire each step spoke, from slurmstepd's log: PMI-2 for ring,
# collectives, hello and abort, PMI-1 for the GOMPI_PMI=1 run.
v2=$(grep -c 'got client PMI1 init, version=2.0' "$dir/cluster1/log/slurmd.log")
v1=$(grep -c 'got client PMI1 init, version=1.1' "$dir/cluster1/log/slurmd.log")
say "slurmstepd: $v2 steps spoke PMI-2, $v1 PMI-1"
if [ "$v2" != 4 ] || [ "$v1" != 1 ]; then
  say "FAIL: want 4 steps on PMI-2 and 1 on PMI-1"
  failed=1
fi

stop_cluster

# Two Slurm nodes on this host: the block layout puts ranks 0-1 on n1 and
# 2-3 on n2 (PMI_process_mapping (vector,(0,2,2))), so the modex has a
# leader per node, ranks of different nodes talk over TCP, and the fence
# goes from one stepd to the other through srun.
start_cluster 2
if run ring-2nodes ok -O --mpi=pmi2 -N 2 -n 4 "$dir/bin/ring"; then
  for r in 1 2 3; do expect ring-2nodes "^rank $r received the token \(value $((r - 1))\) from rank $((r - 1))\$"; done
  expect ring-2nodes '^token went around 4 ranks$'
fi
if run collectives-2nodes ok -O --mpi=pmi2 -N 2 -n 4 "$dir/bin/collectives"; then
  # Two nodes: the collectives go through coll han (node phase, leaders, node phase).
  for r in 0 1 2 3; do expect collectives-2nodes "^rank $r: sum 6; .*allreduce=han>"; done
fi
if run hello-2nodes ok -O --mpi=pmi2 -N 2 -n 4 "$dir/bin/hello"; then
  for r in 0 1; do expect hello-2nodes "^hello from rank $r of 4 on n1\$"; done
  for r in 2 3; do expect hello-2nodes "^hello from rank $r of 4 on n2\$"; done
fi
for node in n1 n2; do
  v2=$(grep -c 'got client PMI1 init, version=2.0' "$dir/cluster2/log/slurmd-$node.log")
  say "slurmstepd on $node: $v2 steps spoke PMI-2"
  [ "$v2" = 3 ] || { say "FAIL: want 3 steps on PMI-2 on $node"; failed=1; }
done

if [ "$failed" = 0 ]; then
  say "PASS: srun --mpi=pmi2 runs gompi programs"
  exit 0
fi
say "FAIL"
exit 1
