"""Recording a simulation in the ledger: ``record_run(db, result, pool, workload_spec, policy)``.

A run becomes the origin ``run:<run_id>``, where ``run_id`` hashes the pool's tree, the
workload digest, the policy name and options, the seed and the epoch: recording the same
run twice adds nothing. Engine times (seconds from the run's start) become wall-clock times
from ``epoch`` (default :data:`SIM_EPOCH`), so runs print in sacct's formats.

Allocations: a result from :func:`simulate_for_ledger` carries every placement the
engine made (``result.placements``, rebuilt from the placements in the event log), so each GPU of each run segment is recorded with its
node and device index. A plain ``gpupool.simulate`` result has only the event log and each
job's last placement: then each segment (placed/started → preempted, node_fail, finished)
is one allocation, per GPU for the segment that ended the job, and as a GPU count on an
unknown node for earlier segments of a requeued job.
"""
from __future__ import annotations

import hashlib
import json
import math
import re
import time
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path

from gpupool.engine.nodes import mask_indices
from gpupool.ledger import schema as s
from gpupool.ledger.policy import PolicyVersion, commit, find_by_tree, pool_files, tree_hash
from gpupool.ledger.store import Ledger, WriteStats, as_ledger
from gpupool.model.pool import Pool

#: Where simulated time 0 lands on the wall clock unless ``epoch=`` says otherwise.
SIM_EPOCH = datetime(2026, 1, 5, tzinfo=timezone.utc)  # a Monday, 00:00 UTC

_OPEN = ("placed", "started")
_CLOSE = ("preempted", "node_fail", "finished")


def parse_placement(text: str, names: list[str]) -> list[tuple[int, int]]:
    """``node:idx,idx;node:idx`` (the placement in ``started``/``placed`` event details, see
    docs/results.md) -> [(node index, GPU mask)] per pod, in order."""
    index = {n: i for i, n in enumerate(names)}
    pods = []
    for entry in text.split(";"):
        node, _, idx = entry.rpartition(":")
        mask = 0
        for k in idx.split(","):
            if k:
                mask |= 1 << int(k)
        pods.append((index[node], mask))
    return pods


def placements_from_events(events, names: list[str]) -> list[tuple]:
    """Per-pod placements [(job id, node index, GPU mask, from, to or None)] of every run
    segment, rebuilt from the event log: ``placed`` events carry the pods placed by one
    decision, ``started`` the job's whole placement (pods not yet opened start then), and
    ``preempted``/``node_fail``/``finished`` release everything the job held."""
    opened: dict[int, list] = {}
    done: list[tuple] = []
    for t, kind, job_id, detail in events:
        if kind in _OPEN:
            pods = parse_placement(detail.rsplit(" ", 1)[-1], names)
            held = opened.setdefault(job_id, [])
            if kind == "started":
                have = Counter((node, mask) for node, mask, _ in held)
                fresh = []
                for pod in pods:
                    if have[pod]:
                        have[pod] -= 1
                    else:
                        fresh.append(pod)
                pods = fresh
            held.extend((node, mask, t) for node, mask in pods)
        elif kind in _CLOSE:
            for node, mask, since in opened.pop(job_id, ()):
                done.append((job_id, node, mask, since, t))
    for job_id, pods in opened.items():
        done.extend((job_id, node, mask, since, None) for node, mask, since in pods)
    return done


def simulate_for_ledger(pool, workload=None, policy: str = "fifo", **kwargs):
    """``gpupool.simulate`` that also keeps every placement (for per-GPU allocations).

    Returns the same ``SimulationResult``, with ``result.placements`` = [(job id, node
    index, GPU mask, from, to or None)] in engine seconds, read from the event log (events
    are always recorded for this)."""
    import gpupool.simulation as sim

    kwargs["record_events"] = True
    result = sim.simulate(pool, workload, policy, **kwargs)
    out = result.output
    placements = placements_from_events(out.events, list(out.pool.nodes))
    result.placements = sorted(placements, key=lambda p: (p[0], p[3], p[1]))
    return result


