"""The job queue (spec §1.3): one record per (pending job, partition), sorted by
PriorityTier, priority, submit time, then job id (array job id, task id)."""
from __future__ import annotations

import bisect
import weakref
from operator import attrgetter

from gpupool.engine.decisions import Reject
from gpupool.policy.dependencies import (
    NEVER,
    SATISFIED,
    dependency_state,
    parse_dependency,
)
from gpupool.policy.slurm import limits, submit_check
from gpupool.policy.slurm.jobinfo import stored_node_counts
from gpupool.policy.slurm.limits import PRE_SELECT_REASONS
from gpupool.policy.slurm.main_sched import NODE_NOT_AVAIL, submit_unavailable_text


class Record:
    """One (job, partition) entry of the queue. A job's records are handed out again at every
    build while it waits (see ``_Static.recs``), so what a pass derives from a record alone
    may ride on it: ``bf`` is the backfill cycle's (``backfill._record_fixed``), ``sk`` the
    key its test "might it start now" is memoised by (``backfill._Startable``)."""

    __slots__ = ("bf", "job", "key", "part", "prio", "sk")

    def __init__(self, key, job, part, prio) -> None:
        self.key = key
        self.job = job
        self.part = part
        self.prio = prio
        self.bf: tuple | None = None
        self.sk: tuple | None = None


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

    __slots__ = ("jobs", "last", "last_ids", "mixed", "parts", "recs", "states")

    def __init__(self, parts) -> None:
        self.parts = parts
        self.jobs: dict[int, tuple] = {}
        #: job id -> its partitions' failures in list order, for a job some of whose
        #: partitions can run it and some not (``_mixed``; their reasons at every build)
        self.mixed: dict[int, tuple] = {}
        #: job id -> (eligible, submit, priority period or None, its records, whether its
        #: priority is fixed): the records a job without dependencies got at the last build,
        #: valid while its eligibility, submit time, priority period (unless its priority is
        #: fixed) and the partitions' states (``states``) are unchanged (multifactor priorities
        #: are fixed within a PriorityCalcPeriod), so a deep queue is not rebuilt record by
        #: record at each instant
        self.recs: dict[int, tuple] = {}
        self.states: tuple = ()
        #: the last build's records in queue order, and the ids of their jobs: a build keeps
        #: that order for the jobs whose records it takes over and inserts the others, instead
        #: of sorting thousands of records at every instant (see ``_order``)
        self.last: list[Record] = []
        self.last_ids: set[int] = set()


_STATIC: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # policy -> _Static


def _static_of(pol) -> _Static:
    st = _STATIC.get(pol)
    if st is None or st.parts is not pol.parts:
        st = _STATIC[pol] = _Static(pol.parts)
    return st


#: the reasons a partition's test gives (``job_limits_check``), which a later partition of the
#: job's list that takes it clears again (``part_policy_job_runnable_state``); PartitionConfig
#: and a partition's account or QOS refusal stay
_PART_REASONS = frozenset({"PartitionDown", "PartitionInactive", "PartitionNodeLimit", "PartitionTimeLimit",
                           "QOSUsageThreshold"})


def part_fail(info, why: str | None) -> str | None:
    """Why partition ``info`` cannot run the job now, or None: its size and time limits count
    only where it schedules jobs (``_part_access_check`` tests them under PARTITION_SCHED), and
    then come before its state, which alone holds a DOWN or INACTIVE partition's jobs (but for
    an account or QOS it refuses under EnforcePartLimits, PartitionConfig)."""
    if info.state in limits.SCHEDULED_STATES or why == "PartitionConfig":
        return why
    return "PartitionDown" if info.state == "DOWN" else "PartitionInactive"


def _tier_order(per_part) -> list:
    """The job's partitions in the order of slurmctld's list: PriorityTier first, highest first
    (the priority plugin sorts it), then as submitted."""
    return sorted(per_part, key=lambda p: -p[0].tier)


def _part_reason(per_part) -> str:
    """The reason of a job none of whose partitions can run it: the queue build tests each in
    the list's order, each failure setting the reason, so the last one's shows."""
    if not per_part:
        return "PartitionConfig"
    info, why = _tier_order(per_part)[-1]
    return part_fail(info, why) or "PartitionConfig"


def _mixed(per_part) -> tuple | None:
    """For a job some of whose partitions can run it and some not: each partition's failure
    (None: it can), in the list's order, which the queue build applies to the job's reason
    (``_build_reason``); else None."""
    fails = tuple(part_fail(info, why) for info, why in _tier_order(per_part))
    return fails if any(f is None for f in fails) and any(f is not None for f in fails) else None


