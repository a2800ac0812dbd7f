"""``--policy bridge``: slurm-bridge, Slurm's scheduler deciding for Kubernetes pods.

slurm-bridge (spec fleet_and_bridge §2.1) is a secondary kube-scheduler that turns each pod
group into a Slurm *external job* and binds the pods where slurmctld allocates it; native
``sbatch`` jobs share the same slurmctld and, on hybrid nodes, the same hosts. This policy
composes the unmodified Slurm policy (``gpupool.policy.slurm``): every ``decide`` builds the
Slurm view of the pool — native jobs as they are, Kubernetes workloads as the external jobs
the bridge would submit (:mod:`.mapping`) — asks Slurm, and maps its answer back:

* a group job (PodGroup, LeaderWorkerSet group) starts all its pods at once;
* per-pod jobs (Pod, Job, JobSet, Deployment replicas) start pod by pod: a multi-pod gang
  waits ``PLACING`` while its pods trickle in (the partial-gang cost of per-pod jobs);
* an exclusive (default) external job holds its whole node: the pod gets the GPUs it asked
  for and the node's CPUs, and the Slurm view shows the node full, so nothing else lands on
  it until the pod ends;
* a node never runs native Slurm jobs and bridge pods at the same time (Slurm MCS
  ``ondemand,ondemandselect`` in the bridge's hybrid mode): when Slurm picks a node that runs
  the other kind of work, the job is placed again (Slurm's own select) on the partition's
  nodes without it, or waits.
"""
from __future__ import annotations

from gpupool.engine.decisions import Pending, Preempt, Reject, Start
from gpupool.engine.job import PENDING, PLACING, RUNNING, Job
from gpupool.engine.nodes import lowest_bits
from gpupool.engine.policy_api import check_options, register
from gpupool.engine.snapshot import Snapshot
from gpupool.model.pool import Pool
from gpupool.policy.bridge.mapping import (
    KUBERNETES_RULES,
    BridgeJob,
    is_kubernetes,
    translate,
)
from gpupool.policy.bridge.view import JobsView, NodeView, sub_snapshot
from gpupool.policy.slurm.policy import SlurmPolicy
from gpupool.policy.slurm.priority import basic_priority
from gpupool.policy.slurm.select import Free, place

_OPTIONS = {"record", "partition", "exclusive", "kubernetes"}
#: Pending reason of a job whose start would mix workload kinds on a hybrid node.
MCS_REASON = "MCS: node in use by the other workload kind (hybrid node)"
NATIVE = "slurm"
BRIDGE = "bridge"


def _bool(value, name: str) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "yes", "1", "on"):
        return True
    if text in ("false", "no", "0", "off"):
        return False
    raise ValueError(f"policy bridge: option {name} expects true or false, got {value!r}")


