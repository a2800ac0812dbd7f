"""A simulated run seen through Slurm's own commands: ``sacct``, ``squeue`` (``--start``),
``sprio`` and ``sshare -l``, at the end of the run or at any instant ``T``.

How an instant is obtained: the run is replayed with ``until=T`` (``instant``). The engine
stops after applying every event at ``T`` and the policy's pass at ``T``, so job states,
pending reasons, the Slurm policy's planned starts (``policy.planned``, from its last
backfill cycle ≤ T) and its memos are exactly what slurmctld would hold at ``T``. Runs are
deterministic, so the replay is the finished run's prefix.

Views are pure functions of an ``Instant`` (or, for ``sacct``/``squeue`` without ``--start``,
of a finished run's ``jobs.parquet`` + ``events.parquet``):

* per-run records come from the event log (``started`` / ``preempted`` / ``node_fail`` /
  ``requeued`` / ``finished``): a requeued job's earlier runs end ``PREEMPTED`` (preemption)
  or ``NODE_FAIL`` (node failure), as Slurm 22.05 records them (spec §9, §12); ``-D`` shows
  them, otherwise only the newest record per job is listed, as sacct does;
* priorities and their factors are the Slurm policy's own code (``SlurmPolicy.factors`` and
  ``priority.combine``) evaluated at ``T`` with the fair share of the decay pass ≤ ``T``;
* fair share is recomputed from the run's segments with the policy's decay rules
  (``decay.UsageLedger``: PriorityCalcPeriod passes, half-life, reset period, the job-end
  remainder only with ``AccountingStorageEnforce=limits``) and its Fair Tree / classic code.

Jobs rejected at submit (gpupool's ``REJECTED``) never get a Slurm job record (sbatch fails),
so none of these views lists them; ``Instant.rejected`` counts them.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from types import SimpleNamespace

import pandas as pd

from gpupool.errors import GpupoolError
from gpupool.formats.hostlist import compress_hostlist
from gpupool.formats.slurm_time import (
    SlurmTimeError,
    parse_duration,
    parse_timestamp,
)
from gpupool.ledger.query import parse_format, render_acct
from gpupool.ledger.sacct_fields import field_value
from gpupool.report.metrics import job_gpus

DEFAULT_EPOCH = datetime(2026, 1, 5, tzinfo=timezone.utc)

EXIT_CODES = {"COMPLETED": "0:0", "FAILED": "1:0", "CANCELLED": "0:15", "TIMEOUT": "0:0",
              "PREEMPTED": "0:0", "NODE_FAIL": "0:0", "REQUEUED": "0:0"}
#: squeue's compact state codes.
STATE_CODES = {"PENDING": "PD", "RUNNING": "R", "SUSPENDED": "S", "CONFIGURING": "CF", "COMPLETED": "CD", "FAILED": "F",
               "CANCELLED": "CA", "TIMEOUT": "TO", "PREEMPTED": "PR", "NODE_FAIL": "NF", "REQUEUED": "RQ"}

#: sacct fields printed when no ``--format`` is given (a wider default than sacct's own:
#: these views exist to inspect scheduling).
VIEW_FORMAT = ("JobID,JobName,Partition,Account,User,QOS,State,Submit,Start,End,Elapsed,Timelimit,"
               "NodeList,Reason,Flags")


class ViewError(GpupoolError):
    pass


# ------------------------------------------------------------------------------ time input
def parse_at(text: str | float | int | None, epoch: datetime = DEFAULT_EPOCH) -> float | None:
    """``--at``: plain seconds (``3600``, ``90.5``), a Slurm duration with ``:`` or ``-``
    (``1:00:00``, ``1-12``), or an ISO timestamp taken relative to ``epoch``."""
    if text is None:
        return None
    if isinstance(text, (int, float)):
        return float(text)
    s = str(text).strip()
    if re.fullmatch(r"\d+(\.\d+)?", s):
        return float(s)
    if re.fullmatch(r"\d{4}-\d{2}-\d{2}([T ].*)?", s):
        return (parse_timestamp(s) - epoch).total_seconds()
    try:
        value = parse_duration(s)
    except SlurmTimeError:
        value = None
    if value is None:
        raise ViewError(f"--at: expected seconds (3600), a Slurm duration (1:00:00, 1-12) or a "
                        f"timestamp (2026-01-05T01:00:00), got {text!r}")
    return float(value)


def parse_epoch(text: str | None) -> datetime:
    if not text:
        return DEFAULT_EPOCH
    try:
        return parse_timestamp(text)
    except SlurmTimeError as exc:
        raise ViewError(f"--epoch: {exc}") from None


# ------------------------------------------------------------------------------ the instant
@dataclass
class Instant:
    """A run stopped at ``at`` (None = run to the end): its jobs, events and policy object."""

    pool: object
    at: float | None
    policy_name: str
    policy: object | None  # the policy object after the run (a SlurmPolicy for --policy slurm)
    jobs: dict  # id -> engine Job (state as of ``at``)
    events: list  # (time, event, job_id, detail), all ≤ at
    end_time: float = 0.0
    notes: list[str] = field(default_factory=list)

    @property
    def now(self) -> float:
        return self.end_time if self.at is None else self.at

    @property
    def rejected(self) -> int:
        return sum(1 for j in self.jobs.values() if j.state == "REJECTED")

    @property
    def slurm(self):
        """The SlurmPolicy of this run, or None."""
        from gpupool.policy.slurm.policy import SlurmPolicy

        return self.policy if isinstance(self.policy, SlurmPolicy) else None


def instant(pool, workload=None, policy: str = "slurm", at: float | None = None, *,
            options: dict | None = None, faults=()) -> Instant:
    """Replay ``workload`` on ``pool`` under ``policy`` up to ``at`` (inclusive) and keep the
    policy object. ``--policy slurm`` runs with its ``record`` option on (plan logs kept)."""
    from gpupool.engine.core import Engine
    from gpupool.engine.policy_api import make_policy
    from gpupool.formats.pool_dir import load_pool
    from gpupool.model.pool import Pool
    from gpupool.workload.sources import load_workload

    if not isinstance(pool, Pool):
        pool = load_pool(pool)
    workloads = workload if isinstance(workload, list) else load_workload(workload, pool)
    opts = dict(options or {})
    if policy == "slurm":
        opts.setdefault("record", True)
    pol = make_policy(policy, pool, opts)
    out = Engine(pool, workloads, pol, faults=list(faults), until=at).run()
    return Instant(pool, at, policy, pol, {j.id: j for j in out.jobs}, list(out.events), out.end_time)


def from_result(result, pool=None) -> Instant:
    """An ``Instant`` at the end of a finished ``gpupool.simulate`` result (no policy object:
    sacct and squeue work; sprio, sshare and ``squeue --start`` need ``instant``)."""
    out = result.output
    return Instant(pool or out.pool, None, out.policy, None, {j.id: j for j in out.jobs}, list(out.events),
                   out.end_time)


# ------------------------------------------------------------------------------ job facts
def _evaluator(inst: Instant):
    """A SlurmPolicy set up on the pool: the run's own, or a fresh one (for billing, limits,
    partitions and accounts of runs made under other policies). None if the pool cannot
    configure one."""
    from gpupool.engine.nodes import NodeTable
    from gpupool.policy.slurm.policy import SlurmPolicy

    pol = inst.slurm
    if pol is None:
        pol = getattr(inst, "_fresh_slurm", None)
        if pol is None:
            try:
                pol = SlurmPolicy(inst.pool, {})
            except GpupoolError:
                return None
            inst._fresh_slurm = pol
    if pol._nodes is None:
        pol._setup(SimpleNamespace(nodes=NodeTable(inst.pool)))
    return pol


def _job_info(inst: Instant, job, pol) -> dict:
    from gpupool.policy.slurm.tres import tres_billing, tres_text

    wl = job.wl
    info = {"user": wl.user or "root", "account": wl.account or "", "qos": wl.qos or "",
            "partition": wl.partition or "", "timelimit": wl.time_limit, "req_tres": "", "alloc_tres": "",
            "held_tres": "", "ncpus": 0, "nnodes": 0}
    if pol is None:
        return info
    req = pol.req(job)
    part = pol.run_part.get(job.id) if hasattr(pol, "run_part") else None
    pinfo = pol.parts.get(part or (req.parts[0] if req.parts else ""))
    if not part:  # pending: in the order slurmctld's submit-time test left its partitions
        text = getattr(pol, "pending_partition_text", None)
        part = text(job) if text is not None else ",".join(req.parts)
    info.update(user=req.user, account=req.account, qos=req.qos or "", partition=part)
    if pinfo is not None:
        info["timelimit"] = pol.time_limit(job, pinfo)
        if info["timelimit"] is None and pinfo.max_time is not None:
            info["timelimit"] = pinfo.max_time
    weights = pinfo.billing_weights if pinfo is not None else {}

    def billing(t: dict) -> int:
        return int(tres_billing(t, weights, "MAX_TRES" in pol.s.flags))

    # ReqTRES is billed once, at submit, under the first partition the job names (a later start
    # elsewhere does not change it); AllocTRES under the partition it runs in
    rt = dict(req.req_tres)
    info["req_tres"] = tres_text({**rt, "billing": pol.req_billing(req)})
    held = req.tres  # what a run that no longer holds anything held: the filled-in request
    info["held_tres"] = tres_text({**held, "billing": billing(held)})
    if job.placement:
        at = pol.alloc_tres(job.placement)
        info["alloc_tres"] = tres_text({**at, "billing": billing(at)})
        info["ncpus"] = at["cpu"]
        info["nnodes"] = at["node"]
    return info


def _started_detail(detail: str) -> tuple[str, list[tuple[str, str]]]:
    """A ``started`` event's detail, ``[VIA ]node:idx,idx;node:idx``, as (via, [(node, idxs)])."""
    head, _, rest = (detail or "").partition(" ")
    if ":" in head and not rest:
        head, rest = "", head
    place = []
    for part in rest.split(";"):
        name, sep, idxs = part.partition(":")
        if name and sep:
            place.append((name, idxs))
    return head, place


