"""The daemon's state in the ledger: its queue, its processes, and the accounting rows.

Every transition the daemon makes is written here in one transaction per loop turn
(group commit): ``live_jobs`` keeps what is needed to run or re-adopt a job after a
crash, and the ordinary ledger tables (``jobs``, ``events``, ``allocations``, ``usage``) get
the same records a recorded run or a sacct import would, under the origin ``live:<pool>``,
so ``gpupool acct``/``share``/``usage`` report the live pool like any other.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

import sqlalchemy as sa

from gpupool.ledger import schema as s
from gpupool.ledger.record import requested_counts
from gpupool.ledger.store import Ledger, WriteStats, chunks
from gpupool.policy.slurm.tres import tres_text

ACTIVE = ("PENDING", "RUNNING")


@dataclass
class Batch:
    """What one loop turn changed, written together by :meth:`LiveStore.commit`."""

    new_jobs: list[dict] = field(default_factory=list)  # live_jobs rows
    updates: dict[int, dict] = field(default_factory=dict)  # job id -> live_jobs columns
    ledger_jobs: dict[int, dict] = field(default_factory=dict)  # job id -> jobs row
    events: list[dict] = field(default_factory=list)
    allocations: list[dict] = field(default_factory=list)
    meta: dict[str, str] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.new_jobs or self.updates or self.ledger_jobs or self.events or self.allocations or self.meta)

    def update(self, job_id: int, **cols) -> None:
        self.updates.setdefault(job_id, {}).update(cols)


class LiveStore:
    """Reads and writes of one daemon (``origin``) in a ledger."""

    def __init__(self, ledger: Ledger, origin: str) -> None:
        self.ledger = ledger
        self.origin = origin

    # ------------------------------------------------------------------ reads
    def meta(self) -> dict[str, str]:
        with self.ledger.read() as conn:
            rows = conn.execute(sa.select(s.live_meta.c.key, s.live_meta.c.value)
                                .where(s.live_meta.c.daemon == self.origin))
            return {k: v for k, v in rows}

    def unfinished(self) -> list[dict]:
        """Jobs that were queued or running when the daemon last wrote, in id order."""
        c = s.live_jobs.c
        with self.ledger.read() as conn:
            rows = conn.execute(sa.select(s.live_jobs).where(c.daemon == self.origin, c.state.in_(ACTIVE))
                                .order_by(c.job_id)).mappings()
            return [dict(r) for r in rows]

    def queued_times(self) -> dict[int, tuple[float | None, float | None]]:
        """Job id -> (submit, eligible), epoch seconds, of this daemon's queued jobs as their
        accounting rows last recorded them: the engine's own times (a requeue resets both),
        which ``live_jobs`` does not follow."""
        j = s.jobs.c
        with self.ledger.read() as conn:
            rows = conn.execute(sa.select(j.job_id_raw, j.submit, j.eligible)
                                .where(j.origin == self.origin, j.state == "PENDING", j.job_id_raw.is_not(None)))
            return {int(r[0]): (r[1], r[2]) for r in rows}

    def usage_records(self) -> list[tuple]:
        """(account, user, qos, start, end, billing) of the last run of every job of this
        daemon that ran (``end`` None: running when the daemon stopped): what fair-share usage
        can be rebuilt from when none was saved. The run is ``live_jobs``'s (an accounting
        row's start is the first run's), the association and billing the accounting row's."""
        j, lj = s.jobs.c, s.live_jobs.c
        with self.ledger.read() as conn:
            return [tuple(r) for r in conn.execute(
                sa.select(j.account, j.user, j.qos, lj.start, lj.end, j.billing)
                .select_from(s.live_jobs.join(s.jobs, sa.and_(j.origin == lj.daemon, j.job_id_raw == lj.job_id)))
                .where(lj.daemon == self.origin, lj.start.is_not(None)).order_by(lj.start))]

    def job(self, job_id: int) -> dict | None:
        c = s.live_jobs.c
        with self.ledger.read() as conn:
            row = conn.execute(sa.select(s.live_jobs).where(c.daemon == self.origin, c.job_id == job_id)).mappings().first()
            return dict(row) if row else None

    def counts(self) -> dict[str, int]:
        c = s.live_jobs.c
        with self.ledger.read() as conn:
            rows = conn.execute(sa.select(c.state, sa.func.count()).where(c.daemon == self.origin).group_by(c.state))
            return {k: int(v) for k, v in rows}

    # ------------------------------------------------------------------ writes
    def commit(self, batch: Batch) -> None:
        if not batch:
            return
        stats = WriteStats()
        with self.ledger.transaction() as conn:
            if batch.new_jobs:
                for part in chunks(batch.new_jobs, 2000):
                    conn.execute(s.live_jobs.insert(), part)
            c = s.live_jobs.c
            for job_id, cols in batch.updates.items():
                conn.execute(s.live_jobs.update().where(c.daemon == self.origin, c.job_id == job_id).values(**cols))
            for key, value in batch.meta.items():
                m = s.live_meta.c
                done = conn.execute(s.live_meta.update().where(m.daemon == self.origin, m.key == key)
                                    .values(value=value)).rowcount
                if not done:
                    conn.execute(s.live_meta.insert().values(daemon=self.origin, key=key, value=value))
            if batch.ledger_jobs:
                self.ledger.write_jobs(conn, list(batch.ledger_jobs.values()), stats)
            if batch.events:
                self.ledger.write_events(conn, batch.events, stats)
            if batch.allocations:
                self.ledger.write_allocations(conn, batch.allocations, stats)
            if stats.dirty:
                self.ledger.update_usage(conn, self.origin, stats)


