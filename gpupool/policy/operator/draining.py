"""GPU-hours spent draining NodeSet nodes before they went back to the fleet, from a run.

The capacity controller tags a node ``slurm-draining`` when scale-in picks it and ``fleet``
when it is empty; both are ``node_owner`` events (detail ``"<node> <owner>"``). A node's GPUs
serve neither side for new work in between: that is the price of not killing running jobs.
"""
from __future__ import annotations

from gpupool.engine.core import RunOutput
from gpupool.policy.operator.membership import DRAINING


def draining_intervals(output: RunOutput) -> list[tuple[str, float, float]]:
    """(node, began, ended) for every drain; one still open at the end ends at the run's end."""
    open_: dict[str, float] = {}
    out: list[tuple[str, float, float]] = []
    for t, what, _job, detail in output.events:
        if what != "node_owner":
            continue
        node, _, owner = detail.partition(" ")
        if owner == DRAINING:
            open_.setdefault(node, t)
        elif node in open_:
            out.append((node, open_.pop(node), t))
    for node, began in open_.items():
        out.append((node, began, max(began, output.end_time)))
    out.sort(key=lambda r: (r[1], r[0]))
    return out


def draining_figures(output: RunOutput) -> dict:
    """``drains`` (count), ``gpu_hours_draining`` (node GPUs × time in drain) and
    ``gpu_hours_draining_idle`` (the part no job held: GPUs waiting for the last jobs to end)."""
    gpus = {name: node.gpu_count for name, node in output.pool.nodes.items()}
    intervals = draining_intervals(output)
    total = sum(gpus.get(n, 0) * (b - a) for n, a, b in intervals)
    held = 0.0
    for node, a, b, count in _segments(output):
        for n, da, db in intervals:
            if n == node:
                held += count * max(0.0, min(b, db) - max(a, da))
    return {"drains": len(intervals), "gpu_hours_draining": round(total / 3600.0, 3),
            "gpu_hours_draining_idle": round(max(0.0, total - held) / 3600.0, 3)}


_ENDS = ("finished", "preempted", "requeued")


def _segments(output: RunOutput):
    """(node, start, end, GPUs) for every run segment of every job, from ``started`` events
    (detail ``[VIA ]node:idx,idx;node:idx``) to the job's next end event."""
    live: dict[int, tuple[float, dict[str, int]]] = {}
    for t, what, job, detail in output.events:
        if what == "started":
            text = detail.rsplit(" ", 1)[-1]
            per: dict[str, int] = {}
            for pod in text.split(";"):
                node, _, idx = pod.partition(":")
                if node:
                    per[node] = per.get(node, 0) + len([x for x in idx.split(",") if x])
            live[job] = (t, per)
        elif what in _ENDS and job in live:
            start, per = live.pop(job)
            for node, count in per.items():
                yield node, start, t, count
    for start, per in live.values():
        for node, count in per.items():
            yield node, start, output.end_time, count
