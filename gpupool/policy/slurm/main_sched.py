"""The main scheduler pass (spec §1.4): walk the sorted queue, start what fits now, and stop
scheduling a partition at its first job that does not fit (withholding its nodes from every
lower record for the rest of the pass)."""
from __future__ import annotations

from gpupool.formats.hostlist import compress_hostlist
from gpupool.policy.slurm import preempt
from gpupool.policy.slurm.jobinfo import least_nodes, list_above_max_nodes, raised_least
from gpupool.policy.slurm.limits import LIMIT_STATE_REASONS, PRE_SELECT_REASONS
from gpupool.policy.slurm.node_filter import job_nodes
from gpupool.policy.slurm.node_space import bits as mask_nodes
from gpupool.policy.slurm.select import eligible_nodes, place
from gpupool.policy.slurm.submit_check import available_nodes, fits_available, fits_empty

VIA_MAIN = "SchedMain"
#: the pending reason (squeue's text) of a job none of whose partition's nodes is available
REASON_NO_NODES = "Nodes required for job are DOWN, DRAINED or reserved for jobs in higher priority partitions"
#: how the reason of a job whose selection failed with ESLURM_NODE_NOT_AVAIL begins
NODE_NOT_AVAIL = "ReqNodeNotAvail"
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
        arr = cy.array_limit(job)
        if arr is not None:  # (holds the partition back no more than licenses do, below)
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
        lim = job_nodes(job.wl, nodes)
        if (lim.required and reasons.get(jid, job.reason).startswith(NODE_NOT_AVAIL)
                and _required_gone(lim.required, nodes, withheld)):
            # a job already waiting for its required nodes while one is still unavailable is
            # passed over, its reason kept, nothing held back (22.05.8 ``_schedule``, before
            # the node count test)
            continue
        least = max(least_nodes(job.wl), lim.required_count)  # (a nodelist's hosts: ``_job_create``)
        if info.part.min_nodes is not None:  # a range's least count as slurmctld stored it
            # (against the range's largest: a walked range's request counts its least)
            least = raised_least(least, max((ps.count if ps.one_per_node else 1) for ps in job.wl.pod_sets),
                                 info.part.min_nodes)
        if least > available:
            # fewer of the partition's nodes are available than the job needs: DOWN, DRAINED
            # or withheld for a higher-priority partition's job; slurmctld skips the job
            # untried with this text as its reason (a real 22.05.8 showed it for a job of p
            # while q, on the same nodes, had failed first) and holds its partition back,
            # whatever bf_min_age_reserve or bf_min_prio_reserve say (22.05.8 ``_schedule``:
            # ``goto fail_this_part``; probe p139: ``-p p -N3`` with two of p's four nodes
            # drained showed it, and a later 4-GPU job of p waited with Priority until backfill
            # started it)
            _note(cy, job, REASON_NO_NODES)
            failed.add(info.name)
            withheld |= info.node_set
            usable_of.clear()
            continue
        lic = cy.license_limit(job)
        if lic is not None:  # (after the node count: ``_schedule``'s order) holds nothing back
            _note(cy, job, lic)
            continue
        if lim.required and list_above_max_nodes(job.wl, lim.required_count, info.part.max_nodes):
            # a nodelist beyond MaxNodes and no largest count: select_nodes' node counts
            # conflict; its listed nodes are withheld from lower jobs as after any failed
            # selection of a job whose list covers its count, and the partition goes on
            _note(cy, job, "PartitionNodeLimit")
            withheld.update(mask_nodes(lim.required))
            usable_of.clear()
            continue
        placement = place(job.wl, info.nodes, cy.free, usable, eligible)
        if placement is not None and not cy.fits_all_cores(job, info, usable):
            placement = None  # (a ``--contiguous`` job's first test failed: probe p167d)
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
        never = over is None and len(pol.req(job).parts) > 1 and not fits_empty(job.wl, info, nodes, pol._fit_empty)
        why = over or ("Resources" if never else _failed_select_reason(cy, job, info, withheld, lim.required))
        _note(cy, job, why)
        if lim.required and lim.required_count >= _min_nodes(job.wl, lim.required_count):
            # required nodes (--nodelist) covering the job's node count: slurmctld withholds
            # only them from lower jobs and goes on with the partition (a real 22.05.8 started
            # lower jobs at once on other nodes)
            withheld.update(mask_nodes(lim.required))
            usable_of.clear()
            continue
        if never or why.startswith(NODE_NOT_AVAIL):
            # ESLURM_NODE_NOT_AVAIL holds nothing back: ``_schedule`` sets ``fail_by_part``
            # for ESLURM_NODES_BUSY only (probe p139: a 4-GPU job of p started while 8-GPU
            # jobs of p waited with ReqNodeNotAvail); nor does a job of several partitions
            # whose shape no node of this one holds (ESLURM_REQUESTED_NODE_CONFIG_UNAVAILABLE
            # with a partition list: logged, select_nodes having set Resources; from the
            # source, not probed)
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


