"""Kubernetes workload objects (Job, Pod, Deployment, JobSet, LeaderWorkerSet, Workload) into
``gpupool.model.Workload`` records, as Kueue would see them.

Each object becomes the Workload(s) Kueue would create for it: a Job is one workload with one
pod set; a Deployment is one single-pod workload per replica; a JobSet is one workload with a
pod set per replicated job; a LeaderWorkerSet is one workload per group. Per-pod requests are
Kubernetes' effective requests. Manifests say nothing about how long a job runs, so gpupool
reads its own ``gpupool.io/*`` annotations for that; without them runtime stays 0 and an
arrivals file supplies it. Ids are 0: the caller numbers workloads.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from gpupool.errors import MissingReferenceError
from gpupool.formats.kube_yaml import Fields, YamlDoc, field_path
from gpupool.formats.kueue_objects import NOT_MODELLED_KINDS, WORKLOAD_KINDS, api_group, quantity
from gpupool.formats.slurm_time import SlurmTimeError, parse_duration
from gpupool.model.kueue import KueueConfig
from gpupool.model.pool import GPU_PRODUCT_LABEL
from gpupool.model.workload import GANG_ALL, GANG_MIN, GANG_NONE, KIND_BATCH, KIND_SERVICE, OUTCOMES, PodSet, Workload

__all__ = ["workloads_from_documents", "parse_runtime", "ANNOTATIONS"]

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
MIN_PARALLELISM = "kueue.x-k8s.io/job-min-parallelism"
POD_GROUP_LABEL = "kueue.x-k8s.io/pod-group-name"
POD_GROUP_TOTAL = "kueue.x-k8s.io/pod-group-total-count"
TOPOLOGY_REQUIRED = "kueue.x-k8s.io/podset-required-topology"
TOPOLOGY_PREFERRED = "kueue.x-k8s.io/podset-preferred-topology"
TOPOLOGY_UNCONSTRAINED = "kueue.x-k8s.io/podset-unconstrained-topology"
TOPOLOGY_SLICE = "kueue.x-k8s.io/podset-slice-required-topology"
TOPOLOGY_SLICE_SIZE = "kueue.x-k8s.io/podset-slice-size"
TOPOLOGY_GROUP = "kueue.x-k8s.io/podset-group-name"
#: The multi-layer slice variant (alpha gate ``TASMultiLayerTopology``, off by default).
TOPOLOGY_NOT_MODELLED = ("kueue.x-k8s.io/podset-slice-required-topology-constraints",)
GPU_RESOURCE = "nvidia.com/gpu"

#: slurm-bridge's annotation prefix for per-workload Slurm settings (fleet_and_bridge.md §2.1).
SLURM_BRIDGE_PREFIX = "slurmjob.slinky.slurm.net/"

#: gpupool's own annotations on workload objects (documented in docs/formats/kubernetes.md).
ANNOTATIONS = {
    "gpupool.io/runtime": "how long the workload runs once started",
    "gpupool.io/submit-time": "seconds from the start of the run when it is submitted",
    "gpupool.io/outcome": "how it ends after its runtime: COMPLETED, FAILED or CANCELLED",
    "gpupool.io/checkpoint-interval": "how often it checkpoints (work lost on preemption is at most this)",
}

#: Pod spec fields that change where a pod may run but that gpupool does not model.
_POD_SPEC_NOT_MODELLED = ("affinity", "topologySpreadConstraints", "resourceClaims", "nodeName",
                          "schedulingGates")


@dataclass
class _Shape:
    """What one pod template asks for, before it becomes a PodSet with a name and count."""

    requests: dict[str, int]
    node_selector: dict[str, str]
    tolerations: tuple[tuple[tuple[str, str], ...], ...]
    topology_required: str | None = None
    topology_preferred: str | None = None
    topology_unconstrained: bool = False
    topology_slice_level: str | None = None
    topology_slice_size: int | None = None
    topology_group: str | None = None
    #: Where the slice size came from, for count checks: (doc, field path, owner).
    slice_source: tuple | None = None

    def pod_set(self, name: str, count: int, min_count: int | None = None, check: bool = True) -> PodSet:
        if check and self.topology_slice_size is not None and self.slice_source is not None and count:
            _check_slice_count(*self.slice_source, self.topology_slice_size, count)
        req = dict(self.requests)
        cpu = req.pop("cpu", 0)
        memory = req.pop("memory", 0)
        gpus = req.pop(GPU_RESOURCE, 0)
        return PodSet(
            name=name, count=count, cpu_m=cpu, memory_mib=memory, gpus=gpus,
            gpu_type=self.node_selector.get(GPU_PRODUCT_LABEL) if gpus else None,
            extra=tuple(sorted((k, v) for k, v in req.items() if v)),
            min_count=min_count,
            node_selector=tuple(sorted(self.node_selector.items())),
            tolerations=self.tolerations,
            topology_required=self.topology_required,
            topology_preferred=self.topology_preferred,
            topology_unconstrained=self.topology_unconstrained,
            topology_slice_level=self.topology_slice_level,
            topology_slice_size=self.topology_slice_size,
            topology_group=self.topology_group,
        )


def _check_slice_count(doc: YamlDoc, where: str, owner: str, size: int, count: int) -> None:
    """Kueue's webhook refuses a slice larger than the pod set; the KEP also requires slices to
    divide the pod set evenly (the placement counts ``count / size`` whole slices)."""
    if size > count:
        raise doc.error(f"{owner}: {TOPOLOGY_SLICE_SIZE} must not be greater than pod set count {count}, "
                        f"got {size}", where)
    if count % size:
        raise doc.error(f"{owner}: {TOPOLOGY_SLICE_SIZE} {size} must evenly divide the pod set count {count}",
                        where)


@dataclass
class _Context:
    kueue: KueueConfig | None
    notes: list[tuple[str, str]]
    docs: list[YamlDoc]
    owners: set[tuple[str, str, str]] = field(default_factory=set)  # (namespace, kind, name)
    levels: set[str] = field(default_factory=set)
    #: (document index, pod-set group name) -> the annotation paths naming that group.
    group_paths: dict[tuple[int, str], list[str]] = field(default_factory=dict)

    def note(self, doc: YamlDoc, what: str) -> None:
        self.notes.append((doc.where, what))


def workloads_from_documents(docs: list[YamlDoc], kueue: KueueConfig | None = None,
                             not_modelled: list[tuple[str, str]] | None = None) -> list[Workload]:
    """Workloads from workload documents, in document order.

    With ``kueue`` the queue names, priority classes and topology levels are checked
    against it. Fields gpupool reads but does not act on are appended to ``not_modelled``
    (when given) as ``(where, what)`` pairs.
    """
    ctx = _Context(kueue, not_modelled if not_modelled is not None else [], docs)
    if kueue is not None:
        ctx.levels = {level for t in kueue.topologies.values() for level in t.levels}
    for doc in docs:
        meta = doc.body.get("metadata") if isinstance(doc.body.get("metadata"), dict) else {}
        ns = meta.get("namespace") or "default"
        ctx.owners.add((ns, doc.kind, str(meta.get("name"))))
    out: list[Workload] = []
    groups: dict[tuple, list[YamlDoc]] = {}
    gang_objects = _gang_objects(docs, ctx)
    for doc in docs:
        group, version = api_group(doc.api_version)
        key = (group, doc.kind)
        if key not in WORKLOAD_KINDS:
            if group in NOT_MODELLED_KINDS.get(doc.kind, ()):  # a Namespace beside the Job, say
                ctx.note(doc, f"{doc.kind} {_display(doc)}")
                continue
            raise doc.error(f"{doc.kind} ({doc.api_version}) is not a workload kind gpupool reads "
                            f"(Job, Pod, Deployment, StatefulSet, JobSet, LeaderWorkerSet, Workload)", "kind")
        if version not in WORKLOAD_KINDS[key]:
            raise doc.error(f"unsupported apiVersion {doc.api_version} for {doc.kind}", "apiVersion")
        if group == "scheduling.k8s.io":
            continue  # gang descriptions; used by the pods that point at them
        if _owned_elsewhere(doc, ctx):
            continue
        if doc.kind == "Pod":
            group_key = _pod_group_key(doc)
            if group_key is not None:
                if group_key not in groups:
                    groups[group_key] = []
                    out.append(_Placeholder(group_key))  # type: ignore[arg-type]
                groups[group_key].append(doc)
                continue
        out.extend(_CONVERTERS[(group, doc.kind)](doc, ctx))
    result: list[Workload] = []
    for item in out:
        if isinstance(item, _Placeholder):
            result.append(_pod_group_workload(item.key, groups[item.key], gang_objects, ctx))
        else:
            result.append(item)
    return result


def _display(doc: YamlDoc) -> str:
    meta = doc.body.get("metadata") if isinstance(doc.body.get("metadata"), dict) else {}
    name = meta.get("name") or meta.get("generateName") or "(unnamed)"
    return f"{meta['namespace']}/{name}" if meta.get("namespace") else str(name)


@dataclass
class _Placeholder:
    """Keeps a pod group's place in document order until all its pods are seen."""

    key: tuple


