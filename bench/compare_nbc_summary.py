#!/usr/bin/env python3
"""Tables of `MODE=nbc bench/compare.sh`: nonblocking collectives, gompi
against Open MPI and MPICH, per number of ranks and placement.

Every side prints mpi-anchors/nbc.c's lines (gompi-bench nbc prints the same
ones): per operation (ibarrier; iallreduce per size) pure_us (Ixxx + Wait),
overlap and overlap_t (OSU's overlap of the collective with a compute loop
without, and with, Tests between its slices). gompi-bench adds, per
operation, <op>_persistent start_wait_us (Start + Wait of the persistent
form), the blocking form's blocking_us, and <op>_w: w_us (the collective's
own CPU time per call), done (the fraction of W's runs complete before the
Wait), pure_cpu_us (the process's CPU time per call during pure) and
pure_csw (its context switches per call during pure). bench/nbc_w.c prints
the same <op>_w lines for Open MPI and MPICH (files nbc_w.<side>.np<n>.<rep>.txt,
run beside nbc.c's).

The W table sets, per MPI, operation and size: nbc.c's pure; W; W ÷ pure;
the ceiling 100 * (1 - W / pure), which overlap cannot pass when the
collective's own work shares the rank's core with the computation; overlap
and overlap_t; and the exposed time ovrl - cpu and ovrl_t - cpu (µs per
call: what the program waits beyond its computation; medians of each run's
difference).

A line's placement is "near" when the probes around it are all below 120 ns,
"far" when all are above 150 ns, "mixed" otherwise (as
mpi-anchors/summarize.py): the line's own pre=/post= (two ranks only) and
`shm_limit probe` before and after the run (probe.log). Cells are medians
over runs [count]; ratios are gompi's median over the other's, in one
placement.

Usage: compare_nbc_summary.py [--csv FILE] RESULT_DIR [near|far|all ...]

--csv FILE also writes the medians of nbc.c's figures (pure_us, overlap,
overlap_t of ibarrier and iallreduce; near, far and all placements) to FILE
in bench/plot's medians.csv form (placement.py's MEDIANS_FIELDS).
"""
import glob
import os
import statistics
import sys

from placement import csv_arg, kv, run_probes, state_of, write_medians

CSV, ARGS = csv_arg(sys.argv[1:])
D = ARGS[0] if ARGS else "."
STATES = ARGS[1:] or ["near", "far", "all"]
SIDES = ["ompi", "mpich", "gompi"]
NBC = ("ibarrier", "iallreduce")


runprobes = run_probes(D)

# records[(side, np, op, size)][field] = [(value, state)]; op is the line's
# first word (ibarrier, iallreduce, iallreduce_persistent, allreduce, ...).
records = {}
files = [(f, "") for f in glob.glob(os.path.join(D, "nbc.*.np*.*.txt"))]
files += [(f, "_w") for f in glob.glob(os.path.join(D, "nbc_w.*.np*.*.txt"))]
for f, kind in files:
    parts = os.path.basename(f).split(".")
    side, np, rep = parts[1], int(parts[2][2:]), parts[3]
    label = f"{side}{kind}.np{np}"
    for line in open(f):
        if line.startswith("#") or not line.strip():
            continue
        op = line.split()[0]
        d = kv(line)
        if "size" not in d:
            continue
        try:
            probes = [float(d.get("pre", -1)), float(d.get("post", -1))]
            st = state_of(probes + runprobes.get((label, rep), []))
            rec = records.setdefault((side, np, op, int(d["size"])), {})
            for k, v in d.items():
                if k not in ("size", "pre", "post"):
                    rec.setdefault(k, []).append((float(v), st))
            # The exposed time of nbc.c's line: ovrl - cpu, ovrl_t - cpu.
            if "cpu_us" in d:
                for k, e in (("ovrl_us", "exposed_us"), ("ovrl_t_us", "exposed_t_us")):
                    if k in d:
                        rec.setdefault(e, []).append((float(d[k]) - float(d["cpu_us"]), st))
        except ValueError:
            continue


def vals(side, np, op, size, field, state):
    return [v for v, s in records.get((side, np, op, size), {}).get(field, []) if state == "all" or s == state]


def med(v):
    return statistics.median(v) if v else None


def cell(v, pct=False):
    if not v:
        return "–"
    m = med(v)
    if pct:
        return f"{m:.0f} [{len(v)}]"
    return f"{m:.3f} [{len(v)}]" if m < 10 else f"{m:.1f} [{len(v)}]"


def ratio(a, b):
    return "–" if not a or not b or not med(b) else f"{med(a) / med(b):.2f}"


def sizes_of(np, op):
    return sorted({s for (side, n, o, s) in records if n == np and o == op})


NAMES = {"ompi": "Open MPI", "mpich": "MPICH", "gompi": "gompi"}


def num(m, pct=False):
    if m is None:
        return "–"
    if pct:
        return f"{m:.0f}"
    return f"{m:.3f}" if abs(m) < 10 else f"{m:.1f}"


