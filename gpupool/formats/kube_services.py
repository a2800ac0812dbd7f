"""Services from YAML: a Kubernetes Deployment (+ HorizontalPodAutoscaler autoscaling/v2),
or gpupool's own ``kind: Service`` (``apiVersion: gpupool/v1``), into ``model.Service``.

Deployment: the pod template is read by ``kube_workloads`` (requests, queue label, priority
class, node selector), so a replica is exactly the workload Kueue would admit. What no
Kubernetes object says is read from gpupool annotations on the Deployment
(``SERVICE_ANNOTATIONS``). An HPA whose ``scaleTargetRef`` names the Deployment sizes it:
``minReplicas`` (default 1), ``maxReplicas``, one ``Pods`` or ``External`` metric with an
``AverageValue`` target (requests/s per replica) and ``behavior``. A Knative class annotation
(``autoscaling.knative.dev/class: kpa.autoscaling.knative.dev``) picks the KPA with Knative's
own annotations. Without either the Deployment keeps its ``replicas`` (fixed).

gpupool Service: the same facts in one validated document (pydantic); see docs/services.md.
Every error names the file, the document and the field.
"""
from __future__ import annotations

import math
import re
from dataclasses import replace
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from gpupool.errors import InputError
from gpupool.formats.kube_yaml import Fields, YamlDoc, field_path, load_yaml_documents
from gpupool.formats.kueue_objects import api_group
from gpupool.formats.quantity import kube_resource, parse_kube_quantity
from gpupool.model.kueue import KueueConfig
from gpupool.model.workload import (
    HPA_SCALE_DOWN,
    HPA_SCALE_UP,
    Autoscaling,
    PodSet,
    RestartPolicy,
    ScalingPolicy,
    ScalingRules,
    Service,
)

__all__ = ["SERVICE_ANNOTATIONS", "load_services", "parse_seconds", "services_from_documents"]

GPUPOOL_API = "gpupool/v1"
SERVICE_ANNOTATIONS = {
    "gpupool.io/capacity-rps": "requests/s one ready replica serves at its latency target",
    "gpupool.io/startup-time": "image pull + model load until a replica is ready",
    "gpupool.io/traffic": "traffic source (csv:FILE, diurnal?…, dlrm:APP)",
    "gpupool.io/mtbf": "mean time between crashes of one replica (failure injection)",
    "gpupool.io/start-time": "when the service is deployed (seconds from the start of the run)",
    "gpupool.io/end-time": "when it is removed (default: the end of its traffic)",
    "gpupool.io/seed": "seed of its crash draws",
}
KNATIVE_CLASS = "autoscaling.knative.dev/class"
KNATIVE_KPA = "kpa.autoscaling.knative.dev"
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_GO_DURATION = re.compile(r"^(\d+(?:\.\d+)?(ms|s|m|h|d))+$")


