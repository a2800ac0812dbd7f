"""``--gpus=X`` beside ``--cpus-per-gpu=C`` or ``--exclusive`` with no node or task count (and
``--nodes=A-B`` beside them): slurmctld walks nodes for the GPUs as it does without them
(``sbatch._walks_cpus_per_gpu``, ``gpu_walk.walk_form``, ``spread_gpus.spread``); over a fixed
node count ``--cpus-per-gpu`` spreads the GPUs too, and CPUs per GPU (asked or DefCpuPerGPU)
go out from the job's total (``spread_gpus._node_cpus``).

Probe p116 (2026-12-05, a real 22.05.8): the seed pool's four nodes (128 CPUs, two threads per
core, 8 GPUs), partition train, ``--mem=100`` unless the case gives memory, blockers pinned
with ``-w`` started first, then the job; GPUs, CPUs and memory per node from ``scontrol -d show
job``. Before this, gpupool kept such a job as one pod of X GPUs and refused ``--gpus=12
--cpus-per-gpu=4`` and ``--gpus=12 --exclusive`` ("Requested node configuration is not
available") where the real system ran them on two nodes.

Probe p117 (the same day and nodes) added partitions ``dcg`` (DefCpuPerGPU=4) and ``mcpn``
(DefCpuPerGPU=4, MaxCPUsPerNode=8) over gpu[01-04] and ran fixed node counts and pending jobs.
"""
from __future__ import annotations

import shutil
from dataclasses import replace

import pytest

from gpupool.errors import InputError
from gpupool.engine.core import Engine
from gpupool.engine.policy_api import make_policy
from gpupool.formats.pool_dir import load_pool
from gpupool.policy.slurm import limits
from gpupool.policy.slurm.job_defaults import MSG_UNSPREAD
from tests.unit.sbatch_plans import GPU_NODES_CONF, slurm_pool, workload
from tests.unit.test_slurm_gpu_walk import _FRAG2, _run, _started_at_once
from tests.unit.test_slurm_gpu_walk_range import _held

ALL = tuple(range(8))
#: gpu01 with 7 GPUs but 8 CPUs free
_C8 = {"gpu01": "--gres=gpu:1 -c120"}
#: gpu01 with 3 GPUs free, gpu02 with 1, gpu03-04 idle
_UNEVEN = {"gpu01": 5, "gpu02": 7}

#: (blockers, options) -> {node: (GPU indices, CPUs, MB)} as the real system gave them
_CASES = [
    # CPUs per GPU: the GPUs go out as without them; each node gives the CPUs of its GPUs
    ({}, "--gpus=12 --cpus-per-gpu=4", {"gpu01": (ALL, 32, 100), "gpu02": ((0, 1, 2, 3), 16, 100)}),
    ({}, "--gpus=12 --cpus-per-gpu=4 --mem-per-gpu=1000",
     {"gpu01": (ALL, 32, 8000), "gpu02": ((0, 1, 2, 3), 16, 4000)}),
    ({}, "-N1-3 --gpus=12 --cpus-per-gpu=4", {"gpu01": (ALL, 32, 100), "gpu02": ((0, 1, 2, 3), 16, 100)}),
    (_FRAG2, "--gpus=4 --cpus-per-gpu=8", {"gpu01": ((6, 7), 16, 100), "gpu02": ((6, 7), 16, 100)}),
    (_UNEVEN, "--gpus=8 --cpus-per-gpu=4", {"gpu03": (ALL, 32, 100)}),
    # a node offers the GPUs its free CPUs pay for: gpu01's 8 CPUs pay for 2, so gpu02 holds
    # all four alone
    (_C8, "--gpus=4 --cpus-per-gpu=4", {"gpu02": ((0, 1, 2, 3), 16, 100)}),
    # 20 CPUs a GPU: a node of 128 offers 6 GPUs (120 CPUs), so three nodes are walked; the
    # GPUs are then dealt as ever (8 + 7 + 1, not capped by the CPUs) and the job's 320 CPUs
    # go out in index order, each node giving its 120 at most
    ({}, "--gpus=16 --cpus-per-gpu=20", {"gpu01": (ALL, 120, 100), "gpu02": ((0, 1, 2, 3, 4, 5, 6), 120, 100),
                                         "gpu03": ((0,), 80, 100)}),
    # exclusive: idle nodes until their GPUs reach X, each held whole with every GPU
    ({}, "--gpus=12 --exclusive", {"gpu01": (ALL, 128, 100), "gpu02": (ALL, 128, 100)}),
    ({}, "--gpus=3 --exclusive", {"gpu01": (ALL, 128, 100)}),
    ({}, "-N1-3 --gpus=4 --exclusive", {"gpu01": (ALL, 128, 100)}),
]


