#!/usr/bin/env bash
# Measures what jobs whose rank is killed leave in /dev/shm, under each
# launcher: ROUNDS jobs of 4 ranks on this node per launcher and phase, each
# with one random rank killed with SIGKILL at a random moment, then a table
# of the jobs that left files, the files and bytes they left, the change of
# Shmem in /proc/meminfo over the batch, and the jobs that hung (issue
# [shmlife]).
#
#   test/shmlife/run.sh                          (from anywhere)
#   ROUNDS=20 LAUNCHERS="mpirun hydra" test/shmlife/run.sh
#   VERBOSE=1 ...                                (names every file a job left)
#
# Launchers (LAUNCHERS, default all three): mpirun (gompi's, built from
# ./cmd/mpirun), hydra (MPICH's mpiexec.mpich -n 4) and srun (srun
# --mpi=pmi2 -n 4 on a one-node Slurm that test/slurm/cluster.sh brings up
# and stops; needs root). One that cannot run here is left out with the
# reason. Phases (PHASES, default "init coll"), program
# internal/testprogs/shmkill:
#
#   init  a rank is killed 0-INIT_MAX_MS ms (default 60) after the first
#         rank started, one of those started by then, inside Init mostly (a
#         victim that had returned from Init by then counts as "late"),
#         while the ranks go through Init, a barrier and a few collectives
#   coll  the victim is killed 0-COLL_MAX_MS ms (default 30) after its
#         "ready" (Init returned), during the first collectives of a loop
#         of small and large Barrier/Allreduce/Bcast/Alltoall (coll sm,
#         coll tuned over btl shm, llp tofu); "late": the job had ended
#
# The ranks' pids come from files they make before Init (shmkill -dir), so
# no launcher-specific way is needed. A job ends within JOB_TIMEOUT s
# (default 30) or counts as a hang (then its launcher and ranks are
# killed). After each job the script waits until no process of the program
# remains, and counts the files new in /dev/shm since before the job that
# belong to it (job ids the ranks printed, or whose control segment or box
# names one of its pids): it never removes files between jobs, so a batch's
# Shmem delta includes what its jobs left. At the end it removes every file
# its jobs left, and says how many.
#
# Shmem (shared memory: tmpfs, /dev/shm, memfd, SysV and shared anonymous
# mappings) is system-wide: anything else on the machine that makes or frees
# shared memory meanwhile (other tests, a browser, page cache of tmpfs
# files) moves the delta too. Files new in /dev/shm that belong to no job of
# the script are not counted, nor removed, and their number is printed.
#
# Exit status: 0 no job left a file or hung, 1 some did (or the harness
# failed), 77 skipped; the reason is printed on the last line as
# "skipped: <why>".
set -uo pipefail

ROUNDS=${ROUNDS:-100}
LAUNCHERS=${LAUNCHERS:-mpirun hydra srun}
PHASES=${PHASES:-init coll}
INIT_MAX_MS=${INIT_MAX_MS:-60}
COLL_MAX_MS=${COLL_MAX_MS:-30}
JOB_TIMEOUT=${JOB_TIMEOUT:-30}

root=$(cd "$(dirname "$0")/../.." && pwd)
skip() { echo "skipped: $*"; exit 77; }
say() { echo "shmlife: $*"; }
# shellcheck source=test/slurm/cluster.sh
. "$root/test/slurm/cluster.sh"

command -v go >/dev/null || skip "no go on PATH"
for c in timeout pgrep od; do command -v $c >/dev/null || skip "no $c"; done

dir=$(mktemp -d /tmp/gompi-shmlife.XXXXXX)
failed=0
left_all=$dir/left # every file a job of this run left, one a line
: >"$left_all"
prog=$dir/bin/shmkill

# kill_ranks kills what is left of the program's processes, by pid.
kill_ranks() {
  local p
  for p in $(pgrep -f "^$prog "); do kill -9 "$p" 2>/dev/null; done
}
cleanup() {
  kill_ranks
  stop_cluster
  local n=0 gone=0 f
  while read -r f; do
    if [ -e "$f" ]; then rm -f "$f" && n=$((n + 1)); else gone=$((gone + 1)); fi
  done < <(sort -u "$left_all")
  say "removed $n file(s) the jobs left in /dev/shm ($gone more were already gone: something else removed them)"
  rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

say "building mpirun and shmkill"
(cd "$root" && go build -o "$dir/bin/mpirun" ./cmd/mpirun && go build -o "$prog" ./internal/testprogs/shmkill) ||
  { say "FAIL: go build"; exit 1; }

launchers=()
for l in $LAUNCHERS; do
  case $l in
    mpirun) launchers+=(mpirun) ;;
    hydra)
      if command -v mpiexec.mpich >/dev/null; then launchers+=(hydra); else say "leaving out hydra: no mpiexec.mpich (apt-get install mpich)"; fi ;;
    srun)
      if slurm_prepare; then
        start_cluster 1
        launchers+=(srun)
      else
        say "leaving out srun: $slurm_skip_reason"
      fi ;;
    *) say "FAIL: unknown launcher $l (mpirun, hydra, srun)"; exit 1 ;;
  esac
