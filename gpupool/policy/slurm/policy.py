"""``--policy slurm``: slurmctld's scheduling decisions (22.05) as a pure policy.

Each ``decide`` call is one scheduler instant (victims in their GraceTime are stopped by the
engine, ``Preempt.grace``): build and
sort the queue, run the main scheduler (a quick pass on events, a full pass every
``sched_interval``), then a backfill cycle when ``now`` is a multiple of ``bf_interval``
(spec §0's idealised model), then, with ``PreemptMode=…,GANG``, gang scheduling (``gang``:
co-allocation in OverSubscribe=FORCE partitions, suspensions and resumptions at job ends, starts
and every ``SchedulerTimeSlice``). Decayed usage for fair share is accumulated from the run's
job records (``decay.UsageLedger``); everything else is recomputed from the snapshot.
"""
from __future__ import annotations

import bisect
import math
from dataclasses import replace

from gpupool.engine.decisions import Pending, Preempt, Resume, Start, Suspend, WakeAt
from gpupool.engine.job import RUNNING, SUSPENDED
from gpupool.engine.policy_api import check_options, register
from gpupool.engine.snapshot import CHANGED_ENDED, CHANGED_TICK, Snapshot
from gpupool.model.pool import Pool
from gpupool.model.workload import GANG_MIN
from gpupool.policy.slurm import (
    backfill,
    contiguous_list,
    gang,
    job_defaults,
    limits,
    main_sched,
    part_submit,
    priority,
    queue,
    sharing,
    submit_check,
)
from gpupool.policy.slurm.config import ONE_YEAR, load_settings, partition_infos, partition_over_time_limit
from gpupool.policy.slurm.cores import CoreBook
from gpupool.policy.slurm.decay import UsageLedger, usage_clock, usage_end
from gpupool.policy.slurm.fairshare import UsageTree, classic
from gpupool.policy.slurm.jobinfo import (account_chain, contiguous, gpu_tres, job_req, raised_least, stored_node_counts,
                                          walks_gpus_per_node)
from gpupool.policy.slurm.min_nodes import partitions_min_nodes
from gpupool.policy.slurm.running import RunningIndex
from gpupool.policy.slurm.select import Free, empty_state, place, task_node_memory, whole_allowance
from gpupool.policy.slurm.tres import alloc_counts, tracked_gpu_keys, tres_billing

_OPTIONS = {"record", "epoch", "backfill_at", "backfill_cut", "main_at", "main_seen", "start_stamps"}
_NO_ENTRY = object()


def _suspended_by(x, now: float) -> float:
    """Seconds a job's run has been suspended up to ``now`` (its limit end moves by as much)."""
    return x.suspended_s + (now - x.suspended_at if x.suspended_at is not None else 0.0)


def _wake_at_next(at: list[float], now: float, out: list) -> None:
    """Ask to be called at the first of the sorted instants ``at`` after ``now``: a replay's
    listed passes fall between events and ticks, which would not reach them otherwise."""
    k = bisect.bisect_right(at, now)
    if k < len(at):
        out.append(WakeAt(at[k]))


#: ``idle_placement``'s memo: not computed yet (None is an answer: no placement)
_NOT_PLACED = object()
#: a job time limit of UNLIMITED as slurmctld stores it (INFINITE minutes), for
#: SMALL_RELATIVE_TO_TIME
INFINITE_MINUTES = 0xFFFFFFFF


