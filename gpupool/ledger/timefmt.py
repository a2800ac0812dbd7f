"""Times at the ledger's edges: Slurm's input forms and output formats (all UTC).

sacct and sreport accept ``YYYY-MM-DD[THH:MM[:SS]]``, ``MMDD[YY]``, ``MM/DD[/YY]``,
``HH:MM[:SS]`` (today), ``now[{+|-}N[seconds|minutes|hours|days|weeks]]``, ``today``,
``midnight``, ``noon``, ``teatime``; gpupool also takes a number of seconds since the Unix
epoch and RFC 3339 (``…Z`` / ``…+02:00``). Output is Slurm's ``YYYY-MM-DDTHH:MM:SS``
(``Unknown`` when not set). Slurm prints local time; the ledger stores and prints UTC, so an
imported timestamp prints back exactly as it was read.
"""
from __future__ import annotations

import re
import time
from datetime import datetime, timedelta, timezone
from functools import lru_cache

from gpupool.errors import GpupoolError

UTC = timezone.utc
_UNITS = {"": 1, "s": 1, "sec": 1, "second": 1, "seconds": 1, "m": 60, "min": 60, "minute": 60, "minutes": 60,
          "h": 3600, "hour": 3600, "hours": 3600, "d": 86400, "day": 86400, "days": 86400,
          "w": 604800, "week": 604800, "weeks": 604800}
_NOW_RE = re.compile(r"^now(?:([+-])(\d+)([a-z]*))?$")


class TimeSpecError(GpupoolError):
    pass


def parse_time(text: str | float | int, *, now: float | None = None) -> float:
    """A Slurm time specification → seconds since the epoch (UTC)."""
    if isinstance(text, (int, float)):
        return float(text)
    s = str(text).strip()
    now = time.time() if now is None else now
    low = s.lower()
    m = _NOW_RE.match(low)
    if m:
        if not m.group(1):
            return now
        unit = _UNITS.get(m.group(3))
        if unit is None:
            raise TimeSpecError(f"unknown unit {m.group(3)!r} in {text!r}; use seconds, minutes, hours, days or weeks")
        delta = int(m.group(2)) * unit
        return now + delta if m.group(1) == "+" else now - delta
    today = datetime.fromtimestamp(now, UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    special = {"today": 0, "midnight": 0, "noon": 12, "teatime": 16}
    if low in special:
        return (today + timedelta(hours=special[low])).timestamp()
    if re.fullmatch(r"-?\d+(\.\d+)?", s) and len(s) not in (4, 6):
        return float(s)
    m = re.fullmatch(r"(\d{2})(\d{2})(\d{2})?", s)
    if m:
        year = 2000 + int(m.group(3)) if m.group(3) else today.year
        return datetime(year, int(m.group(1)), int(m.group(2)), tzinfo=UTC).timestamp()
    m = re.fullmatch(r"(\d{1,2})/(\d{1,2})(?:/(\d{2}))?", s)
    if m:
        year = 2000 + int(m.group(3)) if m.group(3) else today.year
        return datetime(year, int(m.group(1)), int(m.group(2)), tzinfo=UTC).timestamp()
    m = re.fullmatch(r"(\d{1,2}):(\d{2})(?::(\d{2}))?", s)
    if m:
        return (today + timedelta(hours=int(m.group(1)), minutes=int(m.group(2)),
                                  seconds=int(m.group(3) or 0))).timestamp()
    try:
        value = datetime.fromisoformat(s.replace("Z", "+00:00"))
    except ValueError:
        raise TimeSpecError(
            f"expected a time such as 2026-11-30, 2026-11-30T09:00:00, now-7days, 1130, 09:00 or "
            f"seconds since the epoch, got {text!r}") from None
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.timestamp()


#: ``YYYY-MM-DDTHH:MM`` -> epoch seconds of that minute, for the sacct timestamps seen so
#: far (a day's export repeats each minute many times; cleared when it grows large)
_MINUTES: dict[str, float] = {}


def parse_slurm_ts(text: str) -> float | None:
    """A timestamp as sacct prints it; ``Unknown``/``None``/empty → None."""
    if text and len(text) == 19:  # the common case, YYYY-MM-DDTHH:MM:SS: its minute memoised
        base = _MINUTES.get(text[:16])
        sec = text[17:]
        if base is not None and text[16] == ":" and sec.isascii() and sec.isdigit() and sec < "60":
            return base + float(int(sec))
    s = (text or "").strip()
    if not s or s in ("Unknown", "None", "N/A", "(null)"):
        return None
    if len(s) == 19 and s[10] == "T" and s[4] == "-" and s[13] == ":" and s[16] == ":":
        # sacct's own YYYY-MM-DDTHH:MM:SS: what parse_time would end in, without its other
        # forms' checks (a large import parses millions of these): the date's midnight,
        # memoised per day, plus the clock time
        day = _midnight(s[:10])
        clock = s[11:19]
        if day is not None and clock.isascii() and clock[:2].isdigit() and clock[3:5].isdigit() and clock[6:].isdigit():
            h, m, sec = int(clock[:2]), int(clock[3:5]), int(clock[6:])
            if h < 24 and m < 60 and sec < 60:
                if s is text:
                    if len(_MINUTES) > 200_000:
                        _MINUTES.clear()
                    _MINUTES[s[:16]] = day + float(h * 3600 + m * 60)
                return day + float(h * 3600 + m * 60 + sec)
    return parse_time(s)


@lru_cache(maxsize=8192)
def _midnight(date: str) -> float | None:
    """``YYYY-MM-DD`` -> its 00:00 UTC in epoch seconds; None if not such a date."""
    if not (date.isascii() and date[:4].isdigit() and date[4] == "-" and date[7] == "-"):
        return None
    try:
        return datetime.fromisoformat(date).replace(tzinfo=UTC).timestamp()
    except ValueError:
        return None


def format_ts(t: float | None) -> str:
    if t is None:
        return "Unknown"
    return datetime.fromtimestamp(round(t), UTC).strftime("%Y-%m-%dT%H:%M:%S")


def format_rfc3339(t: float | None) -> str | None:
    if t is None:
        return None
    return datetime.fromtimestamp(round(t), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