def _runs(job, evs: list, requeue_delay: float) -> list[dict]:
    """The job's run records from its events: closed ones, then the open (or final) one."""
    runs = []
    cur = {"submit": job.wl.submit_time,
           "eligible": job.wl.submit_time if job.wl.begin_time is None else max(job.wl.submit_time, job.wl.begin_time),
           "start": None, "end": None, "via": "", "state": None, "place": [], "suspended": 0.0, "susp_at": None}
    why = None
    for t, ev, _jid, detail in evs:
        if ev == "started":
            cur["start"] = t
            cur["via"], cur["place"] = _started_detail(detail)
        elif ev == "suspended":
            cur["susp_at"] = t
        elif ev == "resumed" and cur["susp_at"] is not None:
            cur["suspended"] += t - cur["susp_at"]
            cur["susp_at"] = None
        elif ev == "preempted":
            why = "PREEMPTED"
        elif ev == "node_fail":
            why = "NODE_FAIL"
        elif ev == "requeued":
            _close_suspension(cur, t)
            cur["end"], cur["state"] = t, why or "REQUEUED"
            runs.append(cur)
            delay = requeue_delay if why == "PREEMPTED" else 0.0
            cur = {"submit": t, "eligible": t + delay, "start": None, "end": None, "via": "", "state": None,
                   "place": [], "suspended": 0.0, "susp_at": None}
            why = None
        elif ev == "finished":
            _close_suspension(cur, t)
            cur["end"], cur["state"] = t, detail
    runs.append(cur)
    return runs


