"""Choosing preemption targets: classic (spec §5) and fair sharing (§6.3).

Both only simulate on the quota tree (remove candidates' usage, test, undo) and leave it as
they found it. They return ``Target``s in the order chosen.
"""
from __future__ import annotations

from gpupool.policy.kueue.quota import FR, QNode, almost_lca, dominant_share
from gpupool.policy.kueue.records import (
    IN_COHORT_FAIR_SHARING,
    IN_COHORT_RECLAIM_WHILE_BORROWING,
    IN_COHORT_RECLAMATION,
    IN_CQ,
    Admitted,
    KWorkload,
    Target,
)
from gpupool.policy.kueue.state import KueueState


def within_cq_allows(policy: str, p: KWorkload, c: KWorkload) -> bool:
    if policy == "LowerPriority":
        return c.priority < p.priority
    if policy == "LowerOrNewerEqualPriority":
        return c.priority < p.priority or (c.priority == p.priority and p.created < c.created)
    return False


def reclaim_allows(policy: str, p: KWorkload, c: KWorkload) -> bool:
    if policy == "Any":
        return True
    if policy == "LowerPriority":
        return c.priority < p.priority
    return False


def candidate_key(adm: Admitted, own_cq: str, afs: dict | None = None) -> tuple:
    """CandidatesOrdering (§5.2): evicted first, other CQs first, [Admission Fair Sharing: in the
    preemptor's CQ, higher LocalQueue usage first], lower priority, most recently reserved, UID.
    ``afs`` maps a ClusterQueue with AFS to ``kwl -> its LocalQueue's usage`` (``state.afs``)."""
    own = adm.cq == own_cq
    usage = -afs[own_cq](adm.wl) if own and afs and own_cq in afs else 0.0
    return (not adm.evicted, own, usage, adm.wl.priority, -adm.reserved_at, adm.wl.uid)


def get_targets(state: KueueState, wl: KWorkload, cq_name: str, request: dict[FR, int],
                frs: set[FR]) -> list[Target]:
    """Targets whose eviction lets ``request`` (the workload's usage) fit in ``cq_name``."""
    if state.fair_sharing:
        return fair_targets(state, wl, cq_name, request, frs)
    return classic_targets(state, wl, cq_name, request, frs)


# ----------------------------------------------------------------------------- classic


class _Cand:
    __slots__ = ("adm", "other", "reason", "without_borrowing")

    def __init__(self, adm: Admitted, reason: str, without_borrowing: bool, other: bool) -> None:
        self.adm = adm
        self.reason = reason
        self.without_borrowing = without_borrowing
        self.other = other


def classic_targets(state: KueueState, wl: KWorkload, cq_name: str, request: dict[FR, int],
                    frs: set[FR]) -> list[Target]:
    tree = state.tree
    q = tree.cqs[cq_name]
    prem = state.cq_models[cq_name].preemption
    same = [_Cand(a, IN_CQ, False, False) for a in state.by_cq.get(cq_name, ())
            if a.uses_any(frs) and within_cq_allows(prem.within_cluster_queue, wl, a.wl)]
    hierarchy: list[_Cand] = []
    by_priority: list[_Cand] = []
    bwc_never = prem.borrow_within_cohort_policy in ("Never", "", None)
    threshold = prem.borrow_within_cohort_max_priority_threshold
    if q.parent is not None and prem.reclaim_within_cohort not in ("Never", "", None):
        adv = all(q.usage.get(fr, 0) + v <= q.nominal.get(fr, 0) for fr, v in request.items())
        remaining = {fr: v - q.local_available(fr) for fr, v in request.items()}

        reclaim = prem.reclaim_within_cohort
        visited: QNode = q
        node = q.parent
        while node is not None:
            skip_child = id(visited)
            for child_id, a in _other_cq_candidates(state, node, frs):
                if child_id == skip_child or not reclaim_allows(reclaim, wl, a.wl):
                    continue
                if adv:
                    hierarchy.append(_Cand(a, IN_COHORT_RECLAMATION, False, True))
                    continue
                without = (bwc_never or a.wl.priority >= wl.priority
                           or (threshold is not None and a.wl.priority > threshold))
                reason = IN_COHORT_RECLAMATION if without else IN_COHORT_RECLAIM_WHILE_BORROWING
                by_priority.append(_Cand(a, reason, without, True))
            adv = adv or all(node.usage.get(fr, 0) + rem <= node.subtree.get(fr, 0)
                             for fr, rem in remaining.items())
            remaining = {fr: rem - node.local_available(fr) for fr, rem in remaining.items()}
            visited = node
            node = node.parent
    key = lambda c: candidate_key(c.adm, cq_name, state.afs)
    lists = [sorted(hierarchy, key=key), sorted(by_priority, key=key), sorted(same, key=key)]
    ordered = [c for lst in lists for c in lst if c.adm.evicted] + [c for lst in lists for c in lst if not c.adm.evicted]
    if not ordered:
        return []
    others = bool(hierarchy or by_priority)
    if not others or (bwc_never and not all(q.usage.get(fr, 0) < q.nominal.get(fr, 0) for fr in frs)):
        attempts = [True]
    elif bwc_never and not hierarchy:
        attempts = [False, True]
    else:
        attempts = [True, False]
    for allow in attempts:
        found = _attempt(state, q, request, frs, ordered, allow)
        if found is not None:
            return found
    return []


