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


# ----------------------------------------------------------------------------- slices (§8)

from gpupool.policy.kueue.tas_group import find_group_assignment  # noqa: E402

# The KEP's example: one rack whose hosts hold 6, 5, 4, 3 and 2 pods; slices of 2 per host.
KEP_RACK = {("b1", "r1", f"h{i}"): n for i, n in enumerate((6, 5, 4, 3, 2), start=1)}


def test_slices_best_fit_prefers_tight_domains_with_equal_slice_counts() -> None:
    req = TopologyRequest(REQUIRED, "rack", slice_level="host", slice_size=2)
    r = find_assignment(LEVELS, KEP_RACK, 12, req)
    # 6 slices: the 6-host (3 slices), then the 4-host beats the 5-host (2 slices each, less room),
    # the last slice goes to the tightest host that holds it.
    assert r.assignment == {("b1", "r1", "h1"): 6, ("b1", "r1", "h3"): 4, ("b1", "r1", "h5"): 2}


def test_slices_least_free_capacity_for_a_slice_only_request() -> None:
    # Only a slice level: Kueue treats it as unconstrained over the whole topology.
    req = TopologyRequest(UNCONSTRAINED, None, slice_level="host", slice_size=2)
    r = find_assignment(LEVELS, KEP_RACK, 10, req)
    assert r.assignment == {("b1", "r1", "h2"): 2, ("b1", "r1", "h3"): 4, ("b1", "r1", "h4"): 2,
                            ("b1", "r1", "h5"): 2}


def test_slices_count_whole_slices_per_domain() -> None:
    # Two hosts with 3 free pods each: 6 pods, but only 2 slices of 3... and no slice of 4.
    leaves = {("b1", "r1", "h1"): 3, ("b1", "r1", "h2"): 3}
    by4 = TopologyRequest(REQUIRED, "rack", slice_level="host", slice_size=4)
    r = find_assignment(LEVELS, leaves, 4, by4)
    assert not r.fits and r.fit_count == 0 and r.unit == 4 and r.needed == 1
    assert not_fit_message("default", r.fit_count, r.needed, r.unit) == \
        'topology "default" doesn\'t allow to fit any of 1 slice(s)'
    by3 = TopologyRequest(REQUIRED, "rack", slice_level="host", slice_size=3)
    assert find_assignment(LEVELS, leaves, 6, by3).assignment == leaves
    # A rack-level slice may span hosts: 4 pods of a 6-pod rack.
    by_rack = TopologyRequest(PREFERRED, "block", slice_level="rack", slice_size=4)
    assert sum(find_assignment(LEVELS, leaves, 4, by_rack).assignment.values()) == 4


def test_slices_spread_over_blocks_keep_each_slice_in_one_rack() -> None:
    # 8 pods in slices of 4 per rack, preferred block: no block holds 2 slices, so they spread.
    leaves = _leaves({"b1": {"r1": {"h1": 2, "h2": 2}, "r2": {"h3": 3}},
                      "b2": {"r3": {"h4": 4}, "r4": {"h5": 1, "h6": 2}}})
    req = TopologyRequest(PREFERRED, "block", slice_level="rack", slice_size=4)
    r = find_assignment(LEVELS, leaves, 8, req)
    per_rack: dict = {}
    for leaf, n in r.assignment.items():
        per_rack[leaf[:2]] = per_rack.get(leaf[:2], 0) + n
    assert per_rack == {("b1", "r1"): 4, ("b2", "r3"): 4}


def test_bad_slice_requests_are_refused() -> None:
    with pytest.raises(ValueError, match="is above the podset topology"):
        find_assignment(LEVELS, CLUSTER, 4, TopologyRequest(REQUIRED, "rack", slice_level="block", slice_size=2))
    with pytest.raises(ValueError, match="does not divide the pod count"):
        find_assignment(LEVELS, CLUSTER, 5, TopologyRequest(REQUIRED, "rack", slice_level="host", slice_size=2))
    with pytest.raises(ValueError, match="no requested topology level for slices"):
        find_assignment(LEVELS, CLUSTER, 4, TopologyRequest(REQUIRED, "rack", slice_level="gpu", slice_size=2))
    with pytest.raises(ValueError, match="needs both"):
        TopologyRequest(REQUIRED, "rack", slice_level="host")
    with pytest.raises(ValueError, match="at least 1"):
        TopologyRequest(REQUIRED, "rack", slice_level="host", slice_size=0)


def _sum_by(leaves: dict, depth: int) -> dict:
    out: dict = {}
    for leaf, n in leaves.items():
        out[leaf[:depth]] = out.get(leaf[:depth], 0) + n
    return out


