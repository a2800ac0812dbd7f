"""A job that gave no ``--nodes``, submitted to partitions that all set MinNodes, gets a node
count: the least MinNodes among them (``_valid_job_part``: a job without a node count takes its
partitions' least ``min_nodes_orig``, so that ``job_limits_check`` later finds it within them).

Why at submit: slurmctld stores the raised count in the job record, and every later decision
(limits, placement, backfill) reads the job as if it had asked ``--nodes=M``; a job left at its
own count would wait for ever (PartitionNodeLimit). What a real 22.05.8 did on two 128-CPU
nodes (two threads per core) of a MinNodes=2 partition (probes p97 and p99, 2026-12-04;
``tests/unit/test_slurm_min_nodes_raise.py``):

* ``-n1`` and ``-n4`` each ran on both nodes, one core (2 CPUs) on each: NumTasks stayed as
  given, the node count became 2; ``-n6`` ran as 4 + 2 CPUs, as ``-N2 -n6`` does
  (``split_tasks.py``);
* ``-n1 --gres=gpu:8`` took 8 GPUs on each node (``--gres`` is per node), ``-n1 --mem=1000``
  1000 MB on each, ``-n1 --mem-per-cpu=1000`` 2000 MB on each (its core's two CPUs);
* ``-n4 --gpus-per-task=1`` took 2 GPUs on each node, following its tasks.

So the job is given the pod set ``--nodes=M`` would have given it (``sbatch.job_pod_set``):
M pods of one node each holding ⌈T/M⌉ of its T tasks, or the split form (T > M) that spreads
the tasks unevenly, as submitted; ``job_defaults`` then fills in its defaults as for any job.

Not raised (kept as submitted, so it waits with PartitionNodeLimit as before; docs/policies/
slurm.md, Known differences): GPUs asked for the whole job (``--gpus``, ``--gpus-per-task``),
which the real system spreads unevenly over the nodes (``-n4 --gpus=4`` as 3 + 1 GPUs,
``-n1 --gpus=9`` as 8 + 1) and refuses at submit where they are fewer than the nodes
(``-n1 --gpus=1``: "Invalid generic resource (gres) specification", as here:
``fewer_gpus_than_nodes``), a pod set gpupool cannot hold; jobs of several pod sets (Kubernetes shapes, not sbatch's). ``--mem`` over several tasks
was split over the task pods, rounded up, and is taken back as their sum.
"""
from __future__ import annotations

from dataclasses import replace

from gpupool.model.slurm import SlurmConfig
from gpupool.model.workload import PodSet, Workload
from gpupool.policy.slurm.jobinfo import requested_partitions


def partitions_min_nodes(cfg: SlurmConfig, wl: Workload) -> int:
    """The least MinNodes of the partitions ``wl`` names (else of the default partition), 1
    where one of them sets none or does not exist (the submission is refused then anyway)."""
    names = requested_partitions(wl)
    parts = [cfg.partitions.get(n) for n in names] if names else [cfg.default_partition()]
    return min(((p.min_nodes or 1) if p is not None else 1 for p in parts), default=1)


#: sbatch's words for ESLURM_INVALID_GRES
MSG_GRES = "Invalid generic resource (gres) specification"


def fewer_gpus_than_nodes(cfg: SlurmConfig, wl: Workload) -> bool:
    """Whether ``wl``, a job without ``--nodes`` asking GPUs for the whole job, asks fewer than
    the node count its partitions' MinNodes give it: slurmctld refuses it at submit
    (``gres_job_state_validate`` after ``_valid_job_part``: "--gpus < -N"; probe p99 refused
    ``-n1 --gpus=1`` and ``-n1 -c4 --gpus=1`` in a MinNodes=2 partition with ``MSG_GRES``).
    With ``--nodes`` sbatch's reader already refuses GPUs that do not divide over the nodes."""
    ps = wl.pod_sets[0] if len(wl.pod_sets) == 1 else None
    if ps is None or ps.one_per_node or not ps.gpus_per_job:
        return False
    return ps.gpus_per_job < partitions_min_nodes(cfg, wl)


def raise_node_count(cfg: SlurmConfig, wl: Workload) -> Workload:
    """``wl`` as slurmctld stores it when it gave no node count in partitions of MinNodes > 1:
    its pod set as ``--nodes=M`` gives it; else ``wl`` itself (the module's docstring says
    which requests are left as they are)."""
    if len(wl.pod_sets) != 1:
        return wl
    ps = wl.pod_sets[0]
    if ps.one_per_node or ps.gpus_per_job or ps.split_tasks:
        return wl
    nodes = partitions_min_nodes(cfg, wl)
    if nodes < 2:
        return wl
    return replace(wl, pod_sets=(per_node_pods(ps, nodes),))


def per_node_pods(ps: PodSet, nodes: int) -> PodSet:
    """Task pod set ``ps`` (``ps.count`` tasks of one task each, placed anywhere) as ``nodes``
    pods of one node each, as sbatch's ``--nodes=nodes --ntasks=ps.count`` asks: each holds
    ⌈T/nodes⌉ tasks (their CPUs, and memory per CPU or GPU following them; memory per node
    whole), or, with more tasks than nodes, the split form as submitted (``PodSet.split_tasks``:
    the even share, which the policy turns into one task a pod). GPUs asked per node (only
    possible with one task) stay per node."""
    tasks = ps.count
    per_node = -(-tasks // nodes)
    cpt = ps.cpus_per_task
    task_cpus = cpt if cpt is not None else max(1, -(-ps.cpu_m // 1000))
    cpu_m = per_node * task_cpus * 1000 if cpt is not None else ps.cpu_m * per_node
    if ps.memory_per == "":
        memory = ps.memory_mib * tasks  # --mem is per node; the task pods shared it out
    else:  # per CPU or GPU: follows the pod's CPUs or GPUs
        memory = ps.memory_mib * per_node
    gpus = ps.gpus * per_node
    split = tasks if tasks > nodes and cpt is not None and not ps.exclusive else 0
    # GPUs per node come with one task (sbatch refuses --gres with several and no --nodes):
    # select/cons_tres steers its cores as for ``-N M -n1`` (``sbatch._slurm_tasks``)
    slurm_tasks = (1, 1, cpt or 1) if gpus and not ps.exclusive else None
    return replace(ps, count=nodes, one_per_node=True, min_count=None, cpu_m=cpu_m, memory_mib=memory, gpus=gpus,
                   split_tasks=split, slurm_tasks=slurm_tasks)
