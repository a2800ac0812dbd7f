"""The main scheduler pass (spec §1.4): walk the sorted queue, start what fits now, and stop
scheduling a partition at its first job that does not fit (withholding its nodes from every
lower record for the rest of the pass)."""
from __future__ import annotations

from gpupool.formats.hostlist import compress_hostlist
from gpupool.policy.slurm import preempt
from gpupool.policy.slurm.jobinfo import least_nodes, raised_least
from gpupool.policy.slurm.limits import LIMIT_STATE_REASONS, PRE_SELECT_REASONS
from gpupool.policy.slurm.node_filter import job_nodes
from gpupool.policy.slurm.node_space import bits as mask_nodes
from gpupool.policy.slurm.select import eligible_nodes, place

VIA_MAIN = "SchedMain"
#: the pending reason (squeue's text) of a job none of whose partition's nodes is available
REASON_NO_NODES = "Nodes required for job are DOWN, DRAINED or reserved for jobs in higher priority partitions"
#: the reasons a job in a partition the pass has failed loses for Priority: none, and
#: Resources (with or without REASON_NO_NODES's description); BeginTime and Dependency too,
#: which job_independent clears once the job may run; a limit's or a required node's reason
#: stays
_TO_PRIORITY = frozenset({"", "None", "Priority", "Resources", REASON_NO_NODES, "BeginTime", "Dependency"})


def run(cy, records, full: bool) -> None:
    pol = cy.pol
    s = pol.s
    failed: set[str] = set()
    withheld: set[int] = set()
    usable_of: dict[str, tuple] = {}  # partition -> (usable nodes, their eligible nodes)
    nodes = cy.free.nodes
    depth = 0
    started = cy.started
    skip = cy.skip
    reasons = cy.reasons
    queue_depth = s.default_queue_depth
    for rec in records:
        job = rec.job
        jid = job.id
        if jid in started or jid in skip:
            continue
        if not full and depth >= queue_depth:
            break
        depth += 1
        info = rec.part
        if info.name in failed:
            # only a job with no reason or Resources gets Priority (22.05's _schedule keeps any
            # other, a limit's among them): the reason its record holds now, set by an earlier
            # record of this pass (a job in several partitions) or else kept from before;
            # inline: most records
            if reasons.get(jid, job.reason) in _TO_PRIORITY:
                reasons[jid] = cy.state_reasons[jid] = "Priority"
            continue
        lim = cy.limit_reason(job, info)
        if lim is not None:
            if skipped_as_held(cy, job, lim):
                _note(cy, job, lim)  # (pre_select sets the reason it fails on)
            else:
                _held_by_limit(cy, job, info, lim, failed, withheld, usable_of)
            continue
        arr = cy.array_limit(job) or cy.license_limit(job)
        if arr is not None:  # neither holds the partition back
            _note(cy, job, arr)
            continue
        # A partition's usable nodes change only when a partition fails (nodes' up/drain
        # states are fixed for the pass): computed once per partition between failures, with
        # their eligible nodes
        got = usable_of.get(info.name)
        if got is None:
            usable = None
            if withheld:
                usable = info.node_set - withheld
            # the nodes slurmctld counts as available (up, not drained, not withheld)
            available = len(eligible_nodes(info.nodes, nodes, usable))
            # no job starts on a node still COMPLETING (a replay's holds): the pass chooses
            # among the others (22.05.8, docs/differential.md, finding 22)
            usable = cy.off_completing(info, usable)
            got = usable_of[info.name] = (usable, eligible_nodes(info.nodes, nodes, usable), available)
        usable, eligible, available = got
        least = least_nodes(job.wl)
        if info.part.min_nodes is not None:  # a range's least count as slurmctld stored it
            # (against the range's largest: a walked range's request counts its least)
            least = raised_least(least, max((ps.count if ps.one_per_node else 1) for ps in job.wl.pod_sets),
                                 info.part.min_nodes)
        if least > available:
            # fewer of the partition's nodes are available than the job needs: DOWN, DRAINED
            # or withheld for a higher-priority partition's job; slurmctld skips the job
            # untried, its partition not held back, with this text as its reason (a real
            # 22.05.8 showed it for a job of p while q, on the same nodes, had failed first)
            _note(cy, job, REASON_NO_NODES)
            continue
        placement = place(job.wl, info.nodes, cy.free, usable, eligible)
        if placement is not None:
            over = cy.placed_limit(job, info, placement)
            if over is not None:  # ESLURM_ACCOUNTING_POLICY on the selection (whole cores, a walk's nodes)
                _held_by_limit(cy, job, info, over, failed, withheld, usable_of)
                continue
            cy.start(job, placement, info, VIA_MAIN)
            continue
        got = cy.try_coallocate(job, info, usable, VIA_MAIN)  # OverSubscribe=FORCE/YES co-allocation
        if isinstance(got, str):  # ESLURM_ACCOUNTING_POLICY on the row's selection
            _held_by_limit(cy, job, info, got, failed, withheld, usable_of)
            continue
        if got:
            continue
        preempted = s.preemption and job.id not in cy.preempting and preempt.try_preempt(cy, job, info, usable)
        if isinstance(preempted, str):  # ESLURM_ACCOUNTING_POLICY on the selection the victims would give
            _held_by_limit(cy, job, info, preempted, failed, withheld, usable_of)
            continue
        if preempted:
            cy.preempting.add(job.id)
            if job.id in cy.started:  # SUSPEND,GANG: the preemptor started at once
                continue
        # select_nodes tests the TRES limits even after a failed selection, a job asking its
        # GPUs per job counted with its nodes' GPUs; failing them is no "nodes busy" (finding 58)
        over = None if job.id in cy.preempting else cy.failed_select_limit(job, info)
        lim = job_nodes(job.wl, nodes)
        _note(cy, job, over or (_unavailable(lim.required, nodes) if lim.required else "Resources"))
        if lim.required and lim.required_count >= _min_nodes(job.wl, lim.required_count):
            # required nodes (--nodelist) covering the job's node count: slurmctld withholds
            # only them from lower jobs and goes on with the partition (a real 22.05.8 started
            # lower jobs at once on other nodes)
            withheld.update(mask_nodes(lim.required))
            usable_of.clear()
            continue
        if over is not None and not s.assoc_limit_stop:
            continue  # ESLURM_ACCOUNTING_POLICY: the partition is not held back
        if not cy.may_block(job, rec.prio):
            continue
        failed.add(info.name)
        withheld |= info.node_set
        usable_of.clear()


