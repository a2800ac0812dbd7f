"""slurmctld's backfill map (22.05 backfill.c ``node_space``): time slots in order, each with the
nodes no planned job holds during it.

Why a map of slots rather than a list of reservations: where a job blocked by reservations tries
again (TRY_LATER's ``later_start``) depends on which slot follows which, and the map splits and
merges slots in its own way (a reservation starting where the map starts leaves an empty slot
in front; at most one pair of equal neighbours is merged per reservation), so the same
reservations can leave different slot boundaries. Checked against a real 22.05.8 in the
differential replay (docs/differential.md, finding 20).

Slot ``k`` is ``[begins[k], ends[k])``; node sets are bit sets (node index ``i`` is bit ``i``).
"""
from __future__ import annotations

import bisect


class NodeSpace:
    __slots__ = ("avail", "begins", "ends", "resv")

    def __init__(self, begin: float, end: float, nodes: int) -> None:
        self.begins: list[float] = [begin]
        self.ends: list[float] = [end]
        self.avail: list[int] = [nodes]
        #: (begin, end, nodes, job id) of every reservation, for records and reports
        self.resv: list[tuple[float, float, frozenset, int]] = []

    def _split(self, k: int, at: float) -> None:
        """Slot ``k`` ends at ``at``; a copy of it takes over from there."""
        self.begins.insert(k + 1, at)
        self.ends.insert(k + 1, self.ends[k])
        self.avail.insert(k + 1, self.avail[k])
        self.ends[k] = at

    def add(self, start: float, end: float, nodes: frozenset, job_id: int, res: float) -> None:
        """Reserve ``nodes`` over ``[start, end)`` as slurmctld's ``_add_reservation`` does: at
        least ``res`` long and not before the map; split at the first slot ending after
        ``start`` (none when one ends exactly there), take the nodes out of the following slots
        up to ``end`` (split there), then merge the first pair of equal neighbours from the slot
        before the first split on, up to the slot after the reservation."""
        begins, ends, avail = self.begins, self.ends, self.avail
        start = max(start, begins[0])
        if end < start + res:
            end = start + res
        self.resv.append((start, end, nodes, job_id))
        mask = 0
        for n in nodes:
            mask |= 1 << n
        j = bisect.bisect_left(ends, start)  # the first slot not ending before ``start``
        if j >= len(ends):
            return  # starts after the map's end
        one_before = j - 1 if j else 0
        if ends[j] > start:
            self._split(j, start)
        one_after = None
        while True:
            j += 1
            if j >= len(ends):
                break
            if end < ends[j]:
                self._split(j, end)
            avail[j] &= ~mask
            if end == ends[j]:
                if j + 1 < len(ends):
                    one_after = j + 1
                break
        i = one_before
        while i != one_after and i + 1 < len(ends):
            if avail[i] == avail[i + 1]:
                ends[i] = ends[i + 1]
                del begins[i + 1], ends[i + 1], avail[i + 1]
                break
            i += 1

    def window(self, start_res: float, end_time: float, nodes: int) -> tuple[int, float]:
        """The nodes of ``nodes`` free in every slot that overlaps ``[start_res, end_time]``, and
        ``later_start``: the end of the first slot (from ``start_res`` on, up to the first slot
        beginning after ``end_time``) whose successor frees a node of ``nodes`` that the slots
        so far did not all leave free; 0 when there is none (then a job that finds too few
        nodes gets no plan in this cycle)."""
        begins, ends, avail = self.begins, self.ends, self.avail
        last = len(ends) - 1
        acc = nodes
        later = 0.0
        for k in range(bisect.bisect_right(ends, start_res), last + 1):
            a = avail[k]
            if not later and k < last and (nodes & avail[k + 1]) & ~(acc & a):
                later = ends[k]
            if begins[k] > end_time:
                break
            acc &= a
        return acc, later

    def overlaps(self, nodes: int, start: float, end: float) -> bool:
        """Whether a slot overlapping ``(start, end)`` holds one of ``nodes``."""
        begins, ends, avail = self.begins, self.ends, self.avail
        for k in range(bisect.bisect_right(ends, start), len(ends)):
            if begins[k] >= end:
                break
            if nodes & ~avail[k]:
                return True
        return False
