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

from gpupool.model.workload import GANG_MIN
from gpupool.policy.slurm import limits, preempt
from gpupool.policy.slurm.bisection import first_true
from gpupool.policy.slurm.jobinfo import contiguous, list_above_max_nodes, raised_least, walks_gpus_per_node
from gpupool.policy.slurm.node_filter import job_nodes, limits_key
from gpupool.policy.slurm.node_space import NodeSpace
from gpupool.policy.slurm.node_space import bits as mask_nodes
from gpupool.policy.slurm.select import Free, eligible_nodes, exclusive_memory, fits_now, holds_exclusive, place

VIA_BACKFILL = "SchedBackfill"
#: a bound on TRY_LATER retries for one job (slurmctld has none but its bf_max_time)
MAX_TRIES = 1000
#: under assoc_limit_stop, how far on backfill plans a job whose start failed on a limit when
#: its window showed no later start (22.05 backfill.c: "now + 500")
_ACCOUNTING_RETRY = 500.0


def _spread_need(ps) -> int:
    """How many nodes where one pod of ``ps`` fits a placement needs: its count (a range's
    least) with one pod per node, else one."""
    return (ps.count if ps.min_count is None else ps.min_count) if ps.one_per_node else 1


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

    __slots__ = ("_by_id", "_by_shape", "_states", "base", "cpu", "emask", "ends", "gpus", "ks", "mask", "mem",
                 "orr", "vals")

    def __init__(self, free, ends) -> None:
        self.base = free
        self.ends = ends  # read back only for MaxCPUsPerNode allowances (``full_state``)
        self._by_shape: dict = {}  # pod shape -> first_fit of every node (memo)
        #: id of a pod shape object -> (that object, its ``_by_shape`` entry): a shape's hash
        #: is computed in Python from its fields, and will-run asks for the same objects again
        #: and again (the object is held, so its id is not reused meanwhile)
        self._by_id: dict[int, tuple] = {}
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
        out.cap = None
        out.cap_of = base_of = self.base.cap_of
        out.caps = None
        if self.base.caps is not None:  # MaxCPUsPerNode allowances after the same ends
            out.caps = {k: list(v) for k, v in self.base.caps.items()}
            for entry in self.ends[:count]:
                part = base_of.get(entry[1])
                if part is not None:
                    out.cap_take(part, entry[2], 1)
        return out

    def first_fits(self, ps) -> list[tuple[int, int]]:
        """``(first_fit, node)`` of every node where a pod of shape ``ps`` ever fits, least
        count first (memoised per shape)."""
        got = self._by_id.get(id(ps))
        if got is not None and got[0] is ps:
            return got[1]
        out = self._by_shape.get(ps)
        if out is None:
            out = []
            free = self.base
            if ps.exclusive or ps.gpu_type:
                ff = self.first_fit
                out = [(k, n) for n in range(len(free.cpu)) if (k := ff(n, ps)) is not None]
            else:
                # ``first_fit`` inlined for the common shape (no type, not exclusive)
                g, cm, need_mem = ps.gpus, ps.cpu_m, ps.memory_to_fit
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
        self._by_id[id(ps)] = (ps, out)
        return out

    def kmin(self, pod_sets, umask: int, cached_only: bool = False) -> int | None:
        """A count of freed entries before which no placement of ``pod_sets`` on the nodes of
        ``umask`` exists (None: none ever does), so no test before it is made: every pod set
        needs as many usable nodes where one of its pods fits as it must spread over (its
        count with one pod per node, else one), and a pod fits on a node from its
        ``first_fit`` on. With ``cached_only``, -1 unless every shape's ``first_fits`` is
        already known."""
        if cached_only:
            memo, by_id = self._by_shape, self._by_id
            for ps in pod_sets:
                got = by_id.get(id(ps))
                if (got is None or got[0] is not ps) and ps not in memo:
                    return -1
        bound = 0
        for ps in pod_sets:
            if ps.count <= 0:
                continue
            need = _spread_need(ps)
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
            typed = nodes.typed_mask(n, ps.gpu_type)
            if typed is None:
                return None
            if not ps.exclusive:
                return self._first_typed_fit(n, ps, typed)
        cpu0, mem0 = free.cpu[n], free.mem[n]
        need_mem = ps.memory_to_fit
        if ps.exclusive:
            if not holds_exclusive(nodes, n, ps):
                return None  # the whole node is too small for the pod
            need_mem = exclusive_memory(nodes, n, ps)
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

    def _first_typed_fit(self, n: int, ps, typed: int) -> int | None:
        """``first_fit`` for a request naming a GPU type on a node of several types: the free
        devices of that type are counted in the node's free masks."""
        free = self.base
        g, cm, need_mem = ps.gpus, ps.cpu_m, ps.memory_to_fit
        if (free.mask[n] & typed).bit_count() >= g and free.cpu[n] >= cm and free.mem[n] >= need_mem:
            return 0
        ks = self.ks.get(n)
        if not ks:
            return None
        cpu, mem, mask = self.cpu[n], self.mem[n], self.mask[n]

        def at(j):
            return (mask[j] & typed).bit_count() >= g and cpu[j] >= cm and mem[j] >= need_mem
        if not at(len(ks) - 1):
            return None
        return ks[first_true(0, len(ks) - 1, at)]


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
                 timeline_of=None, eligible=None, busy: int | None = None):
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

    ``busy`` (bf_busy_nodes: the nodes busy now, as a bit set) orders the nodes of a later
    start busy-first (``select.place``); a start now is placed as usual, as cons_tres does.
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
                        scratch.give_end(ends[k])
                        touched |= emask[k]
            given = i
            if _may_fit(scratch, touched & umask, pod_sets):
                pl = place(wl, cand, scratch, usable, usable_nodes, busy)
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


