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


def usage_clock(t: float, epoch: float) -> float:
    """Engine time ``t`` on fair share's clock, where ``epoch`` is the wall clock of t=0.

    slurmctld counts usage between whole epoch seconds: a job's start_time and end_time, and
    each decay pass's time(NULL), the thread's start plus k × PriorityCalcPeriod, rounded down
    (priority/multifactor, 22.05.8 source; docs/differential.md, findings 24 and 54). Shifting
    the whole second by the fraction of ``epoch`` puts those passes on k × period, where the
    ledger has them, and leaves every duration as slurmctld counts it."""
    return math.floor(t + epoch) - math.floor(epoch)


def usage_end(t: float, epoch: float, period: float) -> float:
    """A job's end ``t`` on fair share's clock (``usage_clock``), kept before a decay pass that
    runs after it within the same whole second: the pass wakes at the thread's start plus
    k × period, fraction included, so a job ended in the part of that second before it is
    already finished there and gets no piece of the pass (with limits enforced, its last
    part-period is added at its end instead, then decayed by the pass)."""
    u = usage_clock(t, epoch)
    if u > t and u % period == 0:
        return math.nextafter(u, -math.inf)
    return u


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
        # memos of ``_add_running`` (values only; dropping them changes nothing)
        self._per_start: dict[float, tuple] = {}
        self._pows: dict[float, float] = {}
        self._tails: dict[tuple[int, int], float] = {}

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
        return self.at_starts(now, ((s, key, w) for key, s, w in running))

    def at_starts(self, now: float, running) -> dict:
        """``at`` with the running segments given as (start, key, w): the policy keeps them
        that way, and a month of passes would otherwise reorder each one at each pass."""
        self.pass_at(now)
        return self.usage(running)

    def pass_at(self, now: float) -> float:
        """Run the decay passes up to the last one ≤ ``now`` (closed segments folded in);
        returns its time. ``usage`` then gives RawUsage as of that pass."""
        T = math.floor(now / self.period) * self.period
        T = max(T, self.T_ref)  # never goes back; callers ask in time order
        self._advance(T)
        return T

    def usage(self, running, n_closed: int | None = None) -> dict:
        """RawUsage by key as of the last pass (``pass_at``), ``running`` giving (start, key, w).

        ``n_closed``: count only the first ``n_closed`` segments closed since that pass was
        run: the policy computes usage lazily, after more jobs may have ended within the
        period, and must get what it would have got at the pass itself (same terms, same
        order of addition). Valid until the next ``pass_at``.
        """
        T = self.T_ref
        boundary = reset_boundary(T, self.reset_period)
        out = dict(self.folded)
        recent = self.recent if n_closed is None else self.recent[:n_closed]
        for key, s, e, w in recent:
            v = self._segment(s, e, T, w, boundary)
            if v:
                out[key] = out.get(key, 0.0) + v
        self._add_running(out, running, T, boundary)
        return out

    def _add_running(self, out: dict, running, T: float, boundary: float) -> None:
        """Add each running (start, key, w)'s ``segment_usage(max(start, boundary), inf, T, …)``
        to ``out``, in order.

        Why not call ``segment_usage``: a busy pool has hundreds of jobs running at each of a
        month's ~9k passes. Evaluated here with the very same floating-point operations in the
        same order (so every sum is bit-identical), but with what depends on the start alone
        (``k1``, ``k1·P``, ``d·df**d``) memoised per start, and the powers that depend on the
        pass (``df**(T − k1·P)``, the geometric tail) memoised per exponent.
        """
        P = self.period
        df = self.df
        per_start = self._per_start
        if len(per_start) > 4096:
            per_start.clear()  # memo only: recomputing gives the same values
        pows = self._pows
        tails = self._tails
        kT = round(T / P)
        kE = math.floor(T / P)  # the segment's end is T itself (still running)
        get = out.get
        for s, key, w in running:
            if s < boundary:
                s = boundary
            if T <= s or w == 0:
                continue
            c = per_start.get(s)
            if c is None:
                k1 = math.floor(s / P) + 1
                k1P = k1 * P
                d = k1P - s
                c = per_start[s] = (k1, k1P, d * df ** d)
            k1, k1P, a = c
            if k1P > T:
                continue  # no pass since it started: nothing counted yet
            x = T - k1P
            p = pows.get(x)
            if p is None:
                p = pows[x] = df ** x
            total = a * p
            n = kE - k1
            if n > 0:
                tk = (n, kT - kE)
                g = tails.get(tk)
                if g is None:
                    D = df ** P
                    geo = float(n) if D == 1.0 else (1.0 - D ** n) / (1.0 - D)
                    g = tails[tk] = P * D * D ** (kT - kE) * geo
                total += g
            v = total * w
            if v:
                out[key] = get(key, 0.0) + v
