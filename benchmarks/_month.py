"""What the month probes share: the pool and synthetic spec they run, the cut on submit time, and
putting the policy's functions back after wrapping them.

Why a module: ``probe_days.py`` and ``probe_far_plans.py`` measure the same Helios-like month on
the same pool, so their ``--pool``/``--spec`` options and the way they keep the jobs submitted
before a cut stay one piece (a cut keeps the busy stretch as it is, where the spec's
``duration`` would draw another workload).
"""
from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from gpupool.formats.pool_dir import load_pool  # noqa: E402
from gpupool.workload.synthetic import generate, parse_synthetic_spec  # noqa: E402

MONTH = "synthetic:month?seed=3&median=80"


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """``--pool`` and ``--spec``, with the large pool and the month as defaults."""
    ap.add_argument("--pool", type=Path, default=REPO / "examples" / "large-pool",
                    help="pool directory (default examples/large-pool)")
    ap.add_argument("--spec", default=MONTH, help="synthetic workload spec (default the Helios-like month)")


def workloads(pool_dir: Path, spec: str, submitted_before_s: float | None = None):
    """The pool and the spec's jobs, only those submitted before ``submitted_before_s`` (seconds)
    when given (dependencies point at earlier submissions, so none is cut off)."""
    pool = load_pool(pool_dir)
    wls = generate(pool, parse_synthetic_spec(spec))
    if submitted_before_s is not None:
        wls = [w for w in wls if w.submit_time < submitted_before_s]
    return pool, wls


@contextlib.contextmanager
def wrapped(replacements: dict[tuple[object, str], Callable]) -> Iterator[None]:
    """Each ``(owner, name)`` set to its replacement while the block runs, and every original put
    back when it ends, however it ends (a probe stops a simulation by raising from a wrapper)."""
    originals = {key: getattr(*key) for key in replacements}
    for (owner, name), fn in replacements.items():
        setattr(owner, name, fn)
    try:
        yield
    finally:
        for (owner, name), fn in originals.items():
            setattr(owner, name, fn)
