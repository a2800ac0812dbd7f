"""Who enacts a started job, behind an interface so real executors can replace the simulated one.

``launch(job, now)`` is called when a job's gang is complete and it starts making progress; it
returns when and how the job will end if nothing stops it first. ``stop(job, now, reason)`` is
called when the engine takes the job's resources away early (preemption, node failure). The
simulated executor computes the end from the workload: its remaining runtime, its effective
time limit (``job.time_limit``) and the policy's over-time allowance and check interval. Live
executors (local processes, real Slurm, Kubernetes) will report ends as events instead.
"""
from __future__ import annotations

import math
from typing import Callable, Protocol

from gpupool.engine.job import Job

TIMEOUT = "TIMEOUT"


class Executor(Protocol):
    def launch(self, job: Job, now: float) -> tuple[float, str]:
        """Start ``job``; return (end time, final state) if it is not stopped before."""
        ...

    def stop(self, job: Job, now: float, reason: str) -> None:
        """Stop ``job`` early (preempted, node failure); its resources are released by the engine."""
        ...

    # Optional, needed only by policies that suspend jobs (read with getattr):
    # ``suspend(job, now)`` stops a running job in place (SIGSTOP); ``resume(job, now) ->
    # (end time, final state)`` continues it, its remaining work and time limit reduced by the
    # running time it already had (``job.run_time``).


class SimulatedExecutor:
    """Ends jobs after their remaining runtime, or kills them at their time limit.

    A job over its limit is killed ``over_time_limit`` seconds after it (Slurm's OverTimeLimit);
    with ``check_interval`` > 0 the kill happens at the first multiple of the interval on the
    run's clock at or after that moment (slurmctld checks limits every 30 s); a job that ends on
    its own after its limit + allowance but before that check ends then, as TIMEOUT.
    """

    __slots__ = ("over_time_limit", "check_interval", "over_time_limit_of")

    def __init__(self, over_time_limit: float = 0.0, check_interval: float = 0.0,
                 over_time_limit_of: Callable[[Job], float] | None = None) -> None:
        self.over_time_limit = over_time_limit
        self.check_interval = check_interval
        #: the allowance of one job when it differs by job (Slurm: a partition's OverTimeLimit)
        self.over_time_limit_of = over_time_limit_of

    @classmethod
    def for_policy(cls, policy) -> SimulatedExecutor:
        """The executor that ends jobs as ``policy`` says limits work: its over-time allowance
        (per job where it has ``over_time_limit_of``) and its check interval."""
        return cls(policy.over_time_limit, float(getattr(policy, "time_limit_check_interval", 0.0) or 0.0),
                   getattr(policy, "over_time_limit_of", None))

    def launch(self, job: Job, now: float) -> tuple[float, str]:
        limit = job.time_limit
        return self._end(job, now, job.remaining, None if limit is None else float(limit))

    def _end(self, job: Job, now: float, remaining: float, left: float | None) -> tuple[float, str]:
        """The end of a run with ``remaining`` work to do and ``left`` seconds of its time
        limit (None: unlimited): its own end, or a TIMEOUT at the first limit check after
        limit + OverTimeLimit."""
        if left is not None:
            otl = self.over_time_limit if self.over_time_limit_of is None else self.over_time_limit_of(job)
            if remaining > left + otl:
                kill = max(now, now + left + otl)  # already over its limit: the next check
                interval = self.check_interval
                if interval > 0:
                    kill = math.ceil(kill / interval) * interval
                    if kill >= now + remaining:
                        # It ended on its own between its limit (+ over-time allowance) and the
                        # next check: slurmctld still records TIMEOUT (seen on a real 22.05.8,
                        # docs/differential.md finding 9), with the end it really had.
                        return now + remaining, TIMEOUT
                return kill, TIMEOUT
        return now + remaining, job.wl.outcome

    def stop(self, job: Job, now: float, reason: str) -> None:
        """Nothing runs in a simulation: the engine's bookkeeping is the whole effect."""

    def suspend(self, job: Job, now: float) -> None:
        """Nothing runs in a simulation: the engine drops the job's pending end event."""

    def resume(self, job: Job, now: float) -> tuple[float, str]:
        """The job runs again: the end it would have had, with the work and the time limit it
        has left (Slurm counts running time only: end = now + limit - time already run)."""
        done = job.run_time(now)
        limit = job.time_limit
        return self._end(job, now, job.remaining - done, None if limit is None else limit - done)
