"""Flavor assignment (spec §4.2-§4.4): which ResourceFlavor each pod set's resources use.

A pure function of the workload and the quota tree; preemption is consulted as an oracle
for a single flavor-resource when quota is short.
"""
from __future__ import annotations

from types import MappingProxyType

from gpupool.model.kueue import ClusterQueue, ResourceFlavor
from gpupool.policy.kueue.preemption import get_targets
from gpupool.policy.kueue.quota import FR, borrowing_level
from gpupool.policy.kueue.records import (
    FIT,
    NO_CANDIDATES,
    NOFIT,
    PREEMPT,
    RECLAIM,
    Assignment,
    KPodSet,
    KWorkload,
    PodSetAssignment,
)
from gpupool.policy.kueue.state import KueueState
from gpupool.policy.kueue.tas_assign import place, pod_set_groups, tas_mismatch

BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")

#: Interned keys: ``(flavor, resource)`` and ``(pod set index, resource group index)``. Every
#: nomination keeps a few of them in its Assignment until the cycle ends (1,000 heads a cycle
#: with 1,000 ClusterQueues); one shared tuple per key keeps them out of the garbage collector's
#: older generations.
_KEYS: dict[tuple, tuple] = {}


def _key(a, b) -> tuple:
    k = (a, b)
    return _KEYS.setdefault(k, k)


def _interned(memo: dict, d: dict) -> dict:
    """One shared dict per content (and order) for the read-only maps of an assignment (its
    usage, each pod set's flavors and usage): nothing changes them after ``assign_flavors``
    (``Admitted`` copies the usage it keeps), and a cycle of 1,000 heads would otherwise keep
    three fresh dicts per head alive until it ends."""
    k = tuple(d.items())
    found = memo.get(k)
    if found is None:
        found = memo[k] = d
    return found


def tolerates(tolerations, taint: dict) -> bool:
    """Kubernetes toleration matching for one taint."""
    for tol in tolerations:
        effect = tol.get("effect")
        if effect and effect != taint.get("effect"):
            continue
        key = tol.get("key")
        op = tol.get("operator", "Equal")
        if not key:
            if op == "Exists":
                return True
            continue
        if key != taint.get("key"):
            continue
        if op == "Exists" or tol.get("value", "") == taint.get("value", ""):
            return True
    return False


def flavor_matches(flavor: ResourceFlavor, ps: KPodSet) -> str | None:
    """Why ``ps`` cannot use ``flavor`` (None when it can)."""
    if not flavor.node_labels and not flavor.node_taints:
        return None  # nothing to mismatch (checked for every head's every flavor)
    for key, value in flavor.node_labels.items():
        want = ps.node_selector.get(key)
        if want is not None and want != value:
            return f"flavor {flavor.name} doesn't match node affinity ({key}={want})"
    tolerations = tuple(ps.tolerations) + tuple(flavor.tolerations)
    for taint in flavor.node_taints:
        if taint.get("effect") in BLOCKING_EFFECTS and not tolerates(tolerations, taint):
            return f"untolerated taint {taint.get('key')} in flavor {flavor.name}"
    return None


