"""--nodelist (required nodes), --exclude and --constraint in the Slurm policy, against what a
real 22.05.8 did (``tests/differential/test_real_slurm_node_filter.py`` runs the same on both
systems).

Cluster: partition p on n1-n3, partition small on n4, 8 GPUs and 16 CPUs each; n1 has the
feature ib, n2 ib and a100, n3 a100. What the real runs showed:

* blocking: R holds n1's GPUs; J (``-w n1``) waits (Resources) but does not block p: L (any
  node) starts at once on n2 and X (``-x n2``) on n3;
* shapes: ``-N3 -w n2`` runs on n1-n3 (the listed node plus two chosen as usual);
  ``-n3 -w n1,n3`` runs its three tasks on n1 and n3 only; ``-C ib&a100`` runs on n2,
  ``-N2 -C a100`` on n2-n3, and ``-w n1,n3`` alone on both nodes, one task each;
* refusals at submit: an unknown node ("Invalid node name specified"), a node outside the
  partition ("Requested nodes not in this partition") and a feature no node has ("Invalid
  feature specification").
"""
from __future__ import annotations

from pathlib import Path

import pytest

from gpupool.engine.core import Engine
from gpupool.engine.policy_api import make_policy
from gpupool.errors import InputError
from gpupool.formats.pool_dir import load_pool
from gpupool.policy.slurm.submit_check import submit_rejection

from tests.unit.sbatch_plans import split_options, workload

SLURM_CONF = """\
ClusterName=limits
SchedulerType=sched/backfill
SchedulerParameters=bf_interval=30,sched_interval=60
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=100
PriorityType=priority/basic
GresTypes=gpu
NodeName=gpu01 CPUs=16 RealMemory=64000 Gres=gpu:8 Features=ib
NodeName=gpu02 CPUs=16 RealMemory=64000 Gres=gpu:8 Features=ib,a100
NodeName=gpu03 CPUs=16 RealMemory=64000 Gres=gpu:8 Features=a100
NodeName=gpu04 CPUs=16 RealMemory=64000 Gres=gpu:8
PartitionName=p Nodes=gpu[01-03] Default=YES MaxTime=60
PartitionName=small Nodes=gpu04 MaxTime=60
"""
#: each node's features, in node order (the differential test gives the real nodes the same)
FEATURES = [("ib",), ("ib", "a100"), ("a100",), ()]

#: scenario -> (job, submit time, sbatch options)
SCENARIOS = {
    "blocking": [
        ("R", 0.0, "-w gpu01 --gres=gpu:8 -t 10"),
        ("J", 3.0, "-w gpu01 --gres=gpu:8 -t 10"),
        ("L", 3.0, "--gres=gpu:8 -t 30"),
        ("X", 3.0, "-x gpu02 --gres=gpu:8 -t 30"),
    ],
    "shapes": [
        ("A", 0.0, "-N3 -n3 -w gpu02 --gres=gpu:1 -t 10"),
        ("B", 1.0, "-n3 -w gpu01,gpu03 --gpus-per-task=1 -t 10"),
        ("C", 2.0, "-C ib&a100 --gres=gpu:1 -t 10"),
        ("D", 3.0, "-N2 -n2 -C a100 --gres=gpu:1 -t 10"),
        ("E", 4.0, "-w gpu01,gpu03 --gres=gpu:1 -t 10"),
    ],
}
#: submissions sbatch refuses, and with what
REFUSED = {
    "unknown node": "-w gpu09",
    "unknown feature": "-C nosuch",
    "node outside the partition": "-p small -w gpu01",
}


def scenario(tmp_path: Path, name: str, conf: Path | None = None, until: float = 11.0):
    """A scenario in gpupool: its jobs by name at ``until``."""
    import gpupool.policy.slurm  # noqa: F401  (registers the policy)

    if conf is None:
        tmp_path.mkdir(parents=True, exist_ok=True)
        (tmp_path / "slurm.conf").write_text(SLURM_CONF)
        conf = tmp_path
    pool = load_pool(conf)
    wls = [workload(job, opts, at, k) for k, (job, at, opts) in enumerate(SCENARIOS[name], start=1)]
    out = Engine(pool, wls, make_policy("slurm", pool), check=True, until=until).run()
    by_id = {j.id: j for j in out.jobs}
    return {job: by_id[k] for k, (job, _at, _o) in enumerate(SCENARIOS[name], start=1)}


def refusal(conf: Path, opts: str) -> str | None:
    """gpupool's submit-time message for a job with ``opts`` on the pool at ``conf``."""
    return submit_rejection(load_pool(conf), workload("refused", opts + " -t 5", 0.0, 1))


def _nodes(job) -> list[int]:
    return sorted({p[0] for p in job.placement})


