"""Which cores and which GPUs of a node a job gets when gres.conf binds GPUs to cores (``Cores=``).

Why it matters: with socket affinity slurmctld 22.05 does not give the lowest free GPU indices.
It chooses the job's cores first, steering them to sockets whose bound GPUs are free, and then
takes GPUs near those cores. Reproduced here from select/cons_tres and checked on a real
22.05.8 (docs/policies/slurm.md, "GPU choice with Cores="):

1. ``gres_select_filter_sock_core`` (cons_common/gres_select_filter.c), first pass: sockets in
   order of most free cores (ties: lower socket first); a socket whose free GPUs (bound to it or
   to no socket) are none has cores dropped, highest first, down to what the job needs at
   least; sockets are "required" until their free bound GPUs cover the request (never, when
   some free GPU is bound to no socket); cores of sockets not required are dropped. With a
   fixed task count the cores left are then cut down to the job's need: first from sockets not
   required (second pass only), then one at a time from the required socket with the most
   left, highest core first. When the first pass leaves the job too few cores the second
   pass runs without dropping sockets (cons_tres ``choose_nodes``).
2. ``_cyclic_sync_core_bitmap`` (cons_common/dist_tasks.c), the default distribution: with
   several CPUs per task, whole tasks are packed socket by socket first; the rest is taken one
   core per socket in turn, lowest free core first.
3. ``_set_node_bits`` (gres per node): one GPU bound to no socket, then one per socket holding
   the job's cores; then more of the unbound GPUs and of those sockets' GPUs; then GPUs of the
   other sockets; lowest free index first at every step.

Pure functions of a node's topology and free bits; the policy keeps which cores each running job
holds (``SlurmPolicy.job_cores``). Only GPU requests per node (``--gres=gpu:N``,
``--gpus-per-node``) with a node count are steered this way (``PodSet.slurm_tasks``); other
requests, and nodes without ``Cores=``, keep the lowest free indices.
"""
from __future__ import annotations

from dataclasses import dataclass

from gpupool.engine.nodes import threads_per_core

#: slurmctld's NO_VAL for "no maximum task count on this node"
NO_MAX = 0


@dataclass(frozen=True, slots=True)
class Topology:
    """A node's cores per socket and, per GPU position, the bit set of sockets it is bound to
    (0: bound to no socket, or to all of them)."""

    sockets: int
    cores_per_socket: int
    threads_per_core: int
    gpu_sockets: tuple[int, ...]

    def socket_mask(self, s: int) -> int:
        return ((1 << self.cores_per_socket) - 1) << (s * self.cores_per_socket)

    @property
    def all_cores(self) -> int:
        return (1 << (self.sockets * self.cores_per_socket)) - 1


