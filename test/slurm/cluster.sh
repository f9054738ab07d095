# shellcheck shell=bash
# Sourced by test/slurm/run.sh and test/shmlife/run.sh: brings up a private
# Slurm cluster on this machine (one node, or two nodes that are both this
# host) and stops it again. It defines functions and runs nothing.
#
#   slurm_prepare        checks for root and Slurm (installing it with apt-get
#                        when missing); on failure returns 1 with the reason
#                        in $slurm_skip_reason
#   start_cluster 1|2    starts slurmctld and one or two slurmd; exits 1 (with
#                        failed=1) when they do not come up
#   stop_cluster         stops the daemons start_cluster started, by pid
#   cluster_logs         prints the last lines of the daemons' logs
#
# The caller provides say (a message), $dir (a temporary directory it
# removes at exit) and $failed, and calls stop_cluster at exit, also on
# failure. Slurm's packages are only ever installed, never removed:
# Debian's MPICH and Open MPI depend on libslurm and libmunge, and purging
# Slurm or munge takes them along.
#
# The cluster is private to the run: its slurm.conf, state, spool, logs and
# pid files live in $dir/cluster<N> (SLURM_CONF points at it; /etc/slurm is
# not touched), its daemons listen on their own ports
# (SLURM_TEST_CTLD_PORT, SLURM_TEST_SLURMD_PORT), and authentication is
# auth/none, so munged is not needed. ProctrackType=proctrack/linuxproc and
# TaskPlugin=task/none because the cgroup plugins fail in containers;
# SelectTypeParameters=CR_Core and OverSubscribe so that steps share the
# node (srun -O then lets 4 tasks outnumber the cores).

CTLD_PORT=${SLURM_TEST_CTLD_PORT:-16817}
SLURMD_PORT=${SLURM_TEST_SLURMD_PORT:-16818}
pids=()
slurm_skip_reason=

slurm_prepare() {
  if [ "$(id -u)" != 0 ]; then
    slurm_skip_reason="needs root (slurmd launches the tasks); run as root: sudo $0"
    return 1
  fi
  # Install what is missing. Only install: never purge or remove (see above).
  if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null || ! command -v srun >/dev/null; then
    if ! command -v apt-get >/dev/null; then
      slurm_skip_reason="Slurm is not installed and there is no apt-get to install it"
      return 1
    fi
    say "installing slurmctld slurmd slurm-client munge"
    export DEBIAN_FRONTEND=noninteractive
    if ! { apt-get update -qq && apt-get install -y -qq --no-install-recommends slurmctld slurmd slurm-client munge; } >/tmp/gompi-slurm-apt.log 2>&1; then
      tail -5 /tmp/gompi-slurm-apt.log
      slurm_skip_reason="apt-get could not install slurmctld slurmd slurm-client munge (log: /tmp/gompi-slurm-apt.log)"
      return 1
    fi
  fi
  local plugdir
  plugdir=$(dirname "$(find /usr/lib -name mpi_pmi2.so -path '*slurm*' 2>/dev/null | head -1)")
  if [ ! -f "$plugdir/mpi_pmi2.so" ]; then
    slurm_skip_reason="Slurm is installed but has no mpi_pmi2 plugin"
    return 1
  fi
  # This machine's node line as slurmd sees it (CPUs, sockets, cores, memory).
  host=$(hostname -s)
  hw=$(slurmd -C 2>/dev/null | head -1 | sed -E 's/^NodeName=[^ ]+ //; s/ *UpTime=.*//')
  [ -n "$hw" ] || hw="CPUs=$(nproc)"
  export SLURM_CONF
  return 0
}

# stop_cluster stops only the daemons start_cluster started, by pid, and
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

cluster_logs() {
  for f in "$dir"/cluster*/log/*.log; do [ -f "$f" ] && { echo "--- $f (last lines)"; tail -20 "$f"; }; done
}

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