def run_origin(run_id: str) -> str:
    return f"run:{run_id}"


def _seed_of(spec: str | None) -> int | None:
    m = re.search(r"[?&]seed=(\d+)", spec or "")
    return int(m.group(1)) if m else None


def _exit_code(state: str) -> str:
    return {"FAILED": "1:0", "CANCELLED": "0:15", "TIMEOUT": "0:15", "PREEMPTED": "0:15"}.get(state, "0:0")


class JobTres:
    """A simulated job's ReqTRES and AllocTRES, and its billing, as the Slurm policy counts
    them (``policy.slurm.tres``) for a job in a Slurm partition: the TRES its placement holds,
    typed GPUs counted where AccountingStorageTRES tracks their type and GPUs left out where it
    tracks none, billed under the TRESBillingWeights of the partition it ran in (summed or,
    with PriorityFlags=MAX_TRES, the largest node TRES plus the rest; its CPUs without
    weights), and the request as slurmctld recorded it at submit (``JobReq.req_tres``), billed
    under the first partition it named. A job that holds nothing is billed its filled-in
    request (what a requeued job held). The partition is where the job ran, else the first it
    named, else the default one for an sbatch job of a ``slurm`` run, or of a ``bridge`` or
    ``operator`` run that is no Kubernetes workload (``kubernetes``: that policy's option). A job
    of no Slurm partition (a Kueue workload) shows its pod sets' CPUs, memory, GPUs and nodes and
    bills its CPUs. Reads only what this needs of slurm.conf, so recording never fails on a
    setting only the Slurm policy uses."""

    def __init__(self, pool: Pool, policy: str, kubernetes: str = "auto") -> None:
        from gpupool.engine.nodes import NodeTable
        from gpupool.formats.slurm_conf import accounting_enforce, priority_flags
        from gpupool.policy.bridge.mapping import is_kubernetes
        from gpupool.policy.slurm.jobinfo import job_req
        from gpupool.policy.slurm.tres import (
            alloc_counts,
            parse_billing_weights,
            tracked_gpu_keys,
            tracked_gpu_tres,
            tres_billing,
            tres_text,
        )

        # (the Slurm policy's modules are imported once per recording, not once per job)
        self._job_req, self._alloc_counts, self._tres_billing = job_req, alloc_counts, tres_billing
        self.text = tres_text
        self._sbatch = {"slurm": lambda wl: True,
                        "bridge": lambda wl: not is_kubernetes(wl, kubernetes),
                        "operator": lambda wl: not is_kubernetes(wl, kubernetes)}.get(policy)

        cfg = pool.slurm
        self._weights: dict[str, dict[str, float]] = {}
        self._default = None
        self._max_tres = False
        self._typed_keys: list = []
        self._gpu_tracked = True
        self._typed: frozenset[str] = frozenset()
        self._untyped_as: str | None = None
        self._acct = None
        self._qos_enforced = True
        self._account_qos: dict[tuple, tuple[str, str]] = {}  # (user, account, QOS named) -> got
        if cfg is None:
            return
        self._acct = cfg.accounting
        self._qos_enforced = "qos" in accounting_enforce(cfg.params)
        self._max_tres = "MAX_TRES" in priority_flags(cfg.params)
        self._gpu_tracked, self._typed, self._untyped_as = tracked_gpu_tres(cfg.params)
        if self._typed:
            self._typed_keys = tracked_gpu_keys(NodeTable(pool), self._typed, self._untyped_as)
        for name, part in cfg.partitions.items():
            self._weights[name] = parse_billing_weights(part.extra.get("TRESBillingWeights", ""))
        default = cfg.default_partition()
        if default is not None:
            self._default = default.name

    def _named(self, wl) -> str | None:
        """The first partition ``wl`` names, else the default one where the run's policy gives
        it one (an sbatch job), else None."""
        first = (wl.partition or "").split(",")[0].strip()
        if first:
            return first
        return self._default if self._sbatch is not None and self._sbatch(wl) else None

    def _bill(self, counts: dict[str, int], weights: dict[str, float]) -> float:
        return self._tres_billing(counts, weights, self._max_tres) if weights else float(counts.get("cpu", 0))

    def _request(self, wl):
        return self._job_req(wl, None, None, {}, self._typed, self._gpu_tracked, self._untyped_as)

    def account_qos(self, wl) -> tuple[str, str]:
        """The account and QOS the job's record shows: for an sbatch job of a Slurm run with
        accounting, those slurmctld gives it (the user's default account, the association's
        DefaultQOS and the rest of ``jobinfo.default_qos``; an unknown QOS dropped where
        ``qos`` is not enforced), as sacct shows them and fair share charges them; else as
        submitted."""
        acct = self._acct
        if acct is None or self._sbatch is None or not self._sbatch(wl):
            return wl.account or "", wl.qos or ""
        # they depend on the user and what the job named only (a live daemon asks for every
        # job it has had at each metrics scrape)
        key = (wl.user, wl.account, wl.qos)
        got = self._account_qos.get(key)
        if got is None:
            req = self._job_req(wl, self._default, acct, acct.qos, qos_enforced=self._qos_enforced)
            got = self._account_qos[key] = (req.account, req.qos or "")
        return got

    def requested(self, job) -> tuple[dict[str, int], float | None]:
        """(ReqTRES counts, their billing at submit; None outside a Slurm partition)."""
        weights = self._weights.get(self._named(job.wl) or "")
        if weights is None:
            return requested_counts(job.wl), None
        counts = self._request(job.wl).req_tres
        return counts, self._bill(counts, weights)

    def allocated(self, job, cpus: int) -> tuple[dict[str, int], float]:
        """(AllocTRES counts, billing) of the placement ``job`` holds (``cpus``: the CPUs its
        record shows), or, while it holds nothing, its filled-in request's billing ({}, …)."""
        weights = self._weights.get(job.partition or self._named(job.wl) or "")
        if not job.placement:
            if weights is None:
                return {}, float(requested_counts(job.wl)["cpu"])
            return {}, self._bill(self._request(job.wl).tres, weights)
        if weights is None:
            counts = self._alloc_counts(job.placement, [], True)
            counts["cpu"] = cpus
            return counts, float(cpus)
        counts = self._alloc_counts(job.placement, self._typed_keys, self._gpu_tracked)
        counts["cpu"] = cpus
        return counts, self._bill(counts, weights)


