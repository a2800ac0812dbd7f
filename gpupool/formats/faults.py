"""Faults and node operations for a run: a CSV of ``time,node,event[,reason]``.

``time`` is seconds from the start of the run or a Slurm duration (``1-00:00:00``); ``node`` a
node name or a Slurm hostlist (``gpu[01-02]``); ``event`` one of down, up, drain, resume.
Lines starting with ``#`` are comments.
"""
from __future__ import annotations

import csv
from pathlib import Path

from gpupool.engine.core import NODE_EVENTS, NodeEvent
from gpupool.errors import InputError
from gpupool.formats.hostlist import expand_hostlist
from gpupool.formats.slurm_time import SlurmTimeError, parse_duration

HEADER = ["time", "node", "event"]


def _time(text: str) -> float:
    text = text.strip()
    try:
        return float(text)
    except ValueError:
        seconds = parse_duration(text)
        if seconds is None:
            raise SlurmTimeError("a fault time cannot be UNLIMITED") from None
        return float(seconds)


def parse_faults(path: str | Path, node_names: set[str] | None = None) -> list[NodeEvent]:
    """Read a faults file; unknown nodes (when ``node_names`` is given) and events are errors."""
    path = Path(path)
    source = str(path)
    try:
        lines = path.read_text().splitlines()
    except OSError as exc:
        raise InputError(source, f"cannot read faults file: {exc.strerror}") from None
    rows = [(n, line) for n, line in enumerate(lines, start=1) if line.strip() and not line.lstrip().startswith("#")]
    if not rows:
        return []
    header_line, header = rows[0]
    columns = [c.strip() for c in next(csv.reader([header]))]
    if columns[:3] != HEADER or len(columns) > 4 or (len(columns) == 4 and columns[3] != "reason"):
        raise InputError(source, f"expected the header 'time,node,event[,reason]', got {header!r}", line=header_line)
    out: list[NodeEvent] = []
    for number, line in rows[1:]:
        cells = [c.strip() for c in next(csv.reader([line]))]
        if len(cells) < 3 or len(cells) > len(columns):
            raise InputError(source, f"expected {len(columns)} columns ({','.join(columns)}), got {len(cells)}", line=number)
        try:
            when = _time(cells[0])
        except (ValueError, SlurmTimeError):
            raise InputError(source, f"column 'time': expected seconds or a Slurm duration, got {cells[0]!r}", line=number) from None
        event = cells[2].lower()
        if event not in NODE_EVENTS:
            raise InputError(source, f"column 'event': expected one of {', '.join(NODE_EVENTS)}, got {cells[2]!r}", line=number)
        try:
            names = expand_hostlist(cells[1])
        except ValueError as exc:
            raise InputError(source, f"column 'node': {exc}", line=number) from None
        reason = cells[3] if len(cells) > 3 else ""
        for name in names:
            if node_names is not None and name not in node_names:
                raise InputError(source, f"column 'node': the pool has no node {name!r}", line=number)
            out.append(NodeEvent(when, name, event, reason))
    return out
