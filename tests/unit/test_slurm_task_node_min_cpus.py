"""Task pods holding memory per node (``-n T`` with ``--mem=M``, ``--mem=0`` or the whole-node
default; no node count) under MaxMemPerCPU: every node they take gives the job ⌈M / limit⌉
CPUs at least, cut to whole tasks, whatever share of the tasks it holds, and only a node with
that many CPUs free takes them (``PodSet.node_min_cpus``, set by ``job_defaults``; held by
``select._once_a_node``). Over several nodes the tasks are dealt as cons_tres deals them, and a
node may then hold less (``select._dealt_over_minimum``, probe p129, the tests at the end).

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
    """``-n130 --mem=500000`` (63 a node) on two nodes: a real 22.05.8 ran it with 68 + 64 CPUs,
    500000 MB on each. ``_cpus_to_use`` lets the second node offer 63 CPUs (the minimum, not the
    2 still wanted) and the tasks are dealt one a node per round: 67 + 63, whole cores 68 + 64
    (before, gpupool filled the first node: 128 + 64)."""
    held = node_amounts(pool, _run(pool, {}, "-n130 --mem=500000"))
    assert held == {"gpu01": (0, 68, 500000), "gpu02": (0, 64, 500000)}


@pytest.mark.parametrize("opts, want", [
    # the second node offers what is left, more than the minimum: the fill stands
    ("-n200 --mem=500000", {"gpu01": (0, 128, 500000), "gpu02": (0, 72, 500000)}),
    # -c2: 65 tasks, 63 CPUs a node cut to whole tasks (62, as probe p125's -n4 -c2 showed):
    # one task a node per round, 34 + 31
    ("-n65 -c2 --mem=500000", {"gpu01": (0, 68, 500000), "gpu02": (0, 62, 500000)}),
])
def test_the_tasks_are_dealt_up_to_what_each_node_offers(pool, opts, want):
    """From the source, not probed: the same dealing for other counts (see above)."""
    assert node_amounts(pool, _run(pool, {}, opts)) == want


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


def test_the_nodes_offer_in_the_order_taken(pool):
    """From the source, not probed: with 100, 0, 70 and 70 CPUs free, ``-n200 --mem=500000``
    takes the run gpu03-04 first (70 + 70), then gpu01 offers the minimum (63, not the 60 still
    wanted), and the tasks dealt in index order come to 63 + 69 + 68, whole cores 64 + 70 + 68."""
    blockers = {"gpu01": "-n28 --mem=1000", "gpu02": "-n128 --mem=1000", "gpu03": "-n58 --mem=1000",
                "gpu04": "-n58 --mem=1000"}
    held = node_amounts(pool, _run(pool, blockers, "-n200 --mem=500000"))
    assert held == {"gpu01": (0, 64, 500000), "gpu03": (0, 70, 500000), "gpu04": (0, 68, 500000)}


def test_exclusive_task_pods_keep_their_whole_nodes(pool):
    """``--exclusive``: whole nodes, no minimum to deal over (``_cpus_to_use`` leaves them)."""
    held = node_amounts(pool, _run(pool, {}, "-n130 --exclusive --mem=500000"))
    assert held == {"gpu01": (8, 128, 500000), "gpu02": (8, 128, 500000)}


@pytest.mark.parametrize("blockers, opts, want, pods", [
    # idle, 125 a node: the job's CPUs are the nodes' minimum, 250, dealt 126 + 124
    ({}, "-n129 --mem=0", {"gpu01": (0, 126, 1000000), "gpu02": (0, 124, 1000000)}, 129),
    # 70 free on every node: 126 CPUs dealt over 70 and 63 offered, 64 + 62
    ({f"gpu0{i}": "-n58 --mem=1000" for i in (1, 2, 3, 4)}, "-n100 --mem=500000",
     {"gpu01": (0, 64, 500000), "gpu02": (0, 62, 500000)}, 100),
])
def test_the_nodes_minimum_may_deal_more_cpus_than_the_tasks(pool, blockers, opts, want, pods):
    """Probe p129 (a real 22.05.8, MaxMemPerCPU=8000): slurmctld gives the job the nodes times
    the minimum where that is more than its tasks' CPUs, deals them, and a node may end below
    the minimum (``scontrol -d show job``: ``-n129 --mem=0`` NumCPUs=250, CPU_IDs 0-125 on
    gpu01 and 0-61,64-125 on gpu02; ``-n100 --mem=500000`` 32 + 32 and 32 + 30 CPU ids). The
    job keeps its task pods."""
    job = _run(pool, blockers, opts)
    assert node_amounts(pool, job) == want
    assert len(job.placement) == pods



def test_the_minimum_counts_uncut_over_several_nodes(pool):
    """Probe p130 (a real 22.05.8, MaxMemPerCPU=8000, 70 CPUs free on every node):
    ``-n40 -c2 --mem=500000`` (MinCPUsNode=63) ran as 64 + 62 CPUs (NumCPUs=126: 2 × 63, the
    minimum as stored, not cut to whole tasks of 2), and idle ``-n65 -c2 --mem=500000`` as
    68 + 62."""
    blockers = {f"gpu0{i}": "-n58 --mem=1000" for i in (1, 2, 3, 4)}
    held = node_amounts(pool, _run(pool, blockers, "-n40 -c2 --mem=500000"))
    assert held == {"gpu01": (0, 64, 500000), "gpu02": (0, 62, 500000)}
    wl = make_policy("slurm", pool).resolve_request(workload("j", "-t 5 -n40 -c2 --mem=500000", 0.0, 1))
    (ps,) = wl.pod_sets
    assert (ps.node_min_cpus, ps.node_min_cpus_asked) == (62, 63)
