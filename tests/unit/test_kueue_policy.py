"""The kueue / kueue-gang policies in the engine, and the kube-scheduler model."""
from __future__ import annotations

from pathlib import Path

import pytest

import gpupool.policy.kueue  # noqa: F401  (registers kueue and kueue-gang)
from gpupool.engine.core import Engine
from gpupool.engine.nodes import NodeTable
from gpupool.engine.policy_api import make_policy
from gpupool.model.kueue import (
    ClusterQueue,
    FlavorQuotas,
    KueueConfig,
    LocalQueue,
    ResourceFlavor,
    ResourceGroup,
    ResourceQuota,
)
from gpupool.model.pool import Gpu, Node, Pool
from gpupool.model.workload import GANG_ALL, PodSet, Workload
from gpupool.policy.kueue.kubesched import KubeScheduler
from gpupool.policy.placement import Scratch

SEED = Path(__file__).resolve().parents[2] / "examples" / "seed-pool"


def _pool(n_nodes=2, gpus=8, taints=()) -> Pool:
    nodes = {f"n{i}": Node(f"n{i}", 16, 64 * 1024, tuple(Gpu(j) for j in range(gpus)), state="IDLE",
                           labels={"kubernetes.io/hostname": f"n{i}"}, taints=tuple(taints) if i == 0 else ())
             for i in range(n_nodes)}
    q = {"cpu": ResourceQuota(10**6), "memory": ResourceQuota(10**7), "nvidia.com/gpu": ResourceQuota(10**3)}
    cq = ClusterQueue("cq", None, [ResourceGroup(("cpu", "memory", "nvidia.com/gpu"), [FlavorQuotas("f", q)])],
                      namespace_selector={})
    kueue = KueueConfig(flavors={"f": ResourceFlavor("f")}, cluster_queues={"cq": cq},
                        local_queues={("ns", "lq"): LocalQueue("ns", "lq", "cq")})
    return Pool("t", nodes, kueue=kueue)


def _place(sched, pool, scratch, ps):
    nodes = scratch.nodes
    return sched.place_pod(nodes, scratch, ps, (), (), set())


def test_least_allocated_spreads_most_allocated_packs():
    pool = _pool()
    nodes = NodeTable(pool)
    ps = PodSet(cpu_m=2000, memory_mib=1024, gpus=1)
    spread = KubeScheduler(pool)
    scratch = Scratch(nodes)
    assert [_place(spread, pool, scratch, ps)[0] for _ in range(4)] == [0, 1, 0, 1]
    pack = KubeScheduler(pool, "MostAllocated")
    scratch = Scratch(nodes)
    assert [_place(pack, pool, scratch, ps)[0] for _ in range(3)] == [0, 0, 0]
    assert spread._score(nodes, Scratch(nodes), 0, 8000, 32 * 1024, 0) == 50
    # GPUs are not scored by default; with a GPU weight they are.
    weighted = KubeScheduler(pool, "LeastAllocated", {"nvidia.com/gpu": 1})
    assert weighted._score(nodes, Scratch(nodes), 0, 0, 0, 4) == 50


def test_filter_taints_and_gpus():
    pool = _pool(taints=[{"key": "maint", "effect": "NoSchedule"}])
    nodes = NodeTable(pool)
    sched = KubeScheduler(pool)
    scratch = Scratch(nodes)
    assert _place(sched, pool, scratch, PodSet(cpu_m=1000, gpus=8))[0] == 1
    assert _place(sched, pool, scratch, PodSet(cpu_m=1000, gpus=1)) is None
    tol = (tuple(sorted({"key": "maint", "operator": "Exists"}.items())),)
    assert sched.place_pod(nodes, scratch, PodSet(cpu_m=1000, gpus=1), (), tol, set())[0] == 0


def _gang_workloads():
    # A 3-GPU pod on one of three 8-GPU nodes, then a 3 x 8-GPU gang: quota admits it, but only
    # two of its pods fit until the small pod finishes at t=100.
    wls = [Workload(1, "s1", (PodSet(cpu_m=1000, gpus=3),), submit_time=0, runtime=100,
                    namespace="ns", queue_name="lq")]
    wls.append(Workload(4, "gang", (PodSet(count=3, cpu_m=1000, gpus=8),), submit_time=1, runtime=100,
                        gang=GANG_ALL, namespace="ns", queue_name="lq"))
    wls.append(Workload(5, "orphan", (PodSet(cpu_m=1000, gpus=1),), submit_time=1, runtime=10))
    return wls


@pytest.mark.parametrize("policy,idle", [("kueue", True), ("kueue-gang", False)])
def test_partial_gang_waste(policy, idle):
    pool = _pool(3)
    out = Engine(pool, _gang_workloads(), make_policy(policy, pool), check=True).run()
    jobs = {j.id: j for j in out.jobs}
    assert jobs[4].final_state == "COMPLETED"
    assert (jobs[4].gpu_s_idle_held > 0) is idle
    assert jobs[5].state == "REJECTED" and "no LocalQueue" in jobs[5].reason


