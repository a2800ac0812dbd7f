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
from itertools import repeat
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from gpupool.errors import InputError
from gpupool.formats.hostlist import expand_hostlist
from gpupool.formats.slurm_time import SlurmTimeError, parse_duration
from gpupool.ledger.store import (
    A_POLICY_VERSION,
    A_TIME_FROM,
    E_POLICY_VERSION,
    E_TIME,
    FINAL_STATES,
    Ledger,
    WriteStats,
    as_ledger,
    first_by_key,
    fresh_usage_rows,
    gc_paused,
    insert_new_job_events,
)
from gpupool.ledger.timefmt import TimeSpecError, parse_slurm_ts

_FINAL = frozenset(FINAL_STATES)
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


def _ts_column(values, name: str, at) -> list[float | None]:
    """A column of sacct timestamps -> epoch seconds (None where unknown), as
    ``parse_slurm_ts`` reads each. A column of canonical ``YYYY-MM-DDTHH:MM:SS`` texts (what
    sacct prints for every job that has the time) is parsed by numpy in one call and checked
    by printing it back; any other column value by value."""
    if values and set(map(type, values)) == {str} and set(map(len, values)) == {19}:
        try:
            arr = np.array(values, dtype="datetime64[s]")
        except (ValueError, TypeError, OverflowError):
            arr = None
        if (arr is not None and not np.isnat(arr).any()
                and np.datetime_as_string(arr, unit="s").tolist() == list(values)):
            return arr.astype(np.int64).astype(np.float64).tolist()
    out = []
    for i, v in enumerate(values):
        try:
            out.append(parse_slurm_ts(v))
        except (TimeSpecError, ValueError) as exc:
            raise at(i, name, exc) from exc
    return out


def _memo_column(values, fn, name: str, at) -> list:
    """``fn`` of each value, computed once per distinct value (a cluster prints few distinct
    AllocTRES, node lists, limits or states in a day)."""
    try:
        memo = {v: fn(v) for v in set(values)}
    except (TimeSpecError, ValueError, OverflowError) as exc:
        for i, v in enumerate(values):
            try:
                fn(v)
            except (TimeSpecError, ValueError, OverflowError) as exc2:
                raise at(i, name, exc2) from exc2
        raise at(0, name, exc) from exc  # pragma: no cover - fn failed once, not again
    return [memo[v] for v in values]


def _int_count(text: str | None) -> int:
    """AllocCPUS, NNodes: ``int(_num(text) or 0)``."""
    return int(_num(text) or 0)


def _priority(text: str | None) -> int | None:
    return int(_num(text) or 0) if text else None


def _raw_id(raw: str, job_id: str) -> int | None:
    value = _num(raw)
    return int(value) if value is not None else _job_id_raw(job_id)


def _numbers(values, fn, name: str, at) -> list:
    """``fn`` of each value (numbers differ per job, so nothing is memoised)."""
    try:
        return [fn(v) for v in values]
    except (ValueError, OverflowError, TypeError):
        for i, v in enumerate(values):
            try:
                fn(v)
            except (ValueError, OverflowError, TypeError) as exc:
                raise at(i, name, exc) from exc
        raise  # pragma: no cover


def _plain_ints(values) -> bool:
    """Every value a plain decimal integer of at most 15 digits: ``int(text)`` then equals
    ``int(float(text))``, what ``_num`` leads to, and is several times cheaper. (Checked
    on the values joined, in a few passes in C: one generator step per value was a tenth
    of the parse.)"""
    values = values if isinstance(values, (list, tuple)) else list(values)
    if not values:
        return True
    try:
        joined = "".join(values)
    except TypeError:  # not all text: value by value, as before
        return all(v.isascii() and v.isdigit() and len(v) < 16 for v in values)
    return joined.isascii() and joined.isdigit() and "" not in values and max(map(len, values)) < 16


_NO_NODES = ("", "None assigned", "(null)")


#: Job columns the sacct importer sets to the same value for every job (``JOB_COLUMNS`` names).
JOB_CONSTANTS = {"kind": "batch", "namespace": "", "gpu_indices": "", "requeues": 0, "preemptions": 0,
                 "gpu_seconds_lost": 0.0, "gpu_seconds_idle": 0.0}


