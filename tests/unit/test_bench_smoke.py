"""The engine benchmark runs end to end on a small workload and reports every field.

No timing assertions: how fast is a benchmark's business (benchmarks/), never a test's.
"""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_engine.py"


def _load_bench():
    spec = importlib.util.spec_from_file_location("bench_engine", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


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
