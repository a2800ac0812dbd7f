"""The read-only view a policy decides on.

A snapshot shares the engine's structures instead of copying them: copying 100k pending
jobs per cycle would dominate the run. Policies must treat it as immutable; the engine
changes it only between ``decide`` calls, so ``decide(snapshot)`` is a pure function of
what the snapshot shows at that moment (DESIGN.md rule 1).

The last three fields are a summary of what changed since the previous ``decide`` call, so a
policy can recognise that its previous answer still holds (e.g. strict FIFO behind a blocked
head: a new submission cannot change anything) without rescanning 100k pending jobs. They
describe the snapshot's history, not hidden state: a policy that ignores them stays correct,
and one that uses them must return exactly what a full pass would.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from gpupool.engine.job import Job
from gpupool.engine.nodes import NodeTable
from gpupool.model.pool import Pool


@dataclass(slots=True)
class Snapshot:
    now: float
    pool: Pool
    nodes: NodeTable
    #: Waiting jobs, id -> job, in queue order (submit order; a requeued job goes to the back).
    pending: dict[int, Job]
    #: Jobs holding resources (RUNNING, PLACING or SUSPENDED), id -> job.
    active: dict[int, Job]
    #: Every job of the run by id (finished ones too), for dependencies and usage.
    jobs: dict[int, Job]
    #: Why the policy was called: "event" (submissions, ends, node changes) or "tick".
    trigger: str = "event"
    #: Number of this ``decide`` call in the run (1, 2, ...); 0 before the first call.
    seq: int = 0
    #: Bit set of ``CHANGED_*`` flags: what the engine changed since the previous call
    #: (``seq - 1``) other than applying that call's decisions. ``CHANGED_ALL`` on the first call.
    changed: int = -1
    #: Jobs submitted since the previous call, in queue order (they sit at the end of ``pending``).
    arrived: list[Job] = field(default_factory=list)
    #: The decisions of the previous call exactly as the engine applied them (None: none yet).
    applied: list | None = None
    #: PENDING jobs holding a ``Reserve`` (admitted, not placed), id -> job, in reservation order.
    reserved: dict[int, Job] = field(default_factory=dict)
    #: SUSPENDED jobs (also in ``active``: they hold GPUs and memory), id -> job, in suspension order.
    suspended: dict[int, Job] = field(default_factory=dict)
    #: Jobs in a preemption grace period (signalled, not yet stopped; all in ``active``), id ->
    #: the ``Preempt`` that signalled them, in signal order. None when whoever made the snapshot
    #: does not track them: then they are the active jobs whose ``grace_until`` is set.
    grace: dict | None = None


#: A job reached a final state or released resources outside the policy's own decisions
#: (ends, time limits, node failures): free resources and dependency states changed.
CHANGED_ENDED = 1
#: A node went down, came up, drained or resumed.
CHANGED_NODES = 2
#: Jobs were submitted (listed in ``Snapshot.arrived``; appended to the end of ``pending``).
CHANGED_ARRIVED = 4
#: A job went back to the queue (requeue after a node failure or preemption).
CHANGED_REQUEUED = 8
#: A job's begin time or requeue delay passed: it is eligible now.
CHANGED_ELIGIBLE = 16
#: A periodic tick or an extra pass at the same instant.
CHANGED_TICK = 32
#: Anything at all (the first call, or an engine that does not track changes).
CHANGED_ALL = -1
