"""``--contiguous`` on a pod-a-node shape (docs/differential.md, finding 100): cons_tres takes
the nodes from one run of consecutive usable nodes, whatever their weights, and leaves the job
waiting where the run it would choose cannot hold it (``eval_nodes.pick_nodes``,
``PodSet.contiguous``).

Every expectation is what a real 22.05.8 did (probe p162, 2026-12-06) on four 16-core 8-GPU
64000 MB nodes (CR_Core_Memory, DefMemPerCPU=100), partition p over all four and x over gpu01
and gpu03; each job behind its holders, submitted 2 s apart. At the commit before finding 100
gpupool placed the jobs as without ``--contiguous`` (11 of the 21 answers agreed); at 41afe7a
the two a list with gaps gives were not modelled (19 of 21); finding 101 fills the gaps
(``contiguous_list``).
"""
from __future__ import annotations

import pytest

from gpupool.engine.core import Engine
from gpupool.engine.nodes import NodeTable
from gpupool.engine.policy_api import make_policy
from gpupool.formats.sbatch import parse_sbatch_text
from gpupool.policy.slurm.contiguous_list import fill_gaps
from gpupool.policy.slurm.policy import SlurmPolicy
from gpupool.policy.slurm.select import Free, PartNodes, place
from gpupool.policy.slurm.submit_check import submit_rejection
from tests.unit.sbatch_plans import run_spaced, script, slurm_pool, workload, workloads
from tests.unit.test_slurm_def_cpu_per_gpu import BASE
from tests.unit.test_slurm_gpu_walk_range_listed import per_node

NODE = "CPUs=16 Boards=1 SocketsPerBoard=1 CoresPerSocket=16 ThreadsPerCore=1 RealMemory=64000 Gres=gpu:8"
#: probe p162's slurm.conf: p160's header, gpu02 on a line of its own; ``{w}``: its weight
#: (Weight=2 in the second set)
CONF = (BASE.split("NodeName=")[0].replace("ClusterName=p160", "ClusterName=p162").format(extra="DefMemPerCPU=100")
        + f"NodeName=gpu01 {NODE}\nNodeName=gpu02 {NODE} {{w}}\nNodeName=gpu[03-04] {NODE}\n"
        + "PartitionName=p Nodes=gpu[01-04] Default=YES MaxTime=60 State=UP\n"
        + "PartitionName=x Nodes=gpu01,gpu03 MaxTime=60 State=UP\n")
EX = "--exclusive"
ONE = (1, 100, 0)  # a node's CPUs, MB and GPUs for these one-CPU pods


def _on(*nodes: int, each=ONE) -> list:
    return [(n, *each) for n in nodes]


#: (holders, the job, its (node index, CPUs, MB, GPUs) per node or its state and reason)
SAME_WEIGHTS = [
    ([], "-N2 --contiguous", _on(0, 1)),
    (["-w gpu02 " + EX], "-N2 --contiguous", _on(2, 3)),
    (["-w gpu02 " + EX, "-w gpu04 " + EX], "-N2 --contiguous", ("PENDING", "Resources")),
    (["-w gpu02 " + EX, "-w gpu04 " + EX], "-N2", _on(0, 2)),  # (without it)
    (["-w gpu03 " + EX], "-N3 --contiguous", ("PENDING", "Resources")),
    (["-w gpu01 -c14", "-w gpu02 -c14"], "-N2 --contiguous", _on(0, 1)),
    # the larger run (gpu04, one node) beats gpu01-02, which hold the job: no start
    (["-w gpu01 -c15", "-w gpu02 -c15", "-w gpu03 " + EX], "-N2 --contiguous", ("PENDING", "Resources")),
    (["-w gpu01 -c15", "-w gpu02 -c15", "-w gpu03 " + EX], "-N2", _on(0, 3)),  # (without it)
    ([], "-p x -N2 --contiguous", ("REJECTED", "Requested node configuration is not available")),
    ([], "-N2 --contiguous -w gpu02", _on(1, 2)),
    (["-w gpu02 " + EX], "-N2 --contiguous --gres=gpu:8", _on(2, 3, each=(1, 100, 8))),
    (["-w gpu02 " + EX], "-N2 --contiguous -w gpu01", ("PENDING", "Resources")),
    (["-w gpu02 -c16"], "-N2 --contiguous -c2", _on(2, 3, each=(2, 200, 0))),
    ([], "-N2-3 --contiguous", _on(0, 1, 2)),
    # once the least count is held in one run, another run adds the third node
    (["-w gpu03 " + EX], "-N2-3 --contiguous", _on(0, 1, 3)),
    # a list's gaps are filled in node order at submit (``contiguous_list``, finding 101): the
    # run's nodes are required and counted, so ``-N2`` cannot hold them
    ([], "--contiguous -w gpu01,gpu03", _on(0, 1, 2)),
    ([], "-N2 --contiguous -w gpu01,gpu03", ("REJECTED", "Node count specification invalid")),
]

