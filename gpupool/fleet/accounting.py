"""Service and quota accounting after a run, from recorded run segments (exact, no sampling).

Service figures, per service:

- requests offered / served / dropped: per second, served = min(demand, ready capacity), where
  ready capacity = ready replicas × ``capacity_rps`` (a replica that is starting, crashed or
  waiting for GPUs serves nothing); demand beyond it is dropped;
- minutes under-provisioned: minutes in which some demand was dropped; SLO attainment = the
  share of the service's minutes with ready capacity ≥ demand throughout;
- replica-seconds waiting for GPUs: time replicas existed without running, less the
  CrashLoopBackOff delays in which they were not eligible;
- restarts (container restarts in place, or crash requeues on the Slurm side), replacements
  (any replica job replaced), GPU-hours held by its replicas, the peak replica count.

Quota figures (Kueue): per ClusterQueue, GPU-hours used beyond its nominal GPU quota
(borrowed); GPUs and GPU-hours reclaimed from borrowers (cross-queue preemptions: a victim's
GPUs count from its preemption until it runs again, its queue borrows again, or the run ends).
For policies without Kueue quotas the borrowed figure is what Kueue would call borrowing.
"""
from __future__ import annotations

import math
from collections import defaultdict

import numpy as np

from gpupool.fleet.controller import ServiceController
from gpupool.fleet.recorder import RecordingExecutor
from gpupool.model.pool import Pool
from gpupool.model.workload import KIND_SERVICE

GPU = "nvidia.com/gpu"
#: Kueue eviction reasons where a workload loses its GPUs to another ClusterQueue.
RECLAIM_REASONS = ("InCohortReclamation", "InCohortReclaimWhileBorrowing", "InCohortFairSharing")


def _r(x: float) -> float:
    return round(float(x), 3)


def capacity_per_second(intervals: list[tuple[float, float]], weight: float, start: float, n: int) -> np.ndarray:
    """Σ weight × overlap of each interval with each second [start+k, start+k+1), k < n."""
    if not intervals or n <= 0:
        return np.zeros(max(n, 0))
    points = []
    for a, b in intervals:
        if b > a:
            points.append((a, weight))
            points.append((b, -weight))
    if not points:
        return np.zeros(n)
    points.sort()
    t = np.array([p[0] for p in points])
    level = np.cumsum([p[1] for p in points])
    # Integral of the step function at each breakpoint.
    area = np.concatenate([[0.0], np.cumsum(level[:-1] * np.diff(t))])
    edges = start + np.arange(n + 1, dtype=float)
    cum = np.interp(edges, t, area, left=0.0, right=area[-1])
    return np.diff(cum)


def service_summary(ctrl: ServiceController, jobs: dict, run_end: float | None = None) -> dict:
    """The per-service figures (see the module docstring), up to the end of the run when it
    stopped (``until``) before the service did."""
    svc = ctrl.svc
    start, end = ctrl.start, ctrl.end if run_end is None else min(ctrl.end, run_end)
    n = max(0, math.ceil(end - start))
    demand = ctrl.traffic.per_second(start, start + n)[:n]
    cap = capacity_per_second([(a, min(b, end)) for a, b in ctrl.ready_intervals(jobs) if a < end],
                              svc.capacity_rps, start, n)
    served = np.minimum(demand, cap)
    dropped = demand - served
    minutes = max(1, math.ceil(n / 60))
    pad = minutes * 60 - n
    drop_min = np.pad(dropped, (0, pad)).reshape(minutes, 60).sum(axis=1)
    under = int((drop_min > 1e-6).sum())
    waiting = 0.0
    gpu_s = 0.0
    for job_id, rec in ctrl.records.items():
        segs = ctrl.recorder.segments.get(job_id, [])
        removed = rec.removed if rec.removed is not None else end
        removed = min(removed, end)
        ran = 0.0
        for s, e, gpus in segs:
            e2 = min(e, end, removed) if math.isfinite(e) else min(end, removed)
            if e2 > s:
                ran += e2 - s
                gpu_s += (e2 - s) * gpus
        waiting += max(0.0, (removed - rec.begin) - ran)
    offered = float(demand.sum())
    return {
        "name": svc.name,
        "autoscaler": svc.autoscaling.kind,
        "restart_mode": ctrl.mode,
        "min_replicas": svc.lo,
        "max_replicas": svc.hi,
        "peak_replicas": ctrl.max_replicas_seen,
        "requests_offered": _r(offered),
        "requests_served": _r(served.sum()),
        "requests_dropped": _r(dropped.sum()),
        "served_fraction": _r(served.sum() / offered) if offered else 1.0,
        "minutes": minutes,
        "minutes_under_provisioned": under,
        "slo_attainment": _r(1.0 - under / minutes),
        "replica_seconds_waiting_for_gpus": _r(waiting),
        "restarts": ctrl.crash_count(),
        "replacements": sum(s.restarts for s in ctrl.slots),
        "replica_jobs": len(ctrl.records),
        "gpu_hours": _r(gpu_s / 3600.0),
    }


