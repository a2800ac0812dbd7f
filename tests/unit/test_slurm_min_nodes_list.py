"""A ``--nodelist`` alone (or beside ``--ntasks-per-node``) below a partition's MinNodes
(docs/differential.md, finding 99): slurmctld raises the job's least node count to MinNodes
(``_valid_job_part``), so the job takes the listed nodes and as many more as MinNodes asks
(``min_nodes._raised_list``); under EnforcePartLimits=ALL sbatch's own node-count test refuses
it first.

Every expectation is what a real 22.05.8 did (probe p161, 2026-12-06) on four 16-core 8-GPU
64000 MB nodes (CR_Core_Memory, DefMemPerCPU=100) with partition p (default) and m (MinNodes=3)
over all of them, each job alone on idle nodes; pending jobs behind four exclusive holders,
their ReqTRES as (cpu, MB, node). At the commit before this finding gpupool left the five
raised shapes waiting with PartitionNodeLimit (9 of 19 answers agreed).
"""
from __future__ import annotations

import pytest

from tests.unit.sbatch_plans import run_spaced, slurm_pool
from tests.unit.test_slurm_def_cpu_per_gpu import BASE
from tests.unit.test_slurm_gpu_walk_range_listed import per_node

#: probe p161's slurm.conf: p160's nodes and partition p, and m over all four with MinNodes=3
CONF = (BASE.replace("ClusterName=p160", "ClusterName=p161").format(extra="DefMemPerCPU=100\nEnforcePartLimits={epl}")
        + "PartitionName=m Nodes=gpu[01-04] MinNodes=3 MaxTime=60 State=UP\n")
HOLD_ALL = [f"-p p -w gpu0{i} --exclusive" for i in range(1, 5)]

#: (the job, its (node index, CPUs, MB, GPUs) per node or its state and reason), EnforcePartLimits=NO
RUNNING = [
    ("-p m -w gpu01,gpu02", [(0, 1, 100, 0), (1, 1, 100, 0), (2, 1, 100, 0)]),
    ("-p m -w gpu01,gpu02 --gres=gpu:1", [(0, 1, 100, 1), (1, 1, 100, 1), (2, 1, 100, 1)]),
    ("-p m -n2 --ntasks-per-node=1 -w gpu01,gpu02", [(0, 1, 100, 0), (1, 1, 100, 0), (2, 1, 100, 0)]),
    ("-p m --ntasks-per-node=2 -w gpu01,gpu02", [(0, 2, 200, 0), (1, 2, 200, 0), (2, 2, 200, 0)]),
    ("-p m -n4 -w gpu01,gpu02", [(0, 2, 200, 0), (1, 1, 100, 0), (2, 1, 100, 0)]),
    ("-p m -n2 -w gpu01,gpu02", [(0, 1, 100, 0), (1, 1, 100, 0), (2, 1, 100, 0)]),
    ("-p m --gpus=4 -w gpu01,gpu02", [(0, 1, 100, 2), (1, 1, 100, 1), (2, 1, 100, 1)]),
    ("-p m -N2 -w gpu01,gpu02", ("PENDING", "PartitionNodeLimit")),  # --nodes given: not raised
    ("-p m -w gpu01", [(0, 1, 100, 0), (1, 1, 100, 0), (2, 1, 100, 0)]),
    ("-p m -w gpu02,gpu04 -c2", [(1, 2, 200, 0), (2, 2, 200, 0), (3, 2, 200, 0)]),
]

PENDING = [
    ("-p m -w gpu01,gpu02", (2, 200, 3)),
    ("-p m -w gpu01,gpu02 --mem=500", (2, 1500, 3)),
    ("-p m -n2 --ntasks-per-node=1 -w gpu01,gpu02", (2, 200, 3)),
    ("-p m --ntasks-per-node=2 -w gpu01,gpu02", (4, 400, 3)),
    ("-p m -w gpu02,gpu04 -c2", (4, 400, 3)),
]

#: EnforcePartLimits=ALL: sbatch's node count (the list's) fails m's MinNodes at submit
UNDER_ALL = [
    ("-p m -w gpu01,gpu02", ("REJECTED", "Node count specification invalid")),
    ("-p m --ntasks-per-node=2 -w gpu01,gpu02", ("REJECTED", "Node count specification invalid")),
    ("-p m,p -w gpu01,gpu02", ("REJECTED", "Node count specification invalid")),
    ("-p m -w gpu[01-04]", [(0, 1, 100, 0), (1, 1, 100, 0), (2, 1, 100, 0), (3, 1, 100, 0)]),
]


