"""The fifo policies' resume-after-submissions shortcut answers exactly what a full pass does.

A wrapper hands the policy a fresh copy of every snapshot, so the policy can never recognise
the previous pass and always rescans the whole queue; both runs must agree job for job.
"""
from __future__ import annotations

import dataclasses

from hypothesis import given, settings, strategies as st

from gpupool.engine.core import Engine, NodeEvent
from gpupool.engine.policy_api import make_policy
from gpupool.engine.snapshot import CHANGED_ALL
from gpupool.model import Gpu, Node, PodSet, Pool, Workload


class _AlwaysFullPass:
    """Delegates to a policy but hides the snapshot's history (every call looks like the first)."""

    tick_interval = None
    over_time_limit = 0.0

    def __init__(self, inner):
        self.inner = inner
        self.name = inner.name

    def decide(self, snap):
        return self.inner.decide(dataclasses.replace(snap, changed=CHANGED_ALL, applied=None))


def _pool(nodes: int) -> Pool:
    return Pool("t", nodes={
        f"n{i}": Node(f"n{i}", cpus=64, memory_mib=512_000, gpus=tuple(Gpu(j) for j in range(8)))
        for i in range(nodes)
    })


@st.composite
def _workloads(draw):
    n = draw(st.integers(1, 60))
    out = []
    for i in range(1, n + 1):
        sets = draw(st.integers(1, 2))
        pod_sets = tuple(
            PodSet(name=f"p{k}", count=draw(st.integers(1, 3)), gpus=draw(st.integers(0, 8)),
                   cpu_m=draw(st.sampled_from([500, 1000, 32000])), memory_mib=1000,
                   # first_fit keeps pods apart per pod set, the checker per job: stay single-set
                   one_per_node=sets == 1 and draw(st.booleans()), exclusive=draw(st.integers(0, 5)) == 0)
            for k in range(sets)
        )
        dep = None
        if i > 1 and draw(st.integers(0, 6)) == 0:
            dep = f"{draw(st.sampled_from(['afterok', 'afterany', 'after']))}:{draw(st.integers(1, i - 1))}"
        submit = float(draw(st.integers(0, 300)))
        begin = submit + draw(st.integers(1, 50)) if draw(st.integers(0, 8)) == 0 else None
        out.append(Workload(i, f"j{i}", pod_sets, submit_time=submit, runtime=float(draw(st.integers(1, 200))),
                            dependency=dep, begin_time=begin,
                            outcome=draw(st.sampled_from(["COMPLETED", "COMPLETED", "FAILED"]))))
    return out


def _records(out):
    return [(j.id, j.first_start, j.end, j.state, j.placement, j.reason) for j in out.jobs]


@settings(max_examples=80, deadline=None)
@given(_workloads(), st.sampled_from(["fifo", "first-fit"]), st.integers(1, 3), st.booleans())
def test_resumed_passes_match_full_passes(jobs, policy, nodes, fault):
    pool = _pool(nodes)
    faults = [NodeEvent(40.0, "n0", "down"), NodeEvent(90.0, "n0", "up")] if fault else []
    fast = Engine(pool, jobs, make_policy(policy, pool), faults=faults, check=True).run()
    full = Engine(pool, jobs, _AlwaysFullPass(make_policy(policy, pool)), faults=faults, check=True).run()
    assert _records(fast) == _records(full)
    assert fast.timeline == full.timeline and fast.events == full.events
