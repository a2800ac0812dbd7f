"""select/cons_tres: which nodes and which GPUs a job gets (spec §6, §7).

Node choice: nodes grouped by Weight (lowest first); a one-node request takes the node with
the fewest available CPUs that still fits (ties: lowest index) inside the tightest run of
consecutive fitting nodes; a multi-node request walks runs of consecutive fitting nodes as
``_eval_nodes`` does (``eval_nodes.pick_nodes``: a run that holds the job's CPUs and nodes
beats one that does not or one with more CPUs, a larger run that does not beats a smaller
one, and a run entered for the last node alone gives it to the best fitting node). GPUs:
the lowest free device indices (of the type asked, when a request names one; any type
otherwise). ``--exclusive`` takes every CPU and GPU of a node but only the memory asked.
GRES are never shared.
"""
from __future__ import annotations

from dataclasses import replace

from gpupool.engine.nodes import NodeTable, lowest_bits, mask_indices
from gpupool.model.workload import GANG_MIN
from gpupool.policy.slurm.node_filter import job_nodes
from gpupool.policy.slurm.eval_nodes import pick_nodes, walk_order
from gpupool.policy.slurm.near_gpus import gpu_weights
from gpupool.policy.slurm.split_tasks import (cpus_to_use, deal_cyclic, deal_tasks, retry, second_try, split_nodes,
                                             tasks_fit, tasks_memory, walk_listed)
from gpupool.policy.slurm.gpu_walk import tasks_walk, walk, walk_ordered
from gpupool.policy.slurm.spread_gpus import gpus_paid, spread


class Free:
    """A private, mutable copy of free resources (the engine's table is never touched).

    ``caps``: for each partition with MaxCPUsPerNode, the millicores its jobs may still take on
    each node (None: no such partition); ``cap``: the list of the partition ``place`` is placing
    in now, read by the fit tests (None outside ``place`` or in a partition without a cap)."""

    __slots__ = ("cap", "cap_of", "caps", "cpu", "gpus", "mask", "mem", "nodes")

    def __init__(self, nodes: NodeTable, src: Free | None = None) -> None:
        self.nodes = nodes
        self.cap = None
        #: running job id -> its partition, for the jobs of partitions with a cap (shared)
        self.cap_of: dict[int, str] = {} if src is None else src.cap_of
        if src is None:
            self.mask = list(nodes.free_mask)
            self.gpus = list(nodes.free_gpus)
            self.cpu = list(nodes.free_cpu)
            self.mem = list(nodes.free_mem)
            self.caps = None
        else:
            self.mask = list(src.mask)
            self.gpus = list(src.gpus)
            self.cpu = list(src.cpu)
            self.mem = list(src.mem)
            self.caps = None if src.caps is None else {k: list(v) for k, v in src.caps.items()}

    def cap_take(self, part: str, placement, sign: int = -1) -> None:
        """A placement of a job in ``part`` taken (or, ``sign`` +1, given back) from the
        partition's MaxCPUsPerNode allowance, where it has one."""
        cap = self.caps.get(part) if self.caps is not None else None
        if cap is not None:
            for node, _mask, cpu, _mem in placement:
                cap[node] += sign * cpu

    def cpu_within_cap(self, i: int) -> int:
        """Node ``i``'s free millicores that a job of the partition being placed may take: all
        of them, or within its MaxCPUsPerNode (``cap``)."""
        cap = self.cap
        return self.cpu[i] if cap is None else min(self.cpu[i], cap[i])

    def copy(self) -> Free:
        return Free(self.nodes, self)

    def give_job(self, job_id: int, placement, sign: int = 1) -> None:
        """Give back (``sign`` -1: take again) what a running job holds, its partition's
        MaxCPUsPerNode allowance included (a preemption's victims)."""
        if sign > 0:
            self.give(placement)
        else:
            self.take(placement)
        if self.caps is not None:
            part = self.cap_of.get(job_id)
            if part is not None:
                self.cap_take(part, placement, sign)

    def give_end(self, entry) -> None:
        """Give back what a running job's end entry (``(limit end, job id, placement, …)``)
        frees, its partition's MaxCPUsPerNode allowance included."""
        self.give(entry[2])
        if self.caps is not None:
            part = self.cap_of.get(entry[1])
            if part is not None:
                self.cap_take(part, entry[2], 1)

    def take(self, placement) -> None:
        for node, mask, cpu, mem in placement:
            self.mask[node] &= ~mask
            self.gpus[node] -= mask.bit_count()
            self.cpu[node] -= cpu
            self.mem[node] -= mem
        cap = self.cap  # inside ``place``: its partition's allowance moves with its pods
        if cap is not None:
            for node, _mask, cpu, _mem in placement:
                cap[node] -= cpu

    def give(self, placement) -> None:
        for node, mask, cpu, mem in placement:
            self.mask[node] |= mask
            self.gpus[node] += mask.bit_count()
            self.cpu[node] += cpu
            self.mem[node] += mem
        cap = self.cap
        if cap is not None:
            for node, _mask, cpu, _mem in placement:
                cap[node] += cpu


def empty_state(nodes: NodeTable, info) -> Free:
    """The free resources of every node with no job running (and none of partition ``info``'s
    MaxCPUsPerNode used): what the submit check and the limits of an exclusive job place a
    job on."""
    empty = Free.__new__(Free)
    empty.nodes = nodes
    empty.mask = list(nodes.full_mask)
    empty.gpus = list(nodes.gpu_total)
    empty.cpu = list(nodes.cpu_total)
    empty.mem = list(nodes.mem_total)
    empty.cap, empty.cap_of, empty.caps = None, {}, whole_allowance(nodes, info)
    return empty


