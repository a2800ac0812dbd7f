"""A job without ``--nodes`` in a MinNodes partition runs on MinNodes nodes, as a real 22.05.8
ran it (policy/slurm/min_nodes.py).

Probes p96/p97 and p99 (2026-12-04): the seed pool's four nodes (128 CPUs, two threads per core,
8 GPUs) with ``PartitionName=mn Nodes=gpu[03-04] MinNodes=2``; each job ran alone on idle nodes.
"""
from __future__ import annotations

from dataclasses import replace

import pytest

from gpupool.engine.core import Engine
from gpupool.engine.policy_api import make_policy
from gpupool.policy.slurm import limits
from gpupool.policy.slurm.min_nodes import partitions_min_nodes, per_node_pods
from gpupool.formats.pool_dir import load_pool
from tests.unit.sbatch_plans import workload
from tests.unit.test_slurm_partition_qos import _node_count_pool

#: options -> (CPUs, GPUs, MB) on each of gpu03 and gpu04, as ``scontrol -d show job`` gave them
_P99 = {
    "-n1 --mem=100": [(2, 0, 100)] * 2,              # one core on each node (p97 too)
    "-n4 --mem=100": [(2, 0, 100)] * 2,              # p97: NumCPUs=4
    "-n6 --mem=120": [(4, 0, 120), (2, 0, 120)],     # as -N2 -n6 (probe: --mem=100; here one the
                                                     # six tasks divide, see below)
    "-n2 -c3 --mem=100": [(4, 0, 100)] * 2,          # 3 CPUs rounded up to two cores
    "-n1 --gres=gpu:1 --mem=100": [(2, 1, 100)] * 2,  # --gres is per node
    "-n1 --gres=gpu:8 --mem=100": [(2, 8, 100)] * 2,
    "-n1 --gpus-per-node=2 --mem=100": [(2, 2, 100)] * 2,
    "-n1 --mem=1000": [(2, 0, 1000)] * 2,            # --mem is per node
    "-n1 --mem-per-cpu=1000": [(2, 0, 2000)] * 2,    # follows the core's two CPUs
    "-n1 --exclusive --mem=100": [(128, 8, 100)] * 2,
    "-n4 --gpus-per-task=1 --mem=100": [(2, 2, 100)] * 2,  # GPUs follow the tasks
    "-n1 --gpus=3 --mem=100": [(2, 2, 100), (2, 1, 100)],  # --gpus spread as -N2 spreads it
    "-n1 --gpus=9 --mem=100": [(2, 8, 100), (2, 1, 100)],
}


def _jobs(pool, opts_list, parts="mn"):
    wls = [replace(workload(f"j{k}", f"-A ml-research -t 5 -p {parts} {opts}", 0.0, k, runtime=300.0), user="alice")
           for k, opts in enumerate(opts_list, 1)]
    out = Engine(pool, wls, make_policy("slurm", pool), record_events=True, check=True).run()
    return {j.id: j for j in out.jobs}


