"""First-fit placement over a working copy of the free-resource table.

Used by the baseline policies: nodes in pool order, the lowest free GPU indices first.
A ``Scratch`` copies the free lists once per ``decide`` call so that the policy can place
several jobs in one pass without touching the engine's state. ``LazyScratch`` defers that
copy to the first placement: most passes of a busy run try one job that does not fit and
place nothing, and copying four O(nodes) lists for them dominated the pass.
"""
from __future__ import annotations

from gpupool.engine.nodes import NodeTable, lowest_bits
from gpupool.model.pool import Pool
from gpupool.model.workload import Workload


class Scratch:
    """The policy's private, mutable copy of free resources for one decision pass."""

    __slots__ = ("nodes", "free_mask", "free_gpus", "free_cpu", "free_mem")

    def __init__(self, nodes: NodeTable) -> None:
        self.nodes = nodes
        self.free_mask = list(nodes.free_mask)
        self.free_gpus = list(nodes.free_gpus)
        self.free_cpu = list(nodes.free_cpu)
        self.free_mem = list(nodes.free_mem)

    def take(self, placement) -> None:
        """Remove a placement's resources from the free lists."""
        self.own()
        free_mask, free_gpus, free_cpu, free_mem = self.free_mask, self.free_gpus, self.free_cpu, self.free_mem
        for node, mask, cpu, mem in placement:
            free_mask[node] &= ~mask
            free_gpus[node] -= mask.bit_count()
            free_cpu[node] -= cpu
            free_mem[node] -= mem

    def give(self, placement) -> None:
        """Return a placement's resources (undo a ``take``)."""
        self.own()
        free_mask, free_gpus, free_cpu, free_mem = self.free_mask, self.free_gpus, self.free_cpu, self.free_mem
        for node, mask, cpu, mem in placement:
            free_mask[node] |= mask
            free_gpus[node] += mask.bit_count()
            free_cpu[node] += cpu
            free_mem[node] += mem

    def own(self) -> None:
        """Make the free lists private before writing to them (they already are here)."""


class LazyScratch(Scratch):
    """A ``Scratch`` that reads the engine's free lists until the first write, then copies.

    Reading through is safe because the engine changes nothing during ``decide``; every
    writer (``take``, ``first_fit``'s tentative takes) calls ``own`` first.
    """

    __slots__ = ("_owned",)

    def __init__(self, nodes: NodeTable) -> None:  # noqa: D107 - no copy on purpose
        self.nodes = nodes
        self.free_mask = nodes.free_mask
        self.free_gpus = nodes.free_gpus
        self.free_cpu = nodes.free_cpu
        self.free_mem = nodes.free_mem
        self._owned = False

    def own(self) -> None:
        if not self._owned:
            self.free_mask = list(self.free_mask)
            self.free_gpus = list(self.free_gpus)
            self.free_cpu = list(self.free_cpu)
            self.free_mem = list(self.free_mem)
            self._owned = True


class CandidateNodes:
    """Which nodes may host a workload's pods: partition, GPU type and node selector.

    A memo of a pure function of the pool, keyed by what decides the answer.
    """

    def __init__(self, pool: Pool, nodes: NodeTable) -> None:
        self.nodes = nodes
        self._partitions: dict[str, frozenset[str]] = {}
        if pool.slurm is not None:
            for name, part in pool.slurm.partitions.items():
                self._partitions[name] = frozenset(part.nodes)
        self._memo: dict[tuple, tuple[int, ...]] = {}
        self._never: dict[tuple, str | None] = {}

    def never_fits(self, wl: Workload) -> str | None:
        """``never_fits`` memoised by what decides it (partition and pod sets): a blocked head
        is retried after every job end, and the full check scans every candidate node."""
        key = (wl.partition, wl.pod_sets)
        try:
            return self._never[key]
        except KeyError:
            why = self._never[key] = never_fits(wl, self)
            return why

    def for_pod_set(self, wl: Workload, ps) -> tuple[int, ...]:
        key = (wl.partition, ps.gpu_type, ps.node_selector)
        found = self._memo.get(key)
        if found is None:
            found = self._compute(*key)
            self._memo[key] = found
        return found

    def _compute(self, partition, gpu_type, selector) -> tuple[int, ...]:
        nodes = self.nodes
        allowed = self._partitions.get(partition) if partition else None
        out = []
        for i, name in enumerate(nodes.names):
            if allowed is not None and name not in allowed:
                continue
            if gpu_type and nodes.gpu_type[i] != gpu_type:
                continue
            labels = nodes.labels[i]
            if any(labels.get(k) != v for k, v in selector):
                continue
            out.append(i)
        return tuple(out)


