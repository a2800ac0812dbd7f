"""Gang scheduling / time slicing (spec §10, errata §17.5): slurmctld's ``gang.c`` as pure functions.

With ``PreemptMode=…,GANG`` slurmctld keeps, per partition, an ordered list of the jobs allocated
there (running or suspended), each with a *row state*:

* ``ACTIVE`` - chosen by the last time-slice rebuild;
* ``FILLER`` - running because it fitted beside everything active when it started (or when it
  was resumed after a job end); a filler is not moved to the back at the next slice, so a job
  that ran alone keeps running one slice longer when a competitor arrives (§17.5);
* ``NO_ACTIVE`` - not in the active set (suspended, unless nothing overlaps it).

Transitions (``step`` applies them in slurmctld's order at one instant):

* job end: the job leaves its list; every partition's active set is rebuilt *without reordering*
  (ACTIVE jobs first, then FILLERs, then NO_ACTIVE jobs that now fit become FILLERs and resume at
  once);
* job start: appended to its list; it keeps running as a FILLER when it fits beside the active
  set, else it is suspended at once; a running start rebuilds every partition (its "shadow" may
  suspend overlapping jobs of lower-PriorityTier partitions: SUSPEND preemption);
* time slice (every ``SchedulerTimeSlice`` from t=0), in each partition whose list holds a job
  outside the active set: ACTIVE jobs move to the back (relative order kept), FILLERs become
  NO_ACTIVE in place, the active set is rebuilt from the front, dropped jobs are suspended and
  entering jobs resumed.

"Fits" is counted per node in CPUs (gang.c's GS_CPU rule; select/linear allocates whole nodes, so
there any shared node conflicts, its GS_NODE rule): the active jobs of the partition, the running
jobs of higher-tier partitions (the shadows, at most the node's CPUs) and - so that running jobs
never share a CPU - the running jobs of other partitions of the same tier. GPUs and memory never
enter: they stay allocated to suspended jobs, so co-allocated jobs never share them (select's job).

The state is a plain value (``GangState``); ``step`` returns a new one and what changed. The Slurm
policy keeps the state between its calls, as slurmctld keeps gang.c's lists; everything else is
read from the snapshot.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

ACTIVE = "ACTIVE"
FILLER = "FILLER"
NO_ACTIVE = "NO_ACTIVE"


@dataclass(frozen=True, slots=True)
class Entry:
    """One job in its partition's gang list."""

    job_id: int
    row: str = NO_ACTIVE
    #: gang.c's sig_state: True once gang suspended it (GS_SUSPEND), False while it runs.
    suspended: bool = False


