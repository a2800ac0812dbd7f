"""The job queue (spec §1.3): one record per (pending job, partition), sorted by
PriorityTier, priority, submit time, then job id (array job id, task id)."""
from __future__ import annotations

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


def build(cy) -> list[Record]:
    pol = cy.pol
    now = cy.now
    jobs = cy.snap.jobs
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
        req = pol.req(job)
        bad = None
        usable_parts = []
        for pname in req.parts:
            info = pol.parts[pname]
            if info.state != "UP":
                bad = bad or ("PartitionDown" if info.state == "DOWN" else "PartitionInactive")
                continue
            tl = pol.time_limit(job, info)
            if info.max_time is not None and req.time_limit is not None and req.time_limit > info.max_time:
                bad = bad or "PartitionTimeLimit"
                continue
            part = info.part
            if (part.max_nodes is not None and req.nodes > part.max_nodes) or (
                    part.min_nodes is not None and req.nodes < part.min_nodes):
                bad = bad or "PartitionNodeLimit"
                continue
            usable_parts.append((info, tl))
        if not usable_parts:
            cy.reason(job, bad or "PartitionConfig")
            continue
        cy.accrue[job.id] = accrue
        arr = wl.array_job_id if wl.array_job_id is not None else job.id
        task = wl.array_task_id if wl.array_task_id is not None else 0
        for info, tl in usable_parts:
            prio = pol.priority(job, info, accrue, now)
            recs.append(Record((-info.tier, -prio, job.submit, arr, task, job.id), job, info, prio))
    recs.sort(key=lambda r: r.key)
    return recs
