"""slurm.conf: parse into gpupool's model, and render the model back.

Why a parser of our own: gpupool must read the files an operator already has, point at the
exact ``file:line`` of every problem, and say which valid keys it keeps without acting on
them. Syntax follows Slurm 22.05: ``Key=Value`` pairs separated by blanks, keys
case-insensitive, ``#`` comments, ``\\`` line continuation, ``Include FILE`` (relative to the
including file's directory), ``NodeName=``/``PartitionName=`` lines with ``DEFAULT`` entries.

Typing of ``SlurmConfig.params`` (keys in Slurm's canonical spelling):

* durations are int **seconds** whatever unit slurm.conf uses (``PriorityDecayHalfLife=7-0``
  -> 604800, ``OverTimeLimit=5`` minutes -> 300, ``KillWait=30`` -> 30); ``UNLIMITED`` and
  a disabled ``PreemptExemptTime=-1`` are None;
* counts, weights and memory sizes (MB = MiB) are int; YES/NO switches are bool;
* lists (``SelectTypeParameters``, ``PriorityFlags``, ``AccountingStorageTRES``, …) are tuples;
* ``SchedulerParameters``/``PriorityParameters``/``DependencyParameters`` are dicts
  (``bf_window=4320,bf_continue`` -> ``{"bf_window": "4320", "bf_continue": True}``);
* ``PriorityWeightTRES`` is ``{"cpu": 1000, "mem": 2000, "gres/gpu": 3000}``;
* ``Licenses`` is ``{"matlab": 10, "fluent": 1}`` (``NAME[:COUNT]``, a count defaults to 1);
* enumerations (``PreemptMode``, ``EnforcePartLimits``, ``PriorityUsageResetPeriod``) are
  upper-case strings; plugin names are kept as written.

Every global key is also kept as written in ``SlurmConfig.raw``. Keys that are valid in
22.05 but that gpupool does not act on are kept (``raw``, ``Node.slurm_extra``,
``Partition.extra``) and listed once each in ``SlurmConfResult.not_modelled``.
"""
from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from gpupool.errors import InputError, MissingReferenceError
from gpupool.formats.hostlist import HostlistError, compress_hostlist, expand_hostlist
from gpupool.formats.slurm_time import SlurmTimeError, format_duration, parse_duration
from gpupool.model.pool import Gpu, Node
from gpupool.model.slurm import Partition, SlurmConfig

__all__ = [
    "SlurmConfResult",
    "load_slurm_conf",
    "render_slurm_conf",
    "parse_gres_spec",
    "split_source",
    "tokenize_line",
    "logical_lines",
    "canonical_key",
    "parse_gres_count",
    "MODELLED_KEYS",
    "NOT_MODELLED_KEYS",
]


@dataclass(slots=True)
class SlurmConfResult:
    """What one slurm.conf (with its includes) holds: config, nodes, and what gpupool only keeps."""

    config: SlurmConfig
    nodes: list[Node]
    #: ``(file:line, key)`` for each valid key gpupool keeps but does not act on, each key once.
    #: Keys of NodeName/PartitionName lines are reported as ``NodeName:TmpDisk``.
    not_modelled: list[tuple[str, str]] = field(default_factory=list)


# --------------------------------------------------------------------------------------------
# Key tables (names are facts of Slurm 22.05's slurm.conf; the typing is gpupool's).

_UNLIMITED = {"UNLIMITED", "INFINITE", "INFINITY"}


def is_unlimited(text: object) -> bool:
    """Whether a slurm.conf value is Slurm's "no limit" (``UNLIMITED``, ``INFINITE``, …)."""
    return str(text).strip().upper() in _UNLIMITED
_PREEMPT_MODES = {"OFF", "CANCEL", "GANG", "REQUEUE", "SUSPEND", "WITHIN", "PRIORITY"}
_ENUMS: dict[str, set[str]] = {
    "EnforcePartLimits": {"ALL", "ANY", "NO", "YES"},
    "PriorityUsageResetPeriod": {"NONE", "NOW", "DAILY", "WEEKLY", "MONTHLY", "QUARTERLY", "YEARLY"},
}

#: SchedulerParameters options the Slurm policy acts on (``policy/slurm/config.load_settings``);
#: any other option is kept and listed as not modelled (``SchedulerParameters=OPTION``), as
#: slurmctld itself does not refuse options it does not know.
MODELLED_SCHEDULER_PARAMETERS = frozenset({
    "sched_interval", "default_queue_depth", "assoc_limit_stop", "kill_invalid_depend",
    "bf_interval", "bf_window", "bf_resolution", "bf_max_job_test", "bf_node_space_size",
    "bf_max_job_array_resv", "bf_max_job_user", "bf_max_job_start", "bf_continue",
    "bf_min_prio_reserve", "bf_min_age_reserve", "bf_one_resv_per_job", "bf_busy_nodes",
})

#: DependencyParameters options the Slurm policy acts on (22.05 moved kill_invalid_depend here;
#: SchedulerParameters still takes it); any other is kept and listed as not modelled.
MODELLED_DEPENDENCY_PARAMETERS = frozenset({"kill_invalid_depend"})

#: Global keys of ``MODELLED_KEYS`` that are checked and typed (a bad value is an error, the
#: value is in ``config.params``) but that no policy acts on yet: listed as not modelled too,
#: so nobody takes them for simulated.
TYPED_NOT_MODELLED_KEYS = frozenset({
    "PriorityParameters", "PrioritySiteFactorPlugin", "PrioritySiteFactorParameters", "CompleteWait",
    "TreeWidth", "MaxTasksPerNode",
})

#: Global keys gpupool acts on, with their kind (see the module docstring for the typing).
MODELLED_KEYS: dict[str, str] = {
    "ClusterName": "str",
    "SelectType": "str",
    "SelectTypeParameters": "list",
    "GresTypes": "list",
    "SchedulerType": "str",
    "SchedulerParameters": "kv",
    "PriorityType": "str",
    "PriorityDecayHalfLife": "duration",
    "PriorityCalcPeriod": "duration",
    "PriorityUsageResetPeriod": "enum",
    "PriorityMaxAge": "duration",
    "PriorityFavorSmall": "bool",
    "PriorityFlags": "list_upper",
    "PriorityParameters": "kv",
    "PrioritySiteFactorPlugin": "str",
    "PrioritySiteFactorParameters": "kv",
    "PriorityWeightAge": "int",
    "PriorityWeightAssoc": "int",
    "PriorityWeightFairshare": "int",
    "PriorityWeightJobSize": "int",
    "PriorityWeightPartition": "int",
    "PriorityWeightQOS": "int",
    "PriorityWeightTRES": "tres_weights",
    "FairShareDampeningFactor": "int",
    "PreemptType": "str",
    "PreemptMode": "preempt_mode",
    "PreemptExemptTime": "duration_off",
    "OverTimeLimit": "minutes",
    "KillWait": "seconds",
    "SchedulerTimeSlice": "seconds",
    "MinJobAge": "seconds",
    "InactiveLimit": "seconds",
    "CompleteWait": "seconds",
    "AccountingStorageEnforce": "enforce",
    "AccountingStorageTRES": "list_lower",
    "EnforcePartLimits": "enum",
    "DefMemPerCPU": "int",
    "DefMemPerGPU": "int",
    "DefMemPerNode": "int",
    "DefCpuPerGPU": "int",
    "MaxMemPerCPU": "int",
    "MaxMemPerNode": "int",
    "TreeWidth": "int",
    "TopologyPlugin": "str",
    "TopologyParam": "list",
    "JobRequeue": "int",
    "MaxArraySize": "int",
    "MaxJobCount": "int",
    "FirstJobId": "int",
    "MaxTasksPerNode": "int",
    "DependencyParameters": "kv",
    "Licenses": "licenses",
}