def ledger_job_row(origin: str, job, wl, *, wall, now: float, node: str, gpu_type: str, state: str,
                   exit_code: str = "0:0", source: str = "live", account: str | None = None,
                   qos: str | None = None) -> dict:
    """The ``jobs`` row of a live job as sacct would show it now (times in epoch seconds);
    ``account``/``qos``: what the job got where it named none (``ledger.record.JobTres``),
    else the workload's."""
    cpus = sum(math.ceil(p[2] / 1000) for p in job.placement)
    mem = sum(p[3] for p in job.placement)
    gpus = sum(p[1].bit_count() for p in job.placement)
    start = None if job.first_start is None else wall(job.first_start)
    end = None if job.end is None else wall(job.end)
    indices = ",".join(str(i) for p in job.placement for i in _bits(p[1]))
    return {
        "origin": origin, "job_id": _sacct_id(wl), "job_id_raw": job.id, "array_job_id": wl.array_job_id,
        "array_task_id": wl.array_task_id, "name": wl.name or "", "kind": wl.kind or "batch",
        "user": wl.user or "", "account": (wl.account or "") if account is None else account,
        "qos": (wl.qos or "") if qos is None else qos,
        "partition": job.partition or wl.partition or "", "queue": wl.queue or "",
        "submit": wall(job.submit), "eligible": wall(job.eligible), "start": start, "end": end,
        "elapsed": None if start is None else ((end if end is not None else wall(now)) - start),
        "timelimit": None if job.time_limit in (None, math.inf) else job.time_limit, "state": state,
        "reason": job.reason or "", "exit_code": exit_code, "nnodes": 1 if job.placement else 0,
        "ncpus": cpus, "node_list": node if job.placement else "", "req_tres": tres_text(requested_counts(wl)),
        "alloc_tres": tres_text({"billing": cpus, "cpu": cpus, "gres/gpu": gpus, "mem": mem, "node": 1})
        if job.placement else "",
        "gpus": gpus or wl.total_gpus, "gpu_type": gpu_type, "gpu_indices": indices, "billing": float(cpus),
        "requeues": job.requeues, "preemptions": job.preemptions, "gpu_seconds": job.gpu_s_used,
        "gpu_seconds_lost": job.gpu_s_lost, "gpu_seconds_idle": job.gpu_s_idle_held, "flags": job.via or "",
        "extra": json.dumps({"executor": "live"}), "source": source,
    }


def _sacct_id(wl) -> str:
    """``42`` or ``40_3`` (array job id and task id), as sacct prints a job id."""
    if wl.array_job_id is not None and wl.array_task_id is not None:
        return f"{wl.array_job_id}_{wl.array_task_id}"
    return str(wl.id)


def _bits(mask: int):
    i = 0
    while mask:
        if mask & 1:
            yield i
        mask >>= 1
        i += 1
