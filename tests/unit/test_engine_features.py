"""Engine mechanisms policies and the ledger build on: effective time limits, limit-check
intervals, preemption grace, reservations, wake-ups, event details, per-pod-set spreading,
and the clock / executor interfaces."""
from __future__ import annotations

import pytest

from gpupool.engine.clock import Clock, VirtualClock
from gpupool.engine.core import Engine
from gpupool.engine.decisions import CANCEL, REQUEUE, Preempt, Reserve, Start, Unreserve, WakeAt
from gpupool.engine.executor import Executor, SimulatedExecutor
from gpupool.errors import InvariantViolation
from gpupool.ledger.record import parse_placement
from gpupool.model import Gpu, Node, PodSet, Pool, Workload
from gpupool.report.metrics import jobs_frame


def make_pool(nodes: int = 2, gpus: int = 8) -> Pool:
    return Pool("t", nodes={
        f"n{i}": Node(f"n{i}", cpus=64, memory_mib=512_000, gpus=tuple(Gpu(j) for j in range(gpus)))
        for i in range(nodes)
    })


def wl(i: int, gpus: int, submit: float, runtime: float, pods: int = 1, **kw) -> Workload:
    return Workload(i, f"j{i}", (PodSet(count=pods, gpus=gpus, cpu_m=1000, memory_mib=1000),),
                    submit_time=submit, runtime=runtime, **kw)


def pod(node: int, mask: int) -> tuple:
    return (node, mask, 1000, 1000)


class Scripted:
    """A policy whose decisions come from ``script(snapshot, policy)``; records its calls."""

    name = "scripted"

    def __init__(self, script, *, tick=None, otl=0.0, interval=None) -> None:
        self.script = script
        self.tick_interval = tick
        self.over_time_limit = otl
        if interval is not None:
            self.time_limit_check_interval = interval
        self.calls: list[float] = []
        self.seen: list = []

    def decide(self, snap):
        self.calls.append(snap.now)
        return self.script(snap, self)


def start_all(snap, pol, **kw):
    out = []
    for job in list(snap.pending.values()):
        if job.eligible <= snap.now:
            out.append(Start(job.id, (pod(0, (1 << job.wl.pod_sets[0].gpus) - 1),), **kw))
    return out


def by_id(out):
    return {j.id: j for j in out.jobs}


# ------------------------------------------------------------------ 1. Start.time_limit / partition
def test_start_time_limit_and_partition_are_used_and_recorded():
    pool = make_pool(1)
    pol = Scripted(lambda s, p: start_all(s, p, time_limit=50.0, partition="debug"))
    out = Engine(pool, [wl(1, 1, 0, 100, time_limit=500)], pol, check=True).run()
    job = by_id(out)[1]
    assert (job.state, job.end) == ("TIMEOUT", 50)
    assert job.time_limit == 50.0 and job.partition == "debug"
    assert jobs_frame(out).loc[0, "partition"] == "debug"


def test_without_start_time_limit_the_workload_limit_holds():
    pool = make_pool(1)
    out = Engine(pool, [wl(1, 1, 0, 100, time_limit=40, partition="p")], Scripted(start_all), check=True).run()
    job = by_id(out)[1]
    assert (job.state, job.end, job.time_limit, job.partition) == ("TIMEOUT", 40, 40, None)
    assert jobs_frame(out).loc[0, "partition"] == "p"  # falls back to the workload's


# ------------------------------------------------------------------ 2. time-limit check interval
@pytest.mark.parametrize("interval,runtime,expected", [
    (0.0, 100, ("TIMEOUT", 80)),     # exact: start 10 + limit 60 + over-time 10
    (30.0, 100, ("TIMEOUT", 90)),    # first 30-s check at or after 80
    (30.0, 75, ("TIMEOUT", 85)),     # over limit + over-time, ended before the check: TIMEOUT (real 22.05.8)
    (30.0, 65, ("COMPLETED", 75)),   # within limit + over-time
])
def test_time_limit_check_interval(interval, runtime, expected):
    pool = make_pool(1)
    pol = Scripted(start_all, otl=10.0, interval=interval)
    out = Engine(pool, [wl(1, 1, 10, runtime, time_limit=60)], pol, check=True).run()
    job = by_id(out)[1]
    assert (job.state, job.end) == expected


