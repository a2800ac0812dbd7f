"""``sacct --parsable2 --allocations --format=ALL`` (Slurm 22.05) → ledger (``sacct_json`` reuses it).

One job row per JobID (the newest record wins, as ``sacct`` without ``--duplicates`` shows),
an allocation per node of the job's run (device indices are not in sacct: GPU counts are),
and submitted/started/finished events. Job steps (``42.batch``, ``42.0``) are skipped when
``--allocations`` was not given. Timestamps are read as UTC.
"""
from __future__ import annotations

import hashlib
import json
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from gpupool.errors import InputError
from gpupool.formats.hostlist import expand_hostlist
from gpupool.formats.slurm_time import SlurmTimeError, parse_duration
from gpupool.ledger.store import (
    Ledger,
    WriteStats,
    as_ledger,
    first_by_key,
    fresh_usage_rows,
)
from gpupool.ledger.timefmt import TimeSpecError, parse_slurm_ts

_FINAL = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "PREEMPTED", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL",
          "DEADLINE", "REVOKED"}
_STEP_RE = re.compile(r"^\d+(?:_\d+|_\[[^\]]*\])?(?:\+\d+)?\.")
_STORED = {"JobID", "JobIDRaw", "JobName", "User", "Account", "Partition", "QOS", "Cluster", "Priority", "Submit",
           "Eligible", "Start", "End", "Elapsed", "ElapsedRaw", "Timelimit", "TimelimitRaw", "State", "ExitCode",
           "Reason", "Flags", "ReqTRES", "AllocTRES", "AllocCPUS", "NCPUS", "NNodes", "NodeList"}


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
    return int(job_id) if job_id.isdigit() else None


_ARRAY_RE = re.compile(r"^(\d+)_(\d+)$")


def _array(job_id: str) -> tuple[int | None, int | None]:
    if "_" not in job_id:
        return None, None
    m = _ARRAY_RE.match(job_id)
    return (int(m.group(1)), int(m.group(2))) if m else (None, None)


# The parsers below are pure and see few distinct texts in an import (a cluster has a handful
# of job shapes, node lists and limits), so they are memoised: a million-record import
# parsed the same AllocTRES and node list strings again for every job.

@lru_cache(maxsize=4096)
def _alloc_facts(text: str) -> tuple[int, str, float | None]:
    """AllocTRES -> (GPU count, GPU type, billing or None)."""
    tres = parse_tres_text(text)
    gpus, gpu_type = tres_gpus(tres)
    billing = tres.get("billing")
    return gpus, gpu_type, (float(billing) if billing else None)


@lru_cache(maxsize=4096)
def _nodes(text: str) -> tuple[str, ...]:
    return tuple(expand_hostlist(text))


@lru_cache(maxsize=1024)
def _timelimit(text: str) -> float | None:
    if not text or text in ("UNLIMITED", "Partition_Limit", "INVALID"):
        return None
    try:
        value = parse_duration(text)
    except SlurmTimeError:
        return None
    return None if value is None else float(value)