def _outcome(job):
    return per_node(job) if job.state == "RUNNING" else (job.state, job.reason)


@pytest.mark.parametrize("opts,want", RUNNING, ids=[c[0] for c in RUNNING])
def test_a_list_below_minnodes_takes_more_nodes_as_on_a_real_slurm(tmp_path, opts, want):
    engine, _ = run_spaced(slurm_pool(tmp_path, CONF.format(epl="NO")), [opts], 2.0, 6.0)
    assert _outcome(engine.jobs[1]) == want


@pytest.mark.parametrize("opts,want", PENDING, ids=[c[0] for c in PENDING])
def test_a_pending_raised_list_records_what_the_real_system_recorded(tmp_path, opts, want):
    engine, pol = run_spaced(slurm_pool(tmp_path, CONF.format(epl="NO")), HOLD_ALL + [opts], 2.0, 14.0)
    job = engine.jobs[len(HOLD_ALL) + 1]
    assert (job.state, job.reason) == ("PENDING", "Resources")
    tres = pol.req(job).req_tres
    assert (tres["cpu"], tres["mem"], tres["node"]) == want


@pytest.mark.parametrize("opts,want", UNDER_ALL, ids=[c[0] for c in UNDER_ALL])
def test_under_enforce_all_the_list_count_is_refused_first(tmp_path, opts, want):
    engine, _ = run_spaced(slurm_pool(tmp_path, CONF.format(epl="ALL")), [opts], 2.0, 6.0)
    assert _outcome(engine.jobs[1]) == want


# --- from the 22.05.8 source, not probed (found by a read-only review of finding 99) --------


@pytest.mark.parametrize("opts,want", [
    # 3 GPUs a host kept even (not spread): raised, 2 a node as -N3 gives them, not 3 (9 GPUs)
    ("-p m --gpus=6 --cpus-per-gpu=2 --ntasks-per-node=1 -w gpu01,gpu02", [(0, 4, 400, 2), (1, 4, 400, 2), (2, 4, 400, 2)]),
    # memory per CPU follows the share's CPUs (4 CPUs × 300 MB a node)
    ("-p m --gpus=6 --cpus-per-gpu=2 --ntasks-per-node=1 --mem-per-cpu=300 -w gpu01,gpu02",
     [(0, 4, 1200, 2), (1, 4, 1200, 2), (2, 4, 1200, 2)]),
    # an exclusive even share takes three whole nodes, as -N3 does
    ("-p m --gpus=6 --ntasks-per-node=1 --exclusive -w gpu01,gpu02", [(0, 16, 1600, 8), (1, 16, 1600, 8), (2, 16, 1600, 8)]),
    # 4 does not divide over three nodes: left as it was, waiting with PartitionNodeLimit
    ("-p m --gpus=4 --cpus-per-gpu=2 --ntasks-per-node=1 -w gpu01,gpu02", ("PENDING", "PartitionNodeLimit")),
    # GPUs per task follow each node's K tasks
    ("-p m -n4 --ntasks-per-node=2 --gpus-per-task=1 -w gpu01,gpu02", [(0, 2, 200, 2), (1, 2, 200, 2), (2, 2, 200, 2)]),
    # ⌈T/K⌉ = 3 nodes reach MinNodes already: the stored least (the hosts) is raised to it
    ("-p m -n6 --ntasks-per-node=2 -w gpu01,gpu02", [(0, 2, 200, 0), (1, 2, 200, 0), (2, 2, 200, 0)]),
])
def test_other_raised_list_shapes(tmp_path, opts, want):
    """Found by read-only reviews of finding 99 (source, not probed)."""
    engine, _ = run_spaced(slurm_pool(tmp_path, CONF.format(epl="NO")), [opts], 2.0, 6.0)
    assert _outcome(engine.jobs[1]) == want


def test_fewer_gpus_than_minnodes_beside_a_list_is_refused(tmp_path):
    """sbatch sends the hosts as the least count, ``_valid_job_part`` raises it to MinNodes,
    and ``gres_job_state_validate`` then refuses ``--gpus=2`` on three nodes ("--gpus < -N"),
    as without the list (it waited for ever before)."""
    engine, _ = run_spaced(slurm_pool(tmp_path, CONF.format(epl="NO")), ["-p m --gpus=2 -w gpu01,gpu02"], 2.0, 6.0)
    assert _outcome(engine.jobs[1]) == ("REJECTED", "Invalid generic resource (gres) specification")
