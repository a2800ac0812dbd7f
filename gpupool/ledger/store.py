"""The ledger handle and the write primitives every writer shares.

Writers (``record_run``, the Kueue import, the live daemon) build plain row dicts and hand
them to ``Ledger.write_jobs`` & co.; the sacct importer builds tuples in a fixed column order
(``JOB_COLUMNS``, ``EVENT_COLUMNS``, ``ALLOCATION_COLUMNS``) for ``write_job_rows`` & co.,
which the dict forms convert to. Either way inside one ``with ledger.transaction() as conn``
block: all of an import or run lands, or none of it. Uniqueness keys make every write idempotent — a
job row is replaced by its newer record, events and allocations are facts that are added
once, and the hourly usage roll-up of an origin is rebuilt from its allocations.
"""
from __future__ import annotations

import bisect
import gc
import json
import operator
import os
import sqlite3
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import chain
from typing import Iterable, Iterator

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from gpupool.ledger import rollup
from gpupool.ledger import schema as s
from gpupool.ledger.db import LedgerError, open_engine

HOUR = 3600.0
_CHUNK = 5000


@dataclass
class WriteStats:
    """What one write added: new rows per table, and job rows replaced by a newer record."""

    jobs_added: int = 0
    jobs_updated: int = 0
    jobs_unchanged: int = 0
    events_added: int = 0
    allocations_added: int = 0
    allocations_updated: int = 0
    other: dict[str, int] = field(default_factory=dict)
    #: origin -> [from, to]: the times whose usage roll-up this write may have changed
    #: (``update_usage`` recomputes only the hours they span).
    dirty: dict[str, list] = field(default_factory=dict)
    #: origin -> job id -> row (``JOB_COLUMNS`` tuple) of each job this write created; their
    #: usage is added as a delta (``update_usage``) instead of being recomputed from the tables.
    fresh: dict[str, dict[str, tuple]] = field(default_factory=dict)
    #: origin -> the allocation rows given for fresh jobs, in order (``first_by_key`` keeps
    #: the first of each key, as the insert does).
    fresh_allocations: dict[str, list[tuple]] = field(default_factory=dict)
    #: origin -> (job ids, usage rows of those jobs as if all were new), computed by an
    #: importer ahead of the write (``fresh_usage_rows``) off the writing thread.
    prepared: dict[str, tuple] = field(default_factory=dict)

    def touch(self, origin: str, *times) -> None:
        ts = [x for x in times if x is not None]
        if not ts:
            return
        span = self.dirty.setdefault(origin, [min(ts), max(ts)])
        span[0] = min(span[0], *ts)
        span[1] = max(span[1], *ts)

    @property
    def changed(self) -> int:
        return (self.jobs_added + self.jobs_updated + self.events_added + self.allocations_added
                + self.allocations_updated + sum(self.other.values()))

    def as_dict(self) -> dict:
        out = {k: v for k, v in self.__dict__.items() if k not in ("other", "dirty", "fresh", "fresh_allocations", "prepared")}
        out.update(self.other)
        return out


def _insert(conn: Connection, table: sa.Table):
    name = conn.dialect.name
    if name == "sqlite":
        from sqlalchemy.dialects.sqlite import insert
    elif name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert
    else:  # pragma: no cover
        raise LedgerError(f"the ledger supports SQLite and PostgreSQL, not {name}")
    return insert(table)


def chunks(rows: list, size: int = _CHUNK) -> Iterator[list]:
    for i in range(0, len(rows), size):
        yield rows[i:i + size]


def insert_ignore(conn: Connection, table: sa.Table, rows: list[dict], keys: Iterable[str]) -> int:
    """Insert rows whose uniqueness key is new; return how many were added."""
    if not rows:
        return 0
    added = 0
    stmt = _insert(conn, table).on_conflict_do_nothing(index_elements=list(keys))
    # SQLite's total_changes() counts only rows actually inserted (not the ignored ones) and
    # costs O(1); COUNT(*) scans the table, which made large imports quadratic.
    counter = _total_changes if conn.dialect.name == "sqlite" else _count
    for part in chunks(rows):
        before = counter(conn, table)
        if not _sqlite_executemany(conn, table, part, keys):
            conn.execute(stmt, part)
        added += counter(conn, table) - before
    return added


def _sqlite_in(conn: Connection, sql: str, params: tuple, values: list, size: int = 900) -> Iterator[tuple]:
    """Rows of ``sql`` (whose ``IN ({})`` takes the values) for ``values`` in chunks, straight
    through the sqlite3 driver: building the same SELECT in SQLAlchemy with 900 bound
    parameters cost more than running it."""
    cur = conn.connection.driver_connection.cursor()
    try:
        for part in chunks(values, size):
            yield from cur.execute(sql.format(", ".join("?" * len(part))), (*params, *part)).fetchall()
    finally:
        cur.close()


def _sqlite_executemany(conn: Connection, table: sa.Table, rows: list[dict], conflict_keys=None) -> bool:
    """Insert plain rows with the sqlite3 driver's ``executemany`` (SQLAlchemy's per-row
    parameter processing was a large part of an import; the ledger's column types need no
    conversion on SQLite). Only when every row has the same keys, all of them columns of
    ``table``; returns False (nothing done) otherwise, or on another database."""
    if conn.dialect.name != "sqlite" or not rows:
        return False
    names = list(rows[0])
    known = set(table.c.keys())
    width = len(names)
    if any(n not in known for n in names) or any(len(r) != width for r in rows):
        return False
    get = operator.itemgetter(*names)
    try:  # same length and every name present: the same keys
        values = [get(r) for r in rows] if width > 1 else [(get(r),) for r in rows]
    except KeyError:
        return False
    cols = ", ".join(f'"{n}"' for n in names)
    sql = f'INSERT INTO "{table.name}" ({cols}) VALUES ({", ".join("?" * width)})'
    if conflict_keys is not None:
        sql += f' ON CONFLICT ({", ".join(chr(34) + k + chr(34) for k in conflict_keys)}) DO NOTHING'
    conn.connection.driver_connection.executemany(sql, values)
    return True