def _origin_rows(rows: list, col: dict[str, int], origin: str, source: str, extra_names: list[str], at):
    """One origin's records (rows of cells, in file order) -> (job ids, job columns, a function
    giving the event tuples, allocation tuples), built column by column: each field is
    converted for the whole column at once (memoised where few values repeat), instead of a
    dict being made per record. The job columns are in ``store.JOB_COLUMNS`` order, one value
    per record (an iterator repeating it for ``JOB_CONSTANTS``, ``origin`` and ``source``);
    ``job_rows`` zips them into job tuples."""
    n = len(rows)
    cols = list(zip(*rows))
    empty = ("",) * n
    nothing = (None,) * n

    def c(name: str):
        i = col.get(name)
        return cols[i] if i is not None else empty

    ids = c("JobID")
    state_text = c("State")
    states = _memo_column(state_text, lambda st: st.split(" ", 1)[0] if st else "UNKNOWN", "State", at)
    submit = _ts_column(c("Submit"), "Submit", at)
    eligible = submit if c("Eligible") == c("Submit") else _ts_column(c("Eligible"), "Eligible", at)
    start = _ts_column(c("Start"), "Start", at)
    end = _ts_column(c("End"), "End", at)
    try:  # ElapsedRaw: seconds, or None when empty or unreadable (then Elapsed, [D-]HH:MM:SS)
        elapsed = list(map(float, c("ElapsedRaw")))
    except ValueError:
        elapsed = _numbers(c("ElapsedRaw"), _num, "ElapsedRaw", at)
        for i, text in enumerate(c("Elapsed")):
            if elapsed[i] is None and text:
                try:
                    elapsed[i] = float(parse_duration(text) or 0)
                except SlurmTimeError:
                    pass
    if None in start:  # a job that never started has no run time
        elapsed = [None if t0 is None else el for el, t0 in zip(elapsed, start)]
    nodes_text = c("NodeList")
    # A job cancelled while pending has Start = End = the cancel time in real sacct output
    # (with NodeList "None assigned" and no AllocTRES): it never ran, so no start event,
    # no allocation and no run time, although its Start prints back as read.
    ran = [t0 is not None and nodes not in _NO_NODES for t0, nodes in zip(start, nodes_text)]
    gpus, gpu_type, billing = zip(*_memo_column(c("AllocTRES"), _alloc_facts, "AllocTRES", at))
    cpus_col = [a or b for a, b in zip(c("AllocCPUS"), c("NCPUS"))] if "NCPUS" in col else c("AllocCPUS")
    ncpus = _memo_column(cpus_col, _int_count, "AllocCPUS", at)
    nn_col = [a or b for a, b in zip(c("NNodes"), c("AllocNodes"))] if "AllocNodes" in col else c("NNodes")
    nnodes = _memo_column(nn_col, _int_count, "NNodes", at)
    raw = c("JobIDRaw")
    if _plain_ints(raw):
        raw_ids = list(map(int, raw))
    else:
        raw_ids = _numbers(list(zip(raw, ids)), lambda v: _raw_id(*v), "JobIDRaw", at)
    if any("_" in j for j in ids):
        array_job, array_task = zip(*map(_array, ids))
    else:
        array_job = array_task = nothing
    prio = c("Priority")
    if _plain_ints(p for p in prio if p):
        priority = [int(p) if p else None for p in prio]
    else:
        priority = _numbers(prio, _priority, "Priority", at)
    timelimit = _memo_column(c("Timelimit"), _timelimit, "Timelimit", at)
    partition = c("Partition")
    if extra_names:
        picks = [(k, col[k]) for k in extra_names]
        extra = [(json.dumps(d, sort_keys=True) if (d := {k: r[i] for k, i in picks if r[i]}) else "{}")
                 for r in rows]
    else:
        extra = repeat("{}")
    if any(not text for text in state_text):
        state_text = [text or st for text, st in zip(state_text, states)]
    reason = ["" if r == "None" else r for r in c("Reason")]
    exit_code = [x or "0:0" for x in c("ExitCode")]
    node_list = ["" if x == "None assigned" else x for x in nodes_text]
    billing = [b if b is not None else float(k) for b, k in zip(billing, ncpus)]
    gpu_seconds = [g * (el or 0.0) for g, el in zip(gpus, elapsed)]
    k = JOB_CONSTANTS
    # in ``store.JOB_COLUMNS`` order
    job_cols = (
        repeat(origin), ids, raw_ids, array_job, array_task, c("JobName"), repeat(k["kind"]), c("User"),
        c("Account"), c("QOS"), partition, repeat(k["namespace"]), partition, submit, eligible, start, end, elapsed,
        timelimit, state_text, reason, exit_code, priority, nnodes, ncpus, node_list, c("ReqTRES"), c("AllocTRES"),
        gpus, gpu_type, repeat(k["gpu_indices"]), billing, repeat(k["requeues"]), repeat(k["preemptions"]),
        gpu_seconds, repeat(k["gpu_seconds_lost"]), repeat(k["gpu_seconds_idle"]), c("Flags"), extra,
        repeat(source))

    def events() -> list[tuple]:
        """The records' event tuples, in file order (``store.insert_new_job_events`` makes the
        same rows from the stored jobs when every job is new and appears once)."""
        out: list[tuple] = []
        add = out.append
        for job_id, sub, t0, ran_i, nodes, t1, st, text in zip(ids, submit, start, ran, nodes_text, end, states,
                                                              state_text):
            if sub is not None:
                add((origin, job_id, sub, "submitted", "", None, source))
            if ran_i:
                add((origin, job_id, t0, "started", nodes, None, source))
            if t1 is not None and st in _FINAL:
                add((origin, job_id, t1, "finished", text, None, source))
        return out
    try:  # the node names of every job that ran (a bad host list fails the file even without GPUs)
        hosts_of = {text: _nodes(text) for text in {nodes for nodes, ran_i in zip(nodes_text, ran) if ran_i}}
    except ValueError:
        for i, (nodes, ran_i) in enumerate(zip(nodes_text, ran)):
            if ran_i:
                try:
                    _nodes(nodes)
                except ValueError as exc:
                    raise at(i, "NodeList", exc) from exc
        raise  # pragma: no cover
    allocs: list[tuple] = []
    add = allocs.append
    for job_id, ran_i, count, nodes, kind, t0, t1, st, el in zip(ids, ran, gpus, nodes_text, gpu_type, start, end,
                                                                 states, elapsed):
        if not (ran_i and count):
            continue
        hosts = hosts_of[nodes]
        to = t1 if st in _FINAL else None
        as_of = None if to is not None else t0 + (el or 0.0)
        if hosts and count % len(hosts) == 0:
            per_node = count // len(hosts)
            for host in hosts:
                add((origin, job_id, host, -1, per_node, kind, t0, to, as_of, None))
        else:
            add((origin, job_id, "", -1, count, kind, t0, to, as_of, None))
    return ids, job_cols, events, allocs