#: gpu02 at Weight=2: the run gpu01-04 ignores it (without --contiguous the lighter nodes win)
GPU02_HEAVIER = [
    ([], "-N3 --contiguous", _on(0, 1, 2)),
    ([], "-N2 --contiguous", _on(0, 1)),
    ([], "-N3", _on(0, 2, 3)),  # (without it)
    (["-w gpu04 " + EX], "-N2 --contiguous", _on(0, 1)),
]


def _outcome(job):
    return per_node(job) if job.state == "RUNNING" else (job.state, job.reason)


@pytest.mark.parametrize("holders,opts,want", SAME_WEIGHTS, ids=[f"{c[1]} behind {c[0]}" for c in SAME_WEIGHTS])
def test_contiguous_nodes_as_on_a_real_slurm(tmp_path, holders, opts, want):
    engine, _ = run_spaced(slurm_pool(tmp_path, CONF.format(w="")), holders + [opts], 2.0, 2.0 * len(holders) + 6.0)
    assert _outcome(engine.jobs[len(holders) + 1]) == want


@pytest.mark.parametrize("holders,opts,want", GPU02_HEAVIER, ids=[f"{c[1]} behind {c[0]}" for c in GPU02_HEAVIER])
def test_contiguous_nodes_ignore_weights_as_on_a_real_slurm(tmp_path, holders, opts, want):
    engine, _ = run_spaced(slurm_pool(tmp_path, CONF.format(w="Weight=2")), holders + [opts], 2.0,
                           2.0 * len(holders) + 6.0)
    assert _outcome(engine.jobs[len(holders) + 1]) == want


def test_a_pod_a_node_shape_is_marked():
    assert all(ps.contiguous for ps in workload("j", "-N2 --contiguous -w gpu02", 0.0, 1).pod_sets)
    # a list of several hosts too: its gaps are the pool's to fill (``contiguous_list``)
    assert all(ps.contiguous for ps in workload("j", "--contiguous -w gpu01,gpu03", 0.0, 1).pod_sets)
    assert all(ps.contiguous for ps in workload("j", "-N3 --contiguous -w gpu01,gpu03", 0.0, 1).pod_sets)
    assert not any(ps.contiguous for ps in workload("j", "-N2", 0.0, 1).pod_sets)


def test_contiguous_beside_bf_busy_nodes_skips_the_busy_first_pick(tmp_path):
    """cons_tres's ``_eval_nodes`` takes bf_busy_nodes' busy-first pick only without
    ``--contiguous`` (source): a later start is planned on a run of consecutive nodes."""
    free = Free(NodeTable(slurm_pool(tmp_path, CONF.format(w=""))))
    busy = 1 << 3  # gpu04 busy now
    assert [p[0] for p in place(workload("x", "-N2", 0.0, 1), (0, 1, 2, 3), free, busy=busy)] == [3, 0]
    assert [p[0] for p in place(workload("y", "-N2 --contiguous", 0.0, 2), (0, 1, 2, 3), free, busy=busy)] == [0, 1]
    # a task shape too (the test at ``_eval_nodes``' top reads the option whatever the shape;
    # found by a second review)
    assert [p[0] for p in place(workload("z", "-n1 --contiguous", 0.0, 3), (0, 1, 2, 3), free, busy=busy)] == [0]
    assert [p[0] for p in place(workload("z", "-n1", 0.0, 4), (0, 1, 2, 3), free, busy=busy)] == [3]


