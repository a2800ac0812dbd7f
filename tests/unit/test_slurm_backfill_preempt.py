"""Backfill plans preemptions (spec §2.4.3, §9; docs/differential.md, finding 25).

The scenario is case ``preempt-gp-005``: H heads the queue and blocks every main pass, P (QOS
high, may preempt L's QOS low) sits behind it. Only the backfill cycle can preempt for P.
"""
from __future__ import annotations

import copy
from pathlib import Path

from hypothesis import given, settings, strategies as st

from gpupool.conformance.slurm_cases import _apply_overrides, build_pool, build_workloads, load_case
from gpupool.engine.core import Engine
from gpupool.engine.policy_api import make_policy

CASE = Path(__file__).resolve().parents[1] / "conformance" / "slurm" / "preempt-gp-005-backfill-preempts.yaml"


def _run(overrides: dict | None = None):
    import gpupool.policy.slurm  # noqa: F401  (registers the policy)

    case = load_case(CASE)
    if overrides:
        case = _apply_overrides(copy.deepcopy(case), overrides)
    pool, _ = build_pool(case)
    wls, ids = build_workloads(case)
    pol = make_policy("slurm", pool, {"record": True})
    out = Engine(pool, wls, pol, check=True).run()
    return pol, {j.wl.name: j for j in out.jobs}, ids


def test_the_cycle_preempts_reserves_the_victims_node_and_a_later_cycle_starts_the_job():
    pol, jobs, ids = _run()
    p = ids["P"]
    # the cycle at 30: P planned now, its will-run node (L's, n1 = index 0) reserved from now
    # for its 10-minute limit (ends rounded down to bf_resolution)
    assert pol.plan_log[30.0][p] == 30.0
    resv = {jid: (nodes, b, e) for jid, nodes, b, e in pol.resv_log[30.0]}
    assert resv[p] == ([0], 0.0, 600.0)
    assert jobs["L"].end == 30.0 and jobs["L"].final_state == "PREEMPTED"
    # the extra pass at 30 after the preemption is a main pass only: it stops at H again
    assert jobs["P"].start == 60.0 and jobs["P"].via == "SchedBackfill"
    assert jobs["P"].placement[0][0] == 0
    # H is planned behind L's limit end while L runs, at N's end once L is gone
    assert pol.plan_log[30.0][ids["H"]] == 1800.0
    assert pol.plan_log[60.0][ids["H"]] == 1200.0
    assert jobs["H"].start == 1200.0


def test_a_job_that_may_preempt_nobody_is_planned_as_before():
    pol, jobs, ids = _run({"jobs": {"P": {"qos": "normal"}}})
    assert jobs["L"].final_state == "TIMEOUT" and jobs["L"].preemptions == 0
    # planned from N's limit end on N's node, no preemption and no reservation from now
    assert pol.plan_log[30.0][ids["P"]] == 1200.0
    resv = {jid: (nodes, b, e) for jid, nodes, b, e in pol.resv_log[30.0]}
    assert resv[ids["P"]] == ([1], 1200.0, 1800.0)
    assert jobs["P"].start == jobs["H"].end


def test_victims_chosen_by_the_main_pass_are_not_offered_twice():
    """With H gone, P heads the queue: the main pass at its submission preempts L (SchedMain
    path) and backfill, which skips jobs already preempting, adds nothing."""
    pol, jobs, _ids = _run({"jobs": {"H": {"submit": 100000}}})
    assert jobs["L"].end == 20.0 and jobs["L"].preemptions == 1
    assert jobs["P"].start == 20.0 and jobs["P"].via == "SchedMain"


_jobs_st = st.lists(
    st.tuples(st.integers(0, 300), st.integers(1, 2), st.integers(1, 4), st.integers(30, 900),
              st.integers(1, 15), st.sampled_from(["low", "normal", "high"]), st.integers(1, 3000),
              st.booleans()),
    min_size=1, max_size=12)


