"""Slurm's time formats, both ways.

Durations: ``minutes``, ``minutes:seconds``, ``hours:minutes:seconds``, ``days-hours``,
``days-hours:minutes``, ``days-hours:minutes:seconds``; ``UNLIMITED``/``INFINITE`` mean no
limit (None). Output uses Slurm's ``[D-]HH:MM:SS``. Timestamps are ISO ``YYYY-MM-DDTHH:MM:SS``.
"""
from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone

_UNLIMITED = {"UNLIMITED", "INFINITE", "INFINITY"}
_DAYS_RE = re.compile(r"^(\d+)-(\d+)(?::(\d+))?(?::(\d+))?$")
_CLOCK_RE = re.compile(r"^(\d+)(?::(\d+))?(?::(\d+))?$")


class SlurmTimeError(ValueError):
    """Text that is not a Slurm duration or timestamp; the message shows accepted forms."""


def parse_duration(text: str | int) -> int | None:
    """Slurm duration text -> seconds (None for UNLIMITED/INFINITE)."""
    s = str(text).strip()
    if s.upper() in _UNLIMITED:
        return None
    m = _DAYS_RE.match(s)
    if m:
        days, hours = int(m.group(1)), int(m.group(2))
        minutes = int(m.group(3) or 0)
        seconds = int(m.group(4) or 0)
        return ((days * 24 + hours) * 60 + minutes) * 60 + seconds
    m = _CLOCK_RE.match(s)
    if m:
        parts = [int(p) for p in m.groups() if p is not None]
        if len(parts) == 1:
            return parts[0] * 60
        if len(parts) == 2:
            return parts[0] * 60 + parts[1]
        return (parts[0] * 60 + parts[1]) * 60 + parts[2]
    raise SlurmTimeError(
        f"expected a Slurm time such as '30', '12:00:00', '2-00:00:00', '7-0' or 'UNLIMITED', got {text!r}"
    )


def format_duration(seconds: float | None) -> str:
    """Seconds -> Slurm's ``[D-]HH:MM:SS`` (``UNLIMITED`` for None)."""
    if seconds is None:
        return "UNLIMITED"
    total = int(round(seconds))
    sign = "-" if total < 0 else ""
    total = abs(total)
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    clock = f"{hours:02d}:{minutes:02d}:{secs:02d}"
    return f"{sign}{days}-{clock}" if days else f"{sign}{clock}"


def parse_timestamp(text: str) -> datetime:
    """ISO timestamp as Slurm prints and accepts it (naive times are taken as UTC)."""
    s = str(text).strip()
    try:
        value = datetime.fromisoformat(s.replace("Z", "+00:00"))
    except ValueError as exc:
        raise SlurmTimeError(f"expected a timestamp such as '2026-11-30T09:00:00', got {text!r}") from exc
    return value if value.tzinfo else value.replace(tzinfo=timezone.utc)


def format_timestamp(epoch: datetime, offset_seconds: float) -> str:
    """Engine time (seconds from ``epoch``) -> Slurm's ``YYYY-MM-DDTHH:MM:SS``."""
    return (epoch + timedelta(seconds=offset_seconds)).strftime("%Y-%m-%dT%H:%M:%S")
