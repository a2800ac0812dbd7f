"""``-n T --gpus=X`` with no ``--nodes`` (T >= 2): slurmctld walks nodes for the GPUs as for
``--gpus=X`` alone, needs the tasks' CPUs too, takes at most T nodes, and deals the tasks out
in the order it took the nodes (policy/slurm/gpu_walk.py, split_tasks.deal_tasks).

Probe p104 (2026-12-05, a real 22.05.8): the seed pool's four nodes (128 CPUs, two threads per
core, 8 GPUs, DefMemPerGPU=120000), partition train, ``--mem=100`` unless the case gives
memory, blockers pinned with ``-w`` started first, then the job; GPUs and CPUs per node from
``scontrol -d show job``. The last case is job 21 of ``diff-slurm --mix gpus-tasks`` seed 1.
"""
from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpupool.engine.core import Engine
from gpupool.engine.policy_api import make_policy
from gpupool.formats.pool_dir import load_pool
from gpupool.policy.slurm import limits
from tests.unit.sbatch_plans import workload
from tests.unit.test_slurm_gpu_walk import _FRAG2, _run, _started_at_once

_CPU = {"gpu02": "--gres=gpu:4 -c64", "gpu03": "--gres=gpu:4"}
_UNEVEN = {"gpu01": 5, "gpu02": 7}
#: two CPUs (one core) free on every node, all GPUs free
_ALL2 = {f"gpu0{i}": "-c126" for i in range(1, 5)}
#: one GPU free on every node; 4 (``_P4``) or 8 (``_P8``) CPUs free on gpu01-02, 126 on gpu03-04
_P4 = {"gpu01": "--gres=gpu:7 -c124", "gpu02": "--gres=gpu:7 -c124", "gpu03": 7, "gpu04": 7}
_P8 = {"gpu01": "--gres=gpu:7 -c120", "gpu02": "--gres=gpu:7 -c120", "gpu03": 7, "gpu04": 7}