def test_check_interval_on_absolute_clock_exact_multiple():
    ex = SimulatedExecutor(over_time_limit=120.0, check_interval=30.0)
    job = Engine(make_pool(1), [wl(1, 1, 0, 250, time_limit=60)], Scripted(start_all)).jobs[1]
    assert ex.launch(job, 0.0) == (180.0, "TIMEOUT")
    assert SimulatedExecutor(float("inf"), 30.0).launch(job, 0.0) == (250.0, "COMPLETED")


# ------------------------------------------------------------------ 3. preemption grace
def test_preempt_grace_keeps_running_then_stops_once():
    pool = make_pool(1)

    def script(snap, pol):
        out = []
        if 1 in snap.pending and snap.now == 0:
            out.append(Start(1, (pod(0, 0xFF),)))
        if snap.now in (10, 15) and 1 in snap.active:
            out.append(Preempt(1, REQUEUE, reason="prio", by_job=2, grace=20.0))
            pol.seen.append((snap.now, snap.active[1].grace_until))
        if 2 in snap.pending and 1 not in snap.active and snap.now >= 10:
            out.append(Start(2, (pod(0, 0xFF),)))
        if snap.now == 10:
            out.append(WakeAt(15.0))
        return out

    pol = Scripted(script)
    out = Engine(pool, [wl(1, 8, 0, 1000), wl(2, 8, 10, 5)], pol, check=True).run()
    jobs = by_id(out)
    assert pol.seen == [(10, None), (15, 30.0)]  # in grace at 15: a second Preempt is ignored
    ev = [(t, k, d) for t, k, j, d in out.events if j == 1 and k in ("preempting", "preempted", "requeued")]
    assert ev == [(10, "preempting", "REQUEUE prio grace=20"), (30, "preempted", "REQUEUE prio"), (30, "requeued", "")]
    assert jobs[1].preemptions == 1 and jobs[1].evictions == {"prio": 1}
    assert jobs[2].first_start == 30 and jobs[1].grace_until is None
    assert jobs[1].gpu_s_used >= 30 * 8


def test_job_ending_during_grace_finishes_normally():
    pool = make_pool(1)

    def script(snap, pol):
        if snap.now == 0:
            return [Start(1, (pod(0, 1),))]
        if snap.now == 5 and 1 in snap.active:
            return [Preempt(1, CANCEL, reason="x", grace=100.0)]
        return []

    out = Engine(pool, [wl(1, 1, 0, 20), wl(2, 1, 5, 1000)], Scripted(script), check=True, until=500).run()
    job = by_id(out)[1]
    assert (job.state, job.end, job.preemptions) == ("COMPLETED", 20, 0)


# ------------------------------------------------------------------ 4. reservations, admitted_at, evictions
def test_reserve_unreserve_preempt_and_start():
    pool = make_pool(1)

    def script(snap, pol):
        pol.seen.append((snap.now, sorted(snap.reserved), {j: (x.reserved_since, x.reserve_info)
                                                          for j, x in snap.reserved.items()}))
        t = snap.now
        if t == 0:
            return [Reserve(1, "quota reserved in cq-a"), Reserve(2, "cq-b"), WakeAt(10.0)]
        if t == 10 and 1 in snap.reserved:
            return [Preempt(1, REQUEUE, reason="InCohortReclamation"), Unreserve(2), WakeAt(20.0)]
        if t == 20 and 1 not in snap.reserved:
            return [Reserve(1, "again"), WakeAt(30.0)]
        if t == 30:
            return [Start(1, (pod(0, 1),), partial=True), Start(2, (pod(0, 2),)), WakeAt(40.0)]
        if t == 40 and 1 in snap.active:
            return [Start(1, (pod(0, 4),), partial=True)]
        return []

    pol = Scripted(script)
    out = Engine(pool, [wl(1, 1, 0, 50, pods=2), wl(2, 1, 0, 50)], pol, check=True).run()
    jobs = by_id(out)
    first = {}
    for t, ids, info in pol.seen:  # the first call at each instant (an eviction adds a pass)
        first.setdefault(t, (ids, info))
    assert first[0] == ([], {})
    assert first[10] == ([1, 2], {1: (0, "quota reserved in cq-a"), 2: (0, "cq-b")})
    assert first[20] == ([], {})
    assert first[30] == ([1], {1: (20, "again")})
    assert first[40][0] == []  # cleared by the start
    assert jobs[1].evictions == {"InCohortReclamation": 1} and jobs[1].preemptions == 0
    assert jobs[1].admitted_at == 30 and jobs[1].start == 40  # gang complete at 40; admitted at 30
    assert jobs[1].reserved_since is None and jobs[1].state == "COMPLETED"
    kinds = [(t, k) for t, k, j, _ in out.events if j == 1]
    assert (0, "reserved") in kinds and (10, "preempted") in kinds and (30, "placed") in kinds


