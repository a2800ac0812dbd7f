"""``--ntasks-per-node=K`` beside ``--ntasks=T``: select gives every node it takes K tasks'
CPUs, ⌈T/K⌉ nodes at least (more where a nodelist names more, or the partitions' MinNodes
raise a job that gave no ``--nodes``), while slurmctld's request counts the tasks as given
and the least nodes stored (1 where the job gave none). Every expectation is what a real
22.05.8 did on four 16-core 8-GPU nodes, DefMemPerCPU=100, a partition m of gpu03-04 with
MinNodes=2 (probes p149 to p151 and p154 to p156, docs/differential.md finding 91)."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.sbatch_plans import run_spaced, slurm_pool, workload
from tests.unit.test_slurm_range_request import ACCOUNTS, _limited, pending_tres
from tests.unit.test_slurm_split_tasks import CONF, _ids

#: (the probes' slurm.conf had EnforcePartLimits=ALL, as ``RealSlurm`` writes it)
MIN_NODES_CONF = CONF + "EnforcePartLimits=ALL\nPartitionName=m Nodes=gpu[03-04] MinNodes=2 MaxTime=60\n"

IDLE: list[str] = []
THREE_FREE_EACH = ["-w gpu01 -c13", "-w gpu02 -c13", "-w gpu03 -c13", "-w gpu04 -c13"]

#: (holders, the job, its pods as (node index, CPUs, MB, GPUs) or its state)
PLACED = [
    (IDLE, "-n10 --ntasks-per-node=4", [(0, 4, 400, 0), (1, 4, 400, 0), (2, 4, 400, 0)]),
    (IDLE, "-N2 -n2 --ntasks-per-node=2", [(0, 2, 200, 0), (1, 2, 200, 0)]),
    (IDLE, "-n2 --ntasks-per-node=2 -w gpu01,gpu02", [(0, 2, 200, 0), (1, 2, 200, 0)]),
    (IDLE, "-n6 --ntasks-per-node=2 -w gpu01,gpu02", [(0, 2, 200, 0), (1, 2, 200, 0), (2, 2, 200, 0)]),
    (IDLE, "-p m -n2 --ntasks-per-node=2", [(2, 2, 200, 0), (3, 2, 200, 0)]),
    (IDLE, "-p m -n6 --ntasks-per-node=4", [(2, 4, 400, 0), (3, 4, 400, 0)]),
    (IDLE, "-n10 --ntasks-per-node=4 --gres=gpu:1", [(0, 4, 400, 1), (1, 4, 400, 1), (2, 4, 400, 1)]),
    (IDLE, "-n10 --ntasks-per-node=4 --gpus-per-task=1", [(0, 4, 400, 4), (1, 4, 400, 4), (2, 4, 400, 4)]),
    (IDLE, "-n6 --ntasks-per-node=4 -c2", [(0, 8, 800, 0), (1, 8, 800, 0)]),
    (IDLE, "-n5 --ntasks-per-node=2 --exclusive", [(0, 16, 1600, 8), (1, 16, 1600, 8), (2, 16, 1600, 8)]),
    (THREE_FREE_EACH, "-n6 --ntasks-per-node=4", "PENDING"),  # no node offers 4 CPUs
    (THREE_FREE_EACH, "-n6 --ntasks-per-node=2", [(0, 2, 200, 0), (1, 2, 200, 0), (2, 2, 200, 0)]),
    (["-w gpu01 -c14"], "-n10 --ntasks-per-node=4", [(1, 4, 400, 0), (2, 4, 400, 0), (3, 4, 400, 0)]),
]


def _pods(tmp_path: Path, holders: list[str], job: str):
    engine, _ = run_spaced(slurm_pool(tmp_path, MIN_NODES_CONF), holders + [job], 2.0, 2.0 * len(holders) + 10)
    last = engine.jobs[len(holders) + 1]
    if last.state != "RUNNING":
        return last.state
    return sorted((node, cpu // 1000, mem, mask.bit_count()) for node, mask, cpu, mem in last.placement)


@pytest.mark.parametrize("holders,job,expected", PLACED, ids=_ids(PLACED))
def test_each_node_takes_k_tasks_as_on_the_real_system(tmp_path: Path, holders, job, expected) -> None:
    assert _pods(tmp_path, holders, job) == expected


#: (the job, pending behind THREE_FREE_EACH, its TRES= as (cpu, mem MB, node))
PENDING = [
    ("-n6 --ntasks-per-node=4", (6, 600, 1)),
    ("-n10 --ntasks-per-node=4 --mem-per-cpu=100", (10, 1000, 1)),
    ("-N3 -n10 --ntasks-per-node=4", (10, 1000, 3)),
    ("--ntasks-per-node=4 -N2", (8, 800, 2)),
    ("-n2 --ntasks-per-node=4 -w gpu01,gpu02", (2, 200, 2)),
    ("--ntasks-per-node=4 -w gpu01,gpu02", (8, 800, 2)),  # sbatch: T = the nodes × K
    ("-n10 --ntasks-per-node=4 --gres=gpu:1", (10, 1000, 1)),
    ("-p m -n2 --ntasks-per-node=4", (2, 200, 2)),  # MinNodes raised it
    ("-n10 --ntasks-per-node=4 -c2", (20, 2000, 1)),
    ("-n10 --ntasks-per-node=4 --mem=1000", (10, 1000, 1)),  # memory per node, one node
    ("-N1-3 -n10 --ntasks-per-node=4", (10, 1000, 1)),
    ("-n10 --ntasks-per-node=4 --gpus-per-task=1", (10, 1000, 1)),
    ("-n5 --ntasks-per-node=4 --exclusive", (5, 500, 1)),
]


@pytest.mark.parametrize("opts,want", PENDING, ids=[p[0] for p in PENDING])
def test_a_pending_job_records_the_tasks_and_nodes_it_gave(tmp_path: Path, opts: str, want) -> None:
    assert pending_tres(tmp_path, MIN_NODES_CONF, THREE_FREE_EACH, opts) == want


#: probe p150's queue, 1 s apart behind THREE_FREE_EACH, with each job's state and reason
PROBE_QUEUE = [
    ("-n6 --ntasks-per-node=4", "Resources"),
    ("-n10 --ntasks-per-node=4 --mem-per-cpu=100", "Priority"),
    ("-N3 -n10 --ntasks-per-node=4", "Priority"),
    ("--ntasks-per-node=4 -N2", "Priority"),
    ("-n2 --ntasks-per-node=4 -w gpu01,gpu02", "Priority"),
    ("-n10 --ntasks-per-node=4 --gres=gpu:1", "Priority"),
    # m's two nodes, both required, are in the plans of the jobs before it
    ("-p m -n2 --ntasks-per-node=4",
     "Nodes required for job are DOWN, DRAINED or reserved for jobs in higher priority partitions"),
    ("-p m -n10 --ntasks-per-node=4", "Requested node configuration is not available"),  # refused
    ("-n10 --ntasks-per-node=4 -c2", "Priority"),
    ("--ntasks-per-node=4 -w gpu01,gpu02", "Priority"),
    ("-n10 --ntasks-per-node=4 --mem=1000", "Priority"),
    ("-N1-3 -n10 --ntasks-per-node=4", "Priority"),
    ("-n10 --ntasks-per-node=4 --gpus-per-task=1", "Priority"),
    ("-n5 --ntasks-per-node=4 --exclusive", "Priority"),
]


def test_the_probe_queue_waits_for_the_real_system_reasons(tmp_path: Path) -> None:
    jobs = [opts for opts, _ in PROBE_QUEUE]
    engine, _ = run_spaced(slurm_pool(tmp_path, MIN_NODES_CONF), THREE_FREE_EACH + jobs, 1.0, 1.0 * 18 + 6)
    got = [engine.jobs[len(THREE_FREE_EACH) + 1 + k].reason for k in range(len(jobs))]
    assert got == [reason for _, reason in PROBE_QUEUE]


def test_more_nodes_than_a_min_nodes_partition_has_is_refused(tmp_path: Path) -> None:
    """⌈10/4⌉ = 3 nodes in a partition of two: sbatch's refusal (probe p150)."""
    engine, _ = run_spaced(slurm_pool(tmp_path, MIN_NODES_CONF), ["-p m -n10 --ntasks-per-node=4"], 1.0, 5)
    assert (engine.jobs[1].state, engine.jobs[1].reason) == (
        "REJECTED", "Requested node configuration is not available")


