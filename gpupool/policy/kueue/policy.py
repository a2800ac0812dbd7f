"""``--policy kueue`` and ``kueue-gang``: Kueue admission, then kube-scheduler placement.

Each ``decide`` rebuilds Kueue's state from the snapshot (DESIGN rule 1): the workloads that
hold quota are the engine's active jobs, and the flavor each one uses is read back from the
nodes its pods run on. Pending jobs are queued per ClusterQueue; Kueue cycles run back to back
at this instant until one changes nothing (heads parked as inadmissible make room for the next
head, as the next cycle would). Admitted workloads are handed to the kube-scheduler model:

* ``kueue``: pods bound one by one as they fit (``Start(partial=True)``); a multi-pod job can
  hold GPUs it cannot use until the rest of its pods are placed ("partial gang" waste);
* ``kueue-gang``: GenericWorkload gate (Kubernetes 1.37 beta): the whole group in one pass, or
  nothing (no capacity held by a group that cannot be placed).

A workload Kueue admits whose pods are not (all) bound yet holds its quota reservation as an
engine ``Reserve`` (the flavor assignment travels in ``reserve_info``, so the next pass reads it
back from the snapshot). waitForPodsReady runs from the admission (``job.reserved_since`` /
``job.admitted_at``), evicts after ``timeout`` with Kueue's requeue backoff counted from the
job's ``PodsReadyTimeout`` evictions and deactivates it after ``backoffLimitCount`` requeues;
``blockAdmission`` holds Fit admissions while any admitted workload is not ready. A workload
whose pods were all bound and that the engine sends back to pending without Kueue evicting it
(a node failed under it, or it was requeued from outside: a pod failure) stays admitted, as in
Kueue: its quota is reserved again at once, replacement pods bind when they fit, and it is
evicted ``recoveryTimeout`` after the failure (default ``timeout``; ``0s``: never) with the same
backoff. There is no periodic tick: the policy asks for ``WakeAt`` timers (PodsReady deadlines,
requeue backoffs).

Topology-Aware Scheduling (§8, ``tas*.py``): with a ResourceFlavor naming a Topology, each pass
builds the TAS capacity from the nodes' free resources (minus admitted TAS pods not bound yet);
admission places every TAS pod set on leaf domains, and kube-scheduler binds each pod with its
leaf domain's label values added to the node selector.
See docs/policies/kueue.md for what is approximated.
"""
from __future__ import annotations

import dataclasses
import re

from gpupool.engine.decisions import (
    CANCEL,
    REQUEUE,
    Pending,
    Preempt,
    Reject,
    Reserve,
    Start,
    WakeAt,
)
from gpupool.engine.job import PLACING, RUNNING
from gpupool.engine.policy_api import check_options, register
from gpupool.engine.snapshot import CHANGED_ALL, CHANGED_NODES, CHANGED_REQUEUED, Snapshot
from gpupool.errors import PolicyNotApplicable, PolicyOptionError
from gpupool.model.kueue import KueueConfig
from gpupool.model.pool import Pool
from gpupool.model.workload import GANG_MIN
from gpupool.policy.kueue.afs import AfsConfig, LocalQueueUsage, base_units
from gpupool.policy.kueue.backlog import Backlog
from gpupool.policy.kueue.cycle import (
    ADMITTED,
    INADMISSIBLE,
    NO_CANDIDATES,
    NOFIT_R,
    run_cycle,
    shape_key,
)
from gpupool.policy.kueue.flavors import flavor_matches
from gpupool.policy.kueue.kubesched import KubeScheduler
from gpupool.policy.kueue.records import Admitted, KPodSet, KWorkload, PodSetAssignment
from gpupool.policy.kueue.state import KueueState
from gpupool.policy.kueue.tas import TopologyRequest, request_from_pod_set
from gpupool.policy.kueue.tas_capacity import from_node_table, static_nodes, tas_flavor_names
from gpupool.policy.placement import Scratch

NO_QUEUE = "no LocalQueue"
_OPTIONS = {"max_cycles", "scoring", "gpu_weight", "fair_sharing"}
#: Eviction reason of waitForPodsReady (the key counted in ``job.evictions`` for the backoff).
PODS_READY_TIMEOUT = "PodsReadyTimeout"
DEACTIVATED = "RequeuingLimitExceeded: deactivated after PodsReady timeouts"
#: Pending reason of a reserved-only workload evicted by PodsReadyTimeout, with its requeueAt
#: (Kueue's ``status.requeueState.requeueAt``; the engine sets no requeue delay for a job that
#: holds only a reservation, so the workload's status carries it, as in Kueue).
_BACKOFF = "Evicted: PodsReadyTimeout; requeued after backoff until t="
_RESERVED = "QuotaReserved in "
#: Pending reason of a job whose pods failed after it had been ready (§7 recoveryTimeout).
_RECOVERING = "Admitted; PodsReady=False after a pod failure: waiting for replacement pods (recoveryTimeout)"


def encode_reservation(adm: Admitted) -> str:
    """``Reserve.info``: the ClusterQueue and the flavor assignment (readable, and parsed back)."""
    parts = []
    for psa in adm.pod_sets:
        flavors = ",".join(f"{r}:{f}" for r, f in psa.flavors.items())
        parts.append(f"{psa.name}={psa.count} [{flavors}]")
    return f"{_RESERVED}{adm.cq}: " + "; ".join(parts)


_PART = re.compile(r"^(.*)=(\d+) \[(.*)\]$")


