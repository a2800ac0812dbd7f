"""``--gpus=X`` beside a ``--nodelist`` and no ``--nodes`` (docs/differential.md, finding 97): the
walk of ``--gpus=X`` (1 to X nodes; ``gpu_walk``) with the list's hosts as its least count and
its first nodes (``gpu_walk.walk``), as for a node range beside a list (finding 96).

Every expectation is what a real 22.05.8 did on four 16-core 8-GPU nodes (CR_Core_Memory,
DefMemPerCPU=100; probe p159), each job alone behind its holders.
"""
from __future__ import annotations

import pytest

from gpupool.errors import InputError

from tests.unit.sbatch_plans import run_spaced, slurm_pool, workload
from tests.unit.test_slurm_gpu_walk_range_listed import FIVE_HELD_ON_02, SIX_HELD_ON_01, per_node
from tests.unit.test_slurm_range_request import pending_tres
from tests.unit.test_slurm_split_tasks import CONF

HOLD_ALL = ["-w gpu01 -c16", "-w gpu02 -c16", "-w gpu03 -c16", "-w gpu04 -c16"]

#: (holders, the job, its (node index, CPUs, MB, GPUs) per node)
CASES = [
    ([], "--gpus=12 -w gpu01", [(0, 1, 100, 8), (1, 1, 100, 4)]),
    ([], "--gpus=12 -w gpu03", [(2, 1, 100, 8), (3, 1, 100, 4)]),
    ([], "--gpus=12 -w gpu04", [(2, 1, 100, 8), (3, 1, 100, 4)]),  # downwards from gpu04
    ([], "--gpus=20 -w gpu01,gpu02", [(0, 1, 100, 8), (1, 1, 100, 8), (2, 1, 100, 4)]),
    ([], "--gpus=20 -w gpu02,gpu04", [(1, 1, 100, 8), (2, 1, 100, 8), (3, 1, 100, 4)]),
    ([], "--gpus=3 -w gpu01,gpu02", [(0, 1, 100, 2), (1, 1, 100, 1)]),
    ([], "--gpus=8 -w gpu04", [(3, 1, 100, 8)]),
    (FIVE_HELD_ON_02, "--gpus=4 -w gpu02", [(0, 1, 100, 3), (1, 1, 100, 1)]),
    (FIVE_HELD_ON_02, "--gpus=12 -w gpu02", [(1, 1, 100, 3), (2, 1, 100, 8), (3, 1, 100, 1)]),
    (SIX_HELD_ON_01, "--gpus=12 -w gpu01", [(0, 1, 100, 2), (1, 1, 100, 8), (2, 1, 100, 2)]),
    (SIX_HELD_ON_01, "--gpus=8 -w gpu03", [(2, 1, 100, 8)]),
    (SIX_HELD_ON_01 + FIVE_HELD_ON_02, "--gpus=16 -w gpu01,gpu02",
     [(0, 1, 100, 2), (1, 1, 100, 3), (2, 1, 100, 8), (3, 1, 100, 3)]),
    ([], "--gpus=12 -w gpu02 --mem=1000", [(1, 1, 1000, 8), (2, 1, 1000, 4)]),
    ([], "--gpus=12 -w gpu02 --exclusive", [(1, 16, 1600, 8), (2, 16, 1600, 8)]),
    ([], "-n2 --gpus=12 -w gpu01", [(0, 1, 100, 8), (1, 1, 100, 4)]),
]


@pytest.mark.parametrize("holders,opts,want", CASES, ids=[f"{len(c[0])}-{c[1]}" for c in CASES])
def test_the_walk_takes_what_the_real_system_took(tmp_path, holders, opts, want):
    engine, _ = run_spaced(slurm_pool(tmp_path, CONF), holders + [opts], 2.0, 2.0 * len(holders) + 6.0)
    job = engine.jobs[len(holders) + 1]
    assert job.state == "RUNNING"
    assert per_node(job) == want


def test_fewer_gpus_than_the_listed_nodes_is_sbatchs_refusal():
    with pytest.raises(InputError, match="fewer GPUs than the 3 nodes"):
        workload("j", "-t 5 --gpus=2 -w gpu[01-03]", 0.0, 1)


def test_more_gpus_than_the_partition_holds_is_refused(tmp_path):
    """``--gpus=40 -w gpu01`` on 32 GPUs: "Requested node configuration is not available"."""
    engine, _ = run_spaced(slurm_pool(tmp_path, CONF), ["--gpus=40 -w gpu01"], 1.0, 5)
    assert (engine.jobs[1].state, engine.jobs[1].reason) == ("REJECTED", "Requested node configuration is not available")


def test_a_pending_walk_beside_a_list_records_the_hosts(tmp_path):
    """sbatch gives ``--gpus=20 -w gpu01,gpu02`` a task a listed node and slurmctld raises the
    least nodes to them: cpu=2,node=2 (from the source; a walk records one node's otherwise)."""
    assert pending_tres(tmp_path, CONF, HOLD_ALL, "--gpus=20 -w gpu01,gpu02") == (2, 200, 2)


# --- from the 22.05.8 source, not probed (found by a read-only review of finding 97) --------