@dataclass(frozen=True, slots=True)
class GangState:
    """Per partition, its ordered job list (front = next to run)."""

    lists: Mapping[str, tuple[Entry, ...]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class PartSpec:
    """What gang needs to know of a partition: its PriorityTier and slurm.conf order."""

    name: str
    tier: int
    order: int


@dataclass(slots=True)
class Outcome:
    state: GangState
    #: jobs whose run state changed, in the order gang changed them: job id -> now suspended?
    changed: dict[int, bool]


class _Work:
    """Mutable working copy of the lists for one ``step`` (discarded afterwards)."""

    def __init__(self, state: GangState, parts: Mapping[str, PartSpec], cpu: Mapping[int, Mapping[int, int]],
                 cap: list[int]) -> None:
        self.lists: dict[str, list[list]] = {p: [[e.job_id, e.row, e.suspended] for e in entries]
                                             for p, entries in state.lists.items()}
        self.parts = parts
        self.cpu = cpu
        self.cap = cap
        self.changed: dict[int, bool] = {}
        self.order = sorted(parts.values(), key=lambda p: (-p.tier, p.order))

    def freeze(self) -> GangState:
        return GangState({p: tuple(Entry(j, r, s) for j, r, s in lst) for p, lst in self.lists.items() if lst})

    # --------------------------------------------------------------- resources
    def _base(self, part: str) -> dict[int, int]:
        """CPUs per node that ``part``'s active set must leave alone: running jobs of higher
        tiers (shadows, capped at the node) and of other partitions of the same tier."""
        tier = self.parts[part].tier
        shadow: dict[int, int] = {}
        same: dict[int, int] = {}
        for other, lst in self.lists.items():
            if other == part:
                continue
            ot = self.parts[other].tier
            if ot < tier:
                continue
            into = shadow if ot > tier else same
            for jid, _row, susp in lst:
                if susp:
                    continue
                for n, c in self.cpu[jid].items():
                    into[n] = into.get(n, 0) + c
        cap = self.cap
        out = {n: min(c, cap[n]) for n, c in shadow.items()}
        for n, c in same.items():
            out[n] = out.get(n, 0) + c
        return out

    def _fits(self, used: dict[int, int], jid: int) -> bool:
        cap = self.cap
        return all(used.get(n, 0) + c <= cap[n] for n, c in self.cpu[jid].items())

    @staticmethod
    def _add(used: dict[int, int], cpu: Mapping[int, int]) -> None:
        for n, c in cpu.items():
            used[n] = used.get(n, 0) + c

    def _set(self, e: list, suspended: bool) -> None:
        if e[2] != suspended:
            e[2] = suspended
            jid = e[0]
            # suspended then resumed at one instant is no change at all
            if self.changed.get(jid) is None:
                self.changed[jid] = suspended
            else:
                del self.changed[jid]

    # --------------------------------------------------------------- gang.c's operations
    def update_row(self, part: str, add_new: bool) -> None:
        """Rebuild ``part``'s active set without reordering (gang.c _update_active_row)."""
        lst = self.lists.get(part)
        if not lst:
            return
        used = self._base(part)
        for kind in (ACTIVE, FILLER):
            for e in lst:
                if e[1] != kind:
                    continue
                if self._fits(used, e[0]):
                    self._add(used, self.cpu[e[0]])
                else:  # caught in a higher partition's shadow (or a same-tier job): suspended
                    self._set(e, True)
                    e[1] = NO_ACTIVE
        if not add_new:
            return
        for e in lst:
            if e[1] == NO_ACTIVE and self._fits(used, e[0]):
                self._add(used, self.cpu[e[0]])
                e[1] = FILLER
                self._set(e, False)

    def update_all(self, add_new: bool = True) -> None:
        """Every partition, highest PriorityTier first, so shadows are settled before the
        partitions they fall on (gang.c _update_all_active_rows)."""
        for p in self.order:
            self.update_row(p.name, add_new)

    def add_job(self, part: str, jid: int, suspended: bool = False) -> None:
        """A job was allocated in ``part`` (gang.c gs_job_start / _add_job_to_part)."""
        lst = self.lists.setdefault(part, [])
        e = [jid, NO_ACTIVE, False]
        used = self._base(part)
        for other in lst:
            if other[1] in (ACTIVE, FILLER):
                self._add(used, self.cpu[other[0]])
        lst.append(e)
        if not suspended and self._fits(used, jid):
            e[1] = FILLER
            self.update_all(True)
        else:
            self._set(e, True)

    def remove_ended(self, alive) -> bool:
        """Drop jobs that no longer hold an allocation; True when any was dropped."""
        dropped = False
        for lst in self.lists.values():
            keep = [e for e in lst if e[0] in alive]
            if len(keep) != len(lst):
                lst[:] = keep
                dropped = True
        return dropped

    def cycle(self, part: str) -> None:
        """One time slice in ``part`` (gang.c _cycle_job_list)."""
        lst = self.lists[part]
        i = 0
        while i < len(lst):
            moved = 0
            while lst[i][1] == ACTIVE and moved < len(lst):
                e = lst.pop(i)
                e[1] = NO_ACTIVE
                lst.append(e)
                moved += 1
            if lst[i][1] == FILLER:
                lst[i][1] = NO_ACTIVE
            i += 1
        used = self._base(part)
        for e in lst:
            if self._fits(used, e[0]):
                self._add(used, self.cpu[e[0]])
                e[1] = ACTIVE
        for e in lst:
            if e[1] == NO_ACTIVE and not e[2]:
                self._set(e, True)
        for e in lst:
            if e[1] == ACTIVE and e[2]:
                self._set(e, False)

    def needs_slice(self, part: str) -> bool:
        lst = self.lists.get(part)
        if not lst:
            return False
        return sum(1 for e in lst if e[1] in (ACTIVE, FILLER)) < len(lst)


def step(state: GangState, parts: Mapping[str, PartSpec], cap: list[int],
         alive: Mapping[int, tuple[str, bool]], cpu: Mapping[int, Mapping[int, int]],
         started: list[tuple[int, str]], tick: bool) -> Outcome:
    """One instant of gang.c, in slurmctld's order: job ends, then the starts of this pass (in
    start order), then the time slice when ``tick``.

    ``alive``: every job holding an allocation now (before this pass's starts) -> (partition,
    engine says SUSPENDED); ``cpu``: job -> {node index: CPUs counted by gang}, for those jobs and
    the ``started`` ones; ``started``: (job, partition) allocated by this pass.
    A job holding an allocation that the lists do not know (e.g. adopted by a restarted daemon)
    is appended as gang.c's job scan does.
    """
    w = _Work(state, parts, cpu, cap)
    if w.remove_ended(alive):
        w.update_all(True)
    known = {e[0] for lst in w.lists.values() for e in lst}
    for jid, (part, susp) in alive.items():
        if jid not in known and part in parts:
            w.add_job(part, jid, suspended=susp)
            w.changed.pop(jid, None)  # it already is what gang made it
    for jid, part in started:
        if part in parts:
            w.add_job(part, jid)
    if tick:
        for p in w.order:
            if w.needs_slice(p.name):
                w.cycle(p.name)
        # a slice changes shadows: settle lower partitions (suspend what now overlaps, nothing new)
        if w.changed:
            w.update_all(False)
    return Outcome(w.freeze(), w.changed)


def _kind(oversubscribe: str | None) -> tuple[str, str]:
    """A partition's OverSubscribe as (NO | YES | FORCE | EXCLUSIVE, count text or "")."""
    kind, _, count = str(oversubscribe or "NO").upper().partition(":")
    return kind, count


def max_share(oversubscribe: str | None) -> int:
    """Jobs that may be allocated the same CPUs in a partition:
    FORCE[:N] and YES[:N] (default N = 4); 1 for NO and EXCLUSIVE.

    YES shares under gang whatever the jobs ask, except that a job asking ``--oversubscribe``
    is not put on a node holding a job that did not (``Cycle.try_coallocate``): so a real 22.05.8 did
    (two jobs without ``-s`` time-sliced in YES:3; a ``-s`` job waited beside a job without
    it; case gang-gp-006). Without gang the co-allocated jobs run at once on the shared CPUs,
    and in YES only jobs that ask ``--oversubscribe`` share (``Cycle.try_coallocate``)."""
    kind, count = _kind(oversubscribe)
    if kind not in ("FORCE", "YES"):
        return 1
    return int(count) if count else 4


def asks_to_share(oversubscribe: str | None) -> bool:
    """OverSubscribe=YES[:N]: the jobs' ``--oversubscribe`` flags matter there."""
    return _kind(oversubscribe)[0] == "YES"


def forced(oversubscribe: str | None) -> bool:
    """OverSubscribe=FORCE[:N], even FORCE:1: the partition's CPUs may be shared through
    preemption (a preempt/qos SUSPEND preemptor is allocated on its victim's CPUs), checked on
    a real 22.05.8 (case preempt-gp-004; with NO the preemptor waits)."""
    return _kind(oversubscribe)[0] == "FORCE"


def rows_of(jobs: list[Mapping[int, int]], cap: list[int]) -> list[dict[int, int]]:
    """Co-allocation rows of one partition (cons_tres keeps up to N rows of non-overlapping
    allocations): jobs, running ones first, go first-fit into the first row where their CPUs
    fit on every node. Returns per row {node: CPUs}."""
    rows: list[dict[int, int]] = []
    for cpus in jobs:
        add_to_rows(rows, cpus, cap)
    return rows


def add_to_rows(rows: list[dict[int, int]], cpus: Mapping[int, int], cap: list[int]) -> None:
    """Put one job's CPUs per node into the first row where they fit on every node (a new row
    when none has room)."""
    for row in rows:
        if all(row.get(n, 0) + c <= cap[n] for n, c in cpus.items()):
            break
    else:
        row = {}
        rows.append(row)
    for n, c in cpus.items():
        row[n] = row.get(n, 0) + c


def row_max(rows: list[dict[int, int]]) -> dict[int, int]:
    """CPUs per node the rows hold together: they overlap, so the fullest row counts."""
    out: dict[int, int] = {}
    for row in rows:
        for n, c in row.items():
            if c > out.get(n, 0):
                out[n] = c
    return out
