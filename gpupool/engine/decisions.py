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


@dataclass(slots=True, frozen=True)
class Start:
    """Place pods of a pending job. ``partial`` adds pods to a job that is still gathering its
    gang (a non-gang scheduler placing pod by pod); otherwise the placement is the whole job."""

    job_id: int
    placement: tuple[PodPlacement, ...]
    partial: bool = False
    #: Free-form provenance (e.g. Slurm's SchedMain / SchedBackfill) kept in the job record.
    via: str = ""


@dataclass(slots=True, frozen=True)
class Preempt:
    """Stop a running (or partly placed) job to free its resources.

    REQUEUE sends it back to the queue, eligible again after ``requeue_delay`` seconds;
    CANCEL ends it as PREEMPTED.
    """

    job_id: int
    mode: str = REQUEUE
    reason: str = ""
    by_job: int | None = None
    requeue_delay: float = 0.0


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


Decision = Start | Preempt | Reject | Pending