# --- from the 22.05.8 source, not probed (found by a read-only review of finding 100) -------

MIN3 = "PartitionName=m Nodes=gpu[01-04] MinNodes=3 MaxTime=60 State=UP\n"


@pytest.mark.parametrize("holders,opts,want", [
    # a range's run holds what is left with the least count's CPUs (``min_cpus``), not the
    # largest count's: 2 × 16 CPUs in gpu01-02, then gpu04 added
    (["-w gpu03 " + EX], "-N2-3 -c16 --contiguous", _on(0, 1, 3, each=(16, 1600, 0))),
    (["-w gpu02 " + EX], "-N2-3 -c16 --contiguous", _on(0, 2, 3, each=(16, 1600, 0))),
    (["-w gpu01 -c15", "-w gpu02 -c15", "-w gpu03 " + EX, "-w gpu04 -c15"], "-N2-3 --contiguous", _on(0, 1, 3)),
    ([], "-p x -N1-2 -c16 --contiguous", _on(0, 2, each=(16, 1600, 0))),
    # task pods MinNodes raises to three nodes keep the option: no run of three, waiting
    (["-p p -w gpu03 " + EX], "-p m --contiguous", ("PENDING", "Resources")),
    (["-p p -w gpu03 " + EX], "-p m -n2 --contiguous", ("PENDING", "Resources")),
    ([], "-p m --contiguous", _on(0, 1, 2)),
])
def test_ranges_and_raised_shapes(tmp_path, holders, opts, want):
    """Found by a read-only review of finding 100 (source, not probed)."""
    engine, _ = run_spaced(slurm_pool(tmp_path, CONF.format(w="") + MIN3), holders + [opts], 2.0,
                           2.0 * len(holders) + 6.0)
    assert _outcome(engine.jobs[len(holders) + 1]) == want


def test_preemption_frees_victims_one_by_one_for_a_contiguous_job(tmp_path):
    """Freeing more can turn a contiguous fit into none, so the victims are added one at a
    time until the job fits (cons_tres's ``_run_now``), not found by bisection: with gpu01 at
    one free CPU, freeing the low job on gpu02 makes the run gpu01-02; freeing gpu04 as well
    would make the larger run gpu04 win and hold nothing (found by a review; it waited)."""
    conf = CONF.format(w="").replace(
        "PartitionName=p Nodes=gpu[01-04] Default=YES MaxTime=60 State=UP",
        "PartitionName=lo Nodes=gpu[01-04] Default=YES MaxTime=60 State=UP PriorityTier=1\n"
        "PartitionName=hi Nodes=gpu[01-04] MaxTime=60 State=UP PriorityTier=2").replace(
        "PriorityType=priority/basic", "PriorityType=priority/basic\nPreemptType=preempt/partition_prio\nPreemptMode=CANCEL")
    jobs = ["-p hi -w gpu01 -c15", "-p hi -w gpu02 -c15", "-p hi -w gpu03 " + EX,
            "-p lo -w gpu02 -c1", "-p lo -w gpu04 " + EX, "-p hi -N2 --contiguous"]
    engine, _ = run_spaced(slurm_pool(tmp_path, conf), jobs, 2.0, 30.0)
    assert [engine.jobs[k].state for k in (4, 5)] == ["PREEMPTED", "RUNNING"]
    assert _outcome(engine.jobs[6]) == _on(0, 1)


