"""The partitions a job lands in at submit: slurmctld's ``_get_job_parts`` and
``_alt_part_test`` (22.05.8).

Why this is its own step: a partition that takes no submissions (State=DRAIN or INACTIVE) is
not an error for the job as long as another partition stands in for it. slurmctld replaces it by
its ``Alternate`` (following alternates until one takes submissions) and, in a list of several
partitions, drops one that has no such alternate; the job is refused only when nothing is left.
What is left becomes the job's partition list, the one squeue shows and every later step reads
(its defaults, limits and records). Probe p132 (2026-12-05, a real 22.05.8, partition p DRAIN):
``-p p`` was refused ("Required partition not available (inactive or drain)"), ``-p p,q`` and
``-p q,p`` were queued as ``q``, and with ``Alternate=q`` on p, ``-p p`` and ``-p p,q`` were
queued as ``q`` too; with q INACTIVE as well both were refused. A job queued in p before it was
drained still ran there: DRAIN stops submissions, not scheduling.
"""
from __future__ import annotations

from collections.abc import Callable

from gpupool.model.slurm import Partition
from gpupool.policy.slurm import limits
from gpupool.policy.slurm.submit_select import NOT_AVAIL

#: ESLURM_PARTITION_NOT_AVAIL, as sbatch prints it
MSG_PART_NOT_AVAIL = "Required partition not available (inactive or drain)"
#: what ``submit_partitions`` refuses with (an Alternate naming no partition: ESLURM_INVALID_PARTITION_NAME)
REFUSALS = frozenset({MSG_PART_NOT_AVAIL, limits.MSG_PARTITION})
#: the partition states that take submissions (PARTITION_SUBMIT): UP and DOWN
SUBMIT_STATES = frozenset({"UP", "DOWN"})


def takes_submissions(part: Partition) -> bool:
    return (part.state or "UP").upper() in SUBMIT_STATES


def _stand_in(part: Partition, partitions: dict[str, Partition]) -> tuple[str | None, str | None]:
    """(the partition a job asking ``part`` is queued in, or None; the refusal, or None):
    ``part`` itself where it takes submissions, else the first of its alternates that does."""
    if takes_submissions(part):
        return part.name, None
    seen = {part.name}
    name = part.extra.get("Alternate") or None
    while name:
        alt = partitions.get(name)
        if alt is None:
            return None, limits.MSG_PARTITION
        if alt.name in seen:  # back at one already tried (slurmctld tests only the first)
            return None, MSG_PART_NOT_AVAIL
        if takes_submissions(alt):
            return alt.name, None
        seen.add(alt.name)
        name = alt.extra.get("Alternate") or None
    return None, MSG_PART_NOT_AVAIL


def submit_partitions(asked: str | None, partitions: dict[str, Partition],
                      default: str | None) -> tuple[str | None, str | None]:
    """(the job's partition text after submit, the refusal or None) for a job asking ``asked``
    (``-p``; None: the default partition). The text is ``asked`` itself where nothing changes,
    and where a name is unknown (the submit check refuses that: Invalid partition name)."""
    names = [n.strip() for n in (asked or "").split(",") if n.strip()]
    if not names:
        part = partitions.get(default or "")
        if part is None or takes_submissions(part):
            return asked, None
        name, why = _stand_in(part, partitions)
        return (name, None) if name is not None else (asked, why)
    if any(n not in partitions for n in names):
        return asked, None
    kept: list[str] = []
    why = None
    for n in names:
        name, fail = _stand_in(partitions[n], partitions)
        if name is None:
            why = fail  # dropped; the job is refused with the last such reason if none is left
        elif name not in kept:  # (a real 22.05.8 showed ``-p p,q`` with p's alternate q as "q")
            kept.append(name)
    if not kept:
        return asked, why
    if kept == names:
        return asked, None
    return ",".join(kept), None


def pending_text(names: list[str], tiers: dict[str, int], enforce: str, could_run: Callable[[str], str | None],
                 fails: Callable[[str], str | None]) -> str:
    """The Partition text squeue and scontrol show for a pending job listed in ``names`` (as
    submitted, after ``submit_partitions``), set once at submit.

    sbatch's ``job_allocate`` runs a test-only selection over the job's list, sorted by
    PriorityTier (highest first, then as submitted), and, where that ends in success,
    ``rebuild_job_part_list`` puts the partition it ended at first and the others after it in
    the list's order; where it ends in an error (a DOWN partition, nothing that fits) the text
    stays as submitted. ``could_run``: select's test in the partition could pass (its node
    counts leave the job a count and the shape fits its nodes): ``submit_select.OK``, or
    ``submit_select.NOT_AVAIL`` where the shape fits only counting DOWN or DRAINED nodes (an
    error: a loop that ends there leaves the text as submitted; probe p139 under ALL:
    ``-p q,p`` and ``-p p,q`` whose 8-GPU nodes were drained showed "q,p" and "p,q"), else
    None; ``fails``: why the partition cannot run the job (``queue.part_fail``), or None.

    - EnforcePartLimits=ALL: the loop never stops early and ends at the last partition, an
      error where that one is DOWN.
    - NO: it stops at the first partition the job could run in, its own limits aside, but a
      DOWN one ends it in error; one refusing the job's account or QOS is passed over, and so
      is one whose MaxNodes or MinNodes leave no node count (probe p135: ``-p d,p -N2`` with d
      DOWN of MaxNodes=1 showed "p,d").
    - ANY: it stops at the first the job could run in within its limits and state.

    Probe p134 (2026-12-05, p = gpu[01-04] tier 1, q = gpu[03-04] tier 2, MaxTime 3 minutes):
    ``-p p,q`` and ``-p q,p`` showed "q,p" under NO and ANY and "p,q" under ALL; ``-N3`` (too
    many nodes for q) "p,q" under NO and ANY; ``-t 5`` (over q's MaxTime) "q,p" under NO and
    "p,q" under ANY. p132 (equal tiers, ALL): ``-p p,q`` showed "q,p" and ``-p q,p`` "p,q"."""
    as_submitted = ",".join(names)
    order = sorted(names, key=lambda n: -tiers.get(n, 1))
    if len(order) < 2:
        return as_submitted
    mode = enforce.upper()
    chosen = None
    if mode == "ALL":
        if fails(order[-1]) != "PartitionDown":
            chosen = order[-1]
    elif mode in ("ANY", "YES"):
        chosen = next((n for n in order if fails(n) is None and could_run(n)), None)
    else:
        for n in order:
            why = fails(n)
            if why in _POLICY_REFUSALS or not could_run(n):
                continue
            chosen = n if why != "PartitionDown" else None
            break
    if chosen is None or could_run(chosen) == NOT_AVAIL:
        return as_submitted
    return ",".join([chosen] + [n for n in order if n != chosen])


#: a partition's refusal of the job's QOS or account, which ``select_nodes`` answers with
#: "partition configuration not available" (the loop goes on)
_POLICY_REFUSALS = limits.PART_POLICY_REASONS | {"PartitionConfig"}
