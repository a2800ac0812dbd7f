"""Engine transitions and invariants on small pools built in code."""
from __future__ import annotations

import pytest
from hypothesis import assume, given, settings, strategies as st

from gpupool.engine.core import Engine, NodeEvent
from gpupool.engine.decisions import Preempt, Start
from gpupool.engine.policy_api import make_policy, registered
from gpupool.errors import GpupoolError, InvariantViolation
from gpupool.model import Gpu, Node, PodSet, Pool, Workload

FINAL = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "PREEMPTED", "NODE_FAIL", "REJECTED"}


def make_pool(nodes: int = 2, gpus: int = 8) -> Pool:
    return Pool("t", nodes={
        f"n{i}": Node(f"n{i}", cpus=64, memory_mib=512_000, gpus=tuple(Gpu(j) for j in range(gpus)))
        for i in range(nodes)
    })


def wl(i: int, gpus: int, submit: float, runtime: float, **kw) -> Workload:
    pods = kw.pop("pods", 1)
    per_node = kw.pop("one_per_node", False)
    return Workload(i, f"j{i}", (PodSet(count=pods, gpus=gpus, cpu_m=1000, memory_mib=1000, one_per_node=per_node),),
                    submit_time=submit, runtime=runtime, **kw)


def run(pool, workloads, policy="fifo", **kw):
    return Engine(pool, workloads, make_policy(policy, pool), check=True, **kw).run()


def test_fifo_head_blocks_and_first_fit_does_not():
    pool = make_pool(1)
    jobs = [wl(1, 6, 0, 100), wl(2, 4, 1, 100), wl(3, 2, 2, 10)]
    fifo = {j.id: j for j in run(pool, jobs).jobs}
    assert fifo[3].first_start == 100  # behind the blocked 4-GPU job
    ff = {j.id: j for j in run(pool, jobs, "first-fit").jobs}
    assert ff[3].first_start == 2  # fits beside job 1
    assert ff[2].first_start == 100


def test_lowest_gpu_index_first_and_release():
    pool = make_pool(1)
    out = {j.id: j for j in run(pool, [wl(1, 2, 0, 10), wl(2, 3, 0, 20), wl(3, 2, 10, 5)]).jobs}
    assert out[1].placement == ((0, 0b11, 1000, 1000),)
    assert out[2].placement == ((0, 0b11100, 1000, 1000),)
    assert out[3].placement == ((0, 0b11, 1000, 1000),)  # reuses the freed lowest indices


def test_time_limit_gives_timeout_and_outcomes_are_kept():
    pool = make_pool(1)
    jobs = [wl(1, 1, 0, 100, time_limit=50), wl(2, 1, 0, 10, outcome="FAILED"), wl(3, 1, 0, 10, outcome="CANCELLED")]
    out = {j.id: j for j in run(pool, jobs).jobs}
    assert (out[1].state, out[1].end) == ("TIMEOUT", 50)
    assert out[2].state == "FAILED" and out[3].state == "CANCELLED"


def test_multi_node_gang_uses_distinct_nodes():
    pool = make_pool(2)
    out = run(pool, [wl(1, 8, 0, 10, pods=2, one_per_node=True)]).jobs[0]
    assert sorted(p[0] for p in out.placement) == [0, 1]
    assert out.gpu_s_used == 16 * 10


def test_job_larger_than_pool_is_rejected_not_blocking():
    pool = make_pool(1)
    out = {j.id: j for j in run(pool, [wl(1, 16, 0, 10), wl(2, 1, 1, 10)]).jobs}
    assert out[1].state == "REJECTED" and "no node has 16 GPUs" in out[1].reason
    assert out[2].state == "COMPLETED"


def test_dependency_waits_and_never_satisfied_is_rejected():
    pool = make_pool(1)
    jobs = [wl(1, 1, 0, 100), wl(2, 1, 0, 10, dependency="afterok:1"), wl(3, 1, 0, 5, outcome="FAILED"),
            wl(4, 1, 1, 5, dependency="afterok:3")]
    out = {j.id: j for j in run(pool, jobs, "first-fit").jobs}
    assert out[2].first_start == 100
    assert out[4].state == "REJECTED"


def test_node_failure_requeues_or_fails():
    pool = make_pool(1)
    faults = [NodeEvent(50, "n0", "down"), NodeEvent(60, "n0", "up")]
    out = {j.id: j for j in run(pool, [wl(1, 1, 0, 100), wl(2, 1, 0, 100, requeue=False)], faults=faults).jobs}
    assert out[1].state == "COMPLETED" and out[1].requeues == 1 and out[1].end == 160
    assert out[2].state == "NODE_FAIL" and out[2].end == 50