def test_contiguous_in_a_least_loaded_partition_skips_the_busy_first_pick_too(tmp_path):
    """``_eval_nodes`` tests bf_busy_nodes (with ``--contiguous`` skipped) before LLN: beside a
    required node a contiguous job's other nodes come in LLN's order, not busy-first (found by
    a third review: gpu04, busy, was taken)."""
    free = Free(NodeTable(slurm_pool(tmp_path, CONF.format(w=""))))
    lln = PartNodes((0, 1, 2, 3), least_loaded=True)
    busy = 1 << 3
    assert [p[0] for p in place(workload("x", "-N2 --contiguous -w gpu01", 0.0, 1), lln, free, busy=busy)] == [0, 1]
    assert [p[0] for p in place(workload("y", "-N2 -w gpu01", 0.0, 2), lln, free, busy=busy)] == [0, 3]


# --- finding 101: a list's gaps filled at submit (``contiguous_list``; 22.05.8 source,
# ``_job_create``'s ``bit_fill_gaps``; the two probed answers are in SAME_WEIGHTS) ----------

ORDER = ("gpu01", "gpu02", "gpu03", "gpu04")


@pytest.mark.parametrize("gaps,whole", [
    ("--contiguous -w gpu01,gpu03", "--contiguous -w gpu[01-03]"),
    ("-N3 --contiguous -w gpu01,gpu03", "-N3 --contiguous -w gpu[01-03]"),
    ("-N2-4 --contiguous -w gpu01,gpu03", "-N3-4 --contiguous -w gpu[01-03]"),
    ("-N2-3 --contiguous -w gpu01,gpu03", "-N3 --contiguous -w gpu[01-03]"),
    ("--contiguous -w gpu01,gpu04 --gres=gpu:2 -c3", "--contiguous -w gpu[01-04] --gres=gpu:2 -c3"),
    ("--contiguous -w gpu04,gpu01 --mem=500", "--contiguous -w gpu[01-04] --mem=500"),
])
def test_a_filled_list_reads_as_the_whole_run_listed(gaps, whole):
    """The job slurmctld stores is the one that listed the whole run: its least count (a
    range's least, or the list's count) raised to the run's nodes, the list as they are."""
    filled, why = fill_gaps(workload("j", gaps, 0.0, 1), ORDER, {n: i for i, n in enumerate(ORDER)})
    assert why is None
    assert filled == workload("j", whole, 0.0, 1)


@pytest.mark.parametrize("opts", ["-N2 --contiguous -w gpu01,gpu03", "-N1-2 --contiguous -w gpu01,gpu03",
                                  "-N3 --contiguous -w gpu01,gpu04"])
def test_a_largest_count_below_the_run_is_refused(opts):
    wl = workload("j", opts, 0.0, 1)
    assert fill_gaps(wl, ORDER, {n: i for i, n in enumerate(ORDER)}) == (wl, "Node count specification invalid")


@pytest.mark.parametrize("opts", ["--contiguous -w gpu01,gpu02", "-w gpu01,gpu03", "--contiguous -w gpu01,gpu09",
                                  "-N2 --contiguous -w gpu02"])
def test_lists_without_gaps_or_the_option_are_left_alone(opts):
    """No gap, no option, a host the pool lacks (the submit check names it), one host."""
    wl = workload("j", opts, 0.0, 1)
    assert fill_gaps(wl, ORDER, {n: i for i, n in enumerate(ORDER)}) == (wl, None)


def test_gaps_follow_the_node_order_not_the_names(tmp_path):
    """slurm.conf lists gpu03 before gpu02: ``-w gpu01,gpu02`` then has gpu03 in its gap."""
    conf = CONF.format(w="").replace(f"NodeName=gpu02 {NODE} \nNodeName=gpu[03-04] {NODE}\n",
                                     f"NodeName=gpu03 {NODE}\nNodeName=gpu02 {NODE}\nNodeName=gpu04 {NODE}\n")
    assert "NodeName=gpu03" in conf
    engine, _ = run_spaced(slurm_pool(tmp_path, conf), ["--contiguous -w gpu01,gpu02"], 2.0, 6.0)
    assert _outcome(engine.jobs[1]) == _on(0, 1, 2)  # gpu01, gpu03, gpu02 (indices in that order)
    assert engine.jobs[1].wl.nodelist == "gpu[01,03,02]"


