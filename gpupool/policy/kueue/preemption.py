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


def _uses_any(usage: dict[FR, int], frs) -> bool:
    """``Admitted.uses_any`` without the generator (called once per candidate per search)."""
    for fr in frs:
        if usage.get(fr, 0) > 0:
            return True
    return False


def classic_targets(state: KueueState, wl: KWorkload, cq_name: str, request: dict[FR, int],
                    frs: set[FR]) -> list[Target]:
    tree = state.tree
    q = tree.cqs[cq_name]
    prem = state.cq_models[cq_name].preemption
    within = prem.within_cluster_queue
    own = state.by_cq.get(cq_name, ())
    if within == "LowerPriority":  # the common policy, without a call per workload
        prio_p = wl.priority
        same = [_Cand(a, IN_CQ, False, False) for a in own if a.wl.priority < prio_p and _uses_any(a.usage, frs)]
    else:
        same = [_Cand(a, IN_CQ, False, False) for a in own
                if _uses_any(a.usage, frs) and within_cq_allows(within, wl, a.wl)]
    hierarchy: list[_Cand] = []
    by_priority: list[_Cand] = []
    # Each ancestor level adds a run already in candidate order (``_other_cq_candidates``); a
    # list fed by one level only needs no sort (a stable sort of a sorted list is a no-op).
    runs_h = runs_p = 0
    bwc_never = prem.borrow_within_cohort_policy in ("Never", "", None)
    threshold = prem.borrow_within_cohort_max_priority_threshold
    if q.parent is not None and prem.reclaim_within_cohort not in ("Never", "", None):
        adv = all(q.usage.get(fr, 0) + v <= q.nominal.get(fr, 0) for fr, v in request.items())
        remaining = {fr: v - q.local_available(fr) for fr, v in request.items()}

        reclaim = prem.reclaim_within_cohort
        any_reclaim = reclaim == "Any"
        if any_reclaim and bwc_never and not same and not adv \
                and not all(q.usage.get(fr, 0) < q.nominal.get(fr, 0) for fr in frs):
            # Exact shortcut of the common hopeless search: ``q`` would borrow, so (adv stays
            # false only while no ancestor can hold the request: checked below) every
            # other-CQ candidate is "without borrowing" (borrowWithinCohort Never), the only
            # attempt allows borrowing and skips all of them, and ``q`` has no candidate of
            # its own: nothing can be removed.
            if not _reaches_advantage(q, request):
                return []
        prio = wl.priority
        visited: QNode = q
        node = q.parent
        while node is not None:
            skip_child = id(visited)
            n_h, n_p = len(hierarchy), len(by_priority)
            level = _other_cq_candidates(state, node, frs)
            if any_reclaim and (adv or bwc_never):
                # Every candidate of the level gets the same reason and flags: shared records.
                cands = level.shared(adv)
                (hierarchy if adv else by_priority).extend(
                    [c for child_id, c in zip(level.child_ids, cands) if child_id != skip_child])
                adms = ()
            else:
                adms = level.adms
            for child_id, a in zip(level.child_ids, adms):
                if child_id == skip_child or not (any_reclaim or reclaim_allows(reclaim, wl, a.wl)):
                    continue
                if adv:
                    hierarchy.append(_Cand(a, IN_COHORT_RECLAMATION, False, True))
                    continue
                a_prio = a.wl.priority
                without = (bwc_never or a_prio >= prio or (threshold is not None and a_prio > threshold))
                reason = IN_COHORT_RECLAMATION if without else IN_COHORT_RECLAIM_WHILE_BORROWING
                by_priority.append(_Cand(a, reason, without, True))
            runs_h += len(hierarchy) > n_h
            runs_p += len(by_priority) > n_p
            adv = adv or all(node.usage.get(fr, 0) + rem <= node.subtree.get(fr, 0)
                             for fr, rem in remaining.items())
            remaining = {fr: rem - node.local_available(fr) for fr, rem in remaining.items()}
            visited = node
            node = node.parent
    key = lambda c: candidate_key(c.adm, cq_name, state.afs)
    # Other CQs' candidates: ``candidate_key(adm, cq_name)`` equals the memo's
    # ``candidate_key(adm, "")`` (not the preemptor's CQ, so no AFS term).
    lists = [hierarchy if runs_h <= 1 else sorted(hierarchy, key=key),
             by_priority if runs_p <= 1 else sorted(by_priority, key=key),
             sorted(same, key=key)]
    if any(c.adm.evicted for lst in lists for c in lst):
        ordered = [c for lst in lists for c in lst if c.adm.evicted] + [c for lst in lists for c in lst
                                                                        if not c.adm.evicted]
    else:  # nothing evicted (always so in a simulation): the lists in order
        ordered = lists[0] + lists[1] + lists[2]
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