#: Rows per multi-row ``INSERT … VALUES``: at most this many, and at most SQLite's limit of
#: bound values (32766 since 3.32, 999 before) over the row's width
_VALUES_ROWS = 500


def sqlite_insert_values(driver, head: str, width: int, rows: list[tuple], tail: str = "") -> None:
    """``head`` (``INSERT INTO t (…) VALUES ``) with many rows a statement,
    ``(?,…),(?,…),…`` then ``tail``, on a sqlite3 connection or cursor. The rows go in
    their order (rowids are assigned as ``executemany`` would). ``executemany`` ran the
    statement once per row, and that per-row round trip cost three to four times the
    insert itself."""
    if rows:
        sqlite_insert_flat(driver, head, width, len(rows), list(chain.from_iterable(rows)), tail)


def sqlite_insert_flat(driver, head: str, width: int, n: int, flat: list, tail: str = "") -> None:
    """``sqlite_insert_values`` for ``n`` rows given as one flat list of their values."""
    limit = _variable_limit(driver)
    per = max(1, min(_VALUES_ROWS, limit // width))
    one = "(" + ",".join("?" * width) + ")"
    full = n // per * per
    if full:
        sql = head + ",".join([one] * per) + tail
        step = per * width
        for i in range(0, full * width, step):
            driver.execute(sql, flat[i:i + step])
    if full < n:
        driver.execute(head + ",".join([one] * (n - full)) + tail, flat[full * width:])


def _variable_limit(driver) -> int:
    """The most values one SQLite statement binds (``SQLITE_LIMIT_VARIABLE_NUMBER``)."""
    getlimit = getattr(driver, "getlimit", None) or getattr(getattr(driver, "connection", None), "getlimit", None)
    if getlimit is None:  # Python < 3.11: assume the oldest default
        return 999
    return getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)


def _null_columns(table: sa.Table, columns: tuple[str, ...], rows: list[tuple], flat: list) -> list[int]:
    """The positions of the columns that are None in every row and whose default is NULL (so
    an insert may leave them out), given the rows and their values as one flat list. The
    sqlite3 driver binds a None through its adapter lookup, several times the cost of
    binding a number or a string; sacct rows have a few such columns (array ids of plain
    jobs, ``as_of`` of closed allocations, policy versions when none is committed)."""
    out = []
    first, width, n = rows[0], len(columns), len(rows)
    for i, name in enumerate(columns):
        if first[i] is not None:
            continue
        c = table.c[name]
        if (c.nullable and c.server_default is None and c.default is None and not c.primary_key
                and flat[i::width].count(None) == n):
            out.append(i)
    return out


def insert_tuples(conn: Connection, table: sa.Table, columns: tuple[str, ...], rows: list[tuple],
                  conflict_keys: Iterable[str] | None = None) -> int:
    """Insert rows given as tuples in ``columns`` order; with ``conflict_keys``, rows whose
    key exists are skipped. Returns how many were added. On SQLite straight to the driver's
    ``executemany`` (counted by ``total_changes()``), elsewhere through SQLAlchemy."""
    if not rows:
        return 0
    if conn.dialect.name == "sqlite":
        flat = list(chain.from_iterable(rows))
        width = len(columns)
        unset = _null_columns(table, columns, rows, flat)
        for i in reversed(unset):  # left to their default, NULL: out of the flat values, last first
            del flat[i::width]
            width -= 1
        columns = tuple(c for i, c in enumerate(columns) if i not in unset)
        cols = ", ".join(f'"{n}"' for n in columns)
        tail = ""
        if conflict_keys is not None:
            tail = f' ON CONFLICT ({", ".join(chr(34) + k + chr(34) for k in conflict_keys)}) DO NOTHING'
        driver = conn.connection.driver_connection
        before = driver.total_changes
        sqlite_insert_flat(driver, f'INSERT INTO "{table.name}" ({cols}) VALUES ', width, len(rows), flat, tail)
        return driver.total_changes - before
    if conflict_keys is None:
        for part in chunks(rows):
            conn.execute(table.insert(), [dict(zip(columns, r)) for r in part])
        return len(rows)
    return insert_ignore(conn, table, [dict(zip(columns, r)) for r in rows], conflict_keys)


#: The usage table's key, in its order, and every column of a usage row (key, then hours).
USAGE_KEY = ("origin", "tres", "day_start", "account", "gpu_type", "user", "qos", "queue")
USAGE_COLUMNS = USAGE_KEY + s.USAGE_HOURS
#: Where a Delta key tuple (``rollup.KEY_NAMES[1:]``) keeps each text column of the usage key.
_DELTA_KEY = operator.itemgetter(*(rollup.KEY_NAMES[1:].index(c) for c in USAGE_KEY[3:]))
_DELTA_TRES = rollup.KEY_NAMES[1:].index("tres")


def _usage_sqlite_sql() -> tuple[str, str]:
    """(head, tail) of the SQLite usage upsert: a stored hour grows by the new seconds,
    rounded to 6 decimals (as the hourly rows did); an hour either side lacks keeps the other."""
    cols = ", ".join(f'"{c}"' for c in USAGE_COLUMNS)
    sets = ", ".join(f"{h} = CASE WHEN excluded.{h} IS NULL THEN usage.{h} WHEN usage.{h} IS NULL THEN excluded.{h} "
                     f"ELSE round(usage.{h} + excluded.{h}, 6) END" for h in s.USAGE_HOURS)
    key = ", ".join(f'"{c}"' for c in USAGE_KEY)
    return f"INSERT INTO usage ({cols}) VALUES ", f" ON CONFLICT ({key}) DO UPDATE SET {sets}"


_USAGE_SQLITE = _usage_sqlite_sql()


def write_usage(conn: Connection, delta: rollup.Delta) -> None:
    """Add a delta's hourly usage rows to the stored day rows (migration 0005): each hour's
    seconds are added to the stored hour, rounded to 6 decimals, exactly as the hourly
    ``INSERT … ON CONFLICT DO UPDATE SET seconds = round(seconds + excluded.seconds, 6)`` did;
    an hour not stored yet takes the new seconds as they are. A day's 24 hours travel in one
    row: a million jobs' import upserts ~24 times fewer rows than it did hour by hour."""
    if not delta:
        return
    if conn.dialect.name == "sqlite":  # a NaN hour is bound as NULL (``Delta.days``)
        head, tail = _USAGE_SQLITE
        sqlite_insert_values(conn.connection.driver_connection, head, len(USAGE_COLUMNS), usage_day_rows(delta), tail)
        return
    rows = [r[:len(USAGE_KEY)] + tuple(None if x != x else x for x in r[len(USAGE_KEY):])
            for r in usage_day_rows(delta)]
    stmt = _insert(conn, s.usage)
    u = s.usage.c

    def added(h: str):
        summed = sa.func.round(sa.cast(u[h] + stmt.excluded[h], sa.Numeric), 6)
        return sa.case((stmt.excluded[h].is_(None), u[h]), (u[h].is_(None), stmt.excluded[h]),
                       else_=sa.cast(summed, sa.Float))

    stmt = stmt.on_conflict_do_update(index_elements=list(USAGE_KEY), set_={h: added(h) for h in s.USAGE_HOURS})
    for part in chunks(rows):
        conn.execute(stmt, [dict(zip(USAGE_COLUMNS, r)) for r in part])


def usage_day_rows(delta: rollup.Delta) -> list[tuple]:
    """A delta's rows as the usage table stores them (``USAGE_COLUMNS`` tuples, one per UTC
    day and key, in (day, key) order; NaN for an hour without usage, which SQLite stores as
    NULL when bound)."""
    days, ranks, values = delta.days()
    origin = delta.origin
    keys = [(k[_DELTA_TRES],) + _DELTA_KEY(k) for k in delta.keys]  # (tres, account, gpu_type, user, qos, queue)
    return [(origin, keys[r][0], d) + keys[r][1:] + tuple(v) for d, r, v in zip(days, ranks, values)]


def upsert_usage_sql(source: str) -> str:
    """SQLite: ``write_usage``'s upsert for the day rows of ``source`` (a table or subquery
    with ``USAGE_COLUMNS``), taken in its rowid order."""
    head, tail = _USAGE_SQLITE
    cols = ", ".join(f's."{c}"' for c in USAGE_COLUMNS)
    return f"{head.replace(' VALUES ', ' ')}SELECT {cols} FROM {source} AS s WHERE true ORDER BY s.rowid{tail}"


def clear_usage_hours(conn: Connection, origin: str, lo: float, hi: float) -> None:
    """Remove the stored usage of ``origin`` in the clock hours [lo, hi) (the TRES the roll-up
    writes): those hours of the day rows become NULL, and rows left with no hour go."""
    u = s.usage.c
    day_lo = (lo // rollup.DAY) * rollup.DAY
    where = (u.origin == origin, u.tres.in_(rollup.TRES), u.day_start >= day_lo, u.day_start < hi)
    cleared = {}
    for k, h in enumerate(s.USAGE_HOURS):
        at = u.day_start + k * HOUR
        cleared[h] = sa.case(((at >= lo) & (at < hi), sa.null()), else_=u[h])
    conn.execute(s.usage.update().where(*where).values(cleared))
    conn.execute(s.usage.delete().where(*where, *(u[h].is_(None) for h in s.USAGE_HOURS)))


def usage_hours(conn: Connection, origin: str | None = None) -> list[tuple]:
    """The roll-up one row per hour, as the usage table held it before migration 0005:
    ``(origin, period_start, account, user, qos, queue, gpu_type, tres, seconds)``, in no
    particular order (for checks and exports; queries read the day rows)."""
    u = s.usage.c
    q = sa.select(s.usage)
    if origin is not None:
        q = q.where(u.origin == origin)
    out = []
    for r in conn.execute(q).mappings():
        for k, h in enumerate(s.USAGE_HOURS):
            v = r[h]
            if v is not None:
                out.append((r["origin"], r["day_start"] + k * HOUR, r["account"], r["user"], r["qos"], r["queue"],
                            r["gpu_type"], r["tres"], v))
    return out


def _total_changes(conn: Connection, _table: sa.Table) -> int:
    return conn.exec_driver_sql("SELECT total_changes()").scalar_one()


def _count(conn: Connection, table: sa.Table) -> int:
    return conn.execute(sa.select(sa.func.count()).select_from(table)).scalar_one()


_CONTAINERS = (dict, list)


def _jsonable(row: dict) -> dict:
    return {k: (json.dumps(v, sort_keys=True) if isinstance(v, (dict, list)) else v) for k, v in row.items()}


# ---- rows as tuples ----------------------------------------------------------------------
# The write primitives work on tuples in a fixed column order: the sacct importer builds
# them column by column without a dict per row (making and reading back a 40-key dict per
# job, and dicts per event and allocation, was about a third of a large import's parsing),
# and ``sqlite_insert_values`` binds them as they are. Writers with dict rows go through
# ``job_tuples`` & co.

#: Every column of ``jobs``, in table order: the order of a job row tuple.
JOB_COLUMNS: tuple[str, ...] = tuple(c.name for c in s.jobs.columns)
#: The columns of an event row tuple (``id`` is the database's).
EVENT_COLUMNS = ("origin", "job_id", "time", "kind", "detail", "policy_version", "source")
EVENT_KEY = ("origin", "job_id", "time", "kind", "detail")
#: The columns of an allocation row tuple (``id`` is the database's).
ALLOCATION_COLUMNS = ("origin", "job_id", "node", "gpu_index", "gpu_count", "gpu_type", "time_from", "time_to",
                      "as_of", "policy_version")
ALLOCATION_KEY = ("origin", "job_id", "node", "gpu_index", "time_from")

JOB_INDEX = {c: i for i, c in enumerate(JOB_COLUMNS)}
J_START, J_ELAPSED, J_NCPUS, J_BILLING, J_ACCOUNT, J_USER, J_QOS, J_QUEUE, J_GPU_TYPE = (
    JOB_INDEX[c] for c in ("start", "elapsed", "ncpus", "billing", "account", "user", "qos", "queue", "gpu_type"))
A_GPU_COUNT, A_GPU_TYPE, A_TIME_FROM, A_TIME_TO, A_AS_OF, A_POLICY_VERSION = (
    ALLOCATION_COLUMNS.index(c) for c in ("gpu_count", "gpu_type", "time_from", "time_to", "as_of", "policy_version"))
E_TIME, E_POLICY_VERSION = EVENT_COLUMNS.index("time"), EVENT_COLUMNS.index("policy_version")

#: A stored job is unchanged when every column but ``source`` is equal (the same record
#: from another file).
_JOB_COMPARED_NAMES = tuple(c for c in JOB_COLUMNS if c != "source")
_JOB_COMPARED = operator.itemgetter(*(JOB_INDEX[c] for c in _JOB_COMPARED_NAMES))
_C_START, _C_ELAPSED = _JOB_COMPARED_NAMES.index("start"), _JOB_COMPARED_NAMES.index("elapsed")
assert _JOB_COMPARED_NAMES[:2] == ("origin", "job_id")
_alloc_key = operator.itemgetter(*(ALLOCATION_COLUMNS.index(c) for c in ALLOCATION_KEY))


_FIRST, _SECOND = operator.itemgetter(0), operator.itemgetter(1)
_ALLOC_TIME_TO = operator.itemgetter(A_TIME_TO)


def _by_origin(rows: list[tuple]) -> dict[str, list[tuple]]:
    """Row tuples (origin first) grouped by origin, in order; one origin (an import's usual
    case) found without a Python step per row."""
    origins = set(map(_FIRST, rows))
    if len(origins) == 1:
        return {origins.pop(): rows}
    out: dict[str, list[tuple]] = {}
    for r in rows:
        out.setdefault(r[0], []).append(r)
    return out


def job_tuples(rows: Iterable[dict]) -> list[tuple]:
    """Job dicts -> ``JOB_COLUMNS`` tuples: a missing column takes its default, a dict or
    list value (``extra``) becomes JSON text."""
    defaults = _defaults()
    get_all = operator.itemgetter(*JOB_COLUMNS)
    out = []
    for r in rows:
        if r.keys() == _JOB_SET and type(r["extra"]) not in _CONTAINERS:
            out.append(get_all(r))  # every column given, ``extra`` as JSON text
        else:
            out.append(get_all(_jsonable({c: (r[c] if c in r else defaults[c]) for c in JOB_COLUMNS})))
    return out


def _tuples(rows: Iterable[dict], columns: tuple[str, ...], defaults: dict[str, object]) -> list[tuple]:
    get_all = operator.itemgetter(*columns)
    out = []
    for r in rows:
        if len(r) == len(columns):
            try:
                out.append(get_all(r))
                continue
            except KeyError:
                pass
        out.append(tuple(r.get(c, defaults.get(c)) for c in columns))
    return out


def event_tuples(rows: Iterable[dict]) -> list[tuple]:
    """Event dicts -> ``EVENT_COLUMNS`` tuples (``detail`` and ``source`` default to '')."""
    return _tuples(rows, EVENT_COLUMNS, {"detail": "", "source": ""})


def allocation_tuples(rows: Iterable[dict]) -> list[tuple]:
    """Allocation dicts -> ``ALLOCATION_COLUMNS`` tuples (``gpu_type`` defaults to '')."""
    return _tuples(rows, ALLOCATION_COLUMNS, {"gpu_type": ""})


_GC_LOCK = threading.Lock()
_GC_HOLDERS = 0
_GC_WAS_ENABLED = False


@contextmanager
def gc_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off while a bulk import runs (reference counting
    still frees everything an import drops; its rows hold no cycles). An import makes
    millions of tuples and strings that all stay alive until written, and each collection
    walked them again: about a third of the parse time. Nested and concurrent uses share
    one pause; the collector is turned back on (if it was on) when the last one ends."""
    global _GC_HOLDERS, _GC_WAS_ENABLED
    with _GC_LOCK:
        if _GC_HOLDERS == 0:
            _GC_WAS_ENABLED = gc.isenabled()
            gc.disable()
        _GC_HOLDERS += 1
    try:
        yield
    finally:
        with _GC_LOCK:
            _GC_HOLDERS -= 1
            if _GC_HOLDERS == 0 and _GC_WAS_ENABLED:
                gc.enable()


class Ledger:
    """An open ledger database (SQLite file or PostgreSQL URL), migrated to the newest schema."""

    def __init__(self, db: str | os.PathLike | None = None, *, engine: Engine | None = None) -> None:
        self.engine = engine if engine is not None else open_engine(db)

    @property
    def url(self) -> str:
        return self.engine.url.render_as_string(hide_password=True)

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @contextmanager
    def transaction(self) -> Iterator[Connection]:
        with self.engine.begin() as conn:
            yield conn

    @contextmanager
    def read(self) -> Iterator[Connection]:
        with self.engine.connect() as conn:
            yield conn

    # ------------------------------------------------------------------ writes
    def write_jobs(self, conn: Connection, rows: list[dict], stats: WriteStats) -> None:
        """Insert new jobs; replace a stored job whose record changed (a later sacct run).
        Rows are dicts of column values (missing columns take their defaults)."""
        self.write_job_rows(conn, job_tuples(rows), stats)

    def write_job_rows(self, conn: Connection, rows: list[tuple], stats: WriteStats) -> None:
        """``write_jobs`` for rows already in ``JOB_COLUMNS`` order (``extra`` as JSON text),
        as the sacct importer builds them: no per-row dict is made or read back."""
        if not rows:
            return
        by_origin = _by_origin(rows)
        compared_of = _JOB_COMPARED
        for origin, group in by_origin.items():
            ids = list(map(_SECOND, group))
            existing: dict[str, tuple] = {}  # job id -> stored values of the compared columns
            if conn.dialect.name == "sqlite":
                sql = (f'SELECT {", ".join(chr(34) + c + chr(34) for c in _JOB_COMPARED_NAMES)} FROM jobs '
                       'WHERE origin = ? AND job_id IN ({})')
                for row in _sqlite_in(conn, sql, (origin,), ids):
                    existing[row[1]] = row
            else:
                for part in chunks(ids, 900):
                    q = sa.select(s.jobs).where(s.jobs.c.origin == origin, s.jobs.c.job_id.in_(part))
                    for row in conn.execute(q).mappings():
                        existing[row["job_id"]] = tuple(row[c] for c in _JOB_COMPARED_NAMES)
            fresh = stats.fresh.setdefault(origin, {})
            if not existing:  # the usual daily export: every job new
                new, changed = group, []
                fresh.update(zip(ids, group))
            else:
                new, changed = [], []
                for r in group:
                    old = existing.get(r[1])
                    if old is None:
                        new.append(r)
                        fresh[r[1]] = r
                    elif old != compared_of(r):
                        changed.append(r)
                        _touch_job(stats, origin, r[J_START], r[J_ELAPSED])
                        _touch_job(stats, origin, old[_C_START], old[_C_ELAPSED])
                    else:
                        stats.jobs_unchanged += 1
            if changed:  # their allocations count under the job's (maybe new) account, user …
                a = s.allocations.c
                for part in chunks([r[1] for r in changed], 900):
                    q = sa.select(sa.func.min(a.time_from), sa.func.max(a.time_to), sa.func.max(a.as_of)).where(
                        a.origin == origin, a.job_id.in_(part))
                    stats.touch(origin, *conn.execute(q).one())
            insert_tuples(conn, s.jobs, JOB_COLUMNS, new)
            for r in changed:
                conn.execute(s.jobs.update().where(s.jobs.c.origin == r[0], s.jobs.c.job_id == r[1])
                             .values(**{k: v for k, v in zip(JOB_COLUMNS, r) if k not in ("origin", "job_id")}))
            stats.jobs_added += len(new)
            stats.jobs_updated += len(changed)

    def last_job_rowid(self, conn: Connection) -> int | None:
        """SQLite: the largest rowid of ``jobs`` (0 when empty), so that the rows a write
        inserts next are those above it (``insert_new_job_events``); None on PostgreSQL."""
        if conn.dialect.name != "sqlite":
            return None
        return conn.exec_driver_sql("SELECT max(rowid) FROM jobs").scalar() or 0

    def write_events(self, conn: Connection, rows: list[dict], stats: WriteStats) -> None:
        self.write_event_rows(conn, event_tuples(rows), stats)

    def write_event_rows(self, conn: Connection, rows: list[tuple], stats: WriteStats) -> None:
        """Add events given as tuples in ``EVENT_COLUMNS`` order; an event stored before is skipped."""
        stats.events_added += insert_tuples(conn, s.events, EVENT_COLUMNS, rows, EVENT_KEY)

    def write_allocations(self, conn: Connection, rows: list[dict], stats: WriteStats) -> None:
        """Add allocations; an allocation seen open before and closed now gets its end."""
        self.write_allocation_rows(conn, allocation_tuples(rows), stats)

    def write_allocation_rows(self, conn: Connection, rows: list[tuple], stats: WriteStats) -> None:
        """``write_allocations`` for tuples in ``ALLOCATION_COLUMNS`` order."""
        if not rows:
            return
        key = ALLOCATION_KEY
        a = s.allocations.c
        # The updates below only ever touch an allocation that is open (time_to IS NULL):
        # one stored open before this write, or one this write inserts open. Every other
        # row's update would match nothing, so it is not sent (one statement per row was
        # most of an import's time).
        # Stored open allocations are looked up for this write's jobs only (through the
        # (origin, job_id, …) unique index): all open ones of the cluster meant reading the
        # whole table on every import.
        open_keys = ({_alloc_key(r) for r in rows if r[A_TIME_TO] is None}
                     if None in map(_ALLOC_TIME_TO, rows) else set())
        jobs_of = {origin: set(map(_SECOND, group)) for origin, group in _by_origin(rows).items()}
        for origin, ids in jobs_of.items():
            if conn.dialect.name == "sqlite":
                sql = (f'SELECT {", ".join(key)} FROM allocations WHERE origin = ? AND time_to IS NULL '
                       'AND job_id IN ({})')
                open_keys.update(_sqlite_in(conn, sql, (origin,), sorted(ids)))
                continue
            for part in chunks(sorted(ids), 900):
                q = sa.select(*(a[k] for k in key)).where(a.origin == origin, a.job_id.in_(part),
                                                          a.time_to.is_(None))
                open_keys.update(tuple(x) for x in conn.execute(q))
        stats.allocations_added += insert_tuples(conn, s.allocations, ALLOCATION_COLUMNS, rows, key)
        for origin, ids in jobs_of.items():
            fresh = stats.fresh.get(origin, {})
            mine = rows if len(jobs_of) == 1 else [r for r in rows if r[0] == origin]
            if ids <= fresh.keys():  # every job new (a daily export): all added as a delta
                stats.fresh_allocations.setdefault(origin, []).extend(mine)
                continue
            for r in mine:
                if r[1] in fresh:  # new job, so a new allocation: added as a delta
                    stats.fresh_allocations.setdefault(origin, []).append(r)
                else:
                    stats.touch(origin, r[A_TIME_FROM], r[A_TIME_TO], r[A_AS_OF])
        self.update_open_allocations(conn, rows, open_keys, stats)

    def update_open_allocations(self, conn: Connection, rows: Iterable[tuple], open_keys: set,
                                stats: WriteStats) -> None:
        """After the allocation rows were inserted: each row whose key is in ``open_keys`` (an
        allocation open before this write, or inserted open by it) closes the stored one (a
        ``time_to``) or moves its ``as_of`` on, and marks its hours for the roll-up."""
        if not open_keys:
            return
        a = s.allocations.c
        key = ALLOCATION_KEY
        for r in rows:
            k = _alloc_key(r)
            if k not in open_keys:
                continue
            where = [a[name] == value for name, value in zip(key, k)]
            old_as_of = conn.execute(sa.select(a.as_of).where(*where)).scalar_one_or_none()
            # the whole stored extent is recomputed (a fresh job's open allocation included)
            stats.touch(r[0], r[A_TIME_FROM], r[A_TIME_TO], r[A_AS_OF], old_as_of)
            q = s.allocations.update().where(*where)
            if r[A_TIME_TO] is not None:
                res = conn.execute(q.where(a.time_to.is_(None)).values(time_to=r[A_TIME_TO], as_of=r[A_AS_OF]))
                stats.allocations_updated += res.rowcount or 0
            elif r[A_AS_OF] is not None:
                conn.execute(q.where(a.time_to.is_(None), (a.as_of.is_(None)) | (a.as_of < r[A_AS_OF]))
                             .values(as_of=r[A_AS_OF]))

    def update_usage(self, conn: Connection, origin: str, stats: WriteStats) -> int:
        """Bring the roll-up of ``origin`` up to date after a write, with the rows a full
        ``rebuild_usage`` would give: the hours a changed record touched (``stats.dirty``) are
        recomputed from every allocation and job overlapping them; jobs this write created
        (and their allocations) are added to the stored hours without reading anything back
        (reading every overlapping record made each daily import scan the whole table)."""
        span = stats.dirty.get(origin)
        n = 0
        if span is not None:
            n += self.rebuild_usage(conn, origin, span[0], span[1])
        return n + self._add_fresh_usage(conn, origin, stats, None if span is None else rollup.hour_span(*span))

    def rebuild_usage(self, conn: Connection, origin: str, since: float | None = None,
                      until: float | None = None) -> int:
        """Recompute the hourly TRES-second roll-up of one origin from its allocations and jobs;
        with ``since``/``until``, only the hours overlapping [since, until]."""
        j, a = s.jobs.c, s.allocations.c
        u = s.usage.c
        lo = hi = None
        if since is not None and until is not None:
            lo, hi = rollup.hour_span(since, until)
            # the TRES the roll-up writes, named so that the key (origin, tres, day, …) finds the
            # days instead of the whole origin being scanned
            clear_usage_hours(conn, origin, lo, hi)
        else:
            conn.execute(s.usage.delete().where(u.origin == origin))
        q = (sa.select(a.time_from, a.time_to, a.as_of, a.gpu_count, a.gpu_type, j.account, j.user, j.qos,
                       j.queue, j.gpu_type.label("job_gpu_type"))
             .join(s.jobs, (j.origin == a.origin) & (j.job_id == a.job_id)).where(a.origin == origin)
             .order_by(a.id))
        if lo is not None:
            q = q.where(a.time_from < hi, sa.func.coalesce(a.time_to, a.as_of) > lo)
        allocs = conn.execute(q).all()
        q = sa.select(j.start, j.elapsed, j.ncpus, j.account, j.user, j.qos, j.queue, j.billing).where(
            j.origin == origin, j.start.is_not(None), j.elapsed.is_not(None)).order_by(j.job_id)
        if lo is not None:
            q = q.where(j.start < hi, j.start + j.elapsed > lo)
        delta = rollup.delta_of(origin, conn.execute(q), allocs, lo, hi)
        write_usage(conn, delta)
        return len(delta)

    def _add_fresh_usage(self, conn: Connection, origin: str, stats: WriteStats,
                         skip: tuple[float, float] | None) -> int:
        """Add the roll-up of the jobs and allocations this write created (``stats.fresh``)
        to the stored hours, outside ``skip`` (hours just rebuilt, which already count them).
        An importer may hand in the rows computed for all of its jobs (``stats.prepared``):
        they are used when every one of those jobs turned out to be new."""
        jobs = stats.fresh.get(origin)
        if not jobs:
            return 0
        ready = stats.prepared.get(origin)
        if ready is not None and ready[0] == jobs.keys():
            delta = ready[1]
        else:
            delta = fresh_usage_rows(origin, jobs, first_by_key(stats.fresh_allocations.get(origin, ())))
        if skip is not None:
            delta = delta.outside(*skip)
        write_usage(conn, delta)
        return len(delta)

    def record_import(self, conn: Connection, kind: str, sha: str, origin: str, source: str, rows: int) -> bool:
        """Remember an imported file by content; False when these bytes were imported before."""
        added = insert_ignore(conn, s.imports, [{"kind": kind, "sha": sha, "origin": origin, "source": source,
                                                 "imported_at": time.time(), "rows": rows}],
                              ("kind", "sha", "origin"))
        return bool(added)

    # ------------------------------------------------------------------ policy versions
    def version_in_force(self, conn: Connection, pool: str | None, at: float) -> str | None:
        """The newest policy version of ``pool`` committed at or before ``at``."""
        if not pool:
            return None
        v = s.policy_versions.c
        q = (sa.select(v.version).where(v.pool == pool, v.committed_at <= at)
             .order_by(v.committed_at.desc(), v.seq.desc()).limit(1))
        return conn.execute(q).scalar_one_or_none()

    def versions_in_force(self, conn: Connection, pool: str | None) -> VersionLookup:
        """``version_in_force`` for many times: the pool's versions are read once (per import)
        and each lookup is a bisection."""
        return VersionLookup(conn, pool)

    def origins(self) -> list[str]:
        with self.read() as conn:
            return list(conn.execute(sa.select(s.jobs.c.origin).distinct().order_by(s.jobs.c.origin)).scalars())


#: The states after which sacct's End is the job's end (``finished`` events).
FINAL_STATES = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "PREEMPTED", "NODE_FAIL", "OUT_OF_MEMORY",
                "BOOT_FAIL", "DEADLINE", "REVOKED")


def _new_job_events_sql(versioned: bool, numbers: str | None = None) -> str:
    time = 'CASE k.n WHEN 0 THEN j.submit WHEN 1 THEN j.start ELSE j."end" END'
    version = "NULL"
    if versioned:  # as ``Ledger.version_in_force``: the newest committed at or before the event
        version = (f"(SELECT v.version FROM policy_versions AS v WHERE v.pool = ? AND v.committed_at <= {time} "
                   "ORDER BY v.committed_at DESC, v.seq DESC LIMIT 1)")
    first_word = "CASE WHEN instr(j.state, ' ') > 0 THEN substr(j.state, 1, instr(j.state, ' ') - 1) ELSE j.state END"
    final = ", ".join(f"'{x}'" for x in FINAL_STATES)
    cols = ", ".join(EVENT_COLUMNS)
    # CROSS JOIN keeps the jobs the outer loop (by rowid, from ``after`` on); each job's events
    # in the order submitted, started, finished, as the importer lists them. ``numbers``: a
    # table of n = 0, 1, 2 as its INTEGER PRIMARY KEY, whose scan SQLite knows is in order,
    # so the ORDER BY needs no sort of each job's three rows (a third of the statement's
    # time); ``+k.n`` keeps the planner from looking k up by n instead
    k = f"{numbers} AS k" if numbers else "(SELECT 0 AS n UNION ALL SELECT 1 UNION ALL SELECT 2) AS k"
    n = "+k.n" if numbers else "k.n"
    return (f"INSERT INTO events ({cols}) SELECT j.origin, j.job_id, {time}, "
            "CASE k.n WHEN 0 THEN 'submitted' WHEN 1 THEN 'started' ELSE 'finished' END, "
            "CASE k.n WHEN 0 THEN '' WHEN 1 THEN j.node_list ELSE j.state END, "
            f"{version}, j.source FROM main.jobs AS j CROSS JOIN {k} "
            "WHERE j.rowid > ? AND +j.origin = ? AND ("
            f"({n} = 0 AND j.submit IS NOT NULL) "
            f"OR ({n} = 1 AND j.start IS NOT NULL AND j.node_list NOT IN ('', '(null)')) "
            f"OR ({n} = 2 AND j.\"end\" IS NOT NULL AND {first_word} IN ({final}))) "
            "ORDER BY j.rowid, k.n ON CONFLICT DO NOTHING")


_NEW_JOB_EVENTS = {(v, None): _new_job_events_sql(v) for v in (False, True)}  # and others as used


def insert_new_job_events(conn: Connection, origin: str, after: int, pool: str | None,
                          numbers: str | None = None) -> int:
    """SQLite: add the sacct events of the jobs of ``origin`` stored with a rowid above
    ``after`` (the jobs a write has just inserted, each from one record), made by the database
    from the stored rows instead of bound value by value (binding seven values for each of
    three events a job was most of the events' cost): ``submitted`` at Submit; ``started``
    at Start with the node list when the job ran (a start and nodes); ``finished`` at End with
    the state when the state is final. The same rows, in the same order, as the sacct
    importer's event tuples; ``pool``: the policy versions in force, by event time (None: no
    versions); ``numbers``: see ``_new_job_events_sql``. Returns how many were added (an
    event stored before is skipped)."""
    driver = conn.connection.driver_connection
    before = driver.total_changes
    params = ((pool,) if pool is not None else ()) + (after, origin)
    key = (pool is not None, numbers)
    sql = _NEW_JOB_EVENTS.get(key) or _NEW_JOB_EVENTS.setdefault(key, _new_job_events_sql(*key))
    driver.execute(sql, params)
    return driver.total_changes - before


def fresh_usage_rows(origin: str, jobs: dict[str, tuple], allocations: Iterable[tuple]) -> rollup.Delta:
    """The usage rows (``rollup.Delta``) of new jobs (``JOB_COLUMNS`` tuples by job id) and
    their allocations (``ALLOCATION_COLUMNS`` tuples, each key once: the first row given),
    handed to the roll-up as columns (no tuple is made per job or allocation)."""
    rows = list(jobs.values())
    return fresh_usage_of_columns(origin, jobs, list(zip(*rows)) if rows else None, allocations)


def fresh_usage_of_columns(origin: str, ids: Iterable[str], cols, allocations: Iterable[tuple]) -> rollup.Delta:
    """``fresh_usage_rows`` for the jobs given as their ids (each once) and their columns
    (indexed as ``JOB_COLUMNS``; None for no jobs): the sacct importer has them as columns."""
    allocations = list(allocations)
    job_cols: tuple = ()
    alloc_cols: tuple = ()
    if cols is not None:
        job_cols = tuple(cols[i] for i in (J_START, J_ELAPSED, J_NCPUS, J_ACCOUNT, J_USER, J_QOS, J_QUEUE, J_BILLING))
        if allocations:
            a = list(zip(*allocations))
            position = {job_id: i for i, job_id in enumerate(ids)}
            at = list(map(position.__getitem__, a[1]))  # each allocation's job (KeyError: not given)
            get = operator.itemgetter(*at)
            of_job = (lambda col: get(col)) if len(at) > 1 else (lambda col: (get(col),))
            alloc_cols = (a[A_TIME_FROM], a[A_TIME_TO], a[A_AS_OF], a[A_GPU_COUNT], a[A_GPU_TYPE],
                          *(of_job(cols[i]) for i in (J_ACCOUNT, J_USER, J_QOS, J_QUEUE, J_GPU_TYPE)))
    elif allocations:
        raise KeyError(allocations[0][1])
    return rollup.delta_of_columns(origin, job_cols, alloc_cols)


def first_by_key(allocations: Iterable[tuple]) -> list[tuple]:
    """Allocation tuples, each (origin, job, node, GPU index, from) key once: the first, as
    an insert that skips existing keys keeps it."""
    seen: dict[tuple, tuple] = {}
    for r in allocations:
        seen.setdefault(_alloc_key(r), r)
    return list(seen.values())


def _touch_job(stats: WriteStats, origin: str, start, elapsed) -> None:
    if start is not None:
        stats.touch(origin, start, start + (elapsed or 0.0))


class VersionLookup:
    """The policy versions of one pool, read once; ``lookup(at)`` answers exactly what
    ``Ledger.version_in_force(conn, pool, at)`` would (newest ``committed_at <= at``, the
    later commit on a tie), without a query per event."""

    def __init__(self, conn: Connection, pool: str | None) -> None:
        self._times: list[float] = []
        self._versions: list[str] = []
        if pool:
            v = s.policy_versions.c
            q = sa.select(v.committed_at, v.version).where(v.pool == pool).order_by(v.committed_at, v.seq)
            for committed_at, version in conn.execute(q):
                self._times.append(committed_at)
                self._versions.append(version)

    def __bool__(self) -> bool:
        """False when the pool has no versions (every lookup would answer None)."""
        return bool(self._times)

    def __call__(self, at: float | None) -> str | None:
        if at is None or not self._times:
            return None
        i = bisect.bisect_right(self._times, at)
        return self._versions[i - 1] if i else None


_DEFAULTS: dict[str, object] = {}
_JOB_SET = set(JOB_COLUMNS)


def _defaults() -> dict[str, object]:
    """Each jobs column's default (computed once: it was evaluated per row and column)."""
    if not _DEFAULTS:
        _DEFAULTS.update({c.name: _default(c.name) for c in s.jobs.columns})
    return _DEFAULTS


def _default(col: str):
    c = s.jobs.c[col]
    if c.server_default is None:
        return None
    text = c.server_default.arg
    if isinstance(c.type, (sa.Integer, sa.BigInteger)):
        return int(text)
    if isinstance(c.type, sa.Float):
        return float(text)
    return text


def as_ledger(db) -> Ledger:
    """A Ledger from a Ledger, a URL, a path, or None (the default database)."""
    return db if isinstance(db, Ledger) else Ledger(db)
