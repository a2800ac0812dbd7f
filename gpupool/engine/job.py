"""Per-run job state. One ``Job`` per workload per run; the workload itself never changes.

Plain ``__slots__`` class: the engine touches these fields on every event.
"""
from __future__ import annotations

from gpupool.model.workload import GANG_ALL, GANG_MIN, Workload

PENDING = "PENDING"
PLACING = "PLACING"  # some pods placed, gang not yet complete: holds resources, makes no progress
RUNNING = "RUNNING"
FINAL_STATES = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "PREEMPTED", "NODE_FAIL", "REJECTED")
ACTIVE_STATES = (PENDING, PLACING, RUNNING)


class Job:
    """Mutable per-run record of one workload."""

    __slots__ = (
        "wl", "id", "state", "submit", "eligible", "first_start", "start", "end", "remaining",
        "placement", "pods_needed", "pods_total", "gpus_per_pod", "total_gpus", "requeues",
        "preemptions", "gpu_s_used", "gpu_s_lost", "gpu_s_idle_held", "token", "reason",
        "placing_since", "held_gpus", "via", "end_reason", "final_state",
    )

    def __init__(self, wl: Workload) -> None:
        self.wl = wl
        self.id = wl.id
        self.state = PENDING
        self.submit = wl.submit_time
        self.eligible = wl.submit_time if wl.begin_time is None else max(wl.submit_time, wl.begin_time)
        self.first_start: float | None = None
        self.start: float | None = None
        self.end: float | None = None
        self.remaining = float(wl.runtime)
        self.placement: tuple = ()
        self.pods_total = wl.pod_count
        self.total_gpus = wl.total_gpus
        self.pods_needed = _pods_needed(wl)
        self.requeues = 0
        self.preemptions = 0
        self.gpu_s_used = 0.0
        self.gpu_s_lost = 0.0
        self.gpu_s_idle_held = 0.0
        self.token = 0
        self.reason = ""
        self.placing_since: float | None = None
        self.held_gpus = 0
        self.via = ""
        self.end_reason = ""
        self.final_state: str | None = None

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return f"Job({self.id}, {self.state})"


def _pods_needed(wl: Workload) -> int:
    """Pods that must be placed before the job makes progress (its gang rule)."""
    if wl.gang == GANG_ALL:
        return wl.pod_count
    if wl.gang == GANG_MIN:
        mins = [ps.min_count if ps.min_count is not None else ps.count for ps in wl.pod_sets]
        return max(1, sum(mins))
    return 1