def requested_counts(wl) -> dict[str, int]:
    """What ``wl`` asks as TRES counts, read off its pod sets (CPUs rounded up per pod set), or
    the CPUs and memory slurmctld recorded at submit where the Slurm policy kept them
    (``Workload.req_cpu_mem``): the ReqTRES of a job outside any Slurm partition, and of the
    live daemon's jobs."""
    cpus = sum(ps.cpus_total if ps.split or ps.walked else math.ceil(ps.cpu_m * ps.count / 1000) for ps in wl.pod_sets)
    mem = sum(ps.memory_total for ps in wl.pod_sets)
    if wl.req_cpu_mem is not None:
        cpus, mem = wl.req_cpu_mem
    nodes = sum(ps.counted_pods for ps in wl.pod_sets if ps.one_per_node) or 1  # walked: one until placed
    return {"cpu": cpus, "mem": mem, "gres/gpu": wl.total_gpus, "node": nodes}


def ensure_policy_version(ledger: Ledger, pool: Pool, *, author: str | None = None) -> PolicyVersion | None:
    """The policy version matching the pool directory's current files, committed if new."""
    if not pool.path or not Path(pool.path).is_dir():
        return None
    tree, _ = tree_hash(pool_files(pool.path, pool))
    with ledger.read() as conn:
        found = find_by_tree(conn, pool.name, tree)
    if found is not None:
        return found
    version, _ = commit(ledger, pool.path, "snapshot taken when a simulation was recorded", author=author, pool=pool)
    return version


