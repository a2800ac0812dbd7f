"""``-n T --gpus=X --cpus-per-gpu=C`` with no node count (T <= X): slurmctld walks nodes for the
GPUs as it does without the tasks, the CPUs following the GPUs, but takes no more than T nodes
(``PodSet.walk_tasks``, ``gpu_walk._cpg_tasks_form``).

Probes p119 and p120 (2026-12-05, a real 22.05.8): the seed pool's four nodes (128 CPUs, two
threads per core, 8 GPUs), partition train, ``--mem=100`` unless the case gives memory,
blockers pinned with ``-w`` started first, then the job; GPUs, CPUs and memory per node from
``scontrol -d show job``. Before this, gpupool placed such a job as T task pods of X/T GPUs
(``-n2 --gpus=12 --cpus-per-gpu=4`` as 6 + 6 GPUs where the real system gave 8 + 4) and refused
``-n2 --gpus=5 --cpus-per-gpu=4`` ("cannot be split evenly"), which the real system accepted.
``-n T --exclusive`` beside ``--gpus`` stays task pods: on idle nodes they took the whole nodes
the real system gave (``-n2 --gpus=4 --exclusive`` gpu01, ``-n4 --gpus=12 --exclusive``
gpu01-02).
"""
from __future__ import annotations

from dataclasses import replace

import pytest

from gpupool.engine.policy_api import make_policy
from gpupool.errors import InputError
from gpupool.formats.pool_dir import load_pool
from tests.unit.sbatch_plans import workload
from tests.unit.test_slurm_gpu_walk import _CPU, _FRAG2, _run, _started_at_once, node_totals

ALL = tuple(range(8))
#: gpu01 with 3 GPUs free, gpu02 with 1, gpu03-04 idle
_UNEVEN = {"gpu01": 5, "gpu02": 7}
#: every node's GPUs held
_FULL = {f"gpu0{i}": 8 for i in range(1, 5)}

#: (blockers, options) -> {node: (GPU indices, CPUs)} as the real system gave them
_CASES = [
    ({}, "-n4 --gpus=4 --cpus-per-gpu=8", {"gpu01": ((0, 1, 2, 3), 32)}),
    ({}, "-n2 --gpus=12 --cpus-per-gpu=4", {"gpu01": (ALL, 32), "gpu02": ((0, 1, 2, 3), 16)}),
    ({}, "-n4 --gpus=12 --cpus-per-gpu=4", {"gpu01": (ALL, 32), "gpu02": ((0, 1, 2, 3), 16)}),
    ({}, "-n16 --gpus=16 --cpus-per-gpu=8", {"gpu01": (ALL, 64), "gpu02": (ALL, 64)}),
    ({}, "-n3 --gpus=12 --cpus-per-gpu=16", {"gpu01": (ALL, 128), "gpu02": ((0, 1, 2, 3), 64)}),
    ({}, "-n2 --gpus=4 --exclusive", {"gpu01": (ALL, 128)}),
    ({}, "-n4 --gpus=12 --exclusive", {"gpu01": (ALL, 128), "gpu02": (ALL, 128)}),
    (_FRAG2, "-n4 --gpus=4 --cpus-per-gpu=8", {"gpu01": ((6, 7), 16), "gpu02": ((6, 7), 16)}),
    (_FRAG2, "-n8 --gpus=8 --cpus-per-gpu=4", {f"gpu0{i}": ((6, 7), 8) for i in range(1, 5)}),
    (_FRAG2, "-n4 --gpus=6 --cpus-per-gpu=4", {f"gpu0{i}": ((6, 7), 8) for i in range(1, 4)}),
    # gpu02 with 4 GPUs and 64 CPUs held, gpu03 with 4 GPUs: gpu01 and gpu04 offer 8 GPUs, so
    # they weigh least (``near_gpus``) and the walk takes them, as without the tasks
    (_CPU, "-n4 --gpus=12 --cpus-per-gpu=16", {"gpu01": (ALL, 128), "gpu04": ((0, 1, 2, 3), 64)}),
    (_CPU, "-n2 --gpus=6 --cpus-per-gpu=16", {"gpu01": ((0, 1, 2, 3, 4, 5), 96)}),
    (_UNEVEN, "-n2 --gpus=8 --cpus-per-gpu=4", {"gpu03": (ALL, 32)}),
]


