"""Resource quantities at the edges: Kubernetes suffixes and Slurm units, to canonical ints.

Kubernetes writes ``500m``, ``2``, ``2048Gi``, ``1e3``; Slurm writes memory in MB by default
with optional K/M/G/T suffixes (``1000000``, ``32G``). Inside gpupool CPU is millicores,
memory MiB and devices counts (``gpupool.model.resources``). Rounding is up, as Kubernetes
rounds a request to the unit it can allocate.
"""
from __future__ import annotations

import math
import re
from fractions import Fraction

_DECIMAL = {"n": Fraction(1, 10**9), "u": Fraction(1, 10**6), "m": Fraction(1, 1000), "": Fraction(1),
            "k": Fraction(10**3), "M": Fraction(10**6), "G": Fraction(10**9), "T": Fraction(10**12),
            "P": Fraction(10**15), "E": Fraction(10**18)}
_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_KUBE_RE = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+))(?:(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)|[eE]([+-]?\d+))?$")
_MIB = 2**20


class QuantityError(ValueError):
    """A quantity string that is not a Kubernetes or Slurm quantity; the text says which."""


def parse_kube_quantity(text: str | int | float) -> Fraction:
    """Parse a Kubernetes quantity to an exact number of base units (cores, bytes, devices)."""
    if isinstance(text, bool):
        raise QuantityError(f"expected a quantity, got {text!r}")
    if isinstance(text, int):
        return Fraction(text)
    if isinstance(text, float):
        return Fraction(str(text))
    s = str(text).strip()
    m = _KUBE_RE.match(s)
    if not m:
        raise QuantityError(
            f"expected a Kubernetes quantity such as '500m', '4', '2048Gi' or '1e3', got {text!r}"
        )
    number = Fraction(m.group(1))
    suffix, exponent = m.group(2), m.group(3)
    if exponent is not None:
        return number * Fraction(10) ** int(exponent)
    if suffix in _BINARY:
        return number * _BINARY[suffix]
    return number * _DECIMAL[suffix or ""]


def _ceil(value: Fraction) -> int:
    return math.ceil(value)


def cpu_millicores(text: str | int | float) -> int:
    """``"500m"`` -> 500, ``"2"`` -> 2000."""
    return _ceil(parse_kube_quantity(text) * 1000)


def memory_mib(text: str | int | float) -> int:
    """Kubernetes memory quantity (bytes with suffixes) -> MiB, rounded up."""
    return _ceil(parse_kube_quantity(text) / _MIB)


def count(text: str | int | float) -> int:
    """A device or extended-resource count; must be a whole number."""
    value = parse_kube_quantity(text)
    if value.denominator != 1:
        raise QuantityError(f"expected a whole number of devices, got {text!r}")
    return int(value)


def kube_resource(name: str, text: str | int | float) -> int:
    """Convert one Kubernetes resource quantity to gpupool's canonical unit for ``name``."""
    if name == "cpu":
        return cpu_millicores(text)
    if name in ("memory", "ephemeral-storage") or name.startswith("hugepages-"):
        return memory_mib(text)
    return count(text)


def format_cpu(millicores: int) -> str:
    """Canonical millicores -> Kubernetes text (``2`` or ``500m``)."""
    return str(millicores // 1000) if millicores % 1000 == 0 else f"{millicores}m"


def format_memory(mib: int) -> str:
    """Canonical MiB -> Kubernetes text using the largest exact binary suffix."""
    for suffix, factor in (("Ti", 2**20), ("Gi", 2**10)):
        if mib % factor == 0 and mib:
            return f"{mib // factor}{suffix}"
    return f"{mib}Mi"


_SLURM_MEM_RE = re.compile(r"^(\d+(?:\.\d+)?)([KMGTkmgt]?)[Bb]?$")
_SLURM_MEM_FACTOR = {"": 1, "M": 1, "K": Fraction(1, 1024), "G": 1024, "T": 1024 * 1024}


def slurm_memory_mib(text: str | int) -> int:
    """Slurm memory (default unit MB = MiB; suffixes K, M, G, T) -> MiB, rounded up."""
    s = str(text).strip()
    m = _SLURM_MEM_RE.match(s)
    if not m:
        raise QuantityError(f"expected a Slurm memory size such as '1000000', '32G' or '512M', got {text!r}")
    factor = _SLURM_MEM_FACTOR[m.group(2).upper()]
    return _ceil(Fraction(m.group(1)) * factor)