def _reaches_advantage(q: QNode, request: dict[FR, int]) -> bool:
    """Whether ``classic_targets``' walk up from ``q`` turns ``adv`` on at some ancestor (the
    request fits in that subtree's quota: its candidates are taken as reclamation)."""
    remaining = [(fr, v - q.local_available(fr)) for fr, v in request.items()]
    node = q.parent
    while node is not None:
        usage, subtree = node.usage, node.subtree
        for fr, rem in remaining:
            if usage.get(fr, 0) + rem > subtree.get(fr, 0):
                break
        else:
            return node.parent is not None  # adv set here only matters for the levels above
        remaining = [(fr, rem - node.local_available(fr)) for fr, rem in remaining]
        node = node.parent
    return False


class _Level:
    """The other-CQ candidates below one cohort node (``_other_cq_candidates``)."""

    __slots__ = ("_shared", "adms", "child_ids")

    def __init__(self, child_ids: list[int], adms: list[Admitted]) -> None:
        self.child_ids = child_ids  # id of the child of the node each candidate is under
        self.adms = adms
        self._shared: dict[bool, list[_Cand]] = {}

    def shared(self, adv: bool) -> list[_Cand]:
        """``_Cand`` records parallel to ``adms`` for reclaimWithinCohort Any: reclamation
        "with borrowing" (adv) or "without borrowing" (borrowWithinCohort Never); they are
        read-only, so the heads of a cycle share them."""
        found = self._shared.get(adv)
        if found is None:
            found = self._shared[adv] = [_Cand(a, IN_COHORT_RECLAMATION, not adv, True) for a in self.adms]
        return found


