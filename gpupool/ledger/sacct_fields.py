"""sacct's field names (Slurm 22.05 ``sacct --helpformat``) and how the ledger prints each.

Fields the ledger stores print from their columns in sacct's formats; other sacct fields
print what an import stored for them (``jobs.extra``) or nothing. ``GPU*``, ``Queue``,
``Namespace``, ``Kind``, ``Requeues`` and ``Preemptions`` are gpupool's additions.
"""
from __future__ import annotations

import json
import math

from gpupool.formats.slurm_time import format_duration
from gpupool.ledger.timefmt import format_ts

#: ``sacct --helpformat`` of Slurm 22.05.8, in its order (this is what ``--format=ALL`` prints;
#: checked against the real header in tests/ledger/fixtures/real_slurm_22.05).
SACCT_2205_FIELDS = (
    "Account AdminComment AllocCPUS AllocNodes AllocTRES AssocID AveCPU AveCPUFreq AveDiskRead AveDiskWrite "
    "AvePages AveRSS AveVMSize BlockID Cluster Comment Constraints ConsumedEnergy ConsumedEnergyRaw Container "
    "CPUTime CPUTimeRAW DBIndex DerivedExitCode Elapsed ElapsedRaw Eligible End ExitCode Flags GID Group JobID "
    "JobIDRaw JobName Layout MaxDiskRead MaxDiskReadNode MaxDiskReadTask MaxDiskWrite MaxDiskWriteNode "
    "MaxDiskWriteTask MaxPages MaxPagesNode MaxPagesTask MaxRSS MaxRSSNode MaxRSSTask MaxVMSize MaxVMSizeNode "
    "MaxVMSizeTask McsLabel MinCPU MinCPUNode MinCPUTask NCPUS NNodes NodeList NTasks Partition Priority QOS "
    "QOSRAW Reason ReqCPUFreq ReqCPUFreqGov ReqCPUFreqMax ReqCPUFreqMin ReqCPUS ReqMem ReqNodes ReqTRES "
    "Reservation ReservationId Reserved ResvCPU ResvCPURAW Start State Submit SubmitLine Suspended SystemComment SystemCPU "
    "Timelimit TimelimitRaw TotalCPU TRESUsageInAve TRESUsageInMax TRESUsageInMaxNode TRESUsageInMaxTask "
    "TRESUsageInMin TRESUsageInMinNode TRESUsageInMinTask TRESUsageInTot TRESUsageOutAve TRESUsageOutMax "
    "TRESUsageOutMaxNode TRESUsageOutMaxTask TRESUsageOutMin TRESUsageOutMinNode TRESUsageOutMinTask "
    "TRESUsageOutTot UID User UserCPU WCKey WCKeyID WorkDir"
).split()

GPUPOOL_FIELDS = ("GPUs", "GPUType", "GPUIndices", "GPUSeconds", "GPUSecondsLost", "Requeues", "Preemptions",
                  "Queue", "Namespace", "Kind")

#: sacct's default ``--format`` and widths.
DEFAULT_FORMAT = ("JobID", "JobName", "Partition", "Account", "AllocCPUS", "State", "ExitCode")
WIDTHS = {"JobID": 12, "JobName": 10, "Partition": 10, "Account": 10, "AllocCPUS": 10, "State": 10,
          "ExitCode": 8, "Submit": 19, "Start": 19, "End": 19, "Eligible": 19, "NodeList": 15, "AllocTRES": 10,
          "Elapsed": 10, "Timelimit": 10}

_CANON = {name.lower(): name for name in SACCT_2205_FIELDS + list(GPUPOOL_FIELDS)}
_CANON["planned"] = "Reserved"


def canonical(name: str) -> str | None:
    """sacct's spelling of a field name (case-insensitive, as sacct accepts), or None."""
    return _CANON.get(name.strip().lower())


def _elapsed(job) -> float | None:
    return job["elapsed"]