class _Carry:
    """What one backfill cycle leaves to the next of the same policy.

    ``usable_of`` (a bit set of nodes -> their frozenset) is a pure function. The will-run
    answers (``memo``), the node timeline and the eligible nodes per usable set are pure
    functions of the free resources, the running jobs' entries, the nodes' up/drain states and
    the partitions (``will_run_raw`` reads ``now`` only where a batch's last job is past its
    limit end); between two cycles of a deep queue often nothing starts or ends (a submission
    alone changes the queue, not them: a fifth of the deep slice's cycles, benchmarks/README.md),
    so a cycle that finds them as the last one left them and no running job at or past its
    limit end takes them over instead of asking again.
    ``state`` is that fingerprint: (node table, partitions, up, drain, free CPU, GPUs, GPU
    masks, memory, running entries), copies taken when the last cycle ended."""

    __slots__ = ("busy", "eligible", "memo", "state", "timeline", "usable_of")

    def __init__(self) -> None:
        self.usable_of: dict[int, frozenset] = {}
        self.state: tuple | None = None
        self.memo: dict[tuple, tuple] = {}
        self.timeline: NodeTimeline | None = None
        self.eligible: dict[tuple, tuple] = {}
        #: the nodes busy at the end of the last cycle (bf_busy_nodes only; else None): the
        #: will-run answers kept depend on it
        self.busy: int | None = None


_CARRY: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # policy -> _Carry
#: entries kept in ``_Carry.usable_of`` before it is cleared (a bound on memory, not on speed)
_USABLE_KEEP = 50_000


def _busy_nodes(cy) -> int:
    """The nodes not idle now, as a bit set: any CPU, GPU or memory held, or still COMPLETING
    (slurmctld's idle_node_bitmap, which bf_busy_nodes reads, holds nodes without running or
    completing jobs)."""
    free, nodes = cy.free, cy.free.nodes
    busy = 0
    for i, (c, ct, m, fm, g, mt) in enumerate(zip(free.cpu, nodes.cpu_total, free.mask, nodes.full_mask,
                                                 free.mem, nodes.mem_total)):
        if c < ct or m != fm or g < mt:
            busy |= 1 << i
    for i in cy.completing:
        busy |= 1 << i
    return busy


def _state_of(cy) -> tuple:
    """The fingerprint ``_Carry.state`` compares (see there)."""
    free, nodes = cy.free, cy.free.nodes
    return (nodes, cy.pol.parts, list(nodes.up), list(nodes.drain), list(free.cpu), list(free.gpus),
            list(free.mask), list(free.mem), list(cy.ends))


def _same_state(state: tuple | None, cy) -> bool:
    """Whether ``cy`` starts from the fingerprinted ``state`` (identity of the node table and
    partitions, then equal lists; cheapest tests first)."""
    if state is None:
        return False
    free, nodes = cy.free, cy.free.nodes
    return (state[0] is nodes and state[1] is cy.pol.parts and state[8] == cy.ends and state[4] == free.cpu
            and state[5] == free.gpus and state[6] == free.mask and state[7] == free.mem
            and state[2] == nodes.up and state[3] == nodes.drain)


def _shape_number(job, shape_of: dict[int, int], shapes: dict) -> int:
    """The number of ``job``'s shape in this run (``_shapes``)."""
    shape = shape_of.get(job.id)
    if shape is None:
        # a job's own node limits (--nodelist/--exclude/--constraint) are part of its shape
        shape = shape_of[job.id] = shapes.setdefault((job.wl.pod_sets, job.wl.gang, limits_key(job.wl)), len(shapes))
    return shape


