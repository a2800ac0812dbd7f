"""The one-node pool a live daemon serves, built from a pool directory and this host's devices.

A pool directory may describe a whole cluster; the daemon runs on one host, so it keeps the
node that is this host (``--node``, else the node named like the host, else the pool's
first node), replaces its GPUs by the devices found here (NVML, or the declared ones as fake
devices) and trims every partition to that node. The policy then sees exactly what can run.
"""
from __future__ import annotations

import copy
import socket
from dataclasses import dataclass, replace

from gpupool.errors import GpupoolError
from gpupool.live.devices import Device, discover
from gpupool.model.pool import Node, Pool
from gpupool.model.workload import Workload


@dataclass
class LiveHost:
    """The pool as the daemon schedules it, and the devices behind its node's GPU indices."""

    pool: Pool
    node: Node
    devices: list[Device]
    source_pool: Pool

    @property
    def node_name(self) -> str:
        return self.node.name

    def operators(self) -> set[str]:
        """Users with AdminLevel Operator or Administrator in the pool's sacctmgr dump."""
        acct = self.pool.slurm.accounting if self.pool.slurm is not None else None
        if acct is None:
            return set()
        return {u.name for u in acct.users.values() if u.admin_level in ("Operator", "Administrator")}


def pick_node(pool: Pool, name: str | None) -> Node:
    if name:
        if name not in pool.nodes:
            raise GpupoolError(f"--node {name!r}: the pool {pool.name} has no such node "
                               f"(nodes: {', '.join(list(pool.nodes)[:8])})")
        return pool.nodes[name]
    host = socket.gethostname().split(".")[0]
    if host in pool.nodes:
        return pool.nodes[host]
    return next(iter(pool.nodes.values()))


def live_host(pool: Pool, *, node: str | None = None, devices: str = "auto") -> LiveHost:
    """Trim ``pool`` to this host's node with its discovered devices (see module doc)."""
    chosen = pick_node(pool, node)
    found = discover(chosen.gpus, devices)
    host_node = replace(chosen, gpus=tuple(d.as_gpu() for d in found), labels=dict(chosen.labels))
    live = copy.copy(pool)
    live.nodes = {host_node.name: host_node}
    if pool.slurm is not None:
        slurm = copy.copy(pool.slurm)
        slurm.partitions = {
            name: replace(part, nodes=tuple(n for n in part.nodes if n == host_node.name))
            for name, part in pool.slurm.partitions.items()
        }
        slurm.partitions = {k: p for k, p in slurm.partitions.items() if p.nodes}
        if not slurm.partitions and pool.slurm.partitions:
            raise GpupoolError(f"no partition of pool {pool.name} contains node {host_node.name}")
        live.slurm = slurm
    return LiveHost(pool=live, node=host_node, devices=found, source_pool=pool)


def never_fits(host: LiveHost, wl: Workload) -> str | None:
    """Why this host can never run ``wl`` (a message naming the request), or None if it can.

    A job waits for resources in use; a job asking for more than the node has, several nodes,
    a GPU type the node lacks or a partition that does not include this node would wait forever,
    so it is refused at submission as sbatch refuses "Requested node configuration is not available".
    """
    node = host.node
    where = f"host node {node.name} ({node.cpus} CPUs, {node.memory_mib} MiB, {node.gpu_count} GPUs)"
    slurm = host.pool.slurm
    if slurm is not None and slurm.partitions:
        if wl.partition and wl.partition not in slurm.partitions:
            known = ", ".join(sorted(host.source_pool.slurm.partitions)) if host.source_pool.slurm else ""
            if host.source_pool.slurm is not None and wl.partition in host.source_pool.slurm.partitions:
                return f"partition {wl.partition!r} does not include {node.name}, the node this daemon runs"
            return f"invalid partition {wl.partition!r} (partitions: {known})"
    gpus = cpu = mem = 0
    for ps in wl.pod_sets:
        if ps.one_per_node and ps.count > 1:
            return (f"asks for {ps.count} nodes (--nodes/--ntasks-per-node), but this live pool has one "
                    f"node ({node.name}); ask for --nodes=1")
        if ps.gpu_type and ps.gpus:
            have = sum(1 for g in node.gpus if g.type == ps.gpu_type)
            if have < ps.gpus:
                types = sorted({g.type or "untyped" for g in node.gpus})
                return f"asks for {ps.gpus} GPU(s) of type {ps.gpu_type}; {where} has {have} (types: {', '.join(types) or 'none'})"
        if ps.exclusive:
            continue
        gpus += ps.gpus * ps.count
        cpu += ps.cpu_m * ps.count
        mem += ps.memory_mib * ps.count
    if gpus > node.gpu_count:
        return f"asks for {gpus} GPU(s); {where} has {node.gpu_count}"
    if cpu > node.cpus * 1000:
        return f"asks for {cpu / 1000:g} CPUs; {where} has {node.cpus}"
    if mem > node.memory_mib:
        return f"asks for {mem} MiB of memory; {where} has {node.memory_mib}"
    return None
