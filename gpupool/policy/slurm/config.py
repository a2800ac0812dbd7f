"""Everything the Slurm policy reads from the pool, typed once at configuration time.

Values come from ``pool.slurm`` (``SlurmConfig.params`` typed by ``formats/slurm_conf``,
``scheduler_parameters``, partitions and the ``sacctmgr`` accounting tree). Defaults are
Slurm 22.05's (``../shared/spec/slurm.md`` §1–§9). Times are seconds.
"""
from __future__ import annotations

import math

from dataclasses import dataclass, field

from gpupool.engine.nodes import NodeTable
from gpupool.errors import GpupoolError
from gpupool.formats.slurm_conf import accounting_enforce, is_unlimited, priority_flags
from gpupool.model.pool import Pool
from gpupool.model.slurm import Accounting, Partition, Qos, SlurmConfig
from gpupool.policy.slurm.jobinfo import gpu_tres
from gpupool.policy.slurm.select import PartNodes
from gpupool.policy.slurm.tres import parse_billing_weights, tracked_gpu_tres, tres_billing

ONE_YEAR = 365 * 86400


def _int(value, default: int) -> int:
    if value is None or value is True:
        return default
    try:
        return int(str(value).strip())
    except ValueError:
        raise GpupoolError(f"SchedulerParameters: expected a whole number, got {value!r}") from None


def _bounded(sp: dict, key: str, default: int, low: int, high: int) -> int:
    """An integer SchedulerParameters value given within slurmctld's accepted range, else
    ``default`` (taken as is: slurmctld derives bf_node_space_size from bf_max_job_test
    unchecked). slurmctld logs "Invalid SchedulerParameters" for a value out of range and uses
    the default; gpupool refuses it, naming the range, so the mistake is not lost in a log."""
    if sp.get(key) is None:
        return default
    value = _int(sp.get(key), default)
    if not low <= value <= high:
        raise GpupoolError(f"SchedulerParameters {key}={value}: expected {low} to {high}")
    return value


@dataclass(slots=True)
class PartInfo:
    """One partition as the scheduler sees it (node indices in NodeTable order)."""

    name: str
    part: Partition
    nodes: tuple[int, ...]
    node_set: frozenset[int]
    tier: int
    job_factor: int
    max_time: int | None
    default_time: int | None
    state: str
    preempt_mode: str | None
    grace_time: int
    #: TRES totals of the partition, for TRES priority factors: cpu, mem (MiB), gres/gpu, node.
    tres_total: dict[str, int]
    billing_weights: dict[str, float]
    #: the partition's OverTimeLimit in seconds (inf: UNLIMITED), or None to use the cluster's
    over_time_limit: float | None = None
    #: MaxCPUsPerNode: CPUs the partition's jobs may hold together on one node (None: no cap)
    max_cpus_per_node: int | None = None