@pytest.mark.parametrize("holders,opts,want", [
    # the filled run is required: gpu02 held, the job waits as ``-w gpu[01-03]`` does
    (["-w gpu02 " + EX], "--contiguous -w gpu01,gpu03", "--contiguous -w gpu[01-03]"),
    ([], "-N2-4 --contiguous -w gpu01,gpu03", _on(0, 1, 2, 3)),
    # MinNodes=3 raises the filled count no further; =3 beside a run of four
    ([], "-p m --contiguous -w gpu01,gpu03", _on(0, 1, 2)),
    ([], "-p m --contiguous -w gpu01,gpu04", _on(0, 1, 2, 3)),
])
def test_filled_lists_placed(tmp_path, holders, opts, want):
    pool = slurm_pool(tmp_path, CONF.format(w="") + MIN3)
    engine, _ = run_spaced(pool, holders + [opts], 2.0, 2.0 * len(holders) + 6.0)
    if isinstance(want, str):  # as the whole run listed
        other, _ = run_spaced(pool, holders + [want], 2.0, 2.0 * len(holders) + 6.0)
        want = _outcome(other.jobs[len(holders) + 1])
        assert want[0] == "PENDING"
    assert _outcome(engine.jobs[len(holders) + 1]) == want


# --- found by a read-only review of finding 101 (source, not probed) --------------------------

def test_the_live_submit_check_fills_the_gaps_too(tmp_path):
    """The live daemon refuses before it gives a job id (``submit_check.submit_rejection``)."""
    pool = slurm_pool(tmp_path, CONF.format(w=""))
    assert submit_rejection(pool, workload("j", "-N2 --contiguous -w gpu01,gpu03", 0.0, 1)) == \
        "Node count specification invalid"
    assert submit_rejection(pool, workload("j", "--contiguous -w gpu01,gpu03", 0.0, 1)) is None


def test_max_array_size_is_tested_before_the_fill(tmp_path):
    """``validate_job_create_req`` tests the array before ``_job_create`` fills the list."""
    pool = slurm_pool(tmp_path, CONF.format(w="").replace("GresTypes=gpu", "GresTypes=gpu\nMaxArraySize=2"))
    opts = "--array=0-2 -N2 --contiguous -w gpu01,gpu03"
    assert submit_rejection(pool, workloads("j", opts, 0.0, 1)[0]) == "Invalid job array specification"
    engine = Engine(pool, workloads("j", opts, 0.0, 1), make_policy("slurm", pool, {}), until=6.0)
    engine.run()
    assert {(j.state, j.reason) for j in engine.jobs.values()} == {("REJECTED", "Invalid job array specification")}


def test_a_recovered_job_is_not_refused_again(tmp_path):
    """A job the daemon takes back after a restart was accepted: slurmctld rebuilds its nodes
    from the stored list and never refuses it (here slurm.conf gained nodes in the gap)."""
    pol = SlurmPolicy(slurm_pool(tmp_path, CONF.format(w="")), {})
    wl = workload("j", "-N2 --contiguous -w gpu01,gpu03", 0.0, 1)
    assert pol.resolve_request(wl, recovered=True).nodelist == "gpu01,gpu03"  # (kept as stored)
    assert wl.id not in pol._submit_refusal
    pol.resolve_request(wl)
    assert pol._submit_refusal[wl.id] == "Node count specification invalid"


# --- probes p163 and p163b (2026-12-06, the same pool): task shapes, and required nodes
# among the excluded ones. Before (41afe7a) 12 of p163's 18 answers and 2 of p163b's 7 agreed.

