"""Ledger test fixtures: every test that takes ``db_url`` runs on SQLite and, when
``GPUPOOL_TEST_PG_URL`` names a reachable PostgreSQL (``.ci/postgres.sh`` starts one), on a
fresh PostgreSQL database too."""
from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SEED_POOL = REPO / "examples" / "seed-pool"
PG_URL = os.environ.get("GPUPOOL_TEST_PG_URL")

BACKENDS = ["sqlite"] + (["postgresql"] if PG_URL else [])


def _pg_database():
    import sqlalchemy as sa

    from gpupool.ledger.db import resolve_url

    base = sa.engine.make_url(resolve_url(PG_URL))
    name = f"gpupool_test_{uuid.uuid4().hex[:10]}"
    admin = sa.create_engine(base, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    return admin, name, base.set(database=name).render_as_string(hide_password=False)


@pytest.fixture(params=BACKENDS)
def db_url(request, tmp_path):
    if request.param == "sqlite":
        yield str(tmp_path / "ledger.db")
        return
    import sqlalchemy as sa

    admin, name, url = _pg_database()
    yield url
    with admin.connect() as conn:
        conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


@pytest.fixture
def ledger(db_url):
    from gpupool.ledger import Ledger

    led = Ledger(db_url)
    yield led
    led.close()


@pytest.fixture(scope="session")
def seed_result():
    import gpupool

    return gpupool.simulate(str(SEED_POOL), str(SEED_POOL / "workloads"), "fifo")


@pytest.fixture
def cli():
    """Invoke the ledger commands as ``gpupool …`` would (registered on a fresh app)."""
    import typer
    from typer.testing import CliRunner

    from gpupool.cli.ledger import register

    app = typer.Typer()

    @app.callback()
    def _root() -> None:
        """gpupool (test app)"""

    register(app)
    runner = CliRunner()

    def run(*args, ok: bool = True):
        result = runner.invoke(app, [str(a) for a in args])
        if ok:
            assert result.exit_code == 0, (result.output, result.exception)
        return result

    return run
