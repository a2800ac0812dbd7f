"""One Kueue scheduling cycle (spec §4): nominate heads, order them, process in order.

``run_cycle`` mutates the ``KueueState`` as Kueue mutates its cache: admitted workloads are
added, preemption targets are reported (the caller evicts them), and every head that was not
admitted gets a queue state (active or inadmissible, §3.2) and a reason.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gpupool.policy.kueue.flavors import NO_ORACLE, assign_flavors, partial_assignment
from gpupool.policy.kueue.preemption import get_targets
from gpupool.policy.kueue.quota import dominant_share
from gpupool.policy.kueue.records import (
    FIT,
    NOFIT,
    PREEMPT,
    Admitted,
    Assignment,
    KWorkload,
    Target,
)
from gpupool.policy.kueue.state import KueueState
from gpupool.policy.kueue.tas_assign import place, tas_targets, uses_tas

ADMITTED = "admitted"
PREEMPTING = "preempting"  # issued preemptions; admitted in a later cycle
SKIPPED = "skipped"  # failed after nomination (contention in this cycle)
NOFIT_R = "nofit"
NO_CANDIDATES = "no_candidates"  # Preempt mode without targets
INACTIVE = "inactive"
BLOCKED = "blocked"  # waitForPodsReady.blockAdmission

ACTIVE = "active"
INADMISSIBLE = "inadmissible"
_NO_TARGETS: tuple = ()  # a head that preempts nothing (shared: one less object per head)


@dataclass(slots=True)
class Entry:
    wl: KWorkload
    assignment: Assignment | None = None
    targets: Sequence[Target] = ()
    result: str = ""
    message: str = ""
    queue_state: str = ""


@dataclass(slots=True)
class CycleResult:
    entries: list[Entry]
    admitted: list[Entry]
    preempted: list[tuple[Target, Entry]]
    skipped_preemptions: dict[str, int]

    def pending(self) -> list[Entry]:
        return [e for e in self.entries if e.result != ADMITTED]


def nominate(state: KueueState, wl: KWorkload, resume: dict | None = None) -> Entry:
    """Flavor assignment and preemption targets against the cycle's initial snapshot."""
    entry = Entry(wl)
    if wl.cq not in state.cq_models:
        entry.result, entry.message = INACTIVE, f"ClusterQueue {wl.cq} doesn't exist"
        return entry
    a = assign_flavors(state, wl, resume=resume)
    targets = _targets(state, wl, a)
    if not (a.mode == FIT or (a.mode == PREEMPT and targets)) and state.gate("PartialAdmission") \
            and any(ps.min_count is not None and ps.min_count < ps.count for ps in wl.pod_sets):

        def viable(cand: Assignment) -> bool:
            if cand.mode == FIT:
                return True
            return cand.mode == PREEMPT and bool(_targets(state, wl, cand))

        reduced = partial_assignment(state, wl, viable)
        if reduced is not None:
            a = reduced
            targets = _targets(state, wl, a)
    if a.oracle:
        a.oracle = NO_ORACLE  # only this nomination reads it: free the searches early
    entry.assignment = a
    entry.targets = targets
    entry.message = a.message
    return entry


def _targets(state: KueueState, wl: KWorkload, a: Assignment) -> list[Target]:
    """Preemption targets of a Preempt assignment. For a single flavor-resource the oracle
    already ran the identical search on the identical state (§4.2 step 2): reuse it."""
    if a.mode != PREEMPT:
        return _NO_TARGETS
    tas = uses_tas(state, wl)
    if tas:
        node = state.tree.cqs[wl.cq]
        if all(v <= node.available(fr) for fr, v in a.usage.items()):
            # Quota fits: only the topology needs room (fragmentation, §8).
            return tas_targets(state, wl, a.pod_sets, [])
    base = None
    if len(a.usage) == 1 and a.frs_preempt == set(a.usage):
        base = a.oracle.get(next(iter(a.usage.items())))
    if base is None:
        base = get_targets(state, wl, wl.cq, a.usage, a.frs_preempt)
    if tas and base:
        return tas_targets(state, wl, a.pod_sets, base)
    return base


def _order_key(state: KueueState, e: Entry) -> tuple:
    a = e.assignment
    borrowing = a.borrowing if a is not None else 0
    prio = -e.wl.priority if state.gate("PrioritySortingWithinCohort") else 0
    return (borrowing, prio, e.wl.created, e.wl.uid)


