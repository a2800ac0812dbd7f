"""A service as an engine controller: it submits, cancels and restarts replica workloads.

Every autoscaler period (HPA 15 s, KPA 2 s) the controller looks at its replicas, restarts
the ones that ended (Slurm side: a crashed job's replacement, eligible after CrashLoopBackOff;
any side: a replica that hit a time limit, failed with its node or was preempted for good),
asks its autoscaler for a replica count and submits or cancels replicas to match. Replica
workloads never end on their own; at the service's end every replica is cancelled.

Readiness: a replica is ready ``startup_time`` after its container starts. Crashes are drawn
per run segment from a generator seeded by (service seed, job id, segment), so results do not
depend on when the controller happens to wake. On the Kubernetes side the container restarts
in place (the pod keeps its GPUs): see ``container_intervals``.
"""
from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from gpupool.engine.job import PENDING, PLACING, RUNNING
from gpupool.fleet.autoscalers import Observation, make_autoscaler
from gpupool.fleet.mapping import (
    RESTART_REQUEUE,
    ServiceSettings,
    replica_workload,
    restart_mode,
)
from gpupool.fleet.recorder import RecordingExecutor
from gpupool.fleet.traffic import Traffic
from gpupool.model.pool import Pool
from gpupool.model.workload import RestartPolicy, Service

SCALED_DOWN = "scaled down"
SERVICE_ENDED = "service ended"


def container_intervals(start: float, end: float, startup: float, mtbf: float | None,
                        restart: RestartPolicy, rng: np.random.Generator) -> tuple[list[tuple[float, float]], list[float]]:
    """Ready intervals and crash times of one pod that holds its GPUs over [start, end).

    The container starts at ``start``, is ready after ``startup``, crashes after an
    exponential time with mean ``mtbf`` (from its own start), and restarts in place after the
    CrashLoopBackOff delay: 10 s doubling per consecutive crash, capped at 5 min, with the
    count reset when the container had run ``reset_after_s`` (10 min) before crashing.
    """
    ready: list[tuple[float, float]] = []
    crashes: list[float] = []
    c = start
    consecutive = 0
    while c < end:
        crash = c + float(rng.exponential(mtbf)) if mtbf else math.inf
        up = c + startup
        stop = min(crash, end)
        if up < stop:
            ready.append((up, stop))
        if crash >= end:
            break
        crashes.append(crash)
        consecutive = 1 if crash - c >= restart.reset_after_s else consecutive + 1
        c = crash + restart.backoff(consecutive)
    return ready, crashes


@dataclass
class Slot:
    """One replica of the service: the job that runs it now and the jobs before it."""

    index: int
    jobs: list[int] = field(default_factory=list)
    alive: bool = True
    consecutive_crashes: int = 0
    restarts: int = 0


@dataclass
class ReplicaRecord:
    """What the accounting needs about one replica job."""

    job_id: int
    slot: int
    created: float
    begin: float
    removed: float | None = None
    crash_at: float | None = None  # Slurm side: the crash that ended it


