"""Preemption (spec §9): preempt/qos and preempt/partition_prio with CANCEL or REQUEUE.

Candidates are running jobs the pending job may preempt on its partition's nodes, past
PreemptExemptTime, ordered by (QOS priority or partition tier)·65536 + node count, lowest
first. They are taken in that order until the job fits, then victims that turn out not to be
needed are given back. Victims with a GraceTime are signalled now (``Preempt.grace``: the
engine stops them when it ends); the preemptor starts in a later pass once the resources are free.
"""
from __future__ import annotations

from gpupool.engine.decisions import CANCEL, REQUEUE
from gpupool.policy.slurm.select import place


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
    mode = (mode or s.preempt_mode).split(",")[0]
    return mode


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


def try_preempt(cy, job, info, usable) -> bool:
    """Choose and signal victims so that ``job`` fits; True when some were chosen."""
    pol = cy.pol
    now = cy.now
    exempt = pol.s.preempt_exempt
    scratch = cy.free.copy()
    going = False
    for v in cy.snap.active.values():  # already in their grace period: count them as free
        if v.grace_until is not None:
            scratch.give(v.placement)
            going = True
    if place(job.wl, info.nodes, scratch, usable) is not None:
        return going
    cands = []
    for v in cy.snap.active.values():
        if v.grace_until is not None or v.id in cy.victims or v.start is None:
            continue
        if not any(p[0] in info.node_set for p in v.placement):
            continue
        if exempt is not None and now - v.start < exempt:
            continue
        if may_preempt(pol, job, info, v):
            cands.append(v)
    if not cands:
        return False
    cands.sort(key=lambda v: _order_key(pol, v))
    chosen = []
    for v in cands:
        scratch.give(v.placement)
        chosen.append(v)
        if place(job.wl, info.nodes, scratch, usable) is not None:
            break
    else:
        return False
    # give back victims that are not needed (all but the last one needed)
    for v in list(chosen[:-1]):
        scratch.take(v.placement)
        if place(job.wl, info.nodes, scratch, usable) is not None:
            chosen.remove(v)
        else:
            scratch.give(v.placement)
    for v in chosen:
        mode = _mode(pol, v)
        if mode == REQUEUE and not (v.wl.requeue and pol.s.job_requeue):
            mode = CANCEL
        if mode not in (REQUEUE, CANCEL):
            return False  # SUSPEND/GANG are not modelled (GPUs are never released by suspension)
        cy.victims.add(v.id)
        cy.preempt(v, mode, job.id, _grace(pol, v))
    return True
