"""A ``--nodelist``'s count as sbatch and slurmctld keep it (docs/differential.md, finding 95).

sbatch raises ``--nodes``' least count to the list's hosts before it lowers the counts to the
tasks (``-N1-2 -w gpu01,gpu02`` is ``-N2``, one task a node), and a list without ``--nodes``
sends the list's count as the least and no largest. slurmctld's ``_job_create`` then raises
the job's min_nodes and min_cpus to the hosts, so the request counts them, and a partition
whose MaxNodes is below them leaves select no node count: the job waits with
PartitionNodeLimit and backfill passes over it. Every expectation below is what a real 22.05.8
did on four 16-core 8-GPU nodes (CR_Core_Memory, DefMemPerCPU=100, EnforcePartLimits=NO, x =
gpu[01-02] with MaxNodes=1; probe p157), unless it says otherwise.
"""
from __future__ import annotations

import pytest

from gpupool.errors import InputError

from tests.unit.sbatch_plans import run_spaced, slurm_pool, workload
from tests.unit.test_slurm_split_tasks import CONF as SPLIT_CONF

CONF = SPLIT_CONF + "EnforcePartLimits=NO\nPartitionName=x Nodes=gpu[01-02] MaxTime=60 MaxNodes=1\n"

HOLD_ALL = ["-w gpu01 -c16", "-w gpu02 -c16", "-w gpu03 -c16", "-w gpu04 -c16"]

#: (the job, pending behind four holders, its TRES= as (cpu, mem MB, node))
PENDING = [
    ("-N1-3 -w gpu[01-02]", (2, 200, 2)),  # min_cpus raised to the hosts too
    ("-N1-3 -c2 -w gpu01,gpu02", (2, 200, 2)),
    ("-n3 -w gpu01,gpu02", (3, 300, 2)),  # task pods: node=2
    ("-c4 -w gpu01,gpu02", (8, 800, 2)),  # two tasks, one a node
    ("-N1-2 -c2 -w gpu01,gpu02", (4, 400, 2)),  # -N2
    ("-p x -n2 -w gpu01,gpu02", (2, 200, 2)),
    ("-p x -w gpu01,gpu02 --gres=gpu:1", (2, 200, 2)),
    ("-p x -n2 -w gpu01", (2, 200, 1)),
    ("-n3 -w gpu01,gpu02 --mem=500", (3, 1000, 2)),  # memory per node for both hosts
    ("-N2-4 -w gpu01,gpu03 -c2", (2, 200, 2)),
    ("-p x -N1 -n2 -w gpu01", (2, 200, 1)),
]

#: (the job alone on idle nodes, its CPUs and MB per node as (node index, CPUs, MB), or its
#: state and reason)
IDLE = [
    ("-N1-3 -w gpu[01-02]", [(0, 1, 100), (1, 1, 100), (2, 1, 100)]),
    ("-N1-3 -c2 -w gpu01,gpu02", [(0, 2, 200), (1, 2, 200), (2, 2, 200)]),
    ("-n3 -w gpu01,gpu02", [(0, 2, 200), (1, 1, 100)]),
    ("-c4 -w gpu01,gpu02", [(0, 4, 400), (1, 4, 400)]),
    ("-N1-2 -c2 -w gpu01,gpu02", [(0, 2, 200), (1, 2, 200)]),
    ("-p x -n2 -w gpu01,gpu02", ("PENDING", "PartitionNodeLimit")),
    ("-p x -w gpu01,gpu02 --gres=gpu:1", ("PENDING", "PartitionNodeLimit")),
    ("-p x -n2 -w gpu01", [(0, 2, 200)]),
    ("-n3 -w gpu01,gpu02 --mem=500", [(0, 2, 500), (1, 1, 500)]),
    ("-N2-4 -w gpu01,gpu03 -c2", [(0, 2, 200), (1, 2, 200), (2, 2, 200), (3, 2, 200)]),
]


@pytest.mark.parametrize("opts,want", PENDING, ids=[p[0] for p in PENDING])
def test_a_pending_job_records_the_hosts_as_the_real_system_did(tmp_path, opts, want):
    engine, pol = run_spaced(slurm_pool(tmp_path, CONF), HOLD_ALL + [opts], 1.0, 10)
    job = engine.jobs[len(HOLD_ALL) + 1]
    assert job.state == "PENDING"
    tres = pol.req(job).req_tres
    assert (tres["cpu"], tres["mem"], tres["node"]) == want


@pytest.mark.parametrize("opts,want", IDLE, ids=[p[0] for p in IDLE])
def test_on_idle_nodes_the_job_runs_or_waits_as_the_real_system_did(tmp_path, opts, want):
    # (300 s: ten backfill cycles, which pass over a list beyond MaxNodes as the main pass does)
    engine, _ = run_spaced(slurm_pool(tmp_path, CONF), [opts], 1.0, 300)
    job = engine.jobs[1]
    if isinstance(want, tuple):
        assert (job.state, job.reason) == want
        return
    per_node: dict[int, list[int]] = {}
    for node, _mask, cpu_m, mem in job.placement:
        got = per_node.setdefault(node, [node, 0, 0])
        got[1] += cpu_m // 1000
        got[2] += mem
    assert [tuple(per_node[n]) for n in sorted(per_node)] == want


def test_a_list_beyond_maxnodes_holds_only_its_nodes_back(tmp_path):
    """The listed nodes are withheld from lower jobs after the failed selection, and the
    partition goes on (22.05.8 source, as for any job whose list covers its count)."""
    engine, _ = run_spaced(slurm_pool(tmp_path, CONF), ["-p x -n2 -w gpu01,gpu02", "-n2"], 1.0, 60)
    held, lower = engine.jobs[1], engine.jobs[2]
    assert (held.state, held.reason) == ("PENDING", "PartitionNodeLimit")
    assert lower.state == "RUNNING" and {p[0] for p in lower.placement} == {2}


@pytest.mark.parametrize("opts,count,least", [
    ("-N1-2 -w gpu01,gpu02", 2, None),  # the least raised to the largest: a fixed count
    ("-N1-3 -w gpu[01-02]", 3, 2),
    ("-N2-4 -w gpu01,gpu03", 4, 2),
    ("-N1-3 -n1 -w gpu01,gpu02", 1, None),  # then lowered to the one task, the list trimmed
])
def test_sbatch_raises_the_least_node_count_to_the_list(opts, count, least):
    (ps,) = workload("j", f"-t 5 {opts}", 0.0, 1).pod_sets
    assert (ps.count, ps.min_count, ps.list_count_only) == (count, least, False)


def test_a_list_without_nodes_sends_no_largest_count():
    (ps,) = workload("j", "-t 5 --gpus=3 -w gpu01,gpu02", 0.0, 1).pod_sets
    assert (ps.count, ps.min_count, ps.list_count_only) == (2, None, True)
    (ps,) = workload("j", "-t 5 -N2 --gpus=3 -w gpu01,gpu02", 0.0, 1).pod_sets
    assert ps.list_count_only is False


def test_more_hosts_than_the_largest_count_stay_sbatchs_refusal():
    with pytest.raises(InputError, match=r"invalid number of nodes \(-N 2-1\)"):
        workload("j", "-t 5 -N1 -w gpu01,gpu02", 0.0, 1)
