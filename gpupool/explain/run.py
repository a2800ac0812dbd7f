"""Run Kueue scheduling cycles on a dumped state and say what each one does, and why.

Each cycle is gpupool's Kueue cycle (``policy/kueue/cycle.run_cycle``): one head per active
ClusterQueue queue, nomination on the cycle's snapshot, ordering, admissions and preemptions.
Between cycles nothing finishes: admitted workloads keep their quota (and are assumed to
become ready, for blockAdmission); preempted workloads give their quota back and are requeued
with their original creation time, as Kueue does with the default ``PrioritySortingWithinCohort``;
an eviction is a capacity change, so every workload parked as inadmissible goes back to the
active queue (Kueue batches these requeues, ~1 s).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

from gpupool.explain.dump import DumpState
from gpupool.explain.messages import (
    BLOCKED_PODS_READY,
    SKIPPED_NO_LONGER_FITS,
    SKIPPED_OVERLAP,
    pending_message,
    preempted_message,
    qty,
)
from gpupool.policy.kueue.cycle import (
    ADMITTED,
    BLOCKED,
    INACTIVE,
    INADMISSIBLE,
    NO_CANDIDATES,
    NOFIT_R,
    PREEMPTING,
    SKIPPED,
    run_cycle,
    shape_key,
)
from gpupool.policy.kueue.afs import base_units
from gpupool.policy.kueue.policy import PodsReadyConfig
from gpupool.policy.kueue.records import KWorkload
from gpupool.policy.kueue.tas import PREFERRED, REQUIRED, domains_of

ACTIVE = "active"
QUEUED = "queued"  # not a head this cycle: another workload is ahead in its ClusterQueue
NOT_SEEN = "blocked"  # Kueue never hands it to the scheduler (namespace selector, stopped queue)
HOSTNAME = "kubernetes.io/hostname"  # a topology level naming single nodes


@dataclass
class PodSetAdmission:
    name: str
    count: int
    flavors: dict[str, str]  # resource -> flavor
    usage: dict[str, str]  # resource -> quantity, as Kubernetes writes it
    #: TAS (§8): ``{"levels": [...], "domains": [{"values": [...], "count": n}]}`` as Kueue writes
    #: ``topologyAssignment``; None for a pod set without a topology.
    topology: dict | None = None
    #: The pod set's ``topologyRequest`` in the Workload API's field names (required /
    #: preferred / unconstrained, podSetSliceRequiredTopology + podSetSliceSize,
    #: podSetGroupName); None when it asks for no topology.
    topology_request: dict | None = None


@dataclass
class Admission:
    cycle: int
    workload: str
    cluster_queue: str
    priority: int
    borrowing: bool
    pod_sets: list[PodSetAdmission]


@dataclass
class Eviction:
    cycle: int
    workload: str
    cluster_queue: str
    priority: int
    reason: str  # InClusterQueue, InCohortReclamation, InCohortReclaimWhileBorrowing, InCohortFairSharing
    preemptor: str
    preemptor_cluster_queue: str
    message: str
    freed: dict[str, str]  # resource -> quantity


@dataclass
class Waiting:
    """Why a workload is still pending after a cycle."""

    workload: str
    cluster_queue: str
    priority: int
    outcome: str  # nofit | no_candidates | preempting | skipped | blocked | inactive | queued
    queue_state: str  # active | inadmissible
    message: str
    cycle: int | None = None  # the cycle that last tried it (None: never a head)
    #: Admission Fair Sharing: its LocalQueue's usage, which orders its ClusterQueue (§6.5).
    local_queue_usage: float | None = None


@dataclass
class Cycle:
    number: int
    heads: list[str]
    admissions: list[Admission] = field(default_factory=list)
    evictions: list[Eviction] = field(default_factory=list)
    attempts: list[Waiting] = field(default_factory=list)  # heads that were not admitted
    note: str = ""


@dataclass
class Explanation:
    sources: list[str]
    cycles_requested: int
    fair_sharing: bool
    block_admission: bool
    admitted_before: list[str]
    pending_before: list[str]
    cycles: list[Cycle]
    pending: list[Waiting]  # every workload still pending after the last cycle, in queue order
    notes: list[str] = field(default_factory=list)
    #: ClusterQueues ordered by Admission Fair Sharing (LocalQueue usage before priority).
    admission_fair_sharing: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


def _heap_key(wl: KWorkload) -> tuple:
    return (-wl.priority, wl.created, wl.uid)


def _queue_key(state):
    """The order inside a ClusterQueue: with Admission Fair Sharing its LocalQueue's usage
    comes before priority (§6.5); the usage moves as the cycles admit (entry penalty)."""
    afs = state.afs
    if not afs:
        return _heap_key
    return lambda wl: ((afs[wl.cq](wl),) if wl.cq in afs else (0.0,)) + _heap_key(wl)


def explain(dump: DumpState, cycles: int = 1) -> Explanation:
    """Run ``cycles`` scheduling cycles on the dumped state (which it mutates)."""
    if cycles < 1:
        raise ValueError("cycles must be at least 1")
    state = dump.state
    info = dump.info
    pods_ready = PodsReadyConfig(dump.kueue, state.gates)
    block = pods_ready.enabled and pods_ready.block
    not_ready = {k for k in state.admitted if not info[k].pods_ready}
    pending: dict[str, KWorkload] = {wl.key: wl for wl in dump.pending}
    parked: set[str] = set()
    parked_shapes: set = set()
    last: dict[str, Waiting] = {}
    out = Explanation(dump.sources, cycles, state.fair_sharing, block,
                      sorted(state.admitted), sorted([*pending, *dump.blocked]), [], [], list(dump.notes),
                      list(dump.afs_cqs) if dump.afs is not None else [])
    for number in range(1, cycles + 1):
        heads = _heads(pending, parked, parked_shapes, state)
        cyc = Cycle(number, [wl.key for wl in heads])
        out.cycles.append(cyc)
        if not heads:
            cyc.note = ("no heads: every pending workload is parked as inadmissible until capacity changes"
                        if pending else "nothing pending")
            break
        initial = state.tree.usage_snapshot()
        result = run_cycle(state, heads, block_admission=block and bool(not_ready))
        after = state.tree.usage_snapshot()
        state.tree.restore(initial)  # messages describe the snapshot the cycle started from
        messages = {e.wl.key: _entry_message(state, e) for e in result.entries if e.result != ADMITTED}
        state.tree.restore(after)
        for e in result.admitted:
            del pending[e.wl.key]
            last.pop(e.wl.key, None)
            adm = state.admitted[e.wl.key]
            adm.reserved_at = float(number)
            if dump.afs is not None and e.wl.lq is not None:
                by_res: dict[str, int] = {}
                for (_, r), v in adm.usage.items():
                    by_res[r] = by_res.get(r, 0) + v
                dump.afs.admit(e.wl.lq, base_units(by_res))  # entry penalty
            a = e.assignment
            cyc.admissions.append(Admission(
                number, e.wl.key, e.wl.cq, e.wl.priority, a.borrowing > 0,
                [PodSetAdmission(p.name, p.count, dict(p.flavors), {r: qty(r, v) for r, v in p.usage.items()},
                                 _topology(state, p), topology_request_fields(kps.topology))
                 for p, kps in zip(a.pod_sets, e.wl.pod_sets)]))
        for t, e in result.preempted:
            victim = t.adm
            state.evict(victim)
            pending[victim.wl.key] = victim.wl
            not_ready.discard(victim.wl.key)
            freed: dict[str, int] = {}
            for (_, r), v in victim.usage.items():
                freed[r] = freed.get(r, 0) + v
            p_info = info.get(e.wl.key)
            cyc.evictions.append(Eviction(
                number, victim.wl.key, victim.cq, victim.wl.priority, t.reason, e.wl.key, e.wl.cq,
                preempted_message(t.reason, p_info.uid if p_info else e.wl.key, p_info.job_uid if p_info else ""),
                {r: qty(r, v) for r, v in sorted(freed.items())}))
            last.pop(victim.wl.key, None)
        if result.preempted:  # a capacity change: Kueue requeues every inadmissible workload
            parked.clear()
            parked_shapes.clear()
        for e in result.entries:
            if e.result == ADMITTED:
                continue
            w = Waiting(e.wl.key, e.wl.cq, e.wl.priority, e.result,
                        INADMISSIBLE if e.queue_state == INADMISSIBLE else ACTIVE, messages[e.wl.key], number)
            cyc.attempts.append(w)
            last[e.wl.key] = w
            if e.queue_state == INADMISSIBLE:
                parked.add(e.wl.key)
                if state.gate("SchedulingEquivalenceHashing") and e.result in (NOFIT_R, NO_CANDIDATES):
                    parked_shapes.add(shape_key(e.wl))
    out.pending = _final_pending(dump, pending, parked, parked_shapes, last, state)
    return out


def topology_request_fields(req) -> dict | None:
    """A ``TopologyRequest`` as the Workload API's ``podSets[].topologyRequest``."""
    if req is None or req.implied:
        return None
    out: dict = {}
    if req.mode == REQUIRED:
        out["required"] = req.level
    elif req.mode == PREFERRED:
        out["preferred"] = req.level
    elif req.slice_level is None:
        out["unconstrained"] = True
    if req.slice_level is not None:
        out["podSetSliceRequiredTopology"] = req.slice_level
        out["podSetSliceSize"] = req.slice_size
    if req.group is not None:
        out["podSetGroupName"] = req.group
    return out


