"""The differential replay in lockstep: every decision of gpupool's Slurm policy taken from the
state real Slurm was in, so one disagreement does not fork the rest of the run.

Why: in the open replay (``diff_slurm.replay``) gpupool runs on its own after the submissions.
The first start that differs (a fair-share near-tie, a job end seen by one backfill cycle more
on one side) changes the queue both sides see afterwards, so every later job can differ and the
per-seed figures measure "time until the first divergence" rather than how often the policy
decides as slurmctld does. Here the replay follows real Slurm's history instead:

* at every instant the engine asks ``SlurmPolicy.decide`` as usual and notes, for each job, the
  first start it *proposes* (time and GPUs): that proposal is what is compared;
* a proposal is carried out only when it is real Slurm's decision: the job started there
  within ``tolerance`` seconds (one scheduler interval) and on the same GPUs of the same nodes;
  any other proposal is withdrawn (``SlurmPolicy.retract_start``), the job stays pending;
* a job real Slurm started that gpupool has not started ``tolerance`` seconds later is started
  on real Slurm's GPUs (``SlurmPolicy.adopt_start``);
* every start real Slurm made, adopted or proposed alike, is counted by the policy from real
  Slurm's start_time (``decided``: jobcomp's whole second, when the deciding pass selected
  the nodes, up to a second before the logged start): end_time and fair-share usage then
  accrue as they did there; ``ReplayExecutor`` ends the job when it ended there;
* a start real Slurm made holds the CPUs and memory per node its output shows (``alloc``):
  memory even beyond a node's, where real Slurm over-allocated it (the engine lets those
  starts alone do so: ``NodeTable.memory_overcommit``).

So a disagreement is one decision: what gpupool would have done next from real Slurm's state.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass, replace

from gpupool.engine.decisions import Start, WakeAt
from gpupool.policy.slurm.select import task_node_memory, exclusive_memory, memory_per_cpu_of
from gpupool.policy.slurm.split_tasks import even


@dataclass(slots=True)
class Proposal:
    """gpupool's first proposed start of a job: when and where (node index, GPU mask) pairs."""

    time: float
    gpus: tuple[tuple[int, int], ...]


def _gpus_of(placement) -> tuple[tuple[int, int], ...]:
    """(node, GPU mask) per node, merged and sorted: what the comparison looks at."""
    per: dict[int, int] = {}
    for node, mask, _cpu, _mem in placement:
        per[node] = per.get(node, 0) | mask
    return tuple(sorted(per.items()))


