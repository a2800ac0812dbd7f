"""Alibaba GPU-sharing trace 2023 ("OpenB", ATC'23): a pod list CSV.

Columns: ``name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,
deletion_time,scheduled_time`` (seconds, trace-relative). One pod becomes one workload with one
pod:

* submit_time ← ``creation_time``; runtime ← ``deletion_time − scheduled_time`` (the time it
  held its node; the wait before ``scheduled_time`` is what a replay recomputes).
* GPUs ← ``num_gpu``; a fractional request (``num_gpu == 1`` and ``gpu_milli < 1000``) rounds
  **up** to one whole GPU, because gpupool allocates whole devices; the fraction is kept in the
  label ``openb.gpu_milli`` (37.8 % of the default list's pods are fractional).
* CPU ← ``cpu_milli`` (millicores), memory ← ``memory_mib``.
* ``qos`` LS (latency-sensitive) → ``kind="service"``, gang "none" (OpenB's LS pods are
  long-running serving pods); BE, Burstable, Guaranteed → ``kind="batch"``, gang "all".
  The QoS is kept in the label ``openb.qos``.
* outcome ← ``pod_phase``: Failed → FAILED; Succeeded → COMPLETED; Running → COMPLETED (its
  ``deletion_time`` is the end of the trace window, so its runtime is censored there).
* ``gpu_spec`` (allowed types, ``|``-separated) → label ``openb.gpu_spec``; with
  ``keep_gpu_type=True`` a single allowed type becomes the pod's ``gpu_type`` constraint.
* Skipped (counted): Pending pods (never scheduled, no ``scheduled_time``) and CPU-only pods
  when ``gpu_only=True`` (the default). The ``multigpu*`` variant lists have no times and are
  rejected with an error naming the missing columns.
"""
from __future__ import annotations

from pathlib import Path

from gpupool.errors import InputError
from gpupool.formats.traces._common import (
    cell,
    csv_rows,
    TraceWorkloads,
    blank,
    finalize,
    open_text,
    to_float,
    to_int,
)
from gpupool.model.workload import GANG_ALL, GANG_NONE, KIND_BATCH, KIND_SERVICE, PodSet, Workload

FORMAT = "openb"
COLUMNS = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "gpu_spec", "qos", "pod_phase",
           "creation_time", "deletion_time", "scheduled_time")
REQUIRED = ("name", "cpu_milli", "memory_mib", "num_gpu", "creation_time", "deletion_time", "scheduled_time")
_PHASE = {"Failed": "FAILED", "Succeeded": "COMPLETED", "Running": "COMPLETED"}




def read_openb(path: str | Path, *, gpu_only: bool = True, keep_gpu_type: bool = False,
               limit: int | None = None) -> TraceWorkloads:
    """Read an OpenB pod list (see the module docstring for every conversion)."""
    path = str(path)
    result = TraceWorkloads(path=path, format=FORMAT)
    with open_text(path) as handle:
        what = (f"an OpenB pod list has {','.join(COLUMNS)} "
                "(the multigpu* variants have no times and cannot be replayed)")
        for line, row in csv_rows(handle, path, REQUIRED, what):
            workload = _pod(path, line, row, gpu_only, keep_gpu_type, result)
            if workload is not None:
                result.append(workload)
    return finalize(result, limit)


def _pod(path: str, line: int, row: dict[str, str], gpu_only: bool, keep_gpu_type: bool,
         result: TraceWorkloads) -> Workload | None:
    count = lambda v: to_int(v, "a whole number >= 0", minimum=0)  # noqa: E731
    seconds = lambda v: to_float(v, "seconds (a number)")  # noqa: E731
    gpus = cell(path, line, row, "num_gpu", count)
    if gpus == 0 and gpu_only:
        result.skip(line, "no GPUs (gpu_only)")
        return None
    phase = row.get("pod_phase", "")
    if phase == "Pending" or blank(row["scheduled_time"]):
        result.skip(line, "never scheduled (Pending)")
        return None
    if phase not in _PHASE:
        raise InputError(path, f"column 'pod_phase': expected one of Running, Succeeded, Failed, Pending, "
                         f"got {phase!r}", line=line)
    created = cell(path, line, row, "creation_time", seconds)
    scheduled = cell(path, line, row, "scheduled_time", seconds)
    deleted = cell(path, line, row, "deletion_time", seconds)
    if deleted < scheduled:
        raise InputError(path, f"column 'deletion_time': expected a time >= scheduled_time ({row['scheduled_time']}), "
                         f"got {row['deletion_time']!r}", line=line)
    labels = {}
    milli = 1000
    if gpus and not blank(row.get("gpu_milli")):
        milli = cell(path, line, row, "gpu_milli", lambda v: to_int(v, "a whole number 0..1000", minimum=0))
        if milli < 1000:
            labels["openb.gpu_milli"] = str(milli)
    spec = row.get("gpu_spec", "")
    if spec:
        labels["openb.gpu_spec"] = spec
    qos = row.get("qos", "")
    if qos:
        labels["openb.qos"] = qos
    service = qos == "LS"
    gpu_type = spec if keep_gpu_type and spec and "|" not in spec else None
    return Workload(
        id=0,
        name=row["name"],
        pod_sets=(PodSet(count=1, gpus=gpus, gpu_type=gpu_type,
                         cpu_m=cell(path, line, row, "cpu_milli", count),
                         memory_mib=cell(path, line, row, "memory_mib", count)),),
        submit_time=created,
        runtime=deleted - scheduled,
        outcome=_PHASE[phase],
        gang=GANG_NONE if service else GANG_ALL,
        kind=KIND_SERVICE if service else KIND_BATCH,
        labels=labels,
        source=f"{path}:{line}",
    )
