"""CPU sharing without gang scheduling (OverSubscribe=FORCE:N, or YES:N between jobs that ask
``--oversubscribe``): the co-allocation row each sharing job holds on each node, kept from its
start to its end.

cons_tres gives every job its own cores, in one of up to N rows per partition; gpupool counts
CPUs instead. Counts stay sound only if a job keeps its row: packing the rows again by count
at every pass would put two jobs that hold the same CPUs into one row, and the partition
would seem to hold their CPUs twice (or idle CPUs would seem taken). So the rows are
remembered per job and node:

* a job placed on idle CPUs joins, on each of its nodes, the row that is fullest there, so the
  partition holds exactly its CPUs more;
* a co-allocated job joins the row it was placed in (one row on all its nodes, as in cons_tres);
* the CPUs a partition holds on a node are its fullest row's there; when a job ends, its row
  shrinks and the node gets back what the fullest row lost.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping

from gpupool.policy.slurm.gang import row_max


class ShareRows:
    """Row per node of every sharing job a policy has started (or found running)."""

    __slots__ = ("row_of",)

    def __init__(self) -> None:
        self.row_of: dict[int, dict[int, int]] = {}

    def rows(self, jobs: Iterable[tuple[int, Mapping[int, int]]]) -> list[dict[int, int]]:
        """The rows (per row: node -> CPUs) of ``jobs`` (id, CPUs per node). A job the policy
        did not start (adopted after a restart) is put in the fullest row of each of its nodes,
        as if it had taken idle CPUs, and remembered."""
        rows: list[dict[int, int]] = []
        for jid, cpus in jobs:
            where = self.row_of.get(jid)
            if where is None:
                where = self.row_of[jid] = fullest_rows(rows, cpus)
            add(rows, cpus, where)
        return rows

    def forget(self, alive: Iterable[int]) -> None:
        """Drop the jobs that no longer hold an allocation."""
        keep = set(alive)
        for jid in [j for j in self.row_of if j not in keep]:
            del self.row_of[jid]


def fullest_rows(rows: list[dict[int, int]], cpus: Mapping[int, int]) -> dict[int, int]:
    """Per node of ``cpus``: the index of the fullest row there (the lowest on a tie; 0 when the
    partition has no row yet)."""
    out = {}
    for n in cpus:
        best, best_c = 0, -1
        for i, row in enumerate(rows):
            c = row.get(n, 0)
            if c > best_c:
                best, best_c = i, c
        out[n] = best
    return out


def add(rows: list[dict[int, int]], cpus: Mapping[int, int], where: Mapping[int, int]) -> None:
    """Put ``cpus`` (node -> CPUs) into the rows ``where`` names per node (new rows as needed)."""
    for n, c in cpus.items():
        r = where[n]
        while len(rows) <= r:
            rows.append({})
        rows[r][n] = rows[r].get(n, 0) + c


def releases_in_end_order(rows: list[dict[int, int]], jobs: Mapping[int, tuple[Mapping[int, int], Mapping[int, int]]],
                          ends: Iterable[int]) -> dict[int, dict[int, int]]:
    """CPUs per node each job gives back to the idle ones when the jobs end in the order
    ``ends``: ``jobs`` maps a job to (its CPUs per node, its row per node), ``rows`` are the
    rows they make up (a private copy is changed). A node gets back what its fullest row lost."""
    rows = [dict(r) for r in rows]
    held = row_max(rows)
    out: dict[int, dict[int, int]] = {}
    for jid in ends:
        got = jobs.get(jid)
        if got is None:
            continue
        cpus, where = got
        for n, c in cpus.items():
            rows[where[n]][n] -= c
        after = row_max(rows)
        out[jid] = {n: held.get(n, 0) - after.get(n, 0) for n in cpus}
        held = after
    return out
