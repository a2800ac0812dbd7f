"""The Slurm policy's fast fair-share paths give bit-identical results to the plain ones.

``UsageLedger.at_starts`` evaluates running segments with memoised powers, and
``UsageTree.fair_tree`` ranks a tree built once; decisions depend on exact float equality
(Fair Tree's ties, priority rounding), so both are compared with ``==`` on random inputs
against the reference functions (``segment_usage``, ``build_tree`` + ``fair_tree``/``classic``).
"""
from __future__ import annotations

import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpupool.model.slurm import Accounting, Association
from gpupool.policy.slurm.decay import UsageLedger, reset_boundary, segment_usage
from gpupool.policy.slurm.fairshare import UsageTree, build_tree, classic, fair_tree


class _PlainLedger(UsageLedger):
    """The reference: every running segment through ``segment_usage``."""

    def _add_running(self, out, running, T, boundary):
        for s, key, w in running:
            v = segment_usage(max(s, boundary), math.inf, T, self.period, self.df, w, self.remainder)
            if v:
                out[key] = out.get(key, 0.0) + v


_KEYS = st.sampled_from([("a", "u1"), ("a", "u2"), ("b", "u3")])
_TIMES = st.one_of(st.integers(0, 400_000).map(float),
                   st.floats(0, 400_000, allow_nan=False, allow_infinity=False))


@st.composite
def _runs(draw):
    period = draw(st.sampled_from([1, 30, 60, 300, 3600]))
    half_life = draw(st.sampled_from([0, 3600, 86400, 604800]))
    reset = draw(st.sampled_from(["NONE", "DAILY", "WEEKLY", "MONTHLY"]))
    if half_life == 0 and reset == "NONE":
        reset = "DAILY"
    remainder = draw(st.booleans())
    # jobs: (key, start, length or None for still running at the end, weight)
    jobs = draw(st.lists(st.tuples(_KEYS, _TIMES, st.one_of(st.none(), st.floats(0, 200_000)),
                                   st.sampled_from([0.0, 1.0, 8.0, 224.0, 0.5])), max_size=25))
    asks = sorted(draw(st.lists(_TIMES, min_size=1, max_size=12)))
    return period, half_life, reset, remainder, jobs, asks


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_runs())
def test_ledger_running_segments_match_segment_usage(run):
    period, half_life, reset, remainder, jobs, asks = run
    fast = UsageLedger(period, half_life, reset, remainder)
    plain = _PlainLedger(period, half_life, reset, remainder)
    closed: set[int] = set()
    for now in asks:
        running = []
        for i, (key, s, length, w) in enumerate(jobs):
            if s > now:
                continue
            end = None if length is None else s + length
            if end is not None and end <= now:
                if i not in closed:  # closed in job order once it has ended
                    closed.add(i)
                    fast.close(key, s, end, w)
                    plain.close(key, s, end, w)
                continue
            running.append((s, key, w))
        got = fast.at_starts(now, list(running))
        want = plain.at_starts(now, list(running))
        assert got == want
        # and through the (key, start, w) entry point
        assert fast.at(now, [(k, s, w) for s, k, w in running]) == want


def test_ledger_running_segment_values_by_hand():
    """One running job of weight 2 on a 300-s period with a 1-day half-life, asked at 1000 s:
    its pieces are 300·df^300 (up to the pass at 300 s) plus two whole periods, decayed to 900 s."""
    led = UsageLedger(300, 86400, "NONE", False)
    out = led.at_starts(1000.0, [(0.0, "k", 2.0)])
    df = 1 - 0.693 / 86400
    D = df ** 300
    want = (300 * D * D ** 2 + 300 * D * D + 300 * D) * 2
    assert math.isclose(out["k"], want, rel_tol=1e-12)
    assert reset_boundary(1000.0, "NONE") == -math.inf


_SHARES = st.one_of(st.sampled_from([0, 1, 1, 2, 3, 10, 40]), st.just("parent"))
_USAGE = st.sampled_from([0.0, 0.0, 1.0, 2.5, 10.0, 10.0, 1e6, 3.3e-3])


@st.composite
def _accounting(draw):
    acct = Accounting()
    acct.accounts["root"] = Association("root")
    names = ["root"]
    for i in range(draw(st.integers(0, 7))):
        name = f"acc{i}"
        parent = draw(st.sampled_from(names))
        acct.accounts[name] = Association(name, parent=parent, fairshare=draw(_SHARES))
        names.append(name)
    users = []
    for i in range(draw(st.integers(0, 10))):
        account = draw(st.sampled_from(names + ["ghost"]))  # "ghost": no such account (under root)
        user = f"u{draw(st.integers(0, 5))}"
        acct.user_associations.append(Association(account, user=user, fairshare=draw(_SHARES)))
        users.append((account, user))
    return acct, users


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_accounting(), st.lists(st.lists(_USAGE, min_size=10, max_size=10), min_size=1, max_size=4),
       st.sampled_from([1, 2, 5]))
def test_usage_tree_matches_build_tree(tree_spec, usages, dampening):
    acct, users = tree_spec
    tree = UsageTree(acct)  # reused across passes, as the policy does
    for values in usages:
        usage = {key: v for key, v in zip(users, values)}
        root, _ = build_tree(acct, usage)
        want = fair_tree(root)
        got = tree.fair_tree(usage)
        assert got == want
        root, _ = build_tree(acct, usage)
        assert classic(tree.fill(usage), dampening) == classic(root, dampening)
