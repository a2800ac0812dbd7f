"""Where a simulated month's will-run time goes, measured against each cycle's later starts.

Why: the whole-month benchmark's backfill cycles plan hundreds of records ahead of a small job
at the queue's tail that can start now. A record whose plan begins after the window of every
job the cycle still starts changes no start by its own reservation; this probe measures how
much will-run time such records take, as an upper bound on what skipping them could save
(``benchmarks/README.md``, tenth round, says why skipping them is not yet exact).

It runs ``--policy slurm`` on the synthetic month (no plans recorded, as a simulation runs),
wrapping ``backfill.will_run_raw``, ``Cycle.start`` and ``backfill.run``. Per cycle, each
will-run call is classed by the raw start it answered, against the latest window end
(``now`` + the limit the cycle planned the job with) of the jobs the cycle starts after it. A
window reads every slot that begins at or before its end, so a plan exactly at a window's end
counts as inside it:

* ``after_last_start``: no job starts after it in the cycle;
* ``beyond_later_windows``: it plans after every later start's window end;
* ``never``: it cannot run on the usable nodes;
* the rest: it plans inside a later start's window, or starts now.

Times are wall seconds of the wrapped calls (the probe's own cost is not in them).

It also classes each reservation the cycle adds (``NodeSpace.add``), against the same later
starts, and, for one that begins after every later start's window end, whether a later
``window`` or ``overlaps`` call before the cycle's last start reached past its begin
(``resv_beyond_read_past``: the query's ``reach``, the end of the last slot it read, lies
after the begin). A deferred reservation (planned only once a later query reaches it) would
have to be planned at that read, so this count is how often deferring would not save its
planning (eleventh round, ``benchmarks/README.md``). It is an upper bound: ``reach`` may lie a
slot beyond what a query read of the nodes, and a query on other nodes, or one that begins
after the reservation ends, would not need it.
"""
from __future__ import annotations

import argparse
import collections
import json
import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _month  # noqa: E402
import gpupool  # noqa: E402
from gpupool.policy.slurm import backfill  # noqa: E402
from gpupool.policy.slurm.node_space import NodeSpace  # noqa: E402
from gpupool.policy.slurm.policy import Cycle  # noqa: E402


def _classify(calls: list[tuple], now: float, tally: collections.Counter) -> None:
    """Class each will-run call of one cycle, ``("will_run", raw start, seconds)``, by the latest
    window end of the ``("start", limit)`` events after it (other events are passed over)."""
    latest_after = -math.inf
    for event in reversed(calls):
        kind, value = event[0], event[1]
        if kind == "start":
            latest_after = max(latest_after, now + value)
            continue
        if kind != "will_run":
            continue
        seconds = event[2]
        tally["will_run_calls"] += 1
        tally["will_run_s"] += seconds
        if latest_after == -math.inf:
            cls = "after_last_start"
        elif value is None:
            cls = "never"
        elif value != -math.inf and value > latest_after:
            cls = "beyond_later_windows"
        else:
            continue
        tally[f"{cls}_calls"] += 1
        tally[f"{cls}_s"] += seconds


def _classify_reservations(events: list[tuple], now: float, tally: collections.Counter) -> None:
    """Class each reservation of one cycle: ``events`` holds, in order, ``("start", limit)``,
    ``("add", begin)`` and ``("read", reach)`` (the end of the last slot a map query read);
    other events are passed over."""
    last = max((i for i, ev in enumerate(events) if ev[0] == "start"), default=-1)
    window_end = -math.inf  # the latest window end of the starts after the current event
    read_end = -math.inf  # the furthest read after the current event, before the last start
    marks: list[tuple[float, float]] = [(-math.inf, -math.inf)] * len(events)
    for i in range(len(events) - 1, -1, -1):
        marks[i] = (window_end, read_end)
        kind, value = events[i][0], events[i][1]
        if kind == "start":
            window_end = max(window_end, now + value)
        elif kind == "read" and i < last:
            read_end = max(read_end, value)
    for i, event in enumerate(events):
        kind, value = event[0], event[1]
        if kind != "add":
            continue
        tally["resv"] += 1
        later_windows, later_reads = marks[i]
        if i > last:
            tally["resv_after_last_start"] += 1
        elif value <= later_windows:
            tally["resv_inside_later_window"] += 1
        else:
            tally["resv_beyond"] += 1
            if later_reads > value:
                tally["resv_beyond_read_past"] += 1


def probe(pool_dir: Path, spec: str, submitted_before_h: float | None) -> dict:
    pool, wls = _month.workloads(pool_dir, spec, None if submitted_before_h is None else submitted_before_h * 3600)
    #: per cycle, in order: will-run calls, starts, reservations and map reads
    events: list[tuple] | None = None
    tally: collections.Counter = collections.Counter()
    will_run_raw, start, run, add = backfill.will_run_raw, Cycle.start, backfill.run, NodeSpace.add

    def noted_add(self, begin, *args):
        if events is not None:
            events.append(("add", max(begin, self.begins[0])))
        return add(self, begin, *args)

    def noting_reach(query):
        """A map query (``window``, ``overlaps``) that notes how far it read."""
        def noted(self, *args):
            answer = query(self, *args)
            if events is not None:
                events.append(("read", self.reach))
            return answer
        return noted

    def timed_will_run(wl, *args, **kwargs):
        t = time.perf_counter()
        answer = will_run_raw(wl, *args, **kwargs)
        if events is not None:
            events.append(("will_run", answer[0], time.perf_counter() - t))
        return answer

    def noted_start(self, job, placement, info, *args, **kwargs):
        if events is not None:
            # the window the cycle read for it: its planning limit (MaxTime for a job without
            # one), or the --time-min limit it starts with
            limit = self.pol.plan_limit(job, info)
            if kwargs.get("limit") is not None:
                limit = min(limit, kwargs["limit"])
            events.append(("start", limit))
        return start(self, job, placement, info, *args, **kwargs)

    def classified_run(cy, records):
        nonlocal events
        events = []
        t = time.perf_counter()
        try:
            return run(cy, records)
        finally:
            tally["cycles"] += 1
            tally["cycle_s"] += time.perf_counter() - t
            tally["records"] += len(records)
            mine, events = events, None
            _classify(mine, cy.now, tally)
            _classify_reservations(mine, cy.now, tally)

    wrappers = {
        (backfill, "will_run_raw"): timed_will_run, (Cycle, "start"): noted_start, (backfill, "run"): classified_run,
        (NodeSpace, "add"): noted_add, (NodeSpace, "window"): noting_reach(NodeSpace.window),
        (NodeSpace, "overlaps"): noting_reach(NodeSpace.overlaps),
    }
    with _month.wrapped(wrappers):
        cpu = time.process_time()
        gpupool.simulate(pool, wls, "slurm")
        cpu = time.process_time() - cpu
    out = {"jobs": len(wls), "cpu_s": round(cpu, 2)}
    out.update({k: round(v, 3) if isinstance(v, float) else v for k, v in sorted(tally.items())})
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    _month.add_arguments(ap)
    ap.add_argument("--submitted-before", type=float, metavar="HOURS",
                    help="only jobs submitted before this many hours")
    ap.add_argument("--json", action="store_true", help="print the report as JSON")
    args = ap.parse_args(argv)
    out = probe(args.pool, args.spec, args.submitted_before)
    if args.json:
        print(json.dumps(out))
    else:
        for key, value in out.items():
            print(f"{key:>32}: {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