#: (blockers, options) -> {node: (GPUs, CPUs)} as the real system gave them
_CASES = [
    ({}, "-n2 --gpus=4", {"gpu01": (4, 2)}),
    ({}, "-n2 --gpus=12", {"gpu01": (8, 2), "gpu02": (4, 2)}),
    ({}, "-n4 --gpus=12", {"gpu01": (8, 4), "gpu02": (4, 2)}),
    ({}, "-n16 --gpus=16", {"gpu01": (8, 16), "gpu02": (8, 2)}),
    ({}, "-n4 --gpus=12 -c8", {"gpu01": (8, 24), "gpu02": (4, 8)}),
    # X not a multiple of T: one pod of the T tasks as submitted, walked the same way
    ({}, "-n3 --gpus=16", {"gpu01": (8, 2), "gpu02": (8, 2)}),
    ({}, "-n8 --gpus=9", {"gpu01": (8, 8), "gpu02": (1, 2)}),
    # probe p107 (2026-12-05, the same nodes): more X not a multiple of T
    ({}, "-n2 --gpus=3", {"gpu01": (3, 2)}),
    ({}, "-n5 --gpus=12", {"gpu01": (8, 4), "gpu02": (4, 2)}),
    (_FRAG2, "-n3 --gpus=5", {"gpu01": (2, 2), "gpu02": (2, 2), "gpu03": (1, 2)}),
    (_FRAG2, "-n5 --gpus=7", {"gpu01": (2, 2), "gpu02": (2, 2), "gpu03": (2, 2), "gpu04": (1, 2)}),
    (_UNEVEN, "-n3 --gpus=7", {"gpu03": (7, 4)}),
    (_CPU, "-n3 --gpus=4", {"gpu02": (4, 4)}),
    (_FRAG2, "-n2 --gpus=4", {"gpu01": (2, 2), "gpu02": (2, 2)}),
    (_FRAG2, "-n8 --gpus=8", {"gpu01": (2, 6), "gpu02": (2, 2), "gpu03": (2, 2), "gpu04": (2, 2)}),
    (_CPU, "-n4 --gpus=4", {"gpu02": (4, 4)}),
    (_UNEVEN, "-n4 --gpus=8", {"gpu03": (8, 4)}),
    (_UNEVEN, "-n6 --gpus=6", {"gpu03": (6, 6)}),
    # gpu02 offers the most GPUs, so it is taken first and gets all tasks but one per later node
    ({"gpu01": 6, "gpu02": 2, "gpu03": 8, "gpu04": 6}, "-n10 --gpus=10",
     {"gpu01": (2, 2), "gpu02": (6, 8), "gpu04": (2, 2)}),
    # probe p112 (2026-12-05, the same nodes): more tasks than GPUs; the walk may then take more
    # nodes than GPUs, and the first nodes get none
    ({}, "-n4 --gpus=2", {"gpu01": (2, 4)}),
    ({}, "-n8 --gpus=3", {"gpu01": (3, 8)}),
    ({}, "-n16 --gpus=2 -c16", {"gpu01": (1, 128), "gpu02": (1, 128)}),
    (_FRAG2, "-n6 --gpus=3", {"gpu01": (2, 6), "gpu02": (1, 2)}),
    (_ALL2, "-n8 --gpus=4", {f"gpu0{i}": (1, 2) for i in range(1, 5)}),
    (_ALL2, "-n8 --gpus=3", {"gpu01": (0, 2), **{f"gpu0{i}": (1, 2) for i in range(2, 5)}}),
    ({}, "-n300 --gpus=2", {"gpu01": (0, 128), "gpu02": (1, 128), "gpu03": (1, 44)}),
    ({}, "-n5 --gpus=4 --mem=1000 -c40", {"gpu01": (3, 120), "gpu02": (1, 80)}),
    # probe p113: one GPU for several tasks; a node without a free GPU is not taken for tasks
    ({}, "-n4 --gpus=1", {"gpu01": (1, 4)}),
    (_ALL2, "-n4 --gpus=1", {"gpu01": (0, 2), "gpu02": (1, 2)}),
    ({"gpu01": 8}, "-n300 --gpus=2", {"gpu02": (0, 128), "gpu03": (1, 128), "gpu04": (1, 44)}),
    # probes p113 and p114: where the nodes outnumber the GPUs by two or more every node takes
    # all the GPUs it has free (``_set_job_bits1``'s share below zero), more than asked
    ({}, "-n300 --gpus=1", {"gpu01": (8, 128), "gpu02": (8, 128), "gpu03": (8, 44)}),
    ({}, "-n500 --gpus=2", {"gpu01": (8, 128), "gpu02": (8, 128), "gpu03": (8, 128), "gpu04": (8, 116)}),
    (_ALL2, "-n6 --gpus=1", {f"gpu0{i}": (8, 2) for i in range(1, 4)}),
    (_FRAG2, "-n300 --gpus=1", {"gpu01": (2, 126), "gpu02": (2, 126), "gpu03": (2, 48)}),
    ({}, "-n400 --gpus=3", {"gpu01": (0, 128), "gpu02": (1, 128), "gpu03": (1, 128), "gpu04": (1, 16)}),
    # ``diff-slurm --mix gpus-few`` seed 1, job 20: 12, 8 and 10 CPUs free with a GPU each; the
    # tasks go round-robin up to what each node may hold (3, 2, 1), not the first node first
    ({"gpu01": "--gres=gpu:7 -c116", "gpu02": "--gres=gpu:7 -c120", "gpu03": 8, "gpu04": "--gres=gpu:7 -c118"},
     "-n5 --gpus=3 -c4", {"gpu01": (1, 8), "gpu02": (1, 8), "gpu04": (1, 4)}),
    # probe p115: after a task each and the spare CPU of each core taken, rounds of a core's
    # worth of tasks (two here): 4 + 2 + 1 + 1 tasks, not 3 + 3 + 1 + 1
    (_P4, "-n8 --gpus=4", {"gpu01": (1, 4), "gpu02": (1, 2), "gpu03": (1, 2), "gpu04": (1, 2)}),
    (_P8, "-n12 --gpus=4", {"gpu01": (1, 6), "gpu02": (1, 4), "gpu03": (1, 2), "gpu04": (1, 2)}),
    (_P8, "-n6 --gpus=4 -c2", {"gpu01": (1, 4), "gpu02": (1, 4), "gpu03": (1, 2), "gpu04": (1, 2)}),
]


