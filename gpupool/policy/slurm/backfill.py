"""The backfill cycle (spec §2, errata §17.3).

A map of whole-node reservations for pending jobs (``node_space``: slurmctld's slots); running
jobs are seen through the free-resource state and their *time-limit* ends. Each queue record (up
to bf_max_job_test) looks for its earliest start as slurmctld's TRY_LATER loop does: the usable
nodes are the partition's nodes free in every slot over the run window; the "will run" test
frees running jobs in end order until the job fits; it tries again from ``later_start`` (the
first slot that frees a node) when it finds too few nodes, no start, or a start after that. A
job whose estimate is now starts (SchedBackfill); otherwise it gets a reservation of its whole
nodes over ``[floor(start/res)·res, floor((start+TL)/res)·res)`` unless it may only be tested
now (bf_min_prio_reserve, bf_min_age_reserve) or the start lies beyond bf_window.
"""
from __future__ import annotations

import bisect
import math
import weakref

from gpupool.policy.slurm import preempt
from gpupool.policy.slurm.bisection import first_true
from gpupool.policy.slurm.node_space import NodeSpace
from gpupool.policy.slurm.node_space import bits as mask_nodes
from gpupool.policy.slurm.select import Free, eligible_nodes, fits_now, place

VIA_BACKFILL = "SchedBackfill"
#: a bound on TRY_LATER retries for one job (slurmctld has none but its bf_max_time)
MAX_TRIES = 1000


def _first_enough(gpus: list[int], cpu: list[int], mem: list[int], g: int, cm: int, need_mem: int) -> int | None:
    """The first index from which a node's free GPUs, CPUs and memory all suffice, or None.

    Each resource only grows along the running jobs' ends, so that index is the latest of the
    first indices at which each one does (a bisection per list)."""
    if gpus[-1] < g or cpu[-1] < cm or mem[-1] < need_mem:
        return None
    bl = bisect.bisect_left
    return max(bl(gpus, g), bl(cpu, cm), bl(mem, need_mem))


