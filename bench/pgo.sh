#!/usr/bin/env bash
# bench/pgo.sh - makes cmd/gompi-bench/default.pgo, the CPU profile that Go's
# profile-guided optimization builds gompi's hot paths with.
#
# With a profile, the compiler turns the interface calls of a message's
# path into direct calls where the profile shows one callee (mpi's Irecv to
# ob1's, ob1's Isend to shm's Send, a BTL's delivery to ob1's recvRun, a
# request's release to its pool), each behind a type check, and inlines
# the hot calls: a windowed receiver's Irecv went from 24 to 20 ns.
# `go build` uses a main package's default.pgo by itself, so gompi-bench
# built the usual way (bench/compare.sh) is built with it; a program of a
# user's gets the same with `go build -pgo=<this file>` (docs/performance.md).
#
# The profile is both ranks' CPU profiles (GOMPI_BENCH_CPUPROFILE) of a
# mix of gompi-bench jobs built without one (-pgo=off), on one node: the
# point-to-point table over shm (latency, then bw, 0 B to 4 MiB), longer
# runs of small messages (windows, and ping-pongs with the LLP and without:
# both are paths of a default job, the LLP's below its size limit), and the
# small collectives and nonblocking ones. Not tcp: its time is the kernel's, and
# its weight would leave the shm path below the compiler's hot threshold
# (the call edges that make up 99 % of the profile's weight). Re-make it
# when the message path changes much; a stale profile still builds (Go
# matches it by function and line, and ignores what no longer matches), it
# only stops helping. Two profiles of one tree differ (the samples do), and
# so do their builds: measure latency and the small collectives with the
# old profile and the new before keeping the new (a re-made one cost
# 512-byte latency 15 % in one session). cmd/gompi-bench's
# TestProfileNamesHotPaths fails when the functions it should name are not
# in it.
#
# Environment:
#   OUT    where to write the profile (default: cmd/gompi-bench/default.pgo)
#   WORK   scratch folder (default: a temporary one, removed)
#   SCALE  multiplies each job's iterations (default 1: about 30 s)
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
OUT=${OUT:-$REPO/cmd/gompi-bench/default.pgo}
SCALE=${SCALE:-1}
if [ -z "${WORK:-}" ]; then
  WORK=$(mktemp -d)
  trap 'rm -rf "$WORK"' EXIT
fi
mkdir -p "$WORK/prof"

die() { echo "pgo.sh: $*" >&2; exit 1; }
command -v go >/dev/null || die "go is not on PATH"

(cd "$REPO" && go build -pgo=off -o "$WORK/mpirun" ./cmd/mpirun && go build -pgo=off -o "$WORK/gompi-bench" ./cmd/gompi-bench) ||
  die "building mpirun and gompi-bench failed"

iters() { awk -v n="$1" -v s="$SCALE" 'BEGIN { v = int(n * s); print (v < 2 ? 2 : v) }'; }

n=0
job() {
  n=$((n + 1))
  echo "[$(date -u +%T)] job $n: $*" >&2
  "$WORK/mpirun" -np 2 --bind-to core -x GOMPI_BENCH_CPUPROFILE="$WORK/prof/job$n" "$@" >"$WORK/job$n.out" 2>&1 ||
    die "job $n failed: $* (see below)
$(cat "$WORK/job$n.out")"
}

B=$WORK/gompi-bench
job --mca btl self,shm "$B" pingpong --sizes 0:4m
job --mca btl self,shm "$B" bw --sizes 1,8,64,512 --iterations "$(iters 200000)"
job --mca btl self,shm "$B" latency --sizes 1,8,64,512 --iterations "$(iters 2000000)"
job --mca btl self,shm --mca llp ^tofu "$B" latency --sizes 1,8,64,512 --iterations "$(iters 2000000)"
job "$B" allreduce --sizes 8,1k,64k --scale "$SCALE"
job "$B" nbc --scale "$SCALE"

profiles=("$WORK"/prof/job*)
[ ${#profiles[@]} -ge 2 ] || die "no profiles were written"
go tool pprof -proto "${profiles[@]}" >"$WORK/merged.pgo" 2>"$WORK/merge.err" ||
  die "merging the profiles failed: $(cat "$WORK/merge.err")"
mv "$WORK/merged.pgo" "$OUT"
echo "wrote $OUT ($(wc -c <"$OUT") bytes, ${#profiles[@]} profiles)" >&2
