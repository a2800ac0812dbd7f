"""slurm-operator (Slinky) ``NodeSet`` objects: which pool nodes are lent to Slurm.

A NodeSet (``slinky.slurm.net/v1beta1``; ``v1alpha1`` is read too) runs ``slurmd`` pods on
Kubernetes nodes (spec fleet_and_bridge §2.2). gpupool reads the fields that decide capacity:
``spec.replicas`` and ``spec.scalingMode`` (StatefulSet: ``replicas`` pods; DaemonSet: one pod
per matching node), the pod template's ``nodeSelector`` (which pool nodes may host a slurmd
pod), ``spec.partition`` and ``spec.extraConf`` (kept for display). Fields that only shape
the slurmd pods (images, volumes, ssh, update strategy …) are accepted and noted.

How the capacity controller moves nodes between the NodeSet and the inference fleet is
gpupool's own setting, written as ``gpupool.io/capacity-*`` annotations on the NodeSet
(documented in docs/policies/operator.md):

=================================  ==========================================================
``gpupool.io/capacity-mode``        ``fixed`` (default), ``schedule`` or ``demand``
``gpupool.io/capacity-min``         fewest replicas (default 0: scale to zero allowed)
``gpupool.io/capacity-max``         most replicas (default: every matching node)
``gpupool.io/capacity-schedule``    ``TIME=REPLICAS`` pairs, comma separated (schedule mode)
``gpupool.io/capacity-period``      repeat the schedule every PERIOD (e.g. ``1d``)
``gpupool.io/capacity-interval``    seconds between controller checks (default 30)
``gpupool.io/capacity-cooldown``    seconds after a scale-in before a scale-out (default 300)
=================================  ==========================================================

Times and durations take seconds, ``<n>s|m|h|d`` or a Slurm duration (``1-00:00:00``).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from gpupool.errors import InputError
from gpupool.formats.kube_yaml import Fields, YamlDoc, load_yaml_documents
from gpupool.formats.slurm_time import SlurmTimeError, parse_duration
from gpupool.model.pool import Pool

GROUP = "slinky.slurm.net"
VERSIONS = ("v1beta1", "v1alpha1")
MODES = ("fixed", "schedule", "demand")
ANNOTATION = "gpupool.io/capacity-"
_ANNOTATIONS = ("mode", "min", "max", "schedule", "period", "interval", "cooldown")
_SPEC_KEYS = {"replicas", "scalingMode", "template", "partition", "extraConf", "controllerRef",
              "updateStrategy", "workloadDisruptionProtection"}
_SPEC_NOT_MODELLED = {"ssh", "pruneSlurmNodeRecords", "oversubscribeNode", "volumeClaimTemplates",
                      "persistentVolumeClaimRetentionPolicy", "revisionHistoryLimit", "minReadySeconds",
                      "slurmd", "logfile", "taintKubeNodes", "serviceName", "podManagementPolicy",
                      "ordinals", "selector", "pinToNode"}
#: The folder of a pool directory that holds NodeSet files (the pool loader skips folders;
#: Kubernetes YAML at the top level is read as Kueue/Kubernetes pool objects).
FOLDER = "slurm-operator"


@dataclass(frozen=True, slots=True)
class CapacityPolicy:
    """How the capacity controller sizes a NodeSet (gpupool's own settings)."""

    mode: str = "fixed"
    min_replicas: int = 0
    max_replicas: int | None = None
    #: (seconds from the start of a period, replicas), sorted by time.
    schedule: tuple[tuple[float, int], ...] = ()
    period: float | None = None
    interval: float = 30.0
    cooldown: float = 300.0


@dataclass(frozen=True, slots=True)
class NodeSet:
    name: str
    namespace: str
    replicas: int | None
    scaling_mode: str
    node_selector: dict[str, str]
    partition_enabled: bool
    partition_config: str
    extra_conf: str
    capacity: CapacityPolicy
    source: str
    notes: tuple[str, ...] = field(default=())


def duration(text: str) -> float:
    """Seconds from ``90``, ``90s``, ``15m``, ``4h``, ``7d`` or a Slurm duration."""
    text = str(text).strip()
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([smhd]?)", text)
    if m:
        return float(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}[m.group(2)]
    try:
        value = parse_duration(text)
    except (SlurmTimeError, ValueError):
        value = None
    if value is None:
        raise ValueError(f"expected seconds, <n>s/m/h/d or a Slurm duration, got {text!r}")
    return float(value)


def _capacity(doc: YamlDoc, ann: dict[str, str], replicas: int | None, daemon: bool) -> CapacityPolicy:
    vals = {k[len(ANNOTATION):]: v for k, v in ann.items() if k.startswith(ANNOTATION)}

    def err(key: str, message: str) -> InputError:
        return doc.error(message, f"metadata.annotations.{ANNOTATION}{key}")

    for key in vals:
        if key not in _ANNOTATIONS:
            raise err(key, f"unknown gpupool capacity annotation (known: "
                           f"{', '.join(ANNOTATION + a for a in _ANNOTATIONS)})")
    mode = vals.get("mode", "fixed")
    if mode not in MODES:
        raise err("mode", f"expected one of {', '.join(MODES)}, got {mode!r}")
    if daemon and mode != "fixed":
        raise err("mode", "a DaemonSet-mode NodeSet runs on every matching node and cannot be scaled")

    def count(key: str, default: int | None) -> int | None:
        if key not in vals:
            return default
        if not vals[key].strip().isdigit():
            raise err(key, f"expected a whole number of replicas, got {vals[key]!r}")
        return int(vals[key])

    def seconds(key: str, default: float | None) -> float | None:
        if key not in vals:
            return default
        try:
            value = duration(vals[key])
        except ValueError as exc:
            raise err(key, str(exc)) from None
        return value

    lo = count("min", 0)
    hi = count("max", None)
    if hi is not None and hi < lo:
        raise err("max", f"must be at least capacity-min ({lo}), got {hi}")
    schedule: list[tuple[float, int]] = []
    for i, item in enumerate(p for p in vals.get("schedule", "").split(",") if p.strip()):
        if "=" not in item:
            raise err("schedule", f"entry {i + 1}: expected TIME=REPLICAS, got {item.strip()!r}")
        when, n = item.split("=", 1)
        try:
            t = duration(when)
        except ValueError as exc:
            raise err("schedule", f"entry {i + 1}: {exc}") from None
        if not n.strip().isdigit():
            raise err("schedule", f"entry {i + 1}: expected a whole number of replicas, got {n.strip()!r}")
        schedule.append((t, int(n)))
    schedule.sort()
    if mode == "schedule" and not schedule:
        raise err("schedule", "schedule mode needs TIME=REPLICAS entries")
    period = seconds("period", None)
    if period is not None and period <= 0:
        raise err("period", "must be positive")
    if period is not None and schedule and schedule[-1][0] >= period:
        raise err("schedule", f"entry at {schedule[-1][0]:g}s is not inside the period ({period:g}s)")
    interval = seconds("interval", 30.0)
    if interval <= 0:
        raise err("interval", "must be positive")
    return CapacityPolicy(mode, lo, hi, tuple(schedule), period, interval, seconds("cooldown", 300.0))


def parse_nodeset(doc: YamlDoc) -> NodeSet:
    """One NodeSet object; every error names the file, document and field."""
    group, _, version = doc.api_version.rpartition("/")
    if group != GROUP or doc.kind != "NodeSet":
        raise doc.error(f"expected a NodeSet ({GROUP}/v1beta1), got {doc.kind} ({doc.api_version})", "kind")
    if version not in VERSIONS:
        raise doc.error(f"unsupported apiVersion {doc.api_version}; gpupool reads "
                        + ", ".join(f"{GROUP}/{v}" for v in VERSIONS), "apiVersion")
    root = Fields.root(doc)
    meta = root.mapping("metadata", required=True)
    name = meta.string("name", required=True)
    namespace = meta.string("namespace", "default")
    ann = meta.string_map("annotations")
    spec = root.mapping("spec", required=True)
    notes: list[tuple[str, str]] = []
    spec.check_keys(_SPEC_KEYS, not_modelled=_SPEC_NOT_MODELLED, notes=notes, owner=f"NodeSet {name}")
    mode = spec.string("scalingMode", "StatefulSet", choices=("StatefulSet", "DaemonSet"))
    daemon = mode == "DaemonSet"
    replicas = None if daemon else spec.integer("replicas", 1, minimum=0)
    tmpl = spec.mapping_or_empty("template")
    pod_spec = tmpl.mapping_or_empty("spec")
    selector = pod_spec.string_map("nodeSelector")
    part = spec.mapping_or_empty("partition")
    enabled = part.boolean("enabled", True)
    config = part.string("config", "") or ""
    extra = spec.string("extraConf", "") or ""
    capacity = _capacity(doc, ann, replicas, daemon)
    return NodeSet(name, namespace, replicas, mode, selector, bool(enabled), config, extra, capacity,
                   doc.where, tuple(n for _, n in notes))


def load_nodesets(path: str | Path) -> list[NodeSet]:
    """Every NodeSet in a YAML file, or in the ``*.yaml``/``*.yml`` files of a folder."""
    path = Path(path)
    files = sorted(p for p in path.iterdir() if p.suffix in (".yaml", ".yml")) if path.is_dir() else [path]
    out: list[NodeSet] = []
    for file in files:
        for doc in load_yaml_documents(file):
            out.append(parse_nodeset(doc))
    names = [n.name for n in out]
    for n in out:
        if names.count(n.name) > 1:
            raise InputError(n.source, f"NodeSet {n.name!r} is defined more than once")
    return out


def pool_nodesets(pool: Pool, path: str | Path | None = None) -> list[NodeSet]:
    """The NodeSets of a pool: ``path`` when given, else the pool directory's ``slurm-operator/`` folder."""
    if path is None:
        if pool.path is None:
            return []
        path = Path(pool.path) / FOLDER
        if not path.exists():
            return []
    elif not Path(path).exists():
        raise InputError(str(path), "no such NodeSet file or folder")
    return load_nodesets(path)


def member_nodes(nodeset: NodeSet, pool: Pool) -> list[str]:
    """Pool nodes a slurmd pod of ``nodeset`` may run on (its nodeSelector), in pool order."""
    sel = nodeset.node_selector
    return [name for name, node in pool.nodes.items() if all(node.labels.get(k) == v for k, v in sel.items())]


def initial_members(nodeset: NodeSet, pool: Pool) -> list[str]:
    """The nodes lent to Slurm at the start: all matching nodes (DaemonSet) or the first
    ``replicas`` of them (StatefulSet ordinals follow pool order); an error when too few match."""
    nodes = member_nodes(nodeset, pool)
    if nodeset.replicas is None:
        return nodes
    if nodeset.replicas > len(nodes):
        raise InputError(nodeset.source, f"NodeSet {nodeset.name!r} asks for {nodeset.replicas} replicas but only "
                                         f"{len(nodes)} pool nodes match its nodeSelector", field="spec.replicas")
    return nodes[:nodeset.replicas]
