"""``--mem=0`` (and no memory asked where no default applies: the node's whole memory) over
task pods is per node: every node the job takes must have none of its memory allocated, and
holds all of it (``select.task_node_memory`` with ``PodSet.node_memory_mib`` set at submit by
``job_defaults``).

Probe p124 (2026-12-05, a real 22.05.8): the seed pool's four nodes (128 CPUs, two threads per
core, 1000000 MB; DefMemPerGPU=120000, which a job asking ``--mem`` does not read), blockers
``-w gpuN -n1 --mem=100 --gres=gpu:1``, each test job alone after the cluster settled;
``scontrol -d show job``. In 22.05.8's cons_common ``_verify_node_state`` a job whose per-node
memory is 0 ("all memory") passes over every node with memory allocated, and ``_job_test``
gives it each node's whole memory. Before this, gpupool shared the node's memory out over the
task pods, so ``-n4 --mem=0`` started beside a job holding 100 MB.
"""
from __future__ import annotations

from dataclasses import replace

import pytest

from gpupool.engine.policy_api import make_policy
from gpupool.formats.pool_dir import load_pool
from tests.unit.sbatch_plans import DBD_LIMITS_CONF, GPU_NODES_CONF, run_spaced, slurm_pool, team_accounts, workload
from tests.unit.test_slurm_gpu_walk import _run, node_amounts

WHOLE = 1_000_000
#: 100 MB and a GPU held on gpu01-03; gpu04 has none of its memory allocated
_THREE = {f"gpu0{i}": "--gres=gpu:1" for i in (1, 2, 3)}
#: 100 MB held on every node
_ALL = {f"gpu0{i}": "--gres=gpu:1" for i in (1, 2, 3, 4)}

#: options -> the (GPUs, CPUs, MB) of each node the real job held on idle nodes, in node order
_IDLE = [
    ("-n4 --mem=0", [(0, 4, WHOLE)]),
    ("-n200 --mem=0", [(0, 128, WHOLE), (0, 72, WHOLE)]),
    ("-n4 --gres=gpu:2 --mem=0", [(2, 4, WHOLE)]),
    ("-n2 --gpus-per-task=1 --mem=0", [(2, 2, WHOLE)]),
    ("-n4 --gpus=4 --mem=0", [(4, 4, WHOLE)]),
    ("-n2 --gpus=12 --mem=0", [(8, 2, WHOLE), (4, 2, WHOLE)]),
    ("-n200 --gres=gpu:1 --mem=0", [(1, 128, WHOLE), (1, 72, WHOLE)]),
    ("-n4", [(0, 4, WHOLE)]),
    ("-n200", [(0, 128, WHOLE), (0, 72, WHOLE)]),
]

#: options the real system ran on gpu04 alone, its whole memory, with memory held on gpu01-03
_ON_THE_FREE_NODE = ["-n4 --mem=0", "-n4 --gres=gpu:2 --mem=0", "-N1 --gres=gpu:2 --mem=0",
                     "-n2 --gpus-per-task=1 --mem=0", "-n4"]

#: options that waited (Resources): memory held on gpu01-03 / on every node
_WAIT_THREE = ["-n200 --mem=0", "-n200"]
_WAIT_ALL = ["-n4 --mem=0", "-N1 --gres=gpu:2 --mem=0", "-n4 --gres=gpu:2 --mem=0", "-n4", "-N1 -n4 --mem=0", "-N1 -n4"]


@pytest.fixture(scope="module")
def pool():
    return load_pool("examples/seed-pool")


@pytest.mark.parametrize("opts,want", _IDLE, ids=[o for o, _ in _IDLE])
def test_each_node_holds_its_whole_memory(pool, opts, want):
    job = _run(pool, {}, opts)
    assert job.first_start == 1.0
    assert list(node_amounts(pool, job).values()) == want


@pytest.mark.parametrize("opts", _ON_THE_FREE_NODE)
def test_only_a_node_without_memory_allocated_takes_the_job(pool, opts):
    job = _run(pool, _THREE, opts)
    assert job.first_start == 1.0
    assert set(node_amounts(pool, job)) == {"gpu04"}
    assert node_amounts(pool, job)["gpu04"][2] == WHOLE


@pytest.mark.parametrize("blockers,opts", [(_THREE, o) for o in _WAIT_THREE] + [(_ALL, o) for o in _WAIT_ALL],
                         ids=[f"three {o}" for o in _WAIT_THREE] + [f"all {o}" for o in _WAIT_ALL])