@pytest.mark.parametrize("opts,want", [
    ("-n10 --ntasks-per-node=4", (0, 10, 4)),
    ("--ntasks-per-node=4", (0, 4, 4)),
    ("-n2 --ntasks-per-node=2 -w gpu01,gpu02", (2, 2, 2)),
    ("--ntasks-per-node=3 -w gpu[01-03]", (3, 9, 3)),
    ("-N1-3 --ntasks-per-node=2", (1, 2, 2)),
    ("-N3 -n10 --ntasks-per-node=4", (3, 10, 4)),
    ("-N3 -n2 --ntasks-per-node=2", (2, 2, 2)),  # sbatch lowers -N to the tasks
])
def test_the_reader_keeps_the_stored_least_nodes_and_tasks(opts: str, want) -> None:
    assert workload("J", opts, 0.0, 1).pod_sets[0].per_node_tasks == want


def test_a_nodelist_of_more_nodes_raises_the_pods() -> None:
    """Each listed node takes K tasks (``-n2 --ntasks-per-node=2 -w gpu01,gpu02``: 2 + 2 CPUs)."""
    ps = workload("J", "-n2 --ntasks-per-node=2 -w gpu01,gpu02", 0.0, 1).pod_sets[0]
    assert (ps.count, ps.one_per_node, ps.cpu_m) == (2, True, 2000)


