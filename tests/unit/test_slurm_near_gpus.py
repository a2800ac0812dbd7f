"""Nodes offering a GPU job more GPUs weigh less (docs/differential.md, finding 52).

The expectations in ``REAL`` are what a real 22.05.8 did (2026-12-03, probes
``/tmp/p52/s1.json``, ``/tmp/p52/s2.json`` and ``/tmp/probe/later10.json``, with
DebugFlags=SelectType showing the weights): four nodes of 128 CPUs (2 sockets x 32 cores x 2
threads), 8 GPUs, 1000000 MB, CR_Core_Memory, DefMemPerGPU=120000; holder jobs pinned with
``-w`` first, then the job alone, which started at once.
"""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from gpupool.formats.sbatch import job_pod_set, parse_sbatch_text
from gpupool.model.workload import PodSet
from gpupool.policy.slurm.near_gpus import gpu_weights, offer_cap
from tests.unit.sbatch_plans import GPU_NODES_CONF, run_spaced, script, slurm_pool

CONF = GPU_NODES_CONF.format(last=4)

#: free GPUs 0, 3, 2, 3 (the job's offers: 3, 2, 3)
FREE_3_2_3 = ["-w gpu01 --gres=gpu:8 -t 20", "-w gpu02 --gres=gpu:5 -t 20", "-w gpu03 --gres=gpu:6 -t 20",
              "-w gpu04 --gres=gpu:5 -t 20"]
#: free GPUs 0, 3, 3, 2
FREE_3_3_2 = ["-w gpu01 --gres=gpu:8 -t 20", "-w gpu02 --gres=gpu:5 -t 20", "-w gpu03 --gres=gpu:5 -t 20",
              "-w gpu04 --gres=gpu:6 -t 20"]
#: free GPUs 0, 3, 3, 3, but gpu02 with 250000 MB free: 2 GPUs' worth at DefMemPerGPU
MEM_SHORT = ["-w gpu01 --gres=gpu:8 -t 20", "-w gpu02 --gres=gpu:5 --mem=750000 -t 20",
             "-w gpu03 --gres=gpu:5 -t 20", "-w gpu04 --gres=gpu:5 -t 20"]

REAL = [
    (FREE_3_2_3, "-N2 -n4 --gpus-per-task=1 -t 5", {"gpu02", "gpu04"}),
    (FREE_3_2_3, "-N2 -n5 --gpus-per-task=1 -t 5", {"gpu02", "gpu04"}),
    (FREE_3_2_3, "-N2 -n3 --gpus-per-task=1 -t 5", {"gpu02", "gpu04"}),
    (FREE_3_2_3, "-N2 --gres=gpu:2 -t 5", {"gpu02", "gpu03"}),
    (FREE_3_2_3, "-N2 -n4 -t 5 --gres=gpu:2", {"gpu02", "gpu03"}),
    (FREE_3_2_3, "-n4 --gpus-per-task=1 -t 5", {"gpu02", "gpu04"}),
    (FREE_3_2_3, "-N2 --gpus=4 -t 5", {"gpu02", "gpu04"}),
    (FREE_3_2_3, "-n3 --gpus-per-task=1 -t 5", {"gpu02"}),
    (FREE_3_3_2, "-N2 -n4 --gpus-per-task=1 -t 5", {"gpu02", "gpu03"}),
    (MEM_SHORT, "-N2 -n4 --gpus-per-task=1 -t 5", {"gpu03", "gpu04"}),
    (MEM_SHORT, "-N2 --gres=gpu:2 -t 5", {"gpu02", "gpu03"}),
    (MEM_SHORT, "-N2 --gpus=4 -t 5", {"gpu03", "gpu04"}),
]


@pytest.mark.parametrize(("holders", "job", "real"), REAL, ids=[f"{k}-{r[1]}" for k, r in enumerate(REAL)])
def test_nodes_of_a_gpu_job_as_real_slurm(tmp_path, holders, job, real):
    (tmp_path / "gres.conf").write_text("".join(f"NodeName=gpu{n:02d} Name=gpu File=/dev/nvidia[0-7]\n"
                                                for n in range(1, 5)))
    pool = slurm_pool(tmp_path, CONF)
    engine, _pol = run_spaced(pool, [*holders, job], 5, 5 * (len(holders) + 1) + 1)
    got = engine.jobs[len(holders) + 1]
    assert got.placement, f"{job}: not started ({got.reason})"
    assert {list(pool.nodes)[p[0]] for p in got.placement} == real