def run_cycle(state: KueueState, heads: list[KWorkload], *, block_admission: bool = False,
              resume: dict | None = None) -> CycleResult:
    """One cycle over ``heads``. ``resume`` (workload key -> the ``last_index`` of its previous
    flavor scan, §4.3) makes each head's scan start after the flavor it stopped at last time;
    a head whose scan stopped before its last flavor then goes back to the active heap."""
    # Reservations and in-flight preemptors' usage live only in this cycle's snapshot; what
    # survives the cycle is the admitted workloads' usage (Kueue's cache "assumes" them).
    # The quota tree's usage is a function of the ClusterQueues' usage alone (``QNode.add``
    # bubbles only the change of what a node passes up, which telescopes), so adds and removals
    # commute and the cycle undoes its temporary usage by a log instead of copying every node's
    # usage before and after (O(changes) instead of O(ClusterQueues) per cycle).
    tree = state.tree
    tas_initial = state.tas.usage_snapshot() if state.tas is not None else None
    state.candidate_memo = {}
    try:
        entries = [nominate(state, wl, (resume or {}).get(wl.key)) for wl in heads]
    finally:
        state.candidate_memo = None
    victims: dict[object, Target] = {}
    preempted: list[tuple[Target, Entry]] = []
    admitted: list[Entry] = []
    skipped: dict[str, int] = {}
    state.skipped_preemptions = skipped
    log: list[tuple[object, dict]] = []  # temporary usage added to the tree in this cycle
    # Classic order: the recorded victims' usage stays out of the tree while entries are
    # processed (each fit check is against the snapshot without them), instead of removing and
    # re-adding all of them for every entry. The fair-sharing tournament reads the shares with
    # the victims in between, so it keeps the per-entry removal.
    victims_out = not state.fair_sharing

    def process(e: Entry) -> None:
        a = e.assignment
        cq_name = e.wl.cq
        if e.result == INACTIVE:
            return
        if a.mode == NOFIT:
            e.result = NOFIT_R
            return
        node = tree.cqs[cq_name]
        cq = state.cq_models[cq_name]
        if a.mode == PREEMPT and not e.targets:
            e.result = NO_CANDIDATES
            if cq.preemption.reclaim_within_cohort != "Any":
                if victims_out:  # the reservation is sized on the snapshot with the victims
                    for t in victims.values():
                        tree.cqs[t.adm.cq].add_usage(t.adm.usage)
                held = _reservation(node, a)
                node.add_usage(held)
                log.append((node, held))
                if victims_out:
                    for t in victims.values():
                        tree.cqs[t.adm.cq].add_usage(t.adm.usage, -1)
            return
        if a.mode == PREEMPT and any(t.adm.wl.key in victims for t in e.targets):
            e.result, e.message = SKIPPED, "overlapping preemption targets"
            skipped[cq_name] = skipped.get(cq_name, 0) + 1
            return
        new = [t for t in e.targets if t.adm.wl.key not in victims]
        out = new if victims_out else list(victims.values()) + new
        tas = state.tas is not None and uses_tas(state, e.wl)
        for t in out:
            tree.cqs[t.adm.cq].add_usage(t.adm.usage, -1)
        if tas:
            for t in list(victims.values()) + new:
                state.tas.hold(t.adm.tas_uses(), -1)
        fits = all(v <= node.available(fr) for fr, v in a.usage.items())
        if fits and tas:
            # TASRecomputeAssignmentWithinSchedulingCycle: earlier entries may have taken
            # the domains chosen at nomination; place again on the current snapshot.
            fits = place(state, e.wl, a.pod_sets) is None
        if tas:
            for t in list(victims.values()) + new:
                state.tas.hold(t.adm.tas_uses())
        if not (victims_out and fits and a.mode == PREEMPT):  # new victims stay out
            for t in out:
                tree.cqs[t.adm.cq].add_usage(t.adm.usage)
        if not fits:
            e.result, e.message = SKIPPED, "Workload no longer fits after processing another workload"
            if a.mode == PREEMPT:
                skipped[cq_name] = skipped.get(cq_name, 0) + 1
            return
        if a.mode == PREEMPT:
            for t in e.targets:
                victims[t.adm.wl.key] = t
                preempted.append((t, e))
            node.add_usage(a.usage)
            log.append((node, a.usage))
            e.result = PREEMPTING
            return
        if block_admission:
            e.result, e.message = BLOCKED, "waiting for all admitted workloads to be in PodsReady condition"
            return
        state.admit(Admitted(e.wl, cq_name, dict(a.usage), 0.0, a.pod_sets))
        e.result = ADMITTED
        admitted.append(e)

    if state.fair_sharing:
        _fair_order(state, entries, process)
    else:
        for e in sorted(entries, key=lambda e: _order_key(state, e)):
            process(e)
    # Back to the initial usage plus the admitted workloads' (``state.admit`` added theirs).
    if victims_out:
        for t in victims.values():
            tree.cqs[t.adm.cq].add_usage(t.adm.usage)
    for node, usage in reversed(log):
        node.add_usage(usage, -1)
    if tas_initial is not None:
        state.tas.restore(tas_initial)
        for e in admitted:
            state.tas.hold(state.admitted[e.wl.key].tas_uses())
    for e in entries:
        if e.result == ADMITTED:
            continue
        strict = e.wl.cq in state.cq_models and state.cq_models[e.wl.cq].queueing_strategy == "StrictFIFO"
        untried = resume is not None and e.assignment is not None and e.result in (NOFIT_R, NO_CANDIDATES) \
            and any(i != -1 for i in e.assignment.last_index.values())
        if strict or untried or e.result in (SKIPPED, PREEMPTING, BLOCKED):
            e.queue_state = ACTIVE
        else:
            e.queue_state = INADMISSIBLE
    return CycleResult(entries, admitted, preempted, skipped)


