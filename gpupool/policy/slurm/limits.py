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
_QOS_PER_ACCOUNT = {"cpu": "MaxCpuPerAccount", "mem": "MaxMemoryPerAccount", "node": "MaxNodePerAccount"}
_QOS_MIN = {"cpu": "QOSMinCpuNotSatisfied", "mem": "QOSMinMemory", "node": "QOSMinNode"}
_ASSOC_GRP = {"cpu": "AssocGrpCpuLimit", "mem": "AssocGrpMemLimit", "node": "AssocGrpNodeLimit"}
_ASSOC_PER_JOB = {"cpu": "AssocMaxCpuPerJobLimit", "mem": "AssocMaxMemPerJob", "node": "AssocMaxNodePerJobLimit"}


#: the reasons 22.05's acct_policy_job_runnable_state takes for a limit already met (the enum
#: from WAIT_QOS_GRP_CPU to WAIT_ASSOC_MAX_SUB_JOB and five older ones; the TRES-era reasons
#: after it, AssocGrpGRES and QOSMaxGRESPerUser among them, are not in it)
LIMIT_STATE_REASONS = frozenset({
    "QOSGrpCpuLimit", "QOSGrpCPUMinutesLimit", "QOSGrpCPURunMinutesLimit", "QOSGrpJobsLimit", "QOSGrpMemLimit",
    "QOSGrpNodeLimit", "QOSGrpSubmitJobsLimit", "QOSGrpWallLimit", "QOSMaxCpuPerJobLimit",
    "QOSMaxCpuMinutesPerJobLimit", "QOSMaxNodePerJobLimit", "QOSMaxWallDurationPerJobLimit",
    "QOSMaxCpuPerUserLimit", "QOSMaxJobsPerUserLimit", "QOSMaxNodePerUserLimit", "QOSMaxSubmitJobPerUserLimit",
    "QOSMinCpuNotSatisfied", "AssocGrpCpuLimit", "AssocGrpCPUMinutesLimit", "AssocGrpCPURunMinutesLimit",
    "AssocGrpJobsLimit", "AssocGrpMemLimit", "AssocGrpNodeLimit", "AssocGrpSubmitJobsLimit", "AssocGrpWallLimit",
    "AssocMaxJobsLimit", "AssocMaxCpuPerJobLimit", "AssocMaxCpuMinutesPerJobLimit", "AssocMaxNodePerJobLimit",
    "AssocMaxWallDurationPerJobLimit", "AssocMaxSubmitJobLimit", "AssociationJobLimit",
    "AssociationResourceLimit", "AssociationTimeLimit", "QOSJobLimit", "QOSTimeLimit"})
#: the limits acct_policy_job_runnable_pre_select tests (job counts and wall time; the TRES
#: limits come after the selection)
PRE_SELECT_REASONS = frozenset({
    "QOSGrpJobsLimit", "MaxJobsPerAccount", "QOSMaxJobsPerUserLimit", "QOSMaxWallDurationPerJobLimit",
    "AssocGrpJobsLimit", "AssocMaxJobsLimit", "AssocMaxWallDurationPerJobLimit"})


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
MSG_PART_CONFIG = "Requested partition configuration not available now"
MSG_TIME_MIN = "Invalid time-min specification (exceeds job's time or other limits)"
#: slurm.conf's MaxArraySize when it is not set (22.05): task indices 0-1000
DEFAULT_MAX_ARRAY_SIZE = 1001


def has_flag(qos, flag: str) -> bool:
    """Whether ``qos`` carries ``flag`` (sacctmgr's QOS Flags, matched case-insensitively)."""
    return qos is not None and any(f.lower() == flag for f in qos.flags)


