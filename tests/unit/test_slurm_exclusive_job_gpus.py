"""``--exclusive`` beside ``--gpus=X`` over a fixed node count N ≥ 2: each node is taken whole
with every GPU, so the reader asks the even share rounded up a pod
(``sbatch._whole_nodes_share``) where it used to refuse an X that does not divide; and beside
``-n T`` with GPUs per node and no ``--nodes``, whole idle nodes walked until their CPUs hold
the tasks (``sbatch._walks_tasks``, ``select._walk_gpus``), where the reader refused it. Every
placement is what a real 22.05.8 did on four idle or partly held 16-core 8-GPU nodes,
DefMemPerCPU=100 (probes p152 and p153, docs/differential.md findings 92 and 93)."""
from __future__ import annotations

from pathlib import Path

import pytest

from gpupool.errors import InputError
from tests.unit.sbatch_plans import run_spaced, slurm_pool, workload
from tests.unit.test_slurm_split_tasks import CONF, _ids

IDLE: list[str] = []
WHOLE = (16, 1600, 8)

#: (holders, the job, its pods as (node index, CPUs, MB, GPUs), or its state and reason)
CASES = [
    (IDLE, "-N2 --gpus=3 --exclusive", [(0, *WHOLE), (1, *WHOLE)]),
    (IDLE, "-N3 --gpus=8 --exclusive", [(0, *WHOLE), (1, *WHOLE), (2, *WHOLE)]),
    (IDLE, "-N4 --gpus=5 --exclusive", [(0, *WHOLE), (1, *WHOLE), (2, *WHOLE), (3, *WHOLE)]),
    (IDLE, "-N2 --gpus=3 --exclusive -n4", [(0, *WHOLE), (1, *WHOLE)]),
    (IDLE, "-N2 --gpus=3 --exclusive --mem-per-gpu=1000", [(0, 16, 8000, 8), (1, 16, 8000, 8)]),
    (["-w gpu01 -c1 --gres=gpu:7"], "-N2 --gpus=3 --exclusive", [(1, *WHOLE), (2, *WHOLE)]),
    (["-w gpu01 -c1", "-w gpu02 -c1", "-w gpu03 -c1"], "-N2 --gpus=3 --exclusive", ("PENDING", "Resources")),
    (IDLE, "-N2 --gpus=17 --exclusive", ("REJECTED", "Requested node configuration is not available")),
]


@pytest.mark.parametrize("holders,job,expected", CASES, ids=_ids(CASES))
def test_whole_nodes_as_on_the_real_system(tmp_path: Path, holders, job, expected) -> None:
    engine, _ = run_spaced(slurm_pool(tmp_path, CONF), holders + [job], 2.0, 2.0 * len(holders) + 10)
    last = engine.jobs[len(holders) + 1]
    got = (sorted((n, cpu // 1000, mem, mask.bit_count()) for n, mask, cpu, mem in last.placement)
           if last.state == "RUNNING" else (last.state, last.reason))
    assert got == expected


def test_a_pending_job_asks_one_cpu_a_node_and_its_x_gpus(tmp_path: Path) -> None:
    """Probe p152: pending behind holders on three nodes, cpu=2,mem=200M,node=2; the GPUs are the
    job's X as asked (``gres_per_job``; from the source, the probe's cluster tracked no GPUs)."""
    conf = CONF.replace("GresTypes=gpu", "AccountingStorageTRES=gres/gpu\nGresTypes=gpu")
    engine, pol = run_spaced(slurm_pool(tmp_path, conf), ["-w gpu01 -c1", "-w gpu02 -c1", "-w gpu03 -c1",
                                                          "-N2 --gpus=3 --exclusive"], 2.0, 16)
    job = engine.jobs[4]
    assert job.state == "PENDING"
    tres = pol.req(job).req_tres
    assert (tres["cpu"], tres["mem"], tres["node"], tres["gres/gpu"]) == (2, 200, 2, 3)


def test_the_reader_asks_the_share_rounded_up() -> None:
    ps = workload("J", "-N2 --gpus=3 --exclusive", 0.0, 1).pod_sets[0]
    assert (ps.count, ps.gpus, ps.gpus_per_job, ps.exclusive, ps.spread_gpus) == (2, 2, 3, True, False)


def test_fewer_gpus_than_nodes_is_still_refused() -> None:
    with pytest.raises(InputError, match="fewer GPUs than the 3 nodes"):
        workload("J", "-N3 --gpus=2 --exclusive", 0.0, 1)


#: probe p153: ``-n T`` beside GPUs per node and ``--exclusive``, no ``--nodes``: whole idle
#: nodes until their CPUs hold the tasks (holders, the job, pods or state and reason)
WALKED = [
    (IDLE, "-n4 --gres=gpu:1 --exclusive", [(0, *WHOLE)]),
    (IDLE, "-n20 --gres=gpu:1 --exclusive", [(0, *WHOLE), (1, *WHOLE)]),
    (IDLE, "-n40 --gres=gpu:2 --exclusive", [(0, *WHOLE), (1, *WHOLE), (2, *WHOLE)]),
    (IDLE, "-n4 --gpus-per-node=1 --exclusive", [(0, *WHOLE)]),
    (["-w gpu01 -c1"], "-n20 --gres=gpu:1 --exclusive", [(1, *WHOLE), (2, *WHOLE)]),
    (["-w gpu01 -c1", "-w gpu02 -c1", "-w gpu03 -c1"], "-n20 --gres=gpu:1 --exclusive", ("PENDING", "Resources")),
]


@pytest.mark.parametrize("holders,job,expected", WALKED, ids=_ids(WALKED))
def test_tasks_beside_gpus_per_node_walk_whole_nodes(tmp_path: Path, holders, job, expected) -> None:
    test_whole_nodes_as_on_the_real_system(tmp_path, holders, job, expected)


def test_a_pending_walk_of_whole_nodes_asks_its_tasks(tmp_path: Path) -> None:
    """Probe p153: pending behind holders on three nodes, cpu=20,mem=2000M,node=1."""
    engine, pol = run_spaced(slurm_pool(tmp_path, CONF), ["-w gpu01 -c1", "-w gpu02 -c1", "-w gpu03 -c1",
                                                          "-n20 --gres=gpu:1 --exclusive"], 2.0, 16)
    tres = pol.req(engine.jobs[4]).req_tres
    assert (tres["cpu"], tres["mem"], tres["node"]) == (20, 2000, 1)


@pytest.mark.parametrize("opts,mem", [("-N3 --gpus=4 --exclusive --mem-per-gpu=1000", 4000),
                                      ("-N2 --gpus=3 --exclusive --mem-per-gpu=1000", 3000)])
def test_memory_per_gpu_counts_the_jobs_gpus(tmp_path: Path, opts: str, mem: int) -> None:
    """From the source, not probed (``job_get_tres_mem`` without an allocation: memory per GPU ×
    the job's GPUs), found by a review: not the pods' rounded-up shares (6000 and 4000)."""
    conf = CONF.replace("GresTypes=gpu", "AccountingStorageTRES=gres/gpu\nGresTypes=gpu")
    engine, pol = run_spaced(slurm_pool(tmp_path, conf), ["-w gpu01 -c1", "-w gpu02 -c1", "-w gpu03 -c1", opts],
                             2.0, 16)
    job = engine.jobs[4]
    assert job.state == "PENDING"
    assert (pol.req(job).req_tres["mem"], pol.req(job).tres["mem"]) == (mem, mem)