def _raw_minutes(seconds) -> str:
    return "UNLIMITED" if seconds is None else str(int(math.ceil(seconds / 60)))


def _int(v) -> str:
    return "" if v is None else str(int(v))


def _reserved(job) -> str:
    if job["start"] is None or job["eligible"] is None:
        return "INVALID" if job["start"] is None else "00:00:00"
    return format_duration(max(0.0, job["start"] - job["eligible"]))


_GETTERS = {
    "JobID": lambda j: j["job_id"],
    "JobIDRaw": lambda j: _int(j["job_id_raw"]) if j["job_id_raw"] is not None else j["job_id"],
    "JobName": lambda j: j["name"],
    "User": lambda j: j["user"],
    "Account": lambda j: j["account"],
    "Partition": lambda j: j["partition"],
    "QOS": lambda j: j["qos"],
    "Cluster": lambda j: j["origin"],
    "Priority": lambda j: _int(j["priority"]),
    "Submit": lambda j: format_ts(j["submit"]),
    "Eligible": lambda j: format_ts(j["eligible"]),
    "Start": lambda j: format_ts(j["start"]),
    "End": lambda j: format_ts(j["end"]),
    "Elapsed": lambda j: format_duration(_elapsed(j) or 0),
    "ElapsedRaw": lambda j: str(int(round(_elapsed(j) or 0))),
    "Timelimit": lambda j: format_duration(j["timelimit"]),
    "TimelimitRaw": lambda j: _raw_minutes(j["timelimit"]),
    "State": lambda j: j["state"],
    "ExitCode": lambda j: j["exit_code"],
    "DerivedExitCode": lambda j: "0:0",
    "Reason": lambda j: j["reason"] or "None",
    "Flags": lambda j: j["flags"],
    "ReqTRES": lambda j: j["req_tres"],
    "AllocTRES": lambda j: j["alloc_tres"],
    "AllocCPUS": lambda j: str(j["ncpus"]),
    "NCPUS": lambda j: str(j["ncpus"]),
    "AllocNodes": lambda j: str(j["nnodes"]),
    "NNodes": lambda j: str(j["nnodes"]),
    "NodeList": lambda j: j["node_list"] or "None assigned",
    "Reserved": _reserved,
    "Suspended": lambda j: "00:00:00",
    "CPUTime": lambda j: format_duration((_elapsed(j) or 0) * j["ncpus"]),
    "CPUTimeRAW": lambda j: str(int(round((_elapsed(j) or 0) * j["ncpus"]))),
    "GPUs": lambda j: str(j["gpus"]),
    "GPUType": lambda j: j["gpu_type"],
    "GPUIndices": lambda j: j["gpu_indices"],
    "GPUSeconds": lambda j: f"{j['gpu_seconds']:g}",
    "GPUSecondsLost": lambda j: f"{j['gpu_seconds_lost']:g}",
    "Requeues": lambda j: str(j["requeues"]),
    "Preemptions": lambda j: str(j["preemptions"]),
    "Queue": lambda j: j["queue"],
    "Namespace": lambda j: j["namespace"],
    "Kind": lambda j: j["kind"],
}


#: Fields the ledger can derive from its columns but prints as imported when an import kept
#: them: sacct knows better (a job cancelled while pending has Start set, yet Reserved is
#: INVALID and AllocNodes 0).
_IMPORTED_FIRST = {"AllocNodes", "Reserved", "Suspended", "CPUTime", "CPUTimeRAW", "DerivedExitCode"}


def _extra(job) -> dict:
    extra = job["extra"]
    return json.loads(extra or "{}") if isinstance(extra, str) else (extra or {})


def field_value(job, name: str) -> str:
    getter = _GETTERS.get(name)
    if getter is not None:
        if name in _IMPORTED_FIRST:
            kept = _extra(job).get(name)
            if kept not in (None, ""):
                return str(kept)
        value = getter(job)
        return "" if value is None else str(value)
    value = _extra(job).get(name, "")
    return "" if value is None else str(value)