def _close_suspension(run: dict, t: float) -> None:
    """A run that ends while suspended was suspended until its end."""
    if run["susp_at"] is not None:
        run["suspended"] += t - run["susp_at"]
        run["susp_at"] = None


def sacct_records(inst: Instant, *, epoch: datetime = DEFAULT_EPOCH, duplicates: bool = False,
                  priorities: dict | None = None) -> list[dict]:
    """sacct's job records (row dicts in the ledger's shape, printable with its field code)."""
    pol = _evaluator(inst)
    now = inst.now
    base = epoch.timestamp()
    by_job: dict[int, list] = {}
    for e in inst.events:
        by_job.setdefault(e[2], []).append(e)
    if priorities is None and inst.slurm is not None:
        priorities = {r["job_id"]: r["priority"] for r in sprio_rows(inst)}
    priorities = priorities or {}
    delay = pol.s.requeue_delay if pol is not None else 121.0
    names = list(inst.pool.nodes)
    rows = []
    for jid in sorted(inst.jobs):
        job = inst.jobs[jid]
        if job.state == "REJECTED" or job.submit > now or (job.wl.submit_time > now):
            continue
        wl = job.wl
        info = _job_info(inst, job, pol)
        runs = _runs(job, by_job.get(jid, []), delay)
        last = runs[-1]
        last["eligible"] = job.eligible
        if not duplicates:
            runs = runs[-1:]
        job_id = (f"{wl.array_job_id}_{wl.array_task_id}" if wl.array_job_id is not None
                  and wl.array_task_id is not None else str(jid))
        for run in runs:
            is_last = run is last
            state = run["state"]
            if state is None:
                if run["start"] is None:
                    state = "CONFIGURING" if is_last and job.state == "PLACING" else "PENDING"
                else:
                    state = "SUSPENDED" if run["susp_at"] is not None else "RUNNING"
            start, end = run["start"], run["end"]
            elapsed = 0.0
            if start is not None:
                # sacct's Elapsed excludes suspended time (spec §10): End - Start - Suspended
                elapsed = (end if end is not None else now) - start - run["suspended"]
                if run["susp_at"] is not None:
                    elapsed -= now - run["susp_at"]
            node_list = gpus_text = ""
            if run["place"]:
                order = {n: i for i, n in enumerate(names)}
                per: dict[str, set] = {}
                for n, idxs in run["place"]:
                    per.setdefault(n, set()).update(int(k) for k in idxs.split(",") if k)
                ns = sorted(per, key=lambda n: order.get(n, len(order)))
                node_list = compress_hostlist(ns)
                gpus_text = ";".join(f"{n}:{','.join(map(str, sorted(per[n])))}" for n in ns if per[n])
            elif is_last and job.placement:
                per_node: dict[int, int] = {}
                for node, mask, _c, _m in job.placement:
                    per_node[node] = per_node.get(node, 0) | mask
                node_list = compress_hostlist([names[i] for i in sorted(per_node)])
                from gpupool.engine.nodes import mask_indices
                gpus_text = ";".join(f"{names[i]}:{','.join(map(str, mask_indices(per_node[i])))}"
                                     for i in sorted(per_node) if per_node[i])
            pending = state == "PENDING"
            eligible = run["eligible"]
            rows.append({
                "job_id": job_id, "job_id_raw": jid, "name": wl.name, "user": info["user"],
                "account": info["account"], "partition": info["partition"], "qos": info["qos"],
                "origin": inst.pool.name, "priority": priorities.get(jid) if pending and is_last else None,
                "submit": base + run["submit"],
                "eligible": None if eligible is None or eligible > now else base + eligible,
                "start": None if start is None else base + start, "end": None if end is None else base + end,
                "elapsed": elapsed, "timelimit": info["timelimit"], "state": state,
                "exit_code": EXIT_CODES.get(state, "0:0"),
                "reason": (job.reason or "None") if pending and is_last else "None",
                "flags": run["via"] if run["via"] in ("SchedMain", "SchedBackfill", "SchedSubmit") else "",
                "req_tres": info["req_tres"],
                "alloc_tres": (info["alloc_tres"] or info["held_tres"]) if start is not None else "",
                "ncpus": info["ncpus"] if start is not None else 0,
                "nnodes": info["nnodes"] if start is not None else 0,
                "node_list": node_list if start is not None else "",
                "gpus": job_gpus(job), "gpu_type": "", "gpu_indices": gpus_text if start is not None else "",
                "gpu_seconds": round(job.gpu_s_used, 6), "gpu_seconds_lost": round(job.gpu_s_lost, 6),
                "requeues": job.requeues, "preemptions": job.preemptions, "queue": wl.queue or "",
                "namespace": wl.namespace or "", "kind": wl.kind, "extra": {},
            })
    return rows


