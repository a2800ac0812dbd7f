"""The backfill cycle (spec §2, errata §17.3).

A time map of whole-node reservations for pending jobs; running jobs are seen through the
free-resource state and their *time-limit* ends. Each queue record (up to bf_max_job_test)
looks for its earliest start: candidate nodes are the partition's nodes not reserved at any
moment of the run window; the "will run" test frees running jobs in end order until the job
fits. A job whose estimate is now starts (SchedBackfill); otherwise it gets a reservation of
its whole nodes over ``[floor(start/res)·res, floor((start+TL)/res)·res)`` unless it may only
be tested now (bf_min_prio_reserve, bf_min_age_reserve) or the start lies beyond bf_window.
"""
from __future__ import annotations

import bisect

from gpupool.policy.slurm.select import place

VIA_BACKFILL = "SchedBackfill"
MAX_TRIES = 64


class TimeMap:
    """Reservations as (begin, end, nodes, job id); a node is unusable for a window that
    overlaps any reservation holding it."""

    __slots__ = ("res", "resv")

    def __init__(self, res: int) -> None:
        self.resv: list[tuple[float, float, frozenset, int]] = []
        self.res = res

    def add(self, start: float, tl: float, nodes: frozenset, job_id: int) -> None:
        res = self.res
        begin = (start // res) * res
        end = ((start + tl) // res) * res
        if end > begin:
            self.resv.append((begin, end, nodes, job_id))

    def blocked(self, start: float, end: float) -> set[int]:
        out: set[int] = set()
        for b, e, nodes, _ in self.resv:
            if b < end and e > start:
                out |= nodes
        return out

    def ends_between(self, lo: float, hi: float) -> list[float]:
        return sorted({e for _, e, _, _ in self.resv if lo < e < hi})

    def later(self, start: float) -> float | None:
        """The next instant after ``start`` at which a reservation ends (availability grows)."""
        best = None
        for _, e, _, _ in self.resv:
            if e > start and (best is None or e < best):
                best = e
        return best


def will_run(wl, cand, usable, free, ends, start_res: float):
    """Earliest start ≥ ``start_res`` on ``usable`` nodes, freeing running jobs by limit end.

    ``ends`` is a sorted list of (end_time, seq, placement). Returns (estimate, placement)
    or (None, None).
    """
    pl = place(wl, cand, free, usable)
    if pl is not None:
        return start_res, pl
    scratch = free.copy()
    i = 0
    n = len(ends)
    while i < n and ends[i][0] <= start_res:
        scratch.give(ends[i][2])
        i += 1
    if i:
        pl = place(wl, cand, scratch, usable)
        if pl is not None:
            return start_res, pl
    while i < n:
        end, _, placement = ends[i]
        i += 1
        scratch.give(placement)
        if usable is not None and not any(p[0] in usable for p in placement):
            continue
        pl = place(wl, cand, scratch, usable)
        if pl is not None:
            return end, pl
    return None, None


def run(cy, records) -> None:
    pol = cy.pol
    s = pol.s
    now = cy.now
    tmap = TimeMap(s.bf_resolution)
    ends = cy.ends
    planned: dict[int, float] = {}
    tested = 0
    started = 0
    per_user: dict[str, int] = {}
    horizon = now + s.bf_window
    for rec in records:
        job = rec.job
        if job.id in cy.started or job.id in cy.skip or job.id in cy.preempting:
            continue
        if s.bf_max_job_test and tested >= s.bf_max_job_test:
            break
        if s.bf_max_job_start and started >= s.bf_max_job_start:
            break
        info = rec.part
        req = pol.req(job)
        if s.bf_max_job_user and per_user.get(req.user, 0) >= s.bf_max_job_user:
            continue
        if cy.limit_reason(job, info) is not None or cy.array_limit(job) is not None:
            continue
        tested += 1
        per_user[req.user] = per_user.get(req.user, 0) + 1
        tl = pol.plan_limit(job, info)
        test_only = (s.bf_min_prio_reserve and rec.prio < s.bf_min_prio_reserve) or (
            s.bf_min_age_reserve and now - cy.accrue.get(job.id, job.eligible) < s.bf_min_age_reserve)
        start_res = now
        for _ in range(MAX_TRIES):
            if start_res > horizon:
                break
            blocked = tmap.blocked(start_res, start_res + tl)
            usable = info.node_set - blocked if blocked else None
            later = tmap.later(start_res)
            if usable is not None and not usable:
                est, pl = None, None
            else:
                est, pl = will_run(job.wl, info.nodes, usable, cy.free, ends, start_res)
            if est is None:
                if later is None or test_only:
                    break
                start_res = later
                continue
            if est <= now:
                cy.start(job, pl, info, VIA_BACKFILL)
                started += 1
                tmap.add(now, tl, frozenset(p[0] for p in pl), job.id)
                break
            if later is not None and later < est and later > start_res:
                # Retry from an earlier reservation end only where the window gains a node;
                # with no new node the estimate cannot improve (spec §2.3 6f, same result).
                have = usable if usable is not None else info.node_set
                nxt = None
                for e in tmap.ends_between(start_res, est):
                    gained = info.node_set - tmap.blocked(e, e + tl)
                    if gained - have:
                        nxt = e
                        break
                start_res = nxt if nxt is not None else est
                continue
            nodes = frozenset(p[0] for p in pl)
            if nodes & tmap.blocked(est, est + tl):
                start_res = est
                continue
            planned[job.id] = est
            if not test_only and est <= horizon:
                tmap.add(est, tl, nodes, job.id)
            break
    pol.planned = planned
    if pol.record:
        pol.plan_log[now] = dict(planned)
        pol.resv_log[now] = [(jid, sorted(nodes), b, e) for b, e, nodes, jid in tmap.resv]


def insert_end(ends: list, end: float, seq: int, placement) -> None:
    bisect.insort(ends, (end, seq, placement), key=lambda x: (x[0], x[1]))
