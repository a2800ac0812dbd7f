"""Which cores each running job holds on nodes whose GPUs name ``Cores=`` (policy/slurm/affinity.py).

Why a book: the engine counts CPUs, not cores, but with socket affinity the cores a job gets
decide which GPUs it gets, and they depend on the cores earlier jobs took. The book records the
cores the policy chose at each start and forgets a job once it is no longer active.
"""
from __future__ import annotations

from gpupool.policy.slurm import affinity
from gpupool.policy.slurm.affinity import Topology


class CoreBook:
    __slots__ = ("by_node", "held", "log", "topo")

    def __init__(self, topo: dict[int, Topology]) -> None:
        #: node index -> topology, for the nodes with ``Cores=``
        self.topo = topo
        #: job id -> {node index: bit set of the cores it holds there}
        self.held: dict[int, dict[int, int]] = {}
        #: node index -> the cores all recorded jobs hold there (running jobs' cores never overlap)
        self.by_node: dict[int, int] = {}
        #: with the policy's ``record`` option: job id -> {node: core ids} of its last start
        self.log: dict[int, dict[int, tuple[int, ...]]] | None = None

    @classmethod
    def for_nodes(cls, pool_nodes: list) -> CoreBook | None:
        """A book for ``pool_nodes`` (in the engine's node order), or None when no node has a
        GPU with ``Cores=`` (then nothing is steered and nothing is recorded)."""
        topo = {i: t for i, n in enumerate(pool_nodes) if (t := affinity.topology_of(n)) is not None}
        return cls(topo) if topo else None

    def forget_inactive(self, active) -> None:
        """Drop the jobs that ended or were requeued (``active``: the snapshot's running and
        suspended jobs)."""
        by_node = self.by_node
        for jid in [j for j in self.held if j not in active]:
            for node, cores in self.held.pop(jid).items():
                by_node[node] &= ~cores

    def free_cores(self, node: int) -> int:
        return self.topo[node].all_cores & ~self.by_node.get(node, 0)

    def steer(self, job, placement: tuple, free_mask: list[int]) -> tuple:
        """``placement`` with, on each node that has a topology, the GPUs slurmctld would take
        given the cores it gives the job there; the cores are recorded. ``free_mask``: each
        node's free GPU bits (the placement's own among them)."""
        pod_sets = job.wl.pod_sets
        ps = pod_sets[0] if len(pod_sets) == 1 else None
        out = []
        mine: dict[int, int] = {}
        changed = False
        for node, mask, cpu, mem in placement:
            topo = self.topo.get(node)
            if topo is None:
                out.append((node, mask, cpu, mem))
                continue
            free_cores = self.free_cores(node) & ~mine.get(node, 0)
            cpus = -(-cpu // 1000)
            if ps is not None and ps.exclusive:
                got = (free_cores, mask)
            else:
                tasks = ps.slurm_tasks if ps is not None else None
                got = affinity.choose(topo, free_cores, free_mask[node], mask.bit_count(), cpus, tasks)
            if got is None:  # the free cores allow no such split: keep the count-based choice
                cores = affinity.pick_cores(topo, free_cores, cpus, 1) or 0
                got = (cores, mask)
            cores, gpus = got
            if ps is None or ps.slurm_tasks is None or not mask:
                gpus = mask
            mine[node] = mine.get(node, 0) | cores
            if gpus != mask:
                changed = True
            out.append((node, gpus, cpu, mem))
        if mine:
            old = self.held.get(job.id)
            if old:  # started again before it was forgotten (a requeue within one instant)
                for node, cores in old.items():
                    self.by_node[node] &= ~cores
            self.held[job.id] = mine
            for node, cores in mine.items():
                self.by_node[node] = self.by_node.get(node, 0) | cores
            if self.log is not None:
                self.log[job.id] = {n: tuple(i for i in range(c.bit_length()) if c >> i & 1) for n, c in mine.items()}
        return tuple(out) if changed else placement
