"""Topology-Aware Scheduling (kueue.md §8): the placement algorithm, its capacity model, and
its place in flavor assignment, the cycle and the simulation."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpupool.policy.kueue.tas import (
    PREFERRED,
    REQUIRED,
    UNCONSTRAINED,
    TopologyRequest,
    find_assignment,
    not_fit_message,
)

LEVELS = ("block", "rack", "host")


def _leaves(spec: dict[str, dict[str, dict[str, int]]]) -> dict[tuple, int]:
    return {(b, r, h): n for b, racks in spec.items() for r, hosts in racks.items() for h, n in hosts.items()}


# Two blocks: b1 has racks r1 (3+3) and r2 (2+1); b2 has rack r3 (4+4).
CLUSTER = _leaves({"b1": {"r1": {"h1": 3, "h2": 3}, "r2": {"h3": 2, "h4": 1}},
                   "b2": {"r3": {"h5": 4, "h6": 4}}})


def test_required_takes_the_best_fitting_single_domain() -> None:
    # 3 pods in one rack: r2 holds 3 (smallest that fits), r1 holds 6, r3 holds 8.
    r = find_assignment(LEVELS, CLUSTER, 3, TopologyRequest(REQUIRED, "rack"))
    assert r.assignment == {("b1", "r2", "h3"): 2, ("b1", "r2", "h4"): 1}


def test_required_fails_when_no_single_domain_holds_the_pods() -> None:
    r = find_assignment(LEVELS, CLUSTER, 9, TopologyRequest(REQUIRED, "rack"))
    assert r.assignment is None and r.fit_count == 8  # the largest rack
    assert not_fit_message("default", r.fit_count, 9) == 'topology "default" allows to fit only 8 out of 9 pod(s)'
    assert not_fit_message("default", 0, 2) == 'topology "default" doesn\'t allow to fit any of 2 pod(s)'


def test_required_host_descends_to_one_host() -> None:
    r = find_assignment(LEVELS, CLUSTER, 4, TopologyRequest(REQUIRED, "host"))
    assert r.assignment == {("b2", "r3", "h5"): 4}


def test_preferred_goes_up_a_level_then_spreads_inside_the_block() -> None:
    # 9 pods fit no rack; block b1 holds 9 exactly (b2 only 8): one block, its racks greedily.
    r = find_assignment(LEVELS, CLUSTER, 9, TopologyRequest(PREFERRED, "rack"))
    assert r.assignment == {("b1", "r1", "h1"): 3, ("b1", "r1", "h2"): 3, ("b1", "r2", "h3"): 2,
                            ("b1", "r2", "h4"): 1}


def test_preferred_spreads_over_blocks_at_the_top_with_a_best_fit_last_domain() -> None:
    # 10 pods: no block holds them. Greedy by capacity: b1 (9) first, then the best fit for 1 in b2.
    r = find_assignment(LEVELS, CLUSTER, 10, TopologyRequest(PREFERRED, "rack"))
    assert sum(r.assignment.values()) == 10
    assert r.assignment[("b1", "r1", "h1")] == 3
    # The single pod left goes to one host of b2 (best fit among its hosts: 4 and 4, first by label).
    assert {k: v for k, v in r.assignment.items() if k[0] == "b2"} == {("b2", "r3", "h5"): 1}


def test_preferred_fails_only_when_the_whole_topology_is_short() -> None:
    r = find_assignment(LEVELS, CLUSTER, 18, TopologyRequest(PREFERRED, "rack"))
    assert r.assignment is None and r.fit_count == 17


def test_unconstrained_uses_least_free_capacity_first() -> None:
    # LeastFreeCapacity: a single pod goes to the smallest host that fits it (h4 holds 1).
    r = find_assignment(LEVELS, CLUSTER, 1, TopologyRequest(UNCONSTRAINED))
    assert r.assignment == {("b1", "r2", "h4"): 1}
    # 5 pods fit no host: fill small hosts first, last one best fit.
    r = find_assignment(LEVELS, CLUSTER, 5, TopologyRequest(UNCONSTRAINED))
    assert sum(r.assignment.values()) == 5 and r.assignment[("b1", "r2", "h4")] == 1
    assert r.assignment[("b1", "r2", "h3")] == 2


def test_bad_requests_are_refused() -> None:
    with pytest.raises(ValueError, match="needs a level"):
        TopologyRequest(REQUIRED)
    with pytest.raises(ValueError, match="not a level"):
        find_assignment(LEVELS, CLUSTER, 1, TopologyRequest(REQUIRED, "zone"))


# ----------------------------------------------------------------------------- properties

leaf_maps = st.dictionaries(
    st.tuples(st.sampled_from(["b1", "b2", "b3"]), st.sampled_from(["r1", "r2", "r3"]),
              st.sampled_from(["h1", "h2", "h3", "h4"])),
    st.integers(min_value=0, max_value=6), min_size=1, max_size=20)
requests = st.one_of(
    st.builds(TopologyRequest, st.just(REQUIRED), st.sampled_from(LEVELS)),
    st.builds(TopologyRequest, st.just(PREFERRED), st.sampled_from(LEVELS)),
    st.just(TopologyRequest(UNCONSTRAINED)))


@settings(max_examples=300, deadline=None)
@given(leaf_maps, st.integers(min_value=1, max_value=40), requests)
def test_properties(leaves: dict, count: int, req: TopologyRequest) -> None:
    r = find_assignment(LEVELS, leaves, count, req)
    total = sum(leaves.values())
    if r.assignment is None:
        if req.mode == REQUIRED:
            lvl = LEVELS.index(req.level)
            per: dict = {}
            for leaf, n in leaves.items():
                per[leaf[:lvl + 1]] = per.get(leaf[:lvl + 1], 0) + n
            assert max(per.values()) < count and r.fit_count == max(per.values())
        else:
            assert total < count and r.fit_count == total
        return
    # Total assigned = pod count; no leaf gets more than it holds; only known leaves are used.
    assert sum(r.assignment.values()) == count
    for leaf, n in r.assignment.items():
        assert 0 < n <= leaves[leaf]
    if req.mode == REQUIRED:  # one domain of the requested level
        lvl = LEVELS.index(req.level)
        assert len({leaf[:lvl + 1] for leaf in r.assignment}) == 1
    if req.mode == PREFERRED:  # one domain of the level whenever one could hold everything
        lvl = LEVELS.index(req.level)
        per = {}
        for leaf, n in leaves.items():
            per[leaf[:lvl + 1]] = per.get(leaf[:lvl + 1], 0) + n
        if max(per.values()) >= count:
            assert len({leaf[:lvl + 1] for leaf in r.assignment}) == 1


# ----------------------------------------------------------------------------- in a cycle and a run

from gpupool.engine.core import Engine  # noqa: E402
from gpupool.engine.policy_api import make_policy  # noqa: E402
from gpupool.model.kueue import (  # noqa: E402
    ClusterQueue,
    FlavorQuotas,
    KueueConfig,
    LocalQueue,
    Preemption,
    ResourceFlavor,
    ResourceGroup,
    ResourceQuota,
    Topology,
)
from gpupool.model.pool import Gpu, Node, Pool  # noqa: E402
from gpupool.model.workload import PodSet, Workload  # noqa: E402
from gpupool.policy.kueue.cycle import ADMITTED, NOFIT_R, PREEMPTING, run_cycle  # noqa: E402
from gpupool.policy.kueue.records import FIT, NOFIT, PREEMPT, Admitted, KPodSet, KWorkload  # noqa: E402
from gpupool.policy.kueue.flavors import assign_flavors  # noqa: E402
from gpupool.policy.kueue.state import KueueState  # noqa: E402
from gpupool.policy.kueue.tas_capacity import TasFlavor, TasNode, TasSnapshot  # noqa: E402

RACK = "cloud.example.com/rack"
HOST = "kubernetes.io/hostname"


def _tas_pool(racks=2, hosts=2, gpus=4, gpu_quota=1000, within_cq="Never", tas_only=True) -> Pool:
    nodes = {}
    for r in range(racks):
        for h in range(hosts):
            name = f"r{r}h{h}"
            nodes[name] = Node(name, 32, 256 * 1024, tuple(Gpu(j) for j in range(gpus)), state="IDLE",
                               labels={HOST: name, RACK: f"r{r}", "pool": "tas"})
    q = {"cpu": ResourceQuota(10**6), "memory": ResourceQuota(10**8), "nvidia.com/gpu": ResourceQuota(gpu_quota)}
    flavors = [FlavorQuotas("tas", dict(q))]
    fl = {"tas": ResourceFlavor("tas", {"pool": "tas"}, topology_name="default")}
    if not tas_only:
        flavors.append(FlavorQuotas("plain", dict(q)))
        fl["plain"] = ResourceFlavor("plain", {"pool": "other"})
    cq = ClusterQueue("cq", None, [ResourceGroup(("cpu", "memory", "nvidia.com/gpu"), flavors)],
                      namespace_selector={}, preemption=Preemption(within_cluster_queue=within_cq))
    kueue = KueueConfig(flavors=fl, topologies={"default": Topology("default", (RACK, HOST))},
                        cluster_queues={"cq": cq}, local_queues={("ns", "lq"): LocalQueue("ns", "lq", "cq")})
    return Pool("tas", nodes, kueue=kueue)


def _tas_wl(i, pods, gpus, submit=0.0, runtime=100.0, required=None, preferred=None, priority=None):
    ps = PodSet(count=pods, cpu_m=1000, gpus=gpus, topology_required=required, topology_preferred=preferred)
    return Workload(i, f"w{i}", (ps,), submit_time=submit, runtime=runtime, namespace="ns", queue_name="lq",
                    priority=priority)


def test_simulation_binds_pods_on_the_assigned_rack():
    pool = _tas_pool()
    # w1: 2 pods x 2 GPUs in one host-sized hole; w2: 4 pods x 2 GPUs required in one rack.
    wls = [_tas_wl(1, 2, 2, required=HOST), _tas_wl(2, 4, 2, submit=1, required=RACK)]
    out = Engine(pool, wls, make_policy("kueue", pool), check=True).run()
    jobs = {j.id: j for j in out.jobs}
    assert all(j.state == "COMPLETED" for j in jobs.values())
    nodes = {j: [p.split(":")[0] for p in d.split()[1].split(";")] for t, k, j, d in out.events if k == "started"}
    # w1's two pods share one host; w2's four pods fill rack r1 (r0 has room for two only).
    assert nodes[1] == ["r0h0", "r0h0"]
    assert sorted(nodes[2]) == ["r1h0", "r1h0", "r1h1", "r1h1"]


def test_required_rack_waits_for_a_whole_rack_not_for_gpus():
    pool = _tas_pool()
    # 16 GPUs in the pool; w1 holds 2 per host in both racks' first host...
    wls = [_tas_wl(1, 2, 3, required=None, runtime=500),  # implied TAS (TAS-only CQ): unconstrained
           _tas_wl(2, 2, 4, submit=1, required=RACK, runtime=10)]
    out = Engine(pool, wls, make_policy("kueue", pool), check=True).run()
    jobs = {j.id: j for j in out.jobs}
    assert jobs[2].first_start == 1  # a rack with two free hosts is left: LeastFreeCapacity packed w1
    assert jobs[1].state == jobs[2].state == "COMPLETED"


def _state(pool) -> KueueState:
    from gpupool.policy.kueue.tas_capacity import from_pool_nodes

    state = KueueState(pool.kueue)
    state.tas = from_pool_nodes(pool.kueue, pool.nodes.values())
    return state


def _kwl(key, pods, gpus, req=None, priority=0, created=0.0) -> KWorkload:
    ps = KPodSet("main", pods, {"cpu": 1000, "nvidia.com/gpu": gpus}, topology=req)
    return KWorkload(key, key, "cq", priority, created, (key,), [ps])


def _hold(state, key, leaf_counts, gpus, priority=0):
    """An admitted workload with ``leaf_counts`` pods of ``gpus`` GPUs on the TAS flavor."""
    wl = _kwl(key, sum(leaf_counts.values()), gpus, priority=priority)
    from gpupool.policy.kueue.records import PodSetAssignment

    n = sum(leaf_counts.values())
    psa = PodSetAssignment("main", n, {"cpu": "tas", "nvidia.com/gpu": "tas"},
                           {"cpu": 1000 * n, "nvidia.com/gpu": gpus * n}, dict(leaf_counts), "tas")
    state.admit(Admitted(wl, "cq", {("tas", "cpu"): 1000 * n, ("tas", "nvidia.com/gpu"): gpus * n}, 0.0, [psa]))


def test_fragmentation_turns_fit_into_preempt_and_too_big_into_nofit():
    pool = _tas_pool(within_cq="LowerPriority")
    state = _state(pool)
    # One 2-GPU pod on a host of each rack: 12 GPUs free, but no rack has 8 of them.
    _hold(state, "low", {("r0", "r0h0"): 1, ("r1", "r1h0"): 1}, 2)
    rack = TopologyRequest(REQUIRED, RACK)
    a = assign_flavors(state, _kwl("big", 4, 2, rack, priority=10))
    assert a.mode == PREEMPT  # quota fits; the topology does not
    assert a.tas_failure == (0, 'topology "default" allows to fit only 3 out of 4 pod(s)')
    # On the empty topology a rack holds 8 GPUs: 5 pods x 2 GPUs never fit one rack.
    a = assign_flavors(state, _kwl("huge", 5, 2, rack, priority=10))
    assert a.mode == NOFIT and "allows to fit only 4 out of 5 pod(s)" in a.message
    # The cycle preempts the lower-priority workload to defragment, then admits next cycle.
    res = run_cycle(state, [_kwl("big", 4, 2, rack, priority=10)])
    (e,) = res.entries
    assert e.result == PREEMPTING and [t.adm.wl.key for t in e.targets] == ["low"]
    state.evict(state.admitted["low"])
    res = run_cycle(state, [_kwl("big", 4, 2, rack, priority=10)])
    assert res.entries[0].result == ADMITTED
    topo = state.admitted["big"].pod_sets[0].topology
    assert len({leaf[0] for leaf in topo}) == 1 and sum(topo.values()) == 4


def test_no_candidates_when_nothing_may_be_preempted():
    pool = _tas_pool()  # withinClusterQueue Never
    state = _state(pool)
    _hold(state, "low", {("r0", "r0h0"): 1, ("r1", "r1h0"): 1}, 2)
    res = run_cycle(state, [_kwl("big", 4, 2, TopologyRequest(REQUIRED, RACK), priority=10)])
    assert res.entries[0].result == "no_candidates"


def test_recompute_within_a_cycle_when_an_earlier_entry_took_the_domain():
    pool = _tas_pool(racks=1)
    state = _state(pool)
    rack = TopologyRequest(REQUIRED, RACK)
    # Both fit the empty rack at nomination; the first admitted takes it, the second is skipped.
    res = run_cycle(state, [_kwl("a", 4, 2, rack, created=1.0), _kwl("b", 2, 2, rack, created=2.0)])
    by = {e.wl.key: e.result for e in res.entries}
    assert by["a"] == ADMITTED and by["b"] == "skipped"


def test_flavor_compatibility_messages():
    pool = _tas_pool(tas_only=False)
    state = _state(pool)
    # No annotation in a mixed CQ: the TAS flavor is skipped, the plain one is used.
    a = assign_flavors(state, _kwl("plain", 1, 1))
    assert a.mode == FIT and a.pod_sets[0].flavors["nvidia.com/gpu"] == "plain"
    assert 'Flavor "tas" supports only TopologyAwareScheduling' in a.message
    a = assign_flavors(state, _kwl("t", 1, 1, TopologyRequest(REQUIRED, "zone")))
    assert a.mode == NOFIT and 'Flavor "tas" does not contain the requested level' in a.message
    assert 'Flavor "plain" does not support TopologyAwareScheduling' in a.message


def test_capacity_counts_aggregate_free_resources_per_leaf():
    tf = TasFlavor("f", "t", ("rack",), [
        TasNode("a", ("r0",), {"x": "1"}, (), None, (4000, 100, 3), (4000, 100, 8)),  # (cpu, memory, gpu)
        TasNode("b", ("r0",), {"x": "2"}, ({"key": "k", "effect": "NoSchedule"},), None, (4000, 100, 5),
                (4000, 100, 8))])
    per_pod = {"cpu": 1000, "nvidia.com/gpu": 2}
    assert tf.counts(per_pod) == {("r0",): 1}  # untolerated taint: node b (5 free) does not count
    assert tf.counts(per_pod, tolerations=({"key": "k", "operator": "Exists"},)) == {("r0",): 4}
    assert tf.counts(per_pod, selector={"x": "1"}, empty=True) == {("r0",): 4}
    tf.add({("r0",): 1}, per_pod)
    assert tf.counts(per_pod) == {("r0",): 0}
    snap = TasSnapshot({"f": tf})
    saved = snap.usage_snapshot()
    snap.hold([("f", {("r0",): 1}, per_pod)], -1)
    assert tf.counts(per_pod) == {("r0",): 1}
    snap.restore(saved)
    assert tf.counts(per_pod) == {("r0",): 0}


def test_preferred_spreads_over_racks_in_a_run():
    pool = _tas_pool(racks=2, hosts=2, gpus=4)
    # 6 pods x 2 GPUs: no rack holds 6 (4 each): preferred goes up to the top and spreads, fewest
    # domains first; every pod binds on a node of its assigned rack.
    out = Engine(pool, [_tas_wl(1, 6, 2, preferred=RACK)], make_policy("kueue", pool), check=True).run()
    (start,) = [d for t, k, j, d in out.events if k == "started"]
    nodes = [p.split(":")[0] for p in start.split()[1].split(";")]
    assert out.jobs[0].first_start == 0 and len(nodes) == 6
    assert sorted(n[:2] for n in nodes) == ["r0"] * 4 + ["r1"] * 2


def test_a_node_coming_up_requeues_workloads_parked_for_the_topology():
    from gpupool.engine.core import NodeEvent

    pool = _tas_pool(racks=2, hosts=2, gpus=4)
    pool.nodes["r0h1"].state = "DOWN"
    pool.nodes["r1h1"].state = "DOWN"
    # 2 pods x 4 GPUs in one rack: with one host up per rack it does not fit even an empty
    # topology (NoFit, parked); the node coming back is a capacity change.
    out = Engine(pool, [_tas_wl(1, 2, 4, required=RACK, runtime=10)], make_policy("kueue", pool), check=True,
                 faults=[NodeEvent(50.0, "r0h1", "up")]).run()
    job = out.jobs[0]
    assert job.first_start == 50 and job.state == "COMPLETED"


def test_fragmentation_reclaims_from_a_borrowing_cluster_queue_of_the_cohort():
    from gpupool.model.kueue import Cohort
    from gpupool.policy.kueue.records import IN_COHORT_RECLAMATION, PodSetAssignment
    from gpupool.policy.kueue.tas_capacity import from_pool_nodes

    pool = _tas_pool(racks=2, hosts=2, gpus=4)
    kueue = pool.kueue
    base = kueue.cluster_queues["cq"]

    def cq(name, gpus, reclaim):
        q = {"cpu": ResourceQuota(10**6), "memory": ResourceQuota(10**8), "nvidia.com/gpu": ResourceQuota(gpus)}
        return ClusterQueue(name, "c", [ResourceGroup(base.resource_groups[0].covered_resources,
                                                      [FlavorQuotas("tas", q)])],
                            namespace_selector={}, preemption=Preemption(reclaim_within_cohort=reclaim))

    kueue.cluster_queues = {"a": cq("a", 14, "Any"), "b": cq("b", 2, "Never")}
    kueue.cohorts = {"c": Cohort("c")}
    state = KueueState(kueue)
    state.tas = from_pool_nodes(kueue, pool.nodes.values())
    # b borrows: 2 pods x 2 GPUs over its nominal 2, one pod in each rack.
    wl_b = KWorkload("b-wl", "b-wl", "b", 0, 0.0, ("b-wl",), [KPodSet("main", 2, {"cpu": 1000, "nvidia.com/gpu": 2})])
    psa = PodSetAssignment("main", 2, {"cpu": "tas", "nvidia.com/gpu": "tas"}, {"cpu": 2000, "nvidia.com/gpu": 4},
                           {("r0", "r0h0"): 1, ("r1", "r1h0"): 1}, "tas")
    state.admit(Admitted(wl_b, "b", {("tas", "cpu"): 2000, ("tas", "nvidia.com/gpu"): 4}, 0.0, [psa]))
    # a: 4 pods x 2 GPUs in one rack; quota fits (12 GPUs free in the cohort), no rack has 8 free.
    wl_a = KWorkload("a-wl", "a-wl", "a", 0, 1.0, ("a-wl",),
                     [KPodSet("main", 4, {"cpu": 1000, "nvidia.com/gpu": 2}, topology=TopologyRequest(REQUIRED, RACK))])
    (e,) = run_cycle(state, [wl_a]).entries
    assert e.result == PREEMPTING
    assert [(t.adm.wl.key, t.reason) for t in e.targets] == [("b-wl", IN_COHORT_RECLAMATION)]
