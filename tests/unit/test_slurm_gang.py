"""Gang scheduling (spec §10, §17.5): gang.py's pure steps, and --policy slurm with PreemptMode=GANG
on random workloads (every job ends once, running + suspended time = End - Start, GPUs never shared)."""
from __future__ import annotations

import math

from hypothesis import given, settings, strategies as st

from gpupool.conformance.slurm_cases import build_pool, build_workloads
from gpupool.engine.core import Engine
from gpupool.engine.policy_api import make_policy
from gpupool.policy.slurm import gang

PARTS = {"p": gang.PartSpec("p", 1, 0)}
CAP = [4000]


def step(state, alive, started=(), tick=False, cpu=None):
    cpu = cpu or {j: {0: 4000} for j in list(alive) + [s for s, _ in started]}
    return gang.step(state, PARTS, CAP, alive, cpu, list(started), tick)


def test_filler_is_not_rotated_at_the_first_slice():
    r = step(gang.GangState(), {}, [(1, "p")])
    assert r.changed == {} and r.state.lists["p"][0].row == gang.FILLER
    r = step(r.state, {1: ("p", False)}, [(2, "p")])
    assert r.changed == {2: True}  # allocated, suspended at once
    r = step(r.state, {1: ("p", False), 2: ("p", True)}, tick=True)
    assert r.changed == {}  # the filler is reset in place: 1 keeps running
    r = step(r.state, {1: ("p", False), 2: ("p", True)}, tick=True)
    assert r.changed == {1: True, 2: False}
    assert [e.job_id for e in r.state.lists["p"]] == [2, 1]


def test_job_end_resumes_at_once_without_reordering():
    s = step(gang.GangState(), {}, [(1, "p")]).state
    s = step(s, {1: ("p", False)}, [(2, "p"), (3, "p")]).state
    r = step(s, {2: ("p", True), 3: ("p", True)})  # 1 ended
    assert r.changed == {2: False}
    assert [(e.job_id, e.row) for e in r.state.lists["p"]] == [(2, gang.FILLER), (3, gang.NO_ACTIVE)]


def test_higher_tier_shadow_suspends_and_releases():
    parts = {"low": gang.PartSpec("low", 1, 0), "high": gang.PartSpec("high", 2, 1)}
    cpu = {1: {0: 4000}, 2: {0: 4000}, 9: {0: 2000}}
    r = gang.step(gang.GangState(), parts, CAP, {}, cpu, [(1, "low")], False)
    r = gang.step(r.state, parts, CAP, {1: ("low", False)}, cpu, [(9, "high")], False)
    assert r.changed == {1: True}
    r = gang.step(r.state, parts, CAP, {1: ("low", True)}, cpu, [], False)  # 9 ended
    assert r.changed == {1: False}


def test_max_share_and_rows():
    assert gang.max_share("FORCE") == 4 and gang.max_share("FORCE:2") == 2
    # YES shares under gang as FORCE does (a real 22.05.8, case gang-gp-006); the jobs' flags
    # only keep a job that asks from a node holding one that did not (Cycle.try_gang)
    assert gang.max_share("YES:3") == 3 and gang.max_share("YES") == 4
    assert gang.max_share("EXCLUSIVE") == 1 and gang.max_share("NO") == 1 and gang.max_share(None) == 1
    assert gang.forced("FORCE:1") and not gang.forced("YES:2") and not gang.forced(None)
    assert gang.asks_to_share("yes:2") and not gang.asks_to_share("FORCE")
    rows = gang.rows_of([{0: 3000}, {0: 2000}, {0: 1000}], [4000])
    assert rows == [{0: 4000}, {0: 2000}]
    assert gang.row_max(rows) == {0: 4000}


jobs_st = st.lists(st.tuples(st.integers(0, 120), st.integers(1, 4), st.integers(0, 2), st.integers(10, 200),
                             st.sampled_from([None, 2, 10]), st.integers(1, 2)),
                   min_size=1, max_size=10)


@settings(max_examples=40, deadline=None)
@given(jobs_st, st.sampled_from(["FORCE", "FORCE:2"]), st.sampled_from(["select/cons_tres", "select/linear"]))
def test_property_gang_runs(specs, share, select):
    case = {
        "id": "prop", "config": {"SelectType": select, "PreemptMode": "GANG", "SchedulerTimeSlice": 30},
        "cluster": {"nodes": [{"name": "n[1-2]", "cpus": 4, "gpus": 2, "mem_mb": 10000}],
                    "partitions": [{"name": "p", "nodes": "n[1-2]", "oversubscribe": share}]},
        "jobs": [{"id": i + 1, "submit": s, "cpus": c * n, "nodes": n, "gpus_per_node": g, "run_s": r,
                  "mem_mb": 2000, "time_limit_min": tl} for i, (s, c, g, r, tl, n) in enumerate(specs)],
    }
    _check_run(case)


