"""An executor wrapper that remembers every run segment, so services and quotas can be
accounted exactly after the run.

The engine calls ``launch`` when a job's gang is complete and ``stop`` when it takes the
job's resources away early (preemption, node failure, cancel); between the two the job holds
``held_gpus`` GPUs. Those calls are exactly the run segments, so recording them costs one
list append per start and needs no change to the engine's hot loop. Service replicas also
get their crash time here (Slurm-side restarts end the job at the crash).
"""
from __future__ import annotations

from collections.abc import Callable

from gpupool.engine.executor import Executor
from gpupool.engine.job import Job

#: ``hook(job, now, end, state) -> (end, state)``: lets a service controller change a replica's end.
LaunchHook = Callable[[Job, float, float, str], tuple[float, str]]


class RecordingExecutor:
    """Delegates to ``base``; ``segments[job_id]`` = [[start, end, gpus], ...] in order."""

    def __init__(self, base: Executor) -> None:
        self.base = base
        self.segments: dict[int, list[list]] = {}
        self.hooks: dict[int, LaunchHook] = {}

    def launch(self, job: Job, now: float) -> tuple[float, str]:
        end, state = self.base.launch(job, now)
        hook = self.hooks.get(job.id)
        if hook is not None:
            end, state = hook(job, now, end, state)
        self.segments.setdefault(job.id, []).append([now, end, job.held_gpus])
        return end, state

    def stop(self, job: Job, now: float, reason: str) -> None:
        self.base.stop(job, now, reason)
        segs = self.segments.get(job.id)
        if segs and segs[-1][1] > now:
            segs[-1][1] = now

    def __getattr__(self, name: str):  # over_time_limit etc. of the wrapped executor
        return getattr(self.base, name)