def assign_flavors(state: KueueState, wl: KWorkload, counts: list[int] | None = None,
                   resume: dict | None = None) -> Assignment:
    """The flavor assignment for ``wl`` (optionally with reduced ``counts``) in its CQ."""
    cq: ClusterQueue = state.cq_models[wl.cq]
    node = state.tree.cqs[wl.cq]
    counts = counts if counts is not None else [ps.count for ps in wl.pod_sets]
    groups = cq.resource_groups
    group_of = state.group_of(wl.cq)
    assigned: dict[FR, int] = {}
    pod_sets: list[PodSetAssignment] = []
    worst = FIT
    borrowing = 0
    frs_preempt: set[FR] = set()
    messages: list[str] = []
    last_index: dict = {}
    oracle: dict = {}
    grouped = pod_set_groups(wl) if state.tas is not None else {}
    later: dict[int, PodSetAssignment] = {}
    for psi, ps in enumerate(wl.pod_sets):
        if psi in later:  # a pod-set group's member, assigned with the group's first pod set
            pod_sets.append(later.pop(psi))
            continue
        # A pod-set group (TAS §8) is one flavor-assignment unit: its requests are summed and
        # each resource group gets one flavor for all its members.
        members = grouped.get(psi, (psi,))
        reqs = {m: {r: v * counts[m] for r, v in wl.pod_sets[m].requests.items() if v} for m in members}
        req: dict[str, int] = {}
        for m in members:
            for r, v in reqs[m].items():
                req[r] = req.get(r, 0) + v
        flavors_of: dict[int, dict[str, str]] = {m: {} for m in members}
        touched: dict[int, dict[str, int]] = {}
        for r, v in req.items():
            g = group_of.get(r)
            if g is None:
                messages.append(f"resource {r} unavailable in ClusterQueue")
                worst = NOFIT
                continue
            touched.setdefault(g, {})[r] = v
        skipped = worst == NOFIT
        if not skipped:
            for g in sorted(touched):
                greq = touched[g]
                choice = _choose_flavor(state, cq, node, wl, [wl.pod_sets[m] for m in members], groups[g], g, greq,
                                        assigned, psi, (resume or {}).get((psi, g), -1), messages, last_index, oracle)
                if choice is None:
                    worst = NOFIT
                    break
                fname, mode, level, frs = choice
                for m in members:
                    for r in reqs[m]:
                        if r in greq:
                            flavors_of[m][r] = fname
                for r, v in greq.items():
                    fr = _key(fname, r)
                    assigned[fr] = assigned.get(fr, 0) + v
                if mode in (PREEMPT, RECLAIM, NO_CANDIDATES):
                    frs_preempt.update(frs)
                worst = min(worst, PREEMPT if mode in (RECLAIM, NO_CANDIDATES) else mode)
                borrowing = max(borrowing, level)
        shared = state.tree.interned
        for m in members:
            mps = wl.pod_sets[m]
            psa = PodSetAssignment(mps.name, counts[m], _interned(shared, {} if skipped else flavors_of[m]),
                                   _interned(shared, reqs[m]))
            if m == psi:
                pod_sets.append(psa)
            else:
                later[m] = psa
    mode = worst if worst in (FIT, NOFIT) else PREEMPT
    tas_failure = None
    if state.tas is not None and mode != NOFIT:
        mode, tas_failure = _topology_step(state, wl, pod_sets, mode, frs_preempt, messages)
    shared = state.tree.interned
    frs = _NO_FRS
    if frs_preempt:
        frs = frozenset(frs_preempt)
        frs = shared.setdefault(frs, frs)
    if state.tas is None:
        # Without TAS nothing sets a pod-set assignment's topology, so equal pod-set
        # assignments (their maps are shared already) and lists of them are shared too.
        key = ("pod_sets", *((p.name, p.count, id(p.flavors), id(p.usage)) for p in pod_sets))
        found = shared.get(key)
        if found is None:
            found = shared[key] = pod_sets
        pod_sets = found
    return Assignment(pod_sets, mode, borrowing, _interned(shared, assigned), frs, "; ".join(messages),
                      _interned(shared, last_index), oracle or NO_ORACLE, tas_failure)


_NO_FRS: frozenset = frozenset()
#: The oracle of an assignment that ran no preemption search (read-only, shared).
NO_ORACLE = MappingProxyType({})


def _topology_step(state: KueueState, wl: KWorkload, pod_sets: list[PodSetAssignment], mode: int,
                   frs_preempt: set, messages: list[str]) -> tuple[int, tuple[int, str] | None]:
    """TAS after quota (§8): Fit without room in the topology becomes Preempt; a pod set that
    does not fit even the empty topology makes the workload NoFit."""
    failure = None
    if mode == FIT:
        failure = place(state, wl, pod_sets)
        if failure is None:
            return FIT, None
        psi = failure[0]
        frs_preempt.update((f, r) for r, f in pod_sets[psi].flavors.items())
        messages.append(failure[1])
        mode = PREEMPT
    empty = place(state, wl, pod_sets, empty=True, store=False)
    if empty is not None:
        if failure is None or empty[0] != failure[0] or empty[1] != failure[1]:
            messages.append(empty[1])
        return NOFIT, empty
    return mode, failure


def _choose_flavor(state, cq, node, wl, pss, group, gi, greq, assigned, psi, start, messages, last_index,
                   oracle=None):
    """Walk the group's flavors (from the resume index); return (flavor, mode, level, frs) or None.
    ``pss``: the pod sets sharing the choice (one, or a pod-set group's members); each must be
    able to use the flavor."""
    flavors = group.flavors
    best = None  # (flavor, mode, level, frs)
    preference = cq.flavor_fungibility_preference
    idx = start + 1 if 0 <= start + 1 < len(flavors) else 0
    order = list(range(idx, len(flavors)))
    for i in order:
        fq = flavors[i]
        last_index[_key(psi, gi)] = i
        flavor = state.flavors.get(fq.flavor)
        why = None if flavor is not None else f"flavor {fq.flavor} not found"
        for ps in pss:
            why = why or flavor_matches(flavor, ps)
            if not why and state.tas is not None:
                why = tas_mismatch(state, cq.name, flavor, ps)
        if why:
            messages.append(why)
            continue
        mode, level, frs = FIT, 0, []
        for r, v in greq.items():
            fr = _key(fq.flavor, r)
            if fr not in node.nominal:
                m, lv = NOFIT, 0
                messages.append(f"resource {r} unavailable in flavor {fq.flavor}")
            else:
                val = assigned.get(fr, 0) + v
                m, lv = _fits_quota(state, cq, node, wl, fr, val, messages, oracle)
            frs.append(fr)
            if (m, -lv) < (mode, -level):
                mode, level = m, lv
            if m == NOFIT:
                break
        cand = (fq.flavor, mode, level, frs)
        if mode != NOFIT and (best is None or _preferred(cand, best, preference)):
            best = cand
        if not _try_next(cq, mode, level):
            if i == len(flavors) - 1:
                last_index[_key(psi, gi)] = -1
            return cand
    last_index[_key(psi, gi)] = -1
    return best