def _record_fixed(pol, rec, no_reserve_qos: frozenset, part_mask: dict[str, int], shape_of: dict[int, int],
                  shapes: dict) -> tuple:
    """What the cycle reads of a queue record that depends only on its job, its partition and
    the policy's fixed settings, computed once per record: the queue hands the same record
    objects to cycle after cycle while a job waits (``queue.build``'s cache), and a deep queue
    re-reads thousands of them every ``bf_interval``.

    (user, (QOS, partition name), planning limit, the ``--time-min`` limit a backfill start gets or None,
    NoReserve, partition name, its node bit set, shape number, fewest nodes, whether the
    record's priority is below bf_min_prio_reserve, its kind when not test-only, its kind when
    test-only, the nodes its --exclude/--constraint allow or None, whether its nodelist is
    beyond MaxNodes with no largest count)."""
    s = pol.s
    job = rec.job
    info = rec.part
    req = pol.req(job)
    tl = pol.plan_limit(job, info)
    # --time-min: planned with it, and a job started now gets it as its limit (22.05.8:
    # comp_time_limit is time_min, and _reset_job_time_limit only lowers it, to no less)
    short = job.wl.time_min
    if short is not None and short != math.inf:  # (an UNLIMITED one shortens nothing)
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
    pmask = _part_bits(info, part_mask)
    shape = _shape_number(job, shape_of, shapes)
    ranged = job.wl.gang == GANG_MIN
    min_nodes = max(((ps.min_count if ranged and ps.min_count is not None else ps.count) if ps.one_per_node else 1)
                    for ps in job.wl.pod_sets)
    if ranged and info.part.min_nodes is not None:  # a range's least count as slurmctld stored it
        min_nodes = raised_least(min_nodes, max((ps.count if ps.one_per_node else 1) for ps in job.wl.pod_sets),
                                 info.part.min_nodes)
    lim = job_nodes(job.wl, pol._nodes)
    min_nodes = max(min_nodes, lim.required_count)  # (a nodelist's hosts: ``_job_create``)
    low_prio = bool(s.bf_min_prio_reserve and rec.prio < s.bf_min_prio_reserve)
    # the kind: everything the TRY_LATER loop reads of the record (``short`` only matters to a start)
    qos_key = req.qos if s.preemption else None
    kind = (shape, pname, tl, False, no_reserve, qos_key)
    kind_test = (shape, pname, tl, True, no_reserve, qos_key)
    # ``get_node_cnts`` fails a nodelist beyond MaxNodes with no largest count: "node count
    # too high", passed over before it counts as tested (``jobinfo.list_above_max_nodes``)
    too_many = bool(lim.required) and list_above_max_nodes(job.wl, lim.required_count, info.part.max_nodes)
    return (req.user, (req.qos, pname), tl, short, no_reserve, pname, pmask, shape, min_nodes, low_prio, kind,
            kind_test, lim.allowed, too_many)


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
    carry = _CARRY.get(pol)
    if carry is None:
        carry = _CARRY[pol] = _Carry()
    #: will-run answers per (shape, partition, usable bit set), the node timeline (built when
    #: first needed) and (partition, usable bit set) -> eligible nodes and their bit set: all
    #: valid until a job starts, and taken over from the last cycle when nothing they read
    #: changed since it ended (see ``_Carry``)
    busy = _busy_nodes(cy) if s.bf_busy_nodes else None
    if (carry.state is not None and (not ends or ends[0][0] > now) and _same_state(carry.state, cy)
            and carry.busy == busy):
        memo = carry.memo
        timeline = carry.timeline
        if timeline is not None:
            timeline.base = cy.free  # equal lists; the last cycle's object is not this one
        eligible = carry.eligible
    else:
        memo = {}
        timeline = None
        eligible = {}
    carry.state = None
    usable_of = carry.usable_of  # usable bit set -> usable nodes
    if len(usable_of) > _USABLE_KEEP:
        usable_of.clear()
    part_mask: dict[str, int] = {}
    ok_masks: dict[str, tuple[int, bool]] = {}  # see ``_eligible``
    shape_of, shapes = _shapes(pol)
    neg_inf = -math.inf
    max_test, max_start, max_user = s.bf_max_job_test, s.bf_max_job_start, s.bf_max_job_user
    max_array_resv = max(1, s.bf_max_job_array_resv)  # an array's first task is always tested
    one_resv = s.bf_one_resv_per_job
    min_age = s.bf_min_age_reserve

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

    def forget_answers() -> None:
        """A job started: the free resources and the running entries changed, so will-run
        answers, the timeline and the preemptors' states are stale (and, with bf_busy_nodes,
        which nodes are busy)."""
        nonlocal timeline, busy
        timeline = None
        if busy is not None:
            busy = _busy_nodes(cy)
        memo.clear()
        pre_states.clear()
        pre_memo.clear()
        pre_timelines.clear()

    def reserve(b: float, e: float, nodes: frozenset, jid: int, arr: int | None) -> bool:
        """Reserve ``nodes`` over ``[b, e)`` for job ``jid`` (of array ``arr``); False, and the
        cycle ends, when the map already holds bf_node_space_size records (slurmctld's "table
        size limit reached": the job keeps its plan without the reservation)."""
        nonlocal map_full
        if space.records >= map_size:
            map_full = True
            return False
        space.add(b, e, nodes, jid, res)
        if arr is not None:
            array_resv[arr] = array_resv.get(arr, 0) + 1
        return True
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
    #: id of a will-run placement -> (the placement, its nodes, their bit set): the same answer
    #: is tried against the map by record after record (the placement is held, so its id is
    #: not reused within the cycle)
    pl_nodes: dict[int, tuple] = {}
    #: QOS with the flag NoReserve, which counts only with a PreemptMode (slurmctld's preempt_mode)
    #: partitions whose jobs share CPUs without gang (``SlurmPolicy.cpu_share_parts``)
    share_parts = pol.cpu_share_parts
    #: array job id -> its tasks given a reservation in this cycle (bf_max_job_array_resv: a
    #: pending array is one queue record, and 22.05 tests its next task only while fewer
    #: than that many got one)
    array_resv: dict[int, int] = {}
    map_full = False  # the map reached bf_node_space_size records: the cycle ends
    #: assoc_limit_stop: QOS name -> the planned start of a job whose start failed on that
    #: QOS's group limit in this cycle (22.05's blocked_until, cleared as a cycle begins)
    qos_blocked: dict[str, float] = {}
    moving = False  # a start failed on a limit under assoc_limit_stop (planned from ``now`` on)
    map_size = s.bf_node_space_size
    no_reserve_qos = frozenset(name for name, q in pol.qos.items() if limits.has_flag(q, "noreserve")
                               ) if s.preempt_mode.upper() != "OFF" else frozenset()
    unset = _UNSET
    in_started, in_skip, in_preempting = cy.started, cy.skip, cy.preempting

    def plan(jid: int, t: float) -> None:
        """A planned start for ``jid``; a job in several partitions keeps its earliest one
        (slurmctld restores the start time an earlier record gave when a later one is later;
        a real 22.05.8 showed a two-partition job the earlier of its two plans)."""
        prev = planned.get(jid)
        if prev is None or t < prev:
            planned[jid] = t

    limit_reason, array_limit = cy.limit_reason, cy.array_limit
    # an exclusive job's whole nodes count at a start only (finding 53); under
    # assoc_limit_stop no limit is tested before will-run or a reservation, and a start that
    # fails on one is planned later instead (finding 82)
    assoc_stop = bool(s.assoc_limit_stop)
    start_limit = (lambda job, info: None) if assoc_stop else cy.start_limit
    placed_limit = cy.placed_limit
    license_limit = cy.license_limit if cy.licenses is not None else None
    def counted(rec) -> bool:
        """Whether the loop below counts ``rec`` against bf_max_job_test when it gets to it,
        whatever the reservations made meanwhile (until the next start or preemption, which
        may change a limit's answer): the tests before ``tested += 1``, those of an array task
        aside (``array_resv`` grows with reservations), so that a count of such records gives
        the furthest record the cycle can test (``_Startable.any_from``)."""
        job = rec.job
        jid = job.id
        if jid in in_started or jid in in_skip or jid in in_preempting or job.wl.array_job_id is not None:
            return False
        if not assoc_stop and limit_reason(job, rec.part, placed=False) is not None:
            return False
        if license_limit is not None and license_limit(job) is not None:
            return False
        fixed = rec.bf
        if fixed is None:
            fixed = rec.bf = _record_fixed(pol, rec, no_reserve_qos, part_mask, shape_of, shapes)
        return not fixed[13]  # (too_many)
    # with bf_max_job_user the count depends on the order of users: no bound is drawn then
    budget = _Budget(records, counted, in_started, in_preempting,
                     (assoc_stop or not s.limits_enforced) and license_limit is None
                     ) if not pol.record and max_test and not max_user else None
    # Without plans to record, only the cycle's starts and preemptions matter to what follows:
    # once no later record can start now, the rest of the cycle would only add reservations
    # and is skipped (``_Startable``).
    prune = None if pol.record else _Startable(pol, cy, records, share_parts, pre_states, shape_of, shapes,
                                               no_reserve_qos, part_mask, budget)
    for index, rec in enumerate(records):
        if prune is not None:
            state = (started, len(cy.preempting), len(cy.victims))
            if state != prune.state:
                prune.changed(state)
            if not prune.any_from(index, space, now, len(space.resv), max_test - tested):
                break
        job = rec.job
        jid = job.id
        if jid in in_started or jid in in_skip or jid in in_preempting:
            continue
        if map_full or (max_test and tested >= max_test):
            break
        if max_start and started >= max_start:
            break
        arr = job.wl.array_job_id
        if arr is not None and array_resv.get(arr, 0) >= max_array_resv:
            continue
        fixed = rec.bf
        if fixed is None:
            fixed = rec.bf = _record_fixed(pol, rec, no_reserve_qos, part_mask, shape_of, shapes)
        user, skey, tl, short, no_reserve, pname, pmask, shape, min_nodes, test_only, okey, okey_test, allowed, \
            too_many = fixed
        info = rec.part
        # under assoc_limit_stop backfill tests a job its limits hold too (22.05's
        # acct_policy_job_runnable_pre_select is skipped): it fails at its start (below)
        if (not assoc_stop and limit_reason(job, info, placed=False) is not None) or array_limit(job) is not None:
            continue
        if max_user:  # bf_max_job_user: tested, then counted, before the tests below
            if per_user.get(user, 0) >= max_user:
                continue
            per_user[user] = per_user.get(user, 0) + 1  # (``_job_exceeds_max_bf_param``)
        if license_limit is not None and license_limit(job) is not None:
            continue  # licenses busy: skipped, no reservation (22.05 without bf_licenses)
        if too_many:
            continue
        tested += 1
        if test_only:
            okey = okey_test
        elif min_age and now - cy.accrue.get(jid, job.eligible) < min_age:
            test_only = True
            okey = okey_test
        elif one_resv and jid in planned:
            # bf_one_resv_per_job: an earlier record of this job (another partition) has a
            # start time in this cycle, so this one is only tested to start now
            test_only = True
            okey = okey_test
        # assoc_limit_stop: a QOS whose limit failed a start in this cycle holds its jobs back
        # until that job's planned start (``qos_blocked``): such a record's tries start there,
        # and it neither reads nor leaves answers for its kind
        blocked = _blocked_until(qos_blocked, skey[0], info.part.qos) if qos_blocked else 0.0
        own = blocked > now  # answers of this record alone (its walk included)
        kept = unset if own else outcome.get(okey, unset)
        if kept is not unset:
            if kept is not None:
                plan(jid, kept)
            continue
        kept = None
        limited = False  # stopped by its whole nodes' limits: an answer of this job, not its kind
        mark = (len(space.resv), started, len(cy.preempting), len(cy.victims))
        version = len(space.touched)
        #: the will-run state without the jobs this one may preempt (``_preemptable_gone``),
        #: asked once a record: it reads only the record's QOS and partition and the victims
        #: chosen so far, which change only where a try ends the record's loop
        pre = unset
        walk = None if own else walks.get(okey)
        if walk is None:
            first, later_start, read, states, reads = 0, (blocked if own else now), -math.inf, [], []
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
            if allowed is not None:
                # --exclude/--constraint: slurmctld takes such nodes out of the window's nodes
                # before it counts them and tests the job, so will-run batches only running
                # jobs on the rest
                avail &= allowed
            if avail.bit_count() < min_nodes:
                if later_start and not test_only:
                    continue
                break
            # the usable nodes: ``avail`` (within the partition's nodes), None when all of them;
            # as a set only where will-run or a preemption needs one
            usable = unset
            # will_run's raw answer depends on the pod shapes, the partition and the usable
            # nodes only (free resources and running jobs are fixed until a job starts; the
            # window start only raises the estimate): a deep queue repeats the same few shapes,
            # so answers are shared between tries and jobs
            memo_key = (shape, pname, avail)
            hit = memo.get(memo_key)
            if hit is None:
                usable = _usable(avail, pmask, usable_of)
                ekey = (pname, avail)
                elig = eligible.get(ekey)
                if elig is None:
                    elig = eligible[ekey] = _eligible(info, cy.free.nodes, usable, avail, ok_masks)
                hit = will_run_raw(job.wl, info.nodes, usable, cy.free, ends, timeline,
                                   pol.epoch, now, timeline_of, elig, busy)
                memo[memo_key] = hit
            est, pl = hit
            by_preempting = False
            if preemption and est != neg_inf:
                # a job that may preempt: will-run removes the jobs it may preempt first
                # (spec §2.4.3); "fits once they are gone" reads as now, and backfill starts
                # the preemption
                if pre is unset:
                    pre = _preemptable_gone(pre_states, cy, job, info, skey)
                if pre is not None:
                    pkey = (pre[0], shape, pname, avail)
                    phit = pre_memo.get(pkey)
                    if phit is None:
                        if usable is unset:
                            usable = _usable(avail, pmask, usable_of)
                        tl_pre = pre_timelines.get(pre[0])
                        if tl_pre is None:
                            tl_pre = pre_timelines[pre[0]] = NodeTimeline(pre[1], pre[2])
                        phit = pre_memo[pkey] = will_run_raw(
                            job.wl, info.nodes, usable, pre[1], pre[2], tl_pre, pol.epoch, now,
                            None, eligible.get((pname, avail)), busy)
                    est, pl = phit
                    by_preempting = est == neg_inf
            if ((est is None or est > now) and start_res <= now and pname in share_parts
                    and not (assoc_stop and limit_reason(job, info) is not None)):
                # OverSubscribe without gang: will-run may also place the job in a
                # co-allocation row of its partition, on nodes no reservation claims for its
                # whole limit; it then starts at once beside the jobs holding those CPUs
                if usable is unset:
                    usable = _usable(avail, pmask, usable_of)
                where = cy.off_completing(info, usable)
                whole = start_limit(job, info)
                if whole is not None:
                    if cy.try_coallocate(job, info, where, VIA_BACKFILL, dry_run=True):
                        # the start fails on its whole nodes' limits: skipped, no reservation
                        cy.reason(job, whole)
                        limited = True
                        break
                else:
                    got = cy.try_coallocate(job, info, where, VIA_BACKFILL, limit=short)
                    if isinstance(got, str):
                        # the row's selection breaks a limit: skipped, no reservation
                        cy.reason(job, got)
                        limited = True
                        break
                    if got:
                        forget_answers()
                        started += 1
                        break
            if est is None:
                if later_start and not test_only:
                    continue
                break
            fits_now = est <= now  # (before a blocked QOS's start raises it)
            if est < start_res:
                est = start_res
            held = False  # fits now but waits a second for a COMPLETING node
            if est <= now and cy.completing and not cy.completing.isdisjoint(p[0] for p in pl):
                # it fits now, but on a node still COMPLETING (a replay's holds): a real 22.05
                # plans it for the next second there instead of starting it
                est = pol.whole_second(now) + 1.0
                later_start = 0
                held = True
            refused = False  # assoc_limit_stop: its start failed on a limit, planned later
            if est <= now and assoc_stop:
                over = limit_reason(job, info)
                if over is None and not by_preempting:
                    over = placed_limit(job, info, pl)
                if over is not None:
                    # 22.05's _start_job fails (ESLURM_ACCOUNTING_POLICY) and, under
                    # assoc_limit_stop, the job is planned at ``later_start`` (where a node its
                    # window lacked frees), else 500 s on, and goes on as any later start: a
                    # reservation on will-run's nodes (no limit test before it), or a try from
                    # there where they are reserved meanwhile; a QOS group limit holds that
                    # QOS's later jobs back until then
                    cy.reason(job, over)
                    est = later_start if later_start else pol.whole_second(now) + _ACCOUNTING_RETRY
                    refused = limited = own = moving = True
                    if over.startswith("QOSGrp") and over not in limits.PRE_SELECT_REASONS:  # (GrpJobs: none)
                        qname = cy.blocking_qos(job, info, over)
                        if qname is not None and qos_blocked.get(qname, 0.0) < est:
                            qos_blocked[qname] = est
            if est <= now and by_preempting:
                whole = start_limit(job, info)
                if whole is not None:
                    # select_nodes tests the whole nodes' limits before it preempts (finding 53)
                    cy.reason(job, whole)
                    limited = True
                    break
                # slurmctld's _start_job: select_nodes preempts (a SUSPEND preemptor may start
                # at once); with victims signalled it fails ("nodes busy") and the cycle reserves
                # the will-run nodes for the preemptor from now (a real 22.05.8,
                # docs/differential.md, finding 25)
                if usable is unset:
                    usable = _usable(avail, pmask, usable_of)
                where = cy.off_completing(info, usable)
                preempted = preempt.try_preempt(cy, job, info, where, VIA_BACKFILL)
                if isinstance(preempted, str):  # the selection breaks a limit: skipped, no reservation
                    cy.reason(job, preempted)
                    limited = True
                    break
                if preempted:
                    cy.preempting.add(job.id)
                    pre_states.clear()  # the victims chosen are no candidates any more
                    pre_memo.clear()
                    pre_timelines.clear()
                    if job.id in cy.started:
                        timeline = None
                        memo.clear()
                        if busy is not None:
                            busy = _busy_nodes(cy)
                        started += 1
                        break
                plan(jid, now)
                kept = now
                if not no_reserve:
                    reserve(down(now), down(now + tl), frozenset(p[0] for p in pl), job.id, arr)
                break
            if est <= now:
                whole = start_limit(job, info)
                if whole is not None:
                    # slurmctld's _start_job fails on the limits of the job's whole nodes
                    # (ESLURM_ACCOUNTING_POLICY): the job is skipped, no reservation
                    cy.reason(job, whole)
                    limited = True
                    break
                if cy.completing or contiguous(job.wl):
                    # slurmctld's _start_job selects again (select_nodes) on the window's
                    # nodes, where cons_tres now skips the COMPLETING ones that will-run
                    # counted: the runs of fitting nodes, and so the choice, may differ (rich
                    # seed 5 at 631.5 s: gpu02 completing, a real 22.05.8 took gpu01, the
                    # first of two lone nodes, where will-run's runs had made it gpu04;
                    # finding 57); and a ``--contiguous`` job's first test there may fail
                    # where will-run's passed (``Cycle.fits_all_cores``; probe p167d)
                    if usable is unset:
                        usable = _usable(avail, pmask, usable_of)
                    where = cy.off_completing(info, usable)
                    again = place(job.wl, info.nodes, cy.free, where) if cy.completing else pl
                    if again is None or not cy.fits_all_cores(job, info, where):
                        # "planned start failed": the will-run nodes are reserved from now
                        # (a real 22.05.8 planned such a contiguous job at once on gpu01-02;
                        # not seen: a job will-run places off the COMPLETING nodes fits there)
                        plan(jid, now)
                        kept = now
                        if not assoc_stop and placed_limit(job, info, pl, True) is not None:
                            limited = True  # (the test before a reservation, as below)
                        elif not no_reserve:
                            reserve(down(now), down(now + tl), frozenset(p[0] for p in pl), job.id, arr)
                        break
                    pl = again
                whole = placed_limit(job, info, pl)
                if whole is not None:  # the selection breaks a limit: skipped, no reservation
                    cy.reason(job, whole)
                    limited = True
                    break
                cy.start(job, pl, info, VIA_BACKFILL, limit=short)
                forget_answers()
                started += 1
                # no map entry: a job backfill starts is seen through the free resources and
                # its limit end, like any running job; a real 22.05 starts several jobs on one
                # node in one cycle (differential test, docs/differential.md)
                break
            if test_only:
                # tested to start now only (bf_min_prio_reserve, bf_min_age_reserve,
                # bf_one_resv_per_job): select's will-run does not look past now, so the job
                # gets no start time (a real 22.05.8 showed StartTime=Unknown) unless it fits
                # now and only waits for a COMPLETING node, or its start failed on a limit, or it
                # fits now but its QOS is blocked (22.05 keeps the raised start, no reservation)
                if held or refused or (own and fits_now):
                    plan(jid, est)
                    kept = est
                break
            if later_start and est > later_start:
                continue  # slurmctld's "Try later": from the slot that frees a node
            if est > horizon:
                plan(jid, est)  # beyond bf_window: no reservation
                kept = est
                break
            got = pl_nodes.get(id(pl))
            if got is None or got[0] is not pl:
                nodes = frozenset(p[0] for p in pl)
                mask = 0
                for n in nodes:
                    mask |= 1 << n
                got = pl_nodes[id(pl)] = (pl, nodes, mask)
            nodes, mask = got[1], got[2]
            b, e = down(est), down(est + tl)
            if space.overlaps(mask, b, e):
                if space.reach > read:
                    read = space.reach
                later_start = est  # its nodes are planned for another job meanwhile
                continue
            if not assoc_stop and placed_limit(job, info, pl, True) is not None:
                # the limits on will-run's selection (backfill's test before a reservation):
                # the job keeps will-run's start time, but no reservation
                plan(jid, est)
                kept = est
                limited = True
                break
            plan(jid, est)
            kept = est
            if not no_reserve:
                reserve(b, e, nodes, job.id, arr)
            break
        after = (len(space.resv), started, len(cy.preempting), len(cy.victims))
        if after == mark:
            if not limited and not own:
                outcome[okey] = kept
        else:
            outcome.clear()
        if after[1:] != mark[1:]:
            walks.clear()  # free resources, running jobs or victims changed
        elif own:
            if walk is not None:  # its tries, taken up from its kind's, are its own
                walks.pop(okey, None)
        else:
            walks[okey] = (version, states, reads)
    pol.planned = planned
    # a start planned from this cycle's own instant moves with the next cycle even where
    # nothing else changes: that cycle is not skipped (``SlurmPolicy.decide``)
    pol.bf_moving = moving
    # Every change to the free resources or the running entries in this cycle went through
    # ``cy.start``, after which ``memo`` and ``timeline`` were dropped: they describe the state
    # the cycle ends with, which the next cycle may find again.
    carry.memo, carry.timeline, carry.eligible = memo, timeline, eligible
    carry.state = _state_of(cy)
    carry.busy = busy
    if pol.record:
        if map_full:
            pol.bf_full_log[now] = True
        pol.plan_log[now] = dict(planned)
        pol.resv_log[now] = [(jid, sorted(nodes), b, e) for b, e, nodes, jid in space.resv]


