"""gpupool's own trace format: one row per workload, as JSONL, CSV or Parquet (by suffix).

Why a format of our own: the public traces each miss something gpupool needs (time limits,
gang rules, queues, checkpoints), so converted or generated workloads are saved in a format
that holds every field the engine reads, and that round-trips exactly.

Columns (units: seconds, millicores, MiB). Required: ``submit_time``, ``runtime``,
``gpus_per_pod``. Everything else is optional with the default in :data:`COLUMNS`; an empty
CSV cell, a JSON ``null`` or a missing key means "not set". ``label.<key>`` columns become
``Workload.labels[<key>]``. Any other column is an error (a typo must not be ignored).

Rows are re-ordered by ``submit_time`` and numbered 1..n like every reader's output; when a
row's ``id`` differs from its new number the old id is kept in the label
``gpupool.io/trace-id``. Round trip (``write_native`` then ``read_native``) is exact for
normalised lists (ids 1..n in submit order, first submit 0.0 — what readers and the generator
produce), except ``source``, which names the new file, and, in CSV only, labels whose value is
the empty string (CSV cannot tell them from "not set").

Fields the format does not hold (``nice``, ``dependency``, ``begin_time``, ``requeue``,
``signal``, array ids, ``output``, ``licenses``, and PodSet ``exclusive``/selectors/tolerations/
topology/extra resources, and the Slurm marks of requests left to slurm.conf's defaults,
``cpu_unset``/``memory_unset``/``memory_whole_node``/``memory_per``, ``cpus_per_task``,
``memory_unit``, ``memory_fit``, ``split_tasks``, ``spread_gpus``, ``nodes_raised``,
``walk_gpus``, ``walk_nodes``, ``cpus_per_gpu_cap``, ``cpus_per_gpu``, ``walk_tasks``, ``node_memory_mib``,
``per_node_tasks`` and the Slurm policy's
``node_min_cpus``/``node_min_cpus_asked``) are written as nothing (a split or spread pod set as its even
share, a walked one as the one pod it was submitted as):
use sbatch scripts or manifests for those. A workload with more than one pod set cannot be
written (one row holds one pod shape) and raises.
"""
from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

from gpupool.errors import InputError
from gpupool.formats.traces._common import (
    TraceWorkloads,
    ValueProblem,
    base_suffix,
    finalize,
    located,
    open_text,
    to_float,
    to_int,
)
from gpupool.model.workload import GANG_RULES, KIND_BATCH, KIND_SERVICE, OUTCOMES, PodSet, Workload

FORMAT = "native"
TRACE_ID_LABEL = "gpupool.io/trace-id"
LABEL_PREFIX = "label."
SUFFIXES = (".jsonl", ".ndjson", ".csv", ".parquet", ".pq")


def _text(value: Any) -> str:
    return str(value).strip()


def _choice(options: tuple[str, ...]) -> Callable[[Any], str]:
    def parse(value: Any) -> str:
        text = str(value).strip()
        if text not in options:
            raise ValueProblem(f"expected one of {', '.join(options)}, got {value!r}")
        return text

    return parse


def _bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no"):
        return False
    raise ValueProblem(f"expected true or false, got {value!r}")


@dataclass(frozen=True)
class Column:
    """One column: its parser, whether it must be present, its default, its Parquet type."""

    name: str
    parse: Callable[[Any], Any]
    required: bool = False
    default: Any = None
    arrow: str = "string"
    doc: str = ""


COLUMNS: tuple[Column, ...] = (
    Column("id", lambda v: to_int(v, "a whole number >= 1", minimum=1), arrow="int64",
           doc="trace id; rows are renumbered 1..n in submit order"),
    Column("name", _text, doc="job name (default job-<id>)"),
    Column("submit_time", lambda v: to_float(v, "seconds (a number)"), required=True, arrow="float64",
           doc="seconds; shifted so the first row submits at 0.0"),
    Column("runtime", lambda v: to_float(v, "seconds as a number >= 0", minimum=0), required=True,
           arrow="float64", doc="seconds the job runs if nothing stops it"),
    Column("time_limit", lambda v: to_float(v, "seconds as a number > 0 or empty", minimum=1e-9),
           arrow="float64", doc="seconds; empty = none (partition default applies)"),
    Column("outcome", _choice(OUTCOMES), default="COMPLETED", doc="how it ends after its runtime"),
    Column("gpus_per_pod", lambda v: to_int(v, "a whole number >= 0", minimum=0), required=True,
           arrow="int64", doc="GPUs of each pod"),
    Column("pods", lambda v: to_int(v, "a whole number >= 1", minimum=1), default=1, arrow="int64",
           doc="number of identical pods"),
    Column("cpu_per_pod", lambda v: to_int(v, "millicores as a whole number >= 0", minimum=0),
           default=1000, arrow="int64", doc="millicores per pod"),
    Column("memory_per_pod", lambda v: to_int(v, "MiB as a whole number >= 0", minimum=0), default=0,
           arrow="int64", doc="MiB per pod"),
    Column("gpu_type", _text, doc="required GPU type; empty = any"),
    Column("gang", _choice(GANG_RULES), default="all", doc="all / min / none"),
    Column("min_count", lambda v: to_int(v, "a whole number >= 1", minimum=1), arrow="int64",
           doc="pods needed to start when gang = min"),
    Column("checkpoint_interval", lambda v: to_float(v, "seconds as a number > 0", minimum=1e-9),
           arrow="float64", doc="seconds between checkpoints; empty = none"),
    Column("kind", _choice((KIND_BATCH, KIND_SERVICE)), default=KIND_BATCH, doc="batch / service"),
    Column("user", _text),
    Column("account", _text),
    Column("qos", _text),
    Column("partition", _text),
    Column("namespace", _text),
    Column("queue_name", _text, doc="Kueue LocalQueue name"),
    Column("priority_class", _text),
    Column("priority", lambda v: to_int(v, "a whole number"), arrow="int64"),
    Column("one_per_node", _bool, default=False, arrow="bool_", doc="each pod on its own node"),
)
BY_NAME = {c.name: c for c in COLUMNS}
REQUIRED = tuple(c.name for c in COLUMNS if c.required)


