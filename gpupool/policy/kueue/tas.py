"""Topology-Aware Scheduling placement (spec kueue.md §8): where in a topology a pod set goes.

Pure functions over *leaf capacities*: for every lowest-level domain (a tuple of label values,
one per Topology level, broadest first) how many pods of the pod set still fit there. The
capacities come from ``tas_capacity.py``; this module only decides, so it can be tested (and
property-tested) without nodes, quotas or workloads.

The algorithm follows Kueue's ``findTopologyAssignment``:

1. the leaf counts are summed up the tree, giving a capacity per domain at every level;
2. at the requested level, if one domain can hold every pod, the *best fit* one is taken (the
   smallest capacity that still fits). Otherwise a ``required`` request fails; a ``preferred``
   one tries one level higher, up to the top level, where domains are taken greedily in sort
   order, the last one replaced by the best-fitting domain for the remainder; ``unconstrained``
   stays at the lowest level and spreads greedily there;
3. inside each chosen domain the same choice is made among its children, level by level, which
   keeps the number of domains small;
4. the answer is the number of pods per leaf.

Sort orders: ``BestFit`` (required/preferred): capacity descending, ties by label values;
``LeastFreeCapacity`` (unconstrained, Kueue's ``TASProfileMixed`` default since v0.15):
capacity ascending — small fragments are used up first, large domains stay free for compact
requests. Kueue's secondary key "pod count ascending" is left out: gpupool's capacities already
count what runs there, so ties fall to the label values.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

REQUIRED = "required"
PREFERRED = "preferred"
UNCONSTRAINED = "unconstrained"
MODES = (REQUIRED, PREFERRED, UNCONSTRAINED)

Leaf = tuple[str, ...]


@dataclass(frozen=True, slots=True)
class TopologyRequest:
    """A pod set's ``topologyRequest``: the mode and the level (a node label key).

    ``level`` is None for ``unconstrained`` (the lowest level is used). ``implied`` marks the
    request Kueue adds to a pod set without annotations in a ClusterQueue whose flavors are all
    TAS flavors."""

    mode: str
    level: str | None = None
    implied: bool = False

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"topology request mode must be one of {', '.join(MODES)}, got {self.mode!r}")
        if self.mode != UNCONSTRAINED and not self.level:
            raise ValueError(f"a {self.mode} topology request needs a level")


@dataclass(frozen=True, slots=True)
class TasResult:
    """``assignment`` (leaf -> pods) when the pod set fits, else None with ``fit_count``: how
    many pods could be placed (in one domain of the level for ``required``, overall otherwise)."""

    assignment: dict[Leaf, int] | None
    fit_count: int

    @property
    def fits(self) -> bool:
        return self.assignment is not None


def _best_fit_key(cap: dict, d: Leaf) -> tuple:
    return (-cap[d], d)


def _least_free_key(cap: dict, d: Leaf) -> tuple:
    return (cap[d], d)


def find_assignment(levels: tuple[str, ...], leaves: Mapping[Leaf, int], count: int,
                    request: TopologyRequest) -> TasResult:
    """Place ``count`` pods on the leaves (``leaves[leaf]`` = how many fit there)."""
    depth = len(levels)
    if depth == 0:
        raise ValueError("a Topology has at least one level")
    for leaf in leaves:
        if len(leaf) != depth:
            raise ValueError(f"leaf {leaf!r} has {len(leaf)} label values, the topology {depth} levels")
    if count <= 0:
        return TasResult({}, 0)
    if request.mode == UNCONSTRAINED or request.level is None:
        level = depth - 1
    else:
        if request.level not in levels:
            raise ValueError(f"level {request.level!r} is not a level of this topology ({', '.join(levels)})")
        level = levels.index(request.level)
    # (1) capacity per domain at every level: a domain is the prefix of its leaves' values.
    cap: dict[Leaf, int] = {}
    children: dict[Leaf, list[Leaf]] = {}
    per_level: list[list[Leaf]] = [[] for _ in range(depth)]
    for leaf, n in leaves.items():
        n = max(0, int(n))
        for i in range(depth):
            dom = leaf[:i + 1]
            if dom not in cap:
                cap[dom] = 0
                per_level[i].append(dom)
                if i > 0:
                    children.setdefault(leaf[:i], []).append(dom)
            cap[dom] += n
    key = _least_free_key if request.mode == UNCONSTRAINED else _best_fit_key
    # (2) the domains at the requested level (or the level the search ends at).
    chosen: list[tuple[Leaf, int]] | None = None
    lvl = level
    while True:
        doms = sorted(per_level[lvl], key=lambda d: key(cap, d))
        single = _single(doms, cap, count)
        if single is not None:
            chosen = [(single, count)]
            break
        if request.mode == REQUIRED:
            return TasResult(None, max((cap[d] for d in per_level[level]), default=0))
        if request.mode == UNCONSTRAINED or lvl == 0:
            chosen = _greedy(doms, cap, count)
            if chosen is None:
                return TasResult(None, sum(cap[d] for d in per_level[0]))
            break
        lvl -= 1
    # (3) descend to the leaves, choosing children the same way inside each chosen domain.
    while lvl < depth - 1:
        nxt: list[tuple[Leaf, int]] = []
        for dom, n in chosen:
            kids = sorted(children.get(dom, ()), key=lambda d: key(cap, d))
            single = _single(kids, cap, n)
            part = [(single, n)] if single is not None else _greedy(kids, cap, n)
            if part is None:  # cannot happen: a domain's capacity is the sum of its children's
                raise AssertionError(f"domain {dom!r} holds {cap[dom]} pods but its children fewer")
            nxt.extend(part)
        chosen = nxt
        lvl += 1
    # (4) pods per leaf.
    out: dict[Leaf, int] = {}
    for leaf, n in chosen:
        if n > 0:
            out[leaf] = out.get(leaf, 0) + n
    return TasResult(out, count)


def _single(doms: list[Leaf], cap: dict, n: int) -> Leaf | None:
    """The best-fit domain for ``n`` pods: smallest capacity that fits, first in sort order on ties."""
    best = None
    for d in doms:
        if cap[d] >= n and (best is None or cap[d] < cap[best]):
            best = d
    return best


def _greedy(doms: list[Leaf], cap: dict, n: int) -> list[tuple[Leaf, int]] | None:
    """Domains in sort order until ``n`` pods are covered; the last one is the best fit for the
    remainder among the domains not taken yet. None when all of them together hold fewer."""
    out: list[tuple[Leaf, int]] = []
    remaining = n
    for i, d in enumerate(doms):
        if cap[d] <= 0:
            continue
        if cap[d] >= remaining:
            last = _single(doms[i:], cap, remaining)
            out.append((last, remaining))
            return out
        out.append((d, cap[d]))
        remaining -= cap[d]
    return None


def not_fit_message(topology: str, fit_count: int, count: int) -> str:
    """The reason Kueue gives when a pod set does not fit the topology (``QuotaReserved=False``)."""
    if fit_count <= 0:
        return f'topology "{topology}" doesn\'t allow to fit any of {count} pod(s)'
    return f'topology "{topology}" allows to fit only {fit_count} out of {count} pod(s)'


def domains_of(assignment: Mapping[Leaf, int]) -> list[dict]:
    """A topology assignment as Kueue's ``topologyAssignment.domains`` (values, count), sorted."""
    return [{"values": list(leaf), "count": n} for leaf, n in sorted(assignment.items())]
