"""sbatch batch scripts, read the way sbatch 22.05 reads them, and written back.

sbatch takes options from ``#SBATCH`` lines at the top of a script: the lines must start
with exactly ``#SBATCH`` and are read only until the first line that is neither blank nor
a comment. Each such line may carry several options, long (``--nodes=2``, ``--nodes 2``,
an unambiguous prefix such as ``--part``) or short (``-N 2``, ``-N2``), with shell-style
quoting and ``#`` starting a trailing comment. A later option overrides an earlier one.

Every option sbatch 22.05 accepts is recognised. Those gpupool acts on become typed
fields of :class:`SbatchJob`; the rest are kept, in order, in ``not_modelled`` so a user
can see what the simulation does not honour. An option sbatch does not know is an
:class:`InputError` naming the file and line, as sbatch itself would refuse the script.

``#GPUPOOL key=value`` comment lines (anywhere in the script) carry what a script cannot
say to Slurm but a replay needs: ``runtime``, ``outcome`` and ``checkpoint_interval``.

:func:`sbatch_to_workload` maps a job to :class:`~gpupool.model.workload.Workload` objects
(one per array task); :func:`render_sbatch` is the inverse of the parser (round trip).
docs/formats/sbatch.md describes the mapping.
"""
from __future__ import annotations

import math
import re
import shlex
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Callable, NamedTuple

from gpupool.errors import InputError
from gpupool.formats.hostlist import compress_hostlist, expand_hostlist
from gpupool.formats.quantity import QuantityError, slurm_memory_mib
from gpupool.formats.slurm_features import check_sbatch_limits
from gpupool.formats.slurm_time import (
    SlurmTimeError,
    format_duration,
    parse_duration,
    parse_timestamp,
)
from gpupool.model.workload import GANG_ALL, GANG_MIN, OUTCOMES, PodSet, Workload

# --------------------------------------------------------------------------------------
# Typed values of the modelled options
# --------------------------------------------------------------------------------------

#: ``--time=UNLIMITED``: no limit at all (distinct from None, "not given").
UNLIMITED = math.inf

#: Largest task id gpupool expands (Slurm's own ceiling for MaxArraySize is 4000001).
MAX_ARRAY_TASK_ID = 4_000_000

DEPENDENCY_TYPES = (
    "after", "afterany", "afterok", "afternotok", "aftercorr", "afterburstbuffer", "singleton",
)


class GresRequest(NamedTuple):
    """One ``--gres`` entry, ``name[:type][:count]``; count is per node."""

    name: str
    type: str | None
    count: int


class GpuCount(NamedTuple):
    """A ``[type:]count`` GPU request (``--gpus``, ``--gpus-per-node``, ``--gpus-per-task``)."""

    type: str | None
    count: int

    def text(self) -> str:
        return f"{self.type}:{self.count}" if self.type else str(self.count)


class DependencyClause(NamedTuple):
    """``type:id[:id...]``; ids are job ids (``123``, ``123_4``, ``123+60`` for ``after``) or,
    in a workload folder, another script's file stem (gpupool's extension)."""

    type: str
    job_ids: tuple[str, ...]

    def text(self) -> str:
        return ":".join((self.type, *self.job_ids))


@dataclass(frozen=True)
class Dependency:
    """A parsed ``--dependency``: clauses joined by ``,`` (all must hold) or ``?`` (any)."""

    clauses: tuple[DependencyClause, ...]
    any_of: bool = False

    def __post_init__(self) -> None:
        # With one clause "all" and "any" are the same; keep one spelling so equal texts
        # give equal objects.
        if len(self.clauses) < 2 and self.any_of:
            object.__setattr__(self, "any_of", False)

    def text(self) -> str:
        return ("?" if self.any_of else ",").join(c.text() for c in self.clauses)

    def job_ids(self) -> tuple[str, ...]:
        """Every job id named, in order (for resolving names in a folder)."""
        return tuple(j for c in self.clauses for j in c.job_ids)


@dataclass(frozen=True)
class ArraySpec:
    """A parsed ``--array``: the task ids (sorted, unique) and the ``%N`` limit."""

    task_ids: tuple[int, ...]
    max_running: int | None = None

    def text(self) -> str:
        """Compact text (``0-15:2%4``, ``1,3,5``) that parses back to the same spec."""
        out = ",".join(_compress_ids(self.task_ids))
        return f"{out}%{self.max_running}" if self.max_running is not None else out


@dataclass(frozen=True)
class SignalSpec:
    """``--signal=[{R|B}:]SIG[@secs]``: which signal, how long before the limit, and flags
    (``B`` = batch shell only, ``R`` = also on reservation end)."""

    signal: str
    seconds: int = 60
    flags: str = ""

    def text(self) -> str:
        prefix = f"{self.flags}:" if self.flags else ""
        return f"{prefix}{self.signal}@{self.seconds}"


@dataclass
class SbatchJob:
    """Every option of one sbatch script, typed. None means "not given" (Slurm's default).

    Units: memory in MiB, times in seconds (``UNLIMITED`` = ``math.inf``). ``nodes`` is a
    count or a ``(min, max)`` range. ``not_modelled`` keeps options sbatch accepts but
    gpupool does not act on, as ``(option, value or None)`` in script order.
    """

    nodes: int | tuple[int, int] | None = None
    ntasks: int | None = None
    ntasks_per_node: int | None = None
    cpus_per_task: int | None = None
    cpus_per_gpu: int | None = None
    gres: tuple[GresRequest, ...] = ()
    gpus: GpuCount | None = None
    gpus_per_node: GpuCount | None = None
    gpus_per_task: GpuCount | None = None
    mem: int | None = None
    mem_per_cpu: int | None = None
    mem_per_gpu: int | None = None
    time: float | None = None
    time_min: float | None = None
    account: str | None = None
    qos: str | None = None
    partition: str | None = None
    job_name: str | None = None
    output: str | None = None
    error: str | None = None
    exclusive: bool = False
    oversubscribe: bool = False
    dependency: Dependency | None = None
    array: ArraySpec | None = None
    begin: str | None = None
    nice: int | None = None
    requeue: bool | None = None
    signal: SignalSpec | None = None
    constraint: str | None = None
    nodelist: str | None = None
    exclude: str | None = None
    comment: str | None = None
    licenses: tuple[tuple[str, int], ...] = ()
    not_modelled: tuple[tuple[str, str | None], ...] = ()
    # gpupool's own ``#GPUPOOL key=value`` comments
    runtime: float | None = None
    outcome: str | None = None
    checkpoint_interval: float | None = None
    #: Interpreter line and the script body after the option header (kept for rendering).
    shebang: str = "#!/bin/bash"
    body: str = ""
    source: str = field(default="", compare=False)
    #: Lines of ``#SBATCH`` directives after the first command: sbatch ignores them, and so
    #: does gpupool, but a linter can point at them.
    late_directives: tuple[int, ...] = field(default=(), compare=False)
    #: Line of each option as given (field name -> line), for messages after parsing.
    lines: dict[str, int] = field(default_factory=dict, compare=False, repr=False)

    @property
    def min_nodes(self) -> int | None:
        return self.nodes[0] if isinstance(self.nodes, tuple) else self.nodes

    @property
    def max_nodes(self) -> int | None:
        return self.nodes[1] if isinstance(self.nodes, tuple) else self.nodes

    @property
    def name(self) -> str:
        """``--job-name``, else the script's file stem (as sbatch names a job)."""
        return self.job_name or (Path(self.source).stem if self.source else "sbatch")

    def begin_offset(self, epoch: datetime | None = None, submit_time: float = 0.0) -> float | None:
        """Engine time at which ``--begin`` makes the job eligible (None without --begin).

        ``now+…`` counts from ``submit_time``; dates and clock times need ``epoch`` (the
        wall-clock instant of engine time 0). A time already past means "at submission".
        """
        if self.begin is None:
            return None
        return begin_offset(self.begin, epoch, submit_time, source=self.source,
                            line=self.lines.get("begin"))


# --------------------------------------------------------------------------------------
# The option table: every sbatch 22.05 option
# --------------------------------------------------------------------------------------

_REQ, _FLAG, _OPT = "required", "flag", "optional"


class _Option(NamedTuple):
    name: str
    short: str | None
    arg: str  # _REQ, _FLAG or _OPT (value only after "=")


