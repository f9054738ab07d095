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
# missing. It never removes packages: Debian's MPICH and Open MPI depend on
# libslurm and libmunge, and purging Slurm or munge takes them along.
#
# The cluster is private to this run: its slurm.conf, state, spool, logs and
# pid files live in a temporary directory (SLURM_CONF points at it; /etc/slurm
# is not touched), its daemons listen on their own ports, and authentication
# is auth/none, so munged is not needed. ProctrackType=proctrack/linuxproc and
# TaskPlugin=task/none because the cgroup plugins fail in containers;
# SelectTypeParameters=CR_Core and OverSubscribe so that steps share the
# node; srun -O because 4 tasks outnumber the cores. Every srun runs under a
# timeout: Slurm's failures hang rather than fail.
set -uo pipefail

SRUN_TIMEOUT=${SRUN_TIMEOUT:-60}
CTLD_PORT=${SLURM_TEST_CTLD_PORT:-16817}
SLURMD_PORT=${SLURM_TEST_SLURMD_PORT:-16818}

root=$(cd "$(dirname "$0")/../.." && pwd)
skip() { echo "skipped: $*"; exit 77; }
say() { echo "slurm-test: $*"; }

[ "$(id -u)" = 0 ] || skip "needs root (slurmd launches the tasks); run as root: sudo $0"
command -v go >/dev/null || skip "no go on PATH"
command -v timeout >/dev/null || skip "no timeout(1) (coreutils)"

# Install what is missing. Only install: never purge or remove (see above).
if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null || ! command -v srun >/dev/null; then
  command -v apt-get >/dev/null || skip "Slurm is not installed and there is no apt-get to install it"
  say "installing slurmctld slurmd slurm-client munge"
  export DEBIAN_FRONTEND=noninteractive
  if ! { apt-get update -qq && apt-get install -y -qq --no-install-recommends slurmctld slurmd slurm-client munge; } >/tmp/gompi-slurm-apt.log 2>&1; then
    tail -5 /tmp/gompi-slurm-apt.log
    skip "apt-get could not install slurmctld slurmd slurm-client munge (log: /tmp/gompi-slurm-apt.log)"
  fi
fi
plugdir=$(dirname "$(find /usr/lib -name mpi_pmi2.so -path '*slurm*' 2>/dev/null | head -1)")
[ -f "$plugdir/mpi_pmi2.so" ] || skip "Slurm is installed but has no mpi_pmi2 plugin"

dir=$(mktemp -d /tmp/gompi-slurm.XXXXXX)
pids=()
failed=0
# stop_cluster stops only the daemons this script started, by pid, and
# waits for them.
stop_cluster() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null; done
  for pid in "${pids[@]}"; do
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
    kill -9 "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
  done
  pids=()
}
cleanup() {
  stop_cluster
  if [ "$failed" != 0 ]; then
    for f in "$dir"/cluster*/log/*.log; do [ -f "$f" ] && { echo "--- $f (last lines)"; tail -20 "$f"; }; done
  fi
  rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

say "building the examples"
(cd "$root" && go build -o "$dir/bin/ring" ./examples/ring && go build -o "$dir/bin/collectives" ./examples/collectives &&
  go build -o "$dir/bin/hello" ./examples/hello && go build -o "$dir/bin/abort" ./test/slurm/abort) || { failed=1; say "FAIL: go build"; exit 1; }

# This machine's node line as slurmd sees it (CPUs, sockets, cores, memory).
host=$(hostname -s)
hw=$(slurmd -C 2>/dev/null | head -1 | sed -E 's/^NodeName=[^ ]+ //; s/ *UpTime=.*//')
[ -n "$hw" ] || hw="CPUs=$(nproc)"
export SLURM_CONF

# start_cluster 1|2: a cluster of this host as one node, or as two nodes n1
# and n2 (two slurmd on one host, one CPU each: Debian builds Slurm with
# MULTIPLE_SLURMD), each cluster with a fresh state directory.
start_cluster() {
  local n=$1 c=$dir/cluster$1 node states=
  mkdir -p "$c"/state "$c"/log
  SLURM_CONF=$c/slurm.conf
  {
    echo "ClusterName=gompitest"
    echo "SlurmctldHost=$host"
    echo "SlurmctldPort=$CTLD_PORT"
    echo "AuthType=auth/none"
    echo "CredType=cred/none"
    echo "ProctrackType=proctrack/linuxproc"
    echo "TaskPlugin=task/none"
    echo "SelectType=select/cons_tres"
    echo "SelectTypeParameters=CR_Core"
    echo "MpiDefault=none"
    echo "ReturnToService=2"
    echo "StateSaveLocation=$c/state"
    echo "SlurmctldPidFile=$c/slurmctld.pid"
    echo "SlurmctldLogFile=$c/log/slurmctld.log"
    echo "SlurmdDebug=debug"
    if [ "$n" = 1 ]; then
      echo "SlurmdPort=$SLURMD_PORT"
      echo "SlurmdSpoolDir=$c/spool"
      echo "SlurmdPidFile=$c/slurmd.pid"
      echo "SlurmdLogFile=$c/log/slurmd.log"
      echo "NodeName=$host $hw State=UNKNOWN"
    else
      echo "SlurmdSpoolDir=$c/spool/%n"
      echo "SlurmdPidFile=$c/slurmd-%n.pid"
      echo "SlurmdLogFile=$c/log/slurmd-%n.log"
      echo "NodeName=n[1-2] NodeHostname=$host NodeAddr=127.0.0.1 Port=[$SLURMD_PORT-$((SLURMD_PORT + 1))] CPUs=1 RealMemory=1000 State=UNKNOWN"
    fi
    echo "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4"
  } >"$SLURM_CONF"
  mkdir -p "$c"/spool/n1 "$c"/spool/n2 # slurmd does not create the parent of %n
  say "starting slurmctld and $n slurmd ($SLURM_CONF)"
  slurmctld -D -f "$SLURM_CONF" >"$c/log/slurmctld.out" 2>&1 &
  pids+=($!)
  if [ "$n" = 1 ]; then
    slurmd -D -f "$SLURM_CONF" >"$c/log/slurmd.out" 2>&1 &
    pids+=($!)
  else
    for node in n1 n2; do
      slurmd -D -N "$node" -f "$SLURM_CONF" >"$c/log/slurmd-$node.out" 2>&1 &
      pids+=($!)
    done
  fi
  for _ in $(seq 300); do
    states=$(timeout 5 sinfo -h -N -o %T 2>/dev/null | sort | uniq -c | xargs)
    [ "$states" = "$n idle" ] && break
    for pid in "${pids[@]}"; do
      kill -0 "$pid" 2>/dev/null || { failed=1; cat "$c"/log/*.out; say "FAIL: a Slurm daemon exited at start (see above)"; exit 1; }
    done
    sleep 0.1
  done
  if [ "$states" != "$n idle" ]; then
    failed=1
    cat "$c"/log/*.out
    say "FAIL: the nodes did not become idle within 30 s (states: ${states:-none})"
    exit 1
  fi
  say "idle: $(sinfo -h -N -o '%N (%c CPUs)' | xargs)"
}

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
if run abort fail -O --mpi=pmi2 -n 3 "$dir/bin/abort"; then
  expect abort '^rank 1 calls Abort\(3\)$'
  expect abort 'CANCELLED'
  if grep -q 'passed a barrier' <<<"$out"; then
    say "FAIL: abort: a rank passed the barrier"
    failed=1
  fi
fi
kob=--kill-on-bad-exit=1

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
