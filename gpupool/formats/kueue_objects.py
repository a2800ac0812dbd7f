"""Kubernetes Nodes and Kueue objects from YAML, into plain model data; and back.

Both Kueue API versions are read (``kueue.x-k8s.io/v1beta1`` and ``v1beta2``, plus
``v1alpha1`` for Cohort and Topology); the result always carries v1beta2 meanings, so the
policies never see a version difference. The defaults Kueue's API server would fill in
are applied here (``../shared/spec/kueue.md`` §1, §10, §11), and every cross-reference is
checked once, after all documents are read, so the order of objects in files does not
matter. Workload kinds (Job, Pod, Deployment, ...) are handed on untouched to
``gpupool.formats.kube_workloads``.
"""
from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

import yaml

from gpupool.errors import InputError, MissingReferenceError
from gpupool.formats.kube_yaml import Fields, YamlDoc, parse_embedded_yaml, type_name
from gpupool.formats.quantity import (
    QuantityError,
    format_cpu,
    format_memory,
    kube_resource,
    parse_kube_quantity,
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
from gpupool.model.pool import GPU_PRODUCT_LABEL, Gpu, Node

__all__ = [
    "NOT_MODELLED_KINDS",
    "WORKLOAD_KINDS",
    "KubePoolObjects",
    "api_group",
    "parse_pool_objects",
    "render_kueue_objects",
    "render_nodes",
]

KUEUE_GROUP = "kueue.x-k8s.io"
CONFIG_GROUP = "config.kueue.x-k8s.io"
KUEUE_CONFIGMAP = "kueue-manager-config"
KUEUE_CONFIGMAP_KEY = "controller_manager_config.yaml"
GPU_RESOURCE = "nvidia.com/gpu"

#: Workload kinds: (API group, kind) -> accepted versions. Read by ``kube_workloads``.
WORKLOAD_KINDS: dict[tuple[str, str], frozenset[str]] = {
    ("batch", "Job"): frozenset({"v1"}),
    ("", "Pod"): frozenset({"v1"}),
    ("apps", "Deployment"): frozenset({"v1"}),
    ("apps", "StatefulSet"): frozenset({"v1"}),
    ("jobset.x-k8s.io", "JobSet"): frozenset({"v1alpha2"}),
    ("leaderworkerset.x-k8s.io", "LeaderWorkerSet"): frozenset({"v1"}),
    (KUEUE_GROUP, "Workload"): frozenset({"v1beta1", "v1beta2"}),
    ("scheduling.k8s.io", "Workload"): frozenset({"v1alpha1", "v1alpha2", "v1beta1"}),
    ("scheduling.k8s.io", "PodGroup"): frozenset({"v1alpha2", "v1beta1"}),
}

#: Kinds gpupool keeps (reports once) but does not model: kind -> API groups.
NOT_MODELLED_KINDS: dict[str, frozenset[str]] = {
    **{k: frozenset({""}) for k in (
        "Namespace", "ConfigMap", "Secret", "Service", "ServiceAccount", "LimitRange",
        "ResourceQuota", "PersistentVolume", "PersistentVolumeClaim", "Endpoints", "Event")},
    **{k: frozenset({"rbac.authorization.k8s.io"}) for k in (
        "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding")},
    "PriorityClass": frozenset({"scheduling.k8s.io"}),
    "DaemonSet": frozenset({"apps"}),
    "ReplicaSet": frozenset({"apps"}),
    "ControllerRevision": frozenset({"apps"}),
    "CronJob": frozenset({"batch"}),
    "StorageClass": frozenset({"storage.k8s.io"}),
    "NetworkPolicy": frozenset({"networking.k8s.io"}),
    "Ingress": frozenset({"networking.k8s.io"}),
    "IngressClass": frozenset({"networking.k8s.io"}),
    "HorizontalPodAutoscaler": frozenset({"autoscaling"}),
    "PodDisruptionBudget": frozenset({"policy"}),
    "CustomResourceDefinition": frozenset({"apiextensions.k8s.io"}),
    "ValidatingWebhookConfiguration": frozenset({"admissionregistration.k8s.io"}),
    "MutatingWebhookConfiguration": frozenset({"admissionregistration.k8s.io"}),
    "EndpointSlice": frozenset({"discovery.k8s.io"}),
    "Lease": frozenset({"coordination.k8s.io"}),
    "RuntimeClass": frozenset({"node.k8s.io"}),
    "DeviceClass": frozenset({"resource.k8s.io"}),
    "ResourceClaim": frozenset({"resource.k8s.io"}),
    "ResourceClaimTemplate": frozenset({"resource.k8s.io"}),
    "ResourceSlice": frozenset({"resource.k8s.io"}),
    "AdmissionCheck": frozenset({KUEUE_GROUP}),
    "ProvisioningRequestConfig": frozenset({KUEUE_GROUP}),
    "MultiKueueCluster": frozenset({KUEUE_GROUP}),
    "MultiKueueConfig": frozenset({KUEUE_GROUP}),
}

_KUEUE_KINDS = ("ResourceFlavor", "Topology", "Cohort", "ClusterQueue", "LocalQueue",
                "WorkloadPriorityClass")
_KUEUE_VERSIONS = ("v1beta1", "v1beta2")
_ALPHA_KINDS = ("Cohort", "Topology")  # also served as v1alpha1 in older releases
_CONFIG_VERSIONS = ("v1beta1", "v1beta2")

_QUEUEING = ("BestEffortFIFO", "StrictFIFO")
_STOP = ("None", "Hold", "HoldAndDrain")
_WITHIN_CQ = ("Never", "LowerPriority", "LowerOrNewerEqualPriority")
_RECLAIM = ("Never", "LowerPriority", "Any")
_BORROW_WITHIN = ("Never", "LowerPriority")
_FUNGIBILITY = ("MayStopSearch", "TryNextFlavor")
_PREFERENCE = ("BorrowingOverPreemption", "PreemptionOverBorrowing")
_ADMISSION_MODES = ("UsageBasedAdmissionFairSharing", "NoAdmissionFairSharing")
_TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
_TOLERATION_OPERATORS = ("Exists", "Equal")
_INT32_MAX = 2**31 - 1

# Kueue's validating webhooks and CRD rules (pkg/webhooks, apis/kueue/v1beta2): their messages
# are quoted verbatim so a user can search for them, prefixed with the object and field.
IS_NEGATIVE = "must be greater than or equal to 0"
LIMIT_WITHOUT_PARENT = "must be nil when {} is empty"
LENDING_ABOVE_NOMINAL = "must be less than or equal to the nominalQuota"
BORROW_WITHOUT_RECLAIM = "reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never"
PREFERENCE_NEEDS_TRY_NEXT = "preference {!r} requires both whenCanBorrow and whenCanPreempt to be TryNextFlavor"
MAX_RESOURCE_GROUPS = 16
MAX_FLAVORS = 256
MAX_COVERED = 256
STRATEGY_SETS = (("LessThanOrEqualToFinalShare",), ("LessThanInitialShare",),
                 ("LessThanOrEqualToFinalShare", "LessThanInitialShare"))


def _owned(exc: InputError, owner: str) -> InputError:
    """The same error with the object it concerns named first (``ClusterQueue team-a: ...``)."""
    if not owner:
        return exc
    return InputError(exc.source, f"{owner}: {exc.message}", line=exc.line, document=exc.document,
                      field=exc.field)


@dataclass
class KubePoolObjects:
    """What a set of Kubernetes YAML documents says about a pool.

    ``workload_docs`` are left for ``kube_workloads``; ``not_modelled`` lists, as
    ``(where, what)`` pairs, objects and fields gpupool accepts but does not act on.
    """

    nodes: list[Node] = field(default_factory=list)
    kueue: KueueConfig = field(default_factory=KueueConfig)
    workload_docs: list[YamlDoc] = field(default_factory=list)
    not_modelled: list[tuple[str, str]] = field(default_factory=list)
    #: LocalQueue ``(namespace, name)`` -> ``status.fairSharing.admissionFairSharingStatus
    #: .consumedResources`` in canonical ints: the decayed usage Admission Fair Sharing orders
    #: by (§6.5), as a dump of a running cluster carries it.
    afs_consumed: dict[tuple[str, str], dict[str, int]] = field(default_factory=dict)


def api_group(api_version: str) -> tuple[str, str]:
    """``batch/v1`` -> ("batch", "v1"); core ``v1`` -> ("", "v1")."""
    group, _, version = api_version.rpartition("/")
    return group, version


# --------------------------------------------------------------------------- parsing


@dataclass
class _Ref:
    """A name one object uses to point at another, checked once everything is read."""

    doc: YamlDoc
    field: str
    owner: str  # "ClusterQueue training"
    kind: str  # "ResourceFlavor"
    name: str


@dataclass
class _State:
    """Everything collected while reading documents, before references are checked."""

    out: KubePoolObjects
    refs: list[_Ref] = field(default_factory=list)
    seen: dict[tuple[str, str], YamlDoc] = field(default_factory=dict)
    cohort_parent_fields: dict[str, tuple[YamlDoc, str]] = field(default_factory=dict)
    config_doc: YamlDoc | None = None

    def claim(self, kind: str, name: str, doc: YamlDoc, owner: str) -> None:
        """Refuse a second object of the same kind and name (the API server would too)."""
        first = self.seen.get((kind, name))
        if first is not None:
            raise doc.error(f"{owner} is defined twice; the first definition is in {first.where}")
        self.seen[(kind, name)] = doc

    def note_source(self, doc: YamlDoc) -> None:
        if doc.source not in self.out.kueue.sources:
            self.out.kueue.sources.append(doc.source)


def parse_pool_objects(docs: list[YamlDoc]) -> KubePoolObjects:
    """Turn Kubernetes documents into Nodes, a KueueConfig and the workload documents.

    Raises InputError for unknown kinds, bad fields and dangling references.
    """
    state = _State(KubePoolObjects())
    for doc in docs:
        _dispatch(doc, state)
    _check_references(state)
    return state.out


def _dispatch(doc: YamlDoc, state: _State) -> None:
    group, version = api_group(doc.api_version)
    kind = doc.kind
    out = state.out
    if (group, kind) in WORKLOAD_KINDS:
        _check_version(doc, WORKLOAD_KINDS[(group, kind)])
        out.workload_docs.append(doc)
    elif group == KUEUE_GROUP and kind in _KUEUE_KINDS:
        allowed = _KUEUE_VERSIONS + (("v1alpha1",) if kind in _ALPHA_KINDS else ())
        _check_version(doc, allowed)
        state.note_source(doc)
        _KUEUE_PARSERS[kind](doc, state)
    elif group == CONFIG_GROUP and kind == "Configuration":
        _check_version(doc, _CONFIG_VERSIONS)
        _configuration(doc, doc.body, state)
    elif group == "" and kind == "Node":
        _check_version(doc, ("v1",))
        out.nodes.append(_node(doc, state))
    elif group == "" and kind == "ConfigMap" and _object_name(doc) == KUEUE_CONFIGMAP:
        _kueue_configmap(doc, state)
    elif group in NOT_MODELLED_KINDS.get(kind, ()):
        out.not_modelled.append((doc.where, f"{kind} {_display_name(doc)}"))
    else:
        raise doc.error(
            f"unknown kind {kind} ({doc.api_version}); gpupool reads Node, the Kueue kinds "
            f"({', '.join(_KUEUE_KINDS)}, Configuration), workload kinds (Job, Pod, Deployment, "
            f"StatefulSet, JobSet, LeaderWorkerSet, Workload) and keeps common Kubernetes kinds "
            f"such as Namespace and PriorityClass without modelling them",
            "kind",
        )


def _check_version(doc: YamlDoc, allowed: Iterable[str]) -> None:
    group, version = api_group(doc.api_version)
    if version not in allowed:
        prefix = f"{group}/" if group else ""
        choices = ", ".join(prefix + v for v in allowed)
        raise doc.error(f"unsupported apiVersion {doc.api_version} for {doc.kind}; expected {choices}",
                        "apiVersion")


def _object_name(doc: YamlDoc) -> str | None:
    meta = doc.body.get("metadata")
    name = meta.get("name") if isinstance(meta, dict) else None
    return name if isinstance(name, str) else None


def _display_name(doc: YamlDoc) -> str:
    meta = doc.body.get("metadata") if isinstance(doc.body.get("metadata"), dict) else {}
    name = meta.get("name") or meta.get("generateName") or "(unnamed)"
    namespace = meta.get("namespace")
    return f"{namespace}/{name}" if namespace else str(name)


def _metadata(doc: YamlDoc) -> Fields:
    return Fields.root(doc).mapping("metadata", required=True)


def _name(doc: YamlDoc) -> str:
    """metadata.name, required for every object gpupool models."""
    return _metadata(doc).string("name", required=True)


def _version(doc: YamlDoc) -> str:
    return api_group(doc.api_version)[1]


def _spec(doc: YamlDoc) -> Fields:
    return Fields.root(doc).mapping_or_empty("spec")


# -- quantities ---------------------------------------------------------------


def quantity(f: Fields, key: str, resource: str, *, required: bool = False) -> int | None:
    """A Kubernetes quantity field in gpupool's canonical unit for ``resource``."""
    value = f.data.get(key)
    if value is None:
        if required:
            raise f.error(key, "required field is missing")
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise f.error(key, f"expected a Kubernetes quantity such as '500m', '4', '2048Gi' or '1e3', "
                           f"got {type_name(value)}")
    try:
        result = kube_resource(resource, value)
    except QuantityError as exc:
        raise f.error(key, str(exc)) from exc
    if result < 0:
        raise f.error(key, f"{IS_NEGATIVE}, got {value!r}")
    return result


def _weight(f: Fields, key: str = "weight") -> float:
    """fairSharing.weight: a Quantity, default 1; 0 is allowed (spec §1.2)."""
    value = f.data.get(key)
    if value is None:
        return 1.0
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise f.error(key, f"expected a Kubernetes quantity such as '1', '0.5' or '2', got {type_name(value)}")
    try:
        number = parse_kube_quantity(value)
    except QuantityError as exc:
        raise f.error(key, str(exc)) from exc
    if number < 0:
        raise f.error(key, f"{IS_NEGATIVE}, got {value!r}")
    if 0 < number <= 1e-9:
        raise f.error(key, f"When not 0, weight must be > 10e-9 (got {value!r}; such a weight collapses "
                           f"the share to infinity)")
    return float(number)


def _fair_weight(spec: Fields, owner: str = "") -> float:
    fair = spec.mapping("fairSharing")
    if fair is None:
        return 1.0
    fair.check_keys({"weight"})
    try:
        return _weight(fair)
    except InputError as exc:
        raise _owned(exc, owner) from None


# -- Kueue objects ------------------------------------------------------------


def _resource_flavor(doc: YamlDoc, state: _State) -> None:
    name = _name(doc)
    owner = f"ResourceFlavor {name}"
    state.claim("ResourceFlavor", name, doc, owner)
    spec = _spec(doc)
    spec.check_keys({"nodeLabels", "nodeTaints", "tolerations", "topologyName"})
    topology = spec.string("topologyName")
    flavor = ResourceFlavor(
        name=name,
        node_labels=spec.string_map("nodeLabels"),
        node_taints=tuple(_taint(t) for t in spec.items("nodeTaints")),
        tolerations=tuple(_toleration(t) for t in spec.items("tolerations")),
        topology_name=topology,
    )
    if topology:
        state.refs.append(_Ref(doc, spec.at("topologyName"), owner, "Topology", topology))
    state.out.kueue.flavors[name] = flavor


def _taint(f: Fields) -> dict:
    """A Node or flavor taint: key and effect required, value optional."""
    f.check_keys({"key", "value", "effect", "timeAdded"})
    taint = {"key": f.string("key", required=True)}
    value = f.string("value")
    if value is not None:
        taint["value"] = value
    taint["effect"] = f.string("effect", required=True, choices=_TAINT_EFFECTS)
    return taint


def _toleration(f: Fields) -> dict:
    """A toleration with only the fields Kubernetes defines, typed."""
    f.check_keys({"key", "operator", "value", "effect", "tolerationSeconds"})
    out: dict = {}
    for key in ("key", "operator", "value", "effect"):
        choices = _TOLERATION_OPERATORS if key == "operator" else _TAINT_EFFECTS if key == "effect" else None
        value = f.string(key, choices=choices)
        if value is not None:
            out[key] = value
    seconds = f.integer("tolerationSeconds")
    if seconds is not None:
        out["tolerationSeconds"] = seconds
    if out.get("operator") == "Exists" and out.get("value"):
        raise f.error("value", "must be empty when operator is Exists")
    return out


def _topology(doc: YamlDoc, state: _State) -> None:
    name = _name(doc)
    state.claim("Topology", name, doc, f"Topology {name}")
    spec = _spec(doc)
    spec.check_keys({"levels"})
    levels = []
    for level in spec.items("levels", required=True):
        level.check_keys({"nodeLabel"})
        label = level.string("nodeLabel", required=True)
        if label in levels:
            raise level.error("nodeLabel", f"level {label!r} is listed twice")
        levels.append(label)
    if not 1 <= len(levels) <= 16:
        raise spec.error("levels", f"a Topology has 1 to 16 levels, got {len(levels)}")
    state.out.kueue.topologies[name] = Topology(name, tuple(levels))


def _cohort(doc: YamlDoc, state: _State) -> None:
    name = _name(doc)
    owner = f"Cohort {name}"
    state.claim("Cohort", name, doc, owner)
    spec = _spec(doc)
    parent_key = "parentName" if _version(doc) == "v1beta2" else "parent"
    other = "parent" if parent_key == "parentName" else "parentName"
    spec.check_keys({parent_key, "resourceGroups", "fairSharing"}, renamed={other: parent_key})
    parent = spec.string(parent_key) or None
    groups = _resource_groups(spec, doc, state, owner, limits_allowed=parent is not None,
                              no_limit_reason="parent")
    if parent:
        state.cohort_parent_fields[name] = (doc, spec.at(parent_key))
    state.out.kueue.cohorts[name] = Cohort(
        name=name, parent=parent, resource_groups=groups, fair_weight=_fair_weight(spec, owner)
    )


_CQ_FIELDS = {"resourceGroups", "queueingStrategy", "namespaceSelector", "flavorFungibility",
              "preemption", "admissionChecksStrategy", "stopPolicy", "fairSharing", "admissionScope"}


def _cluster_queue(doc: YamlDoc, state: _State) -> None:
    name = _name(doc)
    owner = f"ClusterQueue {name}"
    state.claim("ClusterQueue", name, doc, owner)
    spec = _spec(doc)
    version = _version(doc)
    cohort_key = "cohortName" if version == "v1beta2" else "cohort"
    known = _CQ_FIELDS | {cohort_key} | ({"admissionChecks"} if version == "v1beta1" else set())
    spec.check_keys(known, not_modelled={"concurrentAdmissionPolicy"}, notes=state.out.not_modelled,
                    owner=owner, renamed={"cohort": "cohortName", "cohortName": "cohort"})
    cohort = spec.string(cohort_key) or None
    cq = ClusterQueue(
        name=name,
        cohort=cohort,
        resource_groups=_resource_groups(spec, doc, state, owner, limits_allowed=cohort is not None,
                                         no_limit_reason="cohort", lending_within_nominal=True),
        queueing_strategy=spec.string("queueingStrategy", "BestEffortFIFO", choices=_QUEUEING),
        namespace_selector=_label_selector(spec, "namespaceSelector"),
        preemption=_preemption(spec.mapping_or_empty("preemption"), owner),
        fair_weight=_fair_weight(spec, owner),
        stop_policy=spec.string("stopPolicy", "None", choices=_STOP),
        admission_checks=_admission_checks(spec, state, owner),
        admission_mode=_admission_mode(spec),
        api_version=doc.api_version,
    )
    _flavor_fungibility(spec.mapping_or_empty("flavorFungibility"), cq, version, owner)
    if cohort:
        state.refs.append(_Ref(doc, spec.at(cohort_key), owner, "Cohort", cohort))
    state.out.kueue.cluster_queues[name] = cq


def _resource_groups(spec: Fields, doc: YamlDoc, state: _State, owner: str, *,
                     limits_allowed: bool, no_limit_reason: str,
                     lending_within_nominal: bool = False) -> list[ResourceGroup]:
    """resourceGroups of a ClusterQueue or Cohort, with the CRD's structural rules and the
    webhook's limits (≤16 groups, ≤256 flavors and ≤256 covered resources in all)."""
    items = spec.items("resourceGroups")
    if len(items) > MAX_RESOURCE_GROUPS:
        raise spec.error("resourceGroups", f"{owner}: Too many: {len(items)}: must have at most "
                                           f"{MAX_RESOURCE_GROUPS} items")
    groups: list[ResourceGroup] = []
    resource_group: dict[str, int] = {}
    flavor_group: dict[str, int] = {}
    for g, group in enumerate(items):
        group.check_keys({"coveredResources", "flavors"})
        covered = group.string_list("coveredResources")
        if not covered:
            raise group.error("coveredResources", "a resource group covers at least one resource")
        for resource in covered:
            if resource in resource_group:
                raise group.error("coveredResources", f"resource {resource!r} is already covered by "
                                                      f"resourceGroups[{resource_group[resource]}]")
            resource_group[resource] = g
        flavors = []
        for fl in group.items("flavors", required=True):
            try:
                fq = _flavor_quotas(fl, covered, limits_allowed, no_limit_reason, lending_within_nominal)
            except InputError as exc:
                raise _owned(exc, owner) from None
            if fq.flavor in flavor_group:
                raise fl.error("name", f"flavor {fq.flavor!r} is already used by "
                                       f"resourceGroups[{flavor_group[fq.flavor]}]")
            flavor_group[fq.flavor] = g
            state.refs.append(_Ref(doc, fl.at("name"), owner, "ResourceFlavor", fq.flavor))
            flavors.append(fq)
        if not flavors:
            raise group.error("flavors", "a resource group lists at least one flavor")
        groups.append(ResourceGroup(tuple(covered), flavors))
    n_flavors = sum(len(g.flavors) for g in groups)
    if n_flavors > MAX_FLAVORS:
        raise spec.error("resourceGroups", f"{owner}: total number of flavors across all resourceGroups "
                                           f"must be ≤ {MAX_FLAVORS}, got {n_flavors}")
    n_covered = sum(len(g.covered_resources) for g in groups)
    if n_covered > MAX_COVERED:
        raise spec.error("resourceGroups", f"{owner}: total number of covered resources across all "
                                           f"resourceGroups must be ≤ {MAX_COVERED}, got {n_covered}")
    return groups


def _flavor_quotas(fl: Fields, covered: list[str], limits_allowed: bool, no_limit_reason: str,
                   lending_within_nominal: bool = False) -> FlavorQuotas:
    fl.check_keys({"name", "resources"})
    name = fl.string("name", required=True)
    entries = fl.items("resources", required=True)
    names = []
    quotas: dict[str, ResourceQuota] = {}
    for entry in entries:
        entry.check_keys({"name", "nominalQuota", "borrowingLimit", "lendingLimit"})
        resource = entry.string("name", required=True)
        names.append(resource)
        limits = {}
        for key in ("borrowingLimit", "lendingLimit"):
            limits[key] = quantity(entry, key, resource)
            if limits[key] is not None and not limits_allowed:
                raise entry.error(key, LIMIT_WITHOUT_PARENT.format(no_limit_reason))
        nominal = quantity(entry, "nominalQuota", resource, required=True)
        lending = limits["lendingLimit"]
        if lending_within_nominal and lending is not None and lending > nominal:
            raise entry.error("lendingLimit", f"{LENDING_ABOVE_NOMINAL} ({entry.data.get('lendingLimit')!r} > "
                                              f"{entry.data.get('nominalQuota')!r})")
        quotas[resource] = ResourceQuota(
            nominal=nominal,
            borrowing_limit=limits["borrowingLimit"],
            lending_limit=lending,
        )
    if names != covered:
        raise fl.error("resources", f"flavor {name!r} lists resources [{', '.join(names)}] but its group "
                                    f"covers [{', '.join(covered)}]; list every covered resource, in the same order")
    return FlavorQuotas(name, quotas)


def _label_selector(spec: Fields, key: str) -> dict | None:
    """A LabelSelector kept as written; null (absent) and ``{}`` differ (none vs all)."""
    if key not in spec.data or spec.data[key] is None:
        return None
    sel = spec.mapping(key)
    sel.check_keys({"matchLabels", "matchExpressions"})
    out: dict = {}
    if "matchLabels" in sel.data:
        out["matchLabels"] = sel.string_map("matchLabels")
    if "matchExpressions" in sel.data:
        exprs = []
        for expr in sel.items("matchExpressions"):
            expr.check_keys({"key", "operator", "values"})
            item = {"key": expr.string("key", required=True),
                    "operator": expr.string("operator", required=True,
                                            choices=("In", "NotIn", "Exists", "DoesNotExist"))}
            if "values" in expr.data:
                item["values"] = expr.string_list("values")
            exprs.append(item)
        out["matchExpressions"] = exprs
    return out


def _preemption(p: Fields, owner: str = "") -> Preemption:
    p.check_keys({"reclaimWithinCohort", "borrowWithinCohort", "withinClusterQueue"})
    reclaim = p.string("reclaimWithinCohort", "Never", choices=_RECLAIM + ("",)) or "Never"
    borrow = p.mapping_or_empty("borrowWithinCohort")
    borrow.check_keys({"policy", "maxPriorityThreshold"})
    policy = borrow.string("policy", "Never", choices=_BORROW_WITHIN + ("",)) or "Never"
    if policy != "Never" and reclaim == "Never":
        # The CRD rule and the webhook report it on spec.preemption, the object holding both fields.
        raise p.error(None, f"{owner}: {BORROW_WITHOUT_RECLAIM} (borrowWithinCohort.policy is {policy!r} "
                            f"but reclaimWithinCohort is Never)".lstrip(": "))
    return Preemption(
        reclaim_within_cohort=reclaim,
        borrow_within_cohort_policy=policy,
        borrow_within_cohort_max_priority_threshold=borrow.integer(
            "maxPriorityThreshold", minimum=-(2**31), maximum=_INT32_MAX),
        within_cluster_queue=p.string("withinClusterQueue", "Never", choices=_WITHIN_CQ + ("",)) or "Never",
    )


def _flavor_fungibility(f: Fields, cq: ClusterQueue, version: str, owner: str = "") -> None:
    """v1beta1's ``Borrow``/``Preempt`` are old spellings of ``MayStopSearch`` (spec §11)."""
    f.check_keys({"whenCanBorrow", "whenCanPreempt", "preference"})
    old = {"whenCanBorrow": "Borrow", "whenCanPreempt": "Preempt"}
    values = {}
    for key, default in (("whenCanBorrow", "MayStopSearch"), ("whenCanPreempt", "TryNextFlavor")):
        choices = _FUNGIBILITY + ((old[key],) if version == "v1beta1" else ())
        value = f.string(key, default, choices=choices)
        values[key] = "MayStopSearch" if value == old[key] else value
    preference = f.string("preference", choices=_PREFERENCE)
    if preference is not None and set(values.values()) != {"TryNextFlavor"}:
        raise f.error("preference", f"{owner}: {PREFERENCE_NEEDS_TRY_NEXT.format(preference)} (whenCanBorrow "
                                    f"{values['whenCanBorrow']}, whenCanPreempt {values['whenCanPreempt']})")
    cq.flavor_fungibility_when_can_borrow = values["whenCanBorrow"]
    cq.flavor_fungibility_when_can_preempt = values["whenCanPreempt"]
    cq.flavor_fungibility_preference = preference or "BorrowingOverPreemption"


def _admission_checks(spec: Fields, state: _State, owner: str) -> tuple[str, ...]:
    """v1beta1 ``admissionChecks`` or ``admissionChecksStrategy`` (names only)."""
    plain = spec.string_list("admissionChecks")
    strategy = spec.mapping("admissionChecksStrategy")
    if plain and strategy is not None:
        raise spec.error("admissionChecksStrategy", "set either admissionChecks or admissionChecksStrategy, not both")
    if strategy is None:
        return tuple(plain)
    strategy.check_keys({"admissionChecks"})
    names = []
    for rule in strategy.items("admissionChecks"):
        rule.check_keys({"name"}, not_modelled={"onFlavors"}, notes=state.out.not_modelled, owner=owner)
        names.append(rule.string("name", required=True))
    return tuple(names)


def _admission_mode(spec: Fields) -> str | None:
    scope = spec.mapping("admissionScope")
    if scope is None:
        return None
    scope.check_keys({"admissionMode"})
    return scope.string("admissionMode", required=True, choices=_ADMISSION_MODES)


def _local_queue(doc: YamlDoc, state: _State) -> None:
    meta = _metadata(doc)
    name = meta.string("name", required=True)
    namespace = meta.string("namespace") or "default"
    owner = f"LocalQueue {namespace}/{name}"
    state.claim("LocalQueue", f"{namespace}/{name}", doc, owner)
    spec = _spec(doc)
    spec.check_keys({"clusterQueue", "stopPolicy", "fairSharing"})
    target = spec.string("clusterQueue", required=True)
    state.refs.append(_Ref(doc, spec.at("clusterQueue"), owner, "ClusterQueue", target))
    state.out.kueue.local_queues[(namespace, name)] = LocalQueue(
        namespace=namespace, name=name, cluster_queue=target,
        stop_policy=spec.string("stopPolicy", "None", choices=_STOP),
        fair_weight=_fair_weight(spec),
    )
    status = Fields.root(doc).mapping_or_empty("status").mapping_or_empty("fairSharing")
    afs = status.mapping("admissionFairSharingStatus")
    consumed = afs.mapping("consumedResources") if afs is not None else None
    if consumed is not None:
        state.out.afs_consumed[(namespace, name)] = {
            str(r): quantity(consumed, r, str(r)) or 0 for r in consumed.data}


def _priority_class(doc: YamlDoc, state: _State) -> None:
    name = _name(doc)
    state.claim("WorkloadPriorityClass", name, doc, f"WorkloadPriorityClass {name}")
    root = Fields.root(doc)
    state.out.kueue.priority_classes[name] = WorkloadPriorityClass(
        name=name,
        value=root.integer("value", required=True, minimum=-(2**31), maximum=_INT32_MAX),
        description=root.string("description", "") or "",
    )


_KUEUE_PARSERS = {
    "ResourceFlavor": _resource_flavor,
    "Topology": _topology,
    "Cohort": _cohort,
    "ClusterQueue": _cluster_queue,
    "LocalQueue": _local_queue,
    "WorkloadPriorityClass": _priority_class,
}


# -- the Kueue Configuration ----------------------------------------------------


def _kueue_configmap(doc: YamlDoc, state: _State) -> None:
    """The ConfigMap the Kueue manager reads its Configuration from."""
    data = Fields.root(doc).mapping_or_empty("data")
    text = data.string(KUEUE_CONFIGMAP_KEY)
    if text is None:
        raise data.error(KUEUE_CONFIGMAP_KEY, f"the {KUEUE_CONFIGMAP} ConfigMap holds the Kueue Configuration "
                                              f"under this key, which is missing")
    where = data.at(KUEUE_CONFIGMAP_KEY)
    body = parse_embedded_yaml(text, doc.source, doc.index, where)
    if not isinstance(body, dict):
        raise doc.error(f"expected the Kueue Configuration (a mapping), got {type_name(body)}", where)
    inner = YamlDoc(doc.source, doc.index, doc.line, body, where)
    group, version = api_group(str(body.get("apiVersion", "")))
    if group != CONFIG_GROUP or body.get("kind") != "Configuration":
        raise inner.error(f"expected apiVersion {CONFIG_GROUP}/v1beta1 or v1beta2 and kind Configuration, "
                          f"got {body.get('apiVersion')!r} / {body.get('kind')!r}")
    _check_version(inner, _CONFIG_VERSIONS)
    _configuration(inner, body, state)
    for key in data.data:
        if key != KUEUE_CONFIGMAP_KEY:
            state.out.not_modelled.append((doc.where, f"ConfigMap {KUEUE_CONFIGMAP}: {data.at(key)}"))


def _configuration(doc: YamlDoc, body: dict, state: _State) -> None:
    """Keep the Configuration as written; type-check the parts admission depends on."""
    if state.config_doc is not None:
        raise doc.error(f"a second Kueue Configuration; the first is in {state.config_doc.where}")
    state.config_doc = doc
    state.note_source(doc)
    root = Fields(doc, body, "")
    gates = root.mapping("featureGates")
    feature_gates: dict[str, bool] = {}
    if gates is not None:
        for key in gates.data:
            if not isinstance(key, str):
                raise gates.error(None, f"feature gate names are strings, got {type_name(key)}")
            feature_gates[key] = gates.boolean(key)
    _check_wait_for_pods_ready(root, api_group(str(body.get("apiVersion", "")))[1])
    _check_fair_sharing_config(root)
    _check_admission_fair_sharing(root)
    state.out.kueue.configuration = body
    state.out.kueue.feature_gates = feature_gates


def _check_wait_for_pods_ready(root: Fields, version: str) -> None:
    wfpr = root.mapping("waitForPodsReady")
    if wfpr is None:
        return
    keys = {"timeout", "recoveryTimeout", "blockAdmission", "requeuingStrategy"}
    if version == "v1beta1":
        keys.add("enable")
    wfpr.check_keys(keys)
    wfpr.boolean("enable")
    wfpr.boolean("blockAdmission")
    for key in ("timeout", "recoveryTimeout"):
        value = wfpr.string(key)
        if value is not None:
            go_duration_seconds(value, wfpr, key)
    if version == "v1beta2" and wfpr.data.get("timeout") is None:
        raise wfpr.error("timeout", "required in config.kueue.x-k8s.io/v1beta2 when waitForPodsReady is set")
    req = wfpr.mapping("requeuingStrategy")
    if req is not None:
        req.check_keys({"timestamp", "backoffLimitCount", "backoffBaseSeconds", "backoffMaxSeconds"})
        req.string("timestamp", choices=("Eviction", "Creation"))
        for key in ("backoffLimitCount", "backoffBaseSeconds", "backoffMaxSeconds"):
            req.integer(key, minimum=0)


def _check_fair_sharing_config(root: Fields) -> None:
    fair = root.mapping("fairSharing")
    if fair is None:
        return
    strategies = fair.string_list("preemptionStrategies")
    allowed = ("LessThanOrEqualToFinalShare", "LessThanInitialShare")
    for i, value in enumerate(strategies):
        if value not in allowed:
            raise fair.doc.error(f"expected one of {', '.join(allowed)}, got {value!r}",
                                 f"{fair.at('preemptionStrategies')}[{i}]")
    if strategies and tuple(strategies) not in STRATEGY_SETS:
        # Kueue's config validation: field.NotSupported with the accepted lists.
        supported = ", ".join(f'"{",".join(s)}"' for s in STRATEGY_SETS)
        raise fair.error("preemptionStrategies", f"Unsupported value: {strategies!r}: supported values: {supported}")


def _check_admission_fair_sharing(root: Fields) -> None:
    """``admissionFairSharing`` (§6.5): usageHalfLifeTime is required, durations are Go
    durations, resourceWeights maps resource names to non-negative numbers."""
    afs = root.mapping("admissionFairSharing")
    if afs is None:
        return
    afs.check_keys({"usageHalfLifeTime", "usageSamplingInterval", "resourceWeights"})
    half = afs.string("usageHalfLifeTime", required=True)
    go_duration_seconds(half, afs, "usageHalfLifeTime")
    interval = afs.string("usageSamplingInterval")
    if interval is not None and go_duration_seconds(interval, afs, "usageSamplingInterval") <= 0:
        raise afs.error("usageSamplingInterval", f"must be greater than 0, got {interval!r}")
    weights = afs.mapping("resourceWeights")
    if weights is not None:
        for key, value in weights.data.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise weights.error(key, f"a weight is a number >= 0, got {value!r}")


def go_duration_seconds(text: str, f: Fields, key: str) -> float:
    """A Go duration (``10m``, ``1h30m``, ``90s``, ``0s``) to seconds, as Kueue's config uses."""
    units = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1, "m": 60, "h": 3600}
    if text == "0":
        return 0.0
    parts = re.findall(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)", text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise f.error(key, f"expected a duration such as '10m', '1h30m' or '90s', got {text!r}")
    return sum(float(n) * units[u] for n, u in parts)


