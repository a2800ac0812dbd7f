"""Autoscalers: Kubernetes HPA (autoscaling/v2), Knative KPA, fixed replicas, and a replay of
the replica counts a traffic source implies (for the DLRM trace).

Each is a small state machine fed, at its own period, with what its real counterpart sees:
the replica count the Deployment asks for (``current``), which pods report a metric (the ready
ones) and the metric. Both turn requests/s into replicas against a per-replica target
``capacity_rps × target_utilisation``. The algorithms follow the sources cited in
``/work/shared/spec/fleet_and_bridge.md`` §4.1 and §4.3; see docs/services.md.
"""
from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

from gpupool.model.workload import Autoscaling, ScalingRules


@dataclass(frozen=True, slots=True)
class Observation:
    """What an autoscaler sees at one decision: ``current`` = the Deployment's replicas
    (pending, starting and ready pods), ``ready`` of them serving, and demand as requests/s
    (``rps_window`` averaged over the metric window; KPA also gets the panic window mean)."""

    now: float
    current: int
    ready: int
    rps_window: float
    rps_panic: float = 0.0


def hpa_replica_ratio(current: int, ready: int, rps: float, target: float, tolerance: float) -> int:
    """``replica_calculator`` for a Pods metric (requests/s per pod, AverageValue ``target``).

    Ready pods report ``rps / ready`` each; the others (pending, starting) have no metric and
    are assumed at 100 % of target when the ready pods say scale down, 0 % when they say scale
    up. No action inside the tolerance, or when filling in the missing pods flips the direction.
    """
    if current <= 0:
        return current
    if ready <= 0:
        return current  # no pod reports a metric: the HPA cannot compute a recommendation
    per_pod = rps / ready
    ratio = per_pod / target
    missing = current - ready
    if missing <= 0:
        if abs(ratio - 1.0) <= tolerance:
            return current
        return math.ceil(ratio * ready)
    fill = target if ratio < 1.0 else 0.0
    new_ratio = (per_pod * ready + fill * missing) / (target * current)
    if abs(new_ratio - 1.0) <= tolerance or (ratio < 1.0 < new_ratio) or (ratio > 1.0 > new_ratio):
        return current
    desired = math.ceil(new_ratio * current)
    if (new_ratio < 1.0 and desired > current) or (new_ratio > 1.0 and desired < current):
        return current
    return desired


class Hpa:
    """The HorizontalPodAutoscaler controller with ``behavior`` (stabilisation + rate limits)."""

    def __init__(self, cfg: Autoscaling, capacity_rps: float, lo: int, hi: int) -> None:
        self.cfg = cfg
        self.target = max(1e-9, capacity_rps * cfg.target_utilisation)
        self.lo, self.hi = lo, hi
        self.recommendations: deque[tuple[float, int]] = deque()
        self.events: deque[tuple[float, int]] = deque()  # (time, +added / -removed)

    def period(self) -> float:
        return self.cfg.sync_period_s

    def recommend(self, obs: Observation) -> int:
        """Replicas to set now (``obs.current`` when nothing changes)."""
        cfg = self.cfg
        tol = cfg.tolerance
        raw = hpa_replica_ratio(obs.current, obs.ready, obs.rps_window, self.target, tol)
        up_tol, down_tol = cfg.scale_up.tolerance, cfg.scale_down.tolerance
        if up_tol is not None or down_tol is not None:  # per-direction tolerance (1.33+)
            ratio_up = hpa_replica_ratio(obs.current, obs.ready, obs.rps_window, self.target,
                                         tol if up_tol is None else up_tol)
            ratio_down = hpa_replica_ratio(obs.current, obs.ready, obs.rps_window, self.target,
                                           tol if down_tol is None else down_tol)
            raw = ratio_up if ratio_up > obs.current else min(obs.current, ratio_down)
        desired = self._stabilise(obs.now, obs.current, raw)
        desired = self._rate_limit(obs.now, obs.current, desired)
        desired = max(self.lo, min(self.hi, desired))
        if desired != obs.current:
            self.events.append((obs.now, desired - obs.current))
        return desired

    def _stabilise(self, now: float, current: int, raw: int) -> int:
        up_cut = now - self.cfg.scale_up.stabilization_s
        down_cut = now - self.cfg.scale_down.stabilization_s
        up, down = raw, raw
        for when, value in self.recommendations:
            if when > up_cut:
                up = min(up, value)
            if when > down_cut:
                down = max(down, value)
        self.recommendations.append((now, raw))
        horizon = now - max(self.cfg.scale_up.stabilization_s, self.cfg.scale_down.stabilization_s)
        while self.recommendations and self.recommendations[0][0] <= horizon:
            self.recommendations.popleft()
        rec = current
        rec = max(rec, up)
        rec = min(rec, down)
        return rec

    def _rate_limit(self, now: float, current: int, desired: int) -> int:
        if desired > current:
            limit = _scale_up_limit(current, self._changed(now, self.cfg.scale_up, +1), self.cfg.scale_up, now)
            return min(desired, limit)
        if desired < current:
            limit = _scale_down_limit(current, self._changed(now, self.cfg.scale_down, -1), self.cfg.scale_down, now)
            return max(desired, limit)
        return desired

    def _changed(self, now: float, rules: ScalingRules, sign: int) -> list[tuple[float, int]]:
        longest = max((p.period_s for p in rules.policies), default=0.0)
        while self.events and self.events[0][0] <= now - max(longest, 600.0):
            self.events.popleft()
        return [(t, abs(d)) for t, d in self.events if (d > 0) == (sign > 0)]