done
[ ${#launchers[@]} -gt 0 ] || skip "none of the launchers ($LAUNCHERS) can run here"

shm_files() { find /dev/shm -maxdepth 1 -name 'gompi-*' 2>/dev/null | sort; }
# shm_count prints "<files> <bytes>" of gompi's files in /dev/shm.
shm_count() { find /dev/shm -maxdepth 1 -name 'gompi-*' -printf '%s\n' 2>/dev/null | awk '{ n++; b += $1 } END { printf "%d %d\n", n, b }'; }
shmem_kb() { awk '/^Shmem:/ { print $2 }' /proc/meminfo; }
# now_ms sets ms_now, without a fork.
now_ms() { ms_now=$((${EPOCHREALTIME/./} / 1000)); }
# sleep_ms sleeps without a fork (a read that times out on a pipe nobody
# writes): the kill's timing is the measurement, and on two cores busy
# with the ranks a fork takes milliseconds.
exec {nap_fd}<> <(:)
sleep_ms() {
  local s
  printf -v s '%d.%03d' $(($1 / 1000)) $(($1 % 1000))
  read -rt "$s" -u "$nap_fd"
}
# header_pid FILE OFFSET: the uint32 at OFFSET (a pid in a segment header).
header_pid() { od -An -tu4 -j"$2" -N4 "$1" 2>/dev/null | tr -d ' '; }
# wait_files N PATTERN: waits up to 10 s for N files matching the glob,
# and leaves them in the array got. Builtins only: the ranks are in Init
# meanwhile, and the two cores are theirs.
wait_files() {
  local t0
  now_ms
  t0=$ms_now
  while :; do
    shopt -s nullglob
    # shellcheck disable=SC2206 # the glob is meant to expand
    got=($2)
    shopt -u nullglob
    [ "${#got[@]}" -ge "$1" ] && return 0
    now_ms
    [ $((ms_now - t0)) -gt 10000 ] && return 1
    sleep_ms 1
  done
}

# round LAUNCHER PHASE: one job, one kill. Sets r_left (files), r_bytes,
# r_hang and r_late (0/1) and r_foreign (new files of no job of ours).
round() {
  local launcher=$1 phase=$2 rd=$dir/round before lpid victim st ids f id p rank_pids= new t0
  r_left=0 r_bytes=0 r_hang=0 r_late=0 r_foreign=0
  rm -rf "$rd" && mkdir -p "$rd"
  before=$(shm_files)
  local argv=()
  case $launcher in
    mpirun) argv=("$dir/bin/mpirun" -np 4) ;;
    hydra) argv=(mpiexec.mpich -n 4) ;;
    srun) argv=(srun -O --mpi=pmi2 -n 4 --kill-on-bad-exit=1) ;;
  esac
  now_ms
  t0=$ms_now
  timeout -k 5 "$JOB_TIMEOUT" "${argv[@]}" "$prog" -dir "$rd" "$phase" >"$rd/out" 2>&1 &
  lpid=$!
  # init: the clock starts when the first rank does, and the victim is one
  # of the ranks started by then (mpirun starts them one after the other,
  # and once the last has started Init is over within tens of ms); coll:
  # any rank, once it has returned from Init.
  local need=4
  if [ "$phase" = init ] && wait_files 1 "$rd/*.pid"; then
    sleep_ms $((RANDOM % (INIT_MAX_MS + 1)))
    need=1
  fi
  if wait_files "$need" "$rd/*.pid"; then
    victim=${got[RANDOM % ${#got[@]}]##*/}
    victim=${victim%.pid}
    if [ "$phase" = coll ]; then
      wait_files 1 "$rd/$victim.ready"
      sleep_ms $((RANDOM % (COLL_MAX_MS + 1)))
    fi
    if [ "$phase" = init ] && [ -e "$rd/$victim.ready" ]; then r_late=1; fi
    kill -9 "$victim" 2>/dev/null || r_late=1
    wait_files 4 "$rd/*.pid" # the others' pids, to attribute files by
    rank_pids=$(printf '%s\n' "${got[@]}" | sed 's|.*/||; s|\.pid$||')
  else
    say "$launcher/$phase: the ranks did not all start within 10 s"
    sed 's/^/    /' "$rd/out" | tail -20
  fi
  wait "$lpid"
  st=$?
  # By its time, not its status: mpirun and srun exit 137 for the killed
  # rank, as timeout -k does.
  now_ms
  if [ "$st" = 124 ] || [ $((ms_now - t0)) -ge $((JOB_TIMEOUT * 1000)) ]; then
    r_hang=1
    say "$launcher/$phase: the job did not end within ${JOB_TIMEOUT}s"
    [ "$launcher" = srun ] && scancel --quiet --full -u root 2>/dev/null
  fi
  # No process of the job may remain when the files are counted: a rank
  # still running may yet remove them.
  now_ms
  t0=$ms_now
  while pgrep -f "^$prog " >/dev/null; do
    now_ms
    if [ $((ms_now - t0)) -gt 5000 ]; then
      [ "$r_hang" = 1 ] || say "$launcher/$phase: ranks outlived their launcher by 5 s: $(pgrep -f "^$prog " | xargs)"
      r_hang=1
      kill_ranks
    fi
    sleep 0.01
  done
  # The job's ids: those its ranks printed, and those of control segments
  # (pid at offset 16) and boxes (offset 20) that name one of its pids.
  ids=" $(awk '{ print $4 }' "$rd/out" 2>/dev/null | grep -E '^[0-9a-zA-Z_.]+$' | sort -u | xargs) "
  new=$(comm -13 <(echo "$before") <(shm_files))
  for f in $new; do
    id=${f#/dev/shm/gompi-}
    id=${id%%-*}
    case $f in
      *-ctl-*) p=$(header_pid "$f" 16) ;;
      *-box-* | *-tofu-[0-9]*) p=$(header_pid "$f" 20) ;;
      *) p= ;;
    esac
    if [ -n "$p" ] && grep -qx "$p" <<<"$rank_pids"; then ids+="$id "; fi
  done
  for f in $new; do
    id=${f#/dev/shm/gompi-}
    id=${id%%-*}
    if [[ "$ids" == *" $id "* ]]; then
      [ -n "${VERBOSE:-}" ] && say "$launcher/$phase: left ${f#/dev/shm/} ($(stat -c %s "$f" 2>/dev/null) B)"
      echo "$f" >>"$left_all"
      r_left=$((r_left + 1))
      r_bytes=$((r_bytes + $(stat -c %s "$f" 2>/dev/null || echo 0)))
    else
      r_foreign=$((r_foreign + 1))
    fi
  done
}

table=()
foreign=0
for launcher in "${launchers[@]}"; do
  for phase in $PHASES; do
    read -r files0 bytes0 < <(shm_count)
    kb0=$(shmem_kb)
    jobs_left=0 files=0 bytes=0 hangs=0 late=0
    for _ in $(seq "$ROUNDS"); do
      round "$launcher" "$phase"
      [ "$r_left" -gt 0 ] && jobs_left=$((jobs_left + 1))
      files=$((files + r_left)) bytes=$((bytes + r_bytes)) hangs=$((hangs + r_hang)) late=$((late + r_late))
      foreign=$((foreign + r_foreign))
    done
    kb1=$(shmem_kb)
    read -r files1 bytes1 < <(shm_count)
    say "$launcher/$phase: /dev/shm/gompi-* before $files0 files $bytes0 B, after $files1 files $bytes1 B; Shmem $kb0 -> $kb1 kB"
    table+=("$(printf '%-8s %-6s %6d %10d %8d %12d %12d %6d %6d' "$launcher" "$phase" "$ROUNDS" "$jobs_left" "$files" "$bytes" $((kb1 - kb0)) "$hangs" "$late")")
    if [ "$jobs_left" -gt 0 ] || [ "$hangs" -gt 0 ]; then failed=1; fi
  done
done

printf '%-8s %-6s %6s %10s %8s %12s %12s %6s %6s\n' launcher phase rounds "jobs left" files bytes "Shmem kB" hangs late
printf '%s\n' "${table[@]}"
[ "$foreign" = 0 ] || say "$foreign new file(s) in /dev/shm belonged to no job of this run (not counted, not removed)"
if [ "$failed" = 0 ]; then
  say "PASS: no job left a file in /dev/shm or hung"
  exit 0
fi
say "FAIL: jobs left files in /dev/shm or hung (see the table)"
exit 1