def describe_topology_request(fields: dict) -> str:
    """One line for people: ``required rack; slices of 4 pod(s) per host; group lws``."""
    parts = []
    for mode in ("required", "preferred"):
        if mode in fields:
            parts.append(f"{mode} {fields[mode]}")
    if fields.get("unconstrained"):
        parts.append("unconstrained")
    if "podSetSliceRequiredTopology" in fields:
        parts.append(f"slices of {fields['podSetSliceSize']} pod(s) per {fields['podSetSliceRequiredTopology']}")
    if "podSetGroupName" in fields:
        parts.append(f"group {fields['podSetGroupName']}")
    return "; ".join(parts)


def _topology(state, psa) -> dict | None:
    """A pod set's topology assignment the way Kueue writes it in ``status.admission``."""
    if not psa.topology or state.tas is None:
        return None
    tf = state.tas.get(psa.tas_flavor)
    levels = list(tf.levels) if tf is not None else []
    if levels and levels[-1] == HOSTNAME:
        # A node names its domain: Kueue writes only the hostname level.
        return {"levels": [HOSTNAME], "domains": domains_of({leaf[-1:]: n for leaf, n in psa.topology.items()})}
    return {"levels": levels, "domains": domains_of(psa.topology)}


def _heads(pending: dict, parked: set, parked_shapes: set, state) -> list[KWorkload]:
    """One head per ClusterQueue: its first workload in heap order that is not parked."""
    heads: dict[str, KWorkload] = {}
    for wl in sorted(pending.values(), key=_queue_key(state)):
        if wl.cq in heads or wl.key in parked:
            continue
        strict = wl.cq in state.cq_models and state.cq_models[wl.cq].queueing_strategy == "StrictFIFO"
        if parked_shapes and not strict and shape_key(wl) in parked_shapes:
            parked.add(wl.key)  # SchedulingEquivalenceHashing: same shape, same verdict
            continue
        heads[wl.cq] = wl
    return list(heads.values())


