"""The Kueue policy's speed-ups (issue 4) give the answers of the plain algorithms they replace.

Each test builds random quota trees (nested cohorts, borrowing and lending limits, several
preemption policies) and admitted workloads, and compares the optimised code with a plain
reference written here from the algorithm's definition: the one-walk-per-level availability,
the classic preemption search that removes candidates one at a time and gives back unneeded
ones one at a time, one quota add per admitted workload, and a cycle that copies the tree's
usage before and restores it after.
"""
from __future__ import annotations

import random

import pytest

import gpupool.policy.kueue  # noqa: F401  (registers the policy)
from gpupool.model.kueue import (
    ClusterQueue,
    Cohort,
    FlavorQuotas,
    KueueConfig,
    Preemption,
    ResourceGroup,
    ResourceQuota,
)
from gpupool.policy.kueue import preemption as pm
from gpupool.policy.kueue.cycle import run_cycle
from gpupool.policy.kueue.quota import QNode
from gpupool.policy.kueue.records import (
    IN_COHORT_RECLAIM_WHILE_BORROWING,
    IN_COHORT_RECLAMATION,
    IN_CQ,
    Admitted,
    KPodSet,
    KWorkload,
    Target,
)
from gpupool.policy.kueue.state import KueueState

F = ("default", "cpu")
SEEDS = range(60)


# ----------------------------------------------------------------------------- random setups


def _config(rng: random.Random) -> KueueConfig:
    """Two-level cohort trees: a root, sub-cohorts, ClusterQueues under both."""
    cfg = KueueConfig()
    cfg.cohorts["root"] = Cohort("root")
    subs = [f"sub{i}" for i in range(rng.randint(0, 3))]
    for name in subs:
        lending = rng.choice([None, None, rng.randint(0, 6)])
        groups = []
        if rng.random() < 0.4:  # a cohort with quota of its own
            groups = [ResourceGroup(("cpu",), [FlavorQuotas("default", {"cpu": ResourceQuota(
                rng.randint(0, 8), None, lending)})])]
        cfg.cohorts[name] = Cohort(name, parent="root", resource_groups=groups)
    for i in range(rng.randint(2, 7)):
        nominal = rng.randint(0, 12)
        borrowing = rng.choice([None, rng.randint(0, 10)])
        lending = rng.choice([None, None, rng.randint(0, nominal)])
        reclaim = rng.choice(["Any", "Any", "LowerPriority", "Never"])
        bwc = "Never" if reclaim == "Never" else rng.choice(["Never", "LowerPriority"])
        threshold = rng.choice([None, rng.randint(0, 3)]) if bwc != "Never" else None
        within = rng.choice(["LowerPriority", "LowerOrNewerEqualPriority", "Never"])
        quota = ResourceQuota(nominal, borrowing, lending)
        cfg.cluster_queues[f"cq{i}"] = ClusterQueue(
            f"cq{i}", cohort=rng.choice(["root", *subs]),
            resource_groups=[ResourceGroup(("cpu",), [FlavorQuotas("default", {"cpu": quota})])],
            namespace_selector={}, preemption=Preemption(reclaim, bwc, threshold, within))
    return cfg


def _wl(key: int, cq: str, prio: int, created: float, cpu: int) -> KWorkload:
    return KWorkload(key, f"w{key}", cq, prio, created, (key,), [KPodSet("main", 1, {"cpu": cpu})])


def _admitted(rng: random.Random, cfg: KueueConfig) -> list[Admitted]:
    out = []
    for key in range(rng.randint(0, 25)):
        cq = rng.choice(sorted(cfg.cluster_queues))
        cpu = rng.randint(1, 4)
        out.append(Admitted(_wl(key, cq, rng.randint(0, 4), float(rng.randint(0, 9)), cpu), cq, {F: cpu},
                            float(rng.randint(0, 9))))
    return out


def _state(cfg: KueueConfig, adms: list[Admitted]) -> KueueState:
    state = KueueState(cfg)
    for adm in adms:
        state.admit(adm)
    return state


def _usage(state: KueueState) -> dict:
    """Every node's usage, zero entries left out (adds and removals may leave them)."""
    tree = state.tree
    nodes = {**{("cq", n): q for n, q in tree.cqs.items()}, **{("cohort", n): q for n, q in tree.cohorts.items()}}
    return {k: {fr: v for fr, v in q.usage.items() if v} for k, q in nodes.items()}


# ----------------------------------------------------------------------------- references


def ref_available_raw(node: QNode, fr) -> int:
    """§2's recursive definition, as the quota model first computed it."""
    used = node.usage.get(fr, 0)
    if node.parent is None:
        return node.subtree.get(fr, 0) - used
    p = ref_available_raw(node.parent, fr)
    limit = node.borrowing.get(fr)
    lq = node.local_quota(fr)
    if limit is not None:
        p = min(p, (node.subtree.get(fr, 0) - lq) - max(0, used - lq) + limit)
    return max(0, lq - used) + p


