"""``sacct --json`` (openapi/data_parser v0.0.38, as Slurm 22.05 prints it; later shapes
tolerated) → the same records ``sacct --parsable2`` gives, imported the same way.

Each JSON job becomes the field-name → text record the parsable parser makes, so both formats
share one conversion to ledger rows. What 22.05's JSON cannot say (``CANCELLED by UID``, the
StartRecieved flag, the exit code of a failed job) is listed in
``tests/ledger/fixtures/real_slurm_22.05/README.md``.
"""
from __future__ import annotations

import json
from pathlib import Path

from gpupool.errors import InputError
from gpupool.formats.slurm_time import format_duration
from gpupool.ledger.imports.sacct import _prepare, _store
from gpupool.ledger.store import as_ledger
from gpupool.ledger.timefmt import format_ts


def _n(value):
    """A number, or the {"set": bool, "infinite": bool, "number": n} form of later versions."""
    if isinstance(value, dict):
        if value.get("infinite"):
            return None
        return value.get("number") if value.get("set", True) else None
    return value


def _ts(value) -> str:
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
        cpus = _tres_count(tres.get("allocated"), "cpu")
        nnodes = _n(job.get("allocation_nodes"))
        if not cpus and not nnodes:
            # never ran (cancelled while pending): sacct's text prints the requested counts
            cpus = int(_n((job.get("required") or {}).get("CPUs")) or 0)
            nnodes = _tres_count(tres.get("requested"), "node")
        flags = job.get("flags") or []
        recs.append({
            "JobID": job_id, "JobIDRaw": str(job["job_id"]), "JobName": job.get("name", ""),
            "User": job.get("user", ""), "Account": job.get("account", ""), "Partition": job.get("partition", ""),
            "QOS": job.get("qos", ""), "Cluster": job.get("cluster", ""), "Priority": str(_n(job.get("priority")) or ""),
            "Submit": _ts(t.get("submission")), "Eligible": _ts(t.get("eligible")), "Start": _ts(t.get("start")),
            "End": _ts(t.get("end")), "ElapsedRaw": str(_n(t.get("elapsed")) or 0),
            "Timelimit": "UNLIMITED" if limit is None else _minutes(limit), "State": current or "UNKNOWN",
            "Reason": (state.get("reason") if isinstance(state, dict) else "") or "None",
            "ExitCode": f"{rc}:{signal}", "Flags": _flags(flags),
            "ReqTRES": _tres_list(tres.get("requested")), "AllocTRES": alloc, "AllocCPUS": str(cpus),
            "NNodes": str(nnodes or ""), "NodeList": job.get("nodes", "") or "None assigned",
            "WorkDir": job.get("working_directory", ""), "Group": job.get("group", ""),
        })
    return recs


#: sacct --json's job flag names (data_parser v0.0.38) -> the names sacct's text prints
#: (``slurmdb_job_flags_str``). Seen on 22.05.8: text ``SchedMain,StartRecieved`` is JSON
#: ``["CLEAR_SCHEDULING", "STARTED_ON_SCHEDULE"]``: CLEAR_SCHEDULING is the scheduler-bits
#: mask matching any of them (no flag of its own), and StartRecieved has no JSON name.
_JSON_FLAGS = {"NOT_SET": "SchedNotSet", "STARTED_ON_SUBMIT": "SchedSubmit", "STARTED_ON_SCHEDULE": "SchedMain",
               "STARTED_ON_BACKFILL": "SchedBackfill", "START_RECEIVED": "StartRecieved", "CLEAR_SCHEDULING": None}


def _flags(flags) -> str:
    if not isinstance(flags, list):
        return str(flags or "")
    names = (_JSON_FLAGS.get(f, f) for f in flags)
    return ",".join(n for n in names if n)


def _tres_count(items, kind: str) -> int:
    return next((int(_n(x.get("count")) or 0) for x in items or [] if x.get("type") == kind), 0)


def _minutes(limit) -> str:
    return format_duration(int(limit) * 60)


def import_sacct_json(db, path: str | Path, *, cluster: str | None = None, pool: str | None = None) -> dict:
    data = Path(path).read_bytes()
    try:
        doc = json.loads(data)
    except json.JSONDecodeError as exc:
        raise InputError(str(path), f"not JSON: {exc.msg}", line=exc.lineno) from exc
    return _store(as_ledger(db), _prepare("sacct-json", data, json_records(doc, str(path)), cluster, str(path)), pool)
