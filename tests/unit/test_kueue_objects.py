"""Kueue objects and Nodes from YAML: both API versions, defaults, references, round trips."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpupool.errors import InputError, MissingReferenceError
from gpupool.formats.kube_yaml import load_yaml_documents, load_yaml_text
from gpupool.formats.kueue_objects import (
    parse_pool_objects,
    render_kueue_objects,
    render_nodes,
)
from gpupool.model.kueue import (
    ClusterQueue,
    Cohort,
    FlavorQuotas,
    KueueConfig,
    LocalQueue,
    Preemption,
    ResourceFlavor,
    ResourceGroup,
    ResourceQuota,
    Topology,
    WorkloadPriorityClass,
)
from gpupool.model.pool import Gpu, Node

SEED = Path(__file__).resolve().parents[2] / "examples" / "seed-pool"

CQ_V1BETA2 = """\
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: a100}
spec:
  nodeLabels: {gpu: a100}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: team-a}
spec:
  cohortName: shared
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu, memory, nvidia.com/gpu]
    flavors:
    - name: a100
      resources:
      - {name: cpu, nominalQuota: 500m}
      - {name: memory, nominalQuota: 2048Gi, lendingLimit: 1Ti}
      - {name: nvidia.com/gpu, nominalQuota: 8, borrowingLimit: 4}
  preemption:
    reclaimWithinCohort: Any
    borrowWithinCohort: {policy: LowerPriority, maxPriorityThreshold: 100}
    withinClusterQueue: LowerOrNewerEqualPriority
  flavorFungibility: {whenCanBorrow: MayStopSearch, whenCanPreempt: MayStopSearch}
  admissionChecksStrategy:
    admissionChecks: [{name: prov}]
