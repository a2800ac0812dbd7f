"""The SUSPENDED state: Suspend/Resume decisions, suspended starts, time limits that count running
time only, and the invariants (a suspended job's GPUs stay its own and nobody else's)."""
from __future__ import annotations

import math
import random

import pytest
from hypothesis import given, settings, strategies as st

from gpupool.engine.core import Engine, NodeEvent
from gpupool.engine.decisions import Preempt, Resume, Start, Suspend, WakeAt
from gpupool.engine.job import RUNNING, SUSPENDED
from gpupool.errors import GpupoolError, InvariantViolation
from gpupool.model import Gpu, Node, PodSet, Pool, Workload


def make_pool(nodes: int = 1, gpus: int = 4, cpus: int = 8) -> Pool:
    return Pool("t", nodes={
        f"n{i}": Node(f"n{i}", cpus=cpus, memory_mib=100_000, gpus=tuple(Gpu(j) for j in range(gpus)))
        for i in range(nodes)})


def wl(i: int, gpus: int, submit: float, runtime: float, cpu_m: int = 8000, **kw) -> Workload:
    return Workload(i, f"j{i}", (PodSet(count=1, gpus=gpus, cpu_m=cpu_m, memory_mib=1000),),
                    submit_time=submit, runtime=runtime, **kw)


class Script:
    """Applies a fixed list of decisions at given instants (and places on node 0)."""

    name = "script"
    over_time_limit = 0.0

    def __init__(self, plan: dict[float, list], tick: float | None = 10.0, check_interval: float = 0.0) -> None:
        self.plan = plan
        self.tick_interval = tick
        self.time_limit_check_interval = check_interval
        self.seen: list[tuple[float, dict]] = []

    def decide(self, snap):
        self.seen.append((snap.now, {j.id: j.state for j in snap.active.values()}))
        out = [WakeAt(t) for t in self.plan if t > snap.now] if snap.seq == 1 else []
        for d in self.plan.pop(snap.now, []):
            out.append(d(snap) if callable(d) else d)
        return out


def start(jid: int, mask: int, cpu: int = 8000, suspended: bool = False):
    return Start(jid, ((0, mask, cpu, 1000),), suspended=suspended)


def events_of(out, jid):
    return [(t, e) for t, e, i, _ in out.events if i == jid]


def test_suspend_resume_moves_the_end_and_keeps_gpus():
    pool = make_pool()
    gpus_free_while_suspended = []

    def probe(snap):
        gpus_free_while_suspended.append(snap.nodes.free_mask[0])
        return Resume(1)

    pol = Script({0.0: [start(1, 0b11)], 20.0: [Suspend(1)], 50.0: [probe]})
    out = Engine(pool, [wl(1, 2, 0, 100)], pol, check=True).run()
    job = out.jobs[0]
    assert job.state == "COMPLETED"
    assert job.end == 130  # 20 s run, 30 s suspended, 80 s more
    assert job.suspended_s == 30
    assert job.end - job.start - job.suspended_s == 100
    assert gpus_free_while_suspended == [0b1100]  # GPUs 0,1 still its own while suspended
    assert [e for _, e in events_of(out, 1)] == ["submitted", "started", "suspended", "resumed", "finished"]
    assert job.gpu_s_used == pytest.approx(200)  # 100 s of progress on 2 GPUs
    assert job.gpu_s_idle_held == pytest.approx(60)  # 30 s held while suspended


def test_suspended_start_takes_gpus_and_memory_but_not_cpus():
    pool = make_pool()
    pol = Script({0.0: [start(1, 0b1)], 5.0: [start(2, 0b10, suspended=True)],
                  30.0: [Suspend(1), Resume(2)], 60.0: [Suspend(2), Resume(1)], 90.0: [Resume(2)]})
    out = Engine(pool, [wl(1, 1, 0, 60), wl(2, 1, 5, 40)], pol, check=True).run()
    jobs = {j.id: j for j in out.jobs}
    # 1: runs 0-30, 60-90; 2: allocated at 5, runs 30-60, then resumes when 1 ends at 90
    assert jobs[1].end == 90 and jobs[1].suspended_s == 30
    assert jobs[2].start == 5 and jobs[2].suspended_s == 55  # 5-30 and 60-90
    assert jobs[2].end == 100
    assert ("started", "suspended") == tuple(e for t, e in events_of(out, 2) if t == 5.0)[1:]
    # both allocated in (5, 30): 16000m CPU asked from an 8000m node, only 8000m running
    busy = [s for t, s in pol.seen if 5 < t < 30]
    assert busy and all(s == {1: RUNNING, 2: SUSPENDED} for s in busy)


