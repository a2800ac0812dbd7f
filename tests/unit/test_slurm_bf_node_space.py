"""The backfill map's size limit (SchedulerParameters bf_node_space_size, by default
bf_max_job_test) and bf_max_job_array_resv, against what a real 22.05.8 did.

Scenario (``tests/differential/test_real_slurm_bf_node_space.py`` runs it on both systems):
R holds node 1 for 10 minutes; A, B, C, D (or one array of 4 tasks) want both nodes and get a
reservation each, one after the other; S (one node, 5 minutes) fits node 2 now, before A's
reservation, if the backfill cycle reaches it. A real 22.05.8 with bf_node_space_size=4 planned
A and B, then C, and stopped there ("table size limit of 4 reached": every reservation splits
the map, and records are not reused) so S stayed pending; with a larger map S was started.
With an array, bf_max_job_array_resv=1 left one reservation for it and S started; with the
default 20 the array's tasks filled the map and S stayed pending.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from gpupool.engine.core import Engine
from gpupool.engine.policy_api import make_policy
from gpupool.formats.pool_dir import load_pool

from tests.unit.sbatch_plans import workloads

SLURM_CONF = """\
ClusterName=bfspace
SchedulerType=sched/backfill
SchedulerParameters={params}
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=100
PriorityType=priority/basic
GresTypes=gpu
NodeName=n[1-2] CPUs=16 RealMemory=64000 Gres=gpu:8
PartitionName=p Nodes=n[1-2] Default=YES MaxTime=60
"""


def scenario(tmp_path: Path, params: str, array: bool) -> dict[str, object]:
    """The scenario in gpupool; returns each job (by name) at t=60, after the first cycle."""
    import gpupool.policy.slurm  # noqa: F401  (registers the policy)

    (tmp_path / "slurm.conf").write_text(SLURM_CONF.format(params=params))
    pool = load_pool(tmp_path)
    plan = [("R", 0.0, "-N1 -n1 --gres=gpu:8 -t 10")]
    if array:
        plan.append(("A", 3.0, "-N2 -n2 --gres=gpu:8 -t 10 --array=1-4"))
    else:
        plan += [(n, 3.0, "-N2 -n2 --gres=gpu:8 -t 10") for n in "ABCD"]
    plan.append(("S", 3.0, "-N1 -n1 --gres=gpu:8 -t 5"))
    wls = []
    names = {}
    for name, at, opts in plan:
        for wl in workloads(name, opts, at, len(wls) + 1):
            names[wl.id] = name if wl.array_task_id is None else f"{name}_{wl.array_task_id}"
            wls.append(wl)
    pol = make_policy("slurm", pool, {"record": True})
    out = Engine(pool, wls, pol, check=True, until=60.0).run()
    return {names[j.id]: j for j in out.jobs}, pol, {v: k for k, v in names.items()}


@pytest.mark.parametrize("params,array,s_runs", [
    ("bf_interval=30,sched_interval=60,bf_node_space_size=4", False, False),
    ("bf_interval=30,sched_interval=60,bf_node_space_size=10", False, True),
    ("bf_interval=30,sched_interval=60,bf_node_space_size=4,bf_max_job_array_resv=1", True, True),
    ("bf_interval=30,sched_interval=60,bf_node_space_size=4", True, False),
])
def test_the_map_size_limit_ends_the_cycle(tmp_path, params, array, s_runs):
    jobs, pol, ids = scenario(tmp_path, params, array)
    s = jobs["S"]
    if s_runs:
        assert s.state == "RUNNING" and s.via == "SchedBackfill"
    else:
        assert (s.state, s.reason) == ("PENDING", "Priority")
    plans = pol.plan_log[30.0]
    first = "A_1" if array else "A"
    assert plans[ids[first]] == 600.0  # at R's limit end


def test_a_full_map_still_plans_the_job_that_found_it_full(tmp_path):
    """C is planned (squeue --start shows it) though the map had no room for its reservation;
    D, behind it, is never tested."""
    _jobs, pol, ids = scenario(tmp_path, "bf_interval=30,sched_interval=60,bf_node_space_size=4", False)
    plans = pol.plan_log[30.0]
    assert plans[ids["B"]] == 1200.0 and plans[ids["C"]] == 1800.0
    assert ids["D"] not in plans
    assert [r[0] for r in pol.resv_log[30.0]] == [ids["A"], ids["B"]]


def test_settings_follow_slurmctld_reading_of_the_options():
    """The map size defaults to bf_max_job_test unchecked (slurmctld derives it so, even from
    bf_max_job_test=1); options are found whatever their case; a value given out of range is
    refused with the range."""
    from gpupool.errors import GpupoolError
    from gpupool.model.slurm import SlurmConfig
    from gpupool.policy.slurm.config import load_settings

    def settings(**sp):
        cfg = SlurmConfig(cluster_name="c")
        cfg.scheduler_parameters = dict(sp)
        return load_settings(cfg)

    assert settings(bf_max_job_test="1").bf_node_space_size == 1
    assert settings(BF_INTERVAL="60", Bf_Max_Job_Array_Resv="3").bf_interval == 60
    assert settings(BF_INTERVAL="60", Bf_Max_Job_Array_Resv="3").bf_max_job_array_resv == 3
    with pytest.raises(GpupoolError, match="bf_node_space_size=1: expected 2 to 2000000"):
        settings(bf_node_space_size="1")