def test_reserve_of_a_running_job_is_an_error():
    pool = make_pool(1)

    def script(snap, pol):
        if snap.now == 0:
            return [Start(1, (pod(0, 1),))]
        return [Reserve(1, "x")]

    with pytest.raises(InvariantViolation):
        Engine(pool, [wl(1, 1, 0, 50), wl(2, 8, 1, 5)], Scripted(script)).run()


def test_preempt_of_an_unreserved_pending_job_is_an_error():
    pool = make_pool(1)
    with pytest.raises(InvariantViolation):
        Engine(pool, [wl(1, 1, 0, 50)], Scripted(lambda s, p: [Preempt(1)])).run()


def test_admitted_at_resets_on_requeue():
    pool = make_pool(1)

    def script(snap, pol):
        if snap.now in (0, 20) and 1 in snap.pending:
            return [Start(1, (pod(0, 1),))] + ([WakeAt(10.0)] if snap.now == 0 else [])
        if snap.now == 10 and 1 in snap.active:
            return [Preempt(1, REQUEUE, reason="r"), WakeAt(20.0)]
        return []

    out = Engine(pool, [wl(1, 1, 0, 50)], Scripted(script), check=True).run()
    job = by_id(out)[1]
    assert job.admitted_at == 20 and job.requeues == 1 and job.evictions == {"r": 1}


# ------------------------------------------------------------------ 5. wake-ups
def test_wake_at_calls_the_policy_without_a_tick():
    pool = make_pool(1)

    def script(snap, pol):
        if snap.now == 0:
            return [WakeAt(100.0), WakeAt(100.0), WakeAt(250.0)]
        if snap.now == 250:
            return [Start(1, (pod(0, 1),))]
        return []

    pol = Scripted(script)
    out = Engine(pool, [wl(1, 1, 0, 10)], pol, check=True).run()
    assert pol.calls == [0, 100, 250]
    assert by_id(out)[1].end == 260


def test_wake_in_the_past_is_an_error():
    with pytest.raises(InvariantViolation):
        Engine(make_pool(1), [wl(1, 1, 5, 10)], Scripted(lambda s, p: [WakeAt(1.0)])).run()


# ------------------------------------------------------------------ 6. event details
def test_started_and_placed_details_carry_the_placement():
    pool = make_pool(2)

    def script(snap, pol):
        if snap.now == 0:
            return [Start(1, (pod(0, 0b11),), partial=True, via="kube-scheduler")]
        if snap.now == 1:
            return [Start(1, (pod(1, 0b1100),), partial=True, via="kube-scheduler"),
                    Start(2, (pod(1, 1),), via="SchedMain")]
        return [WakeAt(1.0)] if snap.now < 1 else []

    out = Engine(pool, [Workload(1, "g", (PodSet(count=2, gpus=2, cpu_m=1000, memory_mib=1000),),
                                 submit_time=0, runtime=10), wl(2, 1, 0, 10)],
                 Scripted(lambda s, p: script(s, p) + ([WakeAt(1.0)] if s.now == 0 else [])), check=True).run()
    details = {(k, j): d for _, k, j, d in out.events if k in ("placed", "started")}
    assert details[("placed", 1)] == "kube-scheduler 1/2 n0:0,1"
    assert details[("started", 1)] == "kube-scheduler n0:0,1;n1:2,3"
    assert details[("started", 2)] == "SchedMain n1:0"
    names = list(pool.nodes)
    assert parse_placement(details[("started", 1)].rsplit(" ", 1)[-1], names) == [(0, 0b11), (1, 0b1100)]


