"""Where a simulated month's Slurm time goes, day by day.

Why: the whole-month benchmark's cost is not spread evenly. A few busy days build queues of
hundreds of records, and there every backfill cycle plans most of them, so three days cost
almost as much as the other 28 (``benchmarks/README.md``, eighth and eleventh rounds). A
speed idea has to be measured on those days, and reaching them takes minutes of simulation, so
this probe prints one row per simulated day and can attach py-spy once a given day is reached.

Per day (by the cycle's instant): process CPU seconds, backfill cycles, queue records handed to
backfill per cycle, reservations added to the map, map queries (``NodeSpace.window``) and
will-run misses (``backfill.will_run_raw``, the calls that were not answered from a memo).
Counting wraps those functions, so CPU seconds include the wrappers' small cost. A day's CPU
runs from its first backfill cycle to the next day's first one (a day with no cycle has no row;
its time goes to the row before); the time before the first cycle (the engine's setup, hours
with nothing pending) is ``before_first_cycle_s``.

Also per day, the CPU spent inside the backfill cycles themselves (``backfill_s``), the main
passes (``main_s``) and the queue builds (``queue_s``), each timed around the call and counted
in the row whose span it ran in (so a main pass before a day's first cycle counts in the row
before, as its CPU does; those before the first cycle are ``before_first_cycle_main_s`` and
``before_first_cycle_queue_s``, and the run's totals include them). ``engine_s`` is the CPU up
to the end of the engine's run (the policy's and the engine's setup included, as
``bench_engine.py`` times a policy), ``results_s`` the result tables ``simulate`` builds after
it (in the last row's CPU too). ``outside_backfill_s`` is ``engine_s`` less every cycle's CPU:
the engine's run outside the cycles (the probe's wrappers and the garbage collections that
code happened to trigger included), roughly what the month would still cost if backfill took
no time at all.

So that these figures compare across machines, the same process first times
``bench_engine.py``'s baseline on the same jobs (the bare heap replay, best of three:
``baseline_s``) and one replay under fifo as ``bench_engine.py`` times it (``fifo_s``); the
report's ``ratios`` divide the Slurm run's parts by both.

``--spy-from DAY --spy-seconds N --spy-out FILE`` starts ``py-spy record --format raw`` on this
process when the first backfill cycle at or after DAY runs and stops the probe once it is done,
so a profile of the costly days needs no run to the month's end; py-spy must be installed
(``pip install py-spy``), and a py-spy that fails makes the probe exit 1.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _month  # noqa: E402
import bench_engine  # noqa: E402
import gpupool  # noqa: E402
from gpupool.engine.core import Engine  # noqa: E402
from gpupool.engine.policy_api import make_policy  # noqa: E402
from gpupool.policy.slurm import backfill, main_sched, queue  # noqa: E402
from gpupool.policy.slurm.node_space import NodeSpace  # noqa: E402

DAY = 86400.0
SPY_SECONDS = 120
COUNTED = ("cycles", "records", "reservations", "window_calls", "will_run_misses")
#: CPU seconds timed around calls, per day: backfill cycles, main passes, queue builds
TIMED = ("backfill_s", "main_s", "queue_s")
#: the probe's clock (a test replaces it to count the timed calls)
_clock = time.process_time


class _Stop(Exception):
    """Raised from a wrapped cycle to end the simulation early (``--until-day``, py-spy done)."""


def probe(pool_dir: Path, spec: str, until_day: float | None = None, spy_from: float | None = None,
          spy_seconds: int = 120, spy_out: Path | None = None) -> dict:
    pool, wls = _month.workloads(pool_dir, spec, None if until_day is None else until_day * DAY)
    baseline_s = bench_engine._timed(lambda: bench_engine.baseline_replay(wls), 3, _clock)
    fifo_s = bench_engine._timed(lambda: Engine(pool, wls, make_policy("fifo", pool), record_events=False).run(),
                                 1, _clock)
    days: dict[int, collections.Counter] = {}
    today = collections.Counter()
    state = {"day": None, "cpu": 0.0, "spy": None, "setup": 0.0, "run_end": None}
    timed: dict[int | None, collections.Counter] = collections.defaultdict(collections.Counter)
    run, engine_run = backfill.run, Engine.run

    def close_day() -> None:
        if state["day"] is not None:
            cpu = _clock()
            today["cpu_s"] = round(cpu - state["cpu"], 2)
            state["cpu"] = cpu
            days[state["day"]] = collections.Counter(today)
        today.clear()

    def counting(fn, key: str):
        """``fn``, counted in today's ``key``."""
        def counted(*args, **kwargs):
            today[key] += 1
            return fn(*args, **kwargs)
        return counted

    def timing(fn, key: str):
        """``fn``, its CPU added to ``key`` of the row it runs in."""
        def timed_call(*args, **kwargs):
            began = _clock()
            try:
                return fn(*args, **kwargs)
            finally:
                timed[state["day"]][key] += _clock() - began
        return timed_call

    timed_run = timing(run, "backfill_s")

    def counted_run(cy, records):
        if until_day is not None and cy.now >= until_day * DAY:
            raise _Stop
        day = int(cy.now // DAY)
        if day != state["day"]:
            if state["day"] is None:  # the first cycle: what came before is the setup
                cpu = _clock()
                state["setup"] = cpu - state["cpu"]
                state["cpu"] = cpu
            close_day()
            state["day"] = day
        spy = state["spy"]
        if spy is None and spy_from is not None and cy.now >= spy_from * DAY:
            state["spy"] = spy = _start_spy(spy_seconds, spy_out)
        elif spy is not None and spy.poll() is not None:
            raise _Stop
        today["cycles"] += 1
        today["records"] += len(records)
        return timed_run(cy, records)

    def timed_engine(self, *args, **kwargs):
        try:
            return engine_run(self, *args, **kwargs)
        finally:
            state["run_end"] = _clock()

    wrappers = {
        (backfill, "run"): counted_run,
        (NodeSpace, "window"): counting(NodeSpace.window, "window_calls"),
        (NodeSpace, "add"): counting(NodeSpace.add, "reservations"),
        (backfill, "will_run_raw"): counting(backfill.will_run_raw, "will_run_misses"),
        (main_sched, "run"): timing(main_sched.run, "main_s"),
        (queue, "build"): timing(queue.build, "queue_s"),
        (Engine, "run"): timed_engine,
    }
    start = state["cpu"] = _clock()
    stopped = False
    try:
        with _month.wrapped(wrappers):
            gpupool.simulate(pool, wls, "slurm", record_events=False)
    except _Stop:
        stopped = True
    finally:
        close_day()
        spy = state["spy"]
        if spy is not None:
            if spy.poll() is None:  # the simulation ended first: py-spy writes what it has
                spy.send_signal(signal.SIGINT)
            spy.wait()
    rows = []
    for day in sorted(days):
        c = days[day]
        rows.append({"day": day, "cpu_s": c["cpu_s"], **{k: round(timed[day][k], 2) for k in TIMED},
                     **{k: c[k] for k in COUNTED},
                     "records_per_cycle": round(c["records"] / c["cycles"], 1) if c["cycles"] else 0.0})
    end = _clock()
    run_end = end if state["run_end"] is None else state["run_end"]
    totals = {k: sum(t[k] for t in timed.values()) for k in TIMED}
    engine_s, outside_s = run_end - start, run_end - start - totals["backfill_s"]
    parts = (("engine", engine_s), ("backfill", totals["backfill_s"]), ("outside_backfill", outside_s))
    ratios = {f"{name}_to_{base}": round(value / base_value, 2) for name, value in parts
              for base, base_value in (("baseline", baseline_s), ("fifo", fifo_s))}
    ratios["fifo_to_baseline"] = round(fifo_s / baseline_s, 2)
    return {"jobs": len(wls), "cpu_s": round(end - start, 2), "engine_s": round(engine_s, 2),
            "results_s": round(end - run_end, 2), **{k: round(v, 2) for k, v in totals.items()},
            "outside_backfill_s": round(outside_s, 2), "baseline_s": round(baseline_s, 4),
            "fifo_s": round(fifo_s, 2), "ratios": ratios, "stopped_early": stopped,
            "before_first_cycle_main_s": round(timed[None]["main_s"], 2),
            "before_first_cycle_queue_s": round(timed[None]["queue_s"], 2),
            "before_first_cycle_s": round(state["setup"], 2), "days": rows,
            "spy_rc": None if state["spy"] is None else state["spy"].returncode}


def _start_spy(seconds: int, out: Path | None) -> subprocess.Popen:
    """py-spy on this process (``main`` checked that it is installed)."""
    exe = shutil.which("py-spy") or "py-spy"
    return subprocess.Popen([exe, "record", "--pid", str(os.getpid()), "--format", "raw", "--rate", "50",
                             "--duration", str(seconds), "--nonblocking", "-o", str(out or "probe_days.raw")])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    _month.add_arguments(ap)
    ap.add_argument("--until-day", type=float, help="stop at this simulated day (jobs submitted before it)")
    ap.add_argument("--spy-from", type=float, metavar="DAY", help="attach py-spy from this simulated day")
    ap.add_argument("--spy-seconds", type=int, default=SPY_SECONDS,
                    help=f"how long py-spy records (default {SPY_SECONDS} s)")
    ap.add_argument("--spy-out", type=Path, help="py-spy's raw profile (default probe_days.raw)")
    ap.add_argument("--json", action="store_true", help="print the report as JSON")
    args = ap.parse_args(argv)
    if args.spy_seconds <= 0:
        ap.error(f"--spy-seconds: must be positive, got {args.spy_seconds}")
    if args.until_day is not None and args.until_day <= 0:
        ap.error(f"--until-day: must be positive, got {args.until_day}")
    if args.spy_from is None:
        if args.spy_out is not None or args.spy_seconds != SPY_SECONDS:
            ap.error("--spy-out and --spy-seconds need --spy-from DAY")
    else:
        if args.until_day is not None and args.spy_from >= args.until_day:
            ap.error(f"--spy-from {args.spy_from:g}: the probe stops at --until-day {args.until_day:g}")
        if shutil.which("py-spy") is None:
            ap.error("--spy-from needs py-spy on PATH (pip install py-spy)")
        folder = (args.spy_out or Path("probe_days.raw")).resolve().parent
        if not folder.is_dir():
            ap.error(f"--spy-out: no folder {folder}")
    out = probe(args.pool, args.spec, args.until_day, args.spy_from, args.spy_seconds, args.spy_out)
    failed = out["spy_rc"] not in (None, 0)
    if failed:
        print(f"py-spy failed (exit status {out['spy_rc']}): no profile", file=sys.stderr)
    if args.json:
        print(json.dumps(out))
        return 1 if failed else 0
    print(f"{out['jobs']} jobs, {out['cpu_s']} s CPU" + (" (stopped early)" if out["stopped_early"] else "")
          + f"; {out['before_first_cycle_s']} s before the first backfill cycle (main passes "
          f"{out['before_first_cycle_main_s']} s, queue builds {out['before_first_cycle_queue_s']} s)")
    print(f"engine run {out['engine_s']} s, then result tables {out['results_s']} s; in the run, outside the "
          f"backfill cycles: {out['outside_backfill_s']} s (main passes {out['main_s']} s, queue builds "
          f"{out['queue_s']} s), inside them: {out['backfill_s']} s")
    r = out["ratios"]
    print(f"same jobs, same process: baseline {out['baseline_s']} s, fifo {out['fifo_s']} s "
          f"(x{r['fifo_to_baseline']} baseline); the Slurm run x{r['engine_to_baseline']} baseline, "
          f"x{r['engine_to_fifo']} fifo; outside the cycles x{r['outside_backfill_to_baseline']} baseline, "
          f"x{r['outside_backfill_to_fifo']} fifo")
    print(f"{'day':>4}{'cpu s':>9}{'bf s':>8}{'main s':>8}{'queue s':>8}{'cycles':>8}{'rec/cycle':>10}"
          f"{'resv':>9}{'windows':>10}{'will-run':>10}")
    for r in out["days"]:
        print(f"{r['day']:>4}{r['cpu_s']:>9.1f}{r['backfill_s']:>8.1f}{r['main_s']:>8.1f}{r['queue_s']:>8.1f}"
              f"{r['cycles']:>8}{r['records_per_cycle']:>10.1f}"
              f"{r['reservations']:>9}{r['window_calls']:>10}{r['will_run_misses']:>10}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
