"""Many sacct files into a SQLite ledger with the parsing in a child process.

Why: parsing is Python work and so is binding a million rows' values to SQLite statements;
in one process the parsing thread and the writer share one interpreter lock, so a second
core helped little. Here a child process (``python -c``, see ``_BOOT``) parses each file and
*stages* its jobs, allocations and usage day rows in an in-memory SQLite database, whose
bytes (``Connection.serialize``) come back through a pipe. The writer attaches them
(``deserialize``) and copies the rows with ``INSERT … SELECT`` (the usage as the same
upsert ``store.write_usage`` makes), which SQLite runs in C with no value bound from
Python; the events are made from the stored jobs as before (``store.insert_new_job_events``).

Same rows, same transaction per file: the staged copy is used only for an origin whose jobs
are all new, each from one record, with no stored open allocation of theirs (a daily export);
anything else (a re-import, a changed record, a duplicate) is parsed again in the writer and
stored by ``sacct.store_origin``, the plain path. A file the child cannot parse is parsed
again in the writer too, which raises the parser's own error (file, line, field) in the
file's turn; a child that cannot be started or dies leaves the remaining files to the writer.
``tests/ledger/test_import_processes.py`` compares every table with the plain path's.
"""
from __future__ import annotations

import gc
import os
import pickle
import queue
import signal
import sqlite3
import subprocess
import sys
import threading
from dataclasses import dataclass
from functools import lru_cache
from itertools import chain, islice
from operator import itemgetter
from pathlib import Path

from gpupool.ledger.imports import sacct
from gpupool.ledger.store import (
    A_TIME_TO,
    ALLOCATION_COLUMNS,
    ALLOCATION_KEY,
    JOB_COLUMNS,
    USAGE_COLUMNS,
    Ledger,
    WriteStats,
    first_by_key,
    fresh_usage_of_columns,
    insert_new_job_events,
    sqlite_insert_flat,
    upsert_usage_sql,
    usage_day_rows,
)

#: ``import_sacct_files`` uses a child process (``processes=None``) from this many bytes of
#: files on: below it, starting the child (about a second: a new interpreter importing numpy
#: and SQLAlchemy) costs more than it saves.
PROCESS_MIN_BYTES = 8 << 20
#: Files handed to the child ahead of the one being written (so it is never idle).
AHEAD = 2
#: Files the writer may stage itself ahead of the one being written, while it would
#: otherwise wait for the child.
STEAL_AHEAD = 4
#: The name the staged database is attached under, on the writer's connection.
SCHEMA = "gpupool_staged"
#: Its table of n = 0, 1, 2 (``store.insert_new_job_events``).
NUMBERS = "numbers"

JOB_CONSTANTS = sacct.JOB_CONSTANTS
#: Job columns copied from another column of the same row (the sacct importer's queue is the
#: partition) or bound per file (``source``).
_JOB_COPIED = {"queue": "partition"}
STAGED_JOB_COLUMNS = tuple(c for c in JOB_COLUMNS if c not in JOB_CONSTANTS and c not in _JOB_COPIED
                           and c not in ("origin", "source"))
_STAGED_JOB_AT = tuple(JOB_COLUMNS.index(c) for c in STAGED_JOB_COLUMNS)
_STAGED_JOB_SET = frozenset(_STAGED_JOB_AT)
#: Allocation columns staged: all but ``origin`` (each origin has its own staged tables,
#: ``jobs_<n>`` and ``allocations_<n>``) and ``policy_version``, which the copy looks up.
STAGED_ALLOCATION_COLUMNS = ALLOCATION_COLUMNS[1:-1]
assert ALLOCATION_COLUMNS[0] == "origin" and ALLOCATION_COLUMNS[-1] == "policy_version"


def _q(name: str) -> str:
    return f'"{name}"'


@lru_cache(maxsize=64)
def _copy_jobs_sql(n: int) -> str:
    """INSERT … SELECT of staged jobs (table ``jobs_<n>``), in their staged (file) order;
    parameters: the origin, the constants of ``JOB_CONSTANTS`` in order, the source."""
    exprs = []
    for c in JOB_COLUMNS:
        if c in JOB_CONSTANTS or c in ("origin", "source"):
            exprs.append("?")
        elif c in _JOB_COPIED:
            exprs.append(f"s.{_q(_JOB_COPIED[c])}")
        else:
            exprs.append(f"s.{_q(c)}")
    params_order = [c for c in JOB_COLUMNS if c in JOB_CONSTANTS or c in ("origin", "source")]
    assert params_order == ["origin", *JOB_CONSTANTS, "source"]
    return (f"INSERT INTO main.jobs ({', '.join(map(_q, JOB_COLUMNS))}) SELECT {', '.join(exprs)} "
            f"FROM {SCHEMA}.jobs_{n} AS s ORDER BY s.rowid")


