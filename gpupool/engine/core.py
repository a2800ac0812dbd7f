"""The discrete-event engine: a virtual clock, the event heap, and every state transition.

The policy proposes (``decide``), the engine checks and applies, and records what happened.
Events at one instant are applied together, then the policy is asked once: that mirrors how
both slurmctld and Kueue batch what arrived since their last pass.
"""
from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field

from gpupool.engine.clock import VirtualClock
from gpupool.engine.decisions import CANCEL, Pending, Preempt, Reject, Reserve, Start, Unreserve, WakeAt
from gpupool.engine.executor import Executor, SimulatedExecutor
from gpupool.engine.job import PENDING, PLACING, RUNNING, Job
from gpupool.engine.nodes import NodeTable, mask_indices
from gpupool.engine.policy_api import Policy
from gpupool.engine.snapshot import (
    CHANGED_ALL, CHANGED_ARRIVED, CHANGED_ELIGIBLE, CHANGED_ENDED, CHANGED_NODES, CHANGED_REQUEUED,
    CHANGED_TICK, Snapshot,
)
from gpupool.errors import GpupoolError, InvariantViolation
from gpupool.model.pool import Pool
from gpupool.model.workload import Workload

# Event kinds, in the order they apply at one instant: resources are freed before new work
# arrives, so a policy sees both in the same pass.
EV_END = 0
EV_NODE = 1
EV_ELIGIBLE = 2
EV_TICK = 3
EV_PASS = 4  # another policy pass: at the same instant after a preemption, or a WakeAt timer
MAX_PASSES_PER_INSTANT = 1000

NODE_DOWN = "down"
NODE_UP = "up"
NODE_DRAIN = "drain"
NODE_RESUME = "resume"
NODE_EVENTS = (NODE_DOWN, NODE_UP, NODE_DRAIN, NODE_RESUME)


@dataclass(frozen=True, slots=True)
class NodeEvent:
    """A fault or an operation on one node at a time (from a faults file or an operator)."""

    time: float
    node: str
    event: str
    reason: str = ""


@dataclass(slots=True)
class RunOutput:
    """What one run produced: the job records, the timeline and the event log."""

    pool: Pool
    policy: str
    jobs: list[Job]
    #: (time, allocated GPUs, GPUs of running jobs, pending jobs, running jobs) per instant.
    timeline: list[tuple[float, int, int, int, int]]
    #: (time, event, job id, detail) when events are recorded.
    events: list[tuple[float, str, int, str]] = field(default_factory=list)
    end_time: float = 0.0


