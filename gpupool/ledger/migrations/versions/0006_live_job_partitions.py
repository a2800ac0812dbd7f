"""A live job keeps the partitions slurmctld stored for it at submission.

``live_jobs.job_partitions``: the comma-separated partition list the job landed in once the
submit rules ran (a DRAIN or INACTIVE partition dropped from the list or replaced by its
Alternate; empty: the policy's default partition, or a row older than this migration). Why: a
restarted daemon queues its jobs again, and slurmctld keeps a queued job's partitions across a
restart whatever state slurm.conf now gives them; applying the submit rules again would move
or refuse a job that was already accepted. ``partition`` stays the one partition a running
job runs in.

Revision ID: 0006
Revises: 0005
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("live_jobs") as batch:
        batch.add_column(sa.Column("job_partitions", sa.String(200), nullable=False, server_default=""))


def downgrade() -> None:
    with op.batch_alter_table("live_jobs") as batch:
        batch.drop_column("job_partitions")
