"""Reading ``kubectl get … -o yaml`` dumps into the Kueue state one scheduling cycle works on.

A dump holds Kueue's own objects (ResourceFlavor, Topology, Cohort, ClusterQueue, LocalQueue,
WorkloadPriorityClass), Workload objects with their status, and optionally Nodes and the Kueue
Configuration, in one or several files. The objects go through ``formats.kueue_objects``; each
Workload's spec goes through ``formats.kube_workloads`` (requests, priority, LocalQueue), and its
status (``status.admission``, ``status.conditions``) is read here: admitted workloads hold
quota in the ``KueueState``, the others wait in their ClusterQueue's queue.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from gpupool.errors import InputError
from gpupool.formats.kube_workloads import QUEUE_LABEL, workloads_from_documents
from gpupool.formats.kube_yaml import Fields, YamlDoc, load_yaml_documents
from gpupool.formats.kueue_objects import api_group, parse_pool_objects, quantity
from gpupool.model.kueue import KueueConfig
from gpupool.policy.kueue.afs import AfsConfig, LocalQueueUsage, base_units
from gpupool.policy.kueue.policy import topology_request
from gpupool.policy.kueue.records import Admitted, KPodSet, KWorkload, PodSetAssignment
from gpupool.policy.kueue.state import KueueState
from gpupool.policy.kueue.tas_capacity import from_pool_nodes, tas_flavor_names

KUEUE_GROUP = "kueue.x-k8s.io"
JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"


@dataclass(slots=True)
class WorkloadInfo:
    """What explain shows about a Workload besides Kueue's view of it."""

    key: str  # namespace/name
    namespace: str
    name: str
    local_queue: str
    cluster_queue: str
    priority: int
    created: str  # metadata.creationTimestamp as written
    uid: str
    job_uid: str
    where: str  # file (document N, items[i])
    gpus: int = 0
    pods: int = 0
    pods_ready: bool = True  # only meaningful for admitted workloads


@dataclass
class DumpState:
    """The Kueue state of a cluster as a dump describes it."""

    kueue: KueueConfig
    state: KueueState
    pending: list[KWorkload]
    #: Workloads Kueue does not hand to the scheduler at all: key -> (cluster queue, message).
    blocked: dict[str, tuple[str, str]]
    info: dict[str, WorkloadInfo]
    nodes: int = 0
    notes: list[str] = field(default_factory=list)
    #: Admitted pod sets with a topologyAssignment and the levels it names (completed to full
    #: leaf domains from the Nodes' labels by ``_topology_capacity``).
    tas_levels: list = field(default_factory=list)
    #: Admission Fair Sharing (§6.5): the LocalQueues' usage as their status reports it, and the
    #: ClusterQueues that order by it; None when the Configuration does not enable it.
    afs: LocalQueueUsage | None = None
    afs_cqs: list[str] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)


def rfc3339_seconds(text: str | None) -> float | None:
    """``2026-11-30T08:00:00Z`` -> seconds since the epoch (None when absent or unreadable)."""
    if not text:
        return None
    try:
        return datetime.fromisoformat(str(text)).timestamp()
    except ValueError:
        return None


def load_dump(paths: list[Path | str], config: Path | str | None = None) -> DumpState:
    """Read the dump files (and an optional Kueue Configuration file) into a ``DumpState``."""
    if not paths:
        raise InputError("--state", "give at least one dump file (kubectl get … -A -o yaml)")
    docs: list[YamlDoc] = []
    sources: list[str] = []
    for path in list(paths) + ([config] if config is not None else []):
        path = Path(path)
        if not path.exists():
            raise InputError(str(path), "no such file")
        try:
            file_docs = load_yaml_documents(path)
        except InputError as exc:
            if exc.message.startswith("expected a Kubernetes object"):
                exc.message += ("; explain reads `kubectl get … -A -o yaml` output (plain `kubectl get` "
                                "prints a table, which is not YAML objects)")
                exc.args = (str(exc),)
            raise
        if not file_docs:
            raise InputError(str(path), "no Kubernetes objects in this file (expected the output of "
                                        "kubectl get … -o yaml)")
        docs.extend(file_docs)
        sources.append(str(path))
    if config is not None:
        cfg_docs = [d for d in docs if d.source == str(Path(config))]
        if not any(d.kind in ("Configuration", "ConfigMap") for d in cfg_docs):
            raise InputError(str(config), "expected the Kueue Configuration (kind: Configuration, "
                                          "apiVersion config.kueue.x-k8s.io/v1beta2) or the kueue-manager-config ConfigMap")
    objects = parse_pool_objects(docs)
    kueue = objects.kueue
    notes = [f"{where}: {what} (read, not modelled)" for where, what in objects.not_modelled]
    if not kueue.cluster_queues:
        raise InputError(", ".join(sources), "no ClusterQueue in the dump; include clusterqueues (and "
                                             "resourceflavors, cohorts, localqueues) in the kubectl get")
    state = KueueState(kueue)
    out = DumpState(kueue, state, [], {}, {}, nodes=len(objects.nodes), notes=notes, sources=sources)
    _admission_fair_sharing(out, objects.afs_consumed)
    for doc in objects.workload_docs:
        group, _ = api_group(doc.api_version)
        if group != KUEUE_GROUP or doc.kind != "Workload":
            out.notes.append(f"{doc.where}: {doc.kind} ignored; explain reads the Workload Kueue made for it")
            continue
        _read_workload(doc, out)
    _topology_capacity(out, objects.nodes)
    return out