_OPTIONS = [
    _Option("account", "A", _REQ), _Option("acctg-freq", None, _REQ), _Option("array", "a", _REQ),
    _Option("batch", None, _REQ), _Option("bb", None, _REQ), _Option("bbf", None, _REQ),
    _Option("begin", "b", _REQ), _Option("chdir", "D", _REQ),
    _Option("cluster-constraint", None, _REQ), _Option("clusters", "M", _REQ),
    _Option("comment", None, _REQ), _Option("constraint", "C", _REQ),
    _Option("container", None, _REQ), _Option("contiguous", None, _FLAG),
    _Option("core-spec", "S", _REQ), _Option("cores-per-socket", None, _REQ),
    _Option("cpu-freq", None, _REQ), _Option("cpus-per-gpu", None, _REQ),
    _Option("cpus-per-task", "c", _REQ), _Option("deadline", None, _REQ),
    _Option("delay-boot", None, _REQ), _Option("dependency", "d", _REQ),
    _Option("distribution", "m", _REQ), _Option("error", "e", _REQ),
    _Option("exclude", "x", _REQ), _Option("exclusive", None, _OPT), _Option("export", None, _REQ),
    _Option("export-file", None, _REQ), _Option("extra-node-info", "B", _REQ),
    _Option("get-user-env", None, _OPT), _Option("gid", None, _REQ),
    _Option("gpu-bind", None, _REQ), _Option("gpu-freq", None, _REQ), _Option("gpus", "G", _REQ),
    _Option("gpus-per-node", None, _REQ), _Option("gpus-per-socket", None, _REQ),
    _Option("gpus-per-task", None, _REQ), _Option("gres", None, _REQ),
    _Option("gres-flags", None, _REQ), _Option("help", "h", _FLAG), _Option("hint", None, _REQ),
    _Option("hold", "H", _FLAG), _Option("ignore-pbs", None, _FLAG), _Option("input", "i", _REQ),
    _Option("job-name", "J", _REQ), _Option("kill-on-invalid-dep", None, _REQ),
    _Option("licenses", "L", _REQ), _Option("mail-type", None, _REQ),
    _Option("mail-user", None, _REQ), _Option("mcs-label", None, _REQ), _Option("mem", None, _REQ),
    _Option("mem-bind", None, _REQ), _Option("mem-per-cpu", None, _REQ),
    _Option("mem-per-gpu", None, _REQ), _Option("mincpus", None, _REQ),
    _Option("network", None, _REQ), _Option("nice", None, _OPT), _Option("no-kill", "k", _OPT),
    _Option("no-requeue", None, _FLAG), _Option("nodefile", "F", _REQ),
    _Option("nodelist", "w", _REQ), _Option("nodes", "N", _REQ), _Option("ntasks", "n", _REQ),
    _Option("ntasks-per-core", None, _REQ), _Option("ntasks-per-gpu", None, _REQ),
    _Option("ntasks-per-node", None, _REQ), _Option("ntasks-per-socket", None, _REQ),
    _Option("open-mode", None, _REQ), _Option("output", "o", _REQ),
    _Option("overcommit", "O", _FLAG), _Option("oversubscribe", "s", _FLAG),
    _Option("parsable", None, _FLAG), _Option("partition", "p", _REQ), _Option("power", None, _REQ),
    _Option("prefer", None, _REQ), _Option("priority", None, _REQ), _Option("profile", None, _REQ),
    _Option("propagate", None, _OPT), _Option("qos", "q", _REQ), _Option("quiet", "Q", _FLAG),
    _Option("reboot", None, _FLAG), _Option("requeue", None, _FLAG),
    _Option("reservation", None, _REQ), _Option("signal", None, _REQ),
    _Option("sockets-per-node", None, _REQ), _Option("spread-job", None, _FLAG),
    _Option("switches", None, _REQ), _Option("test-only", None, _FLAG),
    _Option("thread-spec", None, _REQ), _Option("threads-per-core", None, _REQ),
    _Option("time", "t", _REQ), _Option("time-min", None, _REQ), _Option("tmp", None, _REQ),
    _Option("uid", None, _REQ), _Option("usage", None, _FLAG), _Option("use-min-nodes", None, _FLAG),
    _Option("verbose", "v", _FLAG), _Option("version", "V", _FLAG), _Option("wait", "W", _FLAG),
    _Option("wait-all-nodes", None, _REQ), _Option("wckey", None, _REQ), _Option("wrap", None, _REQ),
]
_BY_NAME = {o.name: o for o in _OPTIONS}
_BY_SHORT = {o.short: o for o in _OPTIONS if o.short}

_SBATCH_PREFIX = "#SBATCH"
_GPUPOOL_RE = re.compile(r"^#\s*GPUPOOL\b(.*)$")


class _Ctx(NamedTuple):
    """Where a value came from, for error messages."""

    source: str
    line: int
    option: str

    def error(self, message: str) -> InputError:
        return InputError(self.source, f"--{self.option}: {message}", line=self.line)


# --------------------------------------------------------------------------------------
# Value parsers (each raises InputError through ctx with what was expected)
# --------------------------------------------------------------------------------------

def _int(ctx: _Ctx, text: str, *, minimum: int = 0) -> int:
    if not re.fullmatch(r"[+-]?\d+", text.strip()):
        raise ctx.error(f"expected a whole number, got {text!r}")
    value = int(text)
    if value < minimum:
        raise ctx.error(f"expected a whole number >= {minimum}, got {text!r}")
    return value


def _nodes(ctx: _Ctx, text: str) -> int | tuple[int, int]:
    m = re.fullmatch(r"(\d+)(?:-(\d+))?", text.strip())
    if not m:
        raise ctx.error(f"expected a node count N or a range MIN-MAX such as '2' or '2-4', got {text!r}")
    low = int(m.group(1))
    high = int(m.group(2)) if m.group(2) is not None else low
    if low < 1 or high < low:
        raise ctx.error(f"expected 1 <= MIN <= MAX nodes, got {text!r}")
    return low if low == high else (low, high)


def _memory(ctx: _Ctx, text: str) -> int:
    try:
        return slurm_memory_mib(text)
    except QuantityError:
        raise ctx.error(f"expected a memory size such as '500G', '32000' (MB) or '512M', got {text!r}") from None


def _duration(ctx: _Ctx, text: str) -> float:
    """``--time``/``--time-min``: a Slurm duration, UNLIMITED for ``UNLIMITED``/``INFINITE``
    and, as sbatch reads it (``arg_set_time_limit``), for 0."""
    try:
        value = parse_duration(text)
    except SlurmTimeError as exc:
        raise ctx.error(str(exc)) from None
    return UNLIMITED if not value else value


def _name_token(ctx: _Ctx, text: str, what: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.\-]*", text):
        raise ctx.error(f"expected a {what} (letters, digits, '_', '.', '-'), got {text!r}")
    return text


def _gpu_count(ctx: _Ctx, text: str) -> GpuCount:
    if "," in text:
        raise ctx.error(f"gpupool models one GPU type per job; got several in {text!r}")
    m = re.fullmatch(r"(?:([A-Za-z0-9][A-Za-z0-9_.\-]*):)?(\d+)", text.strip())
    if not m:
        raise ctx.error(f"expected [type:]count such as '8' or 'h100:8', got {text!r}")
    return GpuCount(m.group(1), int(m.group(2)))


def _gres(ctx: _Ctx, text: str) -> tuple[GresRequest, ...]:
    if text.strip().lower() == "none":
        return ()
    out = []
    for item in text.split(","):
        parts = item.strip().split(":")
        if not parts[0] or len(parts) > 3 or not all(parts):
            raise ctx.error(f"expected name[:type][:count] entries such as 'gpu:h100:8,gpu:2', got {text!r}")
        name, gtype, count = parts[0], None, 1
        if len(parts) == 3:
            gtype, count = parts[1], _gres_count(ctx, parts[2], text)
        elif len(parts) == 2:
            if parts[1].isdigit():
                count = _gres_count(ctx, parts[1], text)
            else:
                gtype = parts[1]
        _name_token(ctx, name, "GRES name")
        if gtype is not None:
            _name_token(ctx, gtype, "GRES type")
        out.append(GresRequest(name, gtype, count))
    return tuple(out)


def _gres_count(ctx: _Ctx, text: str, whole: str) -> int:
    if not text.isdigit():
        raise ctx.error(f"expected a whole GRES count in {whole!r}, got {text!r}")
    return int(text)


_DEP_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]*(?:\+\d+)?")


def _dependency(ctx: _Ctx, text: str) -> Dependency:
    s = text.strip()
    if "," in s and "?" in s:
        raise ctx.error(f"',' (all) and '?' (any) cannot be mixed in one dependency, got {text!r}")
    any_of = "?" in s
    clauses = []
    for item in s.split("?" if any_of else ","):
        dtype, _, rest = item.partition(":")
        dtype = dtype.strip().lower()
        if dtype not in DEPENDENCY_TYPES:
            raise ctx.error(f"expected a dependency type ({', '.join(DEPENDENCY_TYPES)}), got {item!r}")
        ids = tuple(rest.split(":")) if rest else ()
        if dtype == "singleton":
            if ids:
                raise ctx.error(f"'singleton' takes no job ids, got {item!r}")
        elif not ids or not all(_DEP_ID_RE.fullmatch(j) for j in ids):
            raise ctx.error(f"expected {dtype}:jobid[:jobid...], got {item!r}")
        clauses.append(DependencyClause(dtype, ids))
    return Dependency(tuple(clauses), any_of)


def _array(ctx: _Ctx, text: str) -> ArraySpec:
    s = text.strip()
    body, _, limit = s.partition("%")
    max_running = None
    if limit:
        max_running = _int(ctx, limit, minimum=1)
    ids: set[int] = set()
    for item in body.split(","):
        m = re.fullmatch(r"(\d+)(?:-(\d+)(?::(\d+))?)?", item.strip())
        if not m:
            raise ctx.error(f"expected task ids such as '0-15', '0-15:2%4' or '1,3,5', got {text!r}")
        first = int(m.group(1))
        last = int(m.group(2)) if m.group(2) is not None else first
        step = int(m.group(3)) if m.group(3) is not None else 1
        if last < first or step < 1:
            raise ctx.error(f"expected FIRST-LAST[:STEP] with FIRST <= LAST and STEP >= 1, got {item!r}")
        if last > MAX_ARRAY_TASK_ID:
            raise ctx.error(f"task id {last} is above the largest array index {MAX_ARRAY_TASK_ID}")
        ids.update(range(first, last + 1, step))
    return ArraySpec(tuple(sorted(ids)), max_running)


