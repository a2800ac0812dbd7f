"""Microsoft Philly (ATC'19): the ``cluster_job_log`` JSON and the CSV carriers of it.

``cluster_job_log`` is a JSON list of jobs: ``jobid``, ``user``, ``vc``, ``submitted_time``,
``status`` (Pass / Failed / Killed) and ``attempts[]``, each with ``start_time``,
``end_time`` and ``detail[]`` = ``{ip, gpus: [...]}`` per machine. Conversion:

* submit_time ← ``submitted_time``; runtime ← the *sum* of the attempts' durations (retries
  are how Philly re-ran failed jobs; summing keeps the GPU-time the cluster actually spent,
  the number of attempts is kept in the label ``philly.attempts``).
* layout ← the attempt that used the most GPUs: one pod per machine in its ``detail``, each
  with the largest per-machine GPU count (pods are identical), ``one_per_node`` when it spans
  machines, gang "all".
* outcome ← Pass → COMPLETED, Failed → FAILED, Killed → CANCELLED.
* user ← ``user``; the virtual cluster ``vc`` is both a fair-share group and a quota'd queue,
  so it becomes ``account`` and ``queue_name``.
* Skipped (counted): jobs with no attempts (never ran), a null last ``end_time`` (still
  running at the snapshot: runtime unknown), attempts with no GPUs.

The CSV carriers in ``shared/traces/philly-2017`` (the raw log is a 1 GB Git LFS object):

* ``duration_s,num_gpus`` (Gavel's 33,192-job sample of jobs ≥ 1 h) has runtime and GPUs but
  **no submit times**: every job submits at 0.0 (a backlog, in file order); layout by
  :func:`split_gpus`; outcome COMPLETED (the sample has none). Optional ``submit_time``
  column is honoured when present.
* ``runtime`` alone (the PAI notebook's 83 k runtimes), the per-minute busy-server series and
  the VC size list do not describe jobs (no GPU counts): reading them is an error that says so;
  they are calibration inputs (see docs/synthetic.md).
"""
from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

from gpupool.errors import InputError
from gpupool.formats.traces._common import (
    DEFAULT_GPUS_PER_NODE,
    TraceWorkloads,
    ValueProblem,
    blank,
    finalize,
    open_text,
    split_gpus,
    to_float,
    to_int,
    to_timestamp,
)
from gpupool.model.workload import GANG_ALL, PodSet, Workload

FORMAT = "philly"
_STATUS = {"Pass": "COMPLETED", "Failed": "FAILED", "Killed": "CANCELLED"}
CARRIER_COLUMNS = ("duration_s", "num_gpus")


def read_philly(path: str | Path, *, gpus_per_node: int = DEFAULT_GPUS_PER_NODE,
                limit: int | None = None) -> TraceWorkloads:
    """Read a Philly ``cluster_job_log`` (JSON) or a ``duration_s,num_gpus`` CSV carrier."""
    path = str(path)
    with open_text(path) as handle:
        head = handle.read(4096)
    if head.lstrip().startswith("["):
        return _read_job_log(path, limit)
    return _read_carrier(path, gpus_per_node, limit)


# --------------------------------------------------------------------------- cluster_job_log


def _jobs_with_lines(path: str, text: str):
    """Yield (line, job) for each element of the top-level JSON list, with its starting line,
    so that errors and ``source`` point into the file (``json.load`` loses positions)."""
    decoder = json.JSONDecoder()
    pos, line = 0, 1
    length = len(text)

    def skip(p: int) -> int:
        while p < length and text[p] in " \t\r\n":
            p += 1
        return p

    pos = skip(pos)
    if pos >= length or text[pos] != "[":
        raise InputError(path, "expected a JSON list of jobs ('[' ...)", line=1)
    pos = skip(pos + 1)
    counted = 0
    while pos < length and text[pos] != "]":
        line += text.count("\n", counted, pos)
        counted = pos
        try:
            job, end = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            raise InputError(path, f"not valid JSON: {exc.msg}", line=exc.lineno) from None
        yield line, job
        pos = skip(end)
        if pos < length and text[pos] == ",":
            pos = skip(pos + 1)
        elif pos < length and text[pos] != "]":
            line += text.count("\n", counted, pos)
            raise InputError(path, "not valid JSON: expected ',' or ']' after a job", line=line)
    if pos >= length:
        raise InputError(path, "not valid JSON: the job list is not closed with ']'")


def _require(path: str, line: int, job: dict, key: str) -> Any:
    if key not in job:
        raise InputError(path, f"job {job.get('jobid', '?')}: missing key '{key}'", line=line)
    return job[key]


