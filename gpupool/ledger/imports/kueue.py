"""Kueue Workload dumps (``kubectl get workloads -A -o yaml``), taken over time → ledger.

Each dump adds the facts it shows: the Workload was created (submitted), admitted
(``Admitted`` condition, True), evicted (``Evicted``, with reason and message), preempted
(``Preempted``, reason InClusterQueue/InCohortReclamation/…), finished (``Finished``).
Conditions carry only their last transition, so dumps taken over time add up: the events
already stored plus the new ones rebuild each Workload's admission segments (admitted →
next evicted/finished). An admission holds the GPUs of its ``podSetAssignments``
(``resourceUsage`` of ``nvidia.com/gpu``, the flavor as GPU type). A segment still open in
the newest dump is held until ``at`` (default: the newest timestamp in the dump).
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import sqlalchemy as sa

from gpupool.errors import InputError
from gpupool.formats.kube_yaml import load_yaml_documents
from gpupool.formats.quantity import QuantityError, count
from gpupool.ledger import schema as s
from gpupool.ledger.store import WriteStats, as_ledger
from gpupool.ledger.timefmt import parse_time

GPU = "nvidia.com/gpu"


def _t(value) -> float | None:
    if value in (None, ""):
        return None
    if hasattr(value, "timestamp"):  # YAML may already have made a datetime
        from datetime import timezone

        return (value if value.tzinfo else value.replace(tzinfo=timezone.utc)).timestamp()
    return parse_time(str(value))


def _workload_facts(body: dict, where: str, flavor_types: dict[str, str]) -> dict:
    meta = body.get("metadata") or {}
    spec = body.get("spec") or {}
    status = body.get("status") or {}
    ns, name = meta.get("namespace", "default"), meta.get("name")
    if not name:
        raise InputError(where, "a Workload needs metadata.name")
    conds = {c.get("type"): c for c in status.get("conditions") or [] if isinstance(c, dict)}
    admission = status.get("admission") or {}
    gpus, gpu_type = 0, ""
    for psa in admission.get("podSetAssignments") or []:
        usage = psa.get("resourceUsage") or {}
        if GPU in usage:
            try:
                gpus += count(usage[GPU])
            except QuantityError as exc:
                raise InputError(where, f"status.admission.podSetAssignments: {exc}") from None
            flavor = (psa.get("flavors") or {}).get(GPU, "")
            gpu_type = flavor_types.get(flavor, flavor)
    if not admission:  # not admitted now: the request tells the size
        for ps in spec.get("podSets") or []:
            for c in ((ps.get("template") or {}).get("spec") or {}).get("containers") or []:
                req = ((c.get("resources") or {}).get("requests") or {}) or ((c.get("resources") or {}).get("limits") or {})
                if GPU in req:
                    gpus += count(req[GPU]) * int(ps.get("count", 1))
    events = []
    created = _t(meta.get("creationTimestamp"))
    if created is not None:
        events.append(("submitted", created, spec.get("queueName", "")))
    times = [created] if created else []
    for kind, ctype in (("admitted", "Admitted"), ("evicted", "Evicted"), ("preempted", "Preempted"),
                        ("finished", "Finished")):
        c = conds.get(ctype)
        if c is None:
            continue
        t = _t(c.get("lastTransitionTime"))
        if t is not None:
            times.append(t)
        if str(c.get("status")) != "True" or t is None:
            continue
        if kind == "admitted":
            detail = f"ClusterQueue {admission.get('clusterQueue', '')}; {gpus} {GPU}" + (f" ({gpu_type})" if gpu_type else "")
        else:
            detail = f"{c.get('reason', '')}: {c.get('message', '')}".strip(": ")
        events.append((kind, t, detail))
    finished = conds.get("Finished")
    state = "PENDING"
    if finished is not None and str(finished.get("status")) == "True":
        failed = finished.get("reason") in ("Failed", "JobFailed") or "fail" in str(finished.get("message", "")).lower()
        state = "FAILED" if failed else "COMPLETED"
    elif str((conds.get("Admitted") or {}).get("status")) == "True":
        state = "RUNNING"
    elif spec.get("active") is False:
        state = "DEACTIVATED"
    evictions = sum(int(e.get("count", 0)) for e in (status.get("schedulingStats") or {}).get("evictions") or [])
    requeues = int((status.get("requeueState") or {}).get("count", 0) or 0)
    return {"ns": ns, "name": name, "uid": meta.get("uid", ""), "queue": spec.get("queueName", ""),
            "cluster_queue": admission.get("clusterQueue", ""), "priority": spec.get("priority"),
            "priority_class": spec.get("priorityClassName", ""), "gpus": gpus, "gpu_type": gpu_type,
            "events": events, "state": state, "evictions": evictions, "requeues": requeues,
            "labels": meta.get("labels") or {}, "newest": max(times) if times else None,
            "pod_sets": len(spec.get("podSets") or [])}


def import_kueue_workloads(db, path: str | Path, *, cluster: str = "kueue", at: float | None = None,
                           pool=None, policy_pool: str | None = None) -> dict:
    """Import one dump; safe to repeat and to feed dumps in any order."""
    ledger = as_ledger(db)
    path = Path(path)
    data = path.read_bytes()
    flavor_types: dict[str, str] = {}
    if pool is not None and pool.kueue is not None:
        for f in pool.kueue.flavors.values():
            product = f.node_labels.get("nvidia.com/gpu.product")
            if product:
                flavor_types[f.name] = product
    facts = []
    for doc in load_yaml_documents(path):
        if doc.body.get("kind") != "Workload":
            continue
        facts.append(_workload_facts(doc.body, doc.where, flavor_types))
    newest = max((f["newest"] for f in facts if f["newest"] is not None), default=None)
    as_of = at if at is not None else newest
    stats = WriteStats()
    with ledger.transaction() as conn:
        policy_name = policy_pool or (pool.name if pool is not None else cluster)
        version_at = ledger.versions_in_force(conn, policy_name)  # read once per import
        for f in facts:
            job_id = f"{f['ns']}/{f['name']}"
            rows = [{"origin": cluster, "job_id": job_id, "time": t, "kind": k, "detail": d, "source": str(path),
                     "policy_version": version_at(t)} for k, t, d in f["events"]]
            ledger.write_events(conn, rows, stats)
            e = s.events.c
            stored = conn.execute(sa.select(e.kind, e.time, e.detail, e.policy_version)
                                  .where(e.origin == cluster, e.job_id == job_id).order_by(e.time, e.id)).all()
            segments, open_seg = [], None
            for ev in stored:
                if ev.kind == "admitted":
                    if open_seg is not None:  # re-admitted without an observed end
                        segments.append((open_seg[0], ev.time, open_seg[1]))
                    open_seg = (ev.time, ev.policy_version)
                elif ev.kind in ("evicted", "finished") and open_seg is not None:
                    segments.append((open_seg[0], ev.time, open_seg[1]))
                    open_seg = None
            if open_seg is not None:
                segments.append((open_seg[0], None, open_seg[1]))
            allocs = [{"origin": cluster, "job_id": job_id, "node": "", "gpu_index": -1, "gpu_count": f["gpus"],
                       "gpu_type": f["gpu_type"], "time_from": a, "time_to": b,
                       "as_of": as_of if b is None else None, "policy_version": v}
                      for a, b, v in segments if f["gpus"]]
            ledger.write_allocations(conn, allocs, stats)
            kinds = [ev.kind for ev in stored]
            starts = [ev.time for ev in stored if ev.kind == "admitted"]
            ends = [ev.time for ev in stored if ev.kind == "finished"]
            submit = next((ev.time for ev in stored if ev.kind == "submitted"), None)
            start = starts[0] if starts else None
            end = ends[-1] if ends else None
            held = sum(((b if b is not None else (as_of or a)) - a) for a, b, _ in segments)
            evictions = max(f["evictions"], kinds.count("evicted"))
            state = f["state"]
            if end is not None and state in ("RUNNING", "PENDING"):
                state = "COMPLETED"
            job = {
                "origin": cluster, "job_id": job_id, "name": f["name"], "kind": "batch",
                "user": f["labels"].get("gpupool.io/user", ""), "account": f["ns"], "qos": f["priority_class"],
                "partition": f["cluster_queue"], "namespace": f["ns"], "queue": f["queue"], "submit": submit,
                "eligible": submit, "start": start, "end": end,
                "elapsed": None if start is None else ((end if end is not None else (as_of or start)) - start),
                "state": state, "priority": f["priority"], "gpus": f["gpus"], "gpu_type": f["gpu_type"],
                "preemptions": kinds.count("preempted") or evictions, "requeues": max(f["requeues"], evictions),
                "gpu_seconds": held * f["gpus"], "extra": json.dumps({"uid": f["uid"], "evictions": evictions},
                                                                      sort_keys=True),
                "source": str(path),
            }
            old = conn.execute(sa.select(s.jobs.c.end, s.jobs.c.state).where(
                s.jobs.c.origin == cluster, s.jobs.c.job_id == job_id)).first()
            if old is not None and old.end is not None and job["end"] is None:
                continue  # an older dump does not undo a finish seen in a newer one
            ledger.write_jobs(conn, [job], stats)
        if stats.changed:
            ledger.rebuild_usage(conn, cluster)
        ledger.record_import(conn, "kueue", hashlib.sha256(data).hexdigest(), cluster, str(path), len(facts))
    return {"source": str(path), "records": len(facts), **stats.as_dict()}