@pytest.fixture(scope="module")
def pool():
    return load_pool("examples/seed-pool")


def _per_node(pool, job) -> dict[str, tuple[int, int]]:
    names = list(pool.nodes)
    return {names[p[0]]: (p[1].bit_count(), p[2] // 1000) for p in sorted(job.placement)}


@pytest.mark.parametrize("blockers,opts,want", _CASES, ids=[f"{len(b)}blk {o}" for b, o, _ in _CASES])
def test_the_job_takes_the_nodes_gpus_and_cpus_the_real_system_gave_it(pool, blockers, opts, want):
    assert _per_node(pool, _started_at_once(pool, blockers, opts)) == want


def test_memory_follows_each_nodes_gpus_or_stays_per_node(pool):
    """``-n4 --gpus=12 --mem-per-gpu=1000`` held 8000 + 4000 MB (p104); ``--mem`` is per node."""
    job = _run(pool, {}, "-n4 --gpus=12 --mem-per-gpu=1000")
    assert [p[3] for p in sorted(job.placement)] == [8000, 4000]
    job = _run(pool, {}, "-n2 --gpus=12 --mem=100")
    assert [p[3] for p in sorted(job.placement)] == [100, 100]


def test_no_more_nodes_than_tasks(pool):
    """``-n2 --gpus=6`` with two GPUs free on each node waited (Resources) until the blockers
    ended; ``-n2 --gpus=24`` was refused at submit, "Requested node configuration is not
    available" (p104)."""
    job = _run(pool, _FRAG2, "-n2 --gpus=6 --mem=100")
    assert job.first_start == 300.0 and len(job.placement) == 1
    job = _run(pool, _FRAG2, "-n3 --gpus=8 --mem=100")  # three nodes give 6 (p107)
    assert job.first_start == 300.0 and len(job.placement) == 1
    job = _run(pool, {}, "-n2 --gpus=24 --mem=100")
    assert (job.state, job.reason) == ("REJECTED", limits.MSG_NODES)


def test_the_request_counts_the_tasks_cpus_and_one_node_until_the_job_starts(pool):
    """A pending ``-n2 --gpus=6`` recorded ``cpu=2,mem=100M,node=1,gres/gpu=6`` (p104)."""
    pol = make_policy("slurm", pool)
    wl = pol.resolve_request(replace(workload("j", "-A ml-platform -t 5 -n2 --gpus=6 --mem=100", 0.0, 1), user="dave"))
    (ps,) = wl.pod_sets
    assert (ps.walked, ps.split, ps.spread, ps.count, ps.min_count, ps.split_tasks) == (True, True, True, 2, 1, 2)
    assert (ps.cpus_total, ps.memory_total, ps.total_gpus, ps.counted_pods) == (2, 100, 6, 1)


def test_one_task_without_nodes_counts_one_tasks_cpus_on_every_node(pool):
    """``-n1 --gpus=4`` (held to one node) counts one task's CPUs, so nodes tie and the first in
    index order wins (``diff-slurm --mix gpus-tasks`` seed 1: a real 22.05.8 planned it on gpu02
    with 126 CPUs free before gpu04 with 124); ``-N1 --gres=gpu:4`` goes on counting the free
    CPUs (finding 51)."""
    blockers = {"gpu01": 8, "gpu03": 8, "gpu02": "--gres=gpu:4", "gpu04": "--gres=gpu:3 -c4"}
    assert list(_per_node(pool, _run(pool, blockers, "-n1 --gpus=4 --mem=100"))) == ["gpu02"]
    assert list(_per_node(pool, _run(pool, blockers, "-N1 --gres=gpu:4 --mem=100"))) == ["gpu04"]


def test_other_policies_place_the_task_pods_as_submitted(pool):
    """Outside the Slurm policy ``-n4 --gpus=8`` is four task pods of two GPUs each."""
    wl = replace(workload("j", "-A ml-platform -t 5 -n4 --gpus=8 --mem=100", 0.0, 1, runtime=60.0), user="dave")
    (ps,) = wl.pod_sets
    assert (ps.count, ps.gpus, ps.one_per_node, ps.walk_gpus) == (4, 2, False, True)
    out = Engine(pool, [wl], make_policy("fifo", pool), check=True).run()
    assert sorted(p[1].bit_count() for p in out.jobs[0].placement) == [2, 2, 2, 2]


def test_under_def_cpu_per_gpu_the_tasks_cap_a_walk_of_cpus_per_gpu(tmp_path):
    """Under DefCpuPerGPU the tasks' CPUs come from the GPUs: ``-n T --gpus=X`` walks as
    ``--cpus-per-gpu`` beside T tasks would (the T tasks cap the nodes, the C × X CPUs are dealt
    out), without that option's cap of C CPUs a GPU on a node (a real 22.05.8 at
    DefCpuPerGPU=2, DefMemPerCPU=100 ran ``-n2 --gpus=12`` and ``-n3 --gpus=12`` as 8 + 4 GPUs
    with 16 + 8 CPUs on idle 16-core nodes; probe p160; gpupool kept the tasks' 6 + 6 before)."""
    from tests.unit.sbatch_plans import GPU_NODES_CONF, slurm_pool

    pool = slurm_pool(tmp_path, GPU_NODES_CONF.format(last=4).replace("PartitionName=p ", "PartitionName=p DefCpuPerGPU=2 "))
    pol = make_policy("slurm", pool)
    wl = pol.resolve_request(replace(workload("j", "-t 5 -n2 --gpus=4", 0.0, 1), user="dave"))
    (ps,) = wl.pod_sets
    assert ps.walked and ps.count == 2 and ps.cpus_per_task is None and not ps.cpus_per_gpu_cap
    out = Engine(pool, [replace(workload("j", "-t 5 -n2 --gpus=12 --mem=100", 0.0, 1), user="dave")],
                 make_policy("slurm", pool), check=True).run()
    # 24 CPUs dealt: the first node all but one GPU's worth for the second (``spread_gpus._cpus_dealt``)
    assert [(p[1].bit_count(), p[2] // 1000) for p in sorted(out.jobs[0].placement)] == [(8, 22), (4, 2)]


def test_a_node_gives_the_walk_whole_tasks_within_its_memory(pool):
    """The walk counts a node's CPUs in whole tasks (and, memory per CPU, as many as its free
    memory pays for), as ``_eval_nodes`` counts ``avail_cpus``: with 12 CPUs free on each node
    ``-n4 --gpus=4 -c8`` takes a task on each of the four nodes rather than waiting for one with
    32; ``-n4 --gpus=4 --mem-per-cpu=300000`` (a 1 TB node pays for one core, two tasks on its
    two threads) spans two nodes rather than being refused (source, not probed)."""
    blockers = {n: "-c116" for n in ("gpu01", "gpu02", "gpu03", "gpu04")}
    job = _run(pool, blockers, "-n4 --gpus=4 -c8 --mem=100")
    assert job.first_start == 1.0
    assert _per_node(pool, job) == {n: (1, 8) for n in ("gpu01", "gpu02", "gpu03", "gpu04")}
    job = _run(pool, {}, "-n4 --gpus=4 --mem-per-cpu=300000")
    assert job.first_start == 1.0
    assert [(p[2] // 1000, p[3]) for p in sorted(job.placement)] == [(2, 600000), (2, 600000)]


def test_memory_per_cpu_follows_each_nodes_tasks(pool):
    """``--mem-per-cpu`` beside DefMemPerGPU: each node holds its tasks' CPUs' memory."""
    job = _run(pool, {}, "-n16 --gpus=16 --mem-per-cpu=1000")
    assert [(p[2] // 1000, p[3]) for p in sorted(job.placement)] == [(16, 16000), (2, 2000)]


def test_mem_is_held_per_node_as_asked(pool):
    """``--mem`` is per node: the walked job holds it whole on each node, not the task pods'
    rounded-up shares (``-n3 --mem=1000000`` fits a 1 TB node; ReqTRES mem=100 for
    ``-n3 --gpus=6 --mem=100``)."""
    job = _run(pool, {}, "-n3 --gpus=3 --mem=1000000")
    assert job.first_start == 1.0 and [p[3] for p in job.placement] == [1000000]
    pol = make_policy("slurm", pool)
    wl = pol.resolve_request(replace(workload("j", "-A ml-platform -t 5 -n3 --gpus=6 --mem=100", 0.0, 1), user="dave"))
    (ps,) = wl.pod_sets
    assert (ps.memory_mib, ps.memory_total, ps.cpus_total, wl.req_cpu_mem) == (100, 100, 3, None)


def test_x_not_a_multiple_of_t_is_one_pod_of_the_tasks_for_other_policies(pool):
    """``-n3 --gpus=16``: its task pods could not be identical, so as submitted it is one pod of
    three tasks' CPUs and 16 GPUs (marked walked), which fits no 8-GPU node outside the Slurm
    policy; the Slurm policy's request counts 3 CPUs, one node and 16 GPUs until it starts.
    ``-n8 --gpus=3`` (more tasks than GPUs) is the same shape; with ``--exclusive`` (not probed)
    the reader refuses it."""
    from gpupool.errors import InputError
    from gpupool.formats.sbatch import job_pod_set, parse_sbatch_text

    wl = replace(workload("j", "-A ml-platform -t 5 -n3 --gpus=16 --mem=100", 0.0, 1), user="dave")
    (ps,) = wl.pod_sets
    assert (ps.count, ps.gpus, ps.cpu_m, ps.one_per_node) == (1, 16, 3000, False)
    assert (ps.walk_gpus, ps.gpus_per_job) == (True, 16)
    (form,) = make_policy("slurm", pool).resolve_request(wl).pod_sets
    assert (form.walked, form.split_tasks, form.count, form.cpus_total, form.total_gpus, form.memory_total) == (
        True, 3, 3, 3, 16, 100)
    (ps,) = replace(workload("j", "-A ml-platform -t 5 -n8 --gpus=3 --mem=100", 0.0, 1), user="dave").pod_sets
    assert (ps.count, ps.gpus, ps.cpu_m, ps.one_per_node, ps.walk_gpus) == (1, 3, 8000, False, True)
    with pytest.raises(InputError, match="cannot be split evenly over --ntasks=8"):
        job_pod_set(parse_sbatch_text("#!/bin/bash\n#SBATCH -n8 --gpus=3 --exclusive\n", "job.sbatch"))



def test_x_not_a_multiple_of_t_keeps_memory_per_gpu_per_node_or_per_cpu(pool):
    """The one pod's memory follows the walk as the task pods' does: ``--mem-per-gpu`` per GPU of
    each node (a real 22.05.8 gave ``-n3 --gpus=10 --mem-per-gpu=1000`` 8000 + 2000 MB, p107),
    ``--mem`` per node, ``--mem-per-cpu`` per CPU of each node's tasks."""
    job = _run(pool, {}, "-n3 --gpus=10 --mem-per-gpu=1000")  # p107: 8000 + 2000 MB
    assert [(p[1].bit_count(), p[3]) for p in sorted(job.placement)] == [(8, 8000), (2, 2000)]
    job = _run(pool, {}, "-n3 --gpus=16 --mem=2000")
    assert [p[3] for p in sorted(job.placement)] == [2000, 2000]
    job = _run(pool, {}, "-n3 --gpus=16 --mem-per-cpu=500")
    assert [(p[2], p[3]) for p in sorted(job.placement)] == [(2000, 1000), (2000, 1000)]


def test_more_tasks_than_gpus_memory_per_gpu_follows_the_nodes_gpus_and_the_request_counts_the_tasks(pool):
    """Probe p113: ``-n8 --gpus=3 --mem-per-gpu=1000 -c32`` held 2000 + 1000 MB for 2 + 1 GPUs;
    on four nodes of two free CPUs ``-n8 --gpus=3 --mem-per-gpu=1000`` held none on the node
    without a GPU (``Mem=0``); a pending ``-n10 --gpus=3`` recorded ``cpu=10,mem=100M,node=1``."""
    job = _started_at_once(pool, {}, "-n8 --gpus=3 --mem-per-gpu=1000 -c32")
    assert [(p[1].bit_count(), p[2] // 1000, p[3]) for p in sorted(job.placement)] == [(2, 128, 2000), (1, 128, 1000)]
    job = _started_at_once(pool, _ALL2, "-n8 --gpus=3 --mem-per-gpu=1000")
    assert [(p[1].bit_count(), p[3]) for p in sorted(job.placement)] == [(0, 0), (1, 1000), (1, 1000), (1, 1000)]
    pol = make_policy("slurm", pool)
    wl = pol.resolve_request(replace(workload("j", "-A ml-platform -t 5 -n10 --gpus=3 --mem=100", 0.0, 1), user="dave"))
    req = pol.request_of(wl)
    assert {k: req.req_tres[k] for k in ("cpu", "mem", "node", "gres/gpu")} == {"cpu": 10, "mem": 100, "node": 1,
                                                                               "gres/gpu": 3}
    job = _run(pool, _ALL2, "-n10 --gpus=3 --mem=100")
    assert (job.first_start, job.reason) == (300.0, "Resources")


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 7), st.sampled_from((0, 64, 120, 126))), min_size=4, max_size=4),
       st.integers(1, 8), st.integers(1, 12), st.sampled_from((1, 16, 48)))
def test_more_tasks_than_gpus_deals_each_node_its_share_or_all_it_has(pool, held, x, extra, cpt):
    """Whatever the GPUs and CPUs held on the four nodes: a started ``-n T --gpus=X`` (T > X)
    holds, node by node in index order, X − taken − later nodes' GPUs at most (none where that is
    not above zero), X in all; where its nodes outnumber X by two or more, every GPU each node
    had free (``spread_gpus``, probes p112-p114). The engine's own checks (``check=True``) hold."""
    blockers = {f"gpu0{i}": f"--gres=gpu:{g} -c{c}" if c else g for i, (g, c) in enumerate(held, 1) if g or c}
    free = {f"gpu0{i}": 8 - g for i, (g, _c) in enumerate(held, 1)}
    job = _run(pool, blockers, f"-n{x + extra} --gpus={x} -c{cpt} --mem=100")
    if job.first_start != 1.0:
        return
    names = list(pool.nodes)
    got = [(names[p[0]], p[1].bit_count()) for p in sorted(job.placement)]
    if len(got) >= x + 2:
        assert all(n == free[node] for node, n in got)
        return
    taken = 0
    for k, (node, n) in enumerate(got):
        later = len(got) - k - 1
        assert n <= max(0, x - taken - later) and n <= free[node]
        taken += n
    assert taken == x


def test_a_walked_job_over_its_limit_on_its_selection_preempts_nobody(pool):
    """``select_nodes`` tests the limits on the selection before it preempts (from the source):
    ``-n500 --gpus=1`` of QOS high needs four nodes, so it would hold all 32 GPUs, over QOS
    high's MaxTRESPerUser gres/gpu=16; it preempts none of the jobs in its way and waits with
    the limit's reason (it used to requeue them over and over)."""
    wls = [replace(workload(f"j{k}", f"-A ml-platform -t 30 -w gpu0{k + 2} -n1 --mem=100 -c64", 0.0, k,
                            runtime=300.0), user="dave") for k in (1, 2)]
    wls.append(replace(workload("j3", "-A ml-research -t 30 -n500 --gpus=1 --mem=100 --qos=high", 1.0, 3,
                                runtime=300.0), user="alice"))
    out = Engine(pool, wls, make_policy("slurm", pool), record_events=True, check=True, until=3600.0).run()
    assert not any(e[1] in ("preempted", "requeued") for e in out.events)
    job = max(out.jobs, key=lambda j: j.id)
    assert (job.state, job.reason) == ("PENDING", "QOSMaxGRESPerUser")


def test_on_typed_gpus_a_share_below_zero_gives_none(tmp_path):
    """Where gres.conf gives the GPUs a type (or ``Cores=``) the deal is ``_set_job_bits1``'s,
    whose share below zero takes nothing (from the source, not probed): ``-n300 --gpus=1`` on
    three idle nodes holds 0 + 0 + 1, not every GPU of the three as on untyped nodes."""
    from tests.unit.sbatch_plans import GPU_NODES_CONF, slurm_pool

    (tmp_path / "gres.conf").write_text("NodeName=gpu[01-04] Name=gpu Type=a100 File=/dev/nvidia[0-7]\n")
    typed = slurm_pool(tmp_path, GPU_NODES_CONF.format(last=4).replace("Gres=gpu:8", "Gres=gpu:a100:8"))
    out = Engine(typed, [workload("j", "-t 5 -n300 --gpus=1 --mem=100", 0.0, 1, runtime=100.0)],
                 make_policy("slurm", typed), check=True).run()
    assert [p[1].bit_count() for p in sorted(out.jobs[0].placement)] == [0, 0, 1]


def test_a_preemptor_held_by_its_limit_holds_nothing_back(pool):
    """Over its limit on the selection its victims would give it, a job is held by the limit,
    not by resources (from the source: ESLURM_ACCOUNTING_POLICY, the partition not held back,
    nothing reserved): a lower job behind it starts at once. Scavenger jobs, which QOS high may
    not preempt, leave gpu01-02 two CPUs each; the only normal job sits on gpu03; ``-n6
    --gpus=1`` of QOS high would walk three nodes, all 24 of their GPUs, over gres/gpu=16."""
    spec = [("-w gpu01 -c126 --qos=scavenger", 0.0), ("-w gpu02 -c126 --qos=scavenger", 0.0),
            ("-w gpu03 -c126 --qos=scavenger", 0.0), ("-w gpu04 -c128 --qos=scavenger", 0.0), ("-w gpu03 -c2", 0.0)]
    wls = [replace(workload(f"j{k}", f"-A ml-platform -t 30 -n1 --mem=100 {o}", at, k, runtime=600.0), user="dave")
           for k, (o, at) in enumerate(spec, 1)]
    wls.append(replace(workload("hi", "-A ml-research -t 30 -n6 --gpus=1 --mem=100 --qos=high", 1.0, 6,
                                runtime=300.0), user="alice"))
    wls.append(replace(workload("lo", "-A ml-platform -t 30 -n1 --gres=gpu:1 --mem=100", 1.0, 7, runtime=60.0),
                       user="dave"))
    out = Engine(pool, wls, make_policy("slurm", pool), record_events=True, check=True, until=900.0).run()
    jobs = {j.id: j for j in out.jobs}
    assert not any(e[1] in ("preempted", "requeued") for e in out.events)
    assert jobs[7].first_start == 1.0
    assert jobs[6].first_start == 600.0 and jobs[6].reason == "QOSMaxGRESPerUser"
