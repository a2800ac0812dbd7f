"""The NodeSet capacity controller: moves nodes between Slurm and the inference fleet.

An engine controller (``Engine.add_controller``): it wakes every ``interval`` seconds (and at
schedule boundaries), decides how many replicas the NodeSet should have — fixed, from a
schedule, or from inference demand — and acts the way slurm-operator does (spec
fleet_and_bridge §2.2):

* scale-in picks victims in the operator's order (idle before busy, earliest pod-deadline —
  the latest expected end of the jobs on the node — first, then the higher ordinal), tags
  them ``slurm-draining`` and drains them in Slurm with a ``slurm-operator:`` reason: no new
  jobs start there, running ones finish or hit their time limit; only once a node is empty
  does it go back to the fleet (owner ``fleet``, resumed). Scale to zero is allowed.
* scale-out takes fleet nodes in ordinal order, idle ones first; a node that still runs
  pods is cordoned (``slurm-joining``) and joins when they are gone (its slurmd pod would
  wait for the GPUs). A scale-out reverses a pending scale-in first.
* demand mode: pending service-replica GPUs that the fleet's free GPUs cannot hold shrink
  the NodeSet by whole nodes; with no such shortage, Slurm jobs waiting and an idle fleet
  node, it grows by one node per check, but not within ``cooldown`` of the last scale-in
  (KEDA's cooldown, so capacity does not flap).

Every tag change is an engine ``node_owner`` event, so the run's events say when each drain
began and ended (``.draining`` turns them into GPU-hours).
"""
from __future__ import annotations

import math

from gpupool.engine.job import RUNNING
from gpupool.formats.slinky import NodeSet, initial_members, member_nodes
from gpupool.model.pool import Pool
from gpupool.model.workload import KIND_SERVICE
from gpupool.policy.operator.membership import (
    DRAINING,
    FLEET,
    JOINING,
    REASON_PREFIX,
    SLURM,
)


