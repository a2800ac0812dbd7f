"""The job queue (spec §1.3): one record per (pending job, partition), sorted by
PriorityTier, priority, submit time, then job id (array job id, task id)."""
from __future__ import annotations

import weakref
from operator import attrgetter

from gpupool.engine.decisions import Reject
from gpupool.policy.dependencies import (
    NEVER,
    SATISFIED,
    dependency_state,
    parse_dependency,
)


class Record:
    __slots__ = ("job", "key", "part", "prio")

    def __init__(self, key, job, part, prio) -> None:
        self.key = key
        self.job = job
        self.part = part
        self.prio = prio


def dependency_time(job, jobs) -> float:
    """When a satisfied dependency became satisfied (for the age factor's accrue time)."""
    _, terms = parse_dependency(job.wl.dependency)
    t = 0.0
    for kind, ids in terms:
        for i in ids:
            dep = jobs.get(i)
            if dep is None:
                continue
            when = dep.first_start if kind == "after" else dep.end
            if when is not None and when > t:
                t = when
    return t


class _Static:
    """What a job's queue records take from the job and the partitions' limits alone (per
    partition whether its limits admit the job; its array ids), computed once per job and
    run: the queue is rebuilt at every scheduler instant and a deep queue holds the same jobs
    for hours. ``parts`` is the partition table it was computed against."""

    __slots__ = ("jobs", "parts", "recs", "states")

    def __init__(self, parts) -> None:
        self.parts = parts
        self.jobs: dict[int, tuple] = {}
        #: job id -> (eligible, submit, priority period or None, its records, whether its
        #: priority is fixed): the records a job without dependencies got at the last build,
        #: valid while its eligibility, submit time, priority period (unless its priority is
        #: fixed) and the partitions' states (``states``) are unchanged (multifactor priorities
        #: are fixed within a PriorityCalcPeriod), so a deep queue is not rebuilt record by
        #: record at each instant
        self.recs: dict[int, tuple] = {}
        self.states: tuple = ()


_STATIC: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # policy -> _Static


def _static_of(pol) -> _Static:
    st = _STATIC.get(pol)
    if st is None or st.parts is not pol.parts:
        st = _STATIC[pol] = _Static(pol.parts)
    return st


def _job_static(pol, job) -> tuple:
    """(per partition of the job: (its info, why its limits refuse the job or None)), array
    job id, task id). The partition's state is read at each build, the rest is fixed."""
    req = pol.req(job)
    per_part = []
    for pname in req.parts:
        info = pol.parts[pname]
        why = None
        if info.max_time is not None and req.time_limit is not None and req.time_limit > info.max_time:
            why = "PartitionTimeLimit"
        else:
            part = info.part
            if (part.max_nodes is not None and req.nodes > part.max_nodes) or (
                    part.min_nodes is not None and req.nodes < part.min_nodes):
                why = "PartitionNodeLimit"
        per_part.append((info, why))
    wl = job.wl
    arr = wl.array_job_id if wl.array_job_id is not None else job.id
    task = wl.array_task_id if wl.array_task_id is not None else 0
    return tuple(per_part), arr, task


def build(cy) -> list[Record]:
    pol = cy.pol
    now = cy.now
    jobs = cy.snap.jobs
    st_all = _static_of(pol)
    static = st_all.jobs
    pending = cy.snap.pending
    states = tuple(info.state for info in pol.parts.values())
    cached = st_all.recs
    if states != st_all.states or len(cached) > 2 * len(pending) + 1024:
        if states != st_all.states:
            cached.clear()
        else:  # drop jobs no longer pending
            st_all.recs = cached = {jid: c for jid, c in cached.items() if jid in pending}
        st_all.states = states
    accrue_of = cy.accrue
    priority = pol.priority
    # the policy's memos read directly (a deep queue asks them for every job at every instant)
    verdicts = pol._verdict
    memo = pol.priority_memo(now)
    period = pol._prio_T if memo is not None else None
    recs: list[Record] = []
    extend = recs.extend
    for job in pending.values():
        # A job with records at the last build and the same eligibility, submit time and
        # priority period gets them again: it passed every check below then, and none of them
        # can have changed (its verdict and workload are fixed, ``now`` only grows, jobs with
        # dependencies are never kept, and a partition state change clears the cache).
        c = cached.get(job.id)
        if c is not None and c[0] == job.eligible and c[1] == job.submit and (c[2] == period or c[4]):
            accrue_of[job.id] = c[0]
            extend(c[3])
            continue
        why = verdicts.get(job.id, _UNSET)
        if why is _UNSET:
            why = pol.submit_verdict(job)
        if why is not None:
            cy.out.append(Reject(job.id, why))
            continue
        wl = job.wl
        if wl.priority == 0:
            cy.reason(job, "JobHeldUser")
            continue
        if job.eligible > now:
            cy.reason(job, "BeginTime")
            continue
        accrue = job.eligible
        if wl.dependency:
            dep = dependency_state(job, jobs)
            if dep == NEVER:
                if pol.s.kill_invalid_depend:
                    cy.out.append(Reject(job.id, "DependencyNeverSatisfied"))
                else:
                    cy.reason(job, "DependencyNeverSatisfied")
                continue
            if dep != SATISFIED:
                cy.reason(job, "Dependency")
                continue
            accrue = max(accrue, dependency_time(job, jobs))
        st = static.get(job.id)
        if st is None:
            st = static[job.id] = _job_static(pol, job)
        per_part, arr, task = st
        bad = None
        usable_parts = []
        for info, why in per_part:
            if info.state != "UP":
                bad = bad or ("PartitionDown" if info.state == "DOWN" else "PartitionInactive")
            elif why is not None:
                bad = bad or why
            else:
                usable_parts.append(info)
        if not usable_parts:
            cy.reason(job, bad or "PartitionConfig")
            continue
        accrue_of[job.id] = accrue
        submit = job.submit
        jid = job.id
        fixed = wl.priority is not None or memo is None
        mine = []
        for info in usable_parts:
            prio = None if fixed else memo.get((jid, info.name, submit, accrue))
            if prio is None:
                prio = priority(job, info, accrue, now)
            mine.append(Record((-info.tier, -prio, submit, arr, task, jid), job, info, prio))
        extend(mine)
        if not wl.dependency:
            cached[jid] = (accrue, submit, period, mine, wl.priority is not None)
    recs.sort(key=_KEY)
    return recs


_KEY = attrgetter("key")
_UNSET = object()