class _Startable:
    """Which records of a backfill cycle might still start now, for a cycle that ends once none
    can (without plans to record, nothing else it does matters to what follows).

    A backfill start needs will-run's placement now, so every pod set of the job must fit now
    on as many of its partition's up, undrained nodes as it spreads over (in the free state or,
    for a job that may preempt, in the state without the jobs it may preempt, as will-run tests
    it) and on nodes its first TRY_LATER window leaves free. Within a cycle reservations and
    starts only take resources away, so a record failing that test cannot start later in the
    cycle. A preemption may give resources back: then every record is asked again. A record of
    a partition whose jobs share CPUs (a co-allocation row may take it) always might start, as
    does, under enforced limits, a walk for GPUs per node: what its test leaves behind outlives
    the cycle.

    The records are scanned from the end: ``last`` is the latest one that passes the test
    without the map (each record is looked at once between two starts), and it is tested
    against the map again after every reservation; the answer depends on the record's shape,
    QOS and partition only (``rec.sk``), so a deep queue asks it a few times per cycle.

    bf_max_job_test ends a deep queue's cycle before its last records: a record the cycle
    cannot reach does not keep it going. Until the next start or preemption, the records the
    loop will certainly count against that limit are known in advance (``counted``), so the
    one that spends the last test bounds every record tested (``reach``): on the month's busy
    afternoons the latest record that might start often lies far beyond it, and the cycle
    went on testing (and reserving for) a thousand records that start nothing."""

    __slots__ = ("budget", "checked", "cursor", "cy", "fits", "last", "no_reserve_qos", "part_mask", "pol",
                 "pre_states", "reach", "records", "shape_of", "shapes", "share_parts", "state", "top")

    def __init__(self, pol, cy, records, share_parts, pre_states: dict, shape_of: dict, shapes: dict,
                 no_reserve_qos: frozenset, part_mask: dict[str, int], budget: _Budget | None = None) -> None:
        self.pol, self.cy, self.records, self.share_parts = pol, cy, records, share_parts
        self.budget = budget  # where bf_max_job_test bounds the records tested (None: nowhere)
        #: the cycle's memos, shared with its TRY_LATER loop (``_record_fixed``'s arguments too)
        self.pre_states, self.shape_of, self.shapes = pre_states, shape_of, shapes
        self.no_reserve_qos, self.part_mask = no_reserve_qos, part_mask
        #: (starts, preemptors, victims) the answers hold for
        self.state: tuple = (0, 0, 0)
        #: start key -> ``_fit_masks`` where the record might start (None: always), False where not
        self.fits: dict[tuple, list | bool | None] = {}
        self.cursor = len(records) - 1  # records after it are known not to start
        self.last = -1  # a record at or before ``cursor`` found to pass, or -1 (none found yet)
        self.checked = -1  # reservations in the map when ``last`` was last tested against it
        #: until the next start or preemption: the furthest record the cycle can test (None:
        #: not drawn yet), and a frontier below ``cursor`` that the bound put records after
        #: (None: ``cursor`` itself). Both hold for one state only (a start may lift a limit's
        #: count and so the bound), so they never move ``cursor``, which holds across starts.
        self.reach: int | None = None
        self.top: int | None = None

    def changed(self, state: tuple) -> None:
        """A start or a preemption: answers are asked again (all records after a preemption;
        after a start only up to ``cursor``, since a start only takes resources)."""
        if state[1:] != self.state[1:]:
            self.cursor = len(self.records) - 1
        elif self.last >= 0 and self.top is None:
            # (a ``last`` found below the bound says nothing of the records after it)
            self.cursor = self.last
        self.state = state
        self.fits.clear()
        self.last = -1
        self.checked = -1
        self.reach = None
        self.top = None

    def any_from(self, index: int, space: NodeSpace, now: float, version: int, left: int) -> bool:
        """Whether a record at ``index`` or later might still start now (``version``: the
        map's reservation count; ``left``: the tests bf_max_job_test leaves, read only with a
        ``budget``)."""
        records = self.records
        while True:
            if self.last < 0:
                self.last = self._scan_back(index)
                self.checked = -1
                if self.last < 0:
                    return False
            if self.last < index:
                return False
            if self.budget is not None and self.last >= index + left:
                # (before that every record is within reach: each test is at most one record)
                if self.reach is None:
                    self.reach = self.budget.reach(index, left)
                if self.last > self.reach:
                    self.top = self.reach
                    self.last = -1
                    continue
            if self.checked == version:
                return True
            rec = records[self.last]
            masks = self.fits[rec.sk]
            if masks is None:
                self.checked = version
                return True
            fixed = rec.bf
            if fixed is None:
                fixed = rec.bf = _record_fixed(self.pol, rec, self.no_reserve_qos, self.part_mask, self.shape_of,
                                               self.shapes)
            avail, _later = space.window(now, now + fixed[2], fixed[6])
            if fixed[12] is not None:  # --exclude/--constraint
                avail &= fixed[12]
            if _fits_within(masks, avail):
                self.checked = version
                return True
            # its window's nodes are reserved: it cannot start in this cycle any more
            if self.top is None:
                self.cursor = self.last - 1
            else:
                self.top = self.last - 1
            self.last = -1

    def _scan_back(self, first: int) -> int:
        """The latest record from ``first`` to ``cursor`` (or to ``top`` below it) that might
        start now, the map aside (-1: none); the frontier scanned from moves down to it."""
        records, fits = self.records, self.fits
        top = self.top  # (always below ``cursor``, which does not move while it is set)
        k = self.cursor if top is None else top
        while k >= first:
            rec = records[k]
            key = rec.sk
            if key is None:
                key = rec.sk = (_shape_number(rec.job, self.shape_of, self.shapes), self.pol.req(rec.job).qos,
                                rec.part.name)
            got = fits.get(key, _UNSET)
            if got is _UNSET:
                got = self._fits(rec, key)
            if got is not False:
                break
            k -= 1
        if top is None:
            self.cursor = k
        else:
            self.top = k
        return k if k >= first else -1

    def _fits(self, rec, key: tuple):
        """``fits[key]``, found with ``rec`` (one record of that key)."""
        info = rec.part
        if info.name in self.share_parts:
            got = None
        elif self.pol.s.limits_enforced and any(walks_gpus_per_node(ps) for ps in rec.job.wl.pod_sets):
            # its limits test before a reservation leaves its GPUs per node times its nodes on
            # the job (``SlurmPolicy.walk_gres``), which the next main pass reads when its
            # selection fails: the cycle goes on to it as the full cycle does (found by a review)
            got = None
        else:
            cy = self.cy
            pre = _preemptable_gone(self.pre_states, cy, rec.job, info, key[1:]) if self.pol.s.preemption else None
            masks = _fit_masks(rec, cy.free if pre is None else pre[1])
            got = masks if _fits_within(masks, _part_bits(info, self.part_mask)) else False
        self.fits[key] = got
        return got


