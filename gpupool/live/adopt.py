"""Putting a job that is already running back into a fresh engine (after a daemon restart).

The engine's public API has ``submit`` (a job waits for the policy) but nothing for "this job
already holds these GPUs and has been running since t": a re-adopted process must keep its
exact devices, and the policy must not hand them to anyone else first. Until the engine has
such a call (requested from the engine's owner as ``Engine.adopt(wl, placement, start)``),
this module does it with the engine's own transition: a ``Start`` applied outside a pass.
"""
from __future__ import annotations

from gpupool.engine.core import Engine
from gpupool.engine.decisions import Start
from gpupool.engine.job import Job
from gpupool.model.workload import Workload


def adopt_running(engine: Engine, wl: Workload, placement: tuple, *, started: float, submitted: float,
                  time_limit: float | None, partition: str | None, requeues: int = 0) -> Job:
    """Register ``wl`` as running since engine time ``started`` on ``placement``; the
    executor's ``launch`` is called as for any start and must re-attach, not spawn."""
    job = Job(wl)
    job.submit = submitted
    job.eligible = engine.now
    job.requeues = requeues
    engine.jobs[wl.id] = job
    engine.pending[wl.id] = job
    engine._apply([Start(wl.id, placement, time_limit=time_limit, partition=partition, via="adopted")], engine.now)
    # The process began before this engine existed: its run segment starts then.
    job.start = started
    job.first_start = started
    job.admitted_at = started
    return job