# --------------------------------------------------------------------------- common parts


@dataclass
class _Common:
    name: str
    namespace: str
    labels: dict[str, str]
    annotations: dict[str, str]
    queue_name: str | None
    priority_class: str | None
    priority: int | None
    submit_time: float = 0.0
    runtime: float = 0.0
    outcome: str = "COMPLETED"
    checkpoint_interval: float | None = None
    group_paths: dict = field(default_factory=dict)

    def workload(self, doc: YamlDoc, pod_sets: tuple[PodSet, ...], *, name: str | None = None,
                 gang: str | None = None, kind: str = KIND_BATCH, time_limit: float | None = None) -> Workload:
        if gang is None:
            if any(ps.min_count is not None for ps in pod_sets):
                gang = GANG_MIN
            else:
                gang = GANG_ALL if sum(ps.count for ps in pod_sets) > 1 else GANG_NONE
        _check_groups(doc, pod_sets, self.group_paths, f"{doc.kind} {self.namespace}/{name or self.name}")
        return Workload(
            id=0, name=name or self.name, pod_sets=pod_sets, submit_time=self.submit_time,
            runtime=self.runtime, time_limit=time_limit, outcome=self.outcome, gang=gang,
            checkpoint_interval=self.checkpoint_interval, kind=kind, namespace=self.namespace,
            queue_name=self.queue_name, priority_class=self.priority_class, priority=self.priority,
            labels=dict(self.labels), source=doc.where,
        )


