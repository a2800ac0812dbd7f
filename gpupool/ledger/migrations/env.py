"""Alembic environment: gpupool runs migrations itself (``gpupool.ledger.db.upgrade``), on the
connection it already holds, so there is no alembic.ini and no URL here."""
from __future__ import annotations

from alembic import context

connection = context.config.attributes.get("connection")
if connection is None:  # pragma: no cover - only reached by a bare `alembic` command
    raise RuntimeError("gpupool's ledger migrations run through gpupool.ledger.db.upgrade(), not the alembic CLI")

context.configure(connection=connection, target_metadata=None, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
