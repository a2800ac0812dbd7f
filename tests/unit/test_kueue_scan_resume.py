"""Flavor-scan resume (kueue.md §4.3) and its requeue rule (§3.2), in the cycle and the backlog."""
from __future__ import annotations

from gpupool.conformance.kueue_cases import build_state, heads_of
from gpupool.policy.kueue.backlog import Backlog
from gpupool.policy.kueue.cycle import (
    ACTIVE,
    ADMITTED,
    INADMISSIBLE,
    NO_CANDIDATES,
    run_cycle,
)


def _case(when_can_preempt: str = "MayStopSearch", big_prio: int = 10) -> dict:
    flavor = lambda name: {"name": name, "resources": {"cpu": {"nominal": 4}}}
    return {
        "flavors": [{"name": "f1"}, {"name": "f2"}],
        "clusterQueues": [{"name": "cq", "preemption": {"withinClusterQueue": "LowerPriority"},
                           "flavorFungibility": {"whenCanPreempt": when_can_preempt},
                           "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [flavor("f1"), flavor("f2")]}]}],
        "admitted": [{"name": "old", "clusterQueue": "cq", "priority": big_prio,
                      "podSets": [{"name": "main", "count": 1, "requests": {"cpu": 4}}], "flavors": {"cpu": "f1"}},
                     {"name": "old2", "clusterQueue": "cq", "priority": big_prio,
                      "podSets": [{"name": "main", "count": 1, "requests": {"cpu": 4}}], "flavors": {"cpu": "f2"}}],
        "pending": [{"name": "new", "clusterQueue": "cq", "priority": 5,
                     "podSets": [{"name": "main", "count": 1, "requests": {"cpu": 2}}]}],
    }


def test_resume_starts_after_the_flavor_the_last_scan_stopped_at():
    case = _case()
    case["admitted"] = []  # both flavors fit: a fresh scan stops at f1
    state, pending = build_state(case)
    fresh = run_cycle(state, heads_of(pending), resume={})
    assert fresh.admitted[0].assignment.pod_sets[0].flavors == {"cpu": "f1"}
    state, pending = build_state(case)
    resumed = run_cycle(state, heads_of(pending), resume={"new": {(0, 0): 0}})
    assert resumed.admitted[0].assignment.pod_sets[0].flavors == {"cpu": "f2"}


def test_a_scan_that_tried_every_flavor_parks_the_head():
    """Both flavors are full of higher-priority work: no preemption candidates anywhere. The
    scan goes on past NoPreemptionCandidates flavors (§4.2 step 3), reaches the end (-1), and
    the head is parked: nothing is left untried."""
    state, pending = build_state(_case())
    cycle = run_cycle(state, heads_of(pending), resume={})
    e, = cycle.entries
    assert e.result == NO_CANDIDATES and e.assignment.last_index == {(0, 0): -1}
    assert e.queue_state == INADMISSIBLE


def test_a_preempting_head_records_where_its_scan_stopped():
    # f1 holds lower-priority work: Preempt with candidates, and MayStopSearch stops there.
    case = _case(big_prio=0)
    state, pending = build_state(case)
    cycle = run_cycle(state, heads_of(pending), resume={})
    e, = cycle.entries
    assert e.assignment.last_index == {(0, 0): 0}  # stopped at f1 (preempt, MayStopSearch)
    assert e.result == "preempting" and e.queue_state == ACTIVE


def test_backlog_drops_a_stale_scan_unless_recent():
    b = Backlog()
    _state, pending = build_state(_case())
    kwl, = pending
    b.scans[kwl.key] = ({(0, 0): 0}, 0, 0)
    b.generation["cq"] = 1  # capacity was released in the tree since
    b.cycle = 0  # resume_for opens cycle 1: the scan is from the previous cycle, kept under the gate
    assert b.resume_for([kwl], {"cq": "cq"}, preserve=True) == {kwl.key: {(0, 0): 0}}
    b.cycle = 5
    assert b.resume_for([kwl], {"cq": "cq"}, preserve=True) == {}
    assert kwl.key not in b.scans


def test_record_scans_forgets_admitted_and_preempting_entries():
    b = Backlog()
    case = _case()
    case["admitted"] = []
    state, pending = build_state(case)
    cycle = run_cycle(state, heads_of(pending), resume={})
    assert cycle.entries[0].result == ADMITTED
    b.scans["new"] = ({(0, 0): 0}, 0, 0)
    b.record_scans(cycle.entries, {}, {"cq": "cq"}, preserve=True)
    assert "new" not in b.scans