TASK_SHAPES = [
    ([], "-n20 --contiguous", [(0, 16, 1600, 0), (1, 4, 400, 0)]),
    (["-w gpu02 " + EX], "-n20 --contiguous", [(2, 16, 1600, 0), (3, 4, 400, 0)]),
    (["-w gpu02 " + EX], "-n20", [(2, 16, 1600, 0), (3, 4, 400, 0)]),
    # no run of two nodes holds 20 tasks: waiting, where ``-n20`` runs on gpu01 and gpu03
    (["-w gpu02 " + EX, "-w gpu04 " + EX], "-n20 --contiguous", ("PENDING", "Resources")),
    (["-w gpu02 " + EX, "-w gpu04 " + EX], "-n20", [(0, 16, 1600, 0), (2, 4, 400, 0)]),
    (["-w gpu01 -c14", "-w gpu02 " + EX], "-n4 --contiguous", [(2, 4, 400, 0)]),
    (["-w gpu01 -c15", "-w gpu02 -c15", "-w gpu03 " + EX], "-n2 --contiguous", _on(0, 1)),
    (["-w gpu01 -c15", "-w gpu02 -c15", "-w gpu03 " + EX], "-n3 --contiguous", [(3, 3, 300, 0)]),
    (["-w gpu01 -c15", "-w gpu02 -c15", "-w gpu03 " + EX], "-n3", [(3, 3, 300, 0)]),
    (["-w gpu01 -c12", "-w gpu03 " + EX], "-n6 --contiguous", [(3, 6, 600, 0)]),
    # the split form
    (["-w gpu02 " + EX], "-N2 -n20 --contiguous", [(2, 16, 1600, 0), (3, 4, 400, 0)]),
    (["-w gpu02 " + EX, "-w gpu04 " + EX], "-N2 -n20 --contiguous", ("PENDING", "Resources")),
    (["-w gpu02 " + EX, "-w gpu04 " + EX], "-N2 -n20", [(0, 16, 1600, 0), (2, 4, 400, 0)]),
    # task pods beside a list: the gaps filled, every node of the run required
    ([], "-n4 --contiguous -w gpu01,gpu03", [(0, 2, 200, 0), (1, 1, 100, 0), (2, 1, 100, 0)]),
    (["-w gpu02 " + EX], "-n4 --contiguous -w gpu01,gpu03", ("PENDING", "Resources")),
    # partition x is gpu01 and gpu03: two runs of one node, neither holds 20 tasks
    ([], "-p x -n20 --contiguous", ("REJECTED", "Requested node configuration is not available")),
    ([], "-p x -n8 --contiguous", [(0, 8, 800, 0)]),
    # required nodes among the excluded ones, the filled gaps included
    ([], "-w gpu01 -x gpu01", ("REJECTED", "Invalid node name specified")),
    ([], "--contiguous -w gpu01,gpu03 -x gpu02", ("REJECTED", "Invalid node name specified")),
    ([], "-w gpu01,gpu02 -x gpu02", ("REJECTED", "Invalid node name specified")),
    ([], "-w gpu01,gpu03 -x gpu02", _on(0, 2)),
    ([], "-N3 --contiguous -w gpu01,gpu03 --gpus=6", [(0, 1, 100, 4), (1, 1, 100, 1), (2, 1, 100, 1)]),
]


@pytest.mark.parametrize("holders,opts,want", TASK_SHAPES, ids=[f"{c[1]} behind {c[0]}" for c in TASK_SHAPES])
def test_task_shapes_and_excluded_lists_as_on_a_real_slurm(tmp_path, holders, opts, want):
    engine, _ = run_spaced(slurm_pool(tmp_path, CONF.format(w="")), holders + [opts], 2.0, 2.0 * len(holders) + 6.0)
    assert _outcome(engine.jobs[len(holders) + 1]) == want


def test_a_list_sbatch_cut_down_to_the_tasks_is_not_marked():
    """A list sbatch cut down to the tasks (not probed). ``--ntasks-per-node`` and GPUs per job
    beside a list with a gap are marked and filled since finding 106
    (``test_slurm_contiguous_walks.py``)."""
    assert not any(ps.contiguous for ps in workload("j", "-n2 --contiguous -w gpu[01-03]", 0.0, 1).pod_sets)


# --- found by a second read-only review (22.05.8 source, not probed) ------------------------

