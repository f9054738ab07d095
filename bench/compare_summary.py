#!/usr/bin/env python3
"""Tables of bench/compare.sh's results: gompi against Open MPI.

Every measurement carries pre=/post= placement probes (ns one-way of a
cache-line ping-pong between the two ranks, taken just before and after it):
"near" when both are < 120 ns, "far" when both are > 150 ns, "mixed"
otherwise, as mpi-anchors/summarize.py. Each cell is the median over the
runs in that placement, with [the number of runs]; ratios are gompi's median
over Open MPI's, in the same placement.

Usage: compare_summary.py [--csv FILE] RESULT_DIR [near|far|all ...]

--csv FILE also writes the medians (near, far and all placements) to FILE in
bench/plot's medians.csv form (placement.py's MEDIANS_FIELDS).
"""
import glob
import os
import re
import statistics
import sys

from placement import csv_arg, write_medians

CSV, ARGS = csv_arg(sys.argv[1:])
D = ARGS[0] if ARGS else "."
STATES = ARGS[1:] or ["near", "far", "all"]
NEAR, FAR = 120.0, 150.0

OMPI = ["ompi-vader", "ompi-tcp"]
GOMPI = ["gompi-shm", "gompi-shm-nollp", "gompi-tcp", "gompi-tcp-llp"]
NAMES = {
    "ompi-vader": "Open MPI vader",
    "ompi-tcp": "Open MPI tcp",
    "gompi-shm": "gompi shm + LLP",
    "gompi-shm-nollp": "gompi shm, no LLP",
    "gompi-tcp": "gompi tcp, no LLP",
    "gompi-tcp-llp": "gompi tcp + LLP",
}


def kv(line):
    return dict(re.findall(r"(\w+)=([^\s]+)", line))


def state_of(pre, post):
    if pre is None or post is None or pre < 0 or post < 0:
        return "n/a"
    if pre < NEAR and post < NEAR:
        return "near"
    if pre > FAR and post > FAR:
        return "far"
    return "mixed"


# records[(cfg, kind)][size] = [(value, state)]
records = {}


def add(cfg, kind, size, value, pre, post):
    records.setdefault((cfg, kind), {}).setdefault(size, []).append((value, state_of(pre, post)))


for f in sorted(glob.glob(os.path.join(D, "pp.*.txt"))):
    cfg = os.path.basename(f).split(".")[1]
    for line in open(f):
        if line.startswith("lat ") or line.startswith("bw "):
            d = kv(line)
            kind = "lat" if line.startswith("lat ") else "bw"
            value = float(d["us"] if kind == "lat" else d["MBps"])
            add(cfg, kind, int(d["size"]), value, float(d.get("pre", -1)), float(d.get("post", -1)))

for kind in ("lat", "bw"):
    for f in sorted(glob.glob(os.path.join(D, f"{kind}.*.txt"))):
        cfg = os.path.basename(f).split(".")[1]
        last = None
        for line in open(f):
            if line.startswith("# probe "):
                d = kv(line)
                if last is not None and int(d["size"]) == last[0]:
                    add(cfg, kind, last[0], last[1], float(d["pre"]), float(d["post"]))
                    last = None
                continue
            if line.startswith("#") or not line.strip():
                continue
            if last is not None:  # a row without a probe line
                add(cfg, kind, last[0], last[1], None, None)
            size, value = line.split()[:2]
            last = (int(size), float(value))
        if last is not None:
            add(cfg, kind, last[0], last[1], None, None)


def values(cfg, kind, size, state):
    return [v for v, s in records.get((cfg, kind), {}).get(size, []) if state == "all" or s == state]


def med(vals):
    return statistics.median(vals) if vals else None


def fmt(x):
    if x is None:
        return "–"
    a = abs(x)
    if a < 1:
        return f"{x:.3f}"
    if a < 10:
        return f"{x:.2f}"
    if a < 100:
        return f"{x:.1f}"
    return f"{x:.0f}"


