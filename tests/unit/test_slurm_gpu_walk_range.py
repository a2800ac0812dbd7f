"""``--nodes=A-B`` beside ``--gpus=X`` (A < B, no ``--ntasks``): slurmctld walks A to B nodes
for the GPUs as it walks 1 to X without ``--nodes`` (``sbatch._walks_range``,
``PodSet.walk_nodes``, ``gpu_walk.walk_form`` and ``walk``, ``spread_gpus.spread``).

Probes p108-p111 (2026-12-05, a real 22.05.8): the seed pool's four nodes (128 CPUs, two
threads per core, 8 GPUs), partition train unless a case names another, ``--mem=100`` unless
the case gives memory, blockers pinned with ``-w`` started first, then the job; GPUs, CPUs and
memory per node from ``scontrol -d show job``. Partitions ``short`` (gpu[01-02], MaxNodes=1)
and ``mn`` (gpu[03-04], MinNodes=2) and EnforcePartLimits=NO as in the probes' slurm.conf.
"""
from __future__ import annotations

import shutil
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpupool.engine.core import Engine
from gpupool.engine.policy_api import make_policy
from gpupool.errors import InputError
from gpupool.formats.pool_dir import load_pool
from gpupool.model.workload import PodSet
from gpupool.policy.slurm import limits
from gpupool.policy.slurm.gpu_walk import walk, walk_ordered
from gpupool.policy.slurm.job_defaults import MSG_UNWALKED_RANGE
from tests.unit.sbatch_plans import GPU_NODES_CONF, slurm_pool, workload
from tests.unit.test_slurm_gpu_walk import NODE_OFFERS, _FRAG2, _run, _started_at_once, walk_inputs

#: gpu01 with 3 GPUs free, gpu02 with 1, gpu03-04 idle
_UNEVEN = {"gpu01": 5, "gpu02": 7}
#: gpu02 with 4 GPUs and 64 CPUs held, gpu03 with 4 GPUs held
_CPU = {"gpu02": "--gres=gpu:4 -c64", "gpu03": "--gres=gpu:4"}

#: (blockers, options) -> {node: (GPU indices, CPUs, MB)} as the real system gave them
_CASES = [
    ({}, "-N2-3 --gpus=8", {"gpu01": ((0, 1, 2, 3, 4, 5, 6), 2, 100), "gpu02": ((0,), 2, 100)}),
    ({}, "-N3-4 --gpus=12", {"gpu01": (tuple(range(8)), 2, 100), "gpu02": ((0, 1, 2), 2, 100),
                             "gpu03": ((0,), 2, 100)}),
    ({}, "-N1-3 --gpus=2", {"gpu01": ((0, 1), 2, 100)}),
    ({}, "-N2-4 --gpus=2", {"gpu01": ((0,), 2, 100), "gpu02": ((0,), 2, 100)}),
    ({}, "-N2-3 --gpus=9 --mem-per-gpu=1000", {"gpu01": (tuple(range(8)), 2, 8000), "gpu02": ((0,), 2, 1000)}),
    ({}, "-N1-3 --gpus=12 --mem=1000", {"gpu01": (tuple(range(8)), 2, 1000), "gpu02": ((0, 1, 2, 3), 2, 1000)}),
    ({}, "-N1-4 --gpus=12 -c4", {"gpu01": (tuple(range(8)), 4, 100), "gpu02": ((0, 1, 2, 3), 4, 100)}),
    (_FRAG2, "-N1-3 --gpus=4", {"gpu01": ((6, 7), 2, 100), "gpu02": ((6, 7), 2, 100)}),
    (_FRAG2, "-N3-4 --gpus=4", {"gpu01": ((6, 7), 2, 100), "gpu02": ((6,), 2, 100), "gpu03": ((6,), 2, 100)}),
    (_UNEVEN, "-N2-3 --gpus=10", {"gpu03": (tuple(range(8)), 2, 100), "gpu04": ((0, 1), 2, 100)}),
    (_UNEVEN, "-N1-2 --gpus=4", {"gpu03": ((0, 1, 2, 3), 2, 100)}),
    (_CPU, "-N1-3 --gpus=4", {"gpu02": ((4, 5, 6, 7), 2, 100)}),
    # runs of nodes of other weights are walked on until the least count is met (p110)
    (_UNEVEN, "-N3-4 --gpus=10", {"gpu01": ((5, 6, 7), 2, 100), "gpu03": ((0, 1, 2, 3, 4, 5), 2, 100),
                                  "gpu04": ((0,), 2, 100)}),
    (_UNEVEN, "-N3-4 --gpus=12", {"gpu01": ((5, 6, 7), 2, 100), "gpu03": (tuple(range(8)), 2, 100),
                                  "gpu04": ((0,), 2, 100)}),
    # a run of one node is enough to start from where the range spares nodes (``_enough_nodes``)
    (_UNEVEN, "-N2-4 --gpus=3", {"gpu01": ((5, 6), 2, 100), "gpu03": ((0,), 2, 100)}),
    # -n2 lowers the range to two nodes: the fixed count's spread
    ({}, "-N2-3 --gpus=8 -n2", {"gpu01": ((0, 1, 2, 3, 4, 5, 6), 2, 100), "gpu02": ((0,), 2, 100)}),
]