def _admission_fair_sharing(out: DumpState, consumed: dict) -> None:
    """AFS from the Configuration's ``admissionFairSharing`` (gate on) and the ClusterQueues'
    ``admissionScope``; each LocalQueue starts from the consumed usage its status reports."""
    cfg = AfsConfig.from_configuration(out.kueue.configuration) if out.state.gate("AdmissionFairSharing") else None
    cqs = sorted(name for name, cq in out.kueue.cluster_queues.items()
                 if cq.admission_mode == "UsageBasedAdmissionFairSharing")
    if cfg is None:
        if cqs:
            out.notes.append(f"ClusterQueue(s) {', '.join(cqs)} ask for UsageBasedAdmissionFairSharing but the "
                             "Kueue Configuration has no admissionFairSharing section (give --config): "
                             "ordered by priority")
        return
    out.afs = LocalQueueUsage(cfg)
    out.afs_cqs = cqs
    for lq, used in consumed.items():
        out.afs.consumed[lq] = base_units(used)
    lqs = out.kueue.local_queues

    def usage(kwl: KWorkload) -> float:
        lq = lqs.get(kwl.lq) if kwl.lq is not None else None
        return out.afs.value(kwl.lq, lq.fair_weight) if lq is not None else 0.0

    out.state.afs = {cq: usage for cq in cqs} if cqs else None


def _topology_capacity(out: DumpState, nodes) -> None:
    """TAS capacity (§8) from the dumped Nodes, minus what admitted workloads' topology
    assignments hold. Without Nodes in the dump TAS cannot be judged: it is left out, and said."""
    state = out.state
    if not state.gate("TopologyAwareScheduling") or not tas_flavor_names(out.kueue):
        return
    if not nodes:
        for psa, _, _ in out.tas_levels:
            psa.topology = None  # partial domains cannot be completed without the Nodes
        out.notes.append("TAS flavors but no Nodes in the dump: topology placement is not evaluated "
                         "(add nodes to the kubectl get)")
        return
    state.tas = from_pool_nodes(out.kueue, nodes)
    for psa, levels, wl_name in out.tas_levels:
        tf = state.tas.get(psa.tas_flavor)
        depth = len(levels)
        full: dict[tuple, tuple] = {}
        for n in (tf.nodes if tf is not None else ()):
            full.setdefault(n.leaf[-depth:], n.leaf)
        counts: dict[tuple, int] = {}
        for values, c in psa.topology.items():
            leaf = full.get(values)
            if leaf is None:
                out.notes.append(f"Workload {wl_name}: topology domain {'/'.join(values)} matches no Ready "
                                 f"Node of flavor {psa.tas_flavor}; its {c} pod(s) are not held")
                continue
            counts[leaf] = counts.get(leaf, 0) + c
        psa.topology = counts or None
    for adm in state.admitted.values():
        state.tas.hold(adm.tas_uses())
        missing = [psa.name for psa in adm.pod_sets if psa.topology is None
                   and any(state.tas.get(f) is not None for f in psa.flavors.values())]
        if missing:
            out.notes.append(f"Workload {adm.wl.key} is admitted to TAS flavor(s) without a topologyAssignment "
                             f"for pod set(s) {', '.join(missing)}: its pods' place is unknown, their "
                             "capacity is not held")
    out.notes.append("TAS capacity counts the Nodes' allocatable minus admitted workloads' topology "
                     "assignments; pods Kueue does not manage are not in the dump")