@pytest.fixture(scope="module")
def pool():
    return load_pool("examples/seed-pool")


@pytest.mark.parametrize("blockers,opts,want", _CASES, ids=[f"{len(b)}blk {o}" for b, o, _ in _CASES])
def test_the_job_takes_the_nodes_gpus_cpus_and_memory_the_real_system_gave_it(pool, blockers, opts, want):
    assert _held(pool, _started_at_once(pool, blockers, opts)) == want


def test_an_exclusive_walk_waits_for_idle_nodes(pool):
    """Two GPUs free on every node: ``--gpus=4 --exclusive`` waited (Resources) where no node
    was idle, and takes one whole node once the blockers end."""
    job = _run(pool, _FRAG2, "--gpus=4 --exclusive --mem=100")
    assert (job.first_start, job.reason) == (300.0, "Resources")
    assert _held(pool, job) == {"gpu01": (ALL, 128, 100)}


def test_the_reader_marks_the_walk():
    for opts in ("--gpus=12 --cpus-per-gpu=4", "--gpus=12 --exclusive", "-N1-3 --gpus=12 --cpus-per-gpu=4 --mem=100",
                 "-N1-3 --gpus=4 --exclusive"):
        (ps,) = workload("j", f"-t 5 {opts}", 0.0, 1).pod_sets
        assert (ps.walk_gpus, ps.count, ps.gpus) == (True, 1, int(opts.split("--gpus=")[1].split()[0])), opts


def test_beside_tasks_the_exclusive_shape_stays_as_submitted():
    """Not probed: with ``--ntasks`` beside ``--exclusive`` the job keeps the shape it was
    submitted with (task pods). (``--ntasks`` beside ``--cpus-per-gpu`` walks since probe p119:
    ``test_slurm_gpu_walk_cpg_tasks.py``.)"""
    (ps,) = workload("j", "-t 5 -n2 --gpus=12 --exclusive", 0.0, 1).pod_sets
    assert not ps.walk_gpus


@pytest.mark.parametrize("opts", ["--gpus=12 --cpus-per-gpu=4 --mem-per-cpu=100",
                                  "-N1-3 --gpus=8 --cpus-per-gpu=2 --mem-per-cpu=100",
                                  "-n2 --gpus=12 --cpus-per-gpu=4 --mem-per-cpu=100"])
def test_memory_per_cpu_beside_cpus_per_gpu_is_walked(opts):
    """Memory per CPU beside ``--cpus-per-gpu`` is walked as without it (a real 22.05.8 ran
    ``--gpus=12 --cpus-per-gpu=2 --mem-per-cpu=100``, ``-n2`` beside it and ``-N1-3 --gpus=12
    --cpus-per-gpu=3 --mem-per-cpu=200`` as without the memory, each node's for its CPUs;
    probe p160; the reader kept the shape as submitted, or refused the range, before)."""
    (ps,) = workload("j", f"-t 5 {opts}", 0.0, 1).pod_sets
    assert ps.walk_gpus and ps.cpus_per_gpu_cap