def test_other_requests_keep_no_per_node_tasks() -> None:
    for opts in ("-N2 -n4", "-n4", "-N2 --gres=gpu:1", "--gpus=4"):
        assert workload("J", opts, 0.0, 1).pod_sets[0].per_node_tasks is None


#: probe p151: a QOS lim with MaxTRESPerJob=cpu=11,mem=10000 (slurmdbd), four idle nodes; the job,
#: its pods as (node index, CPUs, MB) or its state and reason
LIMITED = [
    ("-n10 --ntasks-per-node=4", ("PENDING", "QOSMaxCpuPerJobLimit")),  # asks 10, would hold 12
    ("-n10 --ntasks-per-node=5", [(0, 5, 500), (1, 5, 500)]),
    ("-N3 -n10 --ntasks-per-node=4", ("PENDING", "QOSMaxCpuPerJobLimit")),
    ("-n6 --ntasks-per-node=4 --mem=3000", [(0, 4, 3000), (1, 4, 3000)]),
]


@pytest.mark.parametrize("opts,want", LIMITED, ids=[c[0] for c in LIMITED])
def test_the_limits_read_the_k_tasks_select_gives_each_node(tmp_path: Path, opts: str, want) -> None:
    """The request (T tasks) passes the limit, the selection (K tasks' CPUs a node) is tested
    again and waits (``acct_policy_job_runnable_post_select``)."""
    job = _limited(tmp_path, ACCOUNTS.replace("MaxTRESPerJob=node=2", "MaxTRESPerJob=cpu=11,mem=10000"), CONF, opts)
    got = (sorted((n, cpu // 1000, mem) for n, _m, cpu, mem in job.placement) if job.state == "RUNNING"
           else (job.state, job.reason))
    assert got == want


#: probes p154 and p155: partitions p (all, the default), a = gpu[01-02], m = gpu[01-04] with
#: MinNodes=2, x = gpu[01-02] with MaxNodes=1
PARTS_CONF = CONF + """\
EnforcePartLimits=ALL
PartitionName=a Nodes=gpu[01-02] MaxTime=60
PartitionName=m Nodes=gpu[01-04] MinNodes=2 MaxTime=60
PartitionName=x Nodes=gpu[01-02] MaxNodes=1 MaxTime=60
"""

#: (holders, the job, its pods as (node index, CPUs, MB), or its state and reason)
COUNTS = [
    # select takes ⌈T/K⌉ nodes at least, whatever --nodes' least
    (["-w gpu03 -c14", "-w gpu04 -c14"], "-N1-3 -n10 --ntasks-per-node=4", ("PENDING", "Resources")),
    ([], "-N1-2 -n10 --ntasks-per-node=4", ("REJECTED", "Requested node configuration is not available")),
    ([], "-N2 -n10 --ntasks-per-node=4", ("REJECTED", "Requested node configuration is not available")),
    # sbatch drops a nodelist's last hosts down to the tasks
    ([], "-n1 --ntasks-per-node=2 -w gpu01,gpu02", [(0, 1, 100)]),
    ([], "-n3 --ntasks-per-node=2 -w gpu[01-04]", [(0, 2, 200), (1, 2, 200), (2, 2, 200)]),
    ([], "-N2 -n1 --ntasks-per-node=2 -w gpu01,gpu02", [(0, 1, 100)]),
    ([], "-n1 -w gpu01,gpu02", [(0, 1, 100)]),
    # no node count given: no MinNodes or MaxNodes test at submit, only select's
    ([], "-p a,m -n10 --ntasks-per-node=4", ("REJECTED", "Requested partition configuration not available now")),
    ([], "-p x -n4 --ntasks-per-node=2", ("REJECTED", "Requested node configuration is not available")),
    ([], "-p x -n2 --ntasks-per-node=2", [(0, 2, 200)]),
    ([], "-p m -n4 --ntasks-per-node=4", [(0, 4, 400), (1, 4, 400)]),
    # one task alone is not raised to K
    ([], "-n1 --ntasks-per-node=2", [(0, 1, 100)]),
    ([], "-n3 --ntasks-per-node=4", [(0, 4, 400)]),
    ([], "-n3 --ntasks-per-node=4 -c2", [(0, 8, 800)]),
    ([], "-N1 -n3 --ntasks-per-node=4", [(0, 4, 400)]),
    ([], "-n5 --ntasks-per-node=4", [(0, 4, 400), (1, 4, 400)]),
]


@pytest.mark.parametrize("holders,job,expected", COUNTS, ids=_ids(COUNTS))
def test_node_counts_as_on_the_real_system(tmp_path: Path, holders, job, expected) -> None:
    engine, _ = run_spaced(slurm_pool(tmp_path, PARTS_CONF), holders + [job], 2.0, 2.0 * len(holders) + 10)
    last = engine.jobs[len(holders) + 1]
    got = (sorted((n, cpu // 1000, mem) for n, _m, cpu, mem in last.placement) if last.state == "RUNNING"
           else (last.state, last.reason))
    assert got == expected


def test_the_pending_range_asks_its_least_nodes(tmp_path: Path) -> None:
    """Probe p154: ``-N1-3 -n10 --ntasks-per-node=4`` pending, cpu=10,mem=1000M,node=1."""
    engine, pol = run_spaced(slurm_pool(tmp_path, PARTS_CONF),
                             ["-w gpu03 -c14", "-w gpu04 -c14", "-N1-3 -n10 --ntasks-per-node=4"], 2.0, 14)
    tres = pol.req(engine.jobs[3]).req_tres
    assert (tres["cpu"], tres["mem"], tres["node"]) == (10, 1000, 1)


def test_cpus_raised_by_max_mem_per_cpu_count_for_every_task(tmp_path: Path) -> None:
    """From the source, not probed (``_valid_pn_min_mem``): under MaxMemPerCPU=4000,
    ``--mem-per-cpu=9000`` makes 3 CPUs a task at 3000 MB, so the request the limits read for
    ``-n10 --ntasks-per-node=4`` counts 30 CPUs and 90000 MB (ReqTRES keeps the CPUs as
    submitted, as for every shape here: ``job_defaults.submitted_request``)."""
    conf = CONF.replace("DefMemPerCPU=100", "DefMemPerCPU=100\nMaxMemPerCPU=4000")
    engine, pol = run_spaced(slurm_pool(tmp_path, conf), THREE_FREE_EACH + ["-n10 --ntasks-per-node=4 --mem-per-cpu=9000"],
                             1.0, 10)
    job = engine.jobs[len(THREE_FREE_EACH) + 1]
    assert job.state == "PENDING"
    tres = pol.req(job).tres
    assert (tres["cpu"], tres["mem"], tres["node"]) == (30, 90000, 1)


#: probe p156: a QOS lim with MaxTRESPerJob=node=2 (slurmdbd), four idle nodes; the node cap
#: is held against the least count stored (1 without --nodes), and pods it leaves short of the
#: tasks are refused at submit
NODE_CAPPED = [
    ("-N1-3 -n10 --ntasks-per-node=4", ("REJECTED", "Requested node configuration is not available")),
    ("-N1-3 -n6 --ntasks-per-node=2", ("REJECTED", "Requested node configuration is not available")),
    ("-n10 --ntasks-per-node=4", ("REJECTED", "Requested node configuration is not available")),
    ("-n6 --ntasks-per-node=4", [(0, 4, 400), (1, 4, 400)]),
    ("-N3 -n10 --ntasks-per-node=4", ("PENDING", "QOSMaxNodePerJobLimit")),  # its stored least is 3
    ("-N1-3 -n8 --ntasks-per-node=4", [(0, 4, 400), (1, 4, 400)]),
]


@pytest.mark.parametrize("opts,want", NODE_CAPPED, ids=[c[0] for c in NODE_CAPPED])
def test_a_node_limit_caps_the_pods_as_on_the_real_system(tmp_path: Path, opts: str, want) -> None:
    job = _limited(tmp_path, ACCOUNTS, CONF, opts)
    got = (sorted((n, cpu // 1000, mem) for n, _m, cpu, mem in job.placement) if job.state == "RUNNING"
           else (job.state, job.reason))
    assert got == want
