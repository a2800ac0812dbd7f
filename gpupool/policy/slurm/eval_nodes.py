"""select/cons_tres's walk over runs of consecutive nodes (22.05 ``_eval_nodes``): which nodes a
multi-node job gets and how many CPUs (or tasks) each one takes.

The rule, read from the 22.05.8 source and checked on a real 22.05.8 (docs/differential.md
findings 47 and 48): the usable nodes form runs of consecutive indices, per weight, lowest
weight first. Runs are compared in index order by their free CPUs: a run that holds what the
job still needs (CPUs and nodes) replaces one that does not or one with more CPUs; one that
does not replaces any with fewer CPUs, even one that does (``-N2`` with gpu01-02 at 2 free
CPUs, gpu03 full and gpu04 idle ran on gpu04 first, then gpu01). In the chosen run the nodes
go in index order, each taking all it has but one for each node still to come, the last node
only where it holds all that is left; a run entered for the last node alone (for a job that
may take more nodes, any run entered once its least count is met: finding 105) gives it to the
node with the fewest that holds what is left. ``--nodelist`` nodes come first.

Pure functions of counts: the callers (``select._walked``, ``split_tasks.split_nodes``)
turn free resources into counts and the answer into pods.
"""
from __future__ import annotations


class _Shares:
    """The nodes taken so far and what is left to place: each node takes all the tasks it has
    room for but one for each node still to come (cons_tres's ``_cpus_to_use``)."""

    def __init__(self, tasks: dict[int, int], nodes: int, total: int, keep: dict[int, int] | None = None,
                 spill: bool = False, least: int | None = None, whole: bool = False,
                 most: int | None = None, floor: int = 1) -> None:
        self.tasks = tasks
        #: the least a node taken offers (slurmctld's pn_min_cpus where counted in CPUs)
        self.floor = floor
        #: with ``spill``, the nodes that may still be taken (None: no cap): the last of them
        #: must hold what is left (slurmctld's max_nodes)
        self.most_left = most
        #: each node taken gives all it has (an exclusive job: ``_cpus_to_use`` leaves whole
        #: nodes whole)
        self.whole = whole
        #: more nodes than ``nodes`` may be taken, each taking what it has, until the tasks
        #: are placed (``-n T`` with no ``--nodes``: one node at least, as many as it takes)
        self.spill = spill
        #: per node, the tasks it leaves for each later node when more than one: a core's
        #: worth where a task is less than a core (``split_tasks.kept_per_node``)
        self.keep = keep
        self.out: list[tuple[int, int]] = []
        self.placed: set[int] = set()
        self.left_nodes, self.left = nodes, total
        #: the nodes still to take at least (``--nodes=A-B``: A, ``nodes`` being B; else
        #: ``nodes``): each node taken leaves a task for each of these but itself
        #: (``_cpus_to_use`` counts slurmctld's min_rem_nodes), and once the tasks are placed
        #: the walk may end with no more than these taken
        self.least_left = nodes if least is None else least

    def offer(self, i: int, required: bool = False) -> None:
        """Take node ``i`` unless it is the last one and cannot hold what is left (a required
        node is taken anyway: the choice then fails)."""
        have = self.tasks[i]
        if not required and have < self.left and (self.most_left == 1 if self.spill else self.left_nodes == 1):
            return
        keep = 1 if self.keep is None else self.keep.get(i, 1)
        take = have if self.whole else min(have, max(self.floor, self.left - max(0, self.least_left - 1) * keep))
        self.out.append((i, take))
        self.placed.add(i)
        self.left -= take
        self.left_nodes -= 1
        self.least_left -= 1
        if self.most_left is not None:
            self.most_left -= 1

    @property
    def done(self) -> bool:
        return (self.left_nodes <= 0 and (not self.spill or self.left <= 0)) or self.most_left == 0

    def answer(self) -> list[tuple[int, int]] | None:
        """The nodes taken when they hold the tasks: all ``nodes`` of them, or, for a range,
        its least count at least (``_eval_nodes``' last test, ``_enough_nodes``)."""
        return self.out if self.left <= 0 and (self.done or self.least_left <= 0) else None