def qos_order(job_qos, part_qos) -> tuple:
    """(first, second): the QOS whose limits a job in a partition meets, in the order slurmctld
    reads them (``acct_policy_set_qos_order``). The partition's QOS comes first and its
    limits win over the job's own of the same kind, unless the job's QOS has the flag
    OverPartQOS; one QOS is never read twice (second None). A real 22.05.8 held a third
    one-GPU job of QOS normal in a partition whose QOS had MaxTRESPerUser=gres/gpu=2
    (QOSMaxGRESPerUser), and ran three under a job QOS with OverPartQOS and a limit of 3."""
    if job_qos is None or part_qos is None or part_qos is job_qos:
        return (job_qos if job_qos is not None else part_qos, None)
    if has_flag(job_qos, "overpartqos"):
        return (job_qos, part_qos)
    return (part_qos, job_qos)


def add_usage(usage: dict, req: JobReq, alloc: dict[str, int], sign: int = 1,
              part_qos: str | None = None) -> None:
    """Count one running job into the per-call usage aggregates: under its QOS and, where
    its partition has a QOS of its own (``part_qos``), under that one too (slurmctld adds a
    job's usage to both QOS of ``qos_order``)."""
    keys = [("qu", req.qos, req.user), ("q", req.qos), ("qa", req.qos, req.account), ("a", req.account, req.user)]
    if part_qos is not None and part_qos != req.qos:
        keys += [("qu", part_qos, req.user), ("q", part_qos), ("qa", part_qos, req.account)]
    for key in keys:
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


def association_limits(acct, user: str, account: str, chain: tuple[str, ...]) -> list:
    """[(kind, Association)] that ``check`` reads for ``user`` in ``account`` (``chain``: the
    account and those above it): the user's association ("a") with the per-user limits
    (MaxJobs, MaxSubmitJobs, MaxTRESPerJob, MaxWall) it inherits from the nearest account
    above that sets them where it sets none itself, then each account up the tree ("acc"),
    whose Grp* limits bind there. slurmdbd propagates the Max* limits down the tree: a real
    22.05.8 listed an account's MaxJobs=20, MaxSubmitJobs=5 and MaxWall=30 on each of its
    users, and a user's own MaxJobs=2 over the account's 20."""
    if acct is None:
        return []
    accounts = [acct.accounts[a] for a in chain]
    out: list = []
    for ua in acct.user_associations:
        if ua.user == user and ua.account == account:
            out.append(("a", inherited_limits(ua, accounts)))
            break
    out.extend(("acc", a) for a in accounts)
    return out


def qos_wall(pair: tuple) -> int | None:
    """The MaxWall of the first QOS of ``qos_order``'s pair that sets one, else None."""
    return next((q.max_wall for q in pair if q is not None and q.max_wall is not None), None)


def limit_wall(pair: tuple, assocs: list) -> int | None:
    """The MaxWall a job without a time limit gets (``_set_time_limit``): the first QOS of
    ``qos_order``'s pair that sets one, else its user association's (own or inherited)."""
    wall = qos_wall(pair)
    if wall is not None:
        return wall
    if assocs and assocs[0][0] == "a":
        return assocs[0][1].max_wall
    return None


def part_limit(time_limit: float | None, most: int | None, least: int | None, part, max_time: float | None,
               job_qos) -> str | None:
    """Which of partition ``part``'s own limits a job breaks, as its pending reason
    (PartitionNodeLimit before PartitionTimeLimit, the order of ``_part_access_check``),
    else None. ``time_limit`` is the job's limit as slurmctld stores it (math.inf for
    UNLIMITED); ``most`` its node count (a range's largest) held against MaxNodes and ``least``
    the count held against MinNodes, each None where slurmctld has none to test (a job that
    gave no ``--nodes``). At submit that is a range's least count; once the job exists
    slurmctld has raised it to the least MinNodes of the job's partitions where its largest
    reaches that, and the queue passes the counts so stored (``jobinfo.stored_node_counts``). Probe p96 (a real 22.05.8 under EnforcePartLimits=ALL)
    refused ``-N1-2`` in a partition of MaxNodes=1, and ``-N1-2``, ``-N1-3`` and ``-N1`` in one
    of MinNodes=2. The job's QOS flags PartitionMaxNodes, PartitionMinNodes and
    PartitionTimeLimit lift the matching limit (a real 22.05.8 ran ``-N2`` in a partition of
    MaxNodes=1 and ``-t 120`` over MaxTime=60 under QOS with those flags, and kept the limit
    of 2:00:00)."""
    if least is not None and part.nodes and least > len(part.nodes):
        # more nodes than the partition has, tested first (``_part_access_check``; probe p137:
        # ``-p q -N3 -t 5`` with q of two nodes and MaxTime=3 waited with PartitionNodeLimit)
        return "PartitionNodeLimit"
    if (part.max_nodes is not None and most is not None and most > part.max_nodes
            and not has_flag(job_qos, "partitionmaxnodes")) or (
            part.min_nodes is not None and least is not None and least < part.min_nodes
            and not has_flag(job_qos, "partitionminnodes")):
        return "PartitionNodeLimit"
    if max_time is not None and time_limit is not None and time_limit > max_time \
            and not has_flag(job_qos, "partitiontimelimit"):
        return "PartitionTimeLimit"
    return None