# -- Nodes ----------------------------------------------------------------------


def _node(doc: YamlDoc, state: _State) -> Node:
    """A Node: allocatable wins over capacity; GPUs become devices; the rest goes to ``extra``."""
    meta = _metadata(doc)
    name = meta.string("name", required=True)
    state.claim("Node", name, doc, f"Node {name}")
    labels = meta.string_map("labels")
    spec = _spec(doc)
    status = Fields.root(doc).mapping_or_empty("status")
    resources = _node_resources(status)
    for key in ("cpu", "memory"):
        if key not in resources:
            raise status.error("allocatable", f"Node {name} has no {key} in status.allocatable or status.capacity")
    gpus = resources.pop(GPU_RESOURCE, 0)
    gpu_type = labels.get(GPU_PRODUCT_LABEL)
    cpu_m = resources.pop("cpu")
    return Node(
        name=name,
        cpus=cpu_m // 1000,
        memory_mib=resources.pop("memory"),
        gpus=tuple(Gpu(index=i, type=gpu_type) for i in range(gpus)),
        state=_node_state(spec, status),
        labels=labels,
        taints=tuple(_taint(t) for t in spec.items("taints")),
        extra=resources,
        source=doc.where,
    )


def _node_resources(status: Fields) -> dict[str, int]:
    """Per resource: allocatable when given, else capacity; rounded down (what pods can get)."""
    out: dict[str, int] = {}
    for key in ("capacity", "allocatable"):
        section = status.mapping(key)
        if section is None:
            continue
        for resource in section.data:
            out[resource] = _capacity_quantity(section, resource)
    return out