def beats(w, ok: bool, size: int, best_w, best_ok: bool, best_size: int) -> bool:
    """Whether a run of weight ``w`` that holds what is left (``ok``) with ``size`` free
    resources replaces the best run so far in ``_eval_nodes``: a lower weight, or at equal
    weight one that holds what is left over one that does not, the smaller of two that do, and
    the larger of two that do not (even over one that does, as the source reads)."""
    return w < best_w or (w == best_w and ((ok and not best_ok) or (ok and size < best_size)
                                           or (not ok and size > best_size)))


def node_order(weight, busy: int | None, cpu: list[int] | None, total: list[int]):
    """How cons_tres's other walks arrange the nodes they may take (a function of those nodes
    giving them in the order taken), or None for the walk over runs: bf_busy_nodes' later
    starts (``_eval_nodes_busy``: within each weight the nodes busy now first, then by index)
    or, given the free ``cpu`` and ``total`` CPUs, a least-loaded partition
    (``_eval_nodes_lln``, ``least_loaded_order``)."""
    if busy is not None:
        return lambda nodes: sorted(nodes, key=lambda i: (weight[i], not (busy >> i) & 1, i))
    if cpu is not None:
        return lambda nodes: least_loaded_order(nodes, weight, cpu, total)
    return None


def walk_order(weight, busy: int | None, least_loaded: bool, free):
    """``node_order`` for a walk that may be bf_busy_nodes' (``busy``, which wins) or an LLN
    partition's (``least_loaded``), read from the free resources ``free`` (a ``select.Free``);
    None for neither."""
    return node_order(weight, busy, free.cpu if least_loaded else None, free.nodes.cpu_total)


def least_loaded_order(nodes, weight, cpu: list[int], total: list[int]) -> list[int]:
    """``nodes`` in the order ``_eval_nodes_lln`` takes them: per weight, lowest first, the
    node with the largest share of its CPUs free, the first in index order among equals, each
    search stopping early at a node with as many free CPUs as the node taken before it (in the
    same weight) — the search's own shortcut, which passes over a better node further on where
    nodes differ in size. A real 22.05.8 (probe p172: gpu01 and gpu03 of 16 CPUs, gpu02 and
    gpu04 of 32) ran ``-c1`` on gpu01 at 8 of 16 free rather than gpu02 at 12 of 32, and with
    8 of 16, 8 of 32 and 8 of 16 free on gpu01-03 ran ``-n12`` as gpu01 8 + gpu02 4 (the
    shortcut), not on gpu03. Where every node has as many CPUs the order is the most free CPUs
    first, then by index, which the shortcut does not change."""
    nodes = list(nodes)
    if len({total[i] for i in nodes}) <= 1:
        return sorted(nodes, key=lambda i: (weight[i], -cpu[i], i))
    out: list[int] = []
    by_weight: dict = {}
    for i in sorted(nodes):
        by_weight.setdefault(weight[i], []).append(i)
    for w in sorted(by_weight):
        rest = by_weight[w]
        last = -1
        while rest:
            best = -1
            for i in rest:
                # (a larger share: free over total, compared without division)
                if best < 0 or cpu[best] * total[i] < cpu[i] * total[best]:
                    best = i
                    if cpu[i] == last:
                        break
            out.append(best)
            rest.remove(best)
            last = cpu[best]
    return out


