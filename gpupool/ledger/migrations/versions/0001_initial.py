"""The first ledger schema: policy versions, runs, jobs, allocations, usage, events.

Revision ID: 0001
Revises:
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "policy_blobs",
        sa.Column("sha", sa.String(64), primary_key=True),
        sa.Column("content", sa.LargeBinary, nullable=False),
    )
    op.create_table(
        "policy_versions",
        sa.Column("seq", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("version", sa.String(64), nullable=False, unique=True),
        sa.Column("pool", sa.String(200), nullable=False),
        sa.Column("tree", sa.String(64), nullable=False),
        sa.Column("parent", sa.String(64), nullable=True),
        sa.Column("author", sa.String(200), nullable=False),
        sa.Column("message", sa.Text, nullable=False),
        sa.Column("committed_at", sa.Float, nullable=False),
        sa.Column("manifest", sa.Text, nullable=False),
    )
    op.create_table(
        "runs",
        sa.Column("run_id", sa.String(64), primary_key=True),
        sa.Column("origin", sa.String(200), nullable=False),
        sa.Column("pool", sa.String(200), nullable=False),
        sa.Column("pool_hash", sa.String(64), nullable=False),
        sa.Column("policy", sa.String(200), nullable=False),
        sa.Column("policy_options", sa.Text, nullable=False),
        sa.Column("policy_version", sa.String(64), nullable=True),
        sa.Column("workload_spec", sa.Text, nullable=False),
        sa.Column("workload_digest", sa.String(64), nullable=False),
        sa.Column("seed", sa.Integer, nullable=True),
        sa.Column("epoch", sa.Float, nullable=False),
        sa.Column("recorded_at", sa.Float, nullable=False),
        sa.Column("summary", sa.Text, nullable=False),
    )
    op.create_table(
        "jobs",
        sa.Column("origin", sa.String(200), primary_key=True),
        sa.Column("job_id", sa.String(64), primary_key=True),
        sa.Column("job_id_raw", sa.BigInteger, nullable=True),
        sa.Column("array_job_id", sa.BigInteger, nullable=True),
        sa.Column("array_task_id", sa.BigInteger, nullable=True),
        sa.Column("name", sa.String(400), nullable=False, server_default=""),
        sa.Column("kind", sa.String(32), nullable=False, server_default="batch"),
        sa.Column("user", sa.String(200), nullable=False, server_default=""),
        sa.Column("account", sa.String(200), nullable=False, server_default=""),
        sa.Column("qos", sa.String(200), nullable=False, server_default=""),
        sa.Column("partition", sa.String(200), nullable=False, server_default=""),
        sa.Column("namespace", sa.String(200), nullable=False, server_default=""),
        sa.Column("queue", sa.String(200), nullable=False, server_default=""),
        sa.Column("submit", sa.Float, nullable=True),
        sa.Column("eligible", sa.Float, nullable=True),
        sa.Column("start", sa.Float, nullable=True),
        sa.Column("end", sa.Float, nullable=True),
        sa.Column("elapsed", sa.Float, nullable=True),
        sa.Column("timelimit", sa.Float, nullable=True),
        sa.Column("state", sa.String(64), nullable=False),
        sa.Column("reason", sa.Text, nullable=False, server_default=""),
        sa.Column("exit_code", sa.String(32), nullable=False, server_default="0:0"),
        sa.Column("priority", sa.BigInteger, nullable=True),
        sa.Column("nnodes", sa.Integer, nullable=False, server_default="0"),
        sa.Column("ncpus", sa.Integer, nullable=False, server_default="0"),
        sa.Column("node_list", sa.Text, nullable=False, server_default=""),
        sa.Column("req_tres", sa.Text, nullable=False, server_default=""),
        sa.Column("alloc_tres", sa.Text, nullable=False, server_default=""),
        sa.Column("gpus", sa.Integer, nullable=False, server_default="0"),
        sa.Column("gpu_type", sa.String(200), nullable=False, server_default=""),
        sa.Column("gpu_indices", sa.Text, nullable=False, server_default=""),
        sa.Column("billing", sa.Float, nullable=False, server_default="0"),
        sa.Column("requeues", sa.Integer, nullable=False, server_default="0"),
        sa.Column("preemptions", sa.Integer, nullable=False, server_default="0"),
        sa.Column("gpu_seconds", sa.Float, nullable=False, server_default="0"),
        sa.Column("gpu_seconds_lost", sa.Float, nullable=False, server_default="0"),
        sa.Column("flags", sa.Text, nullable=False, server_default=""),
        sa.Column("extra", sa.Text, nullable=False, server_default="{}"),
        sa.Column("source", sa.Text, nullable=False, server_default=""),
    )
    op.create_table(
        "allocations",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("origin", sa.String(200), nullable=False),
        sa.Column("job_id", sa.String(64), nullable=False),
        sa.Column("node", sa.String(200), nullable=False),
        sa.Column("gpu_index", sa.Integer, nullable=False),
        sa.Column("gpu_count", sa.Integer, nullable=False),
        sa.Column("gpu_type", sa.String(200), nullable=False, server_default=""),
        sa.Column("time_from", sa.Float, nullable=False),
        sa.Column("time_to", sa.Float, nullable=True),
        sa.Column("as_of", sa.Float, nullable=True),
        sa.Column("policy_version", sa.String(64), nullable=True),
        sa.UniqueConstraint("origin", "job_id", "node", "gpu_index", "time_from", name="uq_allocations_slot"),
    )
    op.create_table(
        "usage",
        sa.Column("origin", sa.String(200), primary_key=True),
        sa.Column("period_start", sa.Float, primary_key=True),
        sa.Column("account", sa.String(200), primary_key=True),
        sa.Column("user", sa.String(200), primary_key=True),
        sa.Column("qos", sa.String(200), primary_key=True),
        sa.Column("queue", sa.String(200), primary_key=True),
        sa.Column("gpu_type", sa.String(200), primary_key=True),
        sa.Column("tres", sa.String(64), primary_key=True),
        sa.Column("seconds", sa.Float, nullable=False),
    )
    op.create_table(
        "events",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("origin", sa.String(200), nullable=False),
        sa.Column("job_id", sa.String(64), nullable=False),
        sa.Column("time", sa.Float, nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("detail", sa.Text, nullable=False, server_default=""),
        sa.Column("policy_version", sa.String(64), nullable=True),
        sa.Column("source", sa.Text, nullable=False, server_default=""),
        sa.UniqueConstraint("origin", "job_id", "time", "kind", "detail", name="uq_events_fact"),
    )


def downgrade() -> None:
    for name in ("events", "usage", "allocations", "jobs", "runs", "policy_versions", "policy_blobs"):
        op.drop_table(name)
