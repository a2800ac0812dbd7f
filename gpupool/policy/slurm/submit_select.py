"""sbatch's last test before a job is queued: slurmctld's ``_select_nodes_parts`` run over the
job's partitions once the job exists (22.05.8 ``job_allocate``), as a pure function of the
job's stored request and the partitions.

Why a loop and not a rule per case: which answer the job gets (queued, "Requested partition
configuration not available now", "Requested node configuration is not available") depends on
the order the partitions are tried in (PriorityTier, highest first, then as listed), on
EnforcePartLimits (ANY passes over a partition whose limits fail, ALL stops at it) and on which
partition the loop ends at: a DOWN partition that could hold the job ends it in PartitionDown,
which queues a batch job. Probes p135-p138 (docs/differential.md, finding 86) checked 84
answers, 60 of them with DOWN partitions, against a real 22.05.8.

Per partition, the loop reads ``job_limits_check`` (``limit``: None, a limit's reason,
"PartitionConfig" for a refused account or QOS, or "PartitionDown") and then select's test
(``select``: "ok" where the job could run there, "unavailable" where it fits only counting
DOWN or DRAINED nodes, "config" where its node counts leave no count or the partition refuses
its QOS or account, "nodes" where its shape fits no node). The loop's ``rc`` is the last
test's answer. Under ALL a partition that could run the job does not end the loop, even on
idle nodes (probe p138: ``-p p,m -n1 --gres=gpu:1`` with m of MinNodes=2 was refused,
"partition configuration", on an idle cluster; probes p135 and p136, every node held: a later
DOWN partition's node counts refused the job): ``job_allocate`` runs the loop test-only for
every batch job (its ``test_only`` holds whenever ``allocate`` is 0), so no sbatch job starts
inside it and ALL's early return for a job started now never applies.
"""
from __future__ import annotations

from dataclasses import dataclass

from gpupool.policy.slurm.limits import MSG_NODES

#: the loop's answers
QUEUED, PART_CONFIG, NODE_CONFIG = "queued", "config", "nodes"
#: select's answer where the job could run in the partition
OK = "ok"
#: select's answer where the job's shape fits the partition only counting its DOWN or DRAINED
#: nodes (ESLURM_NODE_NOT_AVAIL): queued as OK is, with the reason ReqNodeNotAvail (probe p139)
NOT_AVAIL = "unavailable"


@dataclass(frozen=True)
class PartTest:
    """One partition of the job's list as the loop sees it."""

    name: str
    tier: int
    #: ``job_limits_check``: None (passes), "PartitionDown", or another failure
    limit: str | None
    #: select's answer: OK, PART_CONFIG or NODE_CONFIG
    select: str


def select_loop(tests: list[PartTest], enforce: str, listed: bool) -> str:
    """The loop's answer: QUEUED, PART_CONFIG or NODE_CONFIG. ``listed``: the job was
    submitted with a list of partitions (a job of one partition runs the single test, where a
    failed limit other than the state skips select and leaves "partition configuration",
    which EnforcePartLimits=NO queues)."""
    return walk(tests, enforce, listed)[0]


def unavailable_in(tests: list[PartTest], enforce: str, listed: bool) -> str | None:
    """The partition whose select answered NOT_AVAIL last in the loop's walk (select_nodes
    set the job's reason to ReqNodeNotAvail there), else None; "" where a later partition's
    select failed (its message freed the reason's text, and the loop's answer set the bare
    ReqNodeNotAvail back; from the source, not probed)."""
    return walk(tests, enforce, listed)[1]


def walk(tests: list[PartTest], enforce: str, listed: bool) -> tuple[str, str | None]:
    """``select_loop``'s answer and ``unavailable_in``'s partition, from one walk."""
    mode = enforce.upper()
    if mode == "YES":
        mode = "ANY"
    if not listed:
        t = tests[0]
        if t.limit is None or t.limit == "PartitionDown":
            return (QUEUED, t.name if t.select == NOT_AVAIL else None) if t.select in (OK, NOT_AVAIL) \
                else (t.select, None)
        return PART_CONFIG, None
    best = None
    rc = PART_CONFIG  # the loop's starting answer
    last_limit = None
    unavailable = None
    for t in sorted(tests, key=lambda t: -t.tier):
        last_limit = t.limit
        if t.limit is not None:
            if mode == "ANY":
                continue  # passed over
            if mode == "ALL":
                if t.limit != "PartitionDown":
                    return PART_CONFIG, unavailable  # the job cannot run there: refused
                best = QUEUED  # PartitionDown, kept unless a later answer replaces it
        if t.select == NOT_AVAIL:
            unavailable = t.name
        elif unavailable and t.select in (PART_CONFIG, NODE_CONFIG):
            unavailable = ""
        rc = QUEUED if t.select in (OK, NOT_AVAIL) else t.select
        if rc == PART_CONFIG and mode == "ALL":
            return PART_CONFIG, unavailable
        if rc == QUEUED:
            if mode in ("ANY", "NO"):
                return QUEUED, unavailable  # could run there (or PartitionDown): the loop ends
            best = QUEUED
    if best is not None:
        return best, unavailable
    if last_limit == "PartitionDown":
        return QUEUED, unavailable
    return rc, unavailable


def outcome(answer: str, enforced: bool, part_config_message: str) -> str | None:
    """sbatch's message for the loop's ``answer``, or None where the job is queued
    (``job_allocate``: "partition configuration" is refused only under EnforcePartLimits,
    "node configuration" always)."""
    if answer == QUEUED:
        return None
    if answer == PART_CONFIG:
        return part_config_message if enforced else None
    return MSG_NODES