def part_hold(time_limit: float | None, most: int | None, least: int | None, info, job_qos,
              account: str | None, qos: str | None) -> str | None:
    """Why partition ``info`` (a ``PartInfo``) holds a job as slurmctld stores it, the order of
    ``job_limits_check``: its own limits (``part_limit``), then its QOS and accounts
    (``part_policy``); else None."""
    return (part_limit(time_limit, most, least, info.part, info.max_time, job_qos)
            or part_policy(info.part, account, qos))


#: the partition states whose jobs are scheduled (PARTITION_SCHED), and whose own size and
#: time limits ``_part_access_check`` tests: DRAIN stops submissions only (a real 22.05.8 ran
#: a job queued in a partition drained after its submission)
SCHEDULED_STATES = frozenset({"UP", "DRAIN"})


#: the reasons :func:`part_policy` gives: a partition's refusal of the job's QOS or account
PART_POLICY_REASONS = frozenset({"QOSNotAllowed", "AccountNotAllowed"})


def part_policy(part, account: str | None, qos: str | None) -> str | None:
    """Why partition ``part``'s AllowQos/DenyQos or AllowAccounts/DenyAccounts keep a job of
    ``account`` and ``qos`` out, as its pending reason, else None: QOSNotAllowed, then
    AccountNotAllowed, as ``select_nodes`` tests them (``part_policy_valid_qos``, then
    ``part_policy_valid_acct``). Names are the dump's spelling (``pool_dir`` resolves a
    partition's QOS lists)."""
    return qos_not_allowed(part, qos) or account_not_allowed(part, account)


def qos_not_allowed(part, qos: str | None) -> str | None:
    """QOSNotAllowed where ``part``'s AllowQos lacks ``qos`` (a job with no QOS included) or
    its DenyQos holds it, else None."""
    if part.allow_qos is not None:
        return "QOSNotAllowed" if qos is None or qos not in part.allow_qos else None
    return "QOSNotAllowed" if qos is not None and qos in part.deny_qos else None


def account_not_allowed(part, account: str | None) -> str | None:
    """AccountNotAllowed where ``part``'s AllowAccounts lacks ``account`` (none included) or
    its DenyAccounts holds it, else None."""
    if part.allow_accounts is not None:
        return "AccountNotAllowed" if not account or account not in part.allow_accounts else None
    return "AccountNotAllowed" if account and account in part.deny_accounts else None


def max_nodes(qoses: tuple, assoc_limits: list) -> int | None:
    """The most nodes slurmctld lets a job select under its QOS pair and associations
    (``acct_policy_get_max_nodes``), or None where no node limit applies. Limits' values, not
    what is left of them: the QOS pair's per-account, per-job and per-user node limits (each
    read from the second QOS where the first sets none) and its group limit; then, from the
    user's association up the tree, an association's group limit where the QOS pair sets no
    group limit, and the user association's per-job limit where the QOS pair sets no per-job,
    per-user or per-account one, stopping at the first association whose group limit lowered
    the cap. (A QOS LimitFactor, which scales them, is not modelled.)"""
    per: int | None = None
    for key in ("max_tres_per_account", "max_tres_per_job", "max_tres_per_user"):
        for qos in qoses:
            if qos is not None and "node" in getattr(qos, key):
                v = getattr(qos, key)["node"]
                per = v if per is None else min(per, v)
                break
    grp = next((q.grp_tres["node"] for q in qoses if q is not None and "node" in q.grp_tres), None)
    caps = [c for c in (per, grp) if c is not None]
    cap = min(caps) if caps else None
    has_qos = any(q is not None for q in qoses)
    for kind, assoc in assoc_limits:  # the user's association ("a"), then each account upwards
        lowered = False
        v = assoc.grp_tres.get("node")
        if (not has_qos or grp is None) and v is not None and (cap is None or v < cap):
            cap, lowered = v, True
        v = assoc.max_tres_per_job.get("node") if kind == "a" else None
        if per is None and v is not None and (cap is None or v < cap):
            cap = v
        if lowered:
            break
    return cap