@pytest.fixture(scope="module")
def cpg_pool(tmp_path_factory):
    """The seed pool with probe p117's partitions ``dcg`` and ``mcpn``."""
    root = tmp_path_factory.mktemp("cpg") / "pool"
    shutil.copytree("examples/seed-pool", root)
    conf = root / "slurm.conf"
    text = conf.read_text()
    line = next(x for x in text.splitlines() if x.startswith("PartitionName=train"))
    conf.write_text(text.replace(line, line + "\nPartitionName=dcg Nodes=gpu[01-04] DefCpuPerGPU=4 MaxTime=60 State=UP"
                                 "\nPartitionName=mcpn Nodes=gpu[01-04] DefCpuPerGPU=4 MaxCPUsPerNode=8 MaxTime=60 "
                                 "State=UP"))
    return load_pool(root)


#: probe p117: (blockers, options) -> {node: (GPU indices, CPUs, MB)}
_P117 = [
    # a fixed count spreads the GPUs as without --cpus-per-gpu, each later node keeping one
    # GPU's CPUs: 12 CPUs as 8 + 4
    ({}, "-N2 --gpus=3 --cpus-per-gpu=4", {"gpu01": ((0, 1), 8, 100), "gpu02": ((0,), 4, 100)}),
    ({}, "-N2 --gpus=12 --cpus-per-gpu=4", {"gpu01": (ALL, 32, 100), "gpu02": ((0, 1, 2, 3), 16, 100)}),
    ({}, "-N3 --gpus=16 --cpus-per-gpu=20", {"gpu01": (ALL, 120, 100), "gpu02": ((0, 1, 2, 3, 4, 5, 6), 120, 100),
                                             "gpu03": ((0,), 80, 100)}),
    # gpu01's 8 free CPUs pay for 2 GPUs, so it offers fewer than the others and weighs more
    # (near_gpus): the job runs on gpu02-03, its 16 CPUs as 12 + 4
    (_C8, "-N2 --gpus=4 --cpus-per-gpu=4", {"gpu02": ((0, 1, 2), 12, 100), "gpu03": ((0,), 4, 100)}),
    ({}, "-N2 --gpus=4 --exclusive", {"gpu01": (ALL, 128, 100), "gpu02": (ALL, 128, 100)}),
    # DefCpuPerGPU: the same deal, but a node may give all its free CPUs
    ({}, "-p dcg -N2 --gpus=3", {"gpu01": ((0, 1), 8, 100), "gpu02": ((0,), 4, 100)}),
    ({}, "-p dcg --gpus=12", {"gpu01": (ALL, 44, 100), "gpu02": ((0, 1, 2, 3), 4, 100)}),
    ({}, "-p mcpn -N2 --gpus=4", {"gpu01": ((0, 1, 2), 8, 100), "gpu02": ((0,), 8, 100)}),
    # --cpus-per-gpu beside DefCpuPerGPU: the asked count and its cap
    ({}, "-p dcg --gpus=16 --cpus-per-gpu=20", {"gpu01": (ALL, 120, 100), "gpu02": ((0, 1, 2, 3, 4, 5, 6), 120, 100),
                                                "gpu03": ((0,), 80, 100)}),
]


#: probe p118 (the same day and nodes): gpu01 with 4 GPUs and 90 CPUs free, gpu02 with 1 GPU and
#: 122 CPUs, gpu03 and gpu04 full
_P118_S2 = {"gpu01": "--gres=gpu:4 -c38", "gpu02": "--gres=gpu:7 -c6", "gpu03": 8, "gpu04": 8}
_P117 += [
    # a node gives C for each of its free GPUs at most (gres_sched_add): 64 + 16, 40 + 10
    (_P118_S2, "--gpus=5 --cpus-per-gpu=16", {"gpu01": ((4, 5, 6, 7), 64, 100), "gpu02": ((7,), 16, 100)}),
    (_P118_S2, "--gpus=5 --cpus-per-gpu=10", {"gpu01": ((4, 5, 6, 7), 40, 100), "gpu02": ((7,), 10, 100)}),
    # three nodes: each later node keeps C (not a core): 24 + 4 + 4 and 4 + 4 + 4
    ({}, "-N3 --gpus=8 --cpus-per-gpu=4", {"gpu01": ((0, 1, 2, 3, 4, 5), 24, 100), "gpu02": ((0,), 4, 100),
                                           "gpu03": ((0,), 4, 100)}),
    ({}, "-N3 --gpus=3 --cpus-per-gpu=4", {"gpu01": ((0,), 4, 100), "gpu02": ((0,), 4, 100), "gpu03": ((0,), 4, 100)}),
]


