"""``sacct --parsable2 --allocations --format=ALL`` and ``sacct --json`` (Slurm 22.05) → ledger.

One job row per JobID (the newest record wins, as ``sacct`` without ``--duplicates`` shows),
an allocation per node of the job's run (device indices are not in sacct: GPU counts are),
and submitted/started/finished events. Job steps (``42.batch``, ``42.0``) are skipped when
``--allocations`` was not given. Timestamps are read as UTC.
"""
from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

from gpupool.errors import InputError
from gpupool.formats.hostlist import expand_hostlist
from gpupool.formats.slurm_time import SlurmTimeError, parse_duration
from gpupool.ledger.store import Ledger, WriteStats, as_ledger
from gpupool.ledger.timefmt import TimeSpecError, parse_slurm_ts

_FINAL = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "PREEMPTED", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL",
          "DEADLINE", "REVOKED"}
_STEP_RE = re.compile(r"^\d+(?:_\d+|_\[[^\]]*\])?(?:\+\d+)?\.")
_STORED = {"JobID", "JobIDRaw", "JobName", "User", "Account", "Partition", "QOS", "Cluster", "Priority", "Submit",
           "Eligible", "Start", "End", "Elapsed", "ElapsedRaw", "Timelimit", "TimelimitRaw", "State", "ExitCode",
           "Reason", "Flags", "ReqTRES", "AllocTRES", "AllocCPUS", "NCPUS", "AllocNodes", "NNodes", "NodeList"}


def parse_tres_text(text: str) -> dict[str, str]:
    out = {}
    for item in (text or "").split(","):
        k, eq, v = item.partition("=")
        if eq:
            out[k.strip()] = v.strip()
    return out


def tres_gpus(tres: dict[str, str]) -> tuple[int, str]:
    """GPU count and type from AllocTRES (``gres/gpu=2`` and/or ``gres/gpu:h100=2``)."""
    total = tres.get("gres/gpu")
    typed = [(k.split(":", 1)[1], v) for k, v in tres.items() if k.startswith("gres/gpu:")]
    gpu_type = ",".join(sorted(t for t, _ in typed))
    if total is None and typed:
        total = sum(int(v) for _, v in typed)
    return int(total or 0), gpu_type


def _num(text: str | None) -> float | None:
    try:
        return float(text) if text not in (None, "") else None
    except ValueError:
        return None


def _job_id_raw(job_id: str) -> int | None:
    m = re.match(r"^(\d+)$", job_id)
    return int(m.group(1)) if m else None


def _array(job_id: str) -> tuple[int | None, int | None]:
    m = re.match(r"^(\d+)_(\d+)$", job_id)
    return (int(m.group(1)), int(m.group(2))) if m else (None, None)


def _timelimit(text: str) -> float | None:
    if not text or text in ("UNLIMITED", "Partition_Limit", "INVALID"):
        return None
    try:
        value = parse_duration(text)
    except SlurmTimeError:
        return None
    return None if value is None else float(value)


