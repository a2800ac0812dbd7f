"""Integer resource quantities shared by both worlds.

Inside gpupool every quantity is an integer in one canonical unit, so the engine and the
policies compare and add plain ints: CPU in millicores, memory in MiB, devices in counts.
Parsing of suffixed quantities (``500m``, ``2048Gi``, Slurm ``1000000`` MB) lives in
``gpupool.formats.quantity``.
"""
from __future__ import annotations

CPU = "cpu"
MEMORY = "memory"
GPU = "nvidia.com/gpu"

#: Canonical unit of each well-known resource, for messages and docs.
UNITS = {CPU: "millicores", MEMORY: "MiB", GPU: "devices"}


def add(a: dict[str, int], b: dict[str, int]) -> dict[str, int]:
    """Sum two resource maps (a new dict; inputs untouched)."""
    out = dict(a)
    for name, value in b.items():
        out[name] = out.get(name, 0) + value
    return out


def scale(a: dict[str, int], factor: int) -> dict[str, int]:
    """Multiply every quantity by an integer factor (pod count × per-pod requests)."""
    return {name: value * factor for name, value in a.items()}


def fits(request: dict[str, int], free: dict[str, int]) -> bool:
    """True when every requested quantity is available in ``free``."""
    return all(free.get(name, 0) >= value for name, value in request.items() if value)
