"""Job dependencies as Slurm writes them (``afterok:12:13,afterany:14``; ``?`` means any).

Shared by policies that honour dependencies. The text was validated at the edge
(``formats/sbatch``); here it is only evaluated against the run's job records.
"""
from __future__ import annotations

from functools import lru_cache

SATISFIED = "satisfied"
WAITING = "waiting"
NEVER = "never"

_OK_STATES = {"COMPLETED"}
_FINAL = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "PREEMPTED", "NODE_FAIL", "REJECTED"}


@lru_cache(maxsize=4096)
def parse_dependency(text: str) -> tuple[str, tuple[tuple[str, tuple[int, ...]], ...]]:
    """``"afterok:1:2?afterany:3"`` -> ("any", (("afterok", (1, 2)), ("afterany", (3,))))."""
    joiner = "any" if "?" in text else "all"
    parts = text.replace("?", ",").split(",")
    terms = []
    for part in parts:
        part = part.strip()
        if not part:
            continue
        kind, _, rest = part.partition(":")
        ids = tuple(int(x.split("_")[0].split("+")[0]) for x in rest.split(":") if x)
        terms.append((kind, ids))
    return joiner, tuple(terms)


def _term_state(kind: str, ids: tuple[int, ...], jobs, job) -> str:
    if kind == "singleton":
        # Slurm: no other job of the same name and user may be running or pending ahead of it.
        for other in jobs.values():
            if (other is not job and other.wl.name == job.wl.name and other.wl.user == job.wl.user
                    and other.final_state is None and other.wl.submit_time <= job.wl.submit_time
                    and other.id < job.id):
                return WAITING
        return SATISFIED
    worst = SATISFIED
    for dep_id in ids:
        dep = jobs.get(dep_id)
        if dep is None:
            return NEVER
        state = dep.final_state
        if kind == "after":
            ok = dep.first_start is not None or state is not None
            if not ok:
                worst = WAITING
            continue
        if state is None:
            worst = WAITING
            continue
        if kind == "afterany":
            continue
        if kind in ("afterok", "aftercorr") and state not in _OK_STATES:
            return NEVER
        if kind == "afternotok" and state in _OK_STATES:
            return NEVER
    return worst


def dependency_state(job, jobs) -> str:
    """SATISFIED, WAITING or NEVER for ``job`` given every job of the run."""
    text = job.wl.dependency
    if not text:
        return SATISFIED
    joiner, terms = parse_dependency(text)
    states = [_term_state(kind, ids, jobs, job) for kind, ids in terms]
    if joiner == "all":
        if NEVER in states:
            return NEVER
        return WAITING if WAITING in states else SATISFIED
    if SATISFIED in states:
        return SATISFIED
    return WAITING if WAITING in states else NEVER