def _compress_ids(ids: tuple[int, ...]) -> list[str]:
    """Sorted ids -> ``first-last[:step]`` pieces (runs of 3+ with one step), else singles."""
    out: list[str] = []
    i = 0
    while i < len(ids):
        j = i
        if i + 1 < len(ids):
            step = ids[i + 1] - ids[i]
            while j + 1 < len(ids) and ids[j + 1] - ids[j] == step:
                j += 1
            if j - i >= 2 or (j - i == 1 and step == 1):
                out.append(f"{ids[i]}-{ids[j]}" + (f":{step}" if step != 1 else ""))
                i = j + 1
                continue
        out.append(str(ids[i]))
        i += 1
    return out


_SIGNALS = (
    "HUP", "INT", "QUIT", "ILL", "TRAP", "ABRT", "BUS", "FPE", "KILL", "USR1", "SEGV", "USR2",
    "PIPE", "ALRM", "TERM", "STKFLT", "CHLD", "CONT", "STOP", "TSTP", "TTIN", "TTOU", "URG",
    "XCPU", "XFSZ", "VTALRM", "PROF", "WINCH", "IO", "PWR", "SYS",
)


def _signal(ctx: _Ctx, text: str) -> SignalSpec:
    m = re.fullmatch(r"(?:([RBrb]{1,2}):)?([A-Za-z0-9]+)(?:@(\d+))?", text.strip())
    if not m:
        raise ctx.error(f"expected [{{R|B}}:]SIGNAL[@seconds] such as 'B:USR1@300', got {text!r}")
    flags = "".join(sorted(set((m.group(1) or "").upper())))
    sig = m.group(2).upper()
    if sig.isdigit():
        if not 1 <= int(sig) <= 64:
            raise ctx.error(f"expected a signal number 1-64, got {sig}")
        sig = str(int(sig))
    else:
        sig = sig[3:] if sig.startswith("SIG") else sig
        if sig not in _SIGNALS:
            raise ctx.error(f"unknown signal {m.group(2)!r}; expected a name such as USR1 or TERM, or a number")
    seconds = int(m.group(3)) if m.group(3) is not None else 60
    if seconds > 65535:
        raise ctx.error(f"expected at most 65535 seconds before the limit, got {seconds}")
    return SignalSpec(sig, seconds, flags)


def _nice(ctx: _Ctx, text: str | None) -> int:
    if text is None:
        return 100
    value = _int(ctx, text, minimum=-2147483645)
    if value > 2147483645:
        raise ctx.error(f"expected an adjustment between -2147483645 and 2147483645, got {text!r}")
    return value


def _free_text(ctx: _Ctx, text: str) -> str:
    if "\n" in text or "\r" in text:
        raise ctx.error("expected a single line of text")
    return text


# --------------------------------------------------------------------------------------
# --begin
# --------------------------------------------------------------------------------------

_BEGIN_UNITS = {
    "s": 1, "sec": 1, "secs": 1, "second": 1, "seconds": 1,
    "min": 60, "mins": 60, "minute": 60, "minutes": 60,
    "h": 3600, "hour": 3600, "hours": 3600,
    "d": 86400, "day": 86400, "days": 86400,
    "w": 604800, "week": 604800, "weeks": 604800,
}
_BEGIN_NAMED = {"midnight": (0, 0, 0), "noon": (12, 0, 0), "fika": (15, 0, 0), "teatime": (16, 0, 0)}
_BEGIN_FORMS = ("'now+1hour', 'now+30minutes', 'now+600', '2026-12-01T08:00:00', '2026-12-01', "
                "'16:00', '4:00PM', 'midnight', 'noon', 'teatime', 'tomorrow'")


class _Begin(NamedTuple):
    #: "relative" (seconds after submit), "absolute" (datetime) or "clock": (hour, minute,
    #: second, days ahead, roll over to tomorrow when already past).
    kind: str
    value: object


def _parse_begin(text: str) -> _Begin:
    """Classify a --begin value; ValueError with the accepted forms when it is none of them."""
    s = text.strip()
    low = s.lower()
    m = re.fullmatch(r"now(?:\+(\d+)([a-z]*))?", low)
    if m:
        amount = int(m.group(1) or 0)
        unit = m.group(2) or "s"
        if unit not in _BEGIN_UNITS:
            raise ValueError(f"unknown time unit {m.group(2)!r} in {text!r}; expected one of "
                             "seconds, minutes, hours, days, weeks")
        return _Begin("relative", amount * _BEGIN_UNITS[unit])
    if low in _BEGIN_NAMED:
        return _Begin("clock", (*_BEGIN_NAMED[low], 0, True))
    if low in ("today", "tomorrow"):
        return _Begin("clock", (0, 0, 0, 0 if low == "today" else 1, False))
    m = re.fullmatch(r"(\d{1,2}):(\d{2})(?::(\d{2}))?\s*(am|pm)?", low)
    if m:
        hour, minute, second = int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)
        if m.group(4):
            if not 1 <= hour <= 12:
                raise ValueError(f"expected an hour 1-12 with AM/PM, got {text!r}")
            hour = hour % 12 + (12 if m.group(4) == "pm" else 0)
        if hour > 23 or minute > 59 or second > 59:
            raise ValueError(f"expected a clock time HH:MM[:SS], got {text!r}")
        return _Begin("clock", (hour, minute, second, 0, True))
    if re.fullmatch(r"\d{4}-\d{2}-\d{2}(?:T\d{2}:\d{2}(?::\d{2})?)?", s):
        try:
            return _Begin("absolute", parse_timestamp(s))
        except SlurmTimeError as exc:
            raise ValueError(str(exc)) from None
    raise ValueError(f"expected a begin time such as {_BEGIN_FORMS}, got {text!r}")


def begin_offset(text: str, epoch: datetime | None, submit_time: float = 0.0, *,
                 source: str = "", line: int | None = None) -> float:
    """Engine time (seconds from ``epoch``) at which a ``--begin`` value makes a job eligible.

    Relative forms (``now+1hour``) count from ``submit_time`` and need no epoch. Dates and
    clock times are wall-clock instants, so they need ``epoch``; a clock time means its next
    occurrence at or after submission (as sbatch reads it). Never earlier than submission.
    """
    try:
        begin = _parse_begin(text)
    except ValueError as exc:
        raise InputError(source, f"--begin: {exc}", line=line) from None
    if begin.kind == "relative":
        return submit_time + float(begin.value)  # type: ignore[arg-type]
    if epoch is None:
        raise InputError(source, f"--begin={text} is a wall-clock time; gpupool needs the run's "
                         "start time (epoch) to place it; use 'now+<duration>' or give an epoch",
                         line=line)
    epoch = parse_timestamp(epoch.isoformat()) if epoch.tzinfo is None else epoch
    now = epoch + timedelta(seconds=submit_time)
    if begin.kind == "absolute":
        at: datetime = begin.value  # type: ignore[assignment]
    else:
        hour, minute, second, days, roll = begin.value  # type: ignore[misc]
        at = now.replace(hour=hour, minute=minute, second=second, microsecond=0) + timedelta(days=days)
        if roll and at < now:
            at += timedelta(days=1)
    return max(submit_time, (at - epoch).total_seconds())


def _begin(ctx: _Ctx, text: str) -> str:
    try:
        _parse_begin(text)
    except ValueError as exc:
        raise ctx.error(str(exc)) from None
    return text.strip()


# --------------------------------------------------------------------------------------
# Applying options to the job
# --------------------------------------------------------------------------------------

#: option -> (field, parser(ctx, value)) for options with a typed field.
_VALUE_FIELDS: dict[str, tuple[str, Callable[[_Ctx, str], object]]] = {
    "nodes": ("nodes", _nodes),
    "ntasks": ("ntasks", lambda c, v: _int(c, v, minimum=1)),
    "ntasks-per-node": ("ntasks_per_node", lambda c, v: _int(c, v, minimum=1)),
    "cpus-per-task": ("cpus_per_task", lambda c, v: _int(c, v, minimum=1)),
    "cpus-per-gpu": ("cpus_per_gpu", lambda c, v: _int(c, v, minimum=1)),
    "gres": ("gres", _gres),
    "gpus": ("gpus", _gpu_count),
    "gpus-per-node": ("gpus_per_node", _gpu_count),
    "gpus-per-task": ("gpus_per_task", _gpu_count),
    "mem": ("mem", _memory),
    "mem-per-cpu": ("mem_per_cpu", _memory),
    "mem-per-gpu": ("mem_per_gpu", _memory),
    "time": ("time", _duration),
    "time-min": ("time_min", _duration),
    "account": ("account", lambda c, v: _name_token(c, v, "account name")),
    "qos": ("qos", lambda c, v: _name_token(c, v, "QOS name")),
    "partition": ("partition", lambda c, v: ",".join(
        _name_token(c, p, "partition name") for p in v.split(","))),
    "job-name": ("job_name", _free_text),
    "output": ("output", _free_text),
    "error": ("error", _free_text),
    "dependency": ("dependency", _dependency),
    "array": ("array", _array),
    "begin": ("begin", _begin),
    "signal": ("signal", _signal),
    "constraint": ("constraint", _free_text),
    "nodelist": ("nodelist", _free_text),
    "exclude": ("exclude", _free_text),
    "comment": ("comment", _free_text),
    "licenses": ("licenses", lambda c, v: _licenses(c, v)),
}


