"""The Slurm policy's running-jobs index gives, at every decision, the list a full rebuild gives.

``RunningIndex`` keeps the limit-end-ordered running jobs between ``decide`` calls instead of
rebuilding them from the snapshot each time (a speed-up, ``policy/slurm/running.py``). The
reference below is that rebuild; runs with preemption (requeues), jobs over their limits and
array jobs compare the two at every instant.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from gpupool.engine.core import Engine
from gpupool.engine.policy_api import make_policy
from gpupool.formats.pool_dir import load_pool
from gpupool.policy.slurm import limits
from gpupool.policy.slurm.running import RunningIndex
from gpupool.workload.synthetic import generate, parse_synthetic_spec

REPO = Path(__file__).resolve().parents[2]


def rebuild(pol, active: dict, now: float) -> list[tuple]:
    """Every running job's (limit end, placement, expected free time), in (limit end, table
    order) order: what the scheduler passes iterate."""
    rows = [(pol.limit_end(job, now), seq, job.placement, pol.expected_end(job, now))
            for seq, job in enumerate(active.values())]
    rows.sort(key=lambda r: (r[0], r[1]))
    return [(r[0], r[2], r[3]) for r in rows]


def _usage(pol, active: dict) -> dict:
    """The limit aggregates summed over every running job, without empty slots."""
    usage: dict = {}
    for job in active.values():
        req = pol.req(job)
        alloc = pol.alloc_of(job)
        limits.add_usage(usage, req, alloc)
        limits.add_account_usage(usage, pol.account_chain(req.account), alloc)
    return _nonzero(usage)


def _nonzero(usage: dict) -> dict:
    out = {k: {t: v for t, v in slot.items() if v} for k, slot in usage.items()}
    return {k: slot for k, slot in out.items() if slot}


def _arrays(active: dict) -> dict[int, int]:
    out: dict[int, int] = {}
    for job in active.values():
        aid = job.wl.array_job_id
        if aid is not None:
            out[aid] = out.get(aid, 0) + 1
    return out


@pytest.mark.parametrize("pool_name,spec", [
    ("large-pool", "synthetic:day?seed=4&jobs=1500"),
    ("seed-pool", "synthetic:day?seed=2&jobs=150"),
])
def test_index_matches_a_full_rebuild_at_every_decision(monkeypatch, pool_name, spec):
    pool = load_pool(REPO / "examples" / pool_name)
    workloads = generate(pool, parse_synthetic_spec(spec))
    checked = {"calls": 0, "overrun": 0, "changed": 0, "limits": 0}
    original = RunningIndex.update
    previous: list = []

    def checking_update(self, active, now, suspended=None):
        entries = original(self, active, now, suspended)
        want = rebuild(self._pol, active, now)
        assert [(e[0], e[2], e[3]) for e in entries] == want, f"at t={now}"
        assert self.arrays == _arrays(active)
        if self._pol.s.limits_enforced:
            assert _nonzero(self.usage) == _usage(self._pol, active), f"at t={now}"
            checked["limits"] += 1
        assert len({e[1] for e in entries}) == len(entries)  # seq numbers stay unique
        checked["calls"] += 1
        checked["overrun"] += sum(1 for e in want if e[0] < now)
        checked["changed"] += want != previous
        previous[:] = want
        return entries

    monkeypatch.setattr(RunningIndex, "update", checking_update)
    engine = Engine(pool, workloads, make_policy("slurm", pool), record_events=False)
    engine.run()
    assert checked["calls"] > 100 and checked["changed"] > 50
    if pool_name == "seed-pool":  # AccountingStorageEnforce=limits there
        assert checked["limits"] == checked["calls"]
    if pool_name == "large-pool":
        assert checked["overrun"] > 0  # jobs past their limit were compared too


def test_index_follows_suspensions(monkeypatch):
    """Gang time slicing and SUSPEND preemption move a suspended job's limit end on; the index
    recomputes those jobs (a job that leaves and rejoins keeps exactly one entry)."""
    from gpupool.conformance.slurm_cases import build_pool, build_workloads

    case = {
        "id": "running-index-gang",
        "config": {"PreemptType": "preempt/partition_prio", "PreemptMode": "SUSPEND,GANG"},
        "cluster": {"nodes": [{"name": "n[1-3]", "cpus": 4, "gpus": 1, "mem_mb": 10000}],
                    "partitions": [{"name": "low", "nodes": "n[1-3]", "priority_tier": 1, "oversubscribe": "FORCE:2"},
                                   {"name": "high", "nodes": "n[1-3]", "priority_tier": 2}]},
        "jobs": [{"id": i + 1, "submit": 20 * i, "cpus": 2 + i % 3, "nodes": 1 + i % 2, "gpus_per_node": 0,
                  "run_s": 90 + 37 * i, "mem_mb": 3000, "time_limit_min": 3 + i % 4,
                  "partition": "high" if i % 3 == 2 else "low"} for i in range(14)],
    }
    pool, _ = build_pool(case)
    workloads, _ = build_workloads(case)
    seen = {"suspended": 0}
    original = RunningIndex.update

    def checking_update(self, active, now, suspended=None):
        entries = original(self, active, now, suspended)
        assert [(e[0], e[2], e[3]) for e in entries] == rebuild(self._pol, active, now), f"at t={now}"
        seen["suspended"] += len(suspended or ())
        return entries

    monkeypatch.setattr(RunningIndex, "update", checking_update)
    Engine(pool, workloads, make_policy("slurm", pool), check=True).run()
    assert seen["suspended"] > 0
