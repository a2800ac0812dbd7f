"""``--contiguous`` on a pod-a-node shape (docs/differential.md, finding 100): cons_tres takes
the nodes from one run of consecutive usable nodes, whatever their weights, and leaves the job
waiting where the run it would choose cannot hold it (``eval_nodes.pick_nodes``,
``PodSet.contiguous``).

Every expectation is what a real 22.05.8 did (probe p162, 2026-12-06) on four 16-core 8-GPU
64000 MB nodes (CR_Core_Memory, DefMemPerCPU=100), partition p over all four and x over gpu01
and gpu03; each job behind its holders, submitted 2 s apart. At the commit before this finding
gpupool placed the jobs as without ``--contiguous`` (11 of the 21 answers agreed; the two a
list with gaps gives are not modelled, see ``sbatch._contiguous``).
"""
from __future__ import annotations

import pytest

from gpupool.engine.nodes import NodeTable
from gpupool.formats.sbatch import parse_sbatch_text
from gpupool.policy.slurm.select import Free, PartNodes, place
from tests.unit.sbatch_plans import run_spaced, script, slurm_pool, workload
from tests.unit.test_slurm_def_cpu_per_gpu import BASE
from tests.unit.test_slurm_gpu_walk_range_listed import per_node

NODE = "CPUs=16 Boards=1 SocketsPerBoard=1 CoresPerSocket=16 ThreadsPerCore=1 RealMemory=64000 Gres=gpu:8"
#: probe p162's slurm.conf: p160's header, gpu02 on a line of its own; ``{w}``: its weight
#: (Weight=2 in the second set)
CONF = (BASE.split("NodeName=")[0].replace("ClusterName=p160", "ClusterName=p162").format(extra="DefMemPerCPU=100")
        + f"NodeName=gpu01 {NODE}\nNodeName=gpu02 {NODE} {{w}}\nNodeName=gpu[03-04] {NODE}\n"
        + "PartitionName=p Nodes=gpu[01-04] Default=YES MaxTime=60 State=UP\n"
        + "PartitionName=x Nodes=gpu01,gpu03 MaxTime=60 State=UP\n")
EX = "--exclusive"
ONE = (1, 100, 0)  # a node's CPUs, MB and GPUs for these one-CPU pods


def _on(*nodes: int, each=ONE) -> list:
    return [(n, *each) for n in nodes]


#: (holders, the job, its (node index, CPUs, MB, GPUs) per node or its state and reason)
SAME_WEIGHTS = [
    ([], "-N2 --contiguous", _on(0, 1)),
    (["-w gpu02 " + EX], "-N2 --contiguous", _on(2, 3)),
    (["-w gpu02 " + EX, "-w gpu04 " + EX], "-N2 --contiguous", ("PENDING", "Resources")),
    (["-w gpu02 " + EX, "-w gpu04 " + EX], "-N2", _on(0, 2)),  # (without it)
    (["-w gpu03 " + EX], "-N3 --contiguous", ("PENDING", "Resources")),
    (["-w gpu01 -c14", "-w gpu02 -c14"], "-N2 --contiguous", _on(0, 1)),
    # the larger run (gpu04, one node) beats gpu01-02, which hold the job: no start
    (["-w gpu01 -c15", "-w gpu02 -c15", "-w gpu03 " + EX], "-N2 --contiguous", ("PENDING", "Resources")),
    (["-w gpu01 -c15", "-w gpu02 -c15", "-w gpu03 " + EX], "-N2", _on(0, 3)),  # (without it)
    ([], "-p x -N2 --contiguous", ("REJECTED", "Requested node configuration is not available")),
    ([], "-N2 --contiguous -w gpu02", _on(1, 2)),
    (["-w gpu02 " + EX], "-N2 --contiguous --gres=gpu:8", _on(2, 3, each=(1, 100, 8))),
    (["-w gpu02 " + EX], "-N2 --contiguous -w gpu01", ("PENDING", "Resources")),
    (["-w gpu02 -c16"], "-N2 --contiguous -c2", _on(2, 3, each=(2, 200, 0))),
    ([], "-N2-3 --contiguous", _on(0, 1, 2)),
    # once the least count is held in one run, another run adds the third node
    (["-w gpu03 " + EX], "-N2-3 --contiguous", _on(0, 1, 3)),
]

