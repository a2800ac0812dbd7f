"""Free-resource bookkeeping for every node, as flat integer lists indexed by node.

GPU sets are bit masks (bit i = node-local device index i): "lowest free index" is one
bit trick, overlap checks are one AND. The engine is the only writer; policies read.
"""
from __future__ import annotations

from gpupool.errors import InvariantViolation
from gpupool.model.pool import Pool


def cpu_steps(pool: Pool, core_cpus: list[int]) -> list[int]:
    """Per node, the millicores a job's CPUs there are rounded up to under the pool's Slurm
    configuration: ThreadsPerCore CPUs where SelectTypeParameters allocates cores (CR_Core,
    CR_Core_Memory, and the default), one CPU under CR_CPU/CR_CPU_Memory and in pools without a
    slurm.conf. A real 22.05.8 with two threads per core gave ``-n1`` 2 CPUs, ``-c3`` and
    ``-n3`` 4, ``-n2 -c3`` 6 under CR_Core_Memory, and 1, 3, 3 (TRES cpu=, memory per CPU
    alike) under CR_CPU_Memory (docs/differential.md, finding 49)."""
    slurm = getattr(pool, "slurm", None)
    if slurm is None or any(p.upper().startswith("CR_CPU") for p in slurm.select_type_parameters):
        return [1000] * len(core_cpus)
    return list(core_cpus)


def threads_per_core(node) -> int:
    """The CPUs of one of ``node``'s cores as slurmctld counts them: ThreadsPerCore, but one
    where ``CPUs=`` is no more than the node's cores (it then schedules a thread per core)."""
    tpc = max(1, node.threads_per_core)
    cores = node.sockets * node.cores_per_socket
    if tpc > 1 and cores and node.cpus <= cores:
        return 1
    return tpc