def sacct_text(rows: list[dict], fmt: str | None = None, *, parsable2: bool = False,
               noheader: bool = False) -> str:
    """Print records as sacct does: fixed widths (``Field%N``; ``%-N`` left-justified,
    over-long values end in ``+``) or ``--parsable2`` (``|``, no trailing ``|``)."""
    fields = parse_format(fmt or VIEW_FORMAT)
    return render_acct(rows, fields, parsable="|" if parsable2 else None, noheader=noheader)


def sacct_json(rows: list[dict], fmt: str | None = None) -> list[dict]:
    fields = parse_format(fmt or VIEW_FORMAT)
    return [{f: field_value(r, f) for f, _ in fields} for r in rows]


# ------------------------------------------------------------------------------ from Parquet
def instant_from_run_dir(run_dir, pool, at: float | None = None) -> Instant:
    """A finished run's ``jobs.parquet`` + ``events.parquet`` as an ``Instant`` at ``at``.

    States at ``at`` come from the event log. What Parquet does not keep is unknown: CPU and
    memory of placements (AllocTRES shows GPUs and nodes only), the pending reason at ``at``
    (the job's last reason is shown), and everything sprio/sshare/squeue --start need."""
    from pathlib import Path

    from gpupool.model.workload import PodSet, Workload

    d = Path(run_dir)
    try:
        jobs = pd.read_parquet(d / "jobs.parquet")
        events = pd.read_parquet(d / "events.parquet")
    except (OSError, ValueError) as exc:
        raise ViewError(f"--run {d}: cannot read jobs.parquet/events.parquet ({exc})") from None
    evs = [(float(t), str(e), int(j), str(x)) for t, e, j, x in events[["time", "event", "job_id", "detail"]].itertuples(index=False)]
    if at is not None:
        evs = [e for e in evs if e[0] <= at]
    last_t = max((e[0] for e in evs), default=0.0)
    out: dict = {}
    idx = {n: i for i, n in enumerate(pool.nodes)}
    for r in jobs.to_dict("records"):
        def val(k, r=r):
            v = r.get(k)
            return None if v is None or (isinstance(v, float) and math.isnan(v)) or v is pd.NA else v
        wl = Workload(int(r["id"]), str(r["name"]), (PodSet(count=int(r["pods"] or 1)),),
                      submit_time=float(r["submit"]), runtime=float(val("runtime") or 0.0),
                      time_limit=val("time_limit"), kind=val("kind") or "batch", user=val("user"),
                      account=val("account"), qos=val("qos"), partition=val("partition"),
                      array_job_id=val("array_job_id"), array_task_id=val("array_task_id"),
                      namespace=val("namespace"))
        job = SimpleNamespace(wl=wl, id=wl.id, state="PENDING", submit=wl.submit_time, eligible=float(r["eligible"]),
                              reason=val("reason") or "", placement=(), total_gpus=int(r["gpus"] or 0),
                              requeues=int(r["requeues"] or 0), preemptions=int(r["preemptions"] or 0),
                              gpu_s_used=float(r["gpu_seconds_used"] or 0.0), gpu_s_lost=float(r["gpu_seconds_lost"] or 0.0))
        mine = [e for e in evs if e[2] == wl.id]
        kinds = [e[1] for e in mine]
        if r["state"] == "REJECTED" and "started" not in kinds:
            job.state = "REJECTED"
        elif mine and mine[-1][1] == "finished":
            job.state = mine[-1][3]
        elif "started" in kinds and kinds[-1] not in ("requeued",) and kinds.count("started") > kinds.count("requeued"):
            job.state = "RUNNING"
            stops = [k for k in kinds if k in ("started", "suspended", "resumed")]
            if stops[-1] == "suspended":
                job.state = "SUSPENDED"
        req_at = [e[0] for e in mine if e[1] == "requeued"]
        if req_at:
            job.submit = req_at[-1]
            if at is not None and job.requeues > len(req_at):  # a later requeue: eligibility of this one unknown
                job.eligible = req_at[-1]
        if job.state != "PENDING" and val("gpu_indices") and (at is None or job.state != "PENDING"):
            pl = []
            for part in str(r["gpu_indices"]).split(";"):
                name, _, idxs = part.partition(":")
                mask = 0
                for k in idxs.split(","):
                    if k:
                        mask |= 1 << int(k)
                if name in idx:
                    pl.append((idx[name], mask, 0, 0))
            job.placement = tuple(pl)
        elif job.state != "PENDING" and val("nodes"):
            from gpupool.formats.hostlist import expand_hostlist
            job.placement = tuple((idx[n], 0, 0, 0) for n in expand_hostlist(str(r["nodes"])) if n in idx)
        if job.state == "PENDING" and at is not None and mine and r["state"] != "PENDING":
            job.reason = ""  # the reason at ``at`` is not stored
        out[wl.id] = job
    return Instant(pool, at, "", None, out, evs, last_t if at is None else at,
                   notes=["from Parquet: AllocTRES without CPU/memory; pending reasons at --at are not stored"])