def job_rows(ids, job_cols) -> dict[str, tuple]:
    """Job tuples by job id from ``_origin_rows``' columns: a later record of the same job
    replaces it (in its first place)."""
    return dict(zip(ids, zip(*job_cols)))


def _rows_entry(o: str, ids, job_cols, events, allocs, records: int) -> tuple:
    """``Prepared.by_origin``'s entry for one origin's columns."""
    jobs = job_rows(ids, job_cols)
    return jobs, events, allocs, records, fresh_usage_rows(o, jobs, first_by_key(allocs))


def parse_parsable(text: str, source: str) -> list[dict]:
    """``--parsable2`` (or ``--parsable``) output with its header line → records."""
    header, rows, _ = parse_parsable_table(text, source)
    return [dict(zip(header, cells)) for cells in rows]


def parse_parsable_table(text: str, source: str) -> tuple[list[str], list[list[str]], Sequence[int]]:
    """``--parsable2`` (or ``--parsable``) output -> (header, each record's cells, each
    record's line number)."""
    lines = text.splitlines()
    h = next((i for i, ln in enumerate(lines) if ln.strip()), None)
    if h is None:
        return [], [], ()
    header = lines[h].rstrip("|").split("|")
    if "JobID" not in header:
        raise InputError(source, "expected sacct --parsable2 output whose header names JobID "
                                 "(run sacct without --noheader)", line=h + 1)
    width = len(header)
    rows = [ln.split("|") for ln in lines[h + 1:]]
    if width > 1:  # (a blank line splits into one cell)
        lengths = {len(r) for r in rows}
        numbers = range(h + 2, h + 2 + len(rows))  # no blank line: record i is on line h + 2 + i
        if lengths <= {width}:
            return header, rows, numbers
        if lengths == {width + 1} and all(r[-1] == "" for r in rows):  # --parsable's trailing |
            for r in rows:
                del r[-1]
            return header, rows, numbers
    out, numbers = [], []
    for number, line in enumerate(lines[h + 1:], start=h + 2):
        if not line.strip():
            continue
        cells = line.split("|")
        if len(cells) == width + 1 and cells[-1] == "":
            cells = cells[:-1]  # --parsable's trailing |
        if len(cells) != width:
            raise InputError(source, f"expected {width} |-separated fields as in the header, got {len(cells)}",
                             line=number)
        out.append(cells)
        numbers.append(number)
    return header, out, numbers