def skipped_as_held(cy, job, reason: str) -> bool:
    """Whether a main pass passes over ``job``, held by the limit ``reason``: 22.05's _schedule
    skips a job whose reason is already a limit (``LIMIT_STATE_REASONS``) while a limit tested
    before the selection (``PRE_SELECT_REASONS``, which then becomes its reason) still holds
    it, before select_nodes, so even under assoc_limit_stop it holds no partition back. Any
    other limit fails in select_nodes (ESLURM_ACCOUNTING_POLICY), which under
    assoc_limit_stop stops the partition: a GRES limit does so at every pass."""
    return reason in PRE_SELECT_REASONS and cy.state_reasons.get(job.id, job.reason) in LIMIT_STATE_REASONS


def _note(cy, job, why: str) -> None:
    """The pass's reason for ``job``, what squeue shows (``Cycle.reasons``) and what the main
    pass reads back (``Cycle.state_reasons``): slurmctld's one record per job holds the reason
    its latest test set, so a job in several partitions shows its last partition's (probe p132:
    ``-p p,q`` waiting for Resources in p and behind a higher job in q showed Priority)."""
    cy.reasons[job.id] = cy.state_reasons[job.id] = why


def _held_by_limit(cy, job, info, reason: str, failed: set, withheld: set, usable_of: dict) -> None:
    """``job`` held by a QOS or association limit (``reason``): under assoc_limit_stop its
    partition is held back for the rest of the pass (and of gpupool's co-allocation pass after
    it, ``Cycle.held_back``), else the pass goes on with it."""
    _note(cy, job, reason)
    if cy.pol.s.assoc_limit_stop:
        cy.held_back.add((job.id, info.name))
        failed.add(info.name)
        withheld |= info.node_set
        usable_of.clear()


def _min_nodes(wl, required: int) -> int:
    """slurmctld's min_nodes of a job: its (least) node count with ``--nodes``, else the count
    of its required nodes (sbatch raises the node count to the ``--nodelist``)."""
    if wl.pod_sets[0].one_per_node:
        return least_nodes(wl)
    return required


def _unavailable(required: int, nodes) -> str:
    """The reason of a job that did not start: slurmctld's "ReqNodeNotAvail, UnavailableNodes:…"
    when a node it requires is DOWN or DRAINED (a real 22.05.8 showed it for ``-w gpu01`` and
    ``-N2 -w gpu01,gpu02`` while gpu01 was drained, naming gpu01 only), else Resources."""
    down = [nodes.names[i] for i in mask_nodes(required) if not nodes.up[i] or nodes.drain[i]]
    if not down:
        return "Resources"
    return f"ReqNodeNotAvail, UnavailableNodes:{compress_hostlist(down)}"