def _check_groups(doc: YamlDoc, pod_sets: tuple[PodSet, ...], paths: dict, owner: str) -> None:
    """Kueue's pod-set group rules: a group is exactly two pod sets, one of them with a single
    pod, both asking for the same required or preferred topology level."""
    groups: dict[str, list[PodSet]] = {}
    for ps in pod_sets:
        if ps.topology_group is not None:
            groups.setdefault(ps.topology_group, []).append(ps)
    for name, members in groups.items():
        where = (paths.get((doc.index, name)) or [None])[0]
        names = ", ".join(ps.name for ps in members)
        if len(members) != 2:
            raise doc.error(f"{owner}: pod-set group {name!r} ({names}): can only define groups of exactly 2 pod sets, "
                            f"got: {len(members)} pod set(s)", where)
        a, b = members
        if a.count != 1 and b.count != 1:
            raise doc.error(f"{owner}: pod-set group {name!r} ({names}): can only define groups where at least "
                            f"one pod set has only 1 replica, got: {a.count} replica(s) and {b.count} replica(s) "
                            f"in the group", where)
        if (a.topology_required, a.topology_preferred) != (b.topology_required, b.topology_preferred):
            raise doc.error(f"{owner}: pod-set group {name!r} ({names}): must specify {TOPOLOGY_REQUIRED!r} or "
                            f"{TOPOLOGY_PREFERRED!r} topology consistent with pod set {b.name!r} in group {name!r}",
                            where)


def _common(doc: YamlDoc, ctx: _Context) -> _Common:
    """Name, namespace, queue, priority and gpupool annotations of a workload object."""
    meta = Fields.root(doc).mapping("metadata", required=True)
    name = meta.string("name")
    if name is None:
        generate = meta.string("generateName")
        if generate is None:
            raise meta.error("name", "required field is missing (or set generateName)")
        name = f"{generate}{doc.index}"
    namespace = meta.string("namespace") or "default"
    labels = meta.string_map("labels")
    annotations = meta.string_map("annotations")
    # slurm-bridge reads its per-workload settings (partition, qos, account, time limit, ...)
    # from ``slurmjob.slinky.slurm.net/*`` annotations; the bridge policy finds them in labels.
    bridge = {k: v for k, v in annotations.items() if k.startswith(SLURM_BRIDGE_PREFIX)}
    if bridge:
        labels = {**labels, **bridge}
    queue = labels.get(QUEUE_LABEL) or annotations.get(QUEUE_LABEL)
    owner = f"{doc.kind} {namespace}/{name}"
    if queue and ctx.kueue is not None and (namespace, queue) not in ctx.kueue.local_queues:
        where = "labels" if QUEUE_LABEL in labels else "annotations"
        raise MissingReferenceError(
            doc.source, f"{owner} refers to LocalQueue {namespace}/{queue}, which is not defined",
            document=doc.index, field=_full(doc, field_path(f"metadata.{where}", QUEUE_LABEL)))
    priority_class = labels.get(PRIORITY_LABEL)
    priority = _priority(doc, ctx, owner, priority_class,
                         field_path("metadata.labels", PRIORITY_LABEL)) if priority_class else None
    common = _Common(name, namespace, labels, annotations, queue or None, priority_class, priority,
                     group_paths=ctx.group_paths)
    _read_gpupool_annotations(meta, annotations, common)
    return common


def _priority(doc: YamlDoc, ctx: _Context, owner: str, name: str, where: str) -> int | None:
    """The WorkloadPriorityClass value; a missing class blocks the workload in Kueue, so it is an error."""
    if ctx.kueue is None:
        return None
    pc = ctx.kueue.priority_classes.get(name)
    if pc is None:
        raise MissingReferenceError(
            doc.source, f"{owner} refers to WorkloadPriorityClass {name!r}, which is not defined",
            document=doc.index, field=_full(doc, where))
    return pc.value


def _full(doc: YamlDoc, path: str) -> str:
    return f"{doc.prefix}.{path}" if doc.prefix else path


_NUMBER_RE = re.compile(r"^\d+(?:\.\d+)?$")
_GO_DURATION_RE = re.compile(r"^(?:\d+(?:\.\d+)?(?:h|m|s|ms))+$")
_GO_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}


def parse_runtime(text: str) -> float:
    """Seconds from ``43200`` (plain seconds), ``12:00:00`` / ``1-00:00:00`` (Slurm) or ``12h`` (Go).

    A plain number is seconds here, not Slurm's minutes: these are gpupool's own
    annotations, and the documentation says so.
    """
    s = text.strip()
    if _NUMBER_RE.match(s):
        return float(s)
    if _GO_DURATION_RE.match(s):
        return sum(float(n) * _GO_UNITS[u] for n, u in re.findall(r"(\d+(?:\.\d+)?)(ms|h|m|s)", s))
    if ":" in s or "-" in s:
        try:
            value = parse_duration(s)
        except SlurmTimeError:
            value = None
        if value is not None:
            return float(value)
    raise ValueError(f"expected seconds ('43200'), a Slurm time ('12:00:00', '1-00:00:00') "
                     f"or a duration ('12h', '90m'), got {text!r}")


def _read_gpupool_annotations(meta: Fields, annotations: dict[str, str], common: _Common) -> None:
    for key, value in annotations.items():
        if not key.startswith("gpupool.io/"):
            continue
        where = field_path(meta.at("annotations"), key)
        if key not in ANNOTATIONS:
            raise meta.doc.error(f"unknown gpupool annotation {key!r} (known: {', '.join(ANNOTATIONS)})", where)
        try:
            if key == "gpupool.io/runtime":
                common.runtime = parse_runtime(value)
            elif key == "gpupool.io/checkpoint-interval":
                common.checkpoint_interval = parse_runtime(value)
            elif key == "gpupool.io/submit-time":
                if not _NUMBER_RE.match(value.strip()):
                    raise ValueError(f"expected seconds from the start of the run such as '3600', got {value!r}")
                common.submit_time = float(value)
            elif key == "gpupool.io/outcome":
                if value not in OUTCOMES:
                    raise ValueError(f"expected one of {', '.join(OUTCOMES)}, got {value!r}")
                common.outcome = value
        except ValueError as exc:
            raise meta.doc.error(str(exc), where) from exc