@pytest.mark.parametrize(("options", "per_job"), [
    ("-N2 --gres=gpu:2", 0), ("-N2 --gpus-per-node=2", 0), ("-N2 --gpus=4", 4),
    ("-N2 -n4 --gpus-per-task=1", 4), ("-n4 --gpus-per-task=1", 4), ("-N2 -c4", 0),
    ("-N2 -n4 --gres=gpu:2 --gpus-per-task=1", 0), ("-N2 --ntasks-per-node=3 --gpus-per-task=1", 6),
    ("-N2 -n3 --gpus-per-task=2 --cpus-per-gpu=1", 6),
])
def test_sbatch_reader_keeps_the_whole_job_gpu_count(options, per_job):
    """slurmctld's gres_per_job: --gpus, or --gpus-per-task x tasks; 0 for per-node requests."""
    job = parse_sbatch_text(script(options), "job.sh")
    assert job_pod_set(job)[0].gpus_per_job == per_job


def _free(masks: list[int], mem: list[int]):
    return SimpleNamespace(mask=masks, gpus=[m.bit_count() for m in masks], mem=mem)


def _any_gpu(free, i, ps):
    return free.mask[i]


def test_per_node_requests_and_single_pods_keep_the_configured_weights():
    weight = [1, 1, 1]
    free = _free([0b111, 0b11, 0b1], [10**6] * 3)
    for ps in (PodSet(count=2, one_per_node=True, gpus=2), PodSet(count=1, gpus=3, gpus_per_job=3),
               PodSet(count=2, one_per_node=True)):
        assert offer_cap(ps) is None
        assert gpu_weights(ps, [0, 1, 2], free, weight, _any_gpu) is weight


def test_whole_job_requests_weigh_nodes_by_the_gpus_they_offer():
    ps = PodSet(count=2, one_per_node=True, gpus=2, gpus_per_job=4)
    free = _free([0b111, 0b11, 0b111, 0b1111], [10**6] * 4)
    # the job asks 4 in all: offers 3, 2, 3, 4 -> 0xff minus each, under the weight shifted a byte
    assert gpu_weights(ps, [0, 1, 2, 3], free, [1, 1, 1, 1], _any_gpu) == [508, 509, 508, 507]
    # a configured weight still ranks first: a heavier node offering more stays heavier
    assert gpu_weights(ps, [0, 1, 2, 3], free, [1, 1, 1, 2], _any_gpu)[3] > 509


def test_free_memory_over_memory_per_gpu_caps_the_offer():
    ps = PodSet(count=2, one_per_node=True, gpus=2, gpus_per_job=4, mem_per_gpu=120000)
    free = _free([0b111, 0b111, 0b111], [250000, 400000, 10**6])
    assert gpu_weights(ps, [0, 1, 2], free, [1, 1, 1], _any_gpu) == [509, 508, 508]


def test_a_node_over_its_memory_offers_no_gpu():
    """A node whose memory real Slurm over-allocated (a lockstep replay carries that out; its
    free memory is negative) offers none, not a weight spilling into the configured byte."""
    ps = PodSet(count=2, one_per_node=True, gpus=2, gpus_per_job=4, mem_per_gpu=120000)
    free = _free([0b111, 0b111, 0b111], [-140000, 400000, 10**6])
    assert gpu_weights(ps, [0, 1, 2], free, [1, 1, 1], _any_gpu) == [511, 508, 508]


def test_nodes_offering_the_same_keep_the_configured_weights():
    ps = PodSet(count=2, one_per_node=True, gpus=2, gpus_per_job=4)
    weight = [1, 1, 1]
    assert gpu_weights(ps, [0, 1, 2], _free([0b1111, 0b11111, 0xff], [10**6] * 3), weight, _any_gpu) is weight


