"""slurmctld's backfill map (``node_space``): availability as the reservations imply it, and the
slot boundaries that decide TRY_LATER's ``later_start`` as 22.05's backfill.c leaves them."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from gpupool.policy.slurm.node_space import NodeSpace

ALL = 0b1111  # four nodes


def _slots(space: NodeSpace) -> list[tuple[float, float, int]]:
    return list(zip(space.begins, space.ends, space.avail))


def test_a_reservation_splits_the_map_and_merges_equal_neighbours():
    space = NodeSpace(0, 1000, ALL)
    space.add(100, 300, frozenset({0}), 1, 10)
    assert _slots(space) == [(0, 100, ALL), (100, 300, 0b1110), (300, 1000, ALL)]
    space.add(300, 500, frozenset({0}), 2, 10)  # same nodes right after: the two slots merge
    assert _slots(space) == [(0, 100, ALL), (100, 500, 0b1110), (500, 1000, ALL)]
    space.add(20, 25, frozenset({3}), 3, 10)  # shorter than bf_resolution: one resolution long
    assert space.resv[-1][:2] == (20, 30)
    assert _slots(space)[:3] == [(0, 20, ALL), (20, 30, 0b0111), (30, 100, ALL)]


def test_a_reservation_at_the_start_of_the_map_leaves_an_empty_slot_in_front():
    space = NodeSpace(0, 1000, ALL)
    space.add(0, 100, frozenset({1}), 1, 10)
    assert _slots(space) == [(0, 0, ALL), (0, 100, 0b1101), (100, 1000, ALL)]
    avail, later = space.window(0, 50, ALL)
    assert avail == 0b1101 and later == 100


def test_later_start_is_the_first_gain_within_the_window_and_none_beyond_it():
    space = NodeSpace(0, 10_000, ALL)
    space.add(100, 400, frozenset({0, 1}), 1, 10)
    space.add(200, 5000, frozenset({2, 3}), 2, 10)
    # a 4-node job from 0 with a 50 s limit: the first slot ends at 100, where nothing is gained
    assert space.window(0, 50, ALL) == (ALL, 0.0)
    # with a 250 s limit it overlaps both reservations: nodes 0,1 come back at 400, a gain
    avail, later = space.window(0, 250, ALL)
    assert avail == 0 and later == 400
    # from 400 with a 250 s limit: the slot holding 400 is followed by one that frees nodes 2,3
    # (its check comes before the test that it lies beyond the window)
    assert space.window(400, 650, ALL) == (0b0011, 5000)
    # a reservation that runs to the map's end is followed by no slot: no later start, and a
    # job that finds too few nodes gets no plan in this cycle (slurmctld gives up on it)
    space.add(6000, 20_000, frozenset({0}), 3, 10)
    assert space.window(5500, 6100, ALL) == (0b1110, 0.0)


def test_overlaps_reads_the_slots_between_the_ends():
    space = NodeSpace(0, 1000, ALL)
    space.add(100, 300, frozenset({2}), 1, 10)
    assert space.overlaps(0b0100, 250, 400) and not space.overlaps(0b0100, 300, 400)
    assert not space.overlaps(0b0011, 0, 1000) and not space.overlaps(0b0100, 0, 100)


_resv = st.tuples(st.integers(0, 1200), st.integers(1, 600), st.frozensets(st.integers(0, 3), min_size=1))


@settings(max_examples=200, deadline=None)
@given(st.lists(_resv, max_size=12), st.integers(0, 1100), st.integers(0, 700), st.integers(1, ALL))
def test_availability_is_what_the_reservations_leave(resvs, start, length, mask):
    """Whatever the splits and merges, a node is free over ``[start, end]`` exactly when no
    reservation on it (as stored, cut to the map) begins by ``end`` and ends after ``start``."""
    space = NodeSpace(0, 1000, ALL)
    for jid, (b, dur, nodes) in enumerate(resvs):
        space.add(b, b + dur, nodes, jid, 10)
    end = start + length
    held = 0
    for b, e, nodes, _jid in space.resv:
        if b < 1000 and b <= end and min(e, 1000) > start:
            for n in nodes:
                held |= 1 << n
    avail, later = space.window(start, end, ALL)
    assert avail == ALL & ~held
    assert later == 0 or later > start
    overlap = any(b < 1000 and b < end and min(e, 1000) > start and any(mask >> n & 1 for n in nodes)
                  for b, e, nodes, _jid in space.resv)
    if length:  # backfill asks only about a planned run, at least one bf_resolution long
        assert space.overlaps(mask, start, end) == overlap
    # the map stays a sequence of slots in time order
    assert space.begins == sorted(space.begins) and space.ends == sorted(space.ends)
    assert all(b <= e for b, e in zip(space.begins, space.ends))
