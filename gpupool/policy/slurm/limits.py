"""Partition, QOS and association limits, Slurm's pending reasons, and submit-time rejection.

QOS and association limits are enforced only with ``AccountingStorageEnforce=limits``
(or ``safe``), as in Slurm (spec §8). A limit-blocked job pends with Slurm's reason name and
does not block its partition (unless ``assoc_limit_stop``).
"""
from __future__ import annotations

from dataclasses import replace

from gpupool.model.slurm import Association
from gpupool.policy.slurm.jobinfo import JobReq

# TRES -> reason name, per limit kind (docHEAD:job_reason_codes).
_QOS_PER_USER = {"cpu": "QOSMaxCpuPerUserLimit", "mem": "QOSMaxMemoryPerUser", "node": "QOSMaxNodePerUserLimit"}
_QOS_GRP = {"cpu": "QOSGrpCpuLimit", "mem": "QOSGrpMemLimit", "node": "QOSGrpNodeLimit"}
_QOS_PER_JOB = {"cpu": "QOSMaxCpuPerJobLimit", "mem": "QOSMaxMemoryPerJob", "node": "QOSMaxNodePerJobLimit"}
_ASSOC_GRP = {"cpu": "AssocGrpCpuLimit", "mem": "AssocGrpMemLimit", "node": "AssocGrpNodeLimit"}
_ASSOC_PER_JOB = {"cpu": "AssocMaxCpuPerJobLimit", "mem": "AssocMaxMemPerJob", "node": "AssocMaxNodesPerJobLimit"}


def _reason(table: dict[str, str], tres: str, gres_name: str) -> str:
    if tres.startswith("gres/"):
        return gres_name
    return table.get(tres, gres_name.replace("GRES", tres.capitalize()))


# Submit-time rejection messages (Slurm's wording, slurm_strerror).
MSG_PARTITION = "Invalid partition name specified"
MSG_NODES = "Requested node configuration is not available"
MSG_CPUS = "More processors requested than permitted"
MSG_NODE_COUNT = "Node count specification invalid"
MSG_LICENSE = "Invalid license specification"
MSG_TIME = "Requested time limit is invalid (missing or exceeds some limit)"
MSG_ACCOUNT = "Invalid account or account/partition combination specified"
MSG_QOS = "Invalid qos specification"
MSG_ARRAY = "Invalid job array specification"
MSG_SUBMIT_LIMIT = "Job violates accounting/QOS policy (job submit limit, user's size and/or time limits)"
MSG_TIME_MIN = "Invalid time-min specification (exceeds job's time or other limits)"
#: slurm.conf's MaxArraySize when it is not set (22.05): task indices 0-1000
DEFAULT_MAX_ARRAY_SIZE = 1001


def add_usage(usage: dict, req: JobReq, alloc: dict[str, int], sign: int = 1) -> None:
    """Count one running job into the per-call usage aggregates."""
    q = req.qos
    for key in (("qu", q, req.user), ("q", q), ("a", req.account, req.user)):
        slot = usage.setdefault(key, {"jobs": 0})
        slot["jobs"] += sign
        for t, v in alloc.items():
            slot[t] = slot.get(t, 0) + sign * v


def add_account_usage(usage: dict, chain: tuple[str, ...], alloc: dict[str, int], sign: int = 1) -> None:
    for acc in chain:
        slot = usage.setdefault(("acc", acc), {"jobs": 0})
        slot["jobs"] += sign
        for t, v in alloc.items():
            slot[t] = slot.get(t, 0) + sign * v


def copy_usage(usage: dict) -> dict:
    """A copy a pass may add its own starts to (the slots are copied too)."""
    return {key: dict(slot) for key, slot in usage.items()}


