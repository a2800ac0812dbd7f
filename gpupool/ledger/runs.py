"""Recorded simulation runs: list them and show one (``gpupool runs``, ``gpupool runs show ID``).

A run is worth keeping only if it can be reproduced and compared, so what this prints is
what went in (the pool's tree hash, the workload spec and digest, the policy, its options,
the seed, the policy version in force) and when: the simulated epoch, the span its jobs
cover in wall-clock time, and when it was recorded. Job counts and GPU-hours come from the
ledger's own jobs table (what ``gpupool acct -M run:ID`` would show), not from the stored
summary, so the listing agrees with the other ledger commands.
"""
from __future__ import annotations

import json

import sqlalchemy as sa

from gpupool.ledger import schema as s
from gpupool.ledger.db import LedgerError
from gpupool.ledger.store import Ledger, as_ledger
from gpupool.ledger.timefmt import format_ts

RUN_PREFIX = "run:"


def _job_facts(conn, origins: list[str] | None) -> dict[str, dict]:
    """origin -> jobs, first submit, last end, GPU-hours (one GROUP BY over the jobs table)."""
    j = s.jobs.c
    q = (sa.select(j.origin, sa.func.count(), sa.func.min(j.submit), sa.func.max(j.end),
                   sa.func.coalesce(sa.func.sum(j.gpu_seconds), 0.0))
         .group_by(j.origin))
    q = q.where(j.origin.in_(origins)) if origins is not None else q.where(j.origin.like(RUN_PREFIX + "%"))
    return {o: {"jobs": n, "first_submit": lo, "last_end": hi, "gpu_hours": round(gs / 3600.0, 3)}
            for o, n, lo, hi, gs in conn.execute(q)}


def _row(r, facts: dict | None) -> dict:
    facts = facts or {"jobs": 0, "first_submit": None, "last_end": None, "gpu_hours": 0.0}
    return {
        "run_id": r.run_id, "cluster": r.origin, "pool": r.pool, "pool_hash": r.pool_hash, "policy": r.policy,
        "policy_version": r.policy_version or "", "workload": r.workload_spec,
        "workload_digest": r.workload_digest, "seed": r.seed, "epoch": format_ts(r.epoch),
        "first_submit": format_ts(facts["first_submit"]), "last_end": format_ts(facts["last_end"]),
        "recorded_at": format_ts(r.recorded_at), "jobs": facts["jobs"], "gpu_hours": facts["gpu_hours"],
    }


def list_runs(db, *, pool: str | None = None, policy: str | None = None) -> list[dict]:
    """Every recorded run, oldest recording first (optionally of one pool / policy)."""
    ledger = as_ledger(db)
    r = s.runs.c
    q = sa.select(s.runs).order_by(r.recorded_at, r.run_id)
    if pool:
        q = q.where(r.pool == pool)
    if policy:
        q = q.where(r.policy == policy)
    with ledger.read() as conn:
        rows = list(conn.execute(q))
        facts = _job_facts(conn, [x.origin for x in rows]) if rows else {}
    return [_row(x, facts.get(x.origin)) for x in rows]


def resolve_run(conn, ref: str) -> sa.Row:
    """A run by its id, a unique prefix of it, or its cluster name ``run:ID``."""
    text = ref.strip()
    text = text.removeprefix(RUN_PREFIX)
    if not text:
        raise LedgerError("give a run id (see `gpupool runs`)")
    r = s.runs.c
    found = list(conn.execute(sa.select(s.runs).where(r.run_id.like(_like_prefix(text), escape="\\"))
                              .order_by(r.run_id).limit(6)))
    if not found:
        raise LedgerError(f"no recorded run {ref!r} in this ledger (see `gpupool runs`)")
    exact = [x for x in found if x.run_id == text]
    if exact:
        return exact[0]
    if len(found) > 1:
        ids = ", ".join(x.run_id for x in found[:5])
        raise LedgerError(f"run id prefix {ref!r} is ambiguous: {ids}{', …' if len(found) > 5 else ''}")
    return found[0]


def _like_prefix(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def show_run(db, ref: str) -> dict:
    """One run in full: its inputs, options, the policy version's commit, job states, summary."""
    ledger: Ledger = as_ledger(db)
    j, v = s.jobs.c, s.policy_versions.c
    with ledger.read() as conn:
        run = resolve_run(conn, ref)
        facts = _job_facts(conn, [run.origin]).get(run.origin)
        states = {state: n for state, n in conn.execute(
            sa.select(j.state, sa.func.count()).where(j.origin == run.origin).group_by(j.state).order_by(j.state))}
        version = None
        if run.policy_version:
            pv = conn.execute(sa.select(v.version, v.pool, v.author, v.message, v.committed_at, v.parent)
                              .where(v.version == run.policy_version)).first()
            if pv is not None:
                version = {"version": pv.version, "pool": pv.pool, "author": pv.author, "message": pv.message,
                           "committed_at": format_ts(pv.committed_at), "parent": pv.parent or ""}
    out = _row(run, facts)
    out["policy_options"] = json.loads(run.policy_options or "{}")
    out["policy_version_commit"] = version
    out["states"] = states
    out["summary"] = json.loads(run.summary or "{}")
    return out