# ------------------------------------------------------------------ 7. one pod per node, per pod set
def two_set_job(one_per_node=True) -> Workload:
    return Workload(1, "two-sets", (
        PodSet(name="launcher", count=1, gpus=1, cpu_m=1000, memory_mib=1000, one_per_node=one_per_node),
        PodSet(name="workers", count=2, gpus=1, cpu_m=1000, memory_mib=1000, one_per_node=one_per_node),
    ), submit_time=0, runtime=10)


def test_one_per_node_is_per_pod_set():
    pool = make_pool(2)
    ok = (pod(0, 1), pod(0, 2), pod(1, 1))  # launcher shares n0 with a worker: allowed
    out = Engine(pool, [two_set_job()], Scripted(lambda s, p: [Start(1, ok)] if 1 in s.pending else []),
                 check=True).run()
    assert by_id(out)[1].state == "COMPLETED"
    bad = (pod(0, 1), pod(1, 1), pod(1, 2))  # two workers on n1
    with pytest.raises(InvariantViolation, match="workers"):
        Engine(pool, [two_set_job()], Scripted(lambda s, p: [Start(1, bad)]), check=True).run()


def test_first_fit_places_two_pod_sets_and_passes_the_checker():
    from gpupool.engine.policy_api import make_policy

    pool = make_pool(2)
    out = Engine(pool, [two_set_job()], make_policy("fifo", pool), check=True).run()
    job = by_id(out)[1]
    assert job.state == "COMPLETED"
    workers = [p[0] for p in job.placement[1:]]
    assert len(set(workers)) == 2


# ------------------------------------------------------------------ 8. clock and executor
def test_virtual_clock_follows_the_engine():
    clock = VirtualClock()
    typed: Clock = clock
    assert typed.now() == 0.0
    clock.advance(5.0)
    assert clock.now() == 5.0
    with pytest.raises(ValueError):
        clock.advance(1.0)
    eng = Engine(make_pool(1), [wl(1, 1, 0, 10), wl(2, 1, 7, 3)], Scripted(start_all))
    eng.run()
    assert eng.clock.now() == eng.now == 10


def test_custom_executor_decides_ends_and_sees_stops():
    class Recorder:
        def __init__(self):
            self.launched, self.stopped = [], []

        def launch(self, job, now):
            self.launched.append((job.id, now))
            return now + 1.0, "FAILED"

        def stop(self, job, now, reason):
            self.stopped.append((job.id, now, reason))

    ex = Recorder()
    executor: Executor = ex

    def script(snap, pol):
        if snap.now == 0:
            return [Start(1, (pod(0, 1),)), Start(2, (pod(0, 2),)), WakeAt(0.5)]
        if snap.now == 0.5:
            return [Preempt(2, CANCEL, reason="test")]
        return []

    out = Engine(make_pool(1), [wl(1, 1, 0, 100), wl(2, 1, 0, 100)], Scripted(script), executor=executor,
                 check=True).run()
    jobs = by_id(out)
    assert ex.launched == [(1, 0), (2, 0)]
    assert ex.stopped == [(2, 0.5, "test")]
    assert (jobs[1].state, jobs[1].end) == ("FAILED", 1.0)
    assert jobs[2].state == "PREEMPTED"


# ------------------------------------------------------------------ adoption in the Slurm policy
def test_slurm_passes_effective_limit_partition_and_check_interval():
    import gpupool

    res = gpupool.simulate("examples/seed-pool", policy="slurm")
    jobs = {j.id: j for j in res.output.jobs}
    started = [j for j in jobs.values() if j.first_start is not None]
    assert started and all(j.partition for j in started)
    for j in started:
        if j.wl.time_limit is None:  # no --time: the partition's DefaultTime (train: 4 h)
            assert j.time_limit == 14400.0
        else:  # --time, rounded up to whole minutes
            assert j.time_limit == -(-j.wl.time_limit // 60) * 60
        if j.state == "TIMEOUT":
            assert j.end % 30 == 0  # killed at a 30-s limit check
    frame = res.jobs.set_index("id")
    assert all(frame.loc[j.id, "partition"] == j.partition for j in started)
