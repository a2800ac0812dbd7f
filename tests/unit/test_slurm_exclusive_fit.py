"""Exclusive jobs still need what they ask on a node, their tasks share the whole nodes they
take, and a shape no partition can hold is refused with sbatch's own message, as on a real
22.05.8 with two 16-core, 8-GPU nodes (``tests/differential/test_real_slurm_exclusive_fit.py``
runs the same submissions on both)."""
from __future__ import annotations

from pathlib import Path

import pytest

from gpupool.engine.core import Engine
from gpupool.engine.nodes import NodeTable
from gpupool.engine.policy_api import make_policy
from gpupool.formats.pool_dir import load_pool
from gpupool.model.workload import PodSet
from gpupool.policy.slurm.select import Free, holds_exclusive, place

from tests.unit.sbatch_plans import run_spaced, slurm_pool, workload

#: (EnforcePartLimits=ALL as the real-Slurm harness runs it: under slurmctld's default, NO, a
#: job asking more nodes than the partition has is queued for ever, probe p137)
CONF = """\
ClusterName=excl
EnforcePartLimits=ALL
SchedulerType=sched/backfill
SchedulerParameters={params}
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=1000
PriorityType=priority/basic
GresTypes=gpu
NodeName=n[1-2] CPUs=16 RealMemory=64000 Gres=gpu:8
NodeName=t1 CPUs=8 RealMemory=64000 Gres=gpu:a100:2,gpu:t4:4
PartitionName=p Nodes=n[1-2] Default=YES MaxTime=60
PartitionName=mixed Nodes=t1 MaxTime=60
"""


def _pool(tmp_path: Path, params: str = "bf_interval=30"):
    return slurm_pool(tmp_path, CONF.format(params=params))


def _run(tmp_path: Path, jobs: list[str], params: str = "bf_interval=30"):
    engine, _pol = run_spaced(_pool(tmp_path, params), jobs, 2.0, 2.0 * len(jobs) + 8)
    return sorted(engine.jobs.values(), key=lambda j: j.id)


@pytest.mark.parametrize("opts, message", [
    ("--exclusive --gres=gpu:9", "Requested node configuration is not available"),
    ("--exclusive -c20", "Requested node configuration is not available"),
    ("-N1 -c20", "Requested node configuration is not available"),
    ("-N2 -c17", "More processors requested than permitted"),
    ("-n33", "More processors requested than permitted"),
    ("--exclusive -n33", "More processors requested than permitted"),
    ("-N3 -c20", "More processors requested than permitted"),  # CPUs are checked first
    ("-N3 -c2", "Node count specification invalid"),
    ("-N3 --exclusive", "Node count specification invalid"),
])
def test_a_shape_the_partition_never_holds_is_refused_with_sbatchs_message(tmp_path: Path, opts, message) -> None:
    (job,) = _run(tmp_path, [opts])
    assert (job.state, job.reason) == ("REJECTED", message)


def test_an_exclusive_jobs_tasks_share_the_whole_nodes_it_takes(tmp_path: Path) -> None:
    # real: --exclusive -n20 ran on both nodes with 32 CPUs; the next exclusive job waited
    big, small = _run(tmp_path, ["--exclusive -n20", "--exclusive -c2"])
    assert big.state == "RUNNING" and small.state == "PENDING"
    per_node = {n: sum(1 for p in big.placement if p[0] == n) for n in (0, 1)}
    assert per_node == {0: 16, 1: 4}
    assert sum(p[2] for p in big.placement) == 32000
    full = (1 << 8) - 1
    assert sorted(p[1] for p in big.placement if p[1]) == [full, full]  # every GPU of both nodes


def test_a_whole_node_must_hold_the_gpus_of_the_type_asked(tmp_path: Path) -> None:
    nodes = NodeTable(_pool(tmp_path))
    t1 = nodes.names.index("t1")
    assert holds_exclusive(nodes, t1, PodSet(gpus=2, gpu_type="a100", exclusive=True))
    assert not holds_exclusive(nodes, t1, PodSet(gpus=3, gpu_type="a100", exclusive=True))
    assert holds_exclusive(nodes, t1, PodSet(gpus=6, exclusive=True))
    assert not holds_exclusive(nodes, t1, PodSet(gpus=1, gpu_type="v100", exclusive=True))
    assert not holds_exclusive(nodes, t1, PodSet(cpu_m=9000, exclusive=True))