def decode_reservation(info: str) -> tuple[str, list[tuple[str, int, dict[str, str]]]] | None:
    """Inverse of :func:`encode_reservation`; None for a note it did not write."""
    if not info.startswith(_RESERVED):
        return None
    cq, _, rest = info[len(_RESERVED):].partition(": ")
    pod_sets = []
    for part in rest.split("; ") if rest else ():
        m = _PART.match(part)
        if m is None:
            return None
        flavors = dict(item.split(":", 1) for item in m.group(3).split(",")) if m.group(3) else {}
        pod_sets.append((m.group(1), int(m.group(2)), flavors))
    return cq, pod_sets


def topology_request(ps) -> TopologyRequest | None:
    """A workload pod set's Kueue topology annotations as a ``TopologyRequest`` (§8), slices
    and pod-set group included."""
    return request_from_pod_set(ps)


def backoff_until(reason: str) -> float | None:
    """requeueAt of a reserved-only workload evicted by PodsReadyTimeout (None: not backing off)."""
    if reason.startswith(_BACKOFF):
        return float(reason[len(_BACKOFF):])
    return None


def _duration(text, default: float) -> float:
    if text is None:
        return default
    if isinstance(text, (int, float)):
        return float(text)
    import re

    units = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1, "m": 60, "h": 3600}
    parts = re.findall(r"(\d+(?:\.\d+)?)(ns|us|ms|s|m|h)", str(text))
    return sum(float(n) * units[u] for n, u in parts) if parts else default


class PodsReadyConfig:
    """waitForPodsReady as Kueue reads it (spec §7)."""

    __slots__ = ("base", "block", "enabled", "limit", "max", "recovery", "timeout", "timestamp")

    def __init__(self, kueue: KueueConfig, gates: dict) -> None:
        cfg = kueue.configuration or {}
        wfpr = cfg.get("waitForPodsReady")
        v1beta1 = str(cfg.get("apiVersion", "")).endswith("v1beta1")
        if gates.get("DisableWaitForPodsReady"):
            self.enabled = False
        elif v1beta1:
            self.enabled = bool(isinstance(wfpr, dict) and wfpr.get("enable"))
        else:
            self.enabled = True
        wfpr = wfpr if isinstance(wfpr, dict) else {}
        self.timeout = _duration(wfpr.get("timeout"), 1800.0)
        #: recoveryTimeout: how long PodsReady may be false again after having been true (a pod
        #: failed) before the workload is evicted; defaults to ``timeout``; 0 disables it.
        self.recovery = _duration(wfpr.get("recoveryTimeout"), self.timeout)
        self.block = bool(wfpr.get("blockAdmission", v1beta1 and self.enabled))
        strategy = wfpr.get("requeuingStrategy") or {}
        self.limit = strategy.get("backoffLimitCount")
        self.base = float(strategy.get("backoffBaseSeconds", 60))
        self.max = float(strategy.get("backoffMaxSeconds", 3600))
        #: requeuingStrategy.timestamp: ``Eviction`` (default) orders a workload evicted by
        #: PodsReadyTimeout by its eviction time, ``Creation`` keeps its original place.
        self.timestamp = str(strategy.get("timestamp") or "Eviction")

    def backoff(self, n: int) -> float:
        """d(n) without the 1e-4 jitter (gpupool stays deterministic)."""
        return min(self.base * 2 ** (n - 1), self.max)


