"""The node's whole memory (``--mem=0``, or no memory asked where no default applies) in a
partition whose nodes differ in RealMemory: each node the job takes must have none of its memory
allocated, and holds all of its own (``PodSet.memory_all``, set by ``job_defaults``; held by
``select._all_memory``).

Probe p126 (2026-12-05, a real 22.05.8): the seed pool with gpu01-02 at 1000000 MB and gpu03-04
at 500000 MB, blockers ``-w gpuN -n1 --mem=100``; ``scontrol -d show job``. Before this, gpupool
gave every node the smallest node's memory, so ``--mem=0`` held 500000 MB on gpu01 and could
start beside a job holding memory there.
"""
from __future__ import annotations

import shutil

import pytest

from gpupool.formats.pool_dir import load_pool
from tests.unit.test_slurm_gpu_walk import _run, node_amounts

BIG, SMALL = 1_000_000, 500_000

#: (blockers, options) -> {node: (GPUs, CPUs, MB)} as the real system gave them
_STARTED = [
    ({}, "-w gpu03 -N1 --mem=0", {"gpu03": (0, 2, SMALL)}),
    ({}, "-w gpu01 -N1 --mem=0", {"gpu01": (0, 2, BIG)}),
    ({}, "-N1 --mem=0", {"gpu01": (0, 2, BIG)}),
    ({}, "-n4 --mem=0", {"gpu01": (0, 4, BIG)}),
    ({}, "-N2 --mem=0", {"gpu01": (0, 2, BIG), "gpu02": (0, 2, BIG)}),
    ({"gpu01": ""}, "-N1 --mem=0", {"gpu02": (0, 2, BIG)}),
    ({"gpu01": ""}, "-N3 --mem=0", {"gpu02": (0, 2, BIG), "gpu03": (0, 2, SMALL), "gpu04": (0, 2, SMALL)}),
    ({"gpu01": "", "gpu02": ""}, "-N1 --mem=0", {"gpu03": (0, 2, SMALL)}),
    ({"gpu01": "", "gpu02": ""}, "-N2 --mem=0", {"gpu03": (0, 2, SMALL), "gpu04": (0, 2, SMALL)}),
]


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    return _uneven_pool(tmp_path_factory.mktemp("uneven") / "pool")


@pytest.mark.parametrize("blockers,opts,want", _STARTED, ids=[f"{len(b)}blk {o}" for b, o, _ in _STARTED])
def test_each_node_holds_its_own_whole_memory(pool, blockers, opts, want):
    job = _run(pool, blockers, opts)
    assert job.first_start == 1.0
    assert node_amounts(pool, job) == want


def test_a_named_node_with_memory_allocated_makes_the_job_wait(pool):
    """100 MB held on gpu01: ``-w gpu01 -N1 --mem=0`` waited (Resources); the blocker runs 300 s."""
    job = _run(pool, {"gpu01": ""}, "-w gpu01 -N1 --mem=0")
    assert (job.first_start, job.reason) == (300.0, "Resources")



def _uneven_pool(d, extra: str = ""):
    """The seed pool in ``d`` with gpu01-02 at 1000000 MB and gpu03-04 at 500000 (gpu01 first
    in slurm.conf), and ``extra`` slurm.conf lines."""
    shutil.copytree("examples/seed-pool", d)
    conf = (d / "slurm.conf").read_text()
    line = next(x for x in conf.splitlines() if x.startswith("NodeName=gpu[01-04]"))
    two = line.replace("gpu[01-04]", "gpu[01-02]") + "\n" + line.replace("gpu[01-04]", "gpu[03-04]").replace(
        "RealMemory=1000000", "RealMemory=500000")
    conf = conf.replace(line, two).replace("DefMemPerGPU=120000", f"DefMemPerGPU=120000\n{extra}")
    (d / "slurm.conf").write_text(conf)
    return load_pool(d)


def test_the_memory_limits_read_the_partitions_first_node(tmp_path):
    """slurmctld's MaxMemPerCPU and MaxMemPerNode tests read the whole node's memory as the
    partition's first node's (``_mem_per_node_part``; from the source): under MaxMemPerCPU=8000
    ``-N1 --mem=0`` on gpu01 (1000000 MB) gets 125 CPUs, 126 in whole cores; under
    MaxMemPerNode=600000 it is refused at submit, though the smallest node's 500000 is within."""
    from gpupool.policy.slurm.submit_check import submit_rejection
    from tests.unit.sbatch_plans import workload

    per_cpu = _uneven_pool(tmp_path / "a", "MaxMemPerCPU=8000")
    assert node_amounts(per_cpu, _run(per_cpu, {}, "-N1 --mem=0")) == {"gpu01": (0, 126, BIG)}
    per_node = _uneven_pool(tmp_path / "b", "MaxMemPerNode=600000")
    assert submit_rejection(per_node, workload("j", "-t 5 -N1 --mem=0", 0.0, 1)) == \
        "Memory required by task is not available"
