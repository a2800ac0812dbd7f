"""A job without ``--nodes`` in a MinNodes partition runs on MinNodes nodes, as a real 22.05.8
ran it (policy/slurm/min_nodes.py).

Probes p96/p97 and p99 (2026-12-04): the seed pool's four nodes (128 CPUs, two threads per core,
8 GPUs) with ``PartitionName=mn Nodes=gpu[03-04] MinNodes=2``; each job ran alone on idle nodes.
"""
from __future__ import annotations

from dataclasses import replace

import pytest

from gpupool.engine.core import Engine
from gpupool.engine.policy_api import make_policy
from gpupool.policy.slurm.min_nodes import partitions_min_nodes, per_node_pods
from gpupool.formats.pool_dir import load_pool
from tests.unit.sbatch_plans import workload
from tests.unit.test_slurm_partition_qos import _node_count_pool

#: options -> (CPUs, GPUs, MB) on each of gpu03 and gpu04, as ``scontrol -d show job`` gave them
_P99 = {
    "-n1 --mem=100": [(2, 0, 100)] * 2,              # one core on each node (p97 too)
    "-n4 --mem=100": [(2, 0, 100)] * 2,              # p97: NumCPUs=4
    "-n6 --mem=120": [(4, 0, 120), (2, 0, 120)],     # as -N2 -n6 (probe: --mem=100; here one the
                                                     # six tasks divide, see below)
    "-n2 -c3 --mem=100": [(4, 0, 100)] * 2,          # 3 CPUs rounded up to two cores
    "-n1 --gres=gpu:1 --mem=100": [(2, 1, 100)] * 2,  # --gres is per node
    "-n1 --gres=gpu:8 --mem=100": [(2, 8, 100)] * 2,
    "-n1 --gpus-per-node=2 --mem=100": [(2, 2, 100)] * 2,
    "-n1 --mem=1000": [(2, 0, 1000)] * 2,            # --mem is per node
    "-n1 --mem-per-cpu=1000": [(2, 0, 2000)] * 2,    # follows the core's two CPUs
    "-n1 --exclusive --mem=100": [(128, 8, 100)] * 2,
}


def _jobs(pool, opts_list, parts="mn"):
    wls = [replace(workload(f"j{k}", f"-A ml-research -t 5 -p {parts} {opts}", 0.0, k, runtime=300.0), user="alice")
           for k, opts in enumerate(opts_list, 1)]
    out = Engine(pool, wls, make_policy("slurm", pool), record_events=True).run()
    return {j.id: j for j in out.jobs}


