"""`gpupool explain`: Kueue's next scheduling cycle(s) on kubectl dumps, with Kueue's messages."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
import yaml
from typer.testing import CliRunner

from gpupool.cli.explain import register
from gpupool.errors import InputError
from gpupool.explain.dump import load_dump
from gpupool.explain.run import explain

SEED = Path(__file__).resolve().parents[2] / "examples" / "seed-pool"
DUMP = SEED / "dumps" / "kueue-state.yaml"
CONFIG = SEED / "kueue-config.yaml"

SERVE2 = "ml-serving/deployment-llm-serve-2-7b02e"
EVAL = "ml-training/job-eval-sweep-152a0"
BIG = "ml-training/job-pretrain-big-587c6"
ABLATION = "ml-training/job-ablation-c-dc0fb"
EMBED = "ml-serving/job-embed-batch-6443a"


def _app() -> typer.Typer:
    app = typer.Typer()
    register(app)

    @app.callback()
    def _root() -> None:  # keeps "explain" a subcommand
        pass

    return app


def _by_name(items):
    return {w.workload: w for w in items}


# --------------------------------------------------------------------------- small dumps


def _meta(name, ns=None, created="2026-11-30T08:00:00Z", **extra):
    m = {"name": name, "creationTimestamp": created, "uid": f"uid-{name}"}
    if ns:
        m["namespace"] = ns
    m.update(extra)
    return m


def _flavor(name, labels=None):
    spec = {"nodeLabels": labels} if labels else {}
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": _meta(name), "spec": spec}


def _cq(name, flavors, cohort=None, preemption=None, selector=True):
    """flavors: [(flavor, gpu nominal)]"""
    spec = {"resourceGroups": [{"coveredResources": ["cpu", "nvidia.com/gpu"], "flavors": [
        {"name": f, "resources": [{"name": "cpu", "nominalQuota": 100}, {"name": "nvidia.com/gpu", "nominalQuota": g}]}
        for f, g in flavors]}]}
    if selector:
        spec["namespaceSelector"] = {}
    if cohort:
        spec["cohortName"] = cohort
    if preemption:
        spec["preemption"] = preemption
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": _meta(name), "spec": spec,
            "status": {"pendingWorkloads": 0}}


def _lq(ns, name, cq):
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "metadata": _meta(name, ns),
            "spec": {"clusterQueue": cq}}


def _wl(name, ns, queue, pod_sets, *, priority=0, created="2026-11-30T08:00:00Z", admitted=None, selector=None):
    """pod_sets: [(name, count, gpus per pod)]; admitted: (cluster queue, flavor, reserved time)."""
    sets = []
    for ps_name, count, gpus in pod_sets:
        pod = {"containers": [{"name": "main", "image": "x",
                               "resources": {"requests": {"cpu": "1", "nvidia.com/gpu": str(gpus)}}}]}
        if selector:
            pod["nodeSelector"] = selector
        sets.append({"name": ps_name, "count": count, "template": {"spec": pod}})
    spec = {"active": True, "podSets": sets, "priority": priority}
    if queue is not None:
        spec["queueName"] = queue
    body = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "metadata": _meta(name, ns, created),
            "spec": spec}
    if admitted:
        cq, flavor, when = admitted
        body["status"] = {
            "admission": {"clusterQueue": cq, "podSetAssignments": [
                {"name": n, "count": c, "flavors": {"cpu": flavor, "nvidia.com/gpu": flavor},
                 "resourceUsage": {"cpu": str(c), "nvidia.com/gpu": str(c * g)}} for n, c, g in pod_sets]},
            "conditions": [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
                            "lastTransitionTime": when, "message": f"Quota reserved in ClusterQueue {cq}"},
                           {"type": "Admitted", "status": "True", "reason": "Admitted", "lastTransitionTime": when,
                            "message": "The workload is admitted"}]}
    else:
        body["status"] = {"conditions": [{"type": "QuotaReserved", "status": "False", "reason": "Pending",
                                          "lastTransitionTime": created, "message": ""}]}
    return body


def _dump(tmp_path: Path, items, name="dump.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""},
                                    "items": items}, sort_keys=False))
    return path


def _cohort_pair(tmp_path, pending, admitted_b):
    """CQ a and b (4 GPUs each, flavor f) in cohort c, reclaimWithinCohort Any."""
    prem = {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"}
    items = [_flavor("f"), _cq("a", [("f", 4)], "c", prem), _cq("b", [("f", 4)], "c", prem),
             _lq("ns-a", "qa", "a"), _lq("ns-b", "qb", "b")] + admitted_b + pending
    return _dump(tmp_path, items)


# --------------------------------------------------------------------------- the seed example


def test_seed_next_cycle_admits_evicts_and_explains():
    x = explain(load_dump([DUMP]))
    assert len(x.admitted_before) == 4 and len(x.pending_before) == 4
    (cycle,) = x.cycles
    (adm,) = cycle.admissions
    assert adm.workload == EVAL and adm.cluster_queue == "training" and not adm.borrowing
    (ps,) = adm.pod_sets
    assert (ps.name, ps.count) == ("main", 1)
    assert ps.flavors == {"cpu": "gpu-node", "memory": "gpu-node", "nvidia.com/gpu": "gpu-node"}
    assert ps.usage == {"cpu": "16", "memory": "64Gi", "nvidia.com/gpu": "4"}
    (ev,) = cycle.evictions
    assert (ev.workload, ev.reason, ev.preemptor) == (EMBED, "InClusterQueue", SERVE2)
    assert ev.freed == {"cpu": "32", "memory": "128Gi", "nvidia.com/gpu": "8"}
    assert ev.message.startswith("Preempted to accommodate a workload (UID: ")
    assert ev.message.endswith("due to prioritization in the ClusterQueue")
    pending = _by_name(x.pending)
    assert set(pending) == {SERVE2, EMBED, BIG, ABLATION}
    serve = pending[SERVE2]
    assert (serve.outcome, serve.queue_state) == ("preempting", "active")
    assert serve.message == ("couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu "
                             "in flavor gpu-node, 4 more needed. Pending the preemption of 1 workload(s)")
    assert pending[BIG].outcome == "queued" and pending[BIG].queue_state == "active"
    assert pending[ABLATION].message == f"queued in ClusterQueue training behind {BIG} (position 2 of 2)"
    assert pending[EMBED].outcome == "queued"  # evicted and requeued


def test_seed_three_cycles_drain_the_backlog():
    x = explain(load_dump([DUMP], CONFIG), cycles=3)
    assert x.fair_sharing and x.block_admission
    assert [[a.workload for a in c.admissions] for c in x.cycles] == [[EVAL], [SERVE2], []]
    assert [[e.workload for e in c.evictions] for c in x.cycles] == [[EMBED], [], []]
    pending = _by_name(x.pending)
    assert set(pending) == {EMBED, BIG, ABLATION}
    assert all(w.queue_state == "inadmissible" for w in x.pending)
    assert pending[BIG].outcome == "nofit"
    assert pending[BIG].message == (
        "couldn't assign flavors to pod set main: insufficient quota for nvidia.com/gpu in flavor gpu-node, "
        "previously considered podsets requests (0) + current podset request (32) > maximum capacity (24)")
    assert pending[ABLATION].outcome == "no_candidates"
    assert pending[ABLATION].message == ("couldn't assign flavors to pod set main: insufficient unused quota for "
                                         "nvidia.com/gpu in flavor gpu-node, 2 more needed")
    assert pending[EMBED].message.endswith("8 more needed")
    # A fourth cycle has no heads: everything is parked until capacity changes.
    x4 = explain(load_dump([DUMP], CONFIG), cycles=5)
    assert len(x4.cycles) == 4 and "no heads" in x4.cycles[-1].note


# --------------------------------------------------------------------------- reasons and flavors


def test_reclaim_from_borrowing_cluster_queue(tmp_path):
    admitted = [_wl("b-big", "ns-b", "qb", [("main", 6, 1)], priority=100,
                    admitted=("b", "f", "2026-11-30T07:00:00Z")),
                _wl("b-small", "ns-b", "qb", [("main", 1, 1)], priority=100,
                    admitted=("b", "f", "2026-11-30T07:30:00Z"))]
    pending = [_wl("a-job", "ns-a", "qa", [("main", 1, 3)])]
    x = explain(load_dump([_cohort_pair(tmp_path, pending, admitted)]), cycles=3)
    (ev,) = x.cycles[0].evictions
    assert (ev.workload, ev.reason, ev.cluster_queue) == ("ns-b/b-big", "InCohortReclamation", "b")
    assert ev.message.endswith("due to reclamation within the cohort")
    assert [a.workload for a in x.cycles[1].admissions] == ["ns-a/a-job"]
    # cycle 2: the requeued victim fit the cycle's snapshot but a-job, ordered first, took the room
    (skipped,) = x.cycles[1].attempts
    assert (skipped.workload, skipped.outcome, skipped.queue_state) == ("ns-b/b-big", "skipped", "active")
    assert skipped.message == "Workload no longer fits after processing another workload"
    # cycle 3: it would have to borrow 2 GPUs the cohort no longer has: parked
    (victim,) = x.pending
    assert victim.workload == "ns-b/b-big" and victim.queue_state == "inadmissible"
    assert victim.message == ("couldn't assign flavors to pod set main: insufficient unused quota for "
                              "nvidia.com/gpu in flavor f, 2 more needed")


def test_admission_on_second_flavor_and_affinity_mismatch(tmp_path):
    items = [_flavor("on-demand", {"pool": "on-demand"}), _flavor("spot", {"pool": "spot"}),
             _cq("cq", [("on-demand", 2), ("spot", 8)]), _lq("ns", "q", "cq"),
             _wl("running", "ns", "q", [("main", 1, 2)], admitted=("cq", "on-demand", "2026-11-30T07:00:00Z")),
             _wl("fits-spot", "ns", "q", [("main", 2, 2)], created="2026-11-30T08:00:00Z"),
             _wl("wants-l4", "ns", "q", [("main", 1, 1)], created="2026-11-30T08:01:00Z", selector={"pool": "l4"})]
    x = explain(load_dump([_dump(tmp_path, items)]), cycles=2)
    (adm,) = x.cycles[0].admissions
    assert adm.workload == "ns/fits-spot"
    assert adm.pod_sets[0].flavors == {"cpu": "spot", "nvidia.com/gpu": "spot"}
    (w,) = x.pending
    assert (w.workload, w.outcome, w.queue_state) == ("ns/wants-l4", "nofit", "inadmissible")
    assert w.message == ("couldn't assign flavors to pod set main: flavor on-demand doesn't match node affinity, "
                         "flavor spot doesn't match node affinity")


def test_multi_pod_set_message_counts_earlier_pod_sets(tmp_path):
    items = [_flavor("f"), _cq("cq", [("f", 8)]), _lq("ns", "q", "cq"),
             _wl("gang", "ns", "q", [("leader", 1, 4), ("workers", 2, 4)])]
    x = explain(load_dump([_dump(tmp_path, items)]))
    (w,) = x.pending
    assert w.message == ("couldn't assign flavors to pod set workers: insufficient quota for nvidia.com/gpu in "
                         "flavor f, previously considered podsets requests (4) + current podset request (8) > "
                         "maximum capacity (8)")


def test_namespace_selector_null_never_scheduled(tmp_path):
    items = [_flavor("f"), _cq("cq", [("f", 8)], selector=False), _lq("ns", "q", "cq"),
             _wl("w", "ns", "q", [("main", 1, 1)])]
    x = explain(load_dump([_dump(tmp_path, items)]))
    assert x.cycles[0].note == "nothing pending"
    (w,) = x.pending
    assert (w.outcome, w.queue_state, w.message) == (
        "blocked", "inadmissible", "Workload namespace doesn't match ClusterQueue selector")


# --------------------------------------------------------------------------- bad input


def test_workload_without_queue_name(tmp_path):
    items = [_flavor("f"), _cq("cq", [("f", 8)]), _lq("ns", "q", "cq"), _wl("w", "ns", None, [("main", 1, 1)])]
    path = _dump(tmp_path, items)
    with pytest.raises(InputError) as info:
        load_dump([path])
    msg = str(info.value)
    assert msg.startswith(f"{path} (document 1, field items[3].spec.queueName): Workload ns/w has no spec.queueName")


def test_workload_with_too_many_pod_sets(tmp_path):
    sets = [(f"ps{i}", 1, 1) for i in range(19)]
    items = [_flavor("f"), _cq("cq", [("f", 8)]), _lq("ns", "q", "cq"), _wl("w", "ns", "q", sets)]
    path = _dump(tmp_path, items)
    with pytest.raises(InputError) as info:
        load_dump([path])
    assert str(info.value) == (f"{path} (document 1, field items[3].spec.podSets): Workload ns/w: "
                               f"Too many: 19: must have at most 18 items")


def test_workload_with_unknown_local_queue(tmp_path):
    items = [_flavor("f"), _cq("cq", [("f", 8)]), _lq("ns", "q", "cq"), _wl("w", "ns", "nope", [("main", 1, 1)])]
    path = _dump(tmp_path, items)
    with pytest.raises(InputError) as info:
        load_dump([path])
    assert str(info.value) == (f"{path} (document 1, field items[3].spec.queueName): Workload ns/w refers to "
                               f"LocalQueue ns/nope, which is not defined")


def test_dump_that_is_not_yaml_objects(tmp_path):
    table = tmp_path / "table.txt"
    table.write_text("NAME   QUEUE   RESERVED IN   ADMITTED   AGE\njob-a   training   training   True   3h\n")
    with pytest.raises(InputError, match=r"table.txt \(document 1\): expected a Kubernetes object.*-o yaml"):
        load_dump([table])
    broken = tmp_path / "broken.yaml"
    broken.write_text("items:\n\t- kind: Workload\n")
    with pytest.raises(InputError, match=r"broken.yaml:2: YAML syntax error"):
        load_dump([broken])


def test_cli_errors_exit_2_with_one_line(tmp_path):
    items = [_flavor("f"), _cq("cq", [("f", 8)]), _lq("ns", "q", "cq"), _wl("w", "ns", "nope", [("main", 1, 1)])]
    result = CliRunner().invoke(_app(), ["explain", "--state", str(_dump(tmp_path, items))])
    assert result.exit_code == 2
    assert "items[3].spec.queueName" in result.output and "LocalQueue ns/nope" in result.output


# --------------------------------------------------------------------------- CLI


def test_cli_json_and_table():
    runner = CliRunner()
    result = runner.invoke(_app(), ["explain", "--state", str(DUMP), "--config", str(CONFIG),
                                    "--cycles", "3", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["summary"] == {"cycles_run": 3, "admitted": 2, "evicted": 1, "still_pending": 3, "inadmissible": 3}
    assert data["cycles"][0]["evictions"][0]["reason"] == "InClusterQueue"
    assert data["cycles"][1]["admissions"][0]["pod_sets"][0]["flavors"]["nvidia.com/gpu"] == "gpu-node"
    table = runner.invoke(_app(), ["explain", "--state", str(DUMP)])
    assert table.exit_code == 0, table.output
    assert "InClusterQueue" in table.output and "still pending" in table.output


def test_main_app_has_explain():
    from gpupool.cli.main import app

    result = CliRunner().invoke(app, ["explain", "--state", str(DUMP), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["summary"]["admitted"] == 1


# --------------------------------------------------------------------------- Topology-Aware Scheduling

RACK = "cloud.example.com/rack"
HOST = "kubernetes.io/hostname"


def _node(name, rack, gpus=4):
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {HOST: name, RACK: rack}},
            "spec": {}, "status": {"allocatable": {"cpu": "32", "memory": "256Gi", "nvidia.com/gpu": str(gpus)},
                                   "conditions": [{"type": "Ready", "status": "True"}]}}


def _tas_items(pending, admitted=()):
    topo = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology", "metadata": _meta("default"),
            "spec": {"levels": [{"nodeLabel": RACK}, {"nodeLabel": HOST}]}}
    flavor = _flavor("tas")
    flavor["spec"]["topologyName"] = "default"
    nodes = [_node(f"r{r}h{h}", f"r{r}") for r in range(2) for h in range(2)]
    return [topo, flavor, _cq("cq", [("tas", 100)]), _lq("ns", "lq", "cq"), *nodes, *admitted, *pending]


def _with_topology(wl, required=None, assignment=None):
    ps = wl["spec"]["podSets"][0]
    if required:
        ps["topologyRequest"] = {"required": required}
    if assignment:
        wl["status"]["admission"]["podSetAssignments"][0]["topologyAssignment"] = {
            "levels": [HOST], "domains": [{"values": [h], "count": c} for h, c in assignment.items()]}
    return wl


def test_explain_topology_assignment_and_the_reason_it_does_not_fit(tmp_path):
    # One 2-GPU pod runs on a host of each rack: 12 GPUs free, no rack with 8 of them.
    held = _with_topology(_wl("held", "ns", "lq", [("main", 2, 2)], admitted=("cq", "tas", "2026-11-30T07:00:00Z")),
                          required=HOST, assignment={"r0h0": 1, "r1h0": 1})
    big = _with_topology(_wl("big", "ns", "lq", [("main", 4, 2)], created="2026-11-30T08:00:00Z"), required=RACK)
    small = _with_topology(_wl("small", "ns", "lq", [("main", 2, 2)], created="2026-11-30T09:00:00Z"),
                           required=RACK)
    x = explain(load_dump([_dump(tmp_path, _tas_items([big, small], [held]))]), cycles=2)
    pending = _by_name(x.pending)
    assert pending["ns/big"].message == ('couldn\'t assign flavors to pod set main: topology "default" allows '
                                         'to fit only 3 out of 4 pod(s)')
    assert pending["ns/big"].outcome == "no_candidates"
    (adm,) = [a for c in x.cycles for a in c.admissions]
    assert adm.workload == "ns/small"
    # Racks r0 and r1 both hold 3 more pods: the first by label wins; inside it the best-fit
    # host for 2 pods is r0h1 (4 free GPUs), not r0h0 (2 free).
    topo = adm.pod_sets[0].topology
    # The lowest level is the hostname: Kueue writes only that level, one domain per node.
    assert topo == {"levels": [HOST], "domains": [{"values": ["r0h1"], "count": 2}]}


def test_explain_tas_flavor_mismatch_and_missing_nodes(tmp_path):
    plain = _wl("plain", "ns", "lq", [("main", 1, 1)])
    items = [i for i in _tas_items([plain]) if i["kind"] != "Node"]
    x = explain(load_dump([_dump(tmp_path, items)]))
    assert any("no Nodes in the dump" in n for n in x.notes)
    # With Nodes, a workload without a topology request in a TAS-only ClusterQueue has implied TAS.
    x = explain(load_dump([_dump(tmp_path, _tas_items([plain]), name="with-nodes.yaml")]))
    (adm,) = x.cycles[0].admissions
    assert adm.pod_sets[0].topology == {"levels": [HOST], "domains": [{"values": ["r0h0"], "count": 1}]}


# --------------------------------------------------------------------------- Admission Fair Sharing


def _afs_dump(tmp_path, heavy_usage="8"):
    cq = _cq("cq", [("f", 4)])
    cq["spec"]["admissionScope"] = {"admissionMode": "UsageBasedAdmissionFairSharing"}
    heavy = _lq("ns", "heavy", "cq")
    heavy["status"] = {"fairSharing": {"weightedShare": 0, "admissionFairSharingStatus": {
        "consumedResources": {"nvidia.com/gpu": heavy_usage}, "lastUpdate": "2026-11-30T08:00:00Z"}}}
    light = _lq("ns", "light", "cq")
    # The heavy LocalQueue's workload has the higher priority and is older; each takes the whole CQ.
    items = [_flavor("f"), cq, heavy, light,
             _wl("from-heavy", "ns", "heavy", [("main", 1, 4)], priority=100, created="2026-11-30T07:00:00Z"),
             _wl("from-light", "ns", "light", [("main", 1, 4)], priority=0, created="2026-11-30T09:00:00Z")]
    config = tmp_path / "config.yaml"
    config.write_text("apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n"
                      "admissionFairSharing:\n  usageHalfLifeTime: 168h\n  usageSamplingInterval: 5m\n")
    return _dump(tmp_path, items), config


def test_explain_orders_by_local_queue_usage_with_admission_fair_sharing(tmp_path):
    dump, config = _afs_dump(tmp_path)
    x = explain(load_dump([dump], config))
    assert x.admission_fair_sharing == ["cq"]
    (adm,) = x.cycles[0].admissions
    assert adm.workload == "ns/from-light"  # the LocalQueue that consumed nothing goes first
    (w,) = x.pending
    assert w.workload == "ns/from-heavy" and w.local_queue_usage == 8.0
    # Without the Configuration's section AFS is off: priority decides, and explain says why.
    x = explain(load_dump([dump]))
    assert x.admission_fair_sharing == [] and x.cycles[0].admissions[0].workload == "ns/from-heavy"
    assert any("no admissionFairSharing section" in n for n in x.notes)


def test_explain_afs_entry_penalty_moves_the_next_head(tmp_path):
    # Both LocalQueues consumed nothing; the CQ holds two of the three workloads. Cycle 1 admits
    # from-heavy (usage tie: priority); its entry penalty puts the heavy LocalQueue behind, so
    # cycle 2 admits from-light ahead of the heavy queue's second, higher-priority workload.
    dump, config = _afs_dump(tmp_path, heavy_usage="0")
    items = yaml.safe_load(dump.read_text())["items"]
    items[1]["spec"]["resourceGroups"][0]["flavors"][0]["resources"][1]["nominalQuota"] = 8
    items.append(_wl("from-heavy-2", "ns", "heavy", [("main", 1, 4)], priority=100,
                     created="2026-11-30T07:30:00Z"))
    x = explain(load_dump([_dump(tmp_path, items, name="three.yaml")], config), cycles=2)
    assert [a.workload for c in x.cycles for a in c.admissions] == ["ns/from-heavy", "ns/from-light"]
    (w,) = x.pending
    assert w.workload == "ns/from-heavy-2" and w.local_queue_usage > 0
