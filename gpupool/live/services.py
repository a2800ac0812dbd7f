"""Services on the live host: Deployment replicas as processes with readiness checks and restarts.

A Deployment (or gpupool/v1 Service) submitted to the daemon becomes one engine workload per
replica (``KIND_SERVICE``), placed by the pool's policy like any job. When a replica is
placed, its first container's ``command`` + ``args`` run as a process group holding the
replica's GPUs. Kubernetes' pod semantics are kept where one host allows:

* the container restarts *in place* (the replica keeps its GPUs) when it exits, after
  CrashLoopBackOff: 10 s doubling per consecutive crash up to 5 min, reset after 10 min of
  running (the service's ``restart`` policy, kubelet's defaults);
* ``readinessProbe`` ``httpGet`` (any 2xx/3xx) or ``tcpSocket`` (a connect) decides when a
  replica is ready, every ``periodSeconds`` after ``initialDelaySeconds``;
* pods have their own network namespace in Kubernetes, replicas on one host do not: replica
  k gets ``PORT=<probe port + k>`` and is probed on that port.

Replicas never end on their own; cancelling a replica (or the daemon's scale-down) ends it.
With an autoscaler and a metric the daemon resizes the service (``gpupool.live.autoscale``).
On a live HPA, the annotations ``gpupool.io/sync-period`` and ``gpupool.io/metric-window``
stand in for kube-controller-manager's ``--horizontal-pod-autoscaler-sync-period`` and
metrics-server's window, which no HPA object can set.
"""
from __future__ import annotations

import math
import re
import shlex
import socket
from dataclasses import dataclass, field, replace

from gpupool.errors import InputError
from gpupool.formats.kube_services import parse_seconds, services_from_documents
from gpupool.formats.kube_yaml import YamlDoc, load_yaml_text
from gpupool.model.kueue import KueueConfig
from gpupool.model.workload import KIND_SERVICE, RestartPolicy, Service, Workload

#: Annotations the simulator needs but a live service may omit; filled in when a live
#: Deployment omits them (``live`` traffic: no metric, the replica count stays fixed).
_LIVE_DEFAULTS = {"gpupool.io/capacity-rps": "1", "gpupool.io/traffic": "live"}
#: HPA annotations for what Kubernetes sets on the controller, not on the HPA object.
_HPA_TIMING = {"gpupool.io/sync-period": "sync_period_s", "gpupool.io/metric-window": "metric_window_s"}


@dataclass(frozen=True)
class Probe:
    kind: str  # "http" or "tcp"
    port: int
    path: str = "/"
    period: float = 10.0
    initial_delay: float = 0.0
    timeout: float = 1.0


@dataclass
class ServiceSpec:
    """One service as the live daemon runs it."""

    service: Service
    command: list[str]
    env: dict[str, str] = field(default_factory=dict)
    probe: Probe | None = None
    restart: RestartPolicy = field(default_factory=RestartPolicy)

    def script(self, replica: int) -> str:
        """The replica's process, as a script the job wrapper runs (``exec`` keeps one process).

        ``$(NAME)`` in command and args is replaced by the container's variable NAME (and
        ``PORT``), as the kubelet expands them; ``$$(NAME)`` stays literal ``$(NAME)``."""
        env = dict(self.env)
        if self.probe:
            env["PORT"] = str(self.probe.port + replica)
        exports = "".join(f"export {k}={shlex.quote(v)}\n" for k, v in env.items())
        argv = [_expand(a, env) for a in self.command]
        return f"#!/bin/sh\n{exports}exec {shlex.join(argv)}\n"

    def probe_port(self, replica: int) -> int | None:
        return None if self.probe is None else self.probe.port + replica


_VAR = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)")


def _expand(text: str, env: dict[str, str]) -> str:
    def repl(m: re.Match) -> str:
        if m.group(0) == "$$":
            return "$"
        return env.get(m.group(1), m.group(0))

    return _VAR.sub(repl, text)


def is_service_file(name: str) -> bool:
    return name.endswith((".yaml", ".yml"))


def parse_services(text: str, source: str, kueue: KueueConfig | None) -> list[ServiceSpec]:
    """Services of a YAML file; errors name the file, document and field."""
    docs = load_yaml_text(text, source)
    filled = []
    for doc in docs:
        if doc.kind == "Deployment":
            meta = dict(doc.body.get("metadata") or {})
            ann = dict(meta.get("annotations") or {})
            for k, v in _LIVE_DEFAULTS.items():
                ann.setdefault(k, v)
            meta["annotations"] = ann
            doc = YamlDoc(doc.source, doc.index, doc.line, {**doc.body, "metadata": meta}, doc.prefix)
        filled.append(doc)
    services = services_from_documents(filled, kueue)
    timing = _hpa_timing(filled)
    specs = []
    for svc, doc in zip(services, [d for d in filled if d.kind != "HorizontalPodAutoscaler"]):
        key = (svc.namespace or "default", svc.name)
        if doc.kind == "Deployment" and key in timing and svc.autoscaling.kind == "hpa":
            svc = replace(svc, autoscaling=replace(svc.autoscaling, **timing[key]))
        specs.append(_container(svc, doc))
    return specs