class Cycle:
    """Working state of one ``decide`` call (discarded afterwards)."""

    def __init__(self, pol: SlurmPolicy, snap: Snapshot) -> None:
        self.pol = pol
        self.snap = snap
        self.now = snap.now
        self.out: list = []
        self.free = Free(snap.nodes)
        self.started: dict[int, tuple] = {}
        self.skip: set[int] = set()
        self.preempting: set[int] = set()
        self.victims: set[int] = set()
        self.reasons: dict[int, str] = {}
        #: the reason slurmctld's job record holds after the main pass's latest test of the job
        #: (the last one set: a job listed in several partitions may fail a limit in a later one
        #: after Resources in the first, and then counts as held by a limit,
        #: ``main_sched.skipped_as_held``). ``reasons`` shows the same after the main pass, but
        #: backfill and gpupool's co-allocation pass write there too, which this one leaves out
        self.state_reasons: dict[int, str] = {}
        #: (job, partition) records at which this cycle's main pass held its partition back for
        #: a limit (assoc_limit_stop): gpupool's co-allocation pass, the rest of that pass in
        #: slurmctld, stops there too
        self.held_back: set[tuple[int, str]] = set()
        self.accrue: dict[int, float] = {}
        #: per-pass memos of other modules (e.g. preemption candidates per QOS and partition)
        self.memo: dict = {}
        self.ends: list = []
        self.usage: dict = {}
        self.arrays: dict[int, int] = {}
        running = pol.running
        # a private copy: a pass inserts the jobs it starts
        self.ends = list(running.update(snap.active, self.now, snap.suspended))
        self.arrays = dict(running.arrays)
        if pol.capped_parts:
            self._cap_partitions(snap)
        #: licenses (slurm.conf ``Licenses=``) free now, name -> count; None without any
        self.licenses: dict[str, int] | None = pol.licenses_free(snap.active) if pol.license_total else None
        if pol.s.limits_enforced:
            self.usage = limits.copy_usage(running.usage)
        #: nodes still COMPLETING (a replay's ``node_holds``): nothing starts on them now
        self.completing: frozenset[int] = frozenset()
        #: a replay's job was released now and its epilog-complete message calls the main
        #: scheduler (a kill at the time limit, on 22.05.8), or does not (every other end)
        self.loud_release = False
        self.quiet_release = False
        #: gang co-allocation rows per OverSubscribe=FORCE partition (built when first needed)
        self.rows: dict[str, list[dict[int, int]]] = {}
        #: nodes of the jobs this pass started without ``--oversubscribe`` (``unshared_nodes``)
        self.unshared_started: set[int] = set()
        if pol.gang_on and snap.suspended:
            self._hold_suspended_cpus()
        if pol.cpu_share_parts and snap.active:
            self._hold_shared_cpus()
        if pol.node_holds:
            self._hold_completing_nodes()

    def _cap_partitions(self, snap: Snapshot) -> None:
        """Each MaxCPUsPerNode partition's allowance on its nodes (``Free.caps``): the cap less
        what the partition's running and suspended jobs hold there (slurmctld counts only the
        partition's own jobs: a real 22.05.8 ran a 4-CPU job of a partition capped at 4 beside
        another partition's 10-CPU job)."""
        pol = self.pol
        free = self.free
        n = len(free.cpu)
        caps: dict[str, list[int]] = {}
        for name in pol.capped_parts:
            info = pol.parts[name]
            cap = [0] * n
            step = free.nodes.cpu_step
            for i in info.nodes:
                # in whole cores: the CPUs a job takes there are (``select.whole_cores``)
                cap[i] = info.max_cpus_per_node * 1000 // step[i] * step[i]
            caps[name] = cap
        cap_of: dict[int, str] = {}
        for job in snap.active.values():
            part = pol.part_of(job)
            cap = caps.get(part) if part is not None else None
            if cap is not None:
                cap_of[job.id] = part
                for node, _mask, cpu, _mem in job.placement:
                    cap[node] -= cpu
        free.caps = caps
        free.cap_of = cap_of

    def _hold_completing_nodes(self) -> None:
        """Nodes still COMPLETING now (``SlurmPolicy.node_holds``, known only in a replay of a
        real cluster): as a real 22.05 does, no job starts on them (``completing``: the main
        pass leaves them out, a backfill job that would start on one now is planned for the
        next second), while plans see their resources as free. The policy asks to be called
        when the first of their jobs is released on its last node: slurmctld schedules when
        the last epilog-complete message of a job killed at its time limit arrives, not at each
        node's, and not at all at the release of a job that ended by itself (``quiet_release``;
        the hold's fifth field says which)."""
        pol = self.pol
        now = self.now
        holds = pol.node_holds
        live = [h for h in holds if h[3] > now]
        if len(live) != len(holds):
            released = [h for h in holds if h[3] == now]
            self.loud_release = any(h[4] for h in released)
            self.quiet_release = bool(released) and not self.loud_release
            holds[:] = live  # released for good: never looked at again
        active = [h for h in live if h[1] <= now]
        if active:
            self.completing = frozenset(h[0] for h in active if h[2] > now)
            self.out.append(WakeAt(min(h[3] for h in active)))

    def _hold_suspended_cpus(self) -> None:
        """Suspended jobs gave their CPUs back to the engine, but slurmctld keeps them allocated
        (the job resumes on them): a job placed normally may not use them. In a FORCE partition
        the co-allocated jobs overlap, so its jobs hold as many CPUs as its fullest row."""
        pol = self.pol
        cpu = self.free.cpu
        forced: set[str] = set()
        for job in self.snap.suspended.values():
            part = pol.part_of(job)
            if part in pol.row_parts:
                forced.add(part)
                continue
            for node, _mask, c, _mem in job.placement:
                cpu[node] -= c
        for part in forced:
            rows = self.part_rows(part)
            held = gang.row_max(rows)
            running: dict[int, int] = {}
            for job in self.snap.active.values():
                if job.state == RUNNING and pol.part_of(job) == part:
                    for node, _mask, c, _mem in job.placement:
                        running[node] = running.get(node, 0) + c
            for node, c in held.items():
                cpu[node] -= max(0, c - running.get(node, 0))

    def _hold_shared_cpus(self) -> None:
        """Jobs that share CPUs without gang (``SlurmPolicy.shares_cpus``) hold no CPUs in the
        engine's count: their partition holds, per node, its fullest co-allocation row's CPUs
        (``sharing``). Backfill's future sees those CPUs come back as the fullest row shrinks,
        not as each job ends: their entries in ``ends`` are replaced by ones that give back only
        that (``sharing.releases_in_end_order``)."""
        cpu = self.free.cpu
        pol = self.pol
        active = self.snap.active
        pol.share_rows.forget(active)
        parts = {pol.part_of(j) for j in active.values()} & pol.cpu_share_parts
        if not parts:
            return
        order = [e[1] for e in self.ends]
        given: dict[int, dict[int, int]] = {}
        row_of = pol.share_rows.row_of
        for part in parts:
            rows = self.part_rows(part)
            for node, c in gang.row_max(rows).items():
                cpu[node] -= c
            jobs = {j.id: (pol.gang_cpu(j.placement), row_of[j.id]) for j in active.values()
                    if pol.part_of(j) == part and pol.shares_cpus(j, part)}
            given.update(sharing.releases_in_end_order(rows, jobs, order))
        self.ends = [e if e[1] not in given else (e[0], e[1], _with_cpus(e[2], given[e[1]]), e[3])
                     for e in self.ends]

    def part_rows(self, part: str) -> list[dict[int, int]]:
        """Co-allocation rows of ``part`` now. Without gang, the rows its sharing jobs kept from
        their starts (``sharing.ShareRows``); with gang, its running jobs, its suspended jobs,
        then what this pass started there, packed first-fit (``gang.rows_of``)."""
        rows = self.rows.get(part)
        if rows is None:
            pol = self.pol
            jobs = [j for j in self.snap.active.values() if pol.part_of(j) == part]
            if part in pol.cpu_share_parts:  # no gang: each job keeps the rows it got (sharing)
                rows = pol.share_rows.rows((j.id, pol.gang_cpu(j.placement)) for j in jobs
                                           if pol.shares_cpus(j, part))
            else:
                jobs.sort(key=lambda j: j.state != RUNNING)
                maps = [pol.gang_cpu(j.placement) for j in jobs]
                maps += [pol.gang_cpu(pl) for pl, pname, _via in self.started.values() if pname == part]
                rows = gang.rows_of(maps, self.snap.nodes.cpu_total)
            self.rows[part] = rows
        return rows

    def try_coallocate(self, job, info, usable, via: str, limit: float | None = None,
                       dry_run: bool = False) -> bool | str:
        """Co-allocate ``job`` in an OverSubscribe=FORCE:N or YES:N partition (cons_tres: a job
        that does not fit on idle CPUs goes into a row of the partition where its CPUs are free,
        up to N rows). GPUs and memory must be free as for any start: they are never shared.
        True when it was started (``dry_run``: when it would be, nothing started). With gang
        scheduling, gang then decides whether it runs or waits suspended; without, it runs at
        once on the shared CPUs, and in a YES partition only a job asking ``--oversubscribe``
        is co-allocated (a real 22.05.8 did so). The reason of a limit when the selection, in
        the first row where the job fits, breaks it: select_nodes tests the limits on the one
        selection cons_tres returns (``acct_policy_job_runnable_post_select``), so nothing is
        started and the job is held by that limit, not by resources."""
        pol = self.pol
        n_max = pol.share.get(info.name, 1)
        if n_max <= 1 or info.name not in pol.row_parts:
            return False
        if not pol.gang_on and not job.wl.oversubscribe and info.name in pol.yes_parts:
            return False
        if job.wl.oversubscribe and info.name in pol.yes_parts:
            # not beside a job that did not ask to share (OverSubscribe=YES, gang.max_share)
            usable = (info.node_set if usable is None else usable) - self.unshared_nodes()
        rows = self.part_rows(info.name)
        held = gang.row_max(rows)
        base = self.free
        cands = rows[:n_max] + ([{}] if len(rows) < n_max else [])
        for index, row in enumerate(cands):
            f = base.copy()
            for n in info.nodes:
                f.cpu[n] = base.cpu[n] + held.get(n, 0) - row.get(n, 0)
            placement = place(job.wl, info.nodes, f, usable)
            if placement is None:
                continue
            over = self.placed_limit(job, info, placement)
            if over is not None:  # over a limit on the selection, as at any start
                return over
            if not dry_run:
                self.start_in_row(job, placement, info, via, index, limit)
            return True
        return False

    def unshared_nodes(self) -> frozenset[int]:
        """Nodes holding a running or suspended job that did not ask ``--oversubscribe``, or one
        this pass started."""
        out = self.memo.get("unshared")
        if out is None:
            hit = {p[0] for j in self.snap.active.values() if not j.wl.oversubscribe for p in j.placement}
            out = self.memo["unshared"] = frozenset(hit)
        return out | self.unshared_started if self.unshared_started else out

    def start_in_row(self, job, placement, info, via: str, row: int | None = None,
                     limit: float | None = None) -> None:
        """Start ``job`` on CPUs other jobs of its partition may hold too: its CPUs go into row
        ``row`` of ``info``'s rows (a new one when it is past them). With no row given (a job on
        idle CPUs): without gang, on each node the row fullest there, so it takes all its CPUs
        (``sharing``); with gang, the first row where they fit. It takes from the free CPUs only
        what makes the partition's fullest row grow. GPUs and memory are taken as for any
        start: they are never shared."""
        pol = self.pol
        rows = self.part_rows(info.name)
        held = gang.row_max(rows)
        cpus = pol.gang_cpu(placement)
        if info.name in pol.cpu_share_parts:
            where = sharing.fullest_rows(rows, cpus) if row is None else dict.fromkeys(cpus, row)
            pol.share_rows.row_of[job.id] = where
            sharing.add(rows, cpus, where)
        else:
            if row is None:
                total = self.snap.nodes.cpu_total
                row = next((k for k, r in enumerate(rows) if all(r.get(n, 0) + c <= total[n] for n, c in cpus.items())),
                           len(rows))
            gang_row = rows[row] if row < len(rows) else None
            if gang_row is None:
                gang_row = {}
                rows.append(gang_row)
            for n, c in cpus.items():
                gang_row[n] = gang_row.get(n, 0) + c
        after = gang.row_max(rows)
        take = []
        seen: set[int] = set()
        for n, mask, _c, mem in placement:
            grow = 0 if n in seen else after.get(n, 0) - held.get(n, 0)
            seen.add(n)
            take.append((n, mask, grow, mem))
        self.start(job, placement, info, via, take=tuple(take), limit=limit)

    def reason(self, job, why: str, first: bool = False) -> None:
        if first and job.id in self.reasons:
            return
        self.reasons[job.id] = why

    def off_completing(self, info, usable):
        """``usable`` (None: all of partition ``info``'s nodes) less the nodes still COMPLETING
        (a replay's holds): every start slurmctld makes, main pass or backfill's select_nodes,
        leaves them out; only will-run counts them (findings 22 and 57)."""
        if not self.completing:
            return usable
        return (info.node_set if usable is None else usable) - self.completing

    def fits_all_cores(self, job, info, usable) -> bool:
        """Whether a ``--contiguous`` job passes the first test of a start (cons_tres
        ``_job_test``'s test 0, before it looks at free cores): placed on ``usable`` (None: all
        of partition ``info``'s nodes) with every core free, memory and GPUs as held, the nodes
        of exclusive jobs left out. Other jobs are taken to pass it wherever they fit now
        (their walks go on over further runs while they need more; no probe has shown one
        failing it). A contiguous one may not: with every core free a lighter run that cannot
        hold it keeps as many free resources as its other runs, so ``choose_nodes``' second
        chance, which drops the nodes with the fewest, cannot drop it, and the job fails. A
        real 22.05.8 (probe p167d, gpu02 at Weight=2, gpu03 held by an exclusive job, gpu04 by
        an 8-CPU one) left ``-N2 --contiguous``, ``-n20 --contiguous`` and ``--gpus=12
        --contiguous`` waiting (Resources), though backfill's will-run found gpu01-02 free for
        each (its log: test 0 failed at the start, "Requested nodes are busy"). Not modelled:
        the test before a preemption or a co-allocation, and OverSubscribe=EXCLUSIVE
        partitions' nodes (only ``--exclusive`` jobs' nodes are left out)."""
        if not contiguous(job.wl) or any(ps.exclusive for ps in job.wl.pod_sets):
            # (an exclusive job's selection sees idle nodes only, ``_pick_best_nodes``: there
            # every core is free already; found by a review)
            return True
        nodes = self.snap.nodes
        pending = self.snap.pending
        whole = {p[0] for j in self.snap.active.values() if any(ps.exclusive for ps in j.wl.pod_sets)
                 for p in j.placement}
        whole.update(p[0] for jid, (pl, _part, _via) in self.started.items()
                     if jid in pending and any(ps.exclusive for ps in pending[jid].wl.pod_sets) for p in pl)
        free = Free(nodes, self.free)
        free.cpu = list(nodes.cpu_total)
        free.caps = whole_allowance(nodes, info)  # (no partition's cores held either)
        where = (info.node_set if usable is None else usable) - whole
        return place(job.wl, info.nodes, free, where) is not None

    def limit_reason(self, job, info, placed: bool = True) -> str | None:
        """The QOS or association limit ``job`` breaks in partition ``info`` (its reason), else
        None; ``placed``: with what it would hold on the nodes it gets (an exclusive job's
        whole nodes, ``SlurmPolicy.limit_req``), else as backfill tests it before a
        reservation (the whole nodes' CPUs and memory, the GPUs asked)."""
        pol = self.pol
        if not pol.s.limits_enforced:
            return None
        req = pol.req(job)
        applies = pol.limits_applying(req, info)
        if applies is None:
            return None
        return limits.check(pol.limit_req(job, info, req, gpus_as_asked=not placed), pol.held_limit(job, info),
                            applies[0], applies[1], self.usage)

    def failed_select_limit(self, job, info) -> str | None:
        """The limit a main pass's failed selection reports for ``job`` in partition ``info``
        (its reason), else None. slurmctld's select_nodes tests the TRES limits after the
        selection even when it failed ("Replacing scheduling error code ... to 'Accounting
        policy'"); a job asking its GPUs for the whole job (``--gpus``, ``--gpus-per-task``)
        then counts what the selection on an idle cluster found (``SlurmPolicy.idle_gpus``),
        and a job failing there holds no partition back (finding 58). A real 22.05.8 with
        GrpTRES=gres/gpu=24 on the account and 14 in use counted ``-N2 --gpus=8``, ``-N2 -n8
        --gpus-per-task=1`` and ``-N2 -n4 --gpus-per-task=2`` as 16, ``-N3 --gpus=6`` as 24
        (8-GPU nodes), and left ``-N2 --gres=gpu:4`` (per node) at its 8."""
        pol = self.pol
        if not pol.s.limits_enforced:
            return None
        per_job = [ps for ps in job.wl.pod_sets if ps.gpus_per_job]
        walked = [ps for ps in job.wl.pod_sets if walks_gpus_per_node(ps)]
        if not per_job and not walked:
            return None
        req = pol.req(job)
        applies = pol.limits_applying(req, info)
        if applies is None:
            return None
        if per_job:
            whole = pol.idle_gpus(job, info, per_job)
            asked = sum(ps.total_gpus for ps in per_job)
        else:
            # a walk for GPUs per node (``-n T --gres=gpu:G``): the test-only pass does not
            # count GPUs per node (``gres_sched_add`` skips them), so the job's request keeps
            # what its last full selection (a main pass's, a backfill will-run's) left there, G
            # on each node it took (``walk_gres``), else G for one node, as submitted
            # (22.05.8 source, read by a reviewer; ``diff-slurm --mix gres-tasks`` seed 36:
            # ``-n2 -c96 --gres=gpu:8`` of an account with GrpTRES=gres/gpu=16 and GPUs in use,
            # tested by backfill every second, its selection failing, held no partition back:
            # a lower job of the account started in the same pass)
            whole = pol.walk_gres.get(job.id, 0)
            asked = sum(ps.total_gpus for ps in walked)
            per_job = walked
        if whole <= asked:
            return None  # as asked: the test before the selection already passed
        tres = dict(req.tres)
        if "gres/gpu" in tres:  # (counted only where AccountingStorageTRES tracks it)
            tres["gres/gpu"] += whole - asked
        if len(per_job) == 1 and per_job[0].gpu_type:  # its type's count is the selection's too
            key = gpu_tres(per_job[0].gpu_type)  # (gres_sched_add's total)
            if key in tres:
                tres[key] += whole - asked
        return limits.check(replace(req, tres=tres), pol.held_limit(job, info), applies[0], applies[1], self.usage)

    def blocking_qos(self, job, info, reason: str) -> str | None:
        """The QOS whose group limit gave ``job`` the reason ``reason`` in partition ``info``
        (slurmctld's qos_blocking_ptr, which only the TRES limits tested after the selection
        set), else None: of the job's QOS and its partition's, in ``limits.qos_order``'s order,
        the first that gives that reason on its own (where the selection's count gave it, a
        walked job's, the first with a group TRES limit)."""
        pol = self.pol
        req = pol.req(job)
        applies = pol.limits_applying(req, info)
        if applies is None:
            return None
        qoses = [q for q in applies[0] if q is not None]
        want, tl = pol.limit_req(job, info, req), pol.held_limit(job, info)
        for qos in qoses:
            if limits.check(want, tl, (qos,), [], self.usage) == reason:
                return qos.name
        return next((q.name for q in qoses if q.grp_tres), None)

    def start_limit(self, job, info) -> str | None:
        """The limit that stops ``job`` from starting on the nodes it would get, where that
        differs from its request: an exclusive job's whole nodes (else None).

        Backfill tests TRES limits twice: before it adds a reservation, with the GPUs as asked
        (``gres_ctld_set_job_tres_cnt`` on the request; CPUs and memory on the whole nodes
        will-run found), and when it starts a job or preempts for it, on the whole nodes of an
        exclusive one (``select_nodes``; 22.05.8 source). Under assoc_limit_stop backfill tests
        neither before will-run or a reservation, and a start failing on the limits is planned
        later (finding 82). A real 22.05.8 with GrpTRES=gres/gpu=8 on the account, 1 GPU of it in
        use and no idle node, showed an
        exclusive ``--gres=gpu:1`` job pending with AssocGrpGRES (the main scheduler's test,
        on whole nodes) and a planned start on gpu01 (backfill's, as asked; finding 53)."""
        if not any(ps.exclusive for ps in job.wl.pod_sets):
            return None
        return self.limit_reason(job, info)

    def placed_limit(self, job, info, placement, planned: bool = False) -> str | None:
        """The limit ``job`` breaks on ``placement``, the nodes selected for it (its reason),
        else None. slurmctld tests the TRES limits again on the selection
        (``acct_policy_job_runnable_post_select``): at a start with what the job is given
        (``select_nodes``: ``total_cpus``, the memory of its resources, the node count and the
        GPUs per node times the nodes), and before backfill reserves the nodes of a later start
        (``planned``) with will-run's selection, memory as ``job_get_tres_mem`` counts it
        without an allocation (``_planned_memory``). Failing at a start, the job does not
        start; before a reservation, it keeps its planned start but reserves nothing.

        Only a walked job's or a node range's selection differs from what the limits read
        before it (``limit_reason``: for other jobs ``SlurmPolicy.limit_req`` already counts
        whole cores and an exclusive job's whole nodes; a range's request counts its least
        nodes, ``jobinfo.request_totals``): its node count, GPUs per node and memory per node
        (``PodSet.walk_gpus``; seen on a real 22.05.8, ``diff-slurm --mix gres-tasks`` seed 1:
        ``-n2 -c96 --gres=gpu:8`` of an account with GrpTRES=gres/gpu=16 and one GPU in use
        needed two nodes, 16 GPUs, and got no reservation, "adding reservation for JobId=21
        blocked by acct_policy_job_runnable_post_select", so a lower job ran on its nodes), and
        task pods holding memory per node (``select.task_node_memory``: their request counts
        one node's, the selection that memory on every node it took; ``-n20 --mem=0`` of an
        account with GrpTRES=mem=100000 over two 64000 MB nodes, from the source), and
        ``--ntasks-per-node=K`` (``PodSet.per_node_tasks``: the request counts the tasks as
        given and the least nodes stored, the selection K tasks' CPUs on each of ⌈T/K⌉ nodes;
        a real 22.05.8 under MaxTRESPerJob=cpu=11 left ``-n10 --ntasks-per-node=4``, a request
        of 10 CPUs and a selection of 12, pending with QOSMaxCpuPerJobLimit; probe p151)."""
        pol = self.pol
        if not pol.s.limits_enforced:
            return None
        pods = job.wl.pod_sets
        if not any(ps.walked or (ps.node_memory_mib and task_node_memory(ps)) or _capped_by_node_limits(ps, job.wl)
                   or ps.per_node_tasks is not None for ps in pods):
            return None
        if any(walks_gpus_per_node(ps) for ps in pods):
            # a full selection leaves its GPUs per node times its nodes on the job's request
            # (cons_tres ``select_and_set``), which a later failed one still counts
            pol.walk_gres[job.id] = sum(p[1].bit_count() for p in placement)
        req = pol.req(job)
        applies = pol.limits_applying(req, info)
        if applies is None:
            return None
        held = pol.alloc_tres(placement)
        asked = req.tres
        if planned and "mem" in asked:
            held["mem"] = _planned_memory(pods[0], asked, held)
        if planned and pods[0].exclusive:
            # an exclusive walk's whole nodes count their GPUs at a start only: before a
            # reservation the GPUs asked (as ``limit_req`` counts them there, finding 53;
            # ``diff-slurm --mix gpus-cpg`` seed 1: ``--nodes=3-4 --gpus=7 --exclusive`` of an
            # account with GrpTRES=gres/gpu=24 and GPUs in use was planned on three whole nodes
            # with its reservation)
            for t in held:
                if t.startswith("gres/gpu"):
                    held[t] = asked.get(t, 0)
        tres = {k: held.get(k, v) for k, v in asked.items()}
        return limits.check(replace(req, tres=tres), pol.held_limit(job, info), applies[0], applies[1], self.usage)

    def array_limit(self, job) -> str | None:
        wl = job.wl
        if (wl.array_job_id is not None and wl.array_max_running
                and self.arrays.get(wl.array_job_id, 0) >= wl.array_max_running):
            return "JobArrayTaskLimit"
        return None

    def license_limit(self, job) -> str | None:
        """"Licenses" when the licenses ``job`` asks for are not free now, else None.

        A real 22.05.8 (Licenses=lic:2) left a third ``-L lic:1`` job pending with reason
        Licenses and no planned start while a later job without licenses started at once: the
        main pass skips such a job without holding its partition back, and backfill skips it
        without a reservation (without ``bf_licenses``, which is not modelled)."""
        want = job.wl.licenses
        free = self.licenses
        if not want or free is None:
            return None
        for name, count in want:
            if free.get(name, 0) < count:
                return "Licenses"
        return None

    def may_block(self, job, prio: int) -> bool:
        s = self.pol.s
        if s.bf_min_prio_reserve and prio < s.bf_min_prio_reserve:
            return False
        return not (s.bf_min_age_reserve
                    and self.now - self.accrue.get(job.id, job.eligible) < s.bf_min_age_reserve)

    def start(self, job, placement, info, via: str, take=None, limit: float | None = None) -> None:
        """Start ``job`` on ``placement``; ``take``: what it removes from the free resources when
        that is not the placement itself (a gang co-allocation shares CPUs); ``limit``: the time
        limit backfill gives a job with ``--time-min`` (seconds), instead of its own."""
        pol = self.pol
        if limit is not None:
            pol.short_limit[job.id] = limit
            pol._tl.pop(job.id, None)
        elif pol.short_limit.pop(job.id, None) is not None:
            pol._tl.pop(job.id, None)
        shared = info.name in pol.cpu_share_parts and pol.shares_cpus(job, info.name)
        if take is None and shared:
            # no gang: every sharing job of the partition is in its rows, even one on idle CPUs
            self.start_in_row(job, placement, info, via, limit=limit)
            return
        if pol.cores is not None and take is None:
            # gres.conf Cores=: the cores slurmctld gives the job decide its GPUs (affinity.py),
            # among the devices of the type it asked for when it named one
            fmask = self.free.mask
            gtype = next((ps.gpu_type for ps in job.wl.pod_sets if ps.gpu_type), None)
            if gtype:
                nodes = self.snap.nodes
                fmask = [m & (nodes.typed_mask(i, gtype) or 0) for i, m in enumerate(fmask)]
            placement = pol.cores.steer(job, placement, fmask)
        self.free.take(placement if take is None else take)
        if self.free.caps is not None and info.name in self.free.caps:
            # the job's whole placement, as ``_cap_partitions`` counts it next pass (a
            # co-allocated start's ``take`` is only what its row adds to the node's CPUs)
            self.free.cap_take(info.name, placement)
            self.free.cap_of[job.id] = info.name
        if take is None and self.rows:
            rows = self.rows.get(info.name)
            if rows is not None:  # a normal start in a FORCE partition fits its first row
                gang.add_to_rows(rows, pol.gang_cpu(placement), self.snap.nodes.cpu_total)
        self.started[job.id] = (placement, info.name, via)
        if pol.yes_parts and not job.wl.oversubscribe:
            self.unshared_started.update(p[0] for p in placement)
        self.reasons.pop(job.id, None)
        pol.run_part[job.id] = info.name
        pol.run_limit[job.id] = pol.time_limit(job, info) if limit is None else limit
        stamp = pol.start_stamp(job.id, self.now) if pol.start_stamps else None
        end = (pol.whole_second(self.now) if stamp is None else stamp) + (
            pol.plan_limit(job, info) if limit is None else limit)
        # a job sharing CPUs gives back at its end what it took from the idle ones
        backfill.insert_end(self.ends, end, job.id,
                            placement if take is None or not shared else take, end)
        pol.track_start(job, placement, self.now)
        if stamp is not None:  # 1 ms in, so that whole-second rounding keeps that second
            pol.set_reported_start(job.id, stamp + 1e-3)
        elif pol.reported_start:  # a requeued job's earlier start no longer counts
            pol.reported_start.pop(job.id, None)
        if pol.s.limits_enforced:
            req = pol.req(job)
            alloc = pol.alloc_tres(placement)
            limits.add_usage(self.usage, req, alloc, part_qos=info.part.qos)
            limits.add_account_usage(self.usage, pol.account_chain(req.account), alloc)
        if job.wl.array_job_id is not None:
            self.arrays[job.wl.array_job_id] = self.arrays.get(job.wl.array_job_id, 0) + 1
        if job.wl.licenses and self.licenses is not None:
            for name, count in job.wl.licenses:
                self.licenses[name] = self.licenses.get(name, 0) - count
        # a node range may start on fewer nodes than its most (``select._node_count``)
        self.out.append(Start(job.id, placement, partial=len(placement) < job.pods_total, via=via,
                              time_limit=pol.effective_limit(job, info) if limit is None else limit,
                              partition=info.name,
                              cpu_share=pol.share[info.name] if shared else 1))

    def preempt(self, victim, mode: str, by: int, grace: float = 0.0) -> None:
        delay = self.pol.s.requeue_delay if mode == "REQUEUE" else 0.0
        self.out.append(Preempt(victim.id, mode, reason="Preempted", by_job=by, requeue_delay=delay, grace=grace))


