"""DefCpuPerGPU, ``--cpus-per-gpu`` and memory per CPU beside ``--gpus=X`` (docs/differential.md,
finding 98): the walk and the spread deal the job's GPUs out as without them, each node's CPUs
from the job's C × X (``spread_gpus._cpus_dealt``) and its memory per CPU (DefMemPerCPU,
``--mem-per-cpu``, MaxMemPerCPU's lowered rate) for those CPUs; a node offers the walk the GPUs
its free CPUs pay for under DefCpuPerGPU too (``near_gpus.gpu_weights``); ``-n T --gpus=X``
under DefCpuPerGPU walks as ``--cpus-per-gpu`` beside T tasks
(``job_defaults._default_cpus_per_gpu_tasks``).

Every expectation is what a real 22.05.8 did (probe p160, 2026-12-06) on four 16-core 8-GPU
64000 MB nodes (CR_Core_Memory, priority/basic), each job alone behind its holders; pending
jobs behind four exclusive holders, their ReqTRES as (cpu, MB, node). At the commit before
this finding gpupool agreed with 28 of these 94 answers.
"""
from __future__ import annotations

import pytest

from tests.unit.sbatch_plans import run_spaced, slurm_pool
from tests.unit.test_slurm_gpu_walk_range_listed import per_node

BASE = """ClusterName=p160
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
SchedulerType=sched/backfill
SchedulerParameters=bf_interval=30
PriorityType=priority/basic
GresTypes=gpu
{extra}
NodeName=gpu[01-04] CPUs=16 Boards=1 SocketsPerBoard=1 CoresPerSocket=16 ThreadsPerCore=1 RealMemory=64000 Gres=gpu:8
PartitionName=p Nodes=gpu[01-04] Default=YES MaxTime=60 State=UP
"""
DEF_CPG2 = BASE.format(extra="DefCpuPerGPU=2\nDefMemPerCPU=100")
DEF_CPG4 = BASE.format(extra="DefCpuPerGPU=4\nDefMemPerCPU=100")
MEM_PER_CPU = BASE.format(extra="DefMemPerCPU=100")
DEF_CPG2_MAX = BASE.format(extra="DefCpuPerGPU=2\nDefMemPerCPU=100\nMaxMemPerCPU=200")
HOLD_ALL = ["-w gpu01 --exclusive", "-w gpu02 --exclusive", "-w gpu03 --exclusive", "-w gpu04 --exclusive"]

