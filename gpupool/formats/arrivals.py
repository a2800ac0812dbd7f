"""Arrivals files: when each script or manifest of a workload folder is submitted, and how
long it really runs.

A script says what a job asks for, never when it was submitted or how long it actually ran;
a replay needs both. The arrivals file (``arrivals.csv`` in a workload folder) supplies them::

    # comment lines and blank lines are skipped
    source,submit_time,runtime,outcome,count,interval,checkpoint_interval,user
    pretrain-run.sbatch,0,10:30:00
    finetune.sbatch,1:00:00,5400,FAILED
    eval.sbatch,7200,900,,3,600

Columns are matched by the header's names: ``source``, ``submit_time`` and ``runtime`` are
required; ``outcome``, ``count``, ``interval``, ``checkpoint_interval`` and ``user`` are optional, and an
empty cell takes the default (trailing optional cells may be left out). Durations are seconds when bare numbers (unlike Slurm, where a
bare number is minutes) or Slurm durations (``10:30:00``, ``1-00:00:00``). ``submit_time`` may
instead be an ISO timestamp; then every row must use one, and times count from the earliest.
``count`` submits that many copies ``interval`` seconds apart. docs/formats/sbatch.md has more.
"""
from __future__ import annotations

import csv
import re
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path, PurePosixPath
from typing import Callable

from gpupool.errors import InputError
from gpupool.formats.sbatch import parse_gpupool_duration
from gpupool.formats.slurm_time import SlurmTimeError, parse_timestamp
from gpupool.model.workload import OUTCOMES

REQUIRED_COLUMNS = ("source", "submit_time", "runtime")
_USER_RE = re.compile(r"^[A-Za-z0-9._-]+$")
OPTIONAL_COLUMNS = ("outcome", "count", "interval", "checkpoint_interval", "user")
#: Builds the error for one column of the current row.
_Fail = Callable[[str, str], InputError]
_ISO_RE = re.compile(r"^\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?)?(Z|[+-]\d{2}:?\d{2})?$")


@dataclass(frozen=True)
class Arrival:
    """One row: submit ``source`` ``count`` times from ``submit_time``, ``interval`` apart."""

    source: str
    submit_time: float
    runtime: float
    #: None when the cell is empty (a workload folder then uses the script's ``#GPUPOOL
    #: outcome=``, else COMPLETED).
    outcome: str | None = None
    count: int = 1
    interval: float = 0.0
    #: None when empty (a folder then uses the script's ``#GPUPOOL checkpoint_interval=``).
    checkpoint_interval: float | None = None
    #: The wall-clock time when the row gave an ISO timestamp (None for offsets).
    timestamp: datetime | None = None
    file: str = ""
    line: int = 0
    #: Who submits it (sbatch scripts never say: the submitting user is whoever runs sbatch).
    user: str | None = None

    def submit_times(self) -> list[float]:
        """The submit time of each copy."""
        return [self.submit_time + k * self.interval for k in range(self.count)]

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"


def arrivals_epoch(arrivals: list[Arrival]) -> datetime | None:
    """The wall-clock instant of time 0 when the file used timestamps (else None)."""
    stamps = [a.timestamp for a in arrivals if a.timestamp is not None]
    return min(stamps) if stamps else None


def parse_arrivals(path: Path) -> list[Arrival]:
    """Read an arrivals CSV file; every error names the file, line and column."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(str(path), f"cannot read the arrivals file: {exc}") from None
    return parse_arrivals_text(text, str(path))


def parse_arrivals_text(text: str, source: str) -> list[Arrival]:
    """Parse arrivals CSV text (see the module docstring for the format)."""
    rows = _rows(text, source)
    if not rows:
        raise InputError(source, "empty arrivals file; expected a header "
                         f"'{','.join(REQUIRED_COLUMNS)}[,{'][,'.join(OPTIONAL_COLUMNS)}]' and one row per "
                         "submission", line=1)
    header_line, header = rows[0]
    columns = _columns(header, source, header_line)
    raw = [_parse_row(cells, columns, source, number) for number, cells in rows[1:]]
    return _resolve_timestamps(raw, source)


def _rows(text: str, source: str) -> list[tuple[int, list[str]]]:
    """(line number, cells) of every line that is neither blank nor a ``#`` comment."""
    out = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        try:
            cells = next(csv.reader([line], skipinitialspace=True))
        except csv.Error as exc:
            raise InputError(source, f"not a CSV row: {exc}", line=number) from None
        out.append((number, [c.strip() for c in cells]))
    return out


