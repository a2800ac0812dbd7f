"""Usage accrual with half-life decay, as the decay thread does it (spec §4, case decay-001).

Passes run at t = k·P (k ≥ 1, P = PriorityCalcPeriod). At each pass all usage is multiplied
by ``df**Δ`` (``df = 1 − 0.693/half_life``, Δ = seconds since the last pass), then every
running job adds ``Δ_job · df**Δ_job · billing · UsageFactor`` for its part of the period.
With ``AccountingStorageEnforce=limits`` the remainder since the last pass is added at job
end the same way; without it that remainder is dropped (spec §17.4).

``segment_usage`` gives, in closed form, what one run segment ``[s, e]`` has contributed by
pass time ``T``; ``UsageLedger`` accumulates that over a run's job records.
"""
from __future__ import annotations

import math

DECAY_CONSTANT = 0.693  # Slurm's linearised ln 2 (0.693 != ln 2: one half-life gives 0.500073…)

_RESET_SECONDS = {"DAILY": 86400, "WEEKLY": 7 * 86400}
_MONTH_DAYS = (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


def decay_factor(half_life: float) -> float:
    """Per-second decay factor ``1 − 0.693/half_life`` (1.0 = no decay when half_life is 0)."""
    return 1.0 if not half_life else 1.0 - DECAY_CONSTANT / half_life


def decayed(value: float, seconds: float, df: float) -> float:
    return value * df ** seconds


def segment_usage(s: float, e: float, T: float, period: float, df: float, weight: float,
                  remainder: bool) -> float:
    """Usage at pass time ``T`` from a job that ran ``[s, e]`` with ``weight`` = billing × UsageFactor.

    ``e > T`` means the job is still running at ``T`` (pieces up to ``T`` only).
    """
    end = min(e, T)
    if end <= s or weight == 0:
        return 0.0
    P = period
    k1 = math.floor(s / P) + 1  # first pass strictly after s
    kT = round(T / P)
    total = 0.0
    if k1 * P <= end:
        d = k1 * P - s
        total += d * df ** d * df ** (T - k1 * P)
        kE = math.floor(end / P)
        n = kE - k1
        if n > 0:
            D = df ** P
            geo = float(n) if D == 1.0 else (1.0 - D ** n) / (1.0 - D)
            total += P * D * D ** (kT - kE) * geo
        last = kE * P
    else:
        kE = k1 - 1
        last = s
    if remainder and e <= T and e > last:
        r = e - last
        total += r * df ** r * df ** (T - kE * P)
    return total * weight


def reset_boundary(T: float, period: str) -> float:
    """The latest PriorityUsageResetPeriod boundary ≤ T (-inf when usage is never reset).

    gpupool's run has no calendar: t=0 is taken as Sunday 1 January 00:00 of a non-leap year.
    """
    if period in ("NONE", "NOW", "", None):
        return -math.inf
    if period in _RESET_SECONDS:
        step = _RESET_SECONDS[period]
        return math.floor(T / step) * step
    months = {"MONTHLY": 1, "QUARTERLY": 3, "YEARLY": 12}[period]
    year = 365 * 86400
    base = math.floor(T / year) * year
    t = base
    best = base
    m = 0
    while m < 12:
        if m % months == 0 and t <= T:
            best = t
        t += _MONTH_DAYS[m] * 86400
        m += 1
    return best


class UsageLedger:
    """Decayed RawUsage per key (user association), as of the last decay pass.

    Fed with run segments: ``close(key, s, e, w)`` for a finished run, ``running`` segments
    passed to ``at``. Closed segments are folded into a running sum once the pass time has
    reached their end, so each call costs O(keys + running jobs).
    """

    def __init__(self, period: float, half_life: float, reset_period: str, remainder: bool) -> None:
        self.period = float(period)
        self.df = decay_factor(half_life)
        self.reset_period = reset_period
        self.remainder = remainder
        self.T_ref = 0.0
        self.folded: dict = {}
        self.recent: list[tuple] = []  # (key, s, e, w) with e > T_ref

    def close(self, key, s: float, e: float, w: float) -> None:
        if e > s and w:
            self.recent.append((key, s, e, w))

    def _advance(self, T: float) -> None:
        if T == self.T_ref:
            return
        boundary = reset_boundary(T, self.reset_period)
        if boundary > self.T_ref:
            self.folded = {}
        else:
            f = self.df ** (T - self.T_ref)
            if f != 1.0:
                for k in self.folded:
                    self.folded[k] *= f
        self.T_ref = T
        keep = []
        for seg in self.recent:
            if seg[2] <= T:
                key, s, e, w = seg
                v = self._segment(s, e, T, w, boundary)
                if v:
                    self.folded[key] = self.folded.get(key, 0.0) + v
            else:
                keep.append(seg)
        self.recent = keep

    def _segment(self, s, e, T, w, boundary) -> float:
        s = max(s, boundary)
        return segment_usage(s, e, T, self.period, self.df, w, self.remainder)

    def at(self, now: float, running) -> dict:
        """RawUsage by key at the last pass ≤ ``now``; ``running`` yields (key, start, w)."""
        T = math.floor(now / self.period) * self.period
        T = max(T, self.T_ref)  # never goes back; callers ask in time order
        self._advance(T)
        boundary = reset_boundary(T, self.reset_period)
        out = dict(self.folded)
        for key, s, e, w in self.recent:
            v = self._segment(s, e, T, w, boundary)
            if v:
                out[key] = out.get(key, 0.0) + v
        for key, s, w in running:
            v = self._segment(s, math.inf, T, w, boundary)
            if v:
                out[key] = out.get(key, 0.0) + v
        return out
