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
than its free memory pays for at that rate (gpupool's reading: ``_set_job_bits1`` has no
memory cap of its own; the node filter caps the GPUs a node offers by its free memory), and
CPUs per GPU from DefCpuPerGPU follow them likewise (not probed).

Not modelled: cons_tres's choice of a run of nodes also asks whether the run's free GPUs hold
X (``gres_sched_sufficient``; ``gpu_walk`` models it where the node count is open), here a
fixed count's nodes are chosen by their CPUs, and where their free GPUs fall short of X the
placement fails and the job waits for GPUs to free; on nodes with gres.conf ``Cores=``,
cons_tres first takes only GPUs near the job's cores (``_set_job_bits1``'s first pass) and
fills up from the others after (``_set_job_bits2``), here the lowest free indices are taken.
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
        n = min(n, (free.cpu[i] if free.cap is None else min(free.cpu[i], free.cap[i])) // ps.cpu_m)
    return n


def spread(ps, chosen, free, gpus_for) -> list | None:
    """The pods ``chosen`` for spread pod set ``ps`` (one per node, one GPU each) with the job's
    ``ps.gpus_per_job`` GPUs dealt out in node index order, or None when their nodes' free GPUs
    (and the memory those need) fall short. ``gpus_for(free, i, ps)``: the devices a pod may
    take on node ``i``."""
    total = ps.gpus_per_job
    per_gpu = ps.memory_mib if ps.memory_per == "gpu" else 0
    cpu_per_gpu = ps.cpu_m if ps.cpus_per_task is None else 0  # DefCpuPerGPU: CPUs follow the GPUs
    pods = sorted(chosen)
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
        n = gpus_paid(ps, free, i, avail.bit_count() if overflow else max(0, min(avail.bit_count(), share)), per_gpu)
        if cpu_per_gpu:
            cpu = cpu_per_gpu * n
        if n < 1 and share > 0:
            return None
        out.append((i, lowest_bits(avail, n), cpu, per_gpu * n if per_gpu else mem))
        taken += n
    return out if taken == total or (overflow and taken > total) else None