def _licenses(ctx: _Ctx, text: str) -> tuple[tuple[str, int], ...]:
    """``--licenses=NAME[:COUNT][,NAME[:COUNT]...]`` as sbatch reads it: items split on ``,``
    or ``;`` (empty ones skipped), ``*`` also before a count, a count defaulting to 1, a name
    given twice adding up, ``NAME@server`` kept whole. A count of 0 is kept for the submit
    check to refuse, as slurmctld does ("Invalid license specification")."""
    if any(c.isspace() for c in text):
        raise ctx.error(f"a license list takes no spaces, got {text!r}")
    if "|" in text:
        raise ctx.error(f"gpupool reads a list of licenses all of which the job needs; "
                        f"'|' (any one of them) is not supported, got {text!r}")
    out: dict[str, int] = {}
    for item in re.split(r"[,;]", text):
        if not item:
            continue
        m = re.fullmatch(r"([^:*]+)(?:[:*](\d+))?", item)
        if m is None:
            raise ctx.error(f"expected NAME[:COUNT][,NAME[:COUNT]...], got {text!r}")
        out[m.group(1)] = out.get(m.group(1), 0) + (1 if m.group(2) is None else int(m.group(2)))
    if not out:
        raise ctx.error(f"expected NAME[:COUNT][,NAME[:COUNT]...], got {text!r}")
    return tuple(out.items())


def _apply(job: SbatchJob, ctx: _Ctx, value: str | None) -> None:
    """Store one option's value on ``job`` (later options override earlier ones)."""
    name = ctx.option
    if name in _VALUE_FIELDS:
        field_name, parse = _VALUE_FIELDS[name]
        setattr(job, field_name, parse(ctx, value))  # type: ignore[arg-type]
        job.lines[field_name] = ctx.line
    elif name == "exclusive" and value is None:
        job.exclusive = True
        job.lines["exclusive"] = ctx.line
    elif name == "exclusive" and value not in ("user", "mcs"):
        raise ctx.error(f"expected no value, 'user' or 'mcs', got {value!r}")
    elif name == "oversubscribe":
        job.oversubscribe = True
        job.lines["oversubscribe"] = ctx.line
    elif name == "nice":
        job.nice = _nice(ctx, value)
        job.lines["nice"] = ctx.line
    elif name in ("requeue", "no-requeue"):
        job.requeue = name == "requeue"
        job.lines["requeue"] = ctx.line
    else:
        job.not_modelled = (*job.not_modelled, (name, value))


def _check_combinations(job: SbatchJob) -> None:
    """Refuse combinations sbatch itself refuses."""
    given = [f for f in ("mem", "mem_per_cpu", "mem_per_gpu") if getattr(job, f) is not None]
    if len(given) > 1:
        line = max(job.lines[f] for f in given)
        raise InputError(job.source, "--mem, --mem-per-cpu and --mem-per-gpu are mutually exclusive; "
                         "give only one", line=line)


# --------------------------------------------------------------------------------------
# Reading a script
# --------------------------------------------------------------------------------------

def parse_sbatch(path: Path) -> SbatchJob:
    """Read one sbatch script file (see :func:`parse_sbatch_text`)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(str(path), f"cannot read the sbatch script: {exc}") from None
    return parse_sbatch_text(text, str(path))


def parse_sbatch_text(text: str, source: str) -> SbatchJob:
    """Parse a script's ``#SBATCH`` header and ``#GPUPOOL`` comments into an SbatchJob."""
    lines = text.splitlines()
    if not lines or not lines[0].startswith("#!"):
        raise InputError(source, "this does not look like a batch script: the first line must be "
                         "'#!' and an interpreter, such as '#!/bin/bash'", line=1)
    job = SbatchJob(source=source, shebang=lines[0])
    in_header = True
    for number, line in enumerate(lines[1:], start=2):
        stripped = line.strip()
        gp = _GPUPOOL_RE.match(stripped)
        if gp:
            _apply_gpupool(job, gp.group(1), source, number)
        if not in_header:
            if line.startswith(_SBATCH_PREFIX):
                job.late_directives = (*job.late_directives, number)
            continue
        if stripped and not stripped.startswith("#"):
            in_header = False
            job.body = "\n".join(lines[number - 1:])
            continue
        if line.startswith(_SBATCH_PREFIX) and (len(line) == 7 or line[7].isspace()):
            _parse_directive(job, line[7:], source, number)
    _check_combinations(job)
    return job


def _parse_directive(job: SbatchJob, rest: str, source: str, number: int) -> None:
    """Apply every option on one ``#SBATCH`` line."""
    try:
        tokens = shlex.split(rest, comments=True, posix=True)
    except ValueError as exc:
        raise InputError(source, f"cannot split the #SBATCH line: {exc}", line=number) from None
    if tokens == ["hetjob"] or tokens == ["packjob"]:
        raise InputError(source, "heterogeneous jobs ('#SBATCH hetjob') are not supported by gpupool",
                         line=number)
    i = 0
    while i < len(tokens):
        i = _parse_token(job, tokens, i, source, number)


def _parse_token(job: SbatchJob, tokens: list[str], i: int, source: str, number: int) -> int:
    """Apply the option at ``tokens[i]``; return the index of the next unread token."""
    token = tokens[i]
    if token.startswith("--") and len(token) > 2:
        name, eq, value = token[2:].partition("=")
        opt = _resolve_long(name, source, number)
        if opt.arg == _FLAG and eq:
            raise InputError(source, f"--{opt.name} takes no value, got {token!r}", line=number)
        if opt.arg == _REQ and not eq:
            if i + 1 >= len(tokens):
                raise InputError(source, f"--{opt.name} needs a value", line=number)
            value, i = tokens[i + 1], i + 1
        _apply(job, _Ctx(source, number, opt.name), value if eq or opt.arg == _REQ else None)
        return i + 1
    if token.startswith("-") and len(token) > 1 and not token.startswith("--"):
        return _parse_short(job, tokens, i, source, number)
    raise InputError(source, f"unexpected argument {token!r} on an #SBATCH line; options start "
                     "with '-' or '--'", line=number)


def _parse_short(job: SbatchJob, tokens: list[str], i: int, source: str, number: int) -> int:
    """Short options: ``-N2``, ``-N 2``, and bundled flags such as ``-Hv``."""
    chars = tokens[i][1:]
    while chars:
        opt = _BY_SHORT.get(chars[0])
        if opt is None:
            raise InputError(source, f"unknown sbatch option '-{chars[0]}'", line=number)
        ctx = _Ctx(source, number, opt.name)
        if opt.arg == _REQ:
            value = chars[1:]
            if not value:
                if i + 1 >= len(tokens):
                    raise InputError(source, f"-{opt.short} (--{opt.name}) needs a value", line=number)
                value, i = tokens[i + 1], i + 1
            _apply(job, ctx, value)
            return i + 1
        _apply(job, ctx, None)
        chars = chars[1:]
    return i + 1


def _resolve_long(name: str, source: str, number: int) -> _Option:
    """Exact option name, else an unambiguous prefix (as getopt_long allows)."""
    if name in _BY_NAME:
        return _BY_NAME[name]
    matches = [o for n, o in _BY_NAME.items() if n.startswith(name)] if name else []
    if len(matches) == 1:
        return matches[0]
    if len(matches) > 1:
        names = ", ".join("--" + o.name for o in matches)
        raise InputError(source, f"ambiguous sbatch option '--{name}': could be {names}", line=number)
    raise InputError(source, f"unknown sbatch option '--{name}'", line=number)


# --------------------------------------------------------------------------------------
# #GPUPOOL comments
# --------------------------------------------------------------------------------------

_GPUPOOL_KEYS = ("runtime", "outcome", "checkpoint_interval")


def parse_gpupool_duration(text: str) -> float:
    """gpupool's own durations: bare numbers are seconds; anything else is a Slurm duration.

    (Slurm reads a bare number as minutes; in ``#GPUPOOL`` comments and arrivals files a
    bare number is seconds, as everywhere else inside gpupool.) Raises ValueError.
    """
    s = text.strip()
    if re.fullmatch(r"\d+(?:\.\d+)?", s):
        return float(s)
    try:
        value = parse_duration(s)
    except SlurmTimeError:
        raise ValueError(f"expected seconds or a Slurm duration such as '3600', '10:30:00' or "
                         f"'1-00:00:00', got {text!r}") from None
    if value is None:
        raise ValueError(f"expected a finite duration, got {text!r}")
    return float(value)


def _gpupool_facts(rest: str, source: str, number: int) -> dict[str, object]:
    """``#GPUPOOL key=value [key=value...]``: replay facts the script cannot tell Slurm."""
    items = rest.split()
    if not items:
        raise InputError(source, "empty #GPUPOOL comment; expected key=value with keys "
                         f"{', '.join(_GPUPOOL_KEYS)}", line=number)
    facts: dict[str, object] = {}
    for item in items:
        key, eq, value = item.partition("=")
        if not eq or key not in _GPUPOOL_KEYS:
            raise InputError(source, f"#GPUPOOL: expected key=value with keys "
                             f"{', '.join(_GPUPOOL_KEYS)}, got {item!r}", line=number)
        if key == "outcome":
            if value.upper() not in OUTCOMES:
                raise InputError(source, f"#GPUPOOL outcome: expected one of {', '.join(OUTCOMES)}, "
                                 f"got {value!r}", line=number)
            facts[key] = value.upper()
            continue
        try:
            facts[key] = parse_gpupool_duration(value)
        except ValueError as exc:
            raise InputError(source, f"#GPUPOOL {key}: {exc}", line=number) from None
    return facts


def _apply_gpupool(job: SbatchJob, rest: str, source: str, number: int) -> None:
    for key, value in _gpupool_facts(rest, source, number).items():
        setattr(job, key, value)
        job.lines[key] = number


def parse_gpupool_comments(text: str, source: str) -> dict[str, object]:
    """The ``#GPUPOOL`` facts of any text with ``#`` comments (an sbatch script or a YAML
    manifest): ``runtime`` and ``checkpoint_interval`` in seconds, ``outcome``. Later wins."""
    facts: dict[str, object] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        m = _GPUPOOL_RE.match(line.strip())
        if m:
            facts.update(_gpupool_facts(m.group(1), source, number))
    return facts