# --------------------------------------------------------------------------- pod templates


def _pod_shape(doc: YamlDoc, tmpl_meta: Fields | None, pod_spec: Fields, ctx: _Context, owner: str,
               default_slice_size: int | None = None) -> _Shape:
    """A pod template's effective requests, selectors, tolerations and topology request."""
    annotations = tmpl_meta.string_map("annotations") if tmpl_meta is not None else {}
    for key in _POD_SPEC_NOT_MODELLED:
        if pod_spec.data.get(key) is not None:
            ctx.note(doc, f"{owner}: {pod_spec.at(key)}")
    shape = _Shape(
        requests=_effective_requests(pod_spec, ctx, owner),
        node_selector=pod_spec.string_map("nodeSelector"),
        tolerations=tuple(_toleration_key(t) for t in pod_spec.items("tolerations")),
    )
    _topology(doc, tmpl_meta, annotations, shape, ctx, owner, default_slice_size)
    return shape


def _toleration_key(t: Fields) -> tuple[tuple[str, str], ...]:
    out = []
    for key, value in t.data.items():
        if value is None:
            continue
        if isinstance(value, (dict, list)) or isinstance(value, bool):
            raise t.error(key, f"expected a string or number, got {type(value).__name__}")
        out.append((str(key), str(value)))
    return tuple(sorted(out))


def _container_requests(c: Fields) -> dict[str, int]:
    """Requests of one container; a limit stands in for a missing request, as in Kubernetes."""
    res = c.mapping("resources")
    if res is None:
        return {}
    out: dict[str, int] = {}
    for section in ("limits", "requests"):  # requests read last, so they win
        values = res.mapping(section)
        if values is None:
            continue
        for resource in values.data:
            if not isinstance(resource, str):
                raise values.error(None, f"resource names are strings, got {resource!r}")
            out[resource] = quantity(values, resource, resource)
    return out


def _effective_requests(pod_spec: Fields, ctx: _Context, owner: str) -> dict[str, int]:
    """max(sum of app containers + sidecars, each init container + sidecars started before it) + overhead."""
    containers = pod_spec.items("containers", required=True)
    if not containers:
        raise pod_spec.error("containers", "a pod needs at least one container")
    sidecars: dict[str, int] = {}
    init_peak: dict[str, int] = {}
    for init in pod_spec.items("initContainers"):
        req = _container_requests(init)
        if init.string("restartPolicy") == "Always":  # a sidecar keeps running beside the app
            sidecars = _add(sidecars, req)
            init_peak = _max(init_peak, sidecars)
        else:
            init_peak = _max(init_peak, _add(req, sidecars))
    app: dict[str, int] = dict(sidecars)
    for c in containers:
        app = _add(app, _container_requests(c))
    total = _max(app, init_peak)
    overhead = pod_spec.mapping("overhead")
    if overhead is not None:
        total = _add(total, {r: quantity(overhead, r, r) for r in overhead.data})
    return total


def _add(a: dict[str, int], b: dict[str, int]) -> dict[str, int]:
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, 0) + v
    return out


def _max(a: dict[str, int], b: dict[str, int]) -> dict[str, int]:
    out = dict(a)
    for k, v in b.items():
        out[k] = max(out.get(k, 0), v)
    return out


def _topology(doc: YamlDoc, meta: Fields | None, annotations: dict[str, str], shape: _Shape,
              ctx: _Context, owner: str, default_slice_size: int | None = None) -> None:
    """Kueue's pod-set topology annotations (spec §8), checked against known Topology levels."""
    where = (lambda key: field_path(field_path(meta.path, "annotations"), key)) if meta else (lambda key: key)
    required = annotations.get(TOPOLOGY_REQUIRED)
    preferred = annotations.get(TOPOLOGY_PREFERRED)
    unconstrained = annotations.get(TOPOLOGY_UNCONSTRAINED)
    if sum(v is not None for v in (required, preferred, unconstrained)) > 1:
        raise doc.error("set only one of the podset-required-topology, podset-preferred-topology and "
                        "podset-unconstrained-topology annotations", _full(doc, where(TOPOLOGY_REQUIRED
                                                                                      if required else TOPOLOGY_PREFERRED)))
    for key, level in ((TOPOLOGY_REQUIRED, required), (TOPOLOGY_PREFERRED, preferred)):
        if level is not None and ctx.levels and level not in ctx.levels:
            raise doc.error(f"{owner} asks for topology level {level!r}, which no Topology defines "
                            f"(levels: {', '.join(sorted(ctx.levels))})", _full(doc, where(key)))
    if unconstrained is not None and unconstrained not in ("true", "false"):
        raise doc.error(f"expected 'true' or 'false', got {unconstrained!r}", _full(doc, where(TOPOLOGY_UNCONSTRAINED)))
    shape.topology_required = required
    shape.topology_preferred = preferred
    shape.topology_unconstrained = unconstrained == "true"
    _slices_and_group(doc, annotations, shape, ctx, owner, lambda key: _full(doc, where(key)), default_slice_size)
    for key in TOPOLOGY_NOT_MODELLED:
        if key in annotations:
            ctx.note(doc, f"{owner}: {where(key)}")


