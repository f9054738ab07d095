#!/usr/bin/env python3
"""Sum up gompi's start-up stamps (GOMPI_STARTUP_TRACE=1) over many runs.

Input: the standard error of runs made with bench/runtime -t, each run's
lines after a line "run"; a stamp line is
    gompi-startup <ms since mpirun's spawn> <who> <pid> <what>
Output: the median time of every stamp (ms since the harness spawned
mpirun), then the median of each phase of the critical path, which is what
the issue's note asks for: mpirun's own start, the watchdog, the spawn, each
rank's exec and package inits, Init up to the modex, the modex, the rest of
Init, Finalize, and mpirun's end.
"""
import re
import statistics
import sys
from collections import defaultdict

LINE = re.compile(r'^gompi-startup (\S+) (\S+) (\d+) (.*)$')


def runs(f):
    cur = None
    for line in f:
        line = line.rstrip('\n')
        if line == 'run':
            if cur:
                yield cur
            cur = {}
            continue
        m = LINE.match(line)
        if m and cur is not None:
            t, who, _pid, what = m.groups()
            cur.setdefault((who, what), float(t))
    if cur:
        yield cur


def ranks_of(run):
    return sorted({w for (w, _) in run if w.startswith('rank')}, key=lambda w: int(w[4:]))


def phases(run):
    """The critical path's phases of one run, in ms; None where a stamp is missing."""
    g = run.get
    rks = ranks_of(run)

    def last(what):
        v = [g((r, what)) for r in rks]
        return max(v) if v and None not in v else None

    def first(what):
        v = [g((r, what)) for r in rks]
        return min(v) if v and None not in v else None

    def sub(a, b):
        return None if a is None or b is None else a - b

    exec_inits = None
    if rks:
        v = [sub(g((r, 'init: entered')), g(('mpirun', 'rank %s spawned' % r[4:]))) for r in rks]
        exec_inits = None if None in v else max(v)
    spawned = None
    if rks:
        v = [g(('mpirun', 'rank %s spawned' % r[4:])) for r in rks]
        spawned = None if None in v else max(v)
    before_modex = None
    if rks:
        v = [sub(g((r, 'init: llp selected; modex start')), g((r, 'init: entered'))) for r in rks]
        before_modex = None if None in v else max(v)
    return [
        ('mpirun exec, runtime and package inits', g(('mpirun', 'main entered'))),
        ('mpirun: options and plan', sub(g(('mpirun', 'job planned')), g(('mpirun', 'main entered')))),
        ('watchdog start, beside the PMI server\'s', sub(g(('mpirun', 'watchdog started')), g(('mpirun', 'job planned')))),
        ('spawn of every rank', sub(spawned, g(('mpirun', 'watchdog started')))),
        ('watchdog up (since mpirun\'s spawn; only mpirun\'s own form stamps)', g(('watchdog', 'watchdog up'))),
        ('rank exec, runtime and package inits (slowest)', exec_inits),
        ('Init up to the modex (slowest)', before_modex),
        ('modex (last start to last end)', sub(last('init: modex end'), last('init: llp selected; modex start'))),
        ('rest of Init, with its barrier (last to last)', sub(last('init: done'), last('init: modex end'))),
        ('Finalize (first entered to last done)', sub(last('finalize: done'), first('finalize: entered; barrier start'))),
        ('rank exit to mpirun\'s reaping', sub(g(('mpirun', 'ranks reaped')), last('finalize: done'))),
        ('mpirun: drain, tear-down, exit', sub(g(('mpirun', 'exit')), g(('mpirun', 'ranks reaped')))),
    ]


def main():
    all_runs = list(runs(open(sys.argv[1]) if len(sys.argv) > 1 else sys.stdin))
    if not all_runs:
        print('no stamps: was GOMPI_STARTUP_TRACE=1 set?')
        return
    stamps = defaultdict(list)
    for r in all_runs:
        for k, t in r.items():
            stamps[k].append(t)
    print('stamps, median ms since mpirun was spawned (%d runs):' % len(all_runs))
    for (who, what), ts in sorted(stamps.items(), key=lambda kv: statistics.median(kv[1])):
        print('  %9.3f  %-9s %s' % (statistics.median(ts), who, what))
    per = defaultdict(list)
    order = []
    for r in all_runs:
        for name, v in phases(r):
            if name not in per:
                order.append(name)
            if v is not None:
                per[name].append(v)
    print('phases, median ms (min-max):')
    for name in order:
        v = per[name]
        if v:
            print('  %8.2f  (%.2f-%.2f)  %s' % (statistics.median(v), min(v), max(v), name))


if __name__ == '__main__':
    main()
