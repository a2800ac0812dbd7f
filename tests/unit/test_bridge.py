"""--policy bridge: slurm-bridge's semantics (spec fleet_and_bridge §2.1), one test per statement."""
from __future__ import annotations

import pytest

from gpupool.engine.core import Engine
from gpupool.engine.policy_api import make_policy
from gpupool.model.pool import Gpu, Node, Pool
from gpupool.model.slurm import Partition, SlurmConfig
from gpupool.model.workload import (
    GANG_ALL,
    GANG_NONE,
    KIND_BATCH,
    KIND_SERVICE,
    PodSet,
    Workload,
)
from gpupool.policy.bridge.mapping import (
    GROUP,
    PER_POD,
    PREFIX,
    BridgeMappingError,
    extra_id,
    grouping,
    is_kubernetes,
    slurm_fields,
    translate,
)

K8S = "manifests/job.yaml (document 1)"


def _pool(n=2, gpus=8, cpus=16, parts=None):
    nodes = {f"n{i}": Node(f"n{i}", cpus, 64000, tuple(Gpu(k) for k in range(gpus)), state="IDLE") for i in range(n)}
    cfg = SlurmConfig()
    for p in parts or [Partition("batch", tuple(nodes), default=True)]:
        cfg.partitions[p.name] = p
    return Pool("t", nodes=nodes, slurm=cfg)


def _pod(count=1, gpus=1, name="main"):
    return PodSet(name=name, count=count, cpu_m=1000, memory_mib=1000, gpus=gpus)


def _k8s(i, *pod_sets, submit=0.0, run=100.0, labels=None, kind=KIND_BATCH, gang=None, tl=3600.0):
    pod_sets = pod_sets or (_pod(),)
    gang = gang or (GANG_ALL if sum(p.count for p in pod_sets) > 1 else GANG_NONE)
    return Workload(i, f"k{i}", tuple(pod_sets), submit_time=submit, runtime=run, time_limit=tl, gang=gang,
                    kind=kind, namespace="default", labels=dict(labels or {}), source=K8S)


def _native(i, gpus=1, submit=0.0, run=100.0, count=1, **kw):
    ps = PodSet(count=count, cpu_m=1000, memory_mib=1000, gpus=gpus, one_per_node=count > 1)
    return Workload(i, f"s{i}", (ps,), submit_time=submit, runtime=run, time_limit=3600.0, source="train.sbatch", **kw)


def _run(pool, wls, **options):
    out = Engine(pool, wls, make_policy("bridge", pool, options), check=True).run()
    return {j.id: j for j in out.jobs}, out


# ----------------------------------------------------------------------------- mapping
def test_which_workloads_go_through_the_bridge():
    assert is_kubernetes(_k8s(1), "auto")
    assert not is_kubernetes(_native(2), "auto")
    assert is_kubernetes(_native(3, labels={PREFIX + "partition": "batch"}), "auto")
    svc = _native(4)
    svc.kind = KIND_SERVICE
    assert is_kubernetes(svc, "services") and is_kubernetes(svc, "auto")
    assert is_kubernetes(_native(5), "all") and not is_kubernetes(_k8s(6), "services")


def test_pod_grouping_table():
    # bare Pod, Job and JobSet: one external job per pod
    assert grouping(_k8s(1)) == PER_POD
    assert grouping(_k8s(2, _pod(4))) == PER_POD
    assert grouping(_k8s(3, _pod(2, name="workers"), _pod(1, name="ps"))) == PER_POD
    # PodGroup (Coscheduling / built-in) and a LeaderWorkerSet group: one job for the group
    assert grouping(_k8s(4, _pod(4), labels={"scheduling.x-k8s.io/pod-group": "g"})) == GROUP
    lws = _k8s(5, _pod(1, name="leader"), _pod(3, name="worker"), kind=KIND_SERVICE)
    assert grouping(lws) == GROUP


def test_translate_per_pod_jobs_are_exclusive_and_ordered():
    jobs = translate(_k8s(7, _pod(3, gpus=2)), default_partition="batch", exclusive_default=True, fifo_priority=None)
    assert [j.vid for j in jobs] == [7, extra_id(7, 1), extra_id(7, 2)]
    assert all(j.count == 1 and j.exclusive for j in jobs)
    ps = jobs[1].wl.pod_sets[0]
    assert ps.count == 1 and ps.exclusive and ps.one_per_node and ps.gpus == 2
    assert jobs[1].wl.partition == "batch" and jobs[1].wl.array_job_id == 7 and jobs[1].wl.array_task_id == 1


def test_annotations_override_pod_values_which_override_defaults():
    wl = _k8s(8, labels={PREFIX + "partition": "gpu", PREFIX + "qos": "high", PREFIX + "account": "ml",
                         PREFIX + "timelimit": "30", PREFIX + "exclusive": "false", PREFIX + "priority": "7",
                         PREFIX + "wckey": "ignored"})
    (job,) = translate(wl, default_partition="batch", exclusive_default=True, fifo_priority=None)
    assert (job.wl.partition, job.wl.qos, job.wl.account, job.wl.time_limit, job.wl.priority) == ("gpu", "high", "ml", 1800.0, 7)
    assert not job.exclusive
    plain = _k8s(9)
    plain.partition = "own"
    (job,) = translate(plain, default_partition="batch", exclusive_default=True, fifo_priority=None)
    assert job.wl.partition == "own" and job.wl.time_limit == 3600.0