def _record(rec: dict, origin: str, source: str) -> tuple[dict, list[dict], list[dict]]:
    """One sacct record (field name → text) → job row, events, allocations."""
    job_id = rec["JobID"]
    state_text = rec.get("State", "")
    state = state_text.split()[0] if state_text else "UNKNOWN"
    submit, eligible = parse_slurm_ts(rec.get("Submit")), parse_slurm_ts(rec.get("Eligible"))
    start, end = parse_slurm_ts(rec.get("Start")), parse_slurm_ts(rec.get("End"))
    elapsed = _num(rec.get("ElapsedRaw"))
    if elapsed is None and rec.get("Elapsed"):
        try:
            elapsed = float(parse_duration(rec["Elapsed"]) or 0)
        except SlurmTimeError:
            elapsed = None
    if start is None:
        elapsed = None
    alloc = parse_tres_text(rec.get("AllocTRES", ""))
    gpus, gpu_type = tres_gpus(alloc)
    nodes_text = rec.get("NodeList", "")
    nodes = [] if start is None or nodes_text in ("", "None assigned", "(null)") else expand_hostlist(nodes_text)
    ncpus = int(_num(rec.get("AllocCPUS") or rec.get("NCPUS")) or 0)
    arr_job, arr_task = _array(job_id)
    raw_id = _num(rec.get("JobIDRaw"))
    extra = {k: v for k, v in rec.items() if k not in _STORED and v not in ("", None)}
    job = {
        "origin": origin, "job_id": job_id, "job_id_raw": int(raw_id) if raw_id is not None else _job_id_raw(job_id),
        "array_job_id": arr_job, "array_task_id": arr_task, "name": rec.get("JobName", ""), "kind": "batch",
        "user": rec.get("User", ""), "account": rec.get("Account", ""), "qos": rec.get("QOS", ""),
        "partition": rec.get("Partition", ""), "namespace": "", "queue": rec.get("Partition", ""),
        "submit": submit, "eligible": eligible, "start": start, "end": end, "elapsed": elapsed,
        "timelimit": _timelimit(rec.get("Timelimit", "")), "state": state_text or state,
        "reason": "" if rec.get("Reason") in (None, "None") else rec["Reason"],
        "exit_code": rec.get("ExitCode") or "0:0", "priority": int(_num(rec.get("Priority")) or 0) if rec.get("Priority") else None,
        "nnodes": int(_num(rec.get("NNodes") or rec.get("AllocNodes")) or 0), "ncpus": ncpus,
        "node_list": "" if nodes_text == "None assigned" else nodes_text, "req_tres": rec.get("ReqTRES", ""),
        "alloc_tres": rec.get("AllocTRES", ""), "gpus": gpus, "gpu_type": gpu_type, "gpu_indices": "",
        "billing": float(alloc.get("billing", ncpus) or 0), "requeues": 0, "preemptions": 0,
        "gpu_seconds": gpus * (elapsed or 0.0), "gpu_seconds_lost": 0.0, "gpu_seconds_idle": 0.0,
        "flags": rec.get("Flags", ""), "extra": json.dumps(extra, sort_keys=True), "source": source,
    }
    events = []
    if submit is not None:
        events.append(("submitted", submit, ""))
    if start is not None:
        events.append(("started", start, nodes_text))
    if end is not None and state in _FINAL:
        events.append(("finished", end, state_text))
    ev_rows = [{"origin": origin, "job_id": job_id, "time": t, "kind": k, "detail": d, "source": source}
               for k, t, d in events]
    allocs = []
    if start is not None and gpus:
        to = end if state in _FINAL else None
        as_of = None if to is not None else start + (elapsed or 0.0)
        if nodes and gpus % len(nodes) == 0:
            for n in nodes:
                allocs.append({"origin": origin, "job_id": job_id, "node": n, "gpu_index": -1,
                               "gpu_count": gpus // len(nodes), "gpu_type": gpu_type, "time_from": start,
                               "time_to": to, "as_of": as_of})
        else:
            allocs.append({"origin": origin, "job_id": job_id, "node": "", "gpu_index": -1, "gpu_count": gpus,
                           "gpu_type": gpu_type, "time_from": start, "time_to": to, "as_of": as_of})
    return job, ev_rows, allocs


