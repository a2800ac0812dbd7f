"""``-n T`` (T >= 2) with GPUs per node (``--gres=gpu:G``, ``--gpus-per-node=G``) and no
``--nodes``: slurmctld takes nodes holding G free GPUs until their CPUs hold the tasks, at most
T of them, G GPUs on each, and deals the tasks out in the order it took the nodes
(``sbatch._walks_tasks``, ``gpu_walk._tasks_form``, ``split_tasks.deal_tasks``).

Probe p105 (2026-12-05, a real 22.05.8): the seed pool's four nodes (128 CPUs, two threads per
core, 8 GPUs), partition train, ``--mem=100`` unless the case gives memory, blockers pinned
with ``-w`` started first, then the job; GPUs, CPUs and memory per node from ``scontrol -d show
job``.
"""
from __future__ import annotations

from dataclasses import replace

import pytest

from gpupool.engine.core import Engine
from gpupool.engine.policy_api import make_policy
from gpupool.errors import InputError
from gpupool.formats.pool_dir import load_pool
from gpupool.formats.sbatch import job_pod_set, parse_sbatch_text
from gpupool.policy.slurm import limits
from tests.unit.sbatch_plans import workload
from tests.unit.test_slurm_gpu_walk import _run, _started_at_once

#: two CPUs (one core) free on every node, all GPUs free
_ALL2 = {f"gpu0{i}": "-c126" for i in range(1, 5)}
#: four CPUs free on gpu01, two on gpu02, gpu03-04 idle
_UNEVEN = {"gpu01": "-c124", "gpu02": "-c126"}
#: two CPUs free everywhere; two GPUs free on gpu01 (6 and 7), one on the others (7)
_ONE_GPU = {"gpu01": "--gres=gpu:6 -c126", **{f"gpu0{i}": "--gres=gpu:7 -c126" for i in range(2, 5)}}

#: (blockers, options) -> {node: (GPU indices, CPUs)} as the real system gave them
_CASES = [
    ({}, "-n8 --gres=gpu:8", {"gpu01": ((0, 1, 2, 3, 4, 5, 6, 7), 8)}),
    ({}, "-n4 --gres=gpu:2", {"gpu01": ((0, 1), 4)}),
    ({}, "-n4 --gpus-per-node=2", {"gpu01": ((0, 1), 4)}),
    (_ALL2, "-n4 --gres=gpu:2", {"gpu01": ((0, 1), 2), "gpu02": ((0, 1), 2)}),
    (_ALL2, "-n8 --gres=gpu:1", {f"gpu0{i}": ((0,), 2) for i in range(1, 5)}),
    (_ALL2, "-n3 --gres=gpu:2 -c2", {f"gpu0{i}": ((0, 1), 2) for i in range(1, 4)}),
    # the node holding the tasks with the fewest CPUs free is taken alone
    (_UNEVEN, "-n4 --gres=gpu:2", {"gpu01": ((0, 1), 4)}),
    (_UNEVEN, "-n6 --gres=gpu:2", {"gpu03": ((0, 1), 6)}),
    # a node without G free GPUs is not a candidate
    ({"gpu01": "--gres=gpu:4"}, "-n2 --gres=gpu:8", {"gpu02": ((0, 1, 2, 3, 4, 5, 6, 7), 2)}),
    (_ONE_GPU, "-n4 --gres=gpu:1", {"gpu01": ((6,), 2), "gpu02": ((7,), 2)}),
]


@pytest.fixture(scope="module")
def pool():
    return load_pool("examples/seed-pool")


