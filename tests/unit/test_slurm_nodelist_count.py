"""A ``--nodelist``'s count as sbatch and slurmctld keep it (docs/differential.md, finding 95).

sbatch raises ``--nodes``' least count to the list's hosts before it lowers the counts to the
tasks (``-N1-2 -w gpu01,gpu02`` is ``-N2``, one task a node), and a list without ``--nodes``
sends the list's count as the least and no largest. slurmctld's ``_job_create`` then raises
the job's min_nodes and min_cpus to the hosts, so the request counts them, and a partition
whose MaxNodes is below them leaves select no node count: the job waits with
PartitionNodeLimit and backfill passes over it. Every expectation below is what a real 22.05.8
did on four 16-core 8-GPU nodes (CR_Core_Memory, DefMemPerCPU=100, EnforcePartLimits=NO, x =
gpu[01-02] with MaxNodes=1; probe p157), unless it says otherwise.
"""
from __future__ import annotations

import pytest

from gpupool.errors import InputError
from gpupool.policy.slurm.submit_check import submit_rejection

from tests.unit.sbatch_plans import run_spaced, slurm_pool, workload
from tests.unit.test_slurm_gpu_walk_range_listed import per_node
from tests.unit.test_slurm_range_request import HOLD_ALL, pending_tres
from tests.unit.test_slurm_split_tasks import CONF as SPLIT_CONF

CONF = SPLIT_CONF + "EnforcePartLimits=NO\nPartitionName=x Nodes=gpu[01-02] MaxTime=60 MaxNodes=1\n"


#: (the job, pending behind four holders, its TRES= as (cpu, mem MB, node))
PENDING = [
    ("-N1-3 -w gpu[01-02]", (2, 200, 2)),  # min_cpus raised to the hosts too
    ("-N1-3 -c2 -w gpu01,gpu02", (2, 200, 2)),
    ("-n3 -w gpu01,gpu02", (3, 300, 2)),  # task pods: node=2
    ("-c4 -w gpu01,gpu02", (8, 800, 2)),  # two tasks, one a node
    ("-N1-2 -c2 -w gpu01,gpu02", (4, 400, 2)),  # -N2
    ("-p x -n2 -w gpu01,gpu02", (2, 200, 2)),
    ("-p x -w gpu01,gpu02 --gres=gpu:1", (2, 200, 2)),
    ("-p x -n2 -w gpu01", (2, 200, 1)),
    ("-n3 -w gpu01,gpu02 --mem=500", (3, 1000, 2)),  # memory per node for both hosts
    ("-N2-4 -w gpu01,gpu03 -c2", (2, 200, 2)),
    ("-p x -N1 -n2 -w gpu01", (2, 200, 1)),
]

#: (the job alone on idle nodes, its CPUs and MB per node as (node index, CPUs, MB), or its
#: state and reason)
IDLE = [
    ("-N1-3 -w gpu[01-02]", [(0, 1, 100), (1, 1, 100), (2, 1, 100)]),
    ("-N1-3 -c2 -w gpu01,gpu02", [(0, 2, 200), (1, 2, 200), (2, 2, 200)]),
    ("-n3 -w gpu01,gpu02", [(0, 2, 200), (1, 1, 100)]),
    ("-c4 -w gpu01,gpu02", [(0, 4, 400), (1, 4, 400)]),
    ("-N1-2 -c2 -w gpu01,gpu02", [(0, 2, 200), (1, 2, 200)]),
    ("-p x -n2 -w gpu01,gpu02", ("PENDING", "PartitionNodeLimit")),
    ("-p x -w gpu01,gpu02 --gres=gpu:1", ("PENDING", "PartitionNodeLimit")),
    ("-p x -n2 -w gpu01", [(0, 2, 200)]),
    ("-n3 -w gpu01,gpu02 --mem=500", [(0, 2, 500), (1, 1, 500)]),
    ("-N2-4 -w gpu01,gpu03 -c2", [(0, 2, 200), (1, 2, 200), (2, 2, 200), (3, 2, 200)]),
]