@pytest.mark.parametrize("holders,opts,want", [
    # task pods beside a list: only the run holding the listed nodes counts
    (["-w gpu03 " + EX], "-n40 --contiguous -w gpu01,gpu02", ("PENDING", "Resources")),
    (["-w gpu04 -c8", "-w gpu03 " + EX], "-n24 --contiguous -w gpu02", [(0, 8, 800, 0), (1, 16, 1600, 0)]),
])
def test_task_pods_beside_a_list_take_the_listed_run(tmp_path, holders, opts, want):
    engine, _ = run_spaced(slurm_pool(tmp_path, CONF.format(w="")), holders + [opts], 2.0, 2.0 * len(holders) + 6.0)
    assert _outcome(engine.jobs[len(holders) + 1]) == want


@pytest.mark.parametrize("gpu03,want", [("-c16", [(0, 16, 1600, 0), (1, 4, 400, 0)]), (EX, ("PENDING", "Resources"))])
def test_task_pods_try_again_without_the_least_free_nodes(tmp_path, gpu03, want):
    """``choose_nodes`` drops the nodes with the fewest free resources and asks again: gpu02
    at Weight=2 splits no run, but the run gpu04 (weight 1, 8 free CPUs) beats gpu01-02 and
    cannot hold 20 tasks; without gpu04 the job runs on gpu01-02. Only where the start's first
    test (every core free) passes: with gpu03 under an exclusive job it leaves gpu03 out, keeps
    gpu04 and fails, and the job waits (a real 22.05.8, probes p167d and p167e; this test
    expected a start in both cases until then, from the source alone)."""
    engine, _ = run_spaced(slurm_pool(tmp_path, CONF.format(w="Weight=2")),
                           ["-w gpu04 -c8", "-w gpu03 " + gpu03, "-n20 --contiguous"], 2.0, 10.0)
    assert _outcome(engine.jobs[3]) == want


@pytest.mark.parametrize("opts", ["-N1 --contiguous", "-n1 --contiguous"])
def test_one_node_takes_the_best_fit_across_weights(tmp_path, opts):
    """gpu01 at Weight=2: without the option the lighter gpu02 wins; with it the one run
    gpu01-04 gives the node with the fewest free CPUs, the lowest index on a tie."""
    conf = CONF.format(w="").replace(f"NodeName=gpu01 {NODE}\n", f"NodeName=gpu01 {NODE} Weight=2\n")
    assert "Weight=2" in conf
    engine, _ = run_spaced(slurm_pool(tmp_path, conf), [opts, opts.replace(" --contiguous", "")], 2.0, 8.0)
    assert [_outcome(engine.jobs[k]) for k in (1, 2)] == [_on(0), _on(1)]


def test_long_runs_are_not_marked_but_exclusive_task_pods_are():
    """Task pods whose filled run has more nodes than tasks (slurmctld would raise the node
    count above them) are kept as without the option; ``--exclusive -n T`` is marked (its
    whole nodes come from one run: probe p175, ``test_slurm_exclusive_tasks.py``; this test
    had expected it unmarked while such jobs took nodes by index)."""
    assert all(ps.contiguous for ps in workload("j", "--exclusive -n20 --contiguous", 0.0, 1).pod_sets)
    filled, why = fill_gaps(workload("j", "-n3 --contiguous -w gpu01,gpu04", 0.0, 1), ORDER,
                            {n: i for i, n in enumerate(ORDER)})
    assert why is None and filled.nodelist == "gpu01,gpu04" and not filled.pod_sets[0].contiguous


# --- found by a third read-only review (22.05.8 source, not probed) -------------------------

GPU01_HEAVIER = CONF.format(w="").replace(f"NodeName=gpu01 {NODE}\n", f"NodeName=gpu01 {NODE} Weight=2\n")


