"""Admission Fair Sharing (spec §6.5): LocalQueue usage orders a ClusterQueue's workloads."""
from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import gpupool.policy.kueue  # noqa: F401  (registers kueue)
from gpupool.engine.core import Engine
from gpupool.engine.policy_api import make_policy
from gpupool.errors import InputError
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
from gpupool.policy.kueue.afs import AfsConfig, LocalQueueUsage

AFS = {"usageHalfLifeTime": "10m", "usageSamplingInterval": "5m", "resourceWeights": {"nvidia.com/gpu": 1.0}}


def _pool(mode: str | None, afs: dict | None = AFS, light_weight: float = 1.0) -> Pool:
    nodes = {"n0": Node("n0", 16, 64 * 1024, tuple(Gpu(j) for j in range(8)), state="IDLE",
                        labels={"kubernetes.io/hostname": "n0"})}
    q = {"cpu": ResourceQuota(10**6), "memory": ResourceQuota(10**7), "nvidia.com/gpu": ResourceQuota(8)}
    cq = ClusterQueue("cq", None, [ResourceGroup(("cpu", "memory", "nvidia.com/gpu"), [FlavorQuotas("f", q)])],
                      namespace_selector={}, admission_mode=mode)
    config: dict = {"apiVersion": "config.kueue.x-k8s.io/v1beta2"}
    if afs is not None:
        config["admissionFairSharing"] = afs
    lqs = {("ns", "heavy"): LocalQueue("ns", "heavy", "cq"),
           ("ns", "light"): LocalQueue("ns", "light", "cq", fair_weight=light_weight)}
    kueue = KueueConfig(flavors={"f": ResourceFlavor("f")}, cluster_queues={"cq": cq}, local_queues=lqs,
                        configuration=config)
    return Pool("t", nodes, kueue=kueue)


def _wl(i: int, lq: str, submit: float, runtime: float, gpus: int = 8) -> Workload:
    return Workload(i, f"w{i}", (PodSet(cpu_m=1000, gpus=gpus),), submit_time=submit, runtime=runtime,
                    namespace="ns", queue_name=lq)


def _first_starts(pool: Pool) -> dict[int, float]:
    # The heavy LocalQueue runs w1 (all 8 GPUs) for 1000 s, sampled at 300, 600 and 900;
    # it queues w2 at t=10; the light LocalQueue queues w3 later, at t=20.
    wls = [_wl(1, "heavy", 0, 1000), _wl(2, "heavy", 10, 100), _wl(3, "light", 20, 100)]
    out = Engine(pool, wls, make_policy("kueue", pool), check=True).run()
    return {j.id: j.first_start for j in out.jobs}


def test_light_local_queue_later_workload_is_admitted_first():
    starts = _first_starts(_pool("UsageBasedAdmissionFairSharing"))
    assert starts == {1: 0, 3: 1000, 2: 1100}


def test_without_admission_scope_the_queue_is_fifo():
    assert _first_starts(_pool(None)) == {1: 0, 2: 1000, 3: 1100}
    assert _first_starts(_pool("NoAdmissionFairSharing")) == {1: 0, 2: 1000, 3: 1100}
    # The ClusterQueue asks for AFS but the Configuration has no admissionFairSharing: off.
    assert _first_starts(_pool("UsageBasedAdmissionFairSharing", afs=None)) == {1: 0, 2: 1000, 3: 1100}


def test_local_queue_weight_zero_is_infinite_usage():
    # A LocalQueue of weight 0 has usage +inf (§6.5): it goes last even with no usage at all.
    starts = _first_starts(_pool("UsageBasedAdmissionFairSharing", light_weight=0.0))
    assert starts == {1: 0, 2: 1000, 3: 1100}


def test_entry_penalty_orders_admissions_between_samples():
    # Two workloads of the heavy LQ and one of the light LQ fit at t=0 one at a time (4 GPUs of
    # quota 8 each): heavy's first admission adds alpha*4 GPUs at once, so light's comes next,
    # before any sample.
    pool = _pool("UsageBasedAdmissionFairSharing")
    wls = [_wl(1, "heavy", 0, 50, gpus=4), _wl(2, "heavy", 0, 50, gpus=4), _wl(3, "light", 0, 50, gpus=4)]
    out = Engine(pool, wls, make_policy("kueue", pool), check=True).run()
    starts = {j.id: j.first_start for j in out.jobs}
    assert starts == {1: 0, 3: 0, 2: 50}


