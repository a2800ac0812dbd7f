"""The usage roll-up stores one row per UTC day and key with the day's 24 hours as columns.

Before: a row per (origin, tres, hour, account, GPU type, user, qos, queue). After: a row per
(origin, tres, day_start, account, GPU type, user, qos, queue) with ``h00`` … ``h23`` (the
TRES-seconds of each clock hour; NULL where the old table had no row for that hour). The
values are moved as they are, so every query reads the same numbers. Why: an import upserts,
and ``usage`` reads, a twenty-fourth of the rows (a million jobs: ~160k instead of 3.8M),
which was the largest part of a large import.

Revision ID: 0005
Revises: 0004
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

HOURS = tuple(f"h{k:02d}" for k in range(24))
KEY_TEXT = ("account", "gpu_type", "user", "qos", "queue")
OLD_KEY = ("origin", "tres", "period_start", "account", "gpu_type", "user", "qos", "queue")
NEW_KEY = ("origin", "tres", "day_start", "account", "gpu_type", "user", "qos", "queue")


def _text_columns() -> list[sa.Column]:
    return [sa.Column(c, sa.String(200), nullable=False) for c in KEY_TEXT]


def _day_table(name: str) -> None:
    op.create_table(
        name,
        sa.Column("origin", sa.String(200), nullable=False),
        sa.Column("tres", sa.String(64), nullable=False),
        sa.Column("day_start", sa.Float, nullable=False),
        *_text_columns(),
        *(sa.Column(h, sa.Float, nullable=True) for h in HOURS),
        sa.PrimaryKeyConstraint(*NEW_KEY, name=f"{name}_pkey"),
        sqlite_with_rowid=False,
    )


def _hour_table(name: str) -> None:
    op.create_table(
        name,
        sa.Column("origin", sa.String(200), nullable=False),
        sa.Column("period_start", sa.Float, nullable=False),
        *(sa.Column(c, sa.String(200), nullable=False) for c in ("account", "user", "qos", "queue", "gpu_type")),
        sa.Column("tres", sa.String(64), nullable=False),
        sa.Column("seconds", sa.Float, nullable=False),
        sa.PrimaryKeyConstraint(*OLD_KEY, name=f"{name}_pkey"),
        sqlite_with_rowid=False,
    )


def _day_of(column: str, sqlite: bool) -> str:
    """The UTC day start (epoch seconds) of an epoch-seconds column, rounding down."""
    if sqlite:  # CAST truncates towards zero: shifted so that it rounds down (as the usage query did before 0005)
        return f"((CAST(({column} + 86400000000.0) / 86400 AS INTEGER) - 1000000) * 86400.0)"
    return f"(floor({column} / 86400) * 86400)"


def _swap(new: str, sqlite: bool) -> None:
    op.drop_table("usage")
    op.rename_table(new, "usage")
    if not sqlite:  # the key keeps its name (SQLite has no named primary key to rename)
        op.execute(f"ALTER TABLE usage RENAME CONSTRAINT {new}_pkey TO usage_pkey")


def upgrade() -> None:
    sqlite = op.get_bind().dialect.name == "sqlite"
    _day_table("usage_days")
    day = _day_of("period_start", sqlite)
    hour = "CAST(((period_start - day_start) / 3600) AS INTEGER)"
    # each (key, hour) was one row, so each column takes at most one value: max() moves it as is
    picks = ", ".join(f"max(CASE WHEN hour = {k} THEN seconds END)" for k in range(24))
    key = ", ".join(f'"{c}"' for c in NEW_KEY)
    op.execute(
        f'INSERT INTO usage_days ({key}, {", ".join(HOURS)}) '
        f"SELECT {key}, {picks} FROM ("
        f'SELECT origin, tres, day_start, account, gpu_type, "user", qos, queue, seconds, {hour} AS hour '
        f'FROM (SELECT *, {day} AS day_start FROM usage) AS u) AS v '
        f"GROUP BY {key}")
    _swap("usage_days", sqlite)


def downgrade() -> None:
    sqlite = op.get_bind().dialect.name == "sqlite"
    _hour_table("usage_hours")
    cols = 'origin, period_start, account, gpu_type, "user", qos, queue, tres, seconds'
    for k, h in enumerate(HOURS):
        op.execute(f"INSERT INTO usage_hours ({cols}) SELECT origin, day_start + {k * 3600}.0, account, gpu_type, "
                   f'"user", qos, queue, tres, {h} FROM usage WHERE {h} IS NOT NULL')
    _swap("usage_hours", sqlite)
