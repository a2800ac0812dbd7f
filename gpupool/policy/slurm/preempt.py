"""Preemption (spec §9): preempt/qos and preempt/partition_prio with CANCEL or REQUEUE, and
preempt/partition_prio with SUSPEND,GANG.

Candidates are running (or suspended) jobs the pending job may preempt on its partition's nodes,
past PreemptExemptTime, ordered by (QOS priority or partition tier)·65536 + node count, lowest
first. They are taken in that order until the job fits, then victims that turn out not to be
needed are given back. Victims with a GraceTime are signalled now (``Preempt.grace``: the
engine stops them when it ends); the preemptor starts in a later pass once the resources are free.

SUSPEND (only with GANG, spec §9/§10): a victim would only give up its CPUs - it keeps its memory
and GPUs - so only its CPUs count as freed; PreemptExemptTime applies under preempt/qos (probe
p128) and not under preempt/partition_prio (22.05, §17.6). When every victim needed is a SUSPEND
victim, the preemptor starts at once:

* preempt/partition_prio: gang's "shadow" of the running preemptor suspends the overlapping jobs
  of lower-tier partitions and resumes them when it ends (``gang``);
* preempt/qos: the preemptor is allocated on its victims' CPUs as one more co-allocation row of
  their partition, and gang treats them as jobs sharing CPUs: the preemptor is suspended at
  once, then they time-slice whatever their QOS priorities (a real 22.05.8, case
  preempt-gp-004). This needs OverSubscribe=FORCE[:N] (FORCE:1 too) on the victim's partition
  and the preemptor in that partition; elsewhere such victims are not taken, and the preemptor
  waits (Resources), as the real 22.05.8 did with OverSubscribe=NO.
"""
from __future__ import annotations

from gpupool.engine.decisions import CANCEL, REQUEUE
from gpupool.engine.job import SUSPENDED
from gpupool.policy.slurm import limits
from gpupool.policy.slurm.bisection import first_true
from gpupool.policy.slurm.select import place

SUSPEND = "SUSPEND"
#: sacct's Flags for a preemptor the main scheduler starts (main_sched.VIA_MAIN; not imported:
#: main_sched imports this module)
VIA_MAIN = "SchedMain"


def may_preempt(pol, job, info, victim) -> bool:
    s = pol.s
    vreq = pol.req(victim)
    if s.preempt_type == "preempt/qos":
        qos = pol.qos.get(pol.req(job).qos or "")
        if qos is None or vreq.qos not in qos.preempt:
            return False
        return _mode(pol, victim) != "OFF"
    vinfo = pol.parts.get(pol.run_part.get(victim.id) or vreq.parts[0]) if vreq.parts else None
    if vinfo is None or vinfo.tier >= info.tier:
        return False
    return _mode(pol, victim) != "OFF"


def _may_preempt_anyone(pol, job, info) -> bool:
    """False when ``may_preempt`` is False for every possible victim: under preempt/qos the
    job's QOS lists no QOS to preempt (most jobs); under partition_prio no partition has a
    lower PriorityTier than ``info``. Saves a scan of every running job."""
    if pol.s.preempt_type == "preempt/qos":
        qos = pol.qos.get(pol.req(job).qos or "")
        return qos is not None and bool(qos.preempt)
    return any(p.tier < info.tier for p in pol.parts.values())


def _mode(pol, victim) -> str:
    s = pol.s
    vreq = pol.req(victim)
    mode = None
    if s.preempt_type == "preempt/qos":
        q = pol.qos.get(vreq.qos or "")
        mode = q.preempt_mode if q is not None else None
    else:
        vinfo = pol.parts.get(pol.run_part.get(victim.id, vreq.parts[0] if vreq.parts else ""))
        mode = vinfo.preempt_mode if vinfo is not None else None
    mode = (mode or s.preempt_mode).split(",")[0].strip().upper()
    return mode


def _victim_mode(pol, victim) -> str:
    """What preempting ``victim`` would do: REQUEUE (if it may be requeued), CANCEL, SUSPEND
    (partition_prio with GANG) or OFF/unmodelled (it is no candidate)."""
    mode = _mode(pol, victim)
    if mode == REQUEUE and not (victim.wl.requeue and pol.s.job_requeue):
        return CANCEL
    if mode == SUSPEND and not (pol.gang_on and (pol.s.preempt_type == "preempt/partition_prio"
                                                 or pol.part_of(victim) in pol.suspend_parts)):
        return "OFF"
    return mode


def _cpus_only(placement) -> tuple:
    """What a suspended victim gives up: its CPUs (GPUs and memory stay its own)."""
    return tuple((node, 0, cpu, 0) for node, _mask, cpu, _mem in placement)