#: gpu02 at Weight=2: the run gpu01-04 ignores it (without --contiguous the lighter nodes win)
GPU02_HEAVIER = [
    ([], "-N3 --contiguous", _on(0, 1, 2)),
    ([], "-N2 --contiguous", _on(0, 1)),
    ([], "-N3", _on(0, 2, 3)),  # (without it)
    (["-w gpu04 " + EX], "-N2 --contiguous", _on(0, 1)),
]


def _outcome(job):
    return per_node(job) if job.state == "RUNNING" else (job.state, job.reason)


@pytest.mark.parametrize("holders,opts,want", SAME_WEIGHTS, ids=[f"{c[1]} behind {c[0]}" for c in SAME_WEIGHTS])
def test_contiguous_nodes_as_on_a_real_slurm(tmp_path, holders, opts, want):
    engine, _ = run_spaced(slurm_pool(tmp_path, CONF.format(w="")), holders + [opts], 2.0, 2.0 * len(holders) + 6.0)
    assert _outcome(engine.jobs[len(holders) + 1]) == want


@pytest.mark.parametrize("holders,opts,want", GPU02_HEAVIER, ids=[f"{c[1]} behind {c[0]}" for c in GPU02_HEAVIER])
def test_contiguous_nodes_ignore_weights_as_on_a_real_slurm(tmp_path, holders, opts, want):
    engine, _ = run_spaced(slurm_pool(tmp_path, CONF.format(w="Weight=2")), holders + [opts], 2.0,
                           2.0 * len(holders) + 6.0)
    assert _outcome(engine.jobs[len(holders) + 1]) == want


@pytest.mark.parametrize("opts", ["-N2 --contiguous -w gpu01,gpu03", "--contiguous -w gpu01,gpu03",
                                  "-N2 --contiguous --gpus=4", "--contiguous --gpus=4",
                                  "-N2 --contiguous --ntasks-per-node=2"])
def test_shapes_not_modelled_keep_contiguous_as_read(opts):
    """A list of several hosts (slurmctld fills its gaps in node order at submit: a real
    22.05.8 ran ``--contiguous -w gpu01,gpu03`` on gpu01-03 and refused ``-N2`` beside it),
    GPUs per job and task shapes: the pod set is not marked, and the option stays listed as
    read but not modelled."""
    job = parse_sbatch_text(script(opts), "job.sbatch")
    assert ("contiguous", None) in job.not_modelled
    assert not any(ps.contiguous for ps in workload("j", opts, 0.0, 1).pod_sets)


def test_a_pod_a_node_shape_is_marked():
    assert all(ps.contiguous for ps in workload("j", "-N2 --contiguous -w gpu02", 0.0, 1).pod_sets)
    assert not any(ps.contiguous for ps in workload("j", "-N2", 0.0, 1).pod_sets)


def test_contiguous_beside_bf_busy_nodes_skips_the_busy_first_pick(tmp_path):
    """cons_tres's ``_eval_nodes`` takes bf_busy_nodes' busy-first pick only without
    ``--contiguous`` (source): a later start is planned on a run of consecutive nodes."""
    free = Free(NodeTable(slurm_pool(tmp_path, CONF.format(w=""))))
    busy = 1 << 3  # gpu04 busy now
    assert [p[0] for p in place(workload("x", "-N2", 0.0, 1), (0, 1, 2, 3), free, busy=busy)] == [3, 0]
    assert [p[0] for p in place(workload("y", "-N2 --contiguous", 0.0, 2), (0, 1, 2, 3), free, busy=busy)] == [0, 1]
    # a task shape too (the test at ``_eval_nodes``' top reads the option whatever the shape;
    # found by a second review)
    assert [p[0] for p in place(workload("z", "-n1 --contiguous", 0.0, 3), (0, 1, 2, 3), free, busy=busy)] == [0]
    assert [p[0] for p in place(workload("z", "-n1", 0.0, 4), (0, 1, 2, 3), free, busy=busy)] == [3]


# --- from the 22.05.8 source, not probed (found by a read-only review of finding 100) -------

