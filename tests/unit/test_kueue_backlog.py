"""The Kueue policy's persistent backlog: heap order, shape parking, sticky preemptor, requeue."""
from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from gpupool.policy.kueue.backlog import Backlog
from gpupool.policy.kueue.records import KPodSet, KWorkload


def _wl(key: int, cq: str = "a", priority: int = 0, created: float = 0.0) -> KWorkload:
    return KWorkload(key, f"w{key}", cq, priority, created, (key,), [KPodSet("main", 1, {"cpu": 1000})])


def _always(_kwl):
    return True


def test_heads_follow_heap_order_per_cluster_queue():
    b = Backlog()
    for kwl, shape in ((_wl(1, "a", 0, 1.0), 0), (_wl(2, "a", 5, 2.0), 1), (_wl(3, "b", 0, 0.5), 2),
                       (_wl(4, "a", 5, 1.5), 0)):
        b.add(kwl, shape)
    b.start_pass()
    assert [w.key for w in b.heads(_always, {})] == [4, 3]  # priority first, then creation time


def test_a_parked_shape_is_skipped_whole_and_gone_jobs_are_dropped():
    b = Backlog()
    for k in range(1, 6):
        b.add(_wl(k, "a", 0, float(k)), 0 if k < 4 else 1)
    b.start_pass()
    gone = {1}
    assert [w.key for w in b.heads(lambda w: None if w.key in gone else True, {})] == [2]
    assert 1 not in b.kwl  # dropped for good
    b.start_pass()
    assert [w.key for w in b.heads(_always, {0: "root"})] == [4]  # shape 0 (2, 3) skipped whole


def test_sticky_preemptor_is_the_head_until_unusable():
    b = Backlog()
    b.add(_wl(1, "a", 10), 0)
    b.add(_wl(2, "a", 0), 1)
    b.sticky["a"] = 2
    b.start_pass()
    assert [w.key for w in b.heads(_always, {})] == [2]
    b.start_pass()
    assert [w.key for w in b.heads(lambda w: w.key != 2, {})] == [1]


def test_requeue_inadmissible_only_in_trees_that_lost_a_holder():
    b = Backlog()
    b.parked = {10: "t1", 11: "t2"}
    b.parked_shapes = {0: "t1", 1: "t2"}
    b.holding = {100: "t1", 200: "t2"}
    assert b.requeue_inadmissible({200: object()}) == {"t1"}
    assert b.parked == {11: "t2"} and b.parked_shapes == {1: "t2"}


@given(st.lists(st.tuples(st.integers(-3, 3), st.integers(0, 5), st.integers(0, 2)), min_size=1, max_size=40))
def test_walking_the_backlog_yields_sorted_order(items):
    """Taking heads one by one (each taken one skipped afterwards) lists every workload of a
    ClusterQueue in (priority desc, creation, key) order, whatever the shapes."""
    b = Backlog()
    for k, (prio, created, shape) in enumerate(items):
        b.add(_wl(k, "a", prio, float(created)), shape)
    taken: list[int] = []
    b.start_pass()
    while True:
        heads = b.heads(lambda w: w.key not in taken, {})
        if not heads:
            break
        taken.append(heads[0].key)
    expected = sorted(range(len(items)), key=lambda k: (-items[k][0], items[k][1], k))
    assert taken == expected
