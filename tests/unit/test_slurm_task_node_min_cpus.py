"""Task pods holding memory per node (``-n T`` with ``--mem=M``, ``--mem=0`` or the whole-node
default; no node count) under MaxMemPerCPU: every node they take gives the job ⌈M / limit⌉
CPUs at least, cut to whole tasks, whatever share of the tasks it holds, and only a node with
that many CPUs free takes them (``PodSet.node_min_cpus``, set by ``job_defaults``; held by
``select._once_a_node``).

Probe p125 (2026-12-05, a real 22.05.8): the seed pool's four nodes (128 CPUs, two threads per
core, 1000000 MB) with MaxMemPerCPU=8000; ``scontrol -d show job`` showed MinCPUsNode (slurmctld's
``pn_min_cpus``) and the CPUs held. Before this, gpupool gave each task pod CPUs for its share
of the node's memory (``-n4 --mem=0``: 4 × 32 = 128 CPUs) or none beyond the tasks' (``-n4
--mem=100000``: 4 CPUs, 25000 MB each, over the limit).
"""
from __future__ import annotations

import pytest

from gpupool.engine.policy_api import make_policy
from tests.unit.sbatch_plans import DBD_LIMITS_CONF, GPU_NODES_CONF, run_spaced, slurm_pool, team_accounts, workload
from tests.unit.test_slurm_gpu_walk import _run, node_amounts

#: options -> (node, GPUs, CPUs, MB) the real job held on idle nodes
_IDLE = [
    ("-n4 --mem=100000", {"gpu01": (0, 14, 100000)}),  # MinCPUsNode 13, in whole cores
    ("-N1 -n4 --mem=100000", {"gpu01": (0, 14, 100000)}),  # (the node count's form, as before)
    ("-n4 --mem=0", {"gpu01": (0, 126, 1000000)}),  # 125
    ("-n4", {"gpu01": (0, 126, 1000000)}),  # no memory asked, no default: the whole node's
    ("-n4 -c2 --mem=100000", {"gpu01": (0, 12, 100000)}),  # 13 cut to whole tasks of 2
    ("-n4 -c3 --mem=100000", {"gpu01": (0, 12, 100000)}),  # of 3: the tasks' own 12
    ("-n4 --mem=50000", {"gpu01": (0, 8, 50000)}),
]


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    conf = GPU_NODES_CONF.format(last=4).replace("DefMemPerGPU=120000", "DefMemPerGPU=120000\nMaxMemPerCPU=8000")
    return slurm_pool(tmp_path_factory.mktemp("maxmem"), conf)


@pytest.mark.parametrize("opts,want", _IDLE, ids=[o for o, _ in _IDLE])
def test_each_node_gives_the_cpus_its_memory_needs(pool, opts, want):
    job = _run(pool, {}, opts)
    assert job.first_start == 1.0
    assert node_amounts(pool, job) == want


def test_a_node_without_those_cpus_free_takes_no_task(pool):
    """gpu01 with 8 CPUs free: ``-n4 --mem=100000`` (13 a node) went to gpu02 with 14, and
    ``-n4 --mem=50000`` (7) stayed on gpu01 with 8."""
    blockers = {"gpu01": "-n120 --mem=1000"}
    assert node_amounts(pool, _run(pool, blockers, "-n4 --mem=100000")) == {"gpu02": (0, 14, 100000)}
    assert node_amounts(pool, _run(pool, blockers, "-n4 --mem=50000")) == {"gpu01": (0, 8, 50000)}


def test_every_node_taken_gives_the_minimum(pool):
    """``-n130 --mem=500000`` (63 a node) on two nodes: the second holds 64 CPUs (whole cores),
    though two tasks are left for it. A real 22.05.8 ran it with 68 + 64 CPUs (its tasks dealt
    otherwise than gpupool's 128 + 64: not modelled); both nodes hold 500000 MB."""
    held = node_amounts(pool, _run(pool, {}, "-n130 --mem=500000"))
    assert [(mem, cpus >= 63) for _g, cpus, mem in held.values()] == [(500000, True), (500000, True)]