def test_busy_first_packs_exclusive_tasks_too(tmp_path: Path) -> None:
    nodes = NodeTable(_pool(tmp_path))
    free = Free(nodes)
    wl = workload("x", "--exclusive -n20", 0.0, 1)
    cand = (0, 1)
    plain = place(wl, cand, free)
    busy_first = place(wl, cand, free, busy=1 << 1)  # node 1 busy now: taken first
    assert sorted(p[0] for p in plain).count(0) == 16
    assert sorted(p[0] for p in busy_first).count(1) == 16
    assert free.cpu == list(nodes.free_cpu)  # ``place`` leaves ``free`` as it found it


def _nodes_of(job) -> list[int]:
    return sorted({p[0] for p in job.placement})


def test_a_node_range_takes_as_many_nodes_as_fit_now(tmp_path: Path) -> None:
    # real: -N1-3 -c2 ran on the partition's two nodes; with one node held by an exclusive job,
    # on the other alone; -N2-3 --exclusive then waited; -N3-4 was refused
    (ranged,) = _run(tmp_path, ["-N1-3 -c2"])
    assert (ranged.state, _nodes_of(ranged), len(ranged.placement)) == ("RUNNING", [0, 1], 2)
    held, ranged, wide, never = _run(tmp_path, ["-N1 --exclusive", "-N1-3 -c2", "-N2-3 --exclusive", "-N3-4 -c2"])
    assert [_nodes_of(j) for j in (held, ranged)] == [[0], [1]]
    assert (wide.state, wide.reason) == ("PENDING", "Resources")
    assert (never.state, never.reason) == ("REJECTED", "Node count specification invalid")


def test_a_node_range_is_planned_and_started_once_its_least_count_is_free(tmp_path: Path) -> None:
    pool = _pool(tmp_path)
    wls = [workload("a", "-N1 --exclusive -t 5", 0.0, 1, runtime=3000),
           workload("b", "-N2-3 --exclusive -t 10", 2.0, 2, runtime=60)]
    out = Engine(pool, wls, make_policy("slurm", pool), until=600).run()
    a, b = sorted(out.jobs, key=lambda j: j.id)
    assert a.state == "TIMEOUT" and b.state == "COMPLETED"
    assert b.start == a.end and _nodes_of(b) == [0, 1]


def test_busy_first_takes_as_many_nodes_of_a_range_as_fit(tmp_path: Path) -> None:
    nodes = NodeTable(_pool(tmp_path))
    wl = workload("x", "-N1-3 -c2", 0.0, 1)
    got = place(wl, (0, 1), Free(nodes), busy=1 << 1)
    assert [p[0] for p in got] == [1, 0]


def test_a_node_range_with_required_nodes_takes_what_fits_beyond_them(tmp_path: Path) -> None:
    (job,) = _run(tmp_path, ["-N1-3 -c2 -w n1"])
    assert (job.state, _nodes_of(job)) == ("RUNNING", [0, 1])
    held, job = _run(tmp_path, ["-N1 --exclusive -w n2", "-N1-3 -c2 -w n1"])
    assert (job.state, _nodes_of(job)) == ("RUNNING", [0])


def test_an_exclusive_jobs_tasks_fill_its_required_nodes_first(tmp_path: Path) -> None:
    (small,) = _run(tmp_path, ["--exclusive -n4 -w n1"])
    assert {p[0] for p in small.placement} == {0}
    (big,) = _run(tmp_path, ["--exclusive -n20 -w n1"])
    assert big.state == "RUNNING"
    assert [sum(1 for p in big.placement if p[0] == n) for n in (0, 1)] == [16, 4]


