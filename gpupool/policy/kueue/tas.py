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

Slices (``podset-slice-required-topology`` + ``podset-slice-size``): the pod set is cut into
``count / size`` slices and every slice must lie inside one domain of the slice level (at or
below the pod set's level). A slice-level domain holds ``pods // size`` slices; a higher domain
the sum of its children's. From the requested level down to the slice level the algorithm
places *slices* (capacity = slices, ties to the domain with less room); below it, each slice
domain's pods are spread as usual. Without slices every pod is its own slice at the lowest
level, which is exactly the plain algorithm. A slice-only request (no required/preferred
level) starts at the top level and is unconstrained, as in Kueue.

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
    #: Slices: ``slice_size`` pods in one domain of ``slice_level`` each (None: no slices).
    slice_level: str | None = None
    slice_size: int | None = None
    #: ``podset-group-name``: pod sets of one workload sharing it are placed as one unit.
    group: str | None = None

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"topology request mode must be one of {', '.join(MODES)}, got {self.mode!r}")
        if self.mode != UNCONSTRAINED and not self.level:
            raise ValueError(f"a {self.mode} topology request needs a level")
        if (self.slice_level is None) != (self.slice_size is None):
            raise ValueError("a slice topology request needs both a slice level and a slice size")
        if self.slice_size is not None and self.slice_size < 1:
            raise ValueError(f"slice size must be at least 1, got {self.slice_size}")
        if self.group is not None and self.slice_level is not None:
            raise ValueError("a pod-set group cannot also ask for slices")

    @property
    def unit(self) -> int:
        """Pods per placement unit: the slice size, 1 without slices."""
        return self.slice_size or 1


def request_from_pod_set(ps) -> TopologyRequest | None:
    """A workload pod set's Kueue topology annotations (``gpupool.model.PodSet`` fields) as a
    ``TopologyRequest``; None when it asks for no topology (TAS may still be implied)."""
    extra = {"slice_level": ps.topology_slice_level, "slice_size": ps.topology_slice_size,
             "group": ps.topology_group}
    if ps.topology_required:
        return TopologyRequest(REQUIRED, ps.topology_required, **extra)
    if ps.topology_preferred:
        return TopologyRequest(PREFERRED, ps.topology_preferred, **extra)
    if ps.topology_unconstrained or ps.topology_slice_level:
        return TopologyRequest(UNCONSTRAINED, **extra)
    return None


@dataclass(frozen=True, slots=True)
class TasResult:
    """``assignment`` (leaf -> pods) when the pod set fits, else None with ``fit_count``: how
    many units (pods, or slices of ``unit`` pods) could be placed (in one domain of the level for
    ``required``, overall otherwise) out of ``needed``."""

    assignment: dict[Leaf, int] | None
    fit_count: int
    unit: int = 1
    needed: int = 0

    @property
    def fits(self) -> bool:
        return self.assignment is not None