@settings(max_examples=40, deadline=None)
@given(_jobs_st, st.sampled_from(["CANCEL", "REQUEUE"]), st.sampled_from([1, 3]))
def test_property_preemption_by_main_and_backfill(specs, mode, queue_depth):
    """Random jobs of three QOS (high may preempt low) under both schedulers, with a shallow
    main queue so that backfill often meets preemptors first: the engine's invariants hold
    (no GPU given twice, usage accounted; ``check=True``), every job ends exactly once, and
    only low-QOS jobs are ever preempted."""
    case = {
        "id": "prop",
        "config": {"PreemptType": "preempt/qos", "PreemptMode": mode, "PriorityType": "fixed",
                   "SchedulerParameters": {"bf_interval": 30, "default_queue_depth": queue_depth}},
        "cluster": {"nodes": [{"name": "n[1-3]", "cpus": 8, "gpus": 4}],
                    "partitions": [{"name": "p", "nodes": "n[1-3]"}],
                    "qos": [{"name": "normal", "priority": 0, "preempt": []},
                            {"name": "low", "priority": 0, "preempt": []},
                            {"name": "high", "priority": 100, "preempt": ["low"]}]},
        "jobs": [{"id": i + 1, "submit": s, "nodes": n, "cpus": n, "gpus_per_node": g, "run_s": r,
                  "time_limit_min": tl, "qos": q, "priority": pr, "requeue": rq}
                 for i, (s, n, g, r, tl, q, pr, rq) in enumerate(specs)],
    }
    pool, _ = build_pool(case)
    wls, _ids = build_workloads(case)
    out = Engine(pool, wls, make_policy("slurm", pool, {}), check=True).run()
    qos = {w.id: case["jobs"][k]["qos"] for k, w in enumerate(wls)}
    finished: dict[int, int] = {}
    for _t, what, jid, detail in out.events:
        if what == "preempted":
            assert qos[jid] == "low", (jid, detail)
        if what == "finished":  # a requeued run is "preempted" then "requeued", not finished
            finished[jid] = finished.get(jid, 0) + 1
    for job in out.jobs:
        assert finished.get(job.id) == 1, (job.id, finished.get(job.id))
        assert job.final_state in ("COMPLETED", "TIMEOUT", "PREEMPTED")


_tier_jobs_st = st.lists(
    st.tuples(st.integers(0, 300), st.integers(1, 4), st.integers(0, 1), st.integers(10, 400),
              st.sampled_from([3, 10]), st.integers(1, 2), st.booleans(), st.integers(1, 3000)),
    min_size=1, max_size=10)


@settings(max_examples=40, deadline=None)
@given(_tier_jobs_st, st.sampled_from([("SUSPEND,GANG", "NO"), ("SUSPEND,GANG", "FORCE:2"), ("REQUEUE", "NO")]))
def test_property_partition_prio_preemption_with_a_shallow_main_queue(specs, mode_share):
    """preempt/partition_prio with one record per main pass: backfill meets most preemptors, and
    with SUSPEND,GANG starts them at once (their victims suspended by gang). Invariants hold and
    every job ends once, in a final state."""
    mode, share = mode_share
    case = {
        "id": "prop",
        "config": {"PreemptType": "preempt/partition_prio", "PreemptMode": mode, "PriorityType": "fixed",
                   "SchedulerParameters": {"bf_interval": 30, "default_queue_depth": 1}},
        "cluster": {"nodes": [{"name": "n[1-3]", "cpus": 4, "gpus": 1, "mem_mb": 10000}],
                    "partitions": [{"name": "low", "nodes": "n[1-3]", "priority_tier": 1, "oversubscribe": share},
                                   {"name": "high", "nodes": "n[1-3]", "priority_tier": 2}]},
        "jobs": [{"id": i + 1, "submit": s, "cpus": c * n, "nodes": n, "gpus_per_node": g, "run_s": r,
                  "mem_mb": 3000, "time_limit_min": tl, "partition": "high" if hi else "low", "priority": pr,
                  "requeue": True}
                 for i, (s, c, g, r, tl, n, hi, pr) in enumerate(specs)],
    }
    pool, _ = build_pool(case)
    wls, _ids = build_workloads(case)
    out = Engine(pool, wls, make_policy("slurm", pool, {}), check=True).run()
    part = {w.id: case["jobs"][k]["partition"] for k, w in enumerate(wls)}
    finished: dict[int, int] = {}
    for _t, what, jid, _detail in out.events:
        if what in ("preempted", "suspended"):  # only the low tier is preempted or time-sliced
            assert part[jid] == "low", (what, jid)
        if what == "finished":
            finished[jid] = finished.get(jid, 0) + 1
    for job in out.jobs:
        assert finished.get(job.id) == 1, (job.id, finished.get(job.id))
        assert job.final_state in ("COMPLETED", "TIMEOUT", "PREEMPTED")
