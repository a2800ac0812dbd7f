"""The live daemon's state: accepted jobs with their scripts and processes, per-daemon facts.

Revision ID: 0003
Revises: 0002
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "live_jobs",
        sa.Column("daemon", sa.String(200), primary_key=True),
        sa.Column("job_id", sa.BigInteger, primary_key=True),
        sa.Column("state", sa.String(32), nullable=False),
        sa.Column("name", sa.String(400), nullable=False, server_default=""),
        sa.Column("user", sa.String(200), nullable=False, server_default=""),
        sa.Column("uid", sa.Integer, nullable=False),
        sa.Column("gid", sa.Integer, nullable=False),
        sa.Column("submit", sa.Float, nullable=False),
        sa.Column("kind", sa.String(32), nullable=False, server_default="sbatch"),
        sa.Column("script", sa.Text, nullable=False),
        sa.Column("source", sa.Text, nullable=False, server_default=""),
        sa.Column("env", sa.Text, nullable=False, server_default="{}"),
        sa.Column("cwd", sa.Text, nullable=False, server_default=""),
        sa.Column("array_job_id", sa.BigInteger, nullable=True),
        sa.Column("array_task_id", sa.BigInteger, nullable=True),
        sa.Column("pid", sa.Integer, nullable=True),
        sa.Column("start_ticks", sa.BigInteger, nullable=True),
        sa.Column("start", sa.Float, nullable=True),
        sa.Column("end", sa.Float, nullable=True),
        sa.Column("placement", sa.Text, nullable=False, server_default=""),
        sa.Column("time_limit", sa.Float, nullable=True),
        sa.Column("partition", sa.String(200), nullable=False, server_default=""),
        sa.Column("exit_code", sa.String(32), nullable=False, server_default=""),
        sa.Column("requeues", sa.Integer, nullable=False, server_default="0"),
        sa.Column("reason", sa.Text, nullable=False, server_default=""),
    )
    op.create_index("ix_live_jobs_state", "live_jobs", ["daemon", "state"])
    op.create_table(
        "live_meta",
        sa.Column("daemon", sa.String(200), primary_key=True),
        sa.Column("key", sa.String(64), primary_key=True),
        sa.Column("value", sa.Text, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("live_meta")
    op.drop_index("ix_live_jobs_state", "live_jobs")
    op.drop_table("live_jobs")