class _Budget:
    """Where bf_max_job_test ends a cycle: the records its loop will certainly count against
    the limit (``counted``) and so the last one it can test (``reach``).

    Where no limit or license is tested (``static``), a record's count changes within a cycle
    only when its job starts or preempts, so the counts are summed once per cycle and a reach
    is a bisection, corrected for the jobs started since (a deep queue draws a bound after
    every start, a thousand records each); otherwise each bound counts the records anew."""

    __slots__ = ("counted", "positions", "prefix", "preempting", "records", "started", "static", "summed_with")

    def __init__(self, records: list, counted, started, preempting: set, static: bool) -> None:
        self.records, self.counted, self.static = records, counted, static
        self.started, self.preempting = started, preempting
        self.prefix: list[int] | None = None  # counts summed over records[:k], when first needed
        self.positions: dict[int, list[int]] = {}  # job id -> its counted records' indices
        self.summed_with: tuple = ((), ())  # the jobs started and preempting when summed

    def reach(self, index: int, left: int) -> int:
        """The index of the record at or after ``index`` that spends the last of ``left``
        tests, or the last record: no record after it is tested before the next start or
        preemption."""
        records = self.records
        if left <= 0:
            return index - 1
        if not self.static:
            counted = self.counted
            for k in range(index, len(records)):
                if counted(records[k]):
                    left -= 1
                    if not left:
                        return k
            return len(records) - 1
        prefix = self.prefix
        if prefix is None:
            prefix = self.prefix = self._sum()
        # records summed as counted whose jobs started or preempt since: counted no more
        was_started, was_preempting = self.summed_with
        since = [jid for jid in self.started if jid not in was_started]
        since += [jid for jid in self.preempting if jid not in was_preempting]
        gone = sorted({k for jid in since for k in self.positions.get(jid, ()) if k >= index})
        n = len(records)
        extra = 0
        while True:
            k = bisect.bisect_left(prefix, prefix[index] + left + extra, index + 1) - 1
            if k >= n:
                return n - 1
            now_gone = bisect.bisect_right(gone, k)
            if now_gone == extra:
                return k
            extra = now_gone

    def _sum(self) -> list[int]:
        counted, positions = self.counted, self.positions
        self.summed_with = (set(self.started), set(self.preempting))
        prefix = [0]
        total = 0
        for k, rec in enumerate(self.records):
            if counted(rec):
                total += 1
                positions.setdefault(rec.job.id, []).append(k)
            prefix.append(total)
        return prefix