# --------------------------------------------------------------------------- reading


def _check_columns(path: str, names: Iterable[str], line: int) -> None:
    names = list(names)
    unknown = [n for n in names if n not in BY_NAME and not n.startswith(LABEL_PREFIX)]
    if unknown:
        raise InputError(
            path,
            f"unknown column '{unknown[0]}'; known columns: {', '.join(BY_NAME)} (and label.<key>)",
            line=line,
        )
    missing = [n for n in REQUIRED if n not in names]
    if missing:
        raise InputError(path, f"missing required column(s) {', '.join(missing)}", line=line)


def _row_to_workload(path: str, line: int, row: dict[str, Any]) -> Workload:
    """One row → Workload; the first bad value raises with the row number and the column."""
    values: dict[str, Any] = {}
    for col in COLUMNS:
        raw = row.get(col.name)
        if _missing(raw):
            if col.required:
                raise InputError(path, f"column '{col.name}': required, but empty", line=line)
            values[col.name] = col.default
            continue
        try:
            values[col.name] = col.parse(raw)
        except ValueProblem as problem:
            raise located(path, line, col.name, problem) from None
    labels = {
        key[len(LABEL_PREFIX):]: str(value)
        for key, value in row.items()
        if key.startswith(LABEL_PREFIX) and value is not None and not (isinstance(value, float) and value != value)
        and not (isinstance(value, str) and value == "" and _csv_row(row))
    }
    if values["id"] is not None:
        labels.setdefault(TRACE_ID_LABEL, str(values["id"]))
    pod = PodSet(
        count=values["pods"],
        gpus=values["gpus_per_pod"],
        cpu_m=values["cpu_per_pod"],
        memory_mib=values["memory_per_pod"],
        gpu_type=values["gpu_type"] or None,
        min_count=values["min_count"],
        one_per_node=values["one_per_node"],
    )
    return Workload(
        id=0,
        name=values["name"] or "",
        pod_sets=(pod,),
        submit_time=values["submit_time"],
        runtime=values["runtime"],
        time_limit=values["time_limit"],
        outcome=values["outcome"],
        gang=values["gang"],
        checkpoint_interval=values["checkpoint_interval"],
        kind=values["kind"],
        user=values["user"] or None,
        account=values["account"] or None,
        qos=values["qos"] or None,
        partition=values["partition"] or None,
        namespace=values["namespace"] or None,
        queue_name=values["queue_name"] or None,
        priority_class=values["priority_class"] or None,
        priority=values["priority"],
        labels=labels,
        source=f"{path}:{line}",
    )


_CSV_MARK = "\x00csv"


def _missing(value: Any) -> bool:
    """Not set: absent, null, NaN or an empty cell (no 'NA'-style words: a user may be called NA)."""
    if value is None:
        return True
    if isinstance(value, float):
        return value != value
    return isinstance(value, str) and not value.strip()


def _csv_row(row: dict[str, Any]) -> bool:
    return _CSV_MARK in row


def _iter_csv(path: str):
    with open_text(path) as handle:
        reader = csv.DictReader(handle)
        if reader.fieldnames is None:
            return
        _check_columns(path, reader.fieldnames, 1)
        for row in reader:
            if None in row:
                raise InputError(path, f"row has {len(reader.fieldnames) + len(row[None])} cells, "
                                 f"the header has {len(reader.fieldnames)}", line=reader.line_num)
            if not any((v or "").strip() for v in row.values()):
                continue  # a blank line is not a row
            row[_CSV_MARK] = True
            yield reader.line_num, row


def _iter_jsonl(path: str):
    with open_text(path) as handle:
        for number, text in enumerate(handle, start=1):
            if not text.strip():
                continue
            try:
                row = json.loads(text)
            except json.JSONDecodeError as exc:
                raise InputError(path, f"not a JSON object: {exc.msg}", line=number) from None
            if not isinstance(row, dict):
                raise InputError(path, f"expected a JSON object per line, got {type(row).__name__}", line=number)
            _check_columns(path, row.keys(), number)
            yield number, row