def _capacity_quantity(f: Fields, resource: str) -> int:
    value = f.data[resource]
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise f.error(resource, f"expected a Kubernetes quantity such as '500m', '4', '2048Gi' or '1e3', "
                                f"got {type_name(value)}")
    try:
        exact = parse_kube_quantity(value)
    except QuantityError as exc:
        raise f.error(resource, str(exc)) from exc
    if resource == "cpu":
        exact *= 1000
    elif resource in ("memory", "ephemeral-storage") or resource.startswith("hugepages-"):
        exact /= 2**20
    elif exact.denominator != 1:
        raise f.error(resource, f"expected a whole number of devices, got {value!r}")
    return math.floor(exact)


def _node_state(spec: Fields, status: Fields) -> str:
    """Slurm-like state words: DRAIN when cordoned, IDLE/DOWN from the Ready condition."""
    if spec.boolean("unschedulable", False):
        return "DRAIN"
    for cond in status.items("conditions"):
        if cond.data.get("type") == "Ready":
            return "IDLE" if cond.data.get("status") == "True" else "DOWN"
    return "UNKNOWN"


# -- references -----------------------------------------------------------------


def _check_references(state: _State) -> None:
    kueue = state.out.kueue
    tables = {
        "ResourceFlavor": kueue.flavors,
        "Topology": kueue.topologies,
        "ClusterQueue": kueue.cluster_queues,
    }
    for ref in state.refs:
        if ref.kind == "Cohort":
            if ref.name not in kueue.cohorts:
                kueue.cohorts[ref.name] = Cohort(ref.name, implicit=True)
            continue
        if ref.name not in tables[ref.kind]:
            raise MissingReferenceError(
                ref.doc.source,
                f"{ref.owner} refers to {ref.kind} {ref.name!r}, which is not defined",
                document=ref.doc.index,
                field=_prefixed(ref.doc, ref.field),
            )
    for name in list(kueue.cohorts):
        parent = kueue.cohorts[name].parent
        if parent and parent not in kueue.cohorts:
            kueue.cohorts[parent] = Cohort(parent, implicit=True)
    _check_cohort_cycles(state)