#: (slurm.conf, holders, the job, its (node index, CPUs, MB, GPUs) per node)
RUNNING = [
    (DEF_CPG2, [], "--gpus=3", [(0, 6, 600, 3)]),
    (DEF_CPG2, [], "--gpus=12", [(0, 16, 1600, 8), (1, 8, 800, 4)]),
    (DEF_CPG2, [], "--gpus=20", [(0, 16, 1600, 8), (1, 16, 1600, 8), (2, 8, 800, 4)]),
    (DEF_CPG2, [], "--gpus=12 --mem=100", [(0, 16, 100, 8), (1, 8, 100, 4)]),
    (DEF_CPG2, [], "-n2 --gpus=12", [(0, 16, 1600, 8), (1, 8, 800, 4)]),
    (DEF_CPG2, [], "-N2 --gpus=12", [(0, 16, 1600, 8), (1, 8, 800, 4)]),
    (DEF_CPG2, [], "-N1-3 --gpus=12", [(0, 16, 1600, 8), (1, 8, 800, 4)]),
    (DEF_CPG2, [], "--gpus=3 -w gpu01,gpu02", [(0, 4, 400, 2), (1, 2, 200, 1)]),
    (DEF_CPG2, [], "--gpus=12 -w gpu02", [(1, 16, 1600, 8), (2, 8, 800, 4)]),
    (DEF_CPG2, ['-w gpu01 -c12'], "--gpus=12", [(1, 16, 1600, 8), (2, 8, 800, 4)]),
    (DEF_CPG2, ['-w gpu01 -c12'], "--gpus=4", [(1, 8, 800, 4)]),
    (DEF_CPG2, [], "--gpus=6 --mem-per-gpu=100", [(0, 12, 600, 6)]),
    (DEF_CPG4, [], "--gpus=3", [(0, 12, 1200, 3)]),
    (DEF_CPG4, [], "--gpus=12", [(0, 16, 1600, 8), (1, 16, 1600, 3), (2, 16, 1600, 1)]),
    (DEF_CPG4, [], "--gpus=12 --mem=100", [(0, 16, 100, 8), (1, 16, 100, 3), (2, 16, 100, 1)]),
    (DEF_CPG4, [], "-N1-3 --gpus=12", [(0, 16, 1600, 8), (1, 16, 1600, 3), (2, 16, 1600, 1)]),
    (DEF_CPG4, [], "--gpus=3 -w gpu01,gpu02", [(0, 8, 800, 2), (1, 4, 400, 1)]),
    (DEF_CPG4, [], "--gpus=12 -w gpu02", [(1, 16, 1600, 8), (2, 16, 1600, 3), (3, 16, 1600, 1)]),
    (DEF_CPG4, ['-w gpu01 -c12'], "--gpus=12", [(1, 16, 1600, 8), (2, 16, 1600, 3), (3, 16, 1600, 1)]),
    (DEF_CPG4, ['-w gpu01 -c12'], "--gpus=4", [(1, 16, 1600, 4)]),
    (DEF_CPG4, [], "--gpus=6 --mem-per-gpu=100", [(0, 16, 500, 5), (1, 8, 100, 1)]),
    (DEF_CPG2, [], "--gpus=12 --cpus-per-gpu=1", [(0, 8, 800, 8), (1, 4, 400, 4)]),
    (DEF_CPG2, [], "--gpus=12 --cpus-per-gpu=3", [(0, 15, 1500, 8), (1, 15, 1500, 3), (2, 6, 600, 1)]),
    (DEF_CPG2, [], "-N2 --gpus=12 --cpus-per-gpu=1", [(0, 8, 800, 8), (1, 4, 400, 4)]),
    (DEF_CPG2, [], "-N1-3 --gpus=12 --cpus-per-gpu=3", [(0, 15, 1500, 8), (1, 15, 1500, 3), (2, 6, 600, 1)]),
    (DEF_CPG2, [], "--gpus=12 --mem-per-cpu=200", [(0, 16, 3200, 8), (1, 8, 1600, 4)]),
    (DEF_CPG2, [], "-n3 --gpus=12", [(0, 16, 1600, 8), (1, 8, 800, 4)]),
    (DEF_CPG2, [], "--gpus=12 -c2", [(0, 2, 200, 8), (1, 2, 200, 4)]),
    (DEF_CPG2, ['-w gpu01 -c1 --mem=63000'], "--gpus=12", [(1, 16, 1600, 8), (2, 8, 800, 4)]),
    (DEF_CPG2, ['-w gpu01 -c1 --mem=63500', '-w gpu02 -c1 --mem=63500'], "--gpus=12", [(2, 16, 1600, 8), (3, 8, 800, 4)]),
    (MEM_PER_CPU, [], "--gpus=12 --cpus-per-gpu=1", [(0, 8, 800, 8), (1, 4, 400, 4)]),
    (MEM_PER_CPU, [], "--gpus=12 --cpus-per-gpu=3", [(0, 15, 1500, 8), (1, 15, 1500, 3), (2, 6, 600, 1)]),
    (MEM_PER_CPU, [], "-N2 --gpus=12 --cpus-per-gpu=1", [(0, 8, 800, 8), (1, 4, 400, 4)]),
    (MEM_PER_CPU, [], "-N1-3 --gpus=12 --cpus-per-gpu=3", [(0, 15, 1500, 8), (1, 15, 1500, 3), (2, 6, 600, 1)]),
    (MEM_PER_CPU, [], "--gpus=12 --mem-per-cpu=200", [(0, 1, 200, 8), (1, 1, 200, 4)]),
    (MEM_PER_CPU, [], "-n3 --gpus=12", [(0, 2, 200, 8), (1, 1, 100, 4)]),
    (MEM_PER_CPU, [], "--gpus=12 -c2", [(0, 2, 200, 8), (1, 2, 200, 4)]),
    (MEM_PER_CPU, ['-w gpu01 -c1 --mem=63000'], "--gpus=12", [(0, 1, 100, 8), (1, 1, 100, 4)]),
    (MEM_PER_CPU, ['-w gpu01 -c1 --mem=63500', '-w gpu02 -c1 --mem=63500'], "--gpus=12", [(0, 1, 100, 8), (1, 1, 100, 4)]),
    (MEM_PER_CPU, [], "--gpus=12 --cpus-per-gpu=2 --mem-per-cpu=100", [(0, 16, 1600, 8), (1, 8, 800, 4)]),
    (MEM_PER_CPU, [], "-N2 --gpus=12 --cpus-per-gpu=2 --mem-per-cpu=100", [(0, 16, 1600, 8), (1, 8, 800, 4)]),
    (MEM_PER_CPU, [], "-n2 --gpus=12 --cpus-per-gpu=2 --mem-per-cpu=100", [(0, 16, 1600, 8), (1, 8, 800, 4)]),
    (MEM_PER_CPU, [], "-N1-3 --gpus=12 --cpus-per-gpu=3 --mem-per-cpu=200", [(0, 15, 3000, 8), (1, 15, 3000, 3), (2, 6, 1200, 1)]),
    (MEM_PER_CPU, [], "-n2 --gpus=12 --cpus-per-gpu=2", [(0, 16, 1600, 8), (1, 8, 800, 4)]),
    (MEM_PER_CPU, [], "-N2 --gpus=3 --cpus-per-gpu=4", [(0, 8, 800, 2), (1, 4, 400, 1)]),
    (MEM_PER_CPU, ['-w gpu01 -c1 --mem=63000'], "--gpus=12 --cpus-per-gpu=2 --mem-per-cpu=100", [(1, 16, 1600, 8), (2, 8, 800, 4)]),
    (DEF_CPG2, ['-w gpu01 -c12 --mem=100'], "--gpus=12 --mem=100", [(1, 16, 100, 8), (2, 8, 100, 4)]),
    (DEF_CPG2, [], "-n2 --gpus=12 --mem=100", [(0, 16, 100, 8), (1, 8, 100, 4)]),
    (DEF_CPG2, [], "-n4 --gpus=16", [(0, 16, 1600, 8), (1, 16, 1600, 8)]),
    (DEF_CPG2, [], "-n2 --gpus=4", [(0, 8, 800, 4)]),
    (DEF_CPG2, [], "--gpus=12 -w gpu01,gpu03", [(0, 16, 1600, 8), (2, 8, 800, 4)]),
    (DEF_CPG2_MAX, [], "--gpus=12", [(0, 16, 1600, 8), (1, 8, 800, 4)]),
    (DEF_CPG2_MAX, [], "-N2 --gpus=12", [(0, 16, 1600, 8), (1, 8, 800, 4)]),
    (DEF_CPG2_MAX, [], "--gpus=3", [(0, 6, 600, 3)]),
    (DEF_CPG2_MAX, [], "--gpus=12 --mem-per-cpu=300", [(0, 16, 2400, 8), (1, 8, 1200, 4)]),
    # --cpus-per-gpu beside a --nodelist (the reader refused these before)
    (MEM_PER_CPU, [], "--gpus=12 --cpus-per-gpu=2 -w gpu02", [(1, 16, 1600, 8), (2, 8, 800, 4)]),
    (MEM_PER_CPU, [], "--gpus=12 --cpus-per-gpu=2 -w gpu04", [(2, 8, 800, 8), (3, 16, 1600, 4)]),
    (MEM_PER_CPU, [], "--gpus=12 --cpus-per-gpu=3 -w gpu01,gpu02", [(0, 15, 1500, 8), (1, 15, 1500, 3), (2, 6, 600, 1)]),
    (MEM_PER_CPU, [], "--gpus=3 --cpus-per-gpu=2 -w gpu01,gpu02", [(0, 4, 400, 2), (1, 2, 200, 1)]),
    (MEM_PER_CPU, [], "-N1-3 --gpus=8 --cpus-per-gpu=2 -w gpu02", [(1, 16, 1600, 8)]),
    (MEM_PER_CPU, [], "-N1-3 --gpus=12 --cpus-per-gpu=2 -w gpu03", [(2, 16, 1600, 8), (3, 8, 800, 4)]),
    (MEM_PER_CPU, [], "-N2 --gpus=4 --cpus-per-gpu=2 -w gpu01,gpu02", [(0, 6, 600, 3), (1, 2, 200, 1)]),
    (MEM_PER_CPU, ['-w gpu02 -c12'], "--gpus=12 --cpus-per-gpu=2 -w gpu02", [(1, 4, 400, 8), (2, 16, 1600, 3), (3, 4, 400, 1)]),
    (MEM_PER_CPU, ['-w gpu03 -c12'], "--gpus=12 --cpus-per-gpu=2 -w gpu02", [(0, 8, 800, 8), (1, 16, 1600, 4)]),
    (MEM_PER_CPU, [], "-n2 --gpus=12 --cpus-per-gpu=2 -w gpu02", [(1, 16, 1600, 8), (2, 8, 800, 4)]),
    # a fixed count beside a --nodelist: the CPUs go out in the order the nodes are taken, the
    # listed ones first, then upwards and downwards from them (found by a review)
    (MEM_PER_CPU, ['-w gpu04 --exclusive'], "-N2 --gpus=12 --cpus-per-gpu=2 -w gpu03", [(1, 8, 800, 8), (2, 16, 1600, 4)]),
    (MEM_PER_CPU, [], "-N2 --gpus=12 --cpus-per-gpu=2 -w gpu04", [(2, 8, 800, 8), (3, 16, 1600, 4)]),
    (MEM_PER_CPU, [], "-N3 --gpus=12 --cpus-per-gpu=3 -w gpu04", [(1, 6, 600, 8), (2, 15, 1500, 3), (3, 15, 1500, 1)]),
    (MEM_PER_CPU, [], "-N2 --gpus=12 --cpus-per-gpu=2 -w gpu02", [(1, 16, 1600, 8), (2, 8, 800, 4)]),
    (DEF_CPG2, [], "-N2 --gpus=12 -w gpu04", [(2, 8, 800, 8), (3, 16, 1600, 4)]),
    (DEF_CPG2, ['-w gpu04 --exclusive'], "-N2 --gpus=12 -w gpu03", [(1, 8, 800, 8), (2, 16, 1600, 4)]),
    # without a list too: the CPUs in the order the nodes are taken (the run gpu03-04 before gpu01)
    (MEM_PER_CPU, ['-w gpu02 --exclusive'], "-N3 --gpus=12 --cpus-per-gpu=3", [(0, 6, 600, 8), (2, 15, 1500, 3), (3, 15, 1500, 1)]),
    (MEM_PER_CPU, ['-w gpu02 --exclusive'], "-N3 --gpus=12 --cpus-per-gpu=3 --mem=100", [(0, 6, 100, 8), (2, 15, 100, 3), (3, 15, 100, 1)]),
    (MEM_PER_CPU, ['-w gpu01 -c14'], "-N2 --gpus=12 --cpus-per-gpu=2", [(1, 16, 1600, 8), (2, 8, 800, 4)]),
]

