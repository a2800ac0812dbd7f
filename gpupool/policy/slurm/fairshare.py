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
