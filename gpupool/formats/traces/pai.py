"""Alibaba PAI GPU trace 2020 (NSDI'22): the task table, optionally joined with the job table.

The tables are headerless CSVs; their column names are the official ``.header`` files:

* ``pai_task_table``: ``job_name,task_name,inst_num,status,start_time,end_time,plan_cpu,
  plan_mem,plan_gpu,gpu_type`` — one row per task of a job (e.g. ``worker`` and ``ps``);
  ``inst_num`` identical instances, each asking ``plan_gpu`` *percent* of one GPU
  (50 = half), ``plan_cpu`` percent of a core, ``plan_mem`` GB.
* ``pai_job_table``: ``job_name,inst_id,user,status,start_time,end_time`` — ``start_time`` is
  the submission. Read from the file given as ``job_table=``, or from the sibling file whose
  name has ``job`` for ``task`` (``pai_task_table.csv`` → ``pai_job_table.csv``) when present.

Conversion: tasks are grouped by ``job_name`` into one workload with one pod set per task
(``name`` = task name, ``count`` = ``inst_num``). Fractional GPUs round **up** to whole GPUs
(``ceil(plan_gpu / 100)``: 50 → 1, 100 → 1, 200 → 2, 25 → 1) because gpupool allocates whole
devices (or MIG slices, which a trace's percentages do not name); the requested GPU-equivalents
are kept in the label ``pai.gpu_fraction`` so GPU sharing can be studied later. This inflates
PAI's demand: its median job asks 0.5 GPU and becomes 1 GPU.
``plan_cpu`` → millicores (×10), ``plan_mem`` → MiB (×1024), both rounded up.
submit_time ← job table ``start_time`` (else the earliest task start: the queueing delay is then
lost); runtime ← latest task end − earliest task start. Outcome ← job status (else task
statuses): Terminated → COMPLETED, Failed → FAILED (any failed task fails the job).
``gpu_type`` (V100, V100M32, P100, T4, MISC) is kept in the label ``pai.gpu_type``; pass
``keep_gpu_type=True`` to make it a constraint (only useful on a pool with those type names;
MISC is never a constraint). Every job is ``kind="batch"``: the tables do not say which jobs
are inference (that is in the group-tag table, not read here).
Skipped (counted): jobs with a task not finished (Running/Waiting, or no end time), jobs
without GPUs (``gpu_only=True``, the default), and jobs whose job-table status is
Running/Waiting. Jobs in the job table without tasks are not workloads and are not counted.
"""
from __future__ import annotations

import csv
import math
import re
from dataclasses import dataclass
from pathlib import Path

from gpupool.errors import InputError
from gpupool.formats.traces._common import (
    TraceWorkloads,
    ValueProblem,
    blank,
    finalize,
    open_text,
    to_float,
    to_int,
)
from gpupool.model.workload import GANG_ALL, PodSet, Workload

FORMAT = "pai"
TASK_COLUMNS = ("job_name", "task_name", "inst_num", "status", "start_time", "end_time",
                "plan_cpu", "plan_mem", "plan_gpu", "gpu_type")
JOB_COLUMNS = ("job_name", "inst_id", "user", "status", "start_time", "end_time")
_OUTCOME = {"Terminated": "COMPLETED", "Failed": "FAILED"}


@dataclass(slots=True)
class _Task:
    line: int
    name: str
    instances: int
    status: str
    start: float | None
    end: float | None
    cpu_m: int
    memory_mib: int
    gpu_percent: float
    gpu_type: str


def _rows(path: str, columns: tuple[str, ...], table: str):
    """Yield (line, row dict) of a headerless table; a header row equal to ``columns`` is skipped."""
    with open_text(path) as handle:
        reader = csv.reader(handle)
        for cells in reader:
            if not cells or not any(c.strip() for c in cells):
                continue
            line = reader.line_num
            if tuple(c.strip() for c in cells) == columns:
                continue
            if len(cells) != len(columns):
                hint = ""
                if table == "pai_task_table" and len(cells) == len(JOB_COLUMNS):
                    hint = " (this looks like pai_job_table; give the task table, which holds the GPU requests)"
                raise InputError(path, f"expected {len(columns)} comma-separated columns "
                                 f"({','.join(columns)}: see {table}.header), got {len(cells)}{hint}", line=line)
            yield line, dict(zip(columns, (c.strip() for c in cells)))


def _value(path: str, line: int, column: str, parse):
    try:
        return parse()
    except ValueProblem as problem:
        raise InputError(path, f"column '{column}': {problem}", line=line) from None