class NodeTimeline:
    """Each node's free resources as running jobs end, indexed per node.

    For node ``n``: ``ks[n]`` holds, in order, how many entries of ``ends`` have been freed
    when the node gains resources (1-based counts), and ``cpu/gpus/mask/mem[n]`` its free
    resources right after. Free resources only grow along ``ends``, so whether a pod fits is
    monotone in the count and a bisection finds the first count at which it does.

    Will-run asks the same few questions many times within a cycle (free state after a count,
    which entries touch a usable-node mask): the answers are memoised here, since a timeline
    lives only as long as the free resources and running jobs it was built from.
    """

    __slots__ = ("_by_shape", "_states", "base", "cpu", "emask", "gpus", "ks", "mask", "mem", "orr",
                 "vals")

    def __init__(self, free, ends) -> None:
        self.base = free
        self._by_shape: dict = {}  # pod shape -> first_fit of every node (memo)
        self._states: dict[int, tuple] = {}  # count -> free lists after it (memo)
        self.ks: dict[int, list[int]] = {}
        self.cpu: dict[int, list[int]] = {}
        self.gpus: dict[int, list[int]] = {}
        self.mask: dict[int, list[int]] = {}
        self.mem: dict[int, list[int]] = {}
        #: per entry of ``ends``, the bit set of the nodes it frees (one AND tells will_run
        #: whether a running job touches any usable node)
        self.emask: list[int] = []
        #: ``orr[k]``: the nodes freed by the first ``k`` entries (prefix OR of ``emask``)
        self.orr: list[int] = [0]
        #: the entries' limit ends, for bisection
        self.vals: list[float] = [e[0] for e in ends]
        emask = self.emask
        orr = self.orr
        acc = 0
        kd, cd, gd, md, rd = self.ks, self.cpu, self.gpus, self.mask, self.mem
        fcpu, fgpus, fmask, fmem = free.cpu, free.gpus, free.mask, free.mem
        for k, entry in enumerate(ends, 1):
            bits = 0
            for node, mask, cpu, mem in entry[2]:
                bits |= 1 << node
                ks = kd.get(node)
                if ks is None:
                    kd[node] = [k]
                    cd[node] = [fcpu[node] + cpu]
                    gd[node] = [fgpus[node] + mask.bit_count()]
                    md[node] = [fmask[node] | mask]
                    rd[node] = [fmem[node] + mem]
                elif ks[-1] == k:  # several pods of one job on this node: one step
                    cd[node][-1] += cpu
                    gd[node][-1] += mask.bit_count()
                    md[node][-1] |= mask
                    rd[node][-1] += mem
                else:
                    ks.append(k)
                    cl = cd[node]
                    cl.append(cl[-1] + cpu)
                    gl = gd[node]
                    gl.append(gl[-1] + mask.bit_count())
                    ml = md[node]
                    ml.append(ml[-1] | mask)
                    rl = rd[node]
                    rl.append(rl[-1] + mem)
            emask.append(bits)
            acc |= bits
            orr.append(acc)

    def full_state(self, count: int) -> Free:
        """A copy of the free resources after the first ``count`` entries of ``ends`` are
        freed (the lists are memoised per count: tests of several jobs meet at the same
        batch ends)."""
        lists = self._states.get(count)
        if lists is None:
            base = self.base
            cpu, gpus, mask, mem = list(base.cpu), list(base.gpus), list(base.mask), list(base.mem)
            br = bisect.bisect_right
            for n, ks in self.ks.items():
                j = br(ks, count) - 1
                if j >= 0:
                    cpu[n] = self.cpu[n][j]
                    gpus[n] = self.gpus[n][j]
                    mask[n] = self.mask[n][j]
                    mem[n] = self.mem[n][j]
            lists = self._states[count] = (cpu, gpus, mask, mem)
        out = Free.__new__(Free)
        out.nodes = self.base.nodes
        out.cpu, out.gpus, out.mask, out.mem = list(lists[0]), list(lists[1]), list(lists[2]), list(lists[3])
        return out

    def first_fits(self, ps) -> list[tuple[int, int]]:
        """``(first_fit, node)`` of every node where a pod of shape ``ps`` ever fits, least
        count first (memoised per shape)."""
        out = self._by_shape.get(ps)
        if out is None:
            out = []
            free = self.base
            if ps.exclusive or ps.gpu_type:
                ff = self.first_fit
                out = [(k, n) for n in range(len(free.cpu)) if (k := ff(n, ps)) is not None]
            else:
                # ``first_fit`` inlined for the common shape (no type, not exclusive)
                g, cm, need_mem = ps.gpus, ps.cpu_m, ps.memory_mib
                kd, cd, gd, rd = self.ks, self.cpu, self.gpus, self.mem
                for n, (c0, g0, m0) in enumerate(zip(free.cpu, free.gpus, free.mem)):
                    if g0 >= g and c0 >= cm and m0 >= need_mem:
                        out.append((0, n))
                        continue
                    ks = kd.get(n)
                    if ks is None:
                        continue
                    j = _first_enough(gd[n], cd[n], rd[n], g, cm, need_mem)
                    if j is not None:
                        out.append((ks[j], n))
            out.sort()
            self._by_shape[ps] = out
        return out

    def kmin(self, pod_sets, umask: int, cached_only: bool = False) -> int | None:
        """A count of freed entries before which no placement of ``pod_sets`` on the nodes of
        ``umask`` exists (None: none ever does), so no test before it is made: every pod set
        needs as many usable nodes where one of its pods fits as it must spread over (its
        count with one pod per node, else one), and a pod fits on a node from its
        ``first_fit`` on. With ``cached_only``, -1 unless every shape's ``first_fits`` is
        already known."""
        if cached_only:
            memo = self._by_shape
            for ps in pod_sets:
                if ps not in memo:
                    return -1
        bound = 0
        for ps in pod_sets:
            if ps.count <= 0:
                continue
            need = ps.count if ps.one_per_node else 1
            for k, n in self.first_fits(ps):
                if umask >> n & 1:
                    need -= 1
                    if not need:
                        if k > bound:
                            bound = k
                        break
            else:
                return None
        return bound

    def first_fit(self, n: int, ps) -> int | None:
        """The least count of freed ``ends`` entries after which one pod of ``ps`` fits on ``n``."""
        free = self.base
        nodes = free.nodes
        if ps.gpu_type and nodes.gpu_type[n] != ps.gpu_type:
            return None
        cpu0, mem0 = free.cpu[n], free.mem[n]
        need_mem = ps.memory_mib
        if ps.exclusive:
            ct, fm = nodes.cpu_total[n], nodes.full_mask[n]
            if cpu0 == ct and free.mask[n] == fm and mem0 >= need_mem:
                return 0
        else:
            g, cm = ps.gpus, ps.cpu_m
            if free.gpus[n] >= g and cpu0 >= cm and mem0 >= need_mem:
                return 0
        ks = self.ks.get(n)
        if not ks:
            return None
        cpu, mem = self.cpu[n], self.mem[n]
        if ps.exclusive:
            mask = self.mask[n]

            def at(j):
                return cpu[j] == ct and mask[j] == fm and mem[j] >= need_mem
            if not at(len(ks) - 1):
                return None
            return ks[first_true(0, len(ks) - 1, at)]
        j = _first_enough(self.gpus[n], cpu, mem, g, cm, need_mem)
        return None if j is None else ks[j]


