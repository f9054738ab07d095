#!/usr/bin/env bash
# bench/plot.sh RESULTS: SVG plots of a bench/compare.sh results folder, in
# that folder, again (compare.sh makes them at the end of every run; runs
# are long, so the plots can be re-made from the raw files alone).
#
# Finds the folder's mode from its files (pp.*/lat.*: p2p; coll.*: coll;
# nbc.*: nbc), has the mode's summary script write RESULTS/<mode>-medians.csv
# (--csv), and draws it with bench/plot (a Go module of its own, so that
# gompi's go.mod stays free of the plotting library):
#   p2p   p2p-latency-<placement>.svg, p2p-bandwidth-<placement>.svg
#   coll  coll-<op>-np<N>-<placement>.svg, coll-barrier-<placement>.svg
#   nbc   nbc-iallreduce-{pure,overlap,overlap_t}-np<N>-<placement>.svg,
#         nbc-ibarrier-{pure,overlap,overlap_t}-<placement>.svg
# for the placements near, far and all that have data. Needs go and python3.
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
die() { echo "plot.sh: $*" >&2; exit 1; }

[ $# -eq 1 ] || die "usage: bench/plot.sh RESULTS_FOLDER"
[ -d "$1" ] || die "$1 is not a folder"
OUT="$(cd "$1" && pwd)"

has() { compgen -G "$OUT/$1" >/dev/null; }
done=0
for mode in p2p coll nbc; do
  case $mode in
    p2p) has 'pp.*.txt' || has 'lat.*.txt' || continue; summary=compare_summary.py ;;
    coll) has 'coll.*.txt' || continue; summary=compare_coll_summary.py ;;
    nbc) has 'nbc.*.txt' || continue; summary=compare_nbc_summary.py ;;
  esac
  csv="$OUT/$mode-medians.csv"
  python3 "$HERE/$summary" --csv "$csv" "$OUT" >/dev/null || die "$summary failed on $OUT"
  (cd "$HERE/plot" && go run . -in "$csv" -out "$OUT") || die "drawing $csv failed"
  done=1
done
[ $done -eq 1 ] || die "no results in $OUT (pp.*, lat.*, coll.* or nbc.* files)"
