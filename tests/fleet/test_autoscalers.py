"""HPA and KPA recommendations: worked examples from the documented algorithms, and invariants."""
from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from gpupool.fleet.autoscalers import (
    Hpa,
    Kpa,
    Observation,
    hpa_replica_ratio,
    make_autoscaler,
)
from gpupool.model.workload import Autoscaling, ScalingPolicy, ScalingRules

CAP = 50.0  # requests/s per replica; target 35 at 70 %


def hpa(lo=1, hi=100, **kw) -> Hpa:
    return Hpa(Autoscaling(kind="hpa", **kw), CAP, lo, hi)


def test_ratio_is_ceil_of_current_times_metric_over_target():
    # 4 ready pods at 70 rps each against a 35 target: ratio 2 -> 8 pods.
    assert hpa_replica_ratio(4, 4, 280.0, 35.0, 0.1) == 8
    # ratio 1.05 is inside the 0.1 tolerance: no change.
    assert hpa_replica_ratio(4, 4, 4 * 36.75, 35.0, 0.1) == 4
    # scale down: 4 pods at 10 rps -> ceil(4 * 10/35) = 2
    assert hpa_replica_ratio(4, 4, 40.0, 35.0, 0.1) == 2


def test_missing_pods_count_as_zero_on_scale_up_and_target_on_scale_down():
    # 2 ready of 4: ready pods at 2x target, missing pods assumed 0 -> ratio (140)/(35*4) = 1.0 -> no change.
    assert hpa_replica_ratio(4, 2, 140.0, 35.0, 0.1) == 4
    # ready pods want to scale down (10 rps each); missing assumed at target -> (20+70)/140 = 0.64 -> 3
    assert hpa_replica_ratio(4, 2, 20.0, 35.0, 0.1) == 3
    # no pod reports a metric: no recommendation
    assert hpa_replica_ratio(4, 0, 1000.0, 35.0, 0.1) == 4


def test_default_scale_up_rate_is_max_of_double_and_plus_four_per_15s():
    h = hpa(hi=100)
    # 2 pods under a huge load: limited to max(2*2, 2+4) = 6
    assert h.recommend(Observation(0.0, 2, 2, 10_000.0)) == 6
    # 15 s later (the earlier +4 is now outside the 15 s period): max(12, 10) = 12
    assert h.recommend(Observation(15.0, 6, 6, 10_000.0)) == 12
    assert h.recommend(Observation(30.0, 12, 12, 10_000.0)) == 24


def test_scale_down_waits_for_the_300s_stabilisation_window():
    h = hpa()
    assert h.recommend(Observation(0.0, 10, 10, 350.0)) == 10  # at target
    # load drops: the max recommendation over the last 300 s (10) holds the count
    for t in range(15, 300, 15):
        assert h.recommend(Observation(float(t), 10, 10, 35.0)) == 10
    # once the old recommendation has left the window the HPA scales down (100 % per 15 s allowed)
    assert h.recommend(Observation(315.0, 10, 10, 35.0)) == 1


def test_behavior_pods_policy_and_select_min():
    rules = ScalingRules(0.0, (ScalingPolicy("Pods", 1, 60.0), ScalingPolicy("Percent", 50, 60.0)), "Min")
    h = hpa(scale_up=rules)
    assert h.recommend(Observation(0.0, 4, 4, 10_000.0)) == 5  # min(4+1, ceil(4*1.5)=6)
    assert h.recommend(Observation(30.0, 5, 5, 10_000.0)) == 5  # +1 already used in this 60 s period


def test_kpa_panics_on_a_burst_and_never_scales_down_while_panicking():
    k = Kpa(Autoscaling(kind="kpa"), CAP, 1, 100)
    # steady 70 rps on 2 pods: stable = ceil(70/35) = 2
    assert k.recommend(Observation(0.0, 2, 2, 70.0, 70.0)) == 2
    # 6 s window jumps to 700 rps: 20 pods wanted, 10x ready >= 2 -> panic, take max(stable, panic)
    assert k.recommend(Observation(2.0, 2, 2, 100.0, 700.0)) == 20
    assert k.panic_time == 2.0
    # the burst is gone from the panic window but we are still panicking: no scale down
    assert k.recommend(Observation(10.0, 20, 20, 120.0, 70.0)) == 20
    # 60 s after the last over-threshold tick, panic ends and the stable window decides,
    # at most halving the ready pods per decision (max-scale-down-rate 2)
    assert k.recommend(Observation(62.0, 20, 20, 70.0, 70.0)) == 10
    assert k.panic_time is None


def test_kpa_scale_down_is_capped_at_half_the_ready_pods():
    k = Kpa(Autoscaling(kind="kpa"), CAP, 1, 100)
    assert k.recommend(Observation(0.0, 10, 10, 35.0, 35.0)) == 5


observations = st.builds(
    Observation,
    now=st.floats(0, 1e5, allow_nan=False),
    current=st.integers(0, 60),
    ready=st.integers(0, 60),
    rps_window=st.floats(0, 1e5, allow_nan=False),
    rps_panic=st.floats(0, 1e5, allow_nan=False),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(observations, min_size=1, max_size=30), st.integers(0, 5), st.integers(1, 40),
       st.sampled_from(["hpa", "kpa", "fixed", "replay"]))
def test_recommendations_stay_within_min_and_max(obs, lo, span, kind):
    hi = lo + span
    cfg = Autoscaling(kind=kind)
    scaler = make_autoscaler(cfg, CAP, lo, hi, lo)
    now = 0.0
    for o in obs:
        now += 1.0 + o.now % 60
        o = Observation(now, o.current, min(o.ready, o.current), o.rps_window, o.rps_panic)
        assert lo <= scaler.recommend(o) <= hi


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 50), st.integers(0, 50), st.floats(0, 1e4, allow_nan=False), st.floats(0, 0.5))
def test_hpa_ratio_invariants(current, ready, rps, tol):
    ready = min(ready, current)
    target = 35.0
    got = hpa_replica_ratio(current, ready, rps, target, tol)
    if ready == 0:
        assert got == current
        return
    ratio = (rps / ready) / target
    if abs(ratio - 1.0) <= tol:
        assert got == current  # inside the tolerance nothing changes
    if ratio > 1.0 + tol and ready == current:
        assert got == math.ceil(ratio * current) >= current
    if ratio < 1.0:
        assert got <= current  # a scale-down signal never scales up


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 30), st.floats(0, 1e5, allow_nan=False))
def test_hpa_scale_up_never_exceeds_the_default_rate(current, rps):
    h = hpa(hi=10_000)
    got = h.recommend(Observation(0.0, current, current, rps))
    assert got <= max(2 * current, current + 4)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.floats(0, 1e4, allow_nan=False), min_size=2, max_size=40))
def test_kpa_never_scales_down_while_panicking(loads):
    k = Kpa(Autoscaling(kind="kpa"), CAP, 0, 1000)
    current = 1
    for i, load in enumerate(loads):
        was_panicking = k.panic_time is not None
        got = k.recommend(Observation(2.0 * i, current, current, load, load))
        if was_panicking and k.panic_time is not None:
            assert got >= current
        current = got
