"""Exclusive task pods (``-n T --exclusive`` with no ``--nodes``; docs/differential.md, finding
109): ``_eval_nodes`` takes whole idle nodes for the tasks as it takes nodes for other jobs,
runs of consecutive nodes first, within the partition's MaxNodes (``select._exclusive_tasks``).

Every expectation is what a real 22.05.8 did (probes p173 and p173b, 2026-12-07) on probe
p162's pool (four 16-core 8-GPU 64000 MB nodes, CR_Core_Memory, DefMemPerCPU=100) with
partitions m over gpu01-04 at MaxNodes=2 and l the same with LLN=YES; each job behind its
holders, submitted 2 s apart. At 46c857a, which took idle nodes in index order, each table's
figure below agreed.
"""
from __future__ import annotations

import pytest

from tests.unit.sbatch_plans import run_spaced, slurm_pool
from tests.unit.test_slurm_contiguous import CONF, _outcome

CONF_M = (CONF.format(w="") + "PartitionName=m Nodes=gpu[01-04] MaxTime=60 MaxNodes=2 State=UP\n"
          + "PartitionName=l Nodes=gpu[01-04] MaxTime=60 MaxNodes=2 LLN=YES State=UP\n")
EX = "--exclusive"
NOT_AVAILABLE = ("REJECTED", "Requested node configuration is not available")


def _whole(*nodes: int, mem: int = 1600) -> list:
    return [(n, 16, mem, 8) for n in nodes]


#: p173b, partition p: 6 of 8 agreed at 46c857a
NO_CAP = [
    # gpu02 held: the run gpu03-04 holds the 20 tasks, gpu01 alone does not
    (["-w gpu02 -c1"], "-n20 " + EX, _whole(2, 3)),
    (["-w gpu02 -c1"], "-n20 --mem=100 " + EX, _whole(2, 3, mem=100)),
    # both runs hold 12: the smaller one
    (["-w gpu02 -c1"], "-n12 " + EX, _whole(0)),
    (["-w gpu03 -c1"], "-n20 " + EX, _whole(0, 1)),
    (["-w gpu02 -c1"], "-n20 --gres=gpu:1 " + EX, _whole(2, 3)),
    (["-w gpu02 -c1"], "-n40 " + EX, _whole(0, 2, 3)),
    (["-w gpu01 -c1", "-w gpu03 -c1"], "-n20 " + EX, _whole(1, 3)),
    (["-w gpu02 -c1"], "-n20 -c2 " + EX, _whole(0, 2, 3)),
]

#: p173, partitions m and l (MaxNodes=2): 9 of 10 agreed at 46c857a
CAPPED = [
    ([], "-p m -n20 " + EX, _whole(0, 1)),
    ([], "-p m -n40 " + EX, NOT_AVAILABLE),
    ([], "-p m -n33 " + EX, NOT_AVAILABLE),
    (["-w gpu01 -c8", "-w gpu02 -c8"], "-p m -n20 " + EX, _whole(2, 3)),
    (["-w gpu02 -c1"], "-p m -n20 " + EX, _whole(2, 3)),
    (["-w gpu02 -c1", "-w gpu03 -c1"], "-p m -n20 " + EX, _whole(0, 3)),
    (["-w gpu02 -c1"], "-p l -n20 " + EX, _whole(0, 2)),  # (LLN: idle nodes by index)
    ([], "-p m -n17 -c2 " + EX, NOT_AVAILABLE),
    ([], "-n40 " + EX, _whole(0, 1, 2)),
    ([], "-p m -n20 --mem=100 " + EX, _whole(0, 1, mem=100)),
]


def test_the_tasks_fill_the_nodes_in_the_order_taken(tmp_path):
    """Each whole node holds as many of the tasks as it has room for, the node taken first
    first: ``-n20 --exclusive`` on gpu03-04 is 16 tasks on gpu03 and 4 on gpu04 (the pods
    after a node's first hold no CPUs of their own)."""
    engine, _ = run_spaced(slurm_pool(tmp_path, CONF_M), ["-w gpu02 -c1", "-n20 " + EX], 2.0, 8.0)
    pods = engine.jobs[2].placement
    assert [p[0] for p in pods].count(2) == 16 and [p[0] for p in pods].count(3) == 4


CONF_C = CONF_M + "PartitionName=c Nodes=gpu[01-04] MaxTime=60 MaxCPUsPerNode=8 State=UP\n"

#: review 157's cases, then probed (p174, the same pool plus partition c at MaxCPUsPerNode=8):
#: 1 of 10 agreed at 13118d0
REVIEWED = [
    # beside a list: the listed node uses up one of MaxNodes' two, and the runs walk from it
    ([], "-p m -n40 -w gpu01 " + EX, NOT_AVAILABLE),
    ([], "-p l -n40 -w gpu01 " + EX, NOT_AVAILABLE),
    (["-w gpu02 -c1"], "-n20 -w gpu04 " + EX, _whole(2, 3)),
    (["-w gpu02 -c1"], "-n20 -w gpu01 " + EX, _whole(0, 2)),
    # GPUs per job: the walk counts the job's 15 GPUs on whole nodes, not tasks of 5 each
    ([], "-n3 --gpus=15 " + EX, _whole(0, 1)),
    ([], "-p m -n3 --gpus=15 " + EX, _whole(0, 1)),
    # memory per node: the nodes offer CPUs, not whole tasks of 6 (32 CPUs for 30)
    ([], "-n5 -c6 --mem=100 " + EX, _whole(0, 1, mem=100)),
    ([], "-p m -n5 -c6 --mem=100 " + EX, _whole(0, 1, mem=100)),
    # MaxCPUsPerNode below a node's CPUs: no exclusive job
    ([], "-p c -n4 " + EX, NOT_AVAILABLE),
    ([], "-p c -c1 " + EX, NOT_AVAILABLE),
]