def _scale_up_limit(current: int, events: list[tuple[float, int]], rules: ScalingRules, now: float) -> int:
    if rules.select == "Disabled" or not rules.policies:
        return current
    limits = []
    for p in rules.policies:
        added = sum(n for t, n in events if t > now - p.period_s)
        start = current - added
        limits.append(start + p.value if p.type == "Pods" else math.ceil(start * (1 + p.value / 100.0)))
    return min(limits) if rules.select == "Min" else max(limits)


def _scale_down_limit(current: int, events: list[tuple[float, int]], rules: ScalingRules, now: float) -> int:
    if rules.select == "Disabled" or not rules.policies:
        return current
    limits = []
    for p in rules.policies:
        removed = sum(n for t, n in events if t > now - p.period_s)
        start = current + removed
        limits.append(start - p.value if p.type == "Pods" else int(start * (1 - p.value / 100.0)))
    # "Max" picks the policy that allows the biggest change: the lowest floor.
    return max(limits) if rules.select == "Min" else min(limits)


class Kpa:
    """Knative's KPA in RPS mode: stable and panic windows, panic ratchet, rate caps."""

    def __init__(self, cfg: Autoscaling, capacity_rps: float, lo: int, hi: int) -> None:
        self.cfg = cfg
        self.target = max(1e-9, capacity_rps * cfg.target_utilisation)
        self.lo, self.hi = lo, hi
        self.panic_time: float | None = None
        self.max_panic_pods = 0
        self.zero_since: float | None = None

    @property
    def panic_window_s(self) -> float:
        return self.cfg.stable_window_s * self.cfg.panic_window_pct / 100.0

    def period(self) -> float:
        return self.cfg.tick_s

    def recommend(self, obs: Observation) -> int:
        cfg = self.cfg
        ready = max(1, obs.ready)
        max_up = math.ceil(cfg.max_scale_up_rate * ready)
        max_down = math.floor(ready / cfg.max_scale_down_rate) if obs.ready > 0 else 0
        stable = min(max(math.ceil(obs.rps_window / self.target), max_down), max_up)
        panic = min(max(math.ceil(obs.rps_panic / self.target), max_down), max_up)
        over = (obs.rps_panic / self.target) / ready >= cfg.panic_threshold_pct / 100.0
        if over:
            self.panic_time = obs.now  # start panicking, or extend the panic
        elif self.panic_time is not None and obs.now - self.panic_time >= cfg.stable_window_s:
            self.panic_time = None  # the surge is in the stable window now
            self.max_panic_pods = 0
        desired = stable
        if self.panic_time is not None:
            desired = max(stable, panic)
            if desired > self.max_panic_pods:
                self.max_panic_pods = desired
            else:
                desired = self.max_panic_pods  # never scale down while panicking
        if desired == 0:
            # Scale to zero only after no traffic for the stable window, then the grace period.
            if obs.rps_window > 0:
                desired = max(1, desired)
                self.zero_since = None
            else:
                if self.zero_since is None:
                    self.zero_since = obs.now
                if obs.now - self.zero_since < cfg.scale_to_zero_grace_s:
                    desired = max(1, min(obs.current, 1))
        else:
            self.zero_since = None
        return max(self.lo, min(self.hi, desired))


class Replay:
    """Replica counts taken from the traffic itself: ``ceil(demand now / target)``, no lag.

    With ``dlrm:APP?rps_per_instance=R`` traffic and a target of R requests/s per replica, this
    replays the real replica counts (instance creations and deletions) of that trace service.
    """

    def __init__(self, cfg: Autoscaling, capacity_rps: float, lo: int, hi: int) -> None:
        self.cfg = cfg
        self.target = max(1e-9, capacity_rps * cfg.target_utilisation)
        self.lo, self.hi = lo, hi

    def period(self) -> float:
        return self.cfg.sync_period_s

    def recommend(self, obs: Observation) -> int:
        return max(self.lo, min(self.hi, math.ceil(obs.rps_window / self.target - 1e-9)))


class Fixed:
    """Fixed replicas: always the declared count."""

    def __init__(self, cfg: Autoscaling, replicas: int) -> None:
        self.cfg = cfg
        self.replicas = replicas

    def period(self) -> float:
        return self.cfg.sync_period_s

    def recommend(self, obs: Observation) -> int:
        return self.replicas


def make_autoscaler(cfg: Autoscaling, capacity_rps: float, lo: int, hi: int, replicas: int):
    """The autoscaler object for a service's ``autoscaling`` section."""
    if cfg.kind == "hpa":
        return Hpa(cfg, capacity_rps, lo, hi)
    if cfg.kind == "kpa":
        return Kpa(cfg, capacity_rps, lo, hi)
    if cfg.kind == "fixed":
        return Fixed(cfg, max(lo, min(hi, replicas)))
    if cfg.kind == "replay":
        return Replay(cfg, capacity_rps, lo, hi)
    raise ValueError(f"unknown autoscaler {cfg.kind!r}")