@pytest.fixture(scope="module")
def pool():
    return load_pool("examples/seed-pool")


def _limited_pool(root, enforce: str):
    """The seed pool with the probes' partitions ``short`` (MaxNodes=1) and ``mn`` (MinNodes=2),
    ``mn3`` (gpu[02-04], MinNodes=3) and EnforcePartLimits=``enforce``."""
    shutil.copytree("examples/seed-pool", root)
    conf = root / "slurm.conf"
    text = conf.read_text()
    line = next(x for x in text.splitlines() if x.startswith("PartitionName=train"))
    text = text.replace(line, line + "\nPartitionName=short Nodes=gpu[01-02] MaxNodes=1 MaxTime=60 State=UP"
                        "\nPartitionName=mn Nodes=gpu[03-04] MinNodes=2 MaxTime=60 State=UP"
                        "\nPartitionName=mn3 Nodes=gpu[02-04] MinNodes=3 MaxTime=60 State=UP")
    text = "\n".join(x for x in text.splitlines() if not x.startswith("EnforcePartLimits"))
    conf.write_text(text + f"\nEnforcePartLimits={enforce}\n")
    return load_pool(root)


@pytest.fixture(scope="module")
def limited(tmp_path_factory):
    """``_limited_pool`` with EnforcePartLimits=NO, as in the probes."""
    return _limited_pool(tmp_path_factory.mktemp("limited") / "pool", "NO")


