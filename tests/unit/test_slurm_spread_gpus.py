"""``--gpus=X`` over a fixed node count: the nodes in index order each take as many as they have
free while every later node keeps one (policy/slurm/spread_gpus.py).

Probe p100 (2026-12-04, a real 22.05.8): the seed pool's four idle nodes (128 CPUs, two threads
per core, 8 GPUs, DefMemPerGPU=120000), partition train, each job alone with ``--mem=100``.
"""
from __future__ import annotations

from dataclasses import replace

import pytest

from gpupool.engine.core import Engine
from gpupool.engine.policy_api import make_policy
from gpupool.formats.pool_dir import load_pool
from tests.unit.sbatch_plans import workload

#: options -> GPUs on gpu01, gpu02, … as ``scontrol -d show job`` gave them (one core, 2 CPUs,
#: and 100 MB on every node)
_P100 = {
    "-N2 --gpus=4": [3, 1],
    "-N2 --gpus=8": [7, 1],
    "-N2 --gpus=6": [5, 1],
    "-N2 --gpus=3": [2, 1],
    "-N2 --gpus=9": [8, 1],
    "-N2 --gpus=2": [1, 1],
    "-N2 --gpus=16": [8, 8],
    "-N3 --gpus=6": [4, 1, 1],
}


@pytest.fixture(scope="module")
def pool():
    return load_pool("examples/seed-pool")


def _run(pool, specs, policy="slurm"):
    wls = [replace(workload(f"j{k}", f"-A ml-research -t 5 {opts}", at, k, runtime=300.0), user="alice")
           for k, (opts, at) in enumerate(specs, 1)]
    out = Engine(pool, wls, make_policy(policy, pool), record_events=True, check=True).run()
    return {j.id: j for j in out.jobs}


def _gpus(job) -> list[int]:
    return [bin(p[1]).count("1") for p in sorted(job.placement)]


def test_gpus_for_the_job_spread_over_its_nodes_as_the_real_system_spread_them(pool):
    names = list(pool.nodes)
    for opts, want in _P100.items():
        job = _run(pool, [(f"{opts} --mem=100", 0.0)])[1]
        assert job.first_start == 0.0, opts
        assert [names[p[0]] for p in sorted(job.placement)] == names[:len(want)], opts
        assert _gpus(job) == want, opts
        assert [(p[2], p[3]) for p in sorted(job.placement)] == [(2000, 100)] * len(want), opts
        # the devices are the lowest free indices
        assert [p[1] for p in sorted(job.placement)] == [(1 << n) - 1 for n in want], opts


def test_the_job_holds_its_gpus_in_every_count_the_policy_reads(pool):
    """Limits, sprio and sacct count the job's X GPUs, not one a node."""
    pol = make_policy("slurm", pool)
    wl = pol.resolve_request(replace(workload("j", "-A ml-research -t 5 -N2 --gpus=6 --mem=100", 0.0, 1), user="alice"))
    (ps,) = wl.pod_sets
    assert (ps.count, ps.gpus, ps.gpus_per_job, ps.spread_gpus, ps.total_gpus) == (2, 1, 6, True, 6)


def test_memory_per_gpu_follows_each_nodes_gpus(pool):
    """``--mem-per-gpu`` and DefMemPerGPU (the seed pool's 120000) are per GPU: a node holds them
    for the GPUs it got (gpupool's reading of ``_set_job_bits1`` with memory per GPU; the
    probe gave ``--mem``)."""
    jobs = _run(pool, [("-N2 --gpus=4 --mem-per-gpu=1000", 0.0), ("-N2 --gpus=4", 0.0)])
    assert [p[3] for p in sorted(jobs[1].placement)] == [3000, 1000]
    assert [p[3] for p in sorted(jobs[2].placement)] == [360000, 120000]


