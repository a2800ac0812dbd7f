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
from gpupool.errors import GpupoolError, PolicyOptionError
from gpupool.model.pool import Pool


class Policy(Protocol):
    name: str
    #: Seconds between periodic ticks (Slurm's sched_interval, Kueue's cycle); None = events only.
    tick_interval: float | None
    #: Seconds a job may run past its time limit before it is killed (Slurm's OverTimeLimit).
    over_time_limit: float
    # Optional (read with getattr, default 0): ``time_limit_check_interval`` - limits are
    # enforced only at multiples of it on the run's clock (Slurm: 30 s); 0 = exactly.
    # A policy may also return ``WakeAt(t)`` among its decisions to be called again at ``t``.
    # Time sharing: ``Start(..., suspended=True)``, ``Suspend`` and ``Resume`` move jobs between
    # RUNNING and SUSPENDED (GPUs and memory kept, CPUs given back, no progress, time limit
    # stopped); while any job is SUSPENDED the policy is called at every tick and event.

    def decide(self, snapshot: Snapshot) -> list[Decision]:
        ...


PolicyFactory = Callable[[Pool, dict], Policy]
_REGISTRY: dict[str, tuple[PolicyFactory, str]] = {}


def check_options(policy: str, options: dict, known: set[str] | frozenset[str]) -> None:
    """Refuse options a policy does not have, naming them and the ones it has: a misspelt
    option silently ignored would change a comparison without anyone noticing."""
    unknown = set(options) - set(known)
    if unknown:
        raise PolicyOptionError(f"policy {policy}: unknown options {sorted(unknown)}; known: {sorted(known)}")


def register(name: str, description: str) -> Callable[[PolicyFactory], PolicyFactory]:
    """Class/function decorator: make a policy selectable as ``--policy NAME``."""

    def wrap(factory: PolicyFactory) -> PolicyFactory:
        _REGISTRY[name] = (factory, description)
        return factory

    return wrap


#: Built-in policies in the order `compare` runs and lists them (baselines first).
BUILTIN_ORDER = ("fifo", "first-fit", "slurm", "kueue-classic", "kueue", "kueue-gang", "bridge", "operator")


def _load_builtin() -> None:
    # Importing the modules runs their @register decorators.
    import gpupool.policy.fifo  # noqa: F401
    import gpupool.policy.kueue  # noqa: F401
    import gpupool.policy.slurm  # noqa: F401
    import gpupool.policy.bridge, gpupool.policy.operator  # noqa: F401


def registered() -> dict[str, str]:
    """Policy name -> one-line description: built-ins in BUILTIN_ORDER, then others by name
    (a fixed order, whatever order modules happened to be imported in)."""
    _load_builtin()
    rank = {name: i for i, name in enumerate(BUILTIN_ORDER)}
    names = sorted(_REGISTRY, key=lambda n: (rank.get(n, len(rank)), n))
    return {name: _REGISTRY[name][1] for name in names}


def make_policy(name: str, pool: Pool, options: dict | None = None) -> Policy:
    _load_builtin()
    if name not in _REGISTRY:
        known = ", ".join(sorted(_REGISTRY))
        raise GpupoolError(f"unknown policy {name!r}; registered policies: {known}")
    factory, _ = _REGISTRY[name]
    return factory(pool, dict(options or {}))