@lru_cache(maxsize=128)
def _copy_allocations_sql(n: int, versioned: bool) -> str:
    """INSERT … SELECT of staged allocations (``allocations_<n>``), skipping stored keys as the
    plain insert does; the policy version in force at each ``time_from`` as
    ``Ledger.version_in_force`` finds it (parameters: the origin, then the pool when versioned)."""
    version = "NULL"
    if versioned:
        version = ("(SELECT v.version FROM main.policy_versions AS v WHERE v.pool = ? "
                   "AND v.committed_at <= s.time_from ORDER BY v.committed_at DESC, v.seq DESC LIMIT 1)")
    cols = ", ".join(map(_q, ALLOCATION_COLUMNS))
    picked = ", ".join(f"s.{_q(c)}" for c in STAGED_ALLOCATION_COLUMNS)
    return (f"INSERT INTO main.allocations ({cols}) SELECT ?, {picked}, {version} FROM {SCHEMA}.allocations_{n} AS s "
            f"WHERE true ORDER BY s.rowid ON CONFLICT ({', '.join(map(_q, ALLOCATION_KEY))}) DO NOTHING")


@lru_cache(maxsize=64)
def _any_stored_sql(n: int) -> str:
    """Whether any staged job (``jobs_<n>``) of the origin is stored already, or any stored
    allocation of a staged allocation's job is open: then the plain path decides what
    changes (parameters: the origin twice)."""
    # CROSS JOIN: the staged rows outside, each looked up in a stored table's unique index
    # (left to itself, the planner scanned every stored allocation of the origin)
    return (f"SELECT EXISTS (SELECT 1 FROM {SCHEMA}.jobs_{n} AS s CROSS JOIN main.jobs AS j "
            "ON j.origin = ? AND j.job_id = s.job_id) "
            f"OR EXISTS (SELECT 1 FROM {SCHEMA}.allocations_{n} AS s CROSS JOIN main.allocations AS a "
            "ON a.origin = ? AND a.job_id = s.job_id AND a.time_to IS NULL)")


@dataclass
class StagedOrigin:
    """One origin of a staged file."""

    staged: int | None  # n: its jobs and allocations are in ``jobs_<n>``, ``allocations_<n>``
    ids: list  # job ids, in the order the jobs were staged
    records: int  # records of this origin in the file
    open_allocations: list  # allocation tuples without time_to, in file order
    usage: object  # rollup.Delta of its jobs, as if all were new


@dataclass
class StagedFile:
    """A file parsed in the child: what ``Prepared`` says, the rows as a SQLite image."""

    kind: str
    sha: str
    source: str
    records: int
    image: bytes
    by_origin: dict[str, StagedOrigin]


def _create(con: sqlite3.Connection, n: int) -> None:
    con.execute(f"CREATE TABLE jobs_{n} ({', '.join(map(_q, STAGED_JOB_COLUMNS))})")
    con.execute(f"CREATE TABLE allocations_{n} ({', '.join(map(_q, STAGED_ALLOCATION_COLUMNS))})")
    con.execute(f"CREATE TABLE usage_{n} ({', '.join(map(_q, USAGE_COLUMNS))})")


def _stage_rows(con: sqlite3.Connection, table: str, columns: tuple[str, ...], rows: list[tuple]) -> None:
    """Insert rows into a staged table, leaving out the columns that are None in every row
    (NULL all the same; binding a None costs an adapter lookup)."""
    if not rows:
        return
    width = len(columns)
    flat = list(chain.from_iterable(rows))
    n = len(rows)
    unset = [i for i in range(width) if rows[0][i] is None and flat[i::width].count(None) == n]
    for i in reversed(unset):  # last first: the columns before stay where they are
        del flat[i::width]
        width -= 1
    kept = [c for i, c in enumerate(columns) if i not in unset]
    sqlite_insert_flat(con, f"INSERT INTO {table} ({', '.join(map(_q, kept))}) VALUES ", len(kept), n, flat)


def _stage_columns(con: sqlite3.Connection, table: str, columns: tuple[str, ...], cols: list, n: int) -> None:
    """``_stage_rows`` for ``n`` rows given as columns (sequences of ``n`` values): the flat
    list of values is filled a column at a time (a slice assignment each), no row tuple made."""
    if not n:
        return
    kept = [(name, col) for name, col in zip(columns, cols) if not (col[0] is None and col.count(None) == n)]
    width = len(kept)
    flat: list = [None] * (n * width)
    for j, (_, col) in enumerate(kept):
        flat[j::width] = col
    sqlite_insert_flat(con, f"INSERT INTO {table} ({', '.join(_q(name) for name, _ in kept)}) VALUES ", width, n, flat)