def _slices_and_group(doc: YamlDoc, annotations: dict[str, str], shape: _Shape, ctx: _Context, owner: str,
                      where, default_slice_size: int | None = None) -> None:
    """The slice and pod-set group annotations, checked as Kueue's webhook does (facts from
    Kueue's TAS validation; the wording here is gpupool's)."""
    slice_level = annotations.get(TOPOLOGY_SLICE)
    size_text = annotations.get(TOPOLOGY_SLICE_SIZE)
    group = annotations.get(TOPOLOGY_GROUP)
    size = None
    if size_text is not None:
        if not re.fullmatch(r"[+-]?\d+", size_text.strip()):
            raise doc.error(f"{owner}: {TOPOLOGY_SLICE_SIZE} must be a numeric value, got {size_text!r}",
                            where(TOPOLOGY_SLICE_SIZE))
        size = int(size_text)
        if size < 1:
            raise doc.error(f"{owner}: {TOPOLOGY_SLICE_SIZE} must be greater than or equal to 1, got {size_text!r}",
                            where(TOPOLOGY_SLICE_SIZE))
        if slice_level is None:
            raise doc.error(f"{owner}: {TOPOLOGY_SLICE_SIZE} may not be set when {TOPOLOGY_SLICE!r} is not specified",
                            where(TOPOLOGY_SLICE_SIZE))
    if slice_level is not None:
        if size is None:
            size = default_slice_size  # JobSet: a slice is one Job (its parallelism)
        if size is None:
            raise doc.error(f"{owner}: {TOPOLOGY_SLICE_SIZE} must be set when {TOPOLOGY_SLICE!r} is specified",
                            where(TOPOLOGY_SLICE))
        if ctx.levels and slice_level not in ctx.levels:
            raise doc.error(f"{owner} asks for slice topology level {slice_level!r}, which no Topology defines "
                            f"(levels: {', '.join(sorted(ctx.levels))})", where(TOPOLOGY_SLICE))
        main = shape.topology_required or shape.topology_preferred
        if main is not None and ctx.kueue is not None and not _at_or_below(ctx.kueue, slice_level, main):
            raise doc.error(f"{owner}: podset slice topology {slice_level} is above the podset topology {main} "
                            f"(or no Topology has both levels)", where(TOPOLOGY_SLICE))
        shape.topology_slice_level = slice_level
        shape.topology_slice_size = size
        shape.slice_source = (doc, where(TOPOLOGY_SLICE_SIZE if size_text is not None else TOPOLOGY_SLICE), owner)
    if group is not None:
        if group.isdigit():
            raise doc.error(f"{owner}: {TOPOLOGY_GROUP} must not be a number, got {group!r}", where(TOPOLOGY_GROUP))
        for other in (TOPOLOGY_SLICE_SIZE, TOPOLOGY_SLICE):
            if other in annotations:
                raise doc.error(f"{owner}: {TOPOLOGY_GROUP} may not be set when {other!r} is specified",
                                where(TOPOLOGY_GROUP))
        if shape.topology_required is None and shape.topology_preferred is None:
            raise doc.error(f"{owner}: {TOPOLOGY_GROUP} may not be set when neither {TOPOLOGY_PREFERRED!r} nor "
                            f"{TOPOLOGY_REQUIRED!r} is specified", where(TOPOLOGY_GROUP))
        shape.topology_group = group
        ctx.group_paths.setdefault((doc.index, group), []).append(where(TOPOLOGY_GROUP))


def _at_or_below(kueue: KueueConfig, low: str, high: str) -> bool:
    """Whether some Topology has level ``low`` at or below level ``high``."""
    for topo in kueue.topologies.values():
        levels = list(topo.levels)
        if low in levels and high in levels and levels.index(low) >= levels.index(high):
            return True
    return False


def _template(parent: Fields, key: str, doc: YamlDoc, ctx: _Context, owner: str,
              default_slice_size: int | None = None) -> _Shape:
    """A PodTemplateSpec (``metadata`` + ``spec``) under ``parent[key]``."""
    tmpl = parent.mapping(key, required=True)
    return _pod_shape(doc, tmpl.mapping("metadata"), tmpl.mapping("spec", required=True), ctx, owner,
                      default_slice_size)


# --------------------------------------------------------------------------- kinds


def _job_pods(spec: Fields, owner: str) -> int:
    """Pods a Job runs at once: parallelism (default 1), capped by completions."""
    parallelism = spec.integer("parallelism", 1, minimum=0)
    completions = spec.integer("completions", None, minimum=0)
    spec.string("completionMode", "NonIndexed", choices=("NonIndexed", "Indexed"))
    count = parallelism if completions is None else min(parallelism, completions)
    if count == 0:
        raise spec.error("parallelism", f"{owner} starts no pods (parallelism or completions is 0)")
    return count


def _job(doc: YamlDoc, ctx: _Context) -> list[Workload]:
    common = _common(doc, ctx)
    owner = f"Job {common.namespace}/{common.name}"
    spec = Fields.root(doc).mapping("spec", required=True)
    count = _job_pods(spec, owner)
    min_count = None
    text = common.annotations.get(MIN_PARALLELISM)
    if text is not None:
        where = field_path("metadata.annotations", MIN_PARALLELISM)
        if not text.isdigit() or not 1 <= int(text) < count:
            raise doc.error(f"expected a whole number from 1 to {count - 1} (below parallelism), got {text!r}",
                            _full(doc, where))
        min_count = int(text)
    shape = _template(spec, "template", doc, ctx, owner)
    deadline = spec.integer("activeDeadlineSeconds", minimum=1)
    return [common.workload(doc, (shape.pod_set("main", count, min_count),),
                            time_limit=float(deadline) if deadline is not None else None)]


def _pod(doc: YamlDoc, ctx: _Context) -> list[Workload]:
    common = _common(doc, ctx)
    owner = f"Pod {common.namespace}/{common.name}"
    root = Fields.root(doc)
    shape = _pod_shape(doc, root.mapping("metadata"), root.mapping("spec", required=True), ctx, owner)
    deadline = root.mapping("spec").integer("activeDeadlineSeconds", minimum=1)
    return [common.workload(doc, (shape.pod_set("main", 1),), gang=GANG_NONE,
                            time_limit=float(deadline) if deadline is not None else None)]


