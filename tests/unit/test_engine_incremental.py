"""The engine's incremental API: stepping with run_until, and the calls controllers and the
live daemon make while a run goes on (submit, cancel, finish, requeue, node events, owners)."""
from __future__ import annotations

import math

import pytest
from hypothesis import given, settings, strategies as st

from gpupool.engine.core import Engine
from gpupool.engine.policy_api import make_policy
from gpupool.errors import GpupoolError, InvariantViolation
from tests.unit.test_engine import FINAL, make_pool, wl


def engine(pool, workloads, policy="fifo", **kw) -> Engine:
    return Engine(pool, workloads, make_policy(policy, pool), check=True, **kw)


def table(out):
    return sorted((j.id, j.state, j.first_start, j.end, j.placement) for j in out.jobs)


@pytest.mark.parametrize("policy", ["fifo", "first-fit", "slurm"])
def test_stepping_with_run_until_gives_the_same_run(policy):
    pool = make_pool(2)
    jobs = [wl(i, 1 + (i * 5) % 8, i * 7.0, 30.0 + (i * 13) % 90, time_limit=120) for i in range(1, 40)]
    whole = engine(pool, jobs, policy).run()
    stepped = engine(pool, jobs, policy)
    t = 0.0
    while any(j.final_state is None for j in stepped.jobs.values()):
        t += 11.0
        stepped.run_until(t)
    out = stepped.run()
    assert table(out) == table(whole)
    assert out.events == whole.events


class Submitter:
    """Submits one job at a given time, then is done."""

    name = "submitter"

    def __init__(self, at: float, workload) -> None:
        self.at, self.workload, self.done = at, workload, False

    def next_wake(self, now: float):
        return None if self.done else self.at

    def on_wake(self, eng: Engine, now: float) -> None:
        eng.submit(self.workload)
        self.done = True


def test_controller_submits_and_the_policy_sees_it_in_the_same_instant():
    pool = make_pool(1)
    eng = engine(pool, [wl(1, 4, 0, 50)])
    eng.add_controller(Submitter(20.0, wl(2, 4, 0, 10)))
    out = {j.id: j for j in eng.run().jobs}
    assert (out[2].submit, out[2].first_start, out[2].end) == (20.0, 20.0, 30.0)
    assert out[1].state == out[2].state == "COMPLETED"


def test_cancel_pending_and_running_frees_everything():
    pool = make_pool(1)
    eng = engine(pool, [wl(1, 8, 0, 100), wl(2, 8, 0, 100)])
    eng.run_until(10)
    eng.cancel(2, reason="scancel")  # pending behind job 1
    eng.cancel(1, at=30)  # running; deferred
    out = {j.id: j for j in eng.run().jobs}
    assert (out[2].state, out[2].end, out[2].first_start) == ("CANCELLED", 10, None)
    assert (out[1].state, out[1].end) == ("CANCELLED", 30)
    assert out[1].gpu_s_used == 30 * 8
    assert eng.nodes.all_free()


def test_cancel_after_the_job_ended_does_nothing():
    pool = make_pool(1)
    eng = engine(pool, [wl(1, 1, 0, 5)])
    eng.cancel(1, at=50)
    out = eng.run().jobs[0]
    assert (out.state, out.end) == ("COMPLETED", 5)


class LiveLike:
    """An executor that knows no end: ends arrive through Engine.finish."""

    def __init__(self):
        self.stopped = []

    def launch(self, job, now):
        return math.inf, ""

    def stop(self, job, now, reason):
        self.stopped.append((job.id, now, reason))


def test_finish_reports_ends_from_outside_and_only_once():
    pool = make_pool(1)
    ex = LiveLike()
    eng = Engine(pool, [wl(1, 2, 0, 1e9), wl(2, 8, 0, 10)], make_policy("fifo", pool), check=True, executor=ex)
    eng.run_until(100)
    assert eng.jobs[1].state == "RUNNING" and eng.jobs[2].state == "PENDING"
    assert eng.finish(1, "FAILED") is True
    assert eng.finish(1, "COMPLETED") is False  # a late second report changes nothing
    eng.run_until(100)  # the pass at this instant starts job 2
    assert eng.jobs[2].state == "RUNNING" and eng.jobs[2].first_start == 100
    eng.finish(2, "COMPLETED", at=150)
    out = {j.id: j for j in eng.run().jobs}
    assert (out[1].state, out[1].end, out[2].state, out[2].end) == ("FAILED", 100, "COMPLETED", 150)


def test_requeue_loses_work_since_checkpoint_and_runs_again():
    pool = make_pool(1)
    eng = engine(pool, [wl(1, 4, 0, 100, checkpoint_interval=30)])
    eng.requeue(1, at=70, reason="daemon restart")
    out = eng.run().jobs[0]
    assert out.requeues == 1 and out.state == "COMPLETED"
    assert out.gpu_s_lost == (70 - 60) * 4
    assert out.end == 70 + 40  # 60 s were checkpointed


def test_node_events_and_owner_tags():
    pool = make_pool(2)
    eng = engine(pool, [wl(1, 8, 0, 100, requeue=True), wl(2, 8, 50, 10)])
    eng.node_event("n0", "drain", at=40)
    eng.set_node_owner("n1", "fleet", at=45)
    out = eng.run()
    jobs = {j.id: j for j in out.jobs}
    assert eng.nodes.owner == [None, "fleet"]
    assert any(e[1] == "node_owner" and e[3] == "n1 fleet" for e in out.events)
    # job 2 cannot use drained n0; it runs on n1
    assert jobs[2].placement[0][0] == 1
    with pytest.raises(GpupoolError, match="nX"):
        eng.node_event("nX", "down")
    with pytest.raises(GpupoolError, match="already at"):
        eng.cancel(1, at=1.0)


def test_controller_must_move_forward():
    class Stuck:
        name = "stuck"

        def next_wake(self, now):
            return 5.0

        def on_wake(self, eng, now):
            pass

    eng = engine(make_pool(1), [wl(1, 1, 0, 100)])
    eng.add_controller(Stuck())
    with pytest.raises(InvariantViolation, match="stuck"):
        eng.run()


def test_duplicate_submission_id_is_an_error():
    eng = engine(make_pool(1), [wl(1, 1, 0, 10)])
    with pytest.raises(GpupoolError, match="already in this run"):
        eng.submit(wl(1, 1, 0, 10))


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 8), st.integers(0, 200), st.integers(1, 300),
                          st.sampled_from(["none", "cancel", "finish", "requeue"]), st.integers(0, 400)),
                min_size=1, max_size=25),
       st.sampled_from(["fifo", "first-fit"]))
def test_any_interleaving_ends_each_job_once_and_frees_every_gpu(specs, policy):
    pool = make_pool(2)
    eng = engine(pool, [], policy)
    for i, (gpus, submit, runtime, action, when) in enumerate(specs, start=1):
        eng.submit(wl(i, gpus, submit, runtime), at=submit)
        if action == "cancel":
            eng.cancel(i, at=when)
        elif action == "requeue":
            eng.requeue(i, at=when)
        elif action == "finish":
            eng.finish(i, "FAILED", at=when)
    out = eng.run()
    assert all(j.state in FINAL and j.final_state == j.state for j in out.jobs)
    assert len(out.jobs) == len(specs)
    assert eng.nodes.all_free()
    finished = [e for e in out.events if e[1] == "finished"]
    assert len(finished) == len(specs)