def test_a_range_counts_only_under_the_gang_rule_min_and_in_the_last_pod_set(tmp_path: Path) -> None:
    from dataclasses import replace as _replace

    from gpupool.model.workload import GANG_ALL, PodSet as _PodSet, Workload

    pool = _pool(tmp_path)
    whole = _PodSet(count=3, min_count=1, one_per_node=True, cpu_m=2000, memory_mib=100)
    all_of = Workload(id=1, name="all", pod_sets=(whole,), runtime=60, gang=GANG_ALL, partition="p")
    first = _replace(all_of, id=2, name="first", gang="min",
                     pod_sets=(whole, _PodSet(name="b", count=1, cpu_m=1000, memory_mib=100)))
    out = Engine(pool, [all_of, first], make_policy("slurm", pool), check=True, until=30).run()
    assert {j.id: j.state for j in out.jobs} == {1: "REJECTED", 2: "REJECTED"}  # 3 whole nodes: never


def test_a_node_range_over_the_partitions_max_nodes_waits(tmp_path: Path) -> None:
    """``job_limits_check`` holds a range's largest count against MaxNodes: a real 22.05.8
    without EnforcePartLimits left ``-N1-2`` pending with PartitionNodeLimit in a partition of
    MaxNodes=1 (probe p97, 2026-12-04; this test once had it run on one node)."""
    (tmp_path / "slurm.conf").write_text(CONF.format(params="bf_interval=30").replace(
        "PartitionName=p Nodes=n[1-2] Default=YES MaxTime=60", "PartitionName=p Nodes=n[1-2] Default=YES MaxTime=60 MaxNodes=1"
    ).replace("EnforcePartLimits=ALL\n", ""))
    pool = load_pool(tmp_path)
    wls = [workload("r", "-N1-2 -c2", 0.0, 1), workload("w", "-N2 -c2", 0.0, 2), workload("o", "-N1 -c2", 0.0, 3)]
    out = Engine(pool, wls, make_policy("slurm", pool), until=30).run()
    r, w, o = sorted(out.jobs, key=lambda j: j.id)
    assert (r.state, r.reason) == ("PENDING", "PartitionNodeLimit")
    assert (w.state, w.reason) == ("PENDING", "PartitionNodeLimit")
    assert (o.state, len(o.placement)) == ("RUNNING", 1)


def test_exclusive_tasks_pack_over_several_required_nodes(tmp_path: Path) -> None:
    (small,) = _run(tmp_path, ["--exclusive -n4 -w n1,n2"])
    assert [sum(1 for p in small.placement if p[0] == n) for n in (0, 1)] == [3, 1]
    (big,) = _run(tmp_path, ["--exclusive -n20 -w n1,n2"])
    assert len(big.placement) == 20 and {p[0] for p in big.placement} == {0, 1}


def test_the_fit_memo_tells_gang_rules_apart(tmp_path: Path) -> None:
    from dataclasses import replace as _replace

    from gpupool.model.workload import GANG_ALL, GANG_MIN, PodSet as _PodSet, Workload

    pool = _pool(tmp_path)
    shape = _PodSet(count=3, min_count=1, one_per_node=True, cpu_m=2000, memory_mib=100)
    ranged = Workload(id=1, name="min", pod_sets=(shape,), runtime=60, gang=GANG_MIN, partition="p")
    whole = _replace(ranged, id=2, name="all", gang=GANG_ALL, submit_time=1.0)
    out = Engine(pool, [ranged, whole], make_policy("slurm", pool), until=30).run()
    assert {j.id: j.state for j in out.jobs} == {1: "RUNNING", 2: "REJECTED"}


def _memory_by_node(job) -> dict[int, int]:
    out: dict[int, int] = {}
    for node, _mask, _cpu, mem in job.placement:
        out[node] = out.get(node, 0) + mem
    return out