class ServiceController:
    """Drives one service through the engine's controller API."""

    def __init__(self, svc: Service, traffic: Traffic, *, policy: str, settings: ServiceSettings, pool: Pool,
                 ids: Iterator[int], recorder: RecordingExecutor) -> None:
        self.svc = svc
        self.name = f"service/{svc.name}"
        self.traffic = traffic
        self.policy = policy
        self.settings = settings
        self.pool = pool
        self.ids = ids
        self.recorder = recorder
        self.mode = restart_mode(policy, settings)
        self.start = svc.start_time
        self.end = svc.end_time if svc.end_time is not None else traffic.end
        if self.end <= self.start:
            raise ValueError(f"service {svc.name}: ends ({self.end:g}) before it starts ({self.start:g})")
        self.scaler = make_autoscaler(svc.autoscaling, svc.capacity_rps, svc.lo, svc.hi, svc.replicas)
        self.period = self.scaler.period()
        self.slots: list[Slot] = []
        self.records: dict[int, ReplicaRecord] = {}
        self.started = False
        self.done = False
        self.max_replicas_seen = 0
        self.decisions: list[tuple[float, int, int, int]] = []  # (time, current, ready, desired)
        self._timelines: dict[tuple[int, int], tuple[list, list]] = {}

    # ------------------------------------------------------------------ controller API
    def next_wake(self, now: float) -> float | None:
        if self.done:
            return None
        if not self.started:
            return max(now, self.start)
        nxt = now + self.period
        return nxt if nxt < self.end else max(self.end, math.nextafter(now, math.inf))

    def on_wake(self, engine, now: float) -> None:
        if now >= self.end:
            self._teardown(engine, now)
            return
        if not self.started:
            self.started = True
            for _ in range(max(self.svc.lo, min(self.svc.hi, self.svc.replicas))):
                self._new_slot(engine, now)
        self._restart_ended(engine, now)
        live = [s for s in self.slots if s.alive]
        ready = sum(1 for s in live if self.is_ready(engine, s, now))
        obs = Observation(
            now=now, current=len(live), ready=ready,
            rps_window=self._window_mean(now, self._metric_window()),
            rps_panic=self._window_mean(now, getattr(self.scaler, "panic_window_s", 0.0)),
        )
        desired = self.scaler.recommend(obs)
        desired = max(self.svc.lo, min(self.svc.hi, desired))
        self.decisions.append((now, obs.current, ready, desired))
        if desired > len(live):
            for _ in range(desired - len(live)):
                self._new_slot(engine, now)
        elif desired < len(live):
            for slot in self._victims(engine, live, now)[: len(live) - desired]:
                self._remove(engine, slot, now, SCALED_DOWN)
        self.max_replicas_seen = max(self.max_replicas_seen, sum(1 for s in self.slots if s.alive))

    # ------------------------------------------------------------------ replicas
    def _metric_window(self) -> float:
        cfg = self.svc.autoscaling
        if cfg.kind == "replay":
            return 0.0  # the demand now (a replayed replica count), not a window mean
        return cfg.stable_window_s if cfg.kind == "kpa" else cfg.metric_window_s

    def _window_mean(self, now: float, window: float) -> float:
        if window <= 0:
            return self.traffic.at(now)
        return self.traffic.mean(max(self.start, now - window), now)

    def _new_slot(self, engine, now: float) -> None:
        slot = Slot(len(self.slots))
        self.slots.append(slot)
        self._submit(engine, slot, now, None)

    def _submit(self, engine, slot: Slot, now: float, begin: float | None) -> None:
        job_id = next(self.ids)
        name = f"{self.svc.name}-{slot.index}"
        wl = replica_workload(self.svc, job_id, name, now, self.policy, self.settings, self.pool,
                              begin=begin if begin is not None and begin > now else None)
        if self.mode == RESTART_REQUEUE and self.svc.mtbf_s:
            self.recorder.hooks[job_id] = self._crash_hook
        engine.submit(wl)
        slot.jobs.append(job_id)
        self.records[job_id] = ReplicaRecord(job_id, slot.index, now, max(now, begin or now))

    def _crash_hook(self, job, now: float, end: float, state: str) -> tuple[float, str]:
        """Slurm side: the replica's job ends FAILED at its crash (if before its own end)."""
        seg = len(self.recorder.segments.get(job.id, ()))
        rng = np.random.default_rng([self.svc.seed, job.id, seg])
        crash = now + float(rng.exponential(self.svc.mtbf_s))
        if crash < end and crash < self.end:
            self.records[job.id].crash_at = crash
            return crash, "FAILED"
        return end, state

    def _restart_ended(self, engine, now: float) -> None:
        """Replace replicas whose job ended without the controller asking (crash, limit, node)."""
        for slot in self.slots:
            if not slot.alive:
                continue
            job = engine.jobs[slot.jobs[-1]]
            if job.final_state is None:
                continue
            rec = self.records[job.id]
            rec.removed = job.end
            slot.restarts += 1
            begin = None
            if rec.crash_at is not None and job.final_state == "FAILED":
                ran = rec.crash_at - (job.start if job.start is not None else rec.crash_at)
                slot.consecutive_crashes = 1 if ran >= self.svc.restart.reset_after_s else slot.consecutive_crashes + 1
                begin = rec.crash_at + self.svc.restart.backoff(slot.consecutive_crashes)
            self._submit(engine, slot, now, begin)

    def is_ready(self, engine, slot: Slot, now: float) -> bool:
        job = engine.jobs[slot.jobs[-1]]
        if job.state != RUNNING or job.start is None:
            return False
        if self.mode == RESTART_REQUEUE:
            return now >= job.start + self.svc.startup_time
        seg = len(self.recorder.segments.get(job.id, ())) - 1
        ready, _ = self._timeline(job.id, seg, job.start)
        return any(a <= now < b for a, b in ready)

    def _timeline(self, job_id: int, seg: int, start: float) -> tuple[list, list]:
        key = (job_id, seg)
        got = self._timelines.get(key)
        if got is None:
            rng = np.random.default_rng([self.svc.seed, job_id, seg])
            got = self._timelines[key] = container_intervals(
                start, self.end, self.svc.startup_time, self.svc.mtbf_s, self.svc.restart, rng)
        return got

    def _victims(self, engine, live: list[Slot], now: float) -> list[Slot]:
        """ReplicaSet scale-down order: unscheduled first, then not ready, then newest."""
        def rank(slot: Slot):
            job = engine.jobs[slot.jobs[-1]]
            state = 0 if job.state == PENDING else 1 if job.state == PLACING else 2
            ready = self.is_ready(engine, slot, now) if state == 2 else False
            return (state, ready, -slot.index)
        return sorted(live, key=rank)

    def _remove(self, engine, slot: Slot, now: float, reason: str) -> None:
        slot.alive = False
        job_id = slot.jobs[-1]
        self.records[job_id].removed = now
        if engine.jobs[job_id].final_state is None:
            engine.cancel(job_id, state="CANCELLED", reason=reason)

    def _teardown(self, engine, now: float) -> None:
        for slot in self.slots:
            if slot.alive:
                self._remove(engine, slot, now, SERVICE_ENDED)
        self.done = True

    # ------------------------------------------------------------------ after the run
    def ready_intervals(self, engine_jobs: dict) -> list[tuple[float, float]]:
        """Every interval in which one replica was ready, clipped to the service's life."""
        out: list[tuple[float, float]] = []
        startup = self.svc.startup_time
        for job_id in self.records:
            for k, (s, e, _) in enumerate(self.recorder.segments.get(job_id, ())):
                e = min(e, self.end)
                if e <= s:
                    continue
                if self.mode == RESTART_REQUEUE:
                    if s + startup < e:
                        out.append((s + startup, e))
                else:
                    ready, _ = self._timeline(job_id, k, s)
                    out.extend((a, min(b, e)) for a, b in ready if a < e)
        return out

    def crash_count(self) -> int:
        """Container restarts (in place) or crash requeues (Slurm side) before the end."""
        if self.mode == RESTART_REQUEUE:
            return sum(1 for r in self.records.values() if r.crash_at is not None and r.crash_at < self.end)
        total = 0
        for job_id in self.records:
            for k, (s, e, _) in enumerate(self.recorder.segments.get(job_id, ())):
                _, crashes = self._timeline(job_id, k, s)
                total += sum(1 for c in crashes if c < min(e, self.end))
        return total