class KueuePolicy:
    over_time_limit = 0.0

    def __init__(self, pool: Pool, options: dict, *, gang: bool, name: str) -> None:
        check_options(name, options, _OPTIONS)
        self.name = name
        self.pool = pool
        self.gang = gang
        self.kueue = _with_fair_sharing(pool.kueue or KueueConfig(), options.get("fair_sharing", "pool"), name)
        #: No periodic tick: Kueue's cycles run on events, timers come as ``WakeAt``.
        self.tick_interval = None
        self.max_cycles = int(options.get("max_cycles", 1000))
        weights = {"cpu": 1, "memory": 1}
        if options.get("gpu_weight"):
            weights["nvidia.com/gpu"] = int(options["gpu_weight"])
        self.kube = KubeScheduler(pool, options.get("scoring", "LeastAllocated"), weights)
        probe = KueueState(self.kueue)
        #: The quota tree, built once and reused by every pass with its usage zeroed.
        self._tree = probe.tree
        self.pods_ready = PodsReadyConfig(self.kueue, probe.gates)
        #: job id -> time of its last PodsReadyTimeout eviction (queue order under ``Eviction``).
        self._evicted_at: dict[object, float] = {}
        self._reorder: list = []
        # Admission Fair Sharing (§6.5): on for the ClusterQueues that ask for it, when the
        # Configuration has the section and the gate is on.
        afs_cfg = AfsConfig.from_configuration(self.kueue.configuration) if probe.gates.get("AdmissionFairSharing") else None
        self._afs_usage = LocalQueueUsage(afs_cfg) if afs_cfg is not None else None
        self._afs_cqs = {name for name, cq in self.kueue.cluster_queues.items()
                         if cq.admission_mode == "UsageBasedAdmissionFairSharing"} if afs_cfg is not None else set()
        self._kwl: dict[int, tuple[object, KWorkload | None, str]] = {}
        #: job id -> (placement, kwl, state, admitted_at, start, its Admitted) of the last pass.
        self._adm_memo: dict[object, tuple] = {}
        self._flavor_memo: dict[tuple, str | None] = {}
        #: id of a shared ``KPodSet`` (``_kpod_sets``) -> its sorted node selector.
        self._selector_memo: dict[int, tuple] = {}
        self._decoded: dict[str, tuple | None] = {}
        self._backlog: Backlog | None = None
        self._root_of: dict[str, str] | None = None
        self._deferred: dict[int, object] = {}
        #: job id -> small int naming its scheduling shape (SchedulingEquivalenceHashing).
        self._shapes: dict[object, int] = {}
        self._shape_ids: dict[tuple, int] = {}
        #: (gang, workload pod sets) -> Kueue's pod sets (``_kpod_sets``).
        self._kpod_memo: dict[tuple, tuple[KPodSet, ...]] = {}
        #: (ClusterQueue, ids of the shared pod-set records) -> shape id (``_shape_of``).
        self._shape_by_pods: dict[tuple, int] = {}
        # Topology-Aware Scheduling (§8): on when the gate is and some flavor names a Topology.
        self._tas_levels: dict[str, tuple[str, ...]] = {
            name: tuple(self.kueue.topologies[self.kueue.flavors[name].topology_name].levels)
            for name in tas_flavor_names(self.kueue)} if probe.gate("TopologyAwareScheduling") else {}
        #: job id -> pods per leaf domain of each pod set, from its last admission (the
        #: assignment Kueue writes into ``status.admission``; kube-scheduler binds by it).
        self._tas_assigned: dict[object, list[dict | None]] = {}
        self._tas_static: dict | None = None  # per TAS flavor: its nodes and leaf domains
        #: job id -> (placement, pod-set topologies, uses not on the nodes) of its last pass.
        self._tas_attach_memo: dict[object, tuple] = {}
        #: waitForPodsReady recovery (§7): job id -> its admission, for jobs whose pods were all
        #: bound (PodsReady=true) when last seen; a pod failure sends such a job back to pending in
        #: the engine, while Kueue keeps it admitted and waits ``recoveryTimeout`` for its pods.
        self._ready: dict[object, Admitted] = {}
        #: job id -> when PodsReady became false again (the failure), while it recovers.
        self._recovering: dict[object, float] = {}

    # ------------------------------------------------------------------ workloads
    def kworkload(self, job) -> tuple[KWorkload | None, str]:
        """Kueue's view of a job (memo of a pure function of the workload)."""
        found = self._kwl.get(job.id)
        if found is not None and found[0] is job.wl:
            return found[1], found[2]
        wl = job.wl
        kueue = self.kueue
        ns = wl.namespace or "default"
        lq = kueue.local_queues.get((ns, wl.queue_name)) if wl.queue_name else None
        kwl, why = None, ""
        if lq is None:
            why = (f"{NO_QUEUE} {ns}/{wl.queue_name} exists; Kueue does not admit it" if wl.queue_name
                   else f"{NO_QUEUE} (no kueue.x-k8s.io/queue-name); Kueue does not admit it")
        else:
            cq = kueue.cluster_queues.get(lq.cluster_queue)
            prio = wl.priority
            if prio is None and wl.priority_class and wl.priority_class in kueue.priority_classes:
                prio = kueue.priority_classes[wl.priority_class].value
            pod_sets = list(self._kpod_sets(wl))
            created = self._evicted_at.get(job.id, float(wl.submit_time))
            kwl = KWorkload(job.id, wl.name, lq.cluster_queue, int(prio or 0), created, (job.id,), pod_sets, (ns, lq.name))
            if cq is None:
                why = f"ClusterQueue {lq.cluster_queue} doesn't exist"
                kwl = None
            elif cq.namespace_selector is None:
                why = f"namespace {ns} doesn't match ClusterQueue {cq.name} (namespaceSelector is null)"
                kwl = None
            elif cq.stop_policy != "None" or lq.stop_policy != "None":
                why = f"ClusterQueue or LocalQueue is stopped ({cq.stop_policy}/{lq.stop_policy})"
                kwl = None
        self._kwl[job.id] = (wl, kwl, why)
        return kwl, why

    def _kpod_sets(self, wl) -> tuple[KPodSet, ...]:
        """Kueue's pod sets of a workload: a function of its (frozen, hashable) pod sets and
        gang mode, shared by workloads with equal ones (nothing changes a ``KPodSet``), so a
        50k-workload replay builds a handful instead of one set of records per workload."""
        key = (wl.gang, wl.pod_sets)
        try:
            found = self._kpod_memo.get(key)
        except TypeError:  # a pod set built with an unhashable field: no sharing
            key, found = None, None
        if found is None:
            pod_sets = []
            for ps in wl.pod_sets:
                req = {r: v for r, v in ps.requests().items() if v}
                min_count = ps.min_count if (wl.gang == GANG_MIN and ps.min_count is not None) else None
                tols = tuple(dict(t) for t in ps.tolerations)
                pod_sets.append(KPodSet(ps.name, ps.count, req, min_count, dict(ps.node_selector), tols,
                                        topology_request(ps), ps.gpu_type))
            found = tuple(pod_sets)
            # Kept for the policy's lifetime either way: ``_flavor_for_node`` and ``_shape_of``
            # key memos by these records' ids.
            self._kpod_memo[key if key is not None else ("unshared", id(found))] = found
        return found

    def _flavor_for_node(self, cq_name: str, group_index: int, node: int, nodes, kps: KPodSet) -> str | None:
        sel = self._selector_memo.get(id(kps))  # pod-set records live as long as the policy
        if sel is None:
            sel = self._selector_memo[id(kps)] = tuple(sorted(kps.node_selector.items()))
        key = (cq_name, group_index, node, sel)
        if key in self._flavor_memo:
            return self._flavor_memo[key]
        group = self.kueue.cluster_queues[cq_name].resource_groups[group_index]
        labels = nodes.labels[node]
        chosen = None
        for fq in group.flavors:
            flavor = self.kueue.flavors.get(fq.flavor)
            if flavor is None or flavor_matches(flavor, kps):
                continue
            if all(labels.get(k) == v for k, v in flavor.node_labels.items()):
                chosen = fq.flavor
                break
        self._flavor_memo[key] = chosen
        return chosen

    def _admitted_from_job(self, job, kwl: KWorkload, nodes) -> Admitted:
        """Quota a running or placing job holds, with flavors read from its pods' nodes.

        A pure function of what the key below holds (node labels do not change during a run),
        so the record is reused while they stay the same: rebuilding one per active job on every
        pass (20k of them with 1,000 ClusterQueues) was cheap per object but made most of the
        garbage collector's work. Nothing changes an ``Admitted`` after it is built except the
        TAS fields, which ``_attach_topology`` sets again on every pass."""
        memo = self._adm_memo.get(job.id)
        if memo is not None and memo[0] is job.placement and memo[1] is kwl and memo[2] == job.state \
                and memo[3] == job.admitted_at and memo[4] == job.start:
            return memo[5]
        adm = self._build_admitted(job, kwl, nodes)
        self._adm_memo[job.id] = (job.placement, kwl, job.state, job.admitted_at, job.start, adm)
        return adm

    def _build_admitted(self, job, kwl: KWorkload, nodes) -> Admitted:
        cq = self.kueue.cluster_queues[kwl.cq]
        group_of = {r: i for i, rg in enumerate(cq.resource_groups) for r in rg.covered_resources}
        placement = job.placement
        offset = 0
        first_node = placement[0][0] if placement else None
        usage: dict = {}
        pod_sets = []
        for ps, kps in zip(job.wl.pod_sets, kwl.pod_sets):
            placed = placement[offset:offset + ps.count]
            offset += ps.count
            count = ps.count
            if job.state == RUNNING and job.wl.gang == GANG_MIN:
                count = len(placed)  # partial admission: the admitted count is what runs
            node = placed[0][0] if placed else first_node
            flavors = {}
            for r, v in kps.requests.items():
                g = group_of.get(r)
                if g is None:
                    continue
                f = self._flavor_for_node(kwl.cq, g, node, nodes, kps) if node is not None else None
                if f is None:
                    f = cq.resource_groups[g].flavors[0].flavor
                flavors[r] = f
                usage[(f, r)] = usage.get((f, r), 0) + v * count
            pod_sets.append(PodSetAssignment(kps.name, count, flavors, {r: v * count for r, v in kps.requests.items()}))
        reserved = job.admitted_at if job.admitted_at is not None else (job.start or 0.0)
        return Admitted(kwl, kwl.cq, usage, reserved, pod_sets)

    def _admitted_from_reservation(self, job, kwl: KWorkload) -> Admitted | None:
        """Quota a reserved (admitted, not placed) job holds, read back from its ``reserve_info``."""
        info = job.reserve_info
        decoded = self._decoded.get(info, False)
        if decoded is False:
            decoded = self._decoded[info] = decode_reservation(info)
        if decoded is None or decoded[0] != kwl.cq or len(decoded[1]) != len(kwl.pod_sets):
            return None
        usage: dict = {}
        pod_sets = []
        for (name, count, flavors), kps in zip(decoded[1], kwl.pod_sets):
            for r, f in flavors.items():
                v = kps.requests.get(r)
                if v:
                    usage[(f, r)] = usage.get((f, r), 0) + v * count
            pod_sets.append(PodSetAssignment(name, count, dict(flavors),
                                             {r: v * count for r, v in kps.requests.items()}))
        return Admitted(kwl, kwl.cq, usage, job.reserved_since, pod_sets)

    # ------------------------------------------------------------------ decide
    def decide(self, snap: Snapshot) -> list:
        now = snap.now
        out: list = []
        state = KueueState(self.kueue, self._tree)
        nodes = snap.nodes
        pr = self.pods_ready
        timeout = pr.timeout if pr.enabled else None
        placing: list = []
        reserved: list = []
        tas_held: list | None = [] if self._tas_levels else None  # TAS uses not on the nodes yet
        wake = float("inf")  # the earliest timer this pass needs (PodsReady deadline, backoff)
        afs = self._afs_usage
        if afs is not None:
            afs.advance(now)  # samples due since the last call, with what was held meanwhile
        recovering = []
        if pr.enabled and self._ready:
            if snap.changed & CHANGED_REQUEUED:  # a pod failure requeues: only then can one be found
                recovering = self._failed_ready(snap)
            elif len(self._ready) > 2 * len(snap.active) + 64:  # forget jobs that ended
                self._ready = {k: v for k, v in self._ready.items() if k in snap.active}
        if len(self._adm_memo) > 2 * len(snap.active) + 64:  # forget jobs that ended
            self._adm_memo = {k: v for k, v in self._adm_memo.items() if k in snap.active}
        holders: list[Admitted] = []  # every workload holding quota, in snapshot order
        for job in snap.active.values():
            kwl, _ = self.kworkload(job)
            if kwl is None:
                continue
            if job.state == PLACING and timeout is not None:
                deadline = self._deadline(job, job.admitted_at if job.admitted_at is not None else now)
                if now >= deadline:  # the same sum the WakeAt used (no float drift)
                    out.extend(self._pods_ready_timeout(job, now, placed=True))
                    continue
                wake = min(wake, deadline)
            adm = self._admitted_from_job(job, kwl, nodes)
            if job.state == RUNNING and pr.enabled:
                self._ready[job.id] = adm
                if self._recovering:
                    self._recovering.pop(job.id, None)
            if tas_held is not None:
                tas_held.extend(self._attach_topology(state, job, adm, nodes))
            holders.append(adm)
            if job.state == PLACING:
                placing.append(job)
        for job in snap.reserved.values():
            kwl, _ = self.kworkload(job)
            adm = self._admitted_from_reservation(job, kwl) if kwl is not None else None
            if adm is None:  # not a reservation this policy made (cannot happen in a run)
                continue
            if timeout is not None:
                deadline = self._deadline(job, job.reserved_since)
                if now >= deadline:  # the same sum the WakeAt used (no float drift)
                    out.extend(self._pods_ready_timeout(job, now, placed=False))
                    continue
                wake = min(wake, deadline)
            if tas_held is not None:
                tas_held.extend(self._attach_topology(state, job, adm, nodes))
            holders.append(adm)
            reserved.append(job)
        for job, adm in recovering:  # still admitted in Kueue: they keep their quota
            if tas_held is not None:
                tas_held.extend(self._attach_topology(state, job, adm, nodes))
            holders.append(adm)
        state.admit_all(holders)
        if tas_held is not None:
            # Capacity per domain: the nodes' free resources minus admitted TAS workloads'
            # pods that are not bound yet.
            if self._tas_static is None:
                self._tas_static = static_nodes(self.kueue, nodes, self.kube.taints)
            state.tas = from_node_table(self._tas_static, nodes)
            state.tas.hold(tas_held)
            live = len(snap.active) + len(snap.reserved)
            if len(self._tas_assigned) > 2 * live + 64:  # forget jobs that ended
                self._tas_assigned = {k: v for k, v in self._tas_assigned.items()
                                      if k in snap.active or k in snap.reserved}
            if len(self._tas_attach_memo) > 2 * live + 64:
                self._tas_attach_memo = {k: v for k, v in self._tas_attach_memo.items()
                                         if k in snap.active or k in snap.reserved}
        # Every call syncs the backlog (arrivals are reported once), even one that only evicts.
        evicting = bool(out)
        backlog = self._sync_backlog(snap, out)
        for kwl in self._reorder:  # requeuingStrategy.timestamp: Eviction
            backlog.reorder(kwl, self._shape_of(kwl))
        self._reorder = []
        if evicting:  # evictions first; the engine gives another pass at this instant
            self._afs_hold(state)
            return out
        scratch = Scratch(nodes)
        not_ready = False
        # Pods of admitted, not (fully) placed jobs wait in kube-scheduler's queue first:
        # partly placed ones, then reserved ones in reservation order.
        for job in placing:
            pods = self._place(job, state.admitted[job.id], nodes, scratch, skip=len(job.placement))
            if pods:
                out.append(Start(job.id, pods, partial=True, via="kube-scheduler"))
            if len(job.placement) + len(pods) < job.pods_needed:
                not_ready = True
            elif pr.enabled:
                self._ready[job.id] = state.admitted[job.id]
        for job in reserved:
            pods = self._place(job, state.admitted[job.id], nodes, scratch, skip=0)
            if pods and (len(pods) == job.pods_total or not self.gang):
                out.append(Start(job.id, pods, partial=len(pods) < job.pods_total, via="kube-scheduler"))
                if len(pods) < job.pods_needed:
                    not_ready = True
                elif pr.enabled:
                    self._ready[job.id] = state.admitted[job.id]
            else:
                scratch.give(pods)
                not_ready = True
        done: set = set()  # admitted in this pass (or kept admitted while recovering)
        for job, adm in recovering:
            done.add(job.id)
            del self._ready[job.id]
            pods = self._place(job, adm, nodes, scratch, skip=0)
            if pods and len(pods) >= job.pods_needed and (len(pods) == job.pods_total or not self.gang):
                out.append(Start(job.id, pods, partial=len(pods) < job.pods_total, via="kube-scheduler"))
                self._ready[job.id] = adm  # replacement pods bound at once: ready again
                continue
            failed_at = min(job.submit, now)
            self._recovering[job.id] = failed_at
            not_ready = True
            if pods and not self.gang:
                out.append(Start(job.id, pods, partial=True, via="kube-scheduler"))
            else:
                scratch.give(pods)
                out.append(Reserve(job.id, encode_reservation(adm)))
                out.append(Pending(job.id, _RECOVERING))
            if pr.recovery > 0:
                wake = min(wake, failed_at + pr.recovery)
        reserved_ids = snap.reserved
        pending = snap.pending
        wake_cell = [float("inf")]  # backoff timers met while walking the backlog
        root_of = self._root_of
        if root_of is None:
            root_of = self._root_of = {name: node.root().name for name, node in state.tree.cqs.items()}
        for root in backlog.requeue_inadmissible(state.admitted):
            backlog.generation[root] = backlog.generation.get(root, 0) + 1
        if self._tas_levels and snap.changed & CHANGED_NODES and (backlog.parked or backlog.parked_shapes):
            # A node came up, went down or drained: the TAS capacity changed, so Kueue requeues
            # the inadmissible workloads (topology fit is judged again).
            backlog.parked = {}
            backlog.parked_shapes = {}
        parked = backlog.parked
        parked_shapes = backlog.parked_shapes
        shapes = self._shapes
        jobs = snap.jobs

        def usable(kwl: KWorkload) -> bool | None:
            """Whether a backlog entry can be a head now (None: the job is gone for good)."""
            key = kwl.key
            job = pending.get(key)
            if job is None:
                gone = jobs.get(key)
                return None if gone is None or gone.final_state is not None else False
            if key in done or key in parked or job.eligible > now or key in reserved_ids:
                return False
            if job.reason.startswith(_BACKOFF):
                until = backoff_until(job.reason)
                if until > now:  # requeueAt not reached: still inadmissible
                    wake_cell[0] = min(wake_cell[0], until)
                    return False
            return True

        reasons: dict = {}
        block = pr.enabled and pr.block
        backlog.start_pass()
        exhausted = True
        afs_order = state.afs = self._afs_order()
        for _ in range(self.max_cycles):
            heads = backlog.heads(usable, parked_shapes, afs_order)
            if not heads:
                exhausted = False
                break
            resume = backlog.resume_for(heads, root_of, state.gate("FlavorFungibilityPreserveScanProgress"))
            cycle = run_cycle(state, heads, block_admission=block and not_ready, resume=resume)
            progress = backlog.record_scans(cycle.entries, resume, root_of,
                                            state.gate("FlavorFungibilityPreserveScanProgress"))
            for e in cycle.admitted:
                job = pending[e.wl.key]
                done.add(e.wl.key)
                if backlog.sticky.get(e.wl.cq) == e.wl.key:
                    del backlog.sticky[e.wl.cq]
                adm = state.admitted[e.wl.key]
                if any(psa.topology for psa in adm.pod_sets):
                    self._tas_assigned[e.wl.key] = [psa.topology for psa in adm.pod_sets]
                if afs is not None and e.wl.lq is not None:
                    afs.admit(e.wl.lq, base_units(_by_resource(adm.usage)))  # entry penalty
                pods = self._place(job, adm, nodes, scratch, skip=0)
                progress = True
                if pods and (len(pods) == job.pods_total or not self.gang):
                    out.append(Start(job.id, pods, partial=len(pods) < job.pods_total, via="kueue"))
                    if len(pods) < job.pods_needed:
                        not_ready = True
                        if timeout is not None:
                            wake = min(wake, now + timeout)
                    elif pr.enabled:
                        self._ready[job.id] = adm
                else:
                    scratch.give(pods)
                    not_ready = True
                    # Quota reserved, pods not bound: the reservation holds the quota.
                    out.append(Reserve(job.id, encode_reservation(adm)))
                    if timeout is not None:
                        wake = min(wake, now + timeout)
                    why = ("QuotaReserved; gang cannot be placed whole (GenericWorkload), no capacity held"
                           if self.gang else "QuotaReserved; no node fits a pod (kube-scheduler)")
                    if job.reason != why:
                        out.append(Pending(job.id, why))
            for t, e in cycle.preempted:
                out.append(Preempt(t.adm.wl.key, REQUEUE, t.reason, by_job=e.wl.key))
                self._ready.pop(t.adm.wl.key, None)  # evicted by Kueue, not a pod failure
                self._recovering.pop(t.adm.wl.key, None)
                if self.kueue.cluster_queues[e.wl.cq].queueing_strategy != "StrictFIFO":
                    backlog.sticky[e.wl.cq] = e.wl.key
            for e in cycle.entries:
                if e.result == ADMITTED:
                    continue
                reasons[e.wl.key] = f"{e.result}: {e.message}".rstrip(": ")
                if e.queue_state == INADMISSIBLE and e.wl.key not in parked:
                    root = root_of.get(e.wl.cq, e.wl.cq)
                    parked[e.wl.key] = root
                    if state.gate("SchedulingEquivalenceHashing") and e.result in (NOFIT_R, NO_CANDIDATES):
                        parked_shapes[shapes[e.wl.key]] = root
                    progress = True
            if cycle.preempted:
                exhausted = False
                break  # the preemptor is admitted in a later pass, after its victims left
            if not progress:
                exhausted = False
                break
        backlog.holding = {key: root_of.get(adm.cq, adm.cq) for key, adm in state.admitted.items()}
        self._afs_hold(state)
        wake = min(wake, wake_cell[0])
        if exhausted:
            # max_cycles reached while cycles still progressed: the next cycle comes one second
            # later (Kueue's cycles take time too) instead of looping at one instant.
            wake = min(wake, now + 1.0)
        for key, why in reasons.items():
            if key not in done and key in pending and pending[key].reason != why:
                out.append(Pending(key, why))
        if wake != float("inf"):
            out.append(WakeAt(wake))
        return out

    def _shape_of(self, kwl: KWorkload) -> int:
        shape = self._shapes.get(kwl.key)
        if shape is None:
            # ``shape_key`` is a function of the ClusterQueue and the pod sets, which are shared
            # records (``_kpod_sets``, kept alive by their memo, so their ids are stable).
            by_pods = (kwl.cq, *map(id, kwl.pod_sets))
            shape = self._shape_by_pods.get(by_pods)
            if shape is None:
                shape = self._shape_by_pods[by_pods] = self._shape_ids.setdefault(shape_key(kwl),
                                                                                  len(self._shape_ids))
            self._shapes[kwl.key] = shape
        return shape

    def _afs_order(self) -> dict | None:
        """ClusterQueue -> ``kwl -> its LocalQueue's AFS usage`` for the queues with AFS."""
        afs = self._afs_usage
        if afs is None or not self._afs_cqs:
            return None
        lqs = self.kueue.local_queues

        def usage(kwl: KWorkload) -> float:
            lq = lqs.get(kwl.lq) if kwl.lq is not None else None
            return afs.value(kwl.lq, lq.fair_weight) if lq is not None else 0.0

        return {cq: usage for cq in self._afs_cqs}

    def _afs_hold(self, state: KueueState) -> None:
        """Tell the AFS sampler what each LocalQueue holds until the next call."""
        afs = self._afs_usage
        if afs is None:
            return
        held: dict = {}
        for adm in state.admitted.values():
            if adm.wl.lq is None:
                continue
            per = held.setdefault(adm.wl.lq, {})
            for r, v in base_units(_by_resource(adm.usage)).items():
                per[r] = per.get(r, 0.0) + v
        afs.set_held(held)

    def _sync_backlog(self, snap: Snapshot, out: list) -> Backlog:
        """Bring the persistent backlog up to this snapshot: the jobs that arrived since the
        previous call, or every pending job when a call was missed (or on the first call)."""
        backlog = self._backlog
        if backlog is None or snap.seq <= 1 or snap.seq != backlog.seq + 1 or snap.changed == CHANGED_ALL:
            backlog = self._backlog = Backlog()
            self._deferred = {}
            fresh = snap.pending.values()
        else:
            fresh = snap.arrived
        backlog.seq = snap.seq
        now = snap.now
        deferred = self._deferred
        if deferred:
            due = [job for job in deferred.values() if job.eligible <= now]
            for job in due:
                del deferred[job.id]
            fresh = list(fresh) + due
        for job in fresh:
            kwl, why = self.kworkload(job)
            if kwl is not None:
                backlog.add(kwl, self._shape_of(kwl))
            elif job.eligible > now:
                deferred[job.id] = job  # judged when eligible, as Kueue sees it only then
            elif "stopped" not in why:
                # LocalQueues, ClusterQueues and selectors do not change during a run: a job
                # Kueue can never see is refused with the reason; a stopped queue only waits.
                out.append(Reject(job.id, why))
            elif job.reason != why:
                out.append(Pending(job.id, why))
        return backlog

    def _deadline(self, job, since: float) -> float:
        """When an admitted job not ready is evicted: ``timeout`` after its admission, or
        ``recoveryTimeout`` after the pod failure of a job that had been ready (never with 0s)."""
        pr = self.pods_ready
        failed_at = self._recovering.get(job.id) if self._recovering else None
        if failed_at is None:
            return since + pr.timeout
        return failed_at + pr.recovery if pr.recovery > 0 else float("inf")

    def _failed_ready(self, snap: Snapshot) -> list:
        """Jobs that were ready and are pending again without Kueue evicting them: a pod
        failure (a node went down, or the job was requeued from outside). Kueue keeps such a
        workload admitted; it returns ``(job, its admission)`` for each, and forgets jobs that
        ended."""
        out = []
        pending, active = snap.pending, snap.active
        for jid in list(self._ready):
            if jid in active:
                continue
            job = pending.get(jid)
            kwl = self.kworkload(job)[0] if job is not None and jid not in snap.reserved else None
            prev = self._ready[jid]
            if kwl is None or kwl.cq != prev.cq or len(kwl.pod_sets) != len(prev.pod_sets):
                del self._ready[jid]
                continue
            usage: dict = {}
            pod_sets = []
            for kps, psa in zip(kwl.pod_sets, prev.pod_sets):
                for r, f in psa.flavors.items():
                    v = kps.requests.get(r)
                    if v:
                        usage[(f, r)] = usage.get((f, r), 0) + v * psa.count
                pod_sets.append(PodSetAssignment(psa.name, psa.count, dict(psa.flavors), dict(psa.usage)))
            out.append((job, Admitted(kwl, kwl.cq, usage, prev.reserved_at, pod_sets)))
        return out

    def _pods_ready_timeout(self, job, now: float, placed: bool) -> list:
        """waitForPodsReady timeout (or recovery timeout) of an admitted job: evict with
        backoff, or deactivate."""
        pr = self.pods_ready
        self._ready.pop(job.id, None)
        self._recovering.pop(job.id, None)
        n = job.evictions.get(PODS_READY_TIMEOUT, 0) + 1
        if pr.limit is not None and n > int(pr.limit):
            out = [Preempt(job.id, CANCEL, DEACTIVATED)]
            if not placed:  # only a reservation to withdraw: the workload is deactivated for good
                out.append(Reject(job.id, DEACTIVATED))
            return out
        delay = pr.backoff(n)
        if pr.timestamp == "Eviction":
            # The workload re-enters its queue ordered by the eviction time (§3.1, §7).
            self._evicted_at[job.id] = now
            kwl, _ = self.kworkload(job)
            if kwl is not None:
                kwl.created = now
                self._reorder.append(kwl)
        if placed:
            return [Preempt(job.id, REQUEUE, PODS_READY_TIMEOUT, requeue_delay=delay)]
        until = now + delay
        return [Preempt(job.id, REQUEUE, PODS_READY_TIMEOUT), Pending(job.id, f"{_BACKOFF}{until!r}"),
                WakeAt(until)]

    def _attach_topology(self, state: KueueState, job, adm: Admitted, nodes) -> list:
        """Give an admitted job's TAS pod sets their topology assignment (from its admission, or
        where its pods run); return the uses of the pods not bound yet, which the TAS snapshot
        must hold on top of the nodes' free resources."""
        cached = self._tas_assigned.get(job.id)
        memo = self._tas_attach_memo.get(job.id)
        if memo is not None and memo[0] is job.placement and memo[1] is cached:
            for i, topology, fname in memo[2]:  # nothing bound or assigned since the last pass
                adm.pod_sets[i].topology = topology
                adm.pod_sets[i].tas_flavor = fname
            return memo[3]
        out = []
        done = []
        offset = 0
        for i, (ps, kps, psa) in enumerate(zip(job.wl.pod_sets, adm.wl.pod_sets, adm.pod_sets)):
            placed = job.placement[offset:offset + ps.count]
            offset += ps.count
            names = set(psa.flavors.values())
            fname = next(iter(names)) if len(names) == 1 else None
            levels = self._tas_levels.get(fname) if fname is not None else None
            if levels is None or (kps.topology is None and not state.tas_only(adm.cq)):
                continue
            on_nodes: dict = {}
            for p in placed:
                labels = nodes.labels[p[0]]
                leaf = tuple(labels.get(k) for k in levels)
                on_nodes[leaf] = on_nodes.get(leaf, 0) + 1
            full = cached[i] if cached is not None and i < len(cached) and cached[i] else dict(on_nodes)
            psa.topology = dict(full)
            psa.tas_flavor = fname
            done.append((i, psa.topology, fname))
            rest = {leaf: n - on_nodes.get(leaf, 0) for leaf, n in full.items() if n > on_nodes.get(leaf, 0)}
            if rest:
                out.append((fname, rest, kps.requests))
        self._tas_attach_memo[job.id] = (job.placement, cached, done, out)
        return out

    def _place(self, job, adm: Admitted, nodes, scratch: Scratch, skip: int) -> tuple:
        """Bind pods (after the first ``skip``) with the flavors of ``adm``; gang: all or none."""
        flavors = self.kueue.flavors
        pods = []
        index = 0
        used = {p[0] for p in job.placement}
        for ps, psa in zip(job.wl.pod_sets, adm.pod_sets):
            selector = dict(ps.node_selector)
            tolerations = [dict(t) for t in ps.tolerations]
            for f in set(psa.flavors.values()):
                flavor = flavors.get(f)
                if flavor is not None:
                    selector.update(flavor.node_labels)
                    tolerations.extend(dict(t) for t in flavor.tolerations)
            sel = tuple(sorted(selector.items()))
            tols = tuple(tuple(sorted(t.items())) for t in tolerations)
            ps_used = set(used) if ps.one_per_node else set()
            if psa.topology and psa.tas_flavor in self._tas_levels:
                # TAS: the pods go to the leaf domains of the topology assignment, each leaf's
                # label values added to the node selector (Kueue's ungater does the same).
                levels = self._tas_levels[psa.tas_flavor]
                done_here = min(psa.count, max(0, skip - index))
                rest = dict(psa.topology)
                for p in job.placement[index:index + done_here]:
                    leaf = tuple(nodes.labels[p[0]].get(k) for k in levels)
                    if rest.get(leaf):
                        rest[leaf] -= 1
                index += psa.count
                todo = psa.count - done_here
                for leaf in sorted(rest):
                    leaf_sel = tuple(sorted({**selector, **dict(zip(levels, leaf))}.items()))
                    for _ in range(min(rest[leaf], todo)):
                        pod = self.kube.place_pod(nodes, scratch, ps, leaf_sel, tols, ps_used)
                        if pod is None:
                            return self._bound_so_far(job, pods, scratch)
                        pods.append(pod)
                        todo -= 1
                continue
            for _ in range(psa.count):
                if index < skip:
                    index += 1
                    continue
                index += 1
                pod = self.kube.place_pod(nodes, scratch, ps, sel, tols, ps_used)
                if pod is None:
                    return self._bound_so_far(job, pods, scratch)
                pods.append(pod)
        return tuple(pods)

    def _bound_so_far(self, job, pods: list, scratch: Scratch) -> tuple:
        """What a binding pass that ran out of room returns: the pods bound so far, or none
        under gang placement when the group would still be incomplete (they go back)."""
        if self.gang and len(job.placement) + len(pods) < job.pods_needed:
            scratch.give(pods)
            return ()
        return tuple(pods)