def test_exclusive_jobs_count_every_free_gpu():
    ps = PodSet(count=2, one_per_node=True, gpus=1, exclusive=True)
    free = _free([0xf, 0xff, 0xff], [10**6] * 3)
    assert gpu_weights(ps, [0, 1, 2], free, [1, 1, 1], _any_gpu) == [256 + 251, 256 + 247, 256 + 247]


#: free GPUs 0, 3, 3, 4: every node offers a 3-GPU job all 3, so the walk keeps index order
FREE_3_3_4 = ["-w gpu01 --gres=gpu:8 -t 20", "-w gpu02 --gres=gpu:5 -t 20", "-w gpu03 --gres=gpu:5 -t 20",
              "-w gpu04 --gres=gpu:4 -t 20"]


@pytest.mark.parametrize("job", ["-N2 -n3 --gpus-per-task=1 -t 5", "-N2 -n3 --gpus-per-task=1 --mem=1000 -t 5",
                                 "-N2 -n3 --gpus-per-task=1 --cpus-per-gpu=1 -t 5"])
def test_the_cap_is_the_jobs_count_whatever_form_its_pods_take(tmp_path, job):
    """Not probed, from the source (gres_per_job = tasks x GPUs per task): the job asks 3, so
    gpu04's 4 free weigh like gpu02's and gpu03's 3, in the split form and in the even one
    (``--mem`` under DefMemPerGPU and ``--cpus-per-gpu`` keep the job even: 2 GPUs per pod)."""
    (tmp_path / "gres.conf").write_text("".join(f"NodeName=gpu{n:02d} Name=gpu File=/dev/nvidia[0-7]\n"
                                                for n in range(1, 5)))
    pool = slurm_pool(tmp_path, CONF)
    engine, _pol = run_spaced(pool, [*FREE_3_3_4, job], 5, 5 * 5 + 1)
    got = engine.jobs[5]
    assert {list(pool.nodes)[p[0]] for p in got.placement} == {"gpu02", "gpu03"}


def test_fill_sets_the_memory_per_gpu_where_memory_is_a_consumable(tmp_path):
    from gpupool.policy.slurm.job_defaults import Defaults, fill_pod_set
    ps = job_pod_set(parse_sbatch_text(script("-N2 --gpus=4 --mem=1000"), "job.sh"))[0]
    assert fill_pod_set(ps, Defaults(None, 120000, None, None, 1000000)).mem_per_gpu == 120000
    assert fill_pod_set(ps, Defaults(None, 120000, None, None, None)).mem_per_gpu == 0  # not consumable
    own = job_pod_set(parse_sbatch_text(script("-N2 --gpus=4 --mem-per-gpu=5000"), "job.sh"))[0]
    assert fill_pod_set(own, Defaults(None, 120000, None, None, 1000000)).mem_per_gpu == 5000


def test_a_split_job_takes_a_node_with_fewer_gpus_than_its_even_share(tmp_path):
    """Rich seed 3 of the differential (a real 22.05.8, 2026-12-03, job 68 at 1539 s): with
    gpu01 idle, gpu02-03 without a free GPU and gpu04 with 2, ``-N2 -n8 --gpus-per-task=1``
    ran as 6 GPUs on gpu01 and 2 on gpu04 (the two threads of a core kept for the later node),
    though its even share is 4."""
    (tmp_path / "gres.conf").write_text("".join(f"NodeName=gpu{n:02d} Name=gpu File=/dev/nvidia[0-7]\n"
                                                for n in range(1, 5)))
    pool = slurm_pool(tmp_path, CONF)
    holders = ["-w gpu02 --gres=gpu:8 -t 20", "-w gpu03 --gres=gpu:8 -t 20", "-w gpu04 --gres=gpu:6 -t 20"]
    engine, _pol = run_spaced(pool, [*holders, "-N2 -n8 --gpus-per-task=1 -t 5"], 5, 5 * 4 + 1)
    got = engine.jobs[4]
    names = list(pool.nodes)
    assert sorted((names[p[0]], p[1].bit_count()) for p in got.placement) == [("gpu01", 6), ("gpu04", 2)]
