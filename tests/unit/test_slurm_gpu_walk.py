"""``--gpus=X`` with no node or task count: slurmctld takes nodes until their free GPUs reach X
(policy/slurm/gpu_walk.py).

Probes p101 and p102 (2026-12-04, a real 22.05.8): the seed pool's four nodes (128 CPUs, two
threads per core, 8 GPUs, DefMemPerGPU=120000), partition train, ``--mem=100`` unless the case
gives memory, blockers pinned with ``-w`` started first, then the job.
"""
from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpupool.engine.core import Engine
from gpupool.engine.policy_api import make_policy
from gpupool.formats.pool_dir import load_pool
from gpupool.policy.slurm import limits
from gpupool.policy.slurm.gpu_walk import walk
from gpupool.model.workload import PodSet
from tests.unit.sbatch_plans import GPU_NODES_CONF, slurm_pool, workload

#: the blockers of p102 (each ``-n1 --mem=100``): GPUs held per node
_FRAG2 = {"gpu01": 6, "gpu02": 6, "gpu03": 6, "gpu04": 6}
_RUNS = {"gpu01": 6, "gpu03": 5}
_CPU = {"gpu02": "--gres=gpu:4 -c64", "gpu03": "--gres=gpu:4"}

#: (blockers, options) -> {node: GPUs} as ``scontrol -d show job`` gave them
_CASES = [
    ({}, "--gpus=16", {"gpu01": 8, "gpu02": 8}),
    ({}, "--gpus=12", {"gpu01": 8, "gpu02": 4}),
    ({}, "--gpus=9", {"gpu01": 8, "gpu02": 1}),
    ({"gpu01": 6}, "--gpus=12", {"gpu02": 8, "gpu03": 4}),
    ({"gpu01": 6}, "--gpus=4", {"gpu02": 4}),
    (_FRAG2, "--gpus=4", {"gpu01": 2, "gpu02": 2}),
    (_FRAG2, "--gpus=5", {"gpu01": 2, "gpu02": 2, "gpu03": 1}),
    (_FRAG2, "-n2 --gpus=4", {"gpu01": 2, "gpu02": 2}),
    (_RUNS, "--gpus=12", {"gpu02": 8, "gpu04": 4}),
    (_RUNS, "--gpus=20", {"gpu01": 2, "gpu02": 8, "gpu03": 3, "gpu04": 7}),
    (_CPU, "--gpus=4", {"gpu02": 4}),
    (_CPU, "--gpus=12", {"gpu01": 8, "gpu04": 4}),
]


@pytest.fixture(scope="module")
def pool():
    return load_pool("examples/seed-pool")


def _blocker(node: str, held) -> str:
    opts = held if isinstance(held, str) else f"--gres=gpu:{held}"
    return f"-w {node} -n1 --mem=100 {opts}"


def _run(pool, blockers: dict, opts: str):
    specs = [(_blocker(n, h), 0.0) for n, h in blockers.items()] + [(opts, 1.0)]
    wls = [replace(workload(f"j{k}", f"-A ml-platform -t 5 {o}", at, k, runtime=300.0), user="dave")
           for k, (o, at) in enumerate(specs, 1)]
    out = Engine(pool, wls, make_policy("slurm", pool), record_events=True, check=True).run()
    return max(out.jobs, key=lambda j: j.id)


def node_totals(pool, job) -> dict[str, tuple[int, int, int]]:
    """node name -> (GPU bit set, millicores, MB) the job holds there, its pods on the node
    together (task pods may share a node)."""
    names = list(pool.nodes)
    out: dict[str, tuple[int, int, int]] = {}
    for node, mask, cpu, mem in job.placement:
        had = out.get(names[node], (0, 0, 0))
        out[names[node]] = (had[0] | mask, had[1] + cpu, had[2] + mem)
    return dict(sorted(out.items()))