def test_memory_per_cpu_or_gpu_counts_every_cpu_or_gpu_of_an_exclusive_jobs_nodes(tmp_path: Path) -> None:
    # real (two 16-core 8-GPU nodes, DefMemPerCPU=1000): 8000M, 8000M; 32000M over two nodes;
    # --mem per node unchanged
    per_cpu, per_gpu = _run(tmp_path, ["--exclusive -c2 --mem-per-cpu=500", "--exclusive --gres=gpu:2 --mem-per-gpu=1000"])
    assert list(_memory_by_node(per_cpu).values()) == [8000]
    assert list(_memory_by_node(per_gpu).values()) == [8000]
    (tasks,) = _run(tmp_path, ["--exclusive -n20"])
    assert _memory_by_node(tasks) == {0: 16000, 1: 16000}
    (nodes,) = _run(tmp_path, ["--exclusive -N2 -c2"])
    assert _memory_by_node(nodes) == {0: 16000, 1: 16000}
    (per_node,) = _run(tmp_path, ["--exclusive -c2 --mem=1000"])
    assert list(_memory_by_node(per_node).values()) == [1000]
    # a node of 8 CPUs and 6 GPUs of two types: every one of them counts (a real 22.05.8 on a
    # node of a100:2 and t4:4 gave --exclusive --gres=gpu:a100:1 --mem-per-gpu=1000 all six
    # GPUs and 6000M)
    (typed,) = _run(tmp_path, ["-p mixed --exclusive --gres=gpu:a100:1 --mem-per-gpu=1000"])
    assert _memory_by_node(typed) == {2: 6000}
    (cpus,) = _run(tmp_path, ["-p mixed --exclusive -c1"])
    assert _memory_by_node(cpus) == {2: 8000}


def test_an_exclusive_job_whose_memory_per_cpu_overflows_a_node_is_refused(tmp_path: Path) -> None:
    # real: --exclusive -c2 under DefMemPerCPU=5000 (80000M on a 64000 MB node) was refused
    too_much, exact = _run(tmp_path, ["--exclusive -c2 --mem-per-cpu=5000", "--exclusive -c2 --mem-per-cpu=4000"])
    assert (too_much.state, too_much.reason) == ("REJECTED", "Requested node configuration is not available")
    assert exact.state == "RUNNING" and list(_memory_by_node(exact).values()) == [64000]


def test_backfill_plans_an_exclusive_job_by_the_memory_of_the_whole_node(tmp_path: Path) -> None:
    # both nodes busy until their limits end; the exclusive job asking 4000 per CPU (the whole
    # 64000 MB) is planned at the first end and starts there
    pool = _pool(tmp_path)
    wls = [workload("a", "-c9 -t 5", 0.0, 1, runtime=3000), workload("b", "-c9 -t 10", 0.0, 2, runtime=3000),
           workload("x", "--exclusive -c2 --mem-per-cpu=4000 -t 5", 2.0, 3, runtime=60)]
    out = Engine(pool, wls, make_policy("slurm", pool), until=900).run()
    a, _b, x = sorted(out.jobs, key=lambda j: j.id)
    assert x.state == "COMPLETED" and x.start >= a.end and _nodes_of(x) == _nodes_of(a)
    assert list(_memory_by_node(x).values()) == [64000]


def test_a_lockstep_replay_adopts_an_exclusive_start_with_the_whole_nodes_memory(tmp_path: Path) -> None:
    from gpupool.conformance.diff_slurm_lockstep import LockstepPolicy

    # real Slurm started the job on n2 at t=10, gpupool would have taken n1 at once: the start
    # carried out is real Slurm's, holding what gpupool's own placement would hold there
    pool = _pool(tmp_path)
    wl = workload("x", "--exclusive -c2 --mem-per-cpu=500", 0.0, 1)
    policy = LockstepPolicy(make_policy("slurm", pool), {1: (10.0, ((1, (1 << 8) - 1),))})
    (job,) = Engine(pool, [wl], policy, until=30).run().jobs
    assert job.start >= 10.0 and _memory_by_node(job) == {1: 8000}
    assert sum(p[2] for p in job.placement) == 16000


