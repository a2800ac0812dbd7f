"""Admission Fair Sharing (spec §6.5): each LocalQueue's decayed historical usage.

A ClusterQueue with ``admissionScope.admissionMode: UsageBasedAdmissionFairSharing`` orders its
pending workloads by their LocalQueue's usage before priority, so a LocalQueue that consumed
little lately gets its next workload in ahead of a heavy one. The usage is an exponentially
decayed average of what the LocalQueue's admitted workloads hold, sampled every
``usageSamplingInterval`` on the run's clock (t = k × interval), plus an *entry penalty* each
admission adds at once, so that one LocalQueue cannot take many admissions between samples.

The engine calls the policy only on events, never at the sampling instants, so the samples
between two calls are applied when the next call comes, in closed form: the held usage is
constant between calls (every admission and every end is a call), and k samples of a constant
``u`` take ``x`` to ``(1 − α)^k · x + (1 − (1 − α)^k) · u``.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from gpupool.model.resources import CPU, MEMORY

#: Canonical gpupool units -> Kubernetes base units (cores, bytes), the values Kueue sums.
_TO_BASE = {CPU: 1e-3, MEMORY: float(2 ** 20)}


def _duration(text, default: float | None) -> float | None:
    """A Go duration (``5m``, ``168h``) in seconds; numbers are seconds."""
    if text is None:
        return default
    if isinstance(text, (int, float)):
        return float(text)
    units = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1, "m": 60, "h": 3600}
    parts = re.findall(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)", str(text))
    return sum(float(n) * units[u] for n, u in parts) if parts else default


@dataclass(slots=True)
class AfsConfig:
    """The Configuration's ``admissionFairSharing`` section."""

    half_life: float  # usageHalfLifeTime, seconds (required by Kueue)
    interval: float = 300.0  # usageSamplingInterval, default 5m
    weights: dict[str, float] = field(default_factory=dict)  # resourceWeights; unlisted = 1

    @property
    def alpha(self) -> float:
        """``1 − 0.5^(interval / usageHalfLifeTime)``; a zero half-life keeps no history (α = 1)."""
        if self.half_life <= 0:
            return 1.0
        return 1.0 - 0.5 ** (self.interval / self.half_life)

    @classmethod
    def from_configuration(cls, configuration: dict | None) -> AfsConfig | None:
        section = (configuration or {}).get("admissionFairSharing")
        if not isinstance(section, dict):
            return None
        weights = {str(k): float(v) for k, v in (section.get("resourceWeights") or {}).items()}
        return cls(_duration(section.get("usageHalfLifeTime"), 0.0) or 0.0,
                   _duration(section.get("usageSamplingInterval"), 300.0) or 300.0, weights)


def base_units(requests: dict[str, int]) -> dict[str, float]:
    """Canonical ints -> Kubernetes base units (cpu cores, memory bytes, device counts)."""
    return {r: v * _TO_BASE.get(r, 1.0) for r, v in requests.items()}


class LocalQueueUsage:
    """Decayed usage and entry penalties per LocalQueue (``(namespace, name)``)."""

    __slots__ = ("cfg", "consumed", "held", "last_sample", "penalty")

    def __init__(self, cfg: AfsConfig) -> None:
        self.cfg = cfg
        self.consumed: dict[tuple, dict[str, float]] = {}
        self.penalty: dict[tuple, dict[str, float]] = {}
        #: What each LocalQueue's admitted workloads held since the previous call.
        self.held: dict[tuple, dict[str, float]] = {}
        self.last_sample = 0.0  # samples fall at k × interval on the run's clock

    def advance(self, now: float) -> int:
        """Apply every sample at or before ``now``; returns how many there were."""
        interval = self.cfg.interval
        k = math.floor((now - self.last_sample) / interval + 1e-9)
        if k <= 0:
            return 0
        keep = (1.0 - self.cfg.alpha) ** k
        for lq in set(self.consumed) | set(self.held):
            old = self.consumed.get(lq, {})
            held = self.held.get(lq, {})
            self.consumed[lq] = {r: keep * old.get(r, 0.0) + (1.0 - keep) * held.get(r, 0.0)
                                 for r in set(old) | set(held)}
        self.penalty.clear()  # the sample now counts what the penalised admissions hold
        self.last_sample += k * interval
        return k

    def set_held(self, held: dict[tuple, dict[str, float]]) -> None:
        """The usage the LocalQueues hold from now until the next call."""
        self.held = held

    def admit(self, lq: tuple, requests: dict[str, float]) -> None:
        """Entry penalty: α × the workload's requests, at once."""
        alpha = self.cfg.alpha
        pen = self.penalty.setdefault(lq, {})
        for r, v in requests.items():
            pen[r] = pen.get(r, 0.0) + alpha * v

    def value(self, lq: tuple, lq_weight: float) -> float:
        """``Σ_r weight_r × (consumed_r + penalty_r) / LQ weight``; a weight ≤ 0 is +∞."""
        if lq_weight <= 0:
            return math.inf
        weights = self.cfg.weights
        consumed = self.consumed.get(lq, {})
        penalty = self.penalty.get(lq, {})
        total = 0.0
        for r in set(consumed) | set(penalty):
            total += weights.get(r, 1.0) * (consumed.get(r, 0.0) + penalty.get(r, 0.0))
        return total / lq_weight
