"""Kueue's quota model (spec kueue.md §2): a tree of ClusterQueues (leaves) and cohorts.

Every node keeps, per flavor-resource ``fr = (flavor, resource)``, its nominal quota, optional
borrowing and lending limits, the subtree quota and the usage. Usage added to a ClusterQueue
"bubbles up": a parent sees only what a child uses beyond the part it keeps for itself
(``local_quota``). All quantities are ints in gpupool's canonical units.

The tree is the cycle's mutable snapshot: ``add``/``remove`` change usage, everything else is
read-only after ``QuotaTree.build``.
"""
from __future__ import annotations

import math
from collections.abc import Iterable

from gpupool.model.kueue import KueueConfig

FR = tuple[str, str]  # (flavor, resource)


class QNode:
    """One ClusterQueue or cohort of the quota tree."""

    __slots__ = (
        "_chain",
        "_potential",
        "borrowing",
        "children",
        "depth",
        "height",
        "is_cq",
        "lending",
        "name",
        "nominal",
        "parent",
        "subtree",
        "usage",
        "weight",
    )

    def __init__(self, name: str, is_cq: bool, weight: float = 1.0) -> None:
        self.name = name
        self.is_cq = is_cq
        self.parent: QNode | None = None
        self.children: list[QNode] = []
        self.nominal: dict[FR, int] = {}
        self.borrowing: dict[FR, int] = {}  # only set limits are present
        self.lending: dict[FR, int] = {}
        self.subtree: dict[FR, int] = {}
        self.usage: dict[FR, int] = {}
        self.weight = weight
        self.height = 0
        self.depth = 0
        #: Static memos (quotas do not change after ``QuotaTree.build``): the ancestors root
        #: first, ending with this node; ``potential_available`` per fr.
        self._chain: tuple[QNode, ...] | None = None
        self._potential: dict[FR, int] = {}

    def __repr__(self) -> str:  # pragma: no cover
        return f"QNode({'cq' if self.is_cq else 'cohort'} {self.name})"

    # -- static quantities ------------------------------------------------------
    def local_quota(self, fr: FR) -> int:
        """The part of this node's quota it never lends (0 without a lendingLimit)."""
        lend = self.lending.get(fr)
        if lend is None:
            return 0
        return max(0, self.subtree.get(fr, 0) - lend)

    def local_available(self, fr: FR) -> int:
        if not self.lending:
            used = self.usage.get(fr, 0)
            return -used if used < 0 else 0
        return max(0, self.local_quota(fr) - self.usage.get(fr, 0))

    # -- availability -----------------------------------------------------------
    def chain(self) -> tuple[QNode, ...]:
        """The root, ..., this node (memo: the tree's shape is fixed after the build)."""
        chain = self._chain
        if chain is None:
            chain = self._chain = tuple(reversed(self.path()))
        return chain

    def available_raw(self, fr: FR) -> int:
        """``available(n)`` of §2, possibly negative.

        Computed from the root down (the recursion ``available(parent)`` unrolled): this is the
        innermost call of every preemption search, so it avoids a Python call per level."""
        chain = self._chain
        if chain is None:
            chain = self.chain()
        top = chain[0]
        p = top.subtree.get(fr, 0) - top.usage.get(fr, 0)
        for i in range(1, len(chain)):
            n = chain[i]
            used = n.usage.get(fr, 0)
            limit = n.borrowing.get(fr)
            if n.lending:
                lq = n.local_quota(fr)
                if limit is not None:
                    p = min(p, (n.subtree.get(fr, 0) - lq) - max(0, used - lq) + limit)
                p = max(0, lq - used) + p
                continue
            # No lendingLimit: local quota 0 (the same formulas, on the hot path of preemption).
            if limit is not None:
                cap = n.subtree.get(fr, 0) - (used if used > 0 else 0) + limit
                if cap < p:
                    p = cap
            if used < 0:
                p -= used
        return p

    def available(self, fr: FR) -> int:
        p = self.available_raw(fr)
        return p if p > 0 else 0

    def potential_available(self, fr: FR) -> int:
        """The largest request on ``fr`` that could ever fit here (zero usage everywhere);
        a function of the quotas only, so memoised per node."""
        found = self._potential.get(fr)
        if found is None:
            found = self._potential[fr] = self._potential_available(fr)
        return found

    def _potential_available(self, fr: FR) -> int:
        parent = self.parent
        if parent is None:
            return self.subtree.get(fr, 0)
        value = self.local_quota(fr) + parent.potential_available(fr)
        limit = self.borrowing.get(fr)
        if limit is not None:
            value = min(value, self.subtree.get(fr, 0) + limit)
        return value

    def borrowing_any(self, frs: Iterable[FR]) -> bool:
        usage, subtree = self.usage, self.subtree
        for fr in frs:
            if usage.get(fr, 0) > subtree.get(fr, 0):
                return True
        return False

    # -- usage ------------------------------------------------------------------
    def add(self, fr: FR, value: int) -> None:
        """Add (or with a negative value remove) usage here and bubble the excess up."""
        node = self
        while node is not None and value:
            usage = node.usage
            before = usage.get(fr, 0)
            after = before + value
            usage[fr] = after
            if node.lending:  # only a lendingLimit keeps part of the usage local
                lq = node.local_quota(fr)
                value = max(0, after - lq) - max(0, before - lq)
            elif before < 0 or after < 0:  # transient negatives while simulating removals
                value = max(0, after) - max(0, before)
            node = node.parent

    def add_usage(self, usage: dict[FR, int], sign: int = 1) -> None:
        """``add`` for every fr of ``usage`` (times ``sign``); the loop of ``add`` is inlined,
        as this is the hot path of every preemption search."""
        for fr, v in usage.items():
            if not v:
                continue
            value = v if sign == 1 else sign * v
            node = self
            while node is not None and value:
                usage_n = node.usage
                before = usage_n.get(fr, 0)
                after = before + value
                usage_n[fr] = after
                if node.lending:  # only a lendingLimit keeps part of the usage local
                    lq = node.local_quota(fr)
                    value = max(0, after - lq) - max(0, before - lq)
                elif before < 0 or after < 0:  # transient negatives while simulating removals
                    value = max(0, after) - max(0, before)
                node = node.parent

    def path(self) -> list[QNode]:
        """This node and its ancestors, leaf first."""
        out = []
        node = self
        while node is not None:
            out.append(node)
            node = node.parent
        return out

    def root(self) -> QNode:
        node = self
        while node.parent is not None:
            node = node.parent
        return node