@pytest.mark.parametrize("enforce", ["NO", "ALL"])
def test_a_job_without_nodes_runs_on_min_nodes_nodes_as_the_real_system_ran_it(tmp_path, enforce):
    pool = _node_count_pool(tmp_path, enforce)
    names = {name: i for i, name in enumerate(pool.nodes)}
    for opts, want in _P99.items():
        job = _jobs(pool, [opts])[1]  # alone, as in the probe
        assert job.first_start == 0.0, opts
        got = [(p[2] // 1000, bin(p[1]).count("1"), p[3]) for p in sorted(job.placement)]
        assert [p[0] for p in sorted(job.placement)] == [names["gpu03"], names["gpu04"]], opts
        assert got == want, opts


def test_memory_per_node_split_over_tasks_is_taken_back_as_their_sum(tmp_path):
    """``-n6 --mem=100``: the task pods held ⌈100/6⌉ = 17 MB each, so the raised job holds 102 MB
    a node where the real system held 100 (the module's docstring; exact where the tasks
    divide the memory)."""
    job = _jobs(_node_count_pool(tmp_path, "NO"), ["-n6 --mem=100", "-n4 --mem=100"])
    assert [p[3] for p in job[1].placement] == [102, 102]
    assert [p[3] for p in job[2].placement] == [100, 100]


def test_gpus_for_the_job_beside_more_tasks_than_nodes_are_not_raised_and_wait(tmp_path):
    """The real system ran ``-n4 --gpus=4`` as 3 + 1 GPUs beside 2 + 2 tasks (``-n3 --gpus=3``
    2 + 1, ``-n4 --gpus=2`` 1 + 1): no pod set here spreads both, so such a job keeps its own
    count and waits (docs/policies/slurm.md, Known differences; ``-n4 --gpus=2`` does not even
    read: sbatch's reader wants the task pods' GPUs even)."""
    jobs = _jobs(_node_count_pool(tmp_path, "NO"), ["-n4 --gpus=4 --mem=100", "-n3 --gpus=3 --mem=100"])
    assert [(j.first_start, j.reason) for j in jobs.values()] == [(None, "PartitionNodeLimit")] * 2


def test_the_least_min_nodes_of_the_job_partitions_is_taken(tmp_path):
    """``_valid_job_part`` takes the least MinNodes of the partitions named: with train (none)
    beside mn it is 1, so the job keeps one node and runs in train; the order of the names does
    not matter to the count."""
    pool = _node_count_pool(tmp_path, "NO")
    cfg = make_policy("slurm", pool).cfg
    one = workload("a", "-p mn,train -n1", 0.0, 1)
    assert partitions_min_nodes(cfg, one) == 1
    assert partitions_min_nodes(cfg, replace(one, partition="train,mn")) == 1
    assert partitions_min_nodes(cfg, replace(one, partition="mn")) == 2
    assert partitions_min_nodes(cfg, replace(one, partition=None)) == 1  # default: train
    jobs = _jobs(pool, ["-n1 --mem=100"], parts="mn,train")
    assert len(jobs[1].placement) == 1 and jobs[1].first_start == 0.0


def test_a_job_with_nodes_is_left_as_it_asked(tmp_path):
    """``-N1`` (its largest below MinNodes) still waits (probe p97); ``-N1-2`` was raised as a
    range (``jobinfo.raised_least``) and runs on two."""
    jobs = _jobs(_node_count_pool(tmp_path, "NO"), ["-N1 --mem=100", "-N1-2 --mem=100"])
    assert (jobs[1].first_start, jobs[1].reason) == (None, "PartitionNodeLimit")
    assert jobs[2].first_start == 0.0 and len(jobs[2].placement) == 2


def test_per_node_pods_as_sbatch_gives_them_for_the_node_count(tmp_path):
    """The raised pod set is the one ``--nodes=M`` gives (sbatch.job_pod_set), field for field."""
    from gpupool.formats.sbatch import job_pod_set, parse_sbatch_text

    for opts in ("-n1", "-n4", "-n6 -c2", "-n3 --mem=300", "-n5 --mem-per-cpu=100", "-n1 --gres=gpu:2",
                 "-n1 --gpus-per-node=2 --cpus-per-gpu=3", "-n2 --exclusive", "-n1 --gres=gpu:1 -c4 --mem-per-gpu=10",
                 "-n1 --gpus=3", "-n2 --gpus=4 --mem-per-gpu=100", "-n1 --gpus=9 -c2", "-n4 --gpus-per-task=1",
                 "-n2 --gpus-per-task=2 --mem-per-gpu=10", "-n4 --gpus=4 --cpus-per-gpu=2", "-n2 --gpus=4 --exclusive",
                 "-n3 --gpus-per-task=1 --mem-per-cpu=100", "-n1 --gpus=2 --mem=0", "-n1 --gpus=a100:3", "-n1 -c4 --mem=100"):
        alone, _ = job_pod_set(parse_sbatch_text(f"#!/bin/sh\n#SBATCH {opts}\n", "t.sh"))
        raised = per_node_pods(alone, 2)
        if opts == "-n1" or opts.startswith("-n1 "):
            # sbatch itself would run -N2 -n1 on one node (it lowers --nodes to --ntasks); the
            # raise is slurmctld's, after that: compare with -N2 and no task count, whose
            # cores cons_tres steers for any number of tasks (``slurm_tasks``)
            with_nodes, _ = job_pod_set(parse_sbatch_text(f"#!/bin/sh\n#SBATCH {opts[4:]} -N2\n", "t.sh"))
            raised, with_nodes = replace(raised, slurm_tasks=None), replace(with_nodes, slurm_tasks=None)
        else:
            with_nodes, _ = job_pod_set(parse_sbatch_text(f"#!/bin/sh\n#SBATCH {opts} -N2\n", "t.sh"))
        if alone.walk_gpus:  # (-n2 --gpus=4 without --nodes may walk; ``raise_node_count`` clears it)
            assert raised.walk_gpus and not with_nodes.walk_gpus, opts
            raised = replace(raised, walk_gpus=False)
        assert raised == with_nodes, opts
    # not modelled, so not raised: --gpus spread beside split tasks, --gpus that neither spreads
    # nor divides, fewer GPUs than nodes, GPUs per task with fewer tasks than nodes (not probed)
    for opts in ("-n4 --gpus=4", "-n1 --gpus=3 --exclusive", "-n1 --gpus=1", "-n1 --gpus-per-task=2"):
        alone, _ = job_pod_set(parse_sbatch_text(f"#!/bin/sh\n#SBATCH {opts}\n", "t.sh"))
        assert per_node_pods(alone, 2) is None, opts


def test_pools_without_min_nodes_keep_every_job_as_submitted():
    pool = load_pool("examples/seed-pool")
    cfg = make_policy("slurm", pool).cfg
    from gpupool.policy.slurm.min_nodes import raise_node_count

    wl = workload("a", "-n4", 0.0, 1)
    assert raise_node_count(cfg, wl) is wl


@pytest.mark.parametrize("enforce", ["NO", "ALL"])
def test_fewer_gpus_for_the_job_than_min_nodes_are_refused_at_submit(tmp_path, enforce):
    """Probe p99: ``-n1 --gpus=1`` and ``-n1 -c4 --gpus=1`` in the MinNodes=2 partition were
    refused, "Invalid generic resource (gres) specification", whatever EnforcePartLimits; with
    train beside mn the least MinNodes is 1 and the job runs, but under ALL the select loop's
    test of mn (one node below its MinNodes) refuses it, idle nodes or not (probe p138:
    ``-p m,p -n1 --gpus=1``, "Requested partition configuration not available now"; this
    test once had it run under ALL too)."""
    from gpupool.policy.slurm.min_nodes import MSG_GRES

    pool = _node_count_pool(tmp_path, enforce)
    jobs = _jobs(pool, ["-n1 --gpus=1 --mem=100", "-n1 -c4 --gpus=1 --mem=100", "-n2 --gpus-per-task=1 --mem=100",
                        "-n1 --gpus=2 --mem=100"])
    assert [(jobs[k].state, jobs[k].reason) for k in (1, 2)] == [("REJECTED", MSG_GRES)] * 2
    # as many GPUs for the job as the nodes: one on each
    assert [[bin(p[1]).count("1") for p in jobs[k].placement] for k in (3, 4)] == [[1, 1]] * 2
    both = _jobs(pool, ["-n1 --gpus=1 --mem=100"], parts="mn,train")[1]
    if enforce == "ALL":
        assert (both.state, both.reason) == ("REJECTED", limits.MSG_PART_CONFIG)
    else:
        assert both.first_start == 0.0


def _pool_with(tmp_path, enforce: str, lines: str):
    from tests.unit.test_slurm_req_tres import _seed_copy

    pool_dir = _seed_copy(tmp_path, [])
    conf = pool_dir / "slurm.conf"
    conf.write_text(f"EnforcePartLimits={enforce}\n" + conf.read_text()
                    + "PartitionName=mn Nodes=gpu[03-04] MinNodes=2 MaxTime=60 State=UP\n" + lines)
    return load_pool(pool_dir)


def test_the_partitions_node_limits_are_tested_at_submit_before_the_raise(tmp_path):
    """``_part_access_check`` runs while the job has no node count, so ``-p mn,mn3 -n1`` is not
    refused for mn3's MinNodes=3 there (a reviewer's reading of ``_valid_job_part``); it gets
    the least MinNodes, 2, and under NO runs in mn. Under ALL the select loop then tests it in
    mn3 with those two nodes, below MinNodes=3, and refuses it (probe p138: ``-p p,m -n1``
    with m of MinNodes=2 refused on idle nodes, "Requested partition configuration not
    available now"; this test once had it run under ALL)."""
    pool = _pool_with(tmp_path, "NO", "PartitionName=mn3 Nodes=gpu[02-04] MinNodes=3 MaxTime=60 State=UP\n")
    jobs = _jobs(pool, ["-n1 --mem=100"], parts="mn,mn3")
    assert jobs[1].first_start == 0.0 and len(jobs[1].placement) == 2
    assert {list(pool.nodes)[p[0]] for p in jobs[1].placement} == {"gpu03", "gpu04"}
    pool = _pool_with(tmp_path / "all", "ALL", "PartitionName=mn3 Nodes=gpu[02-04] MinNodes=3 MaxTime=60 State=UP\n")
    job = _jobs(pool, ["-n1 --mem=100"], parts="mn,mn3")[1]
    assert (job.state, job.reason) == ("REJECTED", limits.MSG_PART_CONFIG)


def test_a_time_min_refusal_comes_before_the_gres_one(tmp_path):
    """``_valid_job_part`` tests ``--time-min`` before ``gres_job_state_validate`` (source)."""
    from gpupool.policy.slurm import limits

    jobs = _jobs(_node_count_pool(tmp_path, "NO"), ["-n1 --gpus=1 --time-min=10 --mem=100"])
    assert (jobs[1].state, jobs[1].reason) == ("REJECTED", limits.MSG_TIME_MIN)


def test_max_mem_per_node_is_held_against_the_memory_asked(tmp_path):
    """``-n3 --mem=100`` asks 100 MB a node, under MaxMemPerNode=101, though its raised pods hold
    the task pods' rounded-up sum (102 MB); ``--mem=120`` is over it."""
    from tests.unit.test_slurm_req_tres import _seed_copy

    pool_dir = _seed_copy(tmp_path / "max", [])
    conf = pool_dir / "slurm.conf"
    conf.write_text(conf.read_text() + "PartitionName=mn Nodes=gpu[03-04] MinNodes=2 MaxMemPerNode=101 State=UP\n")
    jobs = _jobs(load_pool(pool_dir), ["-n3 --mem=100", "-n3 --mem=120"])
    assert jobs[1].state != "REJECTED" and jobs[1].first_start == 0.0
    assert jobs[2].state == "REJECTED"


def test_req_tres_keeps_the_cpus_and_per_cpu_memory_asked(tmp_path):
    """slurmctld's ``min_cpus`` is not changed by the raise: ReqTRES shows ``-n1`` as cpu=1 and
    ``--mem-per-cpu=1000`` as 1000 MB, ``--mem=100`` as 100 MB on each of the 2 nodes (a
    reviewer's reading of ``job_set_req_tres``)."""
    pool = _node_count_pool(tmp_path, "NO")
    pol = make_policy("slurm", pool)

    def req(opts):
        wl = pol.resolve_request(replace(workload("j", f"-A ml-research -t 5 -p mn {opts}", 0.0, 1), user="alice"))
        return wl.req_cpu_mem or (sum(ps.cpus_total for ps in wl.pod_sets), sum(ps.memory_total for ps in wl.pod_sets))

    assert req("-n1 --mem=100") == (1, 200)
    assert req("-n1 --mem-per-cpu=1000") == (1, 1000)
    assert req("-n1 -c4 --mem=100") == (4, 200)


def test_jobs_without_ntasks_arrays_and_a_listed_node_are_raised(tmp_path):
    """No ``-n`` at all, each task of an array, and ``-w gpu04`` (one node listed: sbatch sends
    a least count of 1 with no largest, which slurmctld raises) all run on both nodes."""
    from tests.unit.sbatch_plans import workloads

    pool = _node_count_pool(tmp_path, "NO")
    wls = [replace(w, user="alice") for w in
           [workload("a", "-A ml-research -t 5 -p mn --gres=gpu:1 --mem=100", 0.0, 1, runtime=300.0),
            workload("w", "-A ml-research -t 5 -p mn -w gpu04 --mem=100", 0.0, 2, runtime=300.0),
            *workloads("r", "-A ml-research -t 5 -p mn --array=0-1 --mem=100", 0.0, 3, runtime=300.0)]]
    jobs = Engine(pool, wls, make_policy("slurm", pool), check=True).run().jobs
    assert len(jobs) == 4
    assert all(j.first_start is not None and len(j.placement) == 2 for j in jobs), [j.placement for j in jobs]


def test_kubernetes_pods_keep_their_own_memory_when_raised(tmp_path):
    """A workload of four pods of 1000 MiB (a Kubernetes Job under ``--policy slurm``) holds
    2000 MiB on each of two nodes, two pods' worth, not sbatch's ``--mem`` per node read back
    from the task pods."""
    from gpupool.model.workload import PodSet, Workload
    from gpupool.policy.slurm.min_nodes import raise_node_count

    cfg = make_policy("slurm", _node_count_pool(tmp_path, "NO")).cfg
    wl = Workload(id=1, name="k", pod_sets=(PodSet(count=4, cpu_m=1000, memory_mib=1000, gpus=1),), partition="mn",
                  source="job.yaml (document 1)")
    (ps,) = raise_node_count(cfg, wl).pod_sets
    assert (ps.count, ps.one_per_node, ps.memory_mib, ps.gpus, ps.nodes_raised) == (2, True, 2000, 2, 4)
