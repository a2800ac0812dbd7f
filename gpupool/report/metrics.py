"""From one run's job records and timeline to tables and summary figures.

Everything here is derived after the run (never on the engine's hot path). Figures are
rounded so that a summary is byte-identical across runs with the same inputs.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from gpupool.engine.core import RunOutput
from gpupool.engine.job import Job
from gpupool.engine.nodes import mask_indices
from gpupool.formats.hostlist import compress_hostlist
from gpupool.model.pool import Pool
from gpupool.model.workload import KIND_SERVICE

#: Bounded slowdown's threshold (seconds): jobs shorter than this count as this long, so a
#: few seconds of queueing do not make a tiny job look infinitely slowed down.
SLOWDOWN_BOUND_S = 10.0
SHAPES = ("cpu-only", "1 GPU", "2-7 GPUs", "8 GPUs", "multi-node")

JOB_COLUMNS = [
    "id", "name", "kind", "user", "account", "qos", "partition", "namespace", "queue",
    "submit", "eligible", "start", "end", "state", "reason", "via", "shape", "pods", "gpus",
    "nodes", "gpu_indices", "time_limit", "runtime", "wait", "requeues", "preemptions",
    "gpu_seconds_used", "gpu_seconds_lost", "gpu_seconds_idle_held", "array_job_id", "array_task_id",
]


def job_gpus(job: Job) -> int:
    """The job's GPUs: a walked job's (``PodSet.walk_gpus``) as its placement holds them once it
    has one (``-n T --gres=gpu:G`` holds G on each node the walk took), else as asked."""
    if job.placement and any(ps.walked for ps in job.wl.pod_sets):
        return sum(p[1].bit_count() for p in job.placement)
    return job.total_gpus


def job_shape(job: Job) -> str:
    """The job-shape class used to break down waits and slowdowns."""
    wl = job.wl
    gpus = job_gpus(job)
    multi_node = any(ps.one_per_node and ((ps.min_count or 1) if ps.walked else ps.count) > 1 for ps in wl.pod_sets) \
        or gpus > 8 or len({p[0] for p in job.placement}) > 1 and any(ps.walked for ps in wl.pod_sets)
    if multi_node:
        return "multi-node"
    if gpus == 0:
        return "cpu-only"
    if gpus == 1:
        return "1 GPU"
    if gpus < 8:
        return "2-7 GPUs"
    return "8 GPUs"


def _pods(job: Job) -> int:
    """The job's pods: a walked ``--gpus`` job's (``PodSet.walk_gpus``: as many as the nodes it
    got, one before it starts), else every pod it asks."""
    if any(ps.walked for ps in job.wl.pod_sets):
        return len(job.placement) or job.pods_needed
    return job.pods_total


def _gpu_text(job: Job, names: list[str]) -> tuple[str, str]:
    """(nodes as a hostlist, ``node:idx,idx;node:…`` GPU indices) of the last placement."""
    per_node: dict[int, int] = {}
    for node, mask, _, _ in job.placement:
        per_node[node] = per_node.get(node, 0) | mask
    if not per_node:
        return "", ""
    order = sorted(per_node)
    nodes = compress_hostlist([names[i] for i in order])
    gpus = ";".join(
        f"{names[i]}:{','.join(str(x) for x in mask_indices(per_node[i]))}" for i in order if per_node[i]
    )
    return nodes, gpus


def jobs_frame(out: RunOutput) -> pd.DataFrame:
    """One row per job, columns ``JOB_COLUMNS`` (times in seconds from the run's start)."""
    names = list(out.pool.nodes)
    rows = []
    for job in sorted(out.jobs, key=lambda j: j.id):
        wl = job.wl
        nodes, gpus = _gpu_text(job, names)
        start = job.first_start
        rows.append((
            job.id, wl.name, wl.kind, wl.user, wl.account, wl.qos, job.partition or wl.partition, wl.namespace,
            wl.queue, wl.submit_time, job.eligible, start, job.end, job.state, job.reason, job.via,
            job_shape(job), _pods(job), job_gpus(job), nodes, gpus, wl.time_limit, wl.runtime,
            None if start is None else start - wl.submit_time, job.requeues, job.preemptions,
            round(job.gpu_s_used, 6), round(job.gpu_s_lost, 6), round(job.gpu_s_idle_held, 6),
            wl.array_job_id, wl.array_task_id,
        ))
    frame = pd.DataFrame.from_records(rows, columns=JOB_COLUMNS)
    for col in ("start", "end", "wait", "time_limit"):
        frame[col] = frame[col].astype("float64")
    for col in ("array_job_id", "array_task_id"):
        frame[col] = frame[col].astype("Int64")
    return frame


def timeline_frame(out: RunOutput) -> pd.DataFrame:
    """The allocation step function: one row per instant where anything happened."""
    frame = pd.DataFrame.from_records(
        out.timeline, columns=["time", "allocated_gpus", "running_gpus", "pending_jobs", "running_jobs"]
    )
    total = out.pool.gpu_count or 1
    frame["utilisation"] = frame["allocated_gpus"] / total
    return frame


def events_frame(out: RunOutput) -> pd.DataFrame:
    return pd.DataFrame.from_records(out.events, columns=["time", "event", "job_id", "detail"])


def _stats(values: np.ndarray) -> dict[str, float | int | None]:
    if values.size == 0:
        return {"count": 0, "mean": None, "p50": None, "p95": None, "p99": None}
    p50, p95, p99 = np.percentile(values, [50, 95, 99])
    return {"count": int(values.size), "mean": _r(values.mean()), "p50": _r(p50), "p95": _r(p95), "p99": _r(p99)}


def _r(x: float) -> float:
    return round(float(x), 3)


def _integral(timeline: list[tuple], column: int, end: float) -> float:
    """Area under a step function sampled at event instants, up to ``end``."""
    area = 0.0
    for (t0, *vals), nxt in zip(timeline, timeline[1:] + [(end,)]):
        t1 = min(nxt[0], end)
        if t1 > t0:
            area += vals[column - 1] * (t1 - t0)
    return area


def account_shares(pool: Pool) -> dict[str, float]:
    """Each account's normalised share of the pool, from the sacctmgr Fairshare tree.

    Shares multiply down the tree (an account's share of its parent × the parent's share),
    as Slurm's NormShares does. Empty when the pool has no accounting.
    """
    acct = pool.slurm.accounting if pool.slurm is not None else None
    if acct is None or not acct.accounts:
        return {}
    out: dict[str, float] = {}

    def walk(parent: str, share: float, depth: int) -> None:
        kids = [a for a in acct.children(parent)]
        raw = [k.fairshare if isinstance(k.fairshare, int) else 0 for k in kids]
        total = sum(raw) or 1
        for kid, r in zip(kids, raw):
            s = share * r / total
            out[kid.account] = round(s, 6)
            if depth < 64:
                walk(kid.account, s, depth + 1)

    walk("root", 1.0, 0)
    return out


def summarise(out: RunOutput, jobs: pd.DataFrame | None = None, fleet=None) -> dict:
    """The run's headline figures and breakdowns, as plain JSON-ready data.

    With ``fleet`` (the run's services) the job figures (counts, waits, slowdowns, breakdowns)
    are over the workload's own jobs: the services' replica workloads never end on their own,
    so they have no runtime to slow down, and are reported in ``services`` (per service and
    overall) instead, beside ``quota`` (Kueue borrowing and reclaiming); see
    ``gpupool.fleet.accounting``.
    """
    jobs = jobs_frame(out) if jobs is None else jobs
    if fleet is not None:
        replicas = {job_id for ctrl in fleet.controllers for job_id in ctrl.records}
        jobs = jobs[~jobs["id"].isin(replicas)]
    pool = out.pool
    total_gpus = pool.gpu_count
    started = jobs[jobs["start"].notna()]
    first_submit = float(jobs["submit"].min()) if len(jobs) else 0.0
    end = float(np.nanmax(jobs["end"].to_numpy(dtype=float))) if jobs["end"].notna().any() else out.end_time
    if fleet is None or not len(jobs) or jobs["end"].isna().any():
        end = max(end, out.end_time)  # (services alone run to their own end; not the workload's)
    makespan = max(0.0, end - first_submit)
    alloc_area = _integral(out.timeline, 1, end)
    busy_area = _integral(out.timeline, 2, end)
    capacity = total_gpus * makespan
    # Steady state: the window in which work keeps arriving (first to last submission). Over
    # the whole makespan a long drain tail dilutes utilisation; both are reported.
    last_submit = float(jobs["submit"].max()) if len(jobs) else 0.0
    window = max(0.0, last_submit - first_submit)
    window_area = _integral(out.timeline, 1, last_submit)
    ran = started.copy()
    ran["run"] = ran["end"].fillna(end) - ran["start"]
    slow = ((ran["wait"] + ran["runtime"].clip(lower=0)) / np.maximum(ran["runtime"], SLOWDOWN_BOUND_S)).clip(lower=1.0)
    ran["slowdown"] = slow

    def breakdown(col: str) -> dict:
        result = {}
        for key, grp in ran.groupby(ran[col].fillna("(none)"), sort=True):
            result[str(key)] = {
                "wait": _stats(grp["wait"].to_numpy(dtype=float)),
                "bounded_slowdown": _stats(grp["slowdown"].to_numpy(dtype=float)),
            }
        return result

    gpu_hours = (jobs.groupby(jobs["account"].fillna("(none)"), sort=True)["gpu_seconds_used"].sum() / 3600.0)
    shares = account_shares(pool)
    used_total = float(gpu_hours.sum()) or 1.0
    accounts = {
        str(acct): {"gpu_hours": _r(h), "fraction_used": _r(h / used_total), "share": shares.get(str(acct))}
        for acct, h in gpu_hours.items()
    }
    states = {str(k): int(v) for k, v in jobs["state"].value_counts().sort_index().items()}
    result = {
        "policy": out.policy,
        "pool": pool.name,
        "gpus": total_gpus,
        "jobs": len(jobs),
        "states": states,
        "never_started": int(jobs["start"].isna().sum()),
        "makespan_s": _r(makespan),
        "utilisation": _r(alloc_area / capacity) if capacity else 0.0,
        "busy_utilisation": _r(busy_area / capacity) if capacity else 0.0,
        "utilisation_while_submitting": _r(window_area / (total_gpus * window)) if window and total_gpus else 0.0,
        "gpu_hours_allocated": _r(alloc_area / 3600.0),
        "gpu_hours_used": _r(jobs["gpu_seconds_used"].sum() / 3600.0),
        "gpu_hours_lost_to_preemption": _r(jobs["gpu_seconds_lost"].sum() / 3600.0),
        "gpu_hours_idle_in_incomplete_gangs": _r(jobs["gpu_seconds_idle_held"].sum() / 3600.0),
        "preemptions": int(jobs["preemptions"].sum()),
        "requeues": int(jobs["requeues"].sum()),
        "wait": _stats(ran["wait"].to_numpy(dtype=float)),
        "bounded_slowdown": _stats(ran["slowdown"].to_numpy(dtype=float)),
        "by_shape": breakdown("shape"),
        "by_account": breakdown("account"),
        "by_queue": breakdown("queue"),
        "accounts": accounts,
    }
    if fleet is not None:
        result.update(fleet_summary(out, fleet, max(end, out.end_time)))
    return result


def fleet_summary(out: RunOutput, fleet, end: float) -> dict:
    """Service metrics (per service and overall) and the training-side quota figures."""
    from gpupool.fleet import accounting

    by_id = {j.id: j for j in out.jobs}
    per_service = [accounting.service_summary(c, by_id, out.end_time) for c in fleet.controllers]
    replicas = {job_id for ctrl in fleet.controllers for job_id in ctrl.records}
    batch = [j for j in out.jobs if j.wl.kind != KIND_SERVICE and j.id not in replicas]
    usage = accounting.queue_usage(out.pool, out.jobs, fleet.recorder, end)
    quota = {
        "gpu_hours_borrowed": accounting.borrowed_gpu_hours(out.pool, usage, end),
        "reclaimed": accounting.reclaims(out.pool, by_id, out.events, usage, end),
        "training_gpu_hours_lost_to_preemption": accounting.training_lost_gpu_hours(batch),
    }
    return {
        "services": {"overall": accounting.services_overall(per_service),
                     "by_service": {s["name"]: s for s in per_service}},
        "quota": quota,
    }


def summary_frame(summary: dict) -> pd.DataFrame:
    """The nested summary flattened to (section, group, metric, value) rows for notebooks."""
    rows: list[tuple[str, str, str, object]] = []
    for key, value in summary.items():
        if isinstance(value, dict) and key.startswith("by_"):
            for group, parts in value.items():
                for part, stats in parts.items():
                    for metric, v in stats.items():
                        rows.append((key, group, f"{part}.{metric}", v))
        elif isinstance(value, dict) and key == "accounts":
            for group, stats in value.items():
                for metric, v in stats.items():
                    rows.append((key, group, metric, v))
        elif isinstance(value, dict):
            for metric, v in value.items():
                rows.append(("overall", "", f"{key}.{metric}", v))
        else:
            rows.append(("overall", "", key, value))
    return pd.DataFrame.from_records(rows, columns=["section", "group", "metric", "value"])

