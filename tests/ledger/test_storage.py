"""Schema, migrations, WAL readers during a write, and crash safety."""
from __future__ import annotations

import subprocess
import sys
import textwrap
import threading

import pytest
import sqlalchemy as sa

from gpupool.ledger import Ledger, resolve_url
from gpupool.ledger import schema as s
from gpupool.ledger.db import current_revision, head_revision, make_engine, upgrade


def test_default_location_and_urls(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUPOOL_DB", str(tmp_path / "x" / "l.db"))
    assert resolve_url(None) == f"sqlite:///{tmp_path}/x/l.db"
    assert resolve_url("postgresql://u@h/db") == "postgresql+psycopg://u@h/db"
    assert resolve_url("sqlite:///a.db") == "sqlite:///a.db"


def test_migrations_create_the_schema_module_tables(db_url):
    led = Ledger(db_url)
    insp = sa.inspect(led.engine)
    for table in s.metadata.sorted_tables:
        got = {c["name"] for c in insp.get_columns(table.name)}
        assert got == {c.name for c in table.columns}, table.name
    assert current_revision(led.engine) == head_revision()
    led.close()


def test_database_from_first_migration_upgrades_in_place(db_url):
    engine = make_engine(db_url)
    upgrade(engine, "0001")
    assert current_revision(engine) == "0001"
    with engine.begin() as conn:
        assert "imports" not in sa.inspect(conn).get_table_names()
        conn.execute(sa.text('INSERT INTO jobs (origin, job_id, state, gpus, gpu_seconds) '
                             "VALUES ('old', '1', 'COMPLETED', 4, 400.0)"))
    engine.dispose()
    led = Ledger(db_url)  # opening upgrades
    assert current_revision(led.engine) == head_revision() == "0006"
    with led.read() as conn:
        row = conn.execute(sa.select(s.jobs).where(s.jobs.c.origin == "old")).mappings().one()
        assert row["gpus"] == 4 and row["gpu_seconds"] == 400.0 and row["gpu_seconds_idle"] == 0.0
        assert conn.execute(sa.select(sa.func.count()).select_from(s.imports)).scalar_one() == 0
    led.close()


def _job(origin, i):
    return {"origin": origin, "job_id": str(i), "state": "COMPLETED"}


def test_reader_sees_committed_state_while_a_writer_runs(db_url):
    from gpupool.ledger.store import WriteStats

    led = Ledger(db_url)
    with led.transaction() as conn:
        led.write_jobs(conn, [_job("c", i) for i in range(10)], WriteStats())
    in_write, release = threading.Event(), threading.Event()

    def writer():
        with led.transaction() as conn:
            led.write_jobs(conn, [_job("c", i) for i in range(10, 1010)], WriteStats())
            in_write.set()
            release.wait(10)

    t = threading.Thread(target=writer)
    t.start()
    assert in_write.wait(10)
    reader = Ledger(db_url)
    with reader.read() as conn:  # must not block on the open write transaction
        assert conn.execute(sa.select(sa.func.count()).select_from(s.jobs)).scalar_one() == 10
    release.set()
    t.join()
    with reader.read() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(s.jobs)).scalar_one() == 1010
    reader.close()
    led.close()


def test_crash_mid_write_loses_nothing_committed(db_url):
    code = textwrap.dedent(f"""
        import os
        from gpupool.ledger import Ledger
        from gpupool.ledger.store import WriteStats
        led = Ledger({db_url!r})
        with led.transaction() as conn:
            led.write_jobs(conn, [{{"origin": "c", "job_id": str(i), "state": "COMPLETED"}} for i in range(50)], WriteStats())
        with led.transaction() as conn:
            led.write_jobs(conn, [{{"origin": "c", "job_id": str(i), "state": "RUNNING"}} for i in range(50, 500)], WriteStats())
            os._exit(9)  # the process dies in the middle of its second write
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 9, proc.stderr
    led = Ledger(db_url)
    with led.read() as conn:
        states = conn.execute(sa.select(s.jobs.c.state, sa.func.count()).group_by(s.jobs.c.state)).all()
    assert dict(states) == {"COMPLETED": 50}
    if led.engine.dialect.name == "sqlite":
        with led.read() as conn:
            assert conn.execute(sa.text("PRAGMA integrity_check")).scalar_one() == "ok"
            assert conn.execute(sa.text("PRAGMA journal_mode")).scalar_one() == "wal"
    led.close()


def test_failed_write_rolls_back_whole_transaction(ledger):
    from gpupool.ledger.store import WriteStats

    with pytest.raises(RuntimeError):
        with ledger.transaction() as conn:
            ledger.write_jobs(conn, [_job("c", 1)], WriteStats())
            raise RuntimeError("boom")
    with ledger.read() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(s.jobs)).scalar_one() == 0
