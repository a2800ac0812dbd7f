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

    __slots__ = ("jobs", "parts")

    def __init__(self, parts) -> None:
        self.parts = parts
        self.jobs: dict[int, tuple] = {}


_STATIC: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # policy -> _Static


def _static_of(pol) -> dict[int, tuple]:
    st = _STATIC.get(pol)
    if st is None or st.parts is not pol.parts:
        st = _STATIC[pol] = _Static(pol.parts)
    return st.jobs


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
    static = _static_of(pol)
    accrue_of = cy.accrue
    priority = pol.priority
    recs: list[Record] = []
    for job in cy.snap.pending.values():
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
        for info in usable_parts:
            prio = priority(job, info, accrue, now)
            recs.append(Record((-info.tier, -prio, submit, arr, task, jid), job, info, prio))
    recs.sort(key=_KEY)
    return recs


_KEY = attrgetter("key")