def _task(path: str, line: int, row: dict[str, str]) -> _Task:
    def number(column: str, what: str) -> float:
        if blank(row[column]):
            return 0.0
        return _value(path, line, column, lambda: to_float(row[column], what, minimum=0))

    def moment(column: str) -> float | None:
        if blank(row[column]):
            return None
        return _value(path, line, column, lambda: to_float(row[column], "seconds (a number)"))

    instances = _value(path, line, "inst_num", lambda: to_int(row["inst_num"], "a whole number >= 1", minimum=1))
    return _Task(
        line=line, name=row["task_name"] or "main", instances=instances, status=row["status"],
        start=moment("start_time"), end=moment("end_time"),
        cpu_m=math.ceil(number("plan_cpu", "percent of a core (a number >= 0)") * 10),
        memory_mib=math.ceil(number("plan_mem", "GB (a number >= 0)") * 1024),
        gpu_percent=number("plan_gpu", "percent of a GPU (a number >= 0)"),
        gpu_type="" if blank(row["gpu_type"]) else row["gpu_type"],
    )


def _job_table(path: str) -> dict[str, tuple[str | None, str, float | None]]:
    jobs: dict[str, tuple[str | None, str, float | None]] = {}
    for line, row in _rows(path, JOB_COLUMNS, "pai_job_table"):
        submit = None
        if not blank(row["start_time"]):
            submit = _value(path, line, "start_time", lambda: to_float(row["start_time"], "seconds (a number)"))
        jobs[row["job_name"]] = (row["user"] or None, row["status"], submit)
    return jobs


def _sibling_job_table(path: str) -> str | None:
    p = Path(path)
    if "task" not in p.name:
        return None
    candidate = p.with_name(p.name.replace("task", "job"))
    return str(candidate) if candidate.exists() else None


def read_pai(path: str | Path, *, job_table: str | Path | None = None, keep_gpu_type: bool = False,
             gpu_only: bool = True, limit: int | None = None) -> TraceWorkloads:
    """Read a PAI task table (with its job table when given or found beside it)."""
    path = str(path)
    jobs_path = str(job_table) if job_table is not None else _sibling_job_table(path)
    jobs = _job_table(jobs_path) if jobs_path else {}
    tasks: dict[str, list[_Task]] = {}
    for line, row in _rows(path, TASK_COLUMNS, "pai_task_table"):
        tasks.setdefault(row["job_name"], []).append(_task(path, line, row))
    result = TraceWorkloads(path=path, format=FORMAT)
    if jobs_path:
        result.meta["job_table"] = jobs_path
    else:
        result.notes.append("No job table: submit time = first task start (queueing delay lost), no users.")
    for name, job_tasks in tasks.items():
        workload = _workload(path, name, job_tasks, jobs.get(name), keep_gpu_type, gpu_only, result)
        if workload is not None:
            result.append(workload)
    return finalize(result, limit)


def _outcome(job_tasks: list[_Task], job: tuple | None) -> str | None:
    if job is not None and job[1]:
        return _OUTCOME.get(job[1])
    statuses = {t.status for t in job_tasks}
    if "Failed" in statuses and statuses <= {"Failed", "Terminated"}:
        return "FAILED"
    return "COMPLETED" if statuses == {"Terminated"} else None


def _workload(path: str, name: str, job_tasks: list[_Task], job: tuple | None, keep_gpu_type: bool,
              gpu_only: bool, result: TraceWorkloads) -> Workload | None:
    first = job_tasks[0].line
    if any(t.start is None or t.end is None for t in job_tasks):
        result.skip(first, "task not finished (no start or end time)")
        return None
    outcome = _outcome(job_tasks, job)
    if outcome is None:
        status = job[1] if job is not None and job[1] else "/".join(sorted({t.status for t in job_tasks}))
        result.skip(first, f"job not finished (status {status})")
        return None
    gpus = sum(t.instances * math.ceil(t.gpu_percent / 100) for t in job_tasks)
    if gpus == 0 and gpu_only:
        result.skip(first, "no GPUs (gpu_only)")
        return None
    start = min(t.start for t in job_tasks)
    submit = job[2] if job is not None and job[2] is not None else start
    types = sorted({t.gpu_type for t in job_tasks if t.gpu_type and t.gpu_percent > 0})
    pod_sets = tuple(
        PodSet(name=t.name, count=t.instances, gpus=math.ceil(t.gpu_percent / 100), cpu_m=t.cpu_m,
               memory_mib=t.memory_mib,
               gpu_type=t.gpu_type if keep_gpu_type and t.gpu_type not in ("", "MISC") and t.gpu_percent > 0 else None)
        for t in job_tasks
    )
    labels = {"pai.gpu_fraction": f"{sum(t.instances * t.gpu_percent for t in job_tasks) / 100:g}"}
    if types:
        labels["pai.gpu_type"] = "|".join(types)
    return Workload(
        id=0, name=name, pod_sets=pod_sets, submit_time=submit,
        runtime=max(0.0, max(t.end for t in job_tasks) - start), outcome=outcome, gang=GANG_ALL,
        user=job[0] if job is not None else None, labels=labels, source=f"{path}:{first}",
    )


def looks_like_pai(path: str, first_line: str) -> bool:
    """Sniffing for headerless PAI tables: the file name, or 10 cells with a numeric inst_num."""
    if Path(path).name.startswith("pai_task_table"):
        return True
    cells = first_line.strip().split(",")
    return len(cells) == len(TASK_COLUMNS) and bool(re.fullmatch(r"\d+(\.0+)?", cells[2].strip()))
