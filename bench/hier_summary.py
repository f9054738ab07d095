#!/usr/bin/env python3
"""Tables of bench/hier.sh: per operation and size, gompi with coll han (the
default selection) and without it (--mca coll ^han), Open MPI with tuned and
with han, µs per call (median over runs [runs]); the ratio of gompi's han to
the better Open MPI; and the messages and bytes gompi's btl tcp sent per call,
summed over ranks (median), han against flat.

Usage: hier_summary.py OUT [OPS [SIZES]]   (OPS space-separated, SIZES as
gompi-bench's --sizes; default: whatever OUT holds)
"""
import glob
import os
import re
import statistics
import sys

D = sys.argv[1] if len(sys.argv) > 1 else "."
OPS = sys.argv[2].split() if len(sys.argv) > 2 and sys.argv[2].strip() else None


def size_of(s):
    s = s.strip().lower()
    m = {"k": 1 << 10, "m": 1 << 20}.get(s[-1:], 1)
    return int(s[:-1] if m > 1 else s) * m


SIZES = [size_of(s) for s in sys.argv[3].split(",")] if len(sys.argv) > 3 else None


def kv(line):
    return dict(re.findall(r"(\w+)=([^\s]+)", line))


us = {}      # (side, op, size) -> [µs]
tcp = {}     # (cfg, op, size) -> [(msgs, bytes)]
tables = {}  # (cfg, op) -> coll table line
failed = []  # (file, its status, the line of its stderr that says why)
failed_ops = set()  # (side, op) with a failed run

for f in sorted(glob.glob(os.path.join(D, "*.txt"))):
    parts = os.path.basename(f).split(".")
    if len(parts) != 5 or parts[0] not in ("gompi", "ompi"):
        continue
    impl, cfg, what = parts[0], parts[1], parts[2]
    side = f"{impl}-{cfg}"
    err = f + ".err"
    if os.path.exists(err):
        lines = [l.strip() for l in open(err) if l.strip()]
        if lines and lines[-1].startswith("rc="):
            failed.append((os.path.basename(f), lines[-1], next((l for l in lines if "rror" in l or "fail" in l.lower()), lines[0])))
            failed_ops.update((side, op) for op in (("allreduce", "barrier") if what == "anchor" else (what,)))
    for line in open(f):
        if impl == "gompi":
            if line.startswith("# coll table of MPI_COMM_WORLD: "):
                tables[(cfg, what)] = line.split(": ", 1)[1].strip()
            elif line.startswith("# tcp size="):
                d = kv(line)
                tcp.setdefault((cfg, what, int(d["size"])), []).append((float(d["msgs"]), float(d["bytes"])))
            elif line.strip() and not line.startswith("#"):
                size, v = line.split()[:2]
                us.setdefault((side, what, int(size)), []).append(float(v))
        else:
            if line.startswith("#") or "us=" not in line:
                continue
            op = line.split()[0]
            d = kv(line)
            size = 0 if op == "barrier" else int(d["size"])
            us.setdefault((side, op, size), []).append(float(d["us"]))

ops = OPS or sorted({op for (_, op, _) in us})
SIDES = ["gompi-han", "gompi-flat", "ompi-tuned", "ompi-han"]


def med(v):
    return statistics.median(v) if v else None


def cell(side, op, size):
    v = us.get((side, op, size))
    if not v:
        return "fail" if (side, op) in failed_ops else "-"
    m = med(v)
    return (f"{m:.2f}" if m < 100 else f"{m:.1f}") + f" [{len(v)}]"


def tcpcell(cfg, op, size, i):
    v = tcp.get((cfg, op, size))
    if not v:
        return "-"
    m = med([x[i] for x in v])
    return f"{m:.2f}" if i == 0 else f"{m:.0f}"


def slot(table, op):
    m = re.search(r"(?:^| )" + op + r"=(\S+)", table or "")
    return f"{op}={m.group(1)}" if m else "-"


print(f"Results: {os.path.abspath(D)}")
han_tables = {t for (c, _), t in tables.items() if c == "han"}
flat_tables = {t for (c, _), t in tables.items() if c == "flat"}
print("gompi's coll table of MPI_COMM_WORLD (gompi-bench's comment line):")
print(f"  default selection ('han' columns): {' | '.join(sorted(han_tables)) or '-'}")
print(f"  --mca coll ^han  ('flat' columns): {' | '.join(sorted(flat_tables)) or '-'}")
if han_tables and not any(re.search(r"[ =>]han\b", t) for t in han_tables):
    print("  no coll han in this gompi: the 'han' columns are its default selection, the same as flat")
print("Open MPI: tuned is its default selection; 'ompi han' runs with --mca coll_han_priority 100")
for op in ops:
    sizes = [0] if op == "barrier" else sorted({s for (_, o, s) in us if o == op} | {s for (_, o, s) in tcp if o == op})
    if SIZES is not None and op != "barrier":
        sizes = [s for s in sizes if s in SIZES] or sorted(SIZES)
    print()
    print(f"== {op}: µs per call, median [runs]; gompi's btl tcp messages and bytes per call, summed over ranks")
    print(f"# gompi slot: han runs {slot(tables.get(('han', op)), op)}, flat runs {slot(tables.get(('flat', op)), op)}")
    hdr = ["size", "gompi han", "gompi flat", "ompi tuned", "ompi han", "han/best ompi", "msgs han", "msgs flat", "bytes han", "bytes flat"]
    w = [8, 13, 13, 13, 13, 13, 9, 9, 11, 11]
    print("  ".join(h.rjust(n) for h, n in zip(hdr, w)))
    for s in sizes:
        h = med(us.get(("gompi-han", op, s), []))
        best = [m for m in (med(us.get(("ompi-tuned", op, s), [])), med(us.get(("ompi-han", op, s), []))) if m]
        ratio = f"{h / min(best):.2f}" if h and best else "-"
        row = [str(s), cell("gompi-han", op, s), cell("gompi-flat", op, s), cell("ompi-tuned", op, s), cell("ompi-han", op, s), ratio,
               tcpcell("han", op, s, 0), tcpcell("flat", op, s, 0), tcpcell("han", op, s, 1), tcpcell("flat", op, s, 1)]
        print("  ".join(c.rjust(n) for c, n in zip(row, w)))
if failed:
    print()
    print("Failed runs:")
    for f, rc, why in failed:
        print(f"  {f}: {rc}: {why}")