def _by_resource(usage: dict) -> dict[str, int]:
    """Usage per (flavor, resource) summed per resource."""
    out: dict[str, int] = {}
    for (_, r), v in usage.items():
        out[r] = out.get(r, 0) + v
    return out


@register("kueue", "Kueue admission (quota, cohorts, preemption, fair sharing), kube-scheduler places pod by pod")
def _kueue(pool: Pool, options: dict) -> KueuePolicy:
    return KueuePolicy(pool, options, gang=False, name="kueue")


def _with_fair_sharing(kueue: KueueConfig, mode: str, name: str) -> KueueConfig:
    """The pool's Kueue objects under its Configuration as written (``pool``), or with the
    Configuration's ``fairSharing`` section removed (``off``: classic preemption), so one pool
    can be compared under both without keeping two Configuration files."""
    if mode == "pool":
        return kueue
    if mode != "off":
        raise PolicyOptionError(f"policy {name}: option fair_sharing={mode!r}; expected 'pool' or 'off'")
    config = {k: v for k, v in (kueue.configuration or {}).items() if k != "fairSharing"}
    return dataclasses.replace(kueue, configuration=config)


@register("kueue-classic", "Kueue as `kueue`, with the Configuration's fairSharing removed: classic preemption")
def _kueue_classic(pool: Pool, options: dict) -> KueuePolicy:
    if "fairSharing" not in ((pool.kueue.configuration if pool.kueue else None) or {}):
        raise PolicyNotApplicable(f"policy kueue-classic: pool {pool.name}'s Kueue Configuration has no fairSharing "
                                  "section, so kueue already runs classic preemption")
    return KueuePolicy(pool, {**options, "fair_sharing": "off"}, gang=False, name="kueue-classic")


@register("kueue-gang", "Kueue admission with GenericWorkload gang placement: whole pod groups or nothing")
def _kueue_gang(pool: Pool, options: dict) -> KueuePolicy:
    return KueuePolicy(pool, options, gang=True, name="kueue-gang")
