"""Fair share: the association tree, Fair Tree (default) and classic fair share (spec §5).

Pure functions over a tree of ``AssocNode`` objects whose user leaves carry RawUsage.
``build_tree`` makes that tree from a ``sacctmgr`` accounting model; the conformance runner
builds one from a case's ``tree:`` mapping. Results carry the ``sshare`` columns.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from gpupool.model.slurm import Accounting

INF = math.inf


@dataclass(slots=True, eq=False)
class AssocNode:
    name: str
    user: bool = False
    shares: int | str = 1  # an int or "parent"
    usage: float = 0.0  # own RawUsage (users); accounts get the sum of descendants
    children: list[AssocNode] = field(default_factory=list)
    parent: AssocNode | None = None
    # sshare columns, filled by fair_tree()/classic()
    norm_shares: float = 0.0
    raw_usage: float = 0.0
    norm_usage: float = 0.0
    effective_usage: float = 0.0
    level_fs: float | None = None
    fairshare: float | None = None
    #: (account, user) for user leaves
    key: tuple[str, str | None] = ("", None)

    @property
    def is_parent(self) -> bool:
        return self.shares == "parent"


def build_tree(acct: Accounting, usage: dict[tuple[str, str], float]) -> tuple[AssocNode, dict[tuple[str, str], AssocNode]]:
    """The association tree from ``sacctmgr`` data; ``usage`` maps (account, user) to RawUsage."""
    nodes: dict[str, AssocNode] = {}
    for name, a in acct.accounts.items():
        nodes[name] = AssocNode(name, shares=a.fairshare, key=(name, None))
    root = nodes.get("root")
    if root is None:
        root = AssocNode("root", key=("root", None))
        nodes["root"] = root
    for name, a in acct.accounts.items():
        if name == "root":
            continue
        parent = nodes.get(a.parent or "root", root)
        nodes[name].parent = parent
        parent.children.append(nodes[name])
    users: dict[tuple[str, str], AssocNode] = {}
    for ua in acct.user_associations:
        parent = nodes.get(ua.account, root)
        leaf = AssocNode(ua.user or "", user=True, shares=ua.fairshare, parent=parent,
                         usage=usage.get((ua.account, ua.user or ""), 0.0), key=(ua.account, ua.user))
        parent.children.append(leaf)
        users[(ua.account, ua.user or "")] = leaf
    _sum_usage(root)
    return root, users


class UsageTree:
    """The association tree of ``acct`` built once, ranked afresh for each pass's usage.

    Why: the policy ranks fair share at every PriorityCalcPeriod pass (~9k in a month) while
    the tree's shape never changes within a run. ``fair_tree(usage)`` returns exactly what
    ``fair_tree(build_tree(acct, usage)[0])`` returns, with the same floating-point operations
    in the same order, but with what depends on the shape alone (each level's transparent
    membership and share fractions, the users' keys) computed once, and without filling the
    sshare columns, which only the views read. ``classic`` refills the tree (``fill``).
    """

    def __init__(self, acct: Accounting) -> None:
        self.root, _users = build_tree(acct, {})
        nodes = [self.root, *walk(self.root)]
        index = {id(n): i for i, n in enumerate(nodes)}
        #: every user leaf: (node index, the usage key ``build_tree`` looks it up by)
        self.leaves = [(index[id(n)], (n.key[0], n.name)) for n in nodes if n.user]
        self._leaf_nodes = [(n, (n.key[0], n.name)) for n in nodes if n.user]
        #: accounts with their children's indices, every node after its descendants
        self.sums = [(index[id(n)], [index[id(c)] for c in n.children]) for n in reversed(nodes) if not n.user]
        self.n_users = _count_users(self.root)
        #: per account visited by Fair Tree: (kid index, user?, Fairshare=parent?, share
        #: fraction, "account/user" for users) for each member of its level (``_level``)
        self.levels: dict[int, list[tuple]] = {}
        for n in nodes:
            if n.user:
                continue
            kids = _level(n)
            level_shares = sum(_shares(c) for c in kids)
            self.levels[index[id(n)]] = [
                (index[id(c)], c.user, c.is_parent, _shares(c) / level_shares if level_shares else 0.0,
                 f"{c.key[0]}/{c.key[1]}" if c.user else None)
                for c in kids]
        self._raw: list = [0.0] * len(nodes)

    def fill(self, usage: dict[tuple[str, str], float]) -> AssocNode:
        """The tree with ``usage`` on its leaves, as ``build_tree(acct, usage)`` gives it."""
        get = usage.get
        for leaf, key in self._leaf_nodes:
            leaf.usage = get(key, 0.0)
        _sum_usage(self.root)
        return self.root

    def fair_tree(self, usage: dict[tuple[str, str], float]) -> dict[str, float]:
        """``fair_tree``'s FairShare by "account/user" for ``usage`` (the columns are not filled)."""
        raw = self._raw
        get = usage.get
        for i, key in self.leaves:
            raw[i] = get(key, 0.0)
        for i, children in self.sums:
            raw[i] = sum([raw[c] for c in children])
        levels = self.levels
        n_users = self.n_users
        out: dict[str, float] = {}
        rank = rnt = n_users

        def visit(i: int, tied_in: bool) -> None:
            nonlocal rank, rnt
            ru = raw[i]
            scored = []
            for j, user, parent, s, key in levels[i]:
                if parent:
                    lf = INF
                else:
                    u = raw[j] / ru if ru else 0.0
                    lf = 0.0 if s == 0 else (INF if u == 0 else s / u)
                scored.append((lf, user, j, key))
            scored.sort(key=_order)
            prev = None
            first = True
            for lf, user, j, key in scored:
                tied = (not first and lf == prev) or (first and tied_in)
                if user:
                    if not tied:
                        rank = rnt
                    out[key] = rank / n_users
                    rnt -= 1
                else:
                    visit(j, tied)
                prev = lf
                first = False

        visit(0, False)
        return out


def _order(t: tuple) -> tuple:
    """Fair Tree's order within a level: highest LevelFS first, users before accounts on ties."""
    return (-t[0], 0 if t[1] else 1)


def _sum_usage(node: AssocNode) -> float:
    if node.user:
        node.raw_usage = node.usage
    else:
        node.raw_usage = sum(_sum_usage(c) for c in node.children)
    return node.raw_usage


def _shares(n: AssocNode) -> int:
    return 0 if n.is_parent else int(n.shares)


def _level(node: AssocNode) -> list[AssocNode]:
    """Children of ``node`` with Fairshare=parent accounts made transparent."""
    out: list[AssocNode] = []
    for c in node.children:
        if not c.user and c.is_parent:
            out.extend(_level(c))
        else:
            out.append(c)
    return out


def fair_tree(root: AssocNode) -> dict[str, float]:
    """Fair Tree ranking (spec §5.2–5.3, code behaviour for ties). Returns FairShare by user key.

    Fills each node's sshare columns. Keys of the result are ``"account/user"``.
    """
    _sum_usage(root)
    n_users = _count_users(root)
    root.norm_shares = 0.0
    root.effective_usage = 1.0
    root_usage = root.raw_usage
    state = {"rank": n_users, "rnt": n_users}
    out: dict[str, float] = {}

    def norm_usage(n: AssocNode) -> None:
        n.norm_usage = n.raw_usage / root_usage if root_usage else 0.0

    def visit(node: AssocNode, tied_in: bool) -> None:
        kids = _level(node)
        level_shares = sum(_shares(c) for c in kids)
        for c in kids:
            norm_usage(c)
            if c.is_parent:
                c.level_fs = INF
                c.norm_shares = node.norm_shares if node is not root else 0.0
            else:
                s = _shares(c) / level_shares if level_shares else 0.0
                u = c.raw_usage / node.raw_usage if node.raw_usage else 0.0
                c.norm_shares = s
                c.effective_usage = u
                c.level_fs = 0.0 if s == 0 else (INF if u == 0 else s / u)
            if c.is_parent:
                c.effective_usage = c.raw_usage / node.raw_usage if node.raw_usage else 0.0
        # parent-marked accounts are transparent, but report their own columns
        for c in node.children:
            if not c.user and c.is_parent:
                norm_usage(c)
                c.effective_usage = c.raw_usage / node.raw_usage if node.raw_usage else 0.0
                c.norm_shares = node.norm_shares
                c.level_fs = None
        order = sorted(kids, key=lambda c: (-c.level_fs, 0 if c.user else 1))
        prev = None
        for i, c in enumerate(order):
            tied = (prev is not None and c.level_fs == prev.level_fs) or (i == 0 and tied_in)
            if c.user:
                if not tied:
                    state["rank"] = state["rnt"]
                c.fairshare = state["rank"] / n_users
                out[f"{c.key[0]}/{c.key[1]}"] = c.fairshare
                state["rnt"] -= 1
            else:
                visit(c, tied)
            prev = c

    visit(root, False)
    return out


def _count_users(node: AssocNode) -> int:
    return sum(1 if c.user else _count_users(c) for c in node.children)


def classic(root: AssocNode, dampening: int = 1) -> dict[str, float]:
    """Classic fair share (PriorityFlags=NO_FAIR_TREE, spec §5.5)."""
    _sum_usage(root)
    root_usage = root.raw_usage
    out: dict[str, float] = {}

    def visit(node: AssocNode, depth: int) -> None:
        sib = sum(_shares(c) for c in node.children)
        for c in node.children:
            un = min(1.0, c.raw_usage / root_usage) if root_usage else 0.0
            c.norm_usage = un
            if c.is_parent:
                c.norm_shares = node.norm_shares if node is not root else 1.0
                c.effective_usage = node.effective_usage if node is not root else un
            else:
                frac = _shares(c) / sib if sib else 0.0
                c.norm_shares = (node.norm_shares if node is not root else 1.0) * frac
                if depth == 0:
                    c.effective_usage = un
                elif sib == 0:
                    c.effective_usage = node.effective_usage
                else:
                    c.effective_usage = un + (node.effective_usage - un) * frac
            if c.user:
                if c.norm_shares == 0:
                    c.fairshare = 0.0
                else:
                    c.fairshare = 2.0 ** (-(c.effective_usage / c.norm_shares) / dampening)
                out[f"{c.key[0]}/{c.key[1]}"] = c.fairshare
            else:
                visit(c, depth + 1)

    root.norm_shares = 1.0
    root.effective_usage = 1.0
    visit(root, 0)
    return out


def walk(root: AssocNode):
    """Every node below root, depth first (sshare row order)."""
    for c in root.children:
        yield c
        if not c.user:
            yield from walk(c)