def test_every_node_taken_holds_a_task(tmp_path):
    """The tasks are dealt a task a node first (``dist_tasks``), so a node the walk took for
    its GPUs holds one: ``-n3 --gpus=15 --exclusive`` is two tasks on gpu01 and one on gpu02."""
    engine, _ = run_spaced(slurm_pool(tmp_path, CONF_M), ["-n3 --gpus=15 " + EX], 2.0, 6.0)
    assert sorted(p[0] for p in engine.jobs[1].placement) == [0, 0, 1]


#: review 158's cases, then probed (p174b, the same pool): 0 of 7 agreed at bdd7b3f (two of
#: them stopped the run: a fitting node the cap refused)
REVIEWED_AGAIN = [
    # LLN sizes whole nodes in CPUs and counts GPUs per job too
    ([], "-p l -n5 -c6 --mem=100 " + EX, _whole(0, 1, mem=100)),
    ([], "-p l -n3 --gpus=15 " + EX, _whole(0, 1)),
    (["-w gpu01 -c1"], "-p l -n3 --gpus=15 " + EX, _whole(1, 2)),
    # beside a list the listed node's GPUs count toward the job's
    ([], "-n3 --gpus=15 -w gpu01 " + EX, _whole(0, 1)),
    ([], "-p m -n3 --gpus=15 -w gpu01 " + EX, _whole(0, 1)),
    # MaxCPUsPerNode below a node's CPUs, for one pod per node and a GPU walk
    ([], "-p c -N2 " + EX, NOT_AVAILABLE),
    ([], "-p c --gpus=12 " + EX, NOT_AVAILABLE),
]


#: review 159's case, then probed (p175): ``--contiguous`` beside exclusive task pods, which the
#: reader had not marked; 5 of 7 agreed at 99044a7
CONTIGUOUS = [
    (["-w gpu02 -c1", "-w gpu04 -c1"], "-n20 --contiguous " + EX, ("PENDING", "Resources")),
    (["-w gpu04 -c1"], "-n20 --contiguous " + EX, _whole(0, 1)),
    (["-w gpu02 -c1"], "-n20 --contiguous " + EX, _whole(2, 3)),
    (["-w gpu02 -c1"], "-n12 --contiguous " + EX, _whole(0)),
    (["-w gpu02 -c1", "-w gpu04 -c1"], "-n12 --contiguous " + EX, _whole(0)),
    (["-w gpu02 -c1", "-w gpu04 -c1"], "-n3 --gpus=15 --contiguous " + EX, ("PENDING", "Resources")),
    # (LLN's walk takes no runs)
    (["-w gpu02 -c1", "-w gpu04 -c1"], "-p l -n20 --contiguous " + EX, _whole(0, 2)),
]
ALL = NO_CAP + CAPPED + REVIEWED + REVIEWED_AGAIN + CONTIGUOUS


@pytest.mark.parametrize("holders,opts,want", ALL, ids=[f"{c[1]} behind {c[0]}" for c in ALL])
def test_exclusive_task_pods_as_on_a_real_slurm(tmp_path, holders, opts, want):
    engine, _ = run_spaced(slurm_pool(tmp_path, CONF_C), holders + [opts], 2.0, 2.0 * len(holders) + 6.0)
    assert _outcome(engine.jobs[len(holders) + 1]) == want


def test_a_cap_that_covers_the_smaller_nodes_leaves_them_to_exclusive_jobs(tmp_path):
    """With gpu01 of 16 CPUs and gpu02-04 of 8 under MaxCPUsPerNode=8, exclusive jobs run on
    the 8-CPU nodes and never on gpu01 (``_allocate_sc``; review 158, from the source)."""
    small = "CPUs=8 Boards=1 SocketsPerBoard=1 CoresPerSocket=8 ThreadsPerCore=1 RealMemory=64000 Gres=gpu:8"
    lines = [ln for ln in CONF_C.splitlines() if not ln.startswith(("NodeName=gpu02", "NodeName=gpu[03-04]"))]
    conf = "\n".join(lines + ["NodeName=gpu[02-04] " + small]) + "\n"
    for k, (opts, want) in enumerate([("-p c -c1 " + EX, [1]), ("-p c -N2 " + EX, [1, 2]),
                                       ("-p c --gpus=12 " + EX, [1, 2]), ("-p c -n12 " + EX, [1, 2])]):
        path = tmp_path / str(k)
        path.mkdir()
        engine, _ = run_spaced(slurm_pool(path, conf), [opts], 2.0, 6.0)
        assert sorted({p[0] for p in engine.jobs[1].placement}) == want, opts
