"""GPU choice with gres.conf ``Cores=``, on a real Slurm 22.05 and in gpupool, side by side.

Nodes of 2 sockets × 8 cores (1 or 2 threads each), 8 GPUs bound half to each socket (or partly
to no socket). Jobs are submitted 10 s apart and left running, so each one's cores and GPUs
depend on what the earlier ones took; both systems must give every job the same cores and GPU
indices on its first node
(``gpupool.conformance.affinity_probe``; the model is ``policy/slurm/affinity.py``). Skipped
where Slurm is not installed. Run alone with
``python -m pytest tests/differential/test_real_slurm_gpu_affinity.py -o addopts=""``.
"""
from __future__ import annotations

import pytest

from gpupool.conformance.affinity_probe import run_real, simulate, write_pool
from gpupool.conformance.real_slurm import RealSlurm
from gpupool.formats.pool_dir import load_pool
from tests.differential.real_cluster import need, started

pytestmark = [pytest.mark.slurm_real, pytest.mark.slow]

HALVES = {(0, 3): "0-7", (4, 7): "8-15"}
SOME_UNBOUND = {(0, 1): "0-7", (4, 5): "8-15"}
SEQUENCES = {
    "halves": [
        ["-N1 -n1 --gres=gpu:1", "-N1 -n1 --gres=gpu:1", "-N1 -n4 --gres=gpu:2", "-N1 -n1 -c6 --gres=gpu:3",
         "-N1 -n2 --gres=gpu:1"],
        ["-N1 -n4", "-N1 -n1 --gres=gpu:1", "-N1 -n1 -c10 --gres=gpu:1", "-N1 -n1 --gres=gpu:2"],
        ["-N1 -n2 -c3 --gres=gpu:2", "-N1 --gres=gpu:1", "-N1 -n5 --gres=gpu:4", "-N1 -n1 -c2 --gres=gpu:1"],
        ["-N1 -n1 --gres=gpu:1 @15", "-N1 -n1 --gres=gpu:1", "-N1 -n1 --gres=gpu:3", "-N1 -n2 --gres=gpu:2",
         "-N1 --ntasks-per-node=3 --gres=gpu:1"],
        ["-N1 -n1 --gpus=1", "-N1 -n1 --gpus=1", "-N1 -n4 --gpus=2", "-N1 -n1 -c6 --gpus=3"],
        ["-N1 -n1 --gres=gpu:1", "-N1 -n2 --gpus-per-task=1", "-N1 -n1 --gpus=2"],
    ],
    "some_unbound": [
        ["-N1 -n1 --gres=gpu:1", "-N1 -n1 --gres=gpu:2", "-N1 -n3 --gres=gpu:1", "-N1 -n1 --gres=gpu:3"],
    ],
    "two_threads": [
        ["-N1 -n1 --gres=gpu:1", "-N1 -n1 --gres=gpu:1", "-N1 -n4 --gres=gpu:2", "-N1 -n1 -c6 --gres=gpu:3",
         "-N1 -n2 --gres=gpu:1"],
        ["-N1 -n3", "-N1 -n1 -c4 --gres=gpu:2", "-N1 -n1 -c9 --gres=gpu:1"],
    ],
    "two_nodes": [
        ["-N2 --gres=gpu:1", "-N1 -n1 --gres=gpu:1", "-N2 --ntasks-per-node=2 --gres=gpu:2"],
    ],
}
#: (GPU binding, ThreadsPerCore, nodes) per scenario
LAYOUTS = {"halves": (HALVES, 1, 1), "some_unbound": (SOME_UNBOUND, 1, 1), "two_threads": (HALVES, 2, 1),
           "two_nodes": (HALVES, 1, 2)}


@pytest.mark.parametrize("layout", sorted(SEQUENCES))
def test_cores_and_gpus_follow_socket_affinity_as_on_real_slurm(tmp_path, layout):
    need("none")
    binding, threads, nodes = LAYOUTS[layout]
    pool_dir = write_pool(tmp_path / "pool", binding, threads=threads, nodes=nodes)
    rs = started(RealSlurm(tmp_path / "rs", load_pool(pool_dir), speedup=10,
                           scheduler_parameters="bf_interval=30,sched_interval=60"))
    try:
        real = [run_real(rs, seq, threads) for seq in SEQUENCES[layout]]
    finally:
        rs.stop()
    for seq, got in zip(SEQUENCES[layout], real, strict=True):
        assert all(cores for cores, _gpus in got), (seq, got)  # every job ran
        assert simulate(pool_dir, seq) == got, seq