# ------------------------------------------------------------------------------ sprio
SPRIO_COLUMNS = ("JOBID", "PARTITION", "USER", "PRIORITY", "SITE", "AGE", "ASSOC", "FAIRSHARE", "JOBSIZE",
                 "PARTITION", "QOS", "NICE", "TRES")
_SPRIO_WIDTHS = (15, -9, 8, 10, 10, 10, 10, 10, 10, 10, 10, 6, 20)


def _need_slurm(inst: Instant, what: str):
    pol = inst.slurm
    if pol is None:
        raise ViewError(f"{what} needs a run under --policy slurm (this run used "
                        f"{inst.policy_name or 'a stored result'}; re-simulate with --policy slurm)")
    return pol


def _pending_at(inst: Instant, pol):
    """The pending jobs ``sprio`` lists at the instant: (job, accrue, the infos of its
    partitions). As 22.05's ``priority_p_get_priority_factors_list`` picks them: every
    pending job not held (priority 0) that is eligible, i.e. its begin time (set once it has
    no dependency left and any ``--begin`` has passed) is not after now, or, under
    PriorityFlags=ACCRUE_ALWAYS, whose submit time is not (so a job waiting on a dependency
    or a later ``--begin`` is listed too); one row per partition it names, whatever that
    partition's state or limits (``_filter_job`` filters by job, user and partition name
    only)."""
    now = inst.now
    out = []
    for job in sorted((j for j in inst.jobs.values() if j.state == "PENDING" and j.submit <= now),
                      key=lambda j: j.id):
        if pol.submit_verdict(job) is not None:
            continue
        accrue = sprio_accrue(pol, job, inst.jobs, now)
        if accrue is None:
            continue
        parts = [pol.parts[pname] for pname in pol.req(job).parts if pname in pol.parts]
        if parts:
            out.append((job, accrue, parts))
    return out


def sprio_accrue(pol, job, jobs: dict, now: float) -> float | None:
    """Since when pending ``job`` ages for sprio at ``now``, or None when sprio does not list
    it (``_pending_at``): held, or not yet eligible (a later ``--begin``, a dependency not
    satisfied among ``jobs``) unless PriorityFlags=ACCRUE_ALWAYS, which ages every job from
    its submission, as the queue build counts it."""
    from gpupool.policy.dependencies import SATISFIED, dependency_state
    from gpupool.policy.slurm.queue import dependency_time

    if job.wl.priority == 0:
        return None
    if pol.s.accrue_always:
        return job.submit
    if job.eligible > now:
        return None
    accrue = job.eligible
    if job.wl.dependency:
        if dependency_state(job, jobs) != SATISFIED:
            return None
        accrue = max(accrue, dependency_time(job, jobs))
    return accrue


def sprio_rows(inst: Instant) -> list[dict]:
    """Per pending job and partition: the weighted factors and the priority (spec §3).

    Factors are evaluated as the policy does at ``T``: at the last PriorityCalcPeriod
    boundary ≤ T (not before the job's submit), with the fair share of that decay pass."""
    from gpupool.policy.slurm import priority

    pol = _need_slurm(inst, "sprio")
    s = pol.s
    now = inst.now
    T = math.floor(now / s.calc_period) * s.calc_period
    fs_map = fairshare_by_user(inst) if pol.use_fs else {}
    rows = []
    for job, accrue, parts in _pending_at(inst, pol):
        req = pol.req(job)
        for info in parts:
            t = max(T, job.submit)
            fs = fs_map.get(f"{req.account}/{req.user}", 0.0)
            f = pol.factors(job, info, accrue, t, fs)
            w = s.weights if s.multifactor else {}
            tw = s.tres_weights if s.multifactor else {}
            weighted = {
                "site": 0.0, "age": w.get("age", 0) * f["age"], "assoc": w.get("assoc", 0) * f["assoc"],
                "fairshare": w.get("fairshare", 0) * f["fairshare"], "job_size": w.get("job_size", 0) * f["job_size"],
                "partition": w.get("partition", 0) * f["partition"], "qos": w.get("qos", 0) * f["qos"],
                "tres": {k: tw[k] * f["tres"].get(k, 0.0) for k in tw},
            }
            if job.wl.priority is not None:
                prio, how = int(job.wl.priority), "explicit"
            elif not s.multifactor:
                prio, how = pol.priority(job, info, accrue, now), "basic"
            else:
                prio, how = priority.combine(f, s.weights, s.tres_weights, job.wl.nice), "multifactor"
            rows.append({"job_id": job.id, "partition": info.name, "user": req.user, "priority": prio,
                         "nice": job.wl.nice, "weighted": weighted, "factors": f, "how": how,
                         "accrue": accrue, "evaluated_at": t})
    return rows


