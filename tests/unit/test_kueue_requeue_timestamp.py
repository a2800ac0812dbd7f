"""requeuingStrategy.timestamp (spec §3.1, §7): which time orders a workload evicted by
PodsReadyTimeout when it is back in its queue."""
from __future__ import annotations

import gpupool.policy.kueue  # noqa: F401  (registers kueue)
from gpupool.engine.core import Engine
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
from gpupool.model.workload import PodSet, Workload


def _pool(timestamp: str | None) -> Pool:
    # One 8-GPU node, 16 GPUs of quota: an 8-GPU workload admitted next to a running 4-GPU one
    # holds a reservation no node can satisfy, and times out.
    nodes = {"n0": Node("n0", 16, 64 * 1024, tuple(Gpu(j) for j in range(8)), state="IDLE",
                        labels={"kubernetes.io/hostname": "n0"})}
    q = {"cpu": ResourceQuota(10**6), "memory": ResourceQuota(10**7), "nvidia.com/gpu": ResourceQuota(16)}
    cq = ClusterQueue("cq", None, [ResourceGroup(("cpu", "memory", "nvidia.com/gpu"), [FlavorQuotas("f", q)])],
                      namespace_selector={})
    # Back in the queue at once (base 0 s), next to the newer one; a bounded number of requeues.
    strategy: dict = {"backoffBaseSeconds": 0, "backoffLimitCount": 3}
    if timestamp is not None:
        strategy["timestamp"] = timestamp
    config = {"apiVersion": "config.kueue.x-k8s.io/v1beta2",
              "waitForPodsReady": {"timeout": "30s", "requeuingStrategy": strategy}}
    kueue = KueueConfig(flavors={"f": ResourceFlavor("f")}, cluster_queues={"cq": cq},
                        local_queues={("ns", "lq"): LocalQueue("ns", "lq", "cq")}, configuration=config)
    return Pool("t", nodes, kueue=kueue)


def _wl(i: int, gpus: int, submit: float, runtime: float) -> Workload:
    return Workload(i, f"w{i}", (PodSet(cpu_m=1000, gpus=gpus),), submit_time=submit, runtime=runtime,
                    namespace="ns", queue_name="lq")


def _reserved_at_31(timestamp: str | None) -> list[int]:
    pool = _pool(timestamp)
    # w1 runs (4 GPUs); w2 (created t=1) is admitted and reserved; w3 (created t=2) does not fit
    # the quota next to w2. At t=31 w2 times out and is requeued at once: w2 and w3 compete.
    wls = [_wl(1, 4, 0, 1000), _wl(2, 8, 1, 50), _wl(3, 8, 2, 50)]
    out = Engine(pool, wls, make_policy("kueue", pool), check=True).run()
    assert any(t == 31 and k == "preempted" and j == 2 for t, k, j, _ in out.events)
    return [j for t, k, j, _ in out.events if t == 31 and k == "reserved"]


def test_eviction_timestamp_is_the_default_and_puts_the_evicted_workload_behind():
    # Eviction: w2's queue-order time is now 31, after w3's creation (2): w3 goes first.
    assert _reserved_at_31(None) == [3]
    assert _reserved_at_31("Eviction") == [3]


def test_creation_timestamp_keeps_the_original_place():
    # Creation: w2 keeps its creation time (1) and is admitted again before w3 (2).
    assert _reserved_at_31("Creation") == [2]
