"""What the backfill cycle may reuse of slurmctld's map (``NodeSpace``): the slots an ``add``
leaves alone (``stable_since``), how far a ``window`` or ``overlaps`` call read (``reach``),
and the node list of a bit set (``bits``).

The cycle takes a record's TRY_LATER walk up where the last record of the same kind left it,
at the last try before which every try read only slots that no reservation has changed since.
These tests check the map's side of that promise against the plain computation: a walk taken
up that way ends exactly as a walk made from the start on the same map.
"""
from __future__ import annotations

import bisect
import math
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from gpupool.policy.slurm.node_space import NodeSpace, bits

NODES = 6
ALL = (1 << NODES) - 1
RES = 60.0
END = 20_000.0

# a reservation: start, length, nodes (bit set)
_resv = st.tuples(st.integers(-600, 21_000).map(float), st.integers(1, 8_000).map(float),
                  st.integers(1, ALL))


def _add(space: NodeSpace, r, job_id: int) -> None:
    start, length, mask = r
    space.add(start, start + length, frozenset(bits(mask)), job_id, RES)


def _slots(space: NodeSpace) -> list[tuple[float, float, int]]:
    return list(zip(space.begins, space.ends, space.avail))


@given(st.integers(0, (1 << 2100) - 1))
def test_bits_lists_the_set_bits_lowest_first(mask):
    assert bits(mask) == [i for i in range(mask.bit_length()) if mask >> i & 1]


@settings(max_examples=300, deadline=None)
@given(st.lists(_resv, max_size=12), st.lists(_resv, min_size=1, max_size=12))
def test_slots_ending_before_stable_since_are_untouched(before, after):
    space = NodeSpace(0.0, END, ALL)
    for k, r in enumerate(before):
        _add(space, r, k)
    old = _slots(space)
    version = len(space.touched)
    for k, r in enumerate(after):
        _add(space, r, 100 + k)
    stable = space.stable_since(version)
    assert len(space.touched) == len(before) + len(after)
    new = _slots(space)
    for k, slot in enumerate(old):
        if slot[1] < stable:
            assert new[k] == slot  # same bounds, same nodes, same index
    assert space.stable_since(len(space.touched)) == math.inf


def _walk(space: NodeSpace, now: float, tl: float, need: int, states: list, reads: list,
          first: int, later_start: float, read: float):
    """A TRY_LATER walk shaped like the backfill cycle's: the map decides everything, the
    "will-run" estimate is a fixed function of the usable nodes and the window start. Returns
    the walk's end; ``states``/``reads`` get each try's ``later_start`` and what the tries
    before it read."""
    for tries in range(first, 200):
        states.append(later_start)
        reads.append(read)
        start_res = later_start
        avail, later_start = space.window(start_res, max(start_res, now) + tl, ALL)
        read = max(read, space.reach)
        if avail.bit_count() < need:
            if later_start:
                continue
            return ("none", tries)
        est = max(start_res, now + RES * (avail * 7 % 5))  # depends on the usable nodes only
        if later_start and est > later_start:
            continue
        mask = 0
        for n in bits(avail)[:need]:
            mask |= 1 << n
        b = (est // RES) * RES
        if space.overlaps(mask, b, b + tl):
            read = max(read, space.reach)
            later_start = est
            continue
        return ("plan", est, mask, tries)
    return ("exhausted",)


def _resume_matches(before, after, need: int, tl: float) -> tuple[bool, int]:
    """Walk on a map of ``before``, add ``after``, take the walk up where ``stable_since``
    allows: (whether it ends as a fresh walk, the try it was taken up at)."""
    space = NodeSpace(0.0, END, ALL)
    for k, r in enumerate(before):
        _add(space, r, k)
    version = len(space.touched)
    states: list = []
    reads: list = []
    _walk(space, 0.0, tl, need, states, reads, 0, 0.0, -math.inf)
    for k, r in enumerate(after):
        _add(space, r, 100 + k)
    # taken up at the last try whose predecessors read only unchanged slots
    first = bisect.bisect_left(reads, space.stable_since(version)) - 1
    resumed = _walk(space, 0.0, tl, need, states[:first], reads[:first], first, states[first], reads[first])
    fresh = _walk(space, 0.0, tl, need, [], [], 0, 0.0, -math.inf)
    return resumed == fresh, first


@settings(max_examples=300, deadline=None)
@given(st.lists(_resv, max_size=25), st.lists(_resv, max_size=4), st.integers(1, 3),
       st.sampled_from([60.0, 600.0, 3600.0]))
def test_a_walk_taken_up_where_the_map_is_unchanged_ends_as_a_fresh_walk(before, after, need, tl):
    assert _resume_matches(before, after, need, tl)[0]


def test_walks_taken_up_on_many_seeded_maps():
    """Seeded maps as a busy cycle builds them (many reservations, a few more after the walk):
    a walk taken up too late shows within a few thousand cases (a ``reach`` that stops at
    the window's first slot fails here), and about one in twelve is taken up past its first
    try."""
    rng = random.Random(11)

    def resv():
        return float(rng.randint(-600, 21_000)), float(rng.randint(1, 8_000)), rng.randint(1, ALL)

    later = 0
    for _ in range(4000):
        before = [resv() for _ in range(rng.randint(0, 25))]
        after = [resv() for _ in range(rng.randint(0, 4))]
        same, first = _resume_matches(before, after, rng.randint(1, 3), rng.choice([60.0, 600.0, 3600.0]))
        assert same
        later += first > 0
    assert later > 200