def _trunc(text: str, width: int) -> str:
    w = abs(width)
    text = text[:w]
    return text.ljust(w) if width < 0 else text.rjust(w)


def sprio_text(rows: list[dict], *, parsable2: bool = False, norm: bool = False) -> str:
    """``sprio -l``'s table (22.05 format ``%.15i %9r %.8u %.10Y %.10S %.10A %.10B %.10F
    %.10J %.10P %.10Q %.6N %.20T``): weighted factors rounded (``-n``: normalised factors)."""
    def num(v: float) -> str:
        return f"{v:.7f}" if norm else f"{v:.0f}"

    body = []
    for r in rows:
        src = r["factors"] if norm else r["weighted"]
        tres = ",".join(f"{k}={num(v)}" for k, v in sorted(src["tres"].items()))
        body.append([str(r["job_id"]), r["partition"], r["user"], str(r["priority"]),
                     num(src.get("site", 0.0)), num(src["age"]), num(src["assoc"]), num(src["fairshare"]),
                     num(src["job_size"]), num(src["partition"]), num(src["qos"]), str(r["nice"]), tres])
    if parsable2:
        return "\n".join("|".join(x) for x in [list(SPRIO_COLUMNS)] + body) + "\n"
    lines = [" ".join(_trunc(c, w) for c, w in zip(SPRIO_COLUMNS, _SPRIO_WIDTHS))]
    for b in body:
        lines.append(" ".join(_trunc(c, w) for c, w in zip(b, _SPRIO_WIDTHS)))
    return "\n".join(x.rstrip() for x in lines) + "\n"


# ------------------------------------------------------------------------------ sshare
def usage_at(inst: Instant, pol) -> dict:
    """Decayed RawUsage by (account, user) at the last decay pass ≤ T, recomputed from the
    run's segments with the policy's rules (billing × seconds × QOS UsageFactor)."""
    from gpupool.policy.slurm.decay import UsageLedger, usage_clock, usage_end

    s = pol.s
    ledger = UsageLedger(s.calc_period, s.half_life, s.reset_period, s.limits_enforced)
    now = inst.now
    by_job: dict[int, list] = {}
    for e in inst.events:
        by_job.setdefault(e[2], []).append(e)
    running = []
    for jid, job in sorted(inst.jobs.items()):
        evs = by_job.get(jid)
        if not evs or not any(e[1] == "started" for e in evs):
            continue
        req = pol.req(job)
        q = pol.qos.get(req.qos or "")
        uf = q.usage_factor if q is not None else 1.0
        if job.placement:
            w = pol.billing(job, job.placement)
        else:  # a requeued job pending at T: bill what it asks for
            w = _request_billing(pol, job)
        w *= uf
        for run in _runs(job, evs, s.requeue_delay):
            if run["start"] is None:
                continue
            start = usage_clock(run["start"], pol.epoch)  # whole seconds, as the policy counts
            if run["end"] is None:
                running.append((req.assoc, start, w))
            else:
                ledger.close(req.assoc, start, usage_end(run["end"], pol.epoch, s.calc_period), w)
    return ledger.at(now, running)


def _request_billing(pol, job) -> float:
    from gpupool.policy.slurm.tres import tres_billing

    req = pol.req(job)
    info = pol.parts.get(pol.run_part.get(job.id, "") or (req.parts[0] if req.parts else ""))
    weights = info.billing_weights if info is not None else {}
    return tres_billing(req.tres, weights, "MAX_TRES" in pol.s.flags)


def share_tree(inst: Instant):
    """The association tree at T with sshare's columns filled (Fair Tree or classic)."""
    from gpupool.policy.slurm.fairshare import build_tree, classic, fair_tree

    pol = _evaluator(inst)
    if pol is None or pol.acct is None:
        raise ViewError("sshare needs an accounting tree (a sacctmgr dump in the pool)")
    root, _users = build_tree(pol.acct, usage_at(inst, pol))
    if pol.s.fair_tree:
        fair_tree(root)
    else:
        classic(root, pol.s.dampening)
    root.norm_usage = 1.0 if root.raw_usage else 0.0
    return root, pol


def fairshare_by_user(inst: Instant) -> dict[str, float]:
    from gpupool.policy.slurm.fairshare import walk

    root, _ = share_tree(inst)
    return {f"{n.key[0]}/{n.key[1]}": n.fairshare for n in walk(root) if n.user}


