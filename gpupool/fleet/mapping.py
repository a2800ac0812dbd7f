"""How a service replica becomes a workload each policy understands.

- Kubernetes side (fifo, kueue, kueue-gang, bridge, operator): a replica is a plain pod, one
  single-pod workload in the service's LocalQueue with its priority class (Kueue's pod /
  Deployment integration). A crashing container restarts **in place**: the pod keeps its node,
  its GPUs and its quota and is only unready (CrashLoopBackOff, then startup). A preempted
  (evicted) pod is deleted and its ReplicaSet creates a new one: the replica's workload ends
  PREEMPTED and the controller submits a replacement at its next decision.
- Slurm side (``--policy slurm``): a replica is a Slurm job in a serving partition and QOS,
  under an account and user, with no time limit of its own beyond the configured one (default:
  the partition's MaxTime; ``UNLIMITED`` only where the partition allows it). A crash ends the
  job (FAILED) and the replica is **requeued**: its replacement job, same name, is eligible
  after the CrashLoopBackOff delay; it queues for GPUs like any job (QOS preemption included).

The Slurm defaults come from ``spec.services.slurm`` of ``gpupool.yaml`` (see
``gpupool.formats.pool_settings``) and can be overridden per service.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from gpupool.model.pool import Pool
from gpupool.model.workload import GANG_NONE, KIND_SERVICE, Service, Workload

RESTART_INPLACE = "inplace"
RESTART_REQUEUE = "requeue"
RESTART_MODES = ("auto", RESTART_INPLACE, RESTART_REQUEUE)

#: Policies that make Slurm's decisions for Slurm jobs (a replica is an sbatch'd job there).
SLURM_POLICIES = ("slurm",)


@dataclass(frozen=True)
class SlurmServing:
    """Where service replicas go under Slurm (``spec.services.slurm`` in gpupool.yaml)."""

    partition: str | None = None
    qos: str | None = None
    account: str | None = None
    user: str | None = None
    #: Seconds; None = the partition's MaxTime (or UNLIMITED when it has none); inf = UNLIMITED.
    time_limit: float | None = None


@dataclass(frozen=True)
class ServiceSettings:
    """Pool-wide service settings: the Slurm mapping and the restart model."""

    slurm: SlurmServing = SlurmServing()
    restart: str = "auto"
    #: Traffic for services that name none.
    default_traffic: str | None = None


def family(policy: str) -> str:
    """"slurm" when Slurm decides for replicas as Slurm jobs, else "kubernetes"."""
    return "slurm" if policy in SLURM_POLICIES else "kubernetes"


def restart_mode(policy: str, settings: ServiceSettings) -> str:
    if settings.restart != "auto":
        return settings.restart
    return RESTART_REQUEUE if family(policy) == "slurm" else RESTART_INPLACE


def replica_workload(svc: Service, job_id: int, name: str, now: float, policy: str,
                     settings: ServiceSettings, pool: Pool, begin: float | None = None) -> Workload:
    """One replica of ``svc`` as submitted at ``now`` (eligible at ``begin`` when restarting)."""
    slurm = settings.slurm
    time_limit = None
    partition = svc.partition or slurm.partition
    if family(policy) == "slurm":
        time_limit = _slurm_limit(slurm.time_limit, partition, pool)
    return Workload(
        id=job_id, name=name, pod_sets=(svc.pod,), submit_time=now, runtime=math.inf,
        time_limit=time_limit, outcome="COMPLETED", gang=GANG_NONE, kind=KIND_SERVICE,
        user=svc.user or slurm.user, account=svc.account or slurm.account, qos=svc.qos or slurm.qos,
        partition=partition, begin_time=begin, requeue=True,
        ends_on_eviction=family(policy) != "slurm",
        namespace=svc.namespace, queue_name=svc.queue_name, priority_class=svc.priority_class,
        priority=svc.priority, labels={**svc.labels, "gpupool.io/service": svc.name},
        source=svc.source or f"service {svc.name}",
    )


def _slurm_limit(configured: float | None, partition: str | None, pool: Pool) -> float | None:
    if configured is not None:
        return None if math.isinf(configured) else configured
    cfg = pool.slurm
    if cfg is None:
        return None
    part = cfg.partitions.get(partition) if partition else next(
        (p for p in cfg.partitions.values() if p.default), None)
    return None if part is None else part.max_time