def _other_cq_candidates(state: KueueState, node: QNode, frs: set[FR]) -> list[tuple[int, Admitted]]:
    """``(id of node's child, workload)`` for every admitted workload using an fr of ``frs``
    in the subtrees of ``node``'s children that are borrowing on ``frs`` (descending only into
    borrowing cohorts), sorted in candidate order (§5.2; for other CQs the order does not depend
    on the preemptor). The caller drops the child it came from.

    While a cycle nominates its heads the quota tree is the cycle's initial snapshot (every
    simulation restores it), so ``state.candidate_memo`` — set by the cycle for that phase only
    — shares these lists between all heads of a cohort."""
    memo = state.candidate_memo
    key = (id(node), frozenset(frs))
    if memo is not None:
        found = memo.get(key)
        if found is not None:
            return found
    out: list[tuple[int, Admitted]] = []
    by_cq = state.by_cq

    def collect(child_id: int, sub: QNode) -> None:
        if not sub.borrowing_any(frs):
            return
        if not sub.is_cq:
            for c in sub.children:
                collect(child_id, c)
            return
        out.extend((child_id, a) for a in by_cq.get(sub.name, ()) if a.uses_any(frs))

    for child in node.children:
        collect(id(child), child)
    out.sort(key=lambda item: candidate_key(item[1], ""))
    if memo is not None:
        memo[key] = out
    return out


def _fits(q: QNode, request: dict[FR, int], allow_borrowing: bool) -> bool:
    for fr, v in request.items():
        if v > q.available(fr):
            return False
        if not allow_borrowing and q.usage.get(fr, 0) + v > q.nominal.get(fr, 0):
            return False
    return True


def _attempt(state: KueueState, q: QNode, request, frs, ordered: list[_Cand], allow: bool):
    cqs = state.tree.cqs
    tree = state.tree
    q_ids = {id(n) for n in q.path()}  # the LCA with any CQ is the first of its ancestors in here
    removed: list[_Cand] = []
    result = None
    for cand in ordered:
        x = cqs[cand.adm.cq]
        if cand.other:
            if allow and cand.without_borrowing:
                continue
            if not x.borrowing_any(frs):
                continue
            node = x.parent
            skip = False
            while node is not None and id(node) not in q_ids:
                if not node.borrowing_any(frs):
                    skip = True
                    break
                node = node.parent
            if skip:
                continue
        x.add_usage(cand.adm.usage, -1)
        removed.append(cand)
        if _fits(q, request, allow):
            result = _minimal_set(tree, q, request, removed, allow)
            break
    for cand in removed:
        tree.cqs[cand.adm.cq].add_usage(cand.adm.usage)
    if result is None:
        return None
    return [Target(c.adm, c.reason) for c in result]


def _minimal_set(tree, q: QNode, request, removed: list, allow: bool) -> list:
    """Give back targets (all but the last one added) that are not needed after all.

    Leaves the tree with exactly the kept targets removed; the caller restores ``removed``'s
    usage, so dropped targets are taken out again before returning."""
    kept = list(removed)
    for i in range(len(removed) - 2, -1, -1):
        c = removed[i]
        tree.cqs[c.adm.cq].add_usage(c.adm.usage)
        if _fits(q, request, allow):
            kept.remove(c)
        else:
            tree.cqs[c.adm.cq].add_usage(c.adm.usage, -1)
    # Re-remove the dropped ones so the caller's restore of ``removed`` balances.
    for c in removed:
        if c not in kept:
            tree.cqs[c.adm.cq].add_usage(c.adm.usage, -1)
    return kept


# ----------------------------------------------------------------------------- fair sharing