def check(req: JobReq, tl: float | None, qoses: tuple, assoc_limits: list, usage: dict) -> str | None:
    """The first limit that keeps the job from starting now, as Slurm's reason, or None.

    In slurmctld's order: the counts and time limits tested before nodes are selected
    (``acct_policy_job_runnable_pre_select``: each QOS, then the associations), then the TRES
    limits tested on the selection (``..._post_select``, in the same order). ``qoses`` is
    ``qos_order``'s pair: a limit the first QOS sets (per TRES for the TRES limits) is not
    read from the second, and an association's limit of a kind a QOS sets is not read at all
    (its MaxJobs where a QOS sets MaxJobsPU or MaxJobsPA). ``assoc_limits`` is ``[(kind,
    Association)]`` for the user association ("a") and each account up the tree ("acc");
    ``usage`` holds what running jobs use. A usage limit holds only a job that asks some of
    that TRES (``_validate_tres_usage_limits`` tests nothing for a count of 0): a job asking
    GPUs without a type is never held by a typed GPU limit, even where typed usage, charged by
    what jobs run on, is over it. MinTRESPerJob holds a job asking less, none included.
    """
    want = req.tres
    seen: set = set()  # the limits (kind, TRES) a QOS read earlier has set
    qoses = [q for q in qoses if q is not None]
    for qos in qoses:  # pre-select: GrpJobs, MaxJobsPA, MaxJobsPU, MaxWall
        if qos.grp_jobs is not None and "grp_jobs" not in seen:
            seen.add("grp_jobs")
            if usage.get(("q", qos.name), {}).get("jobs", 0) >= qos.grp_jobs:
                return "QOSGrpJobsLimit"
        if qos.max_jobs_per_account is not None and "jobs_pa" not in seen:
            seen.add("jobs_pa")
            if usage.get(("qa", qos.name, req.account), {}).get("jobs", 0) >= qos.max_jobs_per_account:
                return "MaxJobsPerAccount"
        if qos.max_jobs_per_user is not None and "jobs" not in seen:
            seen.add("jobs")
            if usage.get(("qu", qos.name, req.user), {}).get("jobs", 0) >= qos.max_jobs_per_user:
                return "QOSMaxJobsPerUserLimit"
        if qos.max_wall is not None and "wall" not in seen:
            seen.add("wall")
            if tl is not None and tl > qos.max_wall:
                return "QOSMaxWallDurationPerJobLimit"
    for kind, assoc in assoc_limits:
        u = usage.get(("a", req.account, req.user) if kind == "a" else ("acc", assoc.account), {})
        if assoc.grp_jobs is not None and "grp_jobs" not in seen and u.get("jobs", 0) >= assoc.grp_jobs:
            return "AssocGrpJobsLimit"
        if kind == "a":  # per-user limits, with what the user inherits from its accounts
            if assoc.max_jobs is not None and u.get("jobs", 0) >= assoc.max_jobs and \
                    "jobs" not in seen and "jobs_pa" not in seen:
                return "AssocMaxJobsLimit"
            if assoc.max_wall is not None and tl is not None and tl > assoc.max_wall and "wall" not in seen:
                return "AssocMaxWallDurationPerJobLimit"
    for qos in qoses:  # post-select: GrpTRES, MaxTRESPerJob, MinTRESPerJob, MaxTRESPA, MaxTRESPU
        why = _usage_limit(seen, "grp", qos.grp_tres, want, usage.get(("q", qos.name), {}), _QOS_GRP, "QOSGrpGRES")
        if why is not None:
            return why
        for t, lim in qos.max_tres_per_job.items():
            if ("job", t) not in seen:
                seen.add(("job", t))
                if want.get(t, 0) > lim:
                    return _reason(_QOS_PER_JOB, t, "QOSMaxGRESPerJob")
        for t, lim in qos.min_tres_per_job.items():
            # (a TRES the request does not count, such as one slurm.conf does not track, binds
            # nobody; billing is not counted in ``req.tres``: a minimum on it is not modelled)
            if ("min", t) not in seen and t in want:
                seen.add(("min", t))
                if want[t] < lim:
                    return _reason(_QOS_MIN, t, "QOSMinGRES")
        why = _usage_limit(seen, "account", qos.max_tres_per_account, want,
                           usage.get(("qa", qos.name, req.account), {}), _QOS_PER_ACCOUNT, "MaxGRESPerAccount") or \
            _usage_limit(seen, "user", qos.max_tres_per_user, want, usage.get(("qu", qos.name, req.user), {}),
                         _QOS_PER_USER, "QOSMaxGRESPerUser")
        if why is not None:
            return why
    for kind, assoc in assoc_limits:
        u = usage.get(("a", req.account, req.user) if kind == "a" else ("acc", assoc.account), {})
        for t, lim in assoc.grp_tres.items():
            w = want.get(t, 0)
            if w and u.get(t, 0) + w > lim and ("grp", t) not in seen:
                return _reason(_ASSOC_GRP, t, "AssocGrpGRES")
        if kind == "a":
            for t, lim in assoc.max_tres_per_job.items():
                if want.get(t, 0) > lim and ("job", t) not in seen:
                    return _reason(_ASSOC_PER_JOB, t, "AssocMaxGRESPerJob")
    return None