def parse_seconds(value: object, what: str = "duration") -> float:
    """Seconds from a number, a Go/Kubernetes duration (``90s``, ``5m``, ``1h30m``) or
    Slurm's ``[D-]HH:MM:SS``. Raises ValueError with what was expected."""
    if isinstance(value, bool):
        raise ValueError(f"{what}: expected seconds or a duration like 90s, 5m, 1h30m, got {value!r}")  # noqa: TRY004 - callers catch ValueError
    if isinstance(value, (int, float)):
        if value < 0 or not math.isfinite(value):
            raise ValueError(f"{what}: must be a finite number >= 0, got {value}")
        return float(value)
    text = str(value).strip()
    if _GO_DURATION.match(text):
        return sum(float(n) * _UNITS[u] for n, u in re.findall(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)", text))
    if ":" in text:
        from gpupool.formats.slurm_time import SlurmTimeError, parse_duration

        try:
            secs = parse_duration(text)
        except SlurmTimeError:
            secs = None
        if secs is not None:
            return float(secs)
    try:
        return parse_seconds(float(text), what)
    except ValueError:
        pass
    raise ValueError(f"{what}: expected seconds or a duration like 90s, 5m, 1h30m or HH:MM:SS, got {text!r}")


# --------------------------------------------------------------------------- gpupool kind: Service

class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


def _secs(v: object) -> float:
    return parse_seconds(v)


class _Policy(_Model):
    type: Literal["Pods", "Percent"]
    value: int = Field(ge=1)
    period_seconds: int = Field(alias="periodSeconds", ge=1, le=1800)


class _Rules(_Model):
    stabilization_window_seconds: int | None = Field(default=None, alias="stabilizationWindowSeconds", ge=0, le=3600)
    select_policy: Literal["Max", "Min", "Disabled"] = Field(default="Max", alias="selectPolicy")
    policies: list[_Policy] | None = None
    tolerance: float | None = Field(default=None, ge=0)


class _Behavior(_Model):
    scale_up: _Rules | None = Field(default=None, alias="scaleUp")
    scale_down: _Rules | None = Field(default=None, alias="scaleDown")


class _Autoscaler(_Model):
    kind: Literal["hpa", "kpa", "fixed", "replay"] = "hpa"
    target_utilisation: float = Field(default=0.7, alias="targetUtilisation", gt=0, le=1)
    sync_period: float = Field(default=15.0, alias="syncPeriod", gt=0)
    tolerance: float = Field(default=0.1, ge=0)
    metric_window: float = Field(default=60.0, alias="metricWindow", ge=0)
    behavior: _Behavior | None = None
    tick: float = Field(default=2.0, alias="tick", gt=0)
    stable_window: float = Field(default=60.0, alias="stableWindow", gt=0)
    panic_window_percentage: float = Field(default=10.0, alias="panicWindowPercentage", gt=0, le=100)
    panic_threshold_percentage: float = Field(default=200.0, alias="panicThresholdPercentage", gt=100)
    max_scale_up_rate: float = Field(default=1000.0, alias="maxScaleUpRate", gt=1)
    max_scale_down_rate: float = Field(default=2.0, alias="maxScaleDownRate", gt=1)
    scale_to_zero_grace: float = Field(default=30.0, alias="scaleToZeroGracePeriod", ge=0)

    _durations = field_validator("sync_period", "metric_window", "tick", "stable_window",
                                 "scale_to_zero_grace", mode="before")(lambda v: _secs(v))


class _Restart(_Model):
    initial_backoff: float = Field(default=10.0, alias="initialBackoff", gt=0)
    max_backoff: float = Field(default=300.0, alias="maxBackoff", gt=0)
    reset_after: float = Field(default=600.0, alias="resetAfter", gt=0)

    _durations = field_validator("initial_backoff", "max_backoff", "reset_after", mode="before")(lambda v: _secs(v))


class _SlurmSide(_Model):
    partition: str | None = None
    qos: str | None = None
    account: str | None = None
    user: str | None = None


class _Spec(_Model):
    replicas: int = Field(default=1, ge=0)
    min_replicas: int | None = Field(default=None, alias="minReplicas", ge=0)
    max_replicas: int | None = Field(default=None, alias="maxReplicas", ge=1)
    resources: dict[str, str | int | float]
    node_selector: dict[str, str] = Field(default_factory=dict, alias="nodeSelector")
    capacity_rps: float = Field(alias="capacityRps", gt=0)
    startup_time: float = Field(default=0.0, alias="startupTime")
    traffic: str
    queue_name: str | None = Field(default=None, alias="queueName")
    priority_class: str | None = Field(default=None, alias="priorityClass")
    slurm: _SlurmSide = _SlurmSide()
    autoscaler: _Autoscaler = _Autoscaler()
    restart_policy: _Restart = Field(default_factory=_Restart, alias="restartPolicy")
    mean_time_between_crashes: float | None = Field(default=None, alias="meanTimeBetweenCrashes", gt=0)
    start_time: float = Field(default=0.0, alias="startTime")
    end_time: float | None = Field(default=None, alias="endTime")
    seed: int = 0

    _durations = field_validator("startup_time", "mean_time_between_crashes", "start_time", "end_time",
                                 mode="before")(lambda v: None if v is None else _secs(v))


class _Meta(_Model):
    name: str = Field(pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
    namespace: str | None = None
    labels: dict[str, str] = Field(default_factory=dict)


class _ServiceDoc(_Model):
    api_version: Literal["gpupool/v1"] = Field(alias="apiVersion")
    kind: Literal["Service"]
    metadata: _Meta
    spec: _Spec


def _rules(rules: _Rules | None, default: ScalingRules) -> ScalingRules:
    if rules is None:
        return default
    policies = default.policies if rules.policies is None else tuple(
        ScalingPolicy(p.type, p.value, float(p.period_seconds)) for p in rules.policies)
    stab = default.stabilization_s if rules.stabilization_window_seconds is None else float(rules.stabilization_window_seconds)
    return ScalingRules(stab, policies, rules.select_policy, rules.tolerance)


def _gpupool_service(doc: YamlDoc, kueue: KueueConfig | None) -> Service:
    try:
        parsed = _ServiceDoc.model_validate(doc.body)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"] if not str(p).startswith("function-"))
        msg = err["msg"].removeprefix("Value error, ")
        raise doc.error(msg, field or None) from None
    spec, meta = parsed.spec, parsed.metadata
    try:
        req = {k: kube_resource(k, v) for k, v in spec.resources.items()}
    except (ValueError, InputError) as exc:
        raise doc.error(f"bad resource quantity: {exc}", "spec.resources") from None
    pod = PodSet(
        name="main", count=1, cpu_m=req.pop("cpu", 0), memory_mib=req.pop("memory", 0),
        gpus=req.pop("nvidia.com/gpu", 0), gpu_type=spec.node_selector.get("nvidia.com/gpu.product"),
        extra=tuple(sorted((k, v) for k, v in req.items() if v)),
        node_selector=tuple(sorted(spec.node_selector.items())),
    )
    if pod.gpu_type is None or not pod.gpus:
        pod = replace(pod, gpu_type=None)
    a = spec.autoscaler
    behavior = a.behavior or _Behavior()
    auto = Autoscaling(
        kind=a.kind, target_utilisation=a.target_utilisation, sync_period_s=a.sync_period, tolerance=a.tolerance,
        metric_window_s=a.metric_window, scale_up=_rules(behavior.scale_up, HPA_SCALE_UP),
        scale_down=_rules(behavior.scale_down, HPA_SCALE_DOWN), tick_s=a.tick, stable_window_s=a.stable_window,
        panic_window_pct=a.panic_window_percentage, panic_threshold_pct=a.panic_threshold_percentage,
        max_scale_up_rate=a.max_scale_up_rate, max_scale_down_rate=a.max_scale_down_rate,
        scale_to_zero_grace_s=a.scale_to_zero_grace,
    )
    r = spec.restart_policy
    priority = None
    if spec.priority_class:
        if kueue is not None and spec.priority_class not in kueue.priority_classes:
            raise doc.error(f"WorkloadPriorityClass {spec.priority_class!r} is not defined in the pool",
                            "spec.priorityClass")
        if kueue is not None:
            priority = kueue.priority_classes[spec.priority_class].value
    ns = meta.namespace or "default"
    _check_queue(doc, kueue, ns, spec.queue_name, "spec.queueName")
    svc = Service(
        name=meta.name, pod=pod, replicas=spec.replicas, min_replicas=spec.min_replicas,
        max_replicas=spec.max_replicas, start_time=spec.start_time, end_time=spec.end_time,
        startup_time=spec.startup_time, namespace=ns, queue_name=spec.queue_name,
        priority_class=spec.priority_class, priority=priority, user=spec.slurm.user, account=spec.slurm.account,
        qos=spec.slurm.qos, partition=spec.slurm.partition, labels=dict(meta.labels), source=doc.where,
        capacity_rps=spec.capacity_rps, autoscaling=auto,
        restart=RestartPolicy(r.initial_backoff, r.max_backoff, r.reset_after),
        mtbf_s=spec.mean_time_between_crashes, traffic=spec.traffic, seed=spec.seed,
    )
    _check_range(doc, svc, "spec.maxReplicas")
    return svc


def _check_queue(doc: YamlDoc, kueue: KueueConfig | None, ns: str, queue: str | None, where: str) -> None:
    if kueue is not None and queue and (ns, queue) not in kueue.local_queues:
        raise doc.error(f"LocalQueue {ns}/{queue} is not defined in the pool", where)


def _check_range(doc: YamlDoc, svc: Service, where: str) -> None:
    if svc.max_replicas is not None and svc.min_replicas is not None and svc.max_replicas < svc.min_replicas:
        raise doc.error(f"maxReplicas ({svc.max_replicas}) is below minReplicas ({svc.min_replicas})", where)


# --------------------------------------------------------------------------- Deployment + HPA

def _annotation_seconds(doc: YamlDoc, ann: dict[str, str], key: str, default: float | None) -> float | None:
    if key not in ann:
        return default
    try:
        return parse_seconds(ann[key], key)
    except ValueError as exc:
        raise doc.error(str(exc), field_path("metadata.annotations", key)) from None


def _annotation_number(doc: YamlDoc, ann: dict[str, str], key: str, default: float | None) -> float | None:
    if key not in ann:
        return default
    try:
        value = float(ann[key])
    except ValueError:
        raise doc.error(f"expected a number, got {ann[key]!r}", field_path("metadata.annotations", key)) from None
    if value < 0 or not math.isfinite(value):
        raise doc.error(f"expected a number >= 0, got {ann[key]!r}", field_path("metadata.annotations", key))
    return value


def _deployment_service(doc: YamlDoc, hpa: YamlDoc | None, kueue: KueueConfig | None) -> Service:
    from gpupool.formats.kube_workloads import workloads_from_documents

    root = Fields.root(doc)
    meta = root.mapping("metadata", required=True)
    ann = meta.string_map("annotations")
    spec = root.mapping("spec", required=True)
    replicas = spec.integer("replicas", 1, minimum=0)
    # The pod template as kube_workloads reads it: one replica, without the service annotations
    # (they are read here; kube_workloads rejects gpupool annotations it does not know).
    body_meta = dict(doc.body.get("metadata") or {})
    body_meta["annotations"] = {k: v for k, v in ann.items() if k not in SERVICE_ANNOTATIONS}
    one = YamlDoc(doc.source, doc.index, doc.line,
                  {**doc.body, "metadata": body_meta, "spec": {**doc.body["spec"], "replicas": 1}}, doc.prefix)
    template = workloads_from_documents([one], kueue)[0]
    cap_key = "gpupool.io/capacity-rps"
    capacity = _annotation_number(doc, ann, cap_key, None)
    if not capacity:
        raise doc.error("a service Deployment needs a capacity per replica (requests/s) > 0",
                        field_path("metadata.annotations", cap_key))
    traffic = ann.get("gpupool.io/traffic")
    if not traffic:
        raise doc.error("a service Deployment needs a traffic source", field_path("metadata.annotations",
                                                                                   "gpupool.io/traffic"))
    auto = Autoscaling(kind="fixed")
    lo = hi = None
    if hpa is not None:
        auto, lo, hi = _hpa(hpa, capacity)
    elif ann.get(KNATIVE_CLASS, "") == KNATIVE_KPA or meta.string_map("labels").get(KNATIVE_CLASS) == KNATIVE_KPA:
        auto, lo, hi = _knative(doc, ann)
    seed = _annotation_number(doc, ann, "gpupool.io/seed", 0.0)
    svc = Service(
        name=template.name.rsplit("-", 1)[0], pod=template.pod_sets[0], replicas=replicas, min_replicas=lo,
        max_replicas=hi, start_time=_annotation_seconds(doc, ann, "gpupool.io/start-time", 0.0) or 0.0,
        end_time=_annotation_seconds(doc, ann, "gpupool.io/end-time", None),
        startup_time=_annotation_seconds(doc, ann, "gpupool.io/startup-time", 0.0) or 0.0,
        namespace=template.namespace, queue_name=template.queue_name, priority_class=template.priority_class,
        priority=template.priority, labels=dict(template.labels), source=doc.where, capacity_rps=capacity,
        autoscaling=auto, mtbf_s=_annotation_seconds(doc, ann, "gpupool.io/mtbf", None) or None,
        traffic=traffic, seed=int(seed or 0),
    )
    _check_range(hpa or doc, svc, "spec.maxReplicas" if hpa is not None else "metadata.annotations")
    return svc


def _hpa(doc: YamlDoc, capacity: float) -> tuple[Autoscaling, int, int]:
    root = Fields.root(doc)
    spec = root.mapping("spec", required=True)
    lo = spec.integer("minReplicas", 1, minimum=0)
    hi = spec.integer("maxReplicas", required=True, minimum=1)
    metrics = spec.items("metrics")
    if len(metrics) != 1:
        raise spec.error("metrics", "gpupool models one Pods or External requests/s metric with an AverageValue "
                                    f"target; this HPA has {len(metrics)} metrics")
    m = metrics[0]
    mtype = m.string("type", required=True)
    if mtype not in ("Pods", "External"):
        raise m.error("type", f"metric type {mtype!r} is not modelled; use Pods or External (requests/s)")
    body = m.mapping("pods" if mtype == "Pods" else "external", required=True)
    target = body.mapping("target", required=True)
    ttype = target.string("type", required=True)
    if ttype != "AverageValue":
        raise target.error("type", f"target type {ttype!r} is not modelled; use AverageValue (requests/s per pod)")
    raw = target.raw("averageValue")
    if raw is None:
        raise target.error("averageValue", "required")
    try:
        per_pod = float(parse_kube_quantity(raw))
    except (ValueError, ArithmeticError, InputError):
        raise target.error("averageValue", f"expected a quantity, got {raw!r}") from None
    if per_pod <= 0:
        raise target.error("averageValue", "must be > 0")
    behavior = spec.mapping("behavior")
    up, down = HPA_SCALE_UP, HPA_SCALE_DOWN
    if behavior is not None:
        up = _behavior_rules(behavior.mapping("scaleUp"), HPA_SCALE_UP)
        down = _behavior_rules(behavior.mapping("scaleDown"), HPA_SCALE_DOWN)
    if lo > hi:
        raise spec.error("minReplicas", f"minReplicas ({lo}) is above maxReplicas ({hi})")
    return Autoscaling(kind="hpa", target_utilisation=min(1.0, per_pod / capacity), scale_up=up, scale_down=down), lo, hi


def _behavior_rules(rules: Fields | None, default: ScalingRules) -> ScalingRules:
    if rules is None:
        return default
    stab = rules.integer("stabilizationWindowSeconds", minimum=0, maximum=3600)
    select = rules.string("selectPolicy", "Max")
    if select not in ("Max", "Min", "Disabled"):
        raise rules.error("selectPolicy", f"expected Max, Min or Disabled, got {select!r}")
    policies = default.policies
    if rules.has("policies"):
        policies = []
        for p in rules.items("policies"):
            ptype = p.string("type", required=True)
            if ptype not in ("Pods", "Percent"):
                raise p.error("type", f"expected Pods or Percent, got {ptype!r}")
            policies.append(ScalingPolicy(ptype, p.integer("value", required=True, minimum=1),
                                          float(p.integer("periodSeconds", required=True, minimum=1, maximum=1800))))
        policies = tuple(policies)
    tol = rules.raw("tolerance")
    return ScalingRules(default.stabilization_s if stab is None else float(stab), policies, select,
                        None if tol is None else float(parse_kube_quantity(tol)))


def _knative(doc: YamlDoc, ann: dict[str, str]) -> tuple[Autoscaling, int, int]:
    def num(key: str, default: float) -> float:
        return _annotation_number(doc, ann, f"autoscaling.knative.dev/{key}", default)  # type: ignore[return-value]

    lo = int(num("min-scale", 0))
    hi = int(num("max-scale", 0)) or 1000
    window = _annotation_seconds(doc, ann, "autoscaling.knative.dev/window", 60.0) or 60.0
    auto = Autoscaling(kind="kpa", target_utilisation=num("target-utilization-percentage", 70.0) / 100.0,
                       stable_window_s=window, panic_window_pct=num("panic-window-percentage", 10.0),
                       panic_threshold_pct=num("panic-threshold-percentage", 200.0))
    return auto, lo, hi


# --------------------------------------------------------------------------- files

def services_from_documents(docs: list[YamlDoc], kueue: KueueConfig | None = None) -> list[Service]:
    """Services in document order: gpupool Services and Deployments (with their HPAs)."""
    hpas: dict[tuple[str, str], YamlDoc] = {}
    for doc in docs:
        if doc.kind == "HorizontalPodAutoscaler":
            group, version = api_group(doc.api_version)
            if (group, version) != ("autoscaling", "v2"):
                raise doc.error(f"HorizontalPodAutoscaler {doc.api_version} is not read; use autoscaling/v2",
                                "apiVersion")
            root = Fields.root(doc)
            ns = root.mapping("metadata", required=True).string("namespace") or "default"
            ref = root.mapping("spec", required=True).mapping("scaleTargetRef", required=True)
            if ref.string("kind", required=True) != "Deployment":
                raise ref.error("kind", "gpupool scales Deployments only")
            key = (ns, ref.string("name", required=True))
            if key in hpas:
                raise doc.error(f"a second HorizontalPodAutoscaler for Deployment {key[0]}/{key[1]}",
                                "spec.scaleTargetRef")
            hpas[key] = doc
    out: list[Service] = []
    used: set[tuple[str, str]] = set()
    for doc in docs:
        if doc.kind == "HorizontalPodAutoscaler":
            continue
        if doc.api_version == GPUPOOL_API or doc.api_version.startswith("gpupool"):
            if doc.kind != "Service" or doc.api_version != GPUPOOL_API:
                raise doc.error(f"expected apiVersion {GPUPOOL_API} and kind Service, got {doc.api_version} {doc.kind}",
                                "kind")
            out.append(_gpupool_service(doc, kueue))
        elif doc.kind == "Deployment":
            meta = doc.body.get("metadata") or {}
            key = (meta.get("namespace") or "default", str(meta.get("name")))
            used.add(key)
            out.append(_deployment_service(doc, hpas.get(key), kueue))
        else:
            raise doc.error(f"{doc.kind} is not a service; expected a Deployment (with an optional "
                            f"HorizontalPodAutoscaler) or a gpupool/v1 Service", "kind")
    for key, doc in hpas.items():
        if key not in used:
            raise doc.error(f"scaleTargetRef names Deployment {key[0]}/{key[1]}, which these files do not define",
                            "spec.scaleTargetRef.name")
    names = [s.name for s in out]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise InputError(docs[0].source, f"service names must be unique; repeated: {', '.join(dup)}")
    return out


def load_services(paths: list[Path], kueue: KueueConfig | None = None) -> list[Service]:
    """Services from YAML files (each file may hold several documents)."""
    docs: list[YamlDoc] = []
    for path in paths:
        docs.extend(load_yaml_documents(path))
    return services_from_documents(docs, kueue) if docs else []
