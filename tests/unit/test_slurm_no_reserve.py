"""QOS flag NoReserve under the Slurm policy's backfill (spec §2.3 steps 4 and 6f; 22.05.8).

The scenario of ``tests/differential/test_real_slurm_no_reserve.py``: one 8-GPU node, A (4 GPUs,
5 min) running, B (8 GPUs, 5 min) waiting for it, N (4 GPUs, 10 min, QOS ``scav`` with
Flags=NoReserve, which QOS normal may preempt) behind B."""
from __future__ import annotations

import copy

from gpupool.conformance.slurm_cases import _apply_overrides, build_pool, build_workloads
from gpupool.engine.core import Engine
from gpupool.engine.policy_api import make_policy

CASE = {
    "id": "no-reserve",
    "config": {"SchedulerParameters": {"bf_interval": 30}, "PreemptType": "preempt/qos", "PreemptMode": "CANCEL"},
    "cluster": {"nodes": [{"name": "n1", "cpus": 16, "gpus": 8}], "partitions": [{"name": "p", "nodes": ["n1"]}],
                "qos": [{"name": "normal", "priority": 0, "preempt": ["scav"]},
                        {"name": "scav", "priority": 0, "flags": ["NoReserve"]}]},
    "jobs": [{"id": "A", "submit": 0, "gpus_per_node": 4, "time_limit_min": 5, "run_s": 3000, "qos": "normal"},
             {"id": "B", "submit": 5, "gpus_per_node": 8, "time_limit_min": 5, "run_s": 3000, "qos": "normal"},
             {"id": "N", "submit": 10, "gpus_per_node": 4, "time_limit_min": 10, "run_s": 3000, "qos": "scav"}],
}


def run(overrides: dict | None = None):
    import gpupool.policy.slurm  # noqa: F401  (registers the policy)

    case = _apply_overrides(copy.deepcopy(CASE), overrides) if overrides else CASE
    pool, _ = build_pool(case)
    wls, ids = build_workloads(case)
    pol = make_policy("slurm", pool, {"record": True})
    out = Engine(pool, wls, pol, check=True).run()
    by_id = {v: k for k, v in ids.items()}
    return pol, {by_id[j.id]: j for j in out.jobs}, ids


def test_a_no_reserve_job_is_planned_with_one_minute_and_runs_with_its_own_limit():
    pol, jobs, ids = run()
    n = jobs["N"]
    # one minute fits before B's reservation at 300 (ten would not): started by the first
    # cycle, with its own 10-minute limit
    assert (n.start, n.via, n.time_limit) == (30.0, "SchedBackfill", 600.0)
    # B preempts it at A's limit end
    assert (n.end, n.final_state) == (300.0, "PREEMPTED")
    assert jobs["B"].start == 300.0
    # never a reservation of its own
    assert all(jid != ids["N"] for cycle in pol.resv_log.values() for jid, *_ in cycle)


def test_without_the_flag_the_job_waits_behind_the_reservation():
    _pol, jobs, _ids = run({"qos": {"scav": {"flags": []}}})
    assert jobs["N"].start == jobs["B"].end


def test_the_flag_plans_nothing_short_without_preemption():
    """slurmctld applies NoReserve only with a PreemptMode: without one N waits as any job."""
    _pol, jobs, _ids = run({"PreemptType": "preempt/none", "PreemptMode": "OFF"})
    assert jobs["N"].start == jobs["B"].end
