"""A backfill cycle that records no plans ends once no later record can start now
(``backfill._Startable``): every run must schedule exactly as the full cycle does.

The full cycle runs whenever plans are recorded (``record``: squeue --start, the conformance
cases), so each case and a few synthetic workloads are run both ways and their job tables
compared; preemption (the large pool's QOS), co-allocation (the share-gp cases), gang, arrays
and dependencies all pass through here.
"""
from __future__ import annotations

import copy
import math
from pathlib import Path

import pytest

import gpupool.policy.slurm  # noqa: F401  (registers the policy)
from gpupool.conformance.slurm_cases import _apply_overrides, build_pool, build_workloads, load_case, variants_of
from gpupool.engine.core import Engine
from gpupool.engine.policy_api import make_policy
from gpupool.formats.pool_dir import load_pool
from gpupool.workload.synthetic import generate, parse_synthetic_spec

ROOT = Path(__file__).resolve().parents[2]
CASES = sorted((ROOT / "tests" / "conformance" / "slurm").glob("*.yaml"))
BF_001 = ROOT / "tests" / "conformance" / "slurm" / "bf-001-classic-backfill.yaml"


def _table(pool, wls, record: bool, until: float | None = None):
    pol = make_policy("slurm", pool, {"record": record})
    out = Engine(pool, wls, pol, check=True, until=until).run()
    jobs = sorted((j.id, j.state, j.first_start, j.start, j.end, j.placement, j.requeues, j.reason, j.via,
                   j.preemptions) for j in out.jobs)
    return pol, jobs


def _case_runs(path: Path):
    case = load_case(path)
    if "scenarios" in case or "constants" in case:
        return []
    runs = []
    for name, over, _expected in variants_of(case):
        varied = _apply_overrides(copy.deepcopy(case), over)
        pool, _ = build_pool(varied)
        wls, _ = build_workloads(varied)
        until = None
        if any(math.isinf(w.runtime) for w in wls):
            # past the longest PriorityMaxAge of the cases (7 days), so every age factor has
            # reached its cap; 30 days gave the same tables at four times the cost
            until = max(w.submit_time for w in wls) + 8 * 86400
        runs.append((name, pool, wls, until))
    return runs


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_each_case_schedules_the_same_whether_or_not_plans_are_recorded(path):
    runs = _case_runs(path)
    if not runs:
        pytest.skip("a case of constants, not a run")
    for name, pool, wls, until in runs:
        _pol, full = _table(pool, wls, True, until)
        _pol, pruned = _table(pool, wls, False, until)
        assert pruned == full, name


@pytest.mark.parametrize("pool_dir,spec,hours", [
    ("large-pool", "synthetic:day?seed=5&median=80", 14),  # preempt/qos, REQUEUE
    ("large-pool", "synthetic:month?seed=3&median=80&duration=2d", 10),
    ("seed-pool", "synthetic:week?seed=11", 30),
])
def test_synthetic_load_schedules_the_same_whether_or_not_plans_are_recorded(pool_dir, spec, hours):
    pool = load_pool(ROOT / "examples" / pool_dir)
    wls = [w for w in generate(pool, parse_synthetic_spec(spec)) if w.submit_time < hours * 3600]
    _pol, full = _table(pool, wls, True)
    _pol, pruned = _table(pool, wls, False)
    assert len(full) == len(wls) and any(j[2] is not None for j in full)
    assert pruned == full


def test_a_cycle_without_plans_to_record_ends_after_the_last_record_that_can_start():
    # bf-001's cycle at 30: R holds n1-n3; J1 (4 nodes) is planned for R's limit end, J2 (one
    # node, 30 min) starts on n4, after which J3 (one node, 2 h) fits nowhere now
    pool, _ = build_pool(load_case(BF_001))
    wls, ids = build_workloads(load_case(BF_001))
    full, _ = _table(pool, wls, True, until=31)
    pruned, _ = _table(pool, wls, False, until=31)
    j1, j3 = ids["2"], ids["4"]  # the case's ids
    assert full.planned == {j1: 3600.0, j3: 7200.0}
    # J3's walk to 7200 is never made: only J1, before the start, was planned
    assert pruned.planned == {j1: 3600.0}
