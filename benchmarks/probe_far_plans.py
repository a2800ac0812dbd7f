"""Where a simulated month's will-run time goes, measured against each cycle's later starts.

Why: the whole-month benchmark's backfill cycles plan hundreds of records ahead of a small job
at the queue's tail that can start now. A record whose plan begins after the window of every
job the cycle still starts changes no start by its own reservation; this probe measures how
much will-run time such records take, as an upper bound on what skipping them could save
(``benchmarks/README.md``, tenth round, says why skipping them is not yet exact).

It runs ``--policy slurm`` on the synthetic month (no plans recorded, as a simulation runs),
wrapping ``backfill.will_run_raw``, ``Cycle.start`` and ``backfill.run``. Per cycle, each
will-run call is classed by the raw start it answered, against the latest window end
(``now`` + time limit) of the jobs the cycle starts after it:

* ``after_last_start``: no job starts after it in the cycle;
* ``beyond_later_windows``: it plans at or after every later start's window end;
* ``never``: it cannot run on the usable nodes;
* the rest: it plans inside a later start's window, or starts now.

Times are wall seconds of the wrapped calls (the probe's own cost is not in them).
"""
from __future__ import annotations

import argparse
import collections
import json
import math
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import gpupool  # noqa: E402
from gpupool.formats.pool_dir import load_pool  # noqa: E402
from gpupool.policy.slurm import backfill  # noqa: E402
from gpupool.policy.slurm.policy import Cycle  # noqa: E402
from gpupool.workload.synthetic import generate, parse_synthetic_spec  # noqa: E402


def _classify(calls: list[tuple], now: float, tally: collections.Counter) -> None:
    """Class each will-run call of one cycle by the later starts' latest window end."""
    latest_after = -math.inf
    for kind, value, seconds in reversed(calls):
        if kind == "start":
            latest_after = max(latest_after, now + value)
            continue
        tally["will_run_calls"] += 1
        tally["will_run_s"] += seconds
        if latest_after == -math.inf:
            cls = "after_last_start"
        elif value is None:
            cls = "never"
        elif value != -math.inf and value >= latest_after:
            cls = "beyond_later_windows"
        else:
            continue
        tally[f"{cls}_calls"] += 1
        tally[f"{cls}_s"] += seconds


def probe(pool_dir: Path, spec: str, submitted_before_h: float | None) -> dict:
    pool = load_pool(pool_dir)
    wls = generate(pool, parse_synthetic_spec(spec))
    if submitted_before_h is not None:
        wls = [w for w in wls if w.submit_time < submitted_before_h * 3600]
    calls: list[tuple] | None = None
    tally: collections.Counter = collections.Counter()
    will_run_raw, start, run = backfill.will_run_raw, Cycle.start, backfill.run

    def timed_will_run(wl, *args, **kwargs):
        t = time.perf_counter()
        answer = will_run_raw(wl, *args, **kwargs)
        if calls is not None:
            calls.append(("will_run", answer[0], time.perf_counter() - t))
        return answer

    def noted_start(self, job, *args, **kwargs):
        if calls is not None:
            calls.append(("start", job.wl.time_limit or 0.0, 0.0))
        return start(self, job, *args, **kwargs)

    def classified_run(cy, records):
        nonlocal calls
        calls = []
        t = time.perf_counter()
        try:
            return run(cy, records)
        finally:
            tally["cycles"] += 1
            tally["cycle_s"] += time.perf_counter() - t
            tally["records"] += len(records)
            mine, calls = calls, None
            _classify(mine, cy.now, tally)

    backfill.will_run_raw, Cycle.start, backfill.run = timed_will_run, noted_start, classified_run
    try:
        cpu = time.process_time()
        gpupool.simulate(pool, wls, "slurm")
        cpu = time.process_time() - cpu
    finally:
        backfill.will_run_raw, Cycle.start, backfill.run = will_run_raw, start, run
    out = {"jobs": len(wls), "cpu_s": round(cpu, 2)}
    out.update({k: round(v, 3) if isinstance(v, float) else v for k, v in sorted(tally.items())})
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pool", type=Path, default=REPO / "examples" / "large-pool")
    ap.add_argument("--spec", default="synthetic:month?seed=3&median=80")
    ap.add_argument("--submitted-before", type=float, metavar="HOURS",
                    help="only jobs submitted before this many hours")
    ap.add_argument("--json", action="store_true")
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