def _preemptable_gone(pre_states: dict, cy, job, info, skey: tuple):
    """``preempt.without_preemptable`` for a job of (QOS, partition) ``skey``, memoised per
    cycle in ``pre_states`` until a start or a preemption clears it (it depends on the job
    only through its QOS and partition)."""
    pre = pre_states.get(skey, _UNSET)
    if pre is _UNSET:
        pre = pre_states[skey] = preempt.without_preemptable(cy, job, info, cy.ends)
    return pre


def _part_bits(info, part_mask: dict[str, int]) -> int:
    """The bit set of partition ``info``'s nodes (memoised per cycle in ``part_mask``)."""
    bits = part_mask.get(info.name)
    if bits is None:
        bits = 0
        for n in info.node_set:
            bits |= 1 << n
        part_mask[info.name] = bits
    return bits


def _fit_masks(rec, free: Free) -> list[tuple[int, int]]:
    """Per pod set of ``rec``'s job: the bit set of its partition's up, undrained nodes where
    one pod fits in ``free``, and how many of them the pod set needs."""
    nodes = eligible_nodes(rec.part.nodes, free.nodes)
    out = []
    for ps in rec.job.wl.pod_sets:
        if ps.count <= 0:
            continue
        mask = 0
        for n in nodes:
            if fits_now(free, n, ps):
                mask |= 1 << n
        out.append((mask, _spread_need(ps)))
    return out


