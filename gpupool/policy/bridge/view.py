"""A policy's private view of the pool: a node table and job dicts it may differ on.

slurm-bridge and slurm-operator both run an unmodified policy (Slurm's, Kueue's) over a
pool that is not exactly the engine's: bridge pods appear as external Slurm jobs holding
whole nodes; a NodeSet's Slurm sees only the nodes lent to it. The view is one persistent
``NodeTable`` per composed policy (policies memoise on the table's identity, so it must not
be recreated) refreshed from the engine's table before every call, and a ``Snapshot`` that
shows the jobs the composed policy is meant to see.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping

from gpupool.engine.job import Job
from gpupool.engine.nodes import NodeTable
from gpupool.engine.snapshot import CHANGED_ALL, Snapshot
from gpupool.model.pool import Pool


class NodeView(NodeTable):
    """A ``NodeTable`` whose free resources and availability are copied from the engine's."""

    __slots__ = ()

    def __init__(self, pool: Pool) -> None:
        super().__init__(pool)

    def refresh(self, src: NodeTable, hidden: Iterable[int] = ()) -> None:
        """Copy ``src``'s state; nodes in ``hidden`` look up but fully used, so the composed
        policy neither places work there nor judges a job impossible because they are absent."""
        self.free_mask[:] = src.free_mask
        self.free_gpus[:] = src.free_gpus
        self.free_cpu[:] = src.free_cpu
        self.free_mem[:] = src.free_mem
        self.up[:] = src.up
        self.drain[:] = src.drain
        self.future[:] = src.future
        self.owner[:] = src.owner
        for i in hidden:
            self.free_mask[i] = 0
            self.free_gpus[i] = 0
            self.free_cpu[i] = 0
            self.free_mem[i] = 0

    def hold_whole(self, node: int) -> None:
        """Show ``node`` with no free GPUs or CPUs (an exclusive allocation holds it all)."""
        self.free_mask[node] = 0
        self.free_gpus[node] = 0
        self.free_cpu[node] = 0


class JobsView(Mapping):
    """Every job by id: the view's own records first, then the engine's."""

    __slots__ = ("own", "real", "sync")

    def __init__(self, own: dict[int, Job], real: dict[int, Job], sync=None) -> None:
        self.own = own
        self.real = real
        self.sync = sync  # called with a view record before it is handed out (mirror its state)

    def __getitem__(self, key: int) -> Job:
        job = self.own.get(key)
        if job is not None:
            if self.sync is not None:
                self.sync(job)
            return job
        return self.real[key]

    def __contains__(self, key: object) -> bool:
        return key in self.own or key in self.real

    def __iter__(self):
        yield from self.own
        for k in self.real:
            if k not in self.own:
                yield k

    def __len__(self) -> int:
        return len(self.own) + sum(1 for k in self.real if k not in self.own)


def sub_snapshot(snap: Snapshot, nodes: NodeTable, pending: dict[int, Job], active: dict[int, Job],
                 jobs: Mapping, reserved: dict[int, Job] | None = None) -> Snapshot:
    """A snapshot for a composed policy; ``changed`` is always ALL (the view is rebuilt)."""
    return Snapshot(snap.now, snap.pool, nodes, pending, active, jobs, trigger=snap.trigger, seq=snap.seq,
                    changed=CHANGED_ALL, arrived=[j for j in snap.arrived if j.id in pending],
                    applied=None, reserved=reserved if reserved is not None else {})