# --------------------------------------------------------------------------------------
# Rendering (the inverse of the parser)
# --------------------------------------------------------------------------------------

def _time_text(seconds: float) -> str:
    return "UNLIMITED" if seconds == UNLIMITED else format_duration(seconds)


def _option_lines(job: SbatchJob) -> list[tuple[str, str | None]]:
    """(option, value) pairs in a fixed, readable order."""
    pairs: list[tuple[str, str | None]] = []

    def add(option: str, value: object, text: Callable[[object], str] = str) -> None:
        if value is not None:
            pairs.append((option, text(value)))

    add("job-name", job.job_name)
    add("account", job.account)
    add("partition", job.partition)
    add("qos", job.qos)
    add("nodes", job.nodes, lambda n: f"{n[0]}-{n[1]}" if isinstance(n, tuple) else str(n))
    add("ntasks", job.ntasks)
    add("ntasks-per-node", job.ntasks_per_node)
    add("cpus-per-task", job.cpus_per_task)
    add("cpus-per-gpu", job.cpus_per_gpu)
    if job.gres:
        pairs.append(("gres", ",".join(":".join(str(p) for p in g if p is not None) for g in job.gres)))
    add("gpus", job.gpus, lambda g: g.text())
    add("gpus-per-node", job.gpus_per_node, lambda g: g.text())
    add("gpus-per-task", job.gpus_per_task, lambda g: g.text())
    add("mem", job.mem, _memory_text)
    add("mem-per-cpu", job.mem_per_cpu, _memory_text)
    add("mem-per-gpu", job.mem_per_gpu, _memory_text)
    add("time", job.time, _time_text)
    add("time-min", job.time_min, _time_text)
    if job.licenses:
        pairs.append(("licenses", ",".join(f"{n}:{c}" for n, c in job.licenses)))
    if job.exclusive:
        pairs.append(("exclusive", None))
    if job.oversubscribe:
        pairs.append(("oversubscribe", None))
    add("dependency", job.dependency, lambda d: d.text())
    add("array", job.array, lambda a: a.text())
    add("begin", job.begin)
    add("nice", job.nice)
    if job.requeue is not None:
        pairs.append(("requeue" if job.requeue else "no-requeue", None))
    add("signal", job.signal, lambda s: s.text())
    add("constraint", job.constraint)
    add("nodelist", job.nodelist)
    add("exclude", job.exclude)
    add("comment", job.comment)
    add("output", job.output)
    add("error", job.error)
    pairs.extend(job.not_modelled)
    return pairs


def _memory_text(mib: object) -> str:
    """MiB -> Slurm text with the largest exact unit (``500G``, ``512M``)."""
    assert isinstance(mib, int)
    for suffix, factor in (("T", 1024 * 1024), ("G", 1024)):
        if mib and mib % factor == 0:
            return f"{mib // factor}{suffix}"
    return f"{mib}M"


def render_sbatch(job: SbatchJob) -> str:
    """Write a script whose parse gives back ``job`` (options, #GPUPOOL comments, body)."""
    out = [job.shebang]
    for option, value in _option_lines(job):
        out.append(f"#SBATCH --{option}" if value is None else f"#SBATCH --{option}={shlex.quote(value)}")
    facts = []
    if job.runtime is not None:
        facts.append(f"runtime={_seconds_text(job.runtime)}")
    if job.outcome is not None:
        facts.append(f"outcome={job.outcome}")
    if job.checkpoint_interval is not None:
        facts.append(f"checkpoint_interval={_seconds_text(job.checkpoint_interval)}")
    if facts:
        out.append("#GPUPOOL " + " ".join(facts))
    if job.body:
        out.append(job.body)
    return "\n".join(out) + "\n"