def _memory_follows_cpus(ps) -> bool:
    """Whether ``ps``'s memory is per CPU or per task, so that CPUs a selection adds (whole
    cores, will-run's) bring theirs too."""
    return ps.memory_per in ("cpu", "task") or bool(ps.memory_per_cpu)


def _planned_memory(ps, asked: dict, held: dict) -> int:
    """The memory backfill's limits test counts for walked pod set ``ps`` before it reserves the
    nodes of ``held`` (``alloc_tres`` of will-run's placement; ``asked``: the request's TRES,
    its least nodes' worth): ``job_get_tres_mem`` without an allocation, memory per node for
    each node (``--mem``, or memory per GPU of a node's G GPUs), per CPU for will-run's CPUs, or
    per GPU for the job's X GPUs as asked (``--gpus``). Not modelled: a job whose memory came
    from DefMemPerGPU alone, where slurmctld counts a node's RealMemory for each node."""
    mem = asked["mem"]
    if _memory_follows_cpus(ps):
        return mem * held["cpu"] // max(1, asked["cpu"])
    if ps.memory_per == "gpu" and ps.spread:
        return mem
    # (the request counts memory per node for its least nodes: ``jobinfo.request_totals``)
    return mem // max(1, asked.get("node", 1)) * held["node"]


def _with_cpus(placement, cpus: dict[int, int]) -> tuple:
    """``placement`` with each node's CPUs replaced by ``cpus[node]`` (on the node's first pod;
    its other pods there get none)."""
    out = []
    seen: set[int] = set()
    for node, mask, _c, mem in placement:
        out.append((node, mask, 0 if node in seen else cpus.get(node, 0), mem))
        seen.add(node)
    return tuple(out)


def _capped_by_node_limits(ps, wl) -> bool:
    """Whether pod set ``ps`` of ``wl`` takes a node count select chooses, which node limits
    cap (``SlurmPolicy._walk_node_cap``): a walked one, a node range under the gang rule
    "min" (``--nodes=A-B``: slurmctld's max_nodes), or ``--ntasks-per-node``'s pods
    (``PodSet.per_node_tasks``: stored with their least count, or none)."""
    return (ps.walked or (ps.one_per_node and ps.min_count is not None and wl.gang == GANG_MIN)
            or ps.per_node_tasks is not None)


def _spread_task_pods(ps) -> bool:
    """Whether pod set ``ps`` is task pods select spreads over nodes of its choosing (``-n T``
    with no ``--nodes``, no walk, no ``--ntasks-per-node``): a node limit caps them through
    ``PodSet.task_node_cap``, their count being tasks, not nodes."""
    return (not ps.one_per_node and ps.count > 1 and not ps.walked and ps.per_node_tasks is None
            and not ps.split_tasks)


def _stored_least(ps) -> int:
    """The least node count slurmctld stores for ``ps`` (``--ntasks-per-node``'s as given, not
    select's ⌈T/K⌉), else its ``min_count`` or 1."""
    if ps.per_node_tasks is not None:
        return ps.per_node_tasks[0] or 1
    return ps.min_count or 1