def test_seed_pool_partial_gang_waste():
    from gpupool.formats.pool_dir import load_pool
    from gpupool.simulation import simulate

    # The seed pool's only flavor is a TAS flavor, so every workload has implied TAS (§8):
    # Kueue admits a workload only where the topology holds all its pods, and kube-scheduler
    # binds them there: no partial gangs. Without TAS (gate off) the waste shows.
    pool = load_pool(SEED)
    pool.kueue.feature_gates["TopologyAwareScheduling"] = False
    kueue = simulate(pool, policy="kueue", check=True)
    gang = simulate(pool, policy="kueue-gang", check=True)
    assert kueue.summary_dict["gpu_hours_idle_in_incomplete_gangs"] > 0
    assert gang.summary_dict["gpu_hours_idle_in_incomplete_gangs"] == 0
    tas = simulate(SEED, policy="kueue", check=True)
    assert tas.summary_dict["gpu_hours_idle_in_incomplete_gangs"] == 0


def test_pods_ready_timeout_evicts_partial_gang():
    pool = _pool(3)
    pool.kueue.configuration = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "waitForPodsReady": {
        "timeout": "30s", "requeuingStrategy": {"backoffLimitCount": 1, "backoffBaseSeconds": 5}}}
    wls = _gang_workloads()[:2]
    out = Engine(pool, wls, make_policy("kueue", pool), check=True).run()
    gang = {j.id: j for j in out.jobs}[4]
    assert gang.preemptions >= 1
    # The clock runs from the admission (t=1, two of three pods bound), not from the last bind.
    first = next(e for e in out.events if e[1] == "preempted" and "PodsReadyTimeout" in e[3])
    assert (first[0], first[2]) == (31, 4)


def test_unknown_option_rejected():
    with pytest.raises(ValueError, match="unknown options"):
        make_policy("kueue", _pool(), {"bogus": 1})


# ------------------------------------------------------------------ engine features: Reserve, WakeAt
def _one_node_pool(gpu_quota: int, wfpr: dict | None = None) -> Pool:
    pool = _pool(1)
    cq = pool.kueue.cluster_queues["cq"]
    cq.resource_groups[0].flavors[0].resources["nvidia.com/gpu"] = ResourceQuota(gpu_quota)
    if wfpr is not None:
        pool.kueue.configuration = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "waitForPodsReady": wfpr}
    return pool


def _wl(i, gpus, submit, runtime):
    return Workload(i, f"w{i}", (PodSet(cpu_m=1000, gpus=gpus),), submit_time=submit, runtime=runtime,
                    namespace="ns", queue_name="lq")


def test_reserved_workload_holds_quota_without_a_tick():
    # 16 GPUs of quota, one 8-GPU node: w2 is admitted (4 + 8 <= 16) but no node fits it, so it
    # holds a reservation; w3 (4 + 8 + 8 > 16) is not admitted while it does.
    pool = _one_node_pool(16)
    policy = make_policy("kueue", pool)
    assert policy.tick_interval is None
    out = Engine(pool, [_wl(1, 4, 0, 100), _wl(2, 8, 1, 50), _wl(3, 8, 2, 50)], policy, check=True).run()
    jobs = {j.id: j for j in out.jobs}
    reserved = [(t, j) for t, k, j, _ in out.events if k == "reserved"]
    assert reserved == [(1, 2), (100, 3)]  # at 100 w2 is placed; w3 is admitted, waits for a node
    assert (jobs[2].first_start, jobs[3].first_start) == (100, 150)
    assert jobs[2].evictions == {}
    assert len(out.timeline) < 20  # event-driven: no per-second passes


def test_pods_ready_timeout_of_a_reservation_backs_off_then_deactivates():
    pool = _one_node_pool(16, {"timeout": "30s", "requeuingStrategy": {"backoffLimitCount": 2,
                                                                      "backoffBaseSeconds": 5}})
    out = Engine(pool, [_wl(1, 4, 0, 1000), _wl(2, 8, 1, 50)], make_policy("kueue", pool), check=True).run()
    job = {j.id: j for j in out.jobs}[2]
    ev = [(t, k) for t, k, j, _ in out.events if j == 2 and k in ("reserved", "preempted", "finished")]
    # admitted at 1, timeout at 31 (backoff 5 s), 36 + 30 = 66 (backoff 10 s), 76 + 30 = 106: deactivated
    assert ev == [(1, "reserved"), (31, "preempted"), (36, "reserved"), (66, "preempted"),
                  (76, "reserved"), (106, "preempted"), (106, "finished")]
    assert job.state == "REJECTED" and "RequeuingLimitExceeded" in job.reason
    assert job.evictions["PodsReadyTimeout"] == 2


def test_backoff_counts_only_pods_ready_timeouts():
    from gpupool.engine.decisions import Preempt
    from gpupool.engine.job import Job

    pool = _one_node_pool(16, {"timeout": "30s", "requeuingStrategy": {"backoffBaseSeconds": 5}})
    policy = make_policy("kueue", pool)
    job = Job(_wl(2, 8, 0, 50))
    job.evictions.update({"InClusterQueue": 3, "PodsReadyTimeout": 1})
    (d,) = policy._pods_ready_timeout(job, 100.0, placed=True)
    assert isinstance(d, Preempt) and d.requeue_delay == 10  # second timeout: 5 * 2


