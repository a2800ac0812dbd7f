"""Baseline policies: strict FIFO and greedy first fit.

``fifo``: jobs start in submission order; the first job that does not fit blocks every job
behind it (no backfill). ``first-fit``: the same placement, but a job that does not fit is
skipped and later jobs may start. Both place pods first-fit over nodes in pool order, lowest
free GPU index first, honour partitions, GPU types, node selectors and dependencies, and
reject a job the pool could never run.
"""
from __future__ import annotations

import math

from gpupool.engine.decisions import Pending, Reject, Start
from gpupool.engine.policy_api import check_options, register
from gpupool.engine.snapshot import CHANGED_ARRIVED, CHANGED_TICK, Snapshot
from gpupool.model.pool import Pool
from gpupool.policy.dependencies import NEVER, SATISFIED, dependency_state
from gpupool.policy.placement import CandidateNodes, LazyScratch, first_fit


#: Changes after which a pass that ended blocked still gives the same answer, as long as the
#: engine applied that pass's decisions verbatim: submissions join the back of the queue, and
#: ticks change nothing by themselves. Ends, node changes, requeues and eligibility do not.
_QUIET = CHANGED_ARRIVED | CHANGED_TICK


class _Memo:
    """What the previous pass of one run learnt, so the next pass can resume instead of rescanning.

    Valid only for the same snapshot (run), the very next ``decide`` call, the previous
    decisions applied unchanged, and nothing but submissions (and ticks) since: then every job
    the previous pass saw would get the same answer again (see ``FifoPolicy._resumable``), and
    only the new arrivals need a look.
    """

    __slots__ = ("snap", "seq", "out", "blocked", "failed", "dominated", "checked", "wake", "exact",
                 "dep_waiting", "shapes")

    def __init__(self, snap: Snapshot) -> None:
        self.snap = snap
        self.seq = -1
        self.out: list = []
        #: strict mode: the pass stopped at a head that did not fit.
        self.blocked = False
        #: greedy mode: shapes that did not fit, as the skip-if-larger memo had them at the end.
        self.failed: list[tuple] = []
        #: shapes some entry of ``failed`` dominates: skipped without a look (``failed`` only
        #: grows during a pass, so once dominated, dominated until the next full pass).
        self.dominated: set[tuple] = set()
        #: shape -> how many leading entries of ``failed`` were found not to dominate it.
        self.checked: dict[tuple, int] = {}
        #: the earliest time a job the pass skipped as not yet eligible becomes eligible.
        self.wake = math.inf
        #: False when a later pass could answer differently for a job already seen: a job left
        #: waiting on a dependency while this pass started or rejected jobs (which may satisfy
        #: it), or a multi-pod-set job that did not fit (first fit over several pod sets is not
        #: monotone in free resources, so less room later could still let it fit).
        self.exact = True
        #: some job seen since the last full pass waits on a dependency.
        self.dep_waiting = False
        #: job id -> shape, a per-run memo of ``_shape``.
        self.shapes: dict[int, tuple] = {}


class FifoPolicy:
    """First come, first served over one queue; ``strict`` makes the head block the rest."""

    tick_interval = None
    over_time_limit = 0.0

    def __init__(self, pool: Pool, options: dict, *, strict: bool, name: str) -> None:
        self.pool = pool
        self.strict = strict
        self.name = name
        self._candidates: CandidateNodes | None = None
        self._memo: _Memo | None = None
        check_options(name, options, {"max_failed_shapes"})
        self._max_failed = int(options.get("max_failed_shapes", 16))

    def decide(self, snap: Snapshot) -> list:
        if self._candidates is None or self._candidates.nodes is not snap.nodes:
            self._candidates = CandidateNodes(self.pool, snap.nodes)
        memo = self._memo
        if memo is not None and self._resumable(memo, snap):
            # Only jobs submitted since the previous pass can get a new answer.
            if self.strict and memo.blocked:
                out: list = []  # they queue behind the blocked head
            else:
                out = self._pass(snap, snap.arrived, memo)
        else:
            if memo is None or memo.snap is not snap:
                memo = self._memo = _Memo(snap)
            else:
                memo.failed = []
                memo.dominated = set()
                memo.checked = {}
                memo.wake = math.inf
                memo.exact = True
                memo.dep_waiting = False
            memo.blocked = False
            out = self._pass(snap, snap.pending.values(), memo)
        memo.seq = snap.seq
        memo.out = list(out)
        return out

    @staticmethod
    def _resumable(memo: _Memo, snap: Snapshot) -> bool:
        """True when a full pass would answer exactly what a pass over ``snap.arrived`` does.

        The previous full-or-resumed pass saw every other pending job against at least the
        room there is now (its own starts took the rest, and nothing was freed since): a job
        that did not fit then does not fit now, a skipped shape is still skipped, reasons were
        recorded, and eligibility and dependencies have not moved.
        """
        return (memo.snap is snap and snap.seq == memo.seq + 1 and memo.exact
                and not (snap.changed & ~_QUIET) and snap.now < memo.wake
                and snap.applied is not None and snap.applied == memo.out)

    def _pass(self, snap: Snapshot, jobs, memo: _Memo) -> list:
        """One FIFO pass over ``jobs`` (queue order), continuing ``memo``'s state."""
        candidates = self._candidates
        strict = self.strict
        scratch = None
        out: list = []
        now = snap.now
        failed = memo.failed  # shapes that did not fit in this pass (greedy mode)
        dominated, checked = memo.dominated, memo.checked
        shapes = memo.shapes
        for job in jobs:
            if job.eligible > now:
                if job.eligible < memo.wake:
                    memo.wake = job.eligible
                continue
            wl = job.wl
            if wl.dependency:
                dep = dependency_state(job, snap.jobs)
                if dep == NEVER:
                    out.append(Reject(job.id, "DependencyNeverSatisfied"))
                    continue
                if dep != SATISFIED:
                    memo.dep_waiting = True
                    if job.reason != "Dependency":
                        out.append(Pending(job.id, "Dependency"))
                    continue
            if not strict:
                shape = shapes.get(job.id)
                if shape is None:
                    shape = shapes[job.id] = _shape(wl)
                if shape in dominated:
                    continue
                k = checked.get(shape, 0)
                if k < len(failed):
                    # Thousands of queued jobs share a handful of shapes: compare each shape
                    # only with failed shapes it has not been compared with yet.
                    if any(_dominates(shape, f) for f in failed[k:]):
                        dominated.add(shape)
                        continue
                    checked[shape] = len(failed)
            if scratch is None:
                scratch = LazyScratch(snap.nodes)
            placement = first_fit(wl, candidates, scratch)
            if placement is None:
                why = candidates.never_fits(wl)
                if why is not None:
                    out.append(Reject(job.id, why))
                    continue
                if job.reason != "Resources":
                    out.append(Pending(job.id, "Resources"))
                if strict:
                    memo.blocked = True
                    break
                if len(wl.pod_sets) != 1:
                    # In strict mode the head is retried against exactly the room it failed
                    # on; here later jobs took room after it failed, so a non-monotone
                    # multi-pod-set placement could succeed on less.
                    memo.exact = False
                if len(failed) < self._max_failed:
                    failed.append(shape)
                continue
            scratch.take(placement)
            out.append(Start(job.id, placement))
        if memo.dep_waiting and any(type(d) is not Pending for d in out):
            memo.exact = False
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
