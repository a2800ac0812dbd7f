"""slurmctld's backfill map (22.05 backfill.c ``node_space``): time slots in order, each with the
nodes no planned job holds during it.

Why a map of slots rather than a list of reservations: where a job blocked by reservations tries
again (TRY_LATER's ``later_start``) depends on which slot follows which, and the map splits and
merges slots in its own way (a reservation starting where the map starts leaves an empty slot
in front; at most one pair of equal neighbours is merged per reservation), so the same
reservations can leave different slot boundaries. Checked against a real 22.05.8 in the
differential replay (docs/differential.md, finding 20).

Slot ``k`` is ``[begins[k], ends[k])``; node sets are bit sets (node index ``i`` is bit ``i``).
Slots are contiguous (``ends[k] == begins[k + 1]``); only the first may be empty.

What a backfill cycle may reuse: every ``add`` logs the begin of the first slot it may change
(``touched``), and every ``window`` or ``overlaps`` call the end of the last slot it read
(``reach``). A slot ending before a logged begin keeps its bounds, its nodes and its index, so
an answer that read only slots ending before every begin logged since is still the answer
(``stable_since``): a deep queue's records walk the same TRY_LATER steps over the early slots
again and again while reservations land later in the map.
"""
from __future__ import annotations

import bisect
import math
from functools import reduce
from operator import and_


#: per byte position and byte value: the node indices of its set bits (``bits``), for the first
#: 256 nodes (8k small tuples)
_BYTES: list[list[tuple[int, ...]]] = [
    [tuple(base + i for i in range(8) if value >> i & 1) for value in range(256)] for base in range(0, 256, 8)]


def bits(mask: int) -> list[int]:
    """The node indices set in ``mask``, lowest first: a table lookup per byte, since a cycle
    turns many usable-node bit sets into node sets (about 3× faster than testing each node)."""
    out: list[int] = []
    k = 0
    table = _BYTES
    while mask:
        if k >= len(table):  # beyond the table's nodes: bit by bit
            base = 8 * k
            while mask:
                low = mask & -mask
                out.append(base + low.bit_length() - 1)
                mask ^= low
            return out
        byte = mask & 255
        if byte:
            out += table[k][byte]
        mask >>= 8
        k += 1
    return out


class NodeSpace:
    __slots__ = ("avail", "begins", "ends", "reach", "records", "resv", "touched")

    def __init__(self, begin: float, end: float, nodes: int) -> None:
        self.begins: list[float] = [begin]
        self.ends: list[float] = [end]
        self.avail: list[int] = [nodes]
        #: (begin, end, nodes, job id) of every reservation, for records and reports
        self.resv: list[tuple[float, float, frozenset, int]] = []
        #: records slurmctld's map has used: one to start with, one more per split; a merge
        #: does not give one back (bf_node_space_size counts these)
        self.records = 1
        #: per ``add``, in order: the begin of the first slot it may have changed (inf: none)
        self.touched: list[float] = []
        #: the end of the last slot the latest ``window`` or ``overlaps`` call read
        self.reach: float = end

    def stable_since(self, version: int) -> float:
        """A time such that every slot ending before it is as it was when ``touched`` had
        ``version`` entries (bounds, nodes and index): the least begin logged since."""
        touched = self.touched
        return min(touched[version:]) if version < len(touched) else math.inf

    def _split(self, k: int, at: float) -> None:
        """Slot ``k`` ends at ``at``; a copy of it takes over from there."""
        self.records += 1
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
            self.touched.append(math.inf)
            return  # starts after the map's end
        one_before = j - 1 if j else 0
        # every change below is to slot ``one_before`` or later ones (splits insert after it,
        # merges start at it): the slots before it keep their bounds, nodes and indices
        self.touched.append(begins[one_before])
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
        k = bisect.bisect_right(ends, start_res)
        if k > last:  # the window starts after the map: nothing read but the last slot
            self.reach = ends[last]
            return acc, 0.0
        # Until ``later`` is found each slot also tests its successor; from there on the
        # slots up to the first one beginning after ``end_time`` only narrow ``acc``.
        while k < last:
            a = avail[k]
            if (nodes & avail[k + 1]) & ~(acc & a):
                if begins[k] > end_time:
                    self.reach = ends[k + 1]
                    return acc, ends[k]
                later = ends[k]
                acc &= a
                stop = bisect.bisect_right(begins, end_time, k + 1)  # first begin after end_time
                acc = reduce(and_, avail[k + 1:stop], acc)  # slots k+1 .. stop-1 (≤ last)
                # the last slot read: the one that stopped the walk, else the map's last
                self.reach = ends[stop + 1] if stop < last else ends[last]
                return acc, later
            if begins[k] > end_time:
                self.reach = ends[k + 1]
                return acc, 0.0
            acc &= a
            k += 1
        # the last slot: no successor to free a node
        if begins[k] <= end_time:
            acc &= avail[k]
        self.reach = ends[k]
        return acc, 0.0

    def overlaps(self, nodes: int, start: float, end: float) -> bool:
        """Whether a slot overlapping ``(start, end)`` holds one of ``nodes``."""
        begins, ends, avail = self.begins, self.ends, self.avail
        last = len(ends) - 1
        for k in range(bisect.bisect_right(ends, start), last + 1):
            if begins[k] >= end:
                self.reach = ends[k]
                return False
            if nodes & ~avail[k]:
                self.reach = ends[k]
                return True
        self.reach = ends[last]
        return False