def _try_next(cq: ClusterQueue, mode: int, level: int) -> bool:
    if mode in (NOFIT, NO_CANDIDATES):
        return True
    if mode in (PREEMPT, RECLAIM) and cq.flavor_fungibility_when_can_preempt == "TryNextFlavor":
        return True
    if level > 0 and cq.flavor_fungibility_when_can_borrow == "TryNextFlavor":
        return True
    return False


def _preferred(a, b, preference: str) -> bool:
    """True when evaluated flavor ``a`` beats the best so far ``b`` (first wins ties)."""
    _, ma, la, _ = a
    _, mb, lb, _ = b
    if (ma == NO_CANDIDATES) != (mb == NO_CANDIDATES):
        return mb == NO_CANDIDATES
    if preference == "PreemptionOverBorrowing":
        ka, kb = (-la, ma), (-lb, mb)
    else:
        ka, kb = (ma, -la), (mb, -lb)
    return ka > kb


def _fits_quota(state: KueueState, cq: ClusterQueue, node, wl: KWorkload, fr: FR, val: int,
                messages: list[str], oracle: dict | None = None) -> tuple[int, int]:
    if val > node.potential_available(fr):
        messages.append(f"insufficient quota for {fr[1]} in flavor {fr[0]}, previously considered "
                        f"podsets requests ({val}) exceed maximum capacity ({node.potential_available(fr)})")
        return NOFIT, 0
    level, may_reclaim = borrowing_level(node, fr, val)
    if val <= node.available(fr):
        return FIT, level
    prem = cq.preemption
    can_preempt_while_borrowing = (prem.borrow_within_cohort_policy not in ("Never", "", None)
                                   or (state.fair_sharing and prem.reclaim_within_cohort not in ("Never", "", None)))
    if node.nominal.get(fr, 0) >= val or may_reclaim or can_preempt_while_borrowing:
        targets = get_targets(state, wl, cq.name, {fr: val}, {fr})
        if oracle is not None:
            oracle[(fr, val)] = targets
        if not targets:
            messages.append(f"insufficient unused quota for {fr[1]} in flavor {fr[0]}, "
                            f"{val - node.available(fr)} more needed; no preemption candidates")
            return NO_CANDIDATES, 0
        for t in targets:
            state.tree.cqs[t.adm.cq].add_usage(t.adm.usage, -1)
        after, _ = borrowing_level(node, fr, val)
        for t in targets:
            state.tree.cqs[t.adm.cq].add_usage(t.adm.usage)
        own = any(t.adm.cq == cq.name for t in targets)
        messages.append(f"insufficient unused quota for {fr[1]} in flavor {fr[0]}, "
                        f"{val - node.available(fr)} more needed; preemption possible")
        return (PREEMPT if own else RECLAIM), after
    messages.append(f"insufficient unused quota for {fr[1]} in flavor {fr[0]}, "
                    f"{val - node.available(fr)} more needed")
    return NOFIT, 0


def partial_assignment(state: KueueState, wl: KWorkload, viable) -> Assignment | None:
    """Partial admission (§4.4): the smallest reduction k whose assignment is ``viable``."""
    deltas = [ps.count - ps.min_count if ps.min_count is not None and ps.min_count < ps.count else 0
              for ps in wl.pod_sets]
    total = sum(deltas)
    if total == 0:
        return None

    def counts_for(k: int) -> list[int]:
        return [ps.count - (d * k) // total for ps, d in zip(wl.pod_sets, deltas)]

    lo, hi = 1, total
    found = None
    while lo <= hi:
        mid = (lo + hi) // 2
        a = assign_flavors(state, wl, counts_for(mid))
        if viable(a):
            found = a
            hi = mid - 1
        else:
            lo = mid + 1
    return found