def test_qos_limits_count_an_exclusive_jobs_whole_nodes(tmp_path: Path) -> None:
    # real (QOS lim MaxTRESPerJob=cpu=4,mem=4000,gres/gpu=2): the exclusive jobs waited with
    # QOSMaxCpuPerJobLimit, -c2 --gres=gpu:1 ran (tests/differential/test_real_slurm_exclusive_limits.py)
    conf = CONF.format(params="bf_interval=30").replace(
        "PriorityType=priority/basic",
        # (the real run's harness tracks gres/gpu: its GPU limit binds only so)
        "PriorityType=priority/basic\nAccountingStorageEnforce=associations,limits,qos\nAccountingStorageTRES=gres/gpu")
    (tmp_path / "slurm.conf").write_text(conf)
    (tmp_path / "accounts.cfg").write_text(
        "QOS - 'normal':Priority=0\nQOS - 'lim':MaxTRESPerJob=cpu=4,mem=4000,gres/gpu=2\n"
        "Cluster - 'excl':Fairshare=1:QOS='normal'\nParent - 'root'\n"
        "Account - 'teamA':Fairshare=1:QOS='normal,lim':DefaultQOS='normal'\nParent - 'teamA'\n"
        "User - 'root':DefaultAccount='teamA':Fairshare=1\n")
    import gpupool.policy.slurm  # noqa: F401  (registers the policy)

    pool = load_pool(tmp_path)
    jobs = ["--exclusive -c2", "--exclusive -c1 --mem=1000", "-c2 --gres=gpu:1", "--exclusive --gres=gpu:1 -c1",
            "-p mixed --exclusive -c1 --mem=1000"]
    wls = [workload(f"j{k}", "-A teamA --qos=lim -t 10 " + opts, 2.0 * k, k + 1) for k, opts in enumerate(jobs)]
    out = Engine(pool, wls, make_policy("slurm", pool), until=30).run()
    got = [(j.state, j.reason) for j in sorted(out.jobs, key=lambda j: j.id)]
    held = ("PENDING", "QOSMaxCpuPerJobLimit")
    # t1 has 8 CPUs (over 4 too); the limit is read per partition, on that partition's nodes
    assert got == [held, held, ("RUNNING", ""), held, held]


def test_an_exclusive_jobs_limits_follow_the_nodes_it_may_take(tmp_path: Path) -> None:
    from gpupool.engine.core import NodeEvent

    # a 4-CPU and a 16-CPU node under MaxTRESPerJob=cpu=8: --exclusive -c1 is within the limit
    # on the small node only; while it is drained the job waits on the limit, once it is back
    # the job runs there
    (tmp_path / "slurm.conf").write_text(
        "ClusterName=x\nSchedulerType=sched/backfill\nSchedulerParameters=bf_interval=30\nSelectType=select/cons_tres\n"
        "SelectTypeParameters=CR_Core_Memory\nDefMemPerCPU=100\nPriorityType=priority/basic\n"
        "AccountingStorageEnforce=associations,limits,qos\nGresTypes=gpu\n"
        "NodeName=small CPUs=4 RealMemory=64000 Gres=gpu:8\nNodeName=big CPUs=16 RealMemory=64000 Gres=gpu:8\n"
        "PartitionName=p Nodes=small,big Default=YES MaxTime=60\n")
    (tmp_path / "accounts.cfg").write_text(
        "QOS - 'normal':Priority=0\nQOS - 'lim':MaxTRESPerJob=cpu=8\nCluster - 'x':Fairshare=1:QOS='normal'\n"
        "Parent - 'root'\nAccount - 'teamA':Fairshare=1:QOS='normal,lim':DefaultQOS='normal'\nParent - 'teamA'\n"
        "User - 'root':DefaultAccount='teamA':Fairshare=1\n")
    import gpupool.policy.slurm  # noqa: F401  (registers the policy)

    pool = load_pool(tmp_path)
    wl = workload("x", "-A teamA --qos=lim -t 10 --exclusive -c1", 1.0, 1)
    faults = [NodeEvent(0.0, "small", "drain"), NodeEvent(20.0, "small", "resume")]
    (job,) = Engine(pool, [wl], make_policy("slurm", pool), until=200, faults=faults).run().jobs
    assert (job.state, [p[0] for p in job.placement], job.start) == ("RUNNING", [0], 20.0)
    assert job.reason == "QOSMaxCpuPerJobLimit"  # what it waited on until then