@dataclass
class Prepared:
    """One file's records turned into ledger rows, before any database work: what the
    pipeline in ``import_sacct_files`` builds for the next file while the current one is
    written (SQLite releases the GIL while it works, so the two overlap)."""

    kind: str
    sha: str
    source: str
    records: int
    #: origin -> (job tuples by job id, a function giving the event tuples, allocation
    #: tuples, records of that origin, usage rows of those jobs should all be new); tuples in
    #: the column order of ``store.JOB_COLUMNS``, ``EVENT_COLUMNS``, ``ALLOCATION_COLUMNS``.
    #: The events are made only when the write needs them as tuples (not when every job is
    #: new: ``store.insert_new_job_events`` makes them from the stored jobs).
    by_origin: dict[str, tuple[dict, Callable[[], list], list, int, object]]


def _prepare(kind: str, data: bytes, records: list[dict], origin: str | None, source: str) -> Prepared:
    """``_prepare_table`` for records as dicts (``sacct --json``): a field a record lacks is empty."""
    names: dict[str, None] = {}
    for rec in records:
        names.update(dict.fromkeys(rec))
    header = list(names)
    if records and "JobID" not in names:
        raise InputError(source, "expected records with a JobID")
    rows = [[rec.get(k, "") for k in header] for rec in records]
    return _prepare_table(kind, data, header, rows, None, origin, source)


def _prepare_table(kind: str, data: bytes, header: list[str], rows: list[list], lines: Sequence[int] | None,
                   origin: str | None, source: str, entry: Callable = _rows_entry) -> Prepared:
    """Records (``header`` + rows of cells) -> ledger rows per origin. ``lines``: each
    record's line, for errors (None for JSON records, then named by position). ``entry``
    makes each origin's ``by_origin`` value from ``_origin_rows``' output and the origin's
    record count (``sacct_staged`` stages the columns instead)."""
    col = {name: i for i, name in enumerate(header)}  # a repeated name: the last one, as dict(zip()) had it

    def at(origin_rows: list[int] | None):
        def error(i: int, field: str, exc: Exception) -> InputError:
            k = origin_rows[i] if origin_rows is not None else i
            line = lines[k] if lines is not None else None
            where = "" if line is not None else f"record {k + 1}: "
            value = rows[k][col[field]] if field in col else ""
            return InputError(source, f"{where}unreadable sacct value {value!r}: {exc}", line=line, field=field)
        return error

    by_origin = {}
    if rows:
        jid = col["JobID"]
        keep = None  # indices of the records that are jobs (None: all of them)
        if any("." in r[jid] for r in rows):
            keep = [i for i, r in enumerate(rows) if not _STEP_RE.match(r[jid])]  # steps: --allocations shows none
        groups: dict[str, list[int] | None]
        cl = col.get("Cluster")
        if origin or cl is None or len({r[cl] for r in rows}) == 1:
            o = origin or (rows[0][cl] if cl is not None else "") or "cluster"
            groups = {o: keep}
        else:
            groups = {}
            for i in (keep if keep is not None else range(len(rows))):
                groups.setdefault(rows[i][cl] or "cluster", []).append(i)
        extra_names = sorted(set(header) - _STORED)
        for o, idx in groups.items():
            recs = rows if idx is None else [rows[i] for i in idx]
            if not recs:
                continue
            by_origin[o] = entry(o, *_origin_rows(recs, col, o, source, extra_names, at(idx)), len(recs))
    return Prepared(kind, hashlib.sha256(data).hexdigest(), source, len(rows), by_origin)


def _store(ledger: Ledger, prep: Prepared, policy_pool: str | None) -> dict:
    """Write one prepared file in one transaction: all of it lands, or none."""
    stats = WriteStats()
    with ledger.transaction() as conn:
        for o, entry in prep.by_origin.items():
            store_origin(ledger, conn, prep, o, entry, policy_pool, stats)
    return result_of(prep, stats)


def result_of(prep, stats: WriteStats) -> dict:
    """What an import of one file reports (``prep``: a ``Prepared`` or anything with its
    ``source``, ``records`` and ``by_origin``)."""
    return {"source": prep.source, "records": prep.records, "clusters": sorted(prep.by_origin), **stats.as_dict()}