REFUSED = [
    (DEF_CPG4, "--gpus=20"),
    (DEF_CPG4, "-n2 --gpus=12"),
    (DEF_CPG4, "-N2 --gpus=12"),
]

PENDING = [
    (DEF_CPG2, "--gpus=12", (1, 100, 1)),
    (DEF_CPG2, "--gpus=3", (1, 100, 1)),
    (DEF_CPG2, "-N1-3 --gpus=12", (1, 100, 1)),
    (DEF_CPG2, "--gpus=12 -w gpu02", (1, 100, 1)),
    (DEF_CPG2, "--gpus=3 -w gpu01,gpu02", (2, 200, 2)),
    (DEF_CPG2, "-N2 --gpus=12", (2, 200, 2)),
    (DEF_CPG2, "--gpus=12 --cpus-per-gpu=3", (1, 100, 1)),
    (MEM_PER_CPU, "--gpus=12", (1, 100, 1)),
    (MEM_PER_CPU, "--gpus=3", (1, 100, 1)),
    (MEM_PER_CPU, "-N1-3 --gpus=12", (1, 100, 1)),
    (MEM_PER_CPU, "--gpus=12 -w gpu02", (1, 100, 1)),
    (MEM_PER_CPU, "--gpus=3 -w gpu01,gpu02", (2, 200, 2)),
    (MEM_PER_CPU, "-N2 --gpus=12", (2, 200, 2)),
    (MEM_PER_CPU, "--gpus=12 --cpus-per-gpu=3", (1, 100, 1)),
    (MEM_PER_CPU, "--gpus=12 --cpus-per-gpu=2 --mem-per-cpu=100", (1, 100, 1)),
    (DEF_CPG2, "-n2 --gpus=12", (2, 200, 1)),
    (DEF_CPG2, "-n2 --gpus=12 --mem=100", (2, 100, 1)),
]