class NodeTable:
    """Capacity and free resources of the pool's nodes, in pool order."""

    __slots__ = (
        "names", "index", "gpu_total", "cpu_total", "mem_total", "full_mask", "gpu_type",
        "labels", "weight", "free_mask", "free_gpus", "free_cpu", "free_mem", "up", "drain",
        "check", "memory_overcommit", "overcommit_now", "owner", "shared_cpu", "share_n", "type_mask", "features", "cpu_step", "stepped", "core_cpus", "threaded",
        "gres_topology", "future",
    )

    def __init__(self, pool: Pool, *, check: bool = False) -> None:
        nodes = list(pool.nodes.values())
        self.names = [n.name for n in nodes]
        self.index = {name: i for i, name in enumerate(self.names)}
        self.gpu_total = [n.gpu_count for n in nodes]
        self.cpu_total = [n.cpu_millicores for n in nodes]
        self.mem_total = [n.memory_mib for n in nodes]
        self.full_mask = [_mask_of(n.gpus) for n in nodes]
        self.gpu_type = [n.gpu_type for n in nodes]
        #: Devices per GPU type on nodes whose devices are of several types (whole GPUs beside
        #: MIG slices, two models): type -> mask. Empty where ``gpu_type`` says it all.
        self.type_mask: list[dict[str, int]] = [_type_masks(n.gpus) if n.gpu_type is None else {} for n in nodes]
        #: whether a node's GPUs carry a type or ``Cores=`` (``Node.gres_topology``)
        self.gres_topology = [n.gres_topology for n in nodes]
        self.labels = [n.labels for n in nodes]
        self.weight = [n.weight for n in nodes]
        #: slurm.conf Features= of each node (``--constraint``)
        self.features = [frozenset(n.features) for n in nodes]
        #: the millicores of one core (ThreadsPerCore CPUs) of each node, whatever is allocated;
        #: ``threaded`` when any core has more than one CPU
        self.core_cpus = [threads_per_core(n) * 1000 for n in nodes]
        self.threaded = any(c > 1000 for c in self.core_cpus)
        #: the millicores a Slurm job's CPUs on each node come in (``cpu_steps``): a whole core
        #: where cores are what select/cons_tres allocates; ``stepped`` when any is above one CPU
        self.cpu_step = cpu_steps(pool, self.core_cpus)
        self.stepped = any(s > 1000 for s in self.cpu_step)
        self.free_mask = list(self.full_mask)
        self.free_gpus = list(self.gpu_total)
        self.free_cpu = list(self.cpu_total)
        self.free_mem = list(self.mem_total)
        self.up = [n.state.upper() not in ("DOWN", "FAIL", "FUTURE") for n in nodes]
        self.drain = [n.state.upper().startswith("DRAIN") for n in nodes]
        #: State=FUTURE nodes: not in the cluster yet, so no test of what a job could ever run
        #: on counts them (slurmctld leaves them out of its active nodes); a fixed list
        self.future = [n.state.upper() == "FUTURE" for n in nodes]
        #: A free-form tag per node set by controllers (``Engine.set_node_owner``): which side
        #: of a shared pool a node currently serves ("slurm", "fleet"); None = not assigned.
        self.owner: list[str | None] = [None] * len(nodes)
        self.check = check
        #: Jobs whose next start ``check`` lets allocate a node's memory beyond its RealMemory
        #: (GPUs and CPUs stay checked; the engine takes the job out as it starts). Only a
        #: differential replay adds any: it carries out real Slurm's starts with the memory real
        #: Slurm gave them, and a real 22.05.8 over-allocates memory in one case
        #: (docs/differential.md, finding 59). ``overcommit_now``: the start being allocated is
        #: one of them (set by the engine around the allocation).
        self.memory_overcommit: set[int] = set()
        self.overcommit_now = False
        #: CPUs (millicores) per node held by jobs that share CPUs (``allocate_shared``), per
        #: sharing group (a Slurm partition); they are not counted in ``free_cpu``, whose
        #: policy works out the overlap itself. Empty dicts while nothing shares.
        self.shared_cpu: list[dict[str, int]] = [{} for _ in nodes]
        #: sharing group -> how many jobs may hold one CPU there (OverSubscribe's N)
        self.share_n: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self.names)

    def typed_mask(self, i: int, gpu_type: str) -> int | None:
        """The devices of type ``gpu_type`` on node ``i`` (a mask), or None when it has none."""
        if self.gpu_type[i] == gpu_type:
            return self.full_mask[i]
        return self.type_mask[i].get(gpu_type)

    def gpu_types(self, i: int) -> dict[str, int]:
        """Node ``i``'s devices per type: type -> mask (empty where no device names a type)."""
        t = self.gpu_type[i]
        return {t: self.full_mask[i]} if t is not None else self.type_mask[i]

    def schedulable(self, i: int) -> bool:
        return self.up[i] and not self.drain[i]

    def allocate(self, placement) -> None:
        """Take the resources of every pod placement; with ``check`` on, prove no overlap."""
        free_mask, free_gpus, free_cpu, free_mem = self.free_mask, self.free_gpus, self.free_cpu, self.free_mem
        for node, mask, cpu, mem in placement:
            if self.check:
                self._check_take(node, mask, cpu, mem)
            free_mask[node] &= ~mask
            free_gpus[node] -= mask.bit_count()
            free_cpu[node] -= cpu
            free_mem[node] -= mem

    def release(self, placement) -> None:
        """Give back what ``allocate`` took."""
        free_mask, free_gpus, free_cpu, free_mem = self.free_mask, self.free_gpus, self.free_cpu, self.free_mem
        for node, mask, cpu, mem in placement:
            if self.check and free_mask[node] & mask:
                raise InvariantViolation(f"node {self.names[node]}: released GPUs {mask:#x} were not allocated")
            free_mask[node] |= mask
            free_gpus[node] += mask.bit_count()
            free_cpu[node] += cpu
            free_mem[node] += mem

    def allocate_held(self, placement) -> None:
        """Take GPUs and memory but not CPUs: a job that is allocated while SUSPENDED (its CPUs
        are taken by ``take_cpu`` when it runs). With ``check`` on, prove no GPU is taken twice."""
        free_mask, free_gpus, free_mem = self.free_mask, self.free_gpus, self.free_mem
        for node, mask, _cpu, mem in placement:
            if self.check:
                self._check_take(node, mask, 0, mem)
            free_mask[node] &= ~mask
            free_gpus[node] -= mask.bit_count()
            free_mem[node] -= mem

    def release_held(self, placement) -> None:
        """Give back what ``allocate_held`` took (a job released while SUSPENDED)."""
        free_mask, free_gpus, free_mem = self.free_mask, self.free_gpus, self.free_mem
        for node, mask, _cpu, mem in placement:
            if self.check and free_mask[node] & mask:
                raise InvariantViolation(f"node {self.names[node]}: released GPUs {mask:#x} were not allocated")
            free_mask[node] |= mask
            free_gpus[node] += mask.bit_count()
            free_mem[node] += mem

    def take_cpu(self, placement) -> None:
        """A SUSPENDED job runs again: take its CPUs (they must be free: CPUs are time-shared,
        never used by two running jobs at once)."""
        free_cpu = self.free_cpu
        for node, _mask, cpu, _mem in placement:
            if self.check and cpu > free_cpu[node] - self.shared_floor(node):
                raise InvariantViolation(
                    f"node {self.names[node]}: resumed job needs {cpu}m CPU, only "
                    f"{free_cpu[node] - self.shared_floor(node)}m free")
            free_cpu[node] -= cpu

    def give_cpu(self, placement) -> None:
        """A RUNNING job is suspended: its CPUs are free for others; GPUs and memory stay its own."""
        free_cpu = self.free_cpu
        for node, _mask, cpu, _mem in placement:
            free_cpu[node] += cpu

    def allocate_shared(self, placement, group: str, n: int) -> None:
        """Take GPUs and memory, and count the CPUs as shared up to ``n`` ways within ``group``
        (jobs running at once on the same CPUs). Which CPUs overlap is the policy's business;
        with ``check`` on, prove the weakest bound any overlap must meet: per group at least
        1/n of its CPUs are held, and together with unshared jobs that fits the node."""
        self.allocate_held(placement)
        if self.check and self.share_n.get(group, n) != n:
            raise InvariantViolation(f"CPU-sharing group {group!r}: {n} ways now, {self.share_n[group]} before")
        self.share_n[group] = n
        shared = self.shared_cpu
        for node, _mask, cpu, _mem in placement:
            sums = shared[node]
            sums[group] = sums.get(group, 0) + cpu
            if self.check and self.shared_floor(node) > self.free_cpu[node]:
                raise InvariantViolation(f"node {self.names[node]}: CPUs shared more than {n} ways "
                                         f"({sums[group]}m in {group!r}, {self.free_cpu[node]}m not held "
                                         f"by unshared jobs)")

    def release_shared(self, placement, group: str) -> None:
        """Give back what ``allocate_shared`` took. A node's CPUs are summed first: an
        exclusive job's tasks after the first hold no CPUs of their own on the node, and the
        group's count drops to zero (and leaves) only with the node's last CPU."""
        self.release_held(placement)
        per_node: dict[int, int] = {}
        for node, _mask, cpu, _mem in placement:
            per_node[node] = per_node.get(node, 0) + cpu
        shared = self.shared_cpu
        for node, cpu in per_node.items():
            sums = shared[node]
            left = sums.get(group, 0) - cpu
            if self.check and left < 0:
                raise InvariantViolation(f"node {self.names[node]}: {cpu}m CPU released from sharing group "
                                         f"{group!r}, which holds {left + cpu}m")
            if left:
                sums[group] = left
            else:
                sums.pop(group, None)

    def shared_floor(self, node: int) -> int:
        """The fewest CPUs (millicores) the sharing jobs on ``node`` can hold: per group, its
        CPUs spread evenly over its N ways."""
        sums = self.shared_cpu[node]
        if not sums:
            return 0
        share_n = self.share_n
        return sum(-(-c // share_n[g]) for g, c in sums.items())

    def _check_take(self, node: int, mask: int, cpu: int, mem: int) -> None:
        name = self.names[node]
        if mask & ~self.full_mask[node]:
            raise InvariantViolation(f"node {name}: GPU mask {mask:#x} names devices the node does not have")
        if mask & ~self.free_mask[node]:
            raise InvariantViolation(f"node {name}: GPUs {mask & ~self.free_mask[node]:#x} allocated twice")
        if cpu > self.free_cpu[node] - self.shared_floor(node) or (mem > self.free_mem[node]
                                                                    and not self.overcommit_now):
            raise InvariantViolation(f"node {name}: allocation exceeds capacity (cpu {cpu}m, memory {mem}MiB)")

    def all_free(self) -> bool:
        return (self.free_mask == self.full_mask and self.free_cpu == self.cpu_total
                and self.free_mem == self.mem_total and not any(self.shared_cpu))


def _type_masks(gpus) -> dict[str, int]:
    out: dict[str, int] = {}
    for gpu in gpus:
        if gpu.type:
            out[gpu.type] = out.get(gpu.type, 0) | 1 << gpu.index
    return out


def _mask_of(gpus) -> int:
    mask = 0
    for gpu in gpus:
        mask |= 1 << gpu.index
    return mask


def mask_indices(mask: int) -> list[int]:
    """Device indices set in ``mask``, lowest first."""
    out = []
    while mask:
        low = mask & -mask
        out.append(low.bit_length() - 1)
        mask ^= low
    return out


def lowest_bits(mask: int, n: int) -> int:
    """The ``n`` lowest set bits of ``mask`` (caller guarantees at least ``n`` are set)."""
    out = 0
    for _ in range(n):
        low = mask & -mask
        out |= low
        mask ^= low
    return out