@pytest.mark.parametrize("enforce", ["NO", "ALL"])
def test_a_job_without_nodes_runs_on_min_nodes_nodes_as_the_real_system_ran_it(tmp_path, enforce):
    pool = _node_count_pool(tmp_path, enforce)
    names = {name: i for i, name in enumerate(pool.nodes)}
    for opts, want in _P99.items():
        job = _jobs(pool, [opts])[1]  # alone, as in the probe
        assert job.first_start == 0.0, opts
        got = [(p[2] // 1000, bin(p[1]).count("1"), p[3]) for p in sorted(job.placement)]
        assert [p[0] for p in sorted(job.placement)] == [names["gpu03"], names["gpu04"]], opts
        assert got == want, opts


def test_memory_per_node_split_over_tasks_is_taken_back_as_their_sum(tmp_path):
    """``-n6 --mem=100``: the task pods held ⌈100/6⌉ = 17 MB each, so the raised job holds 102 MB
    a node where the real system held 100 (the module's docstring; exact where the tasks
    divide the memory)."""
    job = _jobs(_node_count_pool(tmp_path, "NO"), ["-n6 --mem=100", "-n4 --mem=100"])
    assert [p[3] for p in job[1].placement] == [102, 102]
    assert [p[3] for p in job[2].placement] == [100, 100]


def test_jobs_asking_gpus_for_the_whole_job_are_not_raised_and_wait(tmp_path):
    """The real system spread ``-n4 --gpus=4`` as 3 + 1 GPUs, ``-n1 --gpus=9`` as 8 + 1 and
    ``-n4 --gpus-per-task=1`` as 2 + 2, and refused ``-n1 --gpus=1`` at submit ("Invalid generic
    resource (gres) specification"): a pod set cannot hold that, so such a job keeps its own
    count and waits (docs/policies/slurm.md, Known differences)."""
    jobs = _jobs(_node_count_pool(tmp_path, "NO"), ["-n4 --gpus=4 --mem=100", "-n4 --gpus-per-task=1 --mem=100"])
    assert [(j.first_start, j.reason) for j in jobs.values()] == [(None, "PartitionNodeLimit")] * 2


def test_the_least_min_nodes_of_the_job_partitions_is_taken(tmp_path):
    """``_valid_job_part`` takes the least MinNodes of the partitions named: with train (none)
    beside mn it is 1, so the job keeps one node and runs in train; the order of the names does
    not matter to the count."""
    pool = _node_count_pool(tmp_path, "NO")
    cfg = make_policy("slurm", pool).cfg
    one = workload("a", "-p mn,train -n1", 0.0, 1)
    assert partitions_min_nodes(cfg, one) == 1
    assert partitions_min_nodes(cfg, replace(one, partition="train,mn")) == 1
    assert partitions_min_nodes(cfg, replace(one, partition="mn")) == 2
    assert partitions_min_nodes(cfg, replace(one, partition=None)) == 1  # default: train
    jobs = _jobs(pool, ["-n1 --mem=100"], parts="mn,train")
    assert len(jobs[1].placement) == 1 and jobs[1].first_start == 0.0


def test_a_job_with_nodes_is_left_as_it_asked(tmp_path):
    """``-N1`` (its largest below MinNodes) still waits (probe p97); ``-N1-2`` was raised as a
    range (``jobinfo.raised_least``) and runs on two."""
    jobs = _jobs(_node_count_pool(tmp_path, "NO"), ["-N1 --mem=100", "-N1-2 --mem=100"])
    assert (jobs[1].first_start, jobs[1].reason) == (None, "PartitionNodeLimit")
    assert jobs[2].first_start == 0.0 and len(jobs[2].placement) == 2


def test_per_node_pods_as_sbatch_gives_them_for_the_node_count(tmp_path):
    """The raised pod set is the one ``--nodes=M`` gives (sbatch.job_pod_set), field for field."""
    from gpupool.formats.sbatch import job_pod_set, parse_sbatch_text

    for opts in ("-n1", "-n4", "-n6 -c2", "-n3 --mem=300", "-n5 --mem-per-cpu=100", "-n1 --gres=gpu:2",
                 "-n1 --gpus-per-node=2 --cpus-per-gpu=3", "-n2 --exclusive", "-n1 --gres=gpu:1 -c4 --mem-per-gpu=10"):
        alone, _ = job_pod_set(parse_sbatch_text(f"#!/bin/sh\n#SBATCH {opts}\n", "t.sh"))
        with_nodes, _ = job_pod_set(parse_sbatch_text(f"#!/bin/sh\n#SBATCH {opts} -N2\n", "t.sh"))
        assert per_node_pods(alone, 2) == with_nodes, opts


def test_pools_without_min_nodes_keep_every_job_as_submitted():
    pool = load_pool("examples/seed-pool")
    cfg = make_policy("slurm", pool).cfg
    from gpupool.policy.slurm.min_nodes import raise_node_count

    wl = workload("a", "-n4", 0.0, 1)
    assert raise_node_count(cfg, wl) is wl


@pytest.mark.parametrize("enforce", ["NO", "ALL"])
def test_fewer_gpus_for_the_job_than_min_nodes_are_refused_at_submit(tmp_path, enforce):
    """Probe p99: ``-n1 --gpus=1`` and ``-n1 -c4 --gpus=1`` in the MinNodes=2 partition were
    refused, "Invalid generic resource (gres) specification", whatever EnforcePartLimits; with
    train beside mn the least MinNodes is 1 and the job runs."""
    from gpupool.policy.slurm.min_nodes import MSG_GRES

    pool = _node_count_pool(tmp_path, enforce)
    jobs = _jobs(pool, ["-n1 --gpus=1 --mem=100", "-n1 -c4 --gpus=1 --mem=100", "-n2 --gpus-per-task=1 --mem=100",
                        "-n1 --gpus=2 --mem=100"])
    assert [(jobs[k].state, jobs[k].reason) for k in (1, 2)] == [("REJECTED", MSG_GRES)] * 2
    # as many GPUs for the job as the nodes, or more: not refused (they wait, not raised)
    assert [(jobs[k].state, jobs[k].reason) for k in (3, 4)] == [("PENDING", "PartitionNodeLimit")] * 2
    assert _jobs(pool, ["-n1 --gpus=1 --mem=100"], parts="mn,train")[1].first_start == 0.0