def _deployment(doc: YamlDoc, ctx: _Context) -> list[Workload]:
    """Every replica is its own single-pod workload (Kueue's Deployment integration, spec §9)."""
    common = _common(doc, ctx)
    owner = f"Deployment {common.namespace}/{common.name}"
    spec = Fields.root(doc).mapping("spec", required=True)
    replicas = spec.integer("replicas", 1, minimum=0)
    shape = _template(spec, "template", doc, ctx, owner)
    pod_set = shape.pod_set("main", 1)
    return [common.workload(doc, (pod_set,), name=f"{common.name}-{i}", gang=GANG_NONE, kind=KIND_SERVICE)
            for i in range(replicas)]


def _stateful_set(doc: YamlDoc, ctx: _Context) -> list[Workload]:
    """One workload for the whole set: Kueue treats a StatefulSet as one pod group."""
    common = _common(doc, ctx)
    owner = f"StatefulSet {common.namespace}/{common.name}"
    spec = Fields.root(doc).mapping("spec", required=True)
    replicas = spec.integer("replicas", 1, minimum=0)
    if replicas == 0:
        return []
    shape = _template(spec, "template", doc, ctx, owner)
    return [common.workload(doc, (shape.pod_set("main", replicas),), gang=GANG_ALL, kind=KIND_SERVICE)]


def _jobset(doc: YamlDoc, ctx: _Context) -> list[Workload]:
    """One pod set per replicated job, count = replicas × pods per job; admitted as one."""
    common = _common(doc, ctx)
    owner = f"JobSet {common.namespace}/{common.name}"
    spec = Fields.root(doc).mapping("spec", required=True)
    pod_sets = []
    deadlines = []
    for rj in spec.items("replicatedJobs", required=True):
        name = rj.string("name", required=True)
        replicas = rj.integer("replicas", 1, minimum=0)
        job_tmpl = rj.mapping("template", required=True)
        job_spec = job_tmpl.mapping("spec", required=True)
        per_job = _job_pods(job_spec, f"{owner} replicatedJob {name}")
        # Kueue defaults a JobSet's slice size to the Job's parallelism: one slice per Job.
        shape = _template(job_spec, "template", doc, ctx, f"{owner} replicatedJob {name}", per_job)
        if replicas:
            pod_sets.append(shape.pod_set(name, replicas * per_job))
        deadline = job_spec.integer("activeDeadlineSeconds", minimum=1)
        if deadline is not None:
            deadlines.append(deadline)
    if not pod_sets:
        raise spec.error("replicatedJobs", f"{owner} starts no pods")
    return [common.workload(doc, tuple(pod_sets), gang=GANG_ALL,
                            time_limit=float(min(deadlines)) if deadlines else None)]


def _leader_worker_set(doc: YamlDoc, ctx: _Context) -> list[Workload]:
    """One workload per group: a leader pod set and a worker pod set (size − 1 pods)."""
    common = _common(doc, ctx)
    owner = f"LeaderWorkerSet {common.namespace}/{common.name}"
    spec = Fields.root(doc).mapping("spec", required=True)
    replicas = spec.integer("replicas", 1, minimum=0)
    lwt = spec.mapping("leaderWorkerTemplate", required=True)
    size = lwt.integer("size", 1, minimum=1)
    worker = _template(lwt, "workerTemplate", doc, ctx, owner)
    leader = _template(lwt, "leaderTemplate", doc, ctx, owner) if lwt.has("leaderTemplate") else worker
    pod_sets = [leader.pod_set("leader", 1)]
    if size > 1:
        pod_sets.append(worker.pod_set("worker", size - 1))
    return [common.workload(doc, tuple(pod_sets), name=f"{common.name}-{i}", gang=GANG_ALL, kind=KIND_SERVICE)
            for i in range(replicas)]


def _kueue_workload(doc: YamlDoc, ctx: _Context) -> list[Workload]:
    """A Kueue Workload object as written (pod sets, queueName, priority)."""
    common = _common(doc, ctx)
    owner = f"Workload {common.namespace}/{common.name}"
    spec = Fields.root(doc).mapping("spec", required=True)
    if spec.boolean("active", True) is False:
        ctx.note(doc, f"{owner}: deactivated (spec.active is false), never scheduled")
        return []
    queue = spec.string("queueName") or common.queue_name
    if queue and ctx.kueue is not None and (common.namespace, queue) not in ctx.kueue.local_queues:
        raise MissingReferenceError(doc.source, f"{owner} refers to LocalQueue {common.namespace}/{queue}, "
                                                f"which is not defined", document=doc.index,
                                    field=_full(doc, spec.at("queueName")))
    common.queue_name = queue or None
    _workload_priority(doc, spec, common, ctx, owner)
    pod_sets = []
    for ps in spec.items("podSets", required=True):
        name = ps.string("name", "main")
        count = ps.integer("count", 1, minimum=0)
        min_count = ps.integer("minCount", minimum=1)
        if min_count is not None and min_count > count:
            raise ps.error("minCount", f"must not exceed count ({count}), got {min_count}")
        shape = _template(ps, "template", doc, ctx, f"{owner} podSet {name}")
        _topology_request(ps, shape, ctx, f"{owner} podSet {name}")
        if count:
            pod_sets.append(shape.pod_set(name, count, min_count if min_count != count else None))
    if not pod_sets:
        raise spec.error("podSets", f"{owner} has no pods")
    return [common.workload(doc, tuple(pod_sets))]