def test_the_job_waits_while_too_few_nodes_have_no_memory_allocated(pool, blockers, opts):
    """The blockers run 300 s: the job starts when they end."""
    job = _run(pool, blockers, opts)
    assert (job.first_start, job.reason) == (300.0, "Resources")


def test_the_request_counts_one_node_of_memory(pool):
    """Pending, a real 22.05.8 showed ``-n200 --mem=0`` as cpu=200,mem=1000000M,node=1."""
    pol = make_policy("slurm", pool)
    wl = pol.resolve_request(replace(workload("j", "-A ml-platform -t 5 -n200 --mem=0", 0.0, 1), user="dave"))
    assert (wl.req_cpu_mem or (sum(ps.cpus_total for ps in wl.pod_sets),
                               sum(ps.memory_total for ps in wl.pod_sets))) == (200, WHOLE)


@pytest.mark.parametrize("blockers,opts,nodes", [(_THREE, "-n200 --mem=0", "2"), (_ALL, "-n4 --mem=0", "1"),
                                                 (_THREE, "-n200", "2")])
def test_squeue_shows_the_nodes_of_the_idle_selection(pool, blockers, opts, nodes):
    """Pending, a real 22.05.8 showed ``-n200 --mem=0`` (and ``-n200``) on 2 nodes in squeue,
    ``-n4 --mem=0`` on 1."""
    from gpupool.report import slurm_views as sv
    from tests.unit.test_slurm_gpu_walk import _blocker

    specs = [(_blocker(n, h), 0.0) for n, h in blockers.items()] + [(opts, 1.0)]
    wls = [replace(workload(f"j{k}", f"-A ml-platform -t 5 {o}", at, k, runtime=300.0), user="dave")
           for k, (o, at) in enumerate(specs, 1)]
    rows = [r for r in sv.squeue_rows(sv.instant(pool, wls, "slurm", 100)) if r["state"] == "PENDING"]
    assert [(r["NODES"], r["NODELIST(REASON)"]) for r in rows] == [(nodes, "(Resources)")]


_LIMITED = "ClusterName=t\n" + DBD_LIMITS_CONF + """\
NodeName=n[01-02] CPUs=16 RealMemory=64000
PartitionName=p Nodes=n[01-02] Default=YES MaxTime=60 State=UP
"""


@pytest.mark.parametrize("opts,state", [("-n20 --mem=0", "PENDING"), ("-n20 --mem=50000", "RUNNING"),
                                        ("-N2 --mem=0", "PENDING")])
def test_the_limits_count_the_memory_of_every_node_taken(tmp_path, opts, state):
    """slurmctld tests the TRES limits again on the selection (``select_nodes`` →
    ``acct_policy_job_runnable_post_select`` with ``job_get_tres_mem`` of the allocation): an
    account with GrpTRES=mem=100000 cannot run ``-n20 --mem=0`` over two 16-CPU 64000 MB nodes
    (128000 MB held), whose request counts one node's; ``-n20 --mem=50000`` holds 100000 and
    runs (from the source, as ``-N2 --mem=0``, which the request already counts whole)."""
    (tmp_path / "accounts.cfg").write_text(team_accounts("mem=100000"))
    engine, _pol = run_spaced(slurm_pool(tmp_path, _LIMITED), [f"-A teamA -t 10 {opts}"], 3, 60)
    job = engine.jobs[1]
    assert job.state == state
    if state == "PENDING":
        assert job.reason == "AssocGrpMemLimit"


def test_def_mem_per_node_is_held_on_every_node_taken(tmp_path):
    """No memory asked under DefMemPerNode=600000: slurmctld stores the default as the job's
    per-node memory, as ``--mem`` (from the source), so ``-n200`` holds 600000 MB on each of its
    two nodes and ``-n4`` takes only a node with 600000 MB free."""
    pool = slurm_pool(tmp_path, GPU_NODES_CONF.format(last=4).replace("DefMemPerGPU=120000", "DefMemPerNode=600000"))
    assert list(node_amounts(pool, _run(pool, {}, "-n200")).values()) == [(0, 128, 600000), (0, 72, 600000)]
    blockers = {f"gpu0{i}": "-c1 --mem=500000" for i in (1, 2, 3)}
    job = _run(pool, blockers, "-n4")
    assert job.first_start == 1.0 and node_amounts(pool, job) == {"gpu04": (0, 4, 600000)}
