"""Helpers every trace reader shares: value parsing with located errors, GPU layout, and the
final normalisation (submit order, ids 1..n, first submit at 0.0).

Skipped rows are never dropped silently: every reader returns a :class:`TraceWorkloads`, a
plain ``list`` of workloads that also carries ``skipped`` (one :class:`SkippedRow` per row the
reader could not turn into a workload, with the reason) and ``notes`` (assumptions applied to
many rows, such as "status -1 read as COMPLETED"). Callers that only want the list can ignore
both; the CLI prints :meth:`TraceWorkloads.summary`.
"""
from __future__ import annotations

import csv

import gzip
import io
import math
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any, Iterable

from gpupool.errors import InputError
from gpupool.model.workload import Workload

#: Default GPUs of one node when a trace gives only a job's total GPU count: jobs larger than
#: this become one pod per node (``one_per_node=True``), as on 8-GPU servers (DGX/HGX, Philly's
#: and Helios' large nodes).
DEFAULT_GPUS_PER_NODE = 8


@dataclass(frozen=True, slots=True)
class SkippedRow:
    """A row that did not become a workload, and why (shown to the user, never hidden)."""

    line: int
    reason: str


class TraceWorkloads(list):
    """The workloads a reader produced, plus what it skipped and assumed.

    A ``list[Workload]`` so callers can use it as one; ``skipped`` lists rows left out with the
    reason, ``notes`` lists conversions applied to many rows, ``meta`` holds header values
    (SWF ``MaxProcs`` …) and ``path``/``format`` say where it came from.
    """

    def __init__(self, items: Iterable[Workload] = (), *, path: str = "", format: str = "") -> None:
        super().__init__(items)
        self.path = path
        self.format = format
        self.skipped: list[SkippedRow] = []
        self.notes: list[str] = []
        self.meta: dict[str, Any] = {}

    def skip(self, line: int, reason: str) -> None:
        self.skipped.append(SkippedRow(line, reason))

    def skipped_by_reason(self) -> dict[str, int]:
        """How many rows were skipped for each reason (reasons sorted by count, then name)."""
        counts = Counter(s.reason for s in self.skipped)
        return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))

    def summary(self) -> str:
        """One line for people: what was read, what was skipped and why."""
        text = f"{self.path}: {len(self)} workloads ({self.format})"
        if self.skipped:
            reasons = "; ".join(f"{n} {r}" for r, n in self.skipped_by_reason().items())
            text += f", {len(self.skipped)} rows skipped: {reasons}"
        if self.notes:
            text += ". " + " ".join(self.notes)
        return text


def open_text(path: str | Path) -> IO[str]:
    """Open a text trace, transparently un-gzipping ``*.gz`` (traces are usually shipped gzipped)."""
    p = Path(path)
    if not p.exists():
        raise InputError(str(path), "no such file")
    if p.suffix == ".gz":
        return io.TextIOWrapper(gzip.open(p, "rb"), encoding="utf-8", newline="")
    return open(p, encoding="utf-8", newline="")


def base_suffix(path: str | Path) -> str:
    """The suffix that names the format, ignoring a trailing ``.gz`` (``a.csv.gz`` → ``.csv``)."""
    p = Path(path)
    if p.suffix == ".gz":
        p = p.with_suffix("")
    return p.suffix.lower()


def blank(value: Any) -> bool:
    """Missing in any carrier: absent, JSON null, empty CSV cell, NaN, or a 'None'/'NaN' string."""
    if value is None:
        return True
    if isinstance(value, float):
        return math.isnan(value)
    if isinstance(value, str):
        return value.strip() in ("", "None", "null", "NaN", "nan", "NA")
    return False


class ValueProblem(ValueError):
    """A value that is not what its column expects; the reader adds file, line and column."""


def to_float(value: Any, what: str, *, minimum: float | None = None) -> float:
    """A finite number (``what`` says which, e.g. "seconds"), optionally ≥ ``minimum``."""
    if isinstance(value, bool):
        raise ValueProblem(f"expected {what}, got {value!r}")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueProblem(f"expected {what}, got {value!r}") from None
    if not math.isfinite(number) or (minimum is not None and number < minimum):
        raise ValueProblem(f"expected {what}, got {value!r}")
    return number