#: A Workload has at most this many pod sets (kueue.md §1.6, v1beta2).
MAX_POD_SETS = 18


def _read_workload(doc: YamlDoc, out: DumpState) -> None:
    kueue = out.kueue
    root = Fields.root(doc)
    meta = root.mapping("metadata", required=True)
    name = meta.string("name", required=True)
    namespace = meta.string("namespace") or "default"
    key = f"{namespace}/{name}"
    owner = f"Workload {key}"
    spec = root.mapping("spec", required=True)
    labels = meta.string_map("labels")
    n_sets = len(spec.items("podSets"))
    if n_sets > MAX_POD_SETS:  # the Workload CRD's maxItems (v1beta2)
        raise spec.error("podSets", f"{owner}: Too many: {n_sets}: must have at most {MAX_POD_SETS} items")
    if not spec.string("queueName") and not labels.get(QUEUE_LABEL):
        raise spec.error("queueName", f"{owner} has no spec.queueName; Kueue only schedules workloads "
                                      f"submitted to a LocalQueue")
    status = root.mapping_or_empty("status")
    conditions = {}
    for c in status.items("conditions"):
        ctype = c.string("type")
        if ctype:
            conditions[ctype] = c
    if _true(conditions.get("Finished")):
        out.notes.append(f"{doc.where}: {owner} is Finished; it holds no quota")
        return
    notes: list[tuple[str, str]] = []
    found = workloads_from_documents([doc], kueue, notes)
    out.notes.extend(f"{w}: {what} (read, not modelled)" for w, what in notes)
    if not found:  # deactivated (spec.active: false)
        return
    wl = found[0]
    lq = kueue.local_queues[(namespace, wl.queue_name)]
    cq_name = lq.cluster_queue
    prio = wl.priority
    if prio is None and wl.priority_class in kueue.priority_classes:
        prio = kueue.priority_classes[wl.priority_class].value
    prio = int(prio or 0)
    created_text = meta.string("creationTimestamp") or ""
    created = rfc3339_seconds(created_text)
    if created is None:
        if created_text:
            raise meta.error("creationTimestamp", f"expected an RFC 3339 time, got {created_text!r}")
        created = 0.0
    uid = meta.string("uid") or key
    pod_sets = [KPodSet(ps.name, ps.count, {r: v for r, v in ps.requests().items() if v}, ps.min_count,
                        dict(ps.node_selector), tuple(dict(t) for t in ps.tolerations), topology_request(ps),
                        ps.gpu_type)
                for ps in wl.pod_sets]
    kwl = KWorkload(key, key, cq_name, prio, created, (uid,), pod_sets, (namespace, lq.name))
    info = WorkloadInfo(key, namespace, name, lq.name, cq_name, prio, created_text, uid,
                        labels.get(JOB_UID_LABEL, ""), doc.where,
                        gpus=sum(ps.count * ps.requests.get("nvidia.com/gpu", 0) for ps in pod_sets),
                        pods=sum(ps.count for ps in pod_sets))
    if key in out.info:
        raise meta.error("name", f"{owner} appears twice; the first is in {out.info[key].where}")
    out.info[key] = info
    admission = status.mapping("admission")
    reserved = conditions.get("QuotaReserved")
    holds_quota = admission is not None and (reserved is None or _true(reserved))
    if holds_quota:
        out.state.admit(_admitted(kwl, admission, reserved, doc, out))
        info.pods_ready = _true(conditions.get("PodsReady"))
        if _true(conditions.get("Evicted")):
            out.notes.append(f"{doc.where}: {owner} is being evicted but still holds its quota")
        return
    cq = kueue.cluster_queues.get(cq_name)
    if cq is not None and cq.namespace_selector is None:
        out.blocked[key] = (cq_name, "Workload namespace doesn't match ClusterQueue selector")
    elif cq is not None and cq.stop_policy != "None":
        out.blocked[key] = (cq_name, f"ClusterQueue {cq_name} is inactive")
    elif lq.stop_policy != "None":
        out.blocked[key] = (cq_name, f"LocalQueue {namespace}/{lq.name} is stopped ({lq.stop_policy})")
    else:
        out.pending.append(kwl)