def test_time_limit_counts_running_time_only():
    pool = make_pool()
    w = wl(1, 1, 0, 500, time_limit=120)
    pol = Script({0.0: [start(1, 1)], 60.0: [Suspend(1)], 160.0: [Resume(1)]}, check_interval=30)
    out = Engine(pool, [w], pol, check=True).run()
    job = out.jobs[0]
    # 60 s run, 100 s suspended, 60 s of limit left at 160: end_time 220, first check at 240
    assert job.state == "TIMEOUT" and job.end == 240
    assert job.end - job.start - job.suspended_s == 140


def test_resume_needs_free_cpus_and_states_are_checked():
    pool = make_pool()
    with pytest.raises(InvariantViolation, match="CPU"):
        Engine(pool, [wl(1, 1, 0, 100), wl(2, 1, 0, 100)],
               Script({0.0: [start(1, 1), start(2, 2, suspended=True)], 10.0: [Resume(2)]}), check=True).run()
    with pytest.raises(InvariantViolation, match="not SUSPENDED"):
        Engine(pool, [wl(1, 1, 0, 100)], Script({0.0: [start(1, 1)], 10.0: [Resume(1)]}), check=True).run()
    with pytest.raises(InvariantViolation, match="not RUNNING"):
        Engine(pool, [wl(1, 1, 0, 100), wl(2, 1, 0, 100)],
               Script({0.0: [start(1, 1), start(2, 2, suspended=True)], 10.0: [Suspend(2)]}), check=True).run()
    with pytest.raises(InvariantViolation, match="allocated twice"):  # GPUs of a suspended job
        Engine(pool, [wl(1, 1, 0, 100), wl(2, 1, 0, 100)],
               Script({0.0: [start(1, 1)], 10.0: [Suspend(1)], 20.0: [start(2, 1, cpu=1000)]}), check=True).run()


def test_executor_without_suspend_is_refused():
    class Bare:
        def launch(self, job, now):
            return now + job.remaining, "COMPLETED"

        def stop(self, job, now, reason):
            pass

    with pytest.raises(GpupoolError, match="cannot suspend"):
        Engine(make_pool(), [wl(1, 1, 0, 100)], Script({0.0: [start(1, 1)], 10.0: [Suspend(1)]}),
               executor=Bare()).run()


@pytest.mark.parametrize("how", ["cancel", "preempt", "node_down"])
def test_a_suspended_job_can_be_stopped(how):
    pool = make_pool()
    plan = {0.0: [start(1, 0b11)], 10.0: [Suspend(1)]}
    faults = ()
    if how == "preempt":
        plan[30.0] = [Preempt(1, "CANCEL", reason="test")]
    elif how == "node_down":
        faults = [NodeEvent(30.0, "n0", "down")]
    eng = Engine(pool, [wl(1, 2, 0, 100, requeue=False)], Script(plan), check=True, faults=faults)
    if how == "cancel":
        eng.cancel(1, at=30.0)
    out = eng.run()
    job = out.jobs[0]
    assert job.end == 30 and job.final_state in ("CANCELLED", "PREEMPTED", "NODE_FAIL")
    assert job.suspended_s == 20 and job.run_time(30) == 10
    assert eng.nodes.all_free() or how == "node_down"
    assert not eng.suspended


# ----------------------------------------------------------------------------- properties