prio_jobs_st = st.lists(st.tuples(st.integers(0, 300), st.integers(1, 4), st.integers(0, 1), st.integers(10, 400),
                                  st.sampled_from([None, 3, 10]), st.integers(1, 2), st.booleans()),
                        min_size=1, max_size=10)


@settings(max_examples=40, deadline=None)
@given(prio_jobs_st, st.sampled_from(["NO", "FORCE:2"]))
def test_property_partition_prio_suspend(specs, low_share):
    """preempt/partition_prio with SUSPEND,GANG: high-tier jobs suspend low ones and leave again."""
    case = {
        "id": "prop", "config": {"PreemptType": "preempt/partition_prio", "PreemptMode": "SUSPEND,GANG"},
        "cluster": {"nodes": [{"name": "n[1-3]", "cpus": 4, "gpus": 1, "mem_mb": 10000}],
                    "partitions": [{"name": "low", "nodes": "n[1-3]", "priority_tier": 1, "oversubscribe": low_share},
                                   {"name": "high", "nodes": "n[1-3]", "priority_tier": 2}]},
        "jobs": [{"id": i + 1, "submit": s, "cpus": c * n, "nodes": n, "gpus_per_node": g, "run_s": r,
                  "mem_mb": 3000, "time_limit_min": tl, "partition": "high" if hi else "low"}
                 for i, (s, c, g, r, tl, n, hi) in enumerate(specs)],
    }
    _check_run(case)


def _check_run(case: dict) -> None:
    pool, _ = build_pool(case)
    wls, _ = build_workloads(case)
    out = Engine(pool, wls, make_policy("slurm", pool, {}), check=True).run()
    ends: dict[int, int] = {}
    slices: dict[int, list] = {}
    since: dict[int, float] = {}
    for t, what, jid, _d in out.events:
        if what == "finished":
            ends[jid] = ends.get(jid, 0) + 1
        if what in ("started", "resumed"):
            since[jid] = t
        elif what in ("suspended", "finished") and jid in since:
            slices.setdefault(jid, []).append((since.pop(jid), t))
    for job in out.jobs:
        assert ends.get(job.id) == 1, f"job {job.id} ended {ends.get(job.id, 0)} times"
        ran = sum(b - a for a, b in slices.get(job.id, []))
        assert math.isclose(ran + job.suspended_s, job.end - job.start, abs_tol=1e-6)
        if job.final_state == "COMPLETED":
            assert math.isclose(ran, job.wl.runtime, abs_tol=1e-6)
        else:
            assert job.final_state == "TIMEOUT" and ran >= job.time_limit
    # GPUs are never shared: jobs allocated at the same time hold disjoint GPUs on each node
    held = [(j.start, j.end, j.placement) for j in out.jobs if j.placement]
    for i, (s1, e1, p1) in enumerate(held):
        for s2, e2, p2 in held[i + 1:]:
            if s1 < e2 and s2 < e1:
                for n1, m1, _c, _m in p1:
                    for n2, m2, _c2, _m2 in p2:
                        assert n1 != n2 or not (m1 & m2)


def test_the_slice_runs_once_per_instant():
    """An extra pass at a slice instant (here a timer; also after a preemption) does not rotate
    the jobs a second time: gang-001's slices come out unchanged."""
    from pathlib import Path

    from gpupool.conformance.slurm_cases import load_case, running_slices
    from gpupool.engine.decisions import WakeAt

    case = load_case(Path(__file__).resolve().parents[1] / "conformance/slurm/gang-001-two-job-timeslice.yaml")
    pool, _ = build_pool(case)
    wls, _ = build_workloads(case)
    inner = make_policy("slurm", pool, {})

    class Twice:
        name = inner.name
        tick_interval = inner.tick_interval
        over_time_limit = inner.over_time_limit
        time_limit_check_interval = inner.time_limit_check_interval
        calls_at_60: list[str] = []

        def decide(self, snap):
            out = inner.decide(snap)
            if snap.now == 60:
                self.calls_at_60.append(snap.trigger)
                if len(self.calls_at_60) == 1:
                    out = out + [WakeAt(60.0)]
            return out

    pol = Twice()
    out = Engine(pool, wls, pol, check=True).run()
    assert pol.calls_at_60 == ["tick", "event"]
    want = {k: [tuple(map(float, s)) for s in v] for k, v in case["expected"]["running_slices"].items()}
    assert running_slices(out.events, 3) == want[3]
    assert running_slices(out.events, 4) == want[4]
