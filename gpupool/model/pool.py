"""The one pool both worlds share: nodes, their devices and their topology.

Slurm's and Kueue's own objects (partitions, QOS, ClusterQueues, …) live in
``model.slurm`` and ``model.kueue``; this module holds only what is physically there.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from gpupool.model.kueue import KueueConfig
    from gpupool.model.slurm import SlurmConfig

#: Node label keys of the default topology levels (outermost first). A pool's Kueue
#: Topology object, when present, replaces them.
DEFAULT_TOPOLOGY_LEVELS: tuple[str, ...] = (
    "topology.gpupool.io/block",
    "topology.gpupool.io/rack",
    "kubernetes.io/hostname",
)
HOSTNAME_LABEL = "kubernetes.io/hostname"
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"


@dataclass(frozen=True, slots=True)
class Gpu:
    """One schedulable device: a whole GPU or one MIG slice (a separate device, as NVML lists it).

    ``index`` is the node-local device index Slurm and CUDA use; ``parent`` is the physical
    GPU index a MIG slice lives on (None for whole GPUs).
    """

    index: int
    type: str | None = None
    mig_profile: str | None = None
    parent: int | None = None
    file: str | None = None
    cores: tuple[int, ...] = ()


@dataclass(slots=True)
class Node:
    """A host. Quantities are canonical ints: CPUs as a count, memory in MiB."""

    name: str
    cpus: int
    memory_mib: int
    gpus: tuple[Gpu, ...] = ()
    sockets: int = 1
    cores_per_socket: int = 0
    threads_per_core: int = 1
    weight: int = 1
    features: tuple[str, ...] = ()
    state: str = "UNKNOWN"
    labels: dict[str, str] = field(default_factory=dict)
    taints: tuple[dict, ...] = ()
    #: Extra countable resources (Kubernetes extended resources other than GPUs).
    extra: dict[str, int] = field(default_factory=dict)
    source: str = ""
    #: slurm.conf NodeName keys gpupool keeps but does not act on (NodeAddr, TmpDisk, …),
    #: as written, so a rendered slurm.conf still carries them.
    slurm_extra: dict[str, str] = field(default_factory=dict)

    @property
    def gpu_count(self) -> int:
        return len(self.gpus)

    @property
    def gpu_type(self) -> str | None:
        """The node's GPU type when all its devices share one (None when untyped or mixed)."""
        types = {g.type for g in self.gpus}
        return types.pop() if len(types) == 1 else None

    @property
    def gres_topology(self) -> bool:
        """Whether any GPU carries a type or gres.conf ``Cores=`` (Slurm's GRES ``topo_cnt``):
        cons_tres then deals a job's GPUs through ``_set_job_bits1``, which caps a node's GPUs
        by the CPUs it was given, instead of ``_get_job_cnt``."""
        return any(g.type or g.cores for g in self.gpus)

    @property
    def cpu_millicores(self) -> int:
        return self.cpus * 1000


@dataclass(slots=True)
class Pool:
    """Everything gpupool knows about one pool, loaded from a directory of real files.

    ``slurm`` and ``kueue`` are None when the directory has no files for that world.
    ``not_modelled`` lists valid keys gpupool keeps but does not act on, as
    ``(source, key)`` pairs, so ``validate`` can show them once.
    """

    name: str
    nodes: dict[str, Node] = field(default_factory=dict)
    topology_levels: tuple[str, ...] = DEFAULT_TOPOLOGY_LEVELS
    slurm: SlurmConfig | None = None
    kueue: KueueConfig | None = None
    sources: list[str] = field(default_factory=list)
    not_modelled: list[tuple[str, str]] = field(default_factory=list)
    #: Assumptions gpupool made while loading (e.g. GPU counts taken from slurm.conf because
    #: gres.conf relies on AutoDetect), shown by ``validate``.
    notes: list[str] = field(default_factory=list)
    #: Workload spec (see ``gpupool.workload.sources``) used when none is given.
    default_workload: str | None = None
    #: The pool directory (None for pools built in code).
    path: str | None = None

    @property
    def gpu_count(self) -> int:
        return sum(n.gpu_count for n in self.nodes.values())

    def gpu_types(self) -> dict[str, int]:
        """GPU count per type (``"untyped"`` for devices without a type)."""
        out: dict[str, int] = {}
        for node in self.nodes.values():
            for gpu in node.gpus:
                key = gpu.type or "untyped"
                out[key] = out.get(key, 0) + 1
        return out
