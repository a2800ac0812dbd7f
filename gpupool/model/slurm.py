"""Slurm's own objects: partitions, scheduler settings, the accounting tree and QOS.

Plain data; the meaning of each field is Slurm's (see ``../shared/spec/slurm.md``).
Times are seconds (None = UNLIMITED / not set); TRES limits are ``{"gres/gpu": 8, "cpu": …}``
maps keyed the way Slurm names TRES.
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(slots=True)
class Partition:
    name: str
    nodes: tuple[str, ...]
    default: bool = False
    max_time: int | None = None
    default_time: int | None = None
    priority_tier: int = 1
    priority_job_factor: int = 1
    oversubscribe: str = "NO"
    allow_accounts: tuple[str, ...] | None = None  # None = ALL
    allow_qos: tuple[str, ...] | None = None  # None = ALL
    deny_accounts: tuple[str, ...] = ()
    deny_qos: tuple[str, ...] = ()
    preempt_mode: str | None = None
    state: str = "UP"
    max_nodes: int | None = None
    min_nodes: int | None = None
    qos: str | None = None
    source: str = ""
    #: Other PartitionName keys, as written: some the Slurm policy reads (GraceTime,
    #: TRESBillingWeights, DefCpuPerGPU, DefMem*), the rest kept only (Hidden, LLN, …).
    extra: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class GresEntry:
    """One gres.conf line (or the AutoDetect setting) for one node name expression."""

    name: str  # "gpu"
    type: str | None = None
    file: str | None = None
    count: int | None = None
    cores: tuple[int, ...] = ()
    node_names: tuple[str, ...] | None = None  # None = every node
    auto_detect: str | None = None
    mig_profile: str | None = None
    source: str = ""
    #: MultipleFiles= (a MIG slice: its parent GPU's file plus its capability files).
    multiple_files: tuple[str, ...] = ()
    flags: tuple[str, ...] = ()
    links: str | None = None


@dataclass(slots=True)
class SlurmConfig:
    """slurm.conf + gres.conf, typed where gpupool acts on a key.

    ``params`` keeps every modelled global key with its parsed value (ints, seconds, lists);
    ``raw`` keeps every key as written, for rendering back and for policies that read
    rarely used keys.
    """

    cluster_name: str = "cluster"
    partitions: dict[str, Partition] = field(default_factory=dict)
    params: dict[str, object] = field(default_factory=dict)
    raw: dict[str, str] = field(default_factory=dict)
    scheduler_parameters: dict[str, str | bool] = field(default_factory=dict)
    select_type_parameters: tuple[str, ...] = ()
    gres_types: tuple[str, ...] = ()
    gres: list[GresEntry] = field(default_factory=list)
    accounting: Accounting | None = None
    sources: list[str] = field(default_factory=list)

    def default_partition(self) -> Partition | None:
        for part in self.partitions.values():
            if part.default:
                return part
        return next(iter(self.partitions.values()), None)


@dataclass(slots=True)
class Qos:
    name: str
    priority: int = 0
    preempt: tuple[str, ...] = ()
    preempt_mode: str | None = None
    grp_tres: dict[str, int] = field(default_factory=dict)
    max_tres_per_user: dict[str, int] = field(default_factory=dict)
    max_tres_per_job: dict[str, int] = field(default_factory=dict)
    max_jobs_per_user: int | None = None
    max_submit_jobs_per_user: int | None = None
    max_wall: int | None = None
    #: GrpJobs: running jobs of the QOS at once
    grp_jobs: int | None = None
    #: MaxJobsPA / MaxTRESPerAccount: per account, as MaxJobsPU / MaxTRESPerUser are per user
    max_jobs_per_account: int | None = None
    max_tres_per_account: dict[str, int] = field(default_factory=dict)
    #: MinTRESPerJob: the least of each TRES a job of the QOS must ask
    min_tres_per_job: dict[str, int] = field(default_factory=dict)
    #: GrpSubmitJobs / MaxSubmitJobsPA: pending and running jobs of the QOS, in all / per account
    grp_submit_jobs: int | None = None
    max_submit_jobs_per_account: int | None = None
    usage_factor: float = 1.0
    grace_time: int = 0
    #: PreemptExemptTime in seconds: the least run time before its jobs may be preempted,
    #: over the cluster's (None: not set, or INFINITE, which slurmctld reads as not set)
    preempt_exempt_time: int | None = None
    flags: tuple[str, ...] = ()
    description: str = ""
    #: sacctmgr options gpupool keeps but does not act on (GrpTRESMins, MinTRESPerJob, …).
    extra: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class Association:
    """An account (user=None) or a user's association under an account."""

    account: str
    user: str | None = None
    parent: str | None = None  # parent account of an account association
    fairshare: int | str = 1  # an int, or "parent"
    qos: tuple[str, ...] = ()
    default_qos: str | None = None
    grp_tres: dict[str, int] = field(default_factory=dict)
    grp_jobs: int | None = None
    max_jobs: int | None = None
    max_submit_jobs: int | None = None
    #: GrpSubmitJobs: pending and running jobs under this association, all users together
    grp_submit_jobs: int | None = None
    max_tres_per_job: dict[str, int] = field(default_factory=dict)
    max_wall: int | None = None
    #: sacctmgr ``Priority`` (the association factor of priority/multifactor); None: not set,
    #: the parent account's applies (0 at the root)
    priority: int | None = None
    description: str = ""
    organization: str = ""
    #: sacctmgr options gpupool keeps but does not act on (GrpTRESMins, MinPrioThresh, …).
    extra: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class User:
    name: str
    default_account: str | None = None
    admin_level: str = "None"
    #: User options gpupool keeps but does not act on (Coordinator, DefaultWCKey, WCKeys).
    extra: dict[str, str] = field(default_factory=dict)


def qos_name(qos_names, name: str) -> str:
    """``name`` as the dump spells the QOS it names in any case (``xstrcasecmp`` in sacctmgr
    and slurmctld), else as given."""
    if name in qos_names:
        return name
    low = name.lower()
    return next((known for known in qos_names if known.lower() == low), name)


@dataclass(slots=True)
class Accounting:
    """A ``sacctmgr dump`` file: the cluster's account tree, users, associations and QOS."""

    cluster: str = "cluster"
    accounts: dict[str, Association] = field(default_factory=dict)  # account name -> account assoc
    users: dict[str, User] = field(default_factory=dict)
    user_associations: list[Association] = field(default_factory=list)
    qos: dict[str, Qos] = field(default_factory=dict)
    source: str = ""
    #: Valid options gpupool keeps but does not act on, as ``(file:line, key)``, each key once.
    not_modelled: list[tuple[str, str]] = field(default_factory=list)

    def children(self, account: str) -> list[Association]:
        """Direct child accounts of ``account`` (in file order)."""
        return [a for a in self.accounts.values() if a.parent == account and a.account != account]