def topology_of(node) -> Topology | None:
    """The node's topology when some GPU names ``Cores=`` (else None: lowest free index)."""
    gpus = node.gpus
    if not gpus or not any(g.cores for g in gpus) or any(g.mig_profile for g in gpus):
        return None
    cps = node.cores_per_socket or max(1, node.cpus // max(1, node.sockets * node.threads_per_core))
    sockets = max(1, node.sockets)
    every = (1 << sockets) - 1
    socks = []
    for g in gpus:
        bits = 0
        for c in g.cores:
            if 0 <= c < sockets * cps:
                bits |= 1 << (c // cps)
        socks.append(0 if bits == every and sockets > 1 else bits)
    # (CPUs= no more than the cores: a thread per core, as the node table counts them)
    return Topology(sockets, cps, threads_per_core(node), tuple(socks))


def _drop_highest(avail: int, topo: Topology, s: int) -> int | None:
    """The index of the highest available core of socket ``s`` (None: none left)."""
    part = avail & topo.socket_mask(s)
    return part.bit_length() - 1 if part else None


def _drop_down_to(avail: int, topo: Topology, s: int, per_sock: list[int], total: int, floor: int) -> tuple[int, int]:
    """Drop socket ``s``'s cores, highest first, while ``total`` exceeds ``floor`` (the filter's
    way of giving up cores it will not need); (cores left, new total), ``per_sock`` updated."""
    while total > floor:
        c = _drop_highest(avail, topo, s)
        if c is None:
            break
        avail &= ~(1 << c)
        per_sock[s] -= 1
        total -= 1
    return avail, total


def filter_cores(topo: Topology, free_cores: int, free_gpus: int, ngpus: int, min_tasks: int, max_tasks: int,
                 cpus_per_task: int, first_pass: bool) -> int | None:
    """Cores the job may use on the node after ``gres_select_filter_sock_core`` (see the module
    docstring), or None when this pass leaves it none. ``max_tasks`` NO_MAX: no fixed maximum."""
    tpc = topo.threads_per_core
    cpt = max(cpus_per_task, 1)
    avail = free_cores
    per_sock = [(avail & topo.socket_mask(s)).bit_count() for s in range(topo.sockets)]
    tot = sum(per_sock)
    # _select_cores: the tasks that fit the node's free CPUs cap the maximum
    alloc_tasks = (tot * tpc) // cpt
    if alloc_tasks < min_tasks:
        return None
    # (slurmctld keeps "no maximum" only without a CPUs-per-task count, which is always 1 or more)
    if max_tasks == NO_MAX or alloc_tasks < max_tasks:
        max_tasks = alloc_tasks
    incr = max(min_tasks, 1)
    min_cores = -(-(max(min_tasks, 1) * cpt) // tpc)
    any_free = sum(1 for g, sk in enumerate(topo.gpu_sockets) if not sk and free_gpus >> g & 1)
    by_sock = [sum(1 for g, sk in enumerate(topo.gpu_sockets) if sk >> s & 1 and free_gpus >> g & 1)
               for s in range(topo.sockets)]
    order = sorted(range(topo.sockets), key=lambda s: -per_sock[s])  # stable: ties keep index order
    required = [False] * topo.sockets
    sufficient = False
    total_gpus = any_free
    avail_tot = 0
    for s in order:
        if any_free + by_sock[s] == 0 and first_pass and tot > min_cores:
            avail, tot = _drop_down_to(avail, topo, s, per_sock, tot, min_cores)
        avail_tot += per_sock[s]
        if first_pass and per_sock[s] == 0:
            continue
        total_gpus += by_sock[s]
        if not sufficient:
            required[s] = True
        if not any_free and total_gpus >= ngpus:
            sufficient = True
    if total_gpus == 0 or ngpus > total_gpus:
        return None
    min_tasks = (min_tasks // incr) * incr
    max_tasks = (max_tasks // incr) * incr
    if max_tasks == 0:
        return None
    if first_pass:
        for s in range(topo.sockets):
            if not required[s]:
                part = avail & topo.socket_mask(s)
                avail &= ~part
                avail_tot -= part.bit_count()
                per_sock[s] = 0
    req = max_tasks * cpt
    while max_tasks >= min_tasks:
        req = -(-req // tpc)
        if req <= avail_tot:
            break
        max_tasks -= 1
        req = max_tasks * cpt
    if max_tasks <= 0 or req > avail_tot:
        return None
    if avail_tot > req and not first_pass:
        for s in range(topo.sockets):
            if avail_tot == req:
                break
            if required[s]:
                continue
            avail, avail_tot = _drop_down_to(avail, topo, s, per_sock, avail_tot, req)
    while avail_tot > req:
        full = -1
        for s in range(topo.sockets):
            if not required[s] or per_sock[s] == 0:
                continue
            if full == -1 or per_sock[full] < per_sock[s]:
                full = s
        if full == -1:
            break
        c = _drop_highest(avail, topo, full)
        avail &= ~(1 << c)
        per_sock[full] -= 1
        avail_tot -= 1
    return avail


def pick_cores(topo: Topology, core_map: int, cpus: int, cpus_per_task: int) -> int | None:
    """The cores ``_cyclic_sync_core_bitmap`` takes from ``core_map`` for ``cpus`` CPUs (None:
    too few)."""
    tpc = topo.threads_per_core
    cps = topo.cores_per_socket
    start = [s * cps for s in range(topo.sockets)]
    end = [(s + 1) * cps for s in range(topo.sockets)]
    taken = 0
    if cpus_per_task > 1:
        for s in range(topo.sockets):
            room = (core_map & topo.socket_mask(s)).bit_count() * tpc
            room -= room % cpus_per_task
            while start[s] < end[s] and room > 0 and cpus > 0:
                if core_map >> start[s] & 1:
                    taken |= 1 << start[s]
                    room = 0 if room < tpc else room - tpc
                    cpus = 0 if cpus < tpc else cpus - tpc
                start[s] += 1
    while cpus > 0:
        before = cpus
        for s in range(topo.sockets):
            if cpus <= 0:
                break
            while start[s] < end[s] and not core_map >> start[s] & 1:
                start[s] += 1
            if start[s] == end[s]:
                continue
            taken |= 1 << start[s]
            cpus = 0 if cpus < tpc else cpus - tpc
            start[s] += 1
        if cpus == before:
            return None
    return taken


def pick_gpus(topo: Topology, cores: int, free_gpus: int, ngpus: int) -> int:
    """The GPUs ``_set_node_bits`` takes for a job holding ``cores`` (see the module docstring)."""
    used = [bool(cores & topo.socket_mask(s)) for s in range(topo.sockets)]
    near = [-1] + [s for s in range(topo.sockets) if used[s]]  # -1: GPUs bound to no socket
    far = [s for s in range(topo.sockets) if not used[s]]
    chosen = 0
    count = 0

    def take(groups: list[int], per_group: int | None) -> None:
        """Lowest free GPUs of each group in turn, at most ``per_group`` from one (None: any)."""
        nonlocal chosen, count
        for s in groups:
            got = 0
            for g, sk in enumerate(topo.gpu_sockets):
                if count >= ngpus or (per_group is not None and got >= per_group):
                    break
                if (not sk if s < 0 else sk >> s & 1) and free_gpus >> g & 1 and not chosen >> g & 1:
                    chosen |= 1 << g
                    count += 1
                    got += 1

    take(near, 1)  # one GPU per group first
    take(near, None)  # then fill from the same groups
    take(far, None)  # then the other sockets
    return chosen


def choose(topo: Topology, free_cores: int, free_gpus: int, ngpus: int, cpus: int,
           tasks: tuple[int, int, int] | None) -> tuple[int, int] | None:
    """(cores, GPUs) for a job on the node: ``cpus`` CPUs, ``ngpus`` GPUs per node, ``tasks`` =
    (min tasks, max tasks or NO_MAX, CPUs per task) for a per-node GPU request (None: no GPU
    steering, only the cores). None when the node's free cores do not allow it."""
    if tasks is None or not ngpus:
        cpt = tasks[2] if tasks else 1
        cores = pick_cores(topo, free_cores, cpus, cpt)
        return None if cores is None else (cores, 0)
    min_t, max_t, cpt = tasks
    for first_pass in (True, False):
        core_map = filter_cores(topo, free_cores, free_gpus, ngpus, min_t, max_t, cpt, first_pass)
        if core_map is None:
            continue
        cores = pick_cores(topo, core_map, cpus, cpt)
        if cores is None:
            continue
        return cores, pick_gpus(topo, cores, free_gpus, ngpus)
    return None