@dataclass(slots=True)
class Settings:
    scheduler_type: str = "sched/backfill"
    priority_type: str = "priority/basic"
    # main scheduler
    sched_interval: int = 60
    default_queue_depth: int = 100
    assoc_limit_stop: bool = False
    kill_invalid_depend: bool = False
    # backfill
    bf_interval: int = 30
    bf_window: int = 1440 * 60
    bf_resolution: int = 60
    bf_max_job_test: int = 500
    #: records the backfill map may hold (slurmctld 22.05: bf_max_job_test unless set)
    bf_node_space_size: int = 500
    bf_max_job_array_resv: int = 20
    bf_max_job_user: int = 0
    bf_max_job_start: int = 0
    bf_continue: bool = False
    bf_min_prio_reserve: int = 0
    bf_min_age_reserve: int = 0
    #: a job in several partitions gets at most one reservation per cycle: its later
    #: (job, partition) records are only tested to start now
    bf_one_resv_per_job: bool = False
    #: a job planned for later takes nodes busy now before idle ones (select's will-run)
    bf_busy_nodes: bool = False
    # priority/multifactor
    weights: dict[str, int] = field(default_factory=dict)
    tres_weights: dict[str, float] = field(default_factory=dict)
    max_age: int = 604800
    favor_small: bool = False
    flags: tuple[str, ...] = ()
    half_life: int = 604800
    calc_period: int = 300
    reset_period: str = "NONE"
    dampening: int = 1
    # preemption
    preempt_type: str = "preempt/none"
    preempt_mode: str = "OFF"
    preempt_exempt: int | None = None
    # limits and time
    over_time_limit: float = 0.0
    kill_wait: int = 30
    enforce: tuple[str, ...] = ()
    #: the typed GPU TRES slurm.conf's AccountingStorageTRES tracks (``gres/gpu:a100``): only
    #: these are counted for a job, so only these limits bind (slurmctld drops a limit on a TRES
    #: it does not track). GRES TRES keys are lower-case everywhere: Slurm matches them so
    typed_gpu_tres: frozenset[str] = frozenset()
    #: whether AccountingStorageTRES tracks ``gres/gpu``: else jobs' GPUs count for no limit,
    #: usage or billing, and ``gres/gpu`` limits bind nobody (assoc_mgr keeps only the
    #: configured TRES: 22.05's ``_get_assoc_mgr_tres_list``)
    gpu_tracked: bool = False
    #: the TRES an untyped GPU request counts for where only GPU types are tracked (the first
    #: of them; None where ``gres/gpu`` is tracked or no type is)
    untyped_gpu_as: str | None = None
    enforce_part_limits: str = "NO"
    job_requeue: bool = True
    requeue_delay: float = 121.0

    @property
    def backfill(self) -> bool:
        return self.scheduler_type == "sched/backfill" and self.bf_interval > 0

    @property
    def multifactor(self) -> bool:
        return self.priority_type == "priority/multifactor"

    @property
    def fair_tree(self) -> bool:
        return "NO_FAIR_TREE" not in self.flags and "DEPTH_OBLIVIOUS" not in self.flags

    @property
    def raw_factors(self) -> frozenset[str]:
        """The priority factors PriorityFlags=NO_NORMAL_* leave unnormalised."""
        every = "NO_NORMAL_ALL" in self.flags
        return frozenset(name for name in ("assoc", "partition", "qos", "tres")
                         if every or f"NO_NORMAL_{'PART' if name == 'partition' else name.upper()}" in self.flags)

    @property
    def accrue_always(self) -> bool:
        """PriorityFlags=ACCRUE_ALWAYS: a pending job's age counts from its submission."""
        return "ACCRUE_ALWAYS" in self.flags

    @property
    def size_relative(self) -> bool:
        """PriorityFlags=SMALL_RELATIVE_TO_TIME: job size per minute of time limit."""
        return "SMALL_RELATIVE_TO_TIME" in self.flags

    @property
    def limits_enforced(self) -> bool:
        return "limits" in self.enforce or "safe" in self.enforce

    @property
    def qos_enforced(self) -> bool:
        """AccountingStorageEnforce has ``qos``: a job's QOS must exist and be in its
        association's QOS list; without it an unknown QOS is dropped, not refused."""
        return "qos" in self.enforce

    @property
    def preemption(self) -> bool:
        return self.preempt_type in ("preempt/qos", "preempt/partition_prio") and self.preempt_mode != "OFF"