def pick_nodes(tasks: dict[int, int], nodes: int, total: int, weight, required: list[int],
               order=None, keep: dict[int, int] | None = None, spill: bool = False,
               least: int | None = None, whole: bool = False,
               most: int | None = None, floor: int = 1,
               contiguous: bool = False, rank: dict[int, int] | None = None,
               per_task: int = 1) -> list[tuple[int, int]] | None:
    """(node, tasks) for ``nodes`` nodes holding ``total`` tasks, as cons_tres's ``_eval_nodes``
    takes them from the nodes of ``tasks`` (each node's free tasks).

    The ``required`` nodes (``--nodelist``) first, in index order. Then runs of consecutive
    nodes of one weight, compared in index order (a run's count and nodes leave its required
    ones out): a run replaces the best so far when it is the first, when it holds a required
    node and the best does not, or when it weighs less; at equal weight a run that holds what
    is left (tasks and nodes) replaces one that does not or one with more tasks, and one that
    does not replaces one with fewer tasks, even one that holds it all (the real test reads
    so). In a run holding a required node the nodes above the first such node go first, then
    those below it, downwards (a real 22.05.8 ran ``-N3 -n8 -w gpu03`` as gpu02 1, gpu03 6,
    gpu04 1); in another run the nodes go in index order (``_Shares.offer``), and a run
    entered for the last node alone (with ``spill``, any run entered once the least count is
    met) gives it to the node with the fewest tasks that holds what is left. A chosen run is
    used up; the choice is made again until the job is placed.

    With ``order`` (``node_order``'s: least loaded nodes, or bf_busy_nodes' busy ones first) the
    nodes after the required ones are offered in that order instead of by runs. ``keep``
    (node -> tasks): what a node leaves for each later node, where more than one task.
    ``spill``: ``nodes`` is the least count and more may be taken (``_Shares.spill``): a real
    22.05.8 ran ``-n3`` on the node with the fewest free CPUs that held all three (4 free,
    passing one with 2), and ``-n20`` on nodes with 2, 4 and 16 free as 2 + 4 + 14.
    ``least`` (``--nodes=A-B``: A, ``nodes`` being B): the walk takes up to ``nodes`` nodes,
    a node leaving one task for each node still to come up to ``least`` only, a node taken
    once the tasks are placed offering one task; fewer than ``nodes`` nodes, ``least`` at
    least, do when the runs are used up (``_Shares.answer``; ``split_tasks.split_nodes``).
    ``whole``: each node taken gives all its tasks (an exclusive job's whole nodes). ``most``
    (with ``spill``): no more nodes than that, the last of them holding what is left
    (``--nodes=A-B`` beside ``--gpus-per-task``, ``nodes`` being A). ``floor``: the least a
    node taken offers (one task; in CPUs, slurmctld's pn_min_cpus).

    ``contiguous`` (``--contiguous``): weights do not end runs (each run weighs what its last
    node that is not required weighs); with required nodes only a run holding one counts; a run
    that holds what is left replaces the best so far where that one does not; and when the
    best run does not hold what is left the choice ends (a real 22.05.8 left ``-N2
    --contiguous`` pending with gpu01-02 at one free CPU each, gpu03 full and gpu04 idle: the
    larger run gpu04 beat the one that held the job; it ran ``-N2-3 --contiguous`` with gpu03
    full on gpu01, gpu02 and gpu04: once the least count is held, other runs add nodes;
    probe p162).

    ``rank`` (node -> its free CPUs, ``per_task`` a task): where given, runs are sized and
    tested in CPUs, not free tasks, and the node with the fewest CPUs takes the last node's
    share (``_eval_nodes`` counts CPUs; whole tasks only where memory is per CPU: a real
    22.05.8 ran ``-n4 -c3 --mem=100`` on a node with 15 free CPUs before one with 16, and
    ``-n4 -c3`` under DefMemPerCPU on the one with 16, probe p164; on gpu03 at 13 free CPUs
    before gpu01 at 14, probe p165)."""
    if len(tasks) < (nodes if least is None else least) or sum(tasks.values()) < total:
        return None
    shares = _Shares(tasks, nodes, total, keep, spill, least, whole, most, floor)
    for i in required:
        shares.offer(i, required=True)
    if order is not None:
        for i in order([i for i in tasks if i not in shares.placed]):
            if shares.done:
                break
            shares.offer(i)
        return shares.answer()
    sizes = tasks if rank is None else rank  # (the same nodes; runs sized in CPUs with ``rank``)
    runs = _runs(sizes, weight, required, contiguous)
    while runs and not shares.done:
        left, left_nodes, least_left = shares.left, shares.left_nodes, shares.least_left
        best_k = -1
        best_size = best_w = 0
        best_ok = best_anchored = False
        for k, (run, size, free_nodes, w, anchor) in enumerate(runs):
            if contiguous and required and anchor is None:
                continue  # (not a run of the required nodes)
            ok = size >= left * per_task and free_nodes >= least_left
            if best_k < 0 or (anchor is not None and not best_anchored) or beats(w, ok, size, best_w, best_ok, best_size) \
                    or (contiguous and ok and not best_ok):
                best_k, best_size, best_w, best_ok, best_anchored = k, size, w, ok, anchor is not None
        if best_k < 0 or (contiguous and not best_ok):
            break  # (no run, or no run that holds what is left: ``_eval_nodes``' last test)
        if contiguous and required and sum(r[4] is not None for r in runs) > 1:
            break  # the required nodes must lie in one run
        run, _size, _free, _w, anchor = runs.pop(best_k)
        if anchor is not None:
            walk = [i for i in run if i > anchor] + [i for i in run if i < anchor][::-1]
        elif (left_nodes == 1 or (spill and left_nodes < 1)) and (holding := [i for i in run if tasks[i] >= left]):
            # (with ``spill`` a run entered once the least count is met is one for the last
            # node too: a real 22.05.8 ran ``-n19`` with gpu02 held, gpu03 and gpu04 at 8 and 4
            # free CPUs as gpu01 16 + gpu04 3; probe p166, found by a review)
            shares.offer(min(holding, key=lambda i: (sizes[i], i)))
            continue
        elif left_nodes == 1 and not spill:
            continue
        else:  # (with ``spill``, no node of the run holding the rest: in index order)
            walk = run
        for i in walk:
            if i not in shares.placed:
                # from a required node the last node is taken even where it cannot hold the
                # rest (the choice then fails and is made again), as the source reads
                shares.offer(i, required=anchor is not None)
                if shares.done:
                    break
    return shares.answer()