def cell(vals):
    return "–" if not vals else f"{fmt(med(vals))} [{len(vals)}]"


def ratio(a, b):
    if not a or not b:
        return "–"
    return f"{med(a) / med(b):.2f}"


def table(header, rows):
    s = "| " + " | ".join(header) + " |\n|" + "|".join("---" for _ in header) + "|\n"
    for r in rows:
        s += "| " + " | ".join(r) + " |\n"
    return s


sizes = sorted({s for d in records.values() for s in d})


def section(state):
    print(f"## Placement: {state}\n")
    print("Cells: median [runs]. Ratios: gompi / Open MPI (latency: lower is better; bandwidth: higher is better).\n")
    hdr = ["size (B)", "vader", "gompi shm+LLP", "÷ vader", "gompi shm no LLP", "÷ vader", "LLP gain",
           "Open MPI tcp", "gompi tcp", "÷ ompi tcp", "gompi tcp+LLP"]
    rows = []
    for s in sizes:
        v = {c: values(c, "lat", s, state) for c in OMPI + GOMPI}
        gain = "–"
        if v["gompi-shm"] and v["gompi-shm-nollp"]:
            gain = f"{100 * (1 - med(v['gompi-shm']) / med(v['gompi-shm-nollp'])):.0f} %"
        rows.append([str(s), cell(v["ompi-vader"]), cell(v["gompi-shm"]), ratio(v["gompi-shm"], v["ompi-vader"]),
                     cell(v["gompi-shm-nollp"]), ratio(v["gompi-shm-nollp"], v["ompi-vader"]), gain,
                     cell(v["ompi-tcp"]), cell(v["gompi-tcp"]), ratio(v["gompi-tcp"], v["ompi-tcp"]), cell(v["gompi-tcp-llp"])])
    print(f"### One-way latency, µs ({state})\n")
    print(table(hdr, rows))
    hdr = ["size (B)", "vader", "gompi shm+LLP", "÷ vader", "gompi shm no LLP", "÷ vader",
           "Open MPI tcp", "gompi tcp", "÷ ompi tcp"]
    rows = []
    for s in sizes:
        if s == 0:
            continue
        v = {c: values(c, "bw", s, state) for c in OMPI + GOMPI}
        rows.append([str(s), cell(v["ompi-vader"]), cell(v["gompi-shm"]), ratio(v["gompi-shm"], v["ompi-vader"]),
                     cell(v["gompi-shm-nollp"]), ratio(v["gompi-shm-nollp"], v["ompi-vader"]),
                     cell(v["ompi-tcp"]), cell(v["gompi-tcp"]), ratio(v["gompi-tcp"], v["ompi-tcp"])])
    print(f"### Windowed bandwidth, MB/s = 10^6 B/s ({state})\n")
    print(table(hdr, rows))

    # The goals, on this placement's medians.
    def m(c, k, s):
        return med(values(c, k, s, state))

    goals = []

    def goal(name, got, ok):
        goals.append([name, "–" if got is None else got, "–" if got is None else ("met" if ok else "missed")])

    lv, ll, ln = m("ompi-vader", "lat", 8), m("gompi-shm", "lat", 8), m("gompi-shm-nollp", "lat", 8)
    lt, lg = m("ompi-tcp", "lat", 8), m("gompi-tcp", "lat", 8)
    goal("8 B shm latency with the LLP ≤ 0.9 × vader", f"{ll / lv:.2f} ×" if ll and lv else None, ll and lv and ll <= 0.9 * lv)
    goal("8 B shm latency without the LLP ≤ 1.1 × vader", f"{ln / lv:.2f} ×" if ln and lv else None, ln and lv and ln <= 1.1 * lv)
    for s in (0, 1, 8, 512, 4096):
        a, b = m("gompi-shm", "lat", s), m("gompi-shm-nollp", "lat", s)
        goal(f"{s} B latency: the LLP never slower than off", f"{a:.3f} vs {b:.3f} µs" if a and b else None, a and b and a <= b)
    for s in (1, 8, 64, 512):
        bv, bg = m("ompi-vader", "bw", s), m("gompi-shm", "bw", s)
        goal(f"windowed rate at {s} B ≥ 1.0 × vader", f"{bg / bv:.2f} ×" if bg and bv else None, bg and bv and bg >= bv)
    a, b = m("gompi-shm", "bw", 8), m("gompi-shm-nollp", "bw", 8)
    goal("windowed 8 B: the LLP costs ≤ 5 %", f"{a:.1f} vs {b:.1f} MB/s" if a and b else None, a and b and a >= 0.95 * b)
    goal("8 B tcp latency ≤ 1.0 × Open MPI tcp", f"{lg / lt:.2f} ×" if lg and lt else None, lg and lt and lg <= lt)
    for s in (256 << 10, 1 << 20, 4 << 20):
        a, b = m("gompi-tcp", "lat", s), m("ompi-tcp", "lat", s)
        goal(f"{s >> 10} KiB tcp latency ≤ 1.0 × Open MPI tcp", f"{a / b:.2f} ×" if a and b else None, a and b and a <= b)
    for s in (1 << 20, 2 << 20, 4 << 20):
        bv, bg = m("ompi-vader", "bw", s), m("gompi-shm", "bw", s)
        if bv or bg:
            goal(f"shm bandwidth at {s >> 20} MiB ≥ 1.0 × vader", f"{bg / bv:.2f} ×" if bg and bv else None, bg and bv and bg >= bv)
    print(f"### Goals ({state})\n")
    print(table(["goal", "measured", ""], goals))