@pytest.mark.parametrize("extra,opts,want", [
    ("DefCpuPerGPU=2\n", "--gpus=4 -w gpu01,gpu02", [(0, 6, 600, 3), (1, 2, 200, 1)]),
    ("DefCpuPerGPU=2\n", "--gpus=3 -w gpu01,gpu02", [(0, 4, 400, 2), (1, 2, 200, 1)]),  # probe p160
    ("DefCpuPerGPU=4\n", "--gpus=3 -w gpu01,gpu02", [(0, 8, 800, 2), (1, 4, 400, 1)]),  # probe p160
    ("DefCpuPerGPU=2\n", "--gpus=16 -w gpu01,gpu02", [(0, 16, 1600, 8), (1, 16, 1600, 8)]),
])
def test_under_def_cpu_per_gpu_a_list_is_walked_from_its_hosts(tmp_path, extra, opts, want):
    """DefCpuPerGPU beside DefMemPerCPU walks a listed ``--gpus`` as without it, the GPUs dealt
    out from the hosts, each node's CPUs dealt from the job's C × X and its memory per CPU for
    them (a real 22.05.8 at DefCpuPerGPU=2 ran ``--gpus=3 -w gpu01,gpu02`` as 2 + 1 GPUs with
    4 + 2 CPUs, 400 + 200 MB; probe p160; gpupool kept the hosts' even 2 + 2 before)."""
    engine, _ = run_spaced(slurm_pool(tmp_path, CONF + extra), [opts], 1.0, 5)
    job = engine.jobs[1]
    assert job.state == "RUNNING"
    assert sorted((n, c // 1000, m, g.bit_count()) for n, g, c, m in job.placement) == want


@pytest.mark.parametrize("opts,want", [
    ("--gpus=4 -w gpu01,gpu02 --mem=1000", (2, 2000, 2)),  # --mem per node, for each host
    ("-n3 --gpus=4 -w gpu01,gpu02 --mem=500", (3, 1000, 2)),
    ("--gpus=4 -w gpu01,gpu02 -c4", (8, 800, 2)),  # sbatch gave a task each host
])
def test_a_pending_listed_walk_records_what_its_hosts_ask(tmp_path, opts, want):
    assert pending_tres(tmp_path, CONF, HOLD_ALL, opts) == want


@pytest.mark.parametrize("epl,want", [("NO", ("PENDING", "PartitionNodeLimit")),
                                      ("ALL", ("REJECTED", "Node count specification invalid"))])
def test_a_cut_list_below_minnodes_meets_the_node_limits(tmp_path, epl, want):
    """``-n2 --gpus=3 -w gpu[01-03]``: sbatch sent min=max=2 nodes, below MinNodes=3."""
    conf = CONF + f"EnforcePartLimits={epl}\nPartitionName=m3 Nodes=gpu[01-04] MinNodes=3 MaxTime=60\n"
    engine, _ = run_spaced(slurm_pool(tmp_path, conf), ["-p m3 -n2 --gpus=3 -w gpu[01-03]"], 1.0, 5)
    assert (engine.jobs[1].state, engine.jobs[1].reason) == want


@pytest.mark.parametrize("extra,opts,mem", [
    ("", "--gpus=4 -w gpu01,gpu02 --mem=0", 128000),  # a node's whole memory for each host, once
    ("", "-N1-3 --gpus=8 -w gpu01,gpu02 --mem=0", 128000),
    ("DefMemPerNode=1000\n", "--gpus=4 -w gpu01,gpu02", 2000),
])
def test_memory_per_node_counts_once_for_each_host(tmp_path, extra, mem, opts):
    """``job_get_tres_mem`` without an allocation: memory per node × min_nodes, the hosts (a
    second review found it counted twice for each host)."""
    conf = (CONF.replace("DefMemPerCPU=100\n", "") if extra else CONF) + extra
    assert pending_tres(tmp_path, conf, HOLD_ALL, opts)[1] == mem


def test_a_cut_list_off_the_walk_for_its_defaults_keeps_gpupools_own_refusal(tmp_path):
    """``-n2 --gpus=3 -w gpu[01-03]`` (cut to two hosts) kept off the walk by DefCpuPerGPU beside
    DefMemPerCPU is one pod no node holds: refused in gpupool's own words, as without the cut."""
    from gpupool.policy.slurm.job_defaults import MSG_UNWALKED

    for opts in ("-n2 --gpus=3 -w gpu[01-03]", "-n2 --gpus=3 -w gpu01,gpu02"):
        (root := tmp_path / str(len(opts))).mkdir()
        engine, _ = run_spaced(slurm_pool(root, CONF + "DefCpuPerGPU=2\n"), [opts], 1.0, 5)
        assert (engine.jobs[1].state, engine.jobs[1].reason) == ("REJECTED", MSG_UNWALKED), opts


def test_a_cut_list_below_minnodes_records_its_mem_for_each_host(tmp_path):
    """``-n2 --gpus=3 -w gpu[01-03] --mem=500`` (one pod of two tasks, sent min=max=2) waits in
    a MinNodes=3 partition and records 500 MB for each of its two nodes (found by a review)."""
    conf = CONF + "EnforcePartLimits=NO\nPartitionName=m3 Nodes=gpu[01-04] MinNodes=3 MaxTime=60\n"
    assert pending_tres(tmp_path, conf, HOLD_ALL, "-p m3 -n2 --gpus=3 -w gpu[01-03] --mem=500") == (2, 1000, 2)
