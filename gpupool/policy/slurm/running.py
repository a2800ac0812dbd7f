"""Running jobs as the scheduler passes see them, kept from one ``decide`` call to the next.

Every pass (main, backfill, preemption) needs the running jobs in limit-end order: the
will-run test frees them in that order (spec §2.3). Building that list from the whole
snapshot on every call costs a time-limit lookup per running job per instant, and a month
of a busy pool has hundreds of thousands of instants with hundreds of jobs running. A job's
entry only changes when it starts, ends, or runs past its limit (then the time its resources
are expected back moves with ``now``), so the list is kept sorted and only those entries are
touched. The result is the same list a full rebuild gives, entry for entry.
"""
from __future__ import annotations

import bisect

from gpupool.policy.slurm import limits


class RunningIndex:
    """``(limit end, job id, placement, expected free time)`` of every running job, sorted.

    Ties on the limit end break by job id: slurmctld's will-run sorts its running jobs by end
    time alone, stably, from its job list, where jobs stand in the order they were created
    (a real 22.05.8 swept a later-ending job into a batch that way, docs/differential.md,
    finding 22). Array-task counts per array job ride along, since
    they change at the same moments, and so do the limit usage aggregates (jobs and TRES per
    QOS/user, association and account chain) when the pool enforces limits.
    """

    __slots__ = ("_counted", "_entries", "_key", "_moving", "_pol", "arrays", "usage")

    def __init__(self, pol) -> None:
        self._pol = pol
        self._entries: list[tuple] = []  # sorted (limit end, job id, placement, free_at)
        self._key: dict[int, tuple] = {}  # job id -> (start, placement, array job id, limit end)
        self.arrays: dict[int, int] = {}  # array job id -> running tasks
        self.usage: dict = {}  # limits.add_usage aggregates of the running jobs
        self._counted: dict[int, tuple] = {}  # job id -> (req, alloc, account chain, partition QOS) in usage
        #: jobs suspended at some point of their present run: a suspension moves their limit
        #: end on (spec §10), so their entries are recomputed at every call
        self._moving: set[int] = set()

    def update(self, active: dict, now: float, suspended: dict | None = None) -> list[tuple]:
        """Bring the index up to the snapshot's running jobs at ``now`` (``suspended``: those of
        them suspended now); returns the entries (the index's own list: copy it before
        changing it)."""
        key = self._key
        entries = self._entries
        if key.keys() != active.keys():
            for jid in key.keys() - active.keys():
                self._drop(jid)
            for jid in active.keys() - key.keys():
                self._add(active[jid], now)
        moving = self._moving
        if suspended:
            moving.update(suspended.keys())
        for jid in moving:
            self._refresh(active[jid], now)
        # Jobs past their limit end form a prefix of the list: their resources are expected
        # back a fixed time after ``now`` (KillWait + OverTimeLimit), so only they move.
        expected_end = self._pol.expected_end
        for i, entry in enumerate(entries):
            if entry[0] >= now:
                break
            free_at = expected_end(active[entry[1]], now)
            if free_at != entry[3]:
                entries[i] = (entry[0], entry[1], entry[2], free_at)
        return entries

    def _add(self, job, now: float) -> None:
        pol = self._pol
        lend = pol.limit_end(job, now)
        bisect.insort(self._entries, (lend, job.id, job.placement, pol.expected_end(job, now)))
        aid = job.wl.array_job_id
        self._key[job.id] = (job.start, job.placement, aid, lend)
        if aid is not None:
            self.arrays[aid] = self.arrays.get(aid, 0) + 1
        if pol.s.limits_enforced:
            req = pol.req(job)
            counted = (req, pol.alloc_of(job), pol.account_chain(req.account), pol.part_qos(job))
            self._counted[job.id] = counted
            limits.add_usage(self.usage, counted[0], counted[1], part_qos=counted[3])
            limits.add_account_usage(self.usage, counted[2], counted[1])

    def _refresh(self, job, now: float) -> None:
        """Recompute a suspended (or once suspended) job's entry, keeping its place in ties."""
        pol = self._pol
        start, placement, aid, lend = self._key[job.id]
        entries = self._entries
        del entries[bisect.bisect_left(entries, (lend, job.id))]
        lend = pol.limit_end(job, now)
        bisect.insort(entries, (lend, job.id, placement, pol.expected_end(job, now)))
        self._key[job.id] = (start, placement, aid, lend)

    def _drop(self, jid: int) -> None:
        _start, _placement, aid, lend = self._key.pop(jid)
        self._moving.discard(jid)
        # (limit end, job id) is unique and sorts just before the entry that starts with it
        del self._entries[bisect.bisect_left(self._entries, (lend, jid))]
        counted = self._counted.pop(jid, None)
        if counted is not None:
            limits.add_usage(self.usage, counted[0], counted[1], -1, part_qos=counted[3])
            limits.add_account_usage(self.usage, counted[2], counted[1], -1)
        if aid is not None:
            left = self.arrays[aid] - 1
            if left:
                self.arrays[aid] = left
            else:
                del self.arrays[aid]
