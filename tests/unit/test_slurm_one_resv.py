"""Jobs in several partitions in backfill: one reservation per (job, partition) record by
default, bf_one_resv_per_job, and records that are only tested to start now, against what a
real 22.05.8 did (``tests/differential/test_real_slurm_one_resv.py`` runs it on both systems).

Scenario: partition pa has nodes 1-2, pb nodes 3-4. R1 holds node 1 for 10 minutes, R2 node 3
for 5. M (two whole nodes, 30 minutes, ``-p pa,pb``) fits neither partition now; Sa (pa) and
Sb (pb) want one whole node for 15 minutes, which the free node of their partition has now,
but only until M's reservation there begins. The real runs gave, after the first backfill
cycle:

* default: M was planned in pa (nodes 1-2 at 600 s) and in pb (nodes 3-4 at 300 s), with a
  reservation in each; its StartTime was the earlier, 300 s. Sa and Sb stayed pending.
* bf_one_resv_per_job: M's pb record was only tested to start now (log: "already added a
  backfill reservation. Test immediate start only for partition pb"), so nodes 3-4 were not
  reserved and backfill started Sb on node 4; M's StartTime was pa's 600 s (a record tested
  to start now gives no start time).
* bf_min_prio_reserve above Sa, Sb and T: they were tested to start now only and showed
  StartTime=Unknown; M kept both reservations. T (both pb nodes for 4 minutes) ends before
  M's reservation there, so its nodes are free in the map and it would start when R2 ends:
  a start time that only a test beyond now would give, and a record tested now only lacks.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from gpupool.engine.core import Engine
from gpupool.engine.policy_api import make_policy
from gpupool.formats.pool_dir import load_pool

from tests.unit.sbatch_plans import workload

SLURM_CONF = """\
ClusterName=oneresv
SchedulerType=sched/backfill
SchedulerParameters={params}
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=100
PriorityType=priority/basic
GresTypes=gpu
NodeName=n[1-4] CPUs=16 RealMemory=64000 Gres=gpu:8
PartitionName=pa Nodes=n[1-2] Default=YES MaxTime=60
PartitionName=pb Nodes=n[3-4] MaxTime=60
"""

#: (name, submit time, sbatch options), as the real runs submitted them
PLAN = [
    ("R1", 0.0, "-p pa -w n1 -N1 -n1 --gres=gpu:8 -t 10"),
    ("R2", 0.0, "-p pb -w n3 -N1 -n1 --gres=gpu:8 -t 5"),
    ("M", 3.0, "-p pa,pb -N2 -n2 --gres=gpu:8 -t 30"),
    ("Sa", 3.0, "-p pa -N1 -n1 --gres=gpu:8 -t 15"),
    ("Sb", 3.0, "-p pb -N1 -n1 --gres=gpu:8 -t 15"),
    ("T", 3.0, "-p pb -N2 -n2 --gres=gpu:8 -t 4"),
]


def scenario(tmp_path: Path, params: str, node_names: tuple[str, ...] = ("n1", "n2", "n3", "n4"),
             conf: str | None = None):
    """The scenario in gpupool up to t=48 s (the first backfill cycle is at 30 s): the jobs by
    name, the policy (``record=True``) and the job ids by name."""
    import gpupool.policy.slurm  # noqa: F401  (registers the policy)

    if conf is None:
        (tmp_path / "slurm.conf").write_text(SLURM_CONF.format(params=params))
    pool = load_pool(tmp_path if conf is None else conf)
    wls, ids = [], {}
    for name, at, opts in PLAN:
        opts = opts.replace("-w n1", f"-w {node_names[0]}").replace("-w n3", f"-w {node_names[2]}")
        wl = workload(name, opts, at, len(wls) + 1)
        wls.append(wl)
        ids[name] = wl.id
    pol = make_policy("slurm", pool, {"record": True})
    out = Engine(pool, wls, pol, check=True, until=48.0).run()
    by_id = {j.id: j for j in out.jobs}
    return {name: by_id[jid] for name, jid in ids.items()}, pol, ids


def reservations_of(pol, jid: int, t: float = 30.0) -> list[list[int]]:
    """The nodes (indices: n1 is 0) of ``jid``'s reservations in the backfill cycle at ``t``."""
    return [nodes for j, nodes, _b, _e in pol.resv_log[t] if j == jid]


BASE = "bf_interval=30,sched_interval=60"


def test_a_job_in_two_partitions_reserves_in_each_and_shows_its_earliest_start(tmp_path):
    jobs, pol, ids = scenario(tmp_path, BASE)
    assert jobs["Sa"].state == jobs["Sb"].state == "PENDING"
    assert sorted(reservations_of(pol, ids["M"])) == [[0, 1], [2, 3]]
    assert pol.plan_log[30.0][ids["M"]] == 300.0  # pb's plan, earlier than pa's 600 s
    assert ids["Sa"] in pol.plan_log[30.0] and ids["Sb"] in pol.plan_log[30.0]


def test_bf_one_resv_per_job_leaves_the_other_partition_free_for_backfill(tmp_path):
    jobs, pol, ids = scenario(tmp_path, BASE + ",bf_one_resv_per_job")
    assert reservations_of(pol, ids["M"]) == [[0, 1]]
    assert pol.plan_log[30.0][ids["M"]] == 600.0  # the pb record, tested now only, gave none
    assert jobs["Sb"].state == "RUNNING" and jobs["Sb"].start == 30.0
    assert jobs["Sb"].via == "SchedBackfill" and jobs["Sb"].placement[0][0] == 3  # n4
    assert jobs["Sa"].state == "PENDING"


def test_records_tested_to_start_now_get_no_start_time(tmp_path):
    # priority/basic gives the k-th job 4294901760 - k, as slurmctld does: Sa (4) and Sb (5) fall
    # below M (3), whose priority the real run's threshold was
    jobs, pol, ids = scenario(tmp_path, BASE + ",bf_min_prio_reserve=4294901757")
    assert jobs["Sa"].state == jobs["Sb"].state == "PENDING"
    assert not {ids["Sa"], ids["Sb"], ids["T"]} & set(pol.plan_log[30.0])
    assert jobs["T"].state == "PENDING"
    assert sorted(reservations_of(pol, ids["M"])) == [[0, 1], [2, 3]]
    assert pol.plan_log[30.0][ids["M"]] == 300.0


@pytest.mark.parametrize("key", ["bf_one_resv_per_job", "BF_ONE_RESV_PER_JOB"])
def test_the_option_is_read_case_insensitively_and_counts_as_modelled(key):
    from gpupool.formats.slurm_conf import MODELLED_SCHEDULER_PARAMETERS
    from gpupool.model.slurm import SlurmConfig
    from gpupool.policy.slurm.config import load_settings

    cfg = SlurmConfig(cluster_name="c")
    cfg.scheduler_parameters = {"bf_interval": "30", key: True}
    assert load_settings(cfg).bf_one_resv_per_job is True
    cfg.scheduler_parameters = {"bf_interval": "30"}
    assert load_settings(cfg).bf_one_resv_per_job is False
    assert "bf_one_resv_per_job" in MODELLED_SCHEDULER_PARAMETERS