def _prefixed(doc: YamlDoc, path: str) -> str:
    return f"{doc.prefix}.{path}" if doc.prefix else path


def _check_cohort_cycles(state: _State) -> None:
    """A parent chain that comes back to itself disables the whole tree in Kueue; refuse it."""
    cohorts = state.out.kueue.cohorts
    done: set[str] = set()
    for start in sorted(cohorts):
        path: list[str] = []
        current: str | None = start
        while current is not None and current not in done:
            if current in path:
                cycle = path[path.index(current):] + [current]
                doc, where = state.cohort_parent_fields[current]
                raise InputError(
                    doc.source,
                    f"Cohort {current} has parent {cohorts[current].parent!r}, and the parents lead back "
                    f"to it: {' -> '.join(cycle)}",
                    document=doc.index, field=_prefixed(doc, where),
                )
            path.append(current)
            current = cohorts[current].parent
        done.update(path)


# --------------------------------------------------------------------------- rendering


def _dump(docs: list[dict]) -> str:
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    if not docs:
        return ""
    return yaml.dump_all(docs, Dumper=dumper, sort_keys=False, default_flow_style=False,
                         explicit_start=True, allow_unicode=True)


def format_quantity(resource: str, value: int) -> str | int:
    """Canonical int -> the Kubernetes quantity a person would write."""
    if resource == "cpu":
        text = format_cpu(value)
        return int(text) if text.isdigit() else text
    if resource in ("memory", "ephemeral-storage") or resource.startswith("hugepages-"):
        return format_memory(value) if value else 0
    return value