def _entry(con: sqlite3.Connection):
    """``sacct._prepare_table``'s ``entry`` for the child: an origin whose jobs each have one
    record is staged in ``con`` straight from its columns (no job tuple is made), its usage
    computed from the same columns; any other is left to the writer."""
    made = [0]

    def entry(o: str, ids, job_cols, _events, allocs, records: int) -> StagedOrigin:
        if len(ids) != records or len(set(ids)) != records:
            return StagedOrigin(None, [], records, [], None)
        n = made[0]
        made[0] += 1
        _create(con, n)
        # a column the same in every row is an iterator repeating its value
        cols = [col if isinstance(col, (list, tuple)) or i not in _STAGED_JOB_SET else list(islice(col, records))
                for i, col in enumerate(job_cols)]
        _stage_columns(con, f"jobs_{n}", STAGED_JOB_COLUMNS, [cols[i] for i in _STAGED_JOB_AT], records)
        _stage_rows(con, f"allocations_{n}", STAGED_ALLOCATION_COLUMNS, [r[1:-1] for r in allocs])
        usage = fresh_usage_of_columns(o, ids, cols, first_by_key(allocs))
        _stage_rows(con, f"usage_{n}", USAGE_COLUMNS, usage_day_rows(usage) if usage else [])
        return StagedOrigin(n, list(ids), records, [r for r in allocs if r[A_TIME_TO] is None], usage)
    return entry


def stage_file(data: bytes, cluster: str | None, source: str) -> StagedFile | None:
    """Child side: parse a file and stage its rows. None when that fails: the writer
    parses the file itself, which raises the parser's error (or stores it the plain way)."""
    con = sqlite3.connect(":memory:")
    try:
        con.execute(f"CREATE TABLE {NUMBERS} (n INTEGER PRIMARY KEY)")  # for the events' copy
        con.execute(f"INSERT INTO {NUMBERS} VALUES (0), (1), (2)")
        prep = sacct.parse_bytes(data, cluster, source, _entry(con))
        con.commit()
        staged_any = any(part.staged is not None for part in prep.by_origin.values())
        image = con.serialize() if staged_any else b""  # (an empty database has no image)
    except Exception:  # noqa: BLE001 - reported by the writer's own parse
        return None
    finally:
        con.close()
    return StagedFile(prep.kind, prep.sha, prep.source, prep.records, image, prep.by_origin)


def store_staged(ledger: Ledger, staged: StagedFile, data: bytes, cluster: str | None,
                 policy_pool: str | None) -> dict:
    """Writer side: one staged file in one transaction, as ``sacct._store`` writes it."""
    stats = WriteStats()
    local = None  # the file parsed here, for origins the staged copy does not serve
    with ledger.engine.connect() as conn:
        driver = conn.connection.driver_connection
        if staged.image:
            if any(row[1] == SCHEMA for row in driver.execute("PRAGMA database_list")):
                driver.execute(f"DETACH DATABASE {SCHEMA}")  # left by a write that failed to detach
            driver.execute(f"ATTACH DATABASE ':memory:' AS {SCHEMA}")
        try:
            if staged.image:
                driver.deserialize(staged.image, name=SCHEMA)
            with conn.begin():
                for o, part in staged.by_origin.items():
                    if part.staged is not None and not driver.execute(_any_stored_sql(part.staged),
                                                                      (o, o)).fetchone()[0]:
                        _copy_origin(ledger, conn, driver, staged, o, part, policy_pool, stats)
                        continue
                    if local is None:
                        local = sacct.parse_bytes(data, cluster, staged.source)
                    sacct.store_origin(ledger, conn, local, o, local.by_origin[o], policy_pool, stats)
        finally:
            if staged.image:
                driver.execute(f"DETACH DATABASE {SCHEMA}")
    return sacct.result_of(staged, stats)