#: select/cons_tres will-run (22.05 ``_will_run_test``): running jobs are freed in batches
#: against a window that starts at WILL_RUN_WINDOW s and doubles; see ``will_run``.
WILL_RUN_WINDOW = 30


def will_run(wl, cand, usable, free, ends, start_res: float, timeline=None, epoch: float = 0.0,
             now: float | None = None, timeline_of=None):
    """Earliest start ≥ ``start_res`` on ``usable`` nodes, freeing running jobs by limit end.

    ``ends`` is a sorted list of (limit end, job id, placement, expected free time). Returns
    (estimate, placement) or (None, None).

    As slurmctld 22.05 does it (checked against a real 22.05.8 by the differential test,
    docs/differential.md): ``place`` is tried with no job freed, then after each *batch* of
    running jobs, counted from now whatever ``start_res`` is (slurmctld's will-run does not
    know it: a later TRY_LATER start only narrows ``usable``), and the estimate is raised to
    ``start_res``. Jobs with no candidate node are skipped. The first freed job fixes a barrier: its
    end rounded up to the next multiple of the window (30 s) in epoch time (``epoch`` is the
    epoch of t=0). A batch takes jobs until the next job in end order ends after barrier +
    window; after a failed test the window doubles until it covers that next job. When the
    job fits, the estimate is the end of the batch's last job, not of the job that made
    room (for a job already past its limit: that end + KillWait + OverTimeLimit, at least
    now + 1 s), so a real Slurm often plans later than the first moment the job would fit
    (and, the batch having freed more nodes, on other nodes).

    The answer is ``max(raw, start_res)`` where ``raw`` (``will_run_raw``) does not depend on
    ``start_res``: the backfill cycle shares raw answers between tries and jobs.
    """
    if now is None:
        now = start_res
    raw, pl = will_run_raw(wl, cand, usable, free, ends, timeline, epoch, now, timeline_of)
    if raw is None:
        return None, None
    return max(raw, start_res), pl