def _hpa_timing(docs: list[YamlDoc]) -> dict[tuple[str, str], dict[str, float]]:
    """Sync period / metric window annotations of each HPA, by its target Deployment."""
    out: dict[tuple[str, str], dict[str, float]] = {}
    for doc in docs:
        if doc.kind != "HorizontalPodAutoscaler":
            continue
        meta = doc.body.get("metadata") or {}
        ann = meta.get("annotations") or {}
        ref = (doc.body.get("spec") or {}).get("scaleTargetRef") or {}
        values = {}
        for key, attr in _HPA_TIMING.items():
            if key in ann:
                try:
                    values[attr] = parse_seconds(ann[key], key)
                except ValueError as exc:
                    raise doc.error(str(exc), f"metadata.annotations.{key}") from None
                if attr == "sync_period_s" and values[attr] <= 0:
                    raise doc.error("must be > 0", f"metadata.annotations.{key}")
        if values:
            out[(meta.get("namespace") or "default", str(ref.get("name")))] = values
    return out


def _container(svc: Service, doc: YamlDoc) -> ServiceSpec:
    body = doc.body.get("spec") or {}
    pod = ((body.get("template") or {}).get("spec") or {}) if doc.kind == "Deployment" else (body.get("template") or body)
    containers = pod.get("containers") or []
    where = "spec.template.spec.containers[0]"
    if not containers or not isinstance(containers[0], dict):
        raise InputError(doc.source, "a live service needs a container with a command", document=doc.index, field=where)
    c = containers[0]
    argv = [str(x) for x in (c.get("command") or [])] + [str(x) for x in (c.get("args") or [])]
    if not argv:
        raise InputError(doc.source, "the live daemon runs the container's command (no images): give "
                         "command/args", document=doc.index, field=f"{where}.command")
    env = {}
    for item in c.get("env") or []:
        if isinstance(item, dict) and "name" in item and "value" in item:
            env[str(item["name"])] = str(item["value"])
    ports = {p.get("name"): p.get("containerPort") for p in (c.get("ports") or []) if isinstance(p, dict)}
    probe = None
    rp = c.get("readinessProbe")
    if isinstance(rp, dict):
        kind, spec = ("http", rp.get("httpGet")) if "httpGet" in rp else ("tcp", rp.get("tcpSocket"))
        if not isinstance(spec, dict) or "port" not in spec:
            raise InputError(doc.source, "readinessProbe: httpGet or tcpSocket with a port is needed",
                             document=doc.index, field=f"{where}.readinessProbe")
        port = spec["port"]
        if isinstance(port, str) and not port.isdigit():
            if port not in ports:
                raise InputError(doc.source, f"readinessProbe port {port!r} names no container port",
                                 document=doc.index, field=f"{where}.readinessProbe")
            port = ports[port]
        probe = Probe(kind, int(port), str(spec.get("path") or "/"), float(rp.get("periodSeconds", 10)),
                      float(rp.get("initialDelaySeconds", 0)), float(rp.get("timeoutSeconds", 1)))
    return ServiceSpec(svc, argv, env, probe, svc.restart)


def replica_workloads(spec: ServiceSpec, first_id: int, user: str, now: float) -> list[Workload]:
    """One workload per initial replica (``replicas`` within min/max), ids ``first_id …``."""
    svc = spec.service
    n = svc.replicas if svc.min_replicas is None and svc.max_replicas is None else max(svc.lo, min(svc.hi, svc.replicas))
    return [replica_workload(spec, k, first_id + k, user, now) for k in range(n)]


def replica_workload(spec: ServiceSpec, k: int, job_id: int, user: str, now: float) -> Workload:
    """Replica ``k`` of a service as job ``job_id``; it runs until cancelled."""
    svc = spec.service
    return Workload(id=job_id, name=f"{svc.name}-{k}", pod_sets=(svc.pod,), submit_time=now, runtime=math.inf,
                    kind=KIND_SERVICE, user=user, account=svc.account, qos=svc.qos, partition=svc.partition,
                    namespace=svc.namespace, queue_name=svc.queue_name, priority_class=svc.priority_class,
                    priority=svc.priority, labels=dict(svc.labels), requeue=True, source=svc.source)


def probe_ready(probe: Probe, port: int) -> bool:
    """One readiness check on 127.0.0.1:port (HTTP 2xx/3xx, or a TCP connect)."""
    timeout = min(probe.timeout, 0.5)  # the daemon's loop waits for it
    if probe.kind == "tcp":
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=timeout):
                return True
        except OSError:
            return False
    import httpx

    try:
        r = httpx.get(f"http://127.0.0.1:{port}{probe.path}", timeout=timeout)
        return 200 <= r.status_code < 400
    except httpx.HTTPError:
        return False
