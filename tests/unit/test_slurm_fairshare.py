"""Fair Tree (SchedMD test24.4 tree) and classic fair share (test24.1)."""
import math

from gpupool.policy.slurm.fairshare import AssocNode, classic, fair_tree, walk


def _tree(spec):
    def build(name, s, parent):
        if s.get("user"):
            return AssocNode(name, user=True, shares=s["shares"], usage=s["usage"], parent=parent,
                             key=(parent.name, name))
        n = AssocNode(name, shares=s.get("shares", 1), parent=parent, key=(name, None))
        n.children = [build(k, v, n) for k, v in s.items() if isinstance(v, dict)]
        return n
    return build("root", spec, None)


def U(shares, usage):
    return {"user": True, "shares": shares, "usage": usage}


TEST24_4 = {
    "u1": U(10, 0), "u2": U(10, 10),
    "aA": {"shares": 40, "aAA": {"shares": 30, "uAA1": U(1, 20)},
           "aAB": {"shares": 10, "uAB1": U(1, 25), "uAB2": U(1, 0)}},
    "aB": {"shares": 60, "aBA": {"shares": 25, "uBA1": U(1, 25)}, "aBB": {"shares": 35, "uBB1": U(1, 0)}},
    "aC": {"shares": 0, "uC1": U(0, 30)},
    "aD": {"shares": 50,
           "aDA": {"shares": "parent", "uDA1": U("parent", 10), "uDA2": U(30, 10), "uDA3": U(50, 25)},
           "uD1": U("parent", 20), "uD2": U(40, 20), "uD3": U(50, 25)},
    "aE": {"shares": 10, "aE1": U(10, 0), "aE2": U(10, 0)},
    "aF": {"shares": 20, "uF1": U(10, 0), "uF2": U(20, 0)},
    "aG": {"shares": 8, "uG1": U(10, 10),
           "aGA": {"shares": 10, "uGA1": U(20, 4), "uGA2": U(20, 6)}},
}
RANK21 = {"u1": 21, "aE1": 21, "aE2": 21, "uF1": 21, "uF2": 21, "uBB1": 16, "uBA1": 15, "u2": 14, "uAA1": 13,
          "uAB2": 12, "uAB1": 11, "uD1": 10, "uDA1": 10, "uDA2": 8, "uD3": 7, "uDA3": 7, "uD2": 5,
          "uG1": 4, "uGA1": 4, "uGA2": 2, "uC1": 1}


def test_fair_tree_test24_4_ranks():
    root = _tree(TEST24_4)
    fair_tree(root)
    rows = {n.name: n for n in walk(root)}
    for name, rank in RANK21.items():
        assert rows[name].fairshare * 21 == rank, name
    assert abs(rows["aA"].level_fs - 1.025641) < 1e-6
    assert rows["uBB1"].level_fs == math.inf and rows["uC1"].level_fs == 0.0
    assert abs(rows["uDA2"].norm_shares - 30 / 170) < 1e-12
    assert abs(rows["uD1"].effective_usage - 20 / 110) < 1e-12
    # IEEE detail: 22/17 computed two ways, uD3 above uD2
    assert rows["uD3"].level_fs > rows["uD2"].level_fs


def test_classic_test24_1():
    root = _tree({
        "AccountA": {"shares": 40, "AccountB": {"shares": 30, "User1": U(1, 20)},
                     "AccountC": {"shares": 10, "User2": U(1, 25), "User3": U(1, 0)}},
        "AccountD": {"shares": 60, "AccountE": {"shares": 25, "User4": U(1, 25)},
                     "AccountF": {"shares": 35, "User5": U(1, 0)}},
        "AccountG": {"shares": 0, "User6": U(0, 30)},
    })
    classic(root, 1)
    rows = {n.name: n for n in walk(root)}
    want = {"User1": 0.408479, "User2": 0.022097, "User3": 0.125, "User4": 0.5, "User5": 0.749154, "User6": 0.0}
    for name, fs in want.items():
        assert abs(rows[name].fairshare - fs) < 1e-6, name
    assert abs(rows["AccountF"].effective_usage - 0.145833) < 1e-6
