"""Workloads and services: what users ask the pool to run.

A Workload is the input, immutable once loaded: pod sets, a gang rule, limits and the
simulated truth (its actual runtime and how it ends). The engine keeps per-run state in its
own ``Job`` records, so one workload list can be replayed under many policies.
"""
from __future__ import annotations

from dataclasses import dataclass, field

#: Gang rules: every pod must be placed before any runs ("all"), at least ``min_count``
#: ("min"), or each pod runs on its own ("none").
GANG_ALL = "all"
GANG_MIN = "min"
GANG_NONE = "none"
GANG_RULES = (GANG_ALL, GANG_MIN, GANG_NONE)

#: How a workload ends when it runs its whole runtime (TIMEOUT, PREEMPTED and NODE_FAIL
#: come from the run, not from the workload).
OUTCOMES = ("COMPLETED", "FAILED", "CANCELLED")

KIND_BATCH = "batch"
KIND_SERVICE = "service"


@dataclass(frozen=True, slots=True)
class PodSet:
    """``count`` identical pods (Slurm: nodes or tasks; Kubernetes: pods) with per-pod requests.

    Requests are canonical ints: millicores, MiB, device counts. ``one_per_node`` is Slurm's
    ``--nodes``: each pod needs a node of its own. ``exclusive`` takes whole nodes.
    """

    name: str = "main"
    count: int = 1
    cpu_m: int = 1000
    memory_mib: int = 0
    gpus: int = 0
    gpu_type: str | None = None
    extra: tuple[tuple[str, int], ...] = ()
    min_count: int | None = None
    one_per_node: bool = False
    exclusive: bool = False
    node_selector: tuple[tuple[str, str], ...] = ()
    tolerations: tuple[tuple[tuple[str, str], ...], ...] = ()
    topology_required: str | None = None
    topology_preferred: str | None = None
    topology_unconstrained: bool = False

    @property
    def total_gpus(self) -> int:
        return self.count * self.gpus

    def requests(self) -> dict[str, int]:
        """Per-pod requests as a resource map (Kubernetes names)."""
        from gpupool.model.resources import CPU, GPU, MEMORY

        out = {CPU: self.cpu_m, MEMORY: self.memory_mib}
        if self.gpus:
            out[GPU] = self.gpus
        out.update(dict(self.extra))
        return out


@dataclass(slots=True)
class Workload:
    """One job as submitted. Times are float seconds from the start of the run."""

    id: int
    name: str
    pod_sets: tuple[PodSet, ...]
    submit_time: float = 0.0
    runtime: float = 0.0
    time_limit: float | None = None
    outcome: str = "COMPLETED"
    gang: str = GANG_ALL
    checkpoint_interval: float | None = None
    kind: str = KIND_BATCH
    # Slurm side
    user: str | None = None
    account: str | None = None
    qos: str | None = None
    partition: str | None = None
    nice: int = 0
    dependency: str | None = None
    begin_time: float | None = None
    requeue: bool = True
    signal: str | None = None
    array_job_id: int | None = None
    array_task_id: int | None = None
    #: ``--array=…%N``: at most N tasks of the array run at once.
    array_max_running: int | None = None
    output: str | None = None
    #: ``--time-min``: backfill may start the job with a limit cut down to this.
    time_min: float | None = None
    #: ``--constraint`` (node features), ``--nodelist`` and ``--exclude``, as Slurm text.
    constraint: str | None = None
    nodelist: str | None = None
    exclude: str | None = None
    # Kubernetes side
    namespace: str | None = None
    queue_name: str | None = None
    priority_class: str | None = None
    priority: int | None = None
    labels: dict[str, str] = field(default_factory=dict)
    #: Where it came from (file, file:line, trace row) for messages.
    source: str = ""

    @property
    def total_gpus(self) -> int:
        return sum(ps.count * ps.gpus for ps in self.pod_sets)

    @property
    def pod_count(self) -> int:
        return sum(ps.count for ps in self.pod_sets)

    @property
    def queue(self) -> str | None:
        """The queue it waits in: a LocalQueue for Kubernetes workloads, else the partition."""
        return self.queue_name or self.partition


@dataclass(slots=True)
class Service:
    """An indefinite, traffic-driven service: ``replicas`` copies of one pod.

    Traffic and autoscaling come later; for now a service is expanded into one
    workload per replica (as Kueue admits each Deployment replica on its own).
    """

    name: str
    pod: PodSet
    replicas: int = 1
    min_replicas: int | None = None
    max_replicas: int | None = None
    start_time: float = 0.0
    end_time: float | None = None
    startup_time: float = 0.0
    namespace: str | None = None
    queue_name: str | None = None
    priority_class: str | None = None
    priority: int | None = None
    user: str | None = None
    account: str | None = None
    qos: str | None = None
    partition: str | None = None
    labels: dict[str, str] = field(default_factory=dict)
    source: str = ""