def inherited_limits(user_assoc: Association, accounts: list[Association]) -> Association:
    """``user_assoc`` with each per-user limit it leaves unset (MaxJobs, MaxSubmitJobs,
    MaxTRESPerJob, MaxWall) taken from the nearest of ``accounts`` (its account, then up the
    tree) that sets it, as slurmdbd propagates them; Grp* limits stay where they are set."""
    found: dict = {}
    for name in ("max_jobs", "max_submit_jobs", "max_wall"):
        if getattr(user_assoc, name) is None:
            got = next((v for v in (getattr(a, name) for a in accounts) if v is not None), None)
            if got is not None:
                found[name] = got
    # MaxTRESPerJob per TRES: the nearest level that limits a TRES sets it (slurmdbd joins the
    # TRES lists up the tree)
    tres = dict(user_assoc.max_tres_per_job)
    for a in accounts:
        for key, value in a.max_tres_per_job.items():
            tres.setdefault(key, value)
    if tres != user_assoc.max_tres_per_job:
        found["max_tres_per_job"] = tres
    return replace(user_assoc, **found) if found else user_assoc


def check(req: JobReq, tl: float | None, qos, assoc_limits: list, usage: dict) -> str | None:
    """The first limit that keeps the job from starting now, as Slurm's reason, or None.

    ``assoc_limits`` is ``[(kind, Association)]`` for the user association ("a") and each
    account up the tree ("acc"); ``usage`` holds what running jobs use. A usage limit holds
    only a job that asks some of that TRES (``_validate_tres_usage_limits`` tests nothing for a
    count of 0): a job asking GPUs without a type is never held by a typed GPU limit, even
    where typed usage, charged by what jobs run on, is over it.
    """
    want = req.tres
    if qos is not None:
        for t, lim in qos.max_tres_per_job.items():
            if want.get(t, 0) > lim:
                return _reason(_QOS_PER_JOB, t, "QOSMaxGRESPerJob")
        if qos.max_wall is not None and tl is not None and tl > qos.max_wall:
            return "QOSMaxWallDurationPerJobLimit"
        u = usage.get(("qu", req.qos, req.user), {})
        if qos.max_jobs_per_user is not None and u.get("jobs", 0) >= qos.max_jobs_per_user:
            return "QOSMaxJobsPerUserLimit"
        for t, lim in qos.max_tres_per_user.items():
            w = want.get(t, 0)
            if w and u.get(t, 0) + w > lim:
                return _reason(_QOS_PER_USER, t, "QOSMaxGRESPerUser")
        g = usage.get(("q", req.qos), {})
        for t, lim in qos.grp_tres.items():
            w = want.get(t, 0)
            if w and g.get(t, 0) + w > lim:
                return _reason(_QOS_GRP, t, "QOSGrpGRES")
    for kind, assoc in assoc_limits:
        key = ("a", req.account, req.user) if kind == "a" else ("acc", assoc.account)
        u = usage.get(key, {})
        if kind == "a":  # per-user limits, with what the user inherits from its accounts;
            # a QOS that sets the same limit overrides the association's (acct_policy.c checks
            # the association's only where the QOS leaves it unset)
            for t, lim in assoc.max_tres_per_job.items():
                if want.get(t, 0) > lim and (qos is None or t not in qos.max_tres_per_job):
                    return _reason(_ASSOC_PER_JOB, t, "AssocMaxGRESPerJob")
            if assoc.max_wall is not None and tl is not None and tl > assoc.max_wall and \
                    (qos is None or qos.max_wall is None):
                return "AssocMaxWallDurationPerJobLimit"
            if assoc.max_jobs is not None and u.get("jobs", 0) >= assoc.max_jobs and \
                    (qos is None or qos.max_jobs_per_user is None):
                return "AssocMaxJobsLimit"
        if assoc.grp_jobs is not None and u.get("jobs", 0) >= assoc.grp_jobs:
            return "AssocGrpJobsLimit"
        for t, lim in assoc.grp_tres.items():
            w = want.get(t, 0)
            if w and u.get(t, 0) + w > lim:
                return _reason(_ASSOC_GRP, t, "AssocGrpGRES")
    return None
