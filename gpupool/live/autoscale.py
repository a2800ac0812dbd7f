"""Live autoscaling: the simulator's autoscalers sizing a service's replica jobs on this host.

A live service whose Deployment has a HorizontalPodAutoscaler (or a Knative class annotation,
or a gpupool/v1 Service with an ``autoscaler``) is sized by the *same* objects the fleet
simulator uses (:func:`gpupool.fleet.autoscalers.make_autoscaler`): every period (HPA sync
period, KPA tick) the daemon hands it an :class:`Observation` built from the live replicas
(``current`` = the service's queued and running replica jobs, ``ready`` = those whose
readiness probe passes) and the metric, requests/s for the whole service, from one of:

* a traffic source (``csv:FILE`` or ``FILE.csv``, ``diurnal?…``, ``dlrm:APP``) replayed
  against the wall clock from the moment the service was submitted; relative paths are
  resolved against the submitter's working directory;
* ``http://HOST:PORT/PATH[#METRIC]`` or ``file:PATH[#METRIC]``: a number the service itself
  keeps up to date, read once per period (an HTTP GET, or the file's text). The body is a
  bare number, or Prometheus text exposition where the samples of ``METRIC`` (all label sets
  summed) are the value; without ``#METRIC`` the first sample is used. It is a gauge of
  requests/s; samples inside the autoscaler's metric window are averaged, as metrics-server
  averages over its window.

Why the same objects and not a copy: the live pool and the simulator must disagree only
where the world differs (startup time, real readiness), never in the algorithm.
"""
from __future__ import annotations

import math
import re
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import httpx

from gpupool.errors import InputError
from gpupool.fleet.autoscalers import Observation, make_autoscaler
from gpupool.fleet.traffic import Traffic, load_traffic
from gpupool.live.services import ServiceSpec

#: ``gpupool.io/traffic`` of a live Deployment that names no metric: fixed replicas.
NO_METRIC = "live"
_SAMPLE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(\{[^}]*\})?\s+(\S+)(\s+\S+)?\s*$")


class Metric(Protocol):
    def read(self, t: float) -> None: ...

    def mean(self, t: float, window: float) -> float | None: ...


@dataclass
class TrafficMetric:
    """A traffic source replayed on the wall clock: ``t`` is seconds since the service started."""

    traffic: Traffic

    def read(self, t: float) -> None:
        return None

    def mean(self, t: float, window: float) -> float | None:
        if window <= 0:
            return self.traffic.at(t)
        return self.traffic.mean(max(0.0, t - window), t)


def parse_metric_text(text: str, metric: str | None, where: str) -> float:
    """requests/s from a bare number or Prometheus text (``METRIC{labels} value [ts]``)."""
    body = text.strip()
    try:
        value = float(body)
    except ValueError:
        value = None
    if value is None:
        found: list[float] = []
        for line in body.splitlines():
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            m = _SAMPLE.match(line)
            if m is None:
                raise InputError(where, f"not a Prometheus sample line: {line[:80]!r}")
            if metric is None or m.group(1) == metric:
                try:
                    found.append(float(m.group(3)))
                except ValueError:
                    raise InputError(where, f"sample value {m.group(3)!r} is not a number") from None
                if metric is None:
                    break
        if not found:
            raise InputError(where, f"no sample of {metric!r}" if metric else "no number and no sample")
        value = sum(found)
    if not math.isfinite(value) or value < 0:
        raise InputError(where, f"requests/s must be a finite number >= 0, got {value}")
    return value


@dataclass
class PolledMetric:
    """A gauge the service publishes (HTTP GET or a file), sampled once per autoscaler period."""

    target: str  # http(s)://… or a file path
    metric: str | None = None
    samples: deque = field(default_factory=lambda: deque(maxlen=4096))
    error: str = ""

    def _fetch(self) -> str:
        if self.target.startswith(("http://", "https://")):
            r = httpx.get(self.target, timeout=0.5)  # the daemon's loop waits for it
            r.raise_for_status()
            return r.text
        return Path(self.target).read_text()

    def read(self, t: float) -> None:
        try:
            value = parse_metric_text(self._fetch(), self.metric, self.target)
        except (OSError, ValueError, InputError, httpx.HTTPError) as exc:  # no sample: the HPA holds
            self.error = f"{type(exc).__name__}: {exc}"
            return
        self.error = ""
        self.samples.append((t, value))

    def mean(self, t: float, window: float) -> float | None:
        past = [(when, v) for when, v in self.samples if when <= t]
        if not past:
            return None
        inside = [v for when, v in past if when > t - window] if window > 0 else []
        return sum(inside) / len(inside) if inside else past[-1][1]