def sshare_rows(inst: Instant) -> list[dict]:
    """sshare -l rows, tree order (root, then per account its users, then its sub-accounts)."""
    root, pol = share_tree(inst)
    fair = pol.s.fair_tree
    rows = [{"Account": "root", "User": "", "depth": 0, "RawShares": "", "NormShares": root.norm_shares
             if fair else 1.0, "RawUsage": root.raw_usage, "NormUsage": root.norm_usage,
             "EffectvUsage": root.effective_usage, "FairShare": None, "LevelFS": None}]

    def visit(node, depth):
        kids = sorted(node.children, key=lambda c: (0 if c.user else 1, c.name))
        for c in kids:
            rows.append({"Account": c.key[0] if c.user else c.name, "User": c.name if c.user else "",
                         "depth": depth, "RawShares": "parent" if c.is_parent else str(c.shares),
                         "NormShares": c.norm_shares, "RawUsage": c.raw_usage, "NormUsage": c.norm_usage,
                         "EffectvUsage": c.effective_usage, "FairShare": c.fairshare if c.user else None,
                         "LevelFS": c.level_fs if fair else None})
            if not c.user:
                visit(c, depth + 1)

    visit(root, 1)
    return rows


SSHARE_COLUMNS = ("Account", "User", "RawShares", "NormShares", "RawUsage", "NormUsage", "EffectvUsage",
                  "FairShare", "LevelFS", "GrpTRESMins", "TRESRunMins")
_SSHARE_WIDTHS = (-20, 10, 10, 11, 11, 11, 13, 10, 10, 30, 30)


def _sshare_cells(r: dict) -> list[str]:
    def f6(v):
        if v is None:
            return ""
        return "inf" if math.isinf(v) else f"{v:.6f}"

    return [" " * r["depth"] + r["Account"], r["User"], r["RawShares"], f6(r["NormShares"]),
            str(int(r["RawUsage"])), f6(r["NormUsage"]), f6(r["EffectvUsage"]), f6(r["FairShare"]),
            f6(r["LevelFS"]), "", ""]


def sshare_text(rows: list[dict], *, parsable2: bool = False) -> str:
    """``sshare -l``: headers right-justified, Account left-justified and indented one space
    per level, RawUsage truncated to an integer, LevelFS ``inf`` for unused shares."""
    body = [_sshare_cells(r) for r in rows]
    if parsable2:
        return "\n".join("|".join(x) for x in [list(SSHARE_COLUMNS)] + body) + "\n"
    lines = [" ".join(c.rjust(abs(w)) for c, w in zip(SSHARE_COLUMNS, _SSHARE_WIDTHS)),
             " ".join("-" * abs(w) for w in _SSHARE_WIDTHS)]
    for b in body:
        lines.append(" ".join(_trunc(c, w) for c, w in zip(b, _SSHARE_WIDTHS)))
    return "\n".join(x.rstrip() for x in lines) + "\n"


def sshare_json(rows: list[dict]) -> list[dict]:
    out = []
    for r in rows:
        d = {k: v for k, v in r.items() if k != "depth"}
        for k in ("LevelFS", "FairShare"):
            if d[k] is not None and math.isinf(d[k]):
                d[k] = "inf"
        out.append(d)
    return out


# ------------------------------------------------------------------------------ squeue
def squeue_time(seconds: float) -> str:
    """squeue's TIME: ``M:SS``, ``H:MM:SS`` or ``D-HH:MM:SS``."""
    total = max(0, int(seconds))
    d, rest = divmod(total, 86400)
    h, rest = divmod(rest, 3600)
    m, s = divmod(rest, 60)
    if d:
        return f"{d}-{h:02d}:{m:02d}:{s:02d}"
    if h:
        return f"{h}:{m:02d}:{s:02d}"
    return f"{m}:{s:02d}"


def squeue_rows(inst: Instant, *, epoch: datetime = DEFAULT_EPOCH, start: bool = False) -> list[dict]:
    """Jobs pending or running at T (``start``: pending only, with the expected start).

    Order: pending first in queue order (priority, then submit, then id; with the Slurm
    policy), then running jobs by id. The expected start is the Slurm policy's planned start
    from its last backfill cycle ≤ T (``policy.planned``); N/A without one."""
    recs = {r["job_id_raw"]: r for r in sacct_records(inst, epoch=epoch, priorities={})}
    pol = inst.slurm
    prio: dict[int, int] = {}
    if pol is not None:
        for r in sprio_rows(inst):
            prio[r["job_id"]] = max(prio.get(r["job_id"], 0), r["priority"])
    planned = dict(getattr(pol, "planned", {}) or {}) if pol is not None else {}
    now = inst.now
    out = []
    for jid, r in recs.items():
        if r["state"] not in ("PENDING", "RUNNING", "CONFIGURING"):
            continue
        if start and r["state"] != "PENDING":
            continue
        job = inst.jobs[jid]
        elapsed = 0.0 if r["state"] == "PENDING" else r["elapsed"]
        nodes = r["nnodes"] if r["state"] != "PENDING" else _req_nodes(inst, job)
        if r["state"] == "PENDING":
            where = f"({job.reason or 'None'})"
        else:
            where = r["node_list"]
        est = planned.get(jid)
        if est is None and r["state"] == "PENDING" and pol is not None and job.eligible > now:
            est = None
        out.append({"JOBID": r["job_id"], "PARTITION": r["partition"], "NAME": r["name"], "USER": r["user"],
                    "ST": STATE_CODES.get(r["state"], r["state"]), "TIME": squeue_time(elapsed),
                    "NODES": str(nodes), "NODELIST(REASON)": where,
                    "START_TIME": "N/A" if est is None else
                    datetime.fromtimestamp(round(epoch.timestamp() + est), timezone.utc).strftime("%Y-%m-%dT%H:%M:%S"),
                    "SCHEDNODES": "(null)", "state": r["state"], "priority": prio.get(jid, 0),
                    "submit": job.submit, "id": jid, "planned_start_s": est})
    out.sort(key=lambda x: (0 if x["state"] == "PENDING" else 1,
                            -x["priority"] if x["state"] == "PENDING" else 0,
                            x["submit"] if x["state"] == "PENDING" else 0, x["id"]))
    return out