def shape_key(wl: KWorkload) -> tuple:
    """What decides a workload's flavor assignment (SchedulingEquivalenceHashing)."""
    return (wl.cq, tuple((tuple(sorted(ps.requests.items())), ps.count, ps.min_count,
                          tuple(sorted(ps.node_selector.items())), repr(ps.tolerations), ps.topology, ps.gpu_type)
                         for ps in wl.pod_sets))


def _reservation(node, a: Assignment) -> dict:
    """Capacity held for a workload waiting to preempt (§4 step 5)."""
    out = {}
    for fr, v in a.usage.items():
        used = node.usage.get(fr, 0)
        nominal = node.nominal.get(fr, 0)
        if a.borrowing > 0:
            limit = node.borrowing.get(fr)
            out[fr] = v if limit is None else min(v, nominal + limit - used)
        else:
            out[fr] = max(0, min(v, nominal - used))
    return {fr: v for fr, v in out.items() if v > 0}


def _fair_order(state: KueueState, entries: list[Entry], process) -> None:
    """The fair-sharing tournament (§6.2): pick the next entry after every processed one."""
    tree = state.tree
    remaining = [e for e in entries if e.assignment is not None and e.wl.cq in tree.cqs]
    for e in entries:
        if e not in remaining:
            process(e)
    lone = [e for e in remaining if tree.cqs[e.wl.cq].parent is None]
    for e in sorted(lone, key=lambda e: _order_key(state, e)):
        process(e)
    remaining = [e for e in remaining if tree.cqs[e.wl.cq].parent is not None]
    prefer_non_borrowing = state.gate("FairSharingPrioritizeNonBorrowing")
    while remaining:
        by_cq: dict[str, list[Entry]] = {}
        for e in remaining:
            by_cq.setdefault(e.wl.cq, []).append(e)
        roots = []
        for e in remaining:
            r = tree.cqs[e.wl.cq].root()
            if r not in roots:
                roots.append(r)
        for root in roots:
            winner = _tournament(state, root, by_cq, prefer_non_borrowing)
            if winner is None:
                continue
            remaining.remove(winner)
            process(winner)
            break


def _tournament(state, node, by_cq, prefer_non_borrowing):
    if node.is_cq:
        lst = by_cq.get(node.name)
        if not lst:
            return None
        return min(lst, key=lambda e: _order_key(state, e))
    best = None
    best_key = None
    for child in node.children:
        e = _tournament(state, child, by_cq, prefer_non_borrowing)
        if e is None:
            continue
        a = e.assignment
        cq_node = state.tree.cqs[e.wl.cq]
        cq_node.add_usage(a.usage)
        share = dominant_share(child)
        borrows = child.borrowing_any(a.usage.keys())
        cq_node.add_usage(a.usage, -1)
        key = ((1 if borrows else 0) if prefer_non_borrowing else 0, share, -e.wl.priority, e.wl.created, e.wl.uid)
        if best_key is None or key < best_key:
            best, best_key = e, key
    return best