def node_amounts(pool, job) -> dict[str, tuple[int, int, int]]:
    """node name -> (GPUs, CPUs, MB) the job holds there, its pods on the node together."""
    return {n: (m.bit_count(), c // 1000, mem) for n, (m, c, mem) in node_totals(pool, job).items()}


def _per_node(pool, job) -> dict[str, int]:
    names = list(pool.nodes)
    return {names[p[0]]: p[1].bit_count() for p in sorted(job.placement)}


def _started_at_once(pool, blockers: dict, opts: str):
    """The job of ``opts`` (``--mem=100`` unless it asks memory) run after ``blockers``,
    checked to start as soon as it was submitted."""
    job = _run(pool, blockers, opts if "--mem" in opts else opts + " --mem=100")
    assert job.first_start == 1.0
    return job


@pytest.mark.parametrize("blockers,opts,want", _CASES, ids=[f"{len(b)}blk {o}" for b, o, _ in _CASES])
def test_the_job_takes_the_nodes_and_gpus_the_real_system_gave_it(pool, blockers, opts, want):
    assert _per_node(pool, _started_at_once(pool, blockers, opts)) == want


def test_each_node_holds_one_task_and_the_memory_asked_per_node_or_per_gpu(pool):
    """``--gpus=16 -c4``: 4 CPUs a node; ``--mem=2000``: 2000 MB on each; ``--mem-per-gpu=1000``
    with 8 + 4 GPUs: 8000 and 4000 MB (p101)."""
    job = _run(pool, {}, "--gpus=16 -c4 --mem=100")
    assert [(p[2], p[3]) for p in sorted(job.placement)] == [(4000, 100)] * 2
    job = _run(pool, {}, "--gpus=16 --mem=2000")
    assert [(p[2], p[3]) for p in sorted(job.placement)] == [(2000, 2000)] * 2
    job = _run(pool, {}, "--gpus=12 --mem-per-gpu=1000")
    assert [(p[2], p[3]) for p in sorted(job.placement)] == [(2000, 8000), (2000, 4000)]
    job = _run(pool, _FRAG2, "--gpus=4 -c4 --mem=100")
    assert [(p[2], p[3]) for p in sorted(job.placement)] == [(4000, 100)] * 2


def test_a_task_count_holds_the_job_to_its_shape(pool):
    """``-n1 --gpus=4`` waits where no node has 4 GPUs free (p102: Resources), until the
    blockers end."""
    job = _run(pool, _FRAG2, "-n1 --gpus=4 --mem=100")
    assert job.first_start == 300.0 and len(job.placement) == 1


def test_more_gpus_than_the_partition_has_is_refused_at_submit(pool):
    """``--gpus=40`` on the 32 GPUs of partition train and ``-n1 --gpus=16`` (one node) were
    refused, "Requested node configuration is not available"; ``--gpus=32`` was taken."""
    for opts, refused in (("--gpus=40", True), ("-n1 --gpus=16", True), ("--gpus=32", False)):
        job = _run(pool, {}, f"{opts} --mem=100")
        if refused:
            assert (job.state, job.reason) == ("REJECTED", limits.MSG_NODES), opts
        else:
            assert job.state != "REJECTED" and job.first_start == 1.0, opts
            assert sum(_per_node(pool, job).values()) == 32


def test_the_request_counts_one_node_until_the_job_starts(pool):
    """A pending ``--gpus=20`` recorded ``cpu=1,mem=100M,node=1,gres/gpu=20`` (p101)."""
    pol = make_policy("slurm", pool)
    wl = pol.resolve_request(replace(workload("j", "-A ml-platform -t 5 --gpus=20 --mem=100", 0.0, 1), user="dave"))
    (ps,) = wl.pod_sets
    assert (ps.walked, ps.count, ps.min_count, ps.gpus, ps.total_gpus) == (True, 20, 1, 1, 20)
    assert (ps.cpus_total, ps.memory_total, wl.req_cpu_mem) == (1, 100, None)


def test_other_policies_place_the_pod_as_submitted(pool):
    wl = workload("j", "-A ml-platform -t 5 --gpus=4 --mem=100", 0.0, 1)
    (ps,) = wl.pod_sets
    assert (ps.count, ps.gpus, ps.one_per_node, ps.walk_gpus) == (1, 4, False, True)
    out = Engine(pool, [wl], make_policy("fifo", pool), check=True).run()
    assert [p[1].bit_count() for p in out.jobs[0].placement] == [4]


def test_the_walk_rule_on_counts():
    """Runs of one weight; the lowest first; at equal weight one holding what is left, then
    the fewest CPUs; a lone node holding the rest is taken alone."""
    ps = PodSet(name="m", count=12, gpus=1, one_per_node=True, min_count=1, gpus_per_job=12,
                spread_gpus=True, walk_gpus=True)
    fitting = [0, 1, 2, 3]
    cpus = dict.fromkeys(fitting, 128)
    # equal weights, no node holds 12: index order until enough
    assert walk(ps, fitting, {0: 8, 1: 8, 2: 8, 3: 8}, cpus, [1] * 4) == [0, 1]
    # node 2's lower weight first, then the lightest run left: node 3 holds the rest alone
    assert walk(ps, fitting, {0: 8, 1: 2, 2: 8, 3: 4}, cpus, [3, 3, 0, 2]) == [2, 3]
    # two lightest runs, neither holding all 12: both taken, the one with more CPUs first (the
    # nodes come back in the order taken: a job's tasks are dealt out in that order)
    assert walk(ps, fitting, {0: 8, 1: 2, 2: 2, 3: 8}, {0: 100, 1: 128, 2: 128, 3: 120}, [1, 2, 2, 1]) == [3, 0]
    # too few GPUs in all
    assert walk(ps, fitting, {0: 2, 1: 2, 2: 2, 3: 2}, cpus, [1] * 4) is None
    # at most ps.count nodes
    assert walk(replace(ps, count=2), fitting, {0: 4, 1: 4, 2: 4, 3: 4}, cpus, [1] * 4) is None


def test_memory_and_cpus_per_gpu_from_the_defaults_follow_each_nodes_gpus(pool, tmp_path):
    """DefMemPerGPU (the seed pool's 120000) is per GPU: 3 GPUs hold 360000 MB, 8 + 4 hold
    960000 and 480000. DefCpuPerGPU=4's 48 CPUs go out in index order, each node giving what
    its free CPUs hold while the later node keeps one GPU's worth: 44 + 4 (probe p117, a
    partition with DefCpuPerGPU=4: ``--gpus=12`` ran with 44 + 4 CPUs; gpupool gave 32 + 16
    before, its unprobed reading)."""
    job = _run(pool, {}, "--gpus=3")
    assert [(p[1].bit_count(), p[3]) for p in job.placement] == [(3, 360000)]
    job = _run(pool, {}, "--gpus=12")
    assert [(p[1].bit_count(), p[3]) for p in sorted(job.placement)] == [(8, 960000), (4, 480000)]
    conf = GPU_NODES_CONF.format(last=4).replace("DefMemPerGPU=120000\n", "DefMemPerGPU=120000\nDefCpuPerGPU=4\n")
    small = slurm_pool(tmp_path, conf)
    out = Engine(small, [workload("j", "-t 5 --gpus=12 --mem=100", 0.0, 1)], make_policy("slurm", small),
                 check=True).run()
    assert [(p[1].bit_count(), p[2], p[3]) for p in sorted(out.jobs[0].placement)] == [(8, 44000, 100), (4, 4000, 100)]


def test_a_node_offers_no_more_gpus_than_its_free_memory_pays_for_at_the_default(pool):
    """With 300000 MB free on every node and DefMemPerGPU=120000, each node offers 2 GPUs even
    to a job giving ``--mem``: ``--gpus=6`` walks three nodes (cons_tres's GRES filter caps a
    node's GPUs by its free memory over the memory per GPU, DefMemPerGPU where none is asked;
    read from the source, not probed)."""
    blockers = {f"gpu0{i}": "--mem=700000" for i in range(1, 5)}
    specs = [(f"-w {n} -n1 {o}", 0.0) for n, o in blockers.items()] + [("--gpus=6 --mem=100", 1.0)]
    wls = [replace(workload(f"j{k}", f"-A ml-platform -t 5 {o}", at, k, runtime=300.0), user="dave")
           for k, (o, at) in enumerate(specs, 1)]
    out = Engine(pool, wls, make_policy("slurm", pool), check=True).run()
    job = max(out.jobs, key=lambda j: j.id)
    assert job.first_start == 1.0 and len(job.placement) == 3
    assert sum(p[1].bit_count() for p in job.placement) == 6


def test_options_choosing_nodes_another_way_keep_the_shape_as_submitted():
    for opts in ("--spread-job", "--ntasks-per-gpu=1", "--gpus-per-socket=2"):
        (ps,) = workload("j", f"-t 5 --gpus=16 {opts}", 0.0, 1).pod_sets
        assert not ps.walk_gpus, opts
    (ps,) = workload("j", "-t 5 --gpus=16", 0.0, 1).pod_sets
    assert ps.walk_gpus
    # (``--contiguous`` walks one run since probe p167: test_slurm_contiguous_walks.py)
    (ps,) = workload("j", "-t 5 --gpus=16 --contiguous", 0.0, 1).pod_sets
    assert ps.walk_gpus and ps.contiguous


def test_node_limits_cap_the_nodes_walked(tmp_path):
    """Probe p103 (a real 22.05.8, QOS normal with MaxTRESPerJob=node=1): ``--gpus=16`` refused
    at submit ("Requested node configuration is not available"), ``--gpus=8`` ran on one node,
    ``--gpus=4`` with two GPUs free on every node waited (Resources), ``-N2 --gres=gpu:1``
    waited with QOSMaxNodePerJobLimit."""
    import shutil

    shutil.copytree("examples/seed-pool", tmp_path / "pool")
    cfg = tmp_path / "pool" / "accounts.cfg"
    text = cfg.read_text()
    old = "QOS - 'normal':Description='Default QOS':Priority=0:UsageFactor=1.0"
    assert old in text
    cfg.write_text(text.replace(old, old + ":MaxTRESPerJob=node=1"))
    capped = load_pool(tmp_path / "pool")
    job = _run(capped, {}, "--gpus=16 --mem=100")
    assert (job.state, job.reason) == ("REJECTED", limits.MSG_NODES)
    assert _per_node(capped, _run(capped, {}, "--gpus=8 --mem=100")) == {"gpu01": 8}
    job = _run(capped, _FRAG2, "--gpus=4 --mem=100")
    assert job.first_start == 300.0 and len(job.placement) == 1  # once a blocker ends
    job = _run(capped, {}, "-N2 --gres=gpu:1 --mem=100")
    assert job.first_start is None and job.reason == "QOSMaxNodePerJobLimit"


#: fitting nodes for a walk: (GPUs offered, CPUs free, weight) each
NODE_OFFERS = st.lists(st.tuples(st.integers(1, 8), st.integers(2, 128), st.integers(0, 2)), min_size=1, max_size=12)


def walk_inputs(nodes, rnd) -> tuple[list[int], dict[int, int], dict[int, int], list[int]]:
    """(fitting node indices among 40, GPUs offered, CPUs free, weights) for ``nodes`` drawn
    from ``NODE_OFFERS``, at indices ``rnd`` scatters."""
    fitting = sorted(rnd.sample(range(40), len(nodes)))
    offer = {i: g for i, (g, _c, _w) in zip(fitting, nodes)}
    cpus = {i: c for i, (_g, c, _w) in zip(fitting, nodes)}
    weight = [0] * 40
    for i, (_g, _c, w) in zip(fitting, nodes):
        weight[i] = w
    return fitting, offer, cpus, weight


@given(NODE_OFFERS, st.integers(2, 64), st.integers(1, 12), st.randoms(use_true_random=False))
def test_the_walk_takes_enough_gpus_on_few_enough_nodes(nodes, need, most, rnd):
    """Whatever the offers, weights and CPUs: a walk's nodes are fitting nodes, distinct, at
    most ``count`` of them, holding the GPUs asked; it fails only where all fitting nodes
    together hold too few or it may take fewer nodes than fit; and the node taken last was
    needed (the others fall short)."""
    fitting, offer, cpus, weight = walk_inputs(nodes, rnd)
    ps = PodSet(name="m", count=most, gpus=1, one_per_node=True, min_count=1, gpus_per_job=need,
                spread_gpus=True, walk_gpus=True)
    got = walk(ps, fitting, offer, cpus, weight)
    if got is None:  # too few GPUs in all, or the walk ran out of nodes it may take
        assert sum(offer.values()) < need or most < len(fitting)
        return
    assert len(got) == len(set(got)) and set(got) <= set(fitting) and len(got) <= most
    total = sum(offer[i] for i in got)
    assert total >= need
    assert min(total - offer[i] for i in got) < need or len(got) == 1


def test_the_node_cap_follows_slurms_override_rules():
    """``acct_policy_get_max_nodes`` (22.05 source): the QOS pair first; an association's group
    limit only where no QOS sets one, its per-job limit only where no QOS sets a per-job,
    per-user or per-account one; up the tree until a group limit lowered the cap."""
    from gpupool.model.slurm import Association, Qos

    def assoc(grp=None, per_job=None, user=None):
        return Association(account="a", user=user, grp_tres={"node": grp} if grp else {},
                           max_tres_per_job={"node": per_job} if per_job else {})

    qos_pj4 = Qos("q", max_tres_per_job={"node": 4})
    assert limits.max_nodes((qos_pj4, None), [("a", assoc(per_job=2, user="u"))]) == 4
    assert limits.max_nodes((Qos("q", grp_tres={"node": 4}), None), [("a", assoc(user="u")), ("acc", assoc(grp=2))]) == 4
    assert limits.max_nodes((Qos("q"), None), [("a", assoc(per_job=2, user="u"))]) == 2
    assert limits.max_nodes((Qos("q"), None), [("a", assoc(grp=3, user="u")), ("acc", assoc(grp=2))]) == 3
    assert limits.max_nodes((Qos("q"), None), [("a", assoc(user="u")), ("acc", assoc(grp=2))]) == 2
    assert limits.max_nodes((Qos("q"), Qos("p", max_tres_per_user={"node": 3})), [("a", assoc(per_job=1, user="u"))]) == 3
    assert limits.max_nodes((Qos("q"), None), [("a", assoc(user="u"))]) is None


def test_reports_count_the_nodes_a_walked_job_got(pool):
    """The job table's shape and pods read a walked job's placement (one node, or two)."""
    from gpupool.report.metrics import jobs_frame

    wls = [replace(workload(f"j{k}", f"-A ml-platform -t 5 --mem=100 {o}", 0.0, k, runtime=300.0), user="dave")
           for k, o in ((1, "--gpus=4"), (2, "--gpus=16"))]
    out = Engine(pool, wls, make_policy("slurm", pool), check=True).run()
    frame = jobs_frame(out).set_index("id")
    assert (frame.loc[1, "shape"], frame.loc[1, "pods"]) == ("2-7 GPUs", 1)
    assert (frame.loc[2, "shape"], frame.loc[2, "pods"]) == ("multi-node", 2)


def test_a_restarted_engine_adopts_a_walked_job_on_the_nodes_it_runs_on(pool):
    """The live daemon re-registers running jobs after a restart (``Engine.adopt``): a walked
    job runs on fewer pods than its most."""
    pol = make_policy("slurm", pool)
    wl = pol.resolve_request(replace(workload("j", "-A ml-platform -t 5 --mem=100 --gpus=16", 0.0, 1), user="dave"))
    eng = Engine(pool, [], make_policy("slurm", pool), check=True)
    job = eng.adopt(wl, ((0, 0xFF, 2000, 100), (1, 0xFF, 2000, 100)), started=0.0, submitted=0.0, partition="train")
    assert job.state == "RUNNING" and len(job.placement) == 2


def test_defaults_carrying_memory_per_cpu_walk_as_without_them(tmp_path):
    """DefCpuPerGPU's CPUs beside DefMemPerCPU: the walk's form holds one GPU, its CPUs and their
    memory a pod, and each node's memory follows the CPUs dealt to it (a real 22.05.8 at
    DefCpuPerGPU=4, DefMemPerCPU=100 ran ``--gpus=3`` on one node with 12 CPUs and 1200 MB, and
    ``--gpus=12`` as 8 + 3 + 1 GPUs with 16 CPUs and 1600 MB each on 16-core nodes; probe p160.
    gpupool kept one pod of the GPUs before, and refused ``--gpus=12``)."""
    conf = GPU_NODES_CONF.format(last=2).replace("DefMemPerGPU=120000\n", "DefCpuPerGPU=4\nDefMemPerCPU=1000\n")
    small = slurm_pool(tmp_path, conf)
    pol = make_policy("slurm", small)
    wl = pol.resolve_request(workload("j", "-t 5 --gpus=3", 0.0, 1))
    (ps,) = wl.pod_sets
    assert (ps.walked, ps.gpus, ps.cpu_m, ps.memory_mib, ps.memory_per) == (True, 1, 4000, 4000, "cpu")
    assert (ps.memory_total, ps.cpus_total) == (12000, 12)
    for opts, want in (("--gpus=3", [(3, 12000, 12000)]), ("--gpus=12", [(8, 44000, 44000), (4, 4000, 4000)])):
        out = Engine(small, [workload("j", f"-t 5 {opts}", 0.0, 1)], make_policy("slurm", small), check=True).run()
        assert [(p[1].bit_count(), p[2], p[3]) for p in sorted(out.jobs[0].placement)] == want, opts
