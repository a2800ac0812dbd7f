"""The Slurm policy's per-instant shortcuts decide exactly as the plain computation does.

Two shortcuts keep state between ``decide`` calls: the queue reuses a job's records while its
eligibility, submit time, priority period and the partitions' states are unchanged
(``queue._Static.recs``), and fair share is ranked only when a priority first needs it
(``SlurmPolicy._fs``). Each is compared on random workloads with a run where it is defeated
(records cleared before every build; fair share ranked at every PriorityCalcPeriod pass),
job table and event log alike.
"""
from __future__ import annotations

import dataclasses
import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpupool.formats.pool_dir import load_pool
from gpupool.policy.slurm import queue
from gpupool.policy.slurm.policy import SlurmPolicy
from gpupool.simulation import simulate
from gpupool.workload.sources import load_workload

POOL = Path(__file__).resolve().parents[2] / "examples" / "seed-pool"


@pytest.fixture(scope="module")
def pool():
    return load_pool(POOL)


def _workload(pool, seed: int, jobs: int, fixed_share: float, deps: bool, begins: bool):
    """The first ``jobs`` jobs of the seed pool's overloaded week (4 nodes: queues of ~20
    records), with priorities, dependencies and begin times changed at random."""
    rng = random.Random(seed)
    wls = sorted(load_workload(None, pool), key=lambda w: (w.submit_time, w.id))[:jobs]
    out = []
    for w in wls:
        changes = {}
        if rng.random() >= fixed_share:
            changes["priority"] = None  # multifactor: age and fair share decide
        if deps and out and rng.random() < 0.2:
            changes["dependency"] = f"afterok:{rng.choice(out).id}"
        if begins and rng.random() < 0.1:
            changes["begin_time"] = w.submit_time + rng.choice([60.0, 600.0, 3600.0])
        out.append(dataclasses.replace(w, **changes))
    return out


def _table(res):
    jobs = sorted(res.output.jobs, key=lambda j: j.id)
    return ([(j.id, j.state, j.first_start, j.start, j.end, j.placement, j.requeues, j.preemptions, j.reason,
              j.via) for j in jobs], list(res.output.events))


def _plain_queue(monkeypatch):
    build = queue.build

    def fresh(cy):
        queue._static_of(cy.pol).recs.clear()
        return build(cy)

    monkeypatch.setattr(queue, "build", fresh)
    # policy.py imported the module, not the function: patching the module attribute is enough


def _eager_fair_share(monkeypatch):
    update = SlurmPolicy._update_usage

    def eager(self, snap):
        update(self, snap)
        if self.use_fs:
            self._fs  # rank now, as the policy did before it ranked lazily

    monkeypatch.setattr(SlurmPolicy, "_update_usage", eager)


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(seed=st.integers(1, 10_000), jobs=st.sampled_from([100, 200]), fixed_share=st.sampled_from([0.0, 0.5, 1.0]),
       deps=st.booleans(), begins=st.booleans())
def test_shortcuts_decide_as_the_plain_computation(pool, monkeypatch, seed, jobs, fixed_share, deps, begins):
    wls = _workload(pool, seed, jobs, fixed_share, deps, begins)
    fast = _table(simulate(pool, wls, "slurm"))
    with monkeypatch.context() as m:
        _plain_queue(m)
        _eager_fair_share(m)
        plain = _table(simulate(pool, wls, "slurm"))
    assert fast == plain
    assert any(row[3] is not None for row in fast[0])  # something ran
