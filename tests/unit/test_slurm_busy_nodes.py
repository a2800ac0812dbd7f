"""SchedulerParameters=bf_busy_nodes: a job planned for later takes nodes busy now before idle
ones, against what a real 22.05.8 did (``tests/differential/test_real_slurm_busy_nodes.py``
runs it on both systems).

Scenario: five 8-GPU nodes in partition p; partition small holds nodes 4-5. R1 and R2 run
``--exclusive`` in small (nodes 4 and 5) for 5 minutes. J wants four whole nodes for 30
minutes and K one whole node. J cannot start now (three nodes are idle) and is planned for
when R1 and R2 end; K is tested after it. Without the option the real 22.05.8 planned J on
nodes 1-4 (the tightest run of consecutive nodes) and K on node 5 after R2; with it, on nodes
4-5 (busy now) and 1-2, so node 3 stayed out of J's reservation and backfill started K there.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from gpupool.engine.core import Engine
from gpupool.engine.policy_api import make_policy
from gpupool.formats.pool_dir import load_pool

from tests.unit.sbatch_plans import workload

SLURM_CONF = """\
ClusterName=busy
SchedulerType=sched/backfill
SchedulerParameters={params}
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=100
PriorityType=priority/basic
GresTypes=gpu
NodeName=n[1-5] CPUs=16 RealMemory=64000 Gres=gpu:8
PartitionName=p Nodes=n[1-5] Default=YES MaxTime=60
PartitionName=small Nodes=n[4-5] MaxTime=60
"""

#: (name, submit time, sbatch options), as the real runs submitted them
PLAN = [
    ("R1", 0.0, "-p small --exclusive -N1 -n1 --gres=gpu:1 -t 5"),
    ("R2", 0.0, "-p small --exclusive -N1 -n1 --gres=gpu:1 -t 5"),
    ("J", 3.0, "-N4 -n4 --gres=gpu:8 -t 30"),
    ("K", 3.0, "-N1 -n1 --gres=gpu:8 -t 30"),
]
BASE = "bf_interval=30,sched_interval=60"


def scenario(tmp_path: Path, params: str, conf: Path | None = None):
    """The scenario in gpupool up to t=48 s (one backfill cycle, at 30 s): jobs by name, the
    policy (``record=True``) and the job ids by name."""
    import gpupool.policy.slurm  # noqa: F401  (registers the policy)

    if conf is None:
        (tmp_path / "slurm.conf").write_text(SLURM_CONF.format(params=params))
        conf = tmp_path
    pool = load_pool(conf)
    wls, ids = [], {}
    for name, at, opts in PLAN:
        wl = workload(name, opts, at, len(wls) + 1)
        wls.append(wl)
        ids[name] = wl.id
    pol = make_policy("slurm", pool, {"record": True})
    out = Engine(pool, wls, pol, check=True, until=48.0).run()
    by_id = {j.id: j for j in out.jobs}
    return {name: by_id[jid] for name, jid in ids.items()}, pol, ids


def reserved(pol, jid: int) -> list[int]:
    """The nodes (indices: n1 is 0) of ``jid``'s reservation in the cycle at 30 s."""
    return next(nodes for j, nodes, _b, _e in pol.resv_log[30.0] if j == jid)


def test_without_the_option_a_later_start_takes_the_tightest_run():
    import tempfile

    jobs, pol, ids = scenario(Path(tempfile.mkdtemp()), BASE)
    assert [p[0] for p in jobs["R1"].placement] == [3] and [p[0] for p in jobs["R2"].placement] == [4]
    assert reserved(pol, ids["J"]) == [0, 1, 2, 3]
    assert jobs["K"].state == "PENDING" and reserved(pol, ids["K"]) == [4]


def test_bf_busy_nodes_plans_on_busy_nodes_first_and_frees_an_idle_one(tmp_path):
    jobs, pol, ids = scenario(tmp_path, BASE + ",bf_busy_nodes")
    assert reserved(pol, ids["J"]) == [0, 1, 3, 4]
    assert pol.plan_log[30.0][ids["J"]] == 300.0
    assert jobs["K"].state == "RUNNING" and jobs["K"].start == 30.0
    assert [p[0] for p in jobs["K"].placement] == [2]


def test_busy_first_order_within_weights_and_for_task_pods():
    """The pick itself: lowest weight first, then busy before idle, then index; task pods (not
    one per node) fill a node before the next."""
    from gpupool.engine.nodes import NodeTable
    from gpupool.model.pool import Gpu, Node
    from gpupool.model.workload import PodSet
    from gpupool.policy.slurm.select import Free, place

    from types import SimpleNamespace

    nodes = NodeTable(SimpleNamespace(nodes={f"n{i}": Node(
        name=f"n{i}", cpus=8, memory_mib=1000, gpus=tuple(Gpu(k) for k in range(4)),
        weight=(2 if i == 0 else 1)) for i in range(4)}))
    free = Free(nodes)

    class WL:
        nodelist = exclude = constraint = None
        pod_sets = (PodSet(name="m", count=2, cpu_m=1000, memory_mib=10, gpus=2, one_per_node=True),)

    busy = 1 << 0 | 1 << 3  # n0 and n3 busy; n0 weighs more
    got = place(WL, (0, 1, 2, 3), free, None, None, busy)
    assert [p[0] for p in got] == [3, 1]

    class Tasks:
        nodelist = exclude = constraint = None
        pod_sets = (PodSet(name="t", count=3, cpu_m=1000, memory_mib=10, gpus=1, one_per_node=False),)

    got = place(Tasks, (0, 1, 2, 3), free, None, None, busy)
    assert [p[0] for p in got] == [3, 3, 3]
    assert [p[1] for p in got] == [1, 2, 4]  # lowest free devices, one each


@pytest.mark.parametrize("key", ["bf_busy_nodes", "BF_BUSY_NODES"])
def test_the_option_is_read_case_insensitively_and_counts_as_modelled(key):
    from gpupool.formats.slurm_conf import MODELLED_SCHEDULER_PARAMETERS
    from gpupool.model.slurm import SlurmConfig
    from gpupool.policy.slurm.config import load_settings

    cfg = SlurmConfig(cluster_name="c")
    cfg.scheduler_parameters = {key: True}
    assert load_settings(cfg).bf_busy_nodes is True
    assert "bf_busy_nodes" in MODELLED_SCHEDULER_PARAMETERS
