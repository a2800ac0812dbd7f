"""What a policy may propose. The engine validates and applies; a policy never mutates state.

A placement is a tuple of pod placements ``(node_index, gpu_mask, cpu_m, memory_mib)``:
``gpu_mask`` has bit ``i`` set for the node-local device index ``i``. Tuples, not objects,
because the engine applies hundreds of thousands of them per second.
"""
from __future__ import annotations

from dataclasses import dataclass

PodPlacement = tuple[int, int, int, int]

#: Preemption modes (Slurm's names; Kueue evictions use REQUEUE).
REQUEUE = "REQUEUE"
CANCEL = "CANCEL"

_oset = object.__setattr__


@dataclass(slots=True, frozen=True)
class Start:
    """Place pods of a pending job. ``partial`` adds pods to a job that is still gathering its
    gang (a non-gang scheduler placing pod by pod); otherwise the placement is the whole job."""

    job_id: int
    placement: tuple[PodPlacement, ...]
    partial: bool = False
    #: Free-form provenance (e.g. Slurm's SchedMain / SchedBackfill) kept in the job record.
    via: str = ""
    #: The effective time limit the policy decided (seconds; e.g. Slurm's DefaultTime when the
    #: job gave none, capped by MaxTime / QOS MaxWall). None: the workload's own ``time_limit``.
    time_limit: float | None = None
    #: Where the job runs in the policy's terms (a Slurm partition); kept as ``job.partition``.
    partition: str | None = None
    #: Allocate without running: the job is SUSPENDED at once (Slurm gang scheduling: a job
    #: co-allocated on CPUs that a running job of its partition uses). It takes its GPUs and
    #: memory now and CPUs only when a ``Resume`` lets it run.
    suspended: bool = False
    #: Jobs that may hold the same CPUs, this one included (Slurm OverSubscribe=FORCE:N or
    #: YES:N without gang scheduling: co-allocated jobs run at once on shared CPUs). Above 1
    #: the engine takes the job's GPUs and memory but leaves its CPUs to the policy's
    #: co-allocation rows, keyed by ``partition``; it still proves that no node's CPUs are
    #: shared more than N ways. GPUs and memory are never shared.
    cpu_share: int = 1

    # Written out (same signature and semantics as the generated one): a frozen dataclass's
    # generated __init__ looks ``object.__setattr__`` up per field, and Start is built once per
    # job start on the hot path.
    def __init__(self, job_id: int, placement: tuple[PodPlacement, ...], partial: bool = False,
                 via: str = "", time_limit: float | None = None, partition: str | None = None,
                 suspended: bool = False, cpu_share: int = 1) -> None:
        _set = _oset
        _set(self, "job_id", job_id)
        _set(self, "placement", placement)
        _set(self, "partial", partial)
        _set(self, "via", via)
        _set(self, "time_limit", time_limit)
        _set(self, "partition", partition)
        _set(self, "suspended", suspended)
        _set(self, "cpu_share", cpu_share)


@dataclass(slots=True, frozen=True)
class Preempt:
    """Stop a running (or partly placed) job to free its resources.

    REQUEUE sends it back to the queue, eligible again after ``requeue_delay`` seconds;
    CANCEL ends it as PREEMPTED. With ``grace`` > 0 the victim keeps running until
    ``now + grace`` (Slurm's GraceTime: signalled now, stopped later); a job already in its
    grace period is not preempted again. A PENDING job holding a ``Reserve`` may be preempted
    too: that only clears its reservation (an eviction before its pods were placed).
    """

    job_id: int
    mode: str = REQUEUE
    reason: str = ""
    by_job: int | None = None
    requeue_delay: float = 0.0
    grace: float = 0.0


@dataclass(slots=True, frozen=True)
class Reject:
    """Refuse a pending job for good (it can never run here); it ends REJECTED with ``reason``."""

    job_id: int
    reason: str


@dataclass(slots=True, frozen=True)
class Pending:
    """Record why a job still waits (Slurm's pending reason, Kueue's condition message)."""

    job_id: int
    reason: str


@dataclass(slots=True, frozen=True)
class Reserve:
    """Mark a PENDING job as admitted without placing it (Kueue: quota reserved, pods not yet
    bound). Sets ``job.reserved_since`` / ``job.reserve_info``; cleared when the job starts, is
    preempted or requeued, or by ``Unreserve``."""

    job_id: int
    info: str = ""


@dataclass(slots=True, frozen=True)
class Unreserve:
    """Withdraw a ``Reserve`` (no-op for a job that holds none)."""

    job_id: int


@dataclass(slots=True, frozen=True)
class Suspend:
    """Stop a RUNNING job without taking its allocation away (Slurm's gang time slice or
    SUSPEND preemption): it keeps its GPUs and memory, gives its CPUs back, makes no progress,
    and its time limit stops running until ``Resume``."""

    job_id: int
    reason: str = ""


@dataclass(slots=True, frozen=True)
class Resume:
    """Let a SUSPENDED job run again on its own allocation (it must find its CPUs free)."""

    job_id: int
    reason: str = ""


@dataclass(slots=True, frozen=True)
class WakeAt:
    """Call the policy again at ``time`` (a timer), even if nothing else happens then."""

    time: float


Decision = Start | Preempt | Reject | Pending | Reserve | Unreserve | Suspend | Resume | WakeAt