class QuotaTree:
    """All ClusterQueues and cohorts of a Kueue configuration, with usage."""

    def __init__(self) -> None:
        self.cqs: dict[str, QNode] = {}
        self.cohorts: dict[str, QNode] = {}
        #: ClusterQueue -> resource -> resource group index (``KueueState.group_of``); a
        #: function of the configuration the tree was built from.
        self.group_of: dict[str, dict[str, int]] = {}
        #: Read-only parts shared by equal flavor assignments (``flavors.assign_flavors``):
        #: maps, frs sets, pod-set assignment lists, keyed by their content.
        self.interned: dict[object, object] = {}

    @classmethod
    def build(cls, kueue: KueueConfig) -> QuotaTree:
        tree = cls()
        for name, cohort in kueue.cohorts.items():
            node = QNode(name, False, cohort.fair_weight)
            _set_quotas(node, cohort.resource_groups)
            tree.cohorts[name] = node
        for name, cq in kueue.cluster_queues.items():
            node = QNode(name, True, cq.fair_weight)
            _set_quotas(node, cq.resource_groups)
            tree.cqs[name] = node
            if cq.cohort:
                parent = tree.cohorts.get(cq.cohort)
                if parent is None:
                    parent = tree.cohorts[cq.cohort] = QNode(cq.cohort, False)
                node.parent = parent
                parent.children.append(node)
        for name, cohort in kueue.cohorts.items():
            if cohort.parent:
                parent = tree.cohorts.get(cohort.parent)
                if parent is None:
                    parent = tree.cohorts[cohort.parent] = QNode(cohort.parent, False)
                node = tree.cohorts[name]
                node.parent = parent
                parent.children.append(node)
        for node in tree.cohorts.values():
            if node.parent is None:
                _finish(node, 0)
        for node in tree.cqs.values():
            if node.parent is None:
                _finish(node, 0)
        return tree

    def reset_usage(self) -> QuotaTree:
        """Zero usage everywhere: the tree as ``build`` made it, for a caller that rebuilds the
        state on every pass (quotas never change, so the static memos stay valid)."""
        for q in self.cqs.values():
            q.usage = {}
        for q in self.cohorts.values():
            q.usage = {}
        return self

    def usage_snapshot(self) -> dict[str, dict[FR, int]]:
        out = {n: dict(q.usage) for n, q in self.cqs.items()}
        out.update({n: dict(q.usage) for n, q in self.cohorts.items()})
        return out

    def restore(self, snap: dict[str, dict[FR, int]]) -> None:
        for n, q in self.cqs.items():
            q.usage = dict(snap[n])
        for n, q in self.cohorts.items():
            q.usage = dict(snap[n])