#: Valid Slurm 22.05 global keys gpupool keeps but does not act on.
NOT_MODELLED_KEYS: tuple[str, ...] = (
    "AccountingStorageBackupHost", "AccountingStorageExternalHost", "AccountingStorageHost",
    "AccountingStorageLoc", "AccountingStorageParameters", "AccountingStoragePass",
    "AccountingStoragePort", "AccountingStorageType", "AccountingStorageUser", "AccountingStoreFlags",
    "AccountingStoreJobComment", "AcctGatherEnergyType", "AcctGatherNodeFreq", "AcctGatherProfileType",
    "AcctGatherInterconnectType", "AcctGatherInfinibandType", "AcctGatherFilesystemType",
    "AllowSpecResourcesUsage", "AuthAltTypes", "AuthAltParameters", "AuthInfo", "AuthType",
    "BackupAddr", "BackupController", "BatchStartTimeout", "BcastExclude", "BcastParameters",
    "BurstBufferParameters", "BurstBufferType", "CoreSpecPlugin", "CliFilterPlugins",
    "CommunicationParameters", "ControlAddr", "ControlMachine", "CpuFreqDef", "CpuFreqGovernors",
    "CredType", "CryptoType", "DebugFlags", "DisableRootJobs", "EioTimeout", "Epilog",
    "EpilogMsgTime", "EpilogSlurmctld", "ExtSensorsType", "ExtSensorsFreq", "FastSchedule",
    "FederationParameters", "GetEnvTimeout", "GroupUpdateForce", "GroupUpdateTime", "GpuFreqDef",
    "HealthCheckInterval", "HealthCheckNodeState", "HealthCheckProgram", "InteractiveStepOptions",
    "JobAcctGatherType", "JobAcctGatherFrequency", "JobAcctGatherParams", "JobCompHost",
    "JobCompLoc", "JobCompParams", "JobCompPass", "JobCompPort", "JobCompType", "JobContainerType",
    "JobCompUser", "JobCredentialPrivateKey", "JobCredentialPublicCertificate", "JobFileAppend",
    "JobSubmitPlugins", "KeepAliveTime", "KillOnBadExit", "LaunchParameters", "LaunchType",
    "LogTimeFormat", "MailDomain", "MailProg", "MaxDBDMsgs", "MaxNodeCount",
    "MaxJobId", "MaxStepCount", "MCSParameters", "MCSPlugin", "MessageTimeout", "MpiDefault",
    "MpiParams", "NodeFeaturesPlugins", "PluginDir", "PlugStackConfig", "PowerParameters",
    "PowerPlugin", "PrEpParameters", "PrEpPlugins", "PrivateData", "ProctrackType", "Prolog",
    "PrologSlurmctld", "PrologEpilogTimeout", "PrologFlags", "PropagatePrioProcess",
    "PropagateResourceLimitsExcept", "PropagateResourceLimits", "RebootProgram", "ReconfigFlags",
    "RequeueExit", "RequeueExitHold", "ResumeFailProgram", "ResumeProgram", "ResumeRate",
    "ResumeTimeout", "ResvEpilog", "ResvOverRun", "ResvProlog", "ReturnToService", "RoutePlugin",
    "SallocDefaultCommand", "SbcastParameters", "SchedulerAuth", "ScronParameters", "SlurmUser",
    "SlurmdUser", "SlurmctldAddr", "SlurmctldDebug", "SlurmctldLogFile", "SlurmctldPidFile",
    "SlurmctldPlugstack", "SlurmctldPort", "SlurmctldPrimaryOffProg", "SlurmctldPrimaryOnProg",
    "SlurmctldSyslogDebug", "SlurmctldTimeout", "SlurmctldParameters", "SlurmdDebug",
    "SlurmdLogFile", "SlurmdParameters", "SlurmdPidFile", "SlurmdPort", "SlurmdSpoolDir",
    "SlurmdSyslogDebug", "SlurmdTimeout", "SlurmSchedLogFile", "SlurmSchedLogLevel", "SrunEpilog",
    "SrunProlog", "SrunPortRange", "StateSaveLocation", "SuspendExcNodes", "SuspendExcParts",
    "SuspendProgram", "SuspendRate", "SuspendTime", "SuspendTimeout", "SwitchParameters",
    "SwitchType", "TaskEpilog", "TaskProlog", "TaskPlugin", "TaskPluginParam", "TCPTimeout",
    "TmpFS", "TrackWCKey", "UnkillableStepProgram", "UnkillableStepTimeout", "UsePAM",
    "VSizeFactor", "WaitTime", "X11Parameters",
)

#: PriorityFlags the Slurm policy acts on, and those it does not (22.05's others)
PRIORITY_FLAGS_MODELLED = frozenset({"ACCRUE_ALWAYS", "MAX_TRES", "NO_FAIR_TREE", "SMALL_RELATIVE_TO_TIME",
                                     "NO_NORMAL_ALL", "NO_NORMAL_ASSOC", "NO_NORMAL_PART", "NO_NORMAL_QOS",
                                     "NO_NORMAL_TRES"})
PRIORITY_FLAGS_NOT_MODELLED = frozenset({"CALCULATE_RUNNING", "DEPTH_OBLIVIOUS", "INCR_ONLY"})


#: AccountingStorageEnforce words (22.05) and what each one sets: every word but the
#: nojobs/nosteps pair enforces associations too, and "all" everything but them
_ENFORCE_IMPLIES = {
    "associations": ("associations",), "1": ("associations",),
    "limits": ("associations", "limits"), "2": ("associations", "limits"),
    "safe": ("associations", "limits", "safe"),
    "qos": ("associations", "qos"),
    "wckeys": ("associations", "wckeys"),
    "all": ("associations", "limits", "safe", "qos", "wckeys"),
    "nojobs": ("nojobs", "nosteps"),
    "nosteps": ("nosteps",),
}


def accounting_enforce(params: dict) -> frozenset[str]:
    """What slurmctld 22.05 enforces for AccountingStorageEnforce: each word with what it
    implies (``_validate_accounting_storage_enforce``: ``limits`` sets associations and
    limits, ``safe`` those and safe, ``qos`` and ``wckeys`` associations too, ``all`` every
    one but nojobs/nosteps; ``1`` and ``2`` are associations and limits)."""
    out: set[str] = set()
    for word in params.get("AccountingStorageEnforce") or ():
        out.update(_ENFORCE_IMPLIES.get(str(word).lower(), ()))
    return frozenset(out)


def priority_flags(params: dict) -> frozenset[str]:
    """The PriorityFlags slurmctld 22.05 sets from slurm.conf: every flag name found anywhere
    in the text, case-insensitively (``read_config.c`` looks each one up with a substring
    search, so ``NO_NORMAL_PARTITION`` sets NO_NORMAL_PART), and NO_NORMAL_ALL for the four
    NO_NORMAL_* flags. Words naming no flag set nothing."""
    text = ",".join(str(w) for w in params.get("PriorityFlags") or ()).upper()
    found = {flag for flag in PRIORITY_FLAGS_MODELLED | PRIORITY_FLAGS_NOT_MODELLED if flag in text}
    if "NO_NORMAL_ALL" in found:
        found |= {"NO_NORMAL_ASSOC", "NO_NORMAL_PART", "NO_NORMAL_QOS", "NO_NORMAL_TRES"}
    return frozenset(found)

