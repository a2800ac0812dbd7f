"""select/cons_tres's GPUs for ``--gpus=X`` over a fixed node count (``PodSet.spread_gpus``):
the nodes, in index order, each take as many of the job's GPUs as they have free while every
later node keeps one (22.05's ``_set_job_bits1``: at most X − taken − nodes still to come; a
walk of more tasks than GPUs may take more nodes than GPUs, and its first nodes then take none:
``-n8 --gpus=3`` on four nodes of two free CPUs ran as 0 + 1 + 1 + 1, probe p112). Where the
nodes outnumber the GPUs by two or more, the first node's share is below zero, and on nodes
whose GPUs have no type and no ``Cores=`` in gres.conf (no GRES topology: ``_get_job_cnt``,
whose unsigned share wraps round) every node then takes all the GPUs it has free, more than
the job asked (probe p114, such nodes: ``-n500 --gpus=2`` on four idle nodes held all 32,
``-n6 --gpus=1`` on three nodes of two free CPUs 24, and ``-n300 --gpus=1`` with two GPUs free
on each node 2 + 2 + 2; ``-n400 --gpus=3``, one node more than GPUs, 0 + 1 + 1 + 1):
gpupool gives the job what slurmctld gives it. On nodes with a GRES topology
(``_set_job_bits1``, read from the source, not probed) a share below zero gives none; not
modelled there: a node given none takes one GPU from a socket the job has no cores on, where
there is one (``_set_job_bits1``'s fallback).

Seen on a real 22.05.8 (probe p100, 2026-12-04: four idle 8-GPU nodes, 128 CPUs each, two
threads per core; ``tests/unit/test_slurm_spread_gpus.py``): ``-N2 --gpus=4`` ran as 3 + 1 GPUs,
``--gpus=8`` as 7 + 1, ``--gpus=6`` 5 + 1, ``--gpus=3`` 2 + 1, ``--gpus=9`` 8 + 1, ``--gpus=2``
1 + 1, ``--gpus=16`` 8 + 8, ``-N3 --gpus=6`` 4 + 1 + 1, each node with one core (2 CPUs) and
``--mem`` per node; a job raised to a partition's MinNodes the same (probe p99: ``-n1 --gpus=3``
2 + 1 on a MinNodes=2 partition).

A job asking ``--gpus`` with no node count gets its nodes from ``gpu_walk`` and its GPUs dealt
out here the same way. The nodes of a fixed count are chosen as for any pod set of one GPU a
pod (which also orders them by the GPUs they offer the job, ``near_gpus``); the GPUs are then
dealt out here. Memory asked per GPU follows each node's GPUs, and a node takes no more GPUs
than its free memory pays for at that rate, or at DefMemPerGPU where the job asked its memory
otherwise (gpupool's reading: ``_set_job_bits1`` has no memory cap of its own; the GRES filter
caps the GPUs a node offers by its free memory). Memory per CPU beside CPUs per GPU follows
each node's CPUs, its free memory capping them in whole cores (probe p160, finding 98).

CPUs per GPU (``--cpus-per-gpu``, or DefCpuPerGPU; ``cpus_per_task`` None) cap no GPUs here.
The job's CPUs (per GPU, for its X) go out in the order the nodes were taken (a walk's; else index
order), each node giving what it may while
every later node keeps one GPU's worth (``_cpus_to_use``): its free CPUs within MaxCPUsPerNode,
and with ``--cpus-per-gpu`` no more than that many for each GPU its free CPUs pay for (its
``avail_cpus``; ``_node_cpus``). A job whose nodes cannot give them all does not fit (refused at
submit where no nodes ever could). Probes p116 and p117 (2026-12-05, the same nodes):
``-N2 --gpus=3 --cpus-per-gpu=4`` ran as 2 + 1 GPUs with 8 + 4 CPUs, ``-N3 --gpus=16
--cpus-per-gpu=20`` as 8 + 7 + 1 with 120 + 120 + 80, ``-N2 --gpus=16 --cpus-per-gpu=20`` was
refused; under DefCpuPerGPU=4 ``--gpus=12`` (walked) ran with 44 + 4 CPUs, and beside
MaxCPUsPerNode=8 ``-N2 --gpus=4`` as 3 + 1 GPUs with 8 + 8 CPUs.

Not modelled: cons_tres's choice of a run of nodes also asks whether the run's free GPUs hold
X (``gres_sched_sufficient``; ``gpu_walk`` models it where the node count is open), here a
fixed count's nodes are chosen by their CPUs, and where their free GPUs fall short of X the
placement fails and the job waits for GPUs to free; on nodes with gres.conf ``Cores=``,
cons_tres first takes only GPUs near the job's cores (``_set_job_bits1``'s first pass) and
fills up from the others after (``_set_job_bits2``), here the lowest free indices are taken;
and there ``_set_job_bits1`` caps each node's GPUs at what the CPUs it was dealt pay for, in
index order, where the nodes were taken out of index order (a run above another, or a
``--nodelist``; the Slurm policy refuses CPUs per GPU beside a list there,
``job_defaults.MSG_LISTED_CPG``).
"""
from __future__ import annotations