def will_run_raw(wl, cand, usable, free, ends, timeline=None, epoch: float = 0.0, now: float = 0.0,
                 timeline_of=None, eligible=None):
    """``will_run`` without the window start: (-inf, placement) when the job fits at once,
    (batch estimate, placement) when it fits after a batch of running jobs, else (None, None).

    ``eligible``: ``(eligible_nodes(cand, free.nodes, usable), their bit set)`` when the
    caller has them. Shortcuts that give the same answer as testing every batch in turn: with
    ``timeline`` (a ``NodeTimeline`` of ``free`` and ``ends``) batches that end before the
    first count at which any pod of ``wl`` fits on a usable candidate node are not tested (nor
    is the placement now, when that count is not 0), and their boundaries are found by
    bisection (a batch closes at its first job with a usable node whose successor ends after
    barrier + window; the successors past that time form a suffix of ``ends``); after a
    failed ``place`` only nodes given back since then can change the answer, so ``place`` is
    skipped while none of them fits a pod of ``wl``.
    """
    if eligible is None:
        usable_nodes = eligible_nodes(cand, free.nodes, usable)
        umask = 0
        for node in usable_nodes:
            umask |= 1 << node
    else:
        usable_nodes, umask = eligible
    pod_sets = wl.pod_sets
    kmin = -1
    if timeline is not None and pod_sets and all(ps.count > 0 for ps in pod_sets):
        # A placement now puts a pod on a usable node where it fits now (count 0): with none,
        # ``place`` cannot succeed and is not tried (asked only of shapes already indexed).
        kmin = timeline.kmin(pod_sets, umask, cached_only=True)
        if kmin is None:
            return None, None
    if kmin <= 0:
        pl = place(wl, cand, free, usable, usable_nodes)
        if pl is not None:
            return -math.inf, pl
    if timeline is None:
        # built only now: a job that fits at once (the common case right after a start, which
        # invalidates the caller's timeline) never needs it
        timeline = timeline_of() if timeline_of is not None else NodeTimeline(free, ends)
    n = len(ends)
    if kmin < 0:
        kmin = timeline.kmin(pod_sets, umask)
    if kmin is None:
        return None, None  # no pod fits on any usable node even after every running job ends
    emask = timeline.emask
    f = 0  # the first entry with a usable node; entries without one are skipped
    while f < n and not emask[f] & umask:
        f += 1
    if f == n:
        return None, None
    vals = timeline.vals
    br = bisect.bisect_right
    scratch: Free | None = None  # free resources on usable nodes after ``given`` entries
    given = 0
    touched = 0  # bit set of the nodes given back since the last failed test
    window = WILL_RUN_WINDOW
    # epoch-aligned end of the first freed job, fixed for the whole search
    e_abs = math.floor(vals[f] + epoch)
    barrier = e_abs + (window - e_abs % window) - epoch
    while True:
        # ``f``: the batch's first entry with a usable node. The batch closes at the first
        # such entry j ≥ f whose successor ends after barrier + window, i.e. j + 1 ≥ p (the
        # first entry ending after it), or else runs to the end of ``ends``.
        p = br(vals, barrier + window)
        t = p - 1 if p - 1 > f else f
        j = t
        while j < n and not emask[j] & umask:
            j += 1
        if j < n:
            i = j + 1
        else:
            i = n
            j = t - 1  # the batch's last usable entry lies in [f, t): f is one
            while not emask[j] & umask:
                j -= 1
        last_end, last_free = vals[j], ends[j][3]
        nxt = vals[j + 1] if j + 1 < n else None
        if i >= kmin:
            # Bring the scratch state up to ``i`` freed entries. On usable nodes it equals the
            # timeline's state, so the first time it is read from there instead of replaying
            # every earlier end; only usable nodes matter to ``place`` and ``_may_fit``.
            if scratch is None:
                scratch = timeline.full_state(i)
                touched = timeline.orr[i]
            else:
                for k in range(given, i):
                    if emask[k] & umask:
                        scratch.give(ends[k][2])
                        touched |= emask[k]
            given = i
            if _may_fit(scratch, touched & umask, pod_sets):
                pl = place(wl, cand, scratch, usable, usable_nodes)
                if pl is not None:
                    est = last_end if last_end > now else (last_free if last_free > now else now + 1)
                    return est, pl
                touched = 0
        f = i
        while f < n and not emask[f] & umask:
            f += 1
        if f >= n:
            return None, None
        window *= 2
        while nxt is not None and nxt > barrier + window:
            window *= 2


