"""The usage roll-up keyed for its readers: primary key (origin, tres, hour, account, GPU type,
user, qos, queue), and on SQLite a WITHOUT ROWID table (the key is the table).

``usage --by account,gpu-type`` reads one TRES of one origin grouped by hour, account and GPU
type: with the key in that order SQLite answers it in one ordered range scan instead of
sorting every row of the TRES (and a WITHOUT ROWID table keeps each row once, not once in
the table and again in the key's index, which also halves the B-tree work of an import). The
columns and their meaning do not change.

Revision ID: 0004
Revises: 0003
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

COLUMNS = ("origin", "period_start", "account", "user", "qos", "queue", "gpu_type", "tres", "seconds")
NEW_KEY = ("origin", "tres", "period_start", "account", "gpu_type", "user", "qos", "queue")
OLD_KEY = ("origin", "period_start", "account", "user", "qos", "queue", "gpu_type", "tres")


def _columns() -> list[sa.Column]:
    return [
        sa.Column("origin", sa.String(200), nullable=False),
        sa.Column("period_start", sa.Float, nullable=False),
        sa.Column("account", sa.String(200), nullable=False),
        sa.Column("user", sa.String(200), nullable=False),
        sa.Column("qos", sa.String(200), nullable=False),
        sa.Column("queue", sa.String(200), nullable=False),
        sa.Column("gpu_type", sa.String(200), nullable=False),
        sa.Column("tres", sa.String(64), nullable=False),
        sa.Column("seconds", sa.Float, nullable=False),
    ]


def _rekey(key: tuple[str, ...], with_rowid: bool) -> None:
    if op.get_bind().dialect.name == "sqlite":
        # SQLite cannot change a primary key in place: copy into a new table, swap names
        op.create_table("usage_rekeyed", *_columns(), sa.PrimaryKeyConstraint(*key), sqlite_with_rowid=with_rowid)
        cols = ", ".join(f'"{c}"' for c in COLUMNS)
        op.execute(f'INSERT INTO usage_rekeyed ({cols}) SELECT {cols} FROM usage')
        op.drop_table("usage")
        op.rename_table("usage_rekeyed", "usage")
    else:
        op.drop_constraint("usage_pkey", "usage", type_="primary")
        op.create_primary_key("usage_pkey", "usage", list(key))


def upgrade() -> None:
    _rekey(NEW_KEY, with_rowid=False)


def downgrade() -> None:
    _rekey(OLD_KEY, with_rowid=True)
