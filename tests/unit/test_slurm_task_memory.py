"""``--mem=M`` beside ``--ntasks=T`` with no node count is per node: every node the task pods
take holds all M, and only nodes with M free take them (``select.task_node_memory``,
``PodSet.node_memory_mib``).

Probe p123 (2026-12-05, a real 22.05.8): the seed pool's four nodes (128 CPUs, two threads per
core, 1000000 MB), blockers pinned with ``-w`` holding 126 CPUs on every node (two free), then
the job; ``scontrol -d show job``. Before this, gpupool shared M out over the pods (⌈M/T⌉ each),
so ``-n4 --mem=1000`` on two nodes held 500 MB on each where the real job held 1000 on each.
"""
from __future__ import annotations

from dataclasses import replace

import pytest

from gpupool.engine.policy_api import make_policy
from gpupool.formats.pool_dir import load_pool
from tests.unit.sbatch_plans import workload
from tests.unit.test_slurm_gpu_walk import _run, _started_at_once, node_amounts

#: two CPUs free on every node
_ALL2 = {f"gpu0{i}": "-c126" for i in range(1, 5)}

#: (blockers, options) -> {node: (GPUs, CPUs, MB)} as the real system gave them
_CASES = [
    ({}, "-n4 --mem=1000", {"gpu01": (0, 4, 1000)}),
    (_ALL2, "-n4 --mem=1000", {"gpu01": (0, 2, 1000), "gpu02": (0, 2, 1000)}),
    (_ALL2, "-n3 --mem=3000", {"gpu01": (0, 2, 3000), "gpu02": (0, 2, 3000)}),
    (_ALL2, "-n4 --gpus-per-task=1 --mem=1000", {"gpu01": (2, 2, 1000), "gpu02": (2, 2, 1000)}),
    ({}, "-n4 --exclusive --gpus=12 --mem=100", {"gpu01": (8, 128, 100), "gpu02": (8, 128, 100)}),
]


@pytest.fixture(scope="module")
def pool():
    return load_pool("examples/seed-pool")


@pytest.mark.parametrize("blockers,opts,want", _CASES, ids=[f"{len(b)}blk {o}" for b, o, _ in _CASES])
def test_each_node_holds_the_memory_asked_per_node(pool, blockers, opts, want):
    assert node_amounts(pool, _started_at_once(pool, blockers, opts)) == want


def test_a_node_without_the_memory_free_takes_no_task(pool):
    """gpu01 with 500 MB free (and two CPUs on every other node): ``-n4 --mem=1000`` skips it,
    though a share of 250 MB a task would fit there (gpupool's reading of p123: each node
    holds the whole 1000)."""
    blockers = {"gpu01": "-c1 --mem=999500", **{f"gpu0{i}": "-c126" for i in range(2, 5)}}
    job = _started_at_once(pool, blockers, "-n4 --mem=1000")
    assert set(node_amounts(pool, job)) == {"gpu02", "gpu03"}


def test_the_request_counts_the_memory_once(pool):
    """ReqTRES of ``-n3 --mem=1000`` is 1000 MB (one node's), not three shares rounded up."""
    pol = make_policy("slurm", pool)
    wl = pol.resolve_request(replace(workload("j", "-A ml-platform -t 5 -n3 --mem=1000", 0.0, 1), user="dave"))
    assert (wl.req_cpu_mem or (sum(ps.cpus_total for ps in wl.pod_sets),
                               sum(ps.memory_total for ps in wl.pod_sets)))[1] == 1000


def test_other_policies_keep_the_shares():
    """As submitted (what other policies place) each task pod holds ⌈M/T⌉."""
    (ps,) = workload("j", "-t 5 -n3 --mem=1000", 0.0, 1).pod_sets
    assert (ps.count, ps.memory_mib, ps.node_memory_mib) == (3, 334, 1000)


def test_a_job_waits_while_no_node_has_the_memory(pool):
    """Every node with 500 MB free: ``-n4 --mem=1000`` waits (Resources) until the blockers end."""
    blockers = {f"gpu0{i}": "-c1 --mem=999500" for i in range(1, 5)}
    job = _run(pool, blockers, "-n4 --mem=1000")
    assert (job.first_start, job.reason) == (300.0, "Resources")


def test_a_node_with_exactly_the_memory_takes_the_tasks(pool):
    """gpu01 with exactly 1000 MB free, the other nodes none: ``-n3 --mem=1000`` starts there at
    once (a review found it waiting: three shares of 334 MB were asked of the node)."""
    blockers = {"gpu01": "-c1 --mem=999000", **{f"gpu0{i}": "-c1 --mem=1000000" for i in range(2, 5)}}
    job = _started_at_once(pool, blockers, "-n3 --mem=1000")
    assert node_amounts(pool, job) == {"gpu01": (0, 4, 1000)}


def test_a_required_node_needs_the_memory_too(pool):
    """``-w gpu01`` with 500 MB free there: ``-n4 --mem=1000`` waits for it (a review found the
    required node given 1000 MB it did not have)."""
    blockers = {"gpu01": "-c1 --mem=999500"}
    job = _run(pool, blockers, "-w gpu01 -n4 --mem=1000")
    assert (job.first_start, job.reason) == (300.0, "Resources")
    assert node_amounts(pool, job) == {"gpu01": (0, 4, 1000)}
