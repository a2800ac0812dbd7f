"""The CPUs and memory slurmctld gives a job that did not ask for them (slurm.conf's
DefCpuPerGPU, DefMemPerGPU, DefMemPerCPU and DefMemPerNode, per partition or cluster-wide).

Why at submit, once: slurmctld stores the filled-in request in the job record (``scontrol show
job`` shows it, and every later scheduling decision reads it), so the policy hands the engine a
workload whose pod sets carry the numbers, and placement, reports and limits read them like any
other request. What a real 22.05.8 did (CR_Core_Memory, 16-core 64000 MB nodes, 2026-12-02;
``tests/differential/test_real_slurm_job_defaults.py``):

* **no default at all**, memory a consumable: a job without ``--mem*`` got the node's whole
  memory (TRES ``mem=62.50G``), so a second such job waited for another node;
* **DefMemPerCPU** (the partition's wins over the cluster's): that many MB per allocated CPU
  (``-c4`` with 8000 → 32000 MB);
* **DefMemPerGPU**: a job with GPUs got that many MB per GPU (``--gres=gpu:2`` and ``--gpus=2``
  with 20000 → 40000 MB), before any DefMemPerCPU; a job without GPUs fell back to DefMemPerCPU;
* **DefMemPerNode**: that many MB on each node (a two-node job asked for it on both);
* **DefCpuPerGPU**: a job with GPUs and neither ``--cpus-per-task`` nor ``--cpus-per-gpu`` got that
  many CPUs per GPU (``--gres=gpu:2`` with 4 → 8 CPUs; ``-c1`` kept 1), and its default memory
  per CPU counts those CPUs.

Where the whole node's memory applies and the partition's nodes differ in RealMemory, each pod
is given the smallest of them (a pod set holds one number, not one per node): exact on the usual
partition of one node type. A job in several partitions is filled in from the first it names.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

from gpupool.errors import InputError
from gpupool.model.slurm import Partition, SlurmConfig
from gpupool.model.workload import PodSet, Workload


@dataclass(frozen=True, slots=True)
class Defaults:
    """One partition's defaults, the cluster's filling in what it does not set (None: unset)."""

    cpu_per_gpu: int | None
    mem_per_gpu: int | None
    mem_per_cpu: int | None
    mem_per_node: int | None
    #: the node memory a job without any default gets (memory a consumable), else None
    whole_node: int | None


def memory_is_consumable(cfg: SlurmConfig) -> bool:
    """Whether SelectTypeParameters makes memory a consumable (CR_Memory, CR_*_Memory)."""
    return any(p.upper() == "CR_MEMORY" or p.upper().endswith("_MEMORY") for p in cfg.select_type_parameters)


def _count(part: Partition, key: str) -> int | None:
    text = part.extra.get(key)
    if text is None:
        return None
    try:
        value = int(str(text).strip())
    except ValueError:
        value = -1
    if value < 0:
        raise InputError(f"slurm.conf: PartitionName={part.name}", f"{key} must be a whole number of "
                         f"{'CPUs' if key == 'DefCpuPerGPU' else 'MB'}, got {text!r}")
    return value


def _global(cfg: SlurmConfig, key: str) -> int | None:
    value = cfg.params.get(key)
    return None if value is None else int(value)  # type: ignore[call-overload]


def partition_defaults(cfg: SlurmConfig, part: Partition, node_memory: list[int]) -> Defaults:
    """The defaults of ``part`` (``node_memory``: its nodes' RealMemory in MB)."""
    # a partition's DefMemPerCPU or DefMemPerNode replaces the cluster's either one (slurmctld
    # keeps one default memory per partition, per CPU or per node)
    p_cpu, p_node = _count(part, "DefMemPerCPU"), _count(part, "DefMemPerNode")
    if p_cpu is not None or p_node is not None:
        mem_cpu, mem_node = p_cpu, p_node
    else:
        mem_cpu, mem_node = _global(cfg, "DefMemPerCPU"), _global(cfg, "DefMemPerNode")
    per_gpu = _count(part, "DefMemPerGPU")
    if per_gpu is None:
        per_gpu = _global(cfg, "DefMemPerGPU")
    cpu_gpu = _count(part, "DefCpuPerGPU")
    if cpu_gpu is None:
        cpu_gpu = _global(cfg, "DefCpuPerGPU")
    whole = min(node_memory) if node_memory and memory_is_consumable(cfg) else None
    # 0 is Slurm's "unset" for these counts
    return Defaults(cpu_gpu or None, per_gpu or None, mem_cpu or None, mem_node or None, whole)


def needs_defaults(wl: Workload) -> bool:
    """Whether any pod set of ``wl`` left CPUs or memory to the cluster."""
    return any(ps.cpu_unset or ps.memory_unset for ps in wl.pod_sets)


def fill_pod_set(ps: PodSet, d: Defaults) -> PodSet:
    """``ps`` with its unset CPUs and memory filled in from ``d`` and the flags cleared."""
    cpu_m = ps.cpu_m
    if ps.cpu_unset and ps.gpus and d.cpu_per_gpu:
        cpu_m = d.cpu_per_gpu * ps.gpus * 1000
    mem = ps.memory_mib
    if ps.memory_unset:
        if ps.gpus and d.mem_per_gpu:
            mem = d.mem_per_gpu * ps.gpus
        elif d.mem_per_cpu:
            mem = d.mem_per_cpu * math.ceil(cpu_m / 1000)
        elif d.mem_per_node:
            # per node; task pods that may share a node split it, as sbatch's --mem does
            mem = d.mem_per_node if ps.one_per_node or ps.count == 1 else math.ceil(d.mem_per_node / ps.count)
        elif d.whole_node is not None:
            mem = d.whole_node if ps.one_per_node or ps.count == 1 else math.ceil(d.whole_node / ps.count)
    return replace(ps, cpu_m=cpu_m, memory_mib=mem, cpu_unset=False, memory_unset=False)


def fill(wl: Workload, d: Defaults) -> Workload:
    """``wl`` with every pod set filled in (``wl`` itself when none left anything unset)."""
    if not needs_defaults(wl):
        return wl
    return replace(wl, pod_sets=tuple(fill_pod_set(ps, d) for ps in wl.pod_sets))