def _set_quotas(node: QNode, groups) -> None:
    for rg in groups:
        for fq in rg.flavors:
            for res, q in fq.resources.items():
                fr = (fq.flavor, res)
                node.nominal[fr] = q.nominal
                if q.borrowing_limit is not None:
                    node.borrowing[fr] = q.borrowing_limit
                if q.lending_limit is not None:
                    node.lending[fr] = q.lending_limit


def _finish(node: QNode, depth: int) -> None:
    """Subtree quotas and heights, children first."""
    node.depth = depth
    for child in node.children:
        _finish(child, depth + 1)
    subtree = dict(node.nominal)
    for child in node.children:
        for fr, v in child.subtree.items():
            subtree[fr] = subtree.get(fr, 0) + v - child.local_quota(fr)
    node.subtree = subtree
    node.height = 0 if node.is_cq else 1 + max((c.height for c in node.children), default=0)


# ------------------------------------------------------------------- borrowing level


def borrowing_level(cq: QNode, fr: FR, val: int) -> tuple[int, bool]:
    """``FindHeightOfLowestSubtreeThatFits``: (height of the lowest subtree where ``val`` more
    on ``fr`` fits, may-reclaim-in-hierarchy)."""
    if cq.parent is None:
        return 0, False
    if cq.usage.get(fr, 0) + val <= cq.nominal.get(fr, 0):
        return 0, True
    remaining = val - cq.local_available(fr)
    node = cq.parent
    while node is not None:
        if node.usage.get(fr, 0) + remaining <= node.subtree.get(fr, 0):
            return node.height, node.parent is not None
        remaining -= node.local_available(fr)
        node = node.parent
    return cq.root().height, False


# ------------------------------------------------------------------- fair sharing (DRS)


def dominant_share(node: QNode, lendable_cache: dict | None = None) -> float:
    """Weighted dominant resource share (§6.1) of a node with a parent; 0 when not borrowing."""
    parent = node.parent
    if parent is None:
        return 0.0
    borrowed: dict[str, int] = {}
    for fr, used in node.usage.items():
        over = used - node.subtree.get(fr, 0)
        if over > 0:
            borrowed[fr[1]] = borrowed.get(fr[1], 0) + over
    if not borrowed:
        return 0.0
    root = node.root()
    best = 0.0
    for res in sorted(borrowed):
        lendable = 0
        for fr in root.subtree:
            if fr[1] == res:
                lendable += parent.potential_available(fr)
        if lendable <= 0:
            continue
        ratio = borrowed[res] * 1000 / lendable
        best = max(best, ratio)
    if best == 0.0:
        return 0.0
    if node.weight == 0:
        return math.inf
    return best / node.weight


def almost_lca(a: QNode, b: QNode) -> QNode:
    """The ancestor of ``a`` (or ``a`` itself) whose parent is the lowest common ancestor of a and b."""
    b_path = {id(n) for n in b.path()}
    prev = a
    node = a
    while node is not None:
        if id(node) in b_path:
            return prev
        prev = node
        node = node.parent
    return prev