def record_run(db, result, pool: Pool | str | Path, workload_spec: str | None, policy: str,
               policy_version: str | None = None, *, options: dict | None = None, seed: int | None = None,
               epoch: datetime | None = None, author: str | None = None) -> dict:
    """Write one simulation (a ``SimulationResult``) to the ledger; returns the run's facts
    and what was added (nothing when this run was recorded before)."""
    from gpupool.formats.pool_dir import load_pool

    ledger = as_ledger(db)
    if not isinstance(pool, Pool):
        pool = load_pool(pool)
    epoch = epoch or SIM_EPOCH
    workload_spec = workload_spec or pool.default_workload or ""
    t0 = epoch.timestamp()
    if policy_version is None:
        pv = ensure_policy_version(ledger, pool, author=author)
        policy_version = pv.version if pv else None
    pool_hash = (tree_hash(pool_files(pool.path, pool))[0] if pool.path and Path(pool.path).is_dir()
                 else hashlib.sha256(repr(sorted(pool.nodes)).encode()).hexdigest())
    digest = result.summary_dict.get("workload_digest", "")
    seed = _seed_of(workload_spec) if seed is None else seed
    options_json = json.dumps(options or {}, sort_keys=True, default=str)
    run_id = hashlib.sha256(json.dumps([pool_hash, digest, policy, options_json, seed, t0]).encode()).hexdigest()[:16]
    origin = run_origin(run_id)
    stats = WriteStats()
    job_rows, event_rows, alloc_rows = _rows(result, pool, origin, t0, policy_version, policy, options)
    with ledger.transaction() as conn:
        exists = conn.execute(s.runs.select().where(s.runs.c.run_id == run_id)).first()
        if exists is None:
            conn.execute(s.runs.insert().values(
                run_id=run_id, origin=origin, pool=pool.name, pool_hash=pool_hash, policy=policy,
                policy_options=options_json, policy_version=policy_version, workload_spec=workload_spec or "",
                workload_digest=digest, seed=seed, epoch=t0, recorded_at=time.time(),
                summary=json.dumps(result.summary_dict, sort_keys=True, default=str)))
            stats.other["runs_added"] = 1
        ledger.write_jobs(conn, job_rows, stats)
        ledger.write_events(conn, event_rows, stats)
        ledger.write_allocations(conn, alloc_rows, stats)
        if stats.changed:
            ledger.rebuild_usage(conn, origin)
    return {"run_id": run_id, "origin": origin, "policy_version": policy_version, "epoch": t0,
            "jobs": len(job_rows), **stats.as_dict()}