@pytest.mark.parametrize("key, value, message", [
    ("timelimit", "soon", "timelimit: expected minutes > 0"),
    ("exclusive", "maybe", 'exclusive: expected "true" or "false"'),
    ("priority", "-1", "priority: expected a whole number"),
    ("colour", "red", "unknown slurm-bridge annotation(s) slurmjob.slinky.slurm.net/colour"),
    ("constraints", "[a|b]", "constraints: --constraint=[a|b]: gpupool does not model matching OR brackets"),
])
def test_bad_annotations_are_named(key, value, message):
    import re

    with pytest.raises(BridgeMappingError, match=re.escape(message)):
        slurm_fields(_k8s(1, labels={PREFIX + key: value}))


# ----------------------------------------------------------------------------- scheduling
def test_exclusive_whole_node_per_pod_by_default():
    """A 1-GPU bridge pod holds its whole node: a second pod and a native job go elsewhere or wait."""
    pool = _pool(n=1)
    jobs, _ = _run(pool, [_k8s(1, run=100), _k8s(2, submit=1, run=100), _native(3, submit=2, run=50)])
    assert jobs[1].start == 0 and jobs[1].held_gpus == 1
    assert jobs[2].start >= 100 and jobs[3].start >= 100  # nothing shared the node with pod 1
    assert jobs[1].placement[0][2] == 16000  # the pod got every CPU of the node (exclusive)


def test_non_exclusive_pods_share_a_node():
    pool = _pool(n=1)
    jobs, _ = _run(pool, [_k8s(1), _k8s(2, submit=1)], exclusive="false")
    assert jobs[1].start == 0 and jobs[2].start < 100


def test_per_pod_jobs_start_pods_separately_and_a_gang_waits_placing():
    """A 2-pod Job is two external jobs: with one free node only one pod is bound and the
    gang holds it without progress until the second node frees (partial gang)."""
    pool = _pool(n=2)
    jobs, out = _run(pool, [_native(1, run=500), _k8s(2, _pod(2), submit=10, run=100)])
    j = jobs[2]
    placed = [e for e in out.events if e[2] == 2 and e[1] == "placed"]
    assert placed and placed[0][0] < 500  # first pod bound while native job 1 still runs
    assert j.first_start >= 500 and j.gpu_s_idle_held > 0
    assert j.state == "COMPLETED"


def test_pod_group_is_all_or_nothing():
    pool = _pool(n=2)
    group = _k8s(2, _pod(2), submit=10, run=100, labels={"scheduling.x-k8s.io/pod-group": "g"})
    jobs, out = _run(pool, [_native(1, run=500), group])
    assert not [e for e in out.events if e[2] == 2 and e[1] == "placed"]
    assert jobs[2].start >= 500 and jobs[2].gpu_s_idle_held == 0
    assert len({p[0] for p in jobs[2].placement}) == 2  # one pod per node


def test_leader_worker_set_group_is_one_job():
    pool = _pool(n=3)
    lws = _k8s(2, _pod(1, name="leader"), _pod(2, name="worker"), kind=KIND_SERVICE, submit=10, run=100)
    jobs, out = _run(pool, [_native(1, run=500), lws])
    assert jobs[2].start >= 500 and not [e for e in out.events if e[2] == 2 and e[1] == "placed"]


def test_partition_from_annotation_is_where_the_pod_runs():
    pool = _pool(n=2, parts=[Partition("batch", ("n0",), default=True), Partition("serve", ("n1",))])
    jobs, _ = _run(pool, [_k8s(1, labels={PREFIX + "partition": "serve"}), _k8s(2)])
    assert jobs[1].partition == "serve" and jobs[1].placement[0][0] == 1
    assert jobs[2].partition == "batch" and jobs[2].placement[0][0] == 0


def test_timelimit_annotation_is_enforced():
    jobs, _ = _run(_pool(n=1), [_k8s(1, run=7200, tl=None, labels={PREFIX + "timelimit": "10"})])
    assert jobs[1].state == "TIMEOUT" and jobs[1].time_limit == 600.0
    assert 600 <= jobs[1].end - jobs[1].start <= 630  # killed at the first 30-s check after the limit


def test_hybrid_node_never_runs_both_kinds_even_when_not_exclusive():
    """A native 1-GPU job runs on the only node; a non-exclusive bridge pod waits for it (MCS)."""
    jobs, _ = _run(_pool(n=1), [_native(1, run=300), _k8s(2, submit=5)], exclusive="false")
    assert jobs[2].start >= 300


def test_native_jobs_keep_slurm_semantics():
    jobs, _ = _run(_pool(n=2), [_native(1, gpus=8, count=2, run=100), _native(2, submit=1)])
    assert jobs[1].state == jobs[2].state == "COMPLETED" and jobs[2].start >= 100


def test_unknown_option_and_partition_are_errors():
    with pytest.raises(ValueError, match="unknown options"):
        make_policy("bridge", _pool(), {"colour": "red"})
    with pytest.raises(ValueError, match="option partition names 'x'"):
        make_policy("bridge", _pool(), {"partition": "x"})


def test_node_failure_requeues_a_bridge_pod():
    from gpupool.engine.core import NodeEvent

    pool = _pool(n=2)
    out = Engine(pool, [_k8s(1, run=1000)], make_policy("bridge", pool), check=True,
                 faults=[NodeEvent(100, "n0", "down")]).run()
    job = out.jobs[0]
    assert job.requeues == 1 and job.state == "COMPLETED" and job.placement[0][0] == 1


def test_mcs_places_a_pod_on_a_node_without_native_work():
    """Slurm's best fit would put the pod beside the native job on n0; MCS sends it to n1 now."""
    jobs, _ = _run(_pool(n=2), [_native(1, run=300), _k8s(2, submit=5)], exclusive="false")
    assert jobs[1].placement[0][0] == 0
    assert jobs[2].start == 5 and jobs[2].placement[0][0] == 1