def _copy_origin(ledger: Ledger, conn, driver, staged: StagedFile, o: str, part: StagedOrigin,
                 policy_pool: str | None, stats: WriteStats) -> None:
    """``sacct.store_origin`` for an origin whose jobs are all new, from the staged rows."""
    fresh = stats.fresh.setdefault(o, {})
    fresh.update(dict.fromkeys(part.ids))  # (the rows themselves are needed only without ``prepared``)
    stats.prepared[o] = (dict.fromkeys(part.ids).keys(), part.usage)
    version_at = ledger.versions_in_force(conn, policy_pool or o)
    after = ledger.last_job_rowid(conn)
    before = driver.total_changes
    driver.execute(_copy_jobs_sql(part.staged), (o, *JOB_CONSTANTS.values(), staged.source))
    added = driver.total_changes - before
    stats.jobs_added += added
    if added != len(part.ids):  # pragma: no cover - the check above found none stored
        raise sqlite3.IntegrityError(f"{staged.source}: {len(part.ids) - added} staged jobs not inserted")
    stats.events_added += insert_new_job_events(conn, o, after, (policy_pool or o) if version_at else None,
                                                f"{SCHEMA}.{NUMBERS}")
    before = driver.total_changes
    pool_of = ((policy_pool or o),) if version_at else ()
    driver.execute(_copy_allocations_sql(part.staged, bool(version_at)), (o, *pool_of))
    stats.allocations_added += driver.total_changes - before
    if part.open_allocations:  # inserted open: as ``write_allocation_rows`` goes on after its insert
        ledger.update_open_allocations(conn, part.open_allocations, allocation_keys(part.open_allocations), stats)
    if o not in stats.dirty:  # every job new, none open: their usage is added as it is
        driver.execute(upsert_usage_sql(f"{SCHEMA}.usage_{part.staged}"))
    else:  # hours to recompute (an allocation inserted open): as the plain path does
        ledger.update_usage(conn, o, stats)
    ledger.record_import(conn, staged.kind, staged.sha, o, staged.source, part.records)


def allocation_keys(rows: list[tuple]) -> set:
    """The uniqueness keys (``ALLOCATION_KEY``) of allocation tuples."""
    return set(map(itemgetter(*(ALLOCATION_COLUMNS.index(c) for c in ALLOCATION_KEY)), rows))


# ---- the pipeline ------------------------------------------------------------------------

def supported(ledger: Ledger) -> bool:
    """A SQLite ledger whose driver can attach a database image (Python 3.11+)."""
    return ledger.engine.dialect.name == "sqlite" and hasattr(sqlite3.Connection, "deserialize")


def total_bytes(paths) -> int:
    """The files' sizes together (one that cannot be read counts 0: its error comes in its turn)."""
    total = 0
    for p in paths:
        try:
            total += os.stat(p).st_size
        except (OSError, TypeError, ValueError):
            pass
    return total


class ChildGone(Exception):
    """The staging process exited or its pipe broke."""


#: The child's program: the parent's ``sys.path`` first (so it imports this gpupool), then
#: ``serve``. Started with ``-c``, not through ``multiprocessing``, whose ``spawn`` and
#: ``forkserver`` import the caller's main script again in the child (a script without an
#: ``if __name__ == "__main__"`` guard would run twice), and whose ``fork`` is unsafe when
#: the caller runs other threads.
_BOOT = ("import pickle, sys; sys.path[:0] = pickle.load(sys.stdin.buffer); "
         "from gpupool.ledger.imports.sacct_staged import serve; serve()")


def serve() -> None:
    """Child side: stage each ``(data, cluster, source)`` read from stdin, pickled, and write
    the results to stdout in the same order, until stdin ends (the writer is done or gone)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the writer decides when this process ends
    gc.disable()  # as ``store.gc_paused``: rows hold no cycles, and collections walked them all
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    while True:
        try:
            data, cluster, source = pickle.load(stdin)
        except EOFError:
            return
        pickle.dump(stage_file(data, cluster, source), stdout, protocol=pickle.HIGHEST_PROTOCOL)
        stdout.flush()


class Child:
    """A staging process: requests go to its stdin through a writer thread and results come
    back in order through a reader thread, so the caller never blocks on a pipe (a file's
    bytes wait in the pipe until the child is done with the one before)."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", _BOOT], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, close_fds=True)
        self._gone = False
        self._requests: queue.SimpleQueue = queue.SimpleQueue()
        self._results: queue.SimpleQueue = queue.SimpleQueue()
        self._requests.put(list(sys.path))
        self._threads = [threading.Thread(target=self._write, name="sacct-staged-writer", daemon=True),
                         threading.Thread(target=self._read, name="sacct-staged-reader", daemon=True)]
        for thread in self._threads:
            thread.start()

    def _write(self) -> None:
        stdin = self.proc.stdin
        try:
            while (obj := self._requests.get()) is not None:
                pickle.dump(obj, stdin, protocol=pickle.HIGHEST_PROTOCOL)
                stdin.flush()
        except (OSError, ValueError):  # a broken pipe: the child is gone (the reader says so)
            self._gone = True
        finally:
            try:
                stdin.close()  # end of input: the child returns
            except OSError:
                pass

    def _read(self) -> None:
        try:
            while True:
                self._results.put(pickle.load(self.proc.stdout))
        except Exception as exc:  # noqa: BLE001 - EOF or a torn result: the child is gone
            self._gone = True
            self._results.put(ChildGone(repr(exc)))

    def submit(self, data: bytes, cluster: str | None, source: str) -> None:
        if self._gone:
            raise ChildGone("the staging process has ended")
        self._requests.put((data, cluster, source))

    def ready(self) -> bool:
        """Whether the next result (or the news that the child is gone) is there."""
        return not self._results.empty()

    def result(self) -> StagedFile | None:
        """The next result in request order; raises ``ChildGone`` once the child is gone."""
        out = self._results.get()
        if isinstance(out, ChildGone):
            self._results.put(out)  # and for every later request
            raise out
        return out

    def close(self, now: bool = False) -> None:
        """End the child and reap it (no zombie): end of input (``now``: a kill, as when the
        run failed and what it still parses is not wanted), then a kill if it lingers."""
        self._requests.put(None)
        if now:
            self.proc.kill()
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for thread in self._threads:
            thread.join(timeout=60)
        self.proc.stdout.close()