#: Keys that start a record line and may repeat (each line is its own record).
_RECORD_KEYS = ("NodeName", "PartitionName", "NodeSet", "DownNodes", "FrontendName", "SlurmctldHost")

_NODE_MODELLED = ("CPUs", "Boards", "Sockets", "SocketsPerBoard", "CoresPerSocket", "ThreadsPerCore",
                  "RealMemory", "Gres", "Weight", "Features", "State")
_NODE_NOT_MODELLED = ("BcastAddr", "CoreSpecCount", "CPUSpecList", "CpuBind", "MemSpecLimit", "NodeAddr",
                      "NodeHostname", "Port", "Reason", "TmpDisk", "TRESWeights")
_NODE_ALIASES = {"procs": "CPUs", "feature": "Features"}
#: Node keys whose value is a hostlist with one entry per node of the line.
_NODE_PER_HOST = ("NodeAddr", "NodeHostname", "BcastAddr")

_PART_MODELLED = ("Nodes", "Default", "MaxTime", "DefaultTime", "PriorityTier", "PriorityJobFactor",
                  "Priority", "OverSubscribe", "AllowAccounts", "AllowQos", "DenyAccounts", "DenyQos",
                  "PreemptMode", "State", "MaxNodes", "MinNodes", "QOS")
#: Partition keys the Slurm policy acts on that stay in ``Partition.extra`` as written (the
#: ``Def*`` ones checked here: a count of MB or CPUs)
_PART_IN_EXTRA = ("Alternate", "DefCpuPerGPU", "DefMemPerCPU", "DefMemPerGPU", "DefMemPerNode", "GraceTime",
                  "LLN", "MaxCPUsPerNode", "MaxMemPerCPU", "MaxMemPerNode", "OverTimeLimit", "TRESBillingWeights")
_PART_COUNTS = ("DefCpuPerGPU", "DefMemPerCPU", "DefMemPerGPU", "DefMemPerNode")
#: counts that may also be UNLIMITED
_PART_LIMITS = ("MaxCPUsPerNode", "MaxMemPerCPU", "MaxMemPerNode", "OverTimeLimit")
_PART_NOT_MODELLED = ("AllocNodes", "AllowGroups", "CpuBind", "DisableRootJobs", "ExclusiveUser",
                      "Hidden", "MaxCPUsPerSocket",
                      "RootOnly", "ReqResv", "ResumeTimeout", "SelectTypeParameters",
                      "SuspendTime", "SuspendTimeout")
_PART_ALIASES = {"shared": "OverSubscribe"}

_NODE_STATES = {"UNKNOWN", "IDLE", "DOWN", "DRAIN", "FAIL", "FAILING", "FUTURE", "CLOUD", "POWER_DOWN",
                "POWERED_DOWN", "POWER_UP", "RESUME", "UNDRAIN", "NO_RESPOND", "MAINT", "RESERVED",
                "REBOOT", "PLANNED"}
_PART_STATES = {"UP", "DOWN", "DRAIN", "INACTIVE"}


def _canon_table(*groups: tuple[str, ...] | dict[str, str]) -> dict[str, str]:
    table: dict[str, str] = {}
    for group in groups:
        for name in group:
            table[name.lower()] = name
    return table


_GLOBAL_CANON = _canon_table(MODELLED_KEYS, NOT_MODELLED_KEYS, _RECORD_KEYS)
_NODE_CANON = {**_canon_table(_NODE_MODELLED, _NODE_NOT_MODELLED), **_NODE_ALIASES}
_PART_CANON = {**_canon_table(_PART_MODELLED, _PART_IN_EXTRA, _PART_NOT_MODELLED), **_PART_ALIASES}


# --------------------------------------------------------------------------------------------
# Lines and tokens


@dataclass(slots=True)
class _Line:
    path: Path
    number: int
    text: str

    @property
    def where(self) -> str:
        return f"{self.path}:{self.number}"

    def error(self, message: str) -> InputError:
        return InputError(str(self.path), message, line=self.number)


def split_source(source: str) -> tuple[str, int | None]:
    """``"path:12"`` -> ``("path", 12)``: lets errors point at a line recorded as a source string."""
    path, _, number = source.rpartition(":")
    if path and number.isdigit():
        return path, int(number)
    return source, None


def _strip_comment(text: str) -> str:
    """Cut at the first ``#`` outside double quotes; ``\\#`` is a literal ``#``."""
    out: list[str] = []
    quoted = False
    i = 0
    while i < len(text):
        char = text[i]
        if char == "\\" and i + 1 < len(text) and text[i + 1] == "#":
            out.append("#")
            i += 2
            continue
        if char == '"':
            quoted = not quoted
        elif char == "#" and not quoted:
            break
        out.append(char)
        i += 1
    return "".join(out).strip()