def _fits_within(masks: list[tuple[int, int]], nodes: int) -> bool:
    """Whether every pod set finds as many nodes as it needs among ``nodes``."""
    return all((mask & nodes).bit_count() >= need for mask, need in masks)


def _usable(avail: int, pmask: int, usable_of: dict[int, frozenset]) -> frozenset | None:
    """The usable nodes of a window as will-run takes them: None for all the partition's nodes
    (``pmask``), else the set of ``avail``'s nodes (memoised: ``usable_of``)."""
    if avail == pmask:
        return None
    usable = usable_of.get(avail)
    if usable is None:
        usable = usable_of[avail] = frozenset(mask_nodes(avail))
    return usable


def _eligible(info, nodes, usable: frozenset | None, avail: int, ok_masks: dict) -> tuple[list[int], int]:
    """``eligible_nodes`` of the partition's nodes within ``usable`` (``avail``: its bit set,
    a subset of the partition's nodes; ``usable`` None: all of them), and their bit set.

    ``ok_masks`` (partition name -> (bit set of its up, undrained nodes, whether its node
    list is in index order), per cycle) turns each call into an AND and a table lookup: a
    cycle asks for many usable sets of one partition."""
    got = ok_masks.get(info.name)
    if got is None:
        bits = 0
        for n in eligible_nodes(info.nodes, nodes, None):
            bits |= 1 << n
        cand = info.nodes
        got = ok_masks[info.name] = (bits, all(cand[k] < cand[k + 1] for k in range(len(cand) - 1)))
    ok, ordered = got
    bits = ok if usable is None else ok & avail
    if ordered:
        return mask_nodes(bits), bits
    return [i for i in info.nodes if bits >> i & 1], bits


_UNSET = object()


def _blocked_until(qos_blocked: dict[str, float], qos: str | None, part_qos: str | None) -> float:
    """Until when the job's QOS or its partition's QOS holds it back in this cycle (0: not)."""
    return max(qos_blocked.get(qos or "", 0.0), qos_blocked.get(part_qos or "", 0.0))


def insert_end(ends: list, end: float, job_id: int, placement, free_at: float) -> None:
    # job ids are unique among running jobs: plain tuple order is (end, job id) order
    bisect.insort(ends, (end, job_id, placement, free_at))