@pytest.mark.parametrize("blockers,opts,want", _P117, ids=[f"{len(b)}blk {o}" for b, o, _ in _P117])
def test_fixed_counts_and_def_cpu_per_gpu_as_the_real_system_ran_them(cpg_pool, blockers, opts, want):
    assert _held(cpg_pool, _started_at_once(cpg_pool, blockers, opts)) == want


def test_cpus_the_nodes_cannot_give_are_refused_at_submit(pool):
    """``-N2 --gpus=16 --cpus-per-gpu=20`` asks 320 CPUs of two nodes giving 120 each: refused,
    "Requested node configuration is not available" (p117); ``-N3`` beside it ran."""
    job = _run(pool, {}, "-N2 --gpus=16 --cpus-per-gpu=20 --mem=100")
    assert (job.state, job.reason) == ("REJECTED", limits.MSG_NODES)


#: every node with 7 GPUs held: a job of 12 waits
_F7 = {f"gpu0{i}": 7 for i in range(1, 5)}


@pytest.mark.parametrize("opts", ["--gpus=12 --cpus-per-gpu=4", "--gpus=12 --exclusive"])
def test_a_pending_walk_counts_one_cpu_and_the_gpus_asked(pool, opts):
    """Pending (Resources) behind ``_F7``, both recorded cpu=1,mem=100M,node=1,gres/gpu=12 (p117):
    CPUs per GPU count nothing before the walk."""
    pol = make_policy("slurm", pool)
    wl = pol.resolve_request(replace(workload("j", f"-A ml-platform -t 5 --mem=100 {opts}", 0.0, 1), user="dave"))
    (ps,) = wl.pod_sets
    assert (ps.walked, ps.min_count, ps.total_gpus) == (True, 1, 12)
    assert (wl.req_cpu_mem or (ps.cpus_total, ps.memory_total)) == (1, 100)
    job = _run(pool, _F7, f"{opts} --mem=100")
    assert (job.first_start, job.reason, len(job.placement)) == (300.0, "Resources", 2)


#: ``diff-slurm --mix gpus-cpg`` seed 1 (a real 22.05.8 under load): GPUs held per node before
#: the job, so that gpu03 offers more free GPUs than gpu01 and the walk takes it first
_TAKEN_ORDER = [
    # job 65: gpu01 and gpu03 offering 2 and 3 GPUs; gpu03 taken first gives its 12 CPUs (3
    # GPUs' worth) of the job's 16, gpu01 the 4 left; the GPUs go out in index order, 2 + 2
    ({"gpu01": 6, "gpu02": 8, "gpu03": 5, "gpu04": 8}, "--gpus=4 --cpus-per-gpu=4",
     {"gpu01": ((6, 7), 4, 100), "gpu03": ((5, 6), 12, 100)}),
    # job 23: gpu02 (3 free) before gpu01 (2): 3 CPUs there, a core, 4; gpu01 the 1 left, 2
    ({"gpu01": 6, "gpu02": 5, "gpu03": 8, "gpu04": 8}, "--gpus=4 --cpus-per-gpu=1",
     {"gpu01": ((6, 7), 2, 100), "gpu02": ((5, 6), 4, 100)}),
]


@pytest.mark.parametrize("blockers,opts,want", _TAKEN_ORDER, ids=[o for _, o, _ in _TAKEN_ORDER])
def test_cpus_per_gpu_go_out_in_the_order_the_walk_took_the_nodes(pool, blockers, opts, want):
    """Seed 1's first run agreed on 20 % of starts in open mode: gpupool dealt the CPUs in index
    order (8 + 8), where ``_eval_nodes`` gives each node its CPUs as the walk takes it."""
    assert _held(pool, _started_at_once(pool, blockers, opts)) == want