def _topology_assignment(psa: Fields, target: PodSetAssignment, wl_name: str, out: DumpState) -> None:
    """``podSetAssignments[].topologyAssignment`` (``levels`` + ``domains[].values/count``): the
    pods per leaf domain the workload holds in its TAS flavor."""
    ta = psa.mapping("topologyAssignment")
    if ta is None:
        return
    levels = [str(v) for v in (ta.data.get("levels") or [])]
    names = set(target.flavors.values())
    fname = next(iter(names)) if len(names) == 1 else None
    flavor = out.kueue.flavors.get(fname) if fname else None
    topo = out.kueue.topologies.get(flavor.topology_name) if flavor is not None and flavor.topology_name else None
    if topo is None:
        out.notes.append(f"{psa.path}: Workload {wl_name} has a topologyAssignment but its flavor "
                         f"{fname} has no Topology in the dump; ignored")
        return
    if "domains" not in ta.data:
        out.notes.append(f"{psa.path}.topologyAssignment: only the levels/domains form is read "
                         "(read, not modelled)")
        return
    if not levels or tuple(levels) != tuple(topo.levels)[-len(levels):]:
        raise ta.error("levels", f"Workload {wl_name}: topologyAssignment levels {levels} are not the last "
                                 f"levels of Topology {topo.name} ({', '.join(topo.levels)})")
    counts: dict[tuple, int] = {}
    for d in ta.items("domains"):
        values = tuple(str(v) for v in (d.data.get("values") or []))
        if len(values) != len(levels):
            raise d.error("values", f"Workload {wl_name}: {len(values)} values for {len(levels)} levels")
        counts[values] = counts.get(values, 0) + d.integer("count", 0, minimum=0)
    if counts:
        # Kueue lists only the lowest level(s) when they identify a node (kubernetes.io/hostname);
        # the full domain is completed from the Nodes' labels once they are read.
        target.topology = counts
        target.tas_flavor = fname
        out.tas_levels.append((target, tuple(levels), wl_name))


def _true(cond: Fields | None) -> bool:
    return cond is not None and cond.string("status") == "True"


def _admitted(kwl: KWorkload, admission: Fields, reserved: Fields | None, doc: YamlDoc, out: DumpState) -> Admitted:
    """The quota an admitted Workload holds, from status.admission."""
    cq_name = admission.string("clusterQueue", required=True)
    if cq_name not in out.kueue.cluster_queues:
        raise admission.error("clusterQueue", f"Workload {kwl.name} is admitted to ClusterQueue {cq_name!r}, "
                                              f"which is not in the dump")
    if cq_name != kwl.cq:
        out.notes.append(f"{doc.where}: Workload {kwl.name} is admitted to {cq_name} but its LocalQueue "
                         f"now points to {kwl.cq}; it holds quota in {cq_name}")
        kwl.cq = cq_name
        out.info[kwl.key].cluster_queue = cq_name
    by_name = {ps.name: ps for ps in kwl.pod_sets}
    usage: dict = {}
    assignments = []
    flavors_known = out.kueue.flavors
    for psa in admission.items("podSetAssignments", required=True):
        ps_name = psa.string("name", "main")
        ps = by_name.get(ps_name)
        if ps is None:
            raise psa.error("name", f"Workload {kwl.name} has no pod set {ps_name!r} "
                                    f"(pod sets: {', '.join(by_name)})")
        count = psa.integer("count", ps.count, minimum=0)
        flavors = psa.string_map("flavors")
        for res, fl in flavors.items():
            if fl not in flavors_known:
                raise psa.error("flavors", f"Workload {kwl.name} pod set {ps_name} uses ResourceFlavor "
                                           f"{fl!r}, which is not in the dump")
        res_usage = psa.mapping("resourceUsage")
        per: dict[str, int] = {}
        for res, per_pod in ps.requests.items():
            if res_usage is not None and res in res_usage.data:
                per[res] = quantity(res_usage, res, res)
            else:
                per[res] = per_pod * count
        for res, v in per.items():
            fl = flavors.get(res)
            if fl is None:
                if v:
                    raise psa.error("flavors", f"Workload {kwl.name} pod set {ps_name} requests {res} "
                                               f"but its admission names no flavor for it")
                continue
            usage[(fl, res)] = usage.get((fl, res), 0) + v
        psa_out = PodSetAssignment(ps_name, count, {r: f for r, f in flavors.items() if r in per}, per)
        _topology_assignment(psa, psa_out, kwl.name, out)
        assignments.append(psa_out)
    reserved_at = rfc3339_seconds(reserved.string("lastTransitionTime")) if reserved is not None else None
    return Admitted(kwl, cq_name, usage, reserved_at if reserved_at is not None else 0.0, assignments)