def _held(pool, job) -> dict[str, tuple[tuple[int, ...], int, int]]:
    names = list(pool.nodes)
    return {names[p[0]]: (tuple(b for b in range(8) if p[1] >> b & 1), p[2] // 1000, p[3]) for p in sorted(job.placement)}


@pytest.mark.parametrize("blockers,opts,want", _CASES, ids=[f"{len(b)}blk {o}" for b, o, _ in _CASES])
def test_the_job_takes_the_nodes_gpus_cpus_and_memory_the_real_system_gave_it(pool, blockers, opts, want):
    assert _held(pool, _started_at_once(pool, blockers, opts)) == want


def test_too_few_gpus_on_the_free_nodes_waits(pool):
    """Two GPUs free on every node: ``-N1-2 --gpus=6`` waited (Resources, p108) until a blocker
    ended."""
    job = _run(pool, _FRAG2, "-N1-2 --gpus=6 --mem=100")
    assert (job.first_start, job.reason) == (300.0, "Resources")


def test_more_gpus_than_the_largest_count_holds_is_refused_at_submit(pool):
    """``-N1-2 --gpus=17`` and ``--gpus=24`` (two 8-GPU nodes at most) were refused, "Requested
    node configuration is not available"; ``-N3-4 --gpus=2`` by sbatch itself ("--gpus < -N")."""
    for opts in ("-N1-2 --gpus=17", "-N1-2 --gpus=24"):
        job = _run(pool, {}, f"{opts} --mem=100")
        assert (job.state, job.reason) == ("REJECTED", limits.MSG_NODES), opts
    with pytest.raises(InputError, match="asks fewer GPUs than the 3 nodes"):
        workload("j", "-t 5 -N3-4 --gpus=2", 0.0, 1)


@pytest.mark.parametrize("opts,want", [
    ("-N2-3 --gpus=10 --mem=100", {"cpu": 1, "mem": 200, "node": 2}),
    ("-N2-3 --gpus=10 --mem-per-gpu=100", {"cpu": 1, "mem": 1000, "node": 2}),
    ("-N2-3 --gpus=10 -c4 --mem=100", {"cpu": 4, "mem": 200, "node": 2}),
    ("-N2-3 --gpus=10 --mem-per-cpu=100", {"cpu": 1, "mem": 100, "node": 2}),
    ("-N1-3 --gpus=10 -c4 --mem=100", {"cpu": 4, "mem": 100, "node": 1}),
])
def test_a_pending_job_records_the_least_nodes_and_one_nodes_cpus(pool, opts, want):
    """Pending jobs' ``TRES=`` (p109, p110): the range's least nodes, memory per node for each
    of them, the CPUs one node asks and memory per CPU on those, memory per GPU for all X."""
    pol = make_policy("slurm", pool)
    wl = pol.resolve_request(replace(workload("j", f"-A ml-platform -t 5 {opts}", 0.0, 1), user="dave"))
    req = pol.request_of(wl)
    assert {k: req.req_tres[k] for k in ("cpu", "mem", "node")} == want
    assert req.req_tres["gres/gpu"] == 10


def test_a_minnodes_partition_raises_the_least_count(limited):
    """In ``mn`` (MinNodes=2) ``-N1-3 --gpus=2`` ran as 1 + 1 on gpu03-04 and ``--gpus=9`` as
    8 + 1 (p109)."""
    job = _started_at_once(limited, {}, "-p mn -N1-3 --gpus=2")
    assert _held(limited, job) == {"gpu03": ((0,), 2, 100), "gpu04": ((0,), 2, 100)}
    job = _started_at_once(limited, {}, "-p mn -N1-3 --gpus=9")
    assert _held(limited, job) == {"gpu03": (tuple(range(8)), 2, 100), "gpu04": ((0,), 2, 100)}


def test_a_partition_whose_node_limit_the_range_breaks_holds_it_without_testing_its_shape(limited):
    """In ``short`` (MaxNodes=1), ``-N1-3 --gpus=4`` and ``--gpus=12`` (no node of ``short``
    holds 12) were both accepted and left pending, PartitionNodeLimit (p109); listing
    ``short,train`` ran ``--gpus=12`` in train, 8 + 4 (p111)."""
    for opts in ("-p short -N1-3 --gpus=4", "-p short -N1-3 --gpus=12"):
        job = _run(limited, {}, f"{opts} --mem=100")
        assert (job.state, job.first_start, job.reason) == ("PENDING", None, "PartitionNodeLimit"), opts
    job = _started_at_once(limited, {}, "-p short,train -N1-3 --gpus=12")
    assert {n: len(g) for n, (g, _c, _m) in _held(limited, job).items()} == {"gpu01": 8, "gpu02": 4}


@pytest.mark.parametrize("opts,reason", [
    ("-p short -N2 --gres=gpu:9", "PartitionNodeLimit"),
    ("-p short -N1-3 --gres=gpu:9", "PartitionNodeLimit"),
    ("-p short -t 90 --gres=gpu:9", "PartitionTimeLimit"),
    ("-p short --gres=gpu:9", None),
])
def test_one_partitions_limits_skip_the_shape_test_at_submit(limited, opts, reason):
    """Any shape, walked or not (p111): a job listing one partition whose own limits hold it is
    not tested against the nodes at submit (``_select_nodes_parts``), so ``--gres=gpu:9`` on
    8-GPU nodes waits with the limit's reason; within the limits it is refused."""
    job = _run(limited, {}, f"{opts} --mem=100")
    if reason is None:
        assert (job.state, job.reason) == ("REJECTED", limits.MSG_NODES)
    else:
        assert (job.state, job.first_start, job.reason) == ("PENDING", None, reason)


def test_other_policies_place_one_pod_of_the_gpus(pool):
    wl = workload("j", "-A ml-platform -t 5 -N1-3 --gpus=4 --mem=100", 0.0, 1)
    (ps,) = wl.pod_sets
    assert (ps.count, ps.gpus, ps.one_per_node, ps.walk_gpus, ps.walk_nodes) == (1, 4, False, True, (1, 3))
    out = Engine(pool, [wl], make_policy("fifo", pool), check=True).run()
    assert [p[1].bit_count() for p in out.jobs[0].placement] == [4]


@pytest.mark.parametrize("opts", ["-n4", "-n4 --exclusive"])
def test_options_the_probes_did_not_have_keep_the_readers_refusal(opts):
    # (``--contiguous`` walks the range over one run since probe p167: test_slurm_contiguous_walks.py)
    with pytest.raises(InputError, match="cannot be split evenly over 1-3 node"):
        workload("j", f"-t 5 -N1-3 --gpus=8 {opts}", 0.0, 1)


def test_defaults_carrying_memory_per_cpu_walk_the_range(tmp_path):
    """DefCpuPerGPU's CPUs beside DefMemPerCPU: the range is walked as without them, memory per
    CPU following each node's CPUs (a real 22.05.8 at DefCpuPerGPU=2, DefMemPerCPU=100 ran
    ``-N1-3 --gpus=12`` as 8 + 4 GPUs with 16 + 8 CPUs and 1600 + 800 MB; probe p160; gpupool
    refused it before), and so under MaxMemPerCPU (probe p160 at MaxMemPerCPU=200: ``--gpus=12``
    and ``-N2 --gpus=12`` the same). Where MaxMemPerCPU raised the CPUs for a node's memory the
    job stays off the walk (not probed) and the range is refused in gpupool's words."""
    conf = GPU_NODES_CONF.format(last=2).replace("DefMemPerGPU=120000\n", "DefCpuPerGPU=4\nDefMemPerCPU=1000\n")
    (tmp_path / "a").mkdir()
    small = slurm_pool(tmp_path / "a", conf)
    out = Engine(small, [workload("j", "-t 5 -N1-2 --gpus=3", 0.0, 1)], make_policy("slurm", small), check=True).run()
    assert [(p[1].bit_count(), p[2], p[3]) for p in out.jobs[0].placement] == [(3, 12000, 12000)]
    capped = slurm_pool(tmp_path, conf + "MaxMemPerCPU=2000\n")
    out = Engine(capped, [workload("j", "-t 5 -N1-2 --gpus=3", 0.0, 1)], make_policy("slurm", capped), check=True).run()
    assert [(p[1].bit_count(), p[2], p[3]) for p in out.jobs[0].placement] == [(3, 12000, 12000)]
    out = Engine(capped, [workload("j", "-t 5 -N1-2 --gpus=3 --mem=40000", 0.0, 1)], make_policy("slurm", capped),
                 check=True).run()
    assert (out.jobs[0].state, out.jobs[0].reason) == ("REJECTED", MSG_UNWALKED_RANGE)


@given(NODE_OFFERS, st.integers(2, 64), st.integers(1, 6), st.integers(0, 6), st.randoms(use_true_random=False))
def test_a_range_walk_takes_its_least_nodes_at_least(nodes, need, least, spare, rnd):
    """Whatever the offers, weights and CPUs: a walk of ``--nodes=A-B`` takes between A and B
    distinct fitting nodes holding the GPUs asked, and fails wherever no B of the fitting
    nodes hold them or fewer than A fit; the ordered walk (bf_busy_nodes, least-loaded) too."""
    fitting, offer, cpus, weight = walk_inputs(nodes, rnd)
    most = least + spare
    ps = PodSet(name="m", count=most, gpus=1, one_per_node=True, min_count=least, gpus_per_job=need,
                spread_gpus=True, walk_gpus=True, walk_nodes=(least, most))
    possible = len(fitting) >= least and sum(sorted(offer.values(), reverse=True)[:most]) >= need
    for got in (walk(ps, fitting, offer, cpus, weight), walk_ordered(ps, fitting, offer, cpus)):
        if not possible:
            assert got is None
        if got is None:
            continue
        assert len(got) == len(set(got)) and set(got) <= set(fitting)
        assert least <= len(got) <= most
        assert sum(offer[i] for i in got) >= need


def test_a_minnodes_raise_counts_in_the_request_and_the_gpu_test(limited):
    """slurmctld raises the least count to MinNodes before it builds the request and before
    it tests the GPUs against the nodes (``_valid_job_part``, then ``gres_job_state_validate``;
    from the source, not probed): ``-p mn -N1-3 --gpus=10`` records node=2 and memory per
    node for two. sbatch lowered the largest count to the GPUs before that, so ``-p mn3 -N1-4
    --gpus=2`` (MinNodes=3) is not raised and waits under EnforcePartLimits=NO, as a real
    22.05.8 queued ``-N1-3 --gpus=1`` in a MinNodes=2 partition (probe p140; this test said
    "--gpus < -N" until finding 96)."""
    pol = make_policy("slurm", limited)
    wl = pol.resolve_request(replace(workload("j", "-A ml-platform -p mn -t 5 -N1-3 --gpus=10 --mem=100", 0.0, 1),
                                     user="dave"))
    req = pol.request_of(wl)
    assert {k: req.req_tres[k] for k in ("cpu", "mem", "node")} == {"cpu": 1, "mem": 200, "node": 2}
    for opts in ("-p mn3 -N1-4 --gpus=2", "-p mn3 -N2-4 --gpus=2"):
        job = _run(limited, {}, f"{opts} --mem=100")
        assert (job.state, job.reason) == ("PENDING", "PartitionNodeLimit"), opts
    job = _started_at_once(limited, {}, "-p mn3 -N1-4 --gpus=3")
    assert {n: len(g) for n, (g, _c, _m) in _held(limited, job).items()} == {"gpu02": 1, "gpu03": 1, "gpu04": 1}


def test_the_limits_skipping_the_shape_test_are_those_of_the_job_as_stored(limited):
    """The skip reads the job as slurmctld stores it (``job_limits_check`` after the MinNodes
    raise and the time limit filled in; from the source): ``-p mn -N1-2 --gres=gpu:9`` meets
    MinNodes once raised, so its shape is tested and refused; ``--qos=high -p short
    --gres=gpu:9`` without ``--time`` gets QOS high's MaxWall, over MaxTime, and waits with
    PartitionTimeLimit."""
    job = _run(limited, {}, "-p mn -N1-2 --gres=gpu:9 --mem=100")
    assert (job.state, job.reason) == ("REJECTED", limits.MSG_NODES)
    wl = replace(workload("j", "-A ml-research --qos=high -p short --gres=gpu:9 --mem=100", 0.0, 1, runtime=100.0),
                 user="alice")
    job = Engine(limited, [wl], make_policy("slurm", limited), check=True, until=500).run().jobs[0]
    assert (job.state, job.reason) == ("PENDING", "PartitionTimeLimit")


@pytest.mark.parametrize("enforce", ["YES", "ALL"])
def test_enforced_partition_limits_read_the_range_lowered_to_the_gpus(tmp_path, enforce):
    """Under EnforcePartLimits the range's largest count is held against MaxNodes once sbatch
    has lowered it to the job's GPUs (its own ``gres_job_state_validate``, before the job is
    sent): probe p140 on a real 22.05.8 took ``-N1-3 --gpus=1`` in a MaxNodes=1 partition under
    ANY and ALL, and refused ``-N1-3 --gpus=8`` there, "Node count specification invalid".
    (This test had read the source alone and expected the first refused.)"""
    pool = _limited_pool(tmp_path / "pool", enforce)
    assert _run(pool, {}, "-p short -N1-3 --gpus=1 --mem=100").first_start == 1.0
    job = _run(pool, {}, "-p short -N1-3 --gpus=2 --mem=100")
    assert (job.state, job.reason) == ("REJECTED", limits.MSG_NODE_COUNT)
    assert _run(pool, {}, "-N1-2 --gpus=1 --mem=100").first_start == 1.0


def test_reports_class_a_pending_range_of_several_nodes_as_multi_node(pool):
    from gpupool.report.metrics import job_shape

    wls = [replace(workload(f"j{k}", f"-A ml-platform -t 5 --mem=100 {o}", at, k, runtime=300.0), user="dave")
           for k, (o, at) in enumerate([("-N1 --gres=gpu:8 -w gpu0%d" % i, 0.0) for i in range(1, 5)]
                                       + [("-N3-4 --gpus=6", 1.0)], 1)]
    out = Engine(pool, wls, make_policy("slurm", pool), check=True, until=100.0).run()
    job = max(out.jobs, key=lambda j: j.id)
    assert job.state == "PENDING" and job_shape(job) == "multi-node"