"""

CQ_V1BETA1 = (CQ_V1BETA2.replace("v1beta2", "v1beta1").replace("cohortName", "cohort")
              .replace("whenCanBorrow: MayStopSearch", "whenCanBorrow: Borrow")
              .replace("whenCanPreempt: MayStopSearch", "whenCanPreempt: Preempt")
              .replace("  admissionChecksStrategy:\n    admissionChecks: [{name: prov}]\n",
                       "  admissionChecks: [prov]\n"))


def parse(text: str, source: str = "kueue.yaml"):
    return parse_pool_objects(load_yaml_text(text, source))


def error_of(text: str, source: str = "kueue.yaml") -> str:
    with pytest.raises(InputError) as exc:
        parse(text, source)
    return str(exc.value)


# --------------------------------------------------------------------------- objects


def test_cluster_queue_v1beta2_fields_and_defaults():
    kueue = parse(CQ_V1BETA2).kueue
    cq = kueue.cluster_queues["team-a"]
    assert cq.cohort == "shared"
    assert cq.resource_groups == [ResourceGroup(("cpu", "memory", "nvidia.com/gpu"), [FlavorQuotas("a100", {
        "cpu": ResourceQuota(500),
        "memory": ResourceQuota(2048 * 1024, lending_limit=1024 * 1024),
        "nvidia.com/gpu": ResourceQuota(8, borrowing_limit=4),
    })])]
    assert cq.preemption == Preemption("Any", "LowerPriority", 100, "LowerOrNewerEqualPriority")
    assert cq.flavor_fungibility_when_can_preempt == "MayStopSearch"
    assert cq.queueing_strategy == "BestEffortFIFO"  # default
    assert cq.stop_policy == "None" and cq.fair_weight == 1.0
    assert cq.namespace_selector == {}
    assert cq.admission_checks == ("prov",)
    assert kueue.cohorts == {"shared": Cohort("shared", implicit=True)}
    assert kueue.flavors["a100"].node_labels == {"gpu": "a100"}


def test_v1beta1_reads_as_the_same_v1beta2_meaning():
    old = parse(CQ_V1BETA1).kueue.cluster_queues["team-a"]
    new = parse(CQ_V1BETA2).kueue.cluster_queues["team-a"]
    assert old.api_version == "kueue.x-k8s.io/v1beta1"
    assert old.flavor_fungibility_when_can_borrow == "MayStopSearch"  # was Borrow
    assert old.flavor_fungibility_when_can_preempt == "MayStopSearch"  # was Preempt
    assert replace(old, api_version=new.api_version) == new


def test_defaults_of_a_bare_cluster_queue():
    cq = parse("apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata: {name: q}\n"
               ).kueue.cluster_queues["q"]
    assert cq == ClusterQueue("q")
    assert cq.namespace_selector is None  # null selects no namespace
    assert cq.preemption == Preemption("Never", "Never", None, "Never")
    assert (cq.flavor_fungibility_when_can_borrow, cq.flavor_fungibility_when_can_preempt) == (
        "MayStopSearch", "TryNextFlavor")


def test_v1beta2_refuses_v1beta1_field_with_a_hint():
    text = CQ_V1BETA2.replace("cohortName", "cohort")
    assert error_of(text).startswith(
        "kueue.yaml (document 2, field spec.cohort): unknown field 'cohort'; in kueue.x-k8s.io/v1beta2 "
        "this field is called cohortName (known fields: ")


def test_v1beta2_refuses_old_fungibility_spelling():
    text = CQ_V1BETA2.replace("whenCanBorrow: MayStopSearch", "whenCanBorrow: Borrow")
    assert error_of(text) == ("kueue.yaml (document 2, field spec.flavorFungibility.whenCanBorrow): "
                              "expected one of MayStopSearch, TryNextFlavor, got 'Borrow'")


def test_bad_quantity_names_the_field():
    text = CQ_V1BETA2.replace("nominalQuota: 2048Gi", "nominalQuota: 2048GB")
    assert error_of(text) == (
        "kueue.yaml (document 2, field spec.resourceGroups[0].flavors[0].resources[1].nominalQuota): "
        "ClusterQueue team-a: expected a Kubernetes quantity such as '500m', '4', '2048Gi' or '1e3', got '2048GB'")


def test_resources_must_follow_covered_resources():
    text = CQ_V1BETA2.replace("coveredResources: [cpu, memory, nvidia.com/gpu]",
                              "coveredResources: [cpu, nvidia.com/gpu, memory]")
    assert error_of(text) == (
        "kueue.yaml (document 2, field spec.resourceGroups[0].flavors[0].resources): ClusterQueue team-a: "
        "flavor 'a100' lists "
        "resources [cpu, memory, nvidia.com/gpu] but its group covers [cpu, nvidia.com/gpu, memory]; "
        "list every covered resource, in the same order")


def test_borrowing_limit_needs_a_cohort():
    text = CQ_V1BETA2.replace("  cohortName: shared\n", "")
    assert error_of(text) == (
        "kueue.yaml (document 2, field spec.resourceGroups[0].flavors[0].resources[1].lendingLimit): "
        "ClusterQueue team-a: must be nil when cohort is empty")


def test_borrow_within_cohort_needs_reclaim():
    text = CQ_V1BETA2.replace("reclaimWithinCohort: Any", "reclaimWithinCohort: Never")
    assert error_of(text) == ("kueue.yaml (document 2, field spec.preemption): ClusterQueue team-a: "
                              "reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never "
                              "(borrowWithinCohort.policy is 'LowerPriority' but reclaimWithinCohort is Never)")


def test_unknown_kind():
    text = "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\n"
    assert error_of(text).startswith(
        "kueue.yaml (document 1, field kind): unknown kind Widget (example.com/v1); gpupool reads Node, ")


def test_unsupported_version():
    assert error_of("apiVersion: kueue.x-k8s.io/v1alpha1\nkind: ClusterQueue\nmetadata: {name: q}\n") == (
        "kueue.yaml (document 1, field apiVersion): unsupported apiVersion kueue.x-k8s.io/v1alpha1 for "
        "ClusterQueue; expected kueue.x-k8s.io/v1beta1, kueue.x-k8s.io/v1beta2")


def test_local_queue_to_unknown_cluster_queue_names_both_ends():
    text = ("apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata: {name: training}\n---\n"
            "apiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\n"
            "metadata: {name: training, namespace: ml-training}\nspec: {clusterQueue: trainng}\n")
    with pytest.raises(MissingReferenceError) as exc:
        parse(text)
    assert str(exc.value) == ("kueue.yaml (document 2, field spec.clusterQueue): LocalQueue ml-training/training "
                              "refers to ClusterQueue 'trainng', which is not defined")


def test_cluster_queue_to_unknown_flavor():
    text = CQ_V1BETA2.replace("metadata: {name: a100}", "metadata: {name: h100}")
    assert error_of(text) == ("kueue.yaml (document 2, field spec.resourceGroups[0].flavors[0].name): "
                              "ClusterQueue team-a refers to ResourceFlavor 'a100', which is not defined")


def test_flavor_to_unknown_topology():
    text = "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata: {name: f}\nspec: {topologyName: t}\n"
    assert error_of(text) == ("kueue.yaml (document 1, field spec.topologyName): ResourceFlavor f refers to "
                              "Topology 't', which is not defined")


def test_cohort_cycle():
    text = ("apiVersion: kueue.x-k8s.io/v1beta2\nkind: Cohort\nmetadata: {name: a}\nspec: {parentName: b}\n---\n"
            "apiVersion: kueue.x-k8s.io/v1beta1\nkind: Cohort\nmetadata: {name: b}\nspec: {parent: a}\n")
    assert error_of(text) == ("kueue.yaml (document 1, field spec.parentName): Cohort a has parent 'b', and the "
                              "parents lead back to it: a -> b -> a")


def test_cohort_parent_and_implicit_root():
    text = ("apiVersion: kueue.x-k8s.io/v1beta2\nkind: Cohort\nmetadata: {name: team}\n"
            "spec:\n  parentName: org\n  fairSharing: {weight: '0.5'}\n")
    cohorts = parse(text).kueue.cohorts
    assert cohorts["team"] == Cohort("team", parent="org", fair_weight=0.5)
    assert cohorts["org"] == Cohort("org", implicit=True)


def test_duplicate_object():
    text = "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata: {name: q}\n"
    assert error_of(text + "---\n" + text) == (
        "kueue.yaml (document 2): ClusterQueue q is defined twice; the first definition is in kueue.yaml (document 1)")


def test_local_queue_defaults_and_priority_class():
    text = ("apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata: {name: q}\n---\n"
            "apiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\nmetadata: {name: lq}\nspec: {clusterQueue: q}\n"
            "---\napiVersion: kueue.x-k8s.io/v1beta1\nkind: WorkloadPriorityClass\nmetadata: {name: high}\n"
            "value: 1000\ndescription: serving\n")
    kueue = parse(text).kueue
    assert kueue.local_queues == {("default", "lq"): LocalQueue("default", "lq", "q")}
    assert kueue.priority_classes == {"high": WorkloadPriorityClass("high", 1000, "serving")}


def test_kinds_kept_but_not_modelled():
    text = ("apiVersion: v1\nkind: Namespace\nmetadata: {name: ml}\n---\n"
            "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: p}\nvalue: 5\n---\n"
            "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata: {name: q}\n"
            "spec:\n  concurrentAdmissionPolicy: {migration: {mode: TryPreferredFlavors}}\n")
    objects = parse(text)
    assert objects.not_modelled == [
        ("kueue.yaml (document 1)", "Namespace ml"),
        ("kueue.yaml (document 2)", "PriorityClass p"),
        ("kueue.yaml (document 3)", "ClusterQueue q: spec.concurrentAdmissionPolicy"),
    ]


def test_workload_kinds_are_handed_on():
    text = "apiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\n"
    objects = parse(text)
    assert [d.kind for d in objects.workload_docs] == ["Job"]


# --------------------------------------------------------------------------- configuration


CONFIG = """\
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
featureGates: {TopologyAwareScheduling: true, PartialAdmission: false}
waitForPodsReady:
  timeout: 10m
  requeuingStrategy: {timestamp: Eviction, backoffBaseSeconds: 5}