def test_reservation_note_round_trips():
    from gpupool.policy.kueue.policy import decode_reservation, encode_reservation
    from gpupool.policy.kueue.records import Admitted, PodSetAssignment

    adm = Admitted(None, "training", {}, 0.0, [
        PodSetAssignment("launcher", 1, {"cpu": "cpu-f"}, {}),
        PodSetAssignment("workers", 4, {"cpu": "f-a", "nvidia.com/gpu": "h100.x"}, {}),
        PodSetAssignment("empty", 2, {}, {})])
    info = encode_reservation(adm)
    assert decode_reservation(info) == ("training", [("launcher", 1, {"cpu": "cpu-f"}),
                                                     ("workers", 4, {"cpu": "f-a", "nvidia.com/gpu": "h100.x"}),
                                                     ("empty", 2, {})])
    assert decode_reservation("something else") is None


def test_kueue_classic_drops_only_the_fair_sharing_section():
    from gpupool.errors import PolicyNotApplicable
    from gpupool.formats.pool_dir import load_pool
    from gpupool.policy.kueue.state import KueueState

    seed = load_pool(SEED)
    fair = make_policy("kueue", seed)
    classic = make_policy("kueue-classic", seed)
    assert KueueState(fair.kueue).fair_sharing and not KueueState(classic.kueue).fair_sharing
    assert classic.kueue.cluster_queues == fair.kueue.cluster_queues
    assert {k: v for k, v in fair.kueue.configuration.items() if k != "fairSharing"} == classic.kueue.configuration
    with pytest.raises(PolicyNotApplicable, match="no fairSharing"):
        make_policy("kueue-classic", _pool())
    with pytest.raises(ValueError, match="fair_sharing"):
        make_policy("kueue", seed, {"fair_sharing": "maybe"})


# ------------------------------------------------------------------ waitForPodsReady recoveryTimeout
def _failing_node_run(wfpr: dict, up_at: float = 500.0):
    from gpupool.engine.core import NodeEvent

    pool = _one_node_pool(16, wfpr)
    faults = [NodeEvent(100.0, "n0", "down"), NodeEvent(up_at, "n0", "up")]
    out = Engine(pool, [_wl(1, 8, 0, 300)], make_policy("kueue", pool), check=True, faults=faults).run()
    job = out.jobs[0]
    ev = [(t, k, d) for t, k, j, d in out.events if j == 1 and k in ("reserved", "preempted", "started", "finished")]
    return job, ev


def test_recovery_timeout_evicts_a_workload_whose_pods_failed_after_being_ready():
    # Ready at 0; the node fails at 100: Kueue keeps the workload admitted (its quota is reserved,
    # no replacement pod fits) and evicts it recoveryTimeout (30 s) later, with the backoff.
    job, ev = _failing_node_run({"timeout": "10m", "recoveryTimeout": "30s",
                                 "requeuingStrategy": {"backoffBaseSeconds": 5}})
    assert [(t, k) for t, k, _ in ev[:3]] == [(0, "started"), (100, "reserved"), (130, "preempted")]
    assert "PodsReadyTimeout" in ev[2][2]
    assert job.evictions == {"PodsReadyTimeout": 1}
    # Requeued after the 5 s backoff, admitted again; its pod binds once the node is back at 500.
    assert (500, "started") in [(t, k) for t, k, _ in ev] and job.state == "COMPLETED"


def test_recovery_timeout_defaults_to_timeout_and_zero_disables_it():
    _, ev = _failing_node_run({"timeout": "60s", "requeuingStrategy": {"backoffBaseSeconds": 5}})
    assert (160, "preempted") in [(t, k) for t, k, _ in ev]
    # 0s: no recovery timeout; the workload stays admitted until the node comes back.
    job, ev = _failing_node_run({"timeout": "60s", "recoveryTimeout": "0s"}, up_at=2000.0)
    assert [(t, k) for t, k, _ in ev] == [(0, "started"), (100, "reserved"), (2000, "started"),
                                          (2000 + 300, "finished")]
    assert job.evictions == {} and job.state == "COMPLETED"


def test_recovered_pods_bind_elsewhere_without_eviction():
    from gpupool.engine.core import NodeEvent

    pool = _pool(2)
    pool.kueue.configuration = {"apiVersion": "config.kueue.x-k8s.io/v1beta2",
                                "waitForPodsReady": {"recoveryTimeout": "30s"}}
    faults = [NodeEvent(100.0, "n0", "down")]
    out = Engine(pool, [_wl(1, 8, 0, 300)], make_policy("kueue", pool), check=True, faults=faults).run()
    job = out.jobs[0]
    assert job.state == "COMPLETED" and job.evictions == {}
    starts = [(t, d) for t, k, j, d in out.events if j == 1 and k == "started"]
    assert [t for t, _ in starts] == [0, 100] and "n1" in starts[1][1]