def _grace(pol, victim) -> float:
    vreq = pol.req(victim)
    if pol.s.preempt_type == "preempt/qos":
        q = pol.qos.get(vreq.qos or "")
        return float(q.grace_time) if q is not None else 0.0
    vinfo = pol.parts.get(pol.run_part.get(victim.id, ""))
    return float(vinfo.grace_time) if vinfo is not None else 0.0


def _order_key(pol, victim):
    vreq = pol.req(victim)
    if pol.s.preempt_type == "preempt/qos":
        q = pol.qos.get(vreq.qos or "")
        base = min(q.priority if q is not None else 0, 65535)
    else:
        vinfo = pol.parts.get(pol.run_part.get(victim.id, ""))
        base = vinfo.tier if vinfo is not None else 0
    return (base * 65536 + len(victim.placement), victim.id)


def _grace_placements(cy) -> list:
    """(job id, placement) of the jobs already in their grace period (once per pass: the
    snapshot's running jobs do not change within it)."""
    out = cy.memo.get("grace")
    if out is None:
        snap = cy.snap
        if snap.grace is None:
            out = [(v.id, v.placement) for v in snap.active.values() if v.grace_until is not None]
        else:  # the engine's own table (the same jobs; the caller only sums their placements)
            active = snap.active
            out = [(jid, active[jid].placement) for jid in snap.grace]
        cy.memo["grace"] = out
    return out


def exempt_until(pol, v) -> float | None:
    """The instant before which running job ``v`` may not be preempted (PreemptExemptTime), or
    None: its start_time plus the exempt time of the first of its QOS pair (the partition's and
    its own, ``limits.qos_order``) that sets one, else the cluster's. slurmctld's
    acct_policy_get_preemptable_time (22.05.8 source) adds it to start_time, a whole epoch
    second, and compares that with time(0)."""
    if v.start is None:
        return None  # not running: nothing to exempt
    exempt = None
    for q in limits.qos_order(pol.qos.get(pol.req(v).qos or ""), pol.qos.get(pol.part_qos(v) or "")):
        if q is not None and q.preempt_exempt_time is not None:
            exempt = q.preempt_exempt_time
            break
    if exempt is None:
        exempt = pol.s.preempt_exempt
        if exempt is None:
            return None
    return pol.whole_second(pol.counted_start(v)) + exempt


def _candidates(cy, job, info) -> list[tuple]:
    """(victim, mode) for every running job ``job`` may preempt on ``info``'s nodes, in
    preemption order. What decides it is the preemptor's QOS (preempt/qos) or its partition's
    tier (partition_prio) and the partition's nodes, so one list serves every pending job with
    the same QOS and partition in a pass; victims chosen meanwhile are filtered by the caller."""
    pol = cy.pol
    key = ("cands", pol.req(job).qos, info.name)
    out = cy.memo.get(key)
    if out is not None:
        return out
    if not _may_preempt_anyone(pol, job, info):
        out = cy.memo[key] = []
        return out
    now = cy.now
    second = pol.whole_second(now)  # slurmctld tests time(0), whole seconds
    node_set = info.node_set
    by_qos = pol.s.preempt_type == "preempt/qos"
    found = []
    # preempt/qos: only jobs of the QOS the preemptor's QOS lists can be victims; that one set
    # test (``may_preempt``'s first) comes before the rest, which then meets the few left
    targets = pol.qos[pol.req(job).qos or ""].preempt if by_qos else None  # exists: _may_preempt_anyone
    req = pol.req
    for v in cy.snap.active.values():
        if targets is not None and req(v).qos not in targets:
            continue
        if v.grace_until is not None or v.start is None:
            continue
        if not any(p[0] in node_set for p in v.placement):
            continue
        if not may_preempt(pol, job, info, v):
            continue
        mode = _victim_mode(pol, v)
        if mode == SUSPEND:
            if v.state == SUSPENDED:
                continue  # already stopped: suspending it again frees nothing
            if by_qos and pol.part_of(v) != info.name:
                continue  # gang slices within one partition: the preemptor must share the victim's
            # preempt/partition_prio suspends what a higher tier's rows cover, exempt or not
            # (spec §17.6); preempt/qos takes its victims from the exemption-filtered list
            # (probe p128, finding 80)
            exempt = by_qos
        elif mode not in (REQUEUE, CANCEL):
            continue
        else:
            exempt = True
        if exempt:
            until = exempt_until(pol, v)
            if until is not None and second < until:
                continue
        found.append(v)
    found.sort(key=lambda v: _order_key(pol, v))
    out = cy.memo[key] = [(v, _victim_mode(pol, v)) for v in found]
    return out


