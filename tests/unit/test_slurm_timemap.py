"""The backfill time map's per-node index answers exactly what a scan over every reservation does."""
from __future__ import annotations

import random

import pytest

from gpupool.policy.slurm.backfill import TimeMap


def _scan_blocked(resv, start, end):
    out = set()
    for b, e, nodes, _ in resv:
        if b <= end and e > start:  # closed window, as slurmctld tests begin_time <= end_time
            out |= nodes
    return out


def _scan_first_gain(tm, resv, nodes, lo, hi, tl, all_nodes):
    have = all_nodes - nodes
    for e in sorted({e for _, e, _, _ in resv if lo < e < hi}):
        if (all_nodes - _scan_blocked(resv, e, e + tl)) - have:
            return e
    return None


class _Indexed(TimeMap):
    """Always the per-node index (``blocked`` scans node bit sets below SCAN_MAX reservations)."""

    __slots__ = ()
    SCAN_MAX = -1


@pytest.mark.parametrize("time_map", [TimeMap, _Indexed])
def test_index_matches_scan_random(time_map):
    rng = random.Random(7)
    all_nodes = frozenset(range(12))
    for _trial in range(40):
        tm = time_map(60)
        for jid in range(rng.randint(0, 30)):
            nodes = frozenset(rng.sample(sorted(all_nodes), rng.randint(1, 4)))
            tm.add(rng.uniform(0, 20_000), rng.choice([30, 60, 600, 3600, 7200, 86400]), nodes, jid)
            for _q in range(5):
                s = rng.choice([0.0, rng.uniform(0, 30_000)] + [e for _, e, _, _ in tm.resv[-3:]])
                tl = rng.choice([60.0, 900.0, 3600.0, 14400.0])
                assert tm.blocked(s, s + tl) == _scan_blocked(tm.resv, s, s + tl)
                ends = sorted({e for _, e, _, _ in tm.resv})
                later = [e for e in ends if e > s]
                assert tm.later(s) == (later[0] if later else None)
                hi = s + rng.uniform(0, 40_000)
                assert tm.ends_between(s, hi) == [e for e in ends if s < e < hi]
                blocked = frozenset(_scan_blocked(tm.resv, s, s + tl))
                assert tm.first_gain(blocked, s, hi, tl) == _scan_first_gain(tm, tm.resv, blocked, s, hi, tl, all_nodes)


def test_overlapping_reservations_on_one_node():
    tm = TimeMap(60)
    tm.add(0, 3600, frozenset({1}), 1)
    tm.add(600, 600, frozenset({1}), 2)  # inside the first one
    tm.add(1800, 7200, frozenset({1, 2}), 3)
    assert tm.blocked(3600, 4000) == {1, 2}
    assert tm.blocked(9000, 9100) == set()
    assert tm.first_gain(frozenset({1}), 0, 20_000, 600) == 9000