def _entry_message(state, e) -> str:
    if e.result == PREEMPTING:
        base = pending_message(state, e.wl, e.assignment)
        return f"{base}. Pending the preemption of {len(e.targets)} workload(s)"
    if e.result == SKIPPED:
        return SKIPPED_OVERLAP if "overlapping" in e.message else SKIPPED_NO_LONGER_FITS
    if e.result == BLOCKED:
        return BLOCKED_PODS_READY
    if e.result == INACTIVE:
        return e.message
    return pending_message(state, e.wl, e.assignment)


def _final_pending(dump, pending, parked, parked_shapes, last, state) -> list[Waiting]:
    out: list[Waiting] = []
    by_cq: dict[str, list[KWorkload]] = {}
    for wl in sorted(pending.values(), key=_queue_key(state)):
        by_cq.setdefault(wl.cq, []).append(wl)
    heads = {cq: next((w for w in lst if w.key not in parked), None) for cq, lst in by_cq.items()}
    for cq in sorted(by_cq):
        for pos, wl in enumerate(by_cq[cq], 1):
            seen = last.get(wl.key)
            if seen is not None and (wl.key in parked or seen.queue_state == ACTIVE):
                out.append(seen)
                continue
            if wl.key in parked:  # parked by equivalence with a head of the same shape
                twin = next((w for w in last.values() if w.cluster_queue == cq and w.outcome in (NOFIT_R, NO_CANDIDATES)
                             and shape_key(pending.get(w.workload, wl)) == shape_key(wl)), None)
                msg = twin.message if twin else "parked: same shape as a workload found not to fit"
                out.append(Waiting(wl.key, cq, wl.priority, twin.outcome if twin else NOFIT_R, INADMISSIBLE, msg,
                                   twin.cycle if twin else None))
                continue
            head = heads.get(cq)
            if head is not None and head.key != wl.key:
                msg = f"queued in ClusterQueue {cq} behind {head.key} (position {pos} of {len(by_cq[cq])})"
            else:
                msg = f"head of ClusterQueue {cq}; tried in the next cycle"
            out.append(Waiting(wl.key, cq, wl.priority, QUEUED, ACTIVE, msg, seen.cycle if seen else None))
    for key, (cq, msg) in sorted(dump.blocked.items()):
        out.append(Waiting(key, cq, dump.info[key].priority, NOT_SEEN, INADMISSIBLE, msg, None))
    afs = state.afs
    if afs:
        for w in out:
            wl = pending.get(w.workload)
            if wl is not None and wl.cq in afs:
                w.local_queue_usage = round(afs[wl.cq](wl), 6)
    return out