@settings(max_examples=300, deadline=None)
@given(leaf_maps, st.integers(min_value=1, max_value=10), st.integers(0, 2), st.integers(0, 2),
       st.sampled_from([REQUIRED, PREFERRED, UNCONSTRAINED]), st.integers(1, 4))
def test_slice_properties(leaves: dict, slices: int, lvl: int, below: int, mode: str, size: int) -> None:
    slvl = min(2, lvl + below)
    level = None if mode == UNCONSTRAINED else LEVELS[lvl]
    req = TopologyRequest(mode, level, slice_level=LEVELS[slvl], slice_size=size)
    count = slices * size
    r = find_assignment(LEVELS, leaves, count, req)
    # Slices each slice-level domain could hold, and what that adds up to per domain.
    slice_cap = {d: n // size for d, n in _sum_by(leaves, slvl + 1).items()}
    if r.assignment is None:
        if mode == REQUIRED:
            per: dict = {}
            for d, k in slice_cap.items():
                per[d[:lvl + 1]] = per.get(d[:lvl + 1], 0) + k
            assert max(per.values()) < slices and r.fit_count == max(per.values())
        else:
            assert sum(slice_cap.values()) < slices
        return
    assert sum(r.assignment.values()) == count
    for leaf, n in r.assignment.items():
        assert 0 < n <= leaves[leaf]
    # Every slice lies within one domain of the slice level: each such domain got whole slices.
    for d, n in _sum_by(r.assignment, slvl + 1).items():
        assert n % size == 0 and n // size <= slice_cap[d]
    if mode == REQUIRED:
        assert len({leaf[:lvl + 1] for leaf in r.assignment}) == 1


# ----------------------------------------------------------------------------- pod-set groups (§8)


def test_group_puts_leader_and_workers_in_one_rack() -> None:
    workers = {("b1", "r1", "h1"): 3, ("b1", "r2", "h2"): 4}
    leader = {("b1", "r1", "h1"): 1, ("b1", "r2", "h2"): 1}
    with_leader = {("b1", "r1", "h1"): 2, ("b1", "r2", "h2"): 3}
    # r1 holds 3 workers but only 2 beside the leader; r2 holds the leader and 3 workers.
    r = find_group_assignment(LEVELS, workers, leader, with_leader, 3, TopologyRequest(REQUIRED, "rack"))
    assert r.workers == {("b1", "r2", "h2"): 3} and r.leader == ("b1", "r2", "h2")
    r = find_group_assignment(LEVELS, workers, leader, with_leader, 4, TopologyRequest(REQUIRED, "rack"))
    assert not r.fits and r.fit_count == 3 and r.needed == 4
    # Preferred: spread from the top, the leader's domain first.
    r = find_group_assignment(LEVELS, workers, {("b1", "r1", "h1"): 1}, {("b1", "r1", "h1"): 2}, 5,
                              TopologyRequest(PREFERRED, "rack"))
    assert r.leader == ("b1", "r1", "h1") and r.workers == {("b1", "r1", "h1"): 2, ("b1", "r2", "h2"): 3}
    with pytest.raises(ValueError, match="required or preferred"):
        find_group_assignment(LEVELS, workers, leader, with_leader, 1, TopologyRequest(UNCONSTRAINED))


@settings(max_examples=300, deadline=None)
@given(leaf_maps, st.data(), st.integers(0, 12), st.sampled_from([REQUIRED, PREFERRED]), st.sampled_from(LEVELS))
def test_group_properties(workers: dict, data, count: int, mode: str, level: str) -> None:
    leader = {leaf: data.draw(st.integers(0, 1)) for leaf in workers}
    with_leader = {leaf: data.draw(st.integers(0, n)) for leaf, n in workers.items()}
    r = find_group_assignment(LEVELS, workers, leader, with_leader, count, TopologyRequest(mode, level))
    lvl = LEVELS.index(level)
    # Workers that fit in a domain together with the leader, computed the direct way.
    cap = _sum_by(workers, lvl + 1)
    best: dict = {}
    for leaf in workers:
        if leader[leaf]:
            d = leaf[:lvl + 1]
            best[d] = max(best.get(d, -1), cap[d] - workers[leaf] + with_leader[leaf])
    if r.workers is None:
        if mode == REQUIRED:
            assert max(best.values(), default=-1) < count
        return
    assert sum(r.workers.values()) == count
    assert r.leader is not None and leader[r.leader] >= 1
    for leaf, n in r.workers.items():
        assert n <= (with_leader[leaf] if leaf == r.leader else workers[leaf])
    if mode == REQUIRED or max(best.values(), default=-1) >= count:
        # The group shares one domain of the level: leader and every worker.
        assert len({leaf[:lvl + 1] for leaf in [*r.workers, r.leader]}) == 1


def test_group_is_one_flavor_and_one_rack_in_flavor_assignment() -> None:
    pool = _tas_pool(racks=2, hosts=2, gpus=4, tas_only=False)
    state = _state(pool)
    # One GPU on r0h0 is taken: r0 has 7 GPUs left, r1 all 8; leader + 7 workers need 8.
    _hold(state, "x", {("r0", "r0h0"): 1}, 1)
    rack = TopologyRequest(REQUIRED, RACK, group="lws")
    wl = KWorkload("g", "g", "cq", 0, 0.0, ("g",), [
        KPodSet("leader", 1, {"cpu": 1000, "nvidia.com/gpu": 1}, topology=rack),
        KPodSet("worker", 7, {"cpu": 1000, "nvidia.com/gpu": 1}, topology=rack)])
    a = assign_flavors(state, wl)
    assert a.mode == FIT
    lead, work = a.pod_sets
    assert set(lead.flavors.values()) == set(work.flavors.values()) == {"tas"}
    assert lead.topology and work.topology and sum(work.topology.values()) == 7
    racks = {leaf[0] for leaf in [*lead.topology, *work.topology]}
    assert racks == {"r1"}  # only r1 holds all 8 pods
    # Too big for any rack together (9 pods x 1 GPU): does not fit even the empty topology.
    wl.pod_sets[1].count = 8
    a = assign_flavors(state, wl)
    assert a.mode == NOFIT and "allows to fit only 7 out of 8 pod(s)" in a.message


def test_slices_in_flavor_assignment_and_a_run() -> None:
    pool = _tas_pool(racks=2, hosts=2, gpus=4)
    state = _state(pool)
    _hold(state, "x", {("r0", "r0h0"): 1}, 1)  # r0h0 has 3 GPUs left
    req = TopologyRequest(REQUIRED, RACK, slice_level=HOST, slice_size=2)
    a = assign_flavors(state, _kwl("s", 4, 2, req))
    # r0h0 has 3 GPUs left, too few for a slice (2 pods x 2 GPUs): r0 holds one slice, r1 both.
    assert a.mode == FIT and a.pod_sets[0].topology == {("r1", "r1h0"): 2, ("r1", "r1h1"): 2}
    a = assign_flavors(state, _kwl("s3", 6, 2, TopologyRequest(PREFERRED, RACK, slice_level=HOST, slice_size=3)))
    assert a.mode == NOFIT and 'doesn\'t allow to fit any of 2 slice(s)' in a.message
    # In a run: slices of 2 pods x 2 GPUs per host, four of them over the two racks.
    ps = PodSet(count=8, cpu_m=1000, gpus=2, topology_preferred=RACK, topology_slice_level=HOST,
                topology_slice_size=2)
    wl = Workload(1, "w1", (ps,), runtime=10, namespace="ns", queue_name="lq")
    out = Engine(pool, [wl], make_policy("kueue", pool), check=True).run()
    (start,) = [d for t, k, j, d in out.events if k == "started"]
    nodes = [p.split(":")[0] for p in start.split()[1].split(";")]
    assert sorted(nodes) == ["r0h0", "r0h0", "r0h1", "r0h1", "r1h0", "r1h0", "r1h1", "r1h1"]


# ----------------------------------------------------------------------------- explain shows them

TAS_DUMP = """\
apiVersion: v1
kind: List
items:
- apiVersion: kueue.x-k8s.io/v1beta2
  kind: Topology
  metadata: {name: default}
  spec:
    levels: [{nodeLabel: cloud.example.com/rack}, {nodeLabel: kubernetes.io/hostname}]
- apiVersion: kueue.x-k8s.io/v1beta2
  kind: ResourceFlavor
  metadata: {name: tas}
  spec: {topologyName: default}
- apiVersion: kueue.x-k8s.io/v1beta2
  kind: ClusterQueue
  metadata: {name: cq}
  spec:
    namespaceSelector: {}
    resourceGroups:
    - coveredResources: [cpu, nvidia.com/gpu]
      flavors:
      - name: tas
        resources: [{name: cpu, nominalQuota: 100}, {name: nvidia.com/gpu, nominalQuota: 100}]
- apiVersion: kueue.x-k8s.io/v1beta2
  kind: LocalQueue
  metadata: {name: lq, namespace: ns}
  spec: {clusterQueue: cq}
%(nodes)s
- apiVersion: kueue.x-k8s.io/v1beta2
  kind: Workload
  metadata: {name: lws-0, namespace: ns, creationTimestamp: "2026-11-30T08:00:00Z", uid: u1}
  spec:
    queueName: lq
    podSets:
    - name: leader
      count: 1
      topologyRequest: {required: cloud.example.com/rack, podSetGroupName: lws-0}
      template: {spec: {containers: [{name: l, image: x, resources: {requests: {cpu: "1", nvidia.com/gpu: "1"}}}]}}
    - name: worker
      count: 3
      topologyRequest: {required: cloud.example.com/rack, podSetGroupName: lws-0}
      template: {spec: {containers: [{name: w, image: x, resources: {requests: {cpu: "1", nvidia.com/gpu: "2"}}}]}}
- apiVersion: kueue.x-k8s.io/v1beta2
  kind: Workload
  metadata: {name: sliced, namespace: ns, creationTimestamp: "2026-11-30T09:00:00Z", uid: u2}
  spec:
    queueName: lq
    podSets:
    - name: main
      count: 4
      topologyRequest: {podSetSliceRequiredTopology: kubernetes.io/hostname, podSetSliceSize: 2}
      template: {spec: {containers: [{name: m, image: x, resources: {requests: {cpu: "1", nvidia.com/gpu: "2"}}}]}}
"""


def test_explain_shows_group_and_slice_requests_and_their_assignments(tmp_path) -> None:
    from rich.console import Console

    from gpupool.explain.dump import load_dump
    from gpupool.explain.render import print_explanation
    from gpupool.explain.run import explain

    nodes = "\n".join(
        f"- apiVersion: v1\n  kind: Node\n  metadata: {{name: r{r}h{h}, labels: {{kubernetes.io/hostname: r{r}h{h}, "
        f"cloud.example.com/rack: r{r}}}}}\n  status:\n    allocatable: {{cpu: '32', memory: 256Gi, "
        f"nvidia.com/gpu: '4'}}\n    conditions: [{{type: Ready, status: 'True'}}]"
        for r in range(2) for h in range(2))
    path = tmp_path / "dump.yaml"
    path.write_text(TAS_DUMP % {"nodes": nodes})
    x = explain(load_dump([path]), cycles=2)
    adms = {a.workload: a for c in x.cycles for a in c.admissions}
    lead, work = adms["ns/lws-0"].pod_sets
    assert lead.topology_request == work.topology_request == {"required": RACK, "podSetGroupName": "lws-0"}
    # 7 GPUs of one rack: the leader shares a host with one worker, both hosts in rack r0.
    hosts = {d["values"][0] for p in (lead, work) for d in p.topology["domains"]}
    assert hosts <= {"r0h0", "r0h1"} and sum(d["count"] for d in work.topology["domains"]) == 3
    (sl,) = adms["ns/sliced"].pod_sets
    assert sl.topology_request == {"podSetSliceRequiredTopology": HOST, "podSetSliceSize": 2}
    assert all(d["count"] % 2 == 0 for d in sl.topology["domains"])
    console = Console(record=True, width=200)
    print_explanation(x, console)
    text = console.export_text()
    assert "topology request: required cloud.example.com/rack; group lws-0" in text
    assert "topology request: slices of 2 pod(s) per kubernetes.io/hostname" in text


def test_group_binds_leader_and_workers_in_one_rack_in_a_run() -> None:
    pool = _tas_pool(racks=2, hosts=2, gpus=4)
    lead = PodSet(name="leader", count=1, cpu_m=1000, gpus=1, topology_required=RACK, topology_group="g")
    work = PodSet(name="worker", count=3, cpu_m=1000, gpus=2, topology_required=RACK, topology_group="g")
    hog = PodSet(count=1, cpu_m=1000, gpus=3, topology_required=HOST)
    wls = [Workload(1, "hog", (hog,), runtime=100, namespace="ns", queue_name="lq"),
           Workload(2, "lws", (lead, work), submit_time=1, runtime=10, namespace="ns", queue_name="lq")]
    out = Engine(pool, wls, make_policy("kueue", pool), check=True).run()
    starts = {j: [p.split(":")[0] for p in d.split()[1].split(";")] for t, k, j, d in out.events if k == "started"}
    # The hog leaves r0 5 GPUs; leader (1) + workers (3 x 2) need 7: the whole group goes to r1.
    assert starts[1] == ["r0h0"]
    assert len(starts[2]) == 4 and {n[:2] for n in starts[2]} == {"r1"}
    assert all(j.state == "COMPLETED" for j in out.jobs)
