"""Faults and node operations for a run: a CSV of ``time,node,event[,reason]``, or generated
ones (``random_faults``: seeded failures at a rate per node; ``maintenance_window``: drain,
down, up), written inline as ``rate:…`` / ``maintenance:…`` specs (``parse_fault_spec``).

``time`` is seconds from the start of the run or a Slurm duration (``1-00:00:00``); ``node`` a
node name or a Slurm hostlist (``gpu[01-02]``); ``event`` one of down, up, drain, resume.
Lines starting with ``#`` are comments.
"""
from __future__ import annotations

import csv
import random
import re
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


# --------------------------------------------------------------------------- generated faults
def maintenance_window(nodes: list[str], drain_at: float, down_at: float, up_at: float,
                       reason: str = "maintenance") -> list[NodeEvent]:
    """A planned maintenance: drained at ``drain_at`` (no new work; running jobs go on), down
    from ``down_at`` (what still runs there ends NODE_FAIL or is requeued, as the job says) to
    ``up_at``, then back up and resumed."""
    if not drain_at <= down_at < up_at:
        raise ValueError(f"maintenance window: expected drain <= down < up, got {drain_at:g}, {down_at:g}, {up_at:g}")
    out: list[NodeEvent] = []
    for node in nodes:
        out += [NodeEvent(drain_at, node, "drain", reason), NodeEvent(down_at, node, "down", reason),
                NodeEvent(up_at, node, "up", reason), NodeEvent(up_at, node, "resume", reason)]
    out.sort(key=lambda e: (e.time, e.node, e.event))  # the engine's order at one instant
    return out


def random_faults(nodes: list[str], mtbf_s: float, repair_s: float, until_s: float, seed: int = 0,
                  *, repair: str = "fixed") -> list[NodeEvent]:
    """Node failures at a rate: each node fails after an exponential time with mean ``mtbf_s``
    (its own seeded stream, so adding a node does not move the others' failures), stays down
    ``repair_s`` (``repair="exp"``: exponential with that mean) and fails again after another
    draw once repaired; failures at or after ``until_s`` are not generated."""
    if mtbf_s <= 0 or repair_s < 0 or until_s < 0:
        raise ValueError("random faults: mtbf must be > 0, repair and until >= 0")
    if repair not in ("fixed", "exp"):
        raise ValueError(f"random faults: repair is 'fixed' or 'exp', got {repair!r}")
    out: list[NodeEvent] = []
    for node in nodes:
        rng = random.Random(f"{seed}:{node}")
        t = rng.expovariate(1.0 / mtbf_s)
        while t < until_s:
            fix = rng.expovariate(1.0 / repair_s) if repair == "exp" and repair_s > 0 else repair_s
            out.append(NodeEvent(t, node, "down", "fault"))
            out.append(NodeEvent(t + fix, node, "up", "repaired"))
            t = t + fix + rng.expovariate(1.0 / mtbf_s)
    out.sort(key=lambda e: (e.time, e.node, e.event))
    return out


def _spec_seconds(key: str, text: str) -> float:
    from gpupool.formats.slinky import duration

    try:
        return duration(text)
    except ValueError as exc:
        raise ValueError(f"{key}: {exc}") from None


def parse_fault_spec(text: str, node_names: list[str], horizon_s: float | None = None) -> list[NodeEvent]:
    """Faults described inline instead of in a CSV:

    * ``rate:mtbf=30d,repair=4h[,seed=1][,until=7d][,nodes=gpu[01-04]][,repair_dist=exp]``
    * ``maintenance:nodes=gpu01,drain=1h,down=2h,up=4h[,reason=firmware]``

    Several specs are joined with ``;``. ``until`` defaults to ``horizon_s`` (the workload's
    span); durations take seconds, ``<n>s|m|h|d`` or Slurm durations. Errors name the key.
    """
    out: list[NodeEvent] = []
    for part in (p.strip() for p in text.split(";") if p.strip()):
        kind, _, rest = part.partition(":")
        fields: dict[str, str] = {}
        for item in (i.strip() for i in _split_top(rest) if i.strip()):
            key, eq, value = item.partition("=")
            if not eq:
                raise ValueError(f"fault spec {part!r}: expected key=value, got {item!r}")
            fields[key.strip()] = value.strip()
        names = node_names
        if "nodes" in fields:
            names = expand_hostlist(fields.pop("nodes"))
            unknown = [n for n in names if n not in node_names]
            if unknown:
                raise ValueError(f"fault spec {part!r}: the pool has no node {unknown[0]!r}")
        if kind == "rate":
            known = {"mtbf", "repair", "seed", "until", "repair_dist"}
            _known(part, fields, known, {"mtbf", "repair"})
            until = _spec_seconds("until", fields["until"]) if "until" in fields else horizon_s
            if until is None:
                raise ValueError(f"fault spec {part!r}: give until= (no workload span to default to)")
            seed = fields.get("seed", "0")
            if not seed.isdigit():
                raise ValueError(f"fault spec {part!r}: seed: expected a whole number, got {seed!r}")
            out += random_faults(names, _spec_seconds("mtbf", fields["mtbf"]), _spec_seconds("repair", fields["repair"]),
                                 until, int(seed), repair=fields.get("repair_dist", "fixed"))
        elif kind == "maintenance":
            _known(part, fields, {"drain", "down", "up", "reason"}, {"down", "up"})
            down = _spec_seconds("down", fields["down"])
            drain = _spec_seconds("drain", fields["drain"]) if "drain" in fields else down
            out += maintenance_window(names, drain, down, _spec_seconds("up", fields["up"]),
                                      fields.get("reason", "maintenance"))
        else:
            raise ValueError(f"fault spec {part!r}: expected rate:… or maintenance:…")
    out.sort(key=lambda e: (e.time, e.node, e.event))
    return out


def _split_top(text: str) -> list[str]:
    """Split on commas outside brackets (hostlists like ``gpu[01-02,04]`` keep theirs)."""
    out, depth, cur = [], 0, ""
    for ch in text:
        depth += ch == "["
        depth -= ch == "]"
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    out.append(cur)
    return out


def _known(part: str, fields: dict[str, str], known: set[str], required: set[str]) -> None:
    for key in fields:
        if key not in known:
            raise ValueError(f"fault spec {part!r}: unknown key {key!r} (known: {', '.join(sorted(known | {'nodes'}))})")
    for key in sorted(required - set(fields)):
        raise ValueError(f"fault spec {part!r}: missing {key}=")


def load_faults(spec: str | Path, node_names: list[str], horizon_s: float | None = None) -> list[NodeEvent]:
    """A faults CSV path, or an inline spec (``rate:…``, ``maintenance:…``; see ``parse_fault_spec``)."""
    text = str(spec)
    if text.startswith(("rate:", "maintenance:")) or (re.match(r"[a-z_]+:", text) and not Path(text).exists()):
        try:
            return parse_fault_spec(text, list(node_names), horizon_s)
        except ValueError as exc:
            raise InputError("--faults", str(exc)) from None
    return parse_faults(spec, set(node_names))
