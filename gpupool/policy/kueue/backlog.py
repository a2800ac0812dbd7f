"""The pending workloads of every ClusterQueue in heap order, kept across ``decide`` calls.

Kueue keeps one heap per ClusterQueue (spec §3.1) and only ever looks at its head. Re-sorting
every waiting job at every engine pass made a deep backlog cost O(P log P) per pass (Kueue's
perf baseline: ~8k waiting, 500 passes), so the policy keeps the order instead: a sorted list
per ClusterQueue of ``(order key, job id)``, fed from ``Snapshot.arrived`` and rebuilt from
``Snapshot.pending`` whenever a call was missed (``Snapshot.seq`` not consecutive). The order key
``(-priority, queue-order timestamp, job id)`` is a function of the workload (the timestamp
changes only on a PodsReadyTimeout eviction, which re-keys the entry: ``reorder``), so the lists
are a memo of the snapshot's pending jobs; jobs that are running, reserved, not yet eligible or
parked are skipped while walking, and entries of finished jobs are dropped when met.

It also holds what Kueue's queue manager keeps between cycles: the inadmissible set and its
requeue on capacity change (§3.2), the sticky preemptor (§3.1) and flavor-scan resume (§4.3).
A ClusterQueue with Admission Fair Sharing (§6.5) is ordered by LocalQueue usage first, which
changes between cycles, so its head is found by a scan (``_afs_head``) instead.
"""
from __future__ import annotations

from bisect import insort
from heapq import heapify, heappop, heapreplace

from gpupool.policy.kueue.records import KWorkload