@pytest.mark.parametrize("conf,holders,opts,want", [
    # the retry ranks nodes by the CPUs their free memory pays for (memory per CPU)
    ("Weight=2", ["-w gpu01 -c6", "-w gpu03 " + EX, "-w gpu04 -c1 --mem=40000"], "-n20 --contiguous --mem-per-cpu=4000",
     [(0, 10, 40000, 0), (1, 10, 40000, 0)]),
    # a pod a node retries too: without gpu04 the run gpu01-02 holds the job, but the start's
    # first test (every core free, gpu03's exclusive job's node left out) keeps gpu04 and fails:
    # a real 22.05.8 left it waiting (probe p167d; this case expected gpu01-02 until then)
    ("Weight=2", ["-w gpu04 -c8", "-w gpu03 " + EX], "-N2 --contiguous", ("PENDING", "Resources")),
    ("Weight=2", ["-w gpu04 -c8", "-w gpu03 -c16"], "-N2 --contiguous", _on(0, 1)),  # (probe p167e)
    # an exclusive one-node job ignores weights too
    (GPU01_HEAVIER, [], "-N1 --exclusive --contiguous", [(0, 16, 1600, 8)]),
])
def test_retries_and_one_node_shapes(tmp_path, conf, holders, opts, want):
    conf = CONF.format(w=conf) if conf == "Weight=2" else conf
    engine, _ = run_spaced(slurm_pool(tmp_path, conf), holders + [opts], 2.0, 2.0 * len(holders) + 6.0)
    assert _outcome(engine.jobs[len(holders) + 1]) == want


@pytest.mark.parametrize("holders,opts", [
    (["-w gpu03 -c1 --gres=gpu:6"], "-N1 --gres=gpu:2 -c6"),
    (["-w gpu01 -c1 --mem=40000", "-w gpu02 -c2"], "-N1 -c2 --mem-per-cpu=8000"),
    (["-w gpu03 -c6"], "-n1 --gres=gpu:2 -c6"),
    (["-w gpu03 -c2"], "--gres=gpu:2 -c6"),
])
def test_one_node_with_equal_weights_is_placed_as_without_the_option(tmp_path, holders, opts):
    """With equal weights ``--contiguous`` changes nothing for one node: the node scores
    (``usable_cpus``, the CPUs free memory pays for) are kept."""
    pool = slurm_pool(tmp_path, CONF.format(w=""))
    plain, _ = run_spaced(pool, holders + [opts], 2.0, 2.0 * len(holders) + 6.0)
    marked, _ = run_spaced(pool, holders + [opts + " --contiguous"], 2.0, 2.0 * len(holders) + 6.0)
    assert _outcome(marked.jobs[len(holders) + 1]) == _outcome(plain.jobs[len(holders) + 1])
    assert _outcome(plain.jobs[len(holders) + 1])[0] != "PENDING"


def test_memory_per_node_deals_the_tasks_in_the_order_taken(tmp_path):
    """Under MaxMemPerCPU a ``--mem`` job's CPUs are dealt over the nodes in the order taken,
    the required node first, then down."""
    conf = CONF.format(w="").replace("DefMemPerCPU=100", "DefMemPerCPU=100\nMaxMemPerCPU=4000")
    assert "MaxMemPerCPU=4000" in conf
    engine, _ = run_spaced(slurm_pool(tmp_path, conf), ["-w gpu03 -c4", "-w gpu04 " + EX,
                                                       "-n21 --contiguous -w gpu03 --mem=40000"], 2.0, 10.0)
    assert [(n, c) for n, c, _m, _g in _outcome(engine.jobs[3])] == [(1, 10), (2, 11)]


def test_the_retry_reads_default_memory_per_cpu(tmp_path):
    """DefMemPerCPU caps the CPUs the retry ranks nodes by, as ``--mem-per-cpu`` does (found by
    a fourth review, source)."""
    conf = CONF.format(w="Weight=2").replace("DefMemPerCPU=100", "DefMemPerCPU=4000")
    assert "DefMemPerCPU=4000" in conf
    engine, _ = run_spaced(slurm_pool(tmp_path, conf), ["-w gpu01 -c6", "-w gpu03 " + EX, "-w gpu04 -c1 --mem=40000",
                                                       "-n20 --contiguous"], 2.0, 12.0)
    assert _outcome(engine.jobs[4]) == [(0, 10, 40000, 0), (1, 10, 40000, 0)]