_NAMES = {id(DEF_CPG2): "cpg2", id(DEF_CPG4): "cpg4", id(MEM_PER_CPU): "mpc", id(DEF_CPG2_MAX): "cpg2max"}


def _job(tmp_path, conf: str, holders: list[str], opts: str):
    engine, pol = run_spaced(slurm_pool(tmp_path, conf), holders + [opts], 2.0, 2.0 * len(holders) + 6.0)
    return engine.jobs[len(holders) + 1], pol


@pytest.mark.parametrize("conf,holders,opts,want", RUNNING,
                         ids=[f"{_NAMES[id(c[0])]}-{len(c[1])}-{c[2]}" for c in RUNNING])
def test_each_node_gets_what_the_real_system_gave(tmp_path, conf, holders, opts, want):
    job, _ = _job(tmp_path, conf, holders, opts)
    assert job.state == "RUNNING"
    assert per_node(job) == want


@pytest.mark.parametrize("conf,opts", REFUSED, ids=[f"{_NAMES[id(c[0])]}-{c[1]}" for c in REFUSED])
def test_more_cpus_than_the_nodes_hold_is_refused_at_submit(tmp_path, conf, opts):
    """DefCpuPerGPU=4's 80 CPUs for ``--gpus=20``, or 48 on the two nodes ``-n2``/``-N2`` allow,
    are more than 16-core nodes hold: "Requested node configuration is not available"."""
    job, _ = _job(tmp_path, conf, [], opts)
    assert (job.state, job.reason) == ("REJECTED", "Requested node configuration is not available")


