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
* ``-n4 --gpus-per-task=1`` took 2 GPUs on each node, following its tasks; ``-n1 --gpus=3``
  2 + 1 and ``-n1 --gpus=9`` 8 + 1, as ``-N2 --gpus=X`` spreads them (``spread_gpus.py``);
* ``-n1 --gpus=1`` and ``-n1 -c4 --gpus=1`` were refused at submit, "Invalid generic resource
  (gres) specification": GPUs for the whole job fewer than its nodes (``fewer_gpus_than_nodes``).

A ``--nodelist`` alone (or beside ``--ntasks-per-node``) naming fewer hosts than M is raised to
M nodes as well, the listed nodes and M − hosts more (``_raised_list``; probe p161).

So the job is given the pod set ``--nodes=M`` would have given it (``sbatch.job_pod_set``):
M pods of one node each holding ⌈T/M⌉ of its T tasks, or the split form (T > M) that spreads
the tasks unevenly, as submitted; ``job_defaults`` then fills in its defaults as for any job.

Not raised (kept as submitted, so it waits with PartitionNodeLimit; docs/policies/slurm.md,
Known differences): ``--gpus`` with more tasks than nodes (the real system spread
``-n4 --gpus=4`` as 3 + 1 GPUs beside 2 + 2 tasks, which no pod set here holds: the split form
spreads tasks, ``spread_gpus`` GPUs, not both), ``--gpus`` that neither spreads (with
``--exclusive``, or ``--cpus-per-gpu`` beside tasks) nor divides over the nodes, ``--gpus-per-task`` with
fewer tasks than nodes (not probed), the reader's one pod of several tasks (``-n T`` with GPUs
per node, which keeps its one node; ``-n T --gpus=X`` with X not a multiple of T, refused with
``job_defaults.MSG_UNWALKED``), and jobs of several pod sets (Kubernetes shapes, not sbatch's). ``--mem`` over several tasks was split over the task pods, rounded up,
and is taken back as their sum.
"""
from __future__ import annotations

from dataclasses import replace

from gpupool.model.slurm import SlurmConfig
from gpupool.model.workload import PodSet, Workload
from gpupool.policy.slurm.jobinfo import listed_count, raised_least, requested_partitions


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
    A job with a node count is held against its least count (a range's largest is lowered to
    the GPUs instead); sbatch's reader already refuses ``--gpus`` below it. A walked
    ``--nodes=A-B`` (``PodSet.walk_nodes``) is held against A as MinNodes raised it, its
    largest lowered to the GPUs first (``-N1-4 --gpus=3`` in a MinNodes=3 partition runs on
    three nodes, ``-N1-4 --gpus=2`` is not raised). A nodelist sbatch cut down to the tasks
    (``PodSet.list_trimmed``) sent them as both counts: MinNodes raises nothing there."""
    ps = wl.pod_sets[0] if len(wl.pod_sets) == 1 else None
    if ps is None or not ps.gpus_per_job:
        return False
    if ps.walk_gpus and ps.walk_nodes is None and ps.gpus_per_job < listed_count(wl):
        # a walk's least count is its list's hosts (``_job_create``), which a ``--contiguous``
        # list's filled gaps may raise past the GPUs (``contiguous_list``; the reader refuses a
        # list beyond them as written; source, found by a review)
        return True
    if ps.walk_nodes is not None:
        # (the largest count lowered to the GPUs first, so a MinNodes above it raises nothing:
        # probe p140 under EnforcePartLimits=NO queued ``-N1-3 --gpus=1`` in a MinNodes=2
        # partition)
        least, most = ps.walk_nodes
        least = raised_least(least, min(most, ps.gpus_per_job), partitions_min_nodes(cfg, wl))
    elif ps.one_per_node and ps.list_count_only:
        # a count from a --nodelist alone is the least MinNodes raises (``_raised_list``; a
        # shape the policy gave the list later, ``job_defaults._listed_fixed``, too: ``-p m
        # --gpus=2 -w gpu01,gpu02`` at MinNodes=3 is "--gpus < -N"; source, found by a review)
        least = max(ps.count, partitions_min_nodes(cfg, wl))
    elif ps.one_per_node:
        least = ps.min_count if ps.min_count is not None else ps.count
    elif ps.list_trimmed:
        least = max(1, listed_count(wl))
    else:
        least = partitions_min_nodes(cfg, wl)
    return ps.gpus_per_job < least


def raise_node_count(cfg: SlurmConfig, wl: Workload) -> Workload:
    """``wl`` as slurmctld stores it when it gave no node count in partitions of MinNodes > 1:
    its pod set as ``--nodes=M`` gives it; else ``wl`` itself (the module's docstring says
    which requests are left as they are)."""
    if len(wl.pod_sets) != 1:
        return wl
    ps = wl.pod_sets[0]
    if ps.one_per_node and ps.per_node_tasks is not None and not ps.per_node_tasks[0]:
        return _raised_per_node(cfg, wl, ps)
    if ps.one_per_node and ps.list_count_only:
        return _raised_list(cfg, wl, ps)
    if ps.one_per_node or ps.split_tasks or ps.walk_nodes is not None or (ps.walk_gpus and pod_tasks(ps) > 1) \
            or ps.list_trimmed:
        # (``--nodes=A-B --gpus=X`` gave a node count, and so did a nodelist sbatch cut down to
        # the tasks; the last: one pod of several tasks, ``sbatch._walks_tasks`` and ``-n T
        # --gpus=X``)
        return wl
    nodes = partitions_min_nodes(cfg, wl)
    if nodes < 2 or listed_count(wl) >= nodes:
        # (a nodelist's hosts are the job's least count already: ``-p m -n3 -w gpu[01-03]`` in
        # a MinNodes=2 partition keeps its three nodes; from the source, found by a review)
        return wl
    raised = per_node_pods(ps, nodes, memory_per_pod="(document " in wl.source
                           or (ps.cpus_per_task is None and not ps.gpus_per_job))
    return wl if raised is None else replace(wl, pod_sets=(replace(raised, nodes_raised=ps.count, walk_gpus=False),))


def _raised_list(cfg: SlurmConfig, wl: Workload, ps: PodSet) -> Workload:
    """A pod a node whose count came from a ``--nodelist`` alone (``PodSet.list_count_only``: no
    ``--nodes``; with ``--ntasks-per-node=K`` too) in partitions of MinNodes M above the list's
    hosts: slurmctld raises the least count to M (``_valid_job_part``), so the job takes the
    listed nodes and M - hosts more, each as the listed ones (a real 22.05.8 ran ``-p m -w
    gpu01,gpu02`` in a MinNodes=3 partition on gpu01-03 with a CPU each, ``--gres=gpu:1`` beside
    it a GPU each, ``-w gpu02,gpu04 -c2`` on gpu02-04, ``-n2 --ntasks-per-node=1`` on three
    nodes with 3 CPUs, ``--ntasks-per-node=2`` with 2 CPUs on each of three; probe p161; the
    job waited with PartitionNodeLimit before). The submit checks read it as submitted
    (``PodSet.nodes_raised``: the submitted count)."""
    nodes = partitions_min_nodes(cfg, wl)
    least = ps.per_node_tasks[0] if ps.per_node_tasks is not None else ps.count
    if nodes <= least:
        return wl
    if ps.per_node_tasks is not None:
        if nodes <= ps.count:
            # ⌈T/K⌉ nodes already reach MinNodes: only the stored least count (the hosts) is
            # raised (``-p m -n6 --ntasks-per-node=2 -w gpu01,gpu02`` on three nodes; source,
            # found by a review: it waited with PartitionNodeLimit)
            return replace(wl, pod_sets=(_least_raised(ps, nodes),))
        ps = _least_raised(ps, nodes)
    if ps.gpus_per_job and not ps.spread_gpus and ps.cpus_per_gpu_cap:
        # ``--gpus=X`` kept even over the hosts (beside ``--cpus-per-gpu`` and
        # ``--ntasks-per-node``): X/M a node as ``-N M`` gives it, where M divides X; else not
        # raised (more nodes of the hosts' share would hold more GPUs than asked; found by a
        # review, not probed)
        if ps.gpus_per_job % nodes:
            return wl
        share = ps.gpus_per_job // nodes
        # (memory per GPU, and per CPU of the CPUs per GPU, follows the share; per node stays)
        memory = ps.memory_mib // ps.gpus * share if ps.memory_per in ("gpu", "cpu") else ps.memory_mib
        ps = replace(ps, gpus=share, cpu_m=ps.cpu_m // ps.gpus * share, memory_mib=memory)
    # (an exclusive even share, ``--gpus=X`` or ``--gpus-per-task`` alike here, is raised with
    # the hosts' share a node: its nodes are whole, as ``-N M``'s are; not modelled, found by a
    # review: on a partition whose nodes hold fewer GPUs than that share, ``-N M``'s ⌈X/M⌉ may fit
    # where the hosts' share does not)
    return replace(wl, pod_sets=(replace(ps, count=nodes, nodes_raised=wl.pod_sets[0].count),))


def _raised_per_node(cfg: SlurmConfig, wl: Workload, ps: PodSet) -> Workload:
    """``--ntasks-per-node=K`` with no ``--nodes`` or nodelist (``PodSet.per_node_tasks``) in
    partitions of MinNodes M > 1: M nodes at least, K tasks' CPUs on each, as select takes
    them (a real 22.05.8 ran ``-p m -n2 --ntasks-per-node=2`` in a MinNodes=2 partition on
    both nodes, 2 CPUs each, and recorded the pending job as node=2; probes p149, p150)."""
    nodes = partitions_min_nodes(cfg, wl)
    if nodes < 2:
        return wl
    raised = _least_raised(ps, nodes)
    return replace(wl, pod_sets=(replace(raised, count=max(ps.count, nodes), nodes_raised=ps.per_node_tasks[1]),))


def _least_raised(ps: PodSet, nodes: int) -> PodSet:
    """``ps`` (``--ntasks-per-node``: ``PodSet.per_node_tasks`` set) with its stored least node
    count raised to ``nodes``, its tasks as they were."""
    _least, tasks, pod_tasks = ps.per_node_tasks
    return replace(ps, per_node_tasks=(nodes, tasks, pod_tasks))


def per_node_pods(ps: PodSet, nodes: int, memory_per_pod: bool = False) -> PodSet | None:
    """Task pod set ``ps`` (``ps.count`` tasks of one task each, placed anywhere) as ``nodes``
    pods of one node each, as sbatch's ``--nodes=nodes`` with the same options gives it
    (``sbatch._node_shape``): each holds ⌈T/nodes⌉ of the T tasks, with their CPUs (or CPUs
    per GPU), GPUs per task following them, GPUs per node as asked, ``--gpus`` spread
    (``PodSet.spread_gpus``, the even share rounded up as submitted) or else even, and memory
    per node whole, per CPU or per GPU following them; with more tasks than nodes, the split
    form as submitted (``PodSet.split_tasks``). None where that is not modelled: ``--gpus``
    that would spread beside split tasks, that does not divide over the nodes where it does
    not spread, or that is fewer than the nodes (refused at submit), and GPUs per task with
    fewer tasks than nodes (not probed). ``memory_per_pod``: the
    pods' memory is each pod's own (Kubernetes pods, trace rows: a node holds it for each of its
    tasks), not sbatch's ``--mem`` for a node shared out over the task pods."""
    tasks = ps.count
    per_node = -(-tasks // nodes)
    cpt = ps.cpus_per_task  # None: --cpus-per-gpu
    split = tasks if tasks > nodes and cpt is not None and not ps.exclusive else 0
    per_job = ps.gpus_per_job if ps.spread_gpus else 0  # --gpus=X
    per_task = bool(ps.gpus_per_job) and not per_job  # --gpus-per-task
    # (--cpus-per-gpu with no task count spreads as over a fixed count, ``sbatch._spreads_gpus``,
    # and so do DefCpuPerGPU's CPUs per GPU, ``job_defaults._default_cpus_per_gpu_tasks``)
    spread = bool(per_job) and not ps.exclusive and (cpt is not None or tasks == 1)
    if per_job:
        if per_job < nodes or (spread and split) or (not spread and per_job % nodes):
            return None
        gpus = -(-per_job // nodes) if spread else per_job // nodes
    elif per_task and tasks < nodes:
        return None  # GPUs per task on nodes without a task: not probed
    else:
        gpus = ps.gpus * per_node  # per task (following the tasks), or per node with one task
    if cpt is not None:
        cpu_m = per_node * cpt * 1000
    else:
        cpu_m = ps.cpu_m // ps.gpus * gpus if ps.gpus else ps.cpu_m * per_node
    if ps.memory_per == "" and memory_per_pod:
        memory = ps.memory_mib * per_node
    elif ps.memory_per == "":
        memory = ps.memory_mib * tasks  # --mem is per node; the task pods shared it out
    elif ps.memory_per == "gpu":
        memory = ps.memory_mib // ps.gpus * gpus if ps.gpus else 0
    else:  # per CPU: follows the node's CPUs
        memory = ps.memory_mib * cpu_m // max(1000, -(-ps.cpu_m // 1000) * 1000)
    # GPUs per node come with one task (sbatch refuses --gres with several and no --nodes):
    # select/cons_tres steers its cores as for ``-N M -n1`` (``sbatch._slurm_tasks``)
    slurm_tasks = (1, 1, cpt or 1) if gpus and tasks == 1 and not ps.gpus_per_job and not ps.exclusive else None
    # (a pod a node holds its own tasks and memory: ``walk_tasks`` and ``node_memory_mib`` mark
    # only a task shape as submitted; ``--contiguous`` stays, the split form's walk reading it
    # as ``-N M -n T``'s does)
    return replace(ps, count=nodes, one_per_node=True, min_count=None, cpu_m=cpu_m, memory_mib=memory, gpus=gpus,
                   split_tasks=split, split_gpus=bool(split) and per_task, slurm_tasks=slurm_tasks,
                   spread_gpus=spread, walk_tasks=0, node_memory_mib=0)


def pod_tasks(ps: PodSet) -> int:
    """The tasks one pod of ``ps`` holds (its CPUs in whole tasks of ``cpus_per_task``; 1 where
    they are not whole tasks or per GPU): more than one in the sbatch reader's one pod of
    ``-n T`` (``sbatch._walks_tasks``, ``-n T --gpus=X`` with X not a multiple of T, and beside
    ``--cpus-per-gpu`` the T of ``PodSet.walk_tasks``)."""
    if ps.walk_tasks and ps.count == 1:  # one pod of ``-n T --gpus=X --cpus-per-gpu=C``
        return ps.walk_tasks
    cpt = ps.cpus_per_task
    return ps.cpu_m // (cpt * 1000) if cpt and not ps.cpu_m % (cpt * 1000) else 1