class Engine:
    """One simulated run of ``workloads`` on ``pool`` under ``policy``."""

    def __init__(
        self,
        pool: Pool,
        workloads: list[Workload],
        policy: Policy,
        *,
        faults: list[NodeEvent] = (),
        check: bool = False,
        until: float | None = None,
        record_events: bool = True,
        executor: Executor | None = None,
    ) -> None:
        self.pool = pool
        self.policy = policy
        self.clock = VirtualClock()
        if executor is None:
            executor = SimulatedExecutor(policy.over_time_limit,
                                         float(getattr(policy, "time_limit_check_interval", 0.0) or 0.0))
        self.executor = executor
        self._launch = executor.launch
        self.check = check
        self.until = until
        self.record_events = record_events
        self.nodes = NodeTable(pool, check=check)
        ids = [wl.id for wl in workloads]
        if len(set(ids)) != len(ids):
            raise GpupoolError("workload ids must be unique within a run")
        self.jobs: dict[int, Job] = {}
        self._arrivals: list[Job] = []
        for wl in sorted(workloads, key=lambda w: (w.submit_time, w.id)):
            job = Job(wl)
            self.jobs[wl.id] = job
            self._arrivals.append(job)
        self.pending: dict[int, Job] = {}
        self.active: dict[int, Job] = {}
        self.reserved: dict[int, Job] = {}  # PENDING jobs holding a Reserve (admitted, unplaced)
        self._wakes: set[float] = set()  # WakeAt times already in the heap
        self._grace: dict[int, Preempt] = {}  # jobs in a preemption grace period -> the Preempt
        self._ptext: dict[int, str] = {}  # GPU mask -> "0,1,2" for event details
        self._heap: list[tuple] = []
        self._seq = 0
        for fault in sorted(faults, key=lambda f: (f.time, f.node, f.event)):
            if fault.node not in self.nodes.index:
                raise GpupoolError(f"fault at {fault.time}s names node {fault.node!r}, which the pool does not have")
            self._push(fault.time, EV_NODE, self.nodes.index[fault.node], (fault.event, fault.reason))
        self.events: list[tuple[float, str, int, str]] = []
        self.timeline: list[tuple[float, int, int, int, int]] = []
        self._allocated_gpus = 0
        self._running_gpus = 0
        self._running = 0
        self._placing = 0  # jobs holding part of their gang
        self._placed_pods = 0  # pods placed so far in the run (progress marker)
        self._changed = CHANGED_ALL  # what changed since the last decide call (Snapshot.changed)
        self._pending_removed = 0  # removals from ``pending`` since it was last compacted
        self.now = 0.0

    # ----------------------------------------------------------------- event plumbing
    def _push(self, time: float, kind: int, a, b) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (time, kind, self._seq, a, b))

    def _log(self, time: float, what: str, job_id: int, detail: str = "") -> None:
        if self.record_events:
            self.events.append((time, what, job_id, detail))

    # ----------------------------------------------------------------- main loop
    def run(self) -> RunOutput:
        """Replay every event; ask the policy once per instant at which something is waiting.

        This loop runs a few hundred thousand times per run, so it keeps what it touches in
        locals and allocates nothing per instant beyond the timeline row.
        """
        policy = self.policy
        decide = policy.decide
        tick = policy.tick_interval
        if tick:
            self._push(0.0, EV_TICK, 0, None)
        arrivals = self._arrivals
        n_arrivals = len(arrivals)
        next_arrival = 0
        t_arr = arrivals[0].submit if n_arrivals else math.inf
        heap = self._heap
        heappop = heapq.heappop
        pending = self.pending
        active = self.active
        snapshot = Snapshot(0.0, self.pool, self.nodes, pending, active, self.jobs, reserved=self.reserved)
        clock = self.clock
        timeline_append = self.timeline.append
        events_append = self.events.append if self.record_events else None
        until = self.until
        finish = self._finish
        inf = math.inf
        idle_ticks = 0
        passes = 0
        placed_at_last_tick = -1
        arrived: list[Job] = []
        calls = 0
        woken = False
        while True:
            t_heap = heap[0][0] if heap else inf
            t = t_heap if t_heap < t_arr else t_arr
            if t == inf:
                break
            if until is not None and t > until:
                break
            if (not self._running and next_arrival >= n_arrivals and len(heap) == 1
                    and heap[0][1] == EV_TICK):
                # Only the periodic tick is left and nothing runs: once a pass changes nothing,
                # no later pass can (jobs left waiting or half-placed are deadlocked), so stop.
                if not pending and not active:
                    break
                if self._placed_pods == placed_at_last_tick:
                    idle_ticks += 1
                    if idle_ticks > 1:
                        break
                placed_at_last_tick = self._placed_pods
            else:
                idle_ticks = 0
            if t != self.now:
                passes = 0
            self.now = t
            clock.t = t
            trigger = "event"
            # Resources freed and node changes first, then arrivals, then ticks.
            if t_heap == t:
                while heap and heap[0][0] == t and heap[0][1] <= EV_ELIGIBLE:
                    _, kind, _, a, b = heappop(heap)
                    if kind == EV_END:
                        if a.token == b[0]:
                            if a.state == RUNNING:
                                finish(a, t, b[1])
                        elif b[0] < 0 and self._grace.get(a.id) is b[1]:
                            self._grace_end(a, t)
                    elif kind == EV_NODE:
                        self._node_event(a, b[0], b[1], t)
                    else:
                        self._changed |= CHANGED_ELIGIBLE
            if t_arr == t:
                while True:
                    job = arrivals[next_arrival]
                    next_arrival += 1
                    pending[job.id] = job
                    arrived.append(job)
                    if events_append is not None:
                        events_append((t, "submitted", job.id, ""))
                    if job.eligible > t:
                        self._push(job.eligible, EV_ELIGIBLE, job.id, None)
                    if next_arrival >= n_arrivals:
                        t_arr = inf
                        break
                    t_arr = arrivals[next_arrival].submit
                    if t_arr != t:
                        break
                self._changed |= CHANGED_ARRIVED
            while heap and heap[0][0] == t:
                _, kind, _, a, b = heappop(heap)
                if kind == EV_TICK:
                    trigger = "tick"
                    self._changed |= CHANGED_TICK
                    if tick:
                        self._push(t + tick, EV_TICK, 0, None)
                elif kind == EV_PASS:
                    self._changed |= CHANGED_TICK
                    if a:  # a WakeAt timer: the policy is called even with nothing waiting
                        self._wakes.discard(t)
                        woken = True
                    passes += 1
                    if passes > MAX_PASSES_PER_INSTANT:
                        raise InvariantViolation(
                            f"policy {policy.name} asked for more than {MAX_PASSES_PER_INSTANT} passes"
                            f" at t={t} without time moving on (WakeAt at the current time or preemptions, repeated)")
            if pending or self._placing or woken:
                woken = False
                if self._pending_removed > 1024 and self._pending_removed > 8 * math.isqrt(len(pending)):
                    self._compact_pending()
                calls += 1
                snapshot.now = t
                snapshot.trigger = trigger
                snapshot.seq = calls
                snapshot.changed = self._changed
                snapshot.arrived = arrived
                decisions = decide(snapshot)
                if decisions:
                    self._apply(decisions, t)
                # What applying the decisions changed is the policy's own doing, not news.
                self._changed = 0
                snapshot.applied = decisions
                if arrived:
                    arrived = []
            timeline_append((t, self._allocated_gpus, self._running_gpus, len(pending), self._running))
        if self.check:
            self._check_final()
        return RunOutput(self.pool, policy.name, list(self.jobs.values()), self.timeline, self.events, self.now)

    def _compact_pending(self) -> None:
        """Rebuild ``pending`` in place, same order and identity, without its removed slots.

        A dict keeps a removed entry's slot until it resizes, and iteration walks those
        slots: a queue that starts jobs from the front and takes submissions at the back
        piles up thousands of them ahead of the head, and every pass from the head (strict
        FIFO after each job end) paid for all of them. Rebuilding every ~8·√n removals keeps
        both costs small.
        """
        pending = self.pending
        live = dict(pending)
        pending.clear()
        pending.update(live)
        self._pending_removed = 0

    # ----------------------------------------------------------------- transitions
    def _apply(self, decisions, t: float) -> None:
        freed = False
        for d in decisions:
            cls = type(d)
            if cls is Start:
                self._start(d, t)
            elif cls is Preempt:
                if self._preempt(d, t):
                    freed = True
            elif cls is Pending:
                job = self.jobs[d.job_id]
                if job.state == PENDING:
                    job.reason = d.reason
            elif cls is Reject:
                job = self.pending.pop(d.job_id, None)
                if job is None:
                    raise InvariantViolation(f"policy rejected job {d.job_id}, which is not pending")
                self._pending_removed += 1
                job.reason = d.reason
                self._unreserve(job)
                self._final(job, t, "REJECTED")
            elif cls is Reserve:
                job = self.jobs.get(d.job_id)
                if job is None or job.state != PENDING:
                    raise InvariantViolation(f"policy reserved job {d.job_id}, which is not pending")
                if job.reserved_since is None:
                    job.reserved_since = t
                    self.reserved[job.id] = job
                    self._log(t, "reserved", job.id, d.info)
                job.reserve_info = d.info
            elif cls is Unreserve:
                job = self.jobs.get(d.job_id)
                if job is not None and job.reserved_since is not None:
                    self._unreserve(job)
                    self._log(t, "unreserved", job.id)
            elif cls is WakeAt:
                when = d.time
                if when < t:
                    raise InvariantViolation(f"policy asked to wake at {when}, before now ({t})")
                if when not in self._wakes:
                    self._wakes.add(when)
                    self._push(when, EV_PASS, 1, None)
            else:
                raise InvariantViolation(f"unknown decision {d!r}")
        if freed:
            self._push(t, EV_PASS, 0, None)

    def _start(self, d: Start, t: float) -> None:
        job = self.jobs.get(d.job_id)
        if job is None or job.state not in (PENDING, PLACING):
            raise InvariantViolation(f"policy started job {d.job_id}, which is not waiting")
        if job.eligible > t:
            raise InvariantViolation(f"policy started job {job.id} before it is eligible")
        placement = d.placement
        placed = len(job.placement) + len(placement)
        if placed > job.pods_total or (not d.partial and placed != job.pods_total):
            raise InvariantViolation(f"job {job.id}: placement of {placed} pods for a job of {job.pods_total}")
        nodes = self.nodes
        for pod in placement:
            if not nodes.up[pod[0]] or nodes.drain[pod[0]]:
                raise InvariantViolation(f"job {job.id} placed on unavailable node {nodes.names[pod[0]]}")
        if self.check:
            self._check_pod_shapes(job, placement)
        nodes.allocate(placement)
        if job.state == PLACING:  # idle holding accrues per segment, at what was held then
            job.gpu_s_idle_held += (t - job.placing_since) * job.held_gpus
            job.placing_since = t
        if d.time_limit is not None:
            job.time_limit = d.time_limit
        if d.partition is not None:
            job.partition = d.partition
        gpus = 0
        for pod in placement:
            gpus += pod[1].bit_count()
        self._allocated_gpus += gpus
        job.held_gpus += gpus
        if job.state == PENDING:
            del self.pending[job.id]
            self._pending_removed += 1
            self.active[job.id] = job
            job.placing_since = t
            job.state = PLACING
            job.admitted_at = t
            if self.reserved and job.id in self.reserved:
                self._unreserve(job)
            self._placing += 1
        job.placement = job.placement + tuple(placement)
        self._placed_pods += len(placement)
        job.via = d.via or job.via
        if len(job.placement) >= job.pods_needed:
            self._run(job, t)
        elif self.record_events:
            head = f"{d.via} " if d.via else ""
            self.events.append((t, "placed", job.id,
                                f"{head}{len(job.placement)}/{job.pods_total} {self.placement_text(placement)}"))

    def placement_text(self, placement) -> str:
        """``node:idx,idx;node:idx`` - one entry per pod, in placement order (the event format)."""
        names = self.nodes.names
        cache = self._ptext
        parts = []
        for pod in placement:
            mask = pod[1]
            text = cache.get(mask)
            if text is None:
                text = cache[mask] = ",".join(map(str, mask_indices(mask)))
            parts.append(f"{names[pod[0]]}:{text}")
        return ";".join(parts)

    def _run(self, job: Job, t: float) -> None:
        """The gang is complete: the job starts making progress now."""
        job.gpu_s_idle_held += (t - job.placing_since) * job.held_gpus
        job.placing_since = None
        self._placing -= 1
        job.state = RUNNING
        job.start = t
        if job.first_start is None:
            job.first_start = t
        job.token += 1
        self._running += 1
        self._running_gpus += job.held_gpus
        end, state = self._launch(job, t)
        self._push(end, EV_END, job, (job.token, state))
        if self.record_events:
            head = f"{job.via} " if job.via else ""
            self.events.append((t, "started", job.id, head + self.placement_text(job.placement)))

    def _release(self, job: Job, t: float) -> float:
        """Free the job's resources; return the seconds it ran in this run segment."""
        self.nodes.release(job.placement)
        self._changed |= CHANGED_ENDED
        self._allocated_gpus -= job.held_gpus
        del self.active[job.id]
        if self._grace and self._grace.pop(job.id, None) is not None:
            job.grace_until = None
        ran = 0.0
        if job.state == RUNNING:
            ran = t - job.start
            job.gpu_s_used += ran * job.held_gpus
            self._running -= 1
            self._running_gpus -= job.held_gpus
        else:  # PLACING: the gang never formed; all of it was idle holding
            job.gpu_s_idle_held += (t - job.placing_since) * job.held_gpus
            job.placing_since = None
            self._placing -= 1
        return ran

    def _finish(self, job: Job, t: float, state: str) -> None:
        self._release(job, t)
        job.remaining = 0.0 if state != "TIMEOUT" else max(0.0, job.remaining - (t - job.start))
        self._final(job, t, state)

    def _final(self, job: Job, t: float, state: str) -> None:
        if job.final_state is not None:
            raise InvariantViolation(f"job {job.id} ended twice ({job.final_state}, then {state})")
        job.final_state = state
        job.state = state
        job.end = t
        self._changed |= CHANGED_ENDED
        if self.record_events:
            self.events.append((t, "finished", job.id, state))

    def _preempt(self, d: Preempt, t: float) -> bool:
        """Apply a preemption; True when it freed resources (or a reservation) now."""
        job = self.jobs.get(d.job_id)
        if job is not None and job.state == PENDING and job.reserved_since is not None:
            # Admitted but not placed: the eviction only withdraws the reservation.
            self._unreserve(job)
            ev = job.evictions
            ev[d.reason] = ev.get(d.reason, 0) + 1
            self._changed |= CHANGED_REQUEUED
            self._log(t, "preempted", job.id, f"{d.mode} {d.reason}".strip())
            return True
        if job is None or job.state not in (RUNNING, PLACING):
            raise InvariantViolation(f"policy preempted job {d.job_id}, which holds no resources")
        if job.id in self._grace:
            return False  # already signalled: it stops when its grace period ends
        if d.grace > 0:
            job.grace_until = t + d.grace
            self._grace[job.id] = d
            self._push(job.grace_until, EV_END, job, (-1, d))
            self._log(t, "preempting", job.id, f"{d.mode} {d.reason} grace={d.grace:g}".strip())
            return False
        self._stop(job, d, t)
        return True

    def _grace_end(self, job: Job, t: float) -> None:
        """A preempted job's grace period ended: stop it now."""
        d = self._grace.pop(job.id)
        job.grace_until = None
        self._stop(job, d, t)

    def _stop(self, job: Job, d: Preempt, t: float) -> None:
        was_running = job.state == RUNNING
        held = job.held_gpus
        self.executor.stop(job, t, d.reason or "preempted")
        ran = self._release(job, t)
        job.preemptions += 1
        ev = job.evictions
        ev[d.reason] = ev.get(d.reason, 0) + 1
        self._log(t, "preempted", job.id, f"{d.mode} {d.reason}".strip())
        if was_running:
            self._account_lost_work(job, ran, held)
        if d.mode == CANCEL:
            self._final(job, t, "PREEMPTED")
            job.end_reason = d.reason
            return
        self._requeue(job, t, d.requeue_delay)

    def _unreserve(self, job: Job) -> None:
        if self.reserved.pop(job.id, None) is not None:
            job.reserved_since = None
            job.reserve_info = ""

    def _account_lost_work(self, job: Job, ran: float, gpus: int) -> None:
        """Work since the last checkpoint is lost; checkpointed progress is kept."""
        interval = job.wl.checkpoint_interval
        saved = math.floor(ran / interval) * interval if interval else 0.0
        job.gpu_s_lost += (ran - saved) * gpus
        job.remaining = max(0.0, job.remaining - saved)

    def _requeue(self, job: Job, t: float, delay: float) -> None:
        job.state = PENDING
        job.placement = ()
        job.held_gpus = 0
        job.start = None
        job.admitted_at = None
        if self.reserved:
            self._unreserve(job)
        job.requeues += 1
        job.submit = t
        job.eligible = t + delay
        self.pending[job.id] = job
        self._changed |= CHANGED_REQUEUED
        self._log(t, "requeued", job.id)
        if delay > 0:
            self._push(job.eligible, EV_ELIGIBLE, job.id, None)

    def _node_event(self, node: int, event: str, reason: str, t: float) -> None:
        nodes = self.nodes
        self._changed |= CHANGED_NODES
        if event == NODE_DOWN:
            nodes.up[node] = False
            victims = [j for j in self.active.values() if any(p[0] == node for p in j.placement)]
            for job in victims:
                was_running = job.state == RUNNING
                held = job.held_gpus
                self.executor.stop(job, t, f"node_fail {nodes.names[node]}")
                ran = self._release(job, t)
                if was_running:
                    self._account_lost_work(job, ran, held)
                if job.wl.requeue:
                    self._log(t, "node_fail", job.id, nodes.names[node])
                    self._requeue(job, t, 0.0)
                else:
                    self._final(job, t, "NODE_FAIL")
        elif event == NODE_UP:
            nodes.up[node] = True
        elif event == NODE_DRAIN:
            nodes.drain[node] = True
        elif event == NODE_RESUME:
            nodes.drain[node] = False
        else:
            raise GpupoolError(f"unknown node event {event!r}; expected one of {', '.join(NODE_EVENTS)}")

    # ----------------------------------------------------------------- invariants
    def _check_pod_shapes(self, job: Job, placement) -> None:
        shapes = [ps for ps in job.wl.pod_sets for _ in range(ps.count)]
        offset = len(job.placement)
        for k, (node, mask, cpu, mem) in enumerate(placement):
            ps = shapes[offset + k]
            if not ps.exclusive and mask.bit_count() != ps.gpus:
                raise InvariantViolation(f"job {job.id}: pod {offset + k} got {mask.bit_count()} GPUs, asked {ps.gpus}")
            if ps.gpu_type and self.nodes.gpu_type[node] not in (ps.gpu_type,):
                raise InvariantViolation(f"job {job.id}: pod placed on GPU type {self.nodes.gpu_type[node]}, asked {ps.gpu_type}")
        # One pod per node holds within each pod set; pods of different pod sets may share a node.
        allp = job.placement + tuple(placement)
        k = 0
        for ps in job.wl.pod_sets:
            chunk = allp[k:k + ps.count]
            k += ps.count
            if ps.one_per_node:
                used = [p[0] for p in chunk]
                if len(used) != len(set(used)):
                    raise InvariantViolation(
                        f"job {job.id}: two pods of one-pod-per-node pod set {ps.name!r} share a node")

    def _check_final(self) -> None:
        for job in self.jobs.values():
            if job.state in (PENDING, PLACING, RUNNING):
                # Waiting or half-placed jobs may remain (a deadlock is a result, not a bug);
                # a running job always has an end event, so it must have ended.
                if self.until is None and job.state == RUNNING:
                    raise InvariantViolation(f"job {job.id} still {job.state} after the run")
            elif job.final_state != job.state:
                raise InvariantViolation(f"job {job.id}: state {job.state} but final state {job.final_state}")
        if not self.active and not self.nodes.all_free():
            raise InvariantViolation("resources still allocated after every job released them")