@pytest.mark.parametrize("conf,opts,want", PENDING, ids=[f"{_NAMES[id(c[0])]}-{c[1]}" for c in PENDING])
def test_a_pending_job_records_what_the_real_system_recorded(tmp_path, conf, opts, want):
    job, pol = _job(tmp_path, conf, HOLD_ALL, opts)
    assert job.state == "PENDING"
    tres = pol.req(job).req_tres
    assert (tres["cpu"], tres["mem"], tres["node"]) == want


# --- from the 22.05.8 source, not probed (found by a read-only review of finding 98) --------

#: two threads a core (8 cores of 2 CPUs), as the probe's nodes otherwise
TWO_THREADS = BASE.replace("CoresPerSocket=16 ThreadsPerCore=1", "CoresPerSocket=8 ThreadsPerCore=2")


@pytest.mark.parametrize("extra,opts", [
    ("DefCpuPerGPU=2\nDefMemPerCPU=100", "-N2 -w gpu01,gpu02 --gpus=12"),
    ("DefMemPerCPU=100", "-N2 -w gpu01,gpu02 --gpus=12 --cpus-per-gpu=2 --mem-per-cpu=100"),
])
def test_free_memory_caps_a_nodes_cpus_in_whole_cores(tmp_path, extra, opts):
    """950 MB free on gpu01 pays for 9 CPUs at 100 MB: cons_tres's ``can_job_run_on_node`` cuts
    them to whole cores, 8, so the job runs (an odd count, rounded up to a core later, needed
    memory the node lacks and the job waited)."""
    job, _ = _job(tmp_path, TWO_THREADS.format(extra=extra), ["-w gpu01 -c2 --mem=63050"], opts)
    assert job.state == "RUNNING"
    assert per_node(job) == [(0, 8, 800, 8), (1, 16, 1600, 4)]


@pytest.mark.parametrize("opts", ["-N2 -w gpu01,gpu02 --gpus=12 --cpus-per-gpu=1 --mem-per-cpu=100",
                                  "-N2 -w gpu01,gpu02 --gpus=12 -c1 --mem-per-cpu=100"])
