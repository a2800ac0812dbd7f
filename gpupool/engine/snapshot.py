"""The read-only view a policy decides on.

A snapshot shares the engine's structures instead of copying them: copying 100k pending
jobs per cycle would dominate the run. Policies must treat it as immutable; the engine
changes it only between ``decide`` calls, so ``decide(snapshot)`` is a pure function of
what the snapshot shows at that moment (DESIGN.md rule 1).
"""
from __future__ import annotations

from dataclasses import dataclass

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
    #: Jobs holding resources (RUNNING or PLACING), id -> job.
    active: dict[int, Job]
    #: Every job of the run by id (finished ones too), for dependencies and usage.
    jobs: dict[int, Job]
    #: Why the policy was called: "event" (submissions, ends, node changes) or "tick".
    trigger: str = "event"