MIN3 = "PartitionName=m Nodes=gpu[01-04] MinNodes=3 MaxTime=60 State=UP\n"


@pytest.mark.parametrize("holders,opts,want", [
    # a range's run holds what is left with the least count's CPUs (``min_cpus``), not the
    # largest count's: 2 × 16 CPUs in gpu01-02, then gpu04 added
    (["-w gpu03 " + EX], "-N2-3 -c16 --contiguous", _on(0, 1, 3, each=(16, 1600, 0))),
    (["-w gpu02 " + EX], "-N2-3 -c16 --contiguous", _on(0, 2, 3, each=(16, 1600, 0))),
    (["-w gpu01 -c15", "-w gpu02 -c15", "-w gpu03 " + EX, "-w gpu04 -c15"], "-N2-3 --contiguous", _on(0, 1, 3)),
    ([], "-p x -N1-2 -c16 --contiguous", _on(0, 2, each=(16, 1600, 0))),
    # task pods MinNodes raises to three nodes keep the option: no run of three, waiting
    (["-p p -w gpu03 " + EX], "-p m --contiguous", ("PENDING", "Resources")),
    (["-p p -w gpu03 " + EX], "-p m -n2 --contiguous", ("PENDING", "Resources")),
    ([], "-p m --contiguous", _on(0, 1, 2)),
])
def test_ranges_and_raised_shapes(tmp_path, holders, opts, want):
    """Found by a read-only review of finding 100 (source, not probed)."""
    engine, _ = run_spaced(slurm_pool(tmp_path, CONF.format(w="") + MIN3), holders + [opts], 2.0,
                           2.0 * len(holders) + 6.0)
    assert _outcome(engine.jobs[len(holders) + 1]) == want


def test_preemption_frees_victims_one_by_one_for_a_contiguous_job(tmp_path):
    """Freeing more can turn a contiguous fit into none, so the victims are added one at a
    time until the job fits (cons_tres's ``_run_now``), not found by bisection: with gpu01 at
    one free CPU, freeing the low job on gpu02 makes the run gpu01-02; freeing gpu04 as well
    would make the larger run gpu04 win and hold nothing (found by a review; it waited)."""
    conf = CONF.format(w="").replace(
        "PartitionName=p Nodes=gpu[01-04] Default=YES MaxTime=60 State=UP",
        "PartitionName=lo Nodes=gpu[01-04] Default=YES MaxTime=60 State=UP PriorityTier=1\n"
        "PartitionName=hi Nodes=gpu[01-04] MaxTime=60 State=UP PriorityTier=2").replace(
        "PriorityType=priority/basic", "PriorityType=priority/basic\nPreemptType=preempt/partition_prio\nPreemptMode=CANCEL")
    jobs = ["-p hi -w gpu01 -c15", "-p hi -w gpu02 -c15", "-p hi -w gpu03 " + EX,
            "-p lo -w gpu02 -c1", "-p lo -w gpu04 " + EX, "-p hi -N2 --contiguous"]
    engine, _ = run_spaced(slurm_pool(tmp_path, conf), jobs, 2.0, 30.0)
    assert [engine.jobs[k].state for k in (4, 5)] == ["PREEMPTED", "RUNNING"]
    assert _outcome(engine.jobs[6]) == _on(0, 1)


def test_contiguous_in_a_least_loaded_partition_skips_the_busy_first_pick_too(tmp_path):
    """``_eval_nodes`` tests bf_busy_nodes (with ``--contiguous`` skipped) before LLN: beside a
    required node a contiguous job's other nodes come in LLN's order, not busy-first (found by
    a third review: gpu04, busy, was taken)."""
    free = Free(NodeTable(slurm_pool(tmp_path, CONF.format(w=""))))
    lln = PartNodes((0, 1, 2, 3), least_loaded=True)
    busy = 1 << 3
    assert [p[0] for p in place(workload("x", "-N2 --contiguous -w gpu01", 0.0, 1), lln, free, busy=busy)] == [0, 1]
    assert [p[0] for p in place(workload("y", "-N2 -w gpu01", 0.0, 2), lln, free, busy=busy)] == [0, 3]