class BridgePolicy:
    """Slurm's decisions for native jobs and for Kubernetes pods (as external jobs)."""

    name = "bridge"

    def __init__(self, pool: Pool, options: dict) -> None:
        check_options("bridge", options, _OPTIONS)
        self.pool = pool
        self.slurm = SlurmPolicy(pool, {"record": options.get("record", False)})
        self.tick_interval = self.slurm.tick_interval
        self.over_time_limit = self.slurm.over_time_limit
        self.over_time_limit_of = self.slurm.over_time_limit_of  # a partition's OverTimeLimit
        self.time_limit_check_interval = self.slurm.time_limit_check_interval
        self.exclusive = _bool(options.get("exclusive", True), "exclusive")
        self.rule = str(options.get("kubernetes", "auto"))
        if self.rule not in KUBERNETES_RULES:
            raise ValueError(f"policy bridge: option kubernetes expects one of {', '.join(KUBERNETES_RULES)}, "
                             f"got {self.rule!r}")
        part = options.get("partition")
        if part is not None and part not in self.slurm.cfg.partitions:
            raise ValueError(f"policy bridge: option partition names {part!r}; slurm.conf defines "
                             f"{', '.join(sorted(self.slurm.cfg.partitions))}")
        default = self.slurm.cfg.default_partition()
        self.partition = part or (default.name if default is not None else None)
        self._view: NodeView | None = None
        self._src = None
        self._bjobs: dict[int, tuple[object, list[BridgeJob] | None]] = {}
        self._vjob: dict[int, Job] = {}
        self._vreal: dict[int, BridgeJob] = {}
        self._pod_start: dict[tuple[int, int], float] = {}
        self._real: dict[int, Job] = {}

    # ------------------------------------------------------------------ translation
    def bridge_jobs(self, job: Job) -> list[BridgeJob] | None:
        """The external jobs of ``job`` (None: a native Slurm job), memoised per workload."""
        found = self._bjobs.get(job.id)
        if found is not None and found[0] is job.wl:
            return found[1]
        out = None
        if is_kubernetes(job.wl, self.rule):
            fifo = None if self.slurm.s.multifactor else basic_priority(job.id, job.wl.nice)
            out = translate(job.wl, default_partition=self.partition, exclusive_default=self.exclusive,
                            fifo_priority=fifo)
            for b in out:
                self._vreal[b.vid] = b
        self._bjobs[job.id] = (job.wl, out)
        return out

    def is_bridge(self, job: Job) -> bool:
        return self.bridge_jobs(job) is not None

    def _vrecord(self, b: BridgeJob) -> Job:
        v = self._vjob.get(b.vid)
        if v is None or v.wl is not b.wl:
            v = self._vjob[b.vid] = Job(b.wl)
        return v

    def _mirror(self, v: Job, b: BridgeJob, real: Job, placed: bool) -> None:
        """Copy the real job's state onto the external job's record."""
        v.submit = real.submit
        v.eligible = real.eligible
        v.requeues = real.requeues
        if real.final_state is not None:
            v.state = v.final_state = real.final_state
            v.end = real.end
            return
        v.final_state = None
        if not placed:
            v.state = PENDING
            v.start = None
            v.placement = ()
            v.reason = real.reason
            return
        start = self._pod_start.get((real.id, b.first))
        if start is None or (real.admitted_at is not None and start < real.admitted_at):
            start = real.admitted_at if real.admitted_at is not None else real.start
        if v.state != RUNNING or v.start != start or not v.placement:
            nodes = self._view
            pods = real.placement[b.first:b.first + b.count]
            if b.exclusive:
                pods = tuple((n, nodes.full_mask[n], c, m) for n, _mask, c, m in pods)
            v.placement = pods
        v.state = RUNNING
        v.start = start
        if real.grace_until is not None or v.grace_until is not None:
            v.grace_until = real.grace_until

    def _lazy(self, v: Job) -> None:
        """Bring a record looked up by id (dependencies, usage) up to date with its real job."""
        b = self._vreal.get(v.id)
        real = self._real.get(b.real_id) if b is not None else None
        if real is None:
            return
        if real.final_state is not None or real.state == PENDING:
            self._mirror(v, b, real, False)

    # ------------------------------------------------------------------ the decision
    def resolve_request(self, wl, *, recovered: bool = False):
        """Native sbatch jobs get slurm.conf's job defaults and submit checks as under
        ``--policy slurm`` (``SlurmPolicy.resolve_request``). A Kubernetes workload is no sbatch
        submission: its pods become the bridge's own external jobs (other ids), so it passes
        unchanged."""
        if is_kubernetes(wl, self.rule):
            return wl
        return self.slurm.resolve_request(wl, recovered=recovered)

    def decide(self, snap: Snapshot) -> list:
        view = self._view
        if view is None or self._src is not snap.nodes:
            view = self._view = NodeView(snap.pool)
            self._src = snap.nodes
        view.refresh(snap.nodes)
        self._real = snap.jobs
        kind: dict[int, str] = {}  # node -> the workload kind running there now
        pending: dict[int, Job] = {}
        active: dict[int, Job] = {}
        for job in snap.pending.values():
            bjobs = self.bridge_jobs(job)
            if bjobs is None:
                pending[job.id] = job
                continue
            for b in bjobs:
                v = self._vrecord(b)
                self._mirror(v, b, job, False)
                pending[b.vid] = v
        for job in snap.active.values():
            bjobs = self.bridge_jobs(job)
            if bjobs is None:
                active[job.id] = job
                for p in job.placement:
                    kind[p[0]] = NATIVE
                continue
            placed = len(job.placement)
            for b in bjobs:
                v = self._vrecord(b)
                if b.first + b.count <= placed:
                    self._mirror(v, b, job, True)
                    active[b.vid] = v
                    for p in v.placement:
                        kind[p[0]] = BRIDGE
                        if b.exclusive:
                            view.hold_whole(p[0])
                elif job.state == PLACING:
                    self._mirror(v, b, job, False)
                    pending[b.vid] = v
        sub = sub_snapshot(snap, view, pending, active, JobsView(self._vjob, snap.jobs, self._lazy))
        return self._map_back(self.slurm.decide(sub), snap, kind)

    def _map_back(self, decisions: list, snap: Snapshot, kind: dict[int, str]) -> list:
        out: list = []
        seen: set[tuple[str, int]] = set()
        pods: dict[int, list[tuple[int, tuple, Start]]] = {}
        vreal = self._vreal
        free = Free(self._view)  # what Slurm saw free, minus the starts accepted so far
        for d in decisions:
            cls = type(d)
            if cls is Start:
                b = vreal.get(d.job_id)
                tag = NATIVE if b is None else BRIDGE
                if not _fits(free, d.placement):
                    continue  # an earlier start moved onto these resources: next pass
                if any(kind.get(p[0], tag) != tag for p in d.placement):
                    moved = self._replace(d, b, tag, kind, free)
                    if moved is None:
                        real_id = d.job_id if b is None else b.real_id
                        if ("P", real_id) not in seen:
                            seen.add(("P", real_id))
                            job = snap.jobs[real_id]
                            if job.state == PENDING and job.reason != MCS_REASON:
                                out.append(Pending(real_id, MCS_REASON))
                        continue
                    d = moved
                free.take(d.placement)
                for p in d.placement:
                    kind[p[0]] = tag
                if b is None:
                    out.append(d)
                    continue
                real = snap.jobs[b.real_id]
                placement = self._real_pods(real, b, d.placement)
                if b.count == real.pods_total and b.first == 0:
                    out.append(Start(b.real_id, placement, partial=False, via=d.via, time_limit=d.time_limit,
                                     partition=d.partition))
                    self._pod_start[(b.real_id, 0)] = snap.now
                else:
                    pods.setdefault(b.real_id, []).append((b.first, placement, d))
            elif cls is Preempt or cls is Reject or cls is Pending:
                b = vreal.get(d.job_id)
                if b is None:
                    out.append(d)
                    continue
                key = (cls.__name__, b.real_id)
                if key in seen:
                    continue
                seen.add(key)
                real = snap.jobs[b.real_id]
                if cls is Preempt:
                    if real.state in (RUNNING, PLACING) or real.reserved_since is not None:
                        out.append(Preempt(b.real_id, d.mode, d.reason, d.by_job, d.requeue_delay, d.grace))
                elif real.state == PENDING:
                    out.append(cls(b.real_id, d.reason))
            else:  # WakeAt: Slurm's timers are the bridge's
                out.append(d)
        for real_id, started in pods.items():
            out.append(self._pod_starts(snap, snap.jobs[real_id], started))
        return [d for d in out if d is not None]

    def _replace(self, d: Start, b: BridgeJob | None, tag: str, kind: dict[int, str], free: Free) -> Start | None:
        """MCS ``ondemandselect``: Slurm chose a node running the other kind of work; select
        again for this job among the partition's nodes that run none of it (or the same kind)."""
        info = self.slurm.parts.get(d.partition or "")
        if info is None:
            return None
        usable = {i for i in info.nodes if kind.get(i, tag) == tag}
        wl = b.wl if b is not None else self._real[d.job_id].wl
        placement = place(wl, info.nodes, free, usable)
        if placement is None:
            return None
        return Start(d.job_id, placement, partial=d.partial, via=d.via, time_limit=d.time_limit,
                     partition=d.partition)

    def _real_pods(self, real: Job, b: BridgeJob, placement: tuple) -> tuple:
        """Slurm's allocation as the pods' placements: an exclusive job's pod gets the GPUs it
        asked for (lowest indices of the node) and every CPU Slurm gave the job."""
        if not b.exclusive:
            return tuple(placement)
        shapes = _pod_shapes(real)
        out = []
        for i, (node, mask, cpu, mem) in enumerate(placement):
            ps = shapes[b.first + i]
            out.append((node, lowest_bits(mask, ps.gpus) if ps.gpus else 0, cpu, mem))
        return tuple(out)

    def _pod_starts(self, snap: Snapshot, real: Job, started: list) -> Start | None:
        """Per-pod external jobs that Slurm started: the pods fill the workload's next unplaced
        slots in order (pods of one pod set are interchangeable)."""
        started.sort(key=lambda s: s[0])
        shapes = _pod_shapes(real)
        nxt = len(real.placement)
        pods = []
        first = started[0][2]
        for k, placement, _d in started:
            if nxt >= len(shapes) or shapes[nxt] != shapes[k]:
                break  # a later pod set's pod ahead of this one's: it waits for its turn
            self._pod_start[(real.id, nxt)] = snap.now
            pods.extend(placement)
            nxt += 1
        if not pods:
            return None
        return Start(real.id, tuple(pods), partial=True, via=first.via, time_limit=first.time_limit,
                     partition=first.partition)


def _fits(free: Free, placement) -> bool:
    for node, mask, cpu, mem in placement:
        if mask & ~free.mask[node] or cpu > free.cpu[node] or mem > free.mem[node]:
            return False
    return True


def _pod_shapes(real: Job) -> list:
    return [ps for ps in real.wl.pod_sets for _ in range(ps.count)]


@register("bridge", "slurm-bridge: Slurm decides for Kubernetes pods (external jobs, whole nodes) beside sbatch jobs")
def _bridge(pool: Pool, options: dict) -> BridgePolicy:
    return BridgePolicy(pool, options)