class RandomTimeSharing:
    """Starts jobs whose GPUs and memory fit (suspended when the CPUs are busy), and at every
    tick suspends and resumes jobs at random while CPUs allow; after ``calm`` it only resumes."""

    name = "random-timesharing"
    over_time_limit = 0.0
    time_limit_check_interval = 0.0

    def __init__(self, seed: int, calm: float) -> None:
        self.rng = random.Random(seed)
        self.calm = calm
        self.tick_interval = 10.0
        self.violations: list[str] = []

    def decide(self, snap):
        nodes = snap.nodes
        for job in snap.suspended.values():  # property: a suspended job's GPUs are still its own
            for node, mask, _c, _m in job.placement:
                if nodes.free_mask[node] & mask:
                    self.violations.append(f"t={snap.now}: job {job.id}'s GPUs are free while suspended")
        out = []
        cpu = list(nodes.free_cpu)
        mask = list(nodes.free_mask)
        mem = list(nodes.free_mem)
        rng = self.rng
        if snap.now < self.calm:
            for job in list(snap.active.values()):
                if job.state == RUNNING and rng.random() < 0.3:
                    out.append(Suspend(job.id))
                    for node, _m, c, _mm in job.placement:
                        cpu[node] += c
        suspending = {d.job_id for d in out}
        running = sum(1 for j in snap.active.values() if j.state == RUNNING and j.id not in suspending)
        for job in list(snap.suspended.values()):
            # like gang, never leave every job suspended: one resumes when nothing would run
            if snap.now >= self.calm or rng.random() < 0.5 or not running:
                if all(cpu[n] >= c for n, _m, c, _mm in job.placement):
                    out.append(Resume(job.id))
                    running += 1
                    for node, _m, c, _mm in job.placement:
                        cpu[node] -= c
        for job in snap.pending.values():
            ps = job.wl.pod_sets[0]
            for n in range(len(nodes)):
                if (mask[n].bit_count() >= ps.gpus and mem[n] >= ps.memory_mib):
                    take = 0
                    m = mask[n]
                    for _ in range(ps.gpus):
                        low = m & -m
                        take |= low
                        m ^= low
                    run = cpu[n] >= ps.cpu_m
                    out.append(Start(job.id, ((n, take, ps.cpu_m, ps.memory_mib),), suspended=not run))
                    mask[n] &= ~take
                    mem[n] -= ps.memory_mib
                    if run:
                        cpu[n] -= ps.cpu_m
                    break
        return out


jobs_st = st.lists(st.tuples(st.integers(0, 4), st.integers(0, 200), st.integers(1, 300),
                             st.sampled_from([2000, 4000, 8000]), st.sampled_from([None, 120, 600])),
                   min_size=1, max_size=14)


@settings(max_examples=60, deadline=None)
@given(jobs_st, st.integers(0, 10_000))
def test_property_suspension(specs, seed):
    pool = make_pool(nodes=2, gpus=4, cpus=8)
    wls = [Workload(i + 1, f"j{i}", (PodSet(count=1, gpus=g, cpu_m=c, memory_mib=20_000),), submit_time=float(s),
                    runtime=float(r), time_limit=None if tl is None else float(tl))
           for i, (g, s, r, c, tl) in enumerate(specs)]
    pol = RandomTimeSharing(seed, calm=400.0)
    out = Engine(pool, wls, pol, check=True).run()
    assert not pol.violations
    finished: dict[int, int] = {}
    for _t, what, jid, _d in out.events:
        if what == "finished":
            finished[jid] = finished.get(jid, 0) + 1
    for job in out.jobs:
        assert finished.get(job.id) == 1, f"job {job.id} ended {finished.get(job.id, 0)} times"
        assert job.final_state in ("COMPLETED", "TIMEOUT")
        # running time + suspended time = end - start
        ran = sum(b - a for a, b in _slices(out.events, job.id))
        assert math.isclose(ran + job.suspended_s, job.end - job.start, abs_tol=1e-6)
        if job.final_state == "COMPLETED":
            assert math.isclose(ran, job.wl.runtime, abs_tol=1e-6)
        else:
            assert ran == pytest.approx(job.wl.time_limit)
    assert not out.jobs or max(j.end for j in out.jobs) <= out.end_time


def _slices(events, jid):
    out, since = [], None
    for t, what, i, _d in events:
        if i != jid:
            continue
        if what in ("started", "resumed"):
            since = t
        elif what in ("suspended", "finished") and since is not None:
            out.append((since, t))
            since = None
    return out