def test_usage_math_samples_decay_and_penalty():
    cfg = AfsConfig(half_life=600.0, interval=300.0, weights={"cpu": 2.0})
    alpha = 1 - 0.5 ** 0.5
    assert cfg.alpha == pytest.approx(alpha)
    u = LocalQueueUsage(cfg)
    u.set_held({"a": {"cpu": 4.0, "nvidia.com/gpu": 8.0}})
    assert u.advance(299.0) == 0
    assert u.advance(300.0) == 1  # the sample at exactly t=300 is due
    assert u.value("a", 1.0) == pytest.approx(alpha * (2 * 4 + 8))
    u.admit("a", {"nvidia.com/gpu": 2.0})
    assert u.value("a", 2.0) == pytest.approx((alpha * 16 + alpha * 2) / 2)
    u.set_held({})
    assert u.advance(900.0) == 2  # samples at 600 and 900 with nothing held; penalty folded in
    assert u.value("a", 1.0) == pytest.approx((1 - alpha) ** 2 * alpha * 16)
    assert u.value("a", 0.0) == math.inf


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 2000), st.floats(0, 64)), min_size=1, max_size=8),
       st.floats(1, 10_000), st.floats(1, 3600))
def test_closed_form_equals_sample_by_sample(steps, half_life, interval):
    """Catching up k samples at once equals applying them one at a time, and the usage always
    stays between 0 and the largest usage held so far (a weighted average)."""
    cfg = AfsConfig(half_life=half_life, interval=interval)
    lazy, eager = LocalQueueUsage(cfg), LocalQueueUsage(cfg)
    now, top = 0.0, 0.0
    for dt, held in steps:
        now += dt
        lazy.advance(now)
        while eager.last_sample + interval <= now + 1e-9 * interval:
            eager.advance(eager.last_sample + interval)
        assert lazy.value("q", 1.0) == pytest.approx(eager.value("q", 1.0), rel=1e-6, abs=1e-9)
        assert -1e-9 <= lazy.value("q", 1.0) <= top + 1e-6
        lazy.set_held({"q": {"nvidia.com/gpu": held}})
        eager.set_held({"q": {"nvidia.com/gpu": held}})
        top = max(top, held)


def test_configuration_requires_half_life():
    from gpupool.formats.kube_yaml import load_yaml_text
    from gpupool.formats.kueue_objects import parse_pool_objects

    def load(text: str):
        return parse_pool_objects(load_yaml_text(text, "kueue.yaml")).kueue

    assert load("apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n"
                "admissionFairSharing:\n  usageHalfLifeTime: 168h\n").configuration["admissionFairSharing"]
    with pytest.raises(InputError, match=r"admissionFairSharing.usageHalfLifeTime.*required"):
        load("apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n"
                    "admissionFairSharing:\n  usageSamplingInterval: 5m\n")
    with pytest.raises(InputError, match=r"resourceWeights.cpu"):
        load("apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n"
                    "admissionFairSharing:\n  usageHalfLifeTime: 168h\n  resourceWeights: {cpu: -1}\n")


def _preemption_victim(mode: str | None) -> int:
    # Quota 8 GPUs. heavy's w1 holds 6 GPUs from t=0, light's w2 2 GPUs from t=10; at t=700
    # (samples at 300 and 600 saw 6 vs 2) w3 of priority 10 needs 2 GPUs: one victim is enough.
    pool = _pool(mode)
    pool.kueue.cluster_queues["cq"].preemption.within_cluster_queue = "LowerPriority"
    w3 = Workload(3, "w3", (PodSet(cpu_m=1000, gpus=2),), submit_time=700, runtime=10,
                  namespace="ns", queue_name="light", priority=10)
    wls = [_wl(1, "heavy", 0, 5000, gpus=6), _wl(2, "light", 10, 5000, gpus=2), w3]
    out = Engine(pool, wls, make_policy("kueue", pool), check=True).run()
    (victim,) = {j for t, k, j, _ in out.events if k == "preempted" and t == 700}
    return victim


def test_preemption_candidates_in_the_cq_higher_local_queue_usage_first():
    # Without AFS the most recently reserved candidate (w2) goes first (§5.2 rule 4); with AFS
    # the candidate of the LocalQueue with the higher usage (heavy's w1) goes first (rule 2).
    assert _preemption_victim(None) == 2
    assert _preemption_victim("UsageBasedAdmissionFairSharing") == 1