def _failed_select_reason(cy, job, info, withheld: set[int], required: int) -> str:
    """The reason of a job whose selection failed, as ``_pick_best_nodes`` and select_nodes
    give it:

    * a required node (``--nodelist``) not available now (DOWN, DRAINED, or withheld in this
      pass): "ReqNodeNotAvail, UnavailableNodes:<those nodes>" (a real 22.05.8 showed it for
      ``-w gpu01`` and ``-N2 -w gpu01,gpu02`` while gpu01 was drained, naming gpu01 only);
    * Resources where the job's shape fits the partition's available nodes with them empty
      ("runable avail"), or one of them is busy (``_nodes_busy``): ESLURM_NODES_BUSY;
    * else ESLURM_NODE_NOT_AVAIL (it fits only counting DOWN or DRAINED nodes):
      "ReqNodeNotAvail, UnavailableNodes:<the partition's nodes not available>", narrowed to
      the required nodes where it has some ("ReqNodeNotAvail, May be reserved for other job"
      where that leaves none). Probe p139 on a real 22.05.8: with gpu[01-02], the only 8-GPU
      nodes, drained (then gpu01 DOWN), ``--gres=gpu:8`` and ``-N2 --gres=gpu:8`` waited with
      "ReqNodeNotAvail, UnavailableNodes:gpu[01-02]" while a 4-GPU job ran on gpu03.

    "Available" is the pass's own: up, not drained, not withheld."""
    nodes = cy.free.nodes
    among = mask_nodes(required) if required else info.nodes
    if required and _required_gone(required, nodes, withheld):
        return unavailable_text(among, nodes, withheld)
    if fits_available(job.wl, info, nodes, cy.pol._fit_empty, withheld) or _nodes_busy(
            cy, job, available_nodes(info, nodes, withheld)):
        return "Resources"
    return unavailable_text(among, nodes, withheld)


def unavailable_text(among, nodes, withheld: set[int] | frozenset[int] = frozenset()) -> str:
    """select_nodes' reason for ESLURM_NODE_NOT_AVAIL: "ReqNodeNotAvail, UnavailableNodes:" and
    the nodes of ``among`` that are DOWN, DRAINED or ``withheld`` (not in slurmctld's available
    nodes; FUTURE ones left out), or "ReqNodeNotAvail, May be reserved for other job" where
    none is."""
    up, drain, future = nodes.up, nodes.drain, nodes.future
    gone = [nodes.names[i] for i in among if not future[i] and (not up[i] or drain[i] or i in withheld)]
    if not gone:
        return f"{NODE_NOT_AVAIL}, May be reserved for other job"
    return f"{NODE_NOT_AVAIL}, UnavailableNodes:{compress_hostlist(gone)}"


def submit_unavailable_text(wl, info, nodes) -> str:
    """The reason select_nodes gives at submit where it answers ESLURM_NODE_NOT_AVAIL in
    partition ``info``: its unavailable nodes, or only the required ones where ``wl`` names
    some (a required node DOWN or DRAINED is that answer too)."""
    required = job_nodes(wl, nodes).required
    return unavailable_text(mask_nodes(required) if required else info.nodes, nodes)


def _required_gone(required: int, nodes, withheld: set[int]) -> bool:
    """Whether a node of the bit set ``required`` is not available now (DOWN, DRAINED or
    withheld in this pass)."""
    up, drain = nodes.up, nodes.drain
    return any(not up[i] or drain[i] or i in withheld for i in mask_nodes(required))


def _nodes_busy(cy, job, avail: tuple[int, ...]) -> bool:
    """``_pick_best_nodes``' ``nodes_busy``: one of the available nodes the job could use is
    COMPLETING or, unless the job may preempt (``preempt_flag``: only COMPLETING nodes count
    then), held by an exclusive job where the job shares nodes, or by any job where it is
    exclusive. Jobs started earlier in this pass count (slurmctld updates its idle and share
    bit sets at each start); suspended ones do not (their nodes are given back)."""
    allowed = job_nodes(job.wl, cy.free.nodes).allowed  # (--exclude and --constraint)
    if allowed is not None:
        avail = tuple(i for i in avail if allowed >> i & 1)
    if cy.completing and any(i in cy.completing for i in avail):
        return True
    if cy.pol.s.preemption:
        return False
    exclusive = any(ps.exclusive for ps in job.wl.pod_sets)
    snap = cy.snap
    held: set[int] = set()
    for other in snap.active.values():
        if other.id not in snap.suspended and (exclusive or any(ps.exclusive for ps in other.wl.pod_sets)):
            held.update(pod[0] for pod in other.placement)
    for jid, (placement, _part, _via) in cy.started.items():
        other = snap.pending.get(jid)
        if other is not None and (exclusive or any(ps.exclusive for ps in other.wl.pod_sets)):
            held.update(pod[0] for pod in placement)
    return any(i in held for i in avail)


