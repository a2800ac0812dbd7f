"""The engine benchmark runs end to end on a small workload and reports every field.

No timing assertions: how fast is a benchmark's business (benchmarks/), never a test's.
"""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_engine.py"


def _load(path: Path):
    """A benchmark script as a module (benchmarks/ is not a package)."""
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _load_bench():
    return _load(BENCH)


def test_benchmark_report_has_every_field():
    bench = _load_bench()
    report = bench.run_benchmark(2000, policies=("fifo", "first-fit"))
    assert report["jobs"] >= 2000
    assert {"pool", "workload", "baseline", "results", "ru_maxrss_mib", "python"} <= set(report)
    assert report["baseline"]["seconds"] > 0 and report["baseline"]["jobs_per_s"] > 0
    assert [row["policy"] for row in report["results"]] == ["fifo", "first-fit"]
    for row in report["results"]:
        for key in ("seconds", "jobs_per_s", "ratio_to_baseline", "tracemalloc_peak_mib", "instants", "completed"):
            assert key in row and row[key] > 0, key
    assert report["ru_maxrss_mib"] > 0
    json.dumps(report)  # the --json output is plain data


def test_baseline_replay_pops_two_events_per_job():
    bench = _load_bench()
    from gpupool.model import PodSet, Workload

    jobs = [Workload(i, f"j{i}", (PodSet(),), submit_time=float(i), runtime=5.0) for i in range(1, 11)]
    assert bench.baseline_replay(jobs) == 20