def test_a_node_takes_no_more_gpus_than_its_free_memory_pays_for(pool):
    """With 250000 MB free on gpu01 (DefMemPerGPU=120000) a job spread there takes 2 GPUs on it,
    and the rest on the next node (the job is pinned there with ``-w``)."""
    jobs = _run(pool, [("-w gpu01 -n1 --mem=750000", 0.0), ("-N2 -w gpu01,gpu02 --gpus=6", 1.0)])
    assert jobs[2].first_start == 1.0
    assert _gpus(jobs[2]) == [2, 4]
    assert [p[3] for p in sorted(jobs[2].placement)] == [240000, 480000]


def test_nodes_offering_more_gpus_are_chosen_first(pool):
    """With 2 GPUs free on gpu01 the job goes to gpu02-03, which offer all it asks
    (``near_gpus``; docs/differential.md finding 52 for ``-N2 --gpus=4``)."""
    jobs = _run(pool, [("-w gpu01 --gres=gpu:6 --mem=100", 0.0), ("-N2 --gpus=8 --mem=100", 1.0)])
    names = list(pool.nodes)
    assert [names[p[0]] for p in sorted(jobs[2].placement)] == ["gpu02", "gpu03"]
    assert _gpus(jobs[2]) == [7, 1]


def test_a_job_waits_when_its_nodes_free_gpus_fall_short(pool):
    """Two nodes with one free GPU each cannot hold ``-N2 --gpus=4``: it waits for GPUs
    (Resources) and starts when a holder ends."""
    holders = [(f"-w gpu0{n} --gres=gpu:7 --mem=100", 0.0) for n in range(1, 5)]
    jobs = _run(pool, holders + [("-N2 --gpus=4 --mem=100", 1.0)])
    assert jobs[5].first_start == 300.0
    assert sorted(_gpus(jobs[5])) == [1, 3]


def test_other_policies_place_the_even_share_rounded_up(pool):
    """The pod set as submitted holds ⌈X/N⌉ GPUs a node, what policies other than Slurm's
    place (``PodSet.spread_gpus``)."""
    job = _run(pool, [("-N2 --gpus=3 --mem=100", 0.0)], policy="fifo")[1]
    assert _gpus(job) == [2, 2]


def _resolved(pool, opts):
    pol = make_policy("slurm", pool)
    return pol.resolve_request(replace(workload("j", f"-A ml-research -t 5 {opts}", 0.0, 1), user="alice"))


def test_memory_per_gpu_counts_for_the_jobs_gpus_in_limits_and_req_tres(pool):
    """ReqTRES and every limit count ``--mem-per-gpu`` × X (a real 22.05.8 recorded ``--gpus=3
    --mem-per-gpu=5000`` as mem=15000M, ``job_defaults.submitted_request``), not × the nodes or
    × their even share."""
    wl = _resolved(pool, "-N2 --gpus=5 --mem-per-gpu=1000")
    (ps,) = wl.pod_sets
    assert (ps.memory_total, ps.total_gpus) == (5000, 5)
    assert (wl.req_cpu_mem or (ps.cpus_total, ps.memory_total))[1] == 5000


def test_a_node_range_is_refused_only_below_its_least_count(pool):
    """``gres_job_state_validate`` refuses GPUs per job below the least node count and lowers
    the largest to them: ``-N1-2 -n1 --gpus-per-task=1`` runs (source, read by a reviewer)."""
    jobs = _run(pool, [("-N1-2 -n1 --gpus-per-task=1 --mem=100", 0.0)])
    assert jobs[1].state != "REJECTED" and jobs[1].first_start == 0.0


def test_cpus_from_def_cpu_per_gpu_follow_each_nodes_gpus(tmp_path):
    """DefCpuPerGPU=4: ``-N2 --gpus=3`` holds 2 GPUs and 8 CPUs on one node, 1 and 4 on the
    other, and counts 12 CPUs and 3 GPUs (gpupool's reading, not probed)."""
    from tests.unit.test_slurm_req_tres import _seed_copy

    pool_dir = _seed_copy(tmp_path, [])
    conf = pool_dir / "slurm.conf"
    conf.write_text("DefCpuPerGPU=4\n" + conf.read_text())
    p = load_pool(pool_dir)
    job = _run(p, [("-N2 --gpus=3 --mem=100", 0.0)])[1]
    assert [(bin(q[1]).count("1"), q[2]) for q in sorted(job.placement)] == [(2, 8000), (1, 4000)]
    (ps,) = _resolved(p, "-N2 --gpus=3 --mem=100").pod_sets
    assert (ps.cpus_total, ps.total_gpus) == (12, 3)


