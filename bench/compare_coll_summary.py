#!/usr/bin/env python3
"""Tables of `MODE=coll bench/compare.sh`: Allreduce and Barrier, gompi
against Open MPI and MPICH, per number of ranks.

A run's placement is "near" when the probes around it are all below 120 ns,
"far" when all are above 150 ns, "mixed" otherwise (as
mpi-anchors/summarize.py): the in-run probes of allreduce.c and gompi-bench
between ranks 0 and 1 where they exist (2 ranks), and `shm_limit probe`
before and after the run (probe.log) always. Cells are medians over runs
[count]; ratios are gompi's median over the other's, in one placement.

Usage: compare_coll_summary.py [--csv FILE] RESULT_DIR [near|far|all ...]

--csv FILE also writes the medians (near, far and all placements) to FILE in
bench/plot's medians.csv form (placement.py's MEDIANS_FIELDS).
"""
import glob
import os
import statistics
import sys

from placement import csv_arg, kv, run_probes, state_of, write_medians

CSV, ARGS = csv_arg(sys.argv[1:])
D = ARGS[0] if ARGS else "."
STATES = ARGS[1:] or ["near", "all"]
SIDES = ["ompi", "mpich", "gompi"]


runprobes = run_probes(D)

# records[(side, np, what)][size] = [(us, state)]
records = {}


def add(side, np, what, size, us, probes, label, rep):
    st = state_of(probes + runprobes.get((label, rep), []))
    records.setdefault((side, np, what), {}).setdefault(size, []).append((us, st))


for f in glob.glob(os.path.join(D, "coll.*.txt")):
    parts = os.path.basename(f).split(".")
    side, np, rep = parts[1], int(parts[2][2:]), parts[3]
    label = f"{side}.np{np}"
    if side in ("ompi", "mpich"):
        for line in open(f):
            d = kv(line)
            if line.startswith("allreduce "):
                add(side, np, "allreduce", int(d["size"]), float(d["us"]), [float(d["pre"]), float(d["post"])], label, rep)
            elif line.startswith("barrier "):
                add(side, np, "barrier", 0, float(d["us"]), [float(d["pre"]), float(d["post"])], label, rep)
        continue
    what = parts[4]
    last = None
    for line in open(f):
        if line.startswith("# probe "):
            d = kv(line)
            if last and int(d["size"]) == last[0]:
                add(side, np, what, last[0], last[1], [float(d["pre"]), float(d["post"])], label, rep)
                last = None
            continue
        if line.startswith("#") or not line.strip():
            continue
        if last:
            add(side, np, what, last[0], last[1], [], label, rep)
        size, us = line.split()[:2]
        last = (int(size), float(us))
    if last:
        add(side, np, what, last[0], last[1], [], label, rep)


def vals(side, np, what, size, state):
    return [v for v, s in records.get((side, np, what), {}).get(size, []) if state == "all" or s == state]


def med(v):
    return statistics.median(v) if v else None


def cell(v):
    if not v:
        return "–"
    m = med(v)
    return f"{m:.3f} [{len(v)}]" if m < 10 else f"{m:.1f} [{len(v)}]"


def ratio(a, b):
    return "–" if not a or not b else f"{med(a) / med(b):.2f}"


nps = sorted({np for (_, np, _) in records})
print(f"Result folder: `{os.path.abspath(D)}`\n")
for state in STATES:
    print(f"## Placement: {state}\n")
    for np in nps:
        print(f"### {np} ranks, µs per call (median [runs]); ratios gompi / other\n")
        print("| operation | size (B) | Open MPI | MPICH | gompi | ÷ Open MPI | ÷ MPICH |")
        print("|---|---|---|---|---|---|---|")
        for what in ("barrier", "allreduce"):
            sizes = sorted({s for side in SIDES for s in records.get((side, np, what), {})})
            for s in sizes:
                v = {side: vals(side, np, what, s, state) for side in SIDES}
                print(f"| {what} | {s if what != 'barrier' else '–'} | {cell(v['ompi'])} | {cell(v['mpich'])} | "
                      f"{cell(v['gompi'])} | {ratio(v['gompi'], v['ompi'])} | {ratio(v['gompi'], v['mpich'])} |")
        print()

if CSV:
    rows = []
    for st in ("near", "far", "all"):
        for (side, np, what), bysize in sorted(records.items()):
            for size in sorted(bysize):
                v = vals(side, np, what, size, st)
                if v:
                    rows.append({"mode": "coll", "placement": st, "config": side, "op": what, "metric": "time",
                                 "ranks": np, "size": size, "value": med(v), "unit": "us", "runs": len(v)})
    write_medians(CSV, rows)