"""


def test_configuration_and_feature_gates():
    kueue = parse(CONFIG).kueue
    assert kueue.feature_gates == {"TopologyAwareScheduling": True, "PartialAdmission": False}
    assert kueue.configuration["waitForPodsReady"]["timeout"] == "10m"
    assert kueue.sources == ["kueue.yaml"]


def test_configuration_from_the_kueue_configmap():
    indented = "".join("    " + line + "\n" for line in CONFIG.splitlines())
    text = ("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: kueue-manager-config, namespace: kueue-system}\n"
            "data:\n  controller_manager_config.yaml: |\n" + indented)
    assert parse(text).kueue.feature_gates["TopologyAwareScheduling"] is True
    other = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: other}\ndata: {a: b}\n"
    assert parse(other).not_modelled == [("kueue.yaml (document 1)", "ConfigMap other")]


def test_configuration_errors_name_fields():
    text = CONFIG.replace("timeout: 10m", "timeout: ten minutes")
    assert error_of(text) == ("kueue.yaml (document 1, field waitForPodsReady.timeout): expected a duration "
                              "such as '10m', '1h30m' or '90s', got 'ten minutes'")
    text = CONFIG.replace("  timeout: 10m\n", "")
    assert error_of(text) == ("kueue.yaml (document 1, field waitForPodsReady.timeout): required in "
                              "config.kueue.x-k8s.io/v1beta2 when waitForPodsReady is set")
    text = CONFIG.replace("PartialAdmission: false", "PartialAdmission: 'no'")
    assert error_of(text) == ("kueue.yaml (document 1, field featureGates.PartialAdmission): expected true or "
                              "false, got a string ('no')")


# --------------------------------------------------------------------------- nodes


NODE = """\
apiVersion: v1
kind: Node
metadata:
  name: gpu01
  labels: {kubernetes.io/hostname: gpu01, nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3}