def test_as_submitted_the_pods_count_their_even_share(pool):
    """Policies other than Slurm's hold and count ⌈X/N⌉ a node."""
    from tests.unit.sbatch_plans import workload as wl_of

    (ps,) = wl_of("j", "-N2 --gpus=3 --mem=100", 0.0, 1).pod_sets
    assert (ps.gpus, ps.total_gpus) == (2, 4)


def test_max_mem_per_node_holds_the_even_share(tmp_path):
    """Under MaxMemPerNode=500000 ``-N2 --gpus=10 --mem-per-gpu=100000`` asks 5 GPUs' worth a node
    as submitted and is taken; ``--gpus=11`` asks 6 and is refused (gpupool's reading, not
    probed: slurmctld's ``_valid_pn_min_mem`` reads the memory per node alone)."""
    from gpupool.policy.slurm.job_defaults import MSG_MEMORY
    from tests.unit.test_slurm_req_tres import _seed_copy

    pool_dir = _seed_copy(tmp_path, [])
    conf = pool_dir / "slurm.conf"
    conf.write_text("MaxMemPerNode=500000\n" + conf.read_text())
    jobs = _run(load_pool(pool_dir), [("-N2 --gpus=10 --mem-per-gpu=100000", 0.0),
                                      ("-N2 --gpus=11 --mem-per-gpu=100000", 0.0)])
    assert jobs[1].state != "REJECTED"
    assert (jobs[2].state, jobs[2].reason) == ("REJECTED", MSG_MEMORY)


def test_max_cpus_per_node_caps_cpus_that_follow_the_gpus(tmp_path):
    """DefCpuPerGPU=4 in a partition of MaxCPUsPerNode=8: the CPUs do not cap the GPUs dealt
    out, each node gives 8 CPUs at most, and the job's 16 CPUs go out 8 + 8: a real 22.05.8 ran
    ``-N2 --gpus=4`` as 3 + 1 GPUs with 8 + 8 CPUs (probe p117; gpupool ran 2 + 2 before, a
    reviewer's unprobed reading)."""
    from tests.unit.test_slurm_req_tres import _seed_copy

    pool_dir = _seed_copy(tmp_path, [])
    conf = pool_dir / "slurm.conf"
    text = conf.read_text().replace("PartitionName=train ", "PartitionName=train MaxCPUsPerNode=8 ")
    conf.write_text("DefCpuPerGPU=4\n" + text)
    job = _run(load_pool(pool_dir), [("-N2 --gpus=4 --mem=100", 0.0)])[1]
    assert [(bin(q[1]).count("1"), q[2]) for q in sorted(job.placement)] == [(3, 8000), (1, 8000)]


def test_per_cpu_memory_under_def_cpu_per_gpu_follows_the_cpus_dealt(tmp_path):
    """DefCpuPerGPU with memory per CPU: the GPUs are dealt out as without it and each node's
    memory follows the CPUs dealt to it (a real 22.05.8 at DefCpuPerGPU=2 ran ``-N2 --gpus=12``
    as 8 + 4 GPUs with 16 + 8 CPUs and 1600 + 800 MB at DefMemPerCPU=100, and ``--gpus=12
    --mem-per-cpu=200`` with 3200 + 1600; probe p160; gpupool kept the even share before)."""
    from tests.unit.test_slurm_req_tres import _seed_copy

    pool_dir = _seed_copy(tmp_path, [])
    conf = pool_dir / "slurm.conf"
    conf.write_text("DefCpuPerGPU=4\n" + conf.read_text())
    job = _run(load_pool(pool_dir), [("-N2 --gpus=4 --mem-per-cpu=1000", 0.0)])[1]
    assert [(bin(q[1]).count("1"), q[2], q[3]) for q in sorted(job.placement)] == [(3, 12000, 12000), (1, 4000, 4000)]