def _may_fit(scratch: Free, touched: int, pod_sets) -> bool:
    """Whether a pod of the job fits on a usable node given back since the last failed test
    (``touched``: their bit set): after a failed ``place`` only those nodes can change the
    answer."""
    while touched:
        low = touched & -touched
        touched ^= low
        node = low.bit_length() - 1
        for ps in pod_sets:
            if fits_now(scratch, node, ps):
                return True
    return False


#: policy -> (job id -> shape number, pod shapes -> shape number): jobs with equal pod
#: shapes share will-run answers; numbering each job once per run spares hashing its shapes
#: at every try of every cycle
_SHAPES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _shapes(pol) -> tuple[dict[int, int], dict]:
    got = _SHAPES.get(pol)
    if got is None:
        got = _SHAPES[pol] = ({}, {})
    return got


def run(cy, records) -> None:
    pol = cy.pol
    s = pol.s
    now = cy.now
    res, ep = s.bf_resolution, pol.epoch

    def down(t: float) -> float:  # rounded down to bf_resolution in epoch time (spec §17.3)
        return ((t + ep) // res) * res - ep

    space = NodeSpace(down(now), down(now + s.bf_window), (1 << len(cy.free.cpu)) - 1)
    ends = cy.ends
    planned: dict[int, float] = {}
    tested = 0
    started = 0
    per_user: dict[str, int] = {}
    horizon = now + s.bf_window
    timeline = None
    memo: dict[tuple, tuple] = {}
    #: (partition, usable nodes) -> their eligible nodes and bit set (nodes' up/drain states
    #: do not change within a cycle)
    eligible: dict[tuple, tuple] = {}
    usable_of: dict[tuple, frozenset] = {}  # (partition, usable bit set) -> usable nodes
    part_mask: dict[str, int] = {}
    shape_of, shapes = _shapes(pol)

    def timeline_of() -> NodeTimeline:
        nonlocal timeline
        if timeline is None:
            timeline = NodeTimeline(cy.free, ends)
        return timeline
    #: preemptors' will-run states (``preempt.without_preemptable``) per (QOS, partition), and
    #: answers per state; both cleared whenever a job starts, like ``memo``
    pre_states: dict[tuple, tuple | None] = {}
    pre_memo: dict[tuple, tuple] = {}
    pre_timelines: dict[tuple, NodeTimeline] = {}  # one per set of victims
    preemption = s.preemption
    #: record kind -> what the TRY_LATER loop gave the last record of that kind when it changed
    #: nothing (no start, reservation or preemption): no plan (None) or a planned start
    #: without a reservation. Such a loop reads only the map, the free resources, the running
    #: jobs, the victims chosen so far and the cycle's fixed settings, so the next record of
    #: the same kind gets the same answer until one of them changes (a deep queue repeats a
    #: few kinds many times between two reservations).
    outcome: dict[tuple, float | None] = {}
    #: record kind -> its last TRY_LATER walk: (``len(space.touched)`` when it began,
    #: ``later_start`` at the start of each try, the furthest slot end the tries before each
    #: one read). A try depends only on its ``later_start``, the map and what ``outcome``
    #: depends on, so the next record of the kind takes the walk up at the last try before
    #: which every try read only slots no reservation has changed since
    #: (``NodeSpace.stable_since``); a start or a preemption forgets every walk.
    walks: dict[tuple, tuple] = {}
    #: QOS with the flag NoReserve, which counts only with a PreemptMode (slurmctld's preempt_mode)
    no_reserve_qos = frozenset(name for name, q in pol.qos.items() if any(f.lower() == "noreserve" for f in q.flags)
                               ) if s.preempt_mode.upper() != "OFF" else frozenset()
    for rec in records:
        job = rec.job
        if job.id in cy.started or job.id in cy.skip or job.id in cy.preempting:
            continue
        if s.bf_max_job_test and tested >= s.bf_max_job_test:
            break
        if s.bf_max_job_start and started >= s.bf_max_job_start:
            break
        info = rec.part
        req = pol.req(job)
        if s.bf_max_job_user and per_user.get(req.user, 0) >= s.bf_max_job_user:
            continue
        if cy.limit_reason(job, info) is not None or cy.array_limit(job) is not None:
            continue
        tested += 1
        per_user[req.user] = per_user.get(req.user, 0) + 1
        tl = pol.plan_limit(job, info)
        # --time-min: planned with it, and a job started now gets it as its limit (22.05.8:
        # comp_time_limit is time_min, and _reset_job_time_limit only lowers it, to no less)
        short = job.wl.time_min
        if short is not None:
            short = float(math.ceil(short / 60) * 60)  # whole minutes, as --time
            if short < tl:
                tl = short
            else:
                short = None
        # QOS flag NoReserve with preemption on: planned with one minute, started with its own
        # limit, never given a reservation (its jobs are to be preempted when they are in the way)
        no_reserve = req.qos in no_reserve_qos
        if no_reserve:
            tl, short = 60.0, None
        pname = info.name
        pmask = part_mask.get(pname)
        if pmask is None:
            pmask = 0
            for n in info.node_set:
                pmask |= 1 << n
            part_mask[pname] = pmask
        shape = shape_of.get(job.id)
        if shape is None:
            shape = shape_of[job.id] = shapes.setdefault(job.wl.pod_sets, len(shapes))
        test_only = (s.bf_min_prio_reserve and rec.prio < s.bf_min_prio_reserve) or (
            s.bf_min_age_reserve and now - cy.accrue.get(job.id, job.eligible) < s.bf_min_age_reserve)
        # the kind: everything the loop reads of the record (``short`` only matters to a start)
        okey = (shape, pname, tl, bool(test_only), bool(no_reserve), req.qos if preemption else None)
        if okey in outcome:
            kept = outcome[okey]
            if kept is not None:
                planned[job.id] = kept
            continue
        kept = None
        mark = (len(space.resv), started, len(cy.preempting), len(cy.victims))
        min_nodes = max((ps.count if ps.one_per_node else 1) for ps in job.wl.pod_sets)
        version = len(space.touched)
        walk = walks.get(okey)
        if walk is None:
            first, later_start, read, states, reads = 0, now, -math.inf, [], []
        else:
            states, reads = walk[1], walk[2]
            first = bisect.bisect_left(reads, space.stable_since(walk[0])) - 1
            later_start, read = states[first], reads[first]
            del states[first:], reads[first:]
        for _ in range(first, MAX_TRIES):  # slurmctld's TRY_LATER loop
            states.append(later_start)
            reads.append(read)
            start_res = later_start
            avail, later_start = space.window(start_res, (start_res if start_res > now else now) + tl, pmask)
            if space.reach > read:
                read = space.reach
            if avail.bit_count() < min_nodes:
                if later_start and not test_only:
                    continue
                break
            if avail == pmask:
                usable = None
            else:
                ukey = (pname, avail)
                usable = usable_of.get(ukey)
                if usable is None:
                    usable = usable_of[ukey] = frozenset(mask_nodes(avail))  # avail lies within pmask
            # will_run's raw answer depends on the pod shapes, the partition and the usable
            # nodes only (free resources and running jobs are fixed until a job starts; the
            # window start only raises the estimate): a deep queue repeats the same few shapes,
            # so answers are shared between tries and jobs
            memo_key = (shape, pname, usable)
            hit = memo.get(memo_key)
            if hit is None:
                ekey = (pname, usable)
                elig = eligible.get(ekey)
                if elig is None:
                    nodes = eligible_nodes(info.nodes, cy.free.nodes, usable)
                    bits = 0
                    for n in nodes:
                        bits |= 1 << n
                    elig = eligible[ekey] = (nodes, bits)
                hit = will_run_raw(job.wl, info.nodes, usable, cy.free, ends, timeline,
                                   pol.epoch, now, timeline_of, elig)
                memo[memo_key] = hit
            est, pl = hit
            by_preempting = False
            if preemption and est != -math.inf:
                # a job that may preempt: will-run removes the jobs it may preempt first
                # (spec §2.4.3); "fits once they are gone" reads as now, and backfill starts
                # the preemption
                skey = (req.qos, pname)
                if skey not in pre_states:
                    pre_states[skey] = preempt.without_preemptable(cy, job, info, ends)
                pre = pre_states[skey]
                if pre is not None:
                    pkey = (pre[0], shape, pname, usable)
                    phit = pre_memo.get(pkey)
                    if phit is None:
                        tl_pre = pre_timelines.get(pre[0])
                        if tl_pre is None:
                            tl_pre = pre_timelines[pre[0]] = NodeTimeline(pre[1], pre[2])
                        phit = pre_memo[pkey] = will_run_raw(
                            job.wl, info.nodes, usable, pre[1], pre[2], tl_pre, pol.epoch, now,
                            None, eligible.get((pname, usable)))
                    est, pl = phit
                    by_preempting = est == -math.inf
            if est is None:
                if later_start and not test_only:
                    continue
                break
            if est < start_res:
                est = start_res
            if est <= now and cy.completing and not cy.completing.isdisjoint(p[0] for p in pl):
                # it fits now, but on a node still COMPLETING (a replay's holds): a real 22.05
                # plans it for the next second there instead of starting it
                est = pol.whole_second(now) + 1.0
                later_start = 0
            if est <= now and by_preempting:
                # slurmctld's _start_job: select_nodes preempts (a SUSPEND preemptor may start
                # at once); with victims signalled it fails ("nodes busy") and the cycle reserves
                # the will-run nodes for the preemptor from now (a real 22.05.8,
                # docs/differential.md, finding 25)
                if preempt.try_preempt(cy, job, info, usable, VIA_BACKFILL):
                    cy.preempting.add(job.id)
                    pre_states.clear()  # the victims chosen are no candidates any more
                    pre_memo.clear()
                    pre_timelines.clear()
                    if job.id in cy.started:
                        timeline = None
                        memo.clear()
                        started += 1
                        break
                planned[job.id] = kept = now
                if not no_reserve:
                    space.add(down(now), down(now + tl), frozenset(p[0] for p in pl), job.id, res)
                break
            if est <= now:
                cy.start(job, pl, info, VIA_BACKFILL, limit=short)
                timeline = None  # free resources and ends changed
                memo.clear()
                pre_states.clear()
                pre_memo.clear()
                pre_timelines.clear()
                started += 1
                # no map entry: a job backfill starts is seen through the free resources and
                # its limit end, like any running job; a real 22.05 starts several jobs on one
                # node in one cycle (differential test, docs/differential.md)
                break
            if test_only:
                planned[job.id] = kept = est  # a start time, no reservation (bf_min_*_reserve)
                break
            if later_start and est > later_start:
                continue  # slurmctld's "Try later": from the slot that frees a node
            if est > horizon:
                planned[job.id] = kept = est  # beyond bf_window: no reservation
                break
            nodes = frozenset(p[0] for p in pl)
            mask = 0
            for n in nodes:
                mask |= 1 << n
            b, e = down(est), down(est + tl)
            if space.overlaps(mask, b, e):
                if space.reach > read:
                    read = space.reach
                later_start = est  # its nodes are planned for another job meanwhile
                continue
            planned[job.id] = kept = est
            if no_reserve:
                break
            space.add(b, e, nodes, job.id, res)
            break
        after = (len(space.resv), started, len(cy.preempting), len(cy.victims))
        if after == mark:
            outcome[okey] = kept
        else:
            outcome.clear()
        if after[1:] != mark[1:]:
            walks.clear()  # free resources, running jobs or victims changed
        else:
            walks[okey] = (version, states, reads)
    pol.planned = planned
    if pol.record:
        pol.plan_log[now] = dict(planned)
        pol.resv_log[now] = [(jid, sorted(nodes), b, e) for b, e, nodes, jid in space.resv]


def insert_end(ends: list, end: float, job_id: int, placement, free_at: float) -> None:
    # job ids are unique among running jobs: plain tuple order is (end, job id) order
    bisect.insort(ends, (end, job_id, placement, free_at))
