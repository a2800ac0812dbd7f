"""Workloads from job traces: gpupool's native format and five public GPU/HPC trace formats.

Every reader returns a :class:`TraceWorkloads` (a ``list[Workload]``) with ids 1..n in submit
order, the first submit at 0.0 and ``source`` = ``file:line``; rows it could not use are in
``.skipped`` with the reason, never dropped silently. Conversions per format:
``docs/formats/traces.md``.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from gpupool.errors import InputError
from gpupool.formats.traces._common import SkippedRow, TraceWorkloads, base_suffix, open_text
from gpupool.formats.traces.helios import read_helios
from gpupool.formats.traces.native import read_native, write_native
from gpupool.formats.traces.openb import read_openb
from gpupool.formats.traces.pai import looks_like_pai, read_pai
from gpupool.formats.traces.philly import read_philly
from gpupool.formats.traces.swf import looks_like_swf, read_swf

__all__ = ["TRACE_FORMATS", "TraceFormat", "TraceWorkloads", "SkippedRow", "detect_format", "read_trace",
           "read_native", "write_native", "read_swf", "read_philly", "read_pai", "read_helios", "read_openb"]


@dataclass(frozen=True)
class TraceFormat:
    """A trace format: its reader (``reader(path, limit=…)``) and a one-line description."""

    name: str
    reader: Callable[..., TraceWorkloads]
    description: str


TRACE_FORMATS: dict[str, TraceFormat] = {
    f.name: f
    for f in (
        TraceFormat("native", read_native, "gpupool's own rows (.jsonl, .ndjson, .csv, .parquet)"),
        TraceFormat("swf", read_swf, "Standard Workload Format v2.2 (Parallel Workloads Archive, .swf)"),
        TraceFormat("philly", read_philly, "Microsoft Philly cluster_job_log JSON or duration_s,num_gpus CSV"),
        TraceFormat("pai", read_pai, "Alibaba PAI 2020 pai_task_table (headerless CSV)"),
        TraceFormat("helios", read_helios, "SenseTime Helios cluster_log.csv"),
        TraceFormat("openb", read_openb, "Alibaba OpenB 2023 pod list CSV"),
    )
}


def _known() -> str:
    return ", ".join(TRACE_FORMATS)


def _csv_format(path: str, header: str) -> str | None:
    cells = {c.strip() for c in header.strip().split(",")}
    if {"submit_time", "runtime", "gpus_per_pod"} <= cells:
        return "native"
    if {"job_id", "gpu_num", "vc"} <= cells:
        return "helios"
    if {"num_gpu", "cpu_milli"} <= cells:
        return "openb"
    if {"duration_s", "num_gpus"} <= cells or cells == {"runtime"}:
        return "philly"
    if looks_like_pai(path, header):
        return "pai"
    return None


def detect_format(path: str | Path) -> str:
    """The format of a trace file, from its suffix and, where that is ambiguous, its first line."""
    path = str(path)
    suffix = base_suffix(path)
    if suffix == ".swf":
        return "swf"
    if suffix in (".jsonl", ".ndjson", ".parquet", ".pq"):
        return "native"
    with open_text(path) as handle:
        head = handle.read(65536)
    first = next((line for line in head.splitlines() if line.strip()), "")
    if first.lstrip().startswith("[") or Path(path).name.startswith("cluster_job_log"):
        return "philly"
    if looks_like_swf(first):
        return "swf"
    found = _csv_format(path, first)
    if found:
        return found
    raise InputError(path, f"cannot tell the trace format from the name or the first line; "
                     f"give the format, one of: {_known()}")


def read_trace(path: str | Path, fmt: str | None = None, *, limit: int | None = None) -> TraceWorkloads:
    """Read any known trace: ``fmt`` names the format, or it is detected from suffix and content.

    ``limit`` keeps the first ``limit`` workloads in submit order (ids and the time origin are
    those of the kept ones).
    """
    path = str(path)
    if not Path(path).exists():
        raise InputError(path, "no such file")
    name = fmt.strip().lower() if fmt else detect_format(path)
    if name not in TRACE_FORMATS:
        raise InputError(path, f"unknown trace format '{fmt}'; known formats: {_known()}")
    return TRACE_FORMATS[name].reader(path, limit=limit)
