"""The node weights select/cons_tres 22.05 uses for a GPU job: nodes offering it more GPUs first.

For every node it evaluates for a job that asks GPUs, cons_tres replaces the low byte of the
node's scheduling weight (the configured Weight shifted up a byte) by 0xff minus the GPUs the
node offers the job, so within one configured weight the nodes with more GPUs weigh less and are
taken first (``_can_job_run_on_node``: "Favor nodes with more co-located GPUs"). What a node
offers is its free GPUs of the type asked, at most what the job asks per node (``--gres``,
``--gpus-per-node``) or, without a per-node count, for the whole job (``--gpus``,
``--gpus-per-task`` × tasks), and at most its free memory over the memory per GPU
(``--mem-per-gpu``, else DefMemPerGPU); an exclusive job's count is not capped by its request.

A real 22.05.8 (docs/differential.md, finding 52), four 8-GPU nodes with 0, 3, 2 and 3 GPUs
free: ``-N2 -n4 --gpus-per-task=1`` (four GPUs for the job) weighed the nodes 508, 509, 508
(3, 2, 3 GPUs offered) and ran on gpu02 and gpu04; with 3, 3, 2 free it ran on gpu02-03;
``-N2 --gres=gpu:2`` (two per node, offered by all three) ran on gpu02-03.

A per-node request is offered in full by every node that fits it in gpupool's fit tests (the
node holds the GPUs and their memory), so the order changes only for whole-job and exclusive
requests spread over several nodes; every other job keeps the configured weights, untouched.
(Under gres.conf ``Cores=`` real Slurm does not count GPUs on sockets without a free core, so
there even a per-node request can be offered less; not modelled, below.)

With ``--cpus-per-gpu`` a node offers no more GPUs than its free CPUs pay for (probe p117, 2026-12-05:
gpu01 with 7 GPUs but 8 CPUs free, ``-N2 --gpus=4 --cpus-per-gpu=4`` ran on gpu02-03).

Not modelled: GPUs on sockets without a free core are not counted where gres.conf binds GPUs to
cores (``Cores=``), DefCpuPerGPU's cap (free CPUs over its CPUs per GPU; not probed), and
the weights backfill's will-run test leaves on nodes from the GPU job it evaluated before (a
CPU-only job tested next in the same cycle sees them).
"""
from __future__ import annotations


def offer_cap(ps) -> int | None:
    """The most GPUs a node can offer ``ps`` by its request, or None where that does not depend
    on the node (a per-node request, or one pod): the weights stay as configured."""
    if not ps.gpus:
        return None
    if ps.exclusive:
        return 1 << 30  # whole nodes: no cap but the node's GPUs and memory
    if ps.gpus_per_job:  # the whole job's count, as submitted (whatever form the pods take)
        return ps.gpus_per_job if ps.count > 1 or ps.split else None
    if not ps.one_per_node and ps.count > 1:  # task pods: their GPUs are the job's
        return ps.total_gpus
    return None


def gpu_weights(ps, pool: list[int], free, weight: list[int], gpus_for) -> list[int]:
    """``weight`` as cons_tres orders the nodes of ``pool`` for ``ps``: the configured weights
    when every node offers it the same GPUs (or it asks per node), else each weight shifted up a
    byte with 0xff minus the node's offer below it. ``gpus_for(free, i, ps)``: the free GPU
    mask a pod of ``ps`` may take on node ``i`` (None: no GPU of its type)."""
    cap = offer_cap(ps)
    if cap is None:
        return weight
    per_gpu = ps.mem_per_gpu
    mem = free.mem
    counts = free.gpus
    typed = ps.gpu_type is not None
    least = ps.gpus
    # CPUs per GPU (--cpus-per-gpu, or DefCpuPerGPU): a node offers the GPUs its free CPUs pay
    # for (probe p117; under DefCpuPerGPU=2 a real 22.05.8 passed over a node with 4 CPUs free
    # for ``--gpus=12``, probe p160)
    cpus_per_gpu = (ps.cpu_m // ps.gpus if (ps.cpus_per_gpu_cap or ps.spread_gpus) and ps.cpus_per_task is None
                    and ps.gpus else 0)
    offers = {}
    for i in pool:
        if typed:
            mask = gpus_for(free, i, ps)
            have = 0 if mask is None else mask.bit_count()
        else:
            have = counts[i]
        if have < least:
            continue  # the node cannot hold a pod: its weight is never read
        offer = have if have < cap else cap
        if cpus_per_gpu:
            offer = min(offer, free.cpu_within_cap(i) // cpus_per_gpu)
        if per_gpu:
            offer = min(offer, mem[i] // per_gpu)
            if offer < 0:  # memory over-allocated (a differential replay of real Slurm's): none
                offer = 0
        offers[i] = 255 - min(offer, 255)
    if len(set(offers.values())) < 2:
        return weight
    shifted = [w << 8 | 255 for w in weight]
    for i, low in offers.items():
        shifted[i] = weight[i] << 8 | low
    return shifted