@dataclass
class _Slot:
    """One file of a run: its bytes (or the error reading them), whether the child has it,
    and its staged rows when the writer staged it ahead (``import_files``)."""

    path: object
    data: bytes | OSError | None = None
    sent: bool = False
    local: StagedFile | None = None


def import_files(ledger: Ledger, paths: list, cluster: str | None, pool: str | None) -> list[dict] | None:
    """``import_sacct_files`` with the parsing in a child process; None (nothing done) when
    no child process can be made here.

    The child gets the files in order, ``AHEAD`` at a time. When the writer is done with a
    file and the child's next result is not there yet (the child is the slower side: it
    has the parsing), the writer stages the next file nobody has taken itself, up to
    ``STEAL_AHEAD`` of them, and stores them in their turn: the work is shared out as the
    two processes keep up, whatever else runs on the machine."""
    if not paths:
        return []
    try:
        child = Child()
    except Exception:  # noqa: BLE001 - no interpreter to start (sys.executable empty), no pipes …
        return None
    slots = [_Slot(p) for p in paths]
    results: list[dict] = []
    taken = 1  # slots[:taken] are the child's or the writer's; the first is the writer's
    in_child = 0  # sent and not yet taken back
    alive = True

    def take() -> _Slot | None:
        nonlocal taken
        if taken >= len(slots):
            return None
        slot = slots[taken]
        taken += 1
        try:
            slot.data = Path(slot.path).read_bytes()
        except OSError as exc:  # raised in its turn, after the files before it
            slot.data = exc
        return slot

    def feed() -> None:
        nonlocal alive, in_child
        while alive and in_child < AHEAD and (slot := take()) is not None:
            if isinstance(slot.data, OSError):
                continue
            try:
                child.submit(slot.data, cluster, str(slot.path))
            except ChildGone:
                alive = False  # this file and the rest: the writer's
                return
            slot.sent = True
            in_child += 1

    def steal(k: int) -> bool:
        """Parse the next untaken file here (not past ``STEAL_AHEAD`` files beyond ``k``)."""
        if taken > k + STEAL_AHEAD:
            return False
        slot = take()
        if slot is None:
            return False
        if not isinstance(slot.data, OSError):  # staged here as the child would (None: parsed in its turn)
            slot.local = stage_file(slot.data, cluster, str(slot.path))
        return True

    failed = True
    try:
        feed()  # the child starts on the next files while the first is parsed and written here
        results.append(sacct._store(ledger, sacct._read_parsable(paths[0], cluster), pool))
        for k in range(1, len(slots)):
            slot = slots[k]
            if k >= taken:
                take()
            staged = slot.local
            if slot.sent:
                while alive and not child.ready() and steal(k):
                    pass
                try:
                    staged = child.result()
                except ChildGone:
                    alive = False
                in_child -= 1
            feed()
            if isinstance(slot.data, OSError):
                raise slot.data
            if staged is not None:
                results.append(store_staged(ledger, staged, slot.data, cluster, pool))
            else:  # parsed here, the plain way: a parse error is raised here, in its turn
                results.append(sacct._store(ledger, sacct.parse_bytes(slot.data, cluster, str(slot.path)), pool))
            slot.data = slot.local = None
        failed = False
    finally:
        child.close(now=failed)
    return results