def _seconds_text(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


# --------------------------------------------------------------------------------------
# SbatchJob -> Workload
# --------------------------------------------------------------------------------------

class _Shape(NamedTuple):
    count: int
    min_count: int | None
    one_per_node: bool
    gpus: int
    cpus: int  # whole CPUs per pod
    tasks: int  # tasks per pod


def _error(job: SbatchJob, message: str, *fields: str) -> InputError:
    lines = [job.lines[f] for f in fields if f in job.lines]
    return InputError(job.source, message, line=max(lines) if lines else None)


def _gpu_type(job: SbatchJob) -> str | None:
    """The one GPU type the job names (None = any); several different types are refused."""
    types = {g.type for g in (job.gpus, job.gpus_per_node, job.gpus_per_task) if g and g.type}
    types |= {g.type for g in job.gres if g.name == "gpu" and g.type}
    if len(types) > 1:
        raise _error(job, f"gpupool models one GPU type per job; this script asks for "
                     f"{', '.join(sorted(types))}", "gres", "gpus", "gpus_per_node", "gpus_per_task")
    return types.pop() if types else None


def _gres_gpus(job: SbatchJob) -> int | None:
    counts = [g.count for g in job.gres if g.name == "gpu"]
    return sum(counts) if counts else None


def _node_shape(job: SbatchJob, nodes_min: int, nodes_max: int) -> _Shape:
    """One pod per node (``--nodes``, or ``--ntasks-per-node`` implying a node count)."""
    tasks = _tasks_per_node(job) or (math.ceil(job.ntasks / nodes_min) if job.ntasks else 1)
    gres = _gres_gpus(job)
    if job.gpus_per_node is not None:
        gpus = job.gpus_per_node.count
    elif gres is not None:
        gpus = gres
    elif job.gpus is not None:
        if _spreads_gpus(job, nodes_min, nodes_max) or _whole_nodes_share(job, nodes_min, nodes_max):
            if job.gpus.count < nodes_min:
                raise _error(job, f"--gpus={job.gpus.text()} asks fewer GPUs than the {nodes_min} nodes; Slurm "
                             "refuses the job (Invalid generic resource (gres) specification)", "gpus", "nodes")
            # the even share, rounded up (PodSet.spread_gpus; an exclusive job's whole nodes hold them all)
            gpus = -(-job.gpus.count // nodes_min)
        elif nodes_min != nodes_max or job.gpus.count % nodes_min:
            raise _error(job, f"--gpus={job.gpus.text()} cannot be split evenly over "
                         f"{_nodes_text(job)} node(s); gpupool models identical pods: use "
                         "--gpus-per-node", "gpus", "nodes")
        else:
            gpus = job.gpus.count // nodes_min
    elif job.gpus_per_task is not None:
        gpus = job.gpus_per_task.count * tasks
    else:
        gpus = 0
    cpus = _cpus_per_pod(job, tasks, gpus)
    min_count = nodes_min if nodes_min != nodes_max else None
    return _Shape(nodes_max, min_count, True, gpus, cpus, tasks)


def _gpus_for_job_only(job: SbatchJob) -> bool:
    """Whether the script asks its GPUs only for the whole job (``--gpus``, no per-node or
    per-task GPU option)."""
    return (job.gpus is not None and job.gpus_per_node is None and _gres_gpus(job) is None
            and job.gpus_per_task is None)


def _whole_nodes_share(job: SbatchJob, nodes_min: int, nodes_max: int) -> bool:
    """Whether the job is ``--exclusive`` beside ``--gpus=X`` alone over a fixed count of two
    nodes or more: each node is taken whole with every GPU it has, however the X would be
    dealt, so its pods ask the even share rounded up, the GPUs a whole node needs (a real
    22.05.8 ran ``-N2 --gpus=3 --exclusive`` and ``-N4 --gpus=5 --exclusive`` on whole idle
    nodes, 8 GPUs each, and refused ``-N2 --gpus=17 --exclusive`` on 8-GPU nodes; probe p152).
    Not modelled: nodes of several GPU counts, where a node with fewer than the share could
    still be taken."""
    return job.exclusive and _gpus_for_job_only(job) and nodes_min == nodes_max >= 2


def _spreads_gpus(job: SbatchJob, nodes_min: int, nodes_max: int) -> bool:
    """Whether select/cons_tres spreads the job's ``--gpus`` unevenly over its nodes
    (``PodSet.spread_gpus``): a fixed count of two nodes or more, and none of the requests
    that are modelled otherwise or were not probed (``--exclusive``, which takes whole nodes;
    ``--cpus-per-gpu`` beside a task count; more tasks than nodes, the split
    form of ``_splits``). A real 22.05.8 spread ``-N2 --gpus=3 --cpus-per-gpu=4`` as 2 + 1 GPUs
    with 8 + 4 CPUs (probe p117)."""
    if not _gpus_for_job_only(job) or nodes_min != nodes_max or nodes_min < 2:
        return False
    return not (job.exclusive or _splits(job, nodes_min)
                or (job.cpus_per_gpu is not None and (job.ntasks is not None or job.ntasks_per_node is not None)))


def _walks_gpus(job: SbatchJob) -> bool:
    """Whether slurmctld may give the job as many nodes as its ``--gpus`` need, or as its
    tasks need beside GPUs per node (``PodSet.walk_gpus``): no node count and none of the
    requests not probed with the walk (``_may_walk``), and either two GPUs or more for the
    whole job with no ``--ntasks``, or any GPUs beside two tasks or more (each node takes one
    task at least, so the tasks cap the nodes; with more tasks than GPUs, the walk may take
    more nodes than GPUs: a real 22.05.8 ran ``-n300 --gpus=2`` on three nodes, probe p112),
    or ``_walks_tasks``. ``-n1 --gpus=16`` is held to one node (a real 22.05.8 refused it on
    8-GPU nodes), so one task keeps the task shape."""
    if _walks_tasks(job):
        return True
    return (_gpus_for_job_only(job) and (job.ntasks is None or job.ntasks >= 2)
            and (job.gpus.count >= 2 or job.ntasks is not None) and _may_walk(job))


def _walks_tasks(job: SbatchJob) -> bool:
    """Whether the job is ``--ntasks=T`` (T >= 2) with GPUs per node (``--gres=gpu:G`` or
    ``--gpus-per-node=G``, G >= 1, and no ``--gpus`` or ``--gpus-per-task``) and no node count:
    slurmctld takes nodes holding G free GPUs until their CPUs hold the tasks, G GPUs on each
    (a real 22.05.8 ran ``-n4 --gres=gpu:2`` on one idle node, and on two nodes with two CPUs
    free each, 2 + 2 GPUs; probe p105, ``policy/slurm/gpu_walk.py``); with ``--exclusive``
    whole idle nodes until their CPUs hold the tasks (``-n20 --gres=gpu:1 --exclusive`` on two
    whole 16-core nodes, probe p153; ``select._walk_gpus``); with a ``--nodelist`` (not beside
    ``--exclusive``) from the listed nodes (``split_tasks.walk_listed``, probe p153)."""
    per_node = job.gpus_per_node.count if job.gpus_per_node is not None else _gres_gpus(job)
    return (job.ntasks is not None and job.ntasks >= 2 and bool(per_node) and job.gpus is None
            and job.gpus_per_task is None and job.cpus_per_gpu is None and job.nodes is None
            and job.ntasks_per_node is None and not (job.nodelist and job.exclusive) and not _other_walks(job))


def _other_walks(job: SbatchJob) -> bool:
    """Whether the job gives one of ``_OTHER_WALKS``, options that choose nodes another way."""
    return any(name in _OTHER_WALKS for name, _ in job.not_modelled)


def _walks_range(job: SbatchJob, least: int, most: int) -> bool:
    """Whether the job is ``--nodes=A-B`` (A < B, as sbatch sends it) with ``--gpus=X`` alone
    and no task count: slurmctld walks A to B nodes for the GPUs as it walks 1 to X without
    ``--nodes`` (probe p108: ``-N1-3 --gpus=12`` ran as 8 + 4 on idle nodes, ``-N3-4
    --gpus=12`` as 8 + 3 + 1, ``-N1-3 --gpus=4`` as 2 + 2 with two GPUs free on each node;
    ``PodSet.walk_nodes``), a ``--nodelist``'s nodes first (its count raised the least: a real
    22.05.8 ran ``-N1-3 --gpus=12 -w gpu03`` as 8 + 4 on gpu03-04, probe p158). The options
    ``_may_walk`` names keep the reader's refusal."""
    return (least < most and _gpus_for_job_only(job) and job.ntasks is None and job.ntasks_per_node is None
            and _walks_cpus_per_gpu(job) and not _other_walks(job))


def _may_walk(job: SbatchJob) -> bool:
    """No node count (``--nodes``, ``--ntasks-per-node``) and none of the requests the walk's
    probes did not have (``--exclusive`` or ``--cpus-per-gpu`` beyond ``_walks_cpus_per_gpu``,
    the options of ``_OTHER_WALKS``). A ``--nodelist`` gives the walk its least count and its
    first nodes (a real 22.05.8 ran ``--gpus=12 -w gpu03`` as 8 + 4 on gpu03-04, ``--gpus=20 -w
    gpu01,gpu02`` as 8 + 8 + 4 on gpu01-03; probe p159), beside ``--cpus-per-gpu`` too (probe
    p160: ``--gpus=12 --cpus-per-gpu=2 -w gpu04`` as 8 + 4 GPUs with 8 + 16 CPUs; the Slurm
    policy refuses it on nodes whose GPUs have a type or ``Cores=``,
    ``job_defaults.MSG_LISTED_CPG``)."""
    return (job.nodes is None and job.ntasks_per_node is None and not _other_walks(job)
            and _walks_cpus_per_gpu(job))


def _walks_cpus_per_gpu(job: SbatchJob) -> bool:
    """No ``--cpus-per-gpu`` or ``--exclusive``, or one of them beside ``--gpus=X`` alone (no
    ``--ntasks``), or ``--cpus-per-gpu`` beside ``--gpus=X`` and ``--ntasks=T`` (T <= X;
    ``_walk_tasks``): slurmctld walks nodes for such a job as without them (probe p116:
    ``--gpus=12 --cpus-per-gpu=4`` ran as 8 + 4 GPUs with 32 + 16 CPUs, ``--gpus=12
    --exclusive`` on two whole nodes, ``-N1-3`` beside either the same; probe p119: ``-n2`` and
    ``-n4`` beside ``--gpus=12 --cpus-per-gpu=4`` as without them), with memory per CPU too,
    each node's for the CPUs dealt to it (probe p160: ``--gpus=12 --cpus-per-gpu=2
    --mem-per-cpu=100`` as 8 + 4 GPUs with 16 + 8 CPUs and 1600 + 800 MB, ``-n2`` beside it the
    same). Not probed: tasks beside ``--exclusive`` (kept as task pods, which took the nodes a
    real 22.05.8 gave ``-n2 --gpus=4 --exclusive`` and ``-n4 --gpus=12 --exclusive``, p119) and
    more tasks than GPUs beside ``--cpus-per-gpu``."""
    if job.ntasks is not None and (job.cpus_per_gpu is not None or job.exclusive):
        return bool(_walk_tasks(job))
    return True


def _walk_tasks(job: SbatchJob) -> int:
    """``--ntasks=T`` where it caps the nodes of a walk whose CPUs follow its GPUs
    (``PodSet.walk_tasks``): T >= 2 beside ``--gpus=X`` (T <= X) and ``--cpus-per-gpu``, with no
    ``--exclusive``, ``--cpus-per-task``, node count or GPUs per node or task; else 0."""
    if (job.ntasks is None or job.ntasks < 2 or job.cpus_per_gpu is None or job.exclusive
            or job.cpus_per_task is not None
            or job.nodes is not None or job.ntasks_per_node is not None
            or not _gpus_for_job_only(job) or job.ntasks > job.gpus.count):
        return 0
    return job.ntasks


#: options (read, not modelled) that make cons_tres choose nodes another way, or that the walk's
#: probes did not have: ``_walks_gpus`` leaves a job giving one of them as submitted
_OTHER_WALKS = frozenset({"spread-job", "ntasks-per-gpu", "gpus-per-socket", "sockets-per-node",
                          "cores-per-socket", "ntasks-per-socket", "ntasks-per-core", "use-min-nodes", "switches"})


def _nodes_text(job: SbatchJob) -> str:
    n = job.nodes
    return f"{n[0]}-{n[1]}" if isinstance(n, tuple) else str(n)


def _task_shape(job: SbatchJob) -> _Shape:
    """No node count: ``--ntasks=N`` pods of one task each, placed anywhere."""
    count = job.ntasks or 1
    if _walks_tasks(job):
        # one node holding the T tasks and the GPUs per node (what other policies place, and
        # what slurmctld gives where one node holds the tasks); the Slurm policy walks nodes
        gpus = job.gpus_per_node.count if job.gpus_per_node is not None else _gres_gpus(job) or 0
        return _Shape(1, None, False, gpus, _cpus_per_pod(job, count, gpus), count)
    if count > 1 and (job.gpus_per_node is not None or job.gres):
        raise _error(job, "--gres/--gpus-per-node are per node, but this script gives --ntasks "
                     "without --nodes, so the node count is unknown here (gpupool walks nodes for "
                     "GPUs per node only without --nodelist, --cpus-per-gpu, --gpus "
                     "or --gpus-per-task); add --nodes",
                     "gres", "gpus_per_node", "ntasks")
    if job.gpus_per_task is not None:
        gpus = job.gpus_per_task.count
    elif job.gpus is not None:
        if job.gpus.count % count and _walks_gpus(job):
            # one pod of the T tasks and the X GPUs (what other policies place); the Slurm
            # policy walks nodes for them (a real 22.05.8 ran -n3 --gpus=16 as 8 + 8, probe
            # p104, and -n8 --gpus=3 on one idle node, -n300 --gpus=2 on three, probe p112)
            return _Shape(1, None, False, job.gpus.count, _cpus_per_pod(job, count, job.gpus.count), count)
        if job.gpus.count % count:
            raise _error(job, f"--gpus={job.gpus.text()} cannot be split evenly over --ntasks={count}; "
                         "gpupool models identical pods: use --gpus-per-task", "gpus", "ntasks")
        gpus = job.gpus.count // count
    elif job.gpus_per_node is not None:
        gpus = job.gpus_per_node.count
    else:
        gpus = _gres_gpus(job) or 0
    return _Shape(count, None, False, gpus, _cpus_per_pod(job, 1, gpus), 1)


def _cpus_per_pod(job: SbatchJob, tasks: int, gpus: int) -> int:
    if job.cpus_per_task is not None:
        return tasks * job.cpus_per_task
    if job.cpus_per_gpu is not None and gpus:
        return max(1, job.cpus_per_gpu * gpus)
    return tasks


def _memory_per_pod(job: SbatchJob, shape: _Shape) -> int:
    """MiB per pod; 0 (no request: the partition's default applies) when none is given."""
    if job.mem is not None:
        return job.mem if shape.one_per_node else math.ceil(job.mem / shape.count)
    if job.mem_per_cpu is not None:
        return job.mem_per_cpu * shape.cpus
    if job.mem_per_gpu is not None:
        return job.mem_per_gpu * shape.gpus
    return 0


def job_pod_set(job: SbatchJob) -> tuple[PodSet, str]:
    """The job's one pod set and its gang rule (documented in docs/formats/sbatch.md)."""
    walk_nodes = None  # ``--nodes=A-B`` walked for ``--gpus`` (``PodSet.walk_nodes``)
    hosts = _listed_nodes(job)  # (the --nodelist as sbatch sends it)
    walks_gpus = _walks_gpus(job)
    if job.nodes is not None:
        least, most = job.min_nodes or 1, job.max_nodes or 1
        listed = _whole_list_count(job)
        if least < listed <= most:
            # sbatch raises --nodes' least to the list's hosts before it lowers the counts to
            # the tasks (22.05's sbatch/opt.c ``_opt_verify``; slurmctld's ``_job_create``
            # does the same): ``-N1-2 -w gpu01,gpu02`` is ``-N2``. A list beyond the largest
            # count is sbatch's "invalid number of nodes" (``check_sbatch_limits``)
            least = listed
        if job.ntasks is not None and job.ntasks < most:
            # sbatch runs no more nodes than tasks ("can't run 1 processes on 2 nodes, setting
            # nnodes to 1": 22.05's sbatch/opt.c lowers the largest count, then the least, to --ntasks)
            most = max(1, job.ntasks)
            least = min(least, most)
        if _walks_range(job, least, most):
            if job.gpus.count < least:
                raise _error(job, f"--gpus={job.gpus.text()} asks fewer GPUs than the {least} nodes; Slurm "
                             "refuses the job (Invalid generic resource (gres) specification)", "gpus", "nodes")
            # one pod of the X GPUs (what other policies place); the Slurm policy walks least
            # to most nodes for them (a real 22.05.8 ran -N2-3 --gpus=8 as 7 + 1, probe p108)
            shape = _Shape(1, None, False, job.gpus.count, _cpus_per_pod(job, 1, job.gpus.count), 1)
            walk_nodes = (least, most)
        else:
            shape = _per_node_least(job, _node_shape(job, least, most))
    elif job.ntasks_per_node is not None:
        # ⌈T/K⌉ nodes at least, or the nodes a --nodelist names where those are more: a real
        # 22.05.8 ran ``-n2 --ntasks-per-node=2 -w gpu01,gpu02`` on both, 2 CPUs each (probe p149)
        nodes = max(math.ceil((job.ntasks or job.ntasks_per_node) / job.ntasks_per_node), hosts)
        shape = _node_shape(job, nodes, nodes)
    elif job.ntasks is None and hosts > 1 and not walks_gpus:
        # --nodelist alone sets the node count: a real 22.05.8 ran ``-w gpu01,gpu02
        # --gres=gpu:1`` on both nodes, one task and one GPU on each
        shape = _node_shape(job, hosts, hosts)
    else:
        shape = _task_shape(job)
    walks = walks_gpus or walk_nodes is not None
    if walks and job.gpus is not None and job.gpus.count < hosts:
        raise _error(job, f"--gpus={job.gpus.text()} asks fewer GPUs than the {hosts} nodes "
                     "--nodelist names; Slurm refuses the job (Invalid generic resource (gres) specification)",
                     "gpus", "nodelist")
    if walk_nodes is not None:  # (one pod as submitted, up to the range's largest count of nodes)
        check_sbatch_limits(job.source, job.lines, sbatch_nodelist(job), job.exclude, job.constraint,
                            walk_nodes[1], True, walk_nodes[1])
    elif walks:  # (no largest count: the walk takes what the GPUs need, the listed nodes first)
        check_sbatch_limits(job.source, job.lines, sbatch_nodelist(job), job.exclude, job.constraint,
                            None, True, 0)
    else:
        check_sbatch_limits(job.source, job.lines, sbatch_nodelist(job), job.exclude, job.constraint,
                            shape.count, shape.one_per_node, max(shape.count, job.ntasks or 0))
    extra = tuple(sorted(_extra_gres(job).items()))
    split = _split_tasks(job, shape)
    # (sbatch cut the list down to the tasks: it then sends them as both node counts)
    trimmed = job.nodes is None and job.ntasks is not None and 0 < job.ntasks < _whole_list_count(job)
    pod_set = PodSet(
        name="main", count=shape.count, cpu_m=shape.cpus * 1000,
        memory_mib=_memory_per_pod(job, shape), gpus=shape.gpus, gpu_type=_gpu_type(job),
        extra=extra, min_count=shape.min_count, one_per_node=shape.one_per_node,
        exclusive=job.exclusive, slurm_tasks=_slurm_tasks(job, shape),
        # left to slurm.conf's DefCpuPerGPU / DefMem* (the Slurm policy fills them in at submit)
        cpu_unset=job.cpus_per_task is None and job.cpus_per_gpu is None,
        memory_unset=job.mem is None and job.mem_per_cpu is None and job.mem_per_gpu is None,
        memory_whole_node=job.mem == 0,
        memory_per="" if job.mem is not None else "cpu" if job.mem_per_cpu is not None else
        "gpu" if job.mem_per_gpu is not None else "",
        cpus_per_task=job.cpus_per_task if job.cpus_per_task is not None else (1 if job.cpus_per_gpu is None else None),
        split_tasks=split,
        split_gpus=bool(split) and job.gpus_per_task is not None and job.gpus_per_task.count > 0
        and job.gpus_per_node is None and _gres_gpus(job) is None and job.gpus is None,  # GPUs from --gpus-per-task
        gpus_per_job=_gpus_per_job(job, shape),
        spread_gpus=_spreads_gpus(job, shape.min_count or shape.count, shape.count) if shape.one_per_node
        else _gpus_for_job_only(job),
        walk_gpus=walks,
        node_memory_mib=job.mem if job.mem and not shape.one_per_node and shape.count > 1 else 0,
        walk_nodes=walk_nodes,
        cpus_per_gpu_cap=job.cpus_per_gpu is not None,
        cpus_per_gpu=job.cpus_per_gpu or 0,
        walk_tasks=_walk_tasks(job) if walks else 0,
        per_node_tasks=_per_node_tasks(job, shape),
        list_count_only=shape.one_per_node and job.nodes is None and hosts > 0 and not trimmed,
        list_trimmed=trimmed,
        contiguous=_contiguous(job, shape, walks, trimmed),
    )
    return pod_set, GANG_MIN if shape.min_count is not None else GANG_ALL


def _contiguous(job: SbatchJob, shape: _Shape, walks: bool, trimmed: bool) -> bool:
    """Whether ``--contiguous`` is marked on this job (``PodSet.contiguous``): every shape but
    a list sbatch cut down to the tasks (exclusive task pods too: ``select._exclusive_tasks``
    walks runs as for other jobs; review 159). Its
    nodes come from one run (``eval_nodes.pick_nodes``: pod-a-node shapes, GPUs per job over a
    fixed count, ``--ntasks-per-node``, task pods, split forms; ``gpu_walk.walk``: the walks for
    GPUs; a real 22.05.8 ran ``--gpus=12``, ``-n20 --gres=gpu:1``, ``-N2 --gpus=4`` and ``-N2
    --ntasks-per-node=1`` beside it on one run of consecutive nodes, probes p167, p169), and it
    skips bf_busy_nodes' busy-first pick. Beside a list of several hosts the Slurm policy fills
    the list's gaps in the pool's node order (``contiguous_list``), which the reader cannot
    see."""
    if not any(name == "contiguous" for name, _ in job.not_modelled):
        return False
    return not trimmed


def _tasks_per_node(job: SbatchJob) -> int:
    """The tasks each node gets from ``--ntasks-per-node=K`` (0 without it): K, but one where
    the job has one task (a real 22.05.8 ran ``-n1 --ntasks-per-node=2`` on 1 CPU, and
    ``-n3 --ntasks-per-node=4`` on 4; probe p155)."""
    if job.ntasks_per_node is None:
        return 0
    return 1 if job.ntasks == 1 else job.ntasks_per_node


def _per_node_least(job: SbatchJob, shape: _Shape) -> _Shape:
    """A ``--nodes`` shape beside ``--ntasks-per-node=K`` and ``--ntasks=T``: select takes
    ⌈T/K⌉ nodes at least whatever the range's least (``_select_nodes``; a real 22.05.8 left
    ``-N1-3 -n10 --ntasks-per-node=4`` pending while two nodes were free, probe p154). Where
    that is more than the largest count the pods cannot hold the tasks and the submit check
    refuses the job (``submit_check._tasks_left_over``: ``-N1-2`` and ``-N2`` beside ``-n10
    --ntasks-per-node=4`` were refused, "Requested node configuration is not available")."""
    if job.ntasks_per_node is None or job.ntasks is None or not shape.one_per_node or shape.min_count is None:
        return shape
    need = max(shape.min_count, -(-job.ntasks // shape.tasks))
    return shape._replace(min_count=None if need >= shape.count else need)


def _per_node_tasks(job: SbatchJob, shape: _Shape) -> tuple[int, int, int] | None:
    """``PodSet.per_node_tasks`` for ``--ntasks-per-node=K``: the least nodes slurmctld stores
    (``--nodes``' least, raised to a nodelist's count as sbatch raises it; a nodelist's count
    alone; 0 for neither), the tasks (``--ntasks``, else those least nodes × K, as sbatch
    and ``validate_job_create_req`` fill num_tasks in) and the tasks of each pod; else None."""
    if job.ntasks_per_node is None or not shape.one_per_node:
        return None
    listed = _listed_nodes(job)
    if job.nodes is not None:
        least = max(min(job.min_nodes or 1, shape.count), listed)
    else:
        least = listed
    tasks = job.ntasks if job.ntasks is not None else max(least, 1) * job.ntasks_per_node
    return least, tasks, shape.tasks


def _gpus_per_job(job: SbatchJob, shape: _Shape) -> int:
    """The GPUs slurmctld counts for the whole job (its ``gres_per_job``) where the script
    asks none per node: ``--gpus``, or ``--gpus-per-task`` × the tasks (``--ntasks``, else the
    least nodes × tasks per node); else 0."""
    if job.gpus_per_node is not None or _gres_gpus(job) is not None:
        return 0
    if job.gpus is not None:
        return job.gpus.count
    if job.gpus_per_task is not None:
        return job.gpus_per_task.count * (job.ntasks or (shape.min_count or shape.count) * shape.tasks)
    return 0


def _split_tasks(job: SbatchJob, shape: _Shape) -> int:
    """``--ntasks`` where select/cons_tres spreads the tasks unevenly over a fixed node count
    (``PodSet.split_tasks``; ``_splits``) or over a node range (``_range_splits``), else 0."""
    if not shape.one_per_node:
        return 0
    return _splits(job, shape.count) if shape.min_count is None else _range_splits(job)


def _range_splits(job: SbatchJob) -> int:
    """``--ntasks`` beside ``--nodes=A-B`` (A < B once sbatch lowered B to the tasks) where
    the tasks are dealt out over the nodes select/cons_tres takes, B where it can, A at least
    (a real 22.05.8 on idle 16-core nodes ran ``-N1-2 -n8`` as 7 + 1 CPUs and ``-N1-2 -n20``
    as 16 + 4, and ``-N1-2 -n20 --exclusive`` on two whole nodes; with GPUs per node as
    without, with ``--gpus-per-task`` from A nodes up; probes p143-p145,
    ``policy/slurm/split_tasks.py``), else 0. Not probed, so kept at ⌈T/A⌉ tasks a node:
    ``--gpus``, ``--gpus-per-task`` beside GPUs per node or ``--exclusive``, ``--ntasks-per-node``,
    ``--cpus-per-gpu`` and the options of ``_OTHER_WALKS`` (``--use-min-nodes``,
    ``--spread-job``: other node walks)."""
    if (job.ntasks is None or job.ntasks_per_node is not None or job.cpus_per_gpu is not None
            or job.gpus is not None
            or (job.gpus_per_task is not None and (job.gpus_per_node is not None or _gres_gpus(job) is not None
                                                   or job.exclusive))
            or _other_walks(job)):
        return 0
    return job.ntasks


def _splits(job: SbatchJob, nodes: int) -> int:
    """``--ntasks`` where it is split unevenly over a fixed count of ``nodes``, else 0:
    ``--nodes=N --ntasks=T`` with T > N ≥ 2 and no ``--ntasks-per-node`` (with
    ``--gpus-per-task`` the GPUs follow the tasks). Left even (not probed): exclusive jobs,
    which take whole nodes, and ``--cpus-per-gpu``."""
    if (job.nodes is None or nodes < 2 or job.ntasks is None or job.ntasks <= nodes or job.ntasks_per_node is not None
            or job.exclusive or job.cpus_per_gpu is not None):
        return 0
    return job.ntasks


def sbatch_nodelist(job: SbatchJob) -> str | None:
    """``--nodelist`` as sbatch sends it: where it lowers ``--nodes`` to fewer ``--ntasks`` it
    also drops the list's last hosts, sorted and without repeats, down to that count (22.05's
    sbatch/opt.c: ``hostlist_uniq``, then ``hostlist_pop``)."""
    if job.nodelist is None or job.ntasks is None or job.ntasks < 1:
        return job.nodelist
    try:
        hosts = sorted(set(expand_hostlist(job.nodelist)))
    except ValueError:
        return job.nodelist  # the checks after the shape report it, naming the line
    # (a nodelist sets sbatch's node count too: its hosts, or --nodes' least where more; a
    # real 22.05.8 ran ``-n1 -w gpu01,gpu02`` and ``-n1 --ntasks-per-node=2 -w gpu01,gpu02``
    # on gpu01 alone, probes p154 and p155. More hosts than --nodes' largest count is
    # refused first, "invalid number of nodes", so the list stays whole for that check)
    if job.ntasks >= max(len(hosts), (job.min_nodes or 1) if job.nodes is not None else 0):
        return job.nodelist
    if job.nodes is not None and len(hosts) > (job.max_nodes or 1):
        return job.nodelist
    return compress_hostlist(hosts[:job.ntasks]) if len(hosts) > job.ntasks else job.nodelist


def _whole_list_count(job: SbatchJob) -> int:
    """How many distinct hosts ``--nodelist`` names before sbatch trims it to the tasks."""
    return _hosts(job.nodelist)


def _listed_nodes(job: SbatchJob) -> int:
    """How many nodes ``--nodelist`` names as sbatch sends it (after ``sbatch_nodelist``)."""
    return _hosts(sbatch_nodelist(job))


def _hosts(text: str | None) -> int:
    """The distinct hosts of hostlist ``text`` (sbatch's ``hostlist_uniq``); 0 without one or
    when it does not parse: the checks after the shape report that, naming the line."""
    if not text:
        return 0
    try:
        return len(set(expand_hostlist(text)))
    except ValueError:
        return 0


def _slurm_tasks(job: SbatchJob, shape: _Shape) -> tuple[int, int, int] | None:
    """What select/cons_tres's ``_select_cores`` takes as a node's least and most tasks (0: no
    maximum) and the CPUs per task, for a per-node GPU request with a node count, or any GPU
    request on one node (the requests whose cores and GPUs follow gres.conf ``Cores=``,
    policy/slurm/affinity.py); else None."""
    max_nodes = shape.count  # (as sbatch sends it: no more nodes than tasks)
    # on one node --gpus and --gpus-per-task are picked as a per-node count is (a real 22.05.8
    # gave them the same cores and GPUs as --gres; tests/differential/test_real_slurm_gpu_affinity.py)
    per_node = (job.gpus_per_node is not None or _gres_gpus(job) is not None
                or (max_nodes == 1 and (job.gpus is not None or job.gpus_per_task is not None)))
    cpt = job.cpus_per_task or 1
    if not shape.one_per_node and shape.count == 1 and job.ntasks == 1 and shape.gpus and not job.exclusive:
        # ``-n1`` without ``--nodes``: slurmctld holds the job to one node (max_nodes 1, so
        # ``-n1 --gpus=16`` is refused on 8-GPU nodes), and with one task a node counts one
        # task's CPUs; nodes tie on CPUs and the first in index order wins (``diff-slurm --mix
        # gpus-tasks`` seed 1: a real 22.05.8 planned ``-n1 --gpus=4`` on gpu02, 126 CPUs free,
        # before gpu04 with 124)
        return (1, 1, cpt)
    if not shape.one_per_node or not shape.gpus or not per_node or job.exclusive:
        return None
    if job.ntasks_per_node:
        return (job.ntasks_per_node, job.ntasks_per_node, cpt)
    if max_nodes == 1:
        return (job.ntasks, job.ntasks, cpt) if job.ntasks else (1, 0, cpt)
    if job.ntasks == 1 or (job.ntasks is not None and job.ntasks == (shape.min_count or shape.count) == max_nodes):
        return (1, 1, cpt)
    return (1, 0, cpt)


def _extra_gres(job: SbatchJob) -> dict[str, int]:
    """Non-GPU GRES as ``gres/<name>`` extra resources, per pod."""
    out: dict[str, int] = {}
    for g in job.gres:
        if g.name != "gpu":
            out[f"gres/{g.name}"] = out.get(f"gres/{g.name}", 0) + g.count
    return out


def sbatch_to_workload(
    job: SbatchJob,
    *,
    id: int,
    submit_time: float,
    runtime: float,
    outcome: str = "COMPLETED",
    checkpoint_interval: float | None = None,
    epoch: datetime | None = None,
    dependency: str | None = None,
) -> list[Workload]:
    """The workloads one submission of ``job`` creates: one, or one per array task.

    Array tasks take ids ``id, id+1, …`` with ``array_job_id=id`` (Slurm gives the array
    the first task's id). ``dependency`` replaces the script's dependency text (a folder
    passes one with script names resolved to ids). ``epoch`` places wall-clock --begin times.
    """
    if outcome not in OUTCOMES:
        raise InputError(job.source, f"outcome: expected one of {', '.join(OUTCOMES)}, got {outcome!r}")
    pod_set, gang = job_pod_set(job)
    base = Workload(
        id=id, name=job.name, pod_sets=(pod_set,), submit_time=float(submit_time),
        runtime=float(runtime),
        time_limit=None if job.time is None else float(job.time), outcome=outcome, gang=gang,
        checkpoint_interval=checkpoint_interval, account=job.account, qos=job.qos,
        partition=job.partition, nice=job.nice or 0,
        dependency=dependency if dependency is not None else (job.dependency.text() if job.dependency else None),
        begin_time=job.begin_offset(epoch, submit_time),
        requeue=True if job.requeue is None else job.requeue, oversubscribe=job.oversubscribe,
        signal=job.signal.text() if job.signal else None, output=job.output,
        time_min=None if job.time_min is None else float(job.time_min), constraint=job.constraint,
        nodelist=sbatch_nodelist(job),
        exclude=job.exclude, licenses=job.licenses, source=job.source,
    )
    if job.array is None:
        return [base]
    last = max(job.array.task_ids)
    return [
        replace(base, id=id + i, array_job_id=id, array_task_id=task,
                array_max_running=job.array.max_running, array_last_task_id=last, labels={},
                source=f"{job.source}[{task}]")
        for i, task in enumerate(job.array.task_ids)
    ]
