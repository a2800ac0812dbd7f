"""The hourly TRES-second roll-up arithmetic, shared by a full rebuild and by an import's delta.

Both paths must give the same numbers (a test compares an incrementally maintained ledger
with a rebuilt one), so the splitting of an interval into clock hours and the key of a
usage row are written once, here. A key is ``(hour, account, user, qos, queue, gpu_type,
tres)``; ``totals`` maps keys to TRES-seconds. ``lo``/``hi`` clip to the hours [lo, hi).
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

HOUR = 3600.0
DAY = 86400.0
Totals = dict  # key tuple -> seconds

#: The columns of a usage row after ``origin``, in key order.
KEY_NAMES = ("period_start", "account", "user", "qos", "queue", "gpu_type", "tres")
#: Every TRES the roll-up charges (``add_jobs``: cpu, billing; ``add_allocations``: gres/gpu).
TRES = ("billing", "cpu", "gres/gpu")


def pieces(t0: float, t1: float, lo: float | None = None, hi: float | None = None) -> list[tuple[float, float]]:
    """[t0, t1) split at clock hours: [(hour start, seconds in it)], clipped to [lo, hi)."""
    if lo is not None:
        t0, t1 = max(t0, lo), min(t1, hi)
    out = []
    t = t0
    while t < t1:
        hour = (t // HOUR) * HOUR
        nxt = hour + HOUR
        nxt = min(nxt, t1)
        out.append((hour, nxt - t))
        t = nxt
    return out


def add(totals: Totals, key: tuple, t0: float, t1: float, amount: float,
        lo: float | None = None, hi: float | None = None) -> None:
    """Charge ``amount`` × seconds of [t0, t1) to ``key`` in each clock hour it covers."""
    for hour, seconds in pieces(t0, t1, lo, hi):
        k = (hour,) + key
        totals[k] = totals.get(k, 0.0) + amount * seconds


def add_allocations(totals: Totals, rows: Iterable[tuple], lo: float | None = None, hi: float | None = None) -> None:
    """GPU-seconds of allocations: rows of (time_from, time_to, as_of, gpu_count, gpu_type,
    account, user, qos, queue, job_gpu_type); an open allocation counts up to ``as_of``."""
    get = totals.get
    for time_from, time_to, as_of, count, gpu_type, account, user, qos, queue, job_gpu_type in rows:
        end = time_to if time_to is not None else as_of
        if end is None or end <= time_from:
            continue
        gtype = gpu_type or job_gpu_type or ""
        for hour, seconds in pieces(time_from, end, lo, hi):
            k = (hour, account, user, qos, queue, gtype, "gres/gpu")
            totals[k] = get(k, 0.0) + count * seconds


def add_jobs(totals: Totals, rows: Iterable[tuple], lo: float | None = None, hi: float | None = None) -> None:
    """CPU- and billing-seconds of jobs: rows of (start, elapsed, ncpus, account, user, qos,
    queue, billing). The hours of a job are split once for both."""
    get = totals.get
    for start, elapsed, ncpus, account, user, qos, queue, billing in rows:
        if start is None or elapsed is None or elapsed <= 0 or not (ncpus or billing):
            continue
        for hour, seconds in pieces(start, start + elapsed, lo, hi):
            if ncpus:
                k = (hour, account, user, qos, queue, "", "cpu")
                totals[k] = get(k, 0.0) + ncpus * seconds
            if billing:
                k = (hour, account, user, qos, queue, "", "billing")
                totals[k] = get(k, 0.0) + billing * seconds


def hour_span(since: float, until: float) -> tuple[float, float]:
    """The clock hours [lo, hi) that a change between ``since`` and ``until`` affects."""
    return (since // HOUR) * HOUR, (until // HOUR) * HOUR + HOUR


def as_tuples(totals: Totals, origin: str) -> list[tuple]:
    """Usage rows as ``(origin, *KEY_NAMES, seconds)`` tuples in key order. The order costs
    about a seventh of an import (sorting a million mixed tuples) and is worth it: rows
    stored in the order the jobs met them made ``usage --period month`` (a scan grouped by
    hour) about twice as slow on 300k records."""
    return [(origin, *k, round(v, 6)) for k, v in sorted(totals.items())]


# ---- the same arithmetic over arrays ----------------------------------------------------
# A daily sacct file of ten thousand jobs splits into ~150k hour pieces; ``add_jobs`` /
# ``add_allocations`` spent a few microseconds of interpreter time on each, which was the
# largest single cost of an import. ``delta_of`` does the splitting and the summing with
# numpy and gives bit-for-bit the totals ``add_jobs`` and ``add_allocations`` give: every
# piece is computed with the same float operations, and ``np.bincount`` adds the pieces of a
# key in input order, starting from 0.0, as the dict does (tests/ledger/test_rollup.py checks
# the two against each other).


@dataclass
class Delta:
    """Usage rows of one origin in a compact form: row ``i`` is hour ``hours[i]``, key
    ``keys[ranks[i]]`` (account, user, qos, queue, gpu_type, tres) and ``seconds[i]``
    (rounded to 6 decimals), rows in key order, ``keys`` sorted. Writers that can join
    against the few distinct keys (SQLite, ``store.write_usage``) send three numbers a row
    instead of nine values."""

    origin: str
    hours: list[float] = field(default_factory=list)
    ranks: list[int] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    keys: list[tuple] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.hours)

    def tuples(self) -> list[tuple]:
        """The rows as ``as_tuples`` gives them: ``(origin, *KEY_NAMES, seconds)``."""
        origin, keys = self.origin, self.keys
        return [(origin, h) + keys[r] + (v,) for h, r, v in zip(self.hours, self.ranks, self.seconds)]

    def days(self) -> tuple[list[float], list[int], list[list[float]]]:
        """The rows as the usage table stores them (migration 0005), one per UTC day and key:
        (day starts, key ranks, for each the 24 hours' seconds, NaN where this delta has no
        row), in (day, key) order. The seconds are this delta's values, unchanged. NaN, not
        None: the sqlite3 driver binds a float straight away but looks for an adapter for
        every None, which was a tenth of an import's writing; SQLite stores a bound NaN as
        NULL (``store.write_usage`` gives other databases None)."""
        import numpy as np

        if not self.hours:
            return [], [], []
        hours = np.array(self.hours, dtype=np.float64)
        day = np.floor_divide(hours, DAY) * DAY
        col = ((hours - day) / HOUR).astype(np.int64)  # hour starts are whole multiples of HOUR
        d0 = float(day.min())
        nkeys = len(self.keys)
        composite = ((day - d0) / DAY).astype(np.int64) * nkeys + np.array(self.ranks, dtype=np.int64)
        uniq, inverse = np.unique(composite, return_inverse=True)
        values = np.full((len(uniq), 24), np.nan)
        values[inverse.ravel(), col] = self.seconds
        return ((uniq // nkeys) * DAY + d0).tolist(), (uniq % nkeys).tolist(), values.tolist()

    def outside(self, lo: float, hi: float) -> Delta:
        """The rows whose hour is not in [lo, hi)."""
        keep = [i for i, h in enumerate(self.hours) if not lo <= h < hi]
        if len(keep) == len(self.hours):
            return self
        return Delta(self.origin, [self.hours[i] for i in keep], [self.ranks[i] for i in keep],
                     [self.seconds[i] for i in keep], self.keys)


def delta_of(origin: str, jobs: Iterable[tuple] = (), allocations: Iterable[tuple] = (),
             lo: float | None = None, hi: float | None = None) -> Delta:
    """The rows of the totals that ``add_jobs(jobs)`` then ``add_allocations(allocations)``
    (same row shapes, same ``lo``/``hi``) would build, computed over arrays."""
    jobs, allocations = list(jobs), list(allocations)
    return delta_of_columns(origin, tuple(zip(*jobs)) if jobs else (), tuple(zip(*allocations)) if allocations else (),
                            lo, hi)


def _float_column(values, np):
    """(float64 array, mask of the values that were None), exact for the ints and floats given."""
    if None in values:
        return np.array(values, dtype=np.float64), np.array([v is None for v in values], dtype=bool)
    return np.array(values, dtype=np.float64), None


def _numbering(keys) -> tuple[list, list[int]]:
    """(distinct keys in first-seen order, each key's number)."""
    seen: dict = {}
    numbers = [seen.setdefault(k, len(seen)) for k in keys]
    return list(seen), numbers


def delta_of_columns(origin: str, jobs: tuple = (), allocations: tuple = (),
                     lo: float | None = None, hi: float | None = None) -> Delta:
    """``delta_of`` for its rows given as columns: ``jobs`` the columns (start, elapsed, ncpus,
    account, user, qos, queue, billing), ``allocations`` the columns (time_from, time_to,
    as_of, gpu_count, gpu_type, account, user, qos, queue, job_gpu_type); empty for none.
    Which rows are charged is decided over whole columns (a Python test per row was most of
    the roll-up's time in an import's parsing thread); the pieces and their sums are
    computed exactly as ``delta_of`` computes them."""
    import numpy as np

    # The pieces of every charge, as arrays: per job a cpu charge and a billing charge (each
    # when not zero), per allocation a GPU charge. They are laid out all cpu charges (in job
    # order), then all billing ones, then the allocations': a usage key holds charges of one
    # kind only, so within each key the order is the jobs' (or allocations') order, which
    # is the order ``np.bincount`` adds them in, as the dict version does. (How keys are
    # numbered does not matter: rows are ordered by the keys themselves.)
    key_ids: dict[tuple, int] = {}
    t0_parts, t1_parts, amount_parts, kid_parts = [], [], [], []
    if jobs and len(jobs[0]):
        start, elapsed, ncpus, account, user, qos, queue, billing = jobs
        begin, no_start = _float_column(start, np)
        length, no_elapsed = _float_column(elapsed, np)
        # the rows ``add_jobs`` charges (``not x <= 0``: a NaN passes there too)
        charged_job = ~(length <= 0)
        for missing in (no_start, no_elapsed):
            if missing is not None:
                charged_job &= ~missing
        cpu_amount = np.array(ncpus, dtype=np.float64)  # (a None would be NaN, as in ``delta_of``)
        bill_amount = np.array(billing, dtype=np.float64)
        if None in ncpus or None in billing:  # ``ncpus or billing`` as Python reads it
            some = np.array([bool(a or b) for a, b in zip(ncpus, billing)], dtype=bool)
        else:
            some = (cpu_amount != 0) | (bill_amount != 0)
        charged_job &= some
        if charged_job.any():
            begin = begin[charged_job]
            finish = begin + length[charged_job]  # start + elapsed, as a float sum
            names, numbers = _numbering(zip(account, user, qos, queue))
            group = np.array(numbers, dtype=np.int64)[charged_job]
            for amounts, tres in ((cpu_amount, "cpu"), (bill_amount, "billing")):
                amount = amounts[charged_job]
                charged = amount != 0  # ``if amount:`` (NaN counts, as it is true)
                ids = np.zeros(len(names), dtype=np.int64)
                for g in np.unique(group[charged]).tolist():  # keys of the groups charged only
                    ids[g] = key_ids.setdefault(names[g] + ("", tres), len(key_ids))
                t0_parts.append(begin[charged])
                t1_parts.append(finish[charged])
                amount_parts.append(amount[charged])
                kid_parts.append(ids[group[charged]])
    if allocations and len(allocations[0]):
        time_from, time_to, as_of, count, gpu_type, account, user, qos, queue, job_gpu_type = allocations
        begin = np.array(time_from, dtype=np.float64)
        to, no_to = _float_column(time_to, np)
        seen, no_seen = _float_column(as_of, np)
        if no_to is None:  # every allocation closed: it ends at time_to
            end, no_end = to, None
        else:  # an open one counts up to as_of
            end = np.where(no_to, seen, to)
            no_end = no_to & (no_seen if no_seen is not None else False)
        held = ~(end <= begin)
        if no_end is not None:
            held &= ~no_end
        kept = np.flatnonzero(held).tolist()
        if kept:
            pick = (lambda col: [col[i] for i in kept]) if len(kept) < len(time_from) else list
            kinds = [a or b or "" for a, b in zip(pick(gpu_type), pick(job_gpu_type))]
            names, numbers = _numbering(zip(pick(account), pick(user), pick(qos), pick(queue), kinds))
            ids = np.array([key_ids.setdefault(k + ("gres/gpu",), len(key_ids)) for k in names], dtype=np.int64)
            t0_parts.append(begin[held])
            t1_parts.append(end[held])
            amount_parts.append(np.array(pick(count), dtype=np.float64))
            kid_parts.append(ids[np.array(numbers, dtype=np.int64)])
    if not t0_parts:
        return Delta(origin)
    t0 = np.concatenate(t0_parts)
    t1 = np.concatenate(t1_parts)
    amounts = np.concatenate(amount_parts)
    kids = np.concatenate(kid_parts)
    if not len(t0):
        return Delta(origin)
    if lo is not None:
        t0 = np.maximum(t0, lo)
        t1 = np.minimum(t1, hi)
    h0 = np.floor_divide(t0, HOUR) * HOUR  # as ``pieces``: (t // HOUR) * HOUR
    # ``pieces`` gives a first piece when t0 < t1, then one for each k >= 1 with
    # h0 + k*HOUR < t1 (hour starts are exact multiples of HOUR): estimated, then made exact
    later = np.maximum(np.ceil((t1 - h0) / HOUR) - 1, 0).astype(np.int64)
    while (more := h0 + (later + 1) * HOUR < t1).any():
        later += more
    while (fewer := (later > 0) & (h0 + later * HOUR >= t1)).any():
        later -= fewer
    n = later + (t0 < t1)
    total = int(n.sum())
    if total == 0:
        return Delta(origin)
    idx = np.repeat(np.arange(len(n)), n)
    k = np.arange(total) - np.repeat(np.cumsum(n) - n, n)
    hour = h0[idx] + k * HOUR
    seconds = np.minimum(hour + HOUR, t1[idx]) - np.where(k == 0, t0[idx], hour)
    charged = amounts[idx] * seconds
    keys = list(key_ids)
    order = sorted(range(len(keys)), key=keys.__getitem__)
    rank = np.empty(len(keys), dtype=np.int64)
    rank[order] = np.arange(len(keys))
    q = (hour / HOUR).astype(np.int64)
    q0 = int(q.min())
    nkeys = len(keys)
    composite = (q - q0) * nkeys + rank[kids[idx]]
    uniq, inverse = np.unique(composite, return_inverse=True)
    sums = np.bincount(inverse.ravel(), weights=charged, minlength=len(uniq))
    if np.array_equal(sums, np.trunc(sums)) and not (np.abs(sums) >= 2.0 ** 52).any():
        secs = sums.tolist()  # whole seconds: round(v, 6) would give v back
    else:
        secs = [round(v, 6) for v in sums.tolist()]
    return Delta(origin, ((uniq // nkeys + q0) * HOUR).tolist(), (uniq % nkeys).tolist(), secs,
                 [keys[i] for i in order])