def metric_source(spec: str | None, cwd: str | None, where: str) -> Metric | None:
    """The metric named by a service's traffic field, or None (no autoscaling input)."""
    if not spec or spec == NO_METRIC:
        return None
    head, _, frag = spec.partition("#")
    if head.startswith(("http://", "https://")):
        return PolledMetric(head, frag or None)
    if head.startswith("file:"):
        path = Path(head.removeprefix("file:"))
        if not path.is_absolute() and cwd:
            path = Path(cwd) / path
        return PolledMetric(str(path), frag or None)
    return TrafficMetric(load_traffic(spec, Path(cwd) if cwd else None, where=where))


@dataclass
class Decision:
    """One autoscaler decision, as recorded in the ledger's events."""

    time: float
    current: int
    ready: int
    rps: float | None
    desired: int

    def detail(self, kind: str) -> str:
        rps = "no metric" if self.rps is None else f"{self.rps:.3g} req/s"
        return f"{kind}: {self.current} -> {self.desired} replicas ({rps}, {self.ready} ready)"


class ServiceScaler:
    """One autoscaled service of the daemon: its autoscaler, metric and replica jobs.

    ``first_id`` (the first replica's job id) names the service in the ledger; replicas are
    ``NAME-k`` with ``k`` the lowest free index (so ports ``probe port + k`` stay compact).
    """

    def __init__(self, spec: ServiceSpec, metric: Metric, first_id: int, start: float) -> None:
        svc = spec.service
        self.spec = spec
        self.metric = metric
        self.first_id = first_id
        self.start = start  # engine time the service was submitted (traffic time 0)
        self.lo, self.hi = svc.lo, svc.hi
        cfg = svc.autoscaling
        self.kind = cfg.kind
        self.scaler = make_autoscaler(cfg, svc.capacity_rps, self.lo, self.hi, svc.replicas)
        self.period = self.scaler.period()
        self.next_due = start + self.period
        self.replicas: dict[int, int] = {}  # job id -> replica index
        self.decisions: list[Decision] = []
        #: The submission new replicas copy (its script, cwd, environment) and its submitter.
        self.request: Any = None
        self.caller: Any = None

    def facts(self) -> dict:
        """What ``GET /v1/jobs/{id}`` and ``/metrics`` show about this autoscaler."""
        last = self.decisions[-1] if self.decisions else None
        return {"kind": self.kind, "min": self.lo, "max": self.hi, "replicas": len(self.replicas),
                "desired": last.desired if last else len(self.replicas), "rps": last.rps if last else None,
                "error": getattr(self.metric, "error", "")}

    def window(self) -> float:
        cfg = self.spec.service.autoscaling
        if cfg.kind == "replay":
            return 0.0
        return cfg.stable_window_s if cfg.kind == "kpa" else cfg.metric_window_s

    def free_index(self) -> int:
        used = set(self.replicas.values())
        return next(k for k in range(len(used) + 1) if k not in used)

    def decide(self, now: float, current: int, ready: int) -> Decision:
        """Ask the autoscaler for the replica count now (bounded by min/max replicas)."""
        t = now - self.start
        self.metric.read(t)
        rps = self.metric.mean(t, self.window())
        if rps is None:  # no sample yet: nothing to compute from, hold (as the HPA does)
            desired = current
        else:
            panic = self.metric.mean(t, getattr(self.scaler, "panic_window_s", 0.0))
            obs = Observation(now=now, current=current, ready=ready, rps_window=rps,
                              rps_panic=rps if panic is None else panic)
            desired = max(self.lo, min(self.hi, self.scaler.recommend(obs)))
        d = Decision(now, current, ready, rps, desired)
        self.decisions.append(d)
        del self.decisions[:-1000]
        self.next_due = now + self.period
        return d


def scale_down_order(replicas: list[tuple[int, int, bool, bool]]) -> list[int]:
    """Job ids in ReplicaSet deletion order from ``(job id, index, placed, ready)``: unscheduled
    first, then not ready, then the newest (highest job id)."""
    return [jid for jid, _k, _p, _r in sorted(replicas, key=lambda r: (r[2], r[3], -r[0]))]