def _number(value: float) -> int | float | str:
    """A weight as YAML: ints stay ints; other values as exact decimal quantity strings."""
    if float(value).is_integer():
        return int(value)
    return repr(float(value))


def render_kueue_objects(kueue: KueueConfig, api_version: str = "kueue.x-k8s.io/v1beta2") -> str:
    """All Kueue objects (and the Configuration, when present) as multi-document YAML.

    Implicit cohorts are not written: a ClusterQueue's cohort name recreates them.
    """
    group, version = api_group(api_version)
    if group != KUEUE_GROUP or version not in _KUEUE_VERSIONS:
        raise ValueError(f"api_version must be {KUEUE_GROUP}/v1beta1 or v1beta2, got {api_version!r}")
    docs: list[dict] = []
    docs += [_render_topology(t, api_version) for t in kueue.topologies.values()]
    docs += [_render_flavor(f, api_version) for f in kueue.flavors.values()]
    docs += [_render_cohort(c, version, api_version) for c in kueue.cohorts.values() if not c.implicit]
    docs += [_render_cluster_queue(cq, version, api_version) for cq in kueue.cluster_queues.values()]
    docs += [_render_local_queue(lq, api_version) for lq in kueue.local_queues.values()]
    docs += [_render_priority_class(pc, api_version) for pc in kueue.priority_classes.values()]
    if kueue.configuration or kueue.feature_gates:
        docs.append(_render_configuration(kueue))
    return _dump(docs)