@pytest.mark.parametrize("opts,want", PENDING, ids=[p[0] for p in PENDING])
def test_a_pending_job_records_the_hosts_as_the_real_system_did(tmp_path, opts, want):
    assert pending_tres(tmp_path, CONF, HOLD_ALL, opts) == want


@pytest.mark.parametrize("opts,want", IDLE, ids=[p[0] for p in IDLE])
def test_on_idle_nodes_the_job_runs_or_waits_as_the_real_system_did(tmp_path, opts, want):
    # (300 s: ten backfill cycles, which pass over a list beyond MaxNodes as the main pass does)
    engine, _ = run_spaced(slurm_pool(tmp_path, CONF), [opts], 1.0, 300)
    job = engine.jobs[1]
    if isinstance(want, tuple):
        assert (job.state, job.reason) == want
        return
    assert [row[:3] for row in per_node(job)] == want


def test_a_list_beyond_maxnodes_holds_only_its_nodes_back(tmp_path):
    """The listed nodes are withheld from lower jobs after the failed selection, and the
    partition goes on (22.05.8 source, as for any job whose list covers its count)."""
    engine, _ = run_spaced(slurm_pool(tmp_path, CONF), ["-p x -n2 -w gpu01,gpu02", "-n2"], 1.0, 60)
    held, lower = engine.jobs[1], engine.jobs[2]
    assert (held.state, held.reason) == ("PENDING", "PartitionNodeLimit")
    assert lower.state == "RUNNING" and {p[0] for p in lower.placement} == {2}


@pytest.mark.parametrize("opts,count,least", [
    ("-N1-2 -w gpu01,gpu02", 2, None),  # the least raised to the largest: a fixed count
    ("-N1-3 -w gpu[01-02]", 3, 2),
    ("-N2-4 -w gpu01,gpu03", 4, 2),
    ("-N1-3 -n1 -w gpu01,gpu02", 1, None),  # then lowered to the one task, the list trimmed
])
def test_sbatch_raises_the_least_node_count_to_the_list(opts, count, least):
    (ps,) = workload("j", f"-t 5 {opts}", 0.0, 1).pod_sets
    assert (ps.count, ps.min_count, ps.list_count_only) == (count, least, False)


def test_a_list_without_nodes_sends_no_largest_count():
    (ps,) = workload("j", "-t 5 --gres=gpu:1 -w gpu01,gpu02", 0.0, 1).pod_sets
    assert (ps.count, ps.min_count, ps.list_count_only) == (2, None, True)
    (ps,) = workload("j", "-t 5 -N2 --gres=gpu:1 -w gpu01,gpu02", 0.0, 1).pod_sets
    assert ps.list_count_only is False
    # (--gpus=X alone is walked from the listed nodes: one pod of X GPUs as submitted, finding 97)
    (ps,) = workload("j", "-t 5 --gpus=3 -w gpu01,gpu02", 0.0, 1).pod_sets
    assert (ps.count, ps.walk_gpus, ps.list_count_only) == (1, True, False)


def test_more_hosts_than_the_largest_count_stay_sbatchs_refusal():
    with pytest.raises(InputError, match=r"invalid number of nodes \(-N 2-1\)"):
        workload("j", "-t 5 -N1 -w gpu01,gpu02", 0.0, 1)


# --- from the 22.05.8 source, not probed (found by a read-only review of finding 95) --------

#: a QOS whose PartitionMaxNodes flag lifts MaxNodes (slurmdbd, limits enforced)
LIFTING_QOS = """\
QOS - 'normal':Priority=0
QOS - 'lim':Flags=PartitionMaxNodes
Cluster - 'real':Fairshare=1:QOS='normal'
Parent - 'root'
Account - 'teamA':Fairshare=1:QOS='normal,lim':DefaultQOS='normal'
Parent - 'teamA'
User - 'root':DefaultAccount='teamA':Fairshare=1
"""
X3 = "PartitionName=x Nodes=gpu[01-03] MaxNodes=1 MaxTime=60\n"