def ref_fits(q: QNode, request: dict, allow: bool) -> bool:
    for fr, v in request.items():
        if v > max(0, ref_available_raw(q, fr)):
            return False
        if not allow and q.usage.get(fr, 0) + v > q.nominal.get(fr, 0):
            return False
    return True


def ref_classic_targets(state: KueueState, wl: KWorkload, cq_name: str, request: dict, frs: set) -> list:
    """Classic target search (§5): candidate lists per level, one removal and one fit test
    per candidate, then one give-back and one fit test per target."""
    tree = state.tree
    q = tree.cqs[cq_name]
    prem = state.cq_models[cq_name].preemption

    def cand(a, reason, without, other):
        return {"adm": a, "reason": reason, "without": without, "other": other}

    same = [cand(a, IN_CQ, False, False) for a in state.by_cq.get(cq_name, ())
            if a.uses_any(frs) and pm.within_cq_allows(prem.within_cluster_queue, wl, a.wl)]
    hierarchy, by_priority = [], []
    bwc_never = prem.borrow_within_cohort_policy in ("Never", "", None)
    threshold = prem.borrow_within_cohort_max_priority_threshold
    if q.parent is not None and prem.reclaim_within_cohort not in ("Never", "", None):
        adv = all(q.usage.get(fr, 0) + v <= q.nominal.get(fr, 0) for fr, v in request.items())
        remaining = {fr: v - q.local_available(fr) for fr, v in request.items()}
        visited, node = q, q.parent
        while node is not None:
            found = []

            def collect(child, sub):
                if not sub.borrowing_any(frs):
                    return
                if not sub.is_cq:
                    for c in sub.children:
                        collect(child, c)
                    return
                found.extend((child, a) for a in state.by_cq.get(sub.name, ()) if a.uses_any(frs))

            for child in node.children:
                if child is not visited:
                    collect(child, child)
            for _, a in sorted(found, key=lambda item: pm.candidate_key(item[1], "")):
                if not pm.reclaim_allows(prem.reclaim_within_cohort, wl, a.wl):
                    continue
                if adv:
                    hierarchy.append(cand(a, IN_COHORT_RECLAMATION, False, True))
                    continue
                without = bwc_never or a.wl.priority >= wl.priority or (
                    threshold is not None and a.wl.priority > threshold)
                by_priority.append(cand(a, IN_COHORT_RECLAMATION if without else IN_COHORT_RECLAIM_WHILE_BORROWING,
                                        without, True))
            adv = adv or all(node.usage.get(fr, 0) + rem <= node.subtree.get(fr, 0) for fr, rem in remaining.items())
            remaining = {fr: rem - node.local_available(fr) for fr, rem in remaining.items()}
            visited, node = node, node.parent
    key = lambda c: pm.candidate_key(c["adm"], cq_name)  # noqa: E731
    ordered = sorted(hierarchy, key=key) + sorted(by_priority, key=key) + sorted(same, key=key)
    if not ordered:
        return []
    others = bool(hierarchy or by_priority)
    if not others or (bwc_never and not all(q.usage.get(fr, 0) < q.nominal.get(fr, 0) for fr in frs)):
        attempts = [True]
    elif bwc_never and not hierarchy:
        attempts = [False, True]
    else:
        attempts = [True, False]
    q_path = {id(n) for n in q.path()}
    for allow in attempts:
        removed = []
        result = None
        for c in ordered:
            x = tree.cqs[c["adm"].cq]
            if c["other"]:
                if allow and c["without"]:
                    continue
                if not x.borrowing_any(frs):
                    continue
                node, skip = x.parent, False
                while node is not None and id(node) not in q_path:
                    if not node.borrowing_any(frs):
                        skip = True
                        break
                    node = node.parent
                if skip:
                    continue
            x.add_usage(c["adm"].usage, -1)
            removed.append(c)
            if ref_fits(q, request, allow):
                kept = list(removed)
                for r in reversed(removed[:-1]):
                    tree.cqs[r["adm"].cq].add_usage(r["adm"].usage)
                    if ref_fits(q, request, allow):
                        kept.remove(r)
                    else:
                        tree.cqs[r["adm"].cq].add_usage(r["adm"].usage, -1)
                for r in removed:
                    if r not in kept:
                        tree.cqs[r["adm"].cq].add_usage(r["adm"].usage, -1)
                result = kept
                break
        for c in removed:
            tree.cqs[c["adm"].cq].add_usage(c["adm"].usage)
        if result is not None:
            return [Target(c["adm"], c["reason"]) for c in result]
    return []


# ----------------------------------------------------------------------------- tests


@pytest.mark.parametrize("seed", SEEDS)
def test_available_matches_recursive_definition(seed):
    rng = random.Random(seed)
    cfg = _config(rng)
    state = _state(cfg, _admitted(rng, cfg))
    nodes = [*state.tree.cqs.values(), *state.tree.cohorts.values()]
    for _ in range(20):
        node = rng.choice(nodes)
        assert node.available_raw(F) == ref_available_raw(node, F)
        # also with a transient negative usage, as a removal simulation leaves it
        cq = rng.choice(list(state.tree.cqs.values()))
        delta = rng.randint(-6, 6)
        cq.add_usage({F: delta})
        assert node.available_raw(F) == ref_available_raw(node, F)
        cq.add_usage({F: delta}, -1)


