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

* ``--mem=0``: the node's whole memory whatever the defaults;
* **MaxMemPerNode** (the partition's, else the cluster's; ``_memory_limits``): sbatch refused a job asking more on a node ("Memory required
  by task is not available", also for ``--mem=0`` and ``--mem-per-cpu`` × CPUs), and one that
  no default covers, which would have taken the whole node ("Requested partition configuration
  not available now");
* **MaxMemPerCPU** (likewise): CPUs per task raised by the factor that brings memory per CPU
  under it (``_per_cpu_request``), and a per-node amount's CPUs raised to what it needs at the
  limit in whole tasks (``_cpus_for_node_memory``); ignored beside MaxMemPerNode;
* DefMemPerCPU and DefMemPerNode both set: DefMemPerNode wins.

Where the whole node's memory applies and the partition's nodes differ in RealMemory, the pod set
carries the smallest of them as a lower bound and ``PodSet.memory_all``: placement then takes only
nodes with none of their memory allocated and gives each all of its own (a real 22.05.8 held
1000000 MB on a 1000000 MB node and 500000 on a 500000 MB one for the same ``--mem=0``, probe
p126). A job in several partitions is filled in from the first it names.
Against MaxMemPerNode a per-node amount (``--mem``, DefMemPerNode) counts whole and a per-CPU or
per-GPU one per task, as a real 22.05.8 refused ``-n4 --mem=40000`` under MaxMemPerNode=30000 but
ran ``-n4 --mem-per-cpu=9000`` (36000 MB on one node). ``--mem-per-cpu`` follows CPUs filled in
from DefCpuPerGPU (``--gres=gpu:2 --mem-per-cpu=1000`` under DefCpuPerGPU=4: 8 CPUs, 8000 MB).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

from gpupool.errors import InputError
from gpupool.formats.hostlist import expand_hostlist
from gpupool.formats.slurm_conf import is_unlimited
from gpupool.model.slurm import Partition, SlurmConfig
from gpupool.model.workload import GANG_MIN, PodSet, Workload
from gpupool.policy.slurm import jobinfo
from gpupool.policy.slurm.jobinfo import raised_by_list, raised_least, request_totals, requested_partitions
from gpupool.policy.slurm.gpu_walk import tasks_walk, walk_form, walk_least
from gpupool.policy.slurm.min_nodes import partitions_min_nodes, per_node_pods, pod_tasks, raise_node_count


@dataclass(frozen=True, slots=True)
class Defaults:
    """One partition's defaults, the cluster's filling in what it does not set (None: unset)."""

    cpu_per_gpu: int | None
    mem_per_gpu: int | None
    mem_per_cpu: int | None
    mem_per_node: int | None
    #: the node memory a job without any default gets (memory a consumable), else None
    whole_node: int | None
    #: MaxMemPerNode (None: no limit)
    max_mem_per_node: int | None = None
    #: MaxMemPerCPU (None: no limit)
    max_mem_per_cpu: int | None = None
    #: RealMemory of the partition's first node in slurm.conf's order (ReqTRES counts it per
    #: node for a job no memory request or default covers, whatever the select plugin)
    first_node_memory: int = 0
    #: whether the partition's nodes differ in RealMemory (the whole node's memory is then no
    #: one number: ``PodSet.memory_all``)
    uneven_memory: bool = False


#: sbatch's refusals (22.05.8's wording)
MSG_MEMORY = "Memory required by task is not available"
MSG_PART_CONFIG = "Requested partition configuration not available now"


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


def partition_defaults(cfg: SlurmConfig, part: Partition, node_memory: list[int], first_node_memory: int = 0) -> Defaults:
    """The defaults of ``part`` (``node_memory``: its nodes' RealMemory in MB;
    ``first_node_memory``: that of the first of them in slurm.conf's order)."""
    # a partition's DefMemPerCPU or DefMemPerNode replaces the cluster's either one (slurmctld
    # keeps one default memory per partition, per CPU or per node)
    mem_cpu, mem_node = _pair(cfg, part, ("DefMemPerCPU", "DefMemPerNode"), _count)
    if mem_node:
        # both set (one line, or a partition line under a DEFAULT one): DefMemPerNode wins, as
        # on a real 22.05.8 ("DefMemPerCPU ignored, since it's mutually exclusive with
        # DefMemPerNode"; -c4 got 30000M, not 4000M)
        mem_cpu = None
    per_gpu = _count(part, "DefMemPerGPU")
    if per_gpu is None:
        per_gpu = _global(cfg, "DefMemPerGPU")
    cpu_gpu = _count(part, "DefCpuPerGPU")
    if cpu_gpu is None:
        cpu_gpu = _global(cfg, "DefCpuPerGPU")
    whole = min(node_memory) if node_memory and memory_is_consumable(cfg) else None
    max_node, max_cpu = _memory_limits(cfg, part)
    return Defaults(cpu_gpu or None, per_gpu or None, mem_cpu or None, mem_node or None, whole, max_node, max_cpu,
                    first_node_memory, whole is not None and whole != max(node_memory))


def _limit(part: Partition, key: str) -> int | None:
    """A partition's MaxMemPerNode or MaxMemPerCPU: None unset, 0 UNLIMITED, else MB."""
    text = part.extra.get(key)
    if text is not None and is_unlimited(text):
        return 0
    return _count(part, key)


def _pair(cfg: SlurmConfig, part: Partition, keys: tuple[str, str], read) -> tuple:
    """The values of two keys slurmctld keeps as one setting per partition: the partition's
    own when its line sets either key (``read(part, key)``), else the cluster's."""
    own = tuple(read(part, key) for key in keys)
    if any(value is not None for value in own):
        return own
    return tuple(_global(cfg, key) for key in keys)


def _memory_limits(cfg: SlurmConfig, part: Partition) -> tuple[int | None, int | None]:
    """(MaxMemPerNode, MaxMemPerCPU) for jobs in ``part``, None for no limit.

    slurmctld keeps one memory limit per partition, per node or per CPU: the partition's own
    when its line sets either key, else the cluster's. A real 22.05.8 refused ``--mem=30000`` in a
    partition with MaxMemPerNode=20000 and ran it in one with 40000 under a cluster-wide 20000;
    a partition's MaxMemPerCPU=4000 under a cluster-wide MaxMemPerNode=30000 ran ``--mem=40000``
    on 10 CPUs. MaxMemPerCPU is ignored beside MaxMemPerNode (a real 22.05.8 kept ``-c2
    --mem-per-cpu=5000`` on 2 CPUs with both set cluster-wide). 0 is Slurm's "unset".
    """
    max_node, max_cpu = _pair(cfg, part, ("MaxMemPerNode", "MaxMemPerCPU"), _limit)
    if max_node:
        return max_node, None
    return None, max_cpu or None


def defaults_for(cfg: SlurmConfig, node_memory: dict[str, int], wl: Workload, cache: dict) -> Defaults | None:
    """The defaults ``wl`` gets: those of the first partition it names, else of the default
    partition; None when that partition does not exist (the submission is refused anyway).
    ``node_memory``: RealMemory per node name; ``cache``: partition name -> its defaults."""
    names = requested_partitions(wl)
    part = cfg.partitions.get(names[0]) if names else cfg.default_partition()
    if part is None:
        return None
    got = cache.get(part.name)
    if got is None:
        memory = [node_memory[n] for n in part.nodes if n in node_memory]
        members = set(part.nodes)
        # slurmctld takes the lowest node index of the partition's bitmap: slurm.conf's order
        # (``node_memory``'s), not the order of the partition's Nodes= list
        first = next((mem for name, mem in node_memory.items() if name in members), 0)
        got = cache[part.name] = partition_defaults(cfg, part, memory, first)
    return got


def _spread_as_submitted(ps: PodSet) -> bool:
    """Whether ``ps`` spreads its ``--gpus`` and still holds the even share as submitted
    (``PodSet.spread_gpus``; ``_spread_form`` gives it the Slurm policy's form), or is walked
    (``PodSet.walk_gpus``: one GPU a pod already, its memory and CPUs per GPU still to follow
    each node's GPUs)."""
    return ps.spread_gpus and ps.one_per_node and (ps.gpus > 1 or ps.walk_gpus)


def needs_defaults(wl: Workload, d: Defaults) -> bool:
    """Whether any pod set of ``wl`` left CPUs or memory to the cluster (or, under ``d``'s
    MaxMemPerCPU, asks memory per CPU or per node that may raise its CPUs)."""
    per_cpu = d.max_mem_per_cpu is not None
    per_gpu = bool(d.mem_per_gpu)
    return any(ps.cpu_unset or ps.memory_unset or ps.memory_whole_node or (per_cpu and ps.memory_per != "gpu")
               or (ps.split_tasks and not ps.split) or _spread_as_submitted(ps)
               or (ps.exclusive and ps.memory_per in ("cpu", "gpu")) or (per_gpu and ps.gpus and ps.memory_per != "gpu")
               or (ps.gpus and not ps.mem_per_gpu and ps.memory_per == "gpu" and d.whole_node is not None)
               for ps in wl.pod_sets)


def _per_node(ps: PodSet, mem: int) -> int:
    """A per-node amount as one pod's: task pods that may share a node split it, as sbatch's
    ``--mem`` does."""
    return mem if ps.one_per_node or ps.count == 1 else math.ceil(mem / ps.count)


def _default_cpus(ps: PodSet, d: Defaults) -> int | None:
    """DefCpuPerGPU's CPUs for a pod that gave none and has GPUs, else None."""
    if ps.cpu_unset and ps.gpus and d.cpu_per_gpu:
        return d.cpu_per_gpu * ps.gpus
    return None


def _cpu_m(ps: PodSet, d: Defaults) -> int:
    cpus = _default_cpus(ps, d)
    return ps.cpu_m if cpus is None else cpus * 1000


def _memory(ps: PodSet, cpu_m: int, d: Defaults) -> tuple[int, str]:
    """One pod's memory with ``cpu_m`` CPUs, and what it is asked per: "cpu" or "gpu" (so one
    pod's share), "node" (per node: task pods that may share a node split it), "whole"
    (``--mem=0``) or "whole-default" (no default applies)."""
    if ps.memory_whole_node:
        return (0 if d.whole_node is None else _per_node(ps, d.whole_node)), "whole"
    if not ps.memory_unset:
        if ps.memory_per == "cpu":
            return _per_cpu_request(ps, d).memory_mib, "cpu"
        return ps.memory_mib, ps.memory_per or "node"
    if ps.gpus and d.mem_per_gpu:
        return d.mem_per_gpu * ps.gpus, "gpu"
    if d.mem_per_cpu:
        return d.mem_per_cpu * math.ceil(cpu_m / 1000), "cpu"
    if d.mem_per_node:
        return _per_node(ps, d.mem_per_node), "node"
    if d.whole_node is not None:
        return _per_node(ps, d.whole_node), "whole-default"
    return ps.memory_mib, "node"  # memory is no consumable: nothing to fill in


def _per_cpu_request(ps: PodSet, d: Defaults) -> PodSet:
    """A ``--mem-per-cpu`` pod filled in: slurmctld first raises CPUs per task by the factor
    ceil(memory per CPU / MaxMemPerCPU) and divides the memory per CPU by it (at submit), then
    DefCpuPerGPU replaces the CPUs of a job that gave none, and memory is per allocated CPU.
    A real 22.05.8 at MaxMemPerCPU=4000: ``-c1 --mem-per-cpu=9000`` ran on 3 CPUs at 3000,
    ``-c2`` on 6; with DefCpuPerGPU=4 too, ``--gres=gpu:2 --mem-per-cpu=5000`` on 8 CPUs at 2500."""
    cpus = max(1, math.ceil(ps.cpu_m / 1000))
    per_cpu = ps.memory_mib // cpus  # sbatch stored --mem-per-cpu × CPUs
    limit = d.max_mem_per_cpu
    if limit and per_cpu > limit:
        factor = math.ceil(per_cpu / limit)
        cpus *= factor
        per_cpu = math.ceil(per_cpu / factor)
    cpus = _default_cpus(ps, d) or cpus
    return replace(ps, cpu_m=cpus * 1000, memory_mib=cpus * per_cpu, cpu_unset=False,
                   memory_unit=("cpu", per_cpu) if ps.exclusive else None, memory_per_cpu=per_cpu)


def fill_pod_set(ps: PodSet, d: Defaults) -> PodSet:
    """``ps`` with its unset CPUs and memory filled in from ``d`` and the flags cleared (and an
    exclusive pod's ``memory_unit`` set where its memory is per CPU or per GPU, and
    ``memory_fit`` where DefMemPerGPU asks more free memory than the pod holds). A pod that
    carries either was filled already and is returned as it is."""
    if ps.memory_unit is not None or ps.memory_fit or (ps.split and not ps.walk_gpus):
        return ps  # (a walked split form is one task a pod from the start: ``gpu_walk.walk_form``)
    filled = _fit_under_gpu_default(ps, _filled(ps, d), d)
    filled = _split_form(ps, filled, d) if ps.split_tasks else filled
    if _spread_as_submitted(ps):
        filled = _spread_form(ps, filled, d)
    per_gpu = _memory_per_gpu(ps, d)
    return replace(filled, mem_per_gpu=per_gpu) if per_gpu != filled.mem_per_gpu else filled


def _memory_per_gpu(asked: PodSet, d: Defaults) -> int:
    """The MB per GPU select/cons_tres divides a node's free memory by for ``asked`` (as
    submitted): its ``--mem-per-gpu``, else DefMemPerGPU, whatever other memory it asked (a GPU
    job keeps the default per GPU beside ``--mem``); 0 without GPUs or where memory is no
    consumable."""
    if not asked.gpus or d.whole_node is None:
        return 0
    if asked.memory_per == "gpu" and not asked.memory_unset and not asked.memory_whole_node:
        return asked.memory_mib // asked.gpus
    return d.mem_per_gpu or 0


def _split_form(asked: PodSet, ps: PodSet, d: Defaults) -> PodSet:
    """A split pod set (``PodSet.split_tasks``; ``asked`` as submitted, ``ps`` filled in) as the
    Slurm policy holds it: one task per pod, the least a node takes, with one task's GPUs where
    they are per task and one task's memory where it follows the tasks (per CPU, or per GPU of
    GPUs per task: ``memory_per`` "task"), else memory per node as asked; select/cons_tres then
    gives each node its tasks
    (``split_tasks.py``). Where the defaults changed the pod's CPUs (DefCpuPerGPU,
    MaxMemPerCPU), where a node's memory under MaxMemPerCPU needs more CPUs than one task
    has, or where its memory needs more free than it holds (DefMemPerGPU), it stays even:
    those combinations were not probed."""
    cpt = asked.cpus_per_task
    source = _memory(asked, asked.cpu_m, d)[1]
    # a node's memory under MaxMemPerCPU may need more CPUs than one task has
    per_node_cap = (d.max_mem_per_cpu and source in ("node", "whole", "whole-default")
                    and math.ceil(ps.memory_mib / d.max_mem_per_cpu) > (cpt or 0))
    # (a walked job's free memory for DefMemPerGPU is one GPU's, which ``_spread_form`` keeps)
    fit = ps.memory_fit and not asked.walk_gpus
    if (cpt and source == "cpu" and d.max_mem_per_cpu and ps.cpu_m > asked.cpu_m and not ps.cpu_m % asked.cpu_m
            and not asked.gpus and not asked.exclusive and not fit and not per_node_cap):
        return _raised_split_form(asked, ps, cpt)
    # (an exclusive range's nodes are whole, their memory per CPU too: ``memory_unit`` stays)
    if (not cpt or ps.cpu_m != asked.cpu_m or fit or (ps.memory_unit is not None and not asked.exclusive)
            or per_node_cap):
        return replace(ps, split_tasks=0, split_gpus=False)
    tasks = asked.cpu_m // (cpt * 1000)  # the even share's tasks per pod
    mem, per = ps.memory_mib, ps.memory_per
    if source == "cpu" or (source == "gpu" and ps.split_gpus):  # memory that follows the tasks
        mem, per = mem // tasks, "task"
    gpus = ps.gpus // tasks if ps.split_gpus else ps.gpus
    return replace(ps, cpu_m=cpt * 1000, memory_mib=mem, memory_per=per, gpus=gpus)


def _raised_split_form(asked: PodSet, ps: PodSet, cpt: int) -> PodSet:
    """The split form of a pod set whose ``--mem-per-cpu`` MaxMemPerCPU raised: slurmctld
    multiplies the CPUs per task by the factor and divides the memory per CPU by it, while
    the least CPUs a node takes stay one task's as asked (``PodSet.split_min_cpus``). A real
    22.05.8 at MaxMemPerCPU=4000 on 16-core nodes (probe p148) ran ``-N2 -n6 --mem-per-cpu=8000``
    as 10 + 1 CPUs at 4000 MB each and ``-N1-2 -n12 --mem-per-cpu=8000`` as 16 + 8."""
    factor = ps.cpu_m // asked.cpu_m
    tasks = asked.cpu_m // (cpt * 1000)  # the even share's tasks per pod
    return replace(ps, cpu_m=cpt * factor * 1000, cpus_per_task=cpt * factor, memory_mib=ps.memory_mib // tasks,
                   memory_per="task", split_min_cpus=cpt)


def _spread_form(asked: PodSet, ps: PodSet, d: Defaults) -> PodSet:
    """A pod set spreading its ``--gpus`` over its nodes (``PodSet.spread_gpus``; ``asked`` as
    submitted, with the even share rounded up, ``ps`` filled in) as the Slurm policy holds it:
    one GPU a pod, the least a node takes, and memory per GPU where it is asked per GPU
    (``--mem-per-gpu``, DefMemPerGPU), so that it follows each node's GPUs (``memory_per``
    "gpu"); ``spread_gpus.spread`` gives each node its GPUs. CPUs per GPU, from ``--cpus-per-gpu``
    (each pod's for its one GPU) or DefCpuPerGPU (``cpus_per_task`` None), go out from the
    job's total (``spread_gpus._cpus_dealt``; probes p116, p117), and memory per CPU
    (``--mem-per-cpu``, DefMemPerCPU) beside them follows each node's CPUs (``memory_per`` "cpu",
    one GPU's CPUs' worth a pod; probe p160). It stays even (⌈X/N⌉ a node) where MaxMemPerCPU
    may raise those CPUs (not probed). An exclusive walk's whole nodes keep their memory as
    filled."""
    if ps.exclusive and ps.walk_gpus:
        # an exclusive walk's nodes are held whole, memory per CPU or GPU for every CPU or GPU
        # of each (``memory_unit``, ``select.exclusive_memory``): nothing follows the GPUs
        return replace(ps, gpus=1)
    if ps.memory_unit is not None:
        return replace(ps, spread_gpus=False)
    default_cpus = _default_cpus(asked, d)
    per_cpu = ps.memory_per_cpu  # MB per CPU where memory follows the CPUs (``_filled``)
    if default_cpus is not None and ps.cpu_m != default_cpus * 1000:
        return replace(ps, spread_gpus=False)  # MaxMemPerCPU raised the CPUs for memory per node
    if ps.cpus_per_task is None and d.max_mem_per_cpu:  # --cpus-per-gpu beside MaxMemPerCPU
        return replace(ps, spread_gpus=False)
    mem, per = ps.memory_mib, ps.memory_per
    if _memory(asked, asked.cpu_m, d)[1] == "gpu":
        mem, per = mem // ps.gpus, "gpu"
    elif per_cpu and (default_cpus is not None or ps.cpus_per_task is None):
        # memory per CPU follows the CPUs each node is dealt (``spread_gpus.spread``): one GPU's
        # CPUs' worth a pod (a real 22.05.8 at DefCpuPerGPU=2, DefMemPerCPU=100 ran ``--gpus=12``
        # as 8 + 4 GPUs with 16 + 8 CPUs and 1600 + 800 MB; probe p160)
        cpus = d.cpu_per_gpu if default_cpus is not None else ps.cpu_m // 1000 // ps.gpus
        mem, per = cpus * per_cpu, "cpu"
    fit = ps.memory_fit // ps.gpus if ps.memory_fit else 0  # DefMemPerGPU's free memory, for one GPU
    out = replace(ps, gpus=1, memory_mib=mem, memory_per=per, memory_fit=fit if fit > mem else 0)
    if ps.cpus_per_task is None and default_cpus is None and ps.gpus:
        out = replace(out, cpu_m=ps.cpu_m // ps.gpus)  # --cpus-per-gpu: for the pod's one GPU
    if default_cpus is not None:
        out = replace(out, cpu_m=d.cpu_per_gpu * 1000, cpus_per_task=None)
    return out


def _fit_under_gpu_default(asked: PodSet, ps: PodSet, d: Defaults) -> PodSet:
    """``ps`` (``asked`` filled in) with ``memory_fit``: a GPU pod that gave its own memory per
    node or per CPU still needs DefMemPerGPU × its GPUs free on a node, if that is more (a real
    22.05.8 at DefMemPerGPU=20000: ``--gres=gpu:1 --mem=6000`` and ``--mem-per-cpu=3000``
    waited with 14000 MB free, ``--gres=gpu:2 --mem=6000`` with 25000; ``--mem=22000`` and
    ``--mem-per-gpu=12000`` did not). Not for exclusive pods, which take whole nodes."""
    if (not d.mem_per_gpu or not ps.gpus or ps.exclusive or asked.memory_unset or asked.memory_whole_node
            or asked.memory_per == "gpu"):
        return ps
    need = d.mem_per_gpu * ps.gpus
    return replace(ps, memory_fit=need) if need > ps.memory_mib else ps


def _filled(ps: PodSet, d: Defaults) -> PodSet:
    if ps.memory_per == "cpu" and not ps.memory_unset and not ps.memory_whole_node:
        return _per_cpu_request(ps, d)
    if (ps.memory_unset and not ps.memory_whole_node and d.mem_per_cpu and d.max_mem_per_cpu
            and d.mem_per_cpu > d.max_mem_per_cpu and not (ps.gpus and d.mem_per_gpu)):
        # DefMemPerCPU over MaxMemPerCPU is raised like a --mem-per-cpu of that much (a real
        # 22.05.8 at 3000 over 2000: -c2 ran on 4 CPUs at 1500, --exclusive -c2 held 24000M)
        asked = replace(ps, memory_mib=d.mem_per_cpu * max(1, math.ceil(ps.cpu_m / 1000)), memory_per="cpu",
                        memory_unset=False)
        return _per_cpu_request(asked, d)
    cpu_m = _cpu_m(ps, d)
    mem, source = _memory(ps, cpu_m, d)
    node_memory = _task_node_memory(ps, source, d)
    node_min_cpus = asked_min_cpus = 0
    if d.max_mem_per_cpu and node_memory:
        # (the whole node's memory as slurmctld's ``_mem_per_node_part`` reads it: the
        # partition's first node's; held, it is each node's, ``select.task_node_memory``)
        asked_min_cpus = math.ceil(_read_whole(node_memory, source, d) / d.max_mem_per_cpu)
        node_min_cpus = _node_min_cpus(ps, asked_min_cpus)
    elif d.max_mem_per_cpu and source in ("node", "whole", "whole-default"):
        cpu_m = _cpus_for_node_memory(ps, cpu_m, _read_whole(mem, source, d), source, d.max_mem_per_cpu)
    unit = None
    if ps.exclusive and source == "cpu":
        unit = ("cpu", mem // max(1, math.ceil(cpu_m / 1000)))
    elif ps.exclusive and source == "gpu" and ps.gpus:
        unit = ("gpu", mem // ps.gpus)
    per_cpu = mem // max(1, math.ceil(cpu_m / 1000)) if source == "cpu" else ps.memory_per_cpu
    memory_all = d.uneven_memory and source in ("whole", "whole-default")
    return replace(ps, cpu_m=cpu_m, memory_mib=mem, cpu_unset=False, memory_unset=False,
                   memory_whole_node=False, memory_unit=unit, memory_per_cpu=per_cpu, node_memory_mib=node_memory,
                   node_min_cpus=node_min_cpus, node_min_cpus_asked=asked_min_cpus, memory_all=memory_all)


def _read_whole(mem: int, source: str, d: Defaults) -> int:
    """``mem`` as slurmctld's limits read it: the node's whole memory (``source`` "whole" or
    "whole-default") is the partition's first node's (``_mem_per_node_part``), whatever each
    node then holds (``PodSet.memory_all``); any other amount as it is."""
    return d.first_node_memory or mem if source in ("whole", "whole-default") else mem


def _task_node_memory(ps: PodSet, source: str, d: Defaults) -> int:
    """The memory task pods (``-n T``, no node count) hold once on every node they take
    (``select.task_node_memory``), 0 for other pod sets: ``--mem`` as the reader kept it, the
    node's whole memory (``--mem=0`` or no default: only a node with none allocated takes
    them, probe p124), and DefMemPerNode, which slurmctld stores as the job's per-node memory
    like ``--mem`` (``_validate_job_desc``, from the source)."""
    if ps.one_per_node or ps.count < 2:
        return ps.node_memory_mib
    if source in ("whole", "whole-default"):
        return d.whole_node or 0
    if source == "node" and ps.memory_unset and d.mem_per_node:
        return d.mem_per_node
    return ps.node_memory_mib


def _node_min_cpus(ps: PodSet, asked: int) -> int:
    """The CPUs each node of task pods holding memory per node must give under MaxMemPerCPU
    (``PodSet.node_min_cpus``): slurmctld's ``pn_min_cpus`` (``asked``, ⌈memory per node /
    limit⌉), cut to whole tasks as for a node's share (``_cpus_for_node_memory``), never fewer
    than a task's. A real 22.05.8 at 8000 on the seed pool's nodes (two threads a
    core; probe p125): ``-n4 --mem=100000`` ran on 14 CPUs (13 in whole cores), ``-n4 -c2`` and
    ``-n4 -c3`` beside it on 12, ``-n4 --mem=50000`` on 8 and, with 8 CPUs free on gpu01 alone,
    there (``--mem=100000`` went to gpu02), ``-n4 --mem=0`` and ``-n4`` (the whole 1000000 MB)
    on 126."""
    per_task = ps.cpus_per_task or 1
    return max(per_task, asked // per_task * per_task)


def _cpus_for_node_memory(ps: PodSet, cpu_m: int, mem: int, source: str, limit: int) -> int:
    """The millicores of a pod asking ``mem`` MB per node under MaxMemPerCPU=``limit``.

    slurmctld asks ceil(memory / limit) CPUs on the node; the allocation then holds whole tasks,
    so a single task of ``-c`` CPUs gets that count rounded down to a multiple of ``-c``, never
    fewer than it asked. A real 22.05.8 at 4000 on 16-core 64000 MB nodes: ``-c2 --mem=20000``
    got 4 CPUs, ``-c2 --mem=40000`` 10, ``-c3 --mem=20000`` 3, ``-c1 --mem=10000`` 3, ``-c3
    --mem=0`` 15 and, under DefMemPerNode=20000, ``-c2`` 4 and ``-c1 --gres=gpu:1`` 5; at 2000
    ``--mem=0`` needed 32 CPUs and was refused.

    A pod that is a whole node's share (one task, or ``--nodes``) is cut in whole tasks of its
    ``cpus_per_task`` (one task of all its CPUs where that is not known): ``-N1 -c2 --mem=20000``
    got 4 too, ``-N1 -c3 --mem=0`` 15, ``-N1 -n2 -c2`` 4, ``-N1 -n4 --mem=20000`` 5 and ``-N1
    --ntasks-per-node=2 --mem=10000`` 3. Not exact: ``-N2 -c2 --mem=20000`` got 9 CPUs on two
    nodes (4 per node here). Task pods that may share a node and hold memory per node do not
    come here: each node they take gives the need (``_node_min_cpus``; the real system gave
    ``-n2 --mem=20000`` 5 CPUs); other task pods split it, each pod its share at the limit.
    """
    need = math.ceil(mem / limit)
    if ps.count == 1 or ps.one_per_node:
        per_task = ps.cpus_per_task or max(1, cpu_m // 1000)
        if ps.cpu_unset and ps.gpus and cpu_m != ps.cpu_m:
            per_task = max(1, cpu_m // 1000)  # DefCpuPerGPU gave the CPUs: one task of them
        return max(cpu_m, need // per_task * per_task * 1000)
    if source == "node":
        return cpu_m
    return max(cpu_m, need * 1000)


def memory_refusal(wl: Workload, d: Defaults) -> str | None:
    """sbatch's message when ``wl`` (as submitted, before ``fill``) asks more memory on a node
    than MaxMemPerNode allows, else None."""
    limit = d.max_mem_per_node
    if not limit:
        return None
    for ps in wl.pod_sets:
        mem, source = _memory(ps, _cpu_m(ps, d), d)
        if source in ("whole", "whole-default"):
            mem = _read_whole(d.whole_node or 0, source, d)  # the node's memory, not one task's share
        elif source == "node" and not ps.one_per_node and ps.count > 1:
            # a per-node amount split over task pods: checked whole (a real 22.05.8 refused
            # -n4 --mem=40000 under MaxMemPerNode=30000 but ran -n4 --mem-per-cpu=9000, 36000 MB);
            # the least amount that splits into this share, so rounding never refuses
            mem = (mem - 1) * ps.count + 1
        if mem > limit:
            return MSG_PART_CONFIG if source == "whole-default" else MSG_MEMORY
    return None


def resolve(cfg: SlurmConfig, node_memory: dict[str, int], wl: Workload, cache: dict,
            typed_nodes: frozenset[str] = frozenset()) -> tuple[Workload, str | None]:
    """What slurmctld makes of a submission: ``wl`` filled in from its partition's defaults
    (``defaults_for``; unchanged when that partition does not exist), with the CPUs and memory
    its ReqTRES records where they differ (``Workload.req_cpu_mem``), and sbatch's
    MaxMemPerNode refusal, gpupool's ``MSG_UNWALKED`` (or ``MSG_LISTED_CPG``), or None. ``node_memory``: RealMemory per
    node, in slurm.conf's order; ``typed_nodes``: the nodes whose GPUs have a type or ``Cores=``
    (``typed_gpu_nodes``).
    A job that gave no node count first gets its partitions' MinNodes (``min_nodes``); its
    ReqTRES CPUs, its memory per CPU or GPU there and its MaxMemPerNode test stay those of the
    request as given (slurmctld's ``min_cpus`` and per-node memory are not changed by the
    raise; only a per-node amount counts on every node)."""
    given = wl
    wl = raise_node_count(cfg, wl)
    # (a job of several tasks that MinNodes could not raise keeps its shape: not probed)
    # (``--nodes=A-B`` walks in MinNodes partitions too: its least count is raised there as
    # any range's is, ``jobinfo.raised_least``)
    # (a --nodelist gives the walk of ``-n T`` with GPUs per node its count as the least,
    # which MinNodes reads as given: ``gpu_walk.walk_least``)
    if wl is given:
        wl = _default_cpus_per_gpu_tasks(wl, defaults_for(cfg, node_memory, wl, cache))
    walked = ((wl is given or _default_cpg(wl)) and (partitions_min_nodes(cfg, wl) <= walk_least(wl) or _walks_range(wl))
              and (wl := walk_form(wl)) is not given)
    if walked and _walks_range(wl):
        wl = _raised_range(cfg, wl)
    elif not walked:
        wl = _listed_fixed(wl)
    d = defaults_for(cfg, node_memory, wl, cache)
    if d is None:
        return wl, None
    filled = fill(wl, d)
    if walked and not all((ps.spread or not form.gpus_per_job) and ps.split_tasks == form.split_tasks
                          for ps, form in zip(filled.pod_sets, wl.pod_sets) if ps.walked):
        # the defaults keep the GPUs even (``_spread_form``: DefCpuPerGPU's CPUs carrying memory
        # per CPU, MaxMemPerCPU) or the tasks (``_split_form``: DefCpuPerGPU's CPUs): not probed
        # with the walk, the job keeps its shape as submitted
        wl, walked = _listed_fixed(given), False
        filled = fill(wl, d)
    if wl.req_cpu_mem is None:
        listed = jobinfo.listed_count(wl)
        asked = submitted_request(wl, d, listed)
        if walked:  # one node's worth until the walk gives the job its nodes
            # (a --nodelist raised the CPUs to its hosts, ``jobinfo.raised_by_list``; the walk of
            # ``-n T`` with GPUs per node holds a task on each of them already)
            hosts = 0 if tasks_walk(wl.pod_sets[0]) else listed
            counted = _listed_tasks(given, hosts)
            asked = submitted_request(counted, d, hosts)
            if given.pod_sets[0].cpus_per_gpu_cap:
                # --cpus-per-gpu counts no CPUs before the walk, a task's each: a real 22.05.8
                # recorded a pending ``--gpus=12 --cpus-per-gpu=4`` as cpu=1 (probe p117), with
                # ``-n4`` cpu=4 (probe p120)
                asked = (max(given.pod_sets[0].walk_tasks or 1, hosts), asked[1])
                if per_cpu := filled.pod_sets[0].memory_per_cpu:
                    # memory per CPU for those CPUs (a real 22.05.8 at DefMemPerCPU=100 recorded a
                    # pending ``--gpus=12 --cpus-per-gpu=3`` as cpu=1,mem=100M; probe p160)
                    asked = (asked[0], per_cpu * asked[0])
            least = _least_walked(wl)
            if given.pod_sets[0].count == 1:
                # (one pod as submitted: memory per node for each listed host, whom slurmctld
                # made the least nodes; task pods counted theirs in ``submitted_request``)
                least = max(least, hosts)
            if least > 1 and (_memory_per_node(given.pod_sets[0], d) or _listed_per_gpu(wl, given.pod_sets[0])):
                # ``--nodes=A-B``: memory per node for A nodes, CPUs and memory per CPU or GPU
                # as asked (a real 22.05.8 recorded pending ``-N2-3 --gpus=10`` jobs as
                # cpu=1,mem=200M,node=2 with --mem=100, cpu=4,mem=200M with -c4, cpu=1,mem=100M
                # with --mem-per-cpu=100, mem=1000M with --mem-per-gpu=100; probes p109, p110)
                # (one node's memory: the list's hosts already raised the nodes that
                # ``submitted_request`` counts memory per node for, ``raised_by_list``)
                asked = (asked[0], submitted_request(counted, d)[1] * least)
        elif wl is not given:
            before = submitted_request(given, d, listed)
            asked = (before[0], asked[1] if _memory_per_node(given.pod_sets[0], d) else before[1])
        if asked != (sum(ps.cpus_total for ps in filled.pod_sets), sum(ps.memory_total for ps in filled.pod_sets)):
            filled = replace(filled, req_cpu_mem=asked)
    return filled, memory_refusal(given, d) or _unwalked_refusal(given, walked, partitions_min_nodes(cfg, given)) \
        or _unspread_refusal(wl, filled) or (MSG_LISTED_CPG if _listed_cpg_on_typed(cfg, filled, typed_nodes) else None)


def typed_gpu_nodes(nodes) -> frozenset[str]:
    """The names of the pool's nodes (``Pool.nodes``) whose GPUs have a type or gres.conf
    ``Cores=`` (``Node.gres_topology``)."""
    return frozenset(name for name, node in nodes.items() if node.gres_topology)


def _listed_cpg_on_typed(cfg: SlurmConfig, wl: Workload, typed_nodes: frozenset[str]) -> bool:
    """Whether ``wl`` (filled in) deals its ``--gpus`` over nodes from a ``--nodelist`` (walked,
    or spread over a fixed count) with CPUs per GPU (``--cpus-per-gpu``, DefCpuPerGPU:
    ``cpus_per_task`` None) where one of its partitions that holds every listed host has nodes
    whose GPUs have a type or gres.conf ``Cores=`` (``typed_nodes``). cons_tres takes the
    listed nodes first and may then go downwards from them, so the nodes are not taken in index
    order, and on such nodes it caps each node's GPUs at what the CPUs it gives pay for, in
    index order (22.05's ``_set_job_bits1``; source, not probed), which ``spread_gpus`` does not
    model. On nodes without them a real 22.05.8 dealt the GPUs in index order and the CPUs in
    the order taken (``--gpus=12 --cpus-per-gpu=2 -w gpu04`` as 8 + 4 GPUs with 8 + 16 CPUs;
    probe p160). A partition that cannot hold the list does not count (the job runs elsewhere),
    nor does a fixed count whose nodes are all listed (taken in index order; both found by a
    review)."""
    if not typed_nodes or len(wl.pod_sets) != 1 or not wl.nodelist:
        return False
    ps = wl.pod_sets[0]
    if not (ps.walked or ps.spread) or ps.cpus_per_task is not None or not ps.gpus_per_job:
        return False
    try:
        hosts = set(expand_hostlist(wl.nodelist))
    except (ValueError, InputError):
        return False  # (the node filter reports a list that does not parse)
    if not ps.walked and len(hosts) >= ps.count:
        return False  # a fixed count all listed: taken in index order, as without the list
    names = requested_partitions(wl)
    parts = [cfg.partitions.get(n) for n in names] if names else [cfg.default_partition()]
    return any(p is not None and hosts <= set(p.nodes) and not typed_nodes.isdisjoint(p.nodes) for p in parts)


def _default_cpus_per_gpu_tasks(wl: Workload, d: Defaults | None) -> Workload:
    """``-n T --gpus=X`` (2 <= T <= X, no CPU option, ``--exclusive`` or ``--nodelist``) in a
    partition with DefCpuPerGPU=C and no MaxMemPerCPU as slurmctld walks it: as ``--cpus-per-gpu=C``
    beside the T tasks (``PodSet.walk_tasks``: the T tasks cap the nodes, the job's C × X CPUs
    are dealt out), except that DefCpuPerGPU caps no node's CPUs at C a GPU (``cpus_per_gpu_cap``
    stays off; probe p117). A real 22.05.8 at DefCpuPerGPU=2, DefMemPerCPU=100 ran ``-n2
    --gpus=12`` and ``-n3 --gpus=12`` as 8 + 4 GPUs with 16 + 8 CPUs on idle 16-core nodes
    (probe p160; gpupool kept the two tasks' even share, 6 + 6, before). Else ``wl``."""
    if d is None or not d.cpu_per_gpu or d.max_mem_per_cpu or len(wl.pod_sets) != 1:
        return wl
    ps = wl.pod_sets[0]
    tasks = pod_tasks(ps) if ps.count == 1 else ps.count
    if (not ps.walk_gpus or not ps.spread_gpus or not ps.gpus_per_job or not ps.cpu_unset or ps.exclusive
            or ps.cpus_per_task != 1 or ps.walk_tasks or ps.one_per_node or ps.split_tasks
            or not 2 <= tasks <= ps.gpus_per_job or jobinfo.listed_count(wl)):
        return wl
    memory = ps.memory_mib
    if ps.memory_per == "cpu" and not ps.memory_unset:  # --mem-per-cpu: per CPU of the C a GPU
        memory = ps.memory_mib // max(1, ps.cpu_m // 1000) * d.cpu_per_gpu * ps.gpus
    return replace(wl, pod_sets=(replace(ps, cpus_per_task=None, cpu_m=d.cpu_per_gpu * ps.gpus * 1000, cpu_unset=False,
                                         memory_mib=memory, walk_tasks=tasks),))


def _default_cpg(wl: Workload) -> bool:
    """Whether ``wl`` is ``_default_cpus_per_gpu_tasks``' form (a walk of tasks, CPUs per GPU
    without the cap)."""
    ps = wl.pod_sets[0] if len(wl.pod_sets) == 1 else None
    return ps is not None and bool(ps.walk_tasks) and not ps.cpus_per_gpu_cap and ps.cpus_per_task is None


def _walks_range(wl: Workload) -> bool:
    """Whether ``wl`` is ``--nodes=A-B --gpus=X`` (``PodSet.walk_nodes``), as submitted or in
    the walk's form."""
    return any(ps.walk_nodes is not None for ps in wl.pod_sets)


def _least_walked(wl: Workload) -> int:
    """The least nodes of ``wl`` in the walk's form (``--nodes=A-B``: A, as MinNodes raised it;
    ``-n T`` with GPUs per node beside a ``--nodelist``: the list's count), 1 for any other."""
    return max((ps.min_count or 1 for ps in wl.pod_sets if ps.walked and (ps.walk_nodes is not None or tasks_walk(ps))),
               default=1)


def _one_pod_walk(wl: Workload) -> PodSet | None:
    """The pod set of ``wl`` when it is ``--gpus=X`` (or ``-n T --gpus=X``) as submitted, one
    pod walked for its GPUs with no ``--nodes`` (``PodSet.walk_gpus``), else None."""
    if len(wl.pod_sets) != 1:
        return None
    ps = wl.pod_sets[0]
    return ps if (ps.walk_gpus and not ps.one_per_node and ps.count == 1 and ps.gpus_per_job
                  and ps.walk_nodes is None) else None


def _listed_fixed(wl: Workload) -> Workload:
    """``wl`` kept off the walk (its defaults, or its partitions' MinNodes): where it is one pod
    of ``--gpus=X`` beside a ``--nodelist`` of L >= 2 hosts and one task, the L pods sbatch's
    node count gives it (``--gpus=X`` spread over the hosts, ``min_nodes.per_node_pods``),
    which the hosts can hold; else ``wl`` (a real 22.05.8 walks it whatever the defaults;
    found by a review, not probed: the walk keeps its shape as submitted there)."""
    ps = _one_pod_walk(wl)
    hosts = jobinfo.listed_count(wl)
    if ps is None or hosts < 2 or pod_tasks(ps) > 1:
        return wl
    pods = per_node_pods(ps, hosts)
    if pods is None:
        return wl
    return replace(wl, pod_sets=(replace(pods, walk_gpus=False, list_count_only=True),))


def _listed_tasks(given: Workload, hosts: int) -> Workload:
    """``given`` as its request counts it: ``--gpus=X`` beside a ``--nodelist`` of ``hosts``
    and no ``--ntasks`` or ``--nodes`` got a task a host from sbatch (``_opt_verify``: ntasks is
    the least node count), so CPUs per task, and memory per CPU, for each (the non-walk
    ``-N1-2 -c2 -w gpu01,gpu02`` recorded cpu=4, probe p157; found by a review)."""
    ps = _one_pod_walk(given)
    if ps is None or hosts < 2 or pod_tasks(ps) > 1 or ps.walk_tasks or not ps.cpus_per_task:
        return given
    per_cpu = ps.memory_per == "cpu"
    return replace(given, pod_sets=(replace(ps, cpu_m=ps.cpu_m * hosts,
                                            memory_mib=ps.memory_mib * hosts if per_cpu else ps.memory_mib),))


def _listed_per_gpu(wl: Workload, asked: PodSet) -> bool:
    """Whether ``wl`` is a listed walk whose memory was asked per GPU (``--mem-per-gpu``): its G
    GPUs a node count on each of the list's nodes, as its memory per node does (``job_get_tres_mem``:
    a review's reading of the source, not probed)."""
    return any(tasks_walk(ps) for ps in wl.pod_sets) and not asked.memory_unset \
        and asked.memory_per == "gpu"


def _raised_range(cfg: SlurmConfig, wl: Workload) -> Workload:
    """Walked ``--nodes=A-B`` (the walk's form) with A raised to its partitions' least MinNodes
    where B reaches it, as slurmctld stores the job (``jobinfo.raised_least``): the request
    (ReqTRES, limits) counts the raised count (a real 22.05.8 ran ``-N1-3 --gpus=2`` on two
    nodes of a MinNodes=2 partition, probe p109). A count beyond the walk's nodes (fewer GPUs
    than it) is left: the job is refused at submit (``min_nodes.fewer_gpus_than_nodes``)."""
    floor = partitions_min_nodes(cfg, wl)
    out = []
    for ps in wl.pod_sets:
        if ps.walk_nodes is not None and ps.walked:
            least = raised_least(ps.min_count or 1, ps.walk_nodes[1], floor)
            if least <= ps.count:
                ps = replace(ps, min_count=least)
        out.append(ps)
    return replace(wl, pod_sets=tuple(out))


#: the refusal of a job kept off the walk whose as-submitted shape stands for nothing Slurm does
MSG_UNWALKED = ("gpupool does not model --ntasks=T --gpus=X with X not a multiple of T where the "
                "partition's defaults (DefCpuPerGPU, DefMemPerCPU, MaxMemPerCPU) or MinNodes keep the job "
                "from walking nodes for its GPUs; ask X as a multiple of T, --gpus-per-task or --nodes")
#: ``--gpus`` dealt from a ``--nodelist`` with CPUs per GPU (``--cpus-per-gpu``, DefCpuPerGPU) in
#: partitions with nodes whose GPUs have a type or gres.conf ``Cores=`` (``_listed_cpg_on_typed``)
MSG_LISTED_CPG = ("gpupool does not model CPUs per GPU (--cpus-per-gpu, DefCpuPerGPU) beside --gpus and "
                  "--nodelist on nodes whose GPUs have a type or Cores= in gres.conf (cons_tres then caps each "
                  "node's GPUs by the CPUs it gives, in index order); drop --nodelist or ask GPUs per node")
#: the same for ``--nodes=A-B --gpus=X`` (``PodSet.walk_nodes``) where the defaults keep it off the walk
MSG_UNWALKED_RANGE = ("gpupool does not model --nodes=A-B --gpus=X where the partition's defaults "
                      "(DefCpuPerGPU, MaxMemPerCPU) keep the job from walking nodes for its GPUs; "
                      "ask a node count, or --gpus-per-node")


#: the same for ``--gpus=X`` over N nodes beside ``--cpus-per-gpu`` (``PodSet.cpus_per_gpu_cap``)
#: where memory per CPU keeps the GPUs even (``_spread_form``) and X does not divide over N
MSG_UNSPREAD = ("gpupool does not model --gpus=X over N nodes beside --cpus-per-gpu where memory per CPU "
                "(DefMemPerCPU, MaxMemPerCPU) keeps the GPUs even and X is not a multiple of N; ask X as a "
                "multiple of the nodes, or --gpus-per-node")
#: gpupool's own refusals: the job stands for no shape slurmctld gives it, so slurmctld's
#: submit checks are not read for it
OWN_REFUSALS = (MSG_UNWALKED, MSG_UNWALKED_RANGE, MSG_UNSPREAD)


def _unspread_refusal(wl: Workload, filled: Workload) -> str | None:
    """``MSG_UNSPREAD`` where a pod set spreading ``--gpus`` beside ``--cpus-per-gpu`` over a
    node count (``wl``'s) was left even by its defaults (``filled``'s) and its even share holds
    more GPUs than asked (a review found ``-N2 --gpus=3 --cpus-per-gpu=4`` under DefMemPerCPU
    holding 2 + 2), else None."""
    for asked, ps in zip(wl.pod_sets, filled.pod_sets):
        if (asked.spread_gpus and asked.one_per_node and ps.cpus_per_gpu_cap and not ps.spread_gpus
                and ps.gpus * ps.count != ps.gpus_per_job):
            return MSG_UNSPREAD
    return None


def _unwalked_refusal(given: Workload, walked: bool, min_nodes: int = 1) -> str | None:
    """``MSG_UNWALKED`` for ``-n T --gpus=X`` with X not a multiple of T (one pod of the T tasks
    and X GPUs as submitted, ``sbatch._task_shape``) that is not walked: that pod stands for no
    shape slurmctld gives it (it would be refused as fitting no node, where slurmctld runs it on
    several); ``MSG_UNWALKED_RANGE`` for ``--nodes=A-B --gpus=X`` kept off the walk the same
    way (one pod of X GPUs as submitted). Else None, and None for a list sbatch cut down to
    the tasks in partitions whose MinNodes (``min_nodes``) is above it: sent min=max=T, the
    job waits on the node limits there or is refused."""
    if walked or len(given.pod_sets) != 1:
        return None
    ps = given.pod_sets[0]
    if ps.list_trimmed and min_nodes > jobinfo.listed_count(given):
        return None
    if ps.walk_nodes is not None and ps.gpus_per_job >= 2:
        return MSG_UNWALKED_RANGE
    uneven = ps.walk_gpus and not ps.one_per_node and ps.count == 1 and ps.gpus_per_job and pod_tasks(ps) > 1
    return MSG_UNWALKED if uneven else None


def _memory_per_node(ps: PodSet, d: Defaults) -> bool:
    """Whether ``submitted_request`` counts ``ps``'s memory per node (``--mem``, ``--mem=0``,
    DefMemPerNode or the node's whole memory), not per CPU or GPU."""
    if ps.memory_whole_node:
        return True
    if not ps.memory_unset:
        return ps.memory_per == ""
    return not d.mem_per_cpu


def submitted_request(wl: Workload, d: Defaults, listed: int = 0) -> tuple[int, int]:
    """(CPUs, MB) of ``wl`` as submitted (before ``fill``) the way slurmctld counts them in the
    job's ReqTRES at submit (``job_set_req_tres``): the CPUs asked, DefCpuPerGPU not applied,
    and the memory ``job_get_tres_mem`` gives without an allocation: ``--mem`` per node and
    ``--mem-per-cpu``/``--mem-per-gpu`` per CPU or GPU asked; with none, DefMemPerCPU per CPU
    asked or DefMemPerNode per node, and without those either (or with ``--mem=0``) the
    partition's first node's RealMemory per node. DefMemPerGPU is never counted there (it
    reaches only the selection). A real 22.05.8 (DefMemPerGPU=120000, DefCpuPerGPU=4, 1000000
    MB nodes) recorded ``--gres=gpu:2`` as cpu=1,mem=1000000M and, in a partition with
    DefMemPerCPU=1000, mem=1000M; ``-N2 --exclusive`` mem=2000000M; ``--gpus=3
    --mem-per-gpu=5000`` mem=15000M; a partition ``Nodes=gpu04,gpu03`` counted gpu03's memory
    (its first in slurm.conf), and sprio's cpu and mem factors read these numbers.
    ``--mem`` over task pods (``-n3 --mem=1000``) counts once, as the reader kept it whole
    (``PodSet.node_memory_mib``), not as the pods' shares. ``listed``: the hosts of the job's
    ``--nodelist``, which raise its least nodes and CPUs (``jobinfo.raised_by_list``; a real
    22.05.8 recorded ``-n3 -w gpu01,gpu02 --mem=500`` as cpu=3,mem=1000M,node=2, probe p157)."""
    cpus = mem = 0
    ranged = wl.gang == GANG_MIN
    if len(wl.pod_sets) != 1:
        listed = 0
    for ps in wl.pod_sets:
        ps_nodes, ps_cpus, ps_mem, _gpus = request_totals(ps, ranged)  # (a node range: its least count)
        if listed:
            ps_nodes, ps_cpus, ps_mem = raised_by_list(ps, listed, ps_nodes, ps_cpus, ps_mem)
        cpus += ps_cpus
        if ps.memory_whole_node:
            mem += d.first_node_memory * ps_nodes
        elif not ps.memory_unset and ps.memory_per == "gpu" and ps.spread_gpus and ps.one_per_node:
            mem += ps.memory_mib // max(1, ps.gpus) * ps.gpus_per_job  # per GPU, for the job's GPUs
        elif not ps.memory_unset and ps.node_memory_mib:
            mem += ps.node_memory_mib * max(1, listed)  # task pods' --mem, the least nodes' until the job starts
        elif not ps.memory_unset:
            mem += ps_mem  # per node, CPU or GPU as asked
        elif d.mem_per_cpu:
            mem += d.mem_per_cpu * ps_cpus
        elif d.mem_per_node:
            mem += d.mem_per_node * ps_nodes
        else:
            mem += d.first_node_memory * ps_nodes
    return cpus, mem


def fill(wl: Workload, d: Defaults) -> Workload:
    """``wl`` with every pod set filled in (``wl`` itself when none left anything unset)."""
    if not needs_defaults(wl, d):
        return wl
    return replace(wl, pod_sets=tuple(fill_pod_set(ps, d) for ps in wl.pod_sets))