def test_other_limits_keep_the_old_forms(tmp_path):
    """Without MaxMemPerCPU the pods hold no CPU minimum (``-n4 --mem=100000``: 4 CPUs)."""
    pool = slurm_pool(tmp_path, GPU_NODES_CONF.format(last=4))
    assert node_amounts(pool, _run(pool, {}, "-n4 --mem=100000")) == {"gpu01": (0, 4, 100000)}


def test_a_co_allocated_start_keeps_to_the_limits_on_its_cpus(tmp_path):
    """OverSubscribe=FORCE:2, every CPU held by teamB, teamA limited to GrpTRES=cpu=10 under
    MaxMemPerCPU=4000: ``-A teamA -n4 --mem=48000`` would hold 12 CPUs on its node (from the
    source: select_nodes tests the limits on the selection's CPUs at every start), so it is not
    co-allocated (before this row it ran in the second row over the limit). The selection in
    the first row where it fits is the one select_nodes tests: the job is held by the limit,
    not by resources (before, it showed Resources)."""
    conf = "ClusterName=t\n" + DBD_LIMITS_CONF + """MaxMemPerCPU=4000
NodeName=n[01-02] CPUs=16 RealMemory=64000
PartitionName=p Nodes=n[01-02] Default=YES MaxTime=60 State=UP OverSubscribe=FORCE:2
"""
    (tmp_path / "accounts.cfg").write_text(team_accounts("cpu=10"))
    jobs = ["-A teamB -w n01 -n16 --mem=1000 -t 30", "-A teamB -w n02 -n16 --mem=1000 -t 30",
            "-A teamA -t 10 -n4 --mem=48000"]
    engine, _pol = run_spaced(slurm_pool(tmp_path, conf), jobs, 3, 200)
    assert engine.jobs[3].state == "PENDING"
    assert engine.jobs[3].reason == "AssocGrpCpuLimit"


def test_the_whole_memory_minimum_reads_the_partitions_first_node(tmp_path):
    """``--mem=0`` under MaxMemPerCPU=8000 in a partition whose first node has 1000000 MB and
    the other 500000: slurmctld's ``_mem_per_node_part`` reads the first node (125 CPUs a
    node, from the source), gpupool holds the smallest node's memory."""
    conf = GPU_NODES_CONF.format(last=2).replace("DefMemPerGPU=120000", "MaxMemPerCPU=8000").replace(
        "NodeName=gpu[01-02]", "NodeName=gpu01").replace(
        "PartitionName", "NodeName=gpu02 CPUs=128 Sockets=2 CoresPerSocket=32 ThreadsPerCore=2 RealMemory=500000 "
        "Gres=gpu:8\nPartitionName")
    pol = make_policy("slurm", slurm_pool(tmp_path, conf))
    wl = pol.resolve_request(workload("j", "-t 5 -n4 --mem=0", 0.0, 1))
    (ps,) = wl.pod_sets
    assert (ps.node_memory_mib, ps.node_min_cpus) == (500000, 125)


@pytest.mark.parametrize("scheduler", ["sched/backfill", "sched/builtin"])
def test_a_co_allocation_over_a_limit_holds_its_partition_back_no_more(tmp_path, scheduler):
    """As the first test above, then a teamB job that fits a second row: the limit (not a lack
    of resources) holds the teamA job, so its partition is not held back and the teamB job is
    co-allocated in the same pass (under sched/builtin, before, the pass stopped at teamA's)."""
    conf = "ClusterName=t\n" + DBD_LIMITS_CONF.replace("sched/backfill", scheduler) + """MaxMemPerCPU=4000
NodeName=n[01-02] CPUs=16 RealMemory=64000
PartitionName=p Nodes=n[01-02] Default=YES MaxTime=60 State=UP OverSubscribe=FORCE:2
"""
    (tmp_path / "accounts.cfg").write_text(team_accounts("cpu=10"))
    jobs = ["-A teamB -w n01 -n16 --mem=1000 -t 30", "-A teamB -w n02 -n16 --mem=1000 -t 30",
            "-A teamA -t 10 -n4 --mem=48000", "-A teamB -t 10 -n2 --mem=1000"]
    engine, _pol = run_spaced(slurm_pool(tmp_path, conf), jobs, 3, 200)
    assert (engine.jobs[3].state, engine.jobs[3].reason) == ("PENDING", "AssocGrpCpuLimit")
    assert engine.jobs[4].start == pytest.approx(9.0)