def _build_reason(reason: str, fails: tuple) -> str:
    """The reason slurmctld's queue build leaves a job with (``_job_runnable_test2`` per
    partition): a partition that cannot run it sets its failure, one that can clears a
    partition's reason. A job in p and a DOWN q, behind a failed p, thus shows PartitionDown,
    listed as q and p it shows Priority (the main pass turns the cleared reason into that)."""
    for fail in fails:
        if fail is not None:
            reason = fail
        elif reason in _PART_REASONS:
            reason = ""
    return reason


def job_static(pol, job) -> tuple:
    """(per partition of the job: (its info, why its limits refuse the job or None)), array
    job id, task id). The partition's state is read at each build, the rest is fixed."""
    req = pol.req(job)
    per_part = []
    enforce = pol.s.enforce_part_limits.upper() != "NO"
    job_qos = pol.qos.get(req.qos or "")
    most, least = stored_node_counts(job.wl, req.nodes, [pol.parts[p].part for p in req.parts if p in pol.parts])
    for pname in req.parts:
        info = pol.parts[pname]
        # the limit slurmctld stores: --time (UNLIMITED: infinite), else DefaultTime, else the
        # MaxWall a QOS or association gives (``time_limit``), which may exceed MaxTime; the
        # node counts as the job holds them once created
        tl = req.time_limit if req.time_limit is not None else pol.time_limit(job, info)
        # then, as ``select_nodes`` tests it, whether the partition takes the job's QOS and account
        why = limits.part_hold(tl, most, least, info, job_qos, req.account, req.qos)
        if info.state in limits.SCHEDULED_STATES and submit_check.min_cpus(job.wl) > info.tres_total["cpu"] * 1000:
            # more CPUs than the partition has in all: ``_part_access_check`` tests that first,
            # and ``job_limits_check`` reads its refusal as PartitionConfig
            why = "PartitionConfig"
        if why in limits.PART_POLICY_REASONS and enforce:
            # under EnforcePartLimits ``_part_access_check`` tests the accounts and QOS itself,
            # whatever the partition's state, and its refusal reads PartitionConfig
            why = "PartitionConfig"
        per_part.append((info, why))
    wl = job.wl
    arr = wl.array_job_id if wl.array_job_id is not None else job.id
    task = wl.array_task_id if wl.array_task_id is not None else 0
    return tuple(per_part), arr, task


def cached_job_static(pol, job) -> tuple:
    """:func:`job_static` of ``job``, from (or into) the run's cache the queue builds read."""
    static = _static_of(pol).jobs
    st = static.get(job.id)
    if st is None:
        st = static[job.id] = job_static(pol, job)
    return st


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
            st_all.mixed.clear()
            st_all.last, st_all.last_ids = [], set()
        else:  # drop jobs no longer pending
            st_all.recs = cached = {jid: c for jid, c in cached.items() if jid in pending}
        st_all.states = states
    accrue_of = cy.accrue
    priority = pol.priority
    # the policy's memos read directly (a deep queue asks them for every job at every instant)
    verdicts = pol._verdict
    memo = pol.priority_memo(now)
    period = pol._prio_T if memo is not None else None
    fresh: list[Record] = []  # records made now
    extend = fresh.extend
    fresh_ids: list[int] = []
    kept: dict[int, float] = {}  # job id -> accrue time, of every job with records now
    # PriorityFlags=ACCRUE_ALWAYS: age counts from the (re)submission, whatever held the job
    # (a real 22.05.8 aged a job behind a dependency and one with --begin from submit alike)
    accrue_always = pol.s.accrue_always
    for jid, job in pending.items():
        # A job with records at the last build and the same eligibility, submit time and
        # priority period gets them again: it passed every check below then, and none of them
        # can have changed (its verdict and workload are fixed, ``now`` only grows, jobs with
        # dependencies are never kept, and a partition state change clears the cache).
        c = cached.get(jid)
        if c is not None and c[0] == job.eligible and c[1] == job.submit and (c[2] == period or c[4]):
            kept[jid] = c[0]
            continue
        why = verdicts.get(job.id, _UNSET)
        if why is _UNSET:
            why = pol.submit_verdict(job, cy.snap)
        if pol.unavailable_at_submit:
            part = pol.unavailable_at_submit.pop(jid, None)
            if part is not None and why is None:
                # select_nodes at submit left ReqNodeNotAvail, which a pass keeps where the
                # job's partition has failed before it (probe p139), unless a limit tested
                # before the selection held the job (its reason then)
                info = pol.parts[part or pol.req(job).parts[0]]
                if cy.limit_reason(job, info) not in PRE_SELECT_REASONS:
                    cy.reason(job, submit_unavailable_text(job.wl, info, cy.free.nodes) if part else NODE_NOT_AVAIL)
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
        st = static.get(jid)
        if st is None:
            st = static[jid] = job_static(pol, job)
        per_part, arr, task = st
        usable_parts = [info for info, why in per_part if part_fail(info, why) is None]
        if not usable_parts:
            cy.reason(job, _part_reason(per_part))
            continue
        if len(usable_parts) < len(per_part):
            st_all.mixed[jid] = _mixed(per_part)
        if len(per_part) > 1:
            pol.pending_partition_text(job)  # fixed now, at its first build (its submission)
        kept[jid] = accrue  # when it became eligible (slurmctld's begin time: bf_min_age_reserve)
        fresh_ids.append(jid)
        submit = job.submit
        if accrue_always:
            accrue = submit
        fixed = wl.priority is not None or memo is None
        mine = []
        for info in usable_parts:
            prio = None if fixed else memo.get((jid, info.name, submit, accrue))
            if prio is None:
                prio = priority(job, info, accrue, now)
            mine.append(Record((-info.tier, -prio, submit, arr, task, jid), job, info, prio))
        extend(mine)
        if not wl.dependency:
            cached[jid] = (kept[jid], submit, period, mine, wl.priority is not None)
    accrue_of.update(kept)
    return _order(st_all, kept, fresh_ids, fresh)