def to_int(value: Any, what: str, *, minimum: int | None = None) -> int:
    """A whole number; integral floats (``8.0`` from pandas-written files) are accepted."""
    if isinstance(value, bool):
        raise ValueProblem(f"expected {what}, got {value!r}")
    if isinstance(value, int):
        number = value
    else:
        try:
            as_float = float(value)
        except (TypeError, ValueError):
            raise ValueProblem(f"expected {what}, got {value!r}") from None
        if not math.isfinite(as_float) or as_float != int(as_float):
            raise ValueProblem(f"expected {what}, got {value!r}")
        number = int(as_float)
    if minimum is not None and number < minimum:
        raise ValueProblem(f"expected {what}, got {value!r}")
    return number


_TIME_FORMATS = ("%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M:%S.%f", "%m/%d/%Y %I:%M:%S %p")


def to_timestamp(value: Any, what: str = "a timestamp") -> float:
    """Seconds since the epoch from a number or a ``YYYY-MM-DD HH:MM:SS`` text (taken as UTC:
    only differences matter once the reader shifts the first submit to 0)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return to_float(value, what)
    text = str(value).strip()
    try:
        return float(text)
    except ValueError:
        pass
    for fmt in _TIME_FORMATS:
        try:
            return datetime.strptime(text, fmt).replace(tzinfo=timezone.utc).timestamp()
        except ValueError:
            continue
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        raise ValueProblem(f"expected {what} (seconds or 'YYYY-MM-DD HH:MM:SS'), got {value!r}") from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=timezone.utc)
    return parsed.timestamp()


def split_gpus(total: int, gpus_per_node: int = DEFAULT_GPUS_PER_NODE) -> tuple[int, int]:
    """(pods, GPUs per pod) for a job that asks for ``total`` GPUs but not for a layout.

    Up to one node's worth runs as one pod; beyond that one pod per node, each with
    ``ceil(total / pods)`` GPUs, because a PodSet's pods are identical. Totals that do not
    divide evenly round *up* (20 GPUs on 8-GPU nodes → 3 pods × 7 = 21): a job is never given
    fewer GPUs than it asked for.
    """
    if total <= gpus_per_node:
        return 1, total
    pods = math.ceil(total / gpus_per_node)
    return pods, math.ceil(total / pods)


def finalize(result: TraceWorkloads, limit: int | None = None) -> TraceWorkloads:
    """Sort by submit time (ties keep file order), keep the first ``limit``, shift the first
    submit to 0.0 and number the workloads 1..n — the contract of every reader."""
    if limit is not None and limit < 0:
        raise InputError(result.path, f"limit must be >= 0, got {limit}")
    ordered = sorted(result, key=lambda w: w.submit_time)
    if limit is not None:
        ordered = ordered[:limit]
    origin = ordered[0].submit_time if ordered else 0.0
    for number, workload in enumerate(ordered, start=1):
        workload.id = number
        workload.submit_time = workload.submit_time - origin
        if not workload.name:
            workload.name = f"job-{number}"
    result[:] = ordered
    if ordered:
        result.meta.setdefault("time_origin", origin)
    return result


def located(path: str | Path, line: int | None, column: str, problem: Exception) -> InputError:
    """An InputError for one bad value: file, row/line, the column and what was expected."""
    return InputError(str(path), f"column '{column}': {problem}", line=line)


def cell(path: str, line: int, row: dict[str, str], column: str, parse, default=None):
    """Parse one CSV cell with ``parse``; a blank cell gives ``default``; a bad value is an
    InputError naming file, line and column."""
    value = row.get(column)
    if blank(value):
        return default
    try:
        return parse(value)
    except ValueProblem as problem:
        raise located(path, line, column, problem) from None


def csv_rows(handle: IO[str], path: str, required: tuple[str, ...], what: str):
    """Yield ``(line, row)`` of a headed CSV with stripped keys and values, after checking that
    the header has every ``required`` column (``what`` tells the user what a good file has)."""
    reader = csv.DictReader(handle)
    names = [n.strip() for n in reader.fieldnames or []]
    missing = [c for c in required if c not in names]
    if missing:
        raise InputError(path, f"missing column(s) {', '.join(missing)}; {what}", line=1)
    for row in reader:
        yield reader.line_num, {k.strip(): (v or "").strip() for k, v in row.items() if k is not None}
