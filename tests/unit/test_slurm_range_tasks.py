"""``--nodes=A-B --ntasks=T`` (CPU tasks, A < B): select/cons_tres takes up to B nodes, each
leaving a task for each node still to come up to A only, a node taken once the tasks are
placed offering one task, and deals the tasks out over what the nodes offer; with
``--exclusive`` each node taken is whole and gives all its CPUs
(``gpupool/policy/slurm/split_tasks.py``, ``eval_nodes.pick_nodes``' ``least`` and ``whole``).

Every expectation is what a real 22.05.8 did with the same holders and submission on four
16-core 8-GPU 64000 MB nodes, DefMemPerCPU=100 (probes p143-p145 and p148, docs/differential.md finding 89;
``tests/differential/test_real_slurm_split_tasks.py`` runs some of them on both)."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.sbatch_plans import run_spaced, slurm_pool, workload
from tests.unit.test_slurm_split_tasks import CONF, IDLE, ONE_FREE_ON_01_THREE_ON_03, TWO_FREE_ON_01_02, _ids, _pods

EIGHT_FREE_ON_EACH = ["-w gpu01 -c8", "-w gpu02 -c8", "-w gpu03 -c8", "-w gpu04 -c8"]
FOUR_TWELVE_NONE_SIXTEEN = ["-w gpu01 -c12", "-w gpu02 -c4", "-w gpu03 -c16"]

#: (holders, the job, its pods as (node index, CPUs, MB) or its state)
CASES = [
    (IDLE, "-N1-2 -n20", [(0, 16, 1600), (1, 4, 400)]),
    # B nodes where they are free: a node taken once the tasks are placed offers one task,
    # and the deal gives each node one before the first takes the rest
    (IDLE, "-N1-2 -n8", [(0, 7, 700), (1, 1, 100)]),
    (IDLE, "-N2-3 -n8", [(0, 6, 600), (1, 1, 100), (2, 1, 100)]),
    (IDLE, "-N2-4 -n40", [(0, 16, 1600), (1, 15, 1500), (2, 8, 800), (3, 1, 100)]),
    (IDLE, "-N1-2 -n4 -c8", [(0, 16, 1600), (1, 16, 1600)]),
    (IDLE, "-N1-3 -n10 -c4", [(0, 16, 1600), (1, 16, 1600), (2, 8, 800)]),
    (IDLE, "-N1-2 -n33", "REJECTED"),
    (IDLE, "-N2-3 -n2", [(0, 1, 100), (1, 1, 100)]),  # (sbatch lowers the range to -N2)
    (IDLE, "-N1-2 -n20 --mem-per-cpu=3500", [(0, 16, 56000), (1, 4, 14000)]),
    (IDLE, "-N1-2 -n20 -w gpu03", [(2, 16, 1600), (3, 4, 400)]),
    # the last node the range allows must hold all that is left: gpu02 (2 free) is passed
    (TWO_FREE_ON_01_02, "-N1-2 -n6", [(0, 2, 200), (2, 4, 400)]),
    (TWO_FREE_ON_01_02, "-N2-3 -n6", [(0, 2, 200), (1, 2, 200), (2, 2, 200)]),
    (TWO_FREE_ON_01_02, "-N1-3 -n20", [(0, 2, 200), (1, 2, 200), (2, 16, 1600)]),
    (EIGHT_FREE_ON_EACH, "-N1-2 -n12", [(0, 8, 800), (1, 4, 400)]),
    (EIGHT_FREE_ON_EACH, "-N1-2 -n20", "PENDING"),
    (EIGHT_FREE_ON_EACH, "-N1-3 -n20", [(0, 8, 800), (1, 8, 800), (2, 4, 400)]),
    # the run gpu01-02 holds the tasks; the walk goes on to gpu04's run for the third node
    (FOUR_TWELVE_NONE_SIXTEEN, "-N1-3 -n14", [(0, 4, 400), (1, 9, 900), (3, 1, 100)]),
    (FOUR_TWELVE_NONE_SIXTEEN, "-N2-3 -n14", [(0, 4, 400), (1, 9, 900), (3, 1, 100)]),
    (ONE_FREE_ON_01_THREE_ON_03, "-N2-3 -n6", [(0, 1, 100), (1, 4, 400), (2, 1, 100)]),
    # --exclusive: whole idle nodes, B where there are, A at least whose CPUs hold the tasks
    # (probe p144; memory: DefMemPerCPU for each of the node's CPUs)
    (IDLE, "-N1-2 -n20 --exclusive", [(0, 16, 1600), (1, 16, 1600)]),
    (IDLE, "-N1-2 -n8 --exclusive", [(0, 16, 1600), (1, 16, 1600)]),
    (IDLE, "-N2-3 -n8 --exclusive", [(0, 16, 1600), (1, 16, 1600), (2, 16, 1600)]),
    (IDLE, "-N1-3 -n20 --exclusive", [(0, 16, 1600), (1, 16, 1600), (2, 16, 1600)]),
    (IDLE, "-N1-3 -n40 --exclusive", [(0, 16, 1600), (1, 16, 1600), (2, 16, 1600)]),
    (IDLE, "-N1-2 -n4 -c8 --exclusive", [(0, 16, 1600), (1, 16, 1600)]),
    (["-w gpu01 -c1"], "-N1-2 -n8 --exclusive", [(1, 16, 1600), (2, 16, 1600)]),
    (["-w gpu01 -c1"], "-N1-3 -n8 --exclusive", [(1, 16, 1600), (2, 16, 1600), (3, 16, 1600)]),
    (["-w gpu01 -c1", "-w gpu03 -c1"], "-N1-3 -n20 --exclusive", [(1, 16, 1600), (3, 16, 1600)]),
    (EIGHT_FREE_ON_EACH, "-N1-2 -n8 --exclusive", "PENDING"),
    (["-w gpu01 -c1", "-w gpu02 -c1", "-w gpu03 -c1"], "-N1-2 -n8 --exclusive", [(3, 16, 1600)]),
    (["-w gpu01 -c1", "-w gpu02 -c1", "-w gpu03 -c1"], "-N1-2 -n20 --exclusive", "PENDING"),
]


#: with GPUs (probe p145): (holders, the job, its pods as (node index, CPUs, MB, GPUs) or its
#: state). GPUs per node walk as CPU tasks do, G on each node taken; GPUs per task make the
#: job's GPU count (gres_per_job): A nodes to take, more while the tasks are not placed, B at
#: most, the GPUs following the tasks
GPU_CASES = [
    (IDLE, "-N1-2 -n8 --gres=gpu:1", [(0, 7, 700, 1), (1, 1, 100, 1)]),
    (IDLE, "-N1-2 -n20 --gres=gpu:2", [(0, 16, 1600, 2), (1, 4, 400, 2)]),
    (IDLE, "-N2-3 -n8 --gpus-per-node=1", [(0, 6, 600, 1), (1, 1, 100, 1), (2, 1, 100, 1)]),
    (["-w gpu01 -c1 --gres=gpu:7"], "-N1-2 -n6 --gres=gpu:2", [(1, 5, 500, 2), (2, 1, 100, 2)]),
    (TWO_FREE_ON_01_02, "-N1-2 -n6 --gres=gpu:1", [(0, 2, 200, 1), (2, 4, 400, 1)]),
    (IDLE, "-N1-2 -n20 --gres=gpu:1 --exclusive", [(0, 16, 1600, 8), (1, 16, 1600, 8)]),
    (IDLE, "-N1-2 -n8 --gpus-per-task=1", [(0, 8, 800, 8)]),
    (IDLE, "-N1-2 -n12 --gpus-per-task=1", [(0, 8, 800, 8), (1, 4, 400, 4)]),
    (IDLE, "-N2-3 -n6 --gpus-per-task=1", [(0, 5, 500, 5), (1, 1, 100, 1)]),
    (IDLE, "-N1-3 -n20 --gpus-per-task=1", [(0, 8, 800, 8), (1, 8, 800, 8), (2, 4, 400, 4)]),
    (IDLE, "-N1-2 -n20 --gpus-per-task=1", "REJECTED"),
    (["-w gpu01 -c1 --gres=gpu:6"], "-N1-2 -n6 --gpus-per-task=1", [(1, 6, 600, 6)]),
]


def _held(job) -> list[tuple[int, int, int]]:
    """(node index, CPUs, MB) of each pod of ``job``, in order."""
    return sorted((n, cpu // 1000, mem) for n, _m, cpu, mem in job.placement)


@pytest.mark.parametrize("holders,job,expected", CASES, ids=_ids(CASES))
def test_range_tasks_are_placed_as_a_real_slurm_placed_them(tmp_path: Path, holders, job, expected) -> None:
    assert _pods(tmp_path, holders, job) == expected


@pytest.mark.parametrize("holders,job,expected", GPU_CASES, ids=_ids(GPU_CASES))
def test_range_tasks_with_gpus_are_placed_as_a_real_slurm_placed_them(tmp_path: Path, holders, job,
                                                                       expected) -> None:
    assert _pods(tmp_path, holders, job, gpus=True) == expected


#: MaxMemPerCPU=4000 with --mem-per-cpu above it (probe p148): the CPUs per task raised, a node's
#: least take one CPU, the tasks dealt one to each node first (the last node holds one CPU of
#: a two-CPU task), memory per CPU on the CPUs held
RAISED = [
    ("-N2 -n6 --mem-per-cpu=8000", [(0, 10, 40000), (1, 1, 4000)]),
    ("-N1-2 -n12 --mem-per-cpu=8000", [(0, 16, 64000), (1, 8, 32000)]),
    ("-N1-2 -n6 --mem-per-cpu=8000", [(0, 10, 40000), (1, 1, 4000)]),
    ("-N2 -n3 --mem-per-cpu=9000", [(0, 6, 18000), (1, 1, 3000)]),
    ("-N2-3 -n8 --mem-per-cpu=8000", [(0, 12, 48000), (1, 1, 4000), (2, 1, 4000)]),
    ("-N2 -n6 -c2 --mem-per-cpu=8000", [(0, 16, 64000), (1, 8, 32000)]),
]


@pytest.mark.parametrize("job,expected", RAISED, ids=[r[0] for r in RAISED])
def test_tasks_whose_cpus_max_mem_per_cpu_raised(tmp_path: Path, job: str, expected) -> None:
    conf = CONF.replace("DefMemPerCPU=100\n", "DefMemPerCPU=100\nMaxMemPerCPU=4000\n")
    engine, _ = run_spaced(slurm_pool(tmp_path, conf), [job], 2.0, 10)
    assert _held(engine.jobs[1]) == expected


#: from the source, not probed (a review's reading of ``can_job_run_on_node`` and
#: ``_cpus_to_use``): (holders, the job, its pods) at MaxMemPerCPU=4000, 2 CPUs a raised task
RAISED_SOURCE = [
    (["-w gpu01 -c11", "-w gpu02 -c11", "-w gpu03 -c11", "-w gpu04 -c11"], "-N2 -n4 --mem-per-cpu=8000",
     [(0, 4, 16000), (1, 4, 16000)]),  # 5 free CPUs offer two whole tasks
    (["-w gpu01 -c11"], "-N2 -n6 --mem-per-cpu=8000", [(0, 4, 16000), (1, 8, 32000)]),
    (["-w gpu01 -c15"], "-N1-2 -n6 --mem-per-cpu=8000", [(1, 10, 40000), (2, 1, 4000)]),  # 1 CPU: no task
    (IDLE, "-N2 -n3 -c2 --mem-per-cpu=8000", [(0, 8, 32000), (1, 2, 8000)]),  # pn_min_cpus 2
]


@pytest.mark.parametrize("holders,job,expected", RAISED_SOURCE, ids=_ids(RAISED_SOURCE))
def test_raised_tasks_from_the_source(tmp_path: Path, holders, job: str, expected) -> None:
    conf = CONF.replace("DefMemPerCPU=100\n", "DefMemPerCPU=100\nMaxMemPerCPU=4000\n")
    engine, _ = run_spaced(slurm_pool(tmp_path, conf), holders + [job], 2.0, 2.0 * len(holders) + 10)
    last = engine.jobs[len(holders) + 1]
    assert _held(last) == expected


def test_raised_tasks_under_max_cpus_per_node(tmp_path: Path) -> None:
    """From the source, not probed: MaxCPUsPerNode=5 lets each node offer two whole raised tasks."""
    conf = CONF.replace("DefMemPerCPU=100\n", "DefMemPerCPU=100\nMaxMemPerCPU=4000\n").replace(
        "MaxTime=60\n", "MaxTime=60 MaxCPUsPerNode=5\n")
    engine, _ = run_spaced(slurm_pool(tmp_path, conf), ["-N2 -n4 --mem-per-cpu=8000"], 2.0, 10)
    assert _held(engine.jobs[1]) == [
        (0, 4, 16000), (1, 4, 16000)]


def test_the_job_asks_its_tasks_cpus(tmp_path: Path) -> None:
    engine, pol = run_spaced(slurm_pool(tmp_path, CONF), ["-N1-2 -n20"], 2.0, 10)
    job = engine.jobs[1]
    (ps,) = job.wl.pod_sets
    assert (ps.split, ps.split_tasks, ps.count, ps.min_count, ps.cpus_total) == (True, 20, 2, 1, 20)
    assert pol.req(job).cpus == 20


def test_an_exclusive_range_retries_without_its_smallest_node(tmp_path: Path) -> None:
    """From the source, not probed: walking up from ``--nodelist`` node gpu01 takes gpu02 (4
    CPUs) as the last node and fails; ``choose_nodes`` drops the nodes of fewest resources and
    the walk then takes gpu03, as it does without ``--exclusive``."""
    conf = CONF.replace("NodeName=gpu[01-04] CPUs=16 RealMemory=64000 Gres=gpu:8\n",
                        "NodeName=gpu01 CPUs=16 RealMemory=64000 Gres=gpu:8\n"
                        "NodeName=gpu02 CPUs=4 RealMemory=64000 Gres=gpu:8\n"
                        "NodeName=gpu[03-04] CPUs=16 RealMemory=64000 Gres=gpu:8\n")
    for k, (opts, want) in enumerate((("-N1-2 -n24 --exclusive -w gpu01", [(0, 16, 1600), (2, 16, 1600)]),
                                      ("-N1-2 -n24 -w gpu01", [(0, 16, 1600), (2, 8, 800)]))):
        (tmp_path / str(k)).mkdir()
        engine, _ = run_spaced(slurm_pool(tmp_path / str(k), conf), [opts], 2.0, 10)
        assert _held(engine.jobs[1]) == want, opts


@pytest.mark.parametrize("opts", ["-N1-2 -n6 --ntasks-per-node=3", "-N1-2 -n6 --gpus-per-task=1 --gres=gpu:2",
                                  "-N1-2 -n6 --cpus-per-gpu=2 --gres=gpu:1", "-N1-2", "-N1-2 -n6 --use-min-nodes",
                                  "-N1-2 -n6 --spread-job"])
def test_range_shapes_left_as_submitted(opts: str) -> None:
    assert workload("j", opts, 0.0, 1).pod_sets[0].split_tasks == 0


def test_other_policies_see_the_least_count_share() -> None:
    (ps,) = workload("j", "-N1-2 -n6", 0.0, 1).pod_sets
    assert (ps.count, ps.min_count, ps.cpu_m, ps.split_tasks, ps.split) == (2, 1, 6000, 6, False)