def _as(user: str, account: str, name: str, opts: str, at: float, jid: int, runtime: float = 300.0):
    return replace(workload(name, f"-A {account} -t 5 {opts}", at, jid, runtime=runtime), user=user)


def test_a_failed_selection_counts_the_gpus_its_cpus_pay_for(pool):
    """``gpus-cpg`` seed 1: ``-N2 --gpus=13 --cpus-per-gpu=16`` of ml-serving (GrpTRES=gres/gpu=16,
    one GPU in use) did not fit now. On idle nodes its CPUs give 8 + 5 GPUs' worth (128 + 80
    of 208), so the failed selection counts 13, not two whole nodes' 16: the job waits for
    Resources and holds the partition back, as the real system did (it was held by
    AssocGrpGRES before, and lower jobs started in front of it)."""
    blockers = [_as("dave", "ml-platform", f"b{k}", f"-w gpu0{k} -n1 --mem=100 --gres=gpu:4", 0.0, k)
                for k in (1, 2, 3)]
    blockers.append(_as("carol", "ml-serving", "b4", "-w gpu04 -n1 --mem=100 --gres=gpu:1", 0.0, 4))
    job = _as("carol", "ml-serving", "j", "-N2 --gpus=13 --cpus-per-gpu=16 --mem=100", 1.0, 5)
    lower = _as("dave", "ml-platform", "k", "--nice=1000 -N2 --gres=gpu:2 --mem=100", 2.0, 6)
    out = Engine(pool, [*blockers, job, lower], make_policy("slurm", pool), check=True, until=200.0).run()
    by_id = {j.id: j for j in out.jobs}
    assert by_id[5].reason == "Resources" and by_id[5].first_start is None
    assert by_id[6].first_start != 2.0  # held behind it by the main pass (which started it at once)


def test_an_exclusive_walk_reserves_its_whole_nodes_counting_the_gpus_asked(pool):
    """``gpus-cpg`` seed 1: ``--nodes=3-4 --gpus=7 --exclusive`` of ml-research (GrpTRES=
    gres/gpu=24, GPUs in use) was planned on three whole nodes with a reservation; before a
    reservation slurmctld counts its GPUs as asked (7), its whole nodes' 24 only at the start.
    gpupool counted 24 and reserved nothing, so lower jobs backfilled onto those nodes."""
    from tests.unit.test_slurm_gpu_walk_per_node import _run_recorded

    specs = [("-A ml-research -w gpu04 -n1 --gres=gpu:1 --mem=100", 0.0, 3000.0)]
    specs += [(f"-A ml-platform -w gpu0{k} -n1 --gres=gpu:1 --mem=100", 0.0, 100.0) for k in (1, 2, 3)]
    specs.append(("-A ml-research --nodes=3-4 --gpus=7 --exclusive --mem=100", 1.0, 60.0))
    pol, _eng = _run_recorded(pool, specs, until=90.0)
    cycles = [t for t in sorted(pol.resv_log) if 1.0 <= t < 90.0]
    assert cycles and all(5 in {jid for jid, *_ in pol.resv_log[t]} for t in cycles)


@pytest.mark.parametrize("opts", ["--gpus=12 --exclusive", "-N1-2 --gpus=2 --exclusive", "--gpus=12 --exclusive --mem-per-gpu=1000"])
def test_an_exclusive_walk_with_memory_per_gpu_holds_whole_nodes(pool, opts):
    """DefMemPerGPU (the seed pool's, where no memory is asked) or ``--mem-per-gpu`` beside an
    exclusive walk: its whole nodes hold memory for every GPU (``select.exclusive_memory``);
    ``gpus-cpg``'s scripts ask no memory, and a real 22.05.8 ran them (a review found such jobs
    refused, the walk undone by the defaults)."""
    job = _run(pool, {}, opts)
    per_gpu = 1000 if "mem-per-gpu" in opts else 120000
    want = 2 if "12" in opts else 1
    assert job.first_start == 1.0 and _held(pool, job) == {f"gpu0{k}": (ALL, 128, 8 * per_gpu) for k in range(1, want + 1)}