def load_settings(cfg: SlurmConfig) -> Settings:
    p = cfg.params
    # slurmctld finds its options case-insensitively (xstrcasestr)
    sp = {str(k).lower(): v for k, v in cfg.scheduler_parameters.items()}
    s = Settings()
    s.scheduler_type = str(p.get("SchedulerType") or s.scheduler_type)
    s.priority_type = str(p.get("PriorityType") or s.priority_type)
    s.sched_interval = _int(sp.get("sched_interval"), 60)
    s.default_queue_depth = _int(sp.get("default_queue_depth"), 100)
    s.assoc_limit_stop = bool(sp.get("assoc_limit_stop", False))
    # 22.05's place for it is DependencyParameters; SchedulerParameters still takes it
    dp = {str(k).lower(): v for k, v in (p.get("DependencyParameters") or {}).items()}  # type: ignore[union-attr]
    s.kill_invalid_depend = bool(sp.get("kill_invalid_depend", False) or dp.get("kill_invalid_depend", False))
    s.bf_interval = _int(sp.get("bf_interval"), 30)
    s.bf_window = _int(sp.get("bf_window"), 1440) * 60
    s.bf_resolution = max(1, _int(sp.get("bf_resolution"), 60))
    s.bf_max_job_test = _int(sp.get("bf_max_job_test"), 500)
    s.bf_node_space_size = _bounded(sp, "bf_node_space_size", s.bf_max_job_test, 2, 2_000_000)
    s.bf_max_job_array_resv = _bounded(sp, "bf_max_job_array_resv", 20, 0, 1000)
    s.bf_max_job_user = _int(sp.get("bf_max_job_user"), 0)
    s.bf_max_job_start = _int(sp.get("bf_max_job_start"), 0)
    s.bf_continue = bool(sp.get("bf_continue", False))
    s.bf_min_prio_reserve = _int(sp.get("bf_min_prio_reserve"), 0)
    s.bf_min_age_reserve = _int(sp.get("bf_min_age_reserve"), 0)
    s.bf_one_resv_per_job = bool(sp.get("bf_one_resv_per_job", False))
    s.bf_busy_nodes = bool(sp.get("bf_busy_nodes", False))
    s.weights = {
        "age": int(p.get("PriorityWeightAge") or 0),
        "assoc": int(p.get("PriorityWeightAssoc") or 0),
        "fairshare": int(p.get("PriorityWeightFairshare") or 0),
        "job_size": int(p.get("PriorityWeightJobSize") or 0),
        "partition": int(p.get("PriorityWeightPartition") or 0),
        "qos": int(p.get("PriorityWeightQOS") or 0),
    }
    s.tres_weights = {k: float(v) for k, v in dict(p.get("PriorityWeightTRES") or {}).items()}
    if p.get("PriorityMaxAge") is not None:
        s.max_age = int(p["PriorityMaxAge"])
    s.favor_small = bool(p.get("PriorityFavorSmall", False))
    s.flags = tuple(sorted(priority_flags(p)))  # as slurmctld reads them (substrings)
    if "PriorityDecayHalfLife" in p:
        s.half_life = int(p["PriorityDecayHalfLife"] or 0)
    if p.get("PriorityCalcPeriod"):
        s.calc_period = int(p["PriorityCalcPeriod"])
    s.reset_period = str(p.get("PriorityUsageResetPeriod") or "NONE")
    if s.half_life == 0 and s.reset_period == "NONE" and s.multifactor:
        raise GpupoolError("slurm.conf: You have to either have PriorityDecayHalfLife != 0 or "
                           "PriorityUsageResetPeriod set")
    s.dampening = int(p.get("FairShareDampeningFactor") or 1)
    s.preempt_type = str(p.get("PreemptType") or "preempt/none")
    s.preempt_mode = str(p.get("PreemptMode") or "OFF")
    ex = p.get("PreemptExemptTime")
    s.preempt_exempt = int(ex) if ex else None
    otl = p.get("OverTimeLimit", 0)
    s.over_time_limit = float("inf") if otl is None and "OverTimeLimit" in p else float(otl or 0)
    s.kill_wait = int(p.get("KillWait") or 30)
    s.enforce = tuple(sorted(accounting_enforce(p)))  # with what each word implies
    s.gpu_tracked, s.typed_gpu_tres, s.untyped_gpu_as = tracked_gpu_tres(p)
    s.enforce_part_limits = str(p.get("EnforcePartLimits") or "NO")
    s.job_requeue = int(p.get("JobRequeue", 1) or 0) != 0
    return s