class SlurmPolicy:
    """slurmctld: main scheduler + backfill, multifactor priority, cons_tres, preemption."""

    name = "slurm"

    def __init__(self, pool: Pool, options: dict) -> None:
        check_options("slurm", options, _OPTIONS)
        self.pool = pool
        #: keep every cycle's plans and reservations (squeue --start, the conformance cases);
        #: without it a backfill cycle ends once nothing more can start now, so ``planned``
        #: holds only the plans made before that point (the schedule is the same either way)
        self.record = bool(options.get("record", False))
        self.cores: CoreBook | None = None  # set up with the nodes (``_setup``)
        #: Epoch seconds of the run's t=0. Slurm aligns its will-run time windows on epoch
        #: multiples of 30 s; a replay of a real cluster passes its start here (default 0).
        self.epoch = float(options.get("epoch", 0.0))
        #: Run-relative instants of the backfill cycles, instead of every ``bf_interval`` on
        #: the t=0 grid: a replay of a real slurmctld, whose cycles start ``bf_interval`` after
        #: the previous one ended and so drift by the cycles' own durations. None: the grid.
        at = options.get("backfill_at")
        self.backfill_at: list[float] | None = None if at is None else sorted(float(t) for t in at)
        self._bf_set = frozenset(self.backfill_at or ())
        #: Backfill cycles of a replayed real slurmctld that ran out of time (bf_max_time, a
        #: wall-clock limit no simulation can know): run-relative instant -> (the jobs the cycle
        #: reached, the last being where it stopped; whether that one was still tested). See
        #: ``_bf_records``.
        #: Run-relative instants of a replayed slurmctld's main passes (and whether each was a
        #: full one), instead of a pass at every event: its passes come from a background loop
        #: and after epilog-complete messages, at instants only its log knows. None: every event.
        main = options.get("main_at")
        self.main_at: list[float] | None = None if main is None else sorted(float(t) for t, _f in main)
        self._main_full = {float(t): bool(f) for t, f in main or ()}
        #: A replay of a log without a line per main pass: the run-relative instants at which
        #: the replayed slurmctld is known to have run one (a pass that started jobs). Its
        #: other passes are taken to be the background loop's, on the ticks. None: no replay.
        seen = options.get("main_seen")
        self.main_seen: list[float] | None = None if seen is None else sorted(float(t) for t in seen)
        self._main_seen_set = frozenset(self.main_seen or ())
        #: A replay's jobs as the replayed slurmctld started them: job id -> (run-relative
        #: instant its nodes were allocated, its start_time, a whole epoch second). A pass
        #: stamps a job with the second in which it selected the job's nodes, which may be the
        #: second after the one the pass began in when the pass takes a while to reach the job;
        #: no simulation can know how long (``start_stamp``). None: no replay.
        stamps = options.get("start_stamps")
        self.start_stamps: dict[int, tuple[float, float]] | None = None if stamps is None else {
            int(j): (float(a), float(t)) for j, (a, t) in stamps.items()}
        #: the replayed slurmctld's known pass instants, sorted (``start_stamp``)
        self._pass_instants = [at for at in (self.backfill_at, self.main_at, self.main_seen) if at]
        #: instant -> (the (job, partition) records the real cycle reached, a partition of None
        #: standing for every one of the job's; the one it stopped at; whether that was tested)
        self.backfill_cut: dict[float, tuple[frozenset, tuple | None, bool]] = {}
        for t, (recs, tested) in (options.get("backfill_cut") or {}).items():
            pairs = [(int(r), None) if isinstance(r, (int, str)) else (int(r[0]), r[1]) for r in recs]
            self.backfill_cut[float(t)] = (frozenset(pairs), pairs[-1] if pairs else None, bool(tested))
        cfg = submit_check.slurm_config(pool)
        self.cfg = cfg
        self.s = load_settings(cfg)
        self._job_defaults: dict[str, job_defaults.Defaults] = {}  # partition -> its job defaults
        self._node_memory = {name: node.memory_mib for name, node in pool.nodes.items()}
        #: the nodes in slurm.conf's order, and each one's position (``contiguous_list``)
        self._node_order = tuple(pool.nodes)
        self._node_position = {name: i for i, name in enumerate(self._node_order)}
        self._typed_nodes = job_defaults.typed_gpu_nodes(pool.nodes)  # (``job_defaults.MSG_LISTED_CPG``)
        self._submit_refusal: dict[int, str] = {}  # job id -> sbatch's MaxMemPerNode message, or MSG_UNWALKED
        #: job id -> whether it was submitted with a list of partitions, for a job whose list
        #: the submit rules changed (``resolve_request``; else read from its partitions)
        self._listed: dict[int, bool] = {}
        #: job id -> the memory it asked as submitted that slurmctld holds against each node's
        #: RealMemory (``--mem``, or ``--mem-per-cpu`` per CPU), where it asked one
        #: (``submit_check.asked_node_memory``)
        self._asked_memory: dict[int, int] = {}
        #: slurm.conf ``Licenses=``: name -> count (empty: the cluster has none)
        self.license_total: dict[str, int] = dict(cfg.params.get("Licenses") or {})  # type: ignore[call-overload]
        self.over_time_limit = self.s.over_time_limit
        self._part_otl: dict[str, float | None] = {}  # partition -> its own OverTimeLimit (None: the cluster's)
        # slurmctld checks time limits every PERIODIC_TIMEOUT = 30 s (on the controller's clock).
        self.time_limit_check_interval = 30.0
        self.acct = cfg.accounting
        self.qos = dict(self.acct.qos) if self.acct is not None else {}
        default = cfg.default_partition()
        self.default_part = default.name if default is not None else None
        periods = [self.s.sched_interval]
        if self.s.backfill:
            periods.append(self.s.bf_interval)
        for q in self.qos.values():
            if q.grace_time:
                periods.append(int(q.grace_time))
        for part in cfg.partitions.values():
            g = part.extra.get("GraceTime")
            if g and str(g).isdigit() and int(g):
                periods.append(int(g))
        modes = {m.strip().upper() for m in self.s.preempt_mode.split(",")}
        #: gang scheduling (spec §10): PreemptMode includes GANG
        self.gang_on = "GANG" in modes
        self.time_slice = int(cfg.params.get("SchedulerTimeSlice") or 30)
        #: select/linear allocates whole nodes: gang counts a shared node as a conflict
        self.linear = str(cfg.params.get("SelectType") or "").lower() == "select/linear"
        if self.gang_on:
            periods.append(self.time_slice)
        self.tick_interval = float(math.gcd(*[int(p) for p in periods if p > 0]) or 60)
        self._nodes = None
        #: per node of the run's table, its tracked GPU types for ``alloc_tres`` (``_setup``)
        self._typed_keys: list = []
        # derived per run (reset when a new NodeTable is seen)
        self.planned: dict[int, float] = {}
        self.plan_log: dict[float, dict] = {}
        self.resv_log: dict[float, list] = {}
        #: backfill cycles (instant -> True) that stopped at bf_node_space_size map records
        self.bf_full_log: dict[float, bool] = {}
        self.reason_log: list[tuple[float, int, str]] = []
        #: Start times reported from outside for jobs the engine started a moment later (a
        #: replay adopting real Slurm's decisions, ``adopt_start``): slurmctld counts a job's
        #: end_time from its own start, so the plans must too. Empty in a plain run.
        self.reported_start: dict[int, float] = {}
        #: ``(node index, from, until, job released)``: nodes a replay of a real cluster knows
        #: were COMPLETING (the job on them had ended, its processes or epilog had not) and
        #: took no job, and when that job's last node was released. A simulation releases nodes
        #: at once and leaves this empty; a replay's executor adds the real intervals of the
        #: jobs it ends where real Slurm ended them.
        self.node_holds: list[tuple[int, float, float, float]] = []

    # ------------------------------------------------------------ per-run memos
    def _setup(self, snap: Snapshot) -> None:
        nodes = snap.nodes
        self._nodes = nodes
        #: cores per running job where GPUs name ``Cores=`` (None: no such node, GPUs by index)
        self.cores = CoreBook.for_nodes([self.pool.nodes[name] for name in nodes.names])
        if self.cores is not None and self.record:
            self.cores.log = {}
        self.parts = partition_infos(self.cfg, nodes, self.pool)
        s = self.s
        self._typed_keys = tracked_gpu_keys(nodes, s.typed_gpu_tres, s.untyped_gpu_as) if s.typed_gpu_tres else []
        #: partitions with MaxCPUsPerNode (``Cycle._cap_partitions``)
        self.capped_parts = tuple(name for name, info in self.parts.items() if info.max_cpus_per_node is not None)
        self.nodes_total = len(nodes)
        self.cpus_total = sum(c // 1000 for c in nodes.cpu_total)
        self.max_part_factor = max((p.job_factor for p in self.parts.values()), default=1)
        self.max_qos_prio = max((q.priority for q in self.qos.values()), default=0)
        # the largest association Priority anywhere (an unset one inherits, so the explicit ones)
        acct = self.acct
        assocs = [*acct.accounts.values(), *acct.user_associations] if acct is not None else []
        self.max_assoc_prio = max((a.priority for a in assocs if a.priority is not None), default=0)
        self._assoc_prio: dict[tuple[str, str], int] = {}
        self._req: dict[int, object] = {}
        self._verdict: dict[int, str | None] = {}
        self.run_part: dict[int, str] = {}
        #: job id -> its pending Partition text, fixed at its first queue build
        self._pending_text: dict[int, str] = {}
        self.run_limit: dict[int, float | None] = {}
        #: jobs backfill started with their ``--time-min`` as the limit (22.05.8, see backfill)
        self.short_limit: dict[int, float] = {}
        self._segs: dict[int, tuple] = {}
        self._prio: dict[tuple, int] = {}
        self._prio_T = None
        self._fs_T = None
        self._fs_val: dict[str, float] | None = {}  # see ``_fs``
        self._fs_due: tuple | None = None
        self._chains: dict[str, tuple[str, ...]] = {}
        self._limits_applying: dict[tuple, tuple | None] = {}  # see ``limits_applying``
        # whether any QOS or association sets MaxSubmitJobs (``_submit_limit``)
        acct = self.acct
        self._submit_limited = acct is not None and (
            any(q.max_submit_jobs_per_user is not None or q.max_submit_jobs_per_account is not None
                or q.grp_submit_jobs is not None for q in acct.qos.values())
            or any(a.max_submit_jobs is not None or a.grp_submit_jobs is not None
                   for a in (*acct.accounts.values(), *acct.user_associations)))
        self._idle_place: dict[tuple, object] = {}  # (job id, partition, node states) -> ``idle_placement``
        #: job id -> the GPUs a walk for GPUs per node held in its last full selection (see
        #: ``Cycle.failed_select_limit``)
        self.walk_gres: dict[int, int] = {}
        self._cpu_limits: dict[tuple, bool] = {}  # see ``_cpu_limited``
        self._bf_sig = None
        #: the instant of the last backfill cycle: slurmctld's backfill thread runs once per
        #: bf_interval, never again in a later pass at the same instant (after a preemption)
        self._bf_ran_at: float | None = None
        #: the last backfill cycle planned a job whose start failed on a limit from its own
        #: instant on (assoc_limit_stop: 500 s on): the next cycle runs even where nothing
        #: changed, since that plan and its reservation move with it
        self.bf_moving = False
        self._tl: dict[int, tuple] = {}
        self._alloc: dict[int, tuple] = {}
        self._fit_empty: dict[tuple, bool] = {}
        #: job id -> the partition where select answered ESLURM_NODE_NOT_AVAIL at its submit:
        #: its first reason is ReqNodeNotAvail there (``queue.build``)
        self.unavailable_at_submit: dict[int, str] = {}
        self.running = RunningIndex(self)
        self.ledger = UsageLedger(s.calc_period, s.half_life, s.reset_period, s.limits_enforced)
        self._usage_tree = UsageTree(self.acct) if self.acct is not None else None
        #: jobs per CPU in each partition (OverSubscribe=FORCE:N -> N, else 1)
        self.share = {name: gang.max_share(info.part.oversubscribe) for name, info in self.parts.items()}
        self.gang_parts = {name: gang.PartSpec(name, info.tier, i) for i, (name, info) in enumerate(self.parts.items())}
        self.gang_state = gang.GangState()
        self._gcpu: dict[int, tuple] = {}
        #: gang can change something only where jobs may share CPUs (FORCE) or be suspended by a
        #: higher tier (partition_prio with SUSPEND); elsewhere its lists would only hold fillers
        suspend = s.preempt_type == "preempt/partition_prio" and any(
            (info.preempt_mode or s.preempt_mode).split(",")[0].strip().upper() == "SUSPEND"
            for info in self.parts.values())
        #: preempt/qos with SUSPEND: a preemptor is allocated on its victims' CPUs in their
        #: OverSubscribe=FORCE[:N] partition and gang time-slices them (checked on a real 22.05.8)
        qos_suspend = self.gang_on and s.preempt_type == "preempt/qos" and (
            s.preempt_mode.split(",")[0].strip().upper() == "SUSPEND"
            or any((q.preempt_mode or "").split(",")[0].strip().upper() == "SUSPEND" for q in self.qos.values()))
        self.suspend_parts = frozenset(name for name, info in self.parts.items()
                                       if qos_suspend and gang.forced(info.part.oversubscribe))
        #: partitions whose jobs may hold the same CPUs (co-allocation rows)
        self.row_parts = frozenset(name for name, n in self.share.items() if n > 1) | self.suspend_parts
        #: OverSubscribe=YES partitions: a job's ``--oversubscribe`` limits where it may share
        self.yes_parts = frozenset(name for name, info in self.parts.items()
                                   if gang.asks_to_share(info.part.oversubscribe))
        self.gang_active = self.gang_on and (suspend or bool(self.row_parts))
        #: partitions whose jobs share CPUs *without* gang: co-allocated jobs run at once on the
        #: same CPUs (``Start.cpu_share``), checked on a real 22.05.8 (OverSubscribe=FORCE:N,
        #: and YES:N between jobs that both ask ``--oversubscribe``)
        self.cpu_share_parts = frozenset() if self.gang_on else self.row_parts
        #: each sharing job's co-allocation row per node, from its start to its end
        self.share_rows = sharing.ShareRows()
        self.use_fs = s.multifactor and self.acct is not None and s.weights.get("fairshare", 0) > 0

    def part_of(self, job) -> str | None:
        """The partition a running or suspended job runs in."""
        return self.run_part.get(job.id) or job.partition

    def pending_partition_text(self, job) -> str:
        """The Partition text squeue shows for ``job`` while it is pending: its partitions in
        the order slurmctld's submit-time test left them (``part_submit.pending_text``), fixed
        the first time it is asked (the queue asks at the job's first build, its submission)."""
        got = self._pending_text.get(job.id)
        if got is not None:
            return got
        names = list(self.req(job).parts)
        nodes = self._nodes
        if len(names) < 2 or nodes is None or any(n not in self.parts for n in names):
            return ",".join(names)
        fails = {info.name: queue.part_fail(info, why) for info, why in queue.cached_job_static(self, job)[0]}
        req = self.req(job)
        most, least = stored_node_counts(job.wl, req.nodes, [self.parts[n].part for n in names])
        job_qos = self.qos.get(req.qos or "")

        def could_run(name: str) -> str | None:
            # select's test in the partition: its node counts leave a count (``get_node_cnts``;
            # probe p135: ``-p d,p -N2`` with d of MaxNodes=1 showed "p,d" under NO) and the
            # shape fits its nodes (OK), or only its DOWN or DRAINED ones (NOT_AVAIL)
            info = self.parts[name]
            if submit_check.node_counts_conflict(most, least, info.part, job_qos):
                return None
            return submit_check.select_answer(job.wl, info, nodes, self._fit_empty)
        got = self._pending_text[job.id] = part_submit.pending_text(
            names, {n: self.parts[n].tier for n in names}, self.s.enforce_part_limits, could_run, fails.get)
        return got

    def part_qos(self, job) -> str | None:
        """The QOS of the partition a running or suspended job runs in (slurm.conf's QOS=), or None."""
        part = self.cfg.partitions.get(self.part_of(job) or "")
        return part.qos if part is not None else None

    def shares_cpus(self, job, part: str | None) -> bool:
        """Whether ``job`` in ``part`` holds CPUs others may hold too without gang: any job of an
        OverSubscribe=FORCE partition, a job asking ``--oversubscribe`` in a YES one (a job that
        did not ask has its CPUs to itself, as any unshared job)."""
        return self.cpu_share_of(job.wl, part) > 1

    def cpu_share_of(self, wl, part: str | None) -> int:
        """``Start.cpu_share`` for workload ``wl`` running in ``part``: how many jobs may hold
        its CPUs (1: they are its own). Also for a job started outside the policy's decisions
        (a replay's adopted start, a live daemon re-adopting its jobs after a restart)."""
        if part in self.cpu_share_parts and (part not in self.yes_parts or wl.oversubscribe):
            return self.share[part]
        return 1

    def gang_cpu(self, placement) -> dict[int, int]:
        """CPUs (millicores) per node that gang counts for ``placement``: whole nodes with
        select/linear, else what the pods hold."""
        out: dict[int, int] = {}
        total = self._nodes.cpu_total
        for node, _mask, c, _mem in placement:
            out[node] = total[node] if self.linear else out.get(node, 0) + c
        return out

    def req(self, job):
        r = self._req.get(job.id)
        if r is None:
            r = self.request_of(job.wl)
            if "billing" in self.s.tres_weights:
                r.submit_tres = {**r.req_tres, "billing": self.req_billing(r)}
            self._req[job.id] = r
        return r

    def request_of(self, wl):
        """``job_req`` of ``wl`` under this cluster's accounting and TRES settings (``req`` keeps
        one per job; submit checks and the walk's node cap ask for workloads without a job)."""
        s = self.s
        return job_req(wl, self.default_part, self.acct, self.qos, s.typed_gpu_tres, s.gpu_tracked,
                       s.untyped_gpu_as, s.qos_enforced)

    def req_billing(self, req) -> int:
        """The billing slurmctld records in a job's ReqTRES at submit: its request weighted by
        the TRESBillingWeights of the first partition it names (the default one where it names
        none; its CPUs without weights), cut to a whole number, and left so when the job starts
        elsewhere (only a reconfiguration or an update recomputes it); what sacct's ReqTRES
        shows and PriorityWeightTRES=billing reads of a pending job."""
        info = self.parts.get(req.parts[0]) if req.parts else None
        weights = info.billing_weights if info is not None else {}
        return int(tres_billing(req.req_tres, weights, "MAX_TRES" in self.s.flags))

    def account_chain(self, account: str) -> tuple[str, ...]:
        chain = self._chains.get(account)
        if chain is None:
            chain = self._chains[account] = account_chain(self.acct, account)
        return chain

    def limits_applying(self, req, info) -> tuple | None:
        """(``qos_order``'s pair, ``assoc_limits``) that ``limits.check`` reads for ``req``'s
        QOS, user and account in partition ``info`` (whose own QOS counts too), or None when
        neither QOS nor any of those associations sets a limit (most jobs, whose check then
        always passes). Memoised per (QOS, partition QOS, user, account): the queue's every
        record is checked at every pass and backfill cycle, and finding the user's association
        scans them all."""
        key = (req.qos, info.part.qos, req.user, req.account)
        got = self._limits_applying.get(key, _NO_ENTRY)
        if got is _NO_ENTRY:
            pair = limits.qos_order(self.qos.get(req.qos or ""), self.qos.get(info.part.qos or ""))
            assocs = self.assoc_limits(req)
            limited = any(qos is not None and bool(
                qos.max_tres_per_job or qos.max_wall is not None or qos.max_jobs_per_user is not None
                or qos.max_tres_per_user or qos.grp_tres or qos.grp_jobs is not None
                or qos.max_jobs_per_account is not None or qos.max_tres_per_account or qos.min_tres_per_job)
                for qos in pair)
            for kind, assoc in assocs:
                limited = limited or bool(assoc.grp_jobs is not None or assoc.grp_tres or (kind == "a" and (
                    assoc.max_tres_per_job or assoc.max_wall is not None or assoc.max_jobs is not None)))
            got = self._limits_applying[key] = (pair, assocs) if limited else None
        return got

    def limit_req(self, job, info, req, gpus_as_asked: bool = False):
        """``req`` as the limits read it in partition ``info``: an exclusive job counts the
        whole nodes it holds, CPUs, memory and GPUs, as placed on the partition's empty nodes
        (a real 22.05.8 under QOS MaxTRESPerJob=cpu=4 left ``--exclusive -c2`` pending with
        QOSMaxCpuPerJobLimit on 16-core nodes and ran ``-c2 --gres=gpu:1``: slurmctld tests
        the limits again on the selected nodes' resources). ``gpus_as_asked``: its GPUs as
        asked, as backfill counts them before a reservation (finding 53). Not modelled: in a
        partition of nodes of several sizes, the nodes the job then gets may differ from those."""
        if not any(ps.exclusive for ps in job.wl.pod_sets):
            return self._whole_cores_req(job, info, req)
        if gpus_as_asked:
            whole = self.limit_req(job, info, req)
            if whole is req:
                return whole
            tres = dict(whole.tres)
            for t in tres:  # every GPU count as asked (typed ones too: 0 where none was asked)
                if t.startswith("gres/gpu"):
                    tres[t] = req.tres.get(t, 0)
            # memory asked per GPU counts for the GPUs asked (job_get_tres_mem without the job's
            # resources, which will-run has freed); per CPU or per node it stays the whole nodes'
            # (``--mem-per-gpu`` only: DefMemPerGPU is not read there, the whole nodes' memory stays)
            gpu_mem = [ps.memory_unit[1] * (ps.gpus_per_job or ps.total_gpus) for ps in job.wl.pod_sets
                       if ps.memory_unit is not None and ps.memory_unit[0] == "gpu" and ps.memory_per == "gpu"]
            if gpu_mem:
                tres["mem"] = sum(gpu_mem)
            return replace(whole, tres=tres)
        pl = self.idle_placement(job, info)
        if pl is None:
            return req  # no placement now: the job cannot start, whatever its limits
        return replace(req, tres={**req.tres, **self.alloc_tres(pl)})

    def _whole_cores_req(self, job, info, req):
        """``req`` with the CPUs its selection holds where they are more: whole cores on nodes
        of several threads per core (``select.whole_cores``), as placed on the partition's empty
        nodes, with memory per CPU following them. slurmctld tests the TRES limits on the
        selection's ``total_cpus`` (``select_nodes``, and backfill before a reservation with
        will-run's), so the rounding counts wherever the job would start: a real 22.05.8
        (probe p106, GrpTRES=cpu=3, two threads per core) kept ``-n3``, ``-c3``, ``-n3
        --gres=gpu:1`` and ``-N1 -n3 --gres=gpu:1`` pending with AssocGrpCpuLimit on idle nodes
        and ran ``-n2`` and ``-c2``, while their ReqTRES showed the CPUs asked. Only where a limit
        that applies reads CPUs (or memory, for memory per CPU); a walked job's selection is
        tested when it is made (``Cycle.placed_limit``)."""
        nodes = self._nodes
        if nodes is None or not nodes.stepped or not self._cpu_limited(req, info):
            return req
        pods = job.wl.pod_sets
        if any(ps.walked for ps in pods):
            return req
        pl = self.idle_placement(job, info)
        if pl is None:
            return req
        held = self.alloc_tres(pl)
        if held["cpu"] <= req.tres.get("cpu", 0):
            return req
        tres = {**req.tres, "cpu": held["cpu"]}
        if "mem" in tres and any(_memory_follows_cpus(ps) for ps in pods):
            tres["mem"] = max(tres["mem"], held["mem"])
        return replace(req, tres=tres)

    def _cpu_limited(self, req, info) -> bool:
        """Whether a QOS or association limit that applies to ``req`` in partition ``info``
        reads CPUs or memory (memoised with ``limits_applying``)."""
        key = (req.qos, info.part.qos, req.user, req.account)
        got = self._cpu_limits.get(key)
        if got is None:
            applies = self.limits_applying(req, info)
            got = False
            if applies is not None:
                tables = [t for qos in applies[0] if qos is not None
                          for t in (qos.max_tres_per_job, qos.max_tres_per_user, qos.grp_tres,
                                    qos.max_tres_per_account, qos.min_tres_per_job)]
                tables += [t for _kind, assoc in applies[1] for t in (assoc.grp_tres, assoc.max_tres_per_job)]
                got = any(k in ("cpu", "mem") for t in tables for k in t)
            self._cpu_limits[key] = got
        return got

    def idle_placement(self, job, info):
        """``job``'s placement on partition ``info``'s nodes with nothing running (those up and
        not draining), or None: what slurmctld's selections on an idle cluster find, an
        exclusive job's whole nodes for its limits (``limit_req``) and a failed selection's
        test-only pass (``idle_gpus``). Memoised per job, partition and node states."""
        nodes = self._nodes
        # which nodes ``place`` may take (up, not draining) is part of the answer
        key = (job.id, info.name, tuple(nodes.up), tuple(nodes.drain))
        got = self._idle_place.get(key, _NOT_PLACED)
        if got is _NOT_PLACED:
            if len(self._idle_place) > 50_000:  # a bound on memory, not on speed
                self._idle_place.clear()
            got = self._idle_place[key] = place(job.wl, info.nodes, empty_state(nodes, info))
        return got

    def idle_gpus(self, job, info, per_job) -> int:
        """The GPUs a failed selection leaves counted for ``job``'s pod sets ``per_job`` (GPUs
        asked per job) in partition ``info``: those of the nodes a selection on an idle cluster
        picks (slurmctld's test-only pass in ``_pick_best_nodes``, whose ``_eval_nodes`` sums
        each node's GPUs of the type asked, no more than its memory pays for at memory per GPU,
        into the job's ``total_gres``; 22.05.8 source, read by a reviewer), and with
        ``--cpus-per-gpu`` no more than the job's X. Not modelled: that cap
        for DefCpuPerGPU, and the second test-only pass over DOWN and DRAINED nodes too when the
        first finds nothing (0 here)."""
        pl = self.idle_placement(job, info)
        if pl is None:
            return 0
        nodes = self._nodes
        ps = per_job[0]
        got = 0
        for i in {p[0] for p in pl}:
            if ps.gpu_type:
                typed = nodes.typed_mask(i, ps.gpu_type)
                n = 0 if typed is None else typed.bit_count()
            else:
                n = nodes.gpu_total[i]
            if ps.mem_per_gpu:
                n = min(n, nodes.mem_total[i] // ps.mem_per_gpu)
            got += n
        if ps.cpus_per_gpu_cap and ps.cpus_per_task is None:
            # --cpus-per-gpu: a node counts no more GPUs than the CPUs it gives the job pay for,
            # and those are the job's CPUs not given to earlier nodes (``gres_sched_add`` after
            # ``_cpus_to_use``), so no more than the job's X in all (diff-slurm --mix gpus-cpg
            # seed 1: ``-N2 --gpus=13 --cpus-per-gpu=16`` of an account with GrpTRES=gres/gpu=16
            # and one GPU in use held the partition back as short of resources, not by the
            # limit). Not modelled: ``_cpus_to_use``'s floor (pn_min_cpus, min_gres_cpu), by
            # which slurmctld may count more
            got = min(got, ps.gpus_per_job)
        return got

    def assoc_limits(self, req) -> list:
        """``limits.association_limits`` of ``req``'s user and account."""
        return limits.association_limits(self.acct, req.user, req.account, self.account_chain(req.account))

    def alloc_of(self, job) -> dict[str, int]:
        """``alloc_tres`` of a running job's placement, memoised per job and placement."""
        c = self._alloc.get(job.id)
        pl = job.placement
        if c is None or c[0] is not pl:
            c = (pl, self.alloc_tres(pl))
            self._alloc[job.id] = c
        return c[1]

    def alloc_tres(self, placement) -> dict[str, int]:
        """The TRES a placement holds (``tres.alloc_counts``: per tracked GPU type too)."""
        return alloc_counts(placement, self._typed_keys, self.s.gpu_tracked)

    def billing(self, job, placement) -> float:
        alloc = self.alloc_tres(placement)
        info = self.parts.get(self.run_part.get(job.id, ""))
        weights = info.billing_weights if info is not None else {}
        return tres_billing(alloc, weights, "MAX_TRES" in self.s.flags)

    # ------------------------------------------------------------ time limits
    def time_limit(self, job, info) -> float | None:
        """The job's limit in this partition: --time, else the DefaultTime of the first
        partition it names, else (limits enforced) the MaxWall of that partition's QOS or the
        job's, else its association's (own or inherited), else this partition's MaxTime (None =
        UNLIMITED). slurmctld gives a job without --time that DefaultTime before it validates
        limits, and a job still without one the first MaxWall it meets there
        (``acct_policy.c``'s ``_set_time_limit``); the limit is the job's, whatever partition
        it then runs in."""
        tl = job.wl.time_limit
        if tl is None:
            # one limit for the job, from the first partition it names (``_valid_job_part`` sets
            # its DefaultTime, else ``acct_policy_validate`` the first MaxWall of that
            # partition's QOS pair); without either, the partition it runs in gives its MaxTime
            parts = self.req(job).parts
            first = self.parts.get(parts[0], info) if parts else info
            if first.part.default_time is not None:
                tl = first.part.default_time
            else:
                tl = self._limit_wall(job, first, None) if self.s.limits_enforced else None
                if tl is None:
                    tl = info.max_time
        elif tl == math.inf:  # --time=UNLIMITED (or 0)
            return None
        if tl is not None:
            tl = math.ceil(tl / 60) * 60  # minutes, seconds rounded up
        return tl

    def held_limit(self, job, info) -> float | None:
        """``time_limit`` as the QOS and association MaxWall limits test it: ``--time=UNLIMITED``
        (or 0) is stored as INFINITE, over any MaxWall (``_qos_job_runnable_pre_select``), so
        such a job waits with QOSMaxWallDurationPerJobLimit where one is set."""
        return math.inf if job.wl.time_limit == math.inf else self.time_limit(job, info)

    def _limit_wall(self, job, info, otherwise: float | None) -> float | None:
        """The MaxWall of the first of ``job``'s QOS in partition ``info`` that sets one
        (``qos_order``: a real 22.05.8 gave a job without ``--time`` its partition QOS's
        MaxWall=30 as its limit), else its user association's (own or inherited), else
        ``otherwise``."""
        got = self.limits_applying(self.req(job), info)  # (memoised; None: no limit at all)
        if got is None:
            return otherwise
        wall = limits.limit_wall(*got)
        return otherwise if wall is None else wall

    def effective_limit(self, job, info) -> float | None:
        """The limit slurmctld enforces on a job started in ``info``: --time, else DefaultTime,
        capped by the partition's MaxTime and (with limits enforced) the MaxWall of the first of its
        QOS that sets one (``qos_order``); None = UNLIMITED."""
        tl = self.time_limit(job, info)
        if info.max_time is not None and not self.over_part_time(job):
            tl = info.max_time if tl is None else min(tl, info.max_time)
        if self.s.limits_enforced:
            got = self.limits_applying(self.req(job), info)
            wall = limits.qos_wall(got[0]) if got is not None else None
            if wall is not None:
                tl = wall if tl is None else min(tl, wall)
        return None if tl is None else float(tl)

    def plan_limit(self, job, info) -> float:
        tl = self.time_limit(job, info)
        if info.max_time is not None and not self.over_part_time(job):
            tl = info.max_time if tl is None else min(tl, info.max_time)
        return float(ONE_YEAR if tl is None else tl)

    def over_part_time(self, job) -> bool:
        """Whether ``job``'s QOS has the flag PartitionTimeLimit: its own limit may then exceed
        the partition's MaxTime, and it keeps it when it starts (a real 22.05.8 ran ``-t 120``
        in a partition of MaxTime=60 with TimeLimit 2:00:00)."""
        return limits.has_flag(self.qos.get(self.req(job).qos or ""), "partitiontimelimit")

    def _job_plan_limit(self, job) -> float:
        short = self.short_limit.get(job.id)
        if short is not None:
            return short
        info = self.parts.get(self.run_part.get(job.id, ""))
        if info is None:
            r = self.req(job)
            info = self.parts.get(r.parts[0]) if r.parts and r.parts[0] in self.parts else None
        return self.plan_limit(job, info) if info is not None else float(job.wl.time_limit or ONE_YEAR)

    def counted_start(self, job) -> float | None:
        """The start slurmctld counts a running job from: a replay's reported start_time where
        this policy holds one (``set_reported_start``), else the engine's start. (``expected_end``,
        on the backfill's hot path, reads it inline.)"""
        return self.reported_start.get(job.id, job.start) if self.reported_start else job.start

    def limit_end(self, job, now: float) -> float:
        """Start + planning limit (may lie in the past for a job over its limit), with the start
        in whole epoch seconds as slurmctld keeps it (``end_time`` is an integer time_t)."""
        self.expected_end(job, now)  # fills the memo
        start = self.counted_start(job)
        end = self.whole_second(now if start is None else start) + self._tl[job.id][1]
        x = job._x
        if x is not None and x.suspensions and start is not None:
            end += _suspended_by(x, now)  # a suspension moves end_time on (spec §10)
        return end

    def licenses_free(self, active: dict) -> dict[str, int]:
        """The licenses free with ``active`` (running and suspended) jobs holding theirs:
        slurmctld keeps a suspended job's licenses allocated."""
        free = dict(self.license_total)
        for job in active.values():
            for name, count in job.wl.licenses:
                free[name] = free.get(name, 0) - count
        return free

    def over_time_limit_of(self, job) -> float:
        """The seconds ``job`` may run past its limit: its partition's OverTimeLimit, else the
        cluster's (the executors read this for each job they end)."""
        # (a job adopted before the first scheduling call, from a live daemon's restart, names
        # its partition in ``job.partition`` only)
        run_part = getattr(self, "run_part", None)
        name = (run_part.get(job.id) if run_part is not None else None) or job.partition
        own = self._part_otl.get(name) if name else None
        if own is None and name in self.cfg.partitions and name not in self._part_otl:
            own = self._part_otl[name] = partition_over_time_limit(self.cfg.partitions[name])
        return self.s.over_time_limit if own is None else own

    def whole_second(self, t: float) -> float:
        """``t`` truncated to a whole epoch second (``epoch`` is the epoch of t=0)."""
        ep = self.epoch
        return math.floor(t + ep) - ep

    def start_stamp(self, jid: int, now: float) -> float | None:
        """The start_time a replayed slurmctld gave job ``jid`` when this policy starts it at
        ``now`` in the same pass: the whole second after the one ``now`` lies in, where real
        Slurm allocated the job's nodes within a second after ``now``, after that second began
        and before any later pass of the replay's began (its pass took that long to reach the
        job: rich seed 31, job 54, a main pass began 16 ms before the second its allocation was
        stamped with; docs/differential.md, finding 79). None: the job's start counts from
        ``now``'s own second, as without a replay."""
        got = self.start_stamps.get(jid) if self.start_stamps else None
        if got is None:
            return None
        alloc, stamp = got
        if not (now <= alloc < now + 1.0 and abs(stamp - (self.whole_second(now) + 1.0)) < 1e-6):
            return None
        for at in self._pass_instants:
            # a pass of the replayed slurmctld that began after ``now``, by ``alloc``, may be
            # the one that started the job
            k = bisect.bisect_right(at, now)
            if k < len(at) and at[k] <= alloc:
                return None
        return stamp

    def expected_end(self, job, now: float) -> float:
        # the plan limit depends only on the job and the partition it runs in: memoised per job
        jid = job.id
        part = self.run_part.get(jid)
        c = self._tl.get(jid)
        if c is None or c[0] != part:
            c = (part, self._job_plan_limit(job))
            self._tl[jid] = c
        tl = c[1]
        start = self.reported_start.get(jid, job.start) if self.reported_start else job.start
        x = job._x
        if x is not None and x.suspensions and start is not None:
            start += _suspended_by(x, now)
        end = (now if start is None else start) + tl
        if end >= now:
            return end
        if end < now:  # overran its limit: Slurm adds KillWait + OverTimeLimit
            otl = self.over_time_limit_of(job)
            end = now + tl if otl == math.inf else max(now, end + self.s.kill_wait + otl)
        return end

    # ------------------------------------------------------------ starts decided elsewhere
    def adopt_start(self, job, placement, started: float) -> Start:
        """The ``Start`` for a pending job placed by a decision this policy did not make.

        Why: a replay that follows a real slurmctld (``conformance.diff_slurm_lockstep``)
        applies real Slurm's start when gpupool's own differs, so the next decision is taken
        from the same state. The policy keeps what its own starts keep: the partition (the
        first of the job's partitions holding every node of the placement), the time limit,
        and the fair-share usage segment, all counted from ``started`` (when real Slurm's
        deciding pass began, up to a second before the engine's start).
        """
        nodes = {p[0] for p in placement}
        info = self.adopt_partition(job, nodes)
        if info is None:
            names = [self._nodes.names[i] for i in sorted(nodes)]
            raise ValueError(f"job {job.id}: no partition of {list(self.req(job).parts)} holds nodes {names}")
        self.run_part[job.id] = info.name
        self.run_limit[job.id] = self.time_limit(job, info)
        self.reported_start[job.id] = started
        self.track_start(job, placement, started)
        return Start(job.id, placement, partial=len(placement) < job.pods_total, via="adopted",
                     time_limit=self.effective_limit(job, info),
                     partition=info.name, cpu_share=self.cpu_share_of(job.wl, info.name))

    def adopt_partition(self, job, nodes: set[int]):
        """The partition ``adopt_start`` runs ``job`` in on ``nodes``: the first of its
        partitions holding every one of them (None: none does)."""
        parts = self.parts
        return next((parts[n] for n in self.req(job).parts if n in parts and nodes <= parts[n].node_set), None)

    def set_reported_start(self, jid: int, started: float) -> None:
        """Count a job this policy started from ``started`` instead of its own instant: a
        replay's real start_time, a second earlier or later than the instant of the pass."""
        self.reported_start[jid] = started
        seg = self._segs.get(jid)
        if seg is not None:
            self._segs[jid] = (usage_clock(started, self.epoch),) + tuple(seg[1:])

    def retract_start(self, jid: int) -> None:
        """Forget a start this policy decided that was not carried out (the job stays pending)."""
        self._segs.pop(jid, None)
        self.run_part.pop(jid, None)
        self.run_limit.pop(jid, None)
        self.reported_start.pop(jid, None)

    # ------------------------------------------------------------ submit-time checks
    def resolve_request(self, wl, *, recovered: bool = False):
        """The request slurmctld stores for ``wl`` at submit: the CPUs and memory it left to
        slurm.conf filled in from the defaults of the first partition it names, else the
        default partition (``job_defaults``). The engine calls this once per submission.

        First the partitions it lands in: one that takes no submissions (DRAIN, INACTIVE)
        gives way to its Alternate or is dropped from a list, and a job left with none is
        refused (``part_submit``). Not for a job a restarted daemon takes back
        (``recovered``, its partitions as it landed in them): slurmctld keeps a job's
        partitions across a restart whatever their state is now.

        Before them, a ``--contiguous`` job's nodelist has its gaps filled, or the job is
        refused for a node count that cannot hold them (``contiguous_list``: ``_job_create``
        does it before it looks up the partitions). A recovered job was accepted: it is never
        refused again (slurmctld rebuilds its nodes from the stored list; found by a review)."""
        filled, why = contiguous_list.fill_gaps(wl, self._node_order, self._node_position)
        if why is not None and not recovered:
            self._submit_refusal[wl.id] = why
            return wl
        wl = filled
        if not recovered:
            landed, refused = part_submit.submit_partitions(wl.partition, self.cfg.partitions, self.default_part)
            if refused is not None:
                self._submit_refusal[wl.id] = refused
                return wl
            if landed != wl.partition:
                # a list the rules shrink to one partition keeps slurmctld's list path
                # (``submit_select.select_loop``)
                self._listed[wl.id] = "," in (wl.partition or "")
                wl = replace(wl, partition=landed)
        asked = submit_check.asked_node_memory(wl)
        if asked:
            self._asked_memory[wl.id] = asked  # (the submit check's node filter reads it)
        filled, why = job_defaults.resolve(self.cfg, self._node_memory, wl, self._job_defaults, self._typed_nodes)
        if why is not None:
            self._submit_refusal[wl.id] = why  # refused at submit (submit_verdict)
        return self._node_cap(filled)

    def _node_cap(self, wl):
        """``wl`` with its node counts capped by the QOS and association node limits where a
        pod set takes a node count select chooses (``_walk_node_cap``), else as it is (and as
        it is where limits are not enforced)."""
        if self.s.limits_enforced and any(_capped_by_node_limits(ps, wl) or _spread_task_pods(ps)
                                          for ps in wl.pod_sets):
            return self._walk_node_cap(wl)
        return wl

    def _walk_node_cap(self, wl):
        """A walked job (``gpu_walk``) or a node range takes no more nodes than the node limits
        of its QOS and associations allow: slurmctld caps the nodes it selects by their values,
        not by what is left of them (``acct_policy_get_max_nodes`` in ``get_node_cnts``, 22.05
        source; ``limits.max_nodes``).
        The cap is read per partition the job lists (each with its own QOS) and the largest
        kept: a job listing several partitions is accepted where one of them takes it (the
        cap then holds in every partition, where slurmctld applies each partition's own). A
        cap below one node leaves the job as it is: the limits test holds it
        (QOSMaxNodePerJobLimit and kin) rather than refusing it."""
        req = self.request_of(wl)
        assocs = limits.association_limits(self.acct, req.user, req.account, account_chain(self.acct, req.account))
        caps = []
        for name in req.parts or (None,):
            part = self.cfg.partitions.get(name) if name is not None else None
            pair = limits.qos_order(self.qos.get(req.qos or ""), self.qos.get(part.qos or "") if part is not None else None)
            caps.append(limits.max_nodes(pair, assocs))
        if any(c is None for c in caps):
            return wl
        cap = max(caps)
        if cap < 1:
            return wl
        # A range keeps its largest count as submitted, which MaxNodes and MinNodes read; a cap
        # below the least count a MinNodes partition raises it to is left to the limits test
        # (``get_node_cnts``: acct_max_nodes below min_nodes holds the job)
        # --ntasks-per-node's pods test the cap against the least count stored, not select's
        # ⌈T/K⌉; pods the cap leaves short of the tasks are refused at submit
        # (``submit_check._tasks_left_over``, as ``-N1-3 -n40`` was under node=2, probe p147)
        floor = partitions_min_nodes(self.cfg, wl)

        def capped(ps):
            if _capped_by_node_limits(ps, wl) and ps.count > cap >= raised_least(_stored_least(ps), ps.count, floor):
                # (a walk keeps its least: None there means one node)
                least = None if not ps.walked and ps.min_count is not None and ps.min_count >= cap else ps.min_count
                return replace(ps, count=cap, nodes_asked=0 if ps.walked else ps.count, min_count=least)
            if _spread_task_pods(ps) and ps.count > cap:
                # task pods keep their tasks and take no more nodes than the cap (probe p176)
                return replace(ps, task_node_cap=cap)
            return ps

        return replace(wl, pod_sets=tuple(capped(ps) for ps in wl.pod_sets))

    def submit_verdict(self, job, snap=None) -> str | None:
        """Slurm's message if ``job`` is refused at submit, else None; decided once, from the
        snapshot ``snap`` of its submission (the queue's first look at it), which the submit
        limits (MaxSubmitJobs) count jobs in."""
        if job.id in self._verdict:
            return self._verdict[job.id]
        why = self._verdict_of(job)
        if why is None and snap is not None and self._submit_limited:
            why = self._submit_limit(job, snap)
        self._verdict[job.id] = why
        return why

    def _submit_limit(self, job, snap) -> str | None:
        """MSG_SUBMIT_LIMIT if ``job`` would take its user past a MaxSubmitJobs
        (``_over_submit_limit``), counting the jobs of the snapshot ``snap`` submitted before
        it that are still pending or running and were not refused; a job array counts all its
        tasks. With limits enforced only."""
        if not self.s.limits_enforced:
            return None
        wl = job.wl
        order = (wl.submit_time, job.id)
        array = wl.array_job_id
        tasks = 1
        earlier = []
        for other in (*snap.active.values(), *snap.pending.values()):
            if other.id == job.id:
                continue
            if array is not None and other.wl.array_job_id == array:
                tasks += 1
                continue
            if (other.wl.submit_time, other.id) > order or self._verdict.get(other.id) is not None:
                continue  # submitted after it (arrivals go by time, then id), or refused
            earlier.append(self.req(other))
        return limits.MSG_SUBMIT_LIMIT if self._over_submit_limit(self.req(job), earlier, tasks) else None

    def _over_submit_limit(self, req, others, tasks: int) -> bool:
        """Whether ``tasks`` more jobs of ``req`` break a submit limit, beside the pending and
        running jobs whose requests are ``others`` (``acct_policy_validate``): the QOS's
        GrpSubmitJobs (all its jobs), MaxSubmitJobsPA (its jobs of the account) and
        MaxSubmitJobsPU (of the user), the user association's MaxSubmitJobs, own or inherited
        (the user's jobs in that account; not read where the QOS sets MaxSubmitJobsPU or PA),
        and each association's GrpSubmitJobs up the tree (all jobs under it; not read where the
        QOS sets GrpSubmitJobs). A real 22.05.8 under MaxSubmitJobs=3 refused a fourth job, a
        four-task array beside one running job and took a two-task one, and took a job again
        once earlier ones had ended."""
        qos = self.qos.get(req.qos or "")
        q_grp = qos.grp_submit_jobs if qos is not None else None
        q_pa = qos.max_submit_jobs_per_account if qos is not None else None
        q_pu = qos.max_submit_jobs_per_user if qos is not None else None
        assocs = self.assoc_limits(req)
        own = assocs[0][1] if assocs and assocs[0][0] == "a" else None
        assoc_cap = own.max_submit_jobs if own is not None and q_pa is None and q_pu is None else None
        levels = [] if q_grp is not None else [(kind, a) for kind, a in assocs if a.grp_submit_jobs is not None]
        if q_grp is None and q_pa is None and q_pu is None and assoc_cap is None and not levels:
            return False
        in_q = in_q_acct = in_q_user = in_assoc = 0
        under = [0] * len(levels)
        for r in others:
            mine = r.user == req.user and r.account == req.account
            if r.qos == req.qos:
                in_q += 1
                in_q_acct += r.account == req.account
                in_q_user += r.user == req.user
            in_assoc += mine
            if levels:
                chain = self.account_chain(r.account)
                for i, (kind, a) in enumerate(levels):
                    under[i] += mine if kind == "a" else a.account in chain
        caps = [(q_grp, in_q), (q_pa, in_q_acct), (q_pu, in_q_user), (assoc_cap, in_assoc)]
        caps += [(a.grp_submit_jobs, n) for (_kind, a), n in zip(levels, under)]
        return any(cap is not None and n + tasks > cap for cap, n in caps)

    def submit_rejection(self, wl, user: str | None = None, current=(), tasks: int = 1) -> str | None:
        """Slurm's message if ``user`` submitting ``wl`` is refused at submit (no job id), else
        None: what a live daemon asks before accepting a script (``submit_check``). For
        MaxSubmitJobs, ``current`` holds the workloads of its pending and running jobs (and of
        those accepted with ``wl``), and ``wl`` is one of ``tasks`` tasks of one submission,
        which all count."""
        why = submit_check.submit_rejection(self.pool, wl, user, self._node_cap)
        if why is None and self._submit_limited and self.s.limits_enforced:
            req = self.request_of(wl if user is None else replace(wl, user=user))
            if self._over_submit_limit(req, [self.request_of(w) for w in current], tasks):
                why = limits.MSG_SUBMIT_LIMIT
        return why

    def _verdict_of(self, job) -> str | None:
        refused = self._submit_refusal.get(job.id)
        if refused in job_defaults.OWN_REFUSALS:
            return refused  # gpupool's: slurmctld's checks would read a shape it does not give
        if refused in part_submit.REFUSALS or refused == contiguous_list.REFUSAL:
            # no partition took the job (``_get_job_parts``), or a ``--contiguous`` list's
            # filled run broke its node count (``_job_create``, before any partition or limit
            # test): only MaxArraySize comes first (``validate_job_create_req``)
            return submit_check.array_refusal(job.wl, self.cfg) or refused
        unavailable: list[str] = []
        why = submit_check.rejection(self.req(job), job.wl, self.parts, self._nodes, self.cfg, self.s,
                                     self._fit_empty, lambda info: self.time_limit(job, info),
                                     self._listed.get(job.id), unavailable, self._asked_memory.pop(job.id, 0))
        if unavailable:
            self.unavailable_at_submit[job.id] = unavailable[0]
        return why if why is not None else refused

    # ------------------------------------------------------------ priority
    def priority(self, job, info, accrue: float, now: float) -> int:
        wl = job.wl
        if wl.priority is not None:
            return int(wl.priority)
        s = self.s
        if not s.multifactor:
            return priority.basic_priority(job.id, wl.nice)
        T = math.floor(now / s.calc_period) * s.calc_period
        if T != self._prio_T:
            self._prio_T = T
            self._prio = {}
        key = (job.id, info.name, job.submit, accrue)
        p = self._prio.get(key)
        if p is None:
            p = self._multifactor(job, info, accrue, max(T, job.submit))
            self._prio[key] = p
        return p

    def priority_memo(self, now: float) -> dict | None:
        """The multifactor priorities memoised for ``now``'s PriorityCalcPeriod, keyed as in
        ``priority`` (None without priority/multifactor): the queue reads it directly."""
        s = self.s
        if not s.multifactor:
            return None
        T = math.floor(now / s.calc_period) * s.calc_period
        if T != self._prio_T:
            self._prio_T = T
            self._prio = {}
        return self._prio

    def factors(self, job, info, accrue: float, t: float, fs: float | None = None) -> dict:
        s = self.s
        req = self.req(job)
        if fs is None:
            fs = self._fs.get(f"{req.account}/{req.user}", 0.0) if self.use_fs else 0.0
        q = self.qos.get(req.qos or "")
        relative = None
        if s.size_relative:  # the job's limit in minutes, set at submit from its first partition
            first = self.parts.get(req.parts[0]) if req.parts else None
            limit = self.time_limit(job, first) if first is not None else job.wl.time_limit
            relative = INFINITE_MINUTES if limit is None else limit / 60
        return priority.factors(
            age_s=t - accrue, max_age=s.max_age, fs=fs, nodes=req.nodes, cpus=req.req_tres["cpu"],
            nodes_total=self.nodes_total, cpus_total=self.cpus_total, favor_small=s.favor_small,
            part_factor=info.job_factor, max_part_factor=self.max_part_factor,
            qos_priority=q.priority if q is not None else 0, max_qos_priority=self.max_qos_prio,
            tres_req=req.req_tres, tres_total=info.tres_total, tres_weights=s.tres_weights,
            assoc_priority=self.assoc_priority(req.assoc), max_assoc_priority=self.max_assoc_prio,
            raw=s.raw_factors, relative_limit_min=relative)

    def assoc_priority(self, assoc: tuple[str, str]) -> int:
        """The sacctmgr Priority of the (account, user) association: its own, else the nearest
        account above it that sets one (slurmdbd fills an unset one in from the parent), else 0."""
        got = self._assoc_prio.get(assoc)
        if got is None:
            got = 0
            acct = self.acct
            if acct is not None:
                own = next((ua.priority for ua in acct.user_associations
                            if ua.account == assoc[0] and ua.user == assoc[1] and ua.priority is not None), None)
                if own is None:
                    own = next((acct.accounts[a].priority for a in self.account_chain(assoc[0])
                                if acct.accounts[a].priority is not None), None)
                got = own or 0
            self._assoc_prio[assoc] = got
        return got

    def _multifactor(self, job, info, accrue: float, t: float) -> int:
        f = self.factors(job, info, accrue, t)
        return priority.combine(f, self.s.weights, self.s.tres_weights, job.wl.nice)

    # ------------------------------------------------------------ usage and fair share
    def open_usage_segments(self) -> dict:
        """Job id -> (start, (account, user), billing × UsageFactor): the fair-share usage
        segments this policy has open, to be read, not changed. A live daemon follows them to
        save the usage across a restart (``gpupool/live/fairshare.py``)."""
        return self._segs

    def track_start(self, job, placement, now: float) -> None:
        """Open the job's fair-share usage segment at its start_time, which slurmctld takes in
        whole epoch seconds (``decay.usage_clock``; docs/differential.md, finding 24)."""
        if self.use_fs:
            req = self.req(job)
            q = self.qos.get(req.qos or "")
            w = self.billing(job, placement) * (q.usage_factor if q is not None else 1.0)
            self._segs[job.id] = (usage_clock(now, self.epoch), req.assoc, w)

    def _update_usage(self, snap: Snapshot) -> None:
        active = snap.active
        segs = self._segs
        if not segs.keys() <= active.keys():
            # A job leaves the running table when it ends (or is requeued: it is pending at
            # the instant it stops), so only jobs missing from it close their usage segment;
            # closed in the order they started, as the ledger sums them.
            ended = segs.keys() - active.keys()
            for jid in ([jid for jid in segs if jid in ended] if len(ended) > 1 else ended):
                start, key, w = segs.pop(jid)
                job = snap.jobs[jid]
                end = job.end if job.final_state is not None and job.end is not None else job.submit
                # slurmctld counts to the job's end_time, a whole epoch second like its start
                # (finding 54: seed 2 of the rich mix, where fractional ends tipped a near tie)
                self.ledger.close(key, start, usage_end(end, self.epoch, self.s.calc_period), w)
        T = math.floor(snap.now / self.s.calc_period) * self.s.calc_period
        if T != self._fs_T:
            self._fs_T = T
            # The decay pass runs now (its folding must follow every pass), the ranking only when
            # a priority needs it (``_fs``): with the running segments and the count of closed
            # ones as they are now, it gives what it would give now.
            self.ledger.pass_at(snap.now)
            self._fs_due = (list(self._segs.values()), len(self.ledger.recent))
            self._fs_val = None
            self._prio_T = None  # priorities depend on fair share

    @property
    def _fs(self) -> dict[str, float]:
        """FairShare by "account/user" as of the last PriorityCalcPeriod pass, ranked on first
        use: a queue whose jobs all carry a fixed priority never needs it."""
        fs = self._fs_val
        if fs is None:
            running, n_closed = self._fs_due
            usage = self.ledger.usage(running, n_closed)
            tree = self._usage_tree
            fs = tree.fair_tree(usage) if self.s.fair_tree else classic(tree.fill(usage), self.s.dampening)
            self._fs_val = fs
            self._fs_due = None
        return fs

    # ------------------------------------------------------------ the decision
    def decide(self, snap: Snapshot) -> list:
        if snap.nodes is not self._nodes:
            self._setup(snap)
        if self.use_fs:
            self._update_usage(snap)
        if self.cores is not None:
            self.cores.forget_inactive(snap.active)
        cy = Cycle(self, snap)
        now = cy.now
        s = self.s
        records = queue.build(cy)
        if self.main_at is not None:
            full = self._main_now(now, cy.out)
            if full is not None:
                queue.apply_build_reasons(cy)
                main_sched.run(cy, records, full)
        elif self._main_now_unlisted(snap, cy):
            queue.apply_build_reasons(cy)
            main_sched.run(cy, records, now % s.sched_interval == 0)
        if s.backfill and self._bf_ran_at != now and self._backfill_now(now, cy.out):
            queue.apply_build_reasons(cy)  # (a cycle skipped below would have built it too)
            # A cycle is skipped when no job, node or partition changed since the last one (a
            # node that left COMPLETING counts), and no fair-share pass reordered the queue (a
            # real 22.05 starts jobs right after one). A replay's listed instants are cycles the
            # real slurmctld did run: none is skipped (the one before may have been cut short).
            sig = (len(snap.pending), len(snap.active), sum(snap.pending), sum(snap.active),
                   tuple(snap.nodes.up), tuple(snap.nodes.drain), len(cy.started), self._fs_T, cy.completing)
            if sig != self._bf_sig or cy.started or self.backfill_at is not None or self.bf_moving:
                backfill.run(cy, self._bf_records(now, records))
                self._bf_ran_at = now
            self._bf_sig = sig
        if self.gang_active:
            self._gang_pass(cy, records)
            self._gang_step(cy)
        out = cy.out
        pending = snap.pending
        for jid, why in cy.reasons.items():
            job = pending.get(jid)
            if job is not None and job.reason != why:
                out.append(Pending(jid, why))
        return out

    def _bf_records(self, now: float, records: list) -> list:
        """The queue records the backfill cycle at ``now`` walks: all of them, or, where a
        replayed real cycle ran out of time (``backfill_cut``), those it reached (per job and
        partition), in this policy's order, the one it stopped at only when it was still tested
        (a job the real cycle reached that is not pending here, gpupool having started it, is
        no record)."""
        cut = self.backfill_cut.get(now) if self.backfill_cut else None
        if cut is None:
            return records
        reached, last, tested = cut
        out = []
        for rec in records:
            key = (rec.job.id, rec.part.name) if (rec.job.id, None) not in reached else (rec.job.id, None)
            if key in reached and (tested or key != last):
                out.append(rec)
        return out

    def _main_now_unlisted(self, snap: Snapshot, cy: Cycle) -> bool:
        """Without ``main_at``: whether a main pass runs now.

        slurmctld 22.05.8 runs its main scheduler from its background loop (about once a second
        at ``sched_interval=1``) and right after the last epilog-complete message of a job
        killed at its time limit; not at a submission, a job end, or the epilog of a job that
        ended by itself (docs/differential.md, finding 21). A replay of a log that lists no
        passes (``main_seen``) runs them on the ticks, where the log shows one, and at those
        releases (``loud_release``). A simulation keeps the spec's idealised model, a pass at
        every event, except a job end alone while its nodes are still COMPLETING and the quiet
        release of such nodes (holds only a replay has)."""
        now = cy.now
        if self.main_seen is not None:
            _wake_at_next(self.main_seen, now, cy.out)
            return snap.trigger == "tick" or now in self._main_seen_set or cy.loud_release
        if cy.completing and snap.changed == CHANGED_ENDED:
            return False
        return not (cy.quiet_release and snap.changed == CHANGED_TICK and snap.trigger != "tick")

    def _main_now(self, now: float, out: list) -> bool | None:
        """With ``main_at``: whether a main pass runs at ``now`` (None: no pass; else whether it
        is a full one), and a ``WakeAt`` for the next listed pass."""
        _wake_at_next(self.main_at, now, out)
        return self._main_full.get(now)

    def _backfill_now(self, now: float, out: list) -> bool:
        """Whether a backfill cycle runs at ``now``; with ``backfill_at``, also ask to be called
        at the next listed instant (``WakeAt``), which no tick would otherwise reach."""
        at = self.backfill_at
        if at is None:
            return now > 0 and now % self.s.bf_interval == 0
        _wake_at_next(at, now, out)
        return now in self._bf_set

    # ------------------------------------------------------------ gang scheduling
    def _gang_pass(self, cy: Cycle, records) -> None:
        """Co-allocation in OverSubscribe=FORCE partitions, in queue order, after the main pass
        and backfill: a job that fits neither idle CPUs nor its main-pass place goes into a row
        of its partition (``Cycle.try_coallocate``); a partition stops at its first job that fits
        nowhere, and, under assoc_limit_stop, at its first job a limit holds (as in the main pass,
        ``main_sched.skipped_as_held`` aside)."""
        failed: set[str] = set()
        stop = self.s.assoc_limit_stop
        for rec in records:
            job = rec.job
            info = rec.part
            if self.share.get(info.name, 1) <= 1 or info.name in failed:
                continue
            if job.id in cy.started or job.id in cy.skip or job.id in cy.preempting:
                continue
            lim = cy.limit_reason(job, info)
            if lim is not None:
                if stop and ((job.id, info.name) in cy.held_back or not main_sched.skipped_as_held(cy, job, lim)):
                    failed.add(info.name)
                continue
            if cy.array_limit(job) is not None or cy.license_limit(job) is not None:
                continue
            # nothing starts on a node still COMPLETING (a replay's holds), as in the main pass
            usable = cy.off_completing(info, None)
            placement = place(job.wl, info.nodes, cy.free, usable)
            if placement is not None:
                over = cy.placed_limit(job, info, placement)
                if over is None:
                    cy.start(job, placement, info, main_sched.VIA_MAIN)
                    continue
            else:
                got = cy.try_coallocate(job, info, usable, main_sched.VIA_MAIN)
                if got is True:
                    continue
                over = got or None  # (False: fits no row)
            if over is not None:  # as in the main pass: the selection's limit holds the job
                cy.reason(job, over, first=True)
                if stop:  # (under assoc_limit_stop, its partition with it)
                    failed.add(info.name)
                continue
            over = cy.failed_select_limit(job, info)  # as in the main pass (finding 58)
            cy.reason(job, over or "Resources", first=True)
            if over is not None and not stop:
                continue
            if cy.may_block(job, rec.prio):
                failed.add(info.name)

    def _gang_step(self, cy: Cycle) -> None:
        """gang.c at this instant (``gang.step``): ends seen since the last call, this pass's
        starts, the time slice at multiples of SchedulerTimeSlice; its changes become
        ``Suspend``/``Resume`` decisions (suspensions first, so CPUs are free before starts and
        resumptions take them) and suspended starts."""
        snap = cy.snap
        now = cy.now
        alive: dict[int, tuple[str, bool]] = {}
        cpu: dict[int, dict[int, int]] = {}
        memo = self._gcpu
        for jid, job in snap.active.items():
            alive[jid] = (self.part_of(job), job.state == SUSPENDED)
            c = memo.get(jid)
            if c is None or c[0] is not job.placement:
                c = memo[jid] = (job.placement, self.gang_cpu(job.placement))
            cpu[jid] = c[1]
        started = []
        for jid, (placement, pname, _via) in cy.started.items():
            cpu[jid] = self.gang_cpu(placement)
            started.append((jid, pname))
        for jid in [j for j in memo if j not in alive]:
            del memo[jid]
        # the slice runs once per SchedulerTimeSlice: in the pass of the periodic tick, not again in
        # extra passes at that instant (after a preemption, a timer)
        tick = snap.trigger == "tick" and now > 0 and now % self.time_slice == 0
        if not alive and not started:
            self.gang_state = gang.GangState()
            return
        res = gang.step(self.gang_state, self.gang_parts, snap.nodes.cpu_total, alive, cpu, started, tick)
        self.gang_state = res.state
        if not res.changed:
            return
        first, last = [], []
        start_suspended = set()
        for jid, suspended in res.changed.items():
            if jid in cy.started:
                if suspended:
                    start_suspended.add(jid)
                continue
            state = snap.active[jid].state
            if suspended and state == RUNNING:
                first.append(Suspend(jid, "gang"))
            elif not suspended and state == SUSPENDED:
                last.append(Resume(jid, "gang"))
        out = cy.out
        if start_suspended:
            out = [Start(d.job_id, d.placement, d.partial, d.via, d.time_limit, d.partition, suspended=True)
                   if type(d) is Start and d.job_id in start_suspended else d for d in out]
        cy.out = first + out + last


@register("slurm", "slurmctld 22.05: priority/multifactor, main scheduler + backfill, cons_tres, preemption")
def _slurm(pool: Pool, options: dict) -> SlurmPolicy:
    return SlurmPolicy(pool, options)