def _other_cq_candidates(state: KueueState, node: QNode, frs: set[FR]) -> _Level:
    """Every admitted workload using an fr of ``frs`` in the subtrees of ``node``'s children
    that are borrowing on ``frs`` (descending only into borrowing cohorts), sorted in candidate
    order (§5.2; for other CQs the order does not depend on the preemptor), with the id of the
    child of ``node`` each comes from. The caller drops the child it came from.

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
        out.extend((child_id, a) for a in by_cq.get(sub.name, ()) if _uses_any(a.usage, frs))

    for child in node.children:
        collect(id(child), child)
    out.sort(key=lambda item: candidate_key(item[1], ""))
    found = _Level([c for c, _ in out], [a for _, a in out])
    if memo is not None:
        memo[key] = found
    return found


def _fits(q: QNode, request: dict[FR, int], allow_borrowing: bool) -> bool:
    # Without borrowing the cheap nominal test goes first: while the preemptor's own
    # candidates are not removed yet it fails, and ``available`` walks the whole chain.
    if not allow_borrowing:
        usage, nominal = q.usage, q.nominal
        for fr, v in request.items():
            if usage.get(fr, 0) + v > nominal.get(fr, 0):
                return False
    for fr, v in request.items():
        if v > q.available(fr):
            return False
    return True


def _attempt(state: KueueState, q: QNode, request, frs, ordered: list[_Cand], allow: bool):
    """Remove candidates in order (skipping other ClusterQueues' that no longer borrow) until
    ``request`` fits, then keep a minimal set.

    The quota tree's usage is a function of the ClusterQueues' usage alone (see ``run_cycle``),
    so the removals of other ClusterQueues' candidates are gathered per ClusterQueue and applied
    to the tree only when something reads it there: the fit test's availability (the nominal
    test without borrowing reads only ``q``'s own usage, which only ``q``'s candidates change,
    and those are removed at once) and the borrowing test of ancestors below the common one.
    A candidate's own ClusterQueue's usage is read as tree usage minus what is gathered."""
    cqs = state.tree.cqs
    tree = state.tree
    q_ids = {id(n) for n in q.path()}  # the LCA with any CQ is the first of its ancestors in here
    removed: list[_Cand] = []
    applied = 0  # removed[:applied] and ``own`` are out of the tree, the rest is in ``pending``
    pending: dict[str, dict] = {}  # ClusterQueue -> usage gathered for removal
    own: list[_Cand] = []
    result = None
    usage_q, nominal_q = q.usage, q.nominal

    def within_nominal() -> bool:
        for fr, v in request.items():
            if usage_q.get(fr, 0) + v > nominal_q.get(fr, 0):
                return False
        return True

    # Without borrowing ``_fits`` first needs the request within ``q``'s nominal quota, which
    # only the removal of ``q``'s own candidates can change: tested again only then.
    nominal_ok = allow or within_nominal()

    def flush() -> None:
        nonlocal applied
        for name, total in pending.items():
            cqs[name].add_usage(total, -1)
        pending.clear()
        applied = len(removed)

    for cand in ordered:
        adm = cand.adm
        if cand.other:
            if allow and cand.without_borrowing:
                continue
            x = cqs[adm.cq]
            gathered = pending.get(adm.cq)
            if gathered is None:
                if not x.borrowing_any(frs):
                    continue
            else:
                x_usage, x_subtree = x.usage, x.subtree
                for fr in frs:
                    if x_usage.get(fr, 0) - gathered.get(fr, 0) > x_subtree.get(fr, 0):
                        break
                else:
                    continue  # not borrowing any more
            node = x.parent
            if node is not None and id(node) not in q_ids:
                flush()  # an ancestor's usage is read: it must see every removal so far
                gathered = None
                skip = False
                while node is not None and id(node) not in q_ids:
                    if not node.borrowing_any(frs):
                        skip = True
                        break
                    node = node.parent
                if skip:
                    continue
            if gathered is None:
                pending[adm.cq] = dict(adm.usage)
            else:
                for fr, v in adm.usage.items():
                    gathered[fr] = gathered.get(fr, 0) + v
        else:
            cqs[adm.cq].add_usage(adm.usage, -1)
            own.append(cand)
            nominal_ok = allow or within_nominal()
        removed.append(cand)
        if not nominal_ok:
            continue  # ``_fits`` fails on the nominal test, whatever the tree says
        flush()
        if _fits(q, request, allow):
            result = _minimal_set(tree, q, request, removed, allow)
            break
    if result is None:
        # Give back what reached the tree; what is still gathered never left it.
        for cand in removed[:applied]:
            if cand.other:
                cqs[cand.adm.cq].add_usage(cand.adm.usage)
        for cand in own:
            cqs[cand.adm.cq].add_usage(cand.adm.usage)
        return None
    for cand in result:  # what is still out of the tree
        cqs[cand.adm.cq].add_usage(cand.adm.usage)
    return [Target(c.adm, c.reason) for c in result]


def _minimal_set(tree, q: QNode, request, removed: list, allow: bool) -> list:
    """Give back targets (all but the last one added) that are not needed after all: from the
    second last back to the first, one that still fits once given back is dropped.

    Leaves the tree with exactly the kept targets removed (the dropped ones are back in), so
    the caller restores only the kept ones (usage commutes: see ``run_cycle``)."""
    cqs = tree.cqs
    keep = [True] * len(removed)
    for i in range(len(removed) - 2, -1, -1):
        c = removed[i]
        cqs[c.adm.cq].add_usage(c.adm.usage)
        if _fits(q, request, allow):
            keep[i] = False
        else:
            cqs[c.adm.cq].add_usage(c.adm.usage, -1)
    return [c for c, kept in zip(removed, keep) if kept]


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
    out = removed  # what is out of the tree at the end
    if done:
        q.add_usage(request, -1)
        kept = _minimal_set(tree, q, request, [_TargetCand(t) for t in removed], True)
        q.add_usage(request)
        result = out = [c.target for c in kept]
    q.add_usage(request, -1)
    for t in out:
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