def find_assignment(levels: tuple[str, ...], leaves: Mapping[Leaf, int], count: int,
                    request: TopologyRequest) -> TasResult:
    """Place ``count`` pods on the leaves (``leaves[leaf]`` = how many fit there)."""
    depth = len(levels)
    if depth == 0:
        raise ValueError("a Topology has at least one level")
    for leaf in leaves:
        if len(leaf) != depth:
            raise ValueError(f"leaf {leaf!r} has {len(leaf)} label values, the topology {depth} levels")
    size = request.unit
    if count <= 0:
        return TasResult({}, 0, size, 0)
    level = _level_index(levels, request)
    slice_lvl = depth - 1
    if request.slice_level is not None:
        if request.slice_level not in levels:
            raise ValueError(f"no requested topology level for slices: {request.slice_level}")
        slice_lvl = levels.index(request.slice_level)
        if slice_lvl < level:
            raise ValueError(f"podset slice topology {request.slice_level} is above the podset topology "
                             f"{levels[level]}")
    if count % size:
        raise ValueError(f"slice size {size} does not divide the pod count {count}")
    need = count // size
    cap, children, per_level = _capacities(depth, leaves)
    least = request.mode == UNCONSTRAINED
    # Units per domain: slices at and above the slice level, pods below it (slices of one pod
    # are pods: the plain algorithm, without the extra work).
    units: dict[Leaf, int] = cap
    if size > 1:
        units = dict(cap)
        for d in per_level[slice_lvl]:
            units[d] = cap[d] // size
        for i in range(slice_lvl - 1, -1, -1):
            for d in per_level[i]:
                units[d] = sum(units[c] for c in children[d])

        def key(d: Leaf) -> tuple:
            # BestFit: most slices first; LeastFreeCapacity: fewest. Ties: less room, then labels.
            return (units[d] if least else -units[d], cap[d], d)
    else:
        def key(d: Leaf) -> tuple:
            return (cap[d], d) if least else (-cap[d], d)

    # (2) the domains at the requested level (or the level the search ends at).
    chosen: list[tuple[Leaf, int]] | None = None
    lvl = level
    while True:
        doms = sorted(per_level[lvl], key=key)
        single = _single(doms, units, need)
        if single is not None:
            chosen = [(single, need)]
            break
        if request.mode == REQUIRED:
            return TasResult(None, max((units[d] for d in per_level[level]), default=0), size, need)
        if request.mode == UNCONSTRAINED or lvl == 0:
            chosen = _greedy(doms, units, need)
            if chosen is None:
                return TasResult(None, sum(units[d] for d in per_level[0]), size, need)
            break
        lvl -= 1
    # (3) descend to the leaves, choosing children the same way inside each chosen domain;
    # leaving the slice level, a domain's slices become its pods.
    while lvl < depth - 1:
        nxt: list[tuple[Leaf, int]] = []
        for dom, n in chosen:
            if lvl == slice_lvl:
                n *= size
            kids = sorted(children.get(dom, ()), key=key)
            single = _single(kids, units, n)
            part = [(single, n)] if single is not None else _greedy(kids, units, n)
            if part is None:  # cannot happen: a domain's capacity is the sum of its children's
                raise AssertionError(f"domain {dom!r} holds {units[dom]} units but its children fewer")
            nxt.extend(part)
        chosen = nxt
        lvl += 1
    if slice_lvl == depth - 1:
        chosen = [(leaf, n * size) for leaf, n in chosen]
    # (4) pods per leaf.
    out: dict[Leaf, int] = {}
    for leaf, n in chosen:
        if n > 0:
            out[leaf] = out.get(leaf, 0) + n
    return TasResult(out, need, size, need)


def _level_index(levels: tuple[str, ...], request: TopologyRequest) -> int:
    """Where the search starts: the requested level; the lowest for ``unconstrained``; the
    highest for a slice-only request (Kueue: unconstrained over the whole topology)."""
    if request.mode == UNCONSTRAINED or request.level is None:
        return 0 if request.slice_level is not None else len(levels) - 1
    if request.level not in levels:
        raise ValueError(f"level {request.level!r} is not a level of this topology ({', '.join(levels)})")
    return levels.index(request.level)


def _capacities(depth: int, leaves: Mapping[Leaf, int]):
    """(1) pods per domain at every level (a domain is the prefix of its leaves' values), the
    children of each domain and the domains of each level, in first-seen order."""
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
    return cap, children, per_level


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


def not_fit_message(topology: str, fit_count: int, count: int, unit: int = 1) -> str:
    """The reason Kueue gives when a pod set does not fit the topology (``QuotaReserved=False``);
    counts are slices when the pod set is sliced (``unit`` > 1), pods otherwise."""
    what = "slice(s)" if unit > 1 else "pod(s)"
    if fit_count <= 0:
        return f'topology "{topology}" doesn\'t allow to fit any of {count} {what}'
    return f'topology "{topology}" allows to fit only {fit_count} out of {count} {what}'


def domains_of(assignment: Mapping[Leaf, int]) -> list[dict]:
    """A topology assignment as Kueue's ``topologyAssignment.domains`` (values, count), sorted."""
    return [{"values": list(leaf), "count": n} for leaf, n in sorted(assignment.items())]