def _runs(tasks: dict[int, int], weight, required: list[int], contiguous: bool = False) -> list[tuple]:
    """(run, its tasks, its nodes, its weight, its first required node or None) for each run
    of ``consec_runs`` over the nodes of ``tasks``; the run, its tasks and its nodes leave the
    required ones out (they are taken first)."""
    return [(nodes, sum(tasks[i] for i in nodes), len(nodes), w, anchor)
            for nodes, anchor, w in consec_runs(sorted(tasks), weight, set(required), contiguous)]


def consec_runs(usable: list[int], weight, required: set[int],
                contiguous: bool = False) -> list[tuple[list[int], int | None, int]]:
    """The runs of consecutive nodes ``_eval_nodes`` builds from the ``usable`` ones (in index
    order), as (its nodes that are not ``required``, its first required node or None, its
    weight), as the 22.05.8 source reads. A node that is not usable ends a run. A node whose
    weight differs from the run's ends it too, a required one included; the run that follows
    has a weight no node has (0, as allocated) until a node that is not required sets it, so a
    required node at its start loses its mark to the next node (the record is re-used). A required node of the
    run's weight marks the run where no earlier required node did, but neither counts in it
    nor sets its weight; a run of required nodes alone is dropped. ``contiguous``
    (``--contiguous``): weights end no run, and a run weighs what its last node that is not
    required weighs (``_eval_nodes`` records each added node's weight)."""
    out: list[tuple[list[int], int | None, int]] = []
    nodes: list[int] = []
    anchor: int | None = None
    w_run = None  # NO_VAL64: no weight yet, none tested
    prev = -2
    for i in usable:
        if i != prev + 1:  # unusable nodes in between (or before the first)
            if nodes:
                out.append((nodes, anchor, w_run))
                nodes = []
            anchor = w_run = None
        w = weight[i]
        if not contiguous and w_run is not None and w != w_run:
            if nodes:
                out.append((nodes, anchor, w_run))
                nodes, w_run = [], -1  # (the next record's weight: 0 as allocated, which no
                # node's sched_weight, Weight << 8 | 0xff, ever equals)
            anchor = None
        if i in required:
            if anchor is None:
                anchor = i
        else:
            nodes.append(i)
            w_run = w
        prev = i
    if nodes:
        out.append((nodes, anchor, w_run))
    return out
