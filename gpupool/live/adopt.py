"""Putting a job that is already running back into a fresh engine (after a daemon restart).

A re-adopted process must keep its exact devices and the policy must not hand them to anyone
else first, so it goes through ``Engine.adopt`` (a start applied outside any policy pass).
"""
from __future__ import annotations

from gpupool.engine.core import Engine
from gpupool.engine.job import Job
from gpupool.model.workload import Workload


def adopt_running(engine: Engine, wl: Workload, placement: tuple, *, started: float, submitted: float,
                  time_limit: float | None, partition: str | None, requeues: int = 0, cpu_share: int = 1,
                  recovered: bool = True) -> Job:
    """Register ``wl`` as running since engine time ``started`` on ``placement``; the
    executor's ``launch`` is called as for any start and must re-attach, not spawn.
    ``recovered``: as ``Engine.adopt``."""
    return engine.adopt(wl, placement, started=started, submitted=submitted, time_limit=time_limit,
                        partition=partition, requeues=requeues, cpu_share=cpu_share, recovered=recovered)