@pytest.mark.parametrize("seed", SEEDS)
def test_admit_all_equals_one_admit_per_workload(seed):
    rng = random.Random(seed)
    cfg = _config(rng)
    adms = _admitted(rng, cfg)
    one_by_one = _state(cfg, adms)
    batched = KueueState(cfg)
    batched.admit_all(adms)
    assert _usage(batched) == _usage(one_by_one)
    assert {k: [a.wl.key for a in v] for k, v in batched.by_cq.items()} == \
        {k: [a.wl.key for a in v] for k, v in one_by_one.by_cq.items()}


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("memo", [False, True])
def test_classic_targets_match_the_one_at_a_time_search(seed, memo):
    rng = random.Random(seed)
    cfg = _config(rng)
    state = _state(cfg, _admitted(rng, cfg))
    state.candidate_memo = {} if memo else None
    for i in range(15):
        cq = rng.choice(sorted(cfg.cluster_queues))
        wl = _wl(1000 + i, cq, rng.randint(0, 5), float(rng.randint(0, 9)), 1)
        request = {F: rng.randint(1, 14)}
        before = _usage(state)
        want = ref_classic_targets(state, wl, cq, request, {F})
        assert _usage(state) == before
        got = pm.classic_targets(state, wl, cq, request, {F})
        assert _usage(state) == before  # the search leaves the tree as it found it
        assert [(t.adm.wl.key, t.reason) for t in got] == [(t.adm.wl.key, t.reason) for t in want]


def test_random_setups_exercise_preemption():
    """The random setups above do find targets (and searches that find none)."""
    outcomes = set()
    for seed in SEEDS:
        rng = random.Random(seed)
        cfg = _config(rng)
        state = _state(cfg, _admitted(rng, cfg))
        for i in range(15):
            cq = rng.choice(sorted(cfg.cluster_queues))
            wl = _wl(1000 + i, cq, rng.randint(0, 5), float(rng.randint(0, 9)), 1)
            outcomes.add(bool(ref_classic_targets(state, wl, cq, {F: rng.randint(1, 14)}, {F})))
    assert outcomes == {True, False}


@pytest.mark.parametrize("seed", SEEDS)
def test_minimal_set_leaves_only_the_kept_targets_out(seed):
    """``_minimal_set`` keeps the targets the one-at-a-time give-back keeps and leaves the
    dropped ones in the tree (its callers then restore only the kept ones)."""
    rng = random.Random(seed)
    cfg = _config(rng)
    adms = _admitted(rng, cfg)
    if len(adms) < 2:
        return
    state = _state(cfg, adms)
    q = state.tree.cqs[rng.choice(sorted(cfg.cluster_queues))]
    removed = [pm._Cand(a, IN_CQ, False, False) for a in rng.sample(adms, rng.randint(2, len(adms)))]
    for c in removed:
        state.tree.cqs[c.adm.cq].add_usage(c.adm.usage, -1)
    # the request: what fits with every candidate out (as when the search calls it)
    request = {F: max(1, max(0, q.available_raw(F)) - rng.randint(0, 3))}
    allow = rng.random() < 0.7
    if not ref_fits(q, request, allow):
        return
    expected_tree = None
    kept_ref = list(removed)
    for r in reversed(removed[:-1]):
        state.tree.cqs[r.adm.cq].add_usage(r.adm.usage)
        if ref_fits(q, request, allow):
            kept_ref.remove(r)
        else:
            state.tree.cqs[r.adm.cq].add_usage(r.adm.usage, -1)
    expected_tree = _usage(state)
    for r in removed:  # back to every candidate out
        if r not in kept_ref:
            state.tree.cqs[r.adm.cq].add_usage(r.adm.usage, -1)
    kept = pm._minimal_set(state.tree, q, request, removed, allow)
    assert [c.adm.wl.key for c in kept] == [c.adm.wl.key for c in kept_ref]
    assert _usage(state) == expected_tree


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("fair", [False, True])
def test_cycle_leaves_initial_usage_plus_admitted(seed, fair):
    """``run_cycle`` undoes its temporary usage (reservations, preempting heads, victims taken
    out) by a log: the tree ends as a fresh one holding exactly the admitted workloads."""
    rng = random.Random(seed)
    cfg = _config(rng)
    if fair:
        cfg.configuration = {"fairSharing": {}}
    state = _state(cfg, _admitted(rng, cfg))
    heads = [_wl(1000 + i, cq, rng.randint(0, 5), float(i), rng.randint(1, 8))
             for i, cq in enumerate(rng.sample(sorted(cfg.cluster_queues), k=len(cfg.cluster_queues)))]
    result = run_cycle(state, heads)
    fresh = _state(cfg, list(state.admitted.values()))
    assert _usage(state) == _usage(fresh)
    assert {e.wl.key for e in result.admitted} <= set(state.admitted)
    assert result.entries and all(e.result for e in result.entries)
