"""The engine's notion of time, behind an interface so a wall clock can replace it later.

The simulation's clock is virtual: the engine jumps it to the time of the next event
(``advance``). A live mode will supply a clock whose ``now()`` reads the wall clock (in seconds
from the run's start) and whose ``advance`` waits until then; the engine's transitions are the same.
"""
from __future__ import annotations

from typing import Protocol


class Clock(Protocol):
    def now(self) -> float:
        """Seconds since the start of the run."""
        ...

    def advance(self, t: float) -> None:
        """Move to time ``t`` (never backwards)."""
        ...


class VirtualClock:
    """Simulated time: only the engine moves it, from one event to the next."""

    __slots__ = ("t",)

    def __init__(self, t: float = 0.0) -> None:
        self.t = t

    def now(self) -> float:
        return self.t

    def advance(self, t: float) -> None:
        if t < self.t:
            raise ValueError(f"clock cannot go back from {self.t} to {t}")
        self.t = t