def test_a_job_waiting_for_its_required_node_does_not_block_the_partition(tmp_path):
    jobs = scenario(tmp_path, "blocking")
    assert jobs["R"].state == "RUNNING" and _nodes(jobs["R"]) == [0]
    assert jobs["J"].state == "PENDING" and jobs["J"].reason == "Resources"
    assert jobs["L"].state == "RUNNING" and _nodes(jobs["L"]) == [1] and jobs["L"].start == 3.0
    assert jobs["X"].state == "RUNNING" and _nodes(jobs["X"]) == [2]


def test_required_excluded_and_featured_nodes_shape_placements(tmp_path):
    jobs = scenario(tmp_path, "shapes")
    assert _nodes(jobs["A"]) == [0, 1, 2]
    assert _nodes(jobs["B"]) == [0, 2] and len(jobs["B"].placement) == 3
    assert _nodes(jobs["C"]) == [1]
    assert _nodes(jobs["D"]) == [1, 2]
    assert _nodes(jobs["E"]) == [0, 2] and len(jobs["E"].placement) == 2
    assert all(j.state == "RUNNING" for j in jobs.values())


@pytest.mark.parametrize("key", sorted(REFUSED))
def test_sbatch_refusals_use_slurms_wording(tmp_path, key):
    """Under EnforcePartLimits=ALL, as the real-Slurm harness ran it; under NO a required node
    outside the partition is select's "Requested node configuration is not available" (probe
    p137: ``-p q -w gpu01``)."""
    (tmp_path / "slurm.conf").write_text("EnforcePartLimits=ALL\n" + SLURM_CONF)
    want = {"unknown node": "Invalid node name specified", "unknown feature": "Invalid feature specification",
            "node outside the partition": "Requested nodes not in this partition"}[key]
    assert refusal(tmp_path, REFUSED[key]) == want
    (tmp_path / "slurm.conf").write_text(SLURM_CONF)
    if key == "node outside the partition":
        want = "Requested node configuration is not available"
    assert refusal(tmp_path, REFUSED[key]) == want


def test_a_blocking_job_whose_list_covers_fewer_nodes_than_asked_blocks_as_usual(tmp_path):
    """``-N2 -w gpu01`` needs gpu01 and one more node: slurmctld withholds only required nodes
    when they cover the job's node count, so this one blocks the partition."""
    import gpupool.policy.slurm  # noqa: F401

    (tmp_path / "slurm.conf").write_text(SLURM_CONF)
    pool = load_pool(tmp_path)
    wls = [workload("R", "-w gpu01 --gres=gpu:8 -t 10", 0.0, 1),
           workload("J", "-N2 -n2 -w gpu01 --gres=gpu:8 -t 10", 3.0, 2),
           workload("L", "--gres=gpu:8 -t 30", 3.0, 3)]
    out = Engine(pool, wls, make_policy("slurm", pool), check=True, until=20.0).run()
    by_id = {j.id: j for j in out.jobs}
    assert by_id[2].state == "PENDING" and by_id[3].state == "PENDING"


@pytest.mark.parametrize("opts,message", [
    ("-N1 -w gpu[01-02]", "invalid number of nodes (-N 2-1)"),
    # (more hosts than --nodes' largest count is refused before sbatch drops hosts beyond the
    # tasks: a review's reading of 22.05.8's sbatch/opt.c)
    ("-N1 -n1 -w gpu01,gpu02", "invalid number of nodes (-N 2-1)"),
    ("-N1-2 -n2 -w gpu[01-03]", "invalid number of nodes (-N 3-2)"),
    ("-C a100|ib&x", "& and | in one expression"),
    ("-C [ib|a100]", "matching OR brackets"),
    ("-C ib*2", "feature counts"),
])
def test_what_gpupool_does_not_model_is_refused_naming_the_line(opts, message):
    import re

    with pytest.raises(InputError, match=re.escape(message)) as err:
        workload("bad", opts, 0.0, 1)
    # the line of the -w or -C option: line 1 is the shebang, options follow one per line
    line = 2 + next(k for k, o in enumerate(split_options(opts)) if o.startswith(("-w", "-C")))
    assert f"bad.sbatch:{line}:" in str(err.value)


def test_constraint_and_nodelist_expressions():
    from gpupool.engine.nodes import NodeTable
    from gpupool.policy.slurm.node_filter import job_nodes

    import tempfile

    d = Path(tempfile.mkdtemp())
    (d / "slurm.conf").write_text(SLURM_CONF)
    nodes = NodeTable(load_pool(d))
    lim = job_nodes(workload("a", "-C ib|a100 -x gpu03", 0.0, 1), nodes)
    assert lim.allowed == 0b0011 and lim.required == 0 and lim.problem is None
    lim = job_nodes(workload("b", "-C ib&a100", 0.0, 1), nodes)
    assert lim.allowed == 0b0010
    lim = job_nodes(workload("c", "-N2 -w gpu[01,03]", 0.0, 1), nodes)
    assert lim.allowed is None and lim.required == 0b0101 and lim.required_count == 2