class _PreemptAt:
    """A tiny test policy: start jobs first fit, preempt job 1 when job 2 arrives."""

    name = "test"
    tick_interval = None
    over_time_limit = 0.0

    def __init__(self, pool, mode="REQUEUE"):
        self.fifo = make_policy("first-fit", pool)
        self.mode = mode

    def decide(self, snap):
        if 2 in snap.pending and 1 in snap.active:
            return [Preempt(1, self.mode, reason="test")]
        return self.fifo.decide(snap)


def test_preemption_loses_work_since_last_checkpoint():
    pool = make_pool(1, gpus=8)
    jobs = [wl(1, 8, 0, 1000, checkpoint_interval=300), wl(2, 8, 700, 100)]
    out = {j.id: j for j in Engine(pool, jobs, _PreemptAt(pool), check=True).run().jobs}
    one = out[1]
    # Ran 700 s, checkpointed at 600: 100 s of 8 GPUs lost, 400 s remain after the requeue.
    assert one.gpu_s_lost == 8 * 100 and one.preemptions == 1 and one.requeues == 1
    assert one.state == "COMPLETED" and one.end == 800 + 400


def test_preempt_cancel_ends_preempted():
    pool = make_pool(1)
    out = {j.id: j for j in Engine(pool, [wl(1, 8, 0, 1000), wl(2, 8, 10, 10)], _PreemptAt(pool, "CANCEL"), check=True).run().jobs}
    assert out[1].state == "PREEMPTED" and out[1].gpu_s_lost == 80


class _DoubleBooker:
    name = "bad"
    tick_interval = None
    over_time_limit = 0.0

    def decide(self, snap):
        return [Start(j.id, ((0, 1, 1000, 1000),)) for j in snap.pending.values()]


def test_checker_catches_double_allocation():
    pool = make_pool(1)
    with pytest.raises(InvariantViolation, match="allocated twice"):
        Engine(pool, [wl(1, 1, 0, 10), wl(2, 1, 0, 10)], _DoubleBooker(), check=True).run()


class _PartialPlacer:
    """Places one pod per pass: a non-gang scheduler building a gang pod by pod."""

    name = "partial"
    tick_interval = 10.0
    over_time_limit = 0.0

    def decide(self, snap):
        for job in snap.pending.values():
            return [Start(job.id, ((0, 0b1, 1000, 1000),), partial=True)]
        for job in snap.active.values():
            if len(job.placement) < job.pods_total:
                free = snap.nodes.free_mask[0]
                bit = free & -free
                return [Start(job.id, ((0, bit, 1000, 1000),), partial=True)]
        return []


def test_incomplete_gang_holds_idle_gpus_until_complete():
    pool = make_pool(1)
    job = Engine(pool, [wl(1, 1, 0, 100, pods=3)], _PartialPlacer(), check=True).run().jobs[0]
    # Pod 1 at t=0, pod 2 at t=10, pod 3 at t=20: 1×10 + 2×10 GPU-seconds idle, then 100 s run.
    assert job.gpu_s_idle_held == 30 and job.first_start == 20 and job.end == 120


@st.composite
def workloads(draw):
    n = draw(st.integers(1, 40))
    out = []
    for i in range(1, n + 1):
        pods = draw(st.integers(1, 3))
        out.append(Workload(
            i, f"j{i}",
            (PodSet(count=pods, gpus=draw(st.integers(0, 8)), cpu_m=draw(st.sampled_from([500, 1000, 32000])),
                    memory_mib=1000, one_per_node=draw(st.booleans()), exclusive=draw(st.booleans())),),
            submit_time=float(draw(st.integers(0, 500))), runtime=float(draw(st.integers(1, 300))),
            time_limit=draw(st.one_of(st.none(), st.integers(1, 400).map(float))),
            outcome=draw(st.sampled_from(["COMPLETED", "FAILED", "CANCELLED"])),
        ))
    return out


@settings(max_examples=60, deadline=None)
@given(workloads(), st.sampled_from(sorted(registered())), st.integers(1, 3))
def test_invariants_hold_for_any_workload(jobs, policy, nodes):
    pool = make_pool(nodes)
    try:
        make_policy(policy, pool)
    except GpupoolError:
        assume(False)  # a policy this bare pool cannot configure (operator: it declares no NodeSet)
    out = run(pool, jobs, policy)
    assert len(out.jobs) == len(jobs)
    for job in out.jobs:
        assert job.state in FINAL and job.final_state == job.state
        if job.state != "REJECTED":
            assert job.first_start is not None and job.end >= job.first_start >= job.wl.submit_time
    assert max(t[1] for t in out.timeline) <= pool.gpu_count


def test_same_inputs_same_outputs():
    pool = make_pool(2)
    jobs = [wl(i, (i % 8) + 1, i * 3.0, 50.0 + i) for i in range(1, 60)]
    a, b = run(pool, jobs), run(pool, jobs)
    assert [(j.id, j.first_start, j.end, j.placement) for j in a.jobs] == \
           [(j.id, j.first_start, j.end, j.placement) for j in b.jobs]
    assert a.timeline == b.timeline and a.events == b.events