def partition_infos(cfg: SlurmConfig, nodes: NodeTable, pool: Pool) -> dict[str, PartInfo]:
    out: dict[str, PartInfo] = {}
    lln_all = any(p.upper() == "CR_LLN" for p in cfg.select_type_parameters)
    members = {name: tuple(sorted(nodes.index[n] for n in part.nodes if n in nodes.index))
               for name, part in cfg.partitions.items()}
    weights = {name: parse_billing_weights(part.extra.get("TRESBillingWeights", ""))
               for name, part in cfg.partitions.items()}
    max_tres = "MAX_TRES" in priority_flags(cfg.params)
    for name, part in cfg.partitions.items():
        idx = members[name]
        lln = lln_all or str(part.extra.get("LLN", "NO")).upper() in ("YES", "Y", "TRUE", "1")
        max_cpus = _max_cpus_per_node(part)
        if lln or part.max_nodes is not None or part.min_nodes is not None or max_cpus is not None:
            # what node choice reads of the partition (select._least_loaded, select._ranged,
            # the MaxCPUsPerNode allowance ``Free.caps[name]``)
            idx = PartNodes(idx, lln, part.max_nodes, name if max_cpus is not None else None, part.min_nodes)
        tres = {
            "cpu": sum(nodes.cpu_total[i] // 1000 for i in idx),
            "mem": sum(nodes.mem_total[i] for i in idx),
            "gres/gpu": sum(nodes.gpu_total[i] for i in idx),
            "node": len(idx),
        }
        tres.update(_typed_gpu_totals(nodes, idx))
        # the partition's billing total (``_calc_part_tres``): its summed TRES under its own
        # weights, cut to a whole number; its CPUs without weights. PriorityWeightTRES=billing
        # divides a pending job's billing by it (a real 22.05.8 with CPU=1.0,GRES/gpu=8.0 on
        # 128-CPU 8-GPU nodes: ``--gres=gpu:2`` billed 17 got 10000 × 17 / 768 = 221 in a
        # four-node partition, 443 in a two-node one)
        tres["billing"] = int(tres_billing(tres, weights[name], max_tres))
        grace = part.extra.get("GraceTime")
        out[name] = PartInfo(
            name=name, part=part, nodes=idx, node_set=frozenset(idx), tier=part.priority_tier,
            job_factor=part.priority_job_factor, max_time=part.max_time,
            default_time=part.default_time if part.default_time is not None else part.max_time,
            state=(part.state or "UP").upper(), preempt_mode=part.preempt_mode,
            grace_time=int(grace) if grace and str(grace).isdigit() else 0,
            tres_total=tres, billing_weights=weights[name],
            over_time_limit=partition_over_time_limit(part), max_cpus_per_node=max_cpus,
        )
    return out


def _typed_gpu_totals(nodes: NodeTable, idx) -> dict[str, int]:
    """``gres/gpu:<type>`` -> the partition's devices of that type (a typed TRES priority
    weight divides a job's typed request by it)."""
    out: dict[str, int] = {}
    for i in idx:
        for name, mask in nodes.gpu_types(i).items():
            key = gpu_tres(name)
            out[key] = out.get(key, 0) + mask.bit_count()
    return out


def qos_table(acct: Accounting | None) -> dict[str, Qos]:
    return dict(acct.qos) if acct is not None else {}


def partition_over_time_limit(part: Partition) -> float | None:
    """A partition line's OverTimeLimit (minutes, or UNLIMITED) in seconds; None when unset.

    Why per partition: slurmctld takes the partition's value over the cluster's for the jobs
    running in it (a real 22.05.8 with OverTimeLimit=1 and a partition at 3 killed ``-t 1``
    jobs after 2:26 and 4:27 of running time, the 30-s check and KillWait included)."""
    text = part.extra.get("OverTimeLimit")
    if text is None:
        return None
    if is_unlimited(text):
        return math.inf
    return 60.0 * int(text)  # checked by the slurm.conf reader


def _max_cpus_per_node(part: Partition) -> int | None:
    """A partition line's MaxCPUsPerNode, or None when unset or UNLIMITED.

    Why: slurmctld lets the partition's jobs hold together at most that many CPUs of a node,
    whatever other partitions' jobs hold there. A real 22.05.8 with MaxCPUsPerNode=4 on 16-CPU
    nodes put a second ``-c2`` job of the partition on the other node, kept a ``-c3`` one
    pending and planned it for when the partition's job on a node ended, ran a job of another
    partition beside them, and refused ``-c5`` ("Requested node configuration is not
    available")."""
    text = part.extra.get("MaxCPUsPerNode")
    if text is None or is_unlimited(text):
        return None
    return int(text)  # checked by the slurm.conf reader
