"""``sacctmgr dump`` files: the account tree, users, associations and QOS of one cluster.

Why: fair share, QOS preemption and limits all hang off the accounting tree, and operators
already have it as the file ``sacctmgr dump CLUSTER file=…`` writes (and ``sacctmgr load``
reads). Its lines are ``Kind - 'name'`` followed by ``:Option=value`` pairs:

* ``Cluster - 'seed':Fairshare=1:QOS='normal'`` — options of the cluster's root association
  (gpupool keeps it as ``accounts["root"]``);
* ``Parent - 'root'`` — the account that following Account/User lines belong to (it must
  be root or an account defined earlier);
* ``Account - 'ml-research':Description='…':Organization='…':Fairshare=50:GrpTRES=gres/gpu=16``;
* ``User - 'alice':DefaultAccount='ml-research':AdminLevel='None':Fairshare=1:QOS='normal,high'``;
* ``QOS - 'high':Description='…':Priority=100:Preempt='normal':PreemptMode='REQUEUE':…``.

QOS lines: Slurm 22.05 dumps do not contain QOS; newer ``sacctmgr`` versions write them
before the Cluster line with the field names used here (MaxTRESPerUser, MaxJobsPU,
MaxWallDurationPerJob, UsageFactor, GraceTime, Flags, …). gpupool accepts them anywhere in
the file, also under the short names sacctmgr's command line takes (``MaxWall``,
``MaxTRESPU``, ``MaxJobsPerUser``, ``MaxSubmitJobsPerUser``), and writes them first.

Typing: TRES maps are ``{"cpu": 64, "gres/gpu": 16, "mem": 512000}`` (lower-case TRES
types, memory in MiB); ``MaxWallDurationPerJob`` (minutes or a Slurm time) and
``GraceTime`` (seconds) become seconds; ``Fairshare`` is an int or ``"parent"``. Options
gpupool does not act on are kept in ``extra`` and listed once in ``Accounting.not_modelled``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from gpupool.errors import InputError, MissingReferenceError
from gpupool.formats.quantity import QuantityError, slurm_memory_mib
from gpupool.formats.slurm_conf import tres_name
from gpupool.formats.slurm_time import SlurmTimeError, format_duration, parse_duration
from gpupool.model.slurm import Accounting, Association, Qos, User

__all__ = ["parse_sacctmgr_dump", "render_sacctmgr_dump", "parse_tres", "format_tres"]

# Option names (Slurm's spelling) per line kind. "model" options fill dataclass fields;
# "keep" options go to ``extra``.
_ASSOC_MODEL = ("Fairshare", "GrpTRES", "GrpJobs", "GrpSubmitJobs", "MaxJobs", "MaxSubmitJobs", "MaxTRESPerJob",
                "MaxWallDurationPerJob", "QOS", "DefaultQOS", "Priority")
_ASSOC_KEEP = ("GrpJobsAccrue", "GrpTRESMins", "GrpTRESRunMins", "GrpWall", "MaxJobsAccrue",
               "MaxTRESMinsPerJob", "MaxTRESRunMins", "MaxTRESPerNode", "MinPrioThresh")
_QOS_MODEL = ("Description", "Priority", "Preempt", "PreemptMode", "GrpTRES", "MaxTRESPerUser", "MaxTRESPerJob",
              "MaxJobsPU", "MaxSubmitJobsPU", "MaxWallDurationPerJob", "UsageFactor", "GraceTime", "Flags",
              "GrpJobs", "MaxJobsPA", "MaxTRESPerAccount", "MinTRESPerJob", "GrpSubmitJobs", "MaxSubmitJobsPA",
              "PreemptExemptTime")
_QOS_KEEP = ("GrpJobsAccrue", "GrpTRESMins", "GrpTRESRunMins", "GrpWall",
             "LimitFactor", "MaxJobsAccruePA", "MaxJobsAccruePU",
             "MaxTRESMinsPerJob", "MaxTRESPerNode", "MaxTRESRunMinsPerAccount",
             "MaxTRESRunMinsPerUser", "MinPrioThresh", "UsageThreshold")
_USER_MODEL = ("DefaultAccount", "AdminLevel")
_USER_KEEP = ("Coordinator", "DefaultWCKey", "WCKeys", "Comment")
_ACCOUNT_MODEL = ("Description", "Organization")
_CLUSTER_KEEP = ("Classification", "Federation", "Features", "FedState")
_ALIASES = {
    "fairshare": "Fairshare", "shares": "Fairshare", "maxwall": "MaxWallDurationPerJob",
    "maxwalldurationperjob": "MaxWallDurationPerJob", "maxtrespu": "MaxTRESPerUser",
    "maxjobsperuser": "MaxJobsPU", "maxsubmitjobsperuser": "MaxSubmitJobsPU", "maxtrespa": "MaxTRESPerAccount",
    "maxjobsperaccount": "MaxJobsPA", "maxsubmitjobsperaccount": "MaxSubmitJobsPA", "maxtres": "MaxTRESPerJob",
    "defqos": "DefaultQOS", "partition": "Partition",
}
_TRES_OPTIONS = {"GrpTRES", "GrpTRESMins", "GrpTRESRunMins", "MaxTRESPerJob", "MaxTRESPerUser", "MaxTRESPerNode",
                 "MaxTRESMinsPerJob", "MaxTRESRunMins", "MaxTRESPerAccount", "MaxTRESRunMinsPerAccount",
                 "MaxTRESRunMinsPerUser", "MinTRESPerJob"}
_KINDS = {"cluster": "Cluster", "parent": "Parent", "account": "Account", "project": "Account", "user": "User",
          "qos": "QOS"}


def _table(*groups: tuple[str, ...]) -> dict[str, str]:
    out = {name.lower(): name for group in groups for name in group}
    out.update({k: v for k, v in _ALIASES.items() if v.lower() in out})
    return out


_OPTIONS = {
    "Cluster": _table(_ASSOC_MODEL, _ASSOC_KEEP, _CLUSTER_KEEP),
    "Account": _table(_ASSOC_MODEL, _ASSOC_KEEP, _ACCOUNT_MODEL),
    "User": _table(_ASSOC_MODEL, _ASSOC_KEEP, _USER_MODEL, _USER_KEEP, ("Partition",)),
    "QOS": _table(_QOS_MODEL, _QOS_KEEP),
    "Parent": {},
}
_ALL_OPTION_NAMES = {name for table in _OPTIONS.values() for name in table}
#: per line kind, the options the model acts on (the others are noted as not modelled: an
#: option modelled for associations, such as GrpJobs, may not be for QOS)
_MODELLED = {"QOS": set(_QOS_MODEL), "Cluster": set(_ASSOC_MODEL),
             "Account": set(_ASSOC_MODEL) | set(_ACCOUNT_MODEL),
             "User": set(_ASSOC_MODEL) | set(_USER_MODEL), "Parent": set()}
_ADMIN_LEVELS = {"none": "None", "operator": "Operator", "administrator": "Administrator",
                 "admin": "Administrator"}
#: QOS flags 22.05's sacctmgr knows, in the order it matches a word against them (each by
#: case-insensitive substring: ``_str_2_qos_flags``, so "NoReserveNow" sets NoReserve)
QOS_FLAGS = ("DenyOnLimit", "EnforceUsageThreshold", "PartitionMinNodes", "PartitionMaxNodes",
             "PartitionTimeLimit", "RequiresReservation", "OverPartQOS", "NoReserve", "NoDecay",
             "UsageFactorSafe")
#: the ones the Slurm policy acts on; the others are kept and noted as not modelled
QOS_FLAGS_MODELLED = frozenset({"DenyOnLimit", "PartitionTimeLimit", "PartitionMaxNodes", "PartitionMinNodes",
                                "OverPartQOS", "NoReserve", "RequiresReservation"})
_QOS_PREEMPT_MODES = {"OFF", "CANCEL", "REQUEUE", "SUSPEND", "GANG", "CLUSTER", "WITHIN", "PRIORITY"}
_TRES_PLAIN = {"cpu", "mem", "energy", "node", "billing", "vmem", "pages"}
_TRES_PREFIXED = {"gres", "license", "bb", "fs", "ic"}

_HEAD_RE = re.compile(r"^(\w+)\s+-\s+(.*)$")


class _Err(ValueError):
    """A value problem; the caller turns it into InputError at file:line."""


@dataclass(slots=True)
class _Line:
    path: str
    number: int
    kind: str
    name: str
    options: list[tuple[str, str]] = field(default_factory=list)  # (canonical key, value)

    @property
    def where(self) -> str:
        return f"{self.path}:{self.number}"

    def error(self, message: str, cls: type[InputError] = InputError) -> InputError:
        return cls(self.path, message, line=self.number)


# ------------------------------------------------------------------------------------------
# TRES


def _tres_key(name: str) -> str:
    kind, slash, rest = name.strip().partition("/")
    kind = kind.lower()
    if slash:
        if kind not in _TRES_PREFIXED or not rest:
            raise _Err(f"unknown TRES {name!r}; expected e.g. gres/gpu, license/NAME")
        return tres_name(name)  # GRES TRES lower-case, as the database finds and stores them
    if kind not in _TRES_PLAIN:
        raise _Err(f"unknown TRES {name!r}; expected one of {', '.join(sorted(_TRES_PLAIN))} or gres/NAME")
    return kind


def parse_tres(text: str) -> dict[str, int]:
    """``cpu=64,gres/gpu=16,mem=500G`` -> ``{"cpu": 64, "gres/gpu": 16, "mem": 512000}`` (mem in MiB)."""
    out: dict[str, int] = {}
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        name, eq, value = item.rpartition("=") if item.count("=") > 1 else item.partition("=")
        if not eq or not name:
            raise _Err(f"expected TRES=count items such as 'cpu=64,gres/gpu=16,mem=500G', got {item!r}")
        key = _tres_key(name)
        if key == "mem":
            try:
                out[key] = slurm_memory_mib(value)
            except QuantityError as exc:
                raise _Err(f"mem: {exc}") from None
        elif re.fullmatch(r"\d+", value):
            out[key] = int(value)
        else:
            raise _Err(f"TRES {name!r} needs a whole number, got {value!r}")
    return out


def format_tres(tres: dict[str, int]) -> str:
    """Inverse of ``parse_tres`` (memory written as G when whole gibibytes, else M)."""
    parts = []
    for key, value in tres.items():
        if key == "mem":
            parts.append(f"mem={value // 1024}G" if value % 1024 == 0 and value else f"mem={value}M")
        else:
            parts.append(f"{key}={value}")
    return ",".join(parts)


# ------------------------------------------------------------------------------------------
# Lines


def _split_options(text: str) -> list[str]:
    """Split at ':' outside quotes."""
    parts: list[str] = []
    quote = ""
    start = 0
    for pos, char in enumerate(text):
        if quote:
            if char == quote:
                quote = ""
        elif char in "'\"":
            quote = char
        elif char == ":":
            parts.append(text[start:pos])
            start = pos + 1
    if quote:
        raise _Err(f"a {quote} quote is never closed")
    parts.append(text[start:])
    return parts


def _unquote(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value


def _parse_line(path: str, number: int, text: str) -> _Line:
    m = _HEAD_RE.match(text)
    if not m or m.group(1).lower() not in _KINDS:
        raise InputError(path, "expected a line such as \"Account - 'name':Option=value\" with kind "
                               f"Cluster, Parent, Account, User or QOS, got {text!r}", line=number)
    kind = _KINDS[m.group(1).lower()]
    try:
        segments = _split_options(m.group(2))
    except _Err as exc:
        raise InputError(path, str(exc), line=number) from None
    name = _unquote(segments[0])
    line = _Line(path, number, kind, name)
    if not name:
        raise line.error(f"{kind} line needs a name, e.g. {kind} - 'name'")
    table = _OPTIONS[kind]
    merged: list[str] = []
    for segment in segments[1:]:
        key = segment.split("=", 1)[0].strip()
        starts_option = "=" in segment and (
            key.lower().rstrip("+-") in _ALL_OPTION_NAMES
            or (key.isalpha() and not (merged and _option_key(merged[-1], table) in _TRES_OPTIONS))
        )
        if merged and not starts_option:
            merged[-1] += ":" + segment  # a ':' inside a value (2-00:00:00, gres/gpu:a100=4)
        else:
            merged.append(segment)
    seen: set[str] = set()
    for segment in merged:
        key, eq, value = segment.partition("=")
        key = key.strip()
        if not eq or not key:
            raise line.error(f"expected Option=value after ':', got {segment!r}")
        if key.endswith(("+", "-")):
            raise line.error(f"{key}= (add to or remove from inherited values) is not supported in a dump file; "
                             f"list the full value with {key[:-1]}=")
        canon = table.get(key.lower())
        if canon is None:
            valid = ", ".join(sorted(set(table.values()))) or "no options"
            raise line.error(f"unknown {kind} option {key!r}; expected one of {valid}")
        if canon in seen:
            raise line.error(f"{canon} is given twice on this line")
        seen.add(canon)
        line.options.append((canon, _unquote(value)))
    return line


def _option_key(segment: str, table: dict[str, str]) -> str | None:
    return table.get(segment.split("=", 1)[0].strip().lower())


# ------------------------------------------------------------------------------------------
# Values


def _int(value: str, key: str) -> int:
    if not re.fullmatch(r"\d+", value.strip()):
        raise _Err(f"{key} must be a whole number, got {value!r}")
    return int(value)


def _wall(value: str, key: str) -> int | None:
    try:
        return parse_duration(value)
    except SlurmTimeError as exc:
        raise _Err(f"{key}: {exc}") from None


def _names(value: str) -> tuple[str, ...]:
    return tuple(v.strip() for v in value.split(",") if v.strip())


def _fairshare(value: str) -> int | str:
    if value.strip().lower() == "parent":
        return "parent"
    return _int(value, "Fairshare")


def _float(value: str, key: str) -> float:
    try:
        return float(value)
    except ValueError:
        raise _Err(f"{key} must be a number, got {value!r}") from None


def _tres(value: str, key: str) -> dict[str, int]:
    return parse_tres(value)


def _text(value: str, key: str) -> str:
    return value


#: option -> (field, reader) for the options that set one field of the object as read; the
#: options that need more (Fairshare, QOS lists, PreemptMode, GraceTime, Flags) are handled
#: by name in ``_apply_assoc`` / ``_apply_qos``
_ASSOC_FIELDS: dict[str, tuple] = {
    "GrpTRES": ("grp_tres", _tres), "GrpJobs": ("grp_jobs", _int), "MaxJobs": ("max_jobs", _int),
    "MaxSubmitJobs": ("max_submit_jobs", _int), "GrpSubmitJobs": ("grp_submit_jobs", _int),
    "MaxTRESPerJob": ("max_tres_per_job", _tres), "MaxWallDurationPerJob": ("max_wall", _wall),
    "Priority": ("priority", _int), "Description": ("description", _text), "Organization": ("organization", _text),
}
_QOS_FIELDS: dict[str, tuple] = {
    "Description": ("description", _text), "Priority": ("priority", _int),
    "GrpTRES": ("grp_tres", _tres), "MaxTRESPerUser": ("max_tres_per_user", _tres),
    "MaxTRESPerJob": ("max_tres_per_job", _tres), "MaxTRESPerAccount": ("max_tres_per_account", _tres),
    "MinTRESPerJob": ("min_tres_per_job", _tres), "MaxJobsPU": ("max_jobs_per_user", _int),
    "MaxSubmitJobsPU": ("max_submit_jobs_per_user", _int), "GrpJobs": ("grp_jobs", _int),
    "MaxJobsPA": ("max_jobs_per_account", _int), "GrpSubmitJobs": ("grp_submit_jobs", _int),
    "MaxSubmitJobsPA": ("max_submit_jobs_per_account", _int), "MaxWallDurationPerJob": ("max_wall", _wall),
    "UsageFactor": ("usage_factor", _float),
}


def _apply_assoc(assoc: Association, key: str, value: str) -> None:
    field_reader = _ASSOC_FIELDS.get(key)
    if field_reader is not None:
        setattr(assoc, field_reader[0], field_reader[1](value, key))
    elif key == "Fairshare":
        assoc.fairshare = _fairshare(value)
    elif key == "QOS":
        names = _names(value)
        if any(n[:1] in "+-" for n in names):
            # slurmdbd adds or takes such names from the list inherited from above; a dump
            # holds whole lists
            raise _Err(f"QOS={value!r}: '+'/'-' names (add to or remove from the inherited list) are not "
                       "supported in a dump file; write the full list")
        assoc.qos = names
    elif key == "DefaultQOS":
        assoc.default_qos = value or None
    else:
        _check_kept(key, value)
        assoc.extra[key] = value


def _check_kept(key: str, value: str) -> None:
    """Kept options are stored as text, but still checked so a typo fails here, not later."""
    if key in _TRES_OPTIONS:
        parse_tres(value)
    elif key in ("GrpWall",):
        _wall(value, key)
    elif key in ("GrpJobsAccrue", "GrpSubmitJobs", "MaxJobsAccrue", "MinPrioThresh", "Priority", "MaxJobsPA",
                 "MaxJobsAccruePA", "MaxJobsAccruePU", "MaxSubmitJobsPA"):
        _int(value, key)
    elif key in ("LimitFactor", "UsageThreshold"):
        _float(value, key)


def _clears_flags(value: str) -> bool:
    """Whether a ``Flags=`` value clears every flag: sacctmgr tests ``atoi(value) == -1``, so
    "-1" does, and so does "-1,DenyOnLimit"."""
    return re.match(r"\s*-1(?!\d)", value) is not None


def qos_flags(value: str) -> tuple[str, ...]:
    """The QOS flags a ``Flags=`` value sets, by their canonical names: each comma-separated
    word sets the first flag of ``QOS_FLAGS`` whose name it contains, any case; "-1" clears
    them all. A word naming no flag sets nothing, and a value in which no word names one is
    refused, as sacctmgr refuses it ("Unknown QOS flag used")."""
    words = _names(value)
    if _clears_flags(value):
        return ()
    found: list[str] = []
    for word in words:
        low = word.lower()
        flag = next((f for f in QOS_FLAGS if f.lower() in low), None)
        if flag is not None and flag not in found:
            found.append(flag)
    if not found:
        raise _Err(f"Flags={value!r} names no QOS flag; expected a comma list of {', '.join(QOS_FLAGS)}")
    return tuple(found)


def _apply_qos(qos: Qos, key: str, value: str) -> None:
    field_reader = _QOS_FIELDS.get(key)
    if field_reader is not None:
        setattr(qos, field_reader[0], field_reader[1](value, key))
    elif key == "Preempt":
        qos.preempt = _names(value)
    elif key == "PreemptMode":
        modes = [m.strip().upper() for m in value.split(",") if m.strip()]
        if not modes or any(m not in _QOS_PREEMPT_MODES for m in modes):
            raise _Err(f"PreemptMode must be a comma list of {', '.join(sorted(_QOS_PREEMPT_MODES))}, got {value!r}")
        qos.preempt_mode = ",".join(modes)
    elif key == "GraceTime":
        text = value.strip()
        qos.grace_time = _int(text, key) if text.isdigit() else (_wall(text, key) or 0)
    elif key == "Flags":
        qos.flags = qos_flags(value)
    elif key == "PreemptExemptTime":
        # sacctmgr reads it as any Slurm time (time_str2secs: a bare number is minutes);
        # -1, INFINITE and UNLIMITED leave it unset
        qos.preempt_exempt_time = None if value.strip() == "-1" else _wall(value, key)
    else:
        _check_kept(key, value)
        qos.extra[key] = value


# ------------------------------------------------------------------------------------------
# The parser


class _Parser:
    def __init__(self, path: str) -> None:
        self.path = path
        self.acct = Accounting(source=path)
        self.cluster_line: _Line | None = None
        self.parent: str | None = None
        self.account_lines: dict[str, str] = {}
        self.user_lines: dict[str, str] = {}
        self.assoc_lines: dict[tuple[str, str, str], str] = {}
        self.qos_lines: dict[str, str] = {}
        self._reported: set[str] = set()

    def note(self, line: _Line, key: str) -> None:
        label = f"{line.kind}:{key}"
        if key not in _MODELLED.get(line.kind, ()) and label not in self._reported:
            self._reported.add(label)
            self.acct.not_modelled.append((line.where, label))

    def handle(self, line: _Line) -> None:
        try:
            getattr(self, f"on_{line.kind.lower()}")(line)
        except _Err as exc:
            raise line.error(str(exc)) from None

    def on_qos(self, line: _Line) -> None:
        if line.name in self.qos_lines:
            raise line.error(f"QOS {line.name!r} is defined twice (first at {self.qos_lines[line.name]})")
        self.qos_lines[line.name] = line.where
        qos = Qos(line.name)
        for key, value in line.options:
            _apply_qos(qos, key, value)
            self.note(line, key)
            if key == "Flags":
                self._note_flags(line, value, qos.flags)
        self.acct.qos[line.name] = qos

    def _note_flags(self, line: _Line, value: str, flags: tuple[str, ...]) -> None:
        """Not-modelled notes for the QOS flags the policy does not act on, and for words of
        ``Flags=`` that set no flag (sacctmgr drops them without a word)."""
        if _clears_flags(value):
            return
        for flag in flags:
            if flag not in QOS_FLAGS_MODELLED:
                self.acct.not_modelled.append((line.where, f"QOS:Flags={flag}"))
        for word in _names(value):
            if not any(f.lower() in word.lower() for f in QOS_FLAGS):
                self.acct.not_modelled.append((line.where, f"QOS:Flags={word} (names no QOS flag: sacctmgr ignores it)"))

    def on_cluster(self, line: _Line) -> None:
        if self.cluster_line is not None:
            raise line.error(f"a dump file holds one cluster; 'Cluster' was already given at {self.cluster_line.where}")
        self.cluster_line = line
        self.acct.cluster = line.name
        root = Association(account="root")
        for key, value in line.options:
            _apply_assoc(root, key, value)
            self.note(line, key)
        self.acct.accounts["root"] = root
        self.account_lines["root"] = line.where

    def _need_cluster(self, line: _Line) -> None:
        if self.cluster_line is None:
            raise line.error(f"expected a \"Cluster - 'name'\" line before this {line.kind} line")

    def on_parent(self, line: _Line) -> None:
        self._need_cluster(line)
        if line.options:
            raise line.error("a Parent line takes only a name")
        if line.name not in self.acct.accounts:
            raise line.error(
                f"Parent {line.name!r} is not defined yet; its Account line must come before "
                "the lines that use it as Parent", MissingReferenceError)
        self.parent = line.name

    def _need_parent(self, line: _Line) -> str:
        self._need_cluster(line)
        if self.parent is None:
            raise line.error(f"expected a \"Parent - 'account'\" line before this {line.kind} line")
        return self.parent

    def on_account(self, line: _Line) -> None:
        parent = self._need_parent(line)
        if line.name in self.account_lines:
            raise line.error(f"account {line.name!r} is defined twice (first at {self.account_lines[line.name]})")
        self.account_lines[line.name] = line.where
        assoc = Association(account=line.name, parent=parent)
        for key, value in line.options:
            _apply_assoc(assoc, key, value)
            self.note(line, key)
        self.acct.accounts[line.name] = assoc

    def on_user(self, line: _Line) -> None:
        parent = self._need_parent(line)
        user = self.acct.users.get(line.name) or User(line.name)
        assoc = Association(account=parent, user=line.name)
        for key, value in line.options:
            self.note(line, key)
            if key == "DefaultAccount":
                self._merge_user(line, user, "default_account", value, key)
            elif key == "AdminLevel":
                level = _ADMIN_LEVELS.get(value.strip().lower())
                if level is None:
                    raise _Err(f"AdminLevel must be None, Operator or Administrator, got {value!r}")
                self._merge_user(line, user, "admin_level", level, key, default="None")
            elif key in _USER_KEEP:
                if key in user.extra and user.extra[key] != value:
                    raise _Err(f"user {line.name!r}: {key} is {user.extra[key]!r} on an earlier line "
                               f"({self.user_lines[line.name]}) and {value!r} here")
                user.extra[key] = value
            else:
                _apply_assoc(assoc, key, value)
        ident = (parent, line.name, assoc.extra.get("Partition", ""))
        if ident in self.assoc_lines:
            raise line.error(f"user {line.name!r} is listed twice under account {parent!r} "
                             f"(first at {self.assoc_lines[ident]})")
        self.assoc_lines[ident] = line.where
        self.user_lines.setdefault(line.name, line.where)
        self.acct.users[line.name] = user
        self.acct.user_associations.append(assoc)

    def _merge_user(self, line: _Line, user: User, attr: str, value: str, key: str, default: object = None) -> None:
        current = getattr(user, attr)
        if current != default and current != value:
            raise _Err(f"user {line.name!r}: {key} is {current!r} on an earlier line "
                       f"({self.user_lines[line.name]}) and {value!r} here")
        setattr(user, attr, value)

    def finish(self) -> Accounting:
        if self.cluster_line is None:
            raise InputError(self.path, "no \"Cluster - 'name'\" line; a sacctmgr dump starts with one")
        for assoc in [*self.acct.accounts.values(), *self.acct.user_associations]:
            if assoc.default_qos and assoc.qos and assoc.default_qos.lower() not in {q.lower() for q in assoc.qos}:
                who = f"user {assoc.user!r} under {assoc.account!r}" if assoc.user else f"account {assoc.account!r}"
                where = self.assoc_lines.get((assoc.account, assoc.user or "", assoc.extra.get("Partition", ""))) \
                    if assoc.user else self.account_lines[assoc.account]
                path, _, number = where.rpartition(":")
                raise InputError(path, f"{who}: DefaultQOS {assoc.default_qos!r} is not in its QOS list "
                                       f"{','.join(assoc.qos)!r}", line=int(number))
        return self.acct


def parse_sacctmgr_dump(path: Path) -> Accounting:
    """Parse a ``sacctmgr dump`` file (plus gpupool's QOS lines) into Accounting; errors at file:line."""
    path_str = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(path_str, "file not found") from None
    except OSError as exc:
        raise InputError(path_str, f"cannot read file: {exc.strerror or exc}") from None
    parser = _Parser(path_str)
    for number, raw in enumerate(text.splitlines(), start=1):
        stripped = raw.strip()
        if not stripped or stripped.startswith("#"):
            continue
        parser.handle(_parse_line(path_str, number, stripped))
    return parser.finish()


# ------------------------------------------------------------------------------------------
# The renderer


def _q(value: str) -> str:
    if "'" in value:
        raise ValueError(f"cannot write {value!r} in a sacctmgr dump: values cannot contain a single quote")
    return f"'{value}'"


def _wall_text(seconds: int | None) -> str:
    if seconds is None:
        return "UNLIMITED"
    return str(seconds // 60) if seconds % 60 == 0 else format_duration(seconds)


def _assoc_options(assoc: Association) -> list[str]:
    opts = [f"Fairshare={assoc.fairshare}"]
    if assoc.grp_tres:
        opts.append(f"GrpTRES={format_tres(assoc.grp_tres)}")
    if assoc.grp_jobs is not None:
        opts.append(f"GrpJobs={assoc.grp_jobs}")
    if assoc.max_jobs is not None:
        opts.append(f"MaxJobs={assoc.max_jobs}")
    if assoc.grp_submit_jobs is not None:
        opts.append(f"GrpSubmitJobs={assoc.grp_submit_jobs}")
    if assoc.max_submit_jobs is not None:
        opts.append(f"MaxSubmitJobs={assoc.max_submit_jobs}")
    if assoc.max_tres_per_job:
        opts.append(f"MaxTRESPerJob={format_tres(assoc.max_tres_per_job)}")
    if assoc.max_wall is not None:
        opts.append(f"MaxWallDurationPerJob={_wall_text(assoc.max_wall)}")
    if assoc.qos:
        opts.append(f"QOS={_q(','.join(assoc.qos))}")
    if assoc.default_qos:
        opts.append(f"DefaultQOS={_q(assoc.default_qos)}")
    if assoc.priority is not None:
        opts.append(f"Priority={assoc.priority}")
    for key, value in assoc.extra.items():
        opts.append(f"{key}={_q(value)}")
    return opts


def _qos_line(qos: Qos) -> str:
    opts = [f"QOS - {_q(qos.name)}", f"Description={_q(qos.description)}"]
    if qos.flags:
        opts.append(f"Flags={_q(','.join(qos.flags))}")
    if qos.grace_time:
        opts.append(f"GraceTime={qos.grace_time}")
    if qos.grp_jobs is not None:
        opts.append(f"GrpJobs={qos.grp_jobs}")
    if qos.grp_submit_jobs is not None:
        opts.append(f"GrpSubmitJobs={qos.grp_submit_jobs}")
    if qos.grp_tres:
        opts.append(f"GrpTRES={format_tres(qos.grp_tres)}")
    if qos.max_jobs_per_account is not None:
        opts.append(f"MaxJobsPA={qos.max_jobs_per_account}")
    if qos.max_jobs_per_user is not None:
        opts.append(f"MaxJobsPU={qos.max_jobs_per_user}")
    if qos.max_submit_jobs_per_account is not None:
        opts.append(f"MaxSubmitJobsPA={qos.max_submit_jobs_per_account}")
    if qos.max_submit_jobs_per_user is not None:
        opts.append(f"MaxSubmitJobsPU={qos.max_submit_jobs_per_user}")
    if qos.max_tres_per_account:
        opts.append(f"MaxTRESPerAccount={format_tres(qos.max_tres_per_account)}")
    if qos.max_tres_per_job:
        opts.append(f"MaxTRESPerJob={format_tres(qos.max_tres_per_job)}")
    if qos.min_tres_per_job:
        opts.append(f"MinTRESPerJob={format_tres(qos.min_tres_per_job)}")
    if qos.max_tres_per_user:
        opts.append(f"MaxTRESPerUser={format_tres(qos.max_tres_per_user)}")
    if qos.max_wall is not None:
        opts.append(f"MaxWallDurationPerJob={_wall_text(qos.max_wall)}")
    if qos.preempt:
        opts.append(f"Preempt={_q(','.join(qos.preempt))}")
    if qos.preempt_mode:
        opts.append(f"PreemptMode={_q(qos.preempt_mode)}")
    if qos.preempt_exempt_time is not None:
        opts.append(f"PreemptExemptTime={format_duration(qos.preempt_exempt_time)}")
    opts.append(f"Priority={qos.priority}")
    opts.append(f"UsageFactor={qos.usage_factor!r}")
    for key, value in qos.extra.items():
        opts.append(f"{key}={_q(value)}")
    return ":".join(opts)


def _user_line(assoc: Association, user: User | None) -> str:
    opts = [f"User - {_q(assoc.user or '')}"]
    if user is not None:
        if user.default_account:
            opts.append(f"DefaultAccount={_q(user.default_account)}")
        if user.admin_level != "None":
            opts.append(f"AdminLevel={_q(user.admin_level)}")
        opts += [f"{key}={_q(value)}" for key, value in user.extra.items()]
    return ":".join(opts + _assoc_options(assoc))


def _account_line(assoc: Association) -> str:
    opts = [f"Account - {_q(assoc.account)}"]
    if assoc.description:
        opts.append(f"Description={_q(assoc.description)}")
    if assoc.organization:
        opts.append(f"Organization={_q(assoc.organization)}")
    return ":".join(opts + _assoc_options(assoc))


def render_sacctmgr_dump(accounting: Accounting) -> str:
    """Write ``accounting`` in the dump format (QOS lines first, then the tree depth-first)."""
    out = [
        "# sacctmgr dump written by gpupool.",
        "# QOS lines are a gpupool extension for Slurm 22.05 (newer sacctmgr versions write them too).",
    ]
    out += [_qos_line(qos) for qos in accounting.qos.values()]
    root = accounting.accounts.get("root")
    cluster = f"Cluster - {_q(accounting.cluster)}"
    if root is not None:
        cluster = ":".join([cluster, *_assoc_options(root)])
    out.append(cluster)
    placed = {"root"}

    def emit(account: str) -> None:
        children = accounting.children(account)
        users = [a for a in accounting.user_associations if a.account == account]
        if not children and not users:
            return
        out.append(f"Parent - {_q(account)}")
        for child in children:
            out.append(_account_line(child))
            placed.add(child.account)
        for assoc in users:
            out.append(_user_line(assoc, accounting.users.get(assoc.user or "")))
        for child in children:
            emit(child.account)

    emit("root")
    missing = [name for name in accounting.accounts if name not in placed]
    if missing:
        raise ValueError(f"accounts {missing} do not hang off 'root' (check their parent); cannot write them")
    return "\n".join(out) + "\n"