def _object(api_version: str, kind: str, name: str, namespace: str | None = None) -> dict:
    meta: dict = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    return {"apiVersion": api_version, "kind": kind, "metadata": meta}


def _render_topology(t: Topology, api_version: str) -> dict:
    obj = _object(api_version, "Topology", t.name)
    obj["spec"] = {"levels": [{"nodeLabel": level} for level in t.levels]}
    return obj


def _render_flavor(f: ResourceFlavor, api_version: str) -> dict:
    obj = _object(api_version, "ResourceFlavor", f.name)
    spec: dict = {}
    if f.node_labels:
        spec["nodeLabels"] = dict(f.node_labels)
    if f.node_taints:
        spec["nodeTaints"] = [dict(t) for t in f.node_taints]
    if f.tolerations:
        spec["tolerations"] = [dict(t) for t in f.tolerations]
    if f.topology_name:
        spec["topologyName"] = f.topology_name
    obj["spec"] = spec
    return obj


def _render_groups(groups: list[ResourceGroup]) -> list[dict]:
    out = []
    for group in groups:
        flavors = []
        for fq in group.flavors:
            resources = []
            for resource, q in fq.resources.items():
                entry: dict = {"name": resource, "nominalQuota": format_quantity(resource, q.nominal)}
                if q.borrowing_limit is not None:
                    entry["borrowingLimit"] = format_quantity(resource, q.borrowing_limit)
                if q.lending_limit is not None:
                    entry["lendingLimit"] = format_quantity(resource, q.lending_limit)
                resources.append(entry)
            flavors.append({"name": fq.flavor, "resources": resources})
        out.append({"coveredResources": list(group.covered_resources), "flavors": flavors})
    return out