def whole_allowance(nodes: NodeTable, info) -> dict[str, list[int]] | None:
    """``Free.caps`` for partition ``info`` with none of its MaxCPUsPerNode used (in whole
    cores, as ``Cycle._cap_partitions``), or None where it has no such cap."""
    if info.max_cpus_per_node is None:
        return None
    return {info.name: [info.max_cpus_per_node * 1000 // s * s for s in nodes.cpu_step]}


def gpus_for(free: Free, i: int, ps) -> int | None:
    """The free devices a pod of ``ps`` may take on node ``i`` (a mask), or None when the node
    has no device of the type it names. A request naming a type gets only devices of that type,
    lowest free index first; one naming none takes any type (a real 22.05.8 on a node of two
    types)."""
    gpu_type = ps.gpu_type
    if not gpu_type:
        return free.mask[i]
    typed = free.nodes.typed_mask(i, gpu_type)
    return None if typed is None else free.mask[i] & typed


def holds_exclusive(nodes: NodeTable, i: int, ps) -> bool:
    """Whether node ``i``, whole, has the CPUs and the GPUs (of the type asked) of one pod of
    ``ps``: an exclusive job takes the whole node but still needs what it asked on it (a real
    22.05.8 refused ``--exclusive -c20`` and ``--exclusive --gres=gpu:9`` on 16-core 8-GPU
    nodes, "Requested node configuration is not available")."""
    if ps.cpu_m > nodes.cpu_total[i]:
        return False
    if not ps.gpus:
        return True
    full = nodes.full_mask[i]
    if ps.gpu_type:
        typed = nodes.typed_mask(i, ps.gpu_type)
        if typed is None:
            return False
        full &= typed
    have = full.bit_count()
    if ps.cpus_per_gpu and nodes.cpu_total[i] // (ps.cpus_per_gpu * 1000) < have:
        # the node's every GPU of the type asked comes with --cpus-per-gpu CPUs (probe p142:
        # ``--exclusive --cpus-per-gpu=20 --gpus=2`` refused on 128-CPU 8-GPU nodes, 160 CPUs
        # for 8 GPUs, ``--cpus-per-gpu=16 --gpus=8`` taken; cons_common
        # ``gres_select_filter_remove_unusable``)
        return False
    return have >= ps.gpus


def exclusive_memory(nodes: NodeTable, i: int, ps) -> int:
    """The memory an exclusive pod of ``ps`` holds on node ``i``: per CPU or per GPU asked, that
    much for every CPU or GPU of the node (a real 22.05.8 on 16-core 8-GPU nodes:
    ``--exclusive -n4 --mem-per-cpu=100`` held 1600M, ``--exclusive --gres=gpu:2
    --mem-per-gpu=1000`` 8000M, and ``--exclusive -c2`` under DefMemPerCPU=5000 was refused,
    80000M being more than a node has); else what it asked."""
    unit = ps.memory_unit
    if unit is None:
        return ps.memory_mib
    if unit[0] == "cpu":
        return unit[1] * (nodes.cpu_total[i] // 1000)
    return unit[1] * nodes.full_mask[i].bit_count()


def pod_fits(free: Free, i: int, ps) -> tuple | None:
    """The pod placement of pod shape ``ps`` on node ``i`` now, or None. A pod with a
    ``memory_fit`` holds that much while its job's pods are chosen, so the job's pods on one
    node need it for each of them (a real 22.05.8 under DefMemPerGPU=20000 planned
    ``-n2 --gpus-per-task=1 --mem=2000`` for later on a node with 25000 MB free): ``_place``
    gives them their own memory once chosen (pods of a later pod set see those of earlier ones
    at their own memory)."""
    nodes = free.nodes
    avail = gpus_for(free, i, ps)
    if avail is None:
        return None
    if ps.exclusive:
        need_mem = exclusive_memory(nodes, i, ps)
        if (free.cpu[i] == nodes.cpu_total[i] and free.mask[i] == nodes.full_mask[i] and free.mem[i] >= need_mem
                and holds_exclusive(nodes, i, ps) and (free.cap is None or free.cap[i] >= nodes.cpu_total[i])):
            # (a partition's MaxCPUsPerNode below the node's CPUs leaves it to no exclusive
            # job: ``_allocate_sc``; a real 22.05.8 refused ``--exclusive -c1`` at
            # MaxCPUsPerNode=8 on 16-core nodes, probe p174, found by a review)
            return (i, free.mask[i], free.cpu[i], need_mem)
        return None
    need_mem = ps.memory_to_fit
    if avail.bit_count() >= ps.gpus and free.cpu[i] >= ps.cpu_m and free.mem[i] >= need_mem and (
            free.cap is None or free.cap[i] >= ps.cpu_m) and (
            not _rounds_memory(ps, nodes) or free.mem[i] >= memory_to_fit(ps, nodes, i)):
        return (i, lowest_bits(avail, ps.gpus) if ps.gpus else 0, ps.cpu_m, need_mem)
    return None


def memory_to_fit(ps, nodes: NodeTable, i: int) -> int:
    """The free memory node ``i`` needs for one pod of ``ps``: ``PodSet.memory_to_fit``, and
    where memory is per CPU the memory of the CPUs ``whole_cores`` adds there (slurmctld gives
    a node no more CPUs than its free memory pays for, so such a node does not fit)."""
    need = ps.memory_to_fit
    if _rounds_memory(ps, nodes):
        step = nodes.cpu_step[i]
        extra = -ps.cpu_m % step
        if extra:  # DefMemPerGPU's fit check stands apart from what the pod holds
            need = max(need, ps.memory_mib + extra // 1000 * memory_per_cpu_of(ps))
    return need


def _rounds_memory(ps, nodes: NodeTable) -> bool:
    """Whether rounding a pod's CPUs up to whole cores can add memory: memory per CPU on a pool
    whose nodes allocate cores of several CPUs (an exclusive pod holds whole nodes already)."""
    return nodes.stepped and bool(ps.memory_per_cpu or ps.memory_per == "cpu") and not ps.exclusive


def eligible_nodes(cand, nodes: NodeTable, usable=None) -> list[int]:
    """The nodes of ``cand`` (in its order) that are up, not draining and in ``usable``."""
    up, drain = nodes.up, nodes.drain
    return [i for i in cand if up[i] and not drain[i] and (usable is None or i in usable)]


def place(wl, cand: tuple[int, ...], free: Free, usable=None, eligible: list[int] | None = None,
          busy: int | None = None):
    """Place every pod of ``wl`` on nodes of ``cand`` (restricted to ``usable`` when given).

    ``eligible`` is ``eligible_nodes(cand, free.nodes, usable)`` when the caller has it (the
    will-run test places one job many times on the same nodes). Returns a placement tuple or
    None; ``free`` is left unchanged (pods are taken from it only while later pod sets still
    have to be placed, and given back at the end).

    ``busy`` (a bit set of the nodes that run or complete a job now) selects the order
    cons_tres uses for a later start under SchedulerParameters=bf_busy_nodes: within each
    weight, the fitting nodes busy now in index order, then the idle ones in index order, with
    no best fit (``_busy_first``). Otherwise, where ``cand`` is a ``PartNodes`` of a
    least-loaded partition, the nodes with the largest share of their CPUs free come first
    (``_least_loaded``).
    In a partition with MaxCPUsPerNode (``cand.cap_part``) a pod also needs what the partition's
    jobs may still take on the node (``Free.caps``).
    """
    pool = eligible if eligible is not None else eligible_nodes(cand, free.nodes, usable)
    if type(cand) is not PartNodes:  # (the common partition: one test on the hot path)
        return _place(wl, _ranged(wl, None), False, free, pool, busy)
    pod_sets = _ranged(wl, cand.max_nodes, cand.min_nodes)
    least_loaded = cand.least_loaded
    capped = cand.cap_part
    if capped is not None and free.caps is not None and capped in free.caps:
        outer = free.cap
        free.cap = free.caps[capped]
        try:
            return _place(wl, pod_sets, least_loaded, free, pool, busy, cand.max_nodes)
        finally:
            free.cap = outer
    return _place(wl, pod_sets, least_loaded, free, pool, busy, cand.max_nodes)


def _place(wl, pod_sets, least_loaded: bool, free: Free, pool: list[int], busy: int | None,
           max_nodes: int | None = None):
    """``place`` once its nodes are known (``pool``: the eligible ones; ``max_nodes``: the
    partition's MaxNodes, or None)."""
    base_weight = free.nodes.weight
    placement: list = []
    taken: list = []
    ok = True
    lim = job_nodes(wl, free.nodes)
    required: list[int] = []
    if lim.allowed is not None or lim.required:
        # --exclude/--constraint narrow the nodes; --nodelist names nodes the job must hold,
        # each of them eligible here (up, not draining, usable) or no placement at all
        allowed = lim.allowed
        if allowed is not None:
            pool = [i for i in pool if allowed >> i & 1]
        if lim.required:
            required = [i for i in pool if lim.required >> i & 1]
            if len(required) != lim.required_count:
                return None
    last = len(pod_sets) - 1
    stepped = free.nodes.stepped
    shapes: list = []  # with whole cores: the pod set of each pod
    for k, ps in enumerate(pod_sets):
        weight = base_weight
        # ``--contiguous`` skips bf_busy_nodes' busy-first pick whatever the shape (``_eval_nodes``
        # tests it before LLN; found by reviews): its nodes are chosen as with no busy mask
        busy_pick = None if ps.contiguous else busy
        # the most nodes: the partition's MaxNodes, and for task pods a QOS or association
        # node limit (``PodSet.task_node_cap``)
        most = max_nodes if ps.task_node_cap is None or (max_nodes is not None and max_nodes <= ps.task_node_cap) \
            else ps.task_node_cap
        #: task pods under a per-node CPU minimum: the nodes in the order taken (else None,
        #: so that the common placement keeps no record)
        taken_order: list[int] | None = None
        node_mem = ps.node_memory_mib and task_node_memory(ps)  # (0 for nearly every pod set: no call)
        nodes_for = pool
        if node_mem or ps.memory_all:
            # memory per node: --mem over task pods, each node holding all of it, or the whole
            # memory of nodes that differ (each its own, none allocated); only nodes with it
            # free take the job (a required one too), with the CPUs MaxMemPerCPU asks of each
            held_mem = free.nodes.mem_total if ps.memory_all else node_mem
            node_cpu = ps.node_min_cpus * 1000
            if node_cpu:
                taken_order = []
            takes = _node_takes(free, held_mem, node_cpu)
            if not all(takes(i) for i in required):
                ok = False
                break
            nodes_for = [i for i in pool if takes(i)]
            if node_mem:  # the task pods are chosen holding none of it each
                ps = replace(ps, memory_mib=0)
        if ps.gpus and (ps.gpus_per_job or ps.exclusive or (ps.count > 1 and not ps.one_per_node)):
            # only whole-job and exclusive GPU requests may reorder nodes (near_gpus.offer_cap)
            weight = gpu_weights(ps, nodes_for, free, base_weight, gpus_for)
        if required and ps.walk_gpus and ps.one_per_node and tasks_walk(ps):
            chosen = walk_listed(ps, fitting_nodes(ps, nodes_for, free), free, weight, required, busy_pick, least_loaded)
        elif ps.walk_gpus and ps.one_per_node:  # (``PodSet.walked``, without a property call here)
            chosen = _walk_gpus(ps, nodes_for, free, weight, busy_pick, least_loaded, tuple(required))
        elif ps.split_tasks and ps.split:
            chosen = split_nodes(ps, nodes_for, free, weight, required, busy_pick, least_loaded)
        elif required:
            chosen = _with_required(ps, nodes_for, free, weight, required, busy_pick, least_loaded, taken_order,
                                    most)
        elif ps.exclusive and not ps.one_per_node and ps.count > 1:
            # (bf_busy_nodes' or LLN's order too: ``_eval_nodes_busy`` and ``_eval_nodes_lln``
            # size whole nodes in CPUs and count GPUs per job the same way; found by a review)
            order = walk_order(weight, busy_pick, least_loaded, free)
            chosen = _exclusive_tasks(ps, nodes_for, free, weight, most, (), order)
        elif busy_pick is not None:
            chosen = _busy_first(ps, nodes_for, free, weight, busy_pick, most)
        elif least_loaded:
            chosen = _least_loaded(ps, nodes_for, free, weight, most)
        elif ps.one_per_node and ps.count > 1:
            chosen = _multi_node(ps, nodes_for, free, weight)
        elif ps.count == 1:
            pod = _one_node(ps, nodes_for, free, weight)
            chosen = None if pod is None else (pod,)
        else:
            chosen = _spread_tasks(ps, nodes_for, free, weight, taken_order, most=most)
        if chosen is None:
            ok = False
            break
        if ps.memory_fit and not (ps.split_tasks and ps.split):
            # chosen as holding their memory_fit (``pod_fits``); they hold their own (a walked
            # split form's nodes hold their tasks' already: ``split_tasks.deal_tasks``)
            chosen = [(n, m, c, ps.memory_mib) for n, m, c, _mem in chosen]
        if node_mem or ps.memory_all:
            dealt = None
            if node_cpu and not ps.gpus and not ps.one_per_node and not ps.exclusive and chosen:
                # (whole nodes take no minimum: slurmctld's _cpus_to_use leaves them whole)
                dealt = _dealt_over_minimum(ps, chosen, free, node_cpu, taken_order or [])
            # dealt again, each node holds the CPUs dealt to it, the minimum or not
            chosen = _once_a_node(chosen, held_mem, node_cpu) if dealt is None else _once_a_node(dealt, held_mem)
        if ps.spread and not ps.exclusive:  # the job's GPUs dealt out (spread_gpus; whole nodes hold all)
            chosen = spread(ps, chosen, free, gpus_for)
            if chosen is None:
                ok = False
                break
        placement.extend(chosen)
        if stepped:
            shapes.extend([ps] * len(chosen))
        if k < last:  # later pod sets see these pods taken
            free.take(chosen)
            taken.extend(chosen)
    if taken:
        free.give(taken)
    if not ok:
        return None
    if stepped:
        return whole_cores(placement, shapes, free)
    return tuple(placement)


def memory_per_cpu_of(ps) -> int:
    """MB per CPU of a pod whose memory follows its CPUs (``PodSet.memory_per_cpu``, or a
    ``--mem-per-cpu`` pod the defaults left as asked), else 0."""
    if ps.memory_per_cpu:
        return ps.memory_per_cpu
    if ps.memory_per == "cpu" and not ps.exclusive:
        return ps.memory_mib // max(1, -(-ps.cpu_m // 1000))
    return 0


def whole_cores(placement: list, shapes: list, free: Free) -> tuple | None:
    """``placement`` with each node's CPUs rounded up to whole cores (``NodeTable.cpu_step``),
    the CPUs added (and the memory they bring where memory is per CPU; ``shapes``: each pod's
    pod set) given to the node's first pod; None when a node lacks the memory or
    CPUs that adds. Per node, not per task: a real 22.05.8 with two threads per core gave
    ``-n3`` 4 CPUs, ``-n2 -c3`` 6, ``-N2 --ntasks-per-node=3`` 4 on each node, and
    ``--mem-per-cpu=1000`` 1000 MB per CPU of those (docs/differential.md, finding 49)."""
    step = free.nodes.cpu_step
    for pod in placement:
        if pod[2] % step[pod[0]]:
            break
    else:  # every pod already in whole cores (the common case): nothing to add
        return tuple(placement)
    first: dict[int, int] = {}
    cpus: dict[int, int] = {}
    for k, pod in enumerate(placement):
        node = pod[0]
        if node in cpus:
            cpus[node] += pod[2]
        else:
            first[node] = k
            cpus[node] = pod[2]
    out = None
    for node, held in cpus.items():
        st = step[node]
        extra = -held % st
        if not extra:
            continue
        k = first[node]
        more_mem = extra // 1000 * memory_per_cpu_of(shapes[k])
        if free.cpu[node] < held + extra or (free.cap is not None and free.cap[node] < held + extra):
            return None
        if more_mem and free.mem[node] < sum(p[3] for p in placement if p[0] == node) + more_mem:
            return None
        if out is None:
            out = list(placement)
        n, mask, cpu, mem = out[k]
        out[k] = (n, mask, cpu + extra, mem + more_mem)
    return tuple(placement if out is None else out)


def task_node_memory(ps) -> int:
    """The ``--mem`` each node holds for task pod set ``ps`` (``-n T --mem=M`` with no node
    count: ``PodSet.node_memory_mib``), 0 for any other pod set. slurmctld gives every node the
    job takes all M, whatever share of the tasks it holds, and takes only nodes with M free: a
    real 22.05.8 ran ``-n4 --mem=1000`` on two nodes of two free CPUs with 1000 MB on each
    (mem=2000M), ``-n3 --mem=3000`` as 2 + 1 tasks with 3000 MB on each, likewise with
    ``--gpus-per-task=1``, and ``-n4 --exclusive --gpus=12 --mem=100`` with 100 MB on each of
    its two whole nodes (probes p119, p123). The reader shares M out over the pods (⌈M/T⌉ each:
    what other policies place). ``--mem=0``, and no memory asked where no default applies, is
    the node's whole memory (``job_defaults`` sets it at submit): only a node with none of its
    memory allocated takes such a job, and it holds all of it (a real 22.05.8 ran ``-n4
    --mem=0`` and ``-n4`` on the one such node, and ``-n200 --mem=0`` on two idle nodes with
    1000000 MB on each; probe p124)."""
    if ps.one_per_node or ps.count < 2 or ps.split_tasks or ps.memory_per != "":
        return 0
    return ps.node_memory_mib


def _node_takes(free: Free, memory: int | list[int], cpu_m: int):
    """Whether node ``i`` has ``memory`` free (one amount, or each node's own) and ``cpu_m``
    millicores within its cap: what a job holding memory per node needs of each node."""
    if isinstance(memory, int):
        return lambda i: free.mem[i] >= memory and free.cpu_within_cap(i) >= cpu_m
    return lambda i: free.mem[i] >= memory[i] and free.cpu_within_cap(i) >= cpu_m


def _dealt_over_minimum(ps, chosen: list, free: Free, node_cpu: int, taken_order: list[int]) -> list | None:
    """Task pods ``chosen`` node after node, dealt again as cons_tres deals them where the
    CPUs every node gives the job at least (MaxMemPerCPU's ``node_cpu`` millicores) let a later
    node offer more than the tasks left for it; None where nothing changes (one node, or no node
    offered more than its fill).

    From the 22.05.8 source: ``_eval_nodes``' ``_cpus_to_use`` lets each node offer the CPUs
    still wanted, but pn_min_cpus at least; the job's CPUs are then the tasks' or the nodes
    times pn_min_cpus, whichever is more (cons_common's ``ncpus``), and
    ``dist_tasks_compute_c_b`` deals that many CPUs' worth of tasks one a node per round up to
    what each offers (``split_tasks.deal_cyclic``); each node holds what it was dealt, which
    may be less than the minimum. Probes p125 and p129 (a real 22.05.8, MaxMemPerCPU=8000, two
    threads per core): idle, ``-n130 --mem=500000`` ran as 68 + 64 CPUs (67 + 63 dealt; filling
    each node in turn gives 128 + 2) and ``-n129 --mem=0`` (125 a node) as 126 + 124 (250 CPUs
    dealt); with 70 free on every node, ``-n100 --mem=500000`` as 64 + 62. The nodes offer in
    the order they were taken (``taken_order``, else as ``chosen`` lists them: the busy-first
    and least-loaded choices list them so). The pods keep their count: each node takes as many
    as it was dealt (one at least for each later node), its first pod the CPUs of the rest."""
    counts: dict[int, int] = {}
    for pod in chosen:
        counts[pod[0]] = counts.get(pod[0], 0) + 1
    if len(counts) < 2:
        return None
    cpt = ps.cpu_m // 1000
    if cpt * 1000 != ps.cpu_m:
        return None  # (tasks of whole CPUs only)
    order = taken_order if taken_order else list(counts)
    floor = ps.node_min_cpus_asked or node_cpu // 1000  # (slurmctld's pn_min_cpus, uncut)
    wanted = len(chosen) * cpt
    avail = cpus_to_use([(i, _pods_on(free, i, ps) * cpt) for i in order], wanted, cpt, floor)
    if avail is None or (sum(avail.values()) <= wanted and len(avail) * floor <= wanted):
        return None  # every node offers its fill and the minimum adds nothing: the same split
    tasks = deal_cyclic(avail, max(wanted, len(avail) * floor) // cpt, cpt, free.nodes)
    if tasks is None:
        return None
    template = chosen[0]
    out = []
    pods_left = len(chosen)
    nodes = sorted(tasks)
    for k, i in enumerate(nodes):
        pods = pods_left if k == len(nodes) - 1 else max(1, min(tasks[i], pods_left - (len(nodes) - 1 - k)))
        pods_left -= pods
        extra = (tasks[i] - pods) * ps.cpu_m  # CPUs dealt beyond the node's pods: its first pod's
        out.append((i, template[1], template[2] + extra, template[3]))
        out.extend([(i, template[1], template[2], template[3])] * (pods - 1))
    return out


def _once_a_node(chosen, memory: int | list[int], cpu_m: int = 0) -> list:
    """The pods ``chosen`` with ``memory`` (one amount, or each node's own) held once on each
    node, by its first pod there, and each node holding ``cpu_m`` millicores at least (its
    first pod the ones its tasks lack)."""
    per_node = not isinstance(memory, int)
    first: dict[int, int] = {}
    held: dict[int, int] = {}
    out = []
    for n, m, c, _mem in chosen:
        held[n] = held.get(n, 0) + c
        if n in first:
            out.append((n, m, c, 0))
        else:
            first[n] = len(out)
            out.append((n, m, c, memory[n] if per_node else memory))
    for n, k in first.items():
        if held[n] < cpu_m:
            node, mask, c, mem = out[k]
            out[k] = (node, mask, c + cpu_m - held[n], mem)
    return out


def _ranged(wl, max_nodes: int | None, min_nodes: int | None = None) -> tuple:
    """``wl``'s pod sets, with a node range (``min_count``) kept only where a start on fewer
    pods makes the job run: under the gang rule "min" (sbatch's ``--nodes=MIN-MAX``) and in
    the last pod set (the engine counts pods by position, so an earlier set must be whole).
    A kept range takes at most the partition's ``max_nodes`` (slurmctld caps a job's node
    count at MaxNodes) and at least its ``min_nodes`` where the range reaches it (slurmctld
    raised the least count at submit; a partition whose MinNodes the stored count does not
    meet holds the job before it is placed, ``jobinfo.stored_node_counts``)."""
    pod_sets = wl.pod_sets
    for ps in pod_sets:
        if ps.min_count is not None:
            break
    else:
        return pod_sets  # no range (the common case, on the hot path)
    last = len(pod_sets) - 1
    ranged = wl.gang == GANG_MIN
    out = []
    for k, ps in enumerate(pod_sets):
        if ps.min_count is not None:
            if not (ranged and k == last):
                ps = replace(ps, min_count=None)
            else:
                if max_nodes is not None and ps.one_per_node and max_nodes < ps.count and (
                        ps.min_count <= max_nodes or tasks_walk(ps)):
                    # (a walk whose least, a --nodelist's count, is above MaxNodes: no
                    # placement here, ``split_tasks.walk_listed``; slurmctld's select fails too)
                    ps = replace(ps, count=max_nodes)
                if min_nodes is not None and ps.one_per_node and ps.min_count < min_nodes <= ps.count:
                    ps = replace(ps, min_count=min_nodes)
        out.append(ps)
    return tuple(out)


def _walk_gpus(ps, pool: list[int], free: Free, weight, busy: int | None, least_loaded: bool,
               required: tuple[int, ...] = ()) -> list | None:
    """One pod of walked pod set ``ps`` (``PodSet.walk_gpus``) on each node cons_tres takes for
    the job's GPUs (``gpu_walk``), before ``spread_gpus.spread`` deals them out: each fitting
    node offers its free GPUs, as many as its free memory and CPUs pay for where those are per
    GPU (memory per GPU asked, else DefMemPerGPU even beside ``--mem``, as cons_tres's GRES
    filter caps them: ``PodSet.mem_per_gpu``), and counts its free CPUs. A job of several
    tasks (``-n T``: the split form) needs their CPUs too, and each node then gets its tasks
    (``split_tasks.deal_tasks``). The ``required`` nodes (``--nodelist``) are taken first
    (``gpu_walk.walk``)."""
    fitting = sorted(fitting_nodes(ps, pool, free))
    per_gpu = max(ps.memory_mib if ps.memory_per == "gpu" else 0, ps.mem_per_gpu)
    offer = {i: gpus_paid(ps, free, i, gpus_for(free, i, ps).bit_count(), per_gpu) for i in fitting}
    need_cpus = 0
    whole = ps.exclusive and bool(ps.split_tasks)
    if whole:
        # ``-n T --gres=gpu:G --exclusive``: whole idle nodes, each giving all its CPUs, until
        # they hold the tasks (a real 22.05.8 ran ``-n4 --gres=gpu:1 --exclusive`` on one
        # whole 16-core node, ``-n20`` on two, ``-n40 --gres=gpu:2`` on three; probe p153)
        pods = {i: pod for i in fitting if (pod := pod_fits(free, i, ps)) is not None}
        fitting = [i for i in fitting if i in pods]
        cpus = {i: pods[i][2] // 1000 for i in fitting}
        need_cpus = ps.split_tasks * (ps.cpus_per_task or 1)
    elif ps.split_tasks:
        # a node gives the tasks' CPUs in whole tasks, within its free memory where memory
        # follows them (cons_tres's ``avail_cpus`` from ``_allocate_sc`` and the memory cap)
        cpt = ps.cpus_per_task or 1
        cpus = {i: tasks_fit(free, i, ps) * cpt for i in fitting}
        need_cpus = ps.split_tasks * cpt
    else:
        cpus = {i: free.cpu_within_cap(i) // 1000 for i in fitting}
    if busy is not None or least_loaded:
        # the required nodes are taken first and left out of the search that orders the rest
        # (``_eval_nodes_lln`` clears them from its map: one of them would otherwise be the
        # count its shortcut stops at; found by a review)
        arrange = walk_order(weight, busy, least_loaded, free)
        others = arrange([i for i in fitting if i not in required]) if required else arrange(fitting)
        nodes = walk_ordered(ps, others, offer, cpus, need_cpus, required)
    else:
        nodes = walk(ps, fitting, offer, cpus, weight, need_cpus, required)
        if nodes is None and ps.contiguous:
            # ``choose_nodes`` asks again without the nodes of fewest free resources: a run
            # weighing less that does not hold the job may go (a real 22.05.8 ran ``--gpus=12
            # --contiguous`` on gpu01-02 with gpu02 at Weight=2, gpu03 full and gpu04 at 8
            # free CPUs; probe p167e)
            nodes = second_try(ps, free, fitting, ps.min_count or 1, required,
                               lambda kept: walk(ps, kept, offer, cpus, weight, need_cpus, required))
    if nodes is None:
        return None
    if whole:
        return [pods[i] for i in sorted(nodes)]
    if ps.split_tasks:
        return deal_tasks(ps, nodes, free)
    # (CPUs per GPU go out in the order the nodes were taken: ``spread_gpus._cpus_dealt``)
    return [pod_fits(free, i, ps) for i in (nodes if ps.cpus_per_task is None and not ps.exclusive else sorted(nodes))]


def _spread_tasks(ps, pool: list[int], free: Free, weight, taken_order: list[int] | None = None,
                  required: tuple[int, ...] = (), most: int | None = None, order=None) -> list | None:
    """The task pods of ``ps`` (``-n T`` with no ``--nodes``), as cons_tres's ``_eval_nodes``
    takes nodes for a job of one node at least: the node with the fewest free tasks that holds
    them all (in the run of consecutive nodes chosen as for other jobs), else node after node
    in index order, each taking all it holds (``eval_nodes.pick_nodes`` with ``spill``; a
    real 22.05.8, docs/differential.md finding 50). Without GPUs and with memory per node,
    runs and nodes are compared in free CPUs, not whole tasks (``rank``; findings 103, 104).
    ``taken_order`` (when given) receives the nodes in the order taken; the pods are listed in
    index order.

    ``--contiguous`` (``ps.contiguous``): the tasks come from one run of consecutive nodes that
    holds them all (a real 22.05.8 left ``-n20 --contiguous`` waiting with gpu02 and gpu04 of
    four 16-CPU nodes held, where ``-n20`` ran on gpu01 and gpu03; probe p163), beside
    ``required`` nodes (``--nodelist``, each taking tasks) the run holding them; where no run
    does, ``choose_nodes`` drops the nodes with the fewest free resources and asks again
    (``split_tasks.retry``; a real 22.05.8, probe p167e).

    ``most`` (the partition's MaxNodes, slurmctld's max_nodes): no more nodes than that, the
    last of them one that holds what is left (``_eval_nodes`` passes over the others): in a
    MaxNodes=2 partition with gpu01 and gpu02 at 8 free CPUs a real 22.05.8 ran ``-n20`` as
    gpu01 8 + gpu03 12, where without the cap it took gpu01-03, and it left ``-n20`` waiting
    where no second node held the 12 left (probe p168). ``order`` (``eval_nodes.walk_order``:
    bf_busy_nodes' or LLN's), for task pods beside required nodes: the others in that order."""
    tasks = {}
    for i in pool:
        n = _pods_on(free, i, ps)
        if n:
            tasks[i] = n
    if any(i not in tasks for i in required):
        return None
    # (in whole tasks where memory is per CPU; GPU task pods keep whole tasks too: not probed)
    rank = None if ps.gpus or memory_per_cpu_of(ps) else {i: free.cpu_within_cap(i) // 1000 for i in tasks}
    got = pick_nodes(tasks, max(1, len(required)), ps.count, weight, list(required), order, spill=True, most=most,
                     contiguous=ps.contiguous, rank=rank, per_task=1 if rank is None else max(1, ps.cpu_m // 1000))
    if got is None and (ps.contiguous or most is not None):
        # (an uncapped walk of task pods fails only where the CPUs fall short; with a cap the
        # second try may find two nodes that hold the job: a real 22.05.8 ran ``-p m -n20``
        # as gpu02 12 + gpu03 8 with gpu01 at 4 free CPUs, probe p170, found by a review)
        got = retry(ps, free, tasks, weight, list(required), order, total=ps.count,
                    walk=(max(1, len(required)), {"spill": True, "most": most}), fewest=max(1, len(required)))
    if got is None:
        return None
    if taken_order is not None:
        taken_order.extend(i for i, _n in got)
    out = []
    for i, n in sorted(got):
        avail = gpus_for(free, i, ps)
        for _ in range(n):
            bits = lowest_bits(avail, ps.gpus) if ps.gpus else 0
            avail &= ~bits
            out.append((i, bits, ps.cpu_m, ps.memory_to_fit))
    return out


def _pods_on(free: Free, i: int, ps) -> int:
    """How many pods of ``ps`` (not exclusive) fit on node ``i`` now, one after another (not
    capped at the job's count: nodes are compared by all they hold)."""
    avail = gpus_for(free, i, ps)
    if avail is None:
        return 0
    cpu = free.cpu_within_cap(i)
    fit = ps.memory_to_fit  # each pod needs this much free (DefMemPerGPU's, for every task)
    if cpu < ps.cpu_m or free.mem[i] < fit or avail.bit_count() < ps.gpus:
        return 0
    n = cpu // ps.cpu_m if ps.cpu_m else ps.count
    if ps.gpus:
        n = min(n, avail.bit_count() // ps.gpus)
    if fit:
        n = min(n, free.mem[i] // fit)
    nodes = free.nodes
    if n and nodes.stepped and (per_cpu := memory_per_cpu_of(ps)):
        # the CPUs rounded up to whole cores bring their memory too (``whole_cores``)
        step = nodes.cpu_step[i]
        while n and tasks_memory(n, ps, step, per_cpu) > free.mem[i]:
            n -= 1
    return n


def _exclusive_tasks(ps, pool: list[int], free: Free, weight, most: int | None = None,
                     required: tuple[int, ...] = (), order=None) -> list | None:
    """The task pods of exclusive ``ps`` (``-n T --exclusive``, no ``--nodes``) on whole idle
    nodes as ``_eval_nodes`` takes them for the tasks: the ``required`` nodes (``--nodelist``)
    first, then runs of consecutive idle nodes compared as for other jobs (or ``order``:
    bf_busy_nodes' or LLN's), each node taken giving all it has (``pick_nodes`` with
    ``whole``), no more nodes than the partition's MaxNodes (``most``), choose_nodes' second
    try where that cap fails. A real 22.05.8 with gpu02 of four 16-core nodes held ran ``-n20
    --exclusive`` on gpu03-04, the run that holds it, not on gpu01 and gpu03, and ``-n12
    --exclusive`` on gpu01, the smaller run that does (probes p173 and p173b).

    Nodes offer whole tasks where memory is per CPU or the tasks hold GPUs, else their CPUs
    (``_cpus_to_use`` gives whole nodes, and cons_tres rounds a node's CPUs down to whole
    tasks only under memory per CPU: ``-n5 -c6 --mem=100 --exclusive`` ran on two 16-core
    nodes, 32 CPUs for the 30 asked; probe p174, found by a review). The tasks are dealt over the
    nodes in the order taken (``_dealt``)."""
    pods = {i: pod for i in pool if (pod := pod_fits(free, i, ps)) is not None}
    if any(i not in pods for i in required):
        return None
    per_task = max(1, ps.cpu_m // 1000)
    if ps.gpus_per_job:
        return _exclusive_gpu_tasks(ps, pods, free, weight, most, per_task, required, order)
    in_cpus = per_task > 1 and not ps.gpus and not memory_per_cpu_of(ps)
    if in_cpus:
        offer = {i: pods[i][2] // 1000 for i in pods}
        total = ps.count * per_task
    else:
        offer = {i: _tasks_on(free.nodes, i, ps, free.mem[i]) for i in pods}
        total = ps.count
    fewest = max(1, len(required))
    # (``--contiguous``: one run holds the tasks; LLN's walk takes no runs, and bf_busy_nodes'
    # is skipped for such a job, ``_place``)
    contiguous = ps.contiguous and order is None
    got = pick_nodes(offer, fewest, total, weight, list(required), order, spill=True, whole=True, most=most,
                     contiguous=contiguous)
    if got is None and (most is not None or contiguous):
        got = retry(ps, free, offer, weight, list(required), order, whole=True, total=total,
                    walk=(fewest, {"spill": True, "most": most}), fewest=fewest)
    if got is None:
        return None
    nodes = [i for i, _n in got]
    caps = [n // per_task if in_cpus else n for _i, n in got]
    return _dealt(ps, pods, nodes, caps)


def _dealt(ps, pods: dict, nodes: list[int], caps: list[int]) -> list | None:
    """The task pods of exclusive ``ps`` on whole ``nodes`` (in the order taken, each holding
    ``caps`` tasks): a task on each node, then the rest in that order up to each node's
    ``caps``, the last node taking what is left (``dist_tasks``; the pods after a node's first
    hold only memory, ``_node_tasks``)."""
    if len(nodes) > ps.count:
        return None
    tasks = [1] * len(nodes)
    left = ps.count - len(nodes)
    for k in range(len(nodes)):
        more = left if k == len(nodes) - 1 else min(left, max(0, caps[k] - 1))
        tasks[k] += more
        left -= more
    out: list = []
    for i, n in zip(nodes, tasks):
        out.extend(_node_tasks(ps, pods[i], n))
    return out


def _exclusive_gpu_tasks(ps, pods: dict, free: Free, weight, most: int | None, per_task: int,
                         required: tuple[int, ...] = (), order=None) -> list | None:
    """``-n T --gpus=X --exclusive`` (T dividing X; ``pods``: the whole idle nodes that hold a
    task): ``_eval_nodes`` walks for the job's X GPUs and its tasks' CPUs together, as for
    ``--gpus=X`` (``gpu_walk.walk``), on T nodes at most (the task count caps max_nodes) and
    the partition's MaxNodes; each node takes a task, then the tasks its CPUs hold in the
    order taken, the last the rest. A real 22.05.8 ran ``-n3 --gpus=15 --exclusive`` on two
    idle 8-GPU nodes, where tasks of 5 GPUs each would have needed three (probe p174, found by
    a review). The ``required`` nodes come first; ``order`` (bf_busy_nodes' or LLN's) walks
    the others in that order (``gpu_walk.walk_ordered``)."""
    fitting = sorted(pods)
    offer = {i: gpus_for(free, i, ps).bit_count() for i in fitting}
    cpus = {i: pods[i][2] // 1000 for i in fitting}
    cap = ps.count if most is None else min(ps.count, most)
    capped = replace(ps, count=cap, min_count=None)
    if order is not None:
        others = order([i for i in fitting if i not in required])
        nodes = walk_ordered(capped, others, offer, cpus, ps.count * per_task, required)
    else:
        nodes = walk(capped, fitting, offer, cpus, weight, ps.count * per_task, required)
    return None if nodes is None else _dealt(ps, pods, nodes, [cpus[i] // per_task for i in nodes])


def _node_tasks(ps, pod, n: int) -> list:
    """``n`` task pods of exclusive ``ps`` on ``pod``'s whole node: the first pod holds the
    node's CPUs and GPUs, the others only their memory (memory per CPU or GPU: the first pod
    holds it for the whole node, the others none)."""
    mem = ps.memory_mib if ps.memory_unit is None else 0
    return [pod] + [(pod[0], 0, 0, mem)] * (n - 1)


def _tasks_on(nodes: NodeTable, i: int, ps, mem_free: int) -> int:
    """How many task pods of ``ps`` a whole node ``i`` holds (at least one: it holds one)."""
    room = nodes.cpu_total[i] // ps.cpu_m if ps.cpu_m else 1 << 30
    if ps.gpus:
        full = nodes.full_mask[i]
        if ps.gpu_type:
            full &= nodes.typed_mask(i, ps.gpu_type) or 0
        room = min(room, full.bit_count() // ps.gpus)
    if ps.memory_mib and ps.memory_unit is None:
        room = min(room, mem_free // ps.memory_mib)
    return max(1, room)


def fits_now(free: Free, i: int, ps) -> bool:
    """Whether one pod of ``ps`` fits on node ``i`` now (``pod_fits`` without building it)."""
    nodes = free.nodes
    avail = gpus_for(free, i, ps)
    if avail is None:
        return False
    if ps.exclusive:
        return (free.cpu[i] == nodes.cpu_total[i] and free.mask[i] == nodes.full_mask[i]
                and free.mem[i] >= exclusive_memory(nodes, i, ps) and holds_exclusive(nodes, i, ps)
                and (free.cap is None or free.cap[i] >= nodes.cpu_total[i]))
    return (avail.bit_count() >= ps.gpus and free.cpu[i] >= ps.cpu_m and free.mem[i] >= ps.memory_to_fit
            and (free.cap is None or free.cap[i] >= ps.cpu_m)
            and (not _rounds_memory(ps, nodes) or free.mem[i] >= memory_to_fit(ps, nodes, i)))


def fitting_nodes(ps, pool: list[int], free: Free) -> list[int]:
    """The nodes of ``pool`` (in its order) where one pod of ``ps`` fits now: ``pod_fits``'s
    test without building the pods, which only the chosen nodes need (picking the GPU
    indices is the costly part and most fitting nodes are not chosen)."""
    nodes = free.nodes
    gt = ps.gpu_type
    ntype = nodes.gpu_type
    fcpu, fmem = free.cpu, free.mem
    if free.cap is not None:  # the partition's MaxCPUsPerNode: what its jobs may still take
        cap, cm = free.cap, ps.cpu_m
        pool = [i for i in pool if cap[i] >= cm]
    if ps.exclusive:
        ct, fm, fmask = nodes.cpu_total, nodes.full_mask, free.mask
        if free.cap is not None:  # (the cap must cover the whole node, as ``pod_fits`` asks)
            pool = [i for i in pool if free.cap[i] >= ct[i]]
        return [i for i in pool
                if (not gt or ntype[i] == gt or gt in nodes.type_mask[i])
                and fcpu[i] == ct[i] and fmask[i] == fm[i] and holds_exclusive(nodes, i, ps)
                and fmem[i] >= exclusive_memory(nodes, i, ps)]
    g, cm, fg = ps.gpus, ps.cpu_m, free.gpus
    need_mem = ps.memory_to_fit
    if _rounds_memory(ps, nodes):  # memory per CPU on CPUs rounded up to whole cores
        pool = [i for i in pool if fmem[i] >= memory_to_fit(ps, nodes, i)]
    if not gt:  # the common request: any GPU type (one test fewer per node)
        return [i for i in pool if fg[i] >= g and fcpu[i] >= cm and fmem[i] >= need_mem]
    tmask, fmask = nodes.type_mask, free.mask
    return [i for i in pool
            if (fg[i] >= g if ntype[i] == gt else (fmask[i] & tmask[i].get(gt, 0)).bit_count() >= g)
            and fcpu[i] >= cm and fmem[i] >= need_mem]


def _one_node(ps, pool: list[int], free: Free, weight):
    """One node for one pod, as cons_tres 22.05 picks it: lowest weight; among the runs of
    consecutive node indices where the pod fits, the run with the fewest available CPUs in all;
    in that run the node with the fewest available CPUs (ties: lowest index). So a lone empty
    node can win over two half-used neighbours (seen on a real 22.05.8, docs/differential.md).
    A GPU job counts on each node only the CPUs its tasks can use there (``usable_cpus``); a
    job whose memory is per CPU counts no more CPUs than the node's free memory pays for (a real
    22.05.8 ran ``-c16 --mem-per-cpu=8000`` on a node with 118 CPUs and 368000 MB free rather
    than one with 112 and 540000, finding 51)."""
    fitting = fitting_nodes(ps, pool, free)
    if not fitting:
        return None
    if len(fitting) == 1:
        return pod_fits(free, fitting[0], ps)
    if not ps.contiguous:  # (``--contiguous``: weights do not end runs, below)
        ws = [weight[i] for i in fitting]
        best_w = min(ws)
        if max(ws) != best_w:
            fitting = [i for i, w in zip(fitting, ws) if w == best_w]
    fitting.sort()
    if ps.gpus and ps.slurm_tasks is not None:
        cpu = {i: usable_cpus(ps, free, i) for i in fitting}
    elif (per_cpu := memory_per_cpu_of(ps)) or ps.gpus:
        # memory per CPU (the free memory caps the CPUs too), or a GPU job: counted in whole
        # tasks (a real 22.05.8 ran ``-c3`` under DefMemPerCPU, and ``-c3 --gres=gpu:1
        # --mem=100``, on gpu01 at 16 free CPUs, not gpu02 at 15, both 15 in whole tasks;
        # ``-c3 --mem=100`` on gpu02; probe p165)
        unit = (ps.cpus_per_task or 1) * 1000
        cpu = {i: (c := min(free.cpu_within_cap(i), _paid_cpus(free, i, per_cpu)) if per_cpu
                   else free.cpu_within_cap(i)) - c % unit for i in fitting}
    else:  # (within the partition's MaxCPUsPerNode, as ``usable_cpus``; found by a review)
        cpu = {i: free.cpu_within_cap(i) for i in fitting} if free.cap is not None else free.cpu
    # the runs of consecutive indices, in index order; the least (weight of its last node, CPU
    # sum) wins, the first on a tie. Without ``--contiguous`` the nodes left are of one weight,
    # so the sum decides; with it runs end only at nodes that do not fit, whatever their
    # weights, each weighing what its last node weighs (``_eval_nodes``; found by a review,
    # not probed: with gpu01 at Weight=2 ``-N1 --contiguous`` runs on gpu01, the run gpu01-04
    # weighing 1, where ``-N1`` runs on gpu02)
    best_lo = best_hi = 0
    best_key = None
    lo = 0
    prev = fitting[0]
    total = cpu[prev]
    n = len(fitting)
    for j in range(1, n):
        i = fitting[j]
        if i == prev + 1:
            total += cpu[i]
        else:
            key = (weight[prev], total)
            if best_key is None or key < best_key:
                best_key, best_lo, best_hi = key, lo, j
            lo = j
            total = cpu[i]
        prev = i
    if best_key is None or (weight[prev], total) < best_key:
        best_lo, best_hi = lo, n
    node = min(fitting[best_lo:best_hi], key=lambda i: (cpu[i], i))
    return pod_fits(free, node, ps)


def usable_cpus(ps, free: Free, i: int) -> int:
    """The CPUs (millicores) a GPU job's pod on node ``i`` counts there when nodes are compared
    (cons_tres's ``_select_cores`` and GRES filter): its tasks' CPUs in whole cores, the tasks
    being its task count where it gave one (``-n``/``--ntasks-per-node``, ``PodSet.slurm_tasks``)
    or as many as the node's free CPUs hold. So nodes tie where the same tasks fit: a real
    22.05.8 ran ``-N1 -n3 --gpus-per-task=1`` and ``--gres=gpu:2 -c24`` on an idle node before
    one with 2 CPUs held, but ``--gres=gpu:2``, ``-c2`` and ``-c32`` on the one with 2 held,
    and chose the lone fitting node over a run of two for ``-N1 -n3``; where memory is per CPU
    the free memory caps the CPUs (``--gres=gpu:2 -c16 --mem-per-cpu=8000`` went to the node
    whose 368000 MB held 2 tasks, not to those holding 4, finding 51)."""
    _least, most, cpt = ps.slurm_tasks
    cpu = free.cpu_within_cap(i)
    core = free.nodes.core_cpus[i]
    per_cpu = memory_per_cpu_of(ps)
    if per_cpu:  # memory per CPU: the free memory caps the CPUs too
        cpu = min(cpu, _paid_cpus(free, i, per_cpu))
    cpt_m = cpt * 1000
    tasks = cpu // cpt_m if cpt_m else 0
    if most and tasks > most:
        tasks = most
    return -(-tasks * cpt_m // core) * core


def _paid_cpus(free: Free, i: int, per_cpu: int) -> int:
    """The CPUs (millicores, in whole cores) node ``i``'s free memory pays for at ``per_cpu`` MB
    each: slurmctld counts no more on a node for a job whose memory is per CPU."""
    paid = free.mem[i] // per_cpu * 1000
    return paid - paid % free.nodes.cpu_step[i]


def _node_count(ps, fitting: int) -> int:
    """How many nodes a pod-per-node request takes when ``fitting`` nodes fit it: its count,
    or for a node range (``--nodes=MIN-MAX``: MAX pods, ``min_count`` MIN) as many as fit up
    to MAX, as slurmctld allocates "as many nodes as possible within the range" (a real
    22.05.8 ran ``-N1-3 -c2`` on the two nodes of its partition); 0 when too few fit."""
    least = ps.min_count if ps.min_count is not None else ps.count
    return min(ps.count, fitting) if fitting >= least else 0


def _multi_node(ps, pool: list[int], free: Free, weight) -> list | None:
    """``ps.count`` distinct nodes (a range: as many as fit, ``_node_count``), chosen as
    cons_tres's ``_eval_nodes`` walks runs of consecutive fitting nodes (``eval_nodes.pick_nodes``,
    the rule of split tasks too), counting each node's free CPUs against the job's: a real
    22.05.8 with gpu01-02 at 2 free CPUs, gpu03 full and gpu04 idle ran ``-N2``, ``-N2 -c2``
    and ``-N2 --ntasks-per-node=2`` on gpu01 and gpu04 (the larger run first, though it
    cannot hold the job, then the best fitting node of the other).

    ``--contiguous`` beside GPUs for the whole job (``ps.spread``): the walk may meet the node
    count on nodes whose GPUs fall short (weights, which order such nodes last, do not split
    its runs; ``gres_sched_test`` then fails), and ``choose_nodes`` asks again without the
    nodes of fewest free resources (found by a review, then probed: a real 22.05.8 ran ``-N2
    --gpus=4 --contiguous`` with gpu01 and gpu02 at one free GPU as 3 + 1 on gpu03-04, probe
    p171)."""
    fitting = fitting_nodes(ps, pool, free)
    chosen = _walked(ps, fitting, free, weight, [])
    if not (ps.contiguous and ps.spread and not ps.exclusive) or (
            chosen is not None and spread(ps, chosen, free, gpus_for) is not None):
        return chosen
    return second_try(ps, free, fitting, ps.min_count or ps.count, [], lambda kept: (
        again if (again := _walked(ps, kept, free, weight, [])) is not None
        and spread(ps, again, free, gpus_for) is not None else None))


def _walked(ps, fitting: list[int], free: Free, weight, required: list[int]) -> list | None:
    """One pod of ``ps`` on each node ``pick_nodes`` takes from the ``fitting`` nodes (the
    ``required`` ones first), as many nodes as ``_node_count`` asks; in index order, but in the
    order taken for ``--gpus`` spread with CPUs per GPU, whose CPUs go out in that order
    (``spread_gpus._cpus_dealt``: a real 22.05.8 ran ``-N3 --gpus=12 --cpus-per-gpu=3 -w
    gpu04`` with 6 + 15 + 15 CPUs on gpu02-04, the listed node first, then downwards; probe
    p160, found by a review)."""
    need = _node_count(ps, len(fitting))
    if not need:
        return None
    taken_order = ps.spread and ps.cpus_per_task is None
    if need == len(fitting) and not taken_order and not ps.contiguous:  # every fitting node is taken, whatever the walk's order
        return [pod_fits(free, i, ps) for i in sorted(fitting)]
    cpu, cap = free.cpu, free.cap
    each = max(1, -(-ps.cpu_m // 1000))  # a fitting node counts at least one pod's CPUs
    if cap is None:
        avail = {i: c if (c := cpu[i] // 1000) > each else each for i in fitting}
    else:
        avail = {i: c if (c := min(cpu[i], cap[i]) // 1000) > each else each for i in fitting}
    # (``--contiguous`` over a range: a run holds what is left once it holds the least count,
    # ``_enough_nodes``; a real 22.05.8 ran ``-N2-3 --contiguous`` with gpu03 full on gpu01-02
    # and gpu04, probe p162;
    # and its CPUs are the least count's, ``min_cpus``; found by a review)
    least = min(ps.min_count, need) if ps.contiguous and ps.min_count is not None else None
    total = (need if least is None else least) * each
    got = pick_nodes(avail, need, total, weight, required, least=least, contiguous=ps.contiguous)
    if got is None and ps.contiguous:
        # ``choose_nodes`` asks again without the nodes of fewest free resources: a run that
        # beat one holding the job may go (found by a review, not probed: with gpu02 at
        # Weight=2, gpu04 at 8 free CPUs and gpu03 held, ``-N2 --contiguous`` runs on gpu01-02)
        got = retry(ps, free, avail, weight, required, None, total=total, walk=(need, {"least": least}),
                    fewest=need if least is None else least)
    if got is None:
        return None
    return [pod_fits(free, i, ps) for i, _cpus in (got if taken_order else sorted(got))]


def _with_required(ps, pool: list[int], free: Free, weight, required: list[int], busy: int | None,
                   least_loaded: bool = False, taken_order: list[int] | None = None,
                   most: int | None = None) -> list | None:
    """The pods of ``ps`` on a job with required nodes (``--nodelist``): one pod on each of
    them first; the rest, for one pod per node, as ``_eval_nodes`` walks on (``pick_nodes``:
    the run holding them competes with the other runs and, when chosen, is walked up from
    them, then down; a real 22.05.8 on four idle nodes ran ``-N2 -w gpu02`` on gpu02-03 and
    ``-N3 -w gpu02`` on gpu02-04, with gpu01-02 at 2 free CPUs ``-N3 -w gpu04`` on gpu02-04,
    and ``-N2 -w gpu01`` beside the tighter run, on gpu04), or under
    bf_busy_nodes or LLN on other nodes in their order; task pods go to the required nodes
    while they fit, then to others (``-n3 -w gpu01,gpu02`` ran on those two nodes alone)."""
    if ps.count < len(required):
        return None  # each required node takes a pod (sbatch refuses such shapes)
    if ps.one_per_node and busy is None and not least_loaded:
        fitting = fitting_nodes(ps, pool, free)
        fits = set(fitting)
        if any(i not in fits for i in required):
            return None
        return _walked(ps, fitting, free, weight, required)
    if not ps.one_per_node:
        # task pods: the required nodes first, each taking what it holds but a task for each
        # later one, then (where tasks are left) the runs as ``_eval_nodes`` walks them, or
        # bf_busy_nodes' or LLN's order, within the partition's MaxNodes (``most``; found by
        # reviews, then probed: p170, p171 ran ``-p l -n12 -w gpu01,gpu02`` as 11 + 1); with
        # ``--contiguous`` the run holding the required nodes, walked up from them, then down
        # (found by a review, not probed: ``-n40 --contiguous -w gpu01,gpu02`` with gpu03 held
        # waits); an exclusive job's the same on whole nodes (a real 22.05.8 with gpu02 held
        # ran ``-n20 --exclusive -w gpu04`` on gpu03-04 and refused ``-p m -n40 --exclusive -w
        # gpu01`` at MaxNodes=2; probe p174, found by a review)
        order = walk_order(weight, busy, least_loaded, free)
        if ps.exclusive:
            return _exclusive_tasks(ps, pool, free, weight, most, tuple(required), order)
        return _spread_tasks(ps, pool, free, weight, taken_order, tuple(required), most, order)
    # one pod per node under bf_busy_nodes or LLN: the required nodes, then the others in order
    out: list = []
    taken: list = []
    for i in required:
        pod = pod_fits(free, i, ps)
        if pod is None:
            free.give(taken)
            return None
        out.append(pod)
        free.take([pod])
        taken.append(pod)
    rest = ps.count - len(out)
    if rest > 0:
        others = [i for i in pool if i not in required]
        # a node range needs only what its least count leaves; the rest as many as fit
        least = rest if ps.min_count is None else max(0, ps.min_count - len(required))
        sub = replace(ps, count=rest, min_count=None if least == rest else least)
        if busy is not None:
            more = _busy_first(sub, others, free, weight, busy)
        else:
            more = _least_loaded(sub, others, free, weight)
        if more is None and not least:
            more = []
        if more is None:
            free.give(taken)
            return None
        out.extend(more)
    free.give(taken)
    return out


def _busy_first(ps, pool: list[int], free: Free, weight, busy: int, most: int | None = None) -> list | None:
    """All pods of ``ps`` as cons_tres's busy-first pick takes nodes (``_eval_nodes_busy``,
    used for a later start with bf_busy_nodes): lowest weight first; within a weight the
    fitting nodes busy now, then the idle ones, each in index order; a node takes as many of
    the pods as fit on it unless they are one per node. A real 22.05.8 planned a 4-node job on
    nodes 4-5 (busy) and 1-2 rather than 1-4, leaving node 3 to a backfilled job."""
    return _in_order_again(ps, walk_order(weight, busy, False, free), fitting_nodes(ps, pool, free), free, most)


class PartNodes(tuple):
    """A partition's nodes (indices, as ``PartInfo.nodes``) with what node choice reads of the
    partition: ``least_loaded`` (partition ``LLN=YES`` or SelectTypeParameters ``CR_LLN``: jobs
    go to the least loaded nodes) and ``max_nodes`` (MaxNodes: a node range takes no more, nor
    do task pods, ``_spread_tasks``, ``_exclusive_tasks``, ``_exclusive_gpu_tasks`` and
    ``_in_order``).
    ``place`` reads them from the candidates it is given, so every caller placing in such a
    partition (main pass, will-run, preemption) picks as slurmctld does without a flag passed
    through each one."""

    least_loaded: bool = False
    max_nodes: int | None = None
    #: MinNodes: a node range that reaches it starts on no fewer
    min_nodes: int | None = None
    #: the partition's name where it has MaxCPUsPerNode (its allowance is ``Free.caps[name]``)
    cap_part: str | None = None

    def __new__(cls, nodes, least_loaded: bool = False, max_nodes: int | None = None,
                cap_part: str | None = None, min_nodes: int | None = None) -> PartNodes:
        out = super().__new__(cls, nodes)
        out.least_loaded = least_loaded
        out.max_nodes = max_nodes
        out.min_nodes = min_nodes
        out.cap_part = cap_part
        return out


def _least_loaded(ps, pool: list[int], free: Free, weight, most: int | None = None) -> list | None:
    """All pods of ``ps`` as cons_tres's ``_eval_nodes_lln`` takes nodes: lowest weight first,
    then the fitting node with the largest share of its CPUs free (ties: lowest index; with its
    search's shortcut, ``eval_nodes.least_loaded_order``), as many of the pods on it as fit,
    then the next. A real 22.05.8 with gpu01 holding 8 CPUs and gpu02 4 put two
    ``-c2`` jobs on idle gpu03, ``-N2 -c2`` on gpu02-03 and ``-n3 -c4`` as two tasks on gpu02
    (10 free) and one on gpu03, where best fit would have chosen gpu01."""
    return _in_order_again(ps, walk_order(weight, None, True, free), fitting_nodes(ps, pool, free), free, most)


def _in_order_again(ps, arrange, fitting: list[int], free: Free, most: int | None) -> list | None:
    """``_in_order``, and where task pods fail at the partition's MaxNodes (``most``),
    ``choose_nodes``' second try: the same order without the nodes of fewest free resources
    (``split_tasks.second_try``; found by a review, then probed: in an LLN partition at
    MaxNodes=2, with gpu03-04 at Weight=5 and gpu01-02 at 4 free CPUs, a real 22.05.8 ran
    ``-n20`` as gpu03 16 + gpu04 4, probe p171)."""
    order = arrange(fitting)
    got = _in_order(ps, order, free, most)
    if got is not None or most is None or ps.one_per_node:
        return got
    def in_order_of(kept: list[int]) -> list | None:
        keep = set(kept)
        return _in_order(ps, arrange([i for i in fitting if i in keep]), free, most)

    return second_try(ps, free, order, 1, [], in_order_of)


def _in_order(ps, order: list[int], free: Free, most: int | None = None) -> list | None:
    """The pods of ``ps`` on the fitting nodes ``order``, first first: one pod per node for a
    pod-per-node request (a node range as many as fit, ``_node_count``), else as many pods on
    each node as fit before the next, on ``most`` nodes at most (the partition's MaxNodes:
    ``_eval_nodes_busy`` and ``_eval_nodes_lln`` stop once max_nodes are taken; a real 22.05.8
    left ``-n20`` waiting in an LLN partition at MaxNodes=2 with every node at 8 free CPUs,
    probe p170); None when they do not all fit."""
    need = ps.count
    if ps.one_per_node:
        need = _node_count(ps, len(order))
        if not need:
            return None
        return [pod_fits(free, i, ps) for i in order[:need]]
    out: list = []
    taken: list = []
    nodes_left = len(order) if most is None else most
    for i in order:
        if not nodes_left:
            break
        before = need
        while need:
            pod = pod_fits(free, i, ps)
            if pod is None:
                break
            # (exclusive task pods of more than one task go to ``_exclusive_tasks``)
            out.append(pod)
            free.take([pod])
            taken.append(pod)
            need -= 1
        if need < before:
            nodes_left -= 1
        if not need:
            break
    free.give(taken)
    return None if need else out


def gpu_env(placement, nodes: NodeTable, constrain_devices: bool) -> list[dict[str, str]]:
    """Per allocated node: SLURM_JOB_GPUS (global indices), SLURM_GPUS_ON_NODE and
    CUDA_VISIBLE_DEVICES (0..k-1 when cgroup ConstrainDevices hides the others, else global)."""
    out = []
    for node, mask, _cpu, _mem in placement:
        idx = mask_indices(mask)
        env = {"SLURM_JOB_GPUS": ",".join(map(str, idx)), "SLURM_GPUS_ON_NODE": str(len(idx))}
        env["CUDA_VISIBLE_DEVICES"] = ",".join(
            str(k) for k in (range(len(idx)) if constrain_devices else idx))
        out.append(env)
    return out
