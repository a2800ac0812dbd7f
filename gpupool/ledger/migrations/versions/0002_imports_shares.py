"""Imports by content hash, sshare snapshots, idle GPU-seconds per job, a node/time index.

Revision ID: 0002
Revises: 0001
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("gpu_seconds_idle", sa.Float, nullable=False, server_default="0"))
    op.create_index("ix_allocations_node_time", "allocations", ["node", "time_from"])
    op.create_table(
        "imports",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("sha", sa.String(64), nullable=False),
        sa.Column("origin", sa.String(200), nullable=False),
        sa.Column("source", sa.Text, nullable=False),
        sa.Column("imported_at", sa.Float, nullable=False),
        sa.Column("rows", sa.Integer, nullable=False),
        sa.UniqueConstraint("kind", "sha", "origin", name="uq_imports_content"),
    )
    op.create_table(
        "shares",
        sa.Column("origin", sa.String(200), primary_key=True),
        sa.Column("snapshot", sa.String(64), primary_key=True),
        sa.Column("account", sa.String(200), primary_key=True),
        sa.Column("user", sa.String(200), primary_key=True),
        sa.Column("taken_at", sa.Float, nullable=False),
        sa.Column("raw_shares", sa.String(32), nullable=False),
        sa.Column("norm_shares", sa.Float, nullable=True),
        sa.Column("raw_usage", sa.Float, nullable=True),
        sa.Column("norm_usage", sa.Float, nullable=True),
        sa.Column("effectv_usage", sa.Float, nullable=True),
        sa.Column("fairshare", sa.Float, nullable=True),
        sa.Column("level_fs", sa.String(32), nullable=False, server_default=""),
        sa.Column("grp_tres_mins", sa.Text, nullable=False, server_default=""),
        sa.Column("tres_run_mins", sa.Text, nullable=False, server_default=""),
    )


def downgrade() -> None:
    op.drop_table("shares")
    op.drop_table("imports")
    op.drop_index("ix_allocations_node_time", "allocations")
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("gpu_seconds_idle")
