#!/usr/bin/env bash
# bench/tcptrace/trace.sh - what each MPI's rank does per 8-byte message
# over tcp: system calls by kind, context switches, user and system CPU,
# and TCP segments sent, for Open MPI's btl tcp and gompi's, from a count of
# kernel tracepoints on rank 1 (the echoing rank) with perf stat.
#
# Each configuration runs twice, with N1 and N2 round trips; the difference
# divided by N2-N1 is the cost of one round trip of rank 1 (one message
# received, one sent), without start-up and teardown.
#
# Environment: WORK (scratch, default /tmp/bench-tcptrace), N1, N2 (default
# 20000, 80000), GOMPI (a folder with gompi's mpirun and gompi-bench; built
# from this repository when unset), ONLY (ompi and/or gompi).
# Needs perf (linux-perf) with tracepoints readable, mpicc.openmpi.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
WORK="${WORK:-/tmp/bench-tcptrace}"
N1="${N1:-20000}" N2="${N2:-80000}"
ONLY="${ONLY:-ompi gompi}"
mkdir -p "$WORK/bin"
mpicc.openmpi -O2 -o "$WORK/bin/pp8.ompi" "$HERE/pp8.c"
if [ -z "${GOMPI:-}" ]; then
  (cd "$REPO" && go build -o "$WORK/bin/mpirun" ./cmd/mpirun && go build -o "$WORK/bin/gompi-bench" ./cmd/gompi-bench)
  GOMPI="$WORK/bin"
fi
EV=task-clock,context-switches,cpu-migrations,raw_syscalls:sys_enter
for s in read readv recvfrom recvmsg write writev sendto sendmsg poll ppoll epoll_wait epoll_pwait futex \
  sched_yield nanosleep tgkill rt_sigreturn; do
  EV="$EV,syscalls:sys_enter_$s"
done
cat >"$WORK/bin/rank1.sh" <<EOS
#!/bin/sh
# rank 1 under perf stat, the others plain
if [ "\$OMPI_COMM_WORLD_RANK" = 1 ]; then exec perf stat -x, -e $EV -o "\$PERFOUT" "\$@"; fi
exec "\$@"
EOS
chmod +x "$WORK/bin/rank1.sh"
segs() { awk '/^Tcp:/{if(h){print $12}; h=1}' /proc/net/snmp; }
one() { # one run: name n -> $WORK/<name>.<n>.perf, prints the one-way µs
  local name=$1 n=$2 out="$WORK/$1.$2.perf" s0 s1
  s0=$(segs)
  case $name in
    ompi) PERFOUT=$out mpirun.openmpi --allow-run-as-root --oversubscribe -np 2 --bind-to core --mca pml ob1 \
            --mca btl tcp,self --mca btl_tcp_if_include lo -x PERFOUT "$WORK/bin/rank1.sh" "$WORK/bin/pp8.ompi" "$n" 0 |
            awk '{print $4}' ;;
    gompi) PERFOUT=$out "$GOMPI/mpirun" -np 2 --bind-to core --mca btl self,tcp --mca llp ^tofu \
            --mca btl_tcp_if_include lo "$WORK/bin/rank1.sh" "$GOMPI/gompi-bench" latency --sizes 8 \
            --iterations "$n" | awk '/^8 /{print "us=" $2}' ;;
  esac
  s1=$(segs)
  echo "segs,$((s1 - s0))" >>"$out"
}
for name in $ONLY; do
  a=$(one "$name" "$N1") b=$(one "$name" "$N2")
  # gompi-bench adds a tenth as warm-up; pp8 is given none.
  python3 - "$WORK/$name.$N1.perf" "$WORK/$name.$N2.perf" "$N1" "$N2" "$name" "$a" "$b" <<'EOP'
import sys, re
def load(p):
    d = {}
    for line in open(p):
        f = line.strip().split(',')
        if len(f) >= 3 and f[0] and not line.startswith('#'):
            try: d[f[2]] = float(f[0])
            except ValueError: pass
        elif len(f) == 2 and f[0] == 'segs':
            d['tcp segments sent (machine)'] = float(f[1])
    for k, v in re.findall(r'([\d.]+) seconds (user|sys)', open(p).read()):
        pass
    return d
a, b = load(sys.argv[1]), load(sys.argv[2])
n1, n2, name = int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
scale = 1.1 if name == 'gompi' else 1.0
trips = (n2 - n1) * scale
print(f"{name}: one-way {sys.argv[6]} (N={n1}), {sys.argv[7]} (N={n2}); per round trip of rank 1:")
for k in b:
    v = (b[k] - a.get(k, 0)) / trips
    if k == 'task-clock':
        print(f"  {'cpu µs (task-clock)':34s} {v*1000:9.3f}")
    elif abs(v) >= 0.005:
        print(f"  {k:34s} {v:9.3f}")
EOP
done