def _req_nodes(inst: Instant, job) -> int:
    """squeue's NODES for a pending job: slurmctld's guess from its last selection
    (``_selected_guess``), else the nodes the job asked for."""
    guess = _selected_guess(inst.slurm, job) if inst.slurm is not None else 0
    if guess:
        return guess
    pol = _evaluator(inst)
    if pol is not None:
        return pol.req(job).nodes
    return max(1, sum(ps.count if ps.one_per_node else 1 for ps in job.wl.pod_sets))


def _selected_guess(pol, job) -> int:
    """For a pending job under the Slurm policy ``pol``, the nodes a selection on the idle
    partition picks for it, else 0 (held, or no placement). slurmctld runs a test-only
    selection for every batch job at submit (``job_allocate``: ``_select_nodes_parts`` with
    ``no_alloc``, which ignores what runs) and ``select_nodes`` keeps its count "on success or
    not" as the job's ``node_cnt_wag``, which squeue shows while the job pends (a later failed
    selection's test-only pass sets it again, likewise on idle nodes); a held job stops before
    it (22.05.8 ``job_mgr.c``, ``node_scheduler.c``). It differs from the asked count where the
    selection decides it: a walk for ``--gpus`` (a real 22.05.8 showed pending ``--gpus=12
    --cpus-per-gpu=4``, ``--gpus=12 --exclusive`` and ``-n4 --gpus=12 --cpus-per-gpu=4`` on 2
    nodes of 8 GPUs, ``--gpus=4``, ``-n2 --gpus=6`` and ``-n10 --gpus=3`` on 1; probes
    p102-p120) and a node range (``-N1-3 --gpus=10 -c4`` on 2, ``-N1-2 --gpus=6`` on 1; p109,
    p110); probe p122 showed it on jobs waiting for their ``--begin`` (BeginTime) and for their
    account's GrpTRES (AssocGrpGRES), and a held job's asked count (JobHeldUser, 1). A job of
    several partitions gets the first, highest PriorityTier first, where it
    is placed (the test-only loop stops at the first success). Not modelled: the count of a
    selection that succeeded but broke a limit, or that counted a preemptor's victims
    (slurmctld keeps that selection's)."""
    if job.reason is not None and job.reason.startswith("JobHeld"):
        return 0
    infos = [pol.parts[name] for name in pol.req(job).parts if name in pol.parts]
    for info in sorted(infos, key=lambda i: -i.tier):  # (stable: the job's order within a tier)
        placement = pol.idle_placement(job, info)
        if placement:
            return len({p[0] for p in placement})
    return 0


SQUEUE_COLUMNS = ("JOBID", "PARTITION", "NAME", "USER", "ST", "TIME", "NODES", "NODELIST(REASON)")
_SQUEUE_WIDTHS = (18, 9, 8, 8, 2, 10, 6, 0)
SQUEUE_START_COLUMNS = ("JOBID", "PARTITION", "NAME", "USER", "ST", "START_TIME", "NODES", "SCHEDNODES",
                        "NODELIST(REASON)")
_SQUEUE_START_WIDTHS = (18, 9, 8, 8, 2, 19, 6, -20, 0)


def squeue_text(rows: list[dict], *, start: bool = False, parsable2: bool = False) -> str:
    """squeue's default format (``%.18i %.9P %.8j %.8u %.2t %.10M %.6D %R``) or, with
    ``--start``, ``%.18i %.9P %.8j %.8u %.2t %.19S %.6D %20Y %R``; values truncated to width."""
    cols = SQUEUE_START_COLUMNS if start else SQUEUE_COLUMNS
    widths = _SQUEUE_START_WIDTHS if start else _SQUEUE_WIDTHS
    if parsable2:
        return "\n".join("|".join(x) for x in [list(cols)] + [[r[c] for c in cols] for r in rows]) + "\n"

    def line(values):
        return " ".join(v if w == 0 else _trunc(v, w) for v, w in zip(values, widths)).rstrip()

    return "\n".join([line(cols)] + [line([r[c] for c in cols]) for r in rows]) + "\n"


def squeue_json(rows: list[dict], *, start: bool = False) -> list[dict]:
    cols = SQUEUE_START_COLUMNS if start else SQUEUE_COLUMNS
    return [{**{c: r[c] for c in cols}, "priority": r["priority"], "planned_start_s": r["planned_start_s"]}
            for r in rows]