def _conf(epl: str, *extra: str) -> str:
    return SPLIT_CONF + f"EnforcePartLimits={epl}\n" + "".join(extra)


@pytest.mark.parametrize("opts", ["-p x -n2 -w gpu[01-03]", "-p x -n2 --ntasks-per-node=1 -w gpu[01-03]"])
def test_a_list_cut_down_to_the_tasks_sends_them_as_its_node_counts(tmp_path, opts):
    """sbatch cut the list to two hosts and sent min=max=2 nodes (``_opt_verify``): the QOS
    flag lifts MaxNodes for that count, so the job runs on both nodes."""
    (tmp_path / "accounts.cfg").write_text(LIFTING_QOS)
    conf = _conf("NO", X3, "AccountingStorageEnforce=associations,limits,qos\n")
    (ps,) = workload("j", f"-t 10 {opts}", 0.0, 1).pod_sets
    assert (ps.list_trimmed, ps.list_count_only) == (True, False)
    engine, _ = run_spaced(slurm_pool(tmp_path, conf), [f"-A teamA --qos=lim -t 10 {opts}"], 1.0, 120)
    job = engine.jobs[1]
    assert job.state == "RUNNING" and {p[0] for p in job.placement} == {0, 1}


@pytest.mark.parametrize("epl", ["ANY", "ALL"])
def test_a_cut_list_under_the_lifting_qos_is_taken_at_submit(tmp_path, epl):
    (tmp_path / "accounts.cfg").write_text(LIFTING_QOS)
    pool = slurm_pool(tmp_path, _conf(epl, X3, "AccountingStorageEnforce=associations,limits,qos\n"))
    assert submit_rejection(pool, workload("j", "-A teamA --qos=lim -t 10 -p x -n2 -w gpu[01-03]", 0.0, 1)) is None
    # a list alone sends no largest count: select takes MaxNodes whatever the QOS flags
    assert submit_rejection(pool, workload("j", "-A teamA --qos=lim -t 10 -p x -n2 -w gpu[01-02]", 0.0, 1)) \
        == "Requested partition configuration not available now"


def test_a_cut_list_beyond_maxnodes_is_held_by_the_limits_and_holds_nothing_back(tmp_path):
    """``job_limits_check`` fails its largest count (2 > MaxNodes=1) before the selection, so
    no node is withheld: the lower job takes gpu01 (a list alone fails in select instead,
    its listed nodes withheld)."""
    for first, lower_node in (("-p x -n2 -w gpu[01-03]", 0), ("-p x -n2 -w gpu[01-02]", 2)):
        (root := tmp_path / str(lower_node)).mkdir()
        engine, _ = run_spaced(slurm_pool(root, _conf("NO", X3)), [first, "-n2"], 1.0, 10)
        held, lower = engine.jobs[1], engine.jobs[2]
        assert (held.state, held.reason) == ("PENDING", "PartitionNodeLimit")
        assert {p[0] for p in lower.placement} == {lower_node}, first


def test_the_main_pass_counts_the_hosts_against_the_available_nodes(tmp_path):
    """``_schedule`` tests the stored least count (the hosts) against the partition's available
    nodes: with gpu02-04 withheld for hi's job only gpu01 is left for two hosts."""
    conf = SPLIT_CONF.replace("PartitionName=p Nodes=gpu[01-04] Default=YES MaxTime=60",
                              "PartitionName=p Nodes=gpu[01-04] Default=YES MaxTime=60 PriorityTier=1\n"
                              "PartitionName=hi Nodes=gpu[02-04] MaxTime=60 PriorityTier=2")
    engine, _ = run_spaced(slurm_pool(tmp_path, conf), ["-p p -w gpu02 -c16", "-p hi -N3 -c16",
                                                        "-p p -n3 -w gpu01,gpu02"], 1.0, 5)
    assert engine.jobs[3].reason.startswith("Nodes required for job are DOWN, DRAINED")


