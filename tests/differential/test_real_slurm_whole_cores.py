"""CPUs in whole cores, ``-n T`` with no ``--nodes`` and a one-node GPU job's node, on a real
Slurm 22.05 and in gpupool (findings 49-51; more cases without a real Slurm:
``tests/unit/test_slurm_whole_cores.py``, ``tests/unit/test_slurm_one_node_gpu.py``).

One cluster of three nodes of 2 sockets x 8 cores x 2 threads (32 CPUs), 8 GPUs, 64000 MB
(CR_Core_Memory, DefMemPerCPU=100) runs each case in turn, as
``test_real_slurm_split_tasks.py`` does: its holders, then the job, read back per node (CPUs,
MB, GPUs) from ``scontrol -d show job``. Skipped where Slurm is not installed. Run alone with
``python -m pytest tests/differential/test_real_slurm_whole_cores.py -o addopts=""``.
"""
from __future__ import annotations

import pytest

from tests.differential.real_cluster import need, started
from tests.differential.test_real_slurm_split_tasks import _both

pytestmark = [pytest.mark.slurm_real, pytest.mark.slow]

CASES = [
    # whole cores per node, memory per CPU on them, a core kept for each later node
    ([], "-n3"),
    ([], "-n2 -c3"),
    ([], "-n1 --mem-per-cpu=1000"),
    ([], "-N2 -n6"),
    ([], "-N3 -n7"),
    ([], "-N2 -n6 --gpus-per-task=1"),
    # -n T with no --nodes: the node that holds them all with the fewest free, else in order
    (["-w gpu01 -c29"], "-n3"),
    ([], "-n40"),
    # a one-node GPU job: by the CPUs its tasks can use (task count, or what -c lets it hold)
    (["-w gpu01 --gres=gpu:4 -c8", "-w gpu02 --gres=gpu:5 -c16"], "-N1 -n3 --gpus-per-task=1"),
    (["-w gpu01 --gres=gpu:4 -c8", "-w gpu02 --gres=gpu:5 -c16"], "-N1 --gres=gpu:3"),
    (["-w gpu02 -c2"], "-N1 --gres=gpu:2 -c8"),
]


def _threaded_cluster(directory):
    from gpupool.conformance.real_slurm import RealSlurm
    from gpupool.model.slurm import Partition

    rs = RealSlurm(directory, nodes=3, gpus_per_node=8, cpus_per_node=32, memory_mb=64000, speedup=10,
                   overrides={"SelectTypeParameters": "CR_Core_Memory", "DefMemPerCPU": "100",
                              "PriorityType": "priority/basic"},
                   scheduler_parameters="bf_interval=30")
    for node in rs._nodes:
        node.sockets, node.cores_per_socket, node.threads_per_core = 2, 8, 2
    rs._config.partitions = {"p": Partition(name="p", nodes=tuple(rs.node_names), default=True, max_time=3600)}
    return started(rs)


def _per_node(pods):
    """gpupool's pods merged per node, as ``scontrol`` shows a job (a state stays as it is)."""
    if isinstance(pods, str):
        return pods
    per: dict[int, list[int]] = {}
    for node, cpus, mem, gpus in pods:
        row = per.setdefault(node, [0, 0, 0])
        row[0] += cpus
        row[1] += mem
        row[2] += gpus
    return sorted((node, *row) for node, row in per.items())


def test_whole_cores_and_node_choice_as_on_a_real_slurm(tmp_path) -> None:
    need("none")
    ours, real = _both(_threaded_cluster(tmp_path / "real"), CASES)
    assert [_per_node(p) for p in ours] == real
