"""TAS placement of a pod-set group (spec kueue.md §8, ``kueue.x-k8s.io/podset-group-name``).

Kueue admits a group of exactly two pod sets, one of which has a single pod (the *leader*, e.g.
a LeaderWorkerSet leader) and the other the *workers*; both ask for the same required or
preferred level. The group is placed as one unit: the leader and every worker in one domain of
the level (required), or as close as possible (preferred). The leader takes room from the
workers wherever it lands, so every domain carries, besides its worker capacity, whether a
leader fits there and how many workers still fit alongside it:

* a leaf: ``workers[leaf]``, ``leader[leaf]`` (leader pods that fit) and ``with_leader[leaf]``
  (workers that fit once the leader is there);
* a higher domain: workers = sum of its children's; it can host the leader when a child can;
  workers alongside the leader = its workers minus the smallest loss the leader causes in any
  child that can host it (the leader goes where it costs least).

The choice then mirrors ``tas.find_assignment``: a single best-fit domain that holds the
leader and all workers; else ``required`` fails and ``preferred`` goes one level up; at the top
level the leader's domain is taken first, then the remaining workers greedily. Inside a chosen
domain the leader's child is picked the same way and the workers left over go to the other
children. Pure: capacities in, leaf counts out.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from gpupool.policy.kueue.tas import PREFERRED, REQUIRED, Leaf, TopologyRequest, _capacities, _greedy, _single

NO = -1  # "cannot host the leader"


@dataclass(frozen=True, slots=True)
class GroupResult:
    """``workers`` (leaf -> worker pods) and ``leader`` (the leader's leaf) when the group fits;
    else None and ``fit_count``: workers that could join the leader in the best domain."""

    workers: dict[Leaf, int] | None
    leader: Leaf | None
    fit_count: int
    needed: int

    @property
    def fits(self) -> bool:
        return self.workers is not None


def find_group_assignment(levels: tuple[str, ...], workers: Mapping[Leaf, int], leader: Mapping[Leaf, int],
                          with_leader: Mapping[Leaf, int], count: int, request: TopologyRequest) -> GroupResult:
    """Place one leader and ``count`` workers as one unit (see the module docstring)."""
    if request.mode not in (REQUIRED, PREFERRED) or request.level is None:
        raise ValueError("a pod-set group needs a required or preferred topology level")
    if request.level not in levels:
        raise ValueError(f"level {request.level!r} is not a level of this topology ({', '.join(levels)})")
    depth = len(levels)
    level = levels.index(request.level)
    all_leaves = dict(workers)
    for leaf in leader:
        all_leaves.setdefault(leaf, 0)
    cap, children, per_level = _capacities(depth, all_leaves)
    # with_l[d]: workers that fit in d together with the leader (NO when no leader fits in d).
    with_l: dict[Leaf, int] = {}
    for leaf in per_level[depth - 1]:
        ok = leader.get(leaf, 0) >= 1
        with_l[leaf] = max(0, min(int(with_leader.get(leaf, 0)), cap[leaf])) if ok else NO
    for i in range(depth - 2, -1, -1):
        for d in per_level[i]:
            losses = [cap[c] - with_l[c] for c in children[d] if with_l[c] != NO]
            with_l[d] = cap[d] - min(losses) if losses else NO

    def key(d: Leaf) -> tuple:
        return (-with_l[d], -cap[d], d)

    lvl = level
    chosen: list[tuple[Leaf, int, bool]] | None = None
    while True:
        doms = sorted(per_level[lvl], key=key)
        single = _single(doms, with_l, count)
        if single is not None:
            chosen = [(single, count, True)]
            break
        if request.mode == REQUIRED:
            return GroupResult(None, None, max((max(0, with_l[d]) for d in per_level[level]), default=0), count)
        if lvl == 0:
            chosen = _spread(doms, cap, with_l, count)
            if chosen is None:
                return GroupResult(None, None, _most(doms, cap, with_l), count)
            break
        lvl -= 1
    while lvl < depth - 1:
        nxt: list[tuple[Leaf, int, bool]] = []
        for dom, n, has_leader in chosen:
            kids = sorted(children.get(dom, ()), key=key)
            if has_leader:
                single = _single(kids, with_l, n)
                part = [(single, n, True)] if single is not None else _spread(kids, cap, with_l, n)
            else:
                kids = sorted(kids, key=lambda d: (-cap[d], d))
                plain = _single(kids, cap, n)
                flat = [(plain, n)] if plain is not None else _greedy(kids, cap, n)
                part = None if flat is None else [(d, k, False) for d, k in flat]
            if part is None:  # cannot happen: a domain's numbers are built from its children's
                raise AssertionError(f"domain {dom!r} cannot hold what its parent promised")
            nxt.extend(part)
        chosen = nxt
        lvl += 1
    out: dict[Leaf, int] = {}
    lead = None
    for leaf, n, has_leader in chosen:
        if has_leader:
            lead = leaf
        if n > 0:
            out[leaf] = out.get(leaf, 0) + n
    return GroupResult(out, lead, count, count)


def _leader_domain(doms: list[Leaf], cap: dict, with_l: dict) -> Leaf | None:
    """Where the leader costs the fewest workers (first in sort order on ties)."""
    hosts = [d for d in doms if with_l[d] != NO]
    return min(hosts, key=lambda d: (cap[d] - with_l[d], doms.index(d))) if hosts else None


def _most(doms: list[Leaf], cap: dict, with_l: dict) -> int:
    """Workers that fit over ``doms`` together with the leader (0 when no leader fits)."""
    first = _leader_domain(doms, cap, with_l)
    return 0 if first is None else with_l[first] + sum(cap[d] for d in doms if d != first)


def _spread(doms: list[Leaf], cap: dict, with_l: dict, n: int) -> list[tuple[Leaf, int, bool]] | None:
    """The leader's domain (the one where it costs the fewest workers) with as many workers as
    fit beside it, then the other domains greedily for the rest. None when they fall short."""
    first = _leader_domain(doms, cap, with_l)
    if first is None:
        return None
    take = min(with_l[first], n)
    out = [(first, take, True)]
    if n - take == 0:
        return out
    rest = sorted((d for d in doms if d != first), key=lambda d: (-cap[d], d))
    more = _greedy(rest, cap, n - take)
    if more is None:
        return None
    return out + [(d, k, False) for d, k in more]
