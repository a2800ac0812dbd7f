"""Standard Workload Format (Parallel Workloads Archive, v2.2).

SWF logs come from CPU clusters: 18 whitespace-separated numbers per job, ``-1`` = unknown,
and ``;`` header comments (``MaxProcs``, ``MaxNodes``, ``UnixStartTime``, queue/partition
names). gpupool replays them as GPU jobs so that HPC schedules with real user time estimates
(field 9) can exercise backfill.

Processors → GPUs: ``gpus = ceil(processors / procs_per_gpu)``. The default
``procs_per_gpu=1`` makes one processor one GPU, which keeps the log's *relative* sizes and
the load it offered its machine: replayed on a pool with ``MaxProcs`` GPUs, it is the same
schedule problem the log recorded. Use a larger value to shrink a log onto a smaller pool
(``procs_per_gpu=8`` maps a 128-processor job to 16 GPUs). Jobs larger than
``gpus_per_node`` (default 8) become one pod per node (``one_per_node``, gang "all").

Fields used: 1 job number → name, 2 submit → submit_time, 4 run time → runtime,
5 allocated processors (else 8 requested) → GPUs, 9 requested time → time_limit,
10 requested memory (KB per processor, else 7 used memory) → memory per pod, 11 status →
outcome (1 → COMPLETED, 0 and 4 → FAILED, 5 → CANCELLED, 3 → COMPLETED, -1 → COMPLETED with a
note, 2 = a partial-execution record → skipped), 12 user → ``user<id>``, 13 group →
account ``group<id>``, 15/16 queue/partition numbers → labels ``swf.queue``/``swf.partition``
(the pool's own partitions apply; a log's queue numbers name nothing in it).
Dropped: 3 wait time (the replay computes it), 6 CPU time used, 14 executable, 17 preceding job
and 18 think time (no dependencies are modelled for SWF).
Skipped (counted): run time unknown, no processor count, partial-execution records.
"""
from __future__ import annotations

import math
import re
from pathlib import Path

from gpupool.errors import InputError
from gpupool.formats.traces._common import (
    DEFAULT_GPUS_PER_NODE,
    TraceWorkloads,
    finalize,
    open_text,
    split_gpus,
)
from gpupool.model.workload import GANG_ALL, PodSet, Workload

FORMAT = "swf"
SUFFIXES = (".swf",)
FIELDS = (
    "job number", "submit time", "wait time", "run time", "allocated processors",
    "average CPU time used", "used memory", "requested processors", "requested time",
    "requested memory", "status", "user id", "group id", "executable number", "queue number",
    "partition number", "preceding job number", "think time",
)
_STATUS = {1: "COMPLETED", 0: "FAILED", 5: "CANCELLED", 3: "COMPLETED", 4: "FAILED"}
_HEADER_RE = re.compile(r"^;\s*([A-Za-z]+)\s*:(?!//)\s*(.*?)\s*$")
#: Header keys kept as ints in ``meta`` (the rest are kept as text).
_INT_KEYS = ("MaxJobs", "MaxRecords", "MaxNodes", "MaxProcs", "UnixStartTime", "TimeZone",
             "MaxQueues", "MaxPartitions")


def _header(meta: dict, text: str) -> None:
    match = _HEADER_RE.match(text)
    if not match:
        return
    key, value = match.group(1), match.group(2)
    if key in _INT_KEYS:
        try:
            meta[key] = int(value)
            return
        except ValueError:
            pass
    if key in ("Queue", "Partition"):
        meta.setdefault(key + "s", []).append(value)
    else:
        meta[key] = value


def _numbers(path: str, line: int, text: str) -> list[float]:
    parts = text.split()
    if len(parts) != 18:
        raise InputError(path, f"expected 18 whitespace-separated fields, got {len(parts)}", line=line)
    out = []
    for index, part in enumerate(parts):
        try:
            out.append(float(part))
        except ValueError:
            raise InputError(path, f"field {index + 1} ({FIELDS[index]}): expected a number, got {part!r}",
                             line=line) from None
    return out


def read_swf(path: str | Path, *, procs_per_gpu: int = 1, gpus_per_node: int = DEFAULT_GPUS_PER_NODE,
             limit: int | None = None) -> TraceWorkloads:
    """Read an SWF log as GPU workloads (see the module docstring for every conversion)."""
    path = str(path)
    if procs_per_gpu < 1 or gpus_per_node < 1:
        raise InputError(path, "procs_per_gpu and gpus_per_node must be >= 1")
    result = TraceWorkloads(path=path, format=FORMAT)
    result.meta["procs_per_gpu"] = procs_per_gpu
    unknown_status = 0
    with open_text(path) as handle:
        for line, text in enumerate(handle, start=1):
            stripped = text.strip()
            if not stripped:
                continue
            if stripped.startswith(";"):
                _header(result.meta, stripped)
                continue
            f = _numbers(path, line, stripped)
            status = int(f[10])
            if status == 2:
                result.skip(line, "partial-execution record (status 2)")
                continue
            if f[3] < 0:
                result.skip(line, "run time unknown (-1)")
                continue
            procs = f[4] if f[4] > 0 else f[7]
            if procs <= 0:
                result.skip(line, "processor count unknown (-1)")
                continue
            if status not in _STATUS:
                unknown_status += 1
            result.append(_workload(path, line, f, procs, status, procs_per_gpu, gpus_per_node))
    if unknown_status:
        result.notes.append(f"{unknown_status} jobs had an unknown status (-1 or other): read as COMPLETED.")
    return finalize(result, limit)


def _workload(path: str, line: int, f: list[float], procs: float, status: int,
              procs_per_gpu: int, gpus_per_node: int) -> Workload:
    gpus = max(1, math.ceil(procs / procs_per_gpu))
    pods, per_pod = split_gpus(gpus, gpus_per_node)
    procs_per_pod = procs / pods
    mem_kb = f[9] if f[9] > 0 else f[6]
    memory = math.ceil(mem_kb * procs_per_pod / 1024) if mem_kb > 0 else 0
    labels = {}
    if f[14] >= 0:
        labels["swf.queue"] = str(int(f[14]))
    if f[15] >= 0:
        labels["swf.partition"] = str(int(f[15]))
    return Workload(
        id=0,
        name=f"swf-{int(f[0])}",
        pod_sets=(PodSet(count=pods, gpus=per_pod, cpu_m=math.ceil(procs_per_pod) * 1000,
                         memory_mib=memory, one_per_node=pods > 1),),
        submit_time=f[1],
        runtime=f[3],
        time_limit=f[8] if f[8] > 0 else None,
        outcome=_STATUS.get(status, "COMPLETED"),
        gang=GANG_ALL,
        user=f"user{int(f[11])}" if f[11] >= 0 else None,
        account=f"group{int(f[12])}" if f[12] >= 0 else None,
        labels=labels,
        source=f"{path}:{line}",
    )


def looks_like_swf(first_line: str) -> bool:
    """Content sniffing for suffix-less logs: a ``;`` header or 18 numeric fields."""
    text = first_line.strip()
    if text.startswith(";"):
        return True
    parts = text.split()
    return len(parts) == 18 and all(re.fullmatch(r"-?\d+(\.\d+)?", p) for p in parts)
