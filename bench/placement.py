"""What bench/compare.sh's summaries share: a line's key=value fields, the
placement of a measurement from its probes, and the run-level probes of
probe.log (as mpi-anchors/summarize.py: near when every probe is below
120 ns, far when every one is above 150 ns, mixed otherwise)."""
import os
import re

NEAR, FAR = 120.0, 150.0


def kv(line):
    return dict(re.findall(r"(\w+)=([^\s]+)", line))


def state_of(probes):
    p = [x for x in probes if x is not None and x >= 0]
    if not p:
        return "n/a"
    if all(x < NEAR for x in p):
        return "near"
    if all(x > FAR for x in p):
        return "far"
    return "mixed"


def run_probes(d):
    """probe.log's lines "<label> rep=<r> when=pre|post probe ... ns=<x> ...",
    as {(label, rep): [ns, ...]}."""
    probes = {}
    pl = os.path.join(d, "probe.log")
    if os.path.exists(pl):
        for line in open(pl):
            label, rest = line.split(" ", 1)
            f = kv(rest)
            if "ns" in f:
                probes.setdefault((label, f["rep"]), []).append(float(f["ns"]))
    return probes


# medians.csv: the machine-readable form of a summary's medians, which
# bench/plot (the SVG plotter) reads. One row per (placement, configuration,
# operation, metric, ranks, size); value is the median over runs.
MEDIANS_FIELDS = ["mode", "placement", "config", "op", "metric", "ranks", "size", "value", "unit", "runs"]


def csv_arg(argv):
    """Takes "--csv PATH" (or "--csv=PATH") out of argv: (PATH or None, the other arguments)."""
    path, rest, i = None, [], 0
    while i < len(argv):
        a = argv[i]
        if a == "--csv" and i + 1 < len(argv):
            path, i = argv[i + 1], i + 2
            continue
        if a.startswith("--csv="):
            path = a[len("--csv="):]
        else:
            rest.append(a)
        i += 1
    return path, rest


def write_medians(path, rows):
    """Writes rows (dicts with MEDIANS_FIELDS) as CSV with a header line."""
    import csv

    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=MEDIANS_FIELDS, lineterminator="\n")
        w.writeheader()
        for r in rows:
            w.writerow(r)
