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

from gpupool.policy.slurm.bisection import first_true
from gpupool.policy.slurm.select import Free, eligible_nodes, place, pod_fits

VIA_BACKFILL = "SchedBackfill"
MAX_TRIES = 64


class TimeMap:
    """Reservations as (begin, end, nodes, job id); a node is unusable for a window that
    overlaps any reservation holding it.

    Indexed per node (each node's reservations sorted by begin) and by end time (one sorted
    list of every reservation's end), so a query costs a bisect per reserved node instead of
    a scan over every reservation; ``blocked`` answers are memoised until the next ``add``.
    """

    __slots__ = ("_blocked", "_disjoint", "_ends", "_merged", "_node_b", "_node_e", "epoch", "res", "resv")

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

    def add(self, start: float, tl: float, nodes: frozenset, job_id: int) -> None:
        res = self.res
        ep = self.epoch
        begin = ((start + ep) // res) * res - ep
        end = ((start + tl + ep) // res) * res - ep
        if end > begin:
            self.resv.append((begin, end, nodes, job_id))
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


class NodeTimeline:
    """Each node's free resources as running jobs end, indexed per node.

    For node ``n``: ``ks[n]`` holds, in order, how many entries of ``ends`` have been freed
    when the node gains resources (1-based counts), and ``cpu/gpus/mask/mem[n]`` its free
    resources right after. Free resources only grow along ``ends``, so whether a pod fits is
    monotone in the count and a bisection finds the first count at which it does.
    """

    __slots__ = ("_by_shape", "base", "cpu", "emask", "gpus", "ks", "mask", "mem")

    def __init__(self, free, ends) -> None:
        self.base = free
        self._by_shape: dict = {}  # pod shape -> first_fit of every node (memo)
        self.ks: dict[int, list[int]] = {}
        self.cpu: dict[int, list[int]] = {}
        self.gpus: dict[int, list[int]] = {}
        self.mask: dict[int, list[int]] = {}
        self.mem: dict[int, list[int]] = {}
        #: per entry of ``ends``, the bit set of the nodes it frees (one AND tells will_run
        #: whether a running job touches any usable node)
        self.emask: list[int] = []
        cur: dict[int, list] = {}
        for k, (_end, _seq, placement, _free_at) in enumerate(ends, 1):
            bits = 0
            for node, _m, _c, _r in placement:
                bits |= 1 << node
            self.emask.append(bits)
            for node, mask, cpu, mem in placement:
                c = cur.get(node)
                if c is None:
                    c = [free.cpu[node], free.gpus[node], free.mask[node], free.mem[node]]
                    cur[node] = c
                    self.ks[node] = []
                    self.cpu[node] = []
                    self.gpus[node] = []
                    self.mask[node] = []
                    self.mem[node] = []
                c[0] += cpu
                c[1] += mask.bit_count()
                c[2] |= mask
                c[3] += mem
                ks = self.ks[node]
                if ks and ks[-1] == k:  # several pods of one job on this node
                    self.cpu[node][-1], self.gpus[node][-1], self.mask[node][-1], self.mem[node][-1] = c
                else:
                    ks.append(k)
                    self.cpu[node].append(c[0])
                    self.gpus[node].append(c[1])
                    self.mask[node].append(c[2])
                    self.mem[node].append(c[3])

    def state_at(self, count: int, nodes) -> Free:
        """A copy of the free resources after the first ``count`` entries of ``ends`` are
        freed, exact on ``nodes`` (other nodes keep their present state)."""
        out = self.base.copy()
        br = bisect.bisect_right
        for n in nodes:
            ks = self.ks.get(n)
            if not ks:
                continue
            j = br(ks, count) - 1
            if j >= 0:
                out.cpu[n] = self.cpu[n][j]
                out.gpus[n] = self.gpus[n][j]
                out.mask[n] = self.mask[n][j]
                out.mem[n] = self.mem[n][j]
        return out

    def first_fits(self, ps) -> list:
        """``first_fit`` of every node for pod shape ``ps``, indexed by node."""
        out = self._by_shape.get(ps)
        if out is None:
            out = [self.first_fit(n, ps) for n in range(len(self.base.cpu))]
            self._by_shape[ps] = out
        return out

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
        else:
            gpus = self.gpus[n]

            def at(j):
                return gpus[j] >= g and cpu[j] >= cm and mem[j] >= need_mem
        if not at(len(ks) - 1):
            return None
        return ks[first_true(0, len(ks) - 1, at)]


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
    (and, the batch having freed more nodes, on other nodes). Shortcuts that give the same answer: with
    ``timeline`` (a ``NodeTimeline`` of ``free`` and ``ends``) batches that end before the
    first count at which any pod of ``wl`` fits on a usable candidate node are not tested;
    and after a failed ``place`` only nodes given back since then can change the answer, so
    ``place`` is skipped while none of them fits a pod of ``wl``.
    """
    usable_nodes = eligible_nodes(cand, free.nodes, usable)
    pl = place(wl, cand, free, usable, usable_nodes)
    if pl is not None:
        return start_res, pl
    pod_sets = wl.pod_sets
    if timeline is None:
        # built only now: a job that fits at once (the common case right after a start, which
        # invalidates the caller's timeline) never needs it
        timeline = timeline_of() if timeline_of is not None else NodeTimeline(free, ends)
    emask = timeline.emask
    umask = 0
    for node in usable_nodes:
        umask |= 1 << node
    if now is None:
        now = start_res
    n = len(ends)
    found = None
    per_shape = [timeline.first_fits(ps) for ps in pod_sets]
    for node in usable_nodes:
        for fits in per_shape:
            k = fits[node]
            if k is not None and (found is None or k < found):
                found = k
    if found is None:
        return None, None  # no pod fits on any usable node even after every running job ends
    kmin = found
    scratch: Free | None = None  # free resources on usable nodes after ``given`` entries
    given = 0
    touched: set[int] = set()
    i = 0
    window = WILL_RUN_WINDOW
    barrier = None  # epoch-aligned end of the first freed job, fixed for the whole search
    while i < n:
        last_end = last_free = None
        nxt = None
        while i < n:
            end, _, _placement, free_at = ends[i]
            hit = emask[i] & umask
            i += 1
            if not hit:
                continue  # no usable node: skipped
            if barrier is None:
                e_abs = math.floor(end + epoch)
                barrier = e_abs + (window - e_abs % window) - epoch
            last_end, last_free = end, free_at
            nxt = ends[i][0] if i < n else None
            if nxt is not None and nxt > barrier + window:
                break
        if last_end is None:
            break
        if i >= kmin:
            # Bring the scratch state up to ``i`` freed entries. On usable nodes it equals the
            # timeline's state, so the first time it is read from there instead of replaying
            # every earlier end; only usable nodes matter to ``place`` and ``may_fit``.
            if scratch is None:
                scratch = timeline.state_at(i, usable_nodes)
                ks = timeline.ks
                touched = {node for node in usable_nodes if node in ks and ks[node][0] <= i}
            else:
                for j in range(given, i):
                    if emask[j] & umask:
                        placement = ends[j][2]
                        scratch.give(placement)
                        for p in placement:
                            touched.add(p[0])
            given = i
            if _may_fit(scratch, touched, umask, pod_sets):
                pl = place(wl, cand, scratch, usable, usable_nodes)
                if pl is not None:
                    est = last_end if last_end > now else (last_free if last_free > now else now + 1)
                    return max(est, start_res), pl
                touched.clear()
        window *= 2
        while nxt is not None and nxt > barrier + window:
            window *= 2
    return None, None


def _may_fit(scratch: Free, touched: set[int], umask: int, pod_sets) -> bool:
    """Whether a pod of the job fits on a usable node given back since the last failed test:
    after a failed ``place`` only those nodes can change the answer."""
    for node in touched:
        if umask >> node & 1:
            for ps in pod_sets:
                if pod_fits(scratch, node, ps) is not None:
                    return True
    return False


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
        test_only = (s.bf_min_prio_reserve and rec.prio < s.bf_min_prio_reserve) or (
            s.bf_min_age_reserve and now - cy.accrue.get(job.id, job.eligible) < s.bf_min_age_reserve)
        start_res = now
        for _ in range(MAX_TRIES):
            if start_res > horizon:
                break
            blocked = tmap.blocked(start_res, start_res + tl)
            usable = info.node_set - blocked if blocked else None
            later = tmap.later(start_res)
            if usable is not None and not usable:
                est, pl = None, None
            else:
                # will_run depends on the pod shapes, the partition, the usable nodes and the
                # window start only (free resources and running jobs are fixed until a job
                # starts): a deep queue repeats the same few shapes, so answers are shared
                memo_key = (job.wl.pod_sets, info.name, usable, start_res)
                hit = memo.get(memo_key)
                if hit is None:
                    hit = will_run(job.wl, info.nodes, usable, cy.free, ends, start_res, timeline,
                                   pol.epoch, now, timeline_of)
                    memo[memo_key] = hit
                est, pl = hit
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