def fair_targets(state: KueueState, wl: KWorkload, cq_name: str, request: dict[FR, int],
                 frs: set[FR]) -> list[Target]:
    tree = state.tree
    q = tree.cqs[cq_name]
    prem = state.cq_models[cq_name].preemption
    cands: dict[str, list[Admitted]] = {}
    own = [a for a in state.by_cq.get(cq_name, ())
           if a.uses_any(frs) and within_cq_allows(prem.within_cluster_queue, wl, a.wl)]
    if own:
        cands[cq_name] = own
    root = q.root()
    if q.parent is not None and prem.reclaim_within_cohort not in ("Never", "", None):
        for x in _cqs_under(root):
            if x is q or not x.borrowing_any(frs):
                continue
            lst = [a for a in state.by_cq.get(x.name, ())
                   if a.uses_any(frs) and reclaim_allows(prem.reclaim_within_cohort, wl, a.wl)]
            if lst:
                cands[x.name] = lst
    for lst in cands.values():
        lst.sort(key=lambda a: candidate_key(a, cq_name, state.afs))
    if not cands:
        return []
    q_path = {id(n) for n in q.path()}
    q.add_usage(request)
    removed: list[Target] = []

    def remove(adm: Admitted, reason: str) -> None:
        tree.cqs[adm.cq].add_usage(adm.usage, -1)
        removed.append(Target(adm, reason))

    def fits() -> bool:
        q.add_usage(request, -1)
        ok = all(v <= q.available(fr) for fr, v in request.items())
        q.add_usage(request)
        return ok

    strategies = state.strategies
    within_nominal_gate = state.gate("FairSharingPreemptWithinNominal")
    done = False
    retry: dict[str, list[Admitted]] = {}
    while not done:
        t = _pick_target(root, q, q_path, cands, frs, cq_name)
        if t is None:
            break
        lst = cands[t.name]
        if t is q:
            remove(lst.pop(0), IN_CQ)
            done = fits()
            continue
        if within_nominal_gate and all(q.usage.get(fr, 0) <= q.nominal.get(fr, 0) for fr in frs):
            remove(lst.pop(0), IN_COHORT_RECLAMATION)
            done = fits()
            continue
        x, y = almost_lca(q, t), almost_lca(t, q)
        p_new = dominant_share(x)
        t_old = dominant_share(y)
        while lst:
            adm = lst.pop(0)
            tree.cqs[adm.cq].add_usage(adm.usage, -1)
            t_new = dominant_share(y)
            if _strategy_ok(strategies[0], p_new, t_old, t_new):
                removed.append(Target(adm, IN_COHORT_FAIR_SHARING))
                done = fits()
                break
            tree.cqs[adm.cq].add_usage(adm.usage)
            retry.setdefault(t.name, []).append(adm)
    if not done and len(strategies) > 1 and retry:
        while not done:
            t = _pick_target(root, q, q_path, retry, frs, cq_name)
            if t is None:
                break
            x, y = almost_lca(q, t), almost_lca(t, q)
            if _strategy_ok(strategies[1], dominant_share(x), dominant_share(y), None):
                remove(retry[t.name].pop(0), IN_COHORT_FAIR_SHARING)
                done = fits()
            retry[t.name] = []
    result: list[Target] = []
    if done:
        q.add_usage(request, -1)
        kept = _minimal_set(tree, q, request, [_TargetCand(t) for t in removed], True)
        q.add_usage(request)
        result = [c.target for c in kept]
    q.add_usage(request, -1)
    for t in removed:
        tree.cqs[t.adm.cq].add_usage(t.adm.usage)
    return result


class _TargetCand:
    __slots__ = ("adm", "target")

    def __init__(self, target: Target) -> None:
        self.target = target
        self.adm = target.adm


def _strategy_ok(strategy: str, p_new: float, t_old: float, t_new: float | None) -> bool:
    if strategy == "LessThanOrEqualToFinalShare":
        return t_new is not None and p_new <= t_new
    return p_new < t_old  # LessThanInitialShare


def _cqs_under(node: QNode):
    if node.is_cq:
        yield node
        return
    for child in node.children:
        yield from _cqs_under(child)


def _pick_target(root: QNode, q: QNode, q_path: set, cands: dict, frs, own: str) -> QNode | None:
    """Descend from the root to the highest-share child that still has candidates."""

    def eligible_cq(node: QNode) -> bool:
        return bool(cands.get(node.name)) and (node is q or node.borrowing_any(frs))

    def descend(node: QNode) -> QNode | None:
        if node.is_cq:
            return node if eligible_cq(node) else None
        if node is not root and id(node) not in q_path and not node.borrowing_any(frs):
            return None
        ranked = []
        for child in node.children:
            first = cands.get(child.name) if child.is_cq else None
            first_key = candidate_key(first[0], own) if first else ()
            ranked.append((-dominant_share(child), 0 if not child.is_cq else 1, first_key, child.name, child))
        ranked.sort(key=lambda r: r[:4])
        for *_, child in ranked:
            found = descend(child)
            if found is not None:
                return found
        return None

    return descend(root)