def parse_parsable(text: str, source: str) -> list[dict]:
    """``--parsable2`` (or ``--parsable``) output with its header line → records."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if not lines:
        return []
    header = lines[0].rstrip("|").split("|")
    if "JobID" not in header:
        raise InputError(source, "expected sacct --parsable2 output whose header names JobID "
                                 "(run sacct without --noheader)", line=1)
    recs = []
    for number, line in enumerate(lines[1:], start=2):
        cells = line.split("|")
        if len(cells) == len(header) + 1 and cells[-1] == "":
            cells = cells[:-1]  # --parsable's trailing |
        if len(cells) != len(header):
            raise InputError(source, f"expected {len(header)} |-separated fields as in the header, got {len(cells)}",
                             line=number)
        recs.append(dict(zip(header, cells)))
    return recs


def _write(ledger: Ledger, kind: str, data: bytes, records: list[dict], origin: str | None, source: str,
           policy_pool: str | None) -> dict:
    sha = hashlib.sha256(data).hexdigest()
    stats = WriteStats()
    by_origin: dict[str, list] = {}
    for rec in records:
        if _STEP_RE.match(rec.get("JobID", "")):
            continue  # a job step: --allocations shows none
        o = origin or rec.get("Cluster") or "cluster"
        by_origin.setdefault(o, []).append(rec)
    try:
        with ledger.transaction() as conn:
            for o, recs in by_origin.items():
                jobs, events, allocs = {}, [], []
                for rec in recs:
                    job, ev, al = _record(rec, o, source)
                    jobs[job["job_id"]] = job  # a later record of the same job replaces it
                    events.extend(ev)
                    allocs.extend(al)
                version_at = ledger.versions_in_force(conn, policy_pool or o)  # read once per import
                for row in events + allocs:
                    row["policy_version"] = version_at(row.get("time", row.get("time_from")))
                ledger.write_jobs(conn, list(jobs.values()), stats)
                ledger.write_events(conn, events, stats)
                ledger.write_allocations(conn, allocs, stats)
                if stats.changed:
                    ledger.update_usage(conn, o, stats)  # the hours this import touched
                ledger.record_import(conn, kind, sha, o, source, len(recs))
    except (TimeSpecError, ValueError) as exc:
        raise InputError(source, f"unreadable sacct value: {exc}") from exc
    return {"source": source, "records": len(records), "clusters": sorted(by_origin), **stats.as_dict()}


def import_sacct(db, path: str | Path, *, cluster: str | None = None, pool: str | None = None) -> dict:
    """Import ``sacct --parsable2 --allocations --format=ALL`` output (any field set with JobID)."""
    data = Path(path).read_bytes()
    records = parse_parsable(data.decode("utf-8", errors="replace"), str(path))
    return _write(as_ledger(db), "sacct", data, records, cluster, str(path), pool)


# ------------------------------------------------------------------------------------------
# sacct --json (openapi/data_parser v0.0.38 as Slurm 22.05 prints it; later shapes tolerated)


def _n(value):
    """A number, or the {"set": bool, "infinite": bool, "number": n} form of later versions."""
    if isinstance(value, dict):
        if value.get("infinite"):
            return None
        return value.get("number") if value.get("set", True) else None
    return value


def _ts(value) -> str:
    from gpupool.ledger.timefmt import format_ts

    v = _n(value)
    return "Unknown" if not v else format_ts(float(v))


def _tres_list(items) -> str:
    order = {"billing": 0, "cpu": 1, "energy": 2, "gres": 3, "mem": 4, "node": 5}
    parts = []
    for t in sorted(items or [], key=lambda t: (order.get(t.get("type"), 9), t.get("name") or "")):
        kind, name, count = t.get("type"), t.get("name"), _n(t.get("count"))
        if count is None:
            continue
        key = f"{kind}/{name}" if name else kind
        if kind == "mem":
            parts.append(f"mem={int(count) // 1024}G" if int(count) % 1024 == 0 else f"mem={int(count)}M")
        else:
            parts.append(f"{key}={int(count)}")
    return ",".join(parts)


def json_records(doc: dict, source: str) -> list[dict]:
    if not isinstance(doc, dict) or not isinstance(doc.get("jobs"), list):
        raise InputError(source, "expected sacct --json output: an object with a jobs list")
    recs = []
    for i, job in enumerate(doc["jobs"]):
        if not isinstance(job, dict) or "job_id" not in job:
            raise InputError(source, f"jobs[{i}]: expected a job object with job_id")
        t = job.get("time", {})
        state = job.get("state", {})
        current = state.get("current") if isinstance(state, dict) else state
        if isinstance(current, list):
            current = current[0] if current else "UNKNOWN"
        array = job.get("array", {}) or {}
        task = _n(array.get("task_id"))
        job_id = f"{_n(array.get('job_id'))}_{task}" if task is not None and _n(array.get("job_id")) else str(job["job_id"])
        limit = _n(t.get("limit"))
        exit_code = job.get("exit_code", {}) or {}
        signal = (exit_code.get("signal") or {}).get("signal_id", 0) if isinstance(exit_code.get("signal"), dict) else 0
        rc = _n(exit_code.get("return_code")) or 0
        tres = job.get("tres", {}) or {}
        alloc = _tres_list(tres.get("allocated"))
        cpus = next((int(_n(x.get("count")) or 0) for x in tres.get("allocated") or [] if x.get("type") == "cpu"), 0)
        flags = job.get("flags") or []
        recs.append({
            "JobID": job_id, "JobIDRaw": str(job["job_id"]), "JobName": job.get("name", ""),
            "User": job.get("user", ""), "Account": job.get("account", ""), "Partition": job.get("partition", ""),
            "QOS": job.get("qos", ""), "Cluster": job.get("cluster", ""), "Priority": str(_n(job.get("priority")) or ""),
            "Submit": _ts(t.get("submission")), "Eligible": _ts(t.get("eligible")), "Start": _ts(t.get("start")),
            "End": _ts(t.get("end")), "ElapsedRaw": str(_n(t.get("elapsed")) or 0),
            "Timelimit": "UNLIMITED" if limit is None else _minutes(limit), "State": current or "UNKNOWN",
            "Reason": (state.get("reason") if isinstance(state, dict) else "") or "None",
            "ExitCode": f"{rc}:{signal}", "Flags": ",".join(flags) if isinstance(flags, list) else str(flags),
            "ReqTRES": _tres_list(tres.get("requested")), "AllocTRES": alloc, "AllocCPUS": str(cpus),
            "NNodes": str(job.get("allocation_nodes", "") or ""), "NodeList": job.get("nodes", "") or "None assigned",
            "WorkDir": job.get("working_directory", ""), "Group": job.get("group", ""),
        })
    return recs


def _minutes(limit) -> str:
    from gpupool.formats.slurm_time import format_duration

    return format_duration(int(limit) * 60)


def import_sacct_json(db, path: str | Path, *, cluster: str | None = None, pool: str | None = None) -> dict:
    data = Path(path).read_bytes()
    try:
        doc = json.loads(data)
    except json.JSONDecodeError as exc:
        raise InputError(str(path), f"not JSON: {exc.msg}", line=exc.lineno) from exc
    return _write(as_ledger(db), "sacct-json", data, json_records(doc, str(path)), cluster, str(path), pool)