def _render_cohort(c: Cohort, version: str, api_version: str) -> dict:
    obj = _object(api_version, "Cohort", c.name)
    spec: dict = {}
    if c.parent:
        spec["parentName" if version == "v1beta2" else "parent"] = c.parent
    if c.resource_groups:
        spec["resourceGroups"] = _render_groups(c.resource_groups)
    if c.fair_weight != 1.0:
        spec["fairSharing"] = {"weight": _number(c.fair_weight)}
    obj["spec"] = spec
    return obj


def _render_cluster_queue(cq: ClusterQueue, version: str, api_version: str) -> dict:
    obj = _object(api_version, "ClusterQueue", cq.name)
    spec: dict = {}
    if cq.cohort:
        spec["cohortName" if version == "v1beta2" else "cohort"] = cq.cohort
    if cq.resource_groups:
        spec["resourceGroups"] = _render_groups(cq.resource_groups)
    spec["queueingStrategy"] = cq.queueing_strategy
    if cq.namespace_selector is not None:
        spec["namespaceSelector"] = cq.namespace_selector
    p = cq.preemption
    preemption: dict = {"reclaimWithinCohort": p.reclaim_within_cohort}
    borrow: dict = {"policy": p.borrow_within_cohort_policy}
    if p.borrow_within_cohort_max_priority_threshold is not None:
        borrow["maxPriorityThreshold"] = p.borrow_within_cohort_max_priority_threshold
    preemption["borrowWithinCohort"] = borrow
    preemption["withinClusterQueue"] = p.within_cluster_queue
    spec["preemption"] = preemption
    fungibility = {"whenCanBorrow": cq.flavor_fungibility_when_can_borrow,
                   "whenCanPreempt": cq.flavor_fungibility_when_can_preempt}
    if cq.flavor_fungibility_preference != "BorrowingOverPreemption":
        fungibility["preference"] = cq.flavor_fungibility_preference
    spec["flavorFungibility"] = fungibility
    if cq.fair_weight != 1.0:
        spec["fairSharing"] = {"weight": _number(cq.fair_weight)}
    if cq.stop_policy != "None":
        spec["stopPolicy"] = cq.stop_policy
    if cq.admission_checks:
        if version == "v1beta1":
            spec["admissionChecks"] = list(cq.admission_checks)
        else:
            spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": n} for n in cq.admission_checks]}
    if cq.admission_mode is not None:
        spec["admissionScope"] = {"admissionMode": cq.admission_mode}
    obj["spec"] = spec
    return obj