def services_overall(per_service: list[dict]) -> dict:
    """Totals over every service (SLO attainment weighted by minutes)."""
    if not per_service:
        return {}
    minutes = sum(s["minutes"] for s in per_service)
    under = sum(s["minutes_under_provisioned"] for s in per_service)
    offered = sum(s["requests_offered"] for s in per_service)
    served = sum(s["requests_served"] for s in per_service)
    return {
        "services": len(per_service),
        "requests_offered": _r(offered),
        "requests_served": _r(served),
        "requests_dropped": _r(sum(s["requests_dropped"] for s in per_service)),
        "served_fraction": _r(served / offered) if offered else 1.0,
        "minutes_under_provisioned": under,
        "slo_attainment": _r(1.0 - under / minutes) if minutes else 1.0,
        "replica_seconds_waiting_for_gpus": _r(sum(s["replica_seconds_waiting_for_gpus"] for s in per_service)),
        "restarts": sum(s["restarts"] for s in per_service),
        "gpu_hours": _r(sum(s["gpu_hours"] for s in per_service)),
    }


def cluster_queue_of(pool: Pool, wl) -> str | None:
    """The ClusterQueue a workload's LocalQueue points at (None outside Kueue)."""
    kq = pool.kueue
    if kq is None or not wl.queue_name:
        return None
    lq = kq.local_queues.get((wl.namespace or "default", wl.queue_name))
    return None if lq is None else lq.cluster_queue


def nominal_gpus(pool: Pool) -> dict[str, int]:
    """Each ClusterQueue's nominal GPU quota, over all its flavors."""
    out: dict[str, int] = {}
    if pool.kueue is None:
        return out
    for cq in pool.kueue.cluster_queues.values():
        total = 0
        for rg in cq.resource_groups:
            for fq in rg.flavors:
                q = fq.resources.get(GPU)
                if q is not None:
                    total += int(q.nominal)
        out[cq.name] = total
    return out


def queue_usage(pool: Pool, jobs: list, recorder: RecordingExecutor, end: float) -> dict[str, list[tuple[float, int]]]:
    """Per ClusterQueue, the GPUs its running workloads hold: [(time, level from then on)]."""
    steps: dict[str, list[tuple[float, int]]] = defaultdict(list)
    for job in jobs:
        cq = cluster_queue_of(pool, job.wl)
        if cq is None:
            continue
        for s, e, gpus in recorder.segments.get(job.id, ()):
            e = min(e, end)
            if e > s and gpus:
                steps[cq].append((s, gpus))
                steps[cq].append((e, -gpus))
    out = {}
    for cq, pts in steps.items():
        pts.sort()
        level = 0
        series: list[tuple[float, int]] = []
        for t, d in pts:
            level += d
            if series and series[-1][0] == t:
                series[-1] = (t, level)
            else:
                series.append((t, level))
        out[cq] = series
    return out


def borrowed_gpu_hours(pool: Pool, usage: dict[str, list[tuple[float, int]]], end: float) -> dict[str, float]:
    """Per ClusterQueue: ∫ max(0, GPUs its running workloads hold − nominal GPU quota) dt."""
    out = {}
    for cq, nom in sorted(nominal_gpus(pool).items()):
        series = usage.get(cq, [])
        area = 0.0
        for (t0, level), nxt in zip(series, series[1:] + [(end, 0)]):
            if nxt[0] > t0 and level > nom:
                area += (level - nom) * (min(nxt[0], end) - t0)
        out[cq] = _r(area / 3600.0)
    return out


def _next_borrow(series: list[tuple[float, int]], nominal: int, after: float) -> float:
    """The first time after ``after`` at which the queue holds more GPUs than its nominal quota."""
    for t, level in series:
        if t > after and level > nominal:
            return t
    return math.inf


def reclaims(pool: Pool, jobs: dict, events: list, usage: dict[str, list[tuple[float, int]]], end: float) -> dict:
    """Cross-queue preemptions: how many, the GPUs they took back, and GPU-hours reclaimed.

    A victim's GPUs count as reclaimed from its preemption until it runs again, its queue
    borrows again (is above its nominal quota), or the run ends, whichever comes first.
    """
    nominal = nominal_gpus(pool)
    starts: dict[int, list[float]] = defaultdict(list)
    for t, what, job_id, _ in events:
        if what == "started":
            starts[job_id].append(t)
    count = 0
    gpus = 0
    gpu_s = 0.0
    by_victim_cq: dict[str, float] = defaultdict(float)
    for t, what, job_id, detail in events:
        if what != "preempted" or not any(r in detail for r in RECLAIM_REASONS):
            continue
        job = jobs.get(job_id)
        if job is None:
            continue
        count += 1
        g = job.total_gpus
        gpus += g
        cq = cluster_queue_of(pool, job.wl) or "(none)"
        back = next((s for s in starts.get(job_id, ()) if s > t), math.inf)
        if cq in nominal:
            back = min(back, _next_borrow(usage.get(cq, []), nominal[cq], t))
        secs = g * max(0.0, min(back, end) - t)
        gpu_s += secs
        by_victim_cq[cq] += secs / 3600.0
    return {"preemptions": count, "gpus": gpus, "gpu_hours": _r(gpu_s / 3600.0),
            "gpu_hours_by_victim_queue": {k: _r(v) for k, v in sorted(by_victim_cq.items())}}


def training_lost_gpu_hours(jobs: list) -> float:
    """GPU-hours of batch work lost to preemption and node failures (since the last checkpoint)."""
    return _r(sum(j.gpu_s_lost for j in jobs if j.wl.kind != KIND_SERVICE) / 3600.0)