def test_def_mem_per_gpu_caps_a_nodes_gpus_whatever_memory_was_asked(tmp_path, opts):
    """DefMemPerGPU=1000 and 3000 MB free on gpu01: the GRES filter caps it at 3 GPUs
    (``gres_select_filter``, ``def_mem_per_gres`` from DefMemPerGPU for every job), so 3 + 8
    fall short of 12 and the job waits rather than taking 8 GPUs there."""
    conf = BASE.format(extra="DefMemPerGPU=1000\nDefMemPerCPU=100")
    job, _ = _job(tmp_path, conf, ["-w gpu01 -c1 --mem=61000"], opts)
    assert (job.state, job.reason) == ("PENDING", "Resources")


#: the probe's nodes in two partitions: a (gpu01-02, untyped GPUs, the default) and b (gpu03-04,
#: typed GPUs)
TWO_KINDS = MEM_PER_CPU.replace(
    "NodeName=gpu[01-04] CPUs=16 Boards=1 SocketsPerBoard=1 CoresPerSocket=16 ThreadsPerCore=1 RealMemory=64000 Gres=gpu:8\n"
    "PartitionName=p Nodes=gpu[01-04] Default=YES MaxTime=60 State=UP\n",
    "NodeName=gpu[01-02] CPUs=16 Boards=1 SocketsPerBoard=1 CoresPerSocket=16 ThreadsPerCore=1 RealMemory=64000 Gres=gpu:8\n"
    "NodeName=gpu[03-04] CPUs=16 Boards=1 SocketsPerBoard=1 CoresPerSocket=16 ThreadsPerCore=1 RealMemory=64000 "
    "Gres=gpu:a100:8\n"
    "PartitionName=a Nodes=gpu[01-02] Default=YES MaxTime=60 State=UP\n"
    "PartitionName=b Nodes=gpu[03-04] MaxTime=60 State=UP\n")


@pytest.mark.parametrize("opts,refused", [
    ("-p b --gpus=12 --cpus-per-gpu=2 -w gpu03", True),
    ("-p b -N2 --gpus=12 --cpus-per-gpu=2 -w gpu03", True),  # a fixed count deals from the list too
    ("-p a --gpus=12 --cpus-per-gpu=2 -w gpu01", False),
    ("-p a,b --gpus=12 --cpus-per-gpu=2 -w gpu01", False),  # b cannot hold the list: a runs it
    ("-p b,a --gpus=12 --cpus-per-gpu=2 -w gpu01", False),  # (waits on b's ReqNodeNotAvail as without it)
    ("-p b -N2 --gpus=4 --cpus-per-gpu=2 -w gpu03,gpu04", False),  # all its nodes listed: index order
    ("--gpus=12 --cpus-per-gpu=2 -w gpu01", False),  # the default partition a
    ("-p b --gpus=12 -c2 -w gpu03", False),  # CPUs per task: not dealt per GPU
])
def test_cpus_per_gpu_beside_a_list_is_refused_only_where_the_list_meets_typed_gpus(tmp_path, opts, refused):
    """On nodes whose GPUs have a type or ``Cores=`` cons_tres caps each node's GPUs by the CPUs
    it gives, in index order (source, not probed): gpupool refuses the job in its own words
    there, at submit in the engine and in the live daemon's check alike (a review found the
    daemon accepting what the engine then refused); only partitions that hold every listed host
    count (a review found ``-p a,b -w gpu01`` refused for b's typed GPUs)."""
    from gpupool.policy.slurm.job_defaults import MSG_LISTED_CPG
    from gpupool.policy.slurm.submit_check import submit_rejection
    from tests.unit.sbatch_plans import workload

    pool = slurm_pool(tmp_path, TWO_KINDS)
    engine, _ = run_spaced(pool, [opts], 1.0, 5.0)
    job = engine.jobs[1]
    daemon = submit_rejection(pool, workload("j", opts, 0.0, 1))
    if refused:
        assert (job.state, job.reason, daemon) == ("REJECTED", MSG_LISTED_CPG, MSG_LISTED_CPG)
    else:
        assert job.state in ("RUNNING", "PENDING") and daemon is None