def _workload_priority(doc: YamlDoc, spec: Fields, common: _Common, ctx: _Context, owner: str) -> None:
    """spec.priority wins; else the WorkloadPriorityClass named in either API version's field."""
    name = spec.string("priorityClassName")
    where = spec.at("priorityClassName")
    ref = spec.mapping("priorityClassRef")
    if ref is not None:
        name = ref.string("name", required=True)
        where = ref.at("name")
        if ref.string("kind", "WorkloadPriorityClass") != "WorkloadPriorityClass":
            name = None  # a Kubernetes PriorityClass: not modelled here
            ctx.note(doc, f"{owner}: {ref.path} (PriorityClass)")
    source = spec.string("priorityClassSource")
    if source is not None and source != "kueue.x-k8s.io/workloadpriorityclass":
        name = None
        ctx.note(doc, f"{owner}: {spec.at('priorityClassName')} (PriorityClass)")
    if name:
        common.priority_class = name
        common.priority = _priority(doc, ctx, owner, name, where)
    priority = spec.integer("priority", minimum=-(2**31), maximum=2**31 - 1)
    if priority is not None:
        common.priority = priority


def _topology_request(ps: Fields, shape: _Shape, ctx: _Context, owner: str) -> None:
    """A Workload pod set's ``topologyRequest`` (the annotations, already copied by Kueue)."""
    req = ps.mapping("topologyRequest")
    if req is None:
        return
    required, preferred = req.string("required"), req.string("preferred")
    unconstrained = req.boolean("unconstrained", False)
    if required:
        shape.topology_required = required
    if preferred:
        shape.topology_preferred = preferred
    if unconstrained:
        shape.topology_unconstrained = True
    slice_level = req.string("podSetSliceRequiredTopology")
    size = req.integer("podSetSliceSize", minimum=1)
    if size is not None and slice_level is None:
        raise req.error("podSetSliceSize", f"{owner}: may not be set without podSetSliceRequiredTopology")
    if slice_level is not None:
        if size is None:
            raise req.error("podSetSliceRequiredTopology",
                            f"{owner}: slice topology requested, but slice size (podSetSliceSize) not provided")
        if ctx.levels and slice_level not in ctx.levels:
            raise req.error("podSetSliceRequiredTopology", f"{owner} asks for slice topology level {slice_level!r}, "
                                                           f"which no Topology defines")
        main = shape.topology_required or shape.topology_preferred
        if main is not None and ctx.kueue is not None and not _at_or_below(ctx.kueue, slice_level, main):
            raise req.error("podSetSliceRequiredTopology",
                            f"{owner}: podset slice topology {slice_level} is above the podset topology {main}")
        shape.topology_slice_level = slice_level
        shape.topology_slice_size = size
        shape.slice_source = (ps.doc, _full(ps.doc, req.at("podSetSliceSize")), owner)
    group = req.string("podSetGroupName")
    if group is not None:
        if slice_level is not None:
            raise req.error("podSetGroupName", f"{owner}: may not be set together with podSetSliceRequiredTopology")
        if shape.topology_required is None and shape.topology_preferred is None:
            raise req.error("podSetGroupName", f"{owner}: a pod-set group needs a required or preferred topology")
        shape.topology_group = group
        ctx.group_paths.setdefault((ps.doc.index, group), []).append(_full(ps.doc, req.at("podSetGroupName")))


_CONVERTERS = {
    ("batch", "Job"): _job,
    ("", "Pod"): _pod,
    ("apps", "Deployment"): _deployment,
    ("apps", "StatefulSet"): _stateful_set,
    ("jobset.x-k8s.io", "JobSet"): _jobset,
    ("leaderworkerset.x-k8s.io", "LeaderWorkerSet"): _leader_worker_set,
    ("kueue.x-k8s.io", "Workload"): _kueue_workload,
}


# --------------------------------------------------------------------------- owners and pod groups


def _owned_elsewhere(doc: YamlDoc, ctx: _Context) -> bool:
    """Objects a controller in these files created (a dump's Pods, a JobSet's Jobs) count once, there."""
    meta = doc.body.get("metadata") if isinstance(doc.body.get("metadata"), dict) else {}
    namespace = meta.get("namespace") or "default"
    for ref in meta.get("ownerReferences") or []:
        if not isinstance(ref, dict) or not ref.get("controller"):
            continue
        kind, name = ref.get("kind"), str(ref.get("name"))
        owner = None
        if (namespace, kind, name) in ctx.owners:
            owner = f"{kind} {namespace}/{name}"
        elif kind == "ReplicaSet":  # Deployment → ReplicaSet "<deployment>-<hash>" → Pod
            base = name.rsplit("-", 1)[0]
            if (namespace, "Deployment", base) in ctx.owners:
                owner = f"Deployment {namespace}/{base}"
        if owner:
            ctx.note(doc, f"{doc.kind} {namespace}/{meta.get('name')}: created by {owner}, counted there")
            return True
    return False


def _pod_group_key(doc: YamlDoc) -> tuple | None:
    """The gang a Pod belongs to: a Kueue pod group, or a Kubernetes Workload/PodGroup reference."""
    meta = doc.body.get("metadata") if isinstance(doc.body.get("metadata"), dict) else {}
    namespace = meta.get("namespace") or "default"
    labels = meta.get("labels") or {}
    if isinstance(labels, dict) and labels.get(POD_GROUP_LABEL):
        return (namespace, "kueue", str(labels[POD_GROUP_LABEL]))
    spec = doc.body.get("spec") if isinstance(doc.body.get("spec"), dict) else {}
    ref = spec.get("workloadRef")
    if isinstance(ref, dict):
        return (namespace, "workload", str(ref.get("name")), str(ref.get("podGroup")),
                str(ref.get("podGroupReplicaKey") or ""))
    group = spec.get("schedulingGroup")
    if isinstance(group, dict):
        return (namespace, "podgroup", str(group.get("podGroupName")))
    return None


