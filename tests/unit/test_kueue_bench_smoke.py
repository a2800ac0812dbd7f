"""benchmarks/bench_kueue.py runs end to end on a tiny share of Kueue's perf shape.

No timing assertions (timing is the benchmark's business); the checks are on what the run
must be: every workload admitted and completed, quota respected, every report field present.
"""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_kueue.py"


def _load_bench():
    spec = importlib.util.spec_from_file_location("bench_kueue", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_perf_shape_matches_kueue_generator():
    bench = _load_bench()
    pool = bench.perf_pool(5, 6)
    assert len(pool.kueue.cluster_queues) == 30 and len(pool.kueue.cohorts) == 5
    cq = pool.kueue.cluster_queues["cq-0-0"]
    quota = cq.resource_groups[0].flavors[0].resources["cpu"]
    assert (quota.nominal, quota.borrowing_limit) == (20_000, 100_000)
    assert (cq.preemption.reclaim_within_cohort, cq.preemption.within_cluster_queue) == ("Any", "LowerPriority")
    wls = bench.perf_workloads(5, 6)
    assert len(wls) == 15_000
    small = [w for w in wls if w.labels["perf-class"] == "small" and w.namespace == "ns-0-0"]
    assert len(small) == 350 and small[1].submit_time == 0.1 and small[0].priority == 50


def test_small_run_reports_every_field():
    bench = _load_bench()
    report = bench.run_benchmark(("baseline",), scale=0.02)
    run, = report["runs"]
    assert run["workloads"] == run["admissions"] == run["completed"] == 30 * (7 + 2 + 1)
    for key in ("seconds", "cpu_seconds", "admissions_per_cpu_s", "fifo_cpu_seconds", "ratio_to_fifo",
                "decides", "cycles", "simulated_end_s"):
        assert run[key] > 0, key
    assert {"large", "medium", "small"} == set(run["mean_wait_s"])
    assert run["cost_by_backlog"] and all(c["decides"] > 0 for c in run["cost_by_backlog"])
    assert run["work_over_nominal"] <= 1.0  # the cohorts never hand out more than their quota
    json.dumps(report)


def test_cli_json(capsys):
    bench = _load_bench()
    assert bench.main(["--shape", "baseline", "--scale", "0.02", "--no-fifo", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["runs"][0]["shape"] == "baseline" and "ratio_to_fifo" not in report["runs"][0]