def try_preempt(cy, job, info, usable, via: str = VIA_MAIN) -> bool | str:
    """Choose and signal victims so that ``job`` fits; True when some were chosen (with SUSPEND
    victims only: ``job`` was started at once, with sacct Flags ``via``); the reason of the limit
    the job breaks on the selection the victims would give it, where it does (nobody is
    signalled); else False."""
    pol = cy.pol
    scratch = cy.free.copy()
    going = False
    for jid, placement in _grace_placements(cy):  # already in their grace period: count them as free
        scratch.give_job(jid, placement)
        going = True
    # Without jobs in grace the scratch state is the free state the caller's placement just
    # failed on: no need to try it again.
    if going and place(job.wl, info.nodes, scratch, usable) is not None:
        return going
    pairs = [(v, m) for v, m in _candidates(cy, job, info) if v.id not in cy.victims]
    if not pairs:
        return False
    cands = [v for v, _m in pairs]
    modes = {v.id: m for v, m in pairs}

    def freed(v):
        return _cpus_only(v.placement) if modes[v.id] == SUSPEND else v.placement

    if len(job.wl.pod_sets) == 1 and not job.wl.pod_sets[0].split and not job.wl.pod_sets[0].contiguous:
        # One pod set: whether the job fits only grows as victims are added (more free
        # resources on some nodes, none fewer), so the first prefix of the ordered candidates
        # that makes it fit is found by bisection; the linear walk gives the same prefix.
        # (Not for tasks split over nodes: a freed CPU can join two runs of nodes and change
        # which nodes the split tries first, so a fit can turn into none; nor for
        # ``--contiguous``: a freed node can make a larger run that cannot hold the job win.)
        def fits_with(k: int) -> bool:
            trial = scratch.copy()
            for v in cands[:k]:
                trial.give_job(v.id, freed(v))
            return place(job.wl, info.nodes, trial, usable) is not None

        if not fits_with(len(cands)):
            return False
        chosen = cands[:first_true(1, len(cands), fits_with)]
        for v in chosen:
            scratch.give_job(v.id, freed(v))
    else:
        chosen = []
        for v in cands:
            scratch.give_job(v.id, freed(v))
            chosen.append(v)
            if place(job.wl, info.nodes, scratch, usable) is not None:
                break
        else:
            return False
    # give back victims that are not needed (all but the last one needed)
    for v in list(chosen[:-1]):
        scratch.give_job(v.id, freed(v), -1)
        if place(job.wl, info.nodes, scratch, usable) is not None:
            chosen.remove(v)
        else:
            scratch.give_job(v.id, freed(v))
    placement = place(job.wl, info.nodes, scratch, usable)
    over = cy.placed_limit(job, info, placement)
    if over is not None:
        # ``select_nodes`` tests the limits on the selection (a walked job's nodes and GPUs)
        # before it preempts (``acct_policy_job_runnable_post_select``): over them, nobody is
        # preempted and the job is held by the limit, not by resources
        return over
    if all(modes[v.id] == SUSPEND for v in chosen):
        if pol.s.preempt_type == "preempt/qos":
            # on the victims' CPUs, in a row of their partition; gang suspends it at once
            cy.start_in_row(job, placement, info, via)
        else:
            # SUSPEND,GANG: the preemptor starts now; gang suspends what its shadow covers
            cy.start(job, placement, info, via)
        return True
    for v in chosen:
        if modes[v.id] == SUSPEND:
            continue  # suspended once the preemptor can start (a later pass)
        cy.victims.add(v.id)
        cy.preempt(v, modes[v.id], job.id, _grace(pol, v))
    return True


def without_preemptable(cy, job, info, ends: list):
    """The state select/cons_tres's will-run test sees for a job that may preempt (spec §2.4.3):
    every job it may preempt is gone, its resources free (a SUSPEND victim's CPUs only: it keeps
    its memory and GPUs) and out of the running jobs that end, so the estimate is "now" when the
    job fits once they are gone (backfill then starts the preemption) and later ones are
    planned as if they were never there. ``(key, free, ends)`` where ``key`` names the victims
    (jobs already chosen as victims in this pass are not candidates again), or None when the
    job may preempt nobody."""
    if not cy.pol.s.preemption:
        return None
    pairs = [(v, m) for v, m in _candidates(cy, job, info) if v.id not in cy.victims]
    if not pairs:
        return None
    key = tuple(sorted(v.id for v, _m in pairs))
    free = cy.free.copy()
    gone = set()
    for v, mode in pairs:
        free.give_job(v.id, _cpus_only(v.placement) if mode == SUSPEND else v.placement)
        gone.add(v.id)
    return key, free, [e for e in ends if e[1] not in gone]