def _record(rec: dict, origin: str, source: str, extra_names=None) -> tuple[dict, list[dict], list[dict]]:
    """One sacct record (field name → text) → job row, events, allocations. ``extra_names``:
    the record's fields the job columns do not hold (computed once per file by ``_prepare``)."""
    get = rec.get
    job_id = rec["JobID"]
    state_text = get("State", "")
    state = state_text.split(" ", 1)[0] if state_text else "UNKNOWN"
    submit = parse_slurm_ts(get("Submit"))
    eligible = submit if get("Eligible") == get("Submit") else parse_slurm_ts(get("Eligible"))
    start, end = parse_slurm_ts(get("Start")), parse_slurm_ts(get("End"))
    elapsed = _num(get("ElapsedRaw"))
    if elapsed is None and get("Elapsed"):
        try:
            elapsed = float(parse_duration(rec["Elapsed"]) or 0)
        except SlurmTimeError:
            elapsed = None
    nodes_text = get("NodeList", "")
    # A job cancelled while pending has Start = End = the cancel time in real sacct output
    # (with NodeList "None assigned" and no AllocTRES): it never ran, so no start event,
    # no allocation and no run time, although its Start prints back as read.
    ran = start is not None and nodes_text not in ("", "None assigned", "(null)")
    if start is None:
        elapsed = None
    gpus, gpu_type, billing = _alloc_facts(get("AllocTRES", ""))
    nodes = _nodes(nodes_text) if ran else ()
    ncpus = int(_num(get("AllocCPUS") or get("NCPUS")) or 0)
    arr_job, arr_task = _array(job_id)
    raw_id = _num(get("JobIDRaw"))
    if extra_names is None:
        extra = {k: v for k, v in rec.items() if v and k not in _STORED}
    else:
        extra = {k: rec[k] for k in extra_names if get(k)}
    priority = get("Priority")
    reason = get("Reason")
    job = {
        "origin": origin, "job_id": job_id, "job_id_raw": int(raw_id) if raw_id is not None else _job_id_raw(job_id),
        "array_job_id": arr_job, "array_task_id": arr_task, "name": get("JobName", ""), "kind": "batch",
        "user": get("User", ""), "account": get("Account", ""), "qos": get("QOS", ""),
        "partition": get("Partition", ""), "namespace": "", "queue": get("Partition", ""),
        "submit": submit, "eligible": eligible, "start": start, "end": end, "elapsed": elapsed,
        "timelimit": _timelimit(get("Timelimit", "")), "state": state_text or state,
        "reason": "" if reason in (None, "None") else reason,
        "exit_code": get("ExitCode") or "0:0", "priority": int(_num(priority) or 0) if priority else None,
        "nnodes": int(_num(get("NNodes") or get("AllocNodes")) or 0), "ncpus": ncpus,
        "node_list": "" if nodes_text == "None assigned" else nodes_text, "req_tres": get("ReqTRES", ""),
        "alloc_tres": get("AllocTRES", ""), "gpus": gpus, "gpu_type": gpu_type, "gpu_indices": "",
        "billing": billing if billing is not None else float(ncpus), "requeues": 0, "preemptions": 0,
        "gpu_seconds": gpus * (elapsed or 0.0), "gpu_seconds_lost": 0.0, "gpu_seconds_idle": 0.0,
        "flags": get("Flags", ""), "extra": json.dumps(extra, sort_keys=True) if extra else "{}", "source": source,
    }
    ev_rows = []
    if submit is not None:
        ev_rows.append({"origin": origin, "job_id": job_id, "time": submit, "kind": "submitted", "detail": "",
                        "source": source, "policy_version": None})
    if ran:
        ev_rows.append({"origin": origin, "job_id": job_id, "time": start, "kind": "started", "detail": nodes_text,
                        "source": source, "policy_version": None})
    if end is not None and state in _FINAL:
        ev_rows.append({"origin": origin, "job_id": job_id, "time": end, "kind": "finished", "detail": state_text,
                        "source": source, "policy_version": None})
    allocs = []
    if ran and gpus:
        to = end if state in _FINAL else None
        as_of = None if to is not None else start + (elapsed or 0.0)
        if nodes and gpus % len(nodes) == 0:
            per_node = gpus // len(nodes)
            for n in nodes:
                allocs.append({"origin": origin, "job_id": job_id, "node": n, "gpu_index": -1,
                               "gpu_count": per_node, "gpu_type": gpu_type, "time_from": start,
                               "time_to": to, "as_of": as_of, "policy_version": None})
        else:
            allocs.append({"origin": origin, "job_id": job_id, "node": "", "gpu_index": -1, "gpu_count": gpus,
                           "gpu_type": gpu_type, "time_from": start, "time_to": to, "as_of": as_of,
                           "policy_version": None})
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