def _gang_objects(docs: list[YamlDoc], ctx: _Context) -> dict[tuple, tuple[YamlDoc, str, int | None]]:
    """Gang policies from ``scheduling.k8s.io`` Workload and PodGroup objects (KEP-4671).

    Keys: (namespace, "workload", workload, podGroup) for v1alpha1 Workloads and
    (namespace, "podgroup", podGroup) for PodGroups; values (doc, "gang"|"basic", minCount).
    """
    out: dict[tuple, tuple[YamlDoc, str, int | None]] = {}
    for doc in docs:
        if api_group(doc.api_version)[0] != "scheduling.k8s.io":
            continue
        root = Fields.root(doc)
        meta = root.mapping("metadata", required=True)
        name = meta.string("name", required=True)
        namespace = meta.string("namespace") or "default"
        spec = root.mapping("spec", required=True)
        if doc.kind == "Workload" and api_group(doc.api_version)[1] == "v1alpha1":
            for group in spec.items("podGroups", required=True):
                policy = _gang_policy(group.mapping("policy", required=True))
                out[(namespace, "workload", name, group.string("name", required=True))] = (doc, *policy)
        elif doc.kind == "PodGroup":
            out[(namespace, "podgroup", name)] = (doc, *_gang_policy(spec.mapping("schedulingPolicy", required=True)))
        else:
            ctx.note(doc, f"{doc.kind} {namespace}/{name}: pod group templates (gangs come from PodGroup objects)")
    return out


def _gang_policy(policy: Fields) -> tuple[str, int | None]:
    gang = policy.mapping("gang")
    if gang is not None:
        return "gang", gang.integer("minCount", required=True, minimum=1)
    if policy.mapping("basic") is not None or "basic" in policy.data:
        return "basic", None
    raise policy.error(None, "expected exactly one of basic or gang")


def _pod_group_workload(key: tuple, pods: list[YamlDoc], gangs: dict, ctx: _Context) -> Workload:
    """Pods of one gang as one workload, one pod set per distinct pod shape (first seen first)."""
    first = pods[0]
    common = _common(first, ctx)
    shapes: list[tuple[PodSet, int]] = []
    slice_sources: dict[PodSet, tuple] = {}
    for doc in pods:
        root = Fields.root(doc)
        owner = f"Pod {common.namespace}/{root.data['metadata'].get('name')}"
        shape = _pod_shape(doc, root.mapping("metadata"), root.mapping("spec", required=True), ctx, owner)
        ps = shape.pod_set("main", 1, check=False)  # the pod count is known once all are seen
        if shape.slice_source is not None:
            slice_sources.setdefault(ps, shape.slice_source)
        for i, (known, n) in enumerate(shapes):
            if known == ps:
                shapes[i] = (known, n + 1)
                break
        else:
            shapes.append((ps, 1))
    total = len(pods)
    names = ["main"] if len(shapes) == 1 else [f"role-{i}" for i in range(len(shapes))]
    pod_sets = [replace(ps, name=n, count=c) for (ps, c), n in zip(shapes, names)]
    for (ps, c) in shapes:
        if ps.topology_slice_size is not None and ps in slice_sources:
            _check_slice_count(*slice_sources[ps], ps.topology_slice_size, c)
    gang = GANG_ALL
    if key[1] == "kueue":
        name = key[2]
        common.name = name
        _check_group_total(first, total, name)
    else:
        gang_key = key[:4] if key[1] == "workload" else key
        what = f"Workload {key[0]}/{key[2]} pod group {key[3]!r}" if key[1] == "workload" else f"PodGroup {key[0]}/{key[2]}"
        if gang_key not in gangs:
            field = "spec.workloadRef" if key[1] == "workload" else "spec.schedulingGroup.podGroupName"
            raise MissingReferenceError(first.source, f"Pod {common.namespace}/{common.name} refers to {what}, "
                                                      f"which is not defined", document=first.index,
                                        field=_full(first, field))
        _, policy, min_needed = gangs[gang_key]
        common.name = key[2] if key[1] == "podgroup" else f"{key[2]}-{key[3]}" + (f"-{key[4]}" if key[4] else "")
        if policy == "basic":
            gang = GANG_NONE
        elif min_needed is not None and min_needed < total:
            if len(pod_sets) == 1:
                gang, pod_sets = GANG_MIN, [replace(pod_sets[0], min_count=min_needed)]
            else:
                ctx.note(first, f"{what}: minCount {min_needed} over pods of different shapes, "
                                f"modelled as all-or-nothing")
    return common.workload(first, tuple(pod_sets), gang=gang)


def _check_group_total(first: YamlDoc, total: int, name: str) -> None:
    """Kueue admits a pod group only once all ``pod-group-total-count`` pods exist."""
    meta = Fields.root(first).mapping("metadata", required=True)
    text = meta.string_map("annotations").get(POD_GROUP_TOTAL)
    where = _full(first, field_path("metadata.annotations", POD_GROUP_TOTAL))
    if text is None:
        raise first.error(f"pod group {name!r} needs the {POD_GROUP_TOTAL} annotation", where)
    if not text.isdigit() or int(text) != total:
        raise first.error(f"pod group {name!r} declares {text!r} pods but these files hold {total} of them", where)