class CapacityController:
    """Sizes one NodeSet; see the module docstring."""

    def __init__(self, pool: Pool, nodeset: NodeSet, policy) -> None:
        self.name = f"slurm-operator/{nodeset.name}"
        self.nodeset = nodeset
        self.policy = policy
        self.cap = nodeset.capacity
        self.members = member_nodes(nodeset, pool)
        self.initial = set(initial_members(nodeset, pool))
        self.hi = len(self.members) if self.cap.max_replicas is None else min(self.cap.max_replicas, len(self.members))
        self.lo = min(self.cap.min_replicas, self.hi)
        self.engine = None
        self.started = False
        self.last_scale_in = -math.inf
        self.we_drained: set[str] = set()
        #: (time, action, node) for every step this controller took, for tests and reports.
        self.log: list[tuple[float, str, str]] = []

    # ------------------------------------------------------------------ controller protocol
    def next_wake(self, now: float) -> float | None:
        if not self.started:
            return now
        eng = self.engine
        moving = any(eng.nodes.owner[eng.nodes.index[n]] in (DRAINING, JOINING) for n in self.members)
        cand = []
        if moving or self.cap.mode == "demand":
            cand.append(now + self.cap.interval)
        if self.cap.mode == "schedule":
            nxt = self._next_boundary(now)
            if nxt is not None:
                cand.append(nxt)
        if not cand:
            return None
        if not moving and not eng.active and not self._arrivals_left():
            # nothing runs and nothing will arrive: wake again only if time alone can change a
            # decision (a cooldown ending, a schedule step), else let the run end
            if self.cap.mode == "demand" and eng.pending and now < self.last_scale_in + self.cap.cooldown:
                return self.last_scale_in + self.cap.cooldown
            if self.cap.mode == "schedule" and eng.pending:
                nxt = self._next_boundary(now)
                return nxt if nxt is not None and self._scheduled(nxt) != self._scheduled(now) else None
            return None
        return min(cand)

    def on_wake(self, engine, now: float) -> None:
        self.engine = engine
        if not self.started:
            self.started = True
            for n in self.members:
                engine.set_node_owner(n, SLURM if n in self.initial else FLEET)
        self._settle(now)
        self._scale(now, self.desired(now))
        self._settle(now)

    # ------------------------------------------------------------------ state
    def _arrivals_left(self) -> bool:
        """Whether some job of the run is neither finished nor running: not yet submitted, or
        waiting. Waiting jobs count too, so the controller keeps waking while work is queued
        (scale-out may still let it run); only scanned when nothing runs."""
        eng = self.engine
        return any(j.final_state is None and j.id not in eng.active for j in eng.jobs.values())

    def _owner(self, node: str) -> str | None:
        nodes = self.engine.nodes
        return nodes.owner[nodes.index[node]]

    def _busy(self) -> dict[int, float]:
        """Node index -> latest expected end of the jobs on it (its pod-deadline)."""
        out: dict[int, float] = {}
        for job in self.engine.active.values():
            if job.state == RUNNING and job.start is not None:
                end = job.start + (job.time_limit if job.time_limit is not None else math.inf)
            else:
                end = math.inf
            for p in job.placement:
                out[p[0]] = max(out.get(p[0], -math.inf), end)
        return out

    def replicas(self) -> int:
        """Replicas now: nodes with slurmd (lent and not draining) plus those joining."""
        return sum(1 for n in self.members if self._owner(n) in (SLURM, JOINING))

    # ------------------------------------------------------------------ desired size
    def _scheduled(self, now: float) -> int:
        sched = self.cap.schedule
        t = now % self.cap.period if self.cap.period else now
        value = None
        for when, n in sched:
            if when <= t:
                value = n
        if value is None:
            value = sched[-1][1] if self.cap.period else (self.nodeset.replicas or 0)
        return value

    def _next_boundary(self, now: float) -> float | None:
        sched = self.cap.schedule
        if self.cap.period:
            base = math.floor(now / self.cap.period) * self.cap.period
            for cycle in (base, base + self.cap.period):
                for when, _ in sched:
                    if cycle + when > now:
                        return cycle + when
            return None
        return next((when for when, _ in sched if when > now), None)

    def desired(self, now: float) -> int:
        cur = self.replicas()
        mode = self.cap.mode
        if mode == "fixed":
            want = self.nodeset.replicas if self.nodeset.replicas is not None else len(self.members)
        elif mode == "schedule":
            want = self._scheduled(now)
        else:
            want = self._demand(now, cur)
        return max(self.lo, min(self.hi, want))

    def _demand(self, now: float, cur: int) -> int:
        eng = self.engine
        nodes = eng.nodes
        pol = self.policy
        want_gpus = sum(j.total_gpus for j in eng.pending.values()
                        if j.wl.kind == KIND_SERVICE and j.eligible <= now and pol.is_kubernetes(j))
        on_slurm = pol.slurm_nodes(nodes)
        fleet_free = sum(nodes.free_gpus[i] for i in range(len(nodes))
                         if not on_slurm[i] and nodes.owner[i] != JOINING and nodes.up[i] and not nodes.drain[i])
        short = want_gpus - fleet_free
        if short > 0:
            per_node = max((nodes.gpu_total[nodes.index[n]] for n in self.members), default=1) or 1
            return cur - math.ceil(short / per_node)
        slurm_waiting = any(not pol.is_kubernetes(j) and j.eligible <= now for j in eng.pending.values())
        if slurm_waiting and not want_gpus and now >= self.last_scale_in + self.cap.cooldown:
            busy = self._busy()
            if any(self._owner(n) == FLEET and nodes.index[n] not in busy for n in self.members):
                return cur + 1
        return cur

    # ------------------------------------------------------------------ acting
    def _scale(self, now: float, want: int) -> None:
        eng = self.engine
        idx = eng.nodes.index
        cur = self.replicas()
        if want < cur:
            drop = cur - want
            for n in [m for m in reversed(self.members) if self._owner(m) == JOINING][:drop]:
                self._set(now, n, FLEET, "cancel-join")
                self._resume(now, n)
                drop -= 1
            busy = self._busy()
            lent = [m for m in self.members if self._owner(m) == SLURM]
            order = {m: k for k, m in enumerate(self.members)}
            lent.sort(key=lambda m: (idx[m] in busy, busy.get(idx[m], -math.inf), -order[m]))
            for n in lent[:drop]:
                self._set(now, n, DRAINING, "drain")
                if not eng.nodes.drain[idx[n]]:
                    eng.node_event(n, "drain", reason=REASON_PREFIX + "scale-in")
                    self.we_drained.add(n)
                self.last_scale_in = now
        elif want > cur:
            add = want - cur
            for n in [m for m in self.members if self._owner(m) == DRAINING][:add]:
                self._set(now, n, SLURM, "cancel-drain")
                self._resume(now, n)
                add -= 1
            if add <= 0:
                return
            busy = self._busy()
            fleet = [m for m in self.members if self._owner(m) == FLEET]
            used = {i: 0 for i in range(len(eng.nodes))}
            for job in eng.active.values():
                for p in job.placement:
                    used[p[0]] += p[1].bit_count() or 1
            fleet.sort(key=lambda m: (idx[m] in busy, used[idx[m]], self.members.index(m)))
            for n in fleet[:add]:
                if idx[n] in busy:
                    self._set(now, n, JOINING, "cordon")
                    if not eng.nodes.drain[idx[n]]:
                        eng.node_event(n, "drain", reason=REASON_PREFIX + "joining NodeSet " + self.nodeset.name)
                        self.we_drained.add(n)
                else:
                    self._set(now, n, SLURM, "join")

    def _settle(self, now: float) -> None:
        """Finish moves whose nodes have emptied: drained nodes go to the fleet, cordoned
        fleet nodes join the NodeSet."""
        busy = self._busy()
        idx = self.engine.nodes.index
        for n in self.members:
            owner = self._owner(n)
            if owner in (DRAINING, JOINING) and idx[n] not in busy:
                self._set(now, n, FLEET if owner == DRAINING else SLURM, "returned" if owner == DRAINING else "joined")
                self._resume(now, n)

    def _set(self, now: float, node: str, owner: str, action: str) -> None:
        self.engine.set_node_owner(node, owner)
        self.log.append((now, action, node))

    def _resume(self, now: float, node: str) -> None:
        if node in self.we_drained:
            self.we_drained.discard(node)
            self.engine.node_event(node, "resume", reason=REASON_PREFIX + "done")
