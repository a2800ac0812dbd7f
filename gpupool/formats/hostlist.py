"""Slurm hostlists: ``gpu[01-04]``, ``n[1-3,7]``, ``r[1-2]n[1-3]``, ``a,b[1-2]``.

Every Slurm file names nodes this way, so one small module expands and compresses them.
Expansion keeps the written order (bracket groups multiply out left to right, the last group
varying fastest) and the zero padding of each range's lower bound. Compression keeps the
given order too, so ``expand_hostlist(compress_hostlist(names)) == names`` for any list of
valid names; that is what lets renderers write compact files that load back identically.

Errors are ``HostlistError`` (a ``ValueError``) without a file position; callers add
``file:line`` because only they know it.
"""
from __future__ import annotations

import re
from itertools import product

__all__ = ["HostlistError", "expand_hostlist", "compress_hostlist"]

#: A generous cap so a typo such as ``n[1-99999999]`` fails fast instead of eating memory.
MAX_HOSTS = 1_000_000

_RANGE_RE = re.compile(r"^(\d+)(?:-(\d+))?$")
_NAME_RE = re.compile(r"^[^\s\[\],]+$")
_LAST_NUMBER_RE = re.compile(r"^(.*?)(\d+)(\D*)$")


class HostlistError(ValueError):
    """A hostlist or host name that is not valid; the message quotes it and says what was expected."""


def _split_top_level(text: str) -> list[str]:
    """Split at commas outside brackets, checking that brackets balance and do not nest."""
    items: list[str] = []
    depth = 0
    start = 0
    for pos, char in enumerate(text):
        if char == "[":
            if depth:
                raise HostlistError(f"hostlist {text!r}: brackets cannot nest (at position {pos + 1})")
            depth = 1
        elif char == "]":
            if not depth:
                raise HostlistError(f"hostlist {text!r}: ']' without a matching '[' (at position {pos + 1})")
            depth = 0
        elif char == "," and not depth:
            items.append(text[start:pos])
            start = pos + 1
    if depth:
        raise HostlistError(f"hostlist {text!r}: '[' is never closed")
    items.append(text[start:])
    return items


def _expand_brackets(body: str, whole: str) -> list[str]:
    """``01-03,7`` -> ``['01', '02', '03', '7']``; each range is padded to its lower bound's width."""
    out: list[str] = []
    for part in body.split(","):
        m = _RANGE_RE.match(part.strip())
        if not m:
            raise HostlistError(
                f"hostlist {whole!r}: expected numbers or ranges such as '1-4' or '01-04' inside brackets, "
                f"got {part!r}"
            )
        lo_text, hi_text = m.group(1), m.group(2)
        lo = int(lo_text)
        hi = int(hi_text) if hi_text is not None else lo
        if hi < lo:
            raise HostlistError(f"hostlist {whole!r}: range {part!r} ends before it starts")
        if hi - lo + 1 > MAX_HOSTS:
            raise HostlistError(f"hostlist {whole!r}: range {part!r} names more than {MAX_HOSTS} hosts")
        width = len(lo_text)
        out.extend(str(n).zfill(width) for n in range(lo, hi + 1))
    return out


def _expand_item(item: str, whole: str) -> list[str]:
    """Expand one comma-free item such as ``r[1-2]n[01-03]-ib`` into host names."""
    pieces: list[list[str]] = []
    pos = 0
    while pos < len(item):
        open_at = item.find("[", pos)
        if open_at < 0:
            pieces.append([item[pos:]])
            break
        if open_at > pos:
            pieces.append([item[pos:open_at]])
        close_at = item.index("]", open_at)  # balanced: checked by _split_top_level
        pieces.append(_expand_brackets(item[open_at + 1 : close_at], whole))
        pos = close_at + 1
    total = 1
    for piece in pieces:
        total *= len(piece)
    if total > MAX_HOSTS:
        raise HostlistError(f"hostlist {whole!r} names more than {MAX_HOSTS} hosts")
    return ["".join(parts) for parts in product(*pieces)]


def expand_hostlist(text: str) -> list[str]:
    """Expand a Slurm hostlist into host names, in written order (duplicates kept).

    ``gpu[01-04]`` -> gpu01…gpu04; ``n[1-3,7]``; ``r[1-2]n[1-3]`` -> r1n1, r1n2, r1n3, r2n1, …;
    ``a,b[1-2]`` -> a, b1, b2. Whitespace around commas is allowed (Slurm treats it as a comma).
    """
    if not isinstance(text, str):
        raise HostlistError(f"expected a hostlist string, got {text!r}")
    stripped = text.strip()
    if not stripped:
        raise HostlistError("expected a hostlist such as 'gpu[01-04]', got an empty string")
    # Slurm turns whitespace in a node list into commas.
    normalised = re.sub(r"\s*,\s*|\s+", ",", stripped)
    names: list[str] = []
    for item in _split_top_level(normalised):
        if not item:
            raise HostlistError(f"hostlist {text!r} has an empty entry (two commas in a row, or a trailing comma)")
        names.extend(_expand_item(item, text))
        if len(names) > MAX_HOSTS:
            raise HostlistError(f"hostlist {text!r} names more than {MAX_HOSTS} hosts")
    return names


def _format_range(lo: int, hi: int, width: int) -> str:
    first = str(lo).zfill(width)
    return first if lo == hi else f"{first}-{str(hi).zfill(width)}"


def compress_hostlist(names: list[str] | tuple[str, ...]) -> str:
    """Write host names as a compact hostlist that expands back to exactly ``names`` (same order).

    Consecutive names that differ only in their last number share one bracket group
    (``gpu01, gpu02, gpu03, gpu07`` -> ``gpu[01-03,07]``); padding is kept per range.
    """
    groups: list[tuple[str, str, list[list[int]]]] = []  # (prefix, suffix, [[lo, hi, width], …])
    for name in names:
        if not isinstance(name, str) or not _NAME_RE.match(name):
            raise HostlistError(
                f"cannot write {name!r} in a hostlist: host names must be non-empty and contain "
                "no whitespace, commas or brackets"
            )
        m = _LAST_NUMBER_RE.match(name)
        if not m:
            groups.append((name, "", []))
            continue
        prefix, digits, suffix = m.group(1), m.group(2), m.group(3)
        number = int(digits)
        if groups and groups[-1][2] and groups[-1][0] == prefix and groups[-1][1] == suffix:
            ranges = groups[-1][2]
            lo, hi, width = ranges[-1]
            if digits == str(hi + 1).zfill(width):
                ranges[-1][1] = hi + 1
            else:
                ranges.append([number, number, len(digits)])
        else:
            groups.append((prefix, suffix, [[number, number, len(digits)]]))
    out: list[str] = []
    for prefix, suffix, ranges in groups:
        if not ranges:
            out.append(prefix)
        elif len(ranges) == 1 and ranges[0][0] == ranges[0][1]:
            out.append(f"{prefix}{_format_range(*ranges[0])}{suffix}")
        else:
            body = ",".join(_format_range(lo, hi, width) for lo, hi, width in ranges)
            out.append(f"{prefix}[{body}]{suffix}")
    return ",".join(out)