def test_cli_json(capsys):
    bench = _load_bench()
    assert bench.main(["--jobs", "500", "--policy", "fifo", "--no-memory", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["results"][0]["policy"] == "fifo" and "tracemalloc_peak_mib" not in report["results"][0]


PROBE = BENCH.with_name("probe_far_plans.py")


def _load_probe():
    return _load(PROBE)


def test_far_plans_probe_classes_calls_and_restores_the_policy():
    probe = _load_probe()
    from gpupool.policy.slurm import backfill
    from gpupool.policy.slurm.policy import Cycle

    from gpupool.policy.slurm.node_space import NodeSpace

    kept = backfill.will_run_raw, Cycle.start, backfill.run, NodeSpace.add, NodeSpace.window, NodeSpace.overlaps
    pool = BENCH.parents[1] / "examples" / "seed-pool"
    report = probe.probe(pool, "synthetic:month?seed=3&median=80&duration=6h", None)
    assert (backfill.will_run_raw, Cycle.start, backfill.run, NodeSpace.add, NodeSpace.window,
            NodeSpace.overlaps) == kept
    assert report["jobs"] > 0 and report["cycles"] > 0 and report["will_run_calls"] > 0
    classed = sum(report.get(f"{c}_calls", 0) for c in ("after_last_start", "beyond_later_windows", "never"))
    assert 0 < classed <= report["will_run_calls"]
    assert report["resv"] > 0
    assert report["resv"] == sum(report.get(f"resv_{c}", 0) for c in ("after_last_start", "inside_later_window", "beyond"))
    assert report.get("resv_beyond_read_past", 0) <= report.get("resv_beyond", 0)
    json.dumps(report)


def test_far_plans_classes_by_the_later_starts_windows():
    import collections
    import math

    probe = _load_probe()
    tally = collections.Counter()
    # at now=100: a plan at 500, a start with a 300 s limit (window end 400), a plan at 350,
    # one that never fits, one that fits now, a start with a 600 s limit, a plan after it
    calls = [("will_run", 500.0, 1.0), ("start", 300.0, 0.0), ("will_run", 350.0, 2.0),
             ("will_run", None, 4.0), ("will_run", -math.inf, 8.0), ("start", 600.0, 0.0),
             ("will_run", 900.0, 16.0)]
    probe._classify(calls, 100.0, tally)
    assert tally["will_run_calls"] == 5 and tally["will_run_s"] == 31.0
    # 500 >= max(400, 700)? no; 350 < 700; None: never; -inf fits now; 900: after the last start
    assert tally["beyond_later_windows_calls"] == 0
    assert tally["never_calls"] == 1 and tally["after_last_start_calls"] == 1
    tally.clear()
    probe._classify([("will_run", 701.0, 1.0), ("start", 600.0, 0.0)], 100.0, tally)
    assert tally["beyond_later_windows_calls"] == 1 and tally["beyond_later_windows_s"] == 1.0
    tally.clear()
    # a plan exactly at the window's end is inside it (the window reads the slot beginning there)
    probe._classify([("will_run", 700.0, 1.0), ("start", 600.0, 0.0)], 100.0, tally)
    assert tally["beyond_later_windows_calls"] == 0 and tally["will_run_calls"] == 1


def test_far_plans_classes_reservations_and_the_reads_past_them():
    import collections

    probe = _load_probe()
    tally = collections.Counter()
    # at now=100: a reservation at 900 read past (a read ending at 1000) before the last start
    # (a 300 s limit: window end 400); one at 950 read only up to 940; one at 300, inside the
    # later start's window; one after the last start
    events = [("add", 900.0), ("read", 1000.0), ("add", 950.0), ("read", 940.0), ("add", 300.0),
              ("start", 300.0), ("read", 5000.0), ("add", 500.0)]
    probe._classify_reservations(events, 100.0, tally)
    assert tally["resv"] == 4
    assert tally["resv_beyond"] == 2 and tally["resv_beyond_read_past"] == 1
    assert tally["resv_inside_later_window"] == 1 and tally["resv_after_last_start"] == 1
    tally.clear()
    probe._classify_reservations([("add", 900.0), ("read", 1000.0)], 100.0, tally)
    assert tally["resv"] == 1 and tally["resv_after_last_start"] == 1 and tally["resv_beyond"] == 0
    tally.clear()
    # between two starts: only the later start's window (100 + 600) counts, not the earlier
    # one's (100 + 900); a reservation exactly at a window's end is inside it; a read that
    # ends exactly at a begin has not read past it
    events = [("start", 900.0), ("add", 800.0), ("read", 800.0), ("add", 700.0), ("add", 750.0),
              ("read", 760.0), ("start", 600.0)]
    probe._classify_reservations(events, 100.0, tally)
    assert tally["resv"] == 3 and tally["resv_inside_later_window"] == 1  # 700
    assert tally["resv_beyond"] == 2 and tally["resv_beyond_read_past"] == 1  # 750, not 800


DAYS = BENCH.with_name("probe_days.py")


def test_day_probe_counts_each_day_and_restores_the_policy():
    probe = _load(DAYS)
    from gpupool.engine.core import Engine
    from gpupool.policy.slurm import backfill, main_sched, queue
    from gpupool.policy.slurm.node_space import NodeSpace

    import collections

    kept = (backfill.run, backfill.will_run_raw, NodeSpace.window, NodeSpace.add, main_sched.run, queue.build,
            Engine.run)
    pool = BENCH.parents[1] / "examples" / "seed-pool"
    spec = "synthetic:month?seed=3&median=80&duration=3d"
    seen: list[tuple[float, int]] = []  # every cycle the probe passes on: (instant, records)

    def logged(cy, records):
        seen.append((cy.now, len(records)))
        return kept[0](cy, records)
    def others() -> tuple:  # every function the probe wraps but ``backfill.run``
        return backfill.will_run_raw, NodeSpace.window, NodeSpace.add, main_sched.run, queue.build, Engine.run

    backfill.run = logged
    try:
        report = probe.probe(pool, spec)
        assert backfill.run is logged and others() == kept[1:]
        by_day = collections.defaultdict(lambda: [0, 0])
        for now, n in seen:
            by_day[int(now // 86400)][0] += 1
            by_day[int(now // 86400)][1] += n
        days = report["days"]
        assert len(days) >= 3 and not report["stopped_early"] and report["spy_rc"] is None
        assert {r["day"]: [r["cycles"], r["records"]] for r in days} == dict(by_day)
        assert all(r["window_calls"] >= r["reservations"] >= 0 for r in days)
        assert sum(r["window_calls"] for r in days) > 0
        json.dumps(report)
        # stopped at a simulated day: the cycles before it are counted, none from it on
        seen.clear()
        cut = probe.probe(pool, spec, until_day=2.0)
        assert cut["stopped_early"] and seen and all(now < 2 * 86400 for now, _ in seen)
        assert sum(r["cycles"] for r in cut["days"]) == len(seen) and all(r["day"] < 2 for r in cut["days"])
        assert others() == kept[1:]  # restored after a stop too
    finally:
        backfill.run = kept[0]
    assert (backfill.run, *others()) == kept


def test_day_probe_times_cycles_passes_and_builds_in_their_rows(monkeypatch):
    """Each timed call counts in the row whose span it ran in: with a clock that ticks once per
    reading and calls that each spend a cost of their own in ticks (nothing else inside reads
    the clock), every row's timed seconds are its calls' costs, found here from the order of the
    calls themselves; those before the first cycle have fields of their own."""
    probe = _load(DAYS)
    from gpupool.policy.slurm import backfill, main_sched, queue

    kept = backfill.run, main_sched.run, queue.build
    ticks = iter(range(10**9))
    monkeypatch.setattr(probe, "_clock", lambda: float(next(ticks)))
    order: list[tuple[str, float]] = []  # every call in call order: (what, instant)

    cost = {"backfill_s": 1, "main_s": 11, "queue_s": 101}  # ticks per call, the probe's own read included

    def log(what, fn):
        def logged(cy, *args):
            order.append((what, cy.now))
            for _ in range(cost[what] - 1):
                next(ticks)
            return fn(cy, *args)
        return logged
    monkeypatch.setattr(backfill, "run", log("backfill_s", kept[0]))
    monkeypatch.setattr(main_sched, "run", log("main_s", kept[1]))
    monkeypatch.setattr(queue, "build", log("queue_s", kept[2]))
    logged = backfill.run, main_sched.run, queue.build
    import gpupool.simulation
    tables = gpupool.simulation.metrics.jobs_frame

    def slow_tables(output):  # the result tables after the run: 1000 ticks that are no part of the run
        for _ in range(1000):
            next(ticks)
        return tables(output)
    monkeypatch.setattr(gpupool.simulation.metrics, "jobs_frame", slow_tables)
    # the baseline and fifo, timed first in the same process: 4 and 10 ticks
    monkeypatch.setattr(probe.bench_engine, "baseline_replay", lambda wls: [next(ticks) for _ in range(3)])
    fifo_policy = probe.make_policy

    def slow_fifo(name, pool):
        assert name == "fifo"
        for _ in range(9):
            next(ticks)
        return fifo_policy(name, pool)
    monkeypatch.setattr(probe, "make_policy", slow_fifo)
    pool = BENCH.parents[1] / "examples" / "seed-pool"
    report = probe.probe(pool, "synthetic:month?seed=3&median=80&duration=2d")
    assert (backfill.run, main_sched.run, queue.build) == logged  # the probe's own wrappers are gone
    expected: dict = {}
    row = None  # the day of the latest cycle: a row runs from a day's first cycle to the next's
    for what, now in order:
        if what == "backfill_s":
            row = int(now // 86400)
        expected.setdefault(row, dict.fromkeys(probe.TIMED, 0))[what] += cost[what]
    days = report["days"]
    assert len(days) >= 2 and all(r["main_s"] > 0 and r["queue_s"] > 0 for r in days)
    assert {r["day"]: {k: r[k] for k in probe.TIMED} for r in days} == {d: c for d, c in expected.items()
                                                                         if d is not None}
    assert all(r["backfill_s"] == r["cycles"] for r in days)
    before = expected[None]  # passes and builds before the first cycle (the first hours' jobs)
    assert before["backfill_s"] == 0 and before["main_s"] > 0
    assert (report["before_first_cycle_main_s"], report["before_first_cycle_queue_s"]) == (before["main_s"],
                                                                                           before["queue_s"])
    for k in probe.TIMED:
        assert report[k] == sum(c[k] for c in expected.values())
    # the engine's run, then the result tables: the run outside the cycles is what is left of the first
    assert report["engine_s"] + report["results_s"] == report["cpu_s"] and 1000 <= report["results_s"] < 1010
    assert report["outside_backfill_s"] == report["engine_s"] - report["backfill_s"] > report["main_s"]
    assert (report["baseline_s"], report["fifo_s"]) == (4, 10)
    ratios = report["ratios"]
    assert ratios["fifo_to_baseline"] == 2.5
    for name in ("engine", "backfill", "outside_backfill"):
        value = report[f"{name}_s"]
        assert (ratios[f"{name}_to_baseline"], ratios[f"{name}_to_fifo"]) == (round(value / 4, 2), round(value / 10, 2))


def test_day_probe_prints_the_split_as_text(capsys):
    probe = _load(DAYS)
    pool = BENCH.parents[1] / "examples" / "seed-pool"
    assert probe.main(["--pool", str(pool), "--spec", "synthetic:month?seed=3&median=80&duration=2d",
                       "--until-day", "1"]) == 0
    out = capsys.readouterr().out
    assert "(stopped early)" in out and "outside the backfill cycles:" in out and "result tables" in out
    assert "same jobs, same process: baseline" in out
    header, first = out.splitlines()[3:5]
    assert header.split()[:5] == ["day", "cpu", "s", "bf", "s"] and first.split()[0] == "0"
    assert len(first.split()) == 10  # day, four CPU columns, cycles, records per cycle, three counts


@pytest.mark.parametrize("argv, words", [
    (["--spy-seconds", "0"], "--spy-seconds: must be positive"),
    (["--until-day", "0"], "--until-day: must be positive"),
    (["--spy-out", "x.raw"], "--spy-out and --spy-seconds need --spy-from DAY"),
    (["--spy-from", "3", "--until-day", "2"], "the probe stops at --until-day 2"),
    (["--spy-from", "1", "--spy-out", "/nonexistent/folder/x.raw"], "--spy-out: no folder"),
])
def test_day_probe_refuses_bad_options_before_simulating(argv, words, capsys, monkeypatch):
    probe = _load(DAYS)
    monkeypatch.setattr(probe.shutil, "which", lambda name: "/usr/bin/" + name)  # as if installed
    monkeypatch.setattr(probe, "probe", lambda *a, **k: pytest.fail("simulated despite a bad option"))
    with pytest.raises(SystemExit) as exit_:
        probe.main(argv)
    assert exit_.value.code == 2 and words in capsys.readouterr().err


def test_day_probe_needs_py_spy_before_simulating(capsys, monkeypatch):
    probe = _load(DAYS)
    monkeypatch.setattr(probe.shutil, "which", lambda name: None)
    monkeypatch.setattr(probe, "probe", lambda *a, **k: pytest.fail("simulated without py-spy"))
    with pytest.raises(SystemExit):
        probe.main(["--spy-from", "1"])
    assert "needs py-spy on PATH" in capsys.readouterr().err


def test_day_probe_exits_1_when_py_spy_fails(capsys, monkeypatch):
    probe = _load(DAYS)
    monkeypatch.setattr(probe.shutil, "which", lambda name: "/usr/bin/" + name)
    report = {"jobs": 1, "cpu_s": 0.1, "engine_s": 0.1, "results_s": 0.0, "backfill_s": 0.0, "main_s": 0.0,
              "queue_s": 0.0, "outside_backfill_s": 0.1, "baseline_s": 0.01, "fifo_s": 0.01, "ratios": {}, "stopped_early": True, "before_first_cycle_s": 0.0, "days": [],
              "spy_rc": 1}
    monkeypatch.setattr(probe, "probe", lambda *a, **k: report)
    assert probe.main(["--spy-from", "1", "--json"]) == 1
    assert "py-spy failed (exit status 1)" in capsys.readouterr().err
