"""select/cons_tres's walk over runs of consecutive nodes (22.05 ``_eval_nodes``): which nodes a
multi-node job gets and how many CPUs (or tasks) each one takes.

The rule, read from the 22.05.8 source and checked on a real 22.05.8 (docs/differential.md
findings 47 and 48): the usable nodes form runs of consecutive indices, per weight, lowest
weight first. Runs are compared in index order by their free CPUs: a run that holds what the
job still needs (CPUs and nodes) replaces one that does not or one with more CPUs; one that
does not replaces any with fewer CPUs, even one that does (``-N2`` with gpu01-02 at 2 free
CPUs, gpu03 full and gpu04 idle ran on gpu04 first, then gpu01). In the chosen run the nodes
go in index order, each taking all it has but one for each node still to come, the last node
only where it holds all that is left; a run entered for the last node alone gives it to the
node with the fewest that holds what is left. ``--nodelist`` nodes come first.

Pure functions of counts: the callers (``select._multi_node``, ``split_tasks.split_nodes``)
turn free resources into counts and the answer into pods.
"""
from __future__ import annotations

from gpupool.engine.nodes import consecutive_runs


class _Shares:
    """The nodes taken so far and what is left to place: each node takes all the tasks it has
    room for but one for each node still to come (cons_tres's ``_cpus_to_use``)."""

    def __init__(self, tasks: dict[int, int], nodes: int, total: int) -> None:
        self.tasks = tasks
        self.out: list[tuple[int, int]] = []
        self.left_nodes, self.left = nodes, total

    def offer(self, i: int, required: bool = False) -> None:
        """Take node ``i`` unless it is the last one and cannot hold what is left (a required
        node is taken anyway: the choice then fails)."""
        have = self.tasks[i]
        if self.left_nodes == 1 and have < self.left and not required:
            return
        take = min(have, self.left - (self.left_nodes - 1))
        self.out.append((i, take))
        self.left -= take
        self.left_nodes -= 1

    @property
    def done(self) -> bool:
        return not self.left_nodes


def pick_nodes(tasks: dict[int, int], nodes: int, total: int, weight, required: list[int],
            order=None) -> list[tuple[int, int]] | None:
    """(node, tasks) for ``nodes`` nodes holding ``total`` tasks, as cons_tres's ``_eval_nodes``
    takes them from the nodes of ``tasks`` (each node's free tasks).

    The ``required`` nodes (``--nodelist``) first, in index order; then, in each run of
    consecutive nodes of one weight holding one of them (lowest weight first), the nodes above
    the first such node, then those below it, downwards (a real 22.05.8 ran ``-N3 -n8 -w gpu03`` as gpu02 1, gpu03 6, gpu04 1).
    Then per weight, lowest first, runs of consecutive nodes, compared in index order: a run
    that holds what is left (tasks and nodes) replaces one that does not or one with more
    tasks; one that does not replaces one with fewer tasks, even one that holds it all (the
    real test reads so). In the run chosen the nodes go in index order (``_Shares.offer``); a
    run entered for the last node alone gives it to the node with the fewest tasks that holds
    what is left.

    With ``order`` (a sort key: least loaded nodes, or bf_busy_nodes' busy ones first) the
    nodes after the required ones are offered in that order instead of by runs."""
    if len(tasks) < nodes or sum(tasks.values()) < total:
        return None
    shares = _Shares(tasks, nodes, total)
    for i in required:
        shares.offer(i, required=True)
    seen = set(required)
    if order is not None:
        for i in sorted((i for i in tasks if i not in seen), key=order):
            if shares.done:
                break
            shares.offer(i)
    elif required and not shares.done:
        for run in (run for w in sorted({weight[i] for i in tasks})
                    for run in consecutive_runs(i for i in tasks if weight[i] == w)):
            anchor = next((k for k, i in enumerate(run) if i in seen), None)
            if anchor is None:
                continue
            for i in run[anchor + 1:] + run[:anchor][::-1]:
                if i not in seen:
                    shares.offer(i)
                    if shares.done:
                        break
            seen.update(run)
            if shares.done:
                break
    weights = {weight[i] for i in tasks} if order is None else ()
    for w in sorted(weights) if len(weights) > 1 else weights:
        if shares.done:
            break
        runs = _runs_with_counts(tasks, seen, weight if len(weights) > 1 else None, w)
        while runs and not shares.done:
            best_k = best_sum = -1
            best_ok = False
            left, left_nodes = shares.left, shares.left_nodes
            for k, (run, size) in enumerate(runs):
                ok = size >= left and len(run) >= left_nodes
                # (a larger run that does not hold it all replaces even one that does: the
                # real test has no exception for that)
                if (best_k < 0 or (ok and not best_ok) or (ok and size < best_sum)
                        or (not ok and size > best_sum)):
                    best_k, best_sum, best_ok = k, size, ok
            best = runs.pop(best_k)[0]
            if shares.left_nodes == 1:
                holding = [i for i in best if tasks[i] >= shares.left]
                if holding:
                    shares.offer(min(holding, key=lambda i: (tasks[i], i)))
                continue
            for i in best:
                shares.offer(i)
                if shares.done:
                    break
    return shares.out if shares.done and shares.left <= 0 else None


def _runs_with_counts(tasks: dict[int, int], seen: set[int], weight, w) -> list[list]:
    """[run, its count] for each run of consecutive nodes of ``tasks`` not in ``seen`` (of
    weight ``w`` where ``weight`` is given), in index order: a run is used whole, so the
    others' counts never change while the job's nodes are picked."""
    runs: list[list] = []
    cur: list[int] = []
    size = 0
    prev = -2
    for i in sorted(tasks):
        if i in seen or (weight is not None and weight[i] != w):
            continue
        if i != prev + 1 and cur:
            runs.append([cur, size])
            cur, size = [], 0
        cur.append(i)
        size += tasks[i]
        prev = i
    if cur:
        runs.append([cur, size])
    return runs
