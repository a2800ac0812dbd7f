"""The contract between the engine and a scheduling policy, and the registry of policies.

A policy is configured once from the pool, then asked ``decide(snapshot)`` whenever
something changed (and every ``tick_interval`` seconds if it sets one). It must be
deterministic: no I/O, no wall clock, randomness only from a seeded generator it is given.
Faithful policies (Slurm, Kueue, bridge) live in their own packages and register here.
"""
from __future__ import annotations

from typing import Callable, Protocol

from gpupool.engine.decisions import Decision
from gpupool.engine.snapshot import Snapshot
from gpupool.errors import GpupoolError
from gpupool.model.pool import Pool


class Policy(Protocol):
    name: str
    #: Seconds between periodic ticks (Slurm's sched_interval, Kueue's cycle); None = events only.
    tick_interval: float | None
    #: Seconds a job may run past its time limit before it is killed (Slurm's OverTimeLimit).
    over_time_limit: float

    def decide(self, snapshot: Snapshot) -> list[Decision]:
        ...


PolicyFactory = Callable[[Pool, dict], Policy]
_REGISTRY: dict[str, tuple[PolicyFactory, str]] = {}


def register(name: str, description: str) -> Callable[[PolicyFactory], PolicyFactory]:
    """Class/function decorator: make a policy selectable as ``--policy NAME``."""

    def wrap(factory: PolicyFactory) -> PolicyFactory:
        _REGISTRY[name] = (factory, description)
        return factory

    return wrap


def _load_builtin() -> None:
    # Importing the modules runs their @register decorators.
    import gpupool.policy.fifo  # noqa: F401


def registered() -> dict[str, str]:
    """Policy name -> one-line description, in registration order."""
    _load_builtin()
    return {name: desc for name, (_, desc) in _REGISTRY.items()}


def make_policy(name: str, pool: Pool, options: dict | None = None) -> Policy:
    _load_builtin()
    if name not in _REGISTRY:
        known = ", ".join(sorted(_REGISTRY))
        raise GpupoolError(f"unknown policy {name!r}; registered policies: {known}")
    factory, _ = _REGISTRY[name]
    return factory(pool, dict(options or {}))