def test_backfill_counts_a_job_for_its_user_before_passing_over_its_node_count(tmp_path):
    """bf_max_job_user=1: alice's list beyond MaxNodes counts as her one job of the cycle
    (``_job_exceeds_max_bf_param`` before ``get_node_cnts``), so her small job is not backfilled."""
    from dataclasses import replace as with_user

    from gpupool.engine.core import Engine
    from gpupool.engine.policy_api import make_policy

    conf = SPLIT_CONF.replace("bf_interval=30", "bf_interval=30,bf_max_job_user=1") \
        + "EnforcePartLimits=NO\nPartitionName=x Nodes=gpu[01-02] MaxNodes=1 MaxTime=60\n"
    spec = [("bob", "-w gpu03 -c16 -t 20", 1200), ("bob", "-w gpu04 -c16 -t 20", 1200),
            ("alice", "-p x -n2 -w gpu01,gpu02 -t 20", 600), ("bob", "-N3 -c16 -t 20", 600),
            ("alice", "-n1 -t 5", 60)]
    for with_list in (True, False):
        use = spec if with_list else [s for s in spec if "-p x" not in s[1]]
        wls = [with_user(workload(f"j{k}", o, 1.0 * k, k + 1, runtime=float(r)), user=u)
               for k, (u, o, r) in enumerate(use)]
        (root := tmp_path / str(with_list)).mkdir()
        pool = slurm_pool(root, conf)
        engine = Engine(pool, wls, make_policy("slurm", pool, {}), until=100)
        engine.run()
        assert (engine.jobs[len(use)].start is None) is with_list


def test_the_limits_count_memory_per_node_for_each_host(tmp_path):
    engine, pol = run_spaced(slurm_pool(tmp_path, CONF), ["-n3 -w gpu01,gpu02 --mem=500"], 1.0, 1)
    req = pol.req(engine.jobs[1])
    assert (req.tres["mem"], req.req_tres["mem"], req.tres["node"]) == (1000, 1000, 2)


def test_a_list_that_meets_minnodes_is_not_raised(tmp_path):
    """``-n3 -w gpu[01-03]`` holds three nodes at least, above MinNodes=2: no raise (it was
    raised to two pods and then placed on the three listed nodes, a crash)."""
    conf = _conf("NO", "PartitionName=m Nodes=gpu[01-04] MinNodes=2 MaxTime=60\n")
    engine, _ = run_spaced(slurm_pool(tmp_path, conf), ["-p m -n3 -w gpu[01-03]"], 1.0, 10)
    job = engine.jobs[1]
    assert job.state == "RUNNING" and {p[0] for p in job.placement} == {0, 1, 2}


def test_a_host_listed_twice_counts_once():
    (ps,) = workload("j", "-t 5 -w gpu01,gpu01,gpu02 --gres=gpu:1", 0.0, 1).pod_sets
    assert ps.count == 2


@pytest.mark.parametrize("opts", ["-p m -n1 --gpus=1 -w gpu01,gpu02", "-p m -n1 -w gpu01,gpu02"])
def test_a_cut_list_is_not_raised_by_minnodes_for_the_gpu_test(tmp_path, opts):
    """sbatch sent min=max=1: MinNodes=2 raises nothing, so ``--gpus=1`` is not fewer than the
    nodes; the job waits on MinNodes (from the source, found by a review)."""
    conf = _conf("NO", "PartitionName=m Nodes=gpu[01-04] MinNodes=2 MaxTime=60\n")
    engine, _ = run_spaced(slurm_pool(tmp_path, conf), [opts], 1.0, 10)
    assert (engine.jobs[1].state, engine.jobs[1].reason) == ("PENDING", "PartitionNodeLimit")
