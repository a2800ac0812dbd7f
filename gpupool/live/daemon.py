"""The live daemon: the engine stepped by the wall clock, fed by the API, enacted by processes.

One thread owns the engine. API handlers never touch it: they queue a function and wait for
its result (:meth:`Daemon.call`). Each loop turn (1) runs the queued submissions, then cancels
and queries, (2) reports process exits to the engine, (3) steps the engine to now (the policy
starts jobs, the executor spawns them), (4) writes everything the turn changed to the ledger in
one transaction (group commit), and only then (5) answers the callers: no acknowledged
submission can be lost. The turn's submissions are committed on their own before step (3), so
a process never runs for a job the ledger does not hold. A crash at any point leaves the ledger
at a turn boundary (or between those two commits); :meth:`Daemon.recover` rebuilds the engine
from it on the next start: a job recorded as queued whose process is alive is re-adopted, one
whose process already ended is recorded with its exit status, never run again.
"""
from __future__ import annotations

import concurrent.futures
import json
import math
import os
import pwd
import select
import signal
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from gpupool.engine.core import Engine
from gpupool.engine.job import FINAL_STATES, PENDING, PLACING, RUNNING
from gpupool.engine.nodes import mask_indices
from gpupool.engine.policy_api import make_policy
from gpupool.ledger.record import JobTres
from gpupool.errors import GpupoolError
from gpupool.formats.pool_dir import load_pool
from gpupool.formats.sbatch import SbatchJob, parse_sbatch_text, sbatch_to_workload
from gpupool.ledger.store import Ledger
from gpupool.live import fairshare, proc
from gpupool.live.adopt import adopt_running
from gpupool.live.autoscale import ServiceScaler, metric_source, scale_down_order
from gpupool.live.executor import LiveExecutor, Submission
from gpupool.live.host import LiveHost, live_host, never_fits
from gpupool.live.services import parse_services, replica_workload, replica_workloads
from gpupool.live.state import Batch, LiveStore, _sacct_id, ledger_job_row

DEFAULT_STATE_DIR = Path("~/.local/share/gpupool/live")
#: sbatch's prefix for a job slurmctld refuses at submission; Slurm's own message follows it.
SUBMIT_FAILED = "Batch job submission failed: "


class Refused(GpupoolError):
    """A request the daemon will not carry out (bad script, impossible request, not allowed)."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class SubmitRequest:
    """One script handed in: its text, where it came from and the submitter's context."""

    script: str
    source: str = ""
    cwd: str = "/"
    env: dict[str, str] = field(default_factory=dict)
    #: "sbatch" (a batch script) or "service" (Deployment / gpupool Service YAML).
    kind: str = "sbatch"


@dataclass
class Caller:
    """Who is asking: a Unix user (peer credentials on the socket, or a token's owner)."""

    user: str
    uid: int
    gid: int
    #: Identified by a bearer token over TCP (no peer credentials): never a superuser.
    via_token: bool = False

    @classmethod
    def from_uid(cls, uid: int) -> Caller:
        try:
            pw = pwd.getpwuid(uid)
            return cls(pw.pw_name, uid, pw.pw_gid)
        except KeyError:
            return cls(str(uid), uid, uid)

    @classmethod
    def from_name(cls, name: str) -> Caller:
        try:
            pw = pwd.getpwnam(name)
            return cls(name, pw.pw_uid, pw.pw_gid)
        except KeyError:
            return cls(name, os.getuid(), os.getgid())


