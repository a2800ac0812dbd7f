"""Which node a one-node GPU job takes (docs/differential.md, finding 51).

Every expectation is what a real 22.05.8 did (2026-12-03, probes ``/tmp/probe/later*.json``): nodes of 128 CPUs (2 sockets x 32
cores x 2 threads), 8 GPUs, 1000000 MB, CR_Core_Memory, DefMemPerGPU=120000; holder jobs
pinned with ``-w`` first, then the job alone, which started at once.
"""
from __future__ import annotations

import pytest

from tests.unit.sbatch_plans import GPU_NODES_CONF, run_spaced, slurm_pool

CONF = GPU_NODES_CONF

#: gpu01 120 free CPUs and 4 GPUs, gpu02 112 and 3
TWO = ["-w gpu01 --gres=gpu:4 -c8", "-w gpu02 --gres=gpu:5 -c16"]
#: the same the other way round
TWO_SWAPPED = ["-w gpu01 --gres=gpu:5 -c16", "-w gpu02 --gres=gpu:4 -c8"]
#: gpu02 with 3 GPUs but 900000 MB free
TWO_MEM = ["-w gpu01 --gres=gpu:4 -c8", "-w gpu02 --gres=gpu:5 -c16 --mem=100000"]
#: runs [gpu01] (120 CPUs) and [gpu03] (112) fit 3 GPUs; gpu02 and gpu04 do not
FOUR_P = ["-w gpu01 --gres=gpu:4 -c8", "-w gpu02 --gres=gpu:6", "-w gpu03 --gres=gpu:5 -c16", "-w gpu04 --gres=gpu:8"]
#: runs [gpu01-02] and [gpu04] fit 3 GPUs; gpu03 does not
FOUR_Q = ["-w gpu01 --gres=gpu:5 -c16", "-w gpu02 --gres=gpu:4 -c8", "-w gpu03 --gres=gpu:6", "-w gpu04 --gres=gpu:4 -c8"]
#: three idle nodes but gpu02 with 2 CPUs held
THREE = ["-w gpu02 -c2 --mem=1000"]
#: free CPUs, GPUs and MB: gpu01 126, 4, 520000; gpu02 118, 2, 368000; gpu03 112, 2, 540000
THREE_MEM = ["-w gpu01 --gres=gpu:4 -c2", "-w gpu02 --gres=gpu:6 -c10 --mem=632000",
             "-w gpu03 --gres=gpu:6 -c16 --mem=460000"]

REAL = [
    (2, TWO, "-N1 -n3 --gpus-per-task=1", "gpu01"),
    (2, TWO, "-N1 --gres=gpu:3", "gpu02"),
    (2, TWO, "-n3 --gpus-per-task=1", "gpu02"),
    (2, TWO, "-N1 -n2 --gpus-per-task=1", "gpu01"),
    (2, TWO, "-N1 -n3 --gpus-per-task=1 -c4", "gpu01"),
    (2, TWO, "-N1 --gres=gpu:3 --ntasks-per-node=3", "gpu01"),
    (2, TWO, "-N1 --gpus=3", "gpu02"),
    (2, TWO_SWAPPED, "-N1 -n3 --gpus-per-task=1", "gpu01"),
    (2, TWO_SWAPPED, "-N1 --gres=gpu:3", "gpu01"),
    (2, TWO_SWAPPED, "-n3 --gpus-per-task=1", "gpu01"),
    (2, TWO_MEM, "-N1 -n3 --gpus-per-task=1", "gpu01"),
    (2, TWO_MEM, "-N1 --gres=gpu:3 --ntasks-per-node=3", "gpu01"),
    (2, TWO_MEM, "-N1 --gres=gpu:3", "gpu02"),
    (4, FOUR_P, "-N1 -n3 --gpus-per-task=1", "gpu01"),
    (4, FOUR_P, "-N1 --gres=gpu:3", "gpu03"),
    (4, FOUR_P, "-N1 --gres=gpu:3 --ntasks-per-node=3", "gpu01"),
    (4, FOUR_P, "-N1 -n1 --gres=gpu:3", "gpu01"),
    (4, FOUR_P, "-N1 -n3 --gpus=3", "gpu01"),
    (4, FOUR_P, "-n3 --gres=gpu:1 -N1 -c4", "gpu01"),
    (4, FOUR_P, "-N1 --ntasks-per-node=1 --gres=gpu:3", "gpu01"),
    (4, FOUR_P, "-N1 -c4 --gres=gpu:3", "gpu03"),
    (4, FOUR_Q, "-N1 -n3 --gpus-per-task=1", "gpu04"),
    (3, THREE, "-N1 --gres=gpu:2 -c24", "gpu01"),
    (3, THREE, "-N1 --gres=gpu:2 -c32", "gpu02"),
    (3, THREE, "-N1 --gres=gpu:2 -c2", "gpu02"),
    (3, THREE, "-N1 -c24 --mem=1000", "gpu02"),
    (3, THREE, "-N1 --gres=gpu:2", "gpu02"),
    (3, THREE_MEM, "-N1 --gres=gpu:2 -c16 --mem-per-cpu=8000", "gpu02"),
    (3, THREE_MEM, "-N1 --gres=gpu:2 -c16", "gpu01"),
    (3, THREE_MEM, "-N1 -c16 --mem-per-cpu=8000", "gpu02"),
    (3, THREE_MEM, "-N1 --gres=gpu:2 --mem-per-cpu=8000", "gpu02"),
]


@pytest.mark.parametrize(("nodes", "holders", "job", "real"), REAL,
                         ids=[f"{r[0]}n-{k}-{r[2]}" for k, r in enumerate(REAL)])
def test_node_of_a_one_node_job_as_real_slurm(tmp_path, nodes, holders, job, real):
    (tmp_path / "gres.conf").write_text("".join(f"NodeName=gpu{n:02d} Name=gpu File=/dev/nvidia[0-7]\n"
                                                for n in range(1, nodes + 1)))
    pool = slurm_pool(tmp_path, CONF.format(last=nodes))
    engine, _pol = run_spaced(pool, [*holders, job], 5, 5 * (len(holders) + 1) + 1)
    got = engine.jobs[len(holders) + 1]
    assert got.placement, f"{job}: not started ({got.reason})"
    assert {list(pool.nodes)[p[0]] for p in got.placement} == {real}
