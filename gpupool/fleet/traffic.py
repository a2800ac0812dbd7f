"""Traffic: offered requests per second over time, as a step function.

Three sources, named by one string (``traffic:`` in a service file, ``gpupool.io/traffic`` on a
Deployment):

- ``csv:PATH`` (or a path ending in ``.csv``): rows ``time,requests_per_s``; time in seconds or
  ``[D-]HH:MM:SS``; each value holds until the next row, the last one until ``end`` (the last
  time plus the median step);
- ``diurnal?base=…&peak=…&days=…&bursts_per_day=…&burst_x=…&burst_s=…&step_s=…&peak_hour=…&seed=…``:
  a sine over the day between ``base`` and ``peak`` requests/s plus Poisson-timed bursts that
  multiply the demand by ``burst_x`` for ``burst_s`` seconds; seeded, so byte-identical;
- ``dlrm:APP[?path=…&rps_per_instance=…&start_s=…&hours=…]``: the Alibaba 2025 DLRM inference
  trace. The real replica count of service ``APP`` over time (GPU instances alive) times the
  requests/s one instance serves at its target: demand as that service's own autoscaler saw it.

Everything is evaluated in closed form (means over windows are exact integrals), so the
autoscalers and the SLO accounting never sample.
"""
from __future__ import annotations

import bisect
import csv
import math
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qsl

import numpy as np

from gpupool.errors import InputError

DLRM_DEFAULT = "alibaba-dlrm-inference-2025/disaggregated_DLRM_trace.csv"


@dataclass(frozen=True)
class Traffic:
    """Requests/s ``rps[i]`` from ``times[i]`` to ``times[i+1]`` (the last until ``end``)."""

    times: tuple[float, ...]
    rps: tuple[float, ...]
    end: float
    source: str = ""

    def __post_init__(self) -> None:
        if not self.times or len(self.times) != len(self.rps):
            raise ValueError("traffic needs at least one (time, rps) point")
        if any(b <= a for a, b in zip(self.times, self.times[1:])):
            raise ValueError("traffic times must increase")
        if any(r < 0 or not math.isfinite(r) for r in self.rps):
            raise ValueError("requests per second must be finite and >= 0")
        if self.end <= self.times[0]:
            raise ValueError("traffic must end after it starts")
        object.__setattr__(self, "_cum", self._cumulative())

    def _cumulative(self) -> tuple[float, ...]:
        cum = [0.0]
        bounds = list(self.times[1:]) + [self.end]
        for t0, t1, r in zip(self.times, bounds, self.rps):
            cum.append(cum[-1] + r * (min(t1, self.end) - t0))
        return tuple(cum)

    def at(self, t: float) -> float:
        """Requests/s at ``t`` (0 before the first point and from ``end`` on)."""
        if t < self.times[0] or t >= self.end:
            return 0.0
        return self.rps[bisect.bisect_right(self.times, t) - 1]

    def requests(self, t: float) -> float:
        """Requests offered from the first point up to ``t`` (the integral of ``at``)."""
        if t <= self.times[0]:
            return 0.0
        t = min(t, self.end)
        i = bisect.bisect_right(self.times, t) - 1
        return self._cum[i] + self.rps[i] * (t - self.times[i])  # type: ignore[attr-defined]

    def mean(self, t0: float, t1: float) -> float:
        """Mean requests/s over [t0, t1] (the instantaneous value when the window is empty)."""
        if t1 <= t0:
            return self.at(t0)
        return (self.requests(t1) - self.requests(t0)) / (t1 - t0)

    def per_second(self, start: float, end: float) -> np.ndarray:
        """Requests offered in each second [start+k, start+k+1) (vectorised integral)."""
        edges = np.arange(start, end + 1.0, 1.0)
        times = np.asarray(self.times + (self.end,))
        cum = np.asarray(self._cum)  # type: ignore[attr-defined]
        clipped = np.clip(edges, times[0], self.end)
        idx = np.clip(np.searchsorted(times, clipped, side="right") - 1, 0, len(self.rps) - 1)
        rps = np.asarray(self.rps)
        total = cum[idx] + rps[idx] * (clipped - times[idx])
        return np.diff(total)


def load_traffic(spec: str, base: Path | None = None, *, where: str = "traffic") -> Traffic:
    """The traffic named by ``spec``; relative paths are tried against ``base``."""
    head, _, query = spec.partition("?")
    params = dict(parse_qsl(query, keep_blank_values=True))
    if head.startswith("csv:") or (head.endswith(".csv") and not head.startswith("dlrm:")):
        return read_traffic_csv(_path(head.removeprefix("csv:"), base, where))
    if head == "diurnal":
        return diurnal(**_numbers(params, where, spec))
    if head.startswith("dlrm:"):
        app = head.removeprefix("dlrm:")
        path = params.pop("path", None)
        nums = _numbers(params, where, spec)
        return dlrm_traffic(app, _dlrm_path(path, base, where), **nums)
    raise InputError(where, f"unknown traffic source {spec!r}; expected csv:PATH, diurnal?… or dlrm:APP")


def _path(text: str, base: Path | None, where: str) -> Path:
    cands = [Path(text)] + ([Path(base) / text] if base is not None else [])
    for c in cands:
        if c.exists():
            return c
    raise InputError(where, f"traffic file {text!r} not found (looked in {' and '.join(map(str, cands))})")


