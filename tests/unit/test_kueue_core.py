"""Kueue core: quota arithmetic, DRS, flavor assignment, the cycle's twin cases."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

import gpupool.policy.kueue  # noqa: F401
from gpupool.conformance.kueue_cases import build_state, heads_of
from gpupool.model.kueue import (
    ClusterQueue,
    Cohort,
    FlavorQuotas,
    KueueConfig,
    ResourceGroup,
    ResourceQuota,
)
from gpupool.policy.kueue.cycle import ACTIVE, INADMISSIBLE, run_cycle
from gpupool.policy.kueue.flavors import assign_flavors, tolerates
from gpupool.policy.kueue.quota import QuotaTree, borrowing_level, dominant_share
from gpupool.policy.kueue.records import FIT, NOFIT, PREEMPT, KPodSet, KWorkload

CASES = Path(__file__).resolve().parents[2].parent / "shared" / "spec" / "cases" / "kueue"
F = ("default", "cpu")


def _cq(name, nominal, cohort="c", borrowing=None, lending=None) -> ClusterQueue:
    q = ResourceQuota(nominal, borrowing, lending)
    return ClusterQueue(name, cohort, [ResourceGroup(("cpu",), [FlavorQuotas("default", {"cpu": q})])],
                        namespace_selector={})


def _tree(*cqs, cohorts=()) -> QuotaTree:
    cfg = KueueConfig()
    for cq in cqs:
        cfg.cluster_queues[cq.name] = cq
        if cq.cohort and cq.cohort not in cfg.cohorts:
            cfg.cohorts[cq.cohort] = Cohort(cq.cohort, implicit=True)
    for c in cohorts:
        cfg.cohorts[c.name] = c
    return QuotaTree.build(cfg)


def test_lending_limit_doc_example():
    # A(9) and B(12, lendingLimit 1): A can use at most 9 + 1 = 10.
    t = _tree(_cq("a", 9), _cq("b", 12, lending=1))
    a, b = t.cqs["a"], t.cqs["b"]
    assert t.cohorts["c"].subtree[F] == 10
    assert a.potential_available(F) == 10 and a.available(F) == 10
    assert b.available(F) == 21  # its 11 private + the pool of 10
    a.add(F, 10)
    assert b.available(F) == 11 and t.cohorts["c"].usage[F] == 10
    a.add(F, -10)
    assert t.cohorts["c"].usage[F] == 0


def test_borrowing_limit_caps_available_and_usage_bubbles():
    t = _tree(_cq("a", 5, borrowing=2), _cq("b", 10))
    a, b = t.cqs["a"], t.cqs["b"]
    assert a.available(F) == 7 and a.potential_available(F) == 7
    b.add(F, 9)  # b within nominal still uses cohort capacity
    assert a.available(F) == 6
    assert borrowing_level(a, F, 5) == (0, True)
    assert borrowing_level(a, F, 6) == (1, False)  # flat cohort: any borrowing is level 1


def test_hierarchical_subtree_and_local_quota():
    root = Cohort("root")
    mid = Cohort("mid", parent="root", resource_groups=[ResourceGroup(("cpu",), [FlavorQuotas("default", {
        "cpu": ResourceQuota(4, None, 2)})])])
    t = _tree(_cq("x", 6, cohort="mid", lending=1), _cq("y", 3, cohort="root"), cohorts=(root, mid))
    m = t.cohorts["mid"]
    # mid's subtree = 4 + (6 - 5 kept by x) = 5; it lends at most 2, keeping 3.
    assert m.subtree[F] == 5 and m.local_quota(F) == 3
    assert t.cohorts["root"].subtree[F] == 2 + 3
    assert t.cqs["x"].potential_available(F) == 5 + 3 + 5  # own private 5 + mid private 3 + root 5
    assert t.cqs["y"].potential_available(F) == 5
    assert m.height == 1 and t.cohorts["root"].height == 2


def test_drs_share_values():
    t = _tree(_cq("a", 3), _cq("b", 3), _cq("c", 3), _cq("p", 0))
    t.cqs["b"].add(F, 6)
    t.cqs["a"].add(F, 4)
    assert round(dominant_share(t.cqs["b"])) == 333
    assert round(dominant_share(t.cqs["a"])) == 111
    assert dominant_share(t.cqs["c"]) == 0.0
    t.cqs["b"].weight = 2
    assert round(dominant_share(t.cqs["b"])) == 167
    t.cqs["b"].weight = 0
    assert dominant_share(t.cqs["b"]) == float("inf")


def test_tolerations():
    taint = {"key": "gpu", "value": "true", "effect": "NoSchedule"}
    assert tolerates([{"key": "gpu", "operator": "Exists"}], taint)
    assert tolerates([{"key": "gpu", "value": "true"}], taint)
    assert not tolerates([{"key": "gpu", "value": "no"}], taint)
    assert tolerates([{"operator": "Exists"}], taint)
    assert not tolerates([{"key": "gpu", "operator": "Exists", "effect": "NoExecute"}], taint)


needs_cases = pytest.mark.skipif(not CASES.is_dir(), reason="../shared absent")


def _case(stem: str) -> dict:
    return yaml.safe_load(next(CASES.glob(f"{stem}*.yaml")).read_text())


def _cycle(case: dict):
    state, pending = build_state(case)
    return state, run_cycle(state, heads_of(pending))


@needs_cases
def test_flavor_assignment_multi_podset():
    state, pending = build_state(_case("02"))
    a = assign_flavors(state, pending[0])
    assert a.mode == FIT and a.borrowing == 1
    assert [p.flavors for p in a.pod_sets] == [{"cpu": "on-demand", "example.com/gpu": "model-a"}, {"cpu": "spot"}]


@needs_cases
def test_flavor_assignment_nofit_without_borrow_within_cohort():
    state, pending = build_state(_case("04"))
    assert assign_flavors(state, pending[0]).mode == NOFIT


@needs_cases
def test_twin_borrowing_over_preemption_admits_on_spot():
    case = _case("16")
    case["clusterQueues"][0]["flavorFungibility"]["preference"] = "BorrowingOverPreemption"
    _, cycle = _cycle(case)
    assert [e.wl.name for e in cycle.admitted] == ["high-pob"]
    assert cycle.admitted[0].assignment.pod_sets[0].flavors == {"cpu": "spot"}
    assert cycle.preempted == []


@needs_cases
def test_twin_reclaim_any_does_not_block_capacity():
    case = _case("14")
    case["clusterQueues"][0]["preemption"]["reclaimWithinCohort"] = "Any"
    _, cycle = _cycle(case)
    assert [e.wl.name for e in cycle.admitted] == ["b1-pending"]
    assert {e.wl.name: e.queue_state for e in cycle.entries if e.queue_state} == {"a2-pending": INADMISSIBLE}


@needs_cases
def test_twin_partial_admission_gate_off():
    case = _case("09")
    case["config"]["featureGates"]["PartialAdmission"] = False
    _, cycle = _cycle(case)
    assert cycle.admitted == [] and cycle.entries[0].queue_state == ACTIVE


@needs_cases
def test_partial_admission_single_pod_set():
    case = _case("09")
    case["pending"][0]["podSets"] = [{"name": "main", "count": 50, "minCount": 20, "requests": {"cpu": 2}}]
    _, cycle = _cycle(case)
    assert cycle.admitted[0].assignment.pod_sets[0].count == 25


@needs_cases
def test_preempting_workload_not_admitted_in_same_cycle():
    state, cycle = _cycle(_case("06"))
    assert cycle.admitted == [] and {t.adm.wl.name for t, _ in cycle.preempted} == {"borrower", "low-2"}
    # Reservations and the preemptor's in-flight usage do not outlive the cycle.
    assert state.tree.cqs["eng-beta"].usage[("on-demand", "cpu")] == 40_000  # millicores


def test_unknown_resource_is_nofit():
    state = build_state({"flavors": [{"name": "default"}], "clusterQueues": [
        {"name": "q", "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
            {"name": "default", "resources": {"cpu": {"nominal": 4}}}]}]}]})[0]
    wl = KWorkload("w", "w", "q", 0, 0.0, ("w",), [KPodSet("main", 1, {"cpu": 1000, "nvidia.com/gpu": 1})])
    a = assign_flavors(state, wl)
    assert a.mode == NOFIT and "nvidia.com/gpu unavailable" in a.message
    wl.pod_sets[0].requests.pop("nvidia.com/gpu")
    assert assign_flavors(state, wl).mode == FIT
    assert PREEMPT != FIT
