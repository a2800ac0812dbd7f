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
    probe._classify([("will_run", 700.0, 1.0), ("start", 600.0, 0.0)], 100.0, tally)
    assert tally["beyond_later_windows_calls"] == 1 and tally["beyond_later_windows_s"] == 1.0


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


DAYS = BENCH.with_name("probe_days.py")


def test_day_probe_counts_each_day_and_restores_the_policy():
    probe = _load(DAYS)
    from gpupool.policy.slurm import backfill
    from gpupool.policy.slurm.node_space import NodeSpace

    kept = backfill.run, backfill.will_run_raw, NodeSpace.window, NodeSpace.add
    pool = BENCH.parents[1] / "examples" / "seed-pool"
    report = probe.probe(pool, "synthetic:month?seed=3&median=80&duration=3d")
    assert (backfill.run, backfill.will_run_raw, NodeSpace.window, NodeSpace.add) == kept
    days = report["days"]
    assert [r["day"] for r in days] == sorted({r["day"] for r in days}) and len(days) >= 3
    assert not report["stopped_early"]
    assert all(r["cycles"] > 0 and r["window_calls"] >= r["reservations"] >= 0 for r in days)
    assert abs(sum(r["cpu_s"] for r in days) - report["cpu_s"]) < 0.5
    json.dumps(report)
    # stopped at a simulated day: no cycle of that day or later is counted
    cut = probe.probe(pool, "synthetic:month?seed=3&median=80&duration=3d", until_day=2.0)
    assert cut["stopped_early"] and cut["days"] and all(r["day"] < 2 for r in cut["days"])
    assert (backfill.run, backfill.will_run_raw, NodeSpace.window, NodeSpace.add) == kept


def test_day_probe_refuses_a_bad_spy_duration(capsys):
    probe = _load(DAYS)
    with pytest.raises(SystemExit):
        probe.main(["--spy-seconds", "0"])
    assert "--spy-seconds: must be positive" in capsys.readouterr().err