class Daemon:
    """A live pool on this host; see the module docstring."""

    def __init__(self, pool_path: str | Path, *, db: str | None = None, state_dir: str | Path | None = None,
                 policy: str = "slurm", options: dict | None = None, devices: str = "auto",
                 node: str | None = None) -> None:
        pool = load_pool(pool_path)
        self.pool_path = str(pool_path)
        self.host: LiveHost = live_host(pool, node=node, devices=devices)
        self.origin = f"live:{pool.name}"
        self.ledger = Ledger(db)
        self.store = LiveStore(self.ledger, self.origin)
        self.state_dir = Path(state_dir or DEFAULT_STATE_DIR).expanduser()
        self.spool = self.state_dir / "spool" / pool.name
        self.spool.mkdir(parents=True, exist_ok=True)
        self.policy_name = policy
        self.policy = make_policy(policy, self.host.pool, options)
        self._mono0 = time.monotonic()
        self.epoch = time.time()
        slurm = self.host.pool.slurm
        kill_wait = float(slurm.params.get("KillWait") or 30) if slurm is not None else 30.0
        otl = float(getattr(self.policy, "over_time_limit", 0.0) or 0.0)
        #: the account and QOS a job's records and environment show: those slurmctld would give
        #: it (the user's default account, the association's default QOS), as sacct shows them
        #: and as the policy charges fair share, not the blanks of a job that named none
        self._tres = JobTres(self.host.pool, policy, str((options or {}).get("kubernetes", "auto")))
        self.executor = LiveExecutor(
            self.host, self.spool, now=self.clock, wall=self.wall, kill_wait=kill_wait,
            over_time_limit=otl, check_interval=float(getattr(self.policy, "time_limit_check_interval", 0.0) or 0.0),
            over_time_limit_of=getattr(self.policy, "over_time_limit_of", None), account_qos=self._tres.account_qos)
        self.engine = Engine(self.host.pool, [], self.policy, executor=self.executor)
        self.operators = self.host.operators()
        part = slurm.default_partition() if slurm is not None else None
        self.default_partition = part.name if part is not None else ""
        self.daemon_uid = os.getuid()
        self.next_id = 1
        self._intake: deque = deque()
        self._lock = threading.Lock()
        self._r, self._w = os.pipe()
        os.set_blocking(self._r, False)
        os.set_blocking(self._w, False)
        self._stop = threading.Event()
        self._seen = 0  # engine events already handled
        self._open: dict[int, tuple[float, list[int]]] = {}  # job -> (start wall, GPU indices) of its open run
        self._exit_codes: dict[int, str] = {}
        self.submitted_total = 0
        self.started_total = 0
        self.recovered: dict[str, int] = {}
        self.ready = threading.Event()
        self.submit_latency: deque = deque(maxlen=10000)  # (submit wall, start wall) per job, for benchmarks
        self._submit_wall: dict[int, float] = {}
        self.scalers: dict[int, ServiceScaler] = {}  # first replica's job id -> autoscaled service
        #: the Slurm policy's fair-share usage, followed each turn and saved with it (None: the
        #: policy keeps none); see ``gpupool/live/fairshare.py``
        self.journal: fairshare.UsageJournal | None = None
        #: what the last start did with the saved usage (health's ``fairshare``)
        self.usage_restore: dict = {}

    # ------------------------------------------------------------------ time
    def clock(self) -> float:
        """Engine time: seconds since this daemon started (monotonic, never behind the engine)."""
        t = time.monotonic() - self._mono0
        return t if t > self.engine.now else self.engine.now

    def wall(self, t: float) -> float:
        return self.epoch + t

    # ------------------------------------------------------------------ cross-thread calls
    def call(self, fn: Callable, *, submit: bool = False) -> concurrent.futures.Future:
        """Run ``fn(batch, now)`` on the daemon thread at the next turn; the future gets its result
        once the turn's transaction is committed. ``submit=True`` marks a submission: it returns
        ``{"ids", "workloads", "submit_wall"}``, the workloads enter the engine, the caller gets the ids."""
        fut: concurrent.futures.Future = concurrent.futures.Future()
        with self._lock:
            self._intake.append((submit, fn, fut))
        try:
            os.write(self._w, b"x")
        except BlockingIOError:
            pass
        return fut

    def stop(self) -> None:
        self._stop.set()
        try:
            os.write(self._w, b"x")
        except (BlockingIOError, OSError):
            pass

    # ------------------------------------------------------------------ the loop
    def run_forever(self) -> None:
        self.recover()
        self.ready.set()
        try:
            while not self._stop.is_set():
                self._wait()
                self.turn()
        finally:
            self.executor.shutdown()

    def _wait(self) -> None:
        now = self.clock()
        due = [t for t in (self.engine.next_event_time(), self.executor.next_due()) if t is not None]
        due += [sc.next_due for sc in self.scalers.values()]
        timeout = 0.05  # process exits are polled at this rate
        if due:
            timeout = max(0.0, min(timeout, min(due) - now))
        if self._intake:
            timeout = 0.0
        select.select([self._r], [], [], timeout)
        try:
            while os.read(self._r, 4096):
                pass
        except BlockingIOError:
            pass

    def turn(self) -> None:
        """One loop turn; everything it changed is committed in one transaction before any
        caller hears back, so an acknowledged submission or cancel is durable."""
        with self._lock:
            items = list(self._intake)
            self._intake.clear()
        now = self.clock()
        batch = Batch()
        results = []
        # Submissions first: a cancel queued in the same turn then finds its job.
        for s, fn, fut in sorted(items, key=lambda item: not item[0]):
            try:
                res = fn(batch, now)
            except Exception as exc:  # a refused request answers its caller only
                results.append((fut, None, exc))
                continue
            if s:
                for wl in res["workloads"]:
                    job = self.engine.submit(wl, at=now)
                    self._submit_wall[wl.id] = res["submit_wall"]
                    self._landed(batch, wl, job.wl.partition)
                res = res["ids"]
            results.append((fut, res, None))
        if any(s for s, _, _ in items):
            batch.meta["next_job_id"] = str(self.next_id)
            # Submissions are durable before any of them can start: no process ever exists for
            # a job the ledger does not hold, and no job id is handed out twice after a crash.
            self.store.commit(batch)
            batch = Batch()
        for job_id, state, code in self.executor.poll(now):
            self._exit_codes[job_id] = code
            self.engine.finish(job_id, state, at=now)
        scaled = self._autoscale(batch, now) if self.scalers else False
        nxt = self.engine.next_event_time()
        if items or scaled or (nxt is not None and nxt <= now) or self.engine.events:
            self.engine.run_until(now)
        self._record(batch, now)
        if self.journal is not None and self.journal.observe(fairshare.open_segments(self.policy), self.engine.active,
                                                              self.engine.jobs, now):
            batch.meta[fairshare.META_KEY] = self.journal.saved().to_json()
        self.store.commit(batch)
        for fut, res, exc in results:
            fut.set_exception(exc) if exc is not None else fut.set_result(res)

    # ------------------------------------------------------------------ submissions
    def submit_fn(self, requests: list[SubmitRequest], caller: Caller) -> Callable:
        def run(batch: Batch, now: float) -> dict:
            return self._submit(batch, now, requests, caller)
        return run

    def _submit(self, batch: Batch, now: float, requests: list[SubmitRequest], caller: Caller) -> dict:
        prepared = []
        epoch = datetime.fromtimestamp(self.epoch, tz=timezone.utc)
        for req in requests:  # all scripts of one request are checked before any is accepted
            source = req.source or "script"
            if req.kind == "service":
                for spec in parse_services(req.script, source, self.host.pool.kueue):
                    wls = replica_workloads(spec, 0, caller.user, now)
                    metric = None
                    if spec.service.autoscaling.kind != "fixed":
                        metric = metric_source(spec.service.traffic, req.cwd, f"{source}: {spec.service.name} traffic")
                    prepared.append((req, None, spec, wls, metric))
            elif req.kind == "sbatch":
                sb = parse_sbatch_text(req.script, source)
                wls = sbatch_to_workload(sb, id=0, submit_time=now, runtime=math.inf, epoch=epoch)
                prepared.append((req, sb, None, wls, None))
            else:
                raise Refused(f"{source}: unknown submission kind {req.kind!r} (sbatch or service)")
        policy_check = getattr(self.policy, "submit_rejection", None)
        # the jobs a submit limit (MaxSubmitJobs) counts: pending and running ones, then those
        # of this request's earlier scripts
        current = [job.wl for job in self.engine.jobs.values() if job.final_state is None]
        for req, _sb, _spec, wls, _m in prepared:
            for wl in wls:
                why = never_fits(self.host, wl)
                if why is not None:
                    raise Refused(f"{req.source or 'script'}: job refused: {why} "
                                  "(Requested node configuration is not available)")
                # What the policy would reject at submit (slurmctld: no job id, sbatch's error)
                why = policy_check(wl, caller.user, current, len(wls)) if policy_check is not None else None
                if why is not None:
                    raise Refused(f"{req.source or 'script'}: {SUBMIT_FAILED}{why}")
            current += [replace(wl, user=caller.user) for wl in wls]
        ids, out = [], []
        wall_now = self.wall(now)
        for req, sb, spec, wls, metric in prepared:
            first = self.next_id
            self.next_id += len(wls)
            tasks = tuple(wl.array_task_id for wl in wls if wl.array_task_id is not None)
            for k, wl in enumerate(wls):
                jid = first + k
                wl = replace(wl, id=jid, user=caller.user,
                             array_job_id=first if wl.array_job_id is not None else None,
                             source=req.source)
                self._register(batch, req, caller, sb, spec, wl, k, first, tasks, wall_now)
                ids.append(jid)
                out.append(wl)
            if metric is not None:
                sc = ServiceScaler(spec, metric, first, now)
                sc.request, sc.caller = req, caller
                sc.replicas = {first + k: k for k in range(len(wls))}
                self.scalers[first] = sc
                batch.meta[f"service:{first}"] = json.dumps({"start": wall_now})
        self.submitted_total += len(ids)
        return {"ids": ids, "workloads": out, "submit_wall": wall_now}

    def _landed(self, batch: Batch, wl, landed: str | None) -> None:
        """Record the partitions a new job landed in (the policy's submit rules may drop a
        DRAIN or INACTIVE one, or send it to an Alternate; None: the default partition, named
        as it is now): a restart takes the job back in them (``recover``), as slurmctld keeps
        a job's partitions, and its accounting row names them where they differ from those
        it asked for."""
        stored = landed or self.default_partition
        if stored:
            batch.update(wl.id, job_partitions=stored)
        row = batch.ledger_jobs.get(wl.id)
        if landed and landed != wl.partition and row is not None:
            row["partition"] = row["queue"] = landed

    def _register(self, batch: Batch, req: SubmitRequest, caller: Caller, sb, spec, wl, k: int, first: int,
                  tasks: tuple, wall_now: float) -> None:
        """Make ``wl`` a job of this daemon: its submission context and its ledger rows."""
        jid = wl.id
        sub = Submission(jid, sb if sb is not None else SbatchJob(), req.script, caller.user, caller.uid,
                         caller.gid, req.cwd, dict(req.env), array_task_ids=tasks, service=spec, replica=k)
        self.executor.submissions[jid] = sub
        batch.new_jobs.append({
            "daemon": self.origin, "job_id": jid, "state": PENDING, "name": wl.name, "user": caller.user,
            "uid": caller.uid, "gid": caller.gid, "submit": wall_now, "kind": req.kind, "script": req.script,
            "source": req.source, "env": json.dumps(req.env), "cwd": req.cwd,
            "array_job_id": wl.array_job_id if spec is None else first,
            "array_task_id": wl.array_task_id if spec is None else k,
        })
        batch.ledger_jobs[jid] = self._pending_row(wl, wall_now)

    # ------------------------------------------------------------------ autoscaling
    def _autoscale(self, batch: Batch, now: float) -> bool:
        """Let each due autoscaler resize its service: new replica jobs go through the policy
        like any submission; scale-down cancels in ReplicaSet order. Returns whether it acted."""
        acted = False
        for first, sc in list(self.scalers.items()):
            had = len(sc.replicas)
            for jid in list(sc.replicas):
                job = self.engine.jobs.get(jid)
                if job is None or job.final_state is not None:
                    del sc.replicas[jid]
            if had and not sc.replicas:  # every replica cancelled from outside: the service is gone
                del self.scalers[first]
                batch.meta[f"service:{first}"] = json.dumps({"removed": self.wall(now)})
                continue
            if now < sc.next_due:
                continue
            ready = sum(1 for jid in sc.replicas
                        if (run := self.executor.running.get(jid)) is not None and run.ready)
            current = len(sc.replicas)
            d = sc.decide(now, current, ready)
            if d.desired == current:
                continue
            acted = True
            kind = "scale_up" if d.desired > current else "scale_down"
            batch.events.append({"origin": self.origin, "job_id": str(first), "time": self.wall(now), "kind": kind,
                                 "detail": f"{sc.spec.service.name} " + d.detail(sc.kind), "source": "live"})
            if d.desired > current:
                wall_now = self.wall(now)
                for _ in range(d.desired - current):
                    k, jid = sc.free_index(), self.next_id
                    self.next_id += 1
                    wl = replace(replica_workload(sc.spec, k, jid, sc.caller.user, now), source=sc.request.source)
                    self._register(batch, sc.request, sc.caller, None, sc.spec, wl, k, first, (), wall_now)
                    job = self.engine.submit(wl, at=now)
                    self._landed(batch, wl, job.wl.partition)
                    self._submit_wall[jid] = wall_now
                    sc.replicas[jid] = k
                    self.submitted_total += 1
                batch.meta["next_job_id"] = str(self.next_id)
            else:
                rows = []
                for jid, k in sc.replicas.items():
                    job = self.engine.jobs[jid]
                    run = self.executor.running.get(jid)
                    rows.append((jid, k, job.state != PENDING, bool(run is not None and run.ready)))
                for jid in scale_down_order(rows)[: current - d.desired]:
                    self.engine.cancel(jid, at=now, reason=f"scaled down by {sc.kind}")
                    del sc.replicas[jid]
        return acted

    def _pending_row(self, wl, wall_now: float) -> dict:
        limit = wl.time_limit
        account, qos = self._tres.account_qos(wl)
        return {
            "origin": self.origin, "job_id": _sacct_id(wl), "job_id_raw": wl.id, "array_job_id": wl.array_job_id,
            "array_task_id": wl.array_task_id, "name": wl.name, "kind": "batch", "user": wl.user or "",
            "account": account, "qos": qos, "partition": wl.partition or "",
            "queue": wl.partition or "", "submit": wall_now, "eligible": wall_now, "state": PENDING,
            "timelimit": None if limit in (None, math.inf) else limit, "gpus": wl.total_gpus,
            "source": wl.source or "live",
        }

    # ------------------------------------------------------------------ cancel and queries
    def cancel_fn(self, job_ids: list[int], caller: Caller) -> Callable:
        def run(batch: Batch, now: float) -> dict:
            done, skipped = [], []
            for jid in job_ids:
                job = self.engine.jobs.get(jid)
                owner = job.wl.user if job is not None else (self.store.job(jid) or {}).get("user")
                if owner is None:
                    raise Refused(f"Invalid job id specified: {jid}", 404)
                if not self.may_manage(caller, owner):
                    raise Refused(f"Access/permission denied: job {jid} belongs to {job.wl.user}, and "
                                  f"{caller.user} is not an operator of pool {self.host.pool.name}", 403)
            for jid in job_ids:
                job = self.engine.jobs.get(jid)
                if job is None or job.final_state is not None:  # ended (maybe before a restart)
                    skipped.append(jid)
                    continue
                self.engine.cancel(jid, at=now, reason=f"cancelled by {caller.user}")
                done.append(jid)
            return {"cancelled": done, "already_ended": skipped}
        return run

    def may_manage(self, caller: Caller, owner: str | None) -> bool:
        """Own jobs; anyone's for the pool's operators (sacctmgr AdminLevel=Operator or
        Administrator) and for root on the socket, as scancel allows."""
        if caller.user == owner or caller.user in self.operators:
            return True
        return not caller.via_token and caller.uid == 0

    def queue_rows(self, user: str | None = None, states: set[str] | None = None) -> list[dict]:
        """Pending and running jobs, running first then by priority order of the queue (squeue)."""
        now = self.engine.now
        rows = []
        for job in list(self.engine.active.values()) + list(self.engine.pending.values()):
            wl = job.wl
            if user and wl.user != user:
                continue
            st = "R" if job.state == RUNNING else ("CF" if job.state == PLACING else "PD")
            if states and st not in states and job.state not in states:
                continue
            gpus = [i for p in job.placement for i in mask_indices(p[1])]
            rows.append({
                "job_id": _sacct_id(wl), "id": job.id, "partition": job.partition or wl.partition or self.default_partition,
                "name": wl.name, "user": wl.user or "", "account": self._tres.account_qos(wl)[0], "state": job.state,
                "st": st,
                "time": (now - job.start) if job.start is not None else 0.0,
                "time_limit": job.time_limit, "nodes": 1, "nodelist": self.host.node_name if job.placement else "",
                "reason": "" if job.state != PENDING else (job.reason or "None"), "gpus": gpus,
                "submit": self.wall(job.submit),
            })
        return rows

    def job_facts(self, job_id: int) -> dict:
        job = self.engine.jobs.get(job_id)
        if job is None:
            row = self.store.job(job_id)
            if row is None:
                raise Refused(f"Invalid job id specified: {job_id}", 404)
            return {k: row[k] for k in ("job_id", "state", "name", "user", "start", "end", "exit_code", "pid")}
        run = self.executor.running.get(job_id) or self.executor.restarting.get(job_id)
        sub = self.executor.submissions.get(job_id)
        service = {}
        if sub is not None and sub.service is not None:
            service = {"service": sub.service.service.name, "replica": sub.replica, "ready": bool(run and run.ready
                       and job_id in self.executor.running), "restarts": run.restarts if run else 0,
                       "port": sub.service.probe_port(sub.replica)}
            sc = next((sc for sc in self.scalers.values() if job_id in sc.replicas), None)
            if sc is not None:
                service["autoscaler"] = {**sc.facts(), "service_id": sc.first_id}
        return {
            **service,
            "job_id": job.id, "state": job.state, "name": job.wl.name, "user": job.wl.user,
            "start": None if job.first_start is None else self.wall(job.first_start),
            "end": None if job.end is None else self.wall(job.end), "exit_code": self._exit_codes.get(job_id, ""),
            "pid": run.pid.pid if run else None, "requeues": job.requeues, "reason": job.reason,
            "submit": self.wall(job.submit), "eligible": self.wall(job.eligible),
            "gpus": [i for p in job.placement for i in mask_indices(p[1])],
        }

    def metrics(self) -> dict:
        """Figures for /metrics: queue depth, running jobs, GPUs, GPU-seconds per account."""
        now = self.engine.now
        usage: dict[str, float] = {}
        for job in self.engine.jobs.values():
            used = job.gpu_s_used
            if job.state == RUNNING and job.start is not None:
                used += (now - job.start) * job.held_gpus
            if used:
                acc = self._tres.account_qos(job.wl)[0]  # the account charged, as sacct shows it
                usage[acc] = usage.get(acc, 0.0) + used
        states: dict[str, int] = {}
        for job in self.engine.jobs.values():
            states[job.state] = states.get(job.state, 0) + 1
        allocated = sum(j.held_gpus for j in self.engine.active.values())
        ready: dict[str, int] = {}
        for jid, sub in self.executor.submissions.items():
            if sub.service is not None:
                run = self.executor.running.get(jid)
                name = sub.service.service.name
                ready[name] = ready.get(name, 0) + (1 if run is not None and run.ready else 0)
        return {
            "pending": len(self.engine.pending), "running": sum(1 for j in self.engine.active.values() if j.state == RUNNING),
            "gpus_total": self.host.node.gpu_count, "gpus_allocated": allocated, "usage_gpu_seconds": usage,
            "states": states, "submitted_total": self.submitted_total, "started_total": self.started_total,
            "service_ready": ready, "service_autoscaler": {sc.spec.service.name: sc.facts() for sc in self.scalers.values()},
        }

    # ------------------------------------------------------------------ recording transitions
    def _record(self, batch: Batch, now: float) -> None:
        events = self.engine.events
        new = events[self._seen:]
        if not new:
            return
        # The engine keeps its event log for a whole run; the daemon has written them, so drop them.
        del events[:]
        self._seen = 0
        if len(self.engine.timeline) > 1:
            del self.engine.timeline[:-1]
        for t, kind, job_id, detail in new:
            if job_id < 0:
                continue
            job = self.engine.jobs.get(job_id)
            if job is None:
                continue
            wl = job.wl
            batch.events.append({"origin": self.origin, "job_id": _sacct_id(wl), "time": self.wall(t), "kind": kind,
                                 "detail": detail or "", "source": "live"})
            if kind == "started":
                self.started_total += 1
                run = self.executor.running.get(job_id)
                start_wall = self._open.get(job_id, (None,))[0]
                if start_wall is None:
                    start_wall = self.wall(job.start)
                gpus = [i for p in job.placement for i in mask_indices(p[1])]
                self._open[job_id] = (start_wall, gpus)
                if job_id in self._submit_wall:
                    self.submit_latency.append((self._submit_wall.pop(job_id), time.time()))
                batch.update(job_id, state=RUNNING, pid=run.pid.pid if run else None,
                             start_ticks=run.pid.start_ticks if run else None, start=start_wall,
                             placement=json.dumps([list(p) for p in job.placement]),
                             time_limit=None if job.time_limit in (None, math.inf) else job.time_limit,
                             partition=job.partition or wl.partition or "", requeues=job.requeues)
                for g in gpus:
                    batch.allocations.append(self._alloc(job, g, start_wall, None, self.wall(now)))
                batch.ledger_jobs[job_id] = self._row(job, now, RUNNING)
            elif kind in ("finished", "preempted", "requeued", "node_fail"):
                opened = self._open.pop(job_id, None)
                if opened is not None:
                    for g in opened[1]:
                        batch.allocations.append(self._alloc(job, g, opened[0], self.wall(t), None))
                if kind == "finished":
                    state = detail or job.state
                    code = self._exit_codes.pop(job_id, _default_exit(state))
                    batch.update(job_id, state=state, end=self.wall(t), exit_code=code, pid=None,
                                 reason=job.end_reason or job.reason or "")
                    batch.ledger_jobs[job_id] = self._row(job, now, state, code)
                    if state in FINAL_STATES:
                        self.executor.submissions.pop(job_id, None)
                elif kind == "requeued":
                    batch.update(job_id, state=PENDING, pid=None, start_ticks=None, start=None, placement="",
                                 requeues=job.requeues)
                    batch.ledger_jobs[job_id] = self._row(job, now, PENDING)
            elif kind == "preempting":
                self.executor.preempting(job_id)

    def _alloc(self, job, gpu: int, frm: float, to: float | None, as_of: float | None) -> dict:
        dev = self.host.node.gpus[gpu]
        return {"origin": self.origin, "job_id": _sacct_id(job.wl), "node": self.host.node_name, "gpu_index": gpu,
                "gpu_count": 1, "gpu_type": dev.type or "", "time_from": frm, "time_to": to, "as_of": as_of,
                "policy_version": None}

    def _row(self, job, now: float, state: str, code: str = "0:0") -> dict:
        types = sorted({self.host.node.gpus[i].type or "" for p in job.placement for i in mask_indices(p[1])} - {""})
        account, qos = self._tres.account_qos(job.wl)
        return ledger_job_row(self.origin, job, job.wl, wall=self.wall, now=now, node=self.host.node_name,
                              gpu_type=",".join(types), state=state, exit_code=code, account=account, qos=qos)

    # ------------------------------------------------------------------ restart
    def recover(self) -> None:
        """Rebuild the engine from the ledger after a (clean or kill -9) restart.

        Queued jobs are queued again with their submit times; a job recorded as running whose
        process (same pid *and* start time, or found by its wrapper's command line) is alive is
        re-adopted on its devices; one whose process ended while the daemon was away ends with
        its exit status; one whose process is gone without a status is requeued (NODE_FAIL when
        it was submitted with --no-requeue). Processes of jobs the ledger does not hold as
        queued or running are killed: nothing runs that the ledger does not account for.
        Queued jobs keep the partitions they landed in at submission; a job naming one that
        slurm.conf no longer has ends NODE_FAIL (its process killed), as slurmctld ends it.
        """
        meta = self.store.meta()
        self.next_id = int(meta.get("next_job_id", "1"))
        slurm = fairshare.is_slurm(self.policy)
        if slurm:  # before any job is back: see ``fairshare.prime``
            fairshare.prime(self.policy, self.engine)
        rows = self.store.unfinished()
        queued_times = self.store.queued_times()
        wrappers = scan_wrappers(self.spool)
        known = {r["job_id"] for r in rows}
        for jid, pid in wrappers.items():
            if jid not in known:
                proc.signal_group(pid, signal.SIGKILL)
        batch = Batch()
        counts = {"queued": 0, "adopted": 0, "ended_while_down": 0, "requeued": 0, "node_fail": 0}
        t0 = self.engine.now
        adopt, queue = [], []
        for row in rows:
            jid = row["job_id"]
            self.next_id = max(self.next_id, jid + 1)
            try:
                wl, sub = self._rebuild(row)
            except GpupoolError as exc:  # the script no longer parses: end it, say why
                batch.update(jid, state="FAILED", end=time.time(), reason=f"cannot rebuild after restart: {exc}")
                continue
            self.executor.submissions[jid] = sub
            pid = None
            if row["pid"] is not None and row["start_ticks"] is not None:
                cand = proc.ProcId(int(row["pid"]), int(row["start_ticks"]))
                if proc.alive(cand):
                    pid = cand
            if pid is None and jid in wrappers and proc.alive(wrappers[jid]):
                pid = wrappers[jid]
            gone = self._gone_partitions(wl)
            if gone:
                # slurmctld ends a job one of whose partitions slurm.conf no longer has as it
                # starts (``_sync_jobs_to_conf``: NODE_FAIL, a running one killed)
                if pid is not None:
                    proc.signal_group(pid, signal.SIGKILL)
                counts["node_fail"] += 1
                self._end_offline(batch, row, wl, "NODE_FAIL", "0:0")
                batch.update(jid, reason=f"Invalid partition ({gone}) after daemon restart")
                continue
            jobdir = self.spool / str(jid)
            requeues = int(row["requeues"] or 0)
            if pid is not None and _placement(jobdir, row):
                adopt.append((row, wl, pid))
                continue
            if pid is not None:  # running, but where is unknown: stop it and run it again
                proc.signal_group(pid, signal.SIGKILL)
            status = proc.read_exit_status(jobdir / f"rc.{requeues}")
            if status is not None:  # this run ended while no daemon watched it
                counts["ended_while_down"] += 1
                self._end_offline(batch, row, wl, "COMPLETED" if status == 0 else "FAILED",
                                  f"{status}:0" if status < 128 else f"0:{status - 128}")
                continue
            if row["state"] == RUNNING:
                if not wl.requeue:
                    counts["node_fail"] += 1
                    self._end_offline(batch, row, wl, "NODE_FAIL", "0:0")
                    continue
                counts["requeued"] += 1
                row = dict(row, requeues=requeues + 1)
                self._close_offline(batch, row, wl, "requeued")
                batch.update(jid, state=PENDING, pid=None, start_ticks=None, start=None, placement="",
                             requeues=row["requeues"], reason="process gone after daemon restart")
            queue.append((row, wl))
        for row, wl, pid in adopt:
            placement = _placement(self.spool / str(row["job_id"]), row)
            started = row["start"] if row["start"] is not None else _placement_start(self.spool / str(row["job_id"]))
            started = started if started is not None else time.time()
            self.executor.adopt(row["job_id"], pid, started - self.epoch,
                                self.spool / str(row["job_id"]) / f"rc.{int(row['requeues'] or 0)}")
            self._open[row["job_id"]] = (started, [i for p in placement for i in mask_indices(p[1])])
            part = row["partition"] or None
            share = self.policy.cpu_share_of(wl, part) if slurm else 1  # co-allocated CPUs stay shared
            job = adopt_running(self.engine, wl, placement, started=started - self.epoch,
                                submitted=row["submit"] - self.epoch, time_limit=row["time_limit"],
                                partition=part, requeues=int(row["requeues"] or 0), cpu_share=share,
                                recovered=bool(row.get("job_partitions")))
            if slurm:
                fairshare.adopt(self.policy, job, placement, started - self.epoch)
            counts["adopted"] += 1
        for row, wl in queue:
            # in the partitions it landed in; a row written before they were kept (migration
            # 0006) has none, and its job goes through the submit rules again
            job = self.engine.submit(wl, at=t0, recovered=bool(row.get("job_partitions")))
            job.submit = row["submit"] - self.epoch  # keeps its age (priority) across the restart
            job.requeues = int(row["requeues"] or 0)
            if row["state"] == PENDING:
                # Queued when the daemon stopped: its submit and eligible times are the engine's
                # as the accounting row last recorded them (a requeue resets both), so the age
                # factor (now - eligible) goes on from where it was. A job requeued just now, its
                # process gone, becomes eligible now, as any requeue does.
                submit, eligible = queued_times.get(row["job_id"], (None, None))
                if submit is not None:
                    job.submit = submit - self.epoch
                job.eligible = max(job.submit, (eligible - self.epoch) if eligible is not None else job.submit)
            counts["queued"] += 1
        if slurm:
            self._restore_usage(meta, batch)
        self._recover_scalers(rows, meta, t0)
        batch.meta["next_job_id"] = str(self.next_id)
        self.store.commit(batch)
        self.recovered = counts

    def _restore_usage(self, meta: dict[str, str], batch: Batch) -> None:
        """Give the (primed) Slurm policy the fair-share usage the last daemon saved, decayed
        and charged up to this start as slurmctld's first decay pass does, and start following
        it; the restored figure is saved at once, so a crash right after loses nothing."""
        pol = self.policy
        if not pol.use_fs:  # nothing is accumulated; a saved usage stays for a later start
            self.usage_restore = {"restored": False, "reason": "fair share is not in the priority "
                                  "(priority/multifactor, PriorityWeightFairshare > 0, an account tree)"}
            return
        s = pol.s
        usage: dict = {}
        text = meta.get(fairshare.META_KEY)
        if text is None:  # a first start, or a ledger written before gpupool saved the usage
            records = self.store.usage_records()
            usage = fairshare.usage_from_records(records, pol.acct, self.epoch, s.calc_period, s.half_life,
                                                 s.limits_enforced)
            self.usage_restore = ({"restored": True, "from": "job records", "jobs": len(records),
                                   "associations": len(usage)} if records
                                  else {"restored": False, "reason": "first start: no usage saved, no job run"})
        else:
            try:
                saved = fairshare.SavedUsage.from_json(text, f"{self.ledger.url} live_meta {fairshare.META_KEY}")
            except GpupoolError as exc:  # usage starts from zero; the daemon still serves its jobs
                self.usage_restore = {"restored": False, "reason": str(exc)}
                print(f"gpupool serve: fair-share usage not restored: {exc}", file=sys.stderr, flush=True)
            else:
                usage = fairshare.restart_usage(saved, self.epoch, s.half_life, s.reset_period)
                self.usage_restore = {"restored": True, "from": "saved usage", "saved_pass": saved.epoch + saved.t_ref,
                                      "down_s": max(0.0, self.epoch - saved.epoch - saved.t_ref),
                                      "associations": len(usage), "running_then": len(saved.running)}
        fairshare.seed(pol, usage)
        self.journal = fairshare.UsageJournal(s.calc_period, s.half_life, s.reset_period, s.limits_enforced,
                                              epoch=self.epoch, seed=usage, running=fairshare.open_segments(pol),
                                              clock_epoch=pol.epoch)
        batch.meta[fairshare.META_KEY] = self.journal.saved().to_json()

    def share(self) -> dict:
        """sshare and sprio of this daemon's policy (``GET /v1/share``)."""
        if self.journal is None:
            raise Refused(f"pool {self.host.pool.name} keeps no fair-share usage: it needs --policy slurm with "
                          "PriorityType=priority/multifactor, PriorityWeightFairshare > 0 and an account tree", 404)
        jobs = [j for j in self.engine.pending.values() if j.state == PENDING]
        return fairshare.share_view(self.policy, self.journal, jobs, self.engine.now, self.wall, self.engine.jobs)

    def _recover_scalers(self, rows: list[dict], meta: dict[str, str], now: float) -> None:
        """Autoscaled services whose replicas survived the restart get their autoscaler back
        (its history starts afresh, as after a kube-controller-manager restart); the traffic
        clock keeps counting from the service's original submission."""
        for row in rows:
            if row["kind"] != "service" or row["array_job_id"] is None:
                continue
            jid, first = int(row["job_id"]), int(row["array_job_id"])
            job, sub = self.engine.jobs.get(jid), self.executor.submissions.get(jid)
            if job is None or job.final_state is not None or sub is None:
                continue
            sc = self.scalers.get(first)
            if sc is None:
                info = json.loads(meta.get(f"service:{first}", "{}"))
                if "start" not in info or sub.service.service.autoscaling.kind == "fixed":
                    continue
                try:
                    metric = metric_source(sub.service.service.traffic, row["cwd"], f"{row['source']} traffic")
                except GpupoolError:
                    continue
                if metric is None:
                    continue
                sc = ServiceScaler(sub.service, metric, first, float(info["start"]) - self.epoch)
                sc.next_due = now + sc.period
                sc.request = SubmitRequest(row["script"], row["source"] or "", row["cwd"] or "/",
                                           json.loads(row["env"] or "{}"), kind="service")
                sc.caller = Caller(row["user"], int(row["uid"]), int(row["gid"]))
                self.scalers[first] = sc
            sc.replicas[jid] = sub.replica

    def _gone_partitions(self, wl) -> str:
        """The partitions ``wl`` names that slurm.conf no longer has, comma-separated ("" when
        none, or when the pool has no slurm.conf or the policy no Slurm side)."""
        conf = self.host.pool.slurm
        if conf is None or not wl.partition or not hasattr(self.policy, "resolve_request"):
            return ""  # (only a policy running slurm.conf's submit rules has partitions)
        return ",".join(n for n in (x.strip() for x in wl.partition.split(",")) if n and n not in conf.partitions)

    def _rebuild(self, row: dict):
        source = row["source"] or f"job {row['job_id']}"
        if row["kind"] == "service":
            k = int(row["array_task_id"] or 0)
            spec = next((sp for sp in parse_services(row["script"], source, self.host.pool.kueue)
                         if f"{sp.service.name}-{k}" == row["name"]), None)
            if spec is None:
                raise GpupoolError(f"{source}: no service replica {row['name']} in the stored file")
            wl = replace(replica_workload(spec, k, int(row["job_id"]), row["user"], 0.0), source=row["source"])
            if row.get("job_partitions"):
                wl = replace(wl, partition=row["job_partitions"])  # as it landed (``_landed``)
            sub = Submission(int(row["job_id"]), SbatchJob(), row["script"], row["user"], int(row["uid"]),
                             int(row["gid"]), row["cwd"], json.loads(row["env"] or "{}"), service=spec, replica=k)
            return wl, sub
        sb = parse_sbatch_text(row["script"], source)
        first = row["array_job_id"] if row["array_job_id"] is not None else row["job_id"]
        wls = sbatch_to_workload(sb, id=int(first), submit_time=0.0, runtime=math.inf,
                                 epoch=datetime.fromtimestamp(self.epoch, tz=timezone.utc))
        wl = next((w for w in wls if w.id == row["job_id"]), wls[0])
        wl = replace(wl, id=int(row["job_id"]), user=row["user"],
                     array_job_id=row["array_job_id"], source=row["source"])
        if wl.begin_time is not None:
            wl = replace(wl, begin_time=None)  # its --begin was placed on the first daemon's clock
        if row.get("job_partitions"):
            wl = replace(wl, partition=row["job_partitions"])  # as it landed at submission (``_landed``)
        tasks = tuple(w.array_task_id for w in wls if w.array_task_id is not None)
        sub = Submission(int(row["job_id"]), sb, row["script"], row["user"], int(row["uid"]), int(row["gid"]),
                         row["cwd"], json.loads(row["env"] or "{}"), array_task_ids=tasks)
        return wl, sub

    def _close_offline(self, batch: Batch, row: dict, wl, kind: str) -> None:
        end = time.time()
        batch.events.append({"origin": self.origin, "job_id": _sacct_id(wl), "time": end, "kind": kind,
                             "detail": "daemon restart: process gone", "source": "live"})
        placement = _placement(self.spool / str(row["job_id"]), row)
        if row["start"] is not None:
            for p in placement:
                for g in mask_indices(p[1]):
                    batch.allocations.append({"origin": self.origin, "job_id": _sacct_id(wl), "node": self.host.node_name,
                                              "gpu_index": g, "gpu_count": 1,
                                              "gpu_type": self.host.node.gpus[g].type or "",
                                              "time_from": row["start"], "time_to": end, "as_of": None,
                                              "policy_version": None})

    def _end_offline(self, batch: Batch, row: dict, wl, state: str, code: str) -> None:
        """A job whose end happened while no daemon watched it: record the end now."""
        self._close_offline(batch, row, wl, "finished")
        end = time.time()
        batch.update(row["job_id"], state=state, end=end, exit_code=code, pid=None)
        gpus = sum(p[1].bit_count() for p in _placement(self.spool / str(row["job_id"]), row))
        batch.ledger_jobs[row["job_id"]] = dict(
            self._pending_row(wl, row["submit"]), state=state, start=row["start"], end=end, exit_code=code,
            elapsed=None if row["start"] is None else end - row["start"], node_list=self.host.node_name,
            nnodes=1, gpus=gpus, gpu_seconds=0.0 if row["start"] is None else (end - row["start"]) * gpus)


