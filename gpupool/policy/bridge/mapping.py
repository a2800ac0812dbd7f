"""How slurm-bridge turns a Kubernetes workload into Slurm jobs (spec fleet_and_bridge §2.1).

Three questions, each a pure function of the workload:
1. Is it a Kubernetes workload (scheduled by the bridge as external jobs) or a native Slurm
   job (sbatch)? A pool replays both kinds side by side; the rule is an option.
2. Which pods share one Slurm job? The bridge's "Pod grouping" table: a bare Pod, a Job, a
   JobSet and any other controller get one external job per pod; a PodGroup (built-in or
   scheduler-plugins Coscheduling) and a LeaderWorkerSet group get one job for all its pods.
3. Which Slurm job fields does it carry? ``slurmjob.slinky.slurm.net/<suffix>`` keys override
   what the pods imply, which overrides the bridge's defaults (its default partition).

The translated workloads are ordinary :class:`Workload` records, so the unmodified Slurm
policy can decide for them.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

from gpupool.formats.slurm_features import parse_constraint
from gpupool.model.workload import GANG_ALL, KIND_SERVICE, Workload

#: Slurm job fields a workload may set (bridge docs: docs/workload.md, "Annotations").
PREFIX = "slurmjob.slinky.slurm.net/"
#: Coscheduling (scheduler-plugins) and Kueue pod-group membership labels; a built-in
#: PodGroup (scheduling.k8s.io/v1alpha2) is named by this gpupool label on its pods' workload.
POD_GROUP_LABELS = ("scheduling.x-k8s.io/pod-group", "kueue.x-k8s.io/pod-group-name",
                    "scheduling.k8s.io/pod-group")
#: Suffixes read and applied; the others are accepted and ignored (documented).
APPLIED = ("account", "qos", "partition", "priority", "timelimit", "exclusive", "constraints", "job-name")
IGNORED = ("group-id", "user-id", "wckey", "licenses", "reservation", "cpu-per-task", "gres",
           "max-nodes", "min-nodes", "mem-per-node")

#: Which workloads the bridge schedules: "auto" (services, workloads read from Kubernetes
#: manifests and workloads carrying slurmjob annotations), "all", or "services".
KUBERNETES_RULES = ("auto", "all", "services")

#: Grouping kinds.
PER_POD = "per-pod"
GROUP = "group"


class BridgeMappingError(ValueError):
    """A slurmjob annotation the bridge (and Slurm) would refuse."""


def is_kubernetes(wl: Workload, rule: str) -> bool:
    """Whether ``wl`` reaches Slurm through the bridge rather than through sbatch."""
    if rule == "all":
        return True
    if wl.kind == KIND_SERVICE:
        return True
    if rule == "services":
        return False
    if any(k.startswith(PREFIX) for k in wl.labels):
        return True
    # kube_workloads names its origin "file (document N…)"; sbatch scripts and traces do not.
    return "(document " in wl.source


def grouping(wl: Workload) -> str:
    """``GROUP`` for a PodGroup or a LeaderWorkerSet group, else ``PER_POD``."""
    if any(wl.labels.get(k) for k in POD_GROUP_LABELS):
        return GROUP
    names = tuple(ps.name for ps in wl.pod_sets)
    if wl.kind == KIND_SERVICE and names and names[0] == "leader" and set(names) <= {"leader", "worker"}:
        return GROUP  # LeaderWorkerSet: one group is one job
    return PER_POD


@dataclass(frozen=True, slots=True)
class SlurmFields:
    """What the annotation source says about the Slurm job (None: not set)."""

    account: str | None = None
    qos: str | None = None
    partition: str | None = None
    priority: int | None = None
    time_limit: float | None = None
    exclusive: bool | None = None
    constraint: str | None = None
    name: str | None = None


def slurm_fields(wl: Workload) -> SlurmFields:
    """Read the ``slurmjob.slinky.slurm.net/*`` keys (from the workload's labels)."""
    vals = {k[len(PREFIX):]: v for k, v in wl.labels.items() if k.startswith(PREFIX)}
    unknown = sorted(set(vals) - set(APPLIED) - set(IGNORED))
    if unknown:
        raise BridgeMappingError(f"{wl.source or wl.name}: unknown slurm-bridge annotation(s) "
                                 + ", ".join(PREFIX + u for u in unknown))
    prio = vals.get("priority")
    if prio is not None and not prio.strip().isdigit():
        raise BridgeMappingError(f"{wl.source or wl.name}: {PREFIX}priority: expected a whole number, got {prio!r}")
    tl = vals.get("timelimit")
    minutes = None
    if tl is not None:
        try:
            minutes = float(tl)
        except ValueError:
            minutes = -1.0
        if not minutes > 0 or math.isinf(minutes):
            raise BridgeMappingError(f"{wl.source or wl.name}: {PREFIX}timelimit: expected minutes > 0, got {tl!r}")
    constraint = vals.get("constraints") or None
    if constraint is not None:
        try:
            parse_constraint(constraint)
        except ValueError as exc:
            raise BridgeMappingError(f"{wl.source or wl.name}: {PREFIX}constraints: {exc}") from None
    ex = vals.get("exclusive")
    if ex is not None and ex.lower() not in ("true", "false"):
        raise BridgeMappingError(f"{wl.source or wl.name}: {PREFIX}exclusive: expected \"true\" or \"false\", got {ex!r}")
    return SlurmFields(
        account=vals.get("account") or None, qos=vals.get("qos") or None,
        partition=vals.get("partition") or None,
        priority=int(prio) if prio is not None else None,
        time_limit=minutes * 60.0 if minutes is not None else None,
        exclusive=None if ex is None else ex.lower() == "true",
        constraint=constraint, name=vals.get("job-name") or None)


@dataclass(frozen=True, slots=True)
class BridgeJob:
    """One external Slurm job: the pods ``first .. first+count-1`` of real job ``real_id``."""

    vid: int
    real_id: int
    first: int
    count: int
    wl: Workload
    exclusive: bool


#: Virtual ids of per-pod jobs after the first pod: far above any real job id.
EXTRA_BASE = 1 << 40
MAX_PODS_PER_JOB = 1 << 16


def extra_id(real_id: int, k: int) -> int:
    """The Slurm job id of pod ``k`` (k >= 1) of a per-pod workload."""
    return EXTRA_BASE + real_id * MAX_PODS_PER_JOB + k


def translate(wl: Workload, *, default_partition: str | None, exclusive_default: bool,
              fifo_priority: int | None) -> list[BridgeJob]:
    """The external jobs the bridge submits for ``wl``, in pod order.

    Each job asks for whole nodes (``exclusive``) unless the annotation says ``"false"``;
    group jobs and per-pod jobs alike place one pod per node (bridge PR #14: packing pods of
    a group was never merged). ``fifo_priority`` pins the priority of extra per-pod jobs to
    their workload's when the Slurm policy orders by job id (priority/basic).
    """
    f = slurm_fields(wl)
    exclusive = exclusive_default if f.exclusive is None else f.exclusive
    base = replace(
        wl, partition=f.partition or wl.partition or default_partition, qos=f.qos or wl.qos,
        account=f.account or wl.account, priority=f.priority if f.priority is not None else wl.priority,
        time_limit=f.time_limit if f.time_limit is not None else wl.time_limit,
        constraint=f.constraint or wl.constraint, name=f.name or wl.name, gang=GANG_ALL, dependency=None)
    if len(wl.pod_sets) == 0:
        return []
    if grouping(wl) == GROUP:
        pod_sets = tuple(replace(ps, one_per_node=True, exclusive=exclusive, min_count=None)
                         for ps in wl.pod_sets)
        return [BridgeJob(wl.id, wl.id, 0, wl.pod_count, replace(base, pod_sets=pod_sets), exclusive)]
    out = []
    k = 0
    for ps in wl.pod_sets:
        one = replace(ps, count=1, one_per_node=True, exclusive=exclusive, min_count=None)
        for _ in range(ps.count):
            if k >= MAX_PODS_PER_JOB:
                raise BridgeMappingError(f"{wl.source or wl.name}: more than {MAX_PODS_PER_JOB} pods")
            vid = wl.id if k == 0 else extra_id(wl.id, k)
            extra = {}
            if k:
                extra = {"array_job_id": wl.id, "array_task_id": k}
                if base.priority is None and fifo_priority is not None:
                    extra["priority"] = fifo_priority
            out.append(BridgeJob(vid, wl.id, k, 1, replace(base, id=vid, pod_sets=(one,), **extra), exclusive))
            k += 1
    return out
