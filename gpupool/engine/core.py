"""The discrete-event engine: a virtual clock, the event heap, and every state transition.

The policy proposes (``decide``), the engine checks and applies, and records what happened.
Events at one instant are applied together, then the policy is asked once: that mirrors how
both slurmctld and Kueue batch what arrived since their last pass.
"""
from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field
from typing import Protocol

from gpupool.engine.clock import VirtualClock
from gpupool.engine.decisions import (
    CANCEL, Pending, Preempt, Reject, Reserve, Resume, Start, Suspend, Unreserve, WakeAt,
)
from gpupool.engine.executor import Executor, SimulatedExecutor
from gpupool.engine.job import PENDING, PLACING, RUNNING, SUSPENDED, Job
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
EV_CALL = 2  # a deferred engine call (cancel, finish, requeue, set_node_owner at a later time)
EV_ELIGIBLE = 3
EV_SUBMIT = 4  # a submission made while the run goes on (Engine.submit)
EV_CTRL = 5  # a controller's wake-up (autoscalers, operators, the live daemon's intake)
EV_TICK = 6
EV_PASS = 7  # another policy pass: at the same instant after a preemption, or a WakeAt timer
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


class Controller(Protocol):
    """Something outside the policy that acts on the run at times of its choosing.

    Autoscalers, crash injection, the slurm-operator capacity controller and the live daemon's
    intake are controllers: they are not scheduling decisions (the policy still makes those)
    but they change what there is to schedule. ``on_wake`` runs after the ends, node events and
    arrivals of its instant and before that instant's policy pass, and may call ``submit``,
    ``cancel``, ``finish``, ``requeue``, ``node_event`` and ``set_node_owner``. ``next_wake``
    returns a time strictly after ``now`` or None when the controller has nothing more to do
    (a run with a controller that never says None needs ``until``).
    """

    name: str

    def next_wake(self, now: float) -> float | None:
        ...

    def on_wake(self, engine: "Engine", now: float) -> None:
        ...


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
            executor = SimulatedExecutor.for_policy(policy)
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
        #: the policy's submit-time view of a request (Slurm fills in slurm.conf's defaults),
        #: applied once to every workload before it becomes a job
        self._resolve = getattr(policy, "resolve_request", None)
        for wl in sorted(workloads, key=lambda w: (w.submit_time, w.id)):
            job = self._job_of(wl)
            self.jobs[wl.id] = job
            self._arrivals.append(job)
        self.pending: dict[int, Job] = {}
        self.active: dict[int, Job] = {}
        self.reserved: dict[int, Job] = {}  # PENDING jobs holding a Reserve (admitted, unplaced)
        self.suspended: dict[int, Job] = {}  # SUSPENDED jobs (hold GPUs and memory, not CPUs)
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
        # Loop state kept between ``run_until`` calls.
        self._started = False
        self._next_arrival = 0
        self._loop_state = (0, 0, -1, 0, False)  # idle ticks, passes, placed at last tick, calls, woken
        self._arrived: list[Job] = []
        self._poked = -1.0  # the instant for which an extra policy pass is already queued
        self._snapshot = Snapshot(0.0, pool, self.nodes, self.pending, self.active, self.jobs, reserved=self.reserved,
                                  suspended=self.suspended, grace=self._grace)

    # ----------------------------------------------------------------- event plumbing
    def _push(self, time: float, kind: int, a, b) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (time, kind, self._seq, a, b))

    def _log(self, time: float, what: str, job_id: int, detail: str = "") -> None:
        if self.record_events:
            self.events.append((time, what, job_id, detail))

    # ----------------------------------------------------------------- main loop
    def run(self) -> RunOutput:
        """Replay every event to the end of the run (or ``until``) and return what happened."""
        self._loop(math.inf)
        if self.check:
            self._check_final()
        return self.output()

    def output(self) -> RunOutput:
        """What the run produced so far (the live daemon reads it while the run goes on)."""
        return RunOutput(self.pool, self.policy.name, list(self.jobs.values()), self.timeline, self.events, self.now)

    def run_until(self, t: float) -> None:
        """Process every event at or before ``t``, then return; the clock stands at ``t``.

        The live daemon steps the run with the wall clock this way; later calls continue
        where this one stopped, and submissions may arrive in between.
        """
        self._loop(t)
        if t > self.now and t != math.inf:
            self.now = t
            self.clock.t = t

    def next_event_time(self) -> float | None:
        """When something is next due (an end, arrival, wake-up or tick); None when nothing is."""
        t = self._heap[0][0] if self._heap else math.inf
        if self._next_arrival < len(self._arrivals):
            t = min(t, self._arrivals[self._next_arrival].submit)
        return None if t == math.inf else t

    def _loop(self, limit: float) -> None:
        """The event loop: ask the policy once per instant at which something is waiting.

        This loop runs a few hundred thousand times per run, so it keeps what it touches in
        locals and allocates nothing per instant beyond the timeline row. Its few counters live
        on the engine between calls so that ``run_until`` can resume it.
        """
        policy = self.policy
        decide = policy.decide
        tick = policy.tick_interval
        if not self._started:
            self._started = True
            if tick:
                self._push(0.0, EV_TICK, 0, None)
        arrivals = self._arrivals
        n_arrivals = len(arrivals)
        next_arrival = self._next_arrival
        t_arr = arrivals[next_arrival].submit if next_arrival < n_arrivals else math.inf
        heap = self._heap
        heappop = heapq.heappop
        pending = self.pending
        active = self.active
        snapshot = self._snapshot
        clock = self.clock
        timeline_append = self.timeline.append
        events_append = self.events.append if self.record_events else None
        until = self.until
        if until is not None and until < limit:
            limit = until
        finish = self._finish
        inf = math.inf
        idle_ticks, passes, placed_at_last_tick, calls, woken = self._loop_state
        arrived: list[Job] = self._arrived
        while True:
            t_heap = heap[0][0] if heap else inf
            t = t_heap if t_heap < t_arr else t_arr
            if t == inf or t > limit:
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
            # Resources freed and node changes first, then arrivals, then controllers and ticks.
            if t_heap == t:
                while heap and heap[0][0] == t and heap[0][1] <= EV_ELIGIBLE:
                    _, kind, _, a, b = heappop(heap)
                    if kind == EV_END and a.token == b[0]:  # the hot case, inline
                        if a.state == RUNNING:
                            finish(a, t, b[1])
                    else:
                        self._early_event(kind, a, b, t)
            if t_arr == t:
                while True:
                    job = arrivals[next_arrival]
                    next_arrival += 1
                    if job.final_state is None:  # else cancelled before it arrived
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
                elif kind == EV_SUBMIT:
                    if a.final_state is not None:
                        continue  # cancelled before it arrived
                    pending[a.id] = a
                    arrived.append(a)
                    self._changed |= CHANGED_ARRIVED
                    if events_append is not None:
                        events_append((t, "submitted", a.id, ""))
                    if a.eligible > t:
                        self._push(a.eligible, EV_ELIGIBLE, a.id, None)
                elif kind == EV_CTRL:
                    self._wake_controller(a, t)
                else:  # an end, node event, call or eligibility a controller queued for now
                    self._early_event(kind, a, b, t)
            if pending or self._placing or woken or self.suspended:
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
        self._next_arrival = next_arrival
        self._loop_state = (idle_ticks, passes, placed_at_last_tick, calls, woken)
        self._arrived = arrived

    def _early_event(self, kind: int, a, b, t: float) -> None:
        """Apply an event of the kinds that come before arrivals at an instant."""
        if kind == EV_END:
            if a.token == b[0]:
                if a.state == RUNNING:
                    self._finish(a, t, b[1])
            elif b[0] < 0 and self._grace.get(a.id) is b[1]:
                self._grace_end(a, t)
        elif kind == EV_NODE:
            self._node_event(a, b[0], b[1], t)
        elif kind == EV_CALL:
            a(*b)
        else:
            self._changed |= CHANGED_ELIGIBLE

    # ----------------------------------------------------------------- calls from outside the policy
    def _at(self, at: float | None) -> float:
        t = self.now if at is None else float(at)
        if t < self.now:
            raise GpupoolError(f"cannot act at t={t:g}: the run is already at t={self.now:g}")
        return t

    def _later(self, at: float | None, fn, *args) -> bool:
        """Run ``fn(*args, t)`` now when ``at`` is now, else schedule it; True when deferred."""
        t = self._at(at)
        if t > self.now:
            self._push(t, EV_CALL, fn, (*args, t))
            return True
        fn(*args, t)
        self._poke(t)
        return False

    def _poke(self, t: float) -> None:
        """Something changed outside a policy pass: make sure one follows at this instant."""
        if self._poked != t:
            self._poked = t
            self._push(t, EV_PASS, 0, None)

    def _job_of(self, wl: Workload, recovered: bool = False) -> Job:
        """A new job for ``wl`` as the policy takes it in (``resolve_request``, when it has one).
        ``recovered``: a job a restarted daemon takes back, accepted before (the policy does not
        apply its submit-time partition rules again)."""
        if self._resolve is None:
            return Job(wl)
        return Job(self._resolve(wl, recovered=True) if recovered else self._resolve(wl))

    def submit(self, wl: Workload, at: float | None = None, *, recovered: bool = False) -> Job:
        """Add a workload that arrives at ``at`` (default: now) while the run goes on.

        Its ``submit_time`` is taken as ``at``. Ids must stay unique within the run.
        ``recovered``: see ``_job_of``.
        """
        if wl.id in self.jobs:
            raise GpupoolError(f"workload id {wl.id} is already in this run")
        t = self._at(at if at is not None else max(self.now, wl.submit_time))
        job = self._job_of(wl, recovered)
        job.submit = t
        job.eligible = t if wl.begin_time is None else max(t, wl.begin_time)
        self.jobs[wl.id] = job
        self._push(t, EV_SUBMIT, job, None)
        return job

    def adopt(self, wl: Workload, placement: tuple, *, started: float, submitted: float,
              time_limit: float | None = None, partition: str | None = None, requeues: int = 0,
              cpu_share: int = 1, recovered: bool = True) -> Job:
        """Register ``wl`` as already running on ``placement`` since ``started`` (a live daemon
        restarting finds its processes still alive). The placement is taken at once, before any
        policy pass, so nobody else can be given those devices; the executor's ``launch`` is
        called as for any start and must re-attach to the process, not spawn one. ``cpu_share``:
        as ``Start.cpu_share`` (the policy's ``cpu_share_of`` for a job sharing CPUs). The job
        was accepted before: by default it is taken in as ``recovered`` (``_job_of``); False
        where its partitions as it landed in them are not known."""
        if wl.id in self.jobs:
            raise GpupoolError(f"workload id {wl.id} is already in this run")
        job = self._job_of(wl, recovered)
        job.submit = submitted
        job.eligible = self.now
        job.requeues = requeues
        self.jobs[wl.id] = job
        self.pending[wl.id] = job
        # (a node range, a walked --gpus job among them, may run on fewer pods than its most)
        partial = job.pods_needed <= len(placement) < job.pods_total
        self._start(Start(wl.id, placement, partial=partial, time_limit=time_limit, partition=partition,
                          via="adopted", cpu_share=cpu_share), self.now)
        # The process began before this engine existed: its run segment starts then.
        job.start = job.first_start = job.admitted_at = started
        return job

    def cancel(self, job_id: int, at: float | None = None, state: str = "CANCELLED", reason: str = "") -> None:
        """End a job from outside the policy (a user's scancel, a scale-down): a pending job
        leaves the queue, a running or placing one is stopped and its resources freed."""
        self._job(job_id)
        self._later(at, self._cancel_now, job_id, state, reason)

    def _cancel_now(self, job_id: int, state: str, reason: str, t: float) -> None:
        job = self.jobs[job_id]
        if job.final_state is not None:
            return  # it ended before the deferred cancel came due: nothing left to cancel
        if job.state == PENDING:
            if self.pending.pop(job.id, None) is not None:
                self._pending_removed += 1
            self._unreserve(job)
        else:
            if self._grace:
                self._grace.pop(job.id, None)
            self.executor.stop(job, t, reason or state.lower())
            ran = self._release(job, t)
            job.remaining = max(0.0, job.remaining - ran)
        job.end_reason = reason
        self._final(job, t, state)

    def finish(self, job_id: int, state: str, at: float | None = None) -> bool:
        """Record an end that happened outside the engine (a live process exited, a service
        replica crashed). False when the job was not running (it already ended or was stopped),
        so a late report from an executor cannot end a job twice."""
        self._job(job_id)
        t = self._at(at)
        if t > self.now:
            self._push(t, EV_CALL, self._finish_if_running, (job_id, state, t))
            return True
        self._poke(t)
        return self._finish_if_running(job_id, state, t)

    def _finish_if_running(self, job_id: int, state: str, t: float) -> bool:
        job = self.jobs[job_id]
        if job.state != RUNNING:
            return False
        if self._grace:
            self._grace.pop(job.id, None)
        self._finish(job, t, state)
        return True

    def requeue(self, job_id: int, at: float | None = None, delay: float = 0.0, reason: str = "") -> None:
        """Put a running or placing job back in the queue (work since its last checkpoint is
        lost), as a node failure with requeue does; the live daemon uses it for processes that
        died with it."""
        self._job(job_id)
        self._later(at, self._requeue_now, job_id, delay, reason)

    def _requeue_now(self, job_id: int, delay: float, reason: str, t: float) -> None:
        job = self.jobs[job_id]
        if job.state not in (RUNNING, PLACING, SUSPENDED):
            return
        was_running = job.state in (RUNNING, SUSPENDED)
        held = job.held_gpus
        self.executor.stop(job, t, reason or "requeued")
        ran = self._release(job, t)
        if was_running:
            self._account_lost_work(job, ran, held)
        self._requeue(job, t, delay)

    def node_event(self, node: str, event: str, at: float | None = None, reason: str = "") -> None:
        """Take a node down or up, drain or resume it (``NODE_EVENTS``), now or at ``at``."""
        if node not in self.nodes.index:
            raise GpupoolError(f"node event names node {node!r}, which the pool does not have")
        if event not in NODE_EVENTS:
            raise GpupoolError(f"unknown node event {event!r}; expected one of {', '.join(NODE_EVENTS)}")
        t = self._at(at)
        idx = self.nodes.index[node]
        if t > self.now:
            self._push(t, EV_NODE, idx, (event, reason))
        else:
            self._node_event(idx, event, reason, t)
            self._poke(t)

    def set_node_owner(self, node: str, owner: str | None, at: float | None = None) -> None:
        """Tag a node with the side of the pool it serves now (policies read ``nodes.owner``)."""
        if node not in self.nodes.index:
            raise GpupoolError(f"set_node_owner names node {node!r}, which the pool does not have")
        self._later(at, self._set_owner_now, self.nodes.index[node], owner)

    def _set_owner_now(self, idx: int, owner: str | None, t: float) -> None:
        if self.nodes.owner[idx] == owner:
            return
        self.nodes.owner[idx] = owner
        self._changed |= CHANGED_NODES
        self._log(t, "node_owner", -1, f"{self.nodes.names[idx]} {owner or '-'}")

    def add_controller(self, ctrl: Controller) -> None:
        """Register a controller; it is first woken at ``ctrl.next_wake(now)``."""
        first = ctrl.next_wake(self.now)
        if first is not None:
            self._push(self._at(first), EV_CTRL, ctrl, None)

    def _wake_controller(self, ctrl: Controller, t: float) -> None:
        ctrl.on_wake(self, t)
        nxt = ctrl.next_wake(t)
        if nxt is not None:
            if nxt <= t:
                raise InvariantViolation(
                    f"controller {getattr(ctrl, 'name', ctrl)!r} asked to wake at {nxt:g}, not after now ({t:g})")
            self._push(nxt, EV_CTRL, ctrl, None)

    def _job(self, job_id: int) -> Job:
        job = self.jobs.get(job_id)
        if job is None:
            raise GpupoolError(f"no job {job_id} in this run")
        return job

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
            elif cls is Suspend:
                self._suspend(self._job(d.job_id), t, d.reason)
            elif cls is Resume:
                self._resume(self._job(d.job_id), t, d.reason)
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
            if nodes.memory_overcommit:  # a differential replay's real start: one start each
                nodes.overcommit_now = job.id in nodes.memory_overcommit
                nodes.memory_overcommit.discard(job.id)
        if d.suspended:
            if placed < job.pods_needed:  # (a node range may start on fewer pods than its most)
                raise InvariantViolation(f"job {job.id}: a suspended start must place the whole job")
            if d.cpu_share > 1:
                raise InvariantViolation(f"job {job.id}: a start sharing CPUs cannot be suspended")
            nodes.allocate_held(placement)
        elif d.cpu_share > 1:
            x = job._extras()
            group = d.partition or ""
            if x.cpu_share is not None and x.cpu_share != group:
                raise InvariantViolation(f"job {job.id}: pods placed in two CPU-sharing groups")
            x.cpu_share = group
            nodes.allocate_shared(placement, group, d.cpu_share)
        else:
            nodes.allocate(placement)
        if self.check:
            nodes.overcommit_now = False
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
            if d.suspended:
                self._suspend(job, t, "at start", took_cpu=False)
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
        x = job._x
        if x is not None:  # a new run segment: its suspensions start from zero
            x.suspended_s = 0.0
            x.suspended_at = None
        job.token += 1
        self._running += 1
        self._running_gpus += job.held_gpus
        end, state = self._launch(job, t)
        if end != math.inf:  # inf: a live executor reports the end itself (Engine.finish)
            self._push(end, EV_END, job, (job.token, state))
        if self.record_events:
            head = f"{job.via} " if job.via else ""
            self.events.append((t, "started", job.id, head + self.placement_text(job.placement)))

    def _release(self, job: Job, t: float) -> float:
        """Free the job's resources; return the seconds it ran in this run segment (suspended
        time excluded)."""
        state = job.state
        x = job._x
        if x is not None and x.cpu_share is not None:  # CPUs shared: never given back on suspension
            self.nodes.release_shared(job.placement, x.cpu_share)
            x.cpu_share = None
        elif state == SUSPENDED:
            self.nodes.release_held(job.placement)
        else:
            self.nodes.release(job.placement)
        self._changed |= CHANGED_ENDED
        self._allocated_gpus -= job.held_gpus
        del self.active[job.id]
        if self._grace and self._grace.pop(job.id, None) is not None:
            job.grace_until = None
        ran = 0.0
        if state == RUNNING:
            ran = t - job.start
            x = job._x
            if x is not None:
                ran -= x.suspended_s
            job.gpu_s_used += ran * job.held_gpus
            self._running -= 1
            self._running_gpus -= job.held_gpus
        elif state == SUSPENDED:
            x = job._x
            ran = x.suspended_at - job.start - x.suspended_s
            job.gpu_s_used += ran * job.held_gpus
            self._end_suspension(job, t)
        else:  # PLACING: the gang never formed; all of it was idle holding
            job.gpu_s_idle_held += (t - job.placing_since) * job.held_gpus
            job.placing_since = None
            self._placing -= 1
        return ran

    def _finish(self, job: Job, t: float, state: str) -> None:
        self._release(job, t)
        job.remaining = 0.0 if state != "TIMEOUT" else max(0.0, job.remaining - job.run_time(t))
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
        if job is None or job.state not in (RUNNING, PLACING, SUSPENDED):
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
        was_running = job.state in (RUNNING, SUSPENDED)
        held = job.held_gpus
        self.executor.stop(job, t, d.reason or "preempted")
        ran = self._release(job, t)
        job.preemptions += 1
        ev = job.evictions
        ev[d.reason] = ev.get(d.reason, 0) + 1
        self._log(t, "preempted", job.id, f"{d.mode} {d.reason}".strip())
        if was_running:
            self._account_lost_work(job, ran, held)
        if d.mode == CANCEL or job.wl.ends_on_eviction:
            self._final(job, t, "PREEMPTED")
            job.end_reason = d.reason
            return
        self._requeue(job, t, d.requeue_delay)

    def _suspend(self, job: Job, t: float, reason: str = "", took_cpu: bool = True) -> None:
        """RUNNING -> SUSPENDED: no progress, CPUs given back, GPUs and memory kept (its own and
        nobody else's); its pending end event is dropped (the token moves on)."""
        if job.state != RUNNING:
            raise InvariantViolation(f"policy suspended job {job.id}, which is {job.state}, not RUNNING")
        fn = getattr(self.executor, "suspend", None)
        if fn is None:
            raise GpupoolError(f"executor {type(self.executor).__name__} cannot suspend jobs (job {job.id})")
        if took_cpu and (job._x is None or job._x.cpu_share is None):  # shared CPUs stay held
            self.nodes.give_cpu(job.placement)
        x = job._extras()
        x.suspended_at = t
        x.suspensions += 1
        job.token += 1
        job.state = SUSPENDED
        self._running -= 1
        self._running_gpus -= job.held_gpus
        self.suspended[job.id] = job
        fn(job, t)
        if self.check:
            self._check_owned(job)
        self._log(t, "suspended", job.id, reason)

    def _resume(self, job: Job, t: float, reason: str = "") -> None:
        """SUSPENDED -> RUNNING on the same allocation; the end is planned again from the work
        and time limit left (suspended time does not count)."""
        if job.state != SUSPENDED:
            raise InvariantViolation(f"policy resumed job {job.id}, which is {job.state}, not SUSPENDED")
        fn = getattr(self.executor, "resume", None)
        if fn is None:
            raise GpupoolError(f"executor {type(self.executor).__name__} cannot resume jobs (job {job.id})")
        if job._x.cpu_share is None:
            self.nodes.take_cpu(job.placement)
        self._end_suspension(job, t)
        job.state = RUNNING
        self._running += 1
        self._running_gpus += job.held_gpus
        job.token += 1
        self._placed_pods += 1  # progress: a run with only ticks left is not idle while jobs resume
        end, state = fn(job, t)
        if end != math.inf:
            self._push(end, EV_END, job, (job.token, state))
        if self.check:
            self._check_owned(job)
        self._log(t, "resumed", job.id, reason)

    def _end_suspension(self, job: Job, t: float) -> None:
        """Close the job's current suspension at ``t`` (resumed, or released while suspended):
        its seconds count as suspended and as GPUs held idle."""
        x = job._x
        dt = t - x.suspended_at
        x.suspended_s += dt
        x.suspended_at = None
        job.gpu_s_idle_held += dt * job.held_gpus
        del self.suspended[job.id]

    def _check_owned(self, job: Job) -> None:
        """A suspended or resumed job's GPUs are still allocated, and to no other job."""
        free_mask = self.nodes.free_mask
        for node, mask, _cpu, _mem in job.placement:
            if free_mask[node] & mask:
                raise InvariantViolation(f"job {job.id} ({job.state}): its GPUs {mask:#x} on "
                                         f"{self.nodes.names[node]} are marked free")
        mine = {}
        for node, mask, _cpu, _mem in job.placement:
            mine[node] = mine.get(node, 0) | mask
        for other in self.active.values():
            if other is job:
                continue
            for node, mask, _cpu, _mem in other.placement:
                if mine.get(node, 0) & mask:
                    raise InvariantViolation(f"jobs {job.id} and {other.id} both hold GPUs "
                                             f"{mine[node] & mask:#x} on {self.nodes.names[node]}")

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
        job.reason = ""  # the reason it waited with before it ran is gone (Slurm: none at a start)
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
        # Node operations are part of the record (audit: why a job ended NODE_FAIL).
        self._log(t, f"node_{event}", -1, f"{nodes.names[node]} {reason}".strip())
        if event == NODE_DOWN:
            nodes.up[node] = False
            victims = [j for j in self.active.values() if any(p[0] == node for p in j.placement)]
            for job in victims:
                was_running = job.state in (RUNNING, SUSPENDED)
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
            nodes.future[node] = False  # (a FUTURE node brought up is in the cluster from now on)
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
            got = mask.bit_count()
            if ps.split_gpus and ps.split and ps.gpus:  # GPUs per task: those of the pod's tasks
                # (the pod's CPUs may be rounded up to whole cores: its tasks' CPUs and less
                # than a core more)
                tasks, odd = divmod(got, ps.gpus)
                cpt = (ps.cpus_per_task or 1) * 1000
                if odd or not tasks or not tasks * cpt <= cpu < tasks * cpt + self.nodes.cpu_step[node]:
                    raise InvariantViolation(f"job {job.id}: pod {offset + k} got {got} GPUs and {cpu // 1000} "
                                             f"CPUs for tasks of {ps.gpus} GPUs and {cpt // 1000} CPUs")
            elif ps.spread:  # --gpus dealt out: one at least (none where the nodes outnumber them)
                if not got and not (ps.split_tasks > ps.gpus_per_job and offset + len(placement) > ps.gpus_per_job):
                    raise InvariantViolation(f"job {job.id}: pod {offset + k} got no GPU of the job's {ps.gpus_per_job}")
            elif not ps.exclusive and got != ps.gpus:
                raise InvariantViolation(f"job {job.id}: pod {offset + k} got {got} GPUs, asked {ps.gpus}")
            if ps.gpu_type and self.nodes.gpu_type[node] != ps.gpu_type:
                typed = self.nodes.typed_mask(node, ps.gpu_type)
                if typed is None or (mask & ~typed and not ps.exclusive):  # exclusive: every device
                    raise InvariantViolation(f"job {job.id}: pod given GPUs {mask:#x} on {self.nodes.names[node]}, "
                                             f"not all of the type it asked ({ps.gpu_type})")
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
            if ps.spread and not ps.exclusive and (len(chunk) == ps.count or (ps.walked and chunk)):
                dealt = sum(p[1].bit_count() for p in chunk)
                # (more where the nodes outnumber the GPUs by two or more: ``spread_gpus``)
                if dealt != ps.gpus_per_job and not (dealt > ps.gpus_per_job and len(chunk) > ps.gpus_per_job + 1):
                    raise InvariantViolation(f"job {job.id}: pod set {ps.name!r} got {dealt} GPUs, asked "
                                             f"{ps.gpus_per_job} for the job")

    def _check_final(self) -> None:
        for job in self.jobs.values():
            if job.state in (PENDING, PLACING, RUNNING, SUSPENDED):
                # Waiting, half-placed or suspended jobs may remain (a deadlock is a result, not a bug);
                # a running job always has an end event, so it must have ended.
                if self.until is None and job.state == RUNNING:
                    raise InvariantViolation(f"job {job.id} still {job.state} after the run")
            elif job.final_state != job.state:
                raise InvariantViolation(f"job {job.id}: state {job.state} but final state {job.final_state}")
        if not self.active and not self.nodes.all_free():
            raise InvariantViolation("resources still allocated after every job released them")
