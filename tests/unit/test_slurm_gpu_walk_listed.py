"""``-n T`` beside GPUs per node and a ``--nodelist``, no ``--nodes``: sbatch's node count is
the list's, so select takes the listed nodes first, each holding all the tasks it can but one
for each listed node still to come, then more nodes with G free GPUs while tasks are left, up
the run of a listed node, then down (``split_tasks.walk_listed``). Every expectation is what a
real 22.05.8 did on four 16-core 8-GPU nodes, DefMemPerCPU=100 (probe p153,
docs/differential.md finding 94)."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.sbatch_plans import run_spaced, slurm_pool, workload
from tests.unit.test_slurm_range_request import ACCOUNTS, _limited
from tests.unit.test_slurm_split_tasks import CONF, _ids

#: (holders, the job, its pods as (node index, CPUs, MB, GPUs))
CASES = [
    ([], "-n4 --gres=gpu:1 -w gpu01", [(0, 4, 400, 1)]),
    ([], "-n20 --gres=gpu:1 -w gpu02", [(1, 16, 1600, 1), (2, 4, 400, 1)]),
    ([], "-n4 --gres=gpu:1 -w gpu01,gpu02", [(0, 3, 300, 1), (1, 1, 100, 1)]),
    (["-w gpu01 -c14"], "-n20 --gres=gpu:1 -w gpu03", [(2, 16, 1600, 1), (3, 4, 400, 1)]),
    (["-w gpu02 -c14"], "-n4 --gres=gpu:2 -w gpu02", [(1, 2, 200, 2), (2, 2, 200, 2)]),
]


@pytest.mark.parametrize("holders,job,expected", CASES, ids=_ids(CASES))
def test_the_walk_starts_from_the_listed_nodes(tmp_path: Path, holders, job, expected) -> None:
    engine, _ = run_spaced(slurm_pool(tmp_path, CONF), holders + [job], 2.0, 2.0 * len(holders) + 10)
    last = engine.jobs[len(holders) + 1]
    assert last.state == "RUNNING"
    assert sorted((n, cpu // 1000, mem, mask.bit_count()) for n, mask, cpu, mem in last.placement) == expected


def test_other_policies_see_one_pod_of_the_tasks() -> None:
    ps = workload("J", "-n4 --gres=gpu:1 -w gpu01,gpu02", 0.0, 1).pod_sets[0]
    assert (ps.count, ps.one_per_node, ps.cpu_m, ps.gpus, ps.walk_gpus) == (1, False, 4000, 1, True)


@pytest.mark.parametrize("epl", ["ALL", "NO"])
def test_a_list_that_meets_min_nodes_is_walked_there(tmp_path: Path, epl: str) -> None:
    """From the source, found by a review: sbatch sends the list's count as the least node
    count, which a MinNodes=2 partition accepts, so the job runs (as ``-w gpu01,gpu02`` did in
    probe p153) and its request counts the two nodes."""
    conf = CONF + f"EnforcePartLimits={epl}\nPartitionName=m Nodes=gpu[03-04] MinNodes=2 MaxTime=60\n"
    engine, pol = run_spaced(slurm_pool(tmp_path, conf), ["-p m -n4 --gres=gpu:1 -w gpu03,gpu04"], 1.0, 8)
    job = engine.jobs[1]
    assert sorted((n, cpu // 1000) for n, _m, cpu, _mem in job.placement) == [(2, 3), (3, 1)]
    assert pol.req(job).req_tres["node"] == 2


def test_listed_nodes_need_the_free_memory_gpu_pods_need(tmp_path: Path) -> None:
    """Found by a review: under DefMemPerGPU=20000 a GPU pod needs that much free (finding 44),
    listed or not; gpu01 has 14000 MB free, so the job waits."""
    conf = CONF.replace("DefMemPerCPU=100", "DefMemPerCPU=100\nDefMemPerGPU=20000")
    engine, _ = run_spaced(slurm_pool(tmp_path, conf), ["-w gpu01 -c1 --mem=50000", "-n4 --gres=gpu:1 --mem=1000 -w gpu01"],
                           1.0, 8)
    assert (engine.jobs[2].state, engine.jobs[2].reason) == ("PENDING", "Resources")


def test_more_listed_nodes_than_max_nodes_are_not_placed(tmp_path: Path) -> None:
    """Found by a review (source, not probed): a list of two nodes in a MaxNodes=1 partition
    under EnforcePartLimits=NO is never placed on both."""
    conf = CONF + "EnforcePartLimits=NO\nPartitionName=x Nodes=gpu[01-02] MaxNodes=1 MaxTime=60\n"
    engine, _ = run_spaced(slurm_pool(tmp_path, conf), ["-p x -n4 --gres=gpu:1 -w gpu01,gpu02"], 1.0, 8)
    assert engine.jobs[1].state == "PENDING"


def test_a_list_beyond_max_nodes_waits_without_holding_the_partition(tmp_path: Path) -> None:
    """From the source, found by reviews: with no largest count, select's node counts conflict
    (the list's 2 above MaxNodes=1), the job waits with PartitionNodeLimit, its listed nodes
    are withheld from lower jobs and the main scheduler goes on with the partition's other
    nodes at once."""
    conf = CONF + "EnforcePartLimits=NO\nPartitionName=x Nodes=gpu[01-03] MaxNodes=1 MaxTime=60\n"
    engine, _ = run_spaced(slurm_pool(tmp_path, conf), ["-p x -n4 --gres=gpu:1 -w gpu01,gpu02", "-p x -c1 --nice=100",
                                                        "-p x -c1 --nice=100"], 1.0, 8)
    assert (engine.jobs[1].state, engine.jobs[1].reason) == ("PENDING", "PartitionNodeLimit")
    assert [(engine.jobs[k].start, engine.jobs[k].placement[0][0]) for k in (2, 3)] == [(1.0, 2), (2.0, 2)]


def test_such_a_job_keeps_the_reasons_of_limits_tested_before_the_selection(tmp_path: Path) -> None:
    """From the source, found by a review: the QOS limits come before select's node counts."""
    conf = CONF + "EnforcePartLimits=NO\nPartitionName=x Nodes=gpu[01-02] MaxNodes=1 MaxTime=60\n"
    job = _limited(tmp_path, ACCOUNTS.replace("MaxTRESPerJob=node=2", "MaxTRESPerJob=cpu=2"), conf,
                   "-p x -n4 --gres=gpu:1 -w gpu01,gpu02")
    assert (job.state, job.reason) == ("PENDING", "QOSMaxCpuPerJobLimit")


@pytest.mark.parametrize("opts,mem", [("-n4 --gres=gpu:2 --mem=1000 -w gpu01,gpu02", 2000),
                                      ("-n4 --gres=gpu:2 --mem-per-gpu=1000 -w gpu01,gpu02", 4000),
                                      ("-n4 --gres=gpu:2 --mem-per-cpu=100 -w gpu01,gpu02", 400)])
def test_a_pending_listed_walk_records_memory_for_the_listed_nodes(tmp_path: Path, opts: str, mem: int) -> None:
    """From the source, found by a review (``job_get_tres_mem``): memory per node, or per GPU of
    a node's G GPUs, for each of the list's nodes; per CPU for the tasks."""
    engine, pol = run_spaced(slurm_pool(tmp_path, CONF), ["-w gpu01 -c16", opts], 1.0, 8)
    job = engine.jobs[2]
    assert job.state == "PENDING"
    assert (pol.req(job).req_tres["node"], pol.req(job).req_tres["mem"]) == (2, mem)
