"""SenseTime Helios (SC'21): a cluster's ``cluster_log.csv`` (Venus, Earth, Saturn, Uranus).

Columns: ``job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,
duration,queue`` — times ``YYYY-MM-DD HH:MM:SS``, ``duration``/``queue`` in seconds. The logs
are Slurm's own accounting, so they map almost one to one:

* submit_time ← ``submit_time``; runtime ← ``duration`` (else ``end_time − start_time``).
* layout ← ``node_num`` pods, ``ceil(gpu_num / node_num)`` GPUs and
  ``ceil(cpu_num / node_num)`` CPUs each, ``one_per_node`` when ``node_num > 1``, gang "all";
  ``node_num`` 0 or empty → :func:`split_gpus` on 8-GPU nodes.
* outcome ← COMPLETED, FAILED, CANCELLED as written; NODE_FAIL → FAILED (node failures in a
  replay come from the run, so the trace's one becomes a job failure); TIMEOUT → the job is
  given ``time_limit = duration`` and ``runtime = duration + 1 s``, so a replay ends it by
  its limit (TIMEOUT) at the same moment.
* user ← ``user``; the virtual cluster ``vc`` (a fair-share group with a GPU quota) →
  ``account`` and ``queue_name``.
* Dropped: ``start_time``/``end_time`` beyond computing a missing duration, and ``queue``
  (the replay computes waiting). Skipped (counted): CPU-only jobs when ``gpu_only=True``
  (the default; gpupool replays GPU work), jobs with no duration and no start/end times.
"""
from __future__ import annotations

import math
from pathlib import Path

from gpupool.errors import InputError
from gpupool.formats.traces._common import (
    cell,
    csv_rows,
    DEFAULT_GPUS_PER_NODE,
    TraceWorkloads,
    finalize,
    open_text,
    split_gpus,
    to_float,
    to_int,
    to_timestamp,
)
from gpupool.model.workload import GANG_ALL, PodSet, Workload

FORMAT = "helios"
COLUMNS = ("job_id", "user", "vc", "gpu_num", "cpu_num", "node_num", "state", "submit_time",
           "start_time", "end_time", "duration", "queue")
REQUIRED = ("job_id", "gpu_num", "state", "submit_time")
_STATES = {"COMPLETED": "COMPLETED", "FAILED": "FAILED", "CANCELLED": "CANCELLED",
           "NODE_FAIL": "FAILED", "TIMEOUT": "COMPLETED"}




def read_helios(path: str | Path, *, gpu_only: bool = True, gpus_per_node: int = DEFAULT_GPUS_PER_NODE,
                limit: int | None = None) -> TraceWorkloads:
    """Read a Helios ``cluster_log.csv`` (see the module docstring for every conversion)."""
    path = str(path)
    result = TraceWorkloads(path=path, format=FORMAT)
    with open_text(path) as handle:
        for line, row in csv_rows(handle, path, REQUIRED, f"a Helios cluster_log.csv has {','.join(COLUMNS)}"):
            workload = _row(path, line, row, gpu_only, gpus_per_node, result)
            if workload is not None:
                result.append(workload)
    return finalize(result, limit)


def _row(path: str, line: int, row: dict[str, str], gpu_only: bool, gpus_per_node: int,
         result: TraceWorkloads) -> Workload | None:
    count = lambda v: to_int(v, "a whole number >= 0", minimum=0)  # noqa: E731
    gpus = cell(path, line, row, "gpu_num", count, 0)
    if gpus == 0 and gpu_only:
        result.skip(line, "no GPUs (gpu_only)")
        return None
    state = (row.get("state") or "").strip()
    if state not in _STATES:
        raise InputError(path, f"column 'state': expected one of {', '.join(_STATES)}, got {state!r}", line=line)
    submit = cell(path, line, row, "submit_time", to_timestamp)
    if submit is None:
        raise InputError(path, "column 'submit_time': required, but empty", line=line)
    runtime = cell(path, line, row, "duration", lambda v: to_float(v, "seconds as a number >= 0", minimum=0))
    if runtime is None:
        start = cell(path, line, row, "start_time", to_timestamp)
        end = cell(path, line, row, "end_time", to_timestamp)
        if start is None or end is None:
            result.skip(line, "no duration and no start/end time")
            return None
        runtime = max(0.0, end - start)
    nodes = cell(path, line, row, "node_num", count, 0)
    if nodes > 0:
        pods, per_pod = nodes, math.ceil(gpus / nodes)
    else:
        pods, per_pod = split_gpus(gpus, gpus_per_node)
    cpus = cell(path, line, row, "cpu_num", count, 0)
    time_limit = None
    if state == "TIMEOUT" and runtime > 0:
        time_limit, runtime = runtime, runtime + 1.0
    vc = (row.get("vc") or "").strip() or None
    return Workload(
        id=0,
        name=f"helios-{row['job_id'].strip()}",
        pod_sets=(PodSet(count=pods, gpus=per_pod, cpu_m=math.ceil(cpus / pods) * 1000 if cpus else 1000,
                         one_per_node=pods > 1),),
        submit_time=submit,
        runtime=runtime,
        time_limit=time_limit,
        outcome=_STATES[state],
        gang=GANG_ALL,
        user=(row.get("user") or "").strip() or None,
        account=vc,
        queue_name=vc,
        source=f"{path}:{line}",
    )
