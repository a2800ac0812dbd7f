"""``bench_engine.py --submitted-before``: a slice of a longer synthetic workload that keeps its
own jobs (the deep-queue Slurm benchmark, benchmarks/README.md "Deep queues").

No timing assertions: how fast is a benchmark's business (benchmarks/), never a test's.
"""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from gpupool.formats.pool_dir import load_pool
from gpupool.workload.synthetic import generate, parse_synthetic_spec

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "benchmarks" / "bench_engine.py"


def _load_bench():
    spec = importlib.util.spec_from_file_location("bench_engine", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_durations_take_seconds_and_unit_suffixes():
    bench = _load_bench()
    assert bench.parse_duration("90") == 90.0
    assert bench.parse_duration("90s") == 90.0
    assert bench.parse_duration("30m") == 1800.0
    assert bench.parse_duration("16h") == 57_600.0
    assert bench.parse_duration("2d") == 172_800.0
    for bad in ("", "h", "soon", "-3h", "0"):
        with pytest.raises(ValueError, match="--submitted-before"):
            bench.parse_duration(bad)


def test_the_slice_keeps_exactly_the_jobs_submitted_before_the_cut():
    bench = _load_bench()
    spec = "synthetic:day?seed=3"
    jobs = generate(load_pool(ROOT / "examples" / "large-pool"), parse_synthetic_spec(spec))
    cut = 3 * 3600.0
    kept = [w for w in jobs if w.submit_time < cut]
    assert 0 < len(kept) < len(jobs)
    report = bench.run_benchmark(spec=spec, submitted_before=cut, policies=("fifo",), memory=False)
    assert report["jobs"] == len(kept)
    row = report["results"][0]
    assert row["jobs"] == len(kept) and "submitted before 10800 s" in row["workload"]
    assert row["completed"] > 0