def first_fit(wl: Workload, candidates: CandidateNodes, scratch: Scratch):
    """Place every pod of ``wl`` or return None. Does not change ``scratch``."""
    nodes = scratch.nodes
    pod_sets = wl.pod_sets
    if len(pod_sets) == 1:
        ps = pod_sets[0]
        g = ps.gpus
        if g > 1 and not ps.exclusive:
            # A blocked queue head is retried after every job end, mostly on a full pool: one
            # C-level max over the candidates settles "no node has g free GPUs" without the
            # per-node Python loop below. (Single-GPU pods nearly always find a node, so the
            # loop is cheaper for them.)
            cand = candidates.for_pod_set(wl, ps)
            if not cand or max(map(scratch.free_gpus.__getitem__, cand)) < g:
                return None
        if ps.count == 1 and not ps.exclusive:
            # One ordinary pod (most jobs): the first node with room, no tentative takes.
            cpu, mem = ps.cpu_m, ps.memory_mib
            free_gpus, free_cpu, free_mem = scratch.free_gpus, scratch.free_cpu, scratch.free_mem
            up, drain = nodes.up, nodes.drain
            for i in candidates.for_pod_set(wl, ps):
                if free_gpus[i] >= g and free_cpu[i] >= cpu and free_mem[i] >= mem and up[i] and not drain[i]:
                    return ((i, lowest_bits(scratch.free_mask[i], g) if g else 0, cpu, mem),)
            return None
    scratch.own()
    free_mask, free_gpus, free_cpu, free_mem = scratch.free_mask, scratch.free_gpus, scratch.free_cpu, scratch.free_mem
    up, drain = nodes.up, nodes.drain
    placement = []
    # Tentative takes are applied to the scratch lists and undone on failure, so pods of one
    # job see each other's use of a node.
    for ps in wl.pod_sets:
        cand = candidates.for_pod_set(wl, ps)
        used: set[int] = set()
        g, cpu, mem = ps.gpus, ps.cpu_m, ps.memory_mib
        for _ in range(ps.count):
            chosen = -1
            for i in cand:
                if not up[i] or drain[i] or (ps.one_per_node and i in used):
                    continue
                if ps.exclusive:
                    if (free_mask[i] == nodes.full_mask[i] and free_cpu[i] == nodes.cpu_total[i]
                            and free_mem[i] == nodes.mem_total[i]):
                        chosen = i
                        pod = (i, free_mask[i], free_cpu[i], free_mem[i])
                        break
                    continue
                if free_gpus[i] >= g and free_cpu[i] >= cpu and free_mem[i] >= mem:
                    chosen = i
                    pod = (i, lowest_bits(free_mask[i], g) if g else 0, cpu, mem)
                    break
            if chosen < 0:
                scratch.give(placement)
                return None
            used.add(chosen)
            placement.append(pod)
            scratch.take((pod,))
    scratch.give(placement)
    return tuple(placement)


def never_fits(wl: Workload, candidates: CandidateNodes) -> str | None:
    """Why ``wl`` can never run on the pool even when it is empty (None when it can)."""
    nodes = candidates.nodes
    for ps in wl.pod_sets:
        cand = candidates.for_pod_set(wl, ps)
        if not cand:
            return f"no node matches pod set {ps.name!r} (partition, GPU type or node selector)"
        if ps.exclusive:
            hosts = len(cand)
            per_node = 1
        else:
            fit = [
                i for i in cand
                if nodes.gpu_total[i] >= ps.gpus and nodes.cpu_total[i] >= ps.cpu_m and nodes.mem_total[i] >= ps.memory_mib
            ]
            if not fit:
                return f"pod set {ps.name!r}: no node has {ps.gpus} GPUs, {ps.cpu_m}m CPU and {ps.memory_mib}MiB memory"
            hosts = len(fit)
            if ps.one_per_node:
                per_node = 1
            else:
                per_node = None
                total = 0
                for i in fit:
                    caps = [nodes.cpu_total[i] // ps.cpu_m if ps.cpu_m else 10**9,
                            nodes.mem_total[i] // ps.memory_mib if ps.memory_mib else 10**9,
                            nodes.gpu_total[i] // ps.gpus if ps.gpus else 10**9]
                    total += min(caps)
                if total < ps.count:
                    return f"pod set {ps.name!r}: {ps.count} pods need more than the pool's capacity"
        if per_node == 1 and hosts < ps.count:
            return f"pod set {ps.name!r}: {ps.count} nodes requested, {hosts} suitable nodes exist"
    return None
