"""``--time-min`` under the Slurm policy's backfill (22.05.8; spec §2.3 step 4, docs/policies/slurm.md).

The scenario is the one ``tests/differential/test_real_slurm_time_min.py`` runs on a real
Slurm: an 8-GPU node, A (4 GPUs, 10 min) running, B (8 GPUs, 20 min) waiting for A; C (4 GPUs,
``--time=30 --time-min=5``) and D (2 GPUs, ``--time=30 --time-min=12``) behind B."""
from __future__ import annotations

import dataclasses

from gpupool.conformance.slurm_cases import build_pool, build_workloads
from gpupool.engine.core import Engine
from gpupool.engine.policy_api import make_policy

CASE = {
    "id": "time-min", "config": {"SchedulerParameters": {"bf_interval": 30}, "PriorityType": "fixed"},
    "cluster": {"nodes": [{"name": "n1", "cpus": 16, "gpus": 8}], "partitions": [{"name": "p", "nodes": ["n1"]}]},
    "jobs": [{"id": "A", "submit": 0, "gpus_per_node": 4, "time_limit_min": 10, "run_s": 3000, "priority": 400},
             {"id": "B", "submit": 5, "gpus_per_node": 8, "time_limit_min": 20, "run_s": 3000, "priority": 300},
             {"id": "C", "submit": 10, "gpus_per_node": 4, "time_limit_min": 30, "run_s": 3000, "priority": 200},
             {"id": "D", "submit": 10, "gpus_per_node": 2, "time_limit_min": 30, "run_s": 3000, "priority": 100}],
}


def run(time_min: dict[str, float]):
    import gpupool.policy.slurm  # noqa: F401  (registers the policy)

    pool, _ = build_pool(CASE)
    wls, ids = build_workloads(CASE)
    by_id = {v: k for k, v in ids.items()}
    wls = [dataclasses.replace(w, time_min=time_min.get(by_id[w.id])) for w in wls]
    pol = make_policy("slurm", pool, {"record": True})
    out = Engine(pool, wls, pol, check=True).run()
    return pol, {by_id[j.id]: j for j in out.jobs}, ids


def test_backfill_plans_with_time_min_and_starts_with_it_as_the_limit():
    pol, jobs, ids = run({"C": 300.0, "D": 720.0})
    c = jobs["C"]
    # planned with 5 min, C fits before B's reservation at 600 and starts at the first cycle;
    # its limit is now 5 min (a real 22.05.8 showed TimeLimit=00:05:00), so it times out at 330
    assert (c.start, c.via, c.time_limit) == (30.0, "SchedBackfill", 300.0)
    assert (c.end, c.final_state) == (330.0, "TIMEOUT")
    # D's 12 min reach B's reservation: planned at B's limit end, and started there with its
    # full limit by the main scheduler
    assert pol.plan_log[30.0][ids["D"]] == 1800.0
    assert (jobs["D"].start, jobs["D"].via, jobs["D"].time_limit) == (1800.0, "SchedMain", 1800.0)
    assert jobs["B"].start == 600.0


def test_without_time_min_the_job_waits_for_its_full_window():
    _pol, jobs, _ids = run({})
    # C's 30 min reach B's reservation: it waits for B's end and then runs with its own limit
    assert jobs["C"].start == 1800.0 and jobs["C"].time_limit == 1800.0


def test_a_time_min_at_or_above_the_limit_changes_nothing():
    _pol, jobs, _ids = run({"C": 1800.0})
    assert jobs["C"].start == 1800.0 and jobs["C"].time_limit == 1800.0


def test_running_jobs_are_planned_around_with_their_short_limit():
    """Other jobs' plans see C end at its 5-minute limit, not at 30 minutes: with C running,
    B stays planned at A's limit end (600), since C's limit end (330) comes first."""
    pol, jobs, ids = run({"C": 300.0})
    assert pol.short_limit == {jobs["C"].id: 300.0}
    assert pol.plan_log[60.0][ids["B"]] == 600.0


def test_the_main_scheduler_starts_a_time_min_job_with_its_full_limit():
    """On an idle node the main pass starts it at submission with --time (a real 22.05.8 showed
    TimeLimit=00:30:00 for three such jobs, ``sched: Allocate``)."""
    import gpupool.policy.slurm  # noqa: F401

    case = {**CASE, "jobs": [{"id": "C", "submit": 0, "gpus_per_node": 2, "time_limit_min": 30, "run_s": 60}]}
    pool, _ = build_pool(case)
    wls, _ids = build_workloads(case)
    wls = [dataclasses.replace(w, time_min=300.0) for w in wls]
    out = Engine(pool, wls, make_policy("slurm", pool), check=True).run()
    (job,) = out.jobs
    assert (job.start, job.via, job.time_limit) == (0.0, "SchedMain", 1800.0)