def apply_build_reasons(cy) -> None:
    """The reasons slurmctld's queue build sets on jobs some of whose partitions cannot run
    them (``_build_reason``): at the start of each main pass and of each backfill cycle, which
    each build the queue anew (a backfill cycle sets no Priority or Resources, so after one a
    job in a failed p and a DOWN q shows PartitionDown, or, listed as q,p, None); jobs gone
    are forgotten."""
    st_all = _static_of(cy.pol)
    if not st_all.mixed:
        return
    pending, kept, reasons = cy.snap.pending, cy.accrue, cy.reasons
    for jid, fails in list(st_all.mixed.items()):
        job = pending.get(jid)
        if job is None:
            del st_all.mixed[jid]
            continue
        if jid not in kept:
            continue
        now = reasons.get(jid, job.reason)
        reason = _build_reason(now, fails)
        if reason != now:
            reasons[jid] = cy.state_reasons[jid] = reason


#: fewest new records for which a build sorts instead of inserting them one by one
_SORT_FROM = 16


def _order(st: _Static, kept: dict[int, float], fresh_ids: list[int], fresh: list[Record]) -> list[Record]:
    """The queue in order: every record of the jobs in ``kept`` sorted by key, ties (records of
    one job, in its partitions' order) in the order they were made, as one stable sort of all
    of them gives.

    A job whose records were taken over from the cache (in ``kept``, not in ``fresh_ids``) had
    the same record objects at the last build, so when every such job was in the last build
    its records stand there in order already: the last order minus the jobs gone, with the
    new records (``fresh``) inserted, is the whole order. Keys are unique but within a job,
    whose records are all new or all taken over, so no tie crosses the two groups."""
    last, last_ids = st.last, st.last_ids
    carried = kept.keys() - fresh_ids if fresh_ids else kept.keys()
    if len(carried) == len(last_ids) and carried == last_ids:
        recs = list(last)  # the common instant: no job left, none taken over anew
    elif carried <= last_ids:
        gone = last_ids - carried
        recs = [r for r in last if r.job.id not in gone]
        last_ids -= gone
    else:
        # a job taken over that the last build did not list (it left the queue and came back
        # with its old submit and eligible times): sort the whole queue
        recs = [r for jid in carried for r in st.recs[jid][3]]
        recs.extend(fresh)
        recs.sort(key=_KEY)
        st.last, st.last_ids = recs, set(kept)
        return list(recs)
    if fresh:
        if len(fresh) < _SORT_FROM:
            insort = bisect.insort
            for r in sorted(fresh, key=_KEY):  # stable: a job's records keep their order
                insort(recs, r, key=_KEY)  # after any equal key, as a stable sort puts it
        else:
            recs.extend(fresh)
            recs.sort(key=_KEY)  # a sorted run and a few more: a merge
    last_ids.update(fresh_ids)  # now the jobs of ``kept``
    st.last = recs
    return list(recs)


_KEY = attrgetter("key")
_UNSET = object()