def store_origin(ledger: Ledger, conn, prep: Prepared, o: str, entry: tuple, policy_pool: str | None,
                 stats: WriteStats) -> None:
    """Write one origin's rows of a prepared file inside the caller's transaction."""
    jobs, events, allocs, n_recs, usage_rows = entry
    stats.prepared[o] = (jobs.keys(), usage_rows)
    version_at = ledger.versions_in_force(conn, policy_pool or o)  # read once per import
    if version_at:  # else every row keeps policy_version None
        allocs = [r[:A_POLICY_VERSION] + (version_at(r[A_TIME_FROM]),) + r[A_POLICY_VERSION + 1:]
                  for r in allocs]
    rows = list(jobs.values())
    added = stats.jobs_added
    after = ledger.last_job_rowid(conn)
    ledger.write_job_rows(conn, rows, stats)
    if after is not None and stats.jobs_added - added == len(rows) == n_recs:
        # every job new and each record its own job (the usual daily export): the events
        # are made by the database from the rows just stored, the same rows the tuples
        # below give (tests/ledger/test_sacct_columns.py checks the two agree)
        stats.events_added += insert_new_job_events(conn, o, after, (policy_pool or o) if version_at else None)
    else:
        ev = events()
        if version_at:  # else every row keeps policy_version None
            ev = [r[:E_POLICY_VERSION] + (version_at(r[E_TIME]),) + r[E_POLICY_VERSION + 1:] for r in ev]
        ledger.write_event_rows(conn, ev, stats)
    ledger.write_allocation_rows(conn, allocs, stats)
    if stats.changed:
        ledger.update_usage(conn, o, stats)  # the hours this import touched
    ledger.record_import(conn, prep.kind, prep.sha, o, prep.source, n_recs)


def _read_parsable(path: str | Path, cluster: str | None) -> Prepared:
    return parse_bytes(Path(path).read_bytes(), cluster, str(path))


def parse_bytes(data: bytes, cluster: str | None, source: str, entry: Callable = _rows_entry) -> Prepared:
    """A file's bytes (``sacct --parsable2`` text) -> its ledger rows; errors name ``source``."""
    header, rows, lines = parse_parsable_table(data.decode("utf-8", errors="replace"), source)
    return _prepare_table("sacct", data, header, rows, lines, cluster, source, entry)


def import_sacct(db, path: str | Path, *, cluster: str | None = None, pool: str | None = None) -> dict:
    """Import ``sacct --parsable2 --allocations --format=ALL`` output (any field set with JobID)."""
    with gc_paused():
        return _store(as_ledger(db), _read_parsable(path, cluster), pool)


def import_sacct_files(db, paths, *, cluster: str | None = None, pool: str | None = None,
                       processes: bool | None = None) -> list[dict]:
    """``import_sacct`` for many files (one transaction each, in order), parsing the next
    files while the current one is written: in a child process for a SQLite ledger
    (``sacct_staged``; ``processes=None``: when there are at least two files of
    ``PROCESS_MIN_BYTES`` in all), else in a second thread. Either way every file stores
    what ``import_sacct`` stores, and a file that cannot be read or parsed stops the run
    with the parser's error after the files before it were committed."""
    from gpupool.ledger.imports import sacct_staged

    ledger = as_ledger(db)
    paths = list(paths)
    if processes is None:
        processes = len(paths) > 1 and sacct_staged.total_bytes(paths) >= sacct_staged.PROCESS_MIN_BYTES
    if processes and sacct_staged.supported(ledger):
        with gc_paused():
            results = sacct_staged.import_files(ledger, paths, cluster, pool)
        if results is not None:  # None: no child process could be made
            return results
    return _import_files_threaded(ledger, paths, cluster, pool)


def _import_files_threaded(ledger: Ledger, paths: list, cluster: str | None, pool: str | None) -> list[dict]:
    """The next file read and parsed in a second thread while the current one is written."""
    results: list[dict] = []
    if not paths:
        return results
    with gc_paused(), ThreadPoolExecutor(max_workers=1, thread_name_prefix="sacct-parse") as pool_:
        ahead = pool_.submit(_read_parsable, paths[0], cluster)
        for nxt in paths[1:] + [None]:
            prep = ahead.result()
            if nxt is not None:
                ahead = pool_.submit(_read_parsable, nxt, cluster)
            results.append(_store(ledger, prep, pool))
    return results
