"""``--contiguous`` beside a ``--nodelist`` of several hosts: the list's gaps filled at submit.

slurmctld's ``_job_create`` (22.05) turns the list into a node bit set and, for a contiguous
job, sets every node between its lowest and highest one (``bit_fill_gaps``): the job then
requires that whole run, and its least node count (and least CPUs) rise to the run's nodes.
A largest count below them refuses the job, "Node count specification invalid"
(ESLURM_INVALID_NODE_COUNT), before any partition or limit is looked at.

A real 22.05.8 (probe p162, four nodes gpu01-04 in that order) ran ``--contiguous -w
gpu01,gpu03`` on gpu01, gpu02 and gpu03, one CPU each, and refused ``-N2 --contiguous -w
gpu01,gpu03`` with that message.

Why in the policy and not in sbatch's reader: the gaps are the pool's node order, which the
reader cannot see. The job is rewritten as if it had listed the whole run (``-w gpu[01-03]``),
so every later step (node filter, MinNodes raise, submit checks, placement) reads the
required nodes and node count slurmctld stores.
"""
from __future__ import annotations

from dataclasses import replace

from gpupool.errors import InputError
from gpupool.formats.hostlist import compress_hostlist, expand_hostlist
from gpupool.model.workload import GANG_ALL, Workload
from gpupool.policy.slurm.limits import MSG_NODE_COUNT
from gpupool.policy.slurm.min_nodes import pod_tasks

#: the refusal of a node count that cannot hold the filled run (the only one this step gives)
REFUSAL = MSG_NODE_COUNT


def fill_gaps(wl: Workload, order: tuple[str, ...], index: dict[str, int]) -> tuple[Workload, str | None]:
    """``wl`` with its nodelist's gaps filled (``order``: the pool's node names in slurm.conf's
    order, ``index``: name -> position there), and slurmctld's refusal or None. Unchanged for
    a job not marked contiguous (``PodSet.contiguous``), a list without gaps, or one that
    does not parse or names an unknown node (the submit check reports that)."""
    if len(wl.pod_sets) != 1 or not wl.nodelist or not wl.pod_sets[0].contiguous:
        return wl, None
    try:
        names = set(expand_hostlist(wl.nodelist))
    except (InputError, ValueError):
        return wl, None
    where = [index.get(name) for name in names]
    if len(where) < 2 or any(i is None for i in where):
        return wl, None
    low, high = min(where), max(where)
    run = high - low + 1
    if run == len(where):
        return wl, None
    ps = wl.pod_sets[0]
    nodelist = compress_hostlist(order[low:high + 1])
    if ps.walk_gpus:
        return _walk_filled(wl, ps, nodelist, run)
    if not ps.one_per_node:
        # task pods: the job's tasks, not its nodes, make the pods, and every required node
        # takes one (a real 22.05.8 ran ``-n4 --contiguous -w gpu01,gpu03`` as 2 + 1 + 1 on
        # gpu01-03, probe p163, as ``-n4 -w gpu[01-03]``); a run of more nodes than tasks is
        # not modelled: kept as listed, without the option (found by a review)
        if run > ps.count:
            return replace(wl, pod_sets=(replace(ps, contiguous=False),)), None
        return replace(wl, nodelist=nodelist), None
    count = ps.count
    if ps.list_count_only:  # the count came from the list alone: the run's nodes
        count = max(count, run)
    elif count < run:  # ``--nodes``' largest count cannot hold the run
        return wl, REFUSAL
    least = ps.min_count  # a range's least rises to the run (a fixed count once it meets the largest)
    if least is not None:
        least = max(least, run)
        if least >= count:
            least = None
    per_node = ps.per_node_tasks
    if per_node is not None:
        # ``--ntasks-per-node=K``: the stored least count and the tasks rise with the run (a
        # real 22.05.8 ran ``--contiguous -w gpu01,gpu03 --ntasks-per-node=1`` as three tasks
        # on gpu01-03, probe p163b); a ``--ntasks`` above them stays
        per_node = (max(per_node[0], run), max(per_node[1], run * per_node[2]), per_node[2])
    filled = replace(ps, count=count, min_count=least, per_node_tasks=per_node)
    # (a range the run closed is a fixed count: all its pods start together, as sbatch's
    # reader gives a fixed ``--nodes``)
    gang = GANG_ALL if least is None and ps.min_count is not None else wl.gang
    return replace(wl, nodelist=nodelist, pod_sets=(filled,), gang=gang), None


def _walk_filled(wl: Workload, ps, nodelist: str, run: int) -> tuple[Workload, str | None]:
    """A walk for GPUs (``PodSet.walk_gpus``, as submitted) beside a filled list: the run is
    the walk's required nodes and its least count (``gpu_walk.walk_least`` counts the list's
    hosts; a ``--nodes=A-B`` walk's A rises to the run, and a B below it refuses the job). A
    real 22.05.8 ran ``--gpus=12 --contiguous -w gpu01,gpu03`` as 8 + 3 + 1 on gpu01-03 and
    ``-n4 --gres=gpu:1 --contiguous -w gpu01,gpu03`` as 2 + 1 + 1 tasks, a GPU each (probe
    p167). A run of more nodes than ``--gpus=X`` is refused by the submit check after the
    partitions, "--gpus < -N" (``min_nodes.fewer_gpus_than_nodes``, as ``gres_job_state_validate``
    follows the fill; source, found by a review). A run of more nodes than the job's tasks is
    not modelled: kept as listed, without the option, unless it is beyond the GPUs too
    (refused as above; found by a review)."""
    if ps.walk_nodes is not None:
        least, most = ps.walk_nodes
        if most < run:
            return wl, REFUSAL
        return replace(wl, nodelist=nodelist, pod_sets=(replace(ps, walk_nodes=(max(least, run), most)),)), None
    tasks = ps.count if ps.count > 1 else pod_tasks(ps)
    if tasks >= 2 and run > tasks and not (ps.gpus_per_job and run > ps.gpus_per_job):
        return replace(wl, pod_sets=(replace(ps, contiguous=False),)), None
    return replace(wl, nodelist=nodelist), None