def _per_node(pool, job) -> dict[str, tuple[tuple[int, ...], int]]:
    names = list(pool.nodes)
    return {names[p[0]]: (tuple(b for b in range(8) if p[1] >> b & 1), p[2] // 1000) for p in sorted(job.placement)}


@pytest.mark.parametrize("blockers,opts,want", _CASES, ids=[f"{len(b)}blk {o}" for b, o, _ in _CASES])
def test_the_job_takes_the_nodes_gpus_and_cpus_the_real_system_gave_it(pool, blockers, opts, want):
    assert _per_node(pool, _started_at_once(pool, blockers, opts)) == want


def test_memory_is_per_node_per_gpu_of_the_node_or_per_cpu(pool):
    """``--mem=1000`` held 1000 MB on each of two nodes, ``--mem-per-gpu=1000`` 2000 MB for a
    node's two GPUs, ``--mem-per-cpu=500`` 1000 MB for a node's two CPUs (p105)."""
    job = _run(pool, _ALL2, "-n4 --gres=gpu:2 --mem=1000")
    assert [(p[0], p[3]) for p in sorted(job.placement)] == [(0, 1000), (1, 1000)]
    job = _run(pool, {}, "-n4 --gres=gpu:2 --mem-per-gpu=1000")
    assert [(p[0], p[2], p[3]) for p in job.placement] == [(0, 4000, 2000)]
    job = _run(pool, _ALL2, "-n4 --gres=gpu:2 --mem-per-cpu=500")
    assert [(p[0], p[2], p[3]) for p in sorted(job.placement)] == [(0, 2000, 1000), (1, 2000, 1000)]


def test_the_job_waits_when_the_nodes_with_its_gpus_cannot_hold_its_tasks(pool):
    """``-n10 --gres=gpu:1`` with two CPUs free on each node (8 in all) and ``-n4 --gres=gpu:2``
    where only gpu01 has two GPUs free (two CPUs) both waited with Resources (p105): they start
    once the blockers end."""
    for blockers, opts in ((_ALL2, "-n10 --gres=gpu:1 --mem=100"), (_ONE_GPU, "-n4 --gres=gpu:2 --mem=100")):
        job = _run(pool, blockers, opts)
        assert job.first_start == 300.0, opts


def test_more_gpus_per_node_than_a_node_has_is_refused_at_submit(pool):
    """``-n2 --gres=gpu:16`` on 8-GPU nodes: "Requested node configuration is not available"."""
    job = _run(pool, {}, "-n2 --gres=gpu:16 --mem=100")
    assert (job.state, job.reason) == ("REJECTED", limits.MSG_NODES)


def test_the_request_counts_the_tasks_cpus_one_node_and_its_gpus_until_the_job_starts(pool):
    """A pending ``-n4 --gres=gpu:2 --mem=100`` recorded ``cpu=4,mem=100M,node=1,gres/gpu=2``
    (p105)."""
    pol = make_policy("slurm", pool)
    wl = pol.resolve_request(replace(workload("j", "-A ml-platform -t 5 -n4 --gres=gpu:2 --mem=100", 0.0, 1),
                                     user="dave"))
    (ps,) = wl.pod_sets
    assert (ps.walked, ps.split, ps.spread, ps.count, ps.min_count, ps.split_tasks) == (True, True, False, 4, 1, 4)
    assert (ps.cpus_total, ps.memory_total, ps.total_gpus, ps.counted_pods) == (4, 100, 2, 1)


def test_other_policies_place_one_pod_of_the_tasks_and_gpus(pool):
    """Outside the Slurm policy ``-n4 --gres=gpu:2`` is one pod of four CPUs and two GPUs: what
    slurmctld gives it where one node holds the tasks."""
    wl = replace(workload("j", "-A ml-platform -t 5 -n4 --gres=gpu:2 --mem=100", 0.0, 1, runtime=60.0), user="dave")
    (ps,) = wl.pod_sets
    assert (ps.count, ps.gpus, ps.cpu_m, ps.one_per_node, ps.walk_gpus) == (1, 2, 4000, False, True)
    out = Engine(pool, [wl], make_policy("fifo", pool), check=True).run()
    assert [(p[1].bit_count(), p[2]) for p in out.jobs[0].placement] == [(2, 4000)]


@pytest.mark.parametrize("extra", ["--cpus-per-gpu=2", "--gpus-per-task=1", "--exclusive -w gpu01,gpu02"])
def test_requests_the_walk_was_not_probed_with_are_still_refused_naming_the_lines(extra):
    """Without a node count these keep the reader's refusal: the node count is unknown
    (``--exclusive`` walks whole nodes and ``--nodelist`` from the listed nodes since probe
    p153: ``test_slurm_exclusive_job_gpus.py``, ``test_slurm_gpu_walk_listed.py``; not both;
    ``--contiguous`` walks one run since probe p167: ``test_slurm_contiguous_walks.py``)."""
    text = f"#!/bin/bash\n#SBATCH -n4\n#SBATCH --gres=gpu:2\n#SBATCH {extra}\n"
    with pytest.raises(InputError, match="node count is unknown"):
        job_pod_set(parse_sbatch_text(text, "job.sbatch"))


def test_mixed_non_gpu_gres_stays_per_node(pool):
    """Non-GPU GRES ride along per node: ``-n4 --gres=gpu:2,nvme:1`` keeps ``gres/nvme`` on the
    one pod as submitted."""
    ps, _ = job_pod_set(parse_sbatch_text("#!/bin/bash\n#SBATCH -n4 --gres=gpu:2,nvme:1\n", "job.sbatch"))
    assert (ps.count, ps.gpus, dict(ps.extra), ps.walk_gpus) == (1, 2, {"gres/nvme": 1}, True)


def _run_recorded(pool, specs: list[tuple[str, float, float]], until: float | None = None):
    """``specs``: (options, submit time, runtime), each job of its account's user; the Slurm
    policy records its plans. ``until``: stop there (the engine is returned too)."""
    users = {"ml-serving": "carol", "ml-platform": "dave", "ml-research": "alice"}
    wls = [replace(workload(f"j{k}", f"-t 5 {o}", at, k, runtime=run), user=users[o.split()[1]])
           for k, (o, at, run) in enumerate(specs, 1)]
    pol = make_policy("slurm", pool, {"record": True})
    eng = Engine(pool, wls, pol, record_events=True, check=True)
    if until is not None:
        eng.run_until(until)
        return pol, eng
    return pol, {j.id: j for j in eng.run().jobs}


def test_the_walks_gpus_count_for_the_accounts_limit_when_it_would_start(pool):
    """ml-serving's GrpTRES=gres/gpu=16 with one GPU in use: ``-n2 -c96 --gres=gpu:8`` needs two
    nodes, 16 GPUs, so it waits with AssocGrpGRES (slurmctld's post-selection test) until that
    GPU is free, although its request counts 8."""
    specs = [("-A ml-serving -w gpu01 --gres=gpu:1 --mem=100", 0.0, 120.0),
             ("-A ml-serving -n2 -c96 --gres=gpu:8 --mem=100", 1.0, 60.0)]
    _pol, eng = _run_recorded(pool, specs, until=60.0)
    assert 2 in eng.pending and eng.pending[2].reason == "AssocGrpGRES"
    _pol, jobs = _run_recorded(pool, specs)
    assert jobs[2].first_start == 120.0
    assert sorted({p[0] for p in jobs[2].placement}) == [0, 1]


def test_the_walks_gpus_count_before_backfill_reserves_its_nodes(pool):
    """``diff-slurm --mix gres-tasks`` seed 1: backfill tests the limits on the walk's nodes before
    it adds a reservation; ml-serving's ``-n2 -c96 --gres=gpu:8``, over GrpTRES there, gets no
    planned start ("adding reservation for JobId=21 blocked by
    acct_policy_job_runnable_post_select"), while the same job of ml-platform gets one; the
    limited job keeps will-run's start time (``job_ptr->start_time``, what ``squeue --start``
    shows) without reserving its nodes."""
    blockers = [("-A ml-serving -w gpu01 --gres=gpu:1 --mem=100", 0.0, 300.0)] + [
        (f"-A ml-platform -w gpu0{i} --gres=gpu:8 --mem=100", 0.0, 200.0) for i in range(2, 5)]
    pol, jobs = _run_recorded(pool, blockers + [
        ("-A ml-serving -n2 -c96 --gres=gpu:8 --mem=100", 1.0, 60.0),
        ("-A ml-platform -n2 -c96 --gres=gpu:8 --mem=100", 1.0, 60.0),
    ])
    limited, free = 5, 6
    cycles = [t for t in sorted(pol.plan_log) if 1.0 <= t < 200.0]
    assert cycles and all(limited in pol.plan_log[t] and free in pol.plan_log[t] for t in cycles)
    reserved = [{jid for jid, *_ in pol.resv_log[t]} for t in cycles]
    assert all(limited not in r and free in r for r in reserved)
    assert jobs[free].first_start == 200.0
    assert jobs[limited].first_start == 300.0  # once ml-serving's GPU is free


def _limited_pool(tmp_path, limit: str):
    """The seed pool with ``limit`` on account ml-platform."""
    import shutil

    d = tmp_path / "pool"
    shutil.copytree("examples/seed-pool", d)
    accounts = (d / "accounts.cfg").read_text()
    (d / "accounts.cfg").write_text(accounts.replace("Fairshare=20:MaxJobs=20:", f"Fairshare=20:MaxJobs=20:{limit}:"))
    return load_pool(d)


def test_before_a_reservation_the_walk_counts_the_whole_cores_will_run_gave(tmp_path):
    """``-n3 --gres=gpu:1`` asks 3 CPUs, but a node gives its tasks whole cores (4 CPUs: two
    threads per core); under GrpTRES=cpu=3 backfill's test on will-run's selection (its
    ``total_cpus``) fails, so the job gets no reservation (22.05.8 source, backfill.c; a reviewer's
    example); at its start it waits with the limit's reason for ever."""
    pool = _limited_pool(tmp_path, "GrpTRES=cpu=3")
    blockers = [(f"-A ml-research -w gpu0{i} --gres=gpu:8 --mem=100", 0.0, 200.0) for i in range(1, 4)]
    blockers.append(("-A ml-serving -w gpu04 --gres=gpu:8 --mem=100", 0.0, 200.0))
    pol, jobs = _run_recorded(pool, blockers + [("-A ml-platform -n3 --gres=gpu:1 --mem=100", 1.0, 60.0)])
    cycles = [t for t in sorted(pol.plan_log) if 1.0 <= t < 200.0]
    assert cycles and all(5 not in {jid for jid, *_ in pol.resv_log[t]} for t in cycles)
    assert all(jobs[k].first_start == 0.0 for k in range(1, 5))
    assert all(5 in pol.plan_log[t] for t in cycles)  # will-run's start time stays
    assert jobs[5].first_start is None and jobs[5].reason == "AssocGrpCpuLimit"
    pool = _limited_pool(tmp_path / "four", "GrpTRES=cpu=4")
    pol, jobs = _run_recorded(pool, blockers + [("-A ml-platform -n3 --gres=gpu:1 --mem=100", 1.0, 60.0)])
    assert all(5 in {jid for jid, *_ in pol.resv_log[t]} for t in cycles) and jobs[5].first_start == 200.0


def test_reports_count_the_gpus_the_walk_gave(pool):
    """``-n8 --gres=gpu:1`` on four nodes with two CPUs free each holds 4 GPUs, one a node: the
    jobs frame counts those (its request counted one node's), as the ledger does."""
    from gpupool.report.metrics import jobs_frame

    specs = [(f"-w {n} -n1 --mem=100 {o}", 0.0) for n, o in _ALL2.items()] + [("-n8 --gres=gpu:1 --mem=100", 1.0)]
    wls = [replace(workload(f"j{k}", f"-A ml-platform -t 5 {o}", at, k, runtime=300.0), user="dave")
           for k, (o, at) in enumerate(specs, 1)]
    out = Engine(pool, wls, make_policy("slurm", pool), record_events=True, check=True).run()
    row = jobs_frame(out).set_index("id").loc[5]
    assert (row["gpus"], row["shape"], row["pods"]) == (4, "multi-node", 4)


@pytest.mark.parametrize("opts", ["-N1 -n3 --gres=gpu:1 --mem=100", "-n3 --gres=gpu:1 --mem=100", "-n3 --mem=100",
                                  "-c3 --mem=100", "-c3 --mem-per-cpu=100"])
def test_any_jobs_cpus_rounded_up_to_whole_cores_count_for_a_cpu_limit(tmp_path, opts):
    """slurmctld's test on the selection counts ``total_cpus`` (node_scheduler.c
    ``select_nodes``): three CPUs asked on nodes of two threads per core hold four, so under
    GrpTRES=cpu=3 the job waits with AssocGrpCpuLimit on idle nodes, with or without
    ``--nodes`` (probe p106, a real 22.05.8: ``-n3 --gres=gpu:1``, ``-N1 -n3 --gres=gpu:1``,
    ``-n3`` and ``-c3`` pending so, ``-n2`` and ``-c2`` running); under cpu=4 it runs at once."""
    pool = _limited_pool(tmp_path, "GrpTRES=cpu=3")
    _pol, eng = _run_recorded(pool, [(f"-A ml-platform {opts}", 0.0, 60.0)], until=120.0)
    assert 1 in eng.pending and eng.pending[1].reason == "AssocGrpCpuLimit"
    pool = _limited_pool(tmp_path / "four", "GrpTRES=cpu=4")
    _pol, jobs = _run_recorded(pool, [(f"-A ml-platform {opts}", 0.0, 60.0)])
    assert jobs[1].first_start == 0.0 and sum(p[2] for p in jobs[1].placement) == 4000


@pytest.mark.parametrize("opts", ["-n2 --mem=100", "-c2 --mem=100"])
def test_a_whole_core_within_the_cpu_limit_runs(tmp_path, opts):
    """``-n2`` and ``-c2`` (one core) ran under GrpTRES=cpu=3 (p106)."""
    pool = _limited_pool(tmp_path, "GrpTRES=cpu=3")
    _pol, jobs = _run_recorded(pool, [(f"-A ml-platform {opts}", 0.0, 60.0)])
    assert jobs[1].first_start == 0.0


def test_a_preemptor_over_its_cpu_limit_on_whole_cores_preempts_nobody(tmp_path):
    """slurmctld tests the limits on the selection before it preempts (``select_nodes``): with
    GrpTRES=cpu=3 on ml-research, ``--qos=high -n3`` (4 CPUs on whole cores) leaves the
    ml-platform job it could preempt running and waits with AssocGrpCpuLimit; ``-n2`` preempts
    it and runs (22.05.8 source; a reviewer's example)."""
    import shutil

    d = tmp_path / "pool"
    shutil.copytree("examples/seed-pool", d)
    accounts = (d / "accounts.cfg").read_text()
    (d / "accounts.cfg").write_text(accounts.replace("GrpTRES=gres/gpu=24", "GrpTRES=gres/gpu=24,cpu=3"))
    pool = load_pool(d)
    blockers = [(f"-A ml-platform -w gpu0{i} -c128 --mem=100", 0.0, 300.0) for i in range(1, 5)]
    for tasks, preempts in ((3, False), (2, True)):
        pol, jobs = _run_recorded(pool, blockers + [(f"-A ml-research --qos=high -n{tasks} --mem=100", 1.0, 60.0)])
        assert (jobs[1].preemptions > 0) == preempts, tasks
        assert (jobs[5].first_start == 1.0) == preempts, tasks
        if not preempts:
            assert jobs[5].first_start is None and jobs[5].reason == "AssocGrpCpuLimit"


def test_uneven_tasks_and_gpus_kept_off_the_walk_are_refused_in_gpupools_words(tmp_path):
    """``-n3 --gpus=16`` under DefCpuPerGPU walks as ``--cpus-per-gpu`` would (probe p160's
    ``-n3 --gpus=12`` ran as 8 + 4), and so does ``-n4 --gpus=16``: 8 + 8 GPUs each; under
    MaxMemPerCPU too (not probed) the one pod of 16 GPUs stands for nothing slurmctld gives
    it: refused with gpupool's message, not Slurm's "Requested node configuration is not
    available"."""
    from gpupool.policy.slurm.job_defaults import MSG_UNWALKED
    from tests.unit.sbatch_plans import GPU_NODES_CONF, slurm_pool

    conf = GPU_NODES_CONF.format(last=4).replace("PartitionName=p ", "PartitionName=p DefCpuPerGPU=2 ")
    for sub, extra in (("a", ""), ("b", "MaxMemPerCPU=100000\n")):
        (tmp_path / sub).mkdir()
        pool = slurm_pool(tmp_path / sub, conf + extra)
        wls = [replace(workload(f"j{k}", f"-t 5 {o}", 0.0, k, runtime=60.0), user="dave")
               for k, o in enumerate(["-n3 --gpus=16 --mem=100", "-n4 --gpus=16 --mem=100"], 1)]
        jobs = {j.id: j for j in Engine(pool, wls, make_policy("slurm", pool), check=True).run().jobs}
        if extra:
            assert (jobs[1].state, jobs[1].reason) == ("REJECTED", MSG_UNWALKED)
            assert jobs[2].state == "COMPLETED"
        else:
            for jid in (1, 2):
                assert jobs[jid].state == "COMPLETED"
                assert sorted(p[1].bit_count() for p in jobs[jid].placement) == [8, 8]


def test_a_walk_whose_failed_selection_breaks_the_limit_holds_no_partition_back(pool):
    """``diff-slurm --mix gres-tasks`` seed 36 (a real 22.05.8): ml-serving (GrpTRES=gres/gpu=16,
    GPUs in use) had ``-n2 -c96 --gres=gpu:8`` at the head of the queue, which fitted nowhere;
    the main pass then started a lower 8-GPU job of ml-serving on the one free node. After a
    failed selection slurmctld tests the limits with the GPUs the job's last full selection
    left on its request (backfill's will-run, every cycle there: two nodes, 16 GPUs), so the
    job pends with the limit and its partition is not held back. Before any full selection
    (the first backfill cycle at 30 s) the request counts one node's 8: within the limit, the
    job waits for Resources, holding the partition back, and the lower job for backfill."""
    blockers = [("-A ml-serving -w gpu01 --gres=gpu:1 --mem=100", 0.0, 300.0)] + [
        (f"-A ml-platform -w gpu0{i} --gres=gpu:8 --mem=100", 0.0, 300.0) for i in (2, 3)]
    walk = ("-A ml-serving -n2 -c96 --gres=gpu:8 --mem=100", 1.0, 60.0)
    _pol, eng = _run_recorded(pool, blockers + [walk, ("-A ml-serving -N1 --gres=gpu:8 --mem=100", 31.0, 60.0)],
                              until=31.0)
    assert eng.pending[4].reason == "AssocGrpGRES"
    lower = eng.jobs[5]
    assert (lower.first_start, lower.via, sorted({p[0] for p in lower.placement})) == (31.0, "SchedMain", [3])
    _pol, eng = _run_recorded(pool, blockers + [walk, ("-A ml-serving -N1 --gres=gpu:8 --mem=100", 2.0, 60.0)],
                              until=30.0)
    assert eng.pending[4].reason == "Resources"
    assert eng.jobs[5].first_start == 30.0 and eng.jobs[5].via == "SchedBackfill"