def _per_node(pool, job) -> dict[str, tuple[tuple[int, ...], int]]:
    """node -> (GPU indices, CPUs) the job holds there, all its pods on the node together."""
    return {n: (tuple(b for b in range(8) if m >> b & 1), c // 1000) for n, (m, c, _mem) in node_totals(pool, job).items()}


@pytest.fixture(scope="module")
def pool():
    return load_pool("examples/seed-pool")


@pytest.mark.parametrize("blockers,opts,want", _CASES, ids=[f"{len(b)}blk {o}" for b, o, _ in _CASES])
def test_the_job_takes_the_nodes_gpus_and_cpus_the_real_system_gave_it(pool, blockers, opts, want):
    assert _per_node(pool, _started_at_once(pool, blockers, opts)) == want


def test_memory_per_node_and_per_gpu_follow_the_nodes(pool):
    """``--mem=100``: 100 MB on each node taken; ``--mem-per-gpu=100`` beside four GPUs on one
    node: 400 MB (p120: ``-n3 --gpus=4 --cpus-per-gpu=8 --mem-per-gpu=100`` on gpu01)."""
    job = _started_at_once(pool, {}, "-n2 --gpus=12 --cpus-per-gpu=4")
    assert sorted(p[3] for p in job.placement) == [100, 100]
    job = _started_at_once(pool, {}, "-n3 --gpus=4 --cpus-per-gpu=8 --mem-per-gpu=100")
    assert [(p[1].bit_count(), p[2] // 1000, p[3]) for p in job.placement] == [(4, 32, 400)]


def test_the_tasks_cap_the_nodes(pool):
    """Two GPUs free on every node: ``-n2 --gpus=5 --cpus-per-gpu=4`` waited (Resources, p119:
    two nodes hold four GPUs), while without the tasks the walk takes three nodes; the reader
    accepts it (X not a multiple of T) and the job runs once the blockers end."""
    job = _run(pool, _FRAG2, "-n2 --gpus=5 --cpus-per-gpu=4 --mem=100")
    assert (job.first_start, job.reason) == (300.0, "Resources")
    assert len(job.placement) == 1 and job.placement[0][1].bit_count() == 5
    free = _started_at_once(pool, _FRAG2, "--gpus=5 --cpus-per-gpu=4")
    assert len(free.placement) == 3


@pytest.mark.parametrize("opts,want", [("-n4 --gpus=12 --cpus-per-gpu=4 --mem=100", (4, 100)),
                                       ("-n3 --gpus=5 --cpus-per-gpu=4 --mem-per-gpu=100", (3, 500)),
                                       ("-n2 --gpus=5 --cpus-per-gpu=4 --mem=100", (2, 100))])
def test_a_pending_walk_counts_a_cpu_per_task(pool, opts, want):
    """Pending, a real 22.05.8 recorded ``-n4 --gpus=12 --cpus-per-gpu=4`` as
    cpu=4,mem=100M,node=1,gres/gpu=12, ``-n3 --gpus=5 ... --mem-per-gpu=100`` as cpu=3,mem=500M
    and ``-n2 --gpus=5`` as cpu=2 (p120): a task's CPU each, one node's memory."""
    pol = make_policy("slurm", pool)
    wl = pol.resolve_request(replace(workload("j", f"-A ml-platform -t 5 {opts}", 0.0, 1), user="dave"))
    (ps,) = wl.pod_sets
    assert (ps.walked, ps.min_count, ps.count, ps.total_gpus) == (True, 1, int(opts.split()[0][2:]),
                                                                  int(opts.split("--gpus=")[1].split()[0]))
    assert (wl.req_cpu_mem or (ps.cpus_total, ps.memory_total)) == want
    job = _run(pool, _FULL, opts)
    assert (job.first_start, job.reason) == (300.0, "Resources")


def test_the_reader_marks_the_tasks():
    """As submitted: T task pods of X/T GPUs where X is a multiple of T (what other policies
    place), else one pod of the X GPUs; both carry T."""
    (ps,) = workload("j", "-t 5 -n4 --gpus=12 --cpus-per-gpu=4", 0.0, 1).pod_sets
    assert (ps.walk_gpus, ps.walk_tasks, ps.count, ps.gpus, ps.cpu_m) == (True, 4, 4, 3, 12000)
    (ps,) = workload("j", "-t 5 -n2 --gpus=5 --cpus-per-gpu=4", 0.0, 1).pod_sets
    assert (ps.walk_gpus, ps.walk_tasks, ps.count, ps.gpus, ps.cpu_m) == (True, 2, 1, 5, 20000)


@pytest.mark.parametrize("opts", ["-n2 --gpus=12 --exclusive",
                                  "-n1 --gpus=4 --cpus-per-gpu=4", "-N2 -n4 --gpus=8 --cpus-per-gpu=4",
                                  "-n2 -c2 --gpus=12 --cpus-per-gpu=4"])
def test_other_task_requests_keep_their_shape(opts):
    """Not walked this way (not probed, or held to their nodes): ``--exclusive``,
    one task, a node count, ``--cpus-per-task`` beside ``--cpus-per-gpu`` (a review found its
    CPUs no longer following the GPUs in the walk)."""
    (ps,) = workload("j", f"-t 5 {opts}", 0.0, 1).pod_sets
    assert not ps.walk_tasks


def test_more_tasks_than_gpus_keep_the_readers_refusal():
    """Not modelled: a real 22.05.8 ran ``-n8 --gpus=2 --cpus-per-gpu=4`` on one idle node with 2
    GPUs and 8 CPUs (p120); gpupool's reader still refuses it."""
    with pytest.raises(InputError, match="cannot be split evenly over --ntasks=8"):
        workload("j", "-t 5 -n8 --gpus=2 --cpus-per-gpu=4", 0.0, 1)
