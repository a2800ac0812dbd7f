"""What a node range asks (``--nodes=A-B``): slurmctld's request counts its least nodes
(``job_set_req_tres``: min_nodes and min_cpus; ``jobinfo.request_totals``), and a QOS or
association node limit caps the nodes select takes (``get_node_cnts``;
``SlurmPolicy._walk_node_cap``). Every expectation is what a real 22.05.8 did on four 16-core
8-GPU nodes, DefMemPerCPU=100 (probes p146 and p147, docs/differential.md finding 90)."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.sbatch_plans import run_spaced, slurm_pool, team_accounts, workload
from tests.unit.test_slurm_split_tasks import CONF

HOLD_ALL = ["-w gpu01 -c16", "-w gpu02 -c16", "-w gpu03 -c16", "-w gpu04 -c16"]

#: (the job, pending behind four holders, its TRES= as (cpu, mem MB, node))
PENDING = [
    ("-N1-3 -c2", (2, 200, 1)),
    ("-N2-4 -c2", (2, 200, 2)),  # no --ntasks: one task's CPUs, the least nodes
    ("-N2-3", (1, 100, 2)),
    ("-N1-3 --mem=200", (1, 200, 1)),
    ("-N2-4 -c2 --mem-per-cpu=50", (2, 100, 2)),
    ("-N1-2 -n20", (20, 2000, 1)),
    ("-N2-4 -n8 --mem=100", (8, 200, 2)),  # memory per node for the least nodes
    ("-N1-3 -n4 --mem-per-cpu=100", (4, 400, 1)),
    ("-N1-3 -n6 --mem=100 -c2", (12, 100, 1)),
    ("-N1-2 -n3 -c4", (12, 1200, 1)),
    ("-N2-3 -n8 --gpus-per-task=1", (8, 800, 2)),
    ("-N1-2 -n6 --gres=gpu:2", (6, 600, 1)),
    ("-N1-3 -n20 --exclusive", (20, 2000, 1)),
    ("-N2-3 -n5 --exclusive --mem-per-cpu=10", (5, 50, 2)),
    ("-N1-3 --ntasks-per-node=2", (2, 200, 1)),
    # fixed counts: the tasks as given (not the even share's 9 for -N3 -n8)
    ("-N3 -n8", (8, 800, 3)),
    ("-N2 -n3", (3, 300, 2)),
    ("-N2 -c2", (4, 400, 2)),
    ("-N3", (3, 300, 3)),
    ("-N2 --ntasks-per-node=2", (4, 400, 2)),
]


def pending_tres(tmp_path: Path, conf: str, holders: list[str], opts: str) -> tuple[int, int, int]:
    """(cpu, mem MB, node) of the ReqTRES of ``opts`` submitted behind ``holders``, pending."""
    engine, pol = run_spaced(slurm_pool(tmp_path, conf), holders + [opts], 1.0, 10)
    job = engine.jobs[len(holders) + 1]
    assert job.state == "PENDING"
    tres = pol.req(job).req_tres
    return tres["cpu"], tres["mem"], tres["node"]


@pytest.mark.parametrize("opts,want", PENDING, ids=[p[0] for p in PENDING])
def test_a_pending_job_records_what_the_real_system_recorded(tmp_path: Path, opts: str, want) -> None:
    assert pending_tres(tmp_path, CONF, HOLD_ALL, opts) == want


#: a QOS lim with MaxTRESPerJob=node=2 (slurmdbd, AccountingStorageEnforce=associations,limits,qos)
ACCOUNTS = """\
QOS - 'normal':Priority=0
QOS - 'lim':MaxTRESPerJob=node=2
Cluster - 'real':Fairshare=1:QOS='normal'
Parent - 'root'
Account - 'teamA':Fairshare=1:QOS='normal,lim':DefaultQOS='normal'
Parent - 'teamA'
User - 'root':DefaultAccount='teamA':Fairshare=1
"""

#: (the job on four idle nodes, its pods as (node index, CPUs, MB) or its state and reason)
CAPPED = [
    ("-N1-3 -n20", [(0, 16, 1600), (1, 4, 400)]),
    ("-N1-3 -n8", [(0, 7, 700), (1, 1, 100)]),  # two nodes, not three
    ("-N1-4 -c2", [(0, 2, 200), (1, 2, 200)]),
    ("-N1-3 --exclusive -n8", [(0, 16, 1600), (1, 16, 1600)]),
    ("-N2 -n4", [(0, 3, 300), (1, 1, 100)]),
    ("-N3-4 -n8", ("PENDING", "QOSMaxNodePerJobLimit")),
    ("-N3 -n4", ("PENDING", "QOSMaxNodePerJobLimit")),
    ("-N1-3 -n40", ("REJECTED", "Requested node configuration is not available")),  # two nodes hold 32
]


@pytest.mark.parametrize("opts,want", CAPPED, ids=[c[0] for c in CAPPED])
def test_a_node_limit_caps_a_range_as_on_the_real_system(tmp_path: Path, opts: str, want) -> None:
    pool_conf = CONF + "AccountingStorageEnforce=associations,limits,qos\n"
    (tmp_path / "accounts.cfg").write_text(ACCOUNTS)
    engine, _ = run_spaced(slurm_pool(tmp_path, pool_conf), [f"-A teamA --qos=lim -t 10 {opts}"], 1.0, 8)
    job = engine.jobs[1]
    got = (sorted((n, cpu // 1000, mem) for n, _m, cpu, mem in job.placement) if job.state == "RUNNING"
           else (job.state, job.reason))
    assert got == want


def _limited(tmp_path: Path, accounts: str, conf: str, opts: str):
    (tmp_path / "accounts.cfg").write_text(accounts)
    engine, _ = run_spaced(slurm_pool(tmp_path, conf + "AccountingStorageEnforce=associations,limits,qos\n"),
                           [f"-A teamA --qos=lim -t 10 {opts}"], 1.0, 8)
    return engine.jobs[1]


def test_the_selection_of_a_range_is_held_against_the_limits(tmp_path: Path) -> None:
    """From the source, not probed: the request counts a range's least nodes, but the limits
    are tested again on the nodes select took (``acct_policy_job_runnable_post_select``):
    ``-N1-3 -c2`` under MaxTRESPerJob=cpu=4 takes three nodes, 6 CPUs, and waits."""
    job = _limited(tmp_path, ACCOUNTS.replace("MaxTRESPerJob=node=2", "MaxTRESPerJob=cpu=4"), CONF, "-N1-3 -c2")
    assert (job.state, job.reason) == ("PENDING", "QOSMaxCpuPerJobLimit")


@pytest.mark.parametrize("epl,want", [("ALL", ("REJECTED", "Node count specification invalid")),
                                      ("NO", ("PENDING", "PartitionNodeLimit"))])
def test_a_capped_range_keeps_its_largest_count_for_max_nodes(tmp_path: Path, epl: str, want) -> None:
    """From the source, not probed: a node limit caps the nodes select takes, while the job
    keeps its max_nodes, which MaxNodes is held against (``_part_access_check``)."""
    conf = CONF.replace("MaxTime=60\n", "MaxTime=60 MaxNodes=2\n") + f"EnforcePartLimits={epl}\n"
    job = _limited(tmp_path, ACCOUNTS, conf, "-N1-4 -n8")
    assert (job.state, job.reason) == want


def test_a_cap_below_the_raised_least_count_holds_the_job(tmp_path: Path) -> None:
    """From the source, not probed: in a MinNodes=3 partition ``-N1-4`` is stored with 3 nodes
    at least, which node=2 never admits (``get_node_cnts``): the job waits on the limit."""
    conf = CONF.replace("MaxTime=60\n", "MaxTime=60 MinNodes=3\n") + "EnforcePartLimits=NO\n"
    job = _limited(tmp_path, ACCOUNTS, conf, "-N1-4 -n8")
    assert (job.state, job.reason) == ("PENDING", "QOSMaxNodePerJobLimit")


def test_a_planned_range_counts_its_memory_per_node_once(tmp_path: Path) -> None:
    """From the source, not probed: backfill tests a later start's limits with memory per node
    for the nodes will-run chose (``job_get_tres_mem``): ``-N3-4 --mem=20000`` of an account
    with GrpTRES=mem=100000 counts 80000 on four nodes, keeps its reservation, and a later
    job of another account waits behind it."""
    (tmp_path / "accounts.cfg").write_text(team_accounts("mem=100000"))
    conf = CONF.replace("ClusterName=split", "ClusterName=t") + "AccountingStorageEnforce=associations,limits,qos\n"
    jobs = ["-A teamB -w gpu01 -c16 -t 2", "-A teamB -w gpu02 -c16 -t 2", "-A teamA -N3-4 --mem=20000 -t 10",
            "-A teamB -w gpu03 -c1 -t 60"]
    engine, _ = run_spaced(slurm_pool(tmp_path, conf), jobs, 1.0, 60, runtimes=[100, 100, 3000, 3000])
    assert engine.jobs[4].state == "PENDING"


def test_the_largest_count_still_meets_max_nodes(tmp_path: Path) -> None:
    """The request counts a range's least nodes, but the partition's MaxNodes is held against
    its largest (probe p96: ``-N1-2`` in a MaxNodes=1 partition waited, PartitionNodeLimit)."""
    conf = CONF.replace("MaxTime=60\n", "MaxTime=60 MaxNodes=1\n").replace("EnforcePartLimits=ALL\n", "")
    engine, pol = run_spaced(slurm_pool(tmp_path, conf), ["-N1-2 -c2"], 1.0, 8)
    job = engine.jobs[1]
    assert (job.state, job.reason, pol.req(job).req_tres["node"]) == ("PENDING", "PartitionNodeLimit", 1)


def test_other_policies_keep_the_pods_totals() -> None:
    (ps,) = workload("j", "-N1-3 -c2", 0.0, 1).pod_sets
    assert (ps.count, ps.min_count, ps.cpus_total) == (3, 1, 6)


def test_a_capped_walk_keeps_its_least_count(tmp_path: Path) -> None:
    """Found by a review: ``-N2-4 --gpus=8`` under MaxTRESPerJob=node=2 keeps its least count
    of 2 when the cap lowers its largest to 2 (probe p108 ran ``-N2-3 --gpus=8`` as 7 + 1);
    clearing it made the walk take one node with all 8 GPUs and never start."""
    job = _limited(tmp_path, ACCOUNTS, CONF, "-N2-4 --gpus=8")
    assert job.state == "RUNNING"
    assert sorted((n, mask.bit_count()) for n, mask, _c, _m in job.placement) == [(0, 7), (1, 1)]


def test_a_walked_range_under_partition_max_nodes_still_runs(tmp_path: Path) -> None:
    """Found by a review (source): a QOS with Flags=PartitionMaxNodes lifts MaxNodes=1, so
    ``-N2-3 --gpus=4`` walks its own range there (3 + 1), as probe p108's ranges did."""
    conf = CONF + "PartitionName=x Nodes=gpu[01-03] MaxNodes=1 MaxTime=60\n"
    job = _limited(tmp_path, ACCOUNTS.replace("MaxTRESPerJob=node=2", "Flags=PartitionMaxNodes"), conf,
                   "-p x -N2-3 --gpus=4")
    assert job.state == "RUNNING"
    assert sorted((n, mask.bit_count()) for n, mask, _c, _m in job.placement) == [(0, 3), (1, 1)]