def _columns(header: list[str], source: str, line: int) -> dict[str, int]:
    """Column name -> index; every required column present, none unknown or repeated."""
    known = REQUIRED_COLUMNS + OPTIONAL_COLUMNS
    columns: dict[str, int] = {}
    for index, name in enumerate(header):
        if name not in known:
            raise InputError(source, f"unknown column {name!r}; expected the columns "
                             f"{', '.join(known)}", line=line, field=name)
        if name in columns:
            raise InputError(source, f"column {name!r} appears twice", line=line, field=name)
        columns[name] = index
    missing = [c for c in REQUIRED_COLUMNS if c not in columns]
    if missing:
        raise InputError(source, f"the header lacks the required column(s) {', '.join(missing)}; "
                         f"expected '{','.join(REQUIRED_COLUMNS)}' and optionally "
                         f"{', '.join(OPTIONAL_COLUMNS)}", line=line)
    return columns


def _parse_row(cells: list[str], columns: dict[str, int], source: str, line: int) -> Arrival:
    needed = max(columns[c] for c in REQUIRED_COLUMNS) + 1
    if not needed <= len(cells) <= len(columns):
        expected = f"{needed} to {len(columns)}" if needed < len(columns) else str(needed)
        raise InputError(source, f"expected {expected} cells as in the header "
                         f"({','.join(sorted(columns, key=columns.__getitem__))}), got {len(cells)}",
                         line=line)

    def cell(name: str) -> str:
        index = columns.get(name, len(cells))
        return cells[index] if index < len(cells) else ""

    def fail(name: str, message: str) -> InputError:
        return InputError(source, message, line=line, field=name)

    name = cell("source")
    _check_source(name, fail)
    submit, stamp = _submit_time(cell("submit_time"), fail)
    runtime = _duration(cell("runtime"), "runtime", fail, required=True)
    outcome = cell("outcome").upper() or None
    if outcome is not None and outcome not in OUTCOMES:
        raise fail("outcome", f"expected one of {', '.join(OUTCOMES)}, got {cell('outcome')!r}")
    count_text = cell("count") or "1"
    if not count_text.isdigit() or int(count_text) < 1:
        raise fail("count", f"expected a whole number of copies >= 1, got {count_text!r}")
    interval = _duration(cell("interval"), "interval", fail) or 0.0
    checkpoint = _duration(cell("checkpoint_interval"), "checkpoint_interval", fail)
    if checkpoint is not None and checkpoint <= 0:
        raise fail("checkpoint_interval", f"expected a positive duration, got {cell('checkpoint_interval')!r}")
    user = cell("user") or None
    if user is not None and not _USER_RE.match(user):
        raise fail("user", f"expected a user name (letters, digits, '.', '_', '-'), got {user!r}")
    return Arrival(name, submit, runtime, outcome, int(count_text), interval, checkpoint,  # type: ignore[arg-type]
                   stamp, source, line, user)


def _check_source(name: str, fail: _Fail) -> None:
    """A plain file name inside the folder: no directories, nothing outside it."""
    if not name:
        raise fail("source", "expected the file name of a script or manifest in the folder, got an empty cell")
    parts = PurePosixPath(name.replace("\\", "/")).parts
    if len(parts) != 1 or name.startswith("/") or name in (".", ".."):
        raise fail("source", f"expected a file name in the workload folder (no directories), got {name!r}")


def _submit_time(text: str, fail: _Fail) -> tuple[float, datetime | None]:
    if _ISO_RE.match(text):
        try:
            return 0.0, parse_timestamp(text)
        except SlurmTimeError as exc:
            raise fail("submit_time", str(exc)) from None
    value = _duration(text, "submit_time", fail, required=True)
    return value, None  # type: ignore[return-value]


def _duration(text: str, column: str, fail: _Fail, *, required: bool = False) -> float | None:
    if not text:
        if required:
            raise fail(column, f"the {column} cell is empty; expected seconds or a Slurm duration such as '10:30:00'")
        return None
    try:
        return parse_gpupool_duration(text)
    except ValueError as exc:
        raise fail(column, str(exc)) from None


def _resolve_timestamps(rows: list[Arrival], source: str) -> list[Arrival]:
    """Timestamps become seconds from the earliest; a file must not mix both forms."""
    if not rows:
        return rows
    stamped = [r.timestamp is not None for r in rows]
    if all(stamped):
        epoch = min(r.timestamp for r in rows)  # type: ignore[type-var]
        return [_with_submit(r, (r.timestamp - epoch).total_seconds()) for r in rows]  # type: ignore[operator]
    if any(stamped):
        first = rows[0].timestamp is not None
        odd = next(r for r in rows if (r.timestamp is not None) != first)
        kinds = ("a timestamp", "an offset") if first else ("an offset", "a timestamp")
        raise InputError(source, f"submit_time mixes timestamps and offsets: line {rows[0].line} gives "
                         f"{kinds[0]}, this line {kinds[1]}; use one form throughout",
                         line=odd.line, field="submit_time")
    return rows


def _with_submit(row: Arrival, submit: float) -> Arrival:
    return replace(row, submit_time=submit)