def _iter_parquet(path: str):
    import pyarrow.parquet as pq

    if not Path(path).exists():
        raise InputError(path, "no such file")
    try:
        table = pq.read_table(path)
    except Exception as exc:  # pyarrow raises several types for a bad file
        raise InputError(path, f"not a readable Parquet file: {exc}") from None
    _check_columns(path, table.column_names, 1)
    for number, row in enumerate(table.to_pylist(), start=1):
        yield number, row


def _rows(path: str):
    suffix = base_suffix(path)
    if suffix == ".csv":
        return _iter_csv(path)
    if suffix in (".jsonl", ".ndjson"):
        return _iter_jsonl(path)
    if suffix in (".parquet", ".pq"):
        return _iter_parquet(path)
    raise InputError(path, f"unknown suffix '{suffix}'; the native format is .jsonl, .ndjson, .csv or .parquet")


def read_native(path: str | Path, *, limit: int | None = None) -> TraceWorkloads:
    """Read a native trace (format by suffix). Row numbers in errors are file lines for CSV and
    JSONL and 1-based row indexes for Parquet. No rows are skipped: a bad row is an error."""
    path = str(path)
    result = TraceWorkloads(path=path, format=FORMAT)
    for line, row in _rows(path):
        result.append(_row_to_workload(path, line, row))
    result = finalize(result, limit)
    for workload in result:
        if workload.labels.get(TRACE_ID_LABEL) == str(workload.id):
            del workload.labels[TRACE_ID_LABEL]
    return result


# --------------------------------------------------------------------------- writing


def _row(workload: Workload, path: str) -> dict[str, Any]:
    if len(workload.pod_sets) != 1:
        raise InputError(path, f"workload {workload.id} ({workload.name}) has {len(workload.pod_sets)} pod sets; "
                         "the native format holds exactly one per row")
    pod = workload.pod_sets[0]
    return {
        "id": workload.id,
        "name": workload.name,
        "submit_time": float(workload.submit_time),
        "runtime": float(workload.runtime),
        "time_limit": None if workload.time_limit is None else float(workload.time_limit),
        "outcome": workload.outcome,
        "gpus_per_pod": pod.gpus,
        "pods": pod.count,
        "cpu_per_pod": pod.cpu_m,
        "memory_per_pod": pod.memory_mib,
        "gpu_type": pod.gpu_type,
        "gang": workload.gang,
        "min_count": pod.min_count,
        "checkpoint_interval": None if workload.checkpoint_interval is None else float(workload.checkpoint_interval),
        "kind": workload.kind,
        "user": workload.user,
        "account": workload.account,
        "qos": workload.qos,
        "partition": workload.partition,
        "namespace": workload.namespace,
        "queue_name": workload.queue_name,
        "priority_class": workload.priority_class,
        "priority": workload.priority,
        "one_per_node": pod.one_per_node,
    }


def _label_keys(workloads: list[Workload]) -> list[str]:
    return sorted({key for w in workloads for key in w.labels})


def _csv_cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value) if isinstance(value, float) else str(value)


def write_native(workloads: Iterable[Workload], path: str | Path) -> None:
    """Write workloads in the native format chosen by the suffix (.jsonl/.ndjson, .csv, .parquet)."""
    path = str(path)
    workloads = list(workloads)
    suffix = base_suffix(path)
    if suffix not in SUFFIXES or path.endswith(".gz"):
        raise InputError(path, f"unknown suffix '{Path(path).suffix}'; write .jsonl, .ndjson, .csv or .parquet")
    label_keys = _label_keys(workloads)
    rows = []
    for workload in workloads:
        row = _row(workload, path)
        for key in label_keys:
            row[LABEL_PREFIX + key] = workload.labels.get(key)
        rows.append(row)
    names = [c.name for c in COLUMNS] + [LABEL_PREFIX + k for k in label_keys]
    if suffix == ".csv":
        with open(path, "w", encoding="utf-8", newline="") as handle:
            writer = csv.writer(handle, lineterminator="\n")
            writer.writerow(names)
            for row in rows:
                writer.writerow([_csv_cell(row[n]) for n in names])
    elif suffix in (".jsonl", ".ndjson"):
        with open(path, "w", encoding="utf-8") as handle:
            for row in rows:
                compact = {k: v for k, v in row.items() if v is not None}
                handle.write(json.dumps(compact, ensure_ascii=False) + "\n")
    else:
        import pyarrow as pa
        import pyarrow.parquet as pq

        fields = [pa.field(c.name, getattr(pa, c.arrow)()) for c in COLUMNS]
        fields += [pa.field(LABEL_PREFIX + k, pa.string()) for k in label_keys]
        schema = pa.schema(fields)
        table = pa.Table.from_pylist(rows, schema=schema)
        pq.write_table(table, path)