runs = {c: len(glob.glob(os.path.join(D, f"pp.{c}.*.txt"))) for c in OMPI}
runs.update({c: len(glob.glob(os.path.join(D, f"lat.{c}.*.txt"))) for c in GOMPI})
print(f"Result folder: `{os.path.abspath(D)}`  ")
print("Runs: " + ", ".join(f"{NAMES[c]} {n}" for c, n in runs.items() if n) + "\n")
census = {}
for d in records.values():
    for lst in d.values():
        for _, s in lst:
            census[s] = census.get(s, 0) + 1
print("Placement of the measurements: " + ", ".join(f"{k} {v}" for k, v in sorted(census.items())) + "\n")
if "near" in STATES and not census.get("near"):
    # Small-message figures from another placement say little (up to 4x
    # slower); say so before any table.
    print("**No measurement was in the near placement** (both probes < %.0f ns): the near tables below are empty, "
          "and the goals, which are stated for the near placement, cannot be judged from this run.\n" % NEAR)
# The near placement first: the goals are stated for it.
for st in sorted(STATES, key=lambda x: x != "near"):
    section(st)

pl = os.path.join(D, "probe.log")
if os.path.exists(pl):
    v = [float(kv(l)["ns"]) for l in open(pl) if "ns=" in l]
    if v:
        print("## Placement probes between runs (`shm_limit probe`)\n")
        print(f"{len(v)} probes: median {fmt(statistics.median(v))} ns, min {fmt(min(v))} ns, max {fmt(max(v))} ns; "
              f"{sum(1 for x in v if x < NEAR)} below {NEAR:.0f} ns (near), {sum(1 for x in v if x > FAR)} above {FAR:.0f} ns (far).\n")

if CSV:
    rows = []
    for st in ("near", "far", "all"):
        for (cfg, kind), bysize in sorted(records.items()):
            for size in sorted(bysize):
                v = values(cfg, kind, size, st)
                if v:
                    rows.append({"mode": "p2p", "placement": st, "config": cfg, "op": "p2p",
                                 "metric": "latency" if kind == "lat" else "bandwidth", "ranks": 2, "size": size,
                                 "value": med(v), "unit": "us" if kind == "lat" else "MB/s", "runs": len(v)})
    write_medians(CSV, rows)