def _default_exit(state: str) -> str:
    return {"CANCELLED": "0:15", "TIMEOUT": "0:15", "PREEMPTED": "0:15", "NODE_FAIL": "0:0"}.get(state, "0:0")


def _placement(jobdir: Path, row: dict) -> tuple:
    text = row.get("placement") or ""
    if not text:
        try:
            text = json.loads((jobdir / "placement").read_text())["placement"]
            return tuple(tuple(p) for p in text)
        except (OSError, ValueError, KeyError):
            return ()
    return tuple(tuple(p) for p in json.loads(text))


def _placement_start(jobdir: Path) -> float | None:
    try:
        return float(json.loads((jobdir / "placement").read_text())["start"])
    except (OSError, ValueError, KeyError):
        return None


def scan_wrappers(spool: Path) -> dict[int, proc.ProcId]:
    """Job wrappers of this spool that are running (by their command line), job id -> process."""
    prefix = str(spool) + os.sep
    out: dict[int, proc.ProcId] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/cmdline", "rb") as fh:
                argv = fh.read().split(b"\0")
        except OSError:
            continue
        if len(argv) < 6 or argv[3] != b"gpupool-job":
            continue
        rc = argv[5].decode(errors="replace")
        if not rc.startswith(prefix):
            continue
        try:
            jid = int(Path(rc).parent.name)
        except ValueError:
            continue
        pid = int(entry.name)
        ticks = proc.start_ticks(pid)
        if ticks is not None:
            out[jid] = proc.ProcId(pid, ticks)
    return out