def test_cpus_per_gpu_beside_memory_per_cpu_from_the_defaults_follow_the_cpus_dealt(tmp_path):
    """Under DefMemPerCPU ``--cpus-per-gpu`` walks and spreads as without it, each node's memory
    per CPU for the CPUs dealt to it (a real 22.05.8 at DefMemPerCPU=100 on 16-core nodes ran
    ``--gpus=12 --cpus-per-gpu=3`` as 8 + 3 + 1 GPUs with 15 + 15 + 6 CPUs and 1500 + 1500 +
    600 MB, ``-N2 --gpus=12 --cpus-per-gpu=1`` as 8 + 4 with 8 + 4 CPUs; probe p160; gpupool
    refused the first and kept the second even before)."""
    conf = GPU_NODES_CONF.format(last=4).replace("DefMemPerGPU=120000\n", "DefMemPerCPU=1000\n")
    small = slurm_pool(tmp_path, conf)
    for opts, want in (("--gpus=12 --cpus-per-gpu=4", [(8, 32000, 32000), (4, 16000, 16000)]),
                       ("-N2 --gpus=4 --cpus-per-gpu=4", [(3, 12000, 12000), (1, 4000, 4000)]),
                       ("-N2 --gpus=3 --cpus-per-gpu=4", [(2, 8000, 8000), (1, 4000, 4000)])):
        job = Engine(small, [workload("j", f"-t 5 {opts}", 0.0, 1)], make_policy("slurm", small), check=True).run().jobs[0]
        assert sorted(((p[1].bit_count(), p[2], p[3]) for p in job.placement), reverse=True) == want, opts
    # under MaxMemPerCPU (not probed) the share stays even, and one holding more GPUs than
    # asked (2 + 2 for 3) is refused in gpupool's words (a second review found it run so)
    (tmp_path / "capped").mkdir()
    capped = slurm_pool(tmp_path / "capped", conf + "MaxMemPerCPU=4000\n")
    odd = Engine(capped, [workload("j", "-t 5 -N2 --gpus=3 --cpus-per-gpu=4", 0.0, 1)], make_policy("slurm", capped),
                 check=True).run().jobs[0]
    assert (odd.state, odd.reason) == ("REJECTED", MSG_UNSPREAD)


def test_a_minnodes_partition_spreads_cpus_per_gpu_as_a_fixed_count(tmp_path):
    """MinNodes=2 gives ``--gpus=3 --cpus-per-gpu=4`` two nodes as ``-N2`` would (gpupool's
    reading, not probed: the spread of probe p117's ``-N2 --gpus=3 --cpus-per-gpu=4``, 2 + 1
    GPUs with 8 + 4 CPUs); it waited with PartitionNodeLimit before."""
    conf = GPU_NODES_CONF.format(last=4).replace("PartitionName=p Nodes=gpu[01-04] Default=YES MaxTime=60 State=UP",
                                                  "PartitionName=p Nodes=gpu[01-04] Default=YES MinNodes=2 MaxTime=60 State=UP")
    small = slurm_pool(tmp_path, conf)
    job = Engine(small, [workload("j", "-t 5 --gpus=3 --cpus-per-gpu=4 --mem=100", 0.0, 1)], make_policy("slurm", small),
                 check=True).run().jobs[0]
    assert sorted((p[1].bit_count(), p[2] // 1000) for p in job.placement) == [(1, 4), (2, 8)]


def test_tasks_per_node_beside_cpus_per_gpu_keep_the_even_share():
    """``--ntasks-per-node`` beside ``--cpus-per-gpu`` (not probed): each node holds its tasks,
    so the GPUs stay even (a review found a node given 4 tasks and 2 CPUs)."""
    (ps,) = workload("j", "-t 5 -N2 --ntasks-per-node=2 --gpus=4 --cpus-per-gpu=4", 0.0, 1).pod_sets
    assert not ps.spread_gpus and (ps.count, ps.gpus) == (2, 2)