def logical_lines(path: Path, *, follow_includes: bool = True, _stack: tuple[Path, ...] = ()) -> list[_Line]:
    """Read a Slurm-style config file into comment-free logical lines, following ``Include``.

    Shared by slurm.conf, gres.conf and topology.conf because they share the syntax.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(str(path), "file not found") from None
    except OSError as exc:
        raise InputError(str(path), f"cannot read file: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise InputError(str(path), f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    lines: list[_Line] = []
    pending = ""
    pending_start = 0
    physical = text.splitlines()
    for number, raw in enumerate(physical, start=1):
        if not pending:
            pending_start = number
        part = _strip_comment(raw)
        if part.endswith("\\"):  # continued on the next line
            pending += part[:-1] + " "
            if number < len(physical):
                continue
            part = ""
        content = (pending + part).strip()
        pending = ""
        if not content:
            continue
        line = _Line(path, pending_start, content)
        words = content.split()
        if follow_includes and words[0].lower() == "include":
            lines.extend(_include(line, words, _stack + (path.resolve(),)))
            continue
        lines.append(line)
    return lines


def _include(line: _Line, words: list[str], stack: tuple[Path, ...]) -> list[_Line]:
    if len(words) != 2:
        raise line.error(f"expected 'Include FILE' with one file name, got {line.text!r}")
    target = Path(words[1].strip('"'))
    if not target.is_absolute():
        target = line.path.parent / target
    if not target.exists():
        raise line.error(f"Include names {words[1]!r}, which does not exist (looked for {target})")
    if target.resolve() in stack:
        raise line.error(f"Include of {words[1]!r} would include a file that is already being read (a loop)")
    return logical_lines(target, _stack=stack)


def tokenize_line(line: _Line) -> list[tuple[str, str]]:
    """Split ``Key=Value Key2="a b"`` into pairs; anything that is not ``key=value`` is an error."""
    text = line.text
    pairs: list[tuple[str, str]] = []
    i = 0
    n = len(text)
    while i < n:
        if text[i].isspace():
            i += 1
            continue
        start = i
        while i < n and not text[i].isspace() and text[i] != "=":
            i += 1
        key = text[start:i]
        if i >= n or text[i] != "=" or not key:
            end = i
            while end < n and not text[end].isspace():
                end += 1
            word = text[start:end]
            raise line.error(f"expected key=value (no blanks around '='), got {word!r}")
        i += 1  # skip '='
        if i < n and text[i] == '"':
            close = text.find('"', i + 1)
            if close < 0:
                raise line.error(f"value of {key} opens a double quote that is never closed")
            value = text[i + 1 : close]
            i = close + 1
            if i < n and not text[i].isspace():
                raise line.error(f"expected a blank after the quoted value of {key}, got {text[i]!r}")
        else:
            start = i
            while i < n and not text[i].isspace():
                i += 1
            value = text[start:i]
        pairs.append((key, value))
    return pairs


def canonical_key(key: str, table: dict[str, str], line: _Line, what: str) -> str:
    """Slurm keys are case-insensitive: map ``key`` to its canonical spelling or fail with a hint."""
    try:
        return table[key.lower()]
    except KeyError:
        close = difflib.get_close_matches(key.lower(), list(table), n=1, cutoff=0.75)
        hint = f"; did you mean {table[close[0]]!r}?" if close else ""
        raise line.error(f"unknown {what} key {key!r} (not a Slurm 22.05 {what} key){hint}") from None


# --------------------------------------------------------------------------------------------
# Value parsers (each raises InputError at the line, naming the key and what was expected)


def _parse_int(value: str, key: str, line: _Line, *, minimum: int = 0) -> int:
    if not re.fullmatch(r"[+-]?\d+", value.strip()):
        raise line.error(f"{key} must be a whole number, got {value!r}")
    number = int(value)
    if number < minimum:
        raise line.error(f"{key} must be at least {minimum}, got {value!r}")
    return number


def _parse_bool(value: str, key: str, line: _Line) -> bool:
    upper = value.strip().upper()
    if upper in ("YES", "Y", "TRUE", "1"):
        return True
    if upper in ("NO", "N", "FALSE", "0"):
        return False
    raise line.error(f"{key} must be YES or NO, got {value!r}")


def _parse_time(value: str, key: str, line: _Line) -> int | None:
    try:
        return parse_duration(value)
    except SlurmTimeError as exc:
        raise line.error(f"{key}: {exc}") from None


def _parse_list(value: str) -> tuple[str, ...]:
    return tuple(item.strip() for item in value.split(",") if item.strip())


def _parse_kv(value: str, key: str, line: _Line) -> dict[str, str | bool]:
    out: dict[str, str | bool] = {}
    for item in value.split(","):
        item = item.strip()
        if not item:
            continue
        name, eq, rest = item.partition("=")
        if not name:
            raise line.error(f"{key}: expected name or name=value items, got {item!r}")
        out[name] = rest if eq else True
    return out


def _parse_tres_weights(value: str, key: str, line: _Line) -> dict[str, int | float]:
    out: dict[str, int | float] = {}
    for item in value.split(","):
        item = item.strip()
        if not item:
            continue
        name, eq, number = item.partition("=")
        if not eq or not name:
            raise line.error(f"{key}: expected TRES=weight items such as 'CPU=1000,GRES/gpu=3000', got {item!r}")
        tres = tres_name(name)
        if re.fullmatch(r"\d+", number):
            out[tres] = int(number)
        elif re.fullmatch(r"\d*\.\d+|\d+\.\d*", number):
            out[tres] = float(number)
        else:
            raise line.error(f"{key}: weight of {name!r} must be a number, got {number!r}")
    return out


#: the TRES slurmctld 22.05 always tracks (``AccountingStorageTRES`` adds to them)
DEFAULT_TRES = ("cpu", "mem", "energy", "node", "billing", "fs/disk", "vmem", "pages")


def tracked_tres(params: dict) -> frozenset[str]:
    """The TRES a cluster with these slurm.conf ``params`` tracks, lower-case: the defaults and
    AccountingStorageTRES (Slurm finds TRES case-insensitively, license names too)."""
    listed = params.get("AccountingStorageTRES") or ()
    return frozenset(t.lower() for t in DEFAULT_TRES) | {tres_name(str(t)).lower() for t in listed}


def tres_name(name: str) -> str:
    """Slurm finds a TRES by type and name case-insensitively (``GRES/gpu:A100`` =
    ``gres/gpu:a100``, assoc_mgr's ``xstrcasecmp``): GRES TRES are kept lower-case; other
    names (licenses) keep theirs."""
    kind, slash, rest = name.strip().partition("/")
    kind = kind.lower()
    return f"{kind}/{rest.lower() if kind == 'gres' else rest}" if slash else kind


def _parse_preempt_mode(value: str, key: str, line: _Line) -> str:
    parts = [p.strip().upper() for p in value.split(",") if p.strip()]
    bad = [p for p in parts if p not in _PREEMPT_MODES]
    if not parts or bad:
        raise line.error(
            f"{key} must be a comma list of {', '.join(sorted(_PREEMPT_MODES))}, got {value!r}"
        )
    return ",".join(parts)


def _parse_global(key: str, kind: str, value: str, line: _Line) -> object:
    """Type one modelled global key (see the module docstring)."""
    if kind == "str":
        if not value:
            raise line.error(f"{key} has an empty value")
        return value
    if kind == "int":
        return _parse_int(value, key, line)
    if kind == "seconds":
        return _parse_int(value, key, line)
    if kind == "minutes":
        if value.strip().upper() in _UNLIMITED:
            return None
        return _parse_int(value, key, line) * 60
    if kind == "duration":
        return _parse_time(value, key, line)
    if kind == "duration_off":
        return None if value.strip() == "-1" else _parse_time(value, key, line)
    if kind == "bool":
        return _parse_bool(value, key, line)
    if kind == "list":
        return _parse_list(value)
    if kind == "list_upper":
        return tuple(v.upper() for v in _parse_list(value))
    if kind == "list_lower":
        return tuple(tres_name(v) if "/" in v else v.lower() for v in _parse_list(value))
    if kind == "enforce":
        words = tuple(v.lower() for v in _parse_list(value))
        for word in words:
            if word not in _ENFORCE_IMPLIES:
                raise line.error(f"AccountingStorageEnforce: {word!r} is not one of "
                                 f"{', '.join(_ENFORCE_IMPLIES)} (slurmctld refuses to start on it)")
        return words
    if kind == "kv":
        return _parse_kv(value, key, line)
    if kind == "tres_weights":
        return _parse_tres_weights(value, key, line)
    if kind == "preempt_mode":
        return _parse_preempt_mode(value, key, line)
    if kind == "licenses":
        return _parse_licenses(value, key, line)
    if kind == "enum":
        upper = value.strip().upper()
        if upper not in _ENUMS[key]:
            raise line.error(f"{key} must be one of {', '.join(sorted(_ENUMS[key]))}, got {value!r}")
        return upper
    raise AssertionError(f"unknown kind {kind}")  # pragma: no cover


def _parse_licenses(value: str, key: str, line: _Line) -> dict[str, int]:
    """``Licenses=NAME[:COUNT][,NAME[:COUNT]...]``: the cluster's local licenses and their counts."""
    out: dict[str, int] = {}
    for item in _parse_list(value):
        name, sep, count = item.partition(":")
        if not name or (sep and not count.strip().isdigit()):
            raise line.error(f"{key} must be NAME[:COUNT][,NAME[:COUNT]...], got {value!r}")
        out[name] = out.get(name, 0) + (int(count) if sep else 1)  # a name given twice adds up
    return out


def _format_global(kind: str, value: object) -> str:
    """Inverse of ``_parse_global``: typed value -> slurm.conf text."""
    if kind in ("str", "int", "seconds", "preempt_mode", "enum"):
        return str(value)
    if kind == "minutes":
        return "UNLIMITED" if value is None else str(int(value) // 60)  # type: ignore[arg-type]
    if kind == "duration":
        return format_duration(value)  # type: ignore[arg-type]
    if kind == "duration_off":
        return "-1" if value is None else format_duration(value)  # type: ignore[arg-type]
    if kind == "bool":
        return "YES" if value else "NO"
    if kind in ("list", "list_upper", "list_lower", "enforce"):
        return ",".join(value)  # type: ignore[arg-type]
    if kind == "kv":
        return ",".join(k if v is True else f"{k}={v}" for k, v in value.items())  # type: ignore[union-attr]
    if kind == "tres_weights":
        return ",".join(f"{k}={v}" for k, v in value.items())  # type: ignore[union-attr]
    if kind == "licenses":
        return ",".join(f"{k}:{v}" for k, v in value.items())  # type: ignore[union-attr]
    raise AssertionError(f"unknown kind {kind}")  # pragma: no cover


# --------------------------------------------------------------------------------------------
# Gres specs ("gpu:8", "gpu:h100:8", "gpu:a100:4,gpu:h100:4", "nvme:1")

_COUNT_RE = re.compile(r"^(\d+)([KMGkmg]?)$")
_COUNT_FACTOR = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3}


def parse_gres_count(text: str) -> int | None:
    """A GRES count (``8``, ``1K`` = 1024); None when ``text`` is not a count."""
    m = _COUNT_RE.match(text)
    if not m:
        return None
    return int(m.group(1)) * _COUNT_FACTOR[m.group(2).upper()]


def parse_gres_spec(value: str) -> list[tuple[str, str | None, int]]:
    """``gpu:a100:4,gpu:h100:4`` -> ``[("gpu", "a100", 4), ("gpu", "h100", 4)]``.

    ``name``, ``name:count``, ``name:type`` (count 1) and ``name:type:count``. Raises
    ValueError with the expected forms; socket affinity ``(S:0-1)`` is refused because
    gpupool takes GPU affinity from gres.conf ``Cores=``.
    """
    out: list[tuple[str, str | None, int]] = []
    for item in value.split(","):
        item = item.strip()
        if not item:
            raise ValueError(f"Gres {value!r} has an empty entry")
        if "(" in item:
            raise ValueError(
                f"Gres entry {item!r}: socket affinity '(S:…)' is not supported; give Cores= in gres.conf instead"
            )
        parts = item.split(":")
        if len(parts) > 3 or not all(parts):
            raise ValueError(
                f"Gres entry {item!r}: expected name[:type][:count] such as 'gpu:8' or 'gpu:h100:8'"
            )
        name = parts[0]
        if len(parts) == 1:
            out.append((name, None, 1))
        elif len(parts) == 2:
            count = parse_gres_count(parts[1])
            out.append((name, None, count) if count is not None else (name, parts[1], 1))
        else:
            count = parse_gres_count(parts[2])
            if count is None:
                raise ValueError(f"Gres entry {item!r}: count {parts[2]!r} is not a whole number")
            out.append((name, parts[1], count))
    return out


def _format_gres(node: Node) -> str:
    """A node's GPUs (grouped by consecutive type) and ``gres/*`` extras as a Gres= value."""
    items: list[str] = []
    run_type: str | None = None
    run = 0
    for gpu in node.gpus:
        if run and gpu.type == run_type:
            run += 1
            continue
        if run:
            items.append(f"gpu:{run_type}:{run}" if run_type else f"gpu:{run}")
        run_type, run = gpu.type, 1
    if run:
        items.append(f"gpu:{run_type}:{run}" if run_type else f"gpu:{run}")
    for key, count in node.extra.items():
        if key.startswith("gres/"):
            items.append(f"{key[5:]}:{count}")
    return ",".join(items)


# --------------------------------------------------------------------------------------------
# The loader


@dataclass(slots=True)
class _PendingPartition:
    line: _Line
    opts: dict[str, str]
    #: option -> the PartitionName=DEFAULT line it came from, for options the line itself does
    #: not set (errors found after the whole file is read name that line)
    inherited: dict[str, _Line]


class _Loader:
    """One pass over the logical lines; cross references are resolved in ``finish``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.config = SlurmConfig()
        self.nodes: list[Node] = []
        self.node_lines: dict[str, _Line] = {}
        self.node_gres: dict[str, list[tuple[str, str | None, int]]] = {}
        self.node_defaults: dict[str, str] = {}
        self.part_defaults: dict[str, str] = {}
        self.part_default_lines: dict[str, _Line] = {}  # key -> the PartitionName=DEFAULT line setting it
        self.partitions: dict[str, _PendingPartition] = {}
        self.nodesets: dict[str, tuple[_Line, dict[str, str]]] = {}
        self.down_nodes: list[tuple[_Line, dict[str, str]]] = []
        self.global_lines: dict[str, _Line] = {}
        self.gres_types_line: _Line | None = None
        self.not_modelled: list[tuple[str, str]] = []
        self._reported: set[str] = set()

    def note(self, line: _Line, key: str) -> None:
        if key not in self._reported:
            self._reported.add(key)
            self.not_modelled.append((line.where, key))

    # -- dispatch ------------------------------------------------------------------------
    def handle(self, line: _Line) -> None:
        pairs = tokenize_line(line)
        first = canonical_key(pairs[0][0], _GLOBAL_CANON, line, "slurm.conf")
        if first == "NodeName":
            self.node_line(line, pairs)
        elif first == "PartitionName":
            self.partition_line(line, pairs)
        elif first == "NodeSet":
            self.record_line(line, pairs, "NodeSet", ("Nodes", "Feature"))
        elif first == "DownNodes":
            self.record_line(line, pairs, "DownNodes", ("State", "Reason"))
        elif first == "FrontendName":
            self.record_line(line, pairs, "FrontendName",
                             ("AllowGroups", "AllowUsers", "DenyGroups", "DenyUsers", "FrontendAddr",
                              "Port", "Reason", "State"))
        else:
            for key, value in pairs:
                self.global_key(line, key, value)

    # -- global keys ---------------------------------------------------------------------
    def global_key(self, line: _Line, key: str, value: str) -> None:
        canon = canonical_key(key, _GLOBAL_CANON, line, "slurm.conf")
        if canon == "SlurmctldHost":
            raw_key = f"SlurmctldHost={value}"
            self.config.raw[raw_key] = ""
            self.note(line, canon)
            return
        if canon in _RECORD_KEYS:
            raise line.error(f"{canon}= must start its own line")
        if canon in self.global_lines:
            raise line.error(
                f"{canon} is set twice (first at {self.global_lines[canon].where}); keep one of them"
            )
        self.global_lines[canon] = line
        self.config.raw[canon] = value
        kind = MODELLED_KEYS.get(canon)
        if kind is None:
            self.note(line, canon)
            return
        typed = _parse_global(canon, kind, value, line)
        self.config.params[canon] = typed
        if canon in TYPED_NOT_MODELLED_KEYS:
            self.note(line, canon)
        if canon == "ClusterName":
            self.config.cluster_name = value
        elif canon == "SelectTypeParameters":
            self.config.select_type_parameters = typed  # type: ignore[assignment]
        elif canon == "GresTypes":
            self.config.gres_types = typed  # type: ignore[assignment]
            self.gres_types_line = line
        elif canon == "SchedulerParameters":
            self.config.scheduler_parameters = dict(typed)  # type: ignore[call-overload]
            for option in typed:  # type: ignore[union-attr]
                if option.lower() not in MODELLED_SCHEDULER_PARAMETERS:
                    self.note(line, f"SchedulerParameters={option}")
        elif canon == "DependencyParameters":
            for option in typed:  # type: ignore[union-attr]
                if option.lower() not in MODELLED_DEPENDENCY_PARAMETERS:
                    self.note(line, f"DependencyParameters={option}")

    # -- records without a model object ---------------------------------------------------
    def record_line(self, line: _Line, pairs: list[tuple[str, str]], kind: str, allowed: tuple[str, ...]) -> None:
        table = _canon_table(allowed)
        opts: dict[str, str] = {}
        for key, value in pairs[1:]:
            canon = canonical_key(key, table, line, f"{kind}")
            if canon in opts:
                raise line.error(f"{canon} is given twice on this {kind} line")
            opts[canon] = value
        name = pairs[0][1]
        if not name:
            raise line.error(f"{kind} needs a value")
        if kind == "NodeSet":
            if name in self.nodesets:
                raise line.error(f"NodeSet {name!r} is defined twice (first at {self.nodesets[name][0].where})")
            if ("Nodes" in opts) == ("Feature" in opts):
                raise line.error(f"NodeSet {name!r} needs exactly one of Nodes= or Feature=")
            self.nodesets[name] = (line, opts)
        elif kind == "DownNodes":
            self.down_nodes.append((line, {"DownNodes": name, **opts}))
            return  # applied to the nodes' State/Reason in finish()
        else:
            self.note(line, kind)
        rest = " ".join(f"{k}={_quote(v)}" for k, v in opts.items())
        self.config.raw[f"{kind}={name}"] = rest

    # -- NodeName ------------------------------------------------------------------------
    def _line_options(self, line: _Line, pairs: list[tuple[str, str]], table: dict[str, str], what: str) -> dict[str, str]:
        opts: dict[str, str] = {}
        for key, value in pairs[1:]:
            canon = canonical_key(key, table, line, what)
            if canon in opts:
                raise line.error(f"{canon} is given twice on this {what} line")
            opts[canon] = value
        return opts

    def node_line(self, line: _Line, pairs: list[tuple[str, str]]) -> None:
        opts = self._line_options(line, pairs, _NODE_CANON, "NodeName")
        value = pairs[0][1]
        if value.upper() == "DEFAULT":
            for key in _NODE_PER_HOST:
                if key in opts:
                    raise line.error(f"{key} is not allowed with NodeName=DEFAULT (it names single hosts)")
            self.node_defaults.update(opts)
            return
        if value.upper() == "ALL":
            raise line.error("NodeName=ALL is reserved by Slurm; name the nodes (e.g. NodeName=gpu[01-04])")
        names = _expand(value, line, "NodeName")
        defaults = dict(self.node_defaults)
        for one, other in (("Sockets", "SocketsPerBoard"), ("SocketsPerBoard", "Sockets")):
            if one in opts:  # a line's own socket count replaces the DEFAULT line's other form
                defaults.pop(other, None)
        merged = {**defaults, **opts}
        per_host: dict[str, list[str]] = {}
        for key in _NODE_PER_HOST:
            if key in merged:
                hosts = _expand(merged[key], line, key)
                if len(hosts) != len(names):
                    raise line.error(
                        f"{key} lists {len(hosts)} name(s) for {len(names)} node(s); give one per node"
                    )
                per_host[key] = hosts
        shape = self._node_shape(merged, line)
        gres = self._node_gres(merged, line)
        weight = _parse_int(merged["Weight"], "Weight", line) if "Weight" in merged else 1
        memory = _parse_int(merged["RealMemory"], "RealMemory", line, minimum=1) if "RealMemory" in merged else 1
        features = _parse_list(merged.get("Features", ""))
        state = _parse_node_state(merged.get("State", "UNKNOWN"), line)
        extra_keys = [k for k in merged if k in _NODE_NOT_MODELLED]
        for key in extra_keys:
            self.note(line, f"NodeName:{key}")
        for pos, name in enumerate(names):
            if name in self.node_lines:
                raise line.error(f"node {name!r} is defined twice (first at {self.node_lines[name].where})")
            self.node_lines[name] = line
            extra = {k: (per_host[k][pos] if k in per_host else merged[k]) for k in extra_keys}
            gpus: list[Gpu] = []
            extras: dict[str, int] = {}
            for gname, gtype, count in gres:
                if gname == "gpu":
                    base = len(gpus)
                    gpus.extend(Gpu(base + i, gtype) for i in range(count))
                else:
                    key = f"gres/{gname}:{gtype}" if gtype else f"gres/{gname}"
                    extras[key] = extras.get(key, 0) + count
            self.node_gres[name] = gres
            self.nodes.append(
                Node(
                    name=name,
                    cpus=shape[0],
                    memory_mib=memory,
                    gpus=tuple(gpus),
                    sockets=shape[1],
                    cores_per_socket=shape[2],
                    threads_per_core=shape[3],
                    weight=weight,
                    features=features,
                    state=state,
                    extra=extras,
                    source=line.where,
                    slurm_extra=extra,
                )
            )

    def _node_shape(self, opts: dict[str, str], line: _Line) -> tuple[int, int, int, int]:
        """(cpus, sockets, cores per socket, threads per core), derived the way slurmctld does."""
        def num(key: str) -> int | None:
            return _parse_int(opts[key], key, line, minimum=1) if key in opts else None

        cpus, boards = num("CPUs"), num("Boards") or 1
        sockets, per_board = num("Sockets"), num("SocketsPerBoard")
        cores, threads = num("CoresPerSocket") or 1, num("ThreadsPerCore") or 1
        if sockets is not None and per_board is not None:
            raise line.error("give Sockets (total) or SocketsPerBoard, not both")
        if sockets is None:
            if per_board is not None:
                sockets = boards * per_board
            elif cpus is not None and cpus % (cores * threads) == 0:
                sockets = cpus // (cores * threads)
            else:
                sockets = boards
        if cpus is None:
            cpus = sockets * cores * threads
        if cpus not in (sockets, sockets * cores, sockets * cores * threads):
            raise line.error(
                f"CPUs={cpus} matches none of Sockets ({sockets}), Sockets*CoresPerSocket "
                f"({sockets * cores}) or Sockets*CoresPerSocket*ThreadsPerCore ({sockets * cores * threads})"
            )
        return cpus, sockets, cores, threads

    def _node_gres(self, opts: dict[str, str], line: _Line) -> list[tuple[str, str | None, int]]:
        if "Gres" not in opts or opts["Gres"] == "":
            return []
        try:
            return parse_gres_spec(opts["Gres"])
        except ValueError as exc:
            raise line.error(str(exc)) from None

    # -- PartitionName -------------------------------------------------------------------
    def partition_line(self, line: _Line, pairs: list[tuple[str, str]]) -> None:
        opts = self._line_options(line, pairs, _PART_CANON, "PartitionName")
        name = pairs[0][1]
        if not name:
            raise line.error("PartitionName needs a name")
        if name.upper() == "DEFAULT":
            self.part_defaults.update(opts)
            self.part_default_lines.update(dict.fromkeys(opts, line))
            return
        if name in self.partitions:
            raise line.error(f"partition {name!r} is defined twice (first at {self.partitions[name].line.where})")
        inherited = {k: at for k, at in self.part_default_lines.items() if k not in opts}
        self.partitions[name] = _PendingPartition(line, {**self.part_defaults, **opts}, inherited)

    def build_partition(self, name: str, pending: _PendingPartition) -> Partition:
        line, opts = pending.line, pending.opts
        nodes = self._partition_nodes(name, opts.get("Nodes", ""), line)
        part = Partition(name=name, nodes=nodes, source=line.where)
        if "Default" in opts:
            part.default = _parse_bool(opts["Default"], "Default", line)
        if "MaxTime" in opts:
            part.max_time = _parse_time(opts["MaxTime"], "MaxTime", line)
        if "DefaultTime" in opts:
            part.default_time = _parse_time(opts["DefaultTime"], "DefaultTime", line)
        if "Priority" in opts:  # the old key sets both
            old = _parse_int(opts["Priority"], "Priority", line)
            part.priority_tier = part.priority_job_factor = old
        if "PriorityTier" in opts:
            part.priority_tier = _parse_int(opts["PriorityTier"], "PriorityTier", line)
        if "PriorityJobFactor" in opts:
            part.priority_job_factor = _parse_int(opts["PriorityJobFactor"], "PriorityJobFactor", line)
        if "OverSubscribe" in opts:
            part.oversubscribe = _parse_oversubscribe(opts["OverSubscribe"], line)
        part.allow_accounts = _allow_list(opts.get("AllowAccounts"))
        part.allow_qos = _allow_list(opts.get("AllowQos"))
        part.deny_accounts = _name_list(opts.get("DenyAccounts", ""))
        part.deny_qos = _name_list(opts.get("DenyQos", ""))
        for allow, deny in (("AllowAccounts", "DenyAccounts"), ("AllowQos", "DenyQos")):
            if opts.get(allow) and opts.get(deny) and opts[allow].upper() != "ALL":
                raise line.error(f"{allow} and {deny} cannot both be set (Slurm would ignore {deny}); keep one")
        if "PreemptMode" in opts:
            part.preempt_mode = _parse_preempt_mode(opts["PreemptMode"], "PreemptMode", line)
        if "State" in opts:
            state = opts["State"].upper()
            if state not in _PART_STATES:
                raise line.error(f"State must be one of {', '.join(sorted(_PART_STATES))}, got {opts['State']!r}")
            part.state = state
        if "MaxNodes" in opts:
            text = opts["MaxNodes"]
            part.max_nodes = None if text.upper() in _UNLIMITED else _parse_int(text, "MaxNodes", line)
        if "MinNodes" in opts:
            part.min_nodes = _parse_int(opts["MinNodes"], "MinNodes", line)
        if "QOS" in opts:
            part.qos = opts["QOS"] or None
        for key, value in opts.items():
            if key in _PART_IN_EXTRA:
                if key in _PART_COUNTS or (key in _PART_LIMITS and value.upper() not in _UNLIMITED):
                    _parse_int(value, key, line)  # a clear error now, not a crash at the first job
                elif key == "LLN":
                    _parse_bool(value, key, line)
                part.extra[key] = value
            elif key in _PART_NOT_MODELLED:
                part.extra[key] = value
                self.note(line, f"PartitionName:{key}")
        return part

    def _partition_nodes(self, part: str, text: str, line: _Line) -> tuple[str, ...]:
        if not text.strip():
            return ()
        if text.strip().upper() == "ALL":
            return tuple(node.name for node in self.nodes)
        out: dict[str, None] = {}
        for name in _expand(text, line, "Nodes"):
            if name in self.nodesets:
                for member in self._nodeset_members(name):
                    out[member] = None
                continue
            if name not in self.node_lines:
                raise MissingReferenceError(
                    str(line.path),
                    f"partition {part!r} lists node {name!r}, which no NodeName line defines",
                    line=line.number,
                )
            out[name] = None
        return tuple(out)

    def _nodeset_members(self, name: str) -> list[str]:
        line, opts = self.nodesets[name]
        if "Feature" in opts:
            return [n.name for n in self.nodes if opts["Feature"] in n.features]
        members = _expand(opts["Nodes"], line, "Nodes")
        for member in members:
            if member not in self.node_lines:
                raise MissingReferenceError(
                    str(line.path), f"NodeSet {name!r} lists node {member!r}, which no NodeName line defines",
                    line=line.number,
                )
        return members

    # -- cross checks ----------------------------------------------------------------------
    def finish(self) -> SlurmConfResult:
        by_name = {node.name: node for node in self.nodes}
        for line, opts in self.down_nodes:
            state = _parse_node_state(opts.get("State", "DOWN"), line)
            for name in _expand(opts["DownNodes"], line, "DownNodes"):
                if name not in by_name:
                    raise MissingReferenceError(
                        str(line.path), f"DownNodes lists node {name!r}, which no NodeName line defines",
                        line=line.number,
                    )
                by_name[name].state = state
                if "Reason" in opts:
                    by_name[name].slurm_extra["Reason"] = opts["Reason"]
        declared = set(self.config.gres_types)
        for node in self.nodes:
            for gname, _type, _count in self.node_gres[node.name]:
                if gname not in declared:
                    line = self.node_lines[node.name]
                    where = f" (GresTypes is at {self.gres_types_line.where})" if self.gres_types_line else ""
                    raise line.error(
                        f"node {node.name!r} has Gres {gname!r}, but GresTypes does not list {gname!r}; "
                        f"add it, e.g. GresTypes={','.join([*self.config.gres_types, gname])}{where}"
                    )
        for name, pending in self.partitions.items():
            self.config.partitions[name] = self.build_partition(name, pending)
        self.check_weighted_tres()
        self.note_priority_flags()
        return SlurmConfResult(self.config, self.nodes, self.not_modelled)

    def note_priority_flags(self) -> None:
        """PriorityFlags the Slurm policy does not act on go to ``not_modelled`` (slurmctld
        itself looks for the names it knows in the text and passes over anything else)."""
        line = self.global_lines.get("PriorityFlags")
        for word in self.config.params.get("PriorityFlags") or ():
            within = sorted(f for f in PRIORITY_FLAGS_MODELLED | PRIORITY_FLAGS_NOT_MODELLED if f in word.upper())
            if not within:
                self.note(line, f"PriorityFlags={word} (not a flag of Slurm 22.05: slurmctld passes over it)")
                continue
            if word not in within:  # a flag name inside a longer word: slurmctld sets that flag
                self.note(line, f"PriorityFlags={word} (slurmctld reads it as {','.join(within)})")
            for flag in within:
                if flag in PRIORITY_FLAGS_NOT_MODELLED:
                    self.note(line, f"PriorityFlags={flag}")

    def check_weighted_tres(self) -> None:
        """PriorityWeightTRES and TRESBillingWeights may weigh only TRES the cluster tracks:
        slurmctld 22.05 stops at start ("TRES weight 'gres:gpu' is not a configured TRES type")
        when one names a TRES outside its defaults and AccountingStorageTRES (a common slip:
        GPU weights without ``AccountingStorageTRES=gres/gpu``)."""
        tracked = tracked_tres(self.config.params)

        def check(names, line: _Line, key: str) -> None:
            for name in names:
                if tres_name(name).lower() not in tracked:
                    raise line.error(
                        f"{key} weighs {name!r}, which is not a configured TRES type: slurmctld refuses to start; "
                        f"add it to AccountingStorageTRES (tracked now: {','.join(sorted(tracked))})")

        weights = self.config.params.get("PriorityWeightTRES")
        # (only priority/multifactor reads PriorityWeightTRES; basic, the default, ignores it)
        if weights and str(self.config.params.get("PriorityType", "")).lower() == "priority/multifactor":
            check(weights, self.global_lines["PriorityWeightTRES"], "PriorityWeightTRES")
        for name, pending in self.partitions.items():
            text = self.config.partitions[name].extra.get("TRESBillingWeights")
            if text:
                line = pending.inherited.get("TRESBillingWeights", pending.line)
                check([item.partition("=")[0] for item in str(text).split(",") if item.strip()], line,
                      f"PartitionName={'DEFAULT' if line is not pending.line else name} TRESBillingWeights")


def _expand(text: str, line: _Line, key: str) -> list[str]:
    try:
        return expand_hostlist(text)
    except HostlistError as exc:
        raise line.error(f"{key}: {exc}") from None


def _parse_node_state(value: str, line: _Line) -> str:
    state = value.strip().upper()
    parts = state.split("+")
    if not state or any(p not in _NODE_STATES for p in parts):
        raise line.error(
            f"node State must be one of {', '.join(sorted(_NODE_STATES))} (or a '+' combination), got {value!r}"
        )
    return state


def _parse_oversubscribe(value: str, line: _Line) -> str:
    m = re.fullmatch(r"(NO|YES|EXCLUSIVE|FORCE)(?::(\d+))?", value.strip(), re.IGNORECASE)
    if not m or (m.group(2) and m.group(1).upper() in ("NO", "EXCLUSIVE")):
        raise line.error(
            f"OverSubscribe must be NO, EXCLUSIVE, YES[:count] or FORCE[:count], got {value!r}"
        )
    return m.group(1).upper() + (f":{int(m.group(2))}" if m.group(2) else "")


def _name_list(text: str) -> tuple[str, ...]:
    """Account and QOS names in partition lists; Slurm stores them lower-case."""
    return tuple(v.lower() for v in _parse_list(text))


def _allow_list(text: str | None) -> tuple[str, ...] | None:
    if text is None or text.strip().upper() == "ALL":
        return None
    return _name_list(text)


def load_slurm_conf(path: Path) -> SlurmConfResult:
    """Parse slurm.conf (and its includes) into a SlurmConfig, nodes, and the not-modelled keys.

    Raises InputError at ``file:line`` for anything gpupool cannot take as written.
    """
    path = Path(path)
    loader = _Loader(path)
    lines = logical_lines(path)
    sources: list[str] = []
    for line in lines:
        if str(line.path) not in sources:
            sources.append(str(line.path))
        loader.handle(line)
    if str(path) not in sources:
        sources.insert(0, str(path))
    result = loader.finish()
    result.config.sources = sources
    return result


# --------------------------------------------------------------------------------------------
# The renderer

_SPECIAL_FIELDS: dict[str, Callable[[SlurmConfig], object]] = {
    "ClusterName": lambda c: c.cluster_name,
    "SelectTypeParameters": lambda c: c.select_type_parameters,
    "GresTypes": lambda c: c.gres_types,
    "SchedulerParameters": lambda c: c.scheduler_parameters,
}


def _quote(value: str) -> str:
    return f'"{value}"' if (not value or re.search(r"[\s#]", value)) else value


def _global_value(config: SlurmConfig, key: str) -> str | None:
    kind = MODELLED_KEYS.get(key)
    if kind is None:
        return config.raw.get(key)
    if key in _SPECIAL_FIELDS:
        value = _SPECIAL_FIELDS[key](config)
        if key != "ClusterName" and not value and key not in config.raw and key not in config.params:
            return None
    elif key in config.params:
        value = config.params[key]
    else:
        return config.raw.get(key)
    return _format_global(kind, value)


def _node_attributes(node: Node) -> list[str]:
    attrs = [f"CPUs={node.cpus}"]
    if node.cores_per_socket > 0:
        attrs += [f"Sockets={node.sockets}", f"CoresPerSocket={node.cores_per_socket}",
                  f"ThreadsPerCore={node.threads_per_core}"]
    attrs.append(f"RealMemory={node.memory_mib}")
    gres = _format_gres(node)
    if gres:
        attrs.append(f"Gres={gres}")
    if node.weight != 1:
        attrs.append(f"Weight={node.weight}")
    if node.features:
        attrs.append(f"Features={','.join(node.features)}")
    for key, value in node.slurm_extra.items():
        attrs.append(f"{key}={_quote(value)}")
    attrs.append(f"State={node.state}")
    return attrs


def _partition_attributes(part: Partition) -> list[str]:
    attrs = [f"Nodes={compress_hostlist(part.nodes)}" if part.nodes else 'Nodes=""']
    if part.default:
        attrs.append("Default=YES")
    if part.max_time is not None:
        attrs.append(f"MaxTime={format_duration(part.max_time)}")
    if part.default_time is not None:
        attrs.append(f"DefaultTime={format_duration(part.default_time)}")
    attrs.append(f"PriorityTier={part.priority_tier}")
    attrs.append(f"PriorityJobFactor={part.priority_job_factor}")
    if part.oversubscribe != "NO":
        attrs.append(f"OverSubscribe={part.oversubscribe}")
    if part.allow_accounts is not None:
        attrs.append(f"AllowAccounts={','.join(part.allow_accounts)}")
    if part.allow_qos is not None:
        attrs.append(f"AllowQos={','.join(part.allow_qos)}")
    if part.deny_accounts:
        attrs.append(f"DenyAccounts={','.join(part.deny_accounts)}")
    if part.deny_qos:
        attrs.append(f"DenyQos={','.join(part.deny_qos)}")
    if part.preempt_mode:
        attrs.append(f"PreemptMode={part.preempt_mode}")
    if part.max_nodes is not None:
        attrs.append(f"MaxNodes={part.max_nodes}")
    if part.min_nodes is not None:
        attrs.append(f"MinNodes={part.min_nodes}")
    if part.qos:
        attrs.append(f"QOS={part.qos}")
    for key, value in part.extra.items():
        attrs.append(f"{key}={_quote(value)}")
    attrs.append(f"State={part.state}")
    return attrs


def render_slurm_conf(config: SlurmConfig, nodes: list[Node]) -> str:
    """Write a slurm.conf that loads back to the same model.

    Modelled keys are written from their typed values (so edits to ``params`` win over
    ``raw``), other keys from ``raw``. Consecutive nodes with equal attributes share one
    NodeName line with a compressed hostlist. What slurm.conf cannot hold (gres.conf
    File/Cores/MIG detail, Kubernetes labels and taints) is not written.
    """
    out = ["# slurm.conf written by gpupool", f"ClusterName={config.cluster_name}"]
    keys = [k for k in config.raw if k != "ClusterName"]
    keys += [k for k in config.params if k not in config.raw and k != "ClusterName"]
    for key in ("SelectTypeParameters", "GresTypes", "SchedulerParameters"):
        if key not in keys and _SPECIAL_FIELDS[key](config):
            keys.append(key)
    for key in keys:
        if "=" in key:  # a record kept as written (SlurmctldHost=…, NodeSet=…, FrontendName=…)
            rest = config.raw[key]
            out.append(f"{key} {rest}".rstrip())
            continue
        value = _global_value(config, key)
        if value is not None:
            out.append(f"{key}={_quote(value)}")
    out.append("")
    group: list[Node] = []
    attrs: list[str] = []
    for node in list(nodes) + [None]:  # type: ignore[list-item]
        node_attrs = _node_attributes(node) if node is not None else None
        if group and node_attrs != attrs:
            out.append(" ".join([f"NodeName={compress_hostlist([n.name for n in group])}", *attrs]))
            group = []
        if node is not None:
            group.append(node)
            attrs = node_attrs  # type: ignore[assignment]
    out.append("")
    for part in config.partitions.values():
        out.append(" ".join([f"PartitionName={part.name}", *_partition_attributes(part)]))
    return "\n".join(out).rstrip("\n") + "\n"