class LockstepPolicy:
    """Wraps a ``SlurmPolicy``: asks it, records its proposals, carries out real Slurm's starts.

    ``real`` maps a job id to (real start, real GPUs as (node index, GPU mask) pairs, or None
    when they are unknown), times run-relative; ``decided`` to real Slurm's start_time for it;
    ``alloc`` to the (CPUs, MB) it held on each node (node index), read inside the job.
    ``tolerance``: how far from real Slurm's start a proposal still counts as the
    same decision (the report's scheduler interval).
    """

    def resolve_request(self, wl, **how):
        """The inner policy's submit-time view of a request (slurm.conf's job defaults)."""
        return self.inner.resolve_request(wl, **how)

    def __init__(self, inner, real: dict[int, tuple[float, tuple[tuple[int, int], ...] | None]],
                 tolerance: float = 1.0, decided: dict[int, float] | None = None,
                 alloc: dict[int, dict[int, tuple[int, int]]] | None = None) -> None:
        self.inner = inner
        self.alloc = alloc or {}
        self.name = inner.name
        self.tick_interval = inner.tick_interval
        self.over_time_limit = inner.over_time_limit
        per_job = getattr(inner, "over_time_limit_of", None)
        if per_job is not None:  # the engine's executor asks the wrapper
            self.over_time_limit_of = per_job
        self.time_limit_check_interval = getattr(inner, "time_limit_check_interval", 0.0)
        self.real = real
        self.tolerance = tolerance
        #: job id -> real Slurm's start_time for it (default: its logged start)
        self.decided = decided or {}
        self.proposals: dict[int, Proposal] = {}
        #: jobs carried out as gpupool proposed them / started from real Slurm's decision
        self.agreed: set[int] = set()
        self.adopted: set[int] = set()
        #: job id -> what carrying out real Slurm's start changed (``_real_placement``)
        self.notes: dict[int, list[str]] = {}
        # (deadline, job id): when a job real Slurm started must be started here at the latest
        self._due = sorted((start + tolerance, jid) for jid, (start, _g) in real.items())

    def decide(self, snap) -> list:
        pol = self.inner
        now = snap.now
        out = []
        started: set[int] = set()
        # node -> [CPUs, MB, GPU mask] this call's starts take: the agreed ones as gpupool placed them
        # first (retracted ones never count), then what carrying out real Slurm's amounts adds,
        # so that no start here takes a node's CPUs or GPUs twice
        taken: dict[int, list[int]] = {}
        kept = []
        for d in pol.decide(snap):
            if type(d) is Start:
                jid = d.job_id
                gpus = _gpus_of(d.placement)
                if jid not in self.proposals:
                    self.proposals[jid] = Proposal(now, gpus)
                real = self.real.get(jid)
                if real is None or abs(now - real[0]) > self.tolerance or real[1] not in (None, gpus):
                    pol.retract_start(jid)
                    continue
                _take(taken, d, d.placement)
            kept.append(d)
        for d in kept:
            if type(d) is not Start:
                out.append(d)
                continue
            jid = d.job_id
            started.add(jid)
            self.agreed.add(jid)
            alloc = self.alloc.get(jid)
            job = snap.pending.get(jid)
            if alloc and self.real[jid][1] is not None and job is not None and _amounts(d.placement) != alloc:
                # the same decision, but real Slurm's CPUs or memory per node differ (a split
                # job's tasks): carried out as decided (partition, limit, via) with real Slurm's
                # amounts, so later decisions see its state and usage bills them, where what
                # they add to gpupool's own amounts is free
                placement, _, _ = self._real_placement(snap, job)
                if not job.wl.pod_sets[0].exclusive and _amounts(placement) == alloc:
                    if _fits_more(snap, taken, d, d.placement, placement):
                        _take(taken, d, d.placement, -1)
                        _take(taken, d, placement)
                        d = replace(d, placement=placement)
                        pol.track_start(job, placement, now)
                    else:
                        self._note(jid, ["real Slurm's CPUs and memory per node are more than the nodes "
                                         "have free here: carried out with gpupool's own"])
            out.append(d)
            if jid in self.decided:  # real Slurm's start_time, which end_time counts from
                pol.set_reported_start(jid, self.decided[jid])
        due = self._due
        pending = snap.pending
        retry = []
        while due and due[0][0] <= now:
            _deadline, jid = heapq.heappop(due)
            job = pending.get(jid)
            if job is None or jid in started or self.real[jid][1] is None:
                # already started (by an agreed proposal), or real Slurm's GPUs are unknown
                # (the job's output was lost): gpupool's own start stands
                continue
            d = self._adopt(snap, job, taken)
            if d is None:
                retry.append((now + 1.0, jid))  # it does not fit here yet: tried again (noted)
                continue
            _take(taken, d, d.placement)
            out.append(d)
            self.adopted.add(jid)
        for item in retry:
            heapq.heappush(due, item)
        if due:
            out.append(WakeAt(due[0][0]))
        return out

    def _adopt(self, snap, job, taken: dict[int, list[int]]) -> Start | None:
        """Real Slurm's start of ``job`` (``_real_placement``), counted from its start_time,
        with no more CPUs or memory on a node than it has free (less ``taken``); None where even
        its pods' least CPUs, or its GPUs, are not free (gpupool's state has drifted from real
        Slurm's: it is tried again a second later, noted once)."""
        real_start = self.real[job.id][0]
        placement, notes, fits = self._real_placement(snap, job, taken)
        if not fits:
            if job.id not in self.notes:
                self._note(job.id, notes + [f"not carried out at {snap.now:.1f} s: what it needs is not free "
                                            f"here; tried again each second"])
            return None
        self._note(job.id, notes)
        snap.nodes.memory_overcommit.add(job.id)  # real Slurm's memory, as it was
        return self.inner.adopt_start(job, placement, self.decided.get(job.id, real_start))

    def _note(self, jid: int, notes: list[str]) -> None:
        if notes:
            self.notes.setdefault(jid, []).extend(notes)

    def _real_placement(self, snap, job, taken: dict[int, list[int]] | None = None) -> tuple[tuple, list[str], bool]:
        """Real Slurm's placement of ``job``: its nodes and GPUs, with the CPUs and memory it held
        on each node where its output shows them (``alloc``), else as gpupool's own placement
        would take them (CPUs rounded up to whole cores). A node holds one pod of a job with a
        pod per node, else as many task pods as its GPUs make.

        With ``taken`` (this instant's other starts), no more CPUs than a node has free are
        taken: those beyond each pod's least are cut pod by pod, noted, and the flag is False
        where even the pods' least CPUs, or real Slurm's GPUs, are not free (the cut is noted for
        the try that is carried out). Memory is real Slurm's even beyond what is free: a real
        22.05.8 gave a split ``--gpus-per-task`` job 240000 MB of DefMemPerGPU memory on a node
        with 120000 MB free (rich seed 7, job 27; finding 59) and the node stayed over-allocated
        until jobs ended. Such a start may also
        mean gpupool's state has drifted; the note (on the try carried out) says both. The
        engine lets these starts alone over-allocate (``NodeTable.memory_overcommit``)."""
        notes: list[str] = []
        cut_notes: list[str] = []  # what was cut or over-allocated: kept for the try carried out
        fits = True
        gpus = self.real[job.id][1]
        alloc = self.alloc.get(job.id, {})
        ps = job.wl.pod_sets[0]
        task_mem = task_node_memory(ps)  # --mem over task pods: each node holds all of it
        nodes = snap.nodes
        walk_tasks: dict[int, int] = {}  # a walked job's tasks per node (``split_tasks.deal_tasks``)
        if ps.split and ps.walked and not alloc:
            # real Slurm's CPUs per node unknown: as its nodes dealt them when idle, in index
            # order, each as many as it holds while every later node keeps one (on idle nodes
            # the same as ``split_tasks.deal_tasks``' round-robin up to each node's share)
            left = ps.split_tasks
            order = sorted(gpus)
            for k, (node, _mask) in enumerate(order):
                walk_tasks[node] = max(1, min(nodes.cpu_total[node] // max(1, ps.cpu_m), left - (len(order) - k - 1)))
                left -= walk_tasks[node]
        elif ps.split and not (ps.split_gpus and ps.gpus) and not alloc:
            ps = even(ps, len(gpus))  # real Slurm's CPUs per node unknown: the even share
        per_task_mem = ps.split and ps.memory_per == "task"
        # CPUs that jobs sharing them hold (OverSubscribe) are not in the free count but the
        # engine keeps them from a start that does not share; one that shares may use its own
        # group's (``NodeTable.allocate_shared``)
        info = self.inner.adopt_partition(job, {node for node, _mask in gpus})
        plain = info is None or self.inner.cpu_share_of(job.wl, info.name) <= 1
        placement = []
        for node, mask in gpus:
            if ps.exclusive:  # whole node, as select's pod_fits takes it
                placement.append((node, mask, nodes.cpu_total[node], exclusive_memory(nodes, node, ps)))
                continue
            if ps.split and ps.split_gpus and ps.gpus:  # GPUs per task: the node's tasks from its GPUs
                tasks = mask.bit_count() // ps.gpus
                pods = [(mask, tasks * ps.cpu_m, tasks * ps.memory_mib if per_task_mem else ps.memory_mib)]
            elif ps.spread:  # memory and CPUs per GPU follow the GPUs (a walked job's, its tasks)
                n = max(1, mask.bit_count())
                k = walk_tasks.get(node, 1)
                pods = [(mask, ps.cpu_m * n if ps.cpus_per_task is None else ps.cpu_m * k,
                         ps.memory_mib * n if ps.memory_per == "gpu" else ps.memory_mib * k if per_task_mem
                         else ps.memory_mib)]
            elif walk_tasks:  # a walked job's tasks beside its GPUs per node
                k = walk_tasks.get(node, 1)
                pods = [(mask, ps.cpu_m * k, ps.memory_mib * k if per_task_mem else ps.memory_mib)]
            elif ps.one_per_node or ps.split or ps.count == 1 or not ps.gpus:
                pods = [(mask, ps.cpu_m, ps.memory_mib)]
            else:  # task pods sharing the node: one per ps.gpus of its GPUs
                pods = []
                left = mask
                for _ in range(max(1, mask.bit_count() // ps.gpus)):
                    bits = _lowest(left, ps.gpus)
                    left &= ~bits
                    pods.append((bits, ps.cpu_m, ps.memory_mib))
                if left:
                    pods[-1] = (pods[-1][0] | left, *pods[-1][1:])
            least = [p[1] for p in pods]  # the CPUs each pod's tasks need
            if ps.spread and ps.cpus_per_task is None:
                # CPUs per GPU unknown here: they go out from the job's total, not with each
                # node's GPUs (``spread_gpus._cpus_dealt``), so no more than the node holds,
                # one GPU's worth at least
                pods = [(m, min(c, nodes.cpu_total[node]), mem_) for m, c, mem_ in pods]
                least = [min(ps.cpu_m, nodes.cpu_total[node])]
            cpu = sum(p[1] for p in pods)
            mem = sum(p[2] for p in pods)
            real = alloc.get(node)
            if real is not None:
                cpu, mem = real[0] * 1000, real[1]
            else:  # gpupool's own amounts: CPUs in whole cores, with their memory per CPU
                extra = -cpu % nodes.cpu_step[node]
                cpu += extra
                mem = task_mem or mem + extra // 1000 * memory_per_cpu_of(ps)
                if ps.memory_all:  # the node's whole memory where the partition's nodes differ
                    mem = nodes.mem_total[node]
            shares = list(zip([p[0] for p in pods], _share(cpu, [p[1] for p in pods]),
                              _share(mem, [p[2] for p in pods])))
            if taken is not None:
                used = taken.get(node, (0, 0, 0))
                if mask & ~(nodes.free_mask[node] & ~used[2]):
                    fits = False  # GPUs still held here (gpupool's state has drifted)
                    notes.append(f"real Slurm's GPUs on {nodes.names[node]} are not free here")
                free_cpu = nodes.free_cpu[node] - (nodes.shared_floor(node) if plain else 0) - used[0]
                free_mem = nodes.free_mem[node] - used[1]
                need_cpu = sum(c for _m, c, _b in shares)
                need_mem = sum(b for _m, _c, b in shares)
                if need_mem > free_mem:
                    cut_notes.append(f"real Slurm held {need_mem} MB on {nodes.names[node]} with {free_mem} MB "
                                     f"free here: {OVER}")
                if need_cpu > free_cpu:
                    cut_notes.append(f"real Slurm held {need_cpu // 1000} CPUs on {nodes.names[node]} with "
                                     f"{free_cpu // 1000} free here: carried out with no more than each pod needs")
                    over = need_cpu - max(free_cpu, 0)
                    for k, (m, c, b) in enumerate(shares):
                        cut = min(over, max(0, c - least[k]))
                        shares[k] = (m, c - cut, b)
                        over -= cut
                    fits = fits and over <= 0
            for m, c, b in shares:
                placement.append((node, m, c, b))
        return tuple(placement), notes + cut_notes if fits else notes, fits


#: how a start over a node's memory is carried out; the replay cannot tell the two causes apart
OVER = "carried out so (real Slurm over-allocated the node, finding 59, or gpupool's state has drifted)"


def _share(total: int, own: list[int]) -> list[int]:
    """``total`` (real Slurm's CPUs or MB on a node) shared out over pods that would take ``own``
    each: what the later pods do not take goes to the first; where they would take more than
    there is, the pods take their own in order while it lasts. The shares sum to ``total``."""
    rest = sum(own[1:])
    if total >= rest:
        return [total - rest, *own[1:]]
    out = []
    for amount in own:
        out.append(min(amount, total))
        total -= out[-1]
    return out


def _take(taken: dict[int, list[int]], d: Start, placement, sign: int = 1) -> None:
    """Add (``sign`` -1: take back) a start's CPUs, memory and GPUs per node to ``taken``; CPUs
    only for a start that takes them from the free ones (not suspended, not sharing them)."""
    plain = not d.suspended and d.cpu_share <= 1
    for node, mask, cpu, mem in placement:
        row = taken.setdefault(node, [0, 0, 0])
        if plain:
            row[0] += sign * cpu
        row[1] += sign * mem
        row[2] = row[2] | mask if sign > 0 else row[2] & ~mask


def _fits_more(snap, taken: dict[int, list[int]], d: Start, own, other) -> bool:
    """Whether placement ``other`` instead of ``own`` (of start ``d``) fits what the nodes have
    free less ``taken`` (which counts ``own``). Memory too: gpupool proposed this start within
    its own amounts, so real Slurm's being more than is free here means gpupool's state has
    drifted (finding 59's over-allocation is a start gpupool never proposes)."""
    plain = not d.suspended and d.cpu_share <= 1
    nodes = snap.nodes
    mine, theirs = _amounts(own), _amounts(other)
    for node, (cpu, mem) in theirs.items():
        have_cpu, have_mem = mine.get(node, (0, 0))
        used = taken.get(node, (0, 0, 0))
        if mem - have_mem > nodes.free_mem[node] - used[1]:
            return False
        if plain and (cpu - have_cpu) * 1000 > nodes.free_cpu[node] - nodes.shared_floor(node) - used[0]:
            return False
    return True


def _amounts(placement) -> dict[int, tuple[int, int]]:
    """(CPUs, MB) per node of a placement, as ``alloc`` gives real Slurm's."""
    per: dict[int, list[int]] = {}
    for node, _mask, cpu, mem in placement:
        row = per.setdefault(node, [0, 0])
        row[0] += cpu
        row[1] += mem
    return {node: (cpu // 1000, mem) for node, (cpu, mem) in per.items()}


def _lowest(mask: int, n: int) -> int:
    """The ``n`` lowest set bits of ``mask``."""
    out = 0
    while n and mask:
        low = mask & -mask
        out |= low
        mask ^= low
        n -= 1
    return out


def real_gpus(rec_gpus: dict[str, list[int]], node_index: dict[str, int]) -> tuple[tuple[int, int], ...]:
    """Real Slurm's ``{node: [GPU index]}`` as sorted (node index, GPU mask) pairs."""
    out = []
    for name, idx in rec_gpus.items():
        mask = 0
        for i in idx:
            mask |= 1 << i
        out.append((node_index[name], mask))
    return tuple(sorted(out))