def _run(tmp_path: Path, plan, until: float, conf: str = SLURM_CONF):
    import gpupool.policy.slurm  # noqa: F401

    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "slurm.conf").write_text(conf)
    pool = load_pool(tmp_path)
    wls = [workload(job, opts, at, k) for k, (job, at, opts) in enumerate(plan, start=1)]
    pol = make_policy("slurm", pool, {"record": True})  # plans are read, as squeue --start does
    out = Engine(pool, wls, pol, check=True, until=until).run()
    return pol, {job: j for (job, _a, _o), j in zip(plan, sorted(out.jobs, key=lambda j: j.id))}


@pytest.mark.parametrize("r2", ["-w gpu02 --gres=gpu:4 -t 2", "-p small -w gpu04 --gres=gpu:8 -t 2"])
def test_backfill_plans_an_excluding_job_from_the_nodes_it_may_use(tmp_path, r2):
    """Slurm takes excluded nodes out before will-run, so running jobs there do not delay the
    plan: J may only use gpu01, which R1 frees at 120 s (R3 on gpu03 ends at 600 s)."""
    plan = [("R1", 0.0, "-w gpu01 --gres=gpu:8 -t 2"), ("R2", 10.0, r2), ("R3", 0.0, "-w gpu03 --gres=gpu:8 -t 10"),
            ("J", 20.0, "-x gpu[02-03] --gres=gpu:8 -t 10")]
    pol, jobs = _run(tmp_path, plan, 100.0)
    assert jobs["J"].state == "PENDING" and pol.planned[jobs["J"].id] == 120.0


def test_a_job_requiring_a_drained_or_down_node_is_accepted_and_waits(tmp_path):
    for state in ("DRAIN", "DOWN"):
        conf = SLURM_CONF.replace("Gres=gpu:8 Features=ib\n", f"Gres=gpu:8 Features=ib State={state}\n", 1)
        (tmp_path / "slurm.conf").write_text(conf)
        assert refusal(tmp_path, "-w gpu01 --gres=gpu:1") is None
        pol, jobs = _run(tmp_path / state, [("J", 0.0, "-w gpu01 --gres=gpu:1 -t 5")], 60.0, conf)
        assert jobs["J"].state == "PENDING"


@pytest.mark.parametrize("opts,option", [("-x gpu[01-", "--exclude"), ("-N2 -w gpu[a-b]", "--nodelist")])
def test_a_malformed_hostlist_is_refused_naming_its_option_and_line(opts, option):
    with pytest.raises(InputError, match=f"bad.sbatch:\\d+: {option}="):
        workload("bad", opts, 0.0, 1)


def test_a_pod_set_smaller_than_its_required_nodes_is_not_placed():
    from gpupool.model.workload import PodSet
    from gpupool.policy.slurm.select import _with_required, Free

    import tempfile

    d = Path(tempfile.mkdtemp())
    (d / "slurm.conf").write_text(SLURM_CONF)
    from gpupool.engine.nodes import NodeTable

    free = Free(NodeTable(load_pool(d)))
    ps = PodSet(name="t", count=1, cpu_m=1000, memory_mib=10, gpus=1)
    before = (list(free.cpu), list(free.mask))
    assert _with_required(ps, [0, 1, 2], free, free.nodes.weight, [0, 1], None) is None
    assert (free.cpu, free.mask) == before


def test_a_drained_required_node_gives_slurms_reqnodenotavail_reason(tmp_path):
    """A real 22.05.8 with gpu01 drained: ``-w gpu01`` and ``-N2 -w gpu01,gpu02`` pending with
    "ReqNodeNotAvail, UnavailableNodes:gpu01", and a later job without limits running at once."""
    conf = SLURM_CONF.replace("Gres=gpu:8 Features=ib\n", "Gres=gpu:8 Features=ib State=DRAIN\n", 1)
    plan = [("J", 0.0, "-w gpu01 --gres=gpu:1 -t 5"), ("K", 0.0, "-N2 -w gpu01,gpu02 --gres=gpu:1 -t 5"),
            ("L", 0.0, "--gres=gpu:1 -t 5")]
    pol, jobs = _run(tmp_path, plan, 50.0, conf)
    assert jobs["J"].state == jobs["K"].state == "PENDING"
    assert jobs["J"].reason == jobs["K"].reason == "ReqNodeNotAvail, UnavailableNodes:gpu01"
    assert jobs["L"].state == "RUNNING" and jobs["L"].start == 0.0
