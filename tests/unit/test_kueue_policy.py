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
    out = Engine(pool, _gang_workloads(), make_policy(policy, pool, {"cycle_interval": 10}), check=True).run()
    jobs = {j.id: j for j in out.jobs}
    assert jobs[4].final_state == "COMPLETED"
    assert (jobs[4].gpu_s_idle_held > 0) is idle
    assert jobs[5].state == "REJECTED" and "no LocalQueue" in jobs[5].reason


def test_seed_pool_partial_gang_waste():
    from gpupool.simulation import simulate

    kueue = simulate(SEED, policy="kueue", options={"cycle_interval": 60}, check=True)
    gang = simulate(SEED, policy="kueue-gang", options={"cycle_interval": 60}, check=True)
    assert kueue.summary_dict["gpu_hours_idle_in_incomplete_gangs"] > 0
    assert gang.summary_dict["gpu_hours_idle_in_incomplete_gangs"] == 0


def test_pods_ready_timeout_evicts_partial_gang():
    pool = _pool(3)
    pool.kueue.configuration = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "waitForPodsReady": {
        "timeout": "30s", "requeuingStrategy": {"backoffLimitCount": 1, "backoffBaseSeconds": 5}}}
    wls = _gang_workloads()[:2]
    out = Engine(pool, wls, make_policy("kueue", pool, {"cycle_interval": 10}), check=True).run()
    gang = {j.id: j for j in out.jobs}[4]
    assert gang.preemptions >= 1
    assert any(e[1] == "preempted" and "PodsReadyTimeout" in e[3] for e in out.events)


def test_unknown_option_rejected():
    with pytest.raises(ValueError, match="unknown options"):
        make_policy("kueue", _pool(), {"bogus": 1})
