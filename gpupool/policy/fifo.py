"""Baseline policies: strict FIFO and greedy first fit.

``fifo``: jobs start in submission order; the first job that does not fit blocks every job
behind it (no backfill). ``first-fit``: the same placement, but a job that does not fit is
skipped and later jobs may start. Both place pods first-fit over nodes in pool order, lowest
free GPU index first, honour partitions, GPU types, node selectors and dependencies, and
reject a job the pool could never run.
"""
from __future__ import annotations

from gpupool.engine.decisions import Pending, Reject, Start
from gpupool.engine.policy_api import register
from gpupool.engine.snapshot import Snapshot
from gpupool.model.pool import Pool
from gpupool.policy.dependencies import NEVER, SATISFIED, dependency_state
from gpupool.policy.placement import CandidateNodes, Scratch, first_fit, never_fits


class FifoPolicy:
    """First come, first served over one queue; ``strict`` makes the head block the rest."""

    tick_interval = None
    over_time_limit = 0.0

    def __init__(self, pool: Pool, options: dict, *, strict: bool, name: str) -> None:
        self.pool = pool
        self.strict = strict
        self.name = name
        self._candidates: CandidateNodes | None = None
        unknown = set(options) - {"max_failed_shapes"}
        if unknown:
            raise ValueError(f"policy {name}: unknown options {sorted(unknown)}")
        self._max_failed = int(options.get("max_failed_shapes", 16))

    def decide(self, snap: Snapshot) -> list:
        if self._candidates is None or self._candidates.nodes is not snap.nodes:
            self._candidates = CandidateNodes(self.pool, snap.nodes)
        candidates = self._candidates
        scratch = None
        out: list = []
        now = snap.now
        failed: list[tuple] = []  # shapes that did not fit in this pass (greedy mode)
        for job in snap.pending.values():
            if job.eligible > now:
                continue
            wl = job.wl
            if wl.dependency:
                dep = dependency_state(job, snap.jobs)
                if dep == NEVER:
                    out.append(Reject(job.id, "DependencyNeverSatisfied"))
                    continue
                if dep != SATISFIED:
                    if job.reason != "Dependency":
                        out.append(Pending(job.id, "Dependency"))
                    continue
            shape = _shape(wl)
            if failed and any(_dominates(shape, f) for f in failed):
                continue
            if scratch is None:
                scratch = Scratch(snap.nodes)
            placement = first_fit(wl, candidates, scratch)
            if placement is None:
                why = never_fits(wl, candidates)
                if why is not None:
                    out.append(Reject(job.id, why))
                    continue
                if job.reason != "Resources":
                    out.append(Pending(job.id, "Resources"))
                if self.strict:
                    break
                if len(failed) < self._max_failed:
                    failed.append(shape)
                continue
            scratch.take(placement)
            out.append(Start(job.id, placement))
        return out


def _shape(wl) -> tuple:
    """What decides whether a single-pod-set job fits, for the skip-if-larger memo."""
    if len(wl.pod_sets) != 1:
        return (id(wl),)
    ps = wl.pod_sets[0]
    return (wl.partition, ps.gpu_type, ps.node_selector, ps.one_per_node, ps.exclusive,
            ps.count, ps.gpus, ps.cpu_m, ps.memory_mib)


def _dominates(shape: tuple, failed: tuple) -> bool:
    """True when ``shape`` needs at least what ``failed`` needed on the same nodes."""
    if len(shape) == 1 or len(failed) == 1:
        return shape == failed
    return shape[:5] == failed[:5] and all(a >= b for a, b in zip(shape[5:], failed[5:]))


@register("fifo", "strict FIFO, first fit, lowest GPU index first (baseline)")
def _fifo(pool: Pool, options: dict) -> FifoPolicy:
    return FifoPolicy(pool, options, strict=True, name="fifo")


@register("first-fit", "FIFO order, but jobs that fit start past a blocked head (no reservations)")
def _first_fit(pool: Pool, options: dict) -> FifoPolicy:
    return FifoPolicy(pool, options, strict=False, name="first-fit")