def _usage_limit(seen: set, kind: str, caps: dict[str, int], want: dict[str, int], used: dict,
                 table: dict[str, str], gres_name: str) -> str | None:
    """The reason of the first TRES of a QOS usage limit (``caps``, of ``kind``) that the job
    (``want``) takes past it beside what runs (``used``), else None; each TRES is marked read
    in ``seen`` first, so a second QOS's limit of the same kind and TRES is not read."""
    for t, lim in caps.items():
        if (kind, t) not in seen:
            seen.add((kind, t))
            w = want.get(t, 0)
            if w and used.get(t, 0) + w > lim:
                return _reason(table, t, gres_name)
    return None


def deny_on_limit(req: JobReq, tl: float | None, qoses: tuple, assoc_limits: list) -> str | None:
    """The limit a job breaks on its own, as Slurm's reason, where one of its QOS has the flag
    DenyOnLimit; else None. slurmctld then refuses the job at submit (``acct_policy_validate``
    with strict checking) instead of leaving it pending: every size and time limit is held
    against the request alone, the per-user and group TRES limits too (as if nothing else
    ran); job counts are not. A real 22.05.8 refused, under a QOS with DenyOnLimit,
    MaxTRESPerJob=gres/gpu=2 and MaxWall=60, ``--gres=gpu:4``, ``-t 120`` and a job without
    ``--time`` in a partition of DefaultTime=4:00:00 (sbatch printed the reason, then
    "Job violates accounting/QOS policy ..."), and ``--gres=gpu:3`` under the partition QOS's
    MaxTRESPerUser=gres/gpu=2 (DenyOnLimit on the job's QOS is enough)."""
    if not any(has_flag(q, "denyonlimit") for q in qoses):
        return None
    # ``check`` with no usage, on copies without the job counts submission does not validate
    alone = [replace(q, max_jobs_per_user=None, max_jobs_per_account=None, grp_jobs=None)
             for q in qoses if q is not None]
    assocs = [(kind, replace(a, max_jobs=None, grp_jobs=None)) for kind, a in assoc_limits]
    return check(req, tl, tuple(alone), assocs, {})