@dataclass
class Prepared:
    """One file's records turned into ledger rows, before any database work: what the
    pipeline in ``import_sacct_files`` builds for the next file while the current one is
    written (SQLite releases the GIL while it works, so the two overlap)."""

    kind: str
    sha: str
    source: str
    records: int
    #: origin -> (job rows by job id, event rows, allocation rows, records of that origin,
    #: usage rows of those jobs should all be new)
    by_origin: dict[str, tuple[dict, list, list, int, list]]


def _prepare(kind: str, data: bytes, records: list[dict], origin: str | None, source: str) -> Prepared:
    grouped: dict[str, list] = {}
    names: set[str] = set()
    for rec in records:
        names.update(rec)
        if _STEP_RE.match(rec.get("JobID", "")):
            continue  # a job step: --allocations shows none
        o = origin or rec.get("Cluster") or "cluster"
        grouped.setdefault(o, []).append(rec)
    extra_names = sorted(names - _STORED)
    by_origin = {}
    try:
        for o, recs in grouped.items():
            jobs, events, allocs = {}, [], []
            for rec in recs:
                job, ev, al = _record(rec, o, source, extra_names)
                jobs[job["job_id"]] = job  # a later record of the same job replaces it
                events.extend(ev)
                allocs.extend(al)
            by_origin[o] = (jobs, events, allocs, len(recs), fresh_usage_rows(o, jobs, first_by_key(allocs)))
    except (TimeSpecError, ValueError) as exc:
        raise InputError(source, f"unreadable sacct value: {exc}") from exc
    return Prepared(kind, hashlib.sha256(data).hexdigest(), source, len(records), by_origin)


def _store(ledger: Ledger, prep: Prepared, policy_pool: str | None) -> dict:
    """Write one prepared file in one transaction: all of it lands, or none."""
    stats = WriteStats()
    with ledger.transaction() as conn:
        for o, (jobs, events, allocs, n_recs, usage_rows) in prep.by_origin.items():
            stats.prepared[o] = (jobs.keys(), usage_rows)
            version_at = ledger.versions_in_force(conn, policy_pool or o)  # read once per import
            if version_at:  # else every row keeps policy_version None
                for row in events:
                    row["policy_version"] = version_at(row["time"])
                for row in allocs:
                    row["policy_version"] = version_at(row["time_from"])
            ledger.write_jobs(conn, list(jobs.values()), stats)
            ledger.write_events(conn, events, stats)
            ledger.write_allocations(conn, allocs, stats)
            if stats.changed:
                ledger.update_usage(conn, o, stats)  # the hours this import touched
            ledger.record_import(conn, prep.kind, prep.sha, o, prep.source, n_recs)
    return {"source": prep.source, "records": prep.records, "clusters": sorted(prep.by_origin), **stats.as_dict()}


def _read_parsable(path: str | Path, cluster: str | None) -> Prepared:
    data = Path(path).read_bytes()
    records = parse_parsable(data.decode("utf-8", errors="replace"), str(path))
    return _prepare("sacct", data, records, cluster, str(path))


def import_sacct(db, path: str | Path, *, cluster: str | None = None, pool: str | None = None) -> dict:
    """Import ``sacct --parsable2 --allocations --format=ALL`` output (any field set with JobID)."""
    return _store(as_ledger(db), _read_parsable(path, cluster), pool)


def import_sacct_files(db, paths, *, cluster: str | None = None, pool: str | None = None) -> list[dict]:
    """``import_sacct`` for many files (one transaction each, in order), reading and parsing
    the next file in a second thread while the current one is written."""
    ledger = as_ledger(db)
    paths = list(paths)
    results: list[dict] = []
    if not paths:
        return results
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="sacct-parse") as pool_:
        ahead = pool_.submit(_read_parsable, paths[0], cluster)
        for nxt in paths[1:] + [None]:
            prep = ahead.result()
            if nxt is not None:
                ahead = pool_.submit(_read_parsable, nxt, cluster)
            results.append(_store(ledger, prep, pool))
    return results