def _read_job_log(path: str, limit: int | None) -> TraceWorkloads:
    result = TraceWorkloads(path=path, format=FORMAT)
    with open_text(path) as handle:
        text = handle.read()
    for line, job in _jobs_with_lines(path, text):
        if not isinstance(job, dict):
            raise InputError(path, f"expected a job object, got {type(job).__name__}", line=line)
        workload = _job(path, line, job, result)
        if workload is not None:
            result.append(workload)
    return finalize(result, limit)


def _job(path: str, line: int, job: dict, result: TraceWorkloads) -> Workload | None:
    jobid = job.get("jobid", "?")
    status = _require(path, line, job, "status")
    if status not in _STATUS:
        raise InputError(path, f"job {jobid}: key 'status': expected Pass, Failed or Killed, got {status!r}",
                         line=line)
    try:
        submit = to_timestamp(_require(path, line, job, "submitted_time"))
    except ValueProblem as problem:
        raise InputError(path, f"job {jobid}: key 'submitted_time': {problem}", line=line) from None
    attempts = job.get("attempts") or []
    if not attempts:
        result.skip(line, "no attempts (never ran)")
        return None
    if blank(attempts[-1].get("end_time")):
        result.skip(line, "still running at the snapshot (null end_time)")
        return None
    runtime, pods, per_pod = 0.0, 0, 0
    for number, attempt in enumerate(attempts, start=1):
        try:
            start = to_timestamp(attempt.get("start_time"), "a start time")
            end = to_timestamp(attempt.get("end_time"), "an end time")
        except ValueProblem as problem:
            raise InputError(path, f"job {jobid}: attempt {number}: {problem}", line=line) from None
        runtime += max(0.0, end - start)
        detail = attempt.get("detail") or []
        gpus = [len(machine.get("gpus") or []) for machine in detail]
        if sum(gpus) > pods * per_pod:
            pods, per_pod = len([g for g in gpus if g]), max(gpus)
    if pods * per_pod == 0:
        result.skip(line, "no GPUs in any attempt")
        return None
    vc = job.get("vc")
    return Workload(
        id=0,
        name=f"philly-{jobid}",
        pod_sets=(PodSet(count=pods, gpus=per_pod, one_per_node=pods > 1),),
        submit_time=submit,
        runtime=runtime,
        outcome=_STATUS[status],
        gang=GANG_ALL,
        user=job.get("user") or None,
        account=vc or None,
        queue_name=vc or None,
        labels={"philly.attempts": str(len(attempts))},
        source=f"{path}:{line}",
    )


# --------------------------------------------------------------------------- CSV carriers


def _read_carrier(path: str, gpus_per_node: int, limit: int | None) -> TraceWorkloads:
    result = TraceWorkloads(path=path, format=FORMAT)
    with open_text(path) as handle:
        reader = csv.DictReader(handle)
        names = [n.strip() for n in (reader.fieldnames or [])]
        missing = [c for c in CARRIER_COLUMNS if c not in names]
        if missing:
            if names == ["runtime"]:
                why = "it has runtimes only (no GPU counts): a calibration input, not a job list"
            else:
                why = f"missing column(s) {', '.join(missing)}"
            raise InputError(path, f"not a Philly job list: {why}; expected a cluster_job_log JSON "
                             f"or a CSV with columns {', '.join(CARRIER_COLUMNS)}", line=1)
        for row in reader:
            line = reader.line_num
            row = {k.strip(): v for k, v in row.items() if k is not None}
            try:
                runtime = to_float(row["duration_s"], "seconds as a number >= 0", minimum=0)
            except ValueProblem as problem:
                raise InputError(path, f"column 'duration_s': {problem}", line=line) from None
            try:
                gpus = to_int(row["num_gpus"], "a whole number >= 1", minimum=1)
            except ValueProblem as problem:
                raise InputError(path, f"column 'num_gpus': {problem}", line=line) from None
            submit = 0.0
            if not blank(row.get("submit_time")):
                try:
                    submit = to_timestamp(row["submit_time"])
                except ValueProblem as problem:
                    raise InputError(path, f"column 'submit_time': {problem}", line=line) from None
            pods, per_pod = split_gpus(gpus, gpus_per_node)
            result.append(Workload(
                id=0, name="", pod_sets=(PodSet(count=pods, gpus=per_pod, one_per_node=pods > 1),),
                submit_time=submit, runtime=runtime, gang=GANG_ALL, source=f"{path}:{line}",
            ))
    if "submit_time" not in names:
        result.notes.append("No submit times in this file: every job submits at 0.0 (a backlog).")
    return finalize(result, limit)