def _dlrm_path(text: str | None, base: Path | None, where: str) -> Path:
    if text:
        return _path(text, base, where)
    for root in (Path("/work/shared/traces"), Path(__file__).resolve().parents[3] / "shared" / "traces"):
        if (root / DLRM_DEFAULT).exists():
            return root / DLRM_DEFAULT
    raise InputError(where, f"the DLRM trace ({DLRM_DEFAULT}) was not found; give dlrm:APP?path=FILE")


def _numbers(params: dict[str, str], where: str, spec: str) -> dict[str, float]:
    out = {}
    for key, value in params.items():
        try:
            out[key] = float(value)
        except ValueError:
            raise InputError(where, f"traffic {spec!r}: {key}={value!r} is not a number") from None
    return out


def read_traffic_csv(path: Path) -> Traffic:
    """``time,requests_per_s`` rows (a header line is optional); errors name the line."""
    from gpupool.formats.slurm_time import SlurmTimeError, parse_duration

    times: list[float] = []
    rps: list[float] = []
    with open(path, newline="") as fh:
        for lineno, row in enumerate(csv.reader(fh), start=1):
            if not row or not "".join(row).strip() or row[0].lstrip().startswith("#"):
                continue
            if len(row) < 2:
                raise InputError(str(path), "expected time,requests_per_s", line=lineno)
            a, b = row[0].strip(), row[1].strip()
            if not times and not a[:1].isdigit():
                continue  # header
            try:
                t = float(a) if a.replace(".", "", 1).isdigit() else float(parse_duration(a))
            except (SlurmTimeError, ValueError, TypeError):
                raise InputError(str(path), f"time {a!r} is neither seconds nor [D-]HH:MM:SS", line=lineno,
                                 field="time") from None
            try:
                r = float(b)
            except ValueError:
                raise InputError(str(path), f"requests_per_s {b!r} is not a number", line=lineno,
                                 field="requests_per_s") from None
            if r < 0 or not math.isfinite(r):
                raise InputError(str(path), f"requests_per_s must be >= 0, got {b}", line=lineno,
                                 field="requests_per_s")
            if times and t <= times[-1]:
                raise InputError(str(path), f"time {a} does not come after the previous row", line=lineno,
                                 field="time")
            times.append(t)
            rps.append(r)
    if not times:
        raise InputError(str(path), "no traffic rows")
    step = float(np.median(np.diff(times))) if len(times) > 1 else 60.0
    return Traffic(tuple(times), tuple(rps), times[-1] + step, str(path))


def diurnal(base: float = 50.0, peak: float = 200.0, days: float = 1.0, bursts_per_day: float = 2.0,
            burst_x: float = 3.0, burst_s: float = 600.0, step_s: float = 60.0, peak_hour: float = 14.0,
            seed: float = 0) -> Traffic:
    """A day-shaped load (lowest 12 h before ``peak_hour``) with seeded Poisson bursts."""
    if peak < base or base < 0:
        raise InputError("traffic", f"diurnal needs 0 <= base <= peak, got base={base} peak={peak}")
    if step_s <= 0 or days <= 0:
        raise InputError("traffic", "diurnal needs step_s > 0 and days > 0")
    end = days * 86400.0
    t = np.arange(0.0, end, step_s)
    phase = 2 * math.pi * (t / 86400.0 - peak_hour / 24.0)
    rps = base + (peak - base) * (1 + np.cos(phase)) / 2
    rng = np.random.default_rng(int(seed))
    n = rng.poisson(bursts_per_day * days)
    for start in np.sort(rng.uniform(0.0, end, n)):
        rps[(t >= start) & (t < start + burst_s)] *= burst_x
    return Traffic(tuple(float(x) for x in t), tuple(round(float(x), 6) for x in rps), end,
                   f"diurnal(base={base},peak={peak},seed={int(seed)})")


def dlrm_instances(path: Path, app: str) -> list[tuple[float, float]]:
    """(created, deleted) of each GPU instance of ``app``; existed-before is 0, still-alive inf."""
    import pandas as pd

    frame = pd.read_csv(path, usecols=["role", "app_name", "gpu_request", "creation_time", "deletion_time"])
    rows = frame[(frame["app_name"] == app) & (frame["gpu_request"] > 0)]
    if rows.empty:
        raise InputError(str(path), f"the DLRM trace has no GPU instances of app {app!r}", field="app_name")
    created = rows["creation_time"].fillna(0.0).to_numpy(dtype=float)
    deleted = rows["deletion_time"].fillna(np.inf).to_numpy(dtype=float)
    return sorted(zip(created.tolist(), deleted.tolist()))


def dlrm_traffic(app: str, path: Path, rps_per_instance: float = 100.0, start_s: float = 0.0,
                 hours: float = 24.0, step_s: float = 60.0) -> Traffic:
    """Demand that keeps ``app``'s real replica count busy at ``rps_per_instance`` each."""
    inst = dlrm_instances(path, app)
    t = np.arange(start_s, start_s + hours * 3600.0, step_s)
    created = np.array([c for c, _ in inst])
    deleted = np.array([d for _, d in inst])
    alive = (created[None, :] <= t[:, None]) & (deleted[None, :] > t[:, None])
    counts = alive.sum(axis=1)
    rel = t - start_s
    return Traffic(tuple(float(x) for x in rel), tuple(float(c) * rps_per_instance for c in counts),
                   float(rel[-1] + step_s), f"dlrm:{app}")