def _render_local_queue(lq: LocalQueue, api_version: str) -> dict:
    obj = _object(api_version, "LocalQueue", lq.name, lq.namespace)
    spec: dict = {"clusterQueue": lq.cluster_queue}
    if lq.stop_policy != "None":
        spec["stopPolicy"] = lq.stop_policy
    if lq.fair_weight != 1.0:
        spec["fairSharing"] = {"weight": _number(lq.fair_weight)}
    obj["spec"] = spec
    return obj


def _render_priority_class(pc: WorkloadPriorityClass, api_version: str) -> dict:
    obj = _object(api_version, "WorkloadPriorityClass", pc.name)
    obj["value"] = pc.value
    if pc.description:
        obj["description"] = pc.description
    return obj


def _render_configuration(kueue: KueueConfig) -> dict:
    body = dict(kueue.configuration) or {"apiVersion": f"{CONFIG_GROUP}/v1beta2", "kind": "Configuration"}
    if kueue.feature_gates:
        body["featureGates"] = dict(kueue.feature_gates)
    else:
        body.pop("featureGates", None)
    return body


_STATE_READY = {"IDLE": "True", "DOWN": "False"}


def render_nodes(nodes: Iterable[Node]) -> str:
    """Nodes as ``v1`` Node objects (labels, taints, allocatable, Ready condition).

    Only what a Kubernetes Node can say is written: Slurm-only fields (sockets, weight,
    features) are not. A node whose GPUs are of several types cannot be written, because
    a Node carries one ``nvidia.com/gpu.product`` label.
    """
    return _dump([_render_node(n) for n in nodes])


def _render_node(node: Node) -> dict:
    labels = dict(node.labels)
    types = {g.type for g in node.gpus}
    if len(types) > 1:
        raise ValueError(f"Node {node.name}: GPUs of several types ({sorted(map(str, types))}) cannot be "
                         f"written as one nvidia.com/gpu resource")
    gpu_type = types.pop() if types else None
    if gpu_type is not None:
        labels[GPU_PRODUCT_LABEL] = gpu_type
    obj = _object("v1", "Node", node.name)
    if labels:
        obj["metadata"]["labels"] = labels
    spec: dict = {}
    if node.taints:
        spec["taints"] = [dict(t) for t in node.taints]
    if node.state == "DRAIN":
        spec["unschedulable"] = True
    if spec:
        obj["spec"] = spec
    allocatable: dict = {"cpu": format_quantity("cpu", node.cpus * 1000),
                         "memory": format_quantity("memory", node.memory_mib)}
    if node.gpus:
        allocatable[GPU_RESOURCE] = len(node.gpus)
    for resource, value in node.extra.items():
        allocatable[resource] = format_quantity(resource, value)
    status: dict = {"allocatable": allocatable}
    ready = _STATE_READY.get(node.state)
    if ready is not None:
        status["conditions"] = [{"type": "Ready", "status": ready}]
    obj["status"] = status
    return obj

