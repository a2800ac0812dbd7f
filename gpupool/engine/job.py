"""Per-run job state. One ``Job`` per workload per run; the workload itself never changes.

Plain ``__slots__`` class: the engine touches these fields on every event.
"""
from __future__ import annotations

from gpupool.model.workload import GANG_ALL, GANG_MIN, Workload

PENDING = "PENDING"
PLACING = "PLACING"  # some pods placed, gang not yet complete: holds resources, makes no progress
RUNNING = "RUNNING"
#: Allocated but stopped (Slurm's gang time slicing or SUSPEND preemption): keeps its GPUs and
#: memory, gives up its CPUs, makes no progress; its time limit does not run meanwhile.
SUSPENDED = "SUSPENDED"
FINAL_STATES = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "PREEMPTED", "NODE_FAIL", "REJECTED")
ACTIVE_STATES = (PENDING, PLACING, RUNNING, SUSPENDED)


class Job:
    """Mutable per-run record of one workload."""

    __slots__ = (
        "wl", "id", "state", "submit", "eligible", "first_start", "start", "end", "remaining",
        "placement", "pods_needed", "pods_total", "gpus_per_pod", "total_gpus", "requeues",
        "preemptions", "gpu_s_used", "gpu_s_lost", "gpu_s_idle_held", "token", "reason",
        "placing_since", "held_gpus", "via", "end_reason", "final_state", "time_limit", "admitted_at",
        "_x",
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
        #: Effective time limit of the current/last run (``Start.time_limit``, else the workload's).
        self.time_limit: float | None = wl.time_limit
        #: First placement time of the current run segment (partial starts do not move it).
        self.admitted_at: float | None = None
        self._x: _Extras | None = None  # rarely used state, allocated on first write

    def _extras(self) -> _Extras:
        x = self._x
        if x is None:
            x = self._x = _Extras()
        return x

    @property
    def partition(self) -> str | None:
        """Where the policy ran it (``Start.partition``); None when the policy did not say."""
        return None if self._x is None else self._x.partition

    @partition.setter
    def partition(self, value: str | None) -> None:
        self._extras().partition = value

    @property
    def reserved_since(self) -> float | None:
        """Admitted but not placed (``Reserve``) since this time; None when not reserved."""
        return None if self._x is None else self._x.reserved_since

    @reserved_since.setter
    def reserved_since(self, value: float | None) -> None:
        self._extras().reserved_since = value

    @property
    def reserve_info(self) -> str:
        """The policy's note with its ``Reserve`` ("" when not reserved)."""
        return "" if self._x is None else self._x.reserve_info

    @reserve_info.setter
    def reserve_info(self, value: str) -> None:
        self._extras().reserve_info = value

    @property
    def grace_until(self) -> float | None:
        """When the preemption grace period it is in ends; None when not in one."""
        return None if self._x is None else self._x.grace_until

    @grace_until.setter
    def grace_until(self, value: float | None) -> None:
        self._extras().grace_until = value

    @property
    def suspended_s(self) -> float:
        """Seconds the current (or last) run segment spent SUSPENDED so far, the current
        suspension included up to its start only (``run_time`` adds the rest). sacct's Elapsed is
        End - Start - this."""
        return 0.0 if self._x is None else self._x.suspended_s

    @property
    def suspended_at(self) -> float | None:
        """When the current suspension began; None when the job is not SUSPENDED."""
        return None if self._x is None else self._x.suspended_at

    @property
    def suspensions(self) -> int:
        """How many times the job was suspended (all runs)."""
        return 0 if self._x is None else self._x.suspensions

    def run_time(self, t: float) -> float:
        """Seconds of progress in the current run segment at ``t`` (suspended time excluded):
        running time + suspended time = ``t`` - start."""
        if self.start is None:
            return 0.0
        x = self._x
        if x is None:
            return t - self.start
        if x.suspended_at is not None:
            t = x.suspended_at
        return t - self.start - x.suspended_s

    @property
    def evictions(self) -> dict[str, int]:
        """Preemptions/evictions of this job counted per ``Preempt.reason``."""
        return self._extras().evictions

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return f"Job({self.id}, {self.state})"


class _Extras:
    """Per-job state that most jobs never use (kept off the hot ``Job`` slots)."""

    __slots__ = ("cpu_share", "evictions", "grace_until", "partition", "reserve_info", "reserved_since",
                 "suspended_at", "suspended_s", "suspensions")

    def __init__(self) -> None:
        self.suspended_s = 0.0
        self.suspended_at: float | None = None
        self.suspensions = 0
        self.partition: str | None = None
        self.reserved_since: float | None = None
        self.reserve_info = ""
        self.grace_until: float | None = None
        self.evictions: dict[str, int] = {}
        #: the sharing group while the job holds shared CPUs (``Start.cpu_share`` > 1; its N is
        #: ``NodeTable.share_n``), else None
        self.cpu_share: str | None = None


def _pods_needed(wl: Workload) -> int:
    """Pods that must be placed before the job makes progress (its gang rule)."""
    if wl.gang == GANG_ALL:
        return wl.pod_count
    if wl.gang == GANG_MIN:
        mins = [ps.min_count if ps.min_count is not None else ps.count for ps in wl.pod_sets]
        return max(1, sum(mins))
    return 1
