"""The backfill cycle (spec §2, errata §17.3).

A time map of whole-node reservations for pending jobs; running jobs are seen through the
free-resource state and their *time-limit* ends. Each queue record (up to bf_max_job_test)
looks for its earliest start: candidate nodes are the partition's nodes not reserved at any
moment of the run window; the "will run" test frees running jobs in end order until the job
fits. A job whose estimate is now starts (SchedBackfill); otherwise it gets a reservation of
its whole nodes over ``[floor(start/res)·res, floor((start+TL)/res)·res)`` unless it may only
be tested now (bf_min_prio_reserve, bf_min_age_reserve) or the start lies beyond bf_window.
"""
from __future__ import annotations

import bisect
import math
import weakref

from gpupool.policy.slurm.bisection import first_true
from gpupool.policy.slurm.select import Free, eligible_nodes, fits_now, place

VIA_BACKFILL = "SchedBackfill"
MAX_TRIES = 64


class TimeMap:
    """Reservations as (begin, end, nodes, job id); a node is unusable for a window that
    overlaps any reservation holding it.

    Indexed per node (each node's reservations sorted by begin) and by end time (one sorted
    list of every reservation's end), so a query costs a bisect per reserved node instead of
    a scan over every reservation; ``blocked`` answers are memoised until the next ``add``.
    """

    __slots__ = ("_blocked", "_disjoint", "_ends", "_masks", "_merged", "_node_b", "_node_e", "_sets", "epoch",
                 "res", "resv")

    #: up to this many reservations, ``blocked`` scans them (two comparisons each, node sets
    #: as bit sets) instead of bisecting per reserved node: on the Helios-like slice a cycle
    #: holds at most ~75; the per-node index serves deep queues (hundreds)
    SCAN_MAX = 96

    def __init__(self, res: int, epoch: float = 0.0) -> None:
        self.resv: list[tuple[float, float, frozenset, int]] = []
        self.res = res
        #: slurmctld rounds in epoch seconds (spec §17.3): ``epoch`` is the epoch of t=0
        self.epoch = epoch
        self._node_b: dict[int, list[float]] = {}  # node -> begins, sorted
        self._node_e: dict[int, list[float]] = {}  # node -> ends, in the same order
        self._disjoint: dict[int, bool] = {}  # node -> its reservations do not overlap
        self._ends: list[float] = []  # every reservation's end, sorted (with repeats)
        self._blocked: dict[tuple[float, float], frozenset] = {}
        self._merged: dict[int, tuple] = {}  # node -> its merged reservations' (begins, ends) (memo)
        self._masks: list[tuple[float, float, int]] = []  # (begin, end, node bit set) per reservation
        self._sets: dict[int, frozenset] = {}  # node bit set -> its nodes (memo)

    def add(self, start: float, tl: float, nodes: frozenset, job_id: int) -> None:
        res = self.res
        ep = self.epoch
        begin = ((start + ep) // res) * res - ep
        end = ((start + tl + ep) // res) * res - ep
        if end > begin:
            self.resv.append((begin, end, nodes, job_id))
            bits = 0
            for n in nodes:
                bits |= 1 << n
            self._masks.append((begin, end, bits))
            bisect.insort(self._ends, end)
            self._blocked.clear()
            for n in nodes:
                self._merged.pop(n, None)
                bs = self._node_b.get(n)
                if bs is None:
                    self._node_b[n] = [begin]
                    self._node_e[n] = [end]
                    self._disjoint[n] = True
                    continue
                es = self._node_e[n]
                k = bisect.bisect_right(bs, begin)
                if self._disjoint[n] and ((k and es[k - 1] > begin) or (k < len(bs) and bs[k] < end)):
                    self._disjoint[n] = False
                bs.insert(k, begin)
                es.insert(k, end)

    def blocked(self, start: float, end: float) -> frozenset:
        key = (start, end)
        out = self._blocked.get(key)
        if out is not None:
            return out
        if len(self._masks) <= self.SCAN_MAX:
            bits = 0
            for b, e, m in self._masks:
                if b <= end and e > start:  # closed window (see below)
                    bits |= m
            out = self._sets.get(bits)
            if out is None:
                out = self._sets[bits] = frozenset(n for n in range(bits.bit_length()) if bits >> n & 1)
            self._blocked[key] = out
            return out
        hit = []
        br = bisect.bisect_right
        disjoint = self._disjoint
        node_e = self._node_e
        for n, bs in self._node_b.items():
            # reservations beginning at or before ``end``: bs[:k]. The window is closed, as
            # slurmctld tests a slot with ``begin_time <= end_time``: a job whose limit ends
            # exactly when a reservation begins does not fit in front of it (seen on 22.05.8)
            k = br(bs, end)
            if not k:
                continue
            es = node_e[n]
            if disjoint[n]:
                # disjoint and sorted by begin: ends are sorted too, the last one is the latest
                if es[k - 1] > start:
                    hit.append(n)
            elif any(es[j] > start for j in range(k)):
                hit.append(n)
        out = frozenset(hit)
        self._blocked[key] = out
        return out

    def ends_between(self, lo: float, hi: float) -> list[float]:
        ends = self._ends
        out: list[float] = []
        for e in ends[bisect.bisect_right(ends, lo):bisect.bisect_left(ends, hi)]:
            if not out or out[-1] != e:
                out.append(e)
        return out

    def first_gain(self, nodes, lo: float, hi: float, tl: float) -> float | None:
        """The first reservation end ``e`` with ``lo < e < hi`` at which one of ``nodes`` is
        free over ``[e, e + tl)``; the same answer as scanning ``ends_between(lo, hi)`` with
        ``blocked(e, e + tl)``, found per node from the gaps between its reservations."""
        ends = self._ends
        best = None
        for n in nodes:
            bs = self._node_b.get(n)
            if bs is None:  # never reserved: free at the first end in range
                k = bisect.bisect_right(ends, lo)
                e = ends[k] if k < len(ends) else None
                if e is not None and e < hi and (best is None or e < best):
                    best = e
                continue
            merged = self._merged.get(n)
            if merged is None:
                mb: list[float] = []
                me: list[float] = []
                for b, e in zip(bs, self._node_e[n]):
                    if mb and b <= me[-1]:
                        me[-1] = max(me[-1], e)
                    else:
                        mb.append(b)
                        me.append(e)
                merged = self._merged[n] = (mb, me)
            mb, me = merged
            m = len(mb)
            # Gap j runs from the end of merged reservation j-1 to the begin of j. A gap that
            # closes at or before ``lo`` cannot hold a window opening after ``lo``: start at the
            # first reservation beginning after ``lo``.
            j = bisect.bisect_right(mb, lo)
            gap_start = me[j - 1] if j else None  # None: -inf
            limit = hi if best is None else best
            while True:
                gap_end = mb[j] if j < m else None  # None: +inf
                if gap_start is not None and gap_start >= limit:
                    break
                if gap_start is not None and gap_start > lo:
                    k = bisect.bisect_left(ends, gap_start)
                else:
                    k = bisect.bisect_right(ends, lo)
                if k < len(ends):
                    e = ends[k]
                    if e >= limit:
                        break
                    if gap_end is None or e + tl < gap_end:
                        best = e
                        break
                if j >= m:
                    break
                gap_start = me[j]
                j += 1
        return best

    def later(self, start: float) -> float | None:
        """The next instant after ``start`` at which a reservation ends (availability grows)."""
        ends = self._ends
        k = bisect.bisect_right(ends, start)
        return ends[k] if k < len(ends) else None


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

    ``ends`` is a sorted list of (limit end, seq, placement, expected free time). Returns
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
    tmap = TimeMap(s.bf_resolution, pol.epoch)
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
    usable_of: dict[tuple, frozenset] = {}  # (partition, blocked nodes) -> usable nodes
    shape_of, shapes = _shapes(pol)

    def timeline_of() -> NodeTimeline:
        nonlocal timeline
        if timeline is None:
            timeline = NodeTimeline(cy.free, ends)
        return timeline
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
        pname = info.name
        shape = shape_of.get(job.id)
        if shape is None:
            shape = shape_of[job.id] = shapes.setdefault(job.wl.pod_sets, len(shapes))
        test_only = (s.bf_min_prio_reserve and rec.prio < s.bf_min_prio_reserve) or (
            s.bf_min_age_reserve and now - cy.accrue.get(job.id, job.eligible) < s.bf_min_age_reserve)
        start_res = now
        for _ in range(MAX_TRIES):
            if start_res > horizon:
                break
            blocked = tmap.blocked(start_res, start_res + tl)
            if blocked:
                # one set object per (partition, blocked set): memo keys then hash cheaply
                ukey = (pname, blocked)
                usable = usable_of.get(ukey)
                if usable is None:
                    usable = usable_of[ukey] = info.node_set - blocked
            else:
                usable = None
            later = tmap.later(start_res)
            if usable is not None and not usable:
                est, pl = None, None
            else:
                # will_run's raw answer depends on the pod shapes, the partition and the
                # usable nodes only (free resources and running jobs are fixed until a job
                # starts; the window start only raises the estimate): a deep queue repeats
                # the same few shapes, so answers are shared between tries and jobs
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
                if est is not None and est < start_res:
                    est = start_res
            if est is None:
                if later is None or test_only:
                    break
                start_res = later
                continue
            if est <= now and cy.completing and not cy.completing.isdisjoint(p[0] for p in pl):
                # it fits now, but on a node still COMPLETING (a replay's holds): a real 22.05
                # plans it for the next second there instead of starting it
                est = pol.whole_second(now) + 1.0
            if est <= now:
                cy.start(job, pl, info, VIA_BACKFILL)
                timeline = None  # free resources and ends changed
                memo.clear()
                started += 1
                # no time-map entry: a job backfill starts is seen through the free resources
                # and its limit end, like any running job; a real 22.05 starts several jobs
                # on one node in one cycle (differential test, docs/differential.md)
                break
            if later is not None and later < est and later > start_res:
                # Retry from an earlier reservation end only where the window gains a node;
                # with no new node the estimate cannot improve (spec §2.3 6f, same result).
                have = usable if usable is not None else info.node_set
                nxt = None
                if tl > 0:
                    nxt = tmap.first_gain(info.node_set - have, start_res, est, tl)
                else:
                    for e in tmap.ends_between(start_res, est):
                        gained = info.node_set - tmap.blocked(e, e + tl)
                        if gained - have:
                            nxt = e
                            break
                start_res = nxt if nxt is not None else est
                continue
            nodes = frozenset(p[0] for p in pl)
            if nodes & tmap.blocked(est, est + tl):
                start_res = est
                continue
            planned[job.id] = est
            if not test_only and est <= horizon:
                tmap.add(est, tl, nodes, job.id)
            break
    pol.planned = planned
    if pol.record:
        pol.plan_log[now] = dict(planned)
        pol.resv_log[now] = [(jid, sorted(nodes), b, e) for b, e, nodes, jid in tmap.resv]


def insert_end(ends: list, end: float, seq: int, placement, free_at: float) -> None:
    # seq is unique and increasing: plain tuple order is (end, seq) order
    bisect.insort(ends, (end, seq, placement, free_at))