from gpupool.engine.nodes import lowest_bits


def gpus_paid(ps, free, i: int, n: int, per_gpu: int) -> int:
    """At most ``n`` GPUs: as many as node ``i``'s free memory pays for at ``per_gpu`` MB each
    (0: no cap) and, where CPUs follow the GPUs (DefCpuPerGPU: ``cpus_per_task`` None), its
    free CPUs within MaxCPUsPerNode (``Free.cap``)."""
    if per_gpu:
        n = min(n, free.mem[i] // per_gpu)
    if ps.cpus_per_task is None and ps.cpu_m:
        n = min(n, free.cpu_within_cap(i) // ps.cpu_m)
    return n


def _node_cpus(ps, free, i: int, avail: int, per_gpu: int) -> int:
    """The CPUs node ``i`` may give a pod set whose CPUs are per GPU (its ``avail_cpus``):
    its free CPUs within MaxCPUsPerNode, and with ``--cpus-per-gpu`` (``PodSet.cpus_per_gpu_cap``)
    no more than that many for each of its free GPUs (``avail``) its free CPUs and memory pay
    for; DefCpuPerGPU caps nothing here."""
    if ps.cpus_per_gpu_cap:
        cpu = gpus_paid(ps, free, i, avail.bit_count(), per_gpu) * ps.cpu_m
    else:
        cpu = free.cpu_within_cap(i)
    if per_cpu := _per_cpu(ps):
        # memory per CPU: no more CPUs than the free memory pays for, in whole cores where
        # ThreadsPerCore > 1 (cons_tres's ``can_job_run_on_node`` cuts by ``cpu_alloc_size``;
        # source, found by a review: an odd count rounded up later needed memory the node lacks)
        step = free.nodes.cpu_step[i]
        cpu = min(cpu, free.mem[i] // per_cpu * 1000 // step * step)
    return cpu


def _per_cpu(ps) -> int:
    """MB per CPU of a spread pod set whose memory follows the CPUs dealt (``memory_per``
    "cpu" beside CPUs per GPU), else 0."""
    return ps.memory_per_cpu if ps.memory_per == "cpu" and ps.cpus_per_task is None else 0


def _cpus_dealt(ps, chosen, free, gpus_for, per_gpu: int, total: int) -> dict[int, int] | None:
    """node -> the CPUs (millicores) a pod set asking CPUs per GPU gets there, ``total`` for the
    job: the nodes in the order they were taken (``chosen``'s: a walk's, or ``_eval_nodes``' for
    a fixed count, ``select._walked``: a real 22.05.8 with gpu02 held ran ``-N3 --gpus=12
    --cpus-per-gpu=3`` with 6 + 15 + 15 CPUs on gpu01, gpu03, gpu04, the run gpu03-04 taken
    first, and beside ``-w gpu04`` on gpu02-04 the listed node first; probe p160)
    each give what they may (``_node_cpus``) but no more than the job's CPUs not yet given
    less one GPU's worth for each node after it (``_eval_nodes`` with ``_cpus_to_use``); None
    when the nodes cannot give them all (``-N2 --gpus=16 --cpus-per-gpu=20`` on 128-CPU nodes
    was refused at submit, probe p117). Probes p116, p117: ``--gpus=16 --cpus-per-gpu=20`` on
    idle 128-CPU nodes ran as 8 + 7 + 1 GPUs with 120 + 120 + 80 CPUs, ``-N2 --gpus=3
    --cpus-per-gpu=4`` as 2 + 1 with 8 + 4, DefCpuPerGPU=4 ``--gpus=12`` as 8 + 4 with 44 + 4;
    ``diff-slurm --mix gpus-cpg`` seed 1: ``--gpus=4 --cpus-per-gpu=4``, walked to gpu03 (3
    GPUs free) before gpu01 (2), ran with 4 + 12 CPUs and 2 + 2 GPUs; probe p118: ``-N3
    --gpus=8 --cpus-per-gpu=4`` on idle nodes 24 + 4 + 4 (each later node keeps C, not a core).
    Not modelled: a node with CPUs for more GPUs than it has free may give more where the nodes
    hold exactly the job's CPUs (p118: 80 + 16 + 112 where this gives 64 + 16 + 128)."""
    cpu_per_gpu = ps.cpu_m
    left = total
    out: dict[int, int] = {}
    order = [p[0] for p in chosen]
    for k, i in enumerate(order):
        cpu = min(_node_cpus(ps, free, i, gpus_for(free, i, ps), per_gpu), left - cpu_per_gpu * (len(order) - 1 - k))
        out[i] = cpu
        left -= cpu
    return None if left > 0 else out


def spread(ps, chosen, free, gpus_for) -> list | None:
    """The pods ``chosen`` for spread pod set ``ps`` (one per node, one GPU each) with the job's
    ``ps.gpus_per_job`` GPUs dealt out in node index order, or None when their nodes' free GPUs
    (and the memory those need) fall short. ``gpus_for(free, i, ps)``: the devices a pod may
    take on node ``i``."""
    total = ps.gpus_per_job
    per_gpu = ps.memory_mib if ps.memory_per == "gpu" else 0
    # the GRES filter caps a node's GPUs by its free memory at the memory per GPU asked, else at
    # DefMemPerGPU, whatever memory the job asked otherwise (``gres_select_filter``; source,
    # found by a review: the walk's offers read the same, ``select._walk_gpus``)
    paid_at = max(per_gpu, ps.mem_per_gpu)
    cpu_per_gpu = ps.cpu_m if ps.cpus_per_task is None else 0  # DefCpuPerGPU: CPUs follow the GPUs
    per_cpu = _per_cpu(ps)
    pods = sorted(chosen)
    node_cpus = _cpus_dealt(ps, chosen, free, gpus_for, paid_at, cpu_per_gpu * total) if cpu_per_gpu else None
    if node_cpus is None and cpu_per_gpu:
        return None
    out = []
    taken = 0
    later = len(pods)
    overflow = False
    for i, _mask, cpu, mem in pods:
        later -= 1
        avail = gpus_for(free, i, ps)
        share = total - taken - later  # what is left once every later node keeps one
        # below zero (the nodes outnumber the GPUs by two or more) a node whose GPUs have no
        # type and no ``Cores=`` takes every GPU it has free, and so does each such node after
        # it (``_get_job_cnt``: its unsigned share wraps round); one with them takes none
        # (``_set_job_bits1``)
        overflow = overflow or (share < 0 and not free.nodes.gres_topology[i])
        n = avail.bit_count() if overflow else max(0, min(avail.bit_count(), share))
        if node_cpus is not None:  # CPUs per GPU cap no GPUs here (``_cpus_dealt``)
            if paid_at:
                n = min(n, free.mem[i] // paid_at)
            cpu = node_cpus[i]
            if per_cpu:  # memory per CPU: the node's CPUs' worth (within its free memory: ``_node_cpus``)
                mem = cpu // 1000 * per_cpu
        else:
            n = gpus_paid(ps, free, i, n, paid_at)
        if n < 1 and share > 0:
            return None
        out.append((i, lowest_bits(avail, n), cpu, per_gpu * n if per_gpu else mem))
        taken += n
    return out if taken == total or (overflow and taken > total) else None