def w_table(np, state):
    """W beside nbc.c's figures: pure, W, W ÷ pure, the ceiling, overlap,
    overlap_t and the exposed times, per MPI."""
    if not any(n == np and o.endswith("_w") for (_, n, o, _) in records):
        return
    print(f"### {np} ranks: W and the ceiling it puts on overlap, medians [runs]\n")
    print("pure is nbc.c's (µs); W is the collective's own CPU time per call (µs; done: the fraction of W's runs "
          "complete before the Wait; W's pure: the pure of W's own run, compute_us / 4); ceiling = "
          "100 * (1 - W / pure), clamped to 0..100: the most overlap the rank's one core leaves; overlap and "
          "overlap_t are OSU's (%, without and with 64 Tests); exposed = ovrl - cpu and ovrl_t - cpu (µs per call: "
          "what the program waits beyond its computation).\n")
    print("| operation | size (B) | MPI | pure | W | done | W's pure | W ÷ pure | ceiling | overlap | overlap_t "
          "| exposed | exposed_t |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for op in NBC:
        for s in sorted(set(sizes_of(np, op)) | set(sizes_of(np, op + "_w"))):
            for side in SIDES:
                g = lambda o, f: vals(side, np, o, s, f, state)
                pure, w = g(op, "pure_us"), g(op + "_w", "w_us")
                if not pure and not w:
                    continue
                done, wpure = g(op + "_w", "done"), [v / 4 for v in g(op + "_w", "compute_us")]
                share = med(w) / med(pure) if w and pure and med(pure) else None
                ceiling = None if share is None else min(max(100 * (1 - share), 0), 100)
                print(f"| {op} | {s if op != 'ibarrier' else '–'} | {NAMES[side]} | {cell(pure)} | {cell(w)} "
                      f"| {'–' if not done else f'{med(done):.2f}'} | {cell(wpure)} "
                      f"| {'–' if share is None else f'{share:.2f}'} | {num(ceiling, True)} "
                      f"| {cell(g(op, 'overlap'), True)} | {cell(g(op, 'overlap_t'), True)} "
                      f"| {cell(g(op, 'exposed_us'))} | {cell(g(op, 'exposed_t_us'))} |")
    print()


nps = sorted({np for (_, np, _, _) in records})
print(f"Result folder: `{os.path.abspath(D)}`\n")
for state in STATES:
    print(f"## Placement: {state}\n")
    for np in nps:
        print(f"### {np} ranks: nbc.c's figures, medians [runs]; pure in µs, overlap in %; ratios gompi / other\n")
        print("| operation | size (B) | pure Open MPI | pure MPICH | pure gompi | ÷ Open MPI | ÷ MPICH "
              "| overlap Open MPI | overlap MPICH | overlap gompi | overlap_t Open MPI | overlap_t MPICH | overlap_t gompi |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        for op in NBC:
            for s in sizes_of(np, op):
                p = {side: vals(side, np, op, s, "pure_us", state) for side in SIDES}
                o = {side: vals(side, np, op, s, "overlap", state) for side in SIDES}
                t = {side: vals(side, np, op, s, "overlap_t", state) for side in SIDES}
                print(f"| {op} | {s if op != 'ibarrier' else '–'} | {cell(p['ompi'])} | {cell(p['mpich'])} | {cell(p['gompi'])} "
                      f"| {ratio(p['gompi'], p['ompi'])} | {ratio(p['gompi'], p['mpich'])} "
                      f"| {cell(o['ompi'], True)} | {cell(o['mpich'], True)} | {cell(o['gompi'], True)} "
                      f"| {cell(t['ompi'], True)} | {cell(t['mpich'], True)} | {cell(t['gompi'], True)} |")
        print()
        w_table(np, state)
        if not any(side == "gompi" and n == np for (side, n, _, _) in records):
            continue
        print(f"### {np} ranks: gompi's own figures, medians [runs], µs per call\n")
        print("Ixxx+Wait is nbc.c's pure; persistent is Start + Wait of BarrierInit/AllreduceInit; blocking is "
              "Barrier/Allreduce; W is the collective's own CPU time per call (done: the fraction of W's runs "
              "complete before the Wait); CPU and csw are the process's CPU time and context switches per call "
              "during pure.\n")
        print("| operation | size (B) | Ixxx+Wait | persistent | blocking | Ixxx+Wait ÷ blocking | persistent ÷ blocking "
              "| W | W ÷ pure | done | CPU during pure | csw per call |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|")
        for op in NBC:
            for s in sizes_of(np, op):
                g = lambda o, f: vals("gompi", np, o, s, f, state)
                pure, pers, blk = g(op, "pure_us"), g(op + "_persistent", "start_wait_us"), g(op[1:], "blocking_us")
                w = g(op + "_w", "w_us")
                done = g(op + "_w", "done")
                print(f"| {op} | {s if op != 'ibarrier' else '–'} | {cell(pure)} | {cell(pers)} | {cell(blk)} "
                      f"| {ratio(pure, blk)} | {ratio(pers, blk)} | {cell(w)} | {ratio(w, pure)} "
                      f"| {'–' if not done else f'{med(done):.2f}'} | {cell(g(op + '_w', 'pure_cpu_us'))} "
                      f"| {cell(g(op + '_w', 'pure_csw'))} |")
        print()

if CSV:
    rows = []
    for st in ("near", "far", "all"):
        for (side, np, op, size) in sorted(records):
            if op not in NBC:
                continue
            for field, metric, unit in (("pure_us", "pure", "us"), ("overlap", "overlap", "%"),
                                        ("overlap_t", "overlap_t", "%")):
                v = vals(side, np, op, size, field, st)
                if v:
                    rows.append({"mode": "nbc", "placement": st, "config": side, "op": op, "metric": metric,
                                 "ranks": np, "size": size, "value": med(v), "unit": unit, "runs": len(v)})
    write_medians(CSV, rows)