spec:
  taints: [{key: nvidia.com/gpu, value: present, effect: NoSchedule}]
status:
  capacity: {cpu: '128', memory: 1056375924Ki, nvidia.com/gpu: '8', pods: '110', example.com/fpga: '2'}
  allocatable: {cpu: 127500m, memory: 1000000Mi, nvidia.com/gpu: '7'}
  conditions: [{type: Ready, status: 'True'}]
"""


def test_node_allocatable_wins_and_gpus_become_devices():
    (node,) = parse(NODE, "nodes.yaml").nodes
    assert node.name == "gpu01"
    assert (node.cpus, node.memory_mib) == (127, 1000000)  # rounded down: what pods can get
    assert node.gpus == tuple(Gpu(i, "NVIDIA-H100-80GB-HBM3") for i in range(7))
    assert node.extra == {"pods": 110, "example.com/fpga": 2}
    assert node.taints == ({"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},)
    assert node.state == "IDLE"
    assert node.source == "nodes.yaml (document 1)"


def test_node_without_memory():
    text = "apiVersion: v1\nkind: Node\nmetadata: {name: n}\nstatus: {capacity: {cpu: '4'}}\n"
    assert error_of(text) == ("kueue.yaml (document 1, field status.allocatable): Node n has no memory in "
                              "status.allocatable or status.capacity")


def test_nodes_round_trip():
    nodes = parse(NODE).nodes + [Node("cpu01", 64, 256000, state="DRAIN", source="x")]
    again = parse(render_nodes(nodes)).nodes
    assert [replace(n, source="") for n in again] == [replace(n, source="") for n in nodes]


# --------------------------------------------------------------------------- round trips and examples


def seed_kueue() -> KueueConfig:
    docs = load_yaml_documents(SEED / "kueue.yaml") + load_yaml_documents(SEED / "kueue-config.yaml")
    return parse_pool_objects(docs).kueue


def test_seed_pool_kueue_objects():
    kueue = seed_kueue()
    assert set(kueue.cluster_queues) == {"training", "inference"}
    training = kueue.cluster_queues["training"]
    assert training.cohort == "gpu-pool" and not kueue.cohorts["gpu-pool"].implicit
    quotas = training.resource_groups[0].flavors[0].resources
    assert quotas["nvidia.com/gpu"] == ResourceQuota(16, borrowing_limit=8)
    assert quotas["memory"].nominal == 2048 * 1024 and quotas["cpu"].nominal == 256000
    assert kueue.cluster_queues["inference"].resource_groups[0].flavors[0].resources["nvidia.com/gpu"] == (
        ResourceQuota(16))
    assert training.preemption.reclaim_within_cohort == "Any"
    assert training.preemption.within_cluster_queue == "LowerPriority"
    assert kueue.local_queues[("ml-training", "training")].cluster_queue == "training"
    assert kueue.local_queues[("ml-serving", "inference")].cluster_queue == "inference"
    assert kueue.topologies["gpu-topology"].levels == (
        "cloud.gpupool.io/topology-block", "cloud.gpupool.io/topology-rack", "kubernetes.io/hostname")
    assert kueue.flavors["gpu-node"].topology_name == "gpu-topology"
    assert kueue.priority_classes["inference-high"].value == 1000
    wfpr = kueue.configuration["waitForPodsReady"]
    assert wfpr["requeuingStrategy"] == {"timestamp": "Eviction", "backoffLimitCount": 5,
                                         "backoffBaseSeconds": 60, "backoffMaxSeconds": 3600}
    assert kueue.configuration["fairSharing"]["preemptionStrategies"] == [
        "LessThanOrEqualToFinalShare", "LessThanInitialShare"]


@pytest.mark.parametrize("version", ["kueue.x-k8s.io/v1beta1", "kueue.x-k8s.io/v1beta2"])
def test_seed_pool_round_trip(version):
    kueue = seed_kueue()
    again = parse(render_kueue_objects(kueue, version)).kueue
    expected = replace(kueue, sources=["kueue.yaml"],
                       cluster_queues={n: replace(cq, api_version=version) for n, cq in kueue.cluster_queues.items()})
    assert again == expected


# -- property test ------------------------------------------------------------

NAMES = st.sampled_from(["a", "b", "c", "d", "e"])
LABEL_KEYS = st.sampled_from(["zone", "example.com/rack", "kubernetes.io/hostname", "gpu"])
LABEL_VALUES = st.sampled_from(["x", "y", "8", "true"])
QUANTITY = {
    "cpu": st.integers(0, 10**6),  # millicores
    "memory": st.integers(0, 2**24),  # MiB
    "nvidia.com/gpu": st.integers(0, 64),
    "pods": st.integers(0, 500),
}
WEIGHTS = st.sampled_from([0.0, 0.5, 1.0, 1.5, 2.0, 3.0])


@st.composite
def flavors(draw, topologies):
    taint = st.fixed_dictionaries({"key": LABEL_KEYS, "effect": st.sampled_from(["NoSchedule", "NoExecute"])},
                                  optional={"value": LABEL_VALUES})
    toleration = st.fixed_dictionaries({"key": LABEL_KEYS}, optional={
        "operator": st.just("Equal"), "value": LABEL_VALUES, "effect": st.just("NoSchedule"),
        "tolerationSeconds": st.integers(0, 600)})
    return ResourceFlavor(
        name=draw(st.sampled_from(["f1", "f2", "f3"])),
        node_labels=draw(st.dictionaries(LABEL_KEYS, LABEL_VALUES, max_size=2)),
        node_taints=tuple(draw(st.lists(taint, max_size=2))),
        tolerations=tuple(draw(st.lists(toleration, max_size=2))),
        topology_name=draw(st.sampled_from([None, *sorted(topologies)])),
    )


@st.composite
def resource_groups(draw, flavor_names, limits):
    resources = draw(st.lists(st.sampled_from(sorted(QUANTITY)), min_size=1, max_size=4, unique=True))
    names = draw(st.lists(st.sampled_from(flavor_names), min_size=1, max_size=len(flavor_names), unique=True))
    split = draw(st.integers(1, len(resources))) if len(names) > 1 else len(resources)
    parts = [(resources[:split], names[:1]), (resources[split:], names[1:])]
    groups = []
    for covered, fls in parts:
        if not covered or not fls:
            continue
        flavors_ = []
        for fl in fls:
            quotas = {}
            for r in covered:
                opt = st.none() | QUANTITY[r] if limits else st.none()
                nominal = draw(QUANTITY[r])
                lending = draw(opt)
                if lending is not None:  # the webhook refuses lendingLimit > nominalQuota
                    lending = min(lending, nominal)
                quotas[r] = ResourceQuota(nominal, draw(opt), lending)
            flavors_.append(FlavorQuotas(fl, quotas))
        groups.append(ResourceGroup(tuple(covered), flavors_))
    return groups


@st.composite
def kueue_configs(draw, api_version):
    topologies = {n: Topology(n, tuple(draw(st.lists(LABEL_KEYS, min_size=1, max_size=3, unique=True))))
                  for n in draw(st.lists(st.sampled_from(["t1", "t2"]), max_size=2, unique=True))}
    fl = {f.name: f for f in draw(st.lists(flavors(topologies), min_size=1, max_size=3, unique_by=lambda f: f.name))}
    flavor_names = sorted(fl)
    cohort_names = draw(st.lists(NAMES, max_size=3, unique=True))
    cohorts: dict[str, Cohort] = {}
    for i, name in enumerate(cohort_names):
        parent = draw(st.sampled_from([None, "root", *cohort_names[:i]]))
        cohorts[name] = Cohort(name, parent, draw(resource_groups(flavor_names, parent is not None)), draw(WEIGHTS))
    cqs: dict[str, ClusterQueue] = {}
    for name in draw(st.lists(st.sampled_from(["q1", "q2", "q3"]), min_size=1, max_size=3, unique=True)):
        cohort = draw(st.sampled_from([None, "implicit", *cohort_names]))
        reclaim = draw(st.sampled_from(["Never", "LowerPriority", "Any"]))
        borrow = "Never" if reclaim == "Never" else draw(st.sampled_from(["Never", "LowerPriority"]))
        borrow_pref = draw(st.sampled_from(["MayStopSearch", "TryNextFlavor"]))
        preempt_pref = draw(st.sampled_from(["MayStopSearch", "TryNextFlavor"]))
        preference = "BorrowingOverPreemption"
        if borrow_pref == preempt_pref == "TryNextFlavor":
            preference = draw(st.sampled_from(["BorrowingOverPreemption", "PreemptionOverBorrowing"]))
        cqs[name] = ClusterQueue(
            name=name, cohort=cohort,
            resource_groups=draw(resource_groups(flavor_names, cohort is not None)),
            queueing_strategy=draw(st.sampled_from(["BestEffortFIFO", "StrictFIFO"])),
            namespace_selector=draw(st.sampled_from([None, {}, {"matchLabels": {"team": "a"}}, {
                "matchExpressions": [{"key": "team", "operator": "In", "values": ["a", "b"]}]}])),
            preemption=Preemption(reclaim, borrow, draw(st.none() | st.integers(-10, 1000)),
                                  draw(st.sampled_from(["Never", "LowerPriority", "LowerOrNewerEqualPriority"]))),
            flavor_fungibility_when_can_borrow=borrow_pref,
            flavor_fungibility_when_can_preempt=preempt_pref,
            flavor_fungibility_preference=preference,
            fair_weight=draw(WEIGHTS),
            stop_policy=draw(st.sampled_from(["None", "Hold", "HoldAndDrain"])),
            admission_checks=tuple(draw(st.lists(st.sampled_from(["prov", "multikueue"]), max_size=2, unique=True))),
            admission_mode=draw(st.sampled_from([None, "UsageBasedAdmissionFairSharing"])),
            api_version=api_version,
        )
        if cohort and cohort not in cohorts:
            cohorts[cohort] = Cohort(cohort, implicit=True)
    for cohort in list(cohorts.values()):
        if cohort.parent and cohort.parent not in cohorts:
            cohorts[cohort.parent] = Cohort(cohort.parent, implicit=True)
    lqs = {}
    for ns, name in draw(st.lists(st.tuples(st.sampled_from(["default", "ml"]), NAMES), max_size=3,
                                  unique=True)):
        lqs[(ns, name)] = LocalQueue(ns, name, draw(st.sampled_from(sorted(cqs))),
                                     draw(st.sampled_from(["None", "Hold"])), draw(WEIGHTS))
    pcs = {n: WorkloadPriorityClass(n, draw(st.integers(-(2**31), 2**31 - 1)), draw(st.sampled_from(["", "x y"])))
           for n in draw(st.lists(NAMES, max_size=3, unique=True))}
    gates = draw(st.dictionaries(st.sampled_from(["TopologyAwareScheduling", "PartialAdmission"]), st.booleans()))
    configuration = {}
    if gates or draw(st.booleans()):
        configuration = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
                         "waitForPodsReady": {"timeout": "5m"}}
        if gates:
            configuration["featureGates"] = dict(gates)
    return KueueConfig(flavors=fl, topologies=topologies, cohorts=cohorts, cluster_queues=cqs, local_queues=lqs,
                       priority_classes=pcs, configuration=configuration, feature_gates=gates,
                       sources=["kueue.yaml"])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(["kueue.x-k8s.io/v1beta1", "kueue.x-k8s.io/v1beta2"]).flatmap(
    lambda v: st.tuples(st.just(v), kueue_configs(v))))
def test_render_then_parse_is_identity(case):
    version, kueue = case
    assert parse(render_kueue_objects(kueue, version)).kueue == kueue


def test_v1beta1_configuration_keeps_enable():
    text = ("apiVersion: config.kueue.x-k8s.io/v1beta1\nkind: Configuration\n"
            "waitForPodsReady: {enable: true, blockAdmission: true}\n")
    assert parse(text).kueue.configuration["waitForPodsReady"] == {"enable": True, "blockAdmission": True}
    assert error_of(text.replace("v1beta1", "v1beta2")).startswith(
        "kueue.yaml (document 1, field waitForPodsReady.enable): unknown field 'enable'")


# --------------------------------------------------------------------------- webhook rules (bad input)


def _cq_with(resources: str = "- {name: cpu, nominalQuota: 4}", cohort: str = "cohortName: shared",
             extra: str = "") -> str:
    return ("apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata: {name: a100}\n---\n"
            "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata: {name: team-b}\nspec:\n"
            f"  {cohort}\n  resourceGroups:\n  - coveredResources: [cpu]\n    flavors:\n    - name: a100\n"
            f"      resources:\n      {resources}\n{extra}")


def test_lending_limit_above_nominal_is_refused():
    text = _cq_with("- {name: cpu, nominalQuota: 4, lendingLimit: 5}")
    assert error_of(text) == (
        "kueue.yaml (document 2, field spec.resourceGroups[0].flavors[0].resources[0].lendingLimit): "
        "ClusterQueue team-b: must be less than or equal to the nominalQuota (5 > 4)")


def test_negative_quota_uses_the_webhook_message():
    text = _cq_with("- {name: cpu, nominalQuota: 4, borrowingLimit: -1}")
    assert error_of(text) == (
        "kueue.yaml (document 2, field spec.resourceGroups[0].flavors[0].resources[0].borrowingLimit): "
        "ClusterQueue team-b: must be greater than or equal to 0, got -1")


def test_cohort_limit_without_parent():
    text = ("apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata: {name: a100}\n---\n"
            "apiVersion: kueue.x-k8s.io/v1beta2\nkind: Cohort\nmetadata: {name: org}\nspec:\n"
            "  resourceGroups:\n  - coveredResources: [cpu]\n    flavors:\n    - name: a100\n"
            "      resources: [{name: cpu, nominalQuota: 4, lendingLimit: 1}]\n")
    assert error_of(text) == (
        "kueue.yaml (document 2, field spec.resourceGroups[0].flavors[0].resources[0].lendingLimit): "
        "Cohort org: must be nil when parent is empty")


def test_preference_needs_both_try_next_flavor():
    text = _cq_with(extra="  flavorFungibility: {whenCanPreempt: MayStopSearch, preference: PreemptionOverBorrowing}\n")
    assert error_of(text) == (
        "kueue.yaml (document 2, field spec.flavorFungibility.preference): ClusterQueue team-b: preference "
        "'PreemptionOverBorrowing' requires both whenCanBorrow and whenCanPreempt to be TryNextFlavor "
        "(whenCanBorrow MayStopSearch, whenCanPreempt MayStopSearch)")
    ok = _cq_with(extra="  flavorFungibility: {whenCanBorrow: TryNextFlavor, preference: PreemptionOverBorrowing}\n")
    assert parse(ok).kueue.cluster_queues["team-b"].flavor_fungibility_preference == "PreemptionOverBorrowing"


def test_tiny_fair_sharing_weight_is_refused_zero_is_not():
    text = _cq_with(extra="  fairSharing: {weight: 1n}\n")
    assert error_of(text) == ("kueue.yaml (document 2, field spec.fairSharing.weight): ClusterQueue team-b: "
                              "When not 0, weight must be > 10e-9 (got '1n'; such a weight collapses the share "
                              "to infinity)")
    zero = parse(_cq_with(extra="  fairSharing: {weight: 0}\n")).kueue.cluster_queues["team-b"]
    assert zero.fair_weight == 0.0


def test_too_many_resource_groups():
    groups = "".join(f"  - coveredResources: [r{i}.example.com/x]\n    flavors:\n    - name: f{i}\n"
                     f"      resources: [{{name: r{i}.example.com/x, nominalQuota: 1}}]\n" for i in range(17))
    flavors = "".join(f"---\napiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata: {{name: f{i}}}\n"
                      for i in range(17))
    text = ("apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata: {name: wide}\nspec:\n"
            f"  resourceGroups:\n{groups}{flavors}")
    assert error_of(text) == ("kueue.yaml (document 1, field spec.resourceGroups): ClusterQueue wide: "
                              "Too many: 17: must have at most 16 items")


def test_fair_sharing_strategies_must_be_a_supported_list():
    text = ("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: kueue-manager-config, namespace: kueue-system}\n"
            "data:\n  controller_manager_config.yaml: |\n    apiVersion: config.kueue.x-k8s.io/v1beta2\n"
            "    kind: Configuration\n    fairSharing:\n"
            "      preemptionStrategies: [LessThanInitialShare, LessThanOrEqualToFinalShare]\n")
    msg = error_of(text)
    assert "preemptionStrategies" in msg
    assert ("Unsupported value: ['LessThanInitialShare', 'LessThanOrEqualToFinalShare']: supported values: "
            '"LessThanOrEqualToFinalShare", "LessThanInitialShare", '
            '"LessThanOrEqualToFinalShare,LessThanInitialShare"') in msg