def _rows(result, pool: Pool, origin: str, t0: float, version: str | None, policy: str = "",
          options: dict | None = None):
    out = result.output
    names = list(pool.nodes)
    node_types = [pool.nodes[n].gpu_type or "" for n in names]
    frame = result.jobs.set_index("id")
    tres = JobTres(pool, policy, str((options or {}).get("kubernetes", "auto")))
    placements = None
    if getattr(result, "placements", None) is not None:
        placements = {}
        for p in result.placements:
            placements.setdefault(p[0], []).append(p)
    segments: dict[int, list[list]] = {}
    event_rows = []
    for t, kind, job_id, detail in out.events:
        event_rows.append({"origin": origin, "job_id": str(job_id), "time": t0 + t, "kind": kind,
                           "detail": detail or "", "policy_version": version, "source": "simulation"})
        segs = segments.setdefault(job_id, [])
        if kind in _OPEN and not (segs and segs[-1][1] is None):
            segs.append([t, None])
        elif kind in _CLOSE and segs and segs[-1][1] is None:
            segs[-1][1] = t
    job_rows, alloc_rows = [], []
    for job in sorted(out.jobs, key=lambda j: j.id):
        wl = job.wl
        row = frame.loc[job.id]
        per_node: dict[int, list] = {}
        for node, mask, cpu_m, _mem in job.placement:
            acc = per_node.setdefault(node, [0, 0])
            acc[0] |= mask
            acc[1] += cpu_m
        cpus = sum(math.ceil(v[1] / 1000) for v in per_node.values())
        types = sorted({node_types[n] for n, v in per_node.items() if v[0]} - {""})
        gpu_type = ",".join(types) if types else next((ps.gpu_type for ps in wl.pod_sets if ps.gpu_type), "") or ""
        # the GPUs it holds where it started (a node range may start on fewer nodes than asked)
        gpus = sum(v[0].bit_count() for v in per_node.values()) if per_node else job.total_gpus
        req_counts, req_billing = tres.requested(job)
        req_tres = tres.text(req_counts if req_billing is None else {**req_counts, "billing": req_billing})
        alloc_counts, billing = tres.allocated(job, cpus)
        alloc_tres = tres.text({**alloc_counts, "billing": billing}) if per_node else ""
        start = None if job.first_start is None else t0 + job.first_start
        end = None if job.end is None else t0 + job.end
        account, qos = tres.account_qos(wl)
        job_rows.append({
            "origin": origin, "job_id": str(job.id), "job_id_raw": job.id,
            "array_job_id": wl.array_job_id, "array_task_id": wl.array_task_id,
            "name": wl.name or "", "kind": wl.kind or "batch", "user": wl.user or "", "account": account,
            "qos": qos, "partition": wl.partition or "", "namespace": wl.namespace or "",
            "queue": wl.queue or "", "submit": t0 + wl.submit_time, "eligible": t0 + job.eligible,
            "start": start, "end": end,
            "elapsed": None if start is None else ((end if end is not None else t0 + out.end_time) - start),
            "timelimit": wl.time_limit, "state": job.state, "reason": job.reason or "",
            "exit_code": _exit_code(job.state), "priority": wl.priority, "nnodes": len(per_node), "ncpus": cpus,
            "node_list": row["nodes"] or "", "req_tres": req_tres, "alloc_tres": alloc_tres,
            "gpus": gpus, "gpu_type": gpu_type, "gpu_indices": row["gpu_indices"] or "",
            "billing": billing, "requeues": job.requeues, "preemptions": job.preemptions,
            "gpu_seconds": float(row["gpu_seconds_used"]), "gpu_seconds_lost": float(row["gpu_seconds_lost"]),
            "gpu_seconds_idle": float(row["gpu_seconds_idle_held"]), "flags": job.via or "",
            "extra": json.dumps({"shape": row["shape"], "pods": int(row["pods"]), "via": job.via or ""},
                                sort_keys=True),
            "source": "simulation",
        })
        if placements is not None:
            merged: dict[tuple, int] = {}
            for _, node, mask, a, b in placements.get(job.id, ()):
                key = (node, a, b)
                merged[key] = merged.get(key, 0) | mask
            for (node, a, b), mask in sorted(merged.items(), key=lambda kv: (kv[0][1], kv[0][0])):
                for idx in mask_indices(mask):
                    alloc_rows.append({"origin": origin, "job_id": str(job.id), "node": names[node],
                                       "gpu_index": idx, "gpu_count": 1, "gpu_type": node_types[node],
                                       "time_from": t0 + a, "time_to": None if b is None else t0 + b,
                                       "as_of": t0 + out.end_time if b is None else None,
                                       "policy_version": version})
            continue
        segs = segments.get(job.id, [])
        for i, (a, b) in enumerate(segs):
            last = i == len(segs) - 1
            frm = t0 + a
            to = None if b is None else t0 + b
            as_of = t0 + out.end_time if b is None else None
            if last and per_node:
                for node, (mask, _) in sorted(per_node.items()):
                    for idx in mask_indices(mask):
                        alloc_rows.append({"origin": origin, "job_id": str(job.id), "node": names[node],
                                           "gpu_index": idx, "gpu_count": 1, "gpu_type": node_types[node],
                                           "time_from": frm, "time_to": to, "as_of": as_of,
                                           "policy_version": version})
            elif job.total_gpus:
                alloc_rows.append({"origin": origin, "job_id": str(job.id), "node": "", "gpu_index": -1,
                                   "gpu_count": job.total_gpus, "gpu_type": gpu_type, "time_from": frm,
                                   "time_to": to, "as_of": as_of, "policy_version": version})
    return job_rows, event_rows, alloc_rows