class Backlog:
    """Per-ClusterQueue, per-shape sorted lists of waiting workloads, merged by a heap per pass.

    Kueue's SchedulingEquivalenceHashing parks every workload of a ClusterQueue that has the
    shape of a head found NoFit; on a deep backlog most entries are parked that way. Keeping one
    sorted list per (ClusterQueue, shape) lets a pass drop a parked shape's whole list at once
    instead of stepping over its entries, and a heap over the lists' first entries yields the
    ClusterQueue's head in heap order (§3.1)."""

    __slots__ = ("cycle", "generation", "heaps", "holding", "kwl", "parked", "parked_shapes", "scans", "seq",
                 "sticky", "subs")

    def __init__(self) -> None:
        #: ClusterQueue -> shape id -> sorted ``(order key, job key)``.
        self.subs: dict[str, dict[int, list[tuple[tuple, object]]]] = {}
        self.kwl: dict[object, KWorkload] = {}
        #: per pass: ClusterQueue -> heap of ``(order key, shape id, index in the shape's list)``.
        self.heaps: dict[str, list] = {}
        #: BestEffortFIFO's sticky preemptor (§3.1): ClusterQueue -> the key of the last workload
        #: of that CQ that issued preemptions; it is the CQ's head until it is admitted or gone.
        self.sticky: dict[str, object] = {}
        #: The inadmissible set (§3.2): parked job keys and parked shapes (SchedulingEquivalence-
        #: Hashing), each with the root of its cohort tree. They stay parked across passes until
        #: capacity may have changed in that tree: a workload holding quota there let go of it.
        self.parked: dict[object, str] = {}
        self.parked_shapes: dict[int, str] = {}
        #: job key -> cohort-tree root, for every workload holding quota at the end of the last pass.
        self.holding: dict[object, str] = {}
        #: Flavor-scan resume (§4.3): job key -> (last_index, cycle it was computed in, the
        #: tree's allocatable generation then); generations count capacity releases per tree.
        self.scans: dict[object, tuple[dict, int, int]] = {}
        self.generation: dict[str, int] = {}
        self.cycle = 0
        self.seq = -1

    def add(self, kwl: KWorkload, shape: int) -> None:
        """Queue ``kwl``; ``shape`` names its scheduling shape (equal shapes, equal outcomes)."""
        if kwl.key in self.kwl:
            return
        self.kwl[kwl.key] = kwl
        insort(self.subs.setdefault(kwl.cq, {}).setdefault(shape, []),
               ((-kwl.priority, kwl.created, kwl.uid), kwl.key))

    def reorder(self, kwl: KWorkload, shape: int) -> None:
        """Re-key ``kwl`` after its queue-order timestamp changed (``requeuingStrategy.timestamp:
        Eviction``, §7); a workload not in the backlog is added."""
        lst = self.subs.get(kwl.cq, {}).get(shape)
        if lst is not None:
            for i, (_, key) in enumerate(lst):
                if key == kwl.key:
                    del lst[i]
                    break
        self.kwl.pop(kwl.key, None)
        self.add(kwl, shape)

    def requeue_inadmissible(self, holding_now) -> set[str]:
        """Kueue's inadmissible-requeue on capacity change: every tree in which a workload that
        held quota at the end of the last pass holds none now gets its parked workloads back."""
        roots = {root for key, root in self.holding.items() if key not in holding_now}
        if roots:
            self.parked = {k: r for k, r in self.parked.items() if r not in roots}
            self.parked_shapes = {k: r for k, r in self.parked_shapes.items() if r not in roots}
        return roots

    def resume_for(self, heads, root_of: dict, preserve: bool) -> dict:
        """The ``last_index`` each head's flavor scan resumes from. It is discarded when the
        tree's allocatable generation grew since, unless (``FlavorFungibilityPreserveScanProgress``)
        it was computed in the current or the previous cycle."""
        self.cycle += 1
        out = {}
        scans = self.scans
        for kwl in heads:
            rec = scans.get(kwl.key)
            if rec is None:
                continue
            last, cycle, gen = rec
            grown = self.generation.get(root_of.get(kwl.cq, kwl.cq), 0) > gen
            if grown and not (preserve and cycle >= self.cycle - 1):
                del scans[kwl.key]
                continue
            out[kwl.key] = last
        return out

    def record_scans(self, entries, resume: dict, root_of: dict, preserve: bool) -> bool:
        """Remember where each entry's scan stopped; True when one moved on to untried flavors
        (the next cycle at this instant has something new to try)."""
        from gpupool.policy.kueue.cycle import ADMITTED, PREEMPTING, SKIPPED

        moved = False
        scans = self.scans
        for e in entries:
            key = e.wl.key
            if e.result in (ADMITTED, PREEMPTING) or e.assignment is None or (e.result == SKIPPED and not preserve):
                scans.pop(key, None)  # admitted, preemptions issued, or (gate off) contention
                continue
            last = e.assignment.last_index
            if any(i != -1 for i in last.values()) and resume.get(key) != last:
                moved = True
            # ``last`` is the assignment's own dict, built fresh per nomination and never changed.
            scans[key] = (last, self.cycle, self.generation.get(root_of.get(e.wl.cq, e.wl.cq), 0))
        return moved

    def start_pass(self) -> None:
        """Every ClusterQueue's walk starts at its first entry again (parked sets are per pass)."""
        heaps = {}
        for cq, by_shape in self.subs.items():
            heap = [(lst[0][0], shape, 0) for shape, lst in by_shape.items() if lst]
            heapify(heap)
            heaps[cq] = heap
        self.heaps = heaps

    def heads(self, usable, parked_shapes: set, afs: dict | None = None) -> list[KWorkload]:
        """One head per ClusterQueue: the first entry in heap order whose shape is not in
        ``parked_shapes`` and that ``usable(kwl)`` accepts.

        ``usable`` returns True (a head), False (skip it this pass) or None (the job is gone
        for good: its entry is removed). ``afs`` maps a ClusterQueue with Admission Fair Sharing
        to ``kwl -> its LocalQueue's usage``, which orders that queue before priority (§3.1)."""
        out = []
        kwls = self.kwl
        sticky = self.sticky
        for cq, heap in self.heaps.items():
            key = sticky.get(cq)
            if key is not None:
                kwl = kwls.get(key)
                ok = usable(kwl) if kwl is not None else None
                if ok:
                    out.append(kwl)
                    continue
                if ok is None:
                    del sticky[cq]
            by_shape = self.subs[cq]
            if afs is not None and cq in afs:
                head = self._afs_head(by_shape, usable, parked_shapes, afs[cq])
                if head is not None:
                    out.append(head)
                continue
            while heap:
                _, shape, i = heap[0]
                if shape in parked_shapes:  # the whole shape is inadmissible this pass
                    heappop(heap)
                    continue
                lst = by_shape[shape]
                key = lst[i][1]
                kwl = kwls[key]
                ok = usable(kwl)
                if ok:
                    out.append(kwl)
                    break
                if ok is None:
                    del lst[i]
                    del kwls[key]
                else:
                    i += 1
                if i < len(lst):
                    heapreplace(heap, (lst[i][0], shape, i))
                else:
                    heappop(heap)
        return out

    def _afs_head(self, by_shape: dict, usable, parked_shapes: set, usage) -> KWorkload | None:
        """The head of an Admission Fair Sharing queue: LocalQueue usage changes between cycles,
        so the order is not a pure function of the workload; every usable entry is compared by
        ``(usage of its LocalQueue, priority, timestamp, uid)`` (the queue is usually short)."""
        kwls = self.kwl
        best = None
        best_key = None
        for shape, lst in by_shape.items():
            if shape in parked_shapes:
                continue
            i = 0
            while i < len(lst):
                order, key = lst[i]
                kwl = kwls[key]
                ok = usable(kwl)
                if ok is None:
                    del lst[i]
                    del kwls[key]
                    continue
                i += 1
                if ok:
                    k = (usage(kwl), order)
                    if best_key is None or k < best_key:
                        best, best_key = kwl, k
        return best
