"""The ledger's tables, as SQLAlchemy Core objects (the schema after the newest migration).

Times are float seconds since the Unix epoch (UTC) everywhere; ``None`` means unknown (a job
that has not started or ended). Text columns use ``''`` rather than NULL where they are part
of a uniqueness key, because SQL treats NULLs as distinct and re-imports must find the row.

The migrations in ``migrations/versions`` create exactly these tables; a test checks that
the two agree.
"""
from __future__ import annotations

import sqlalchemy as sa

metadata = sa.MetaData()

#: File contents of committed pool directories, by SHA-256 (shared between versions).
policy_blobs = sa.Table(
    "policy_blobs", metadata,
    sa.Column("sha", sa.String(64), primary_key=True),
    sa.Column("content", sa.LargeBinary, nullable=False),
)

#: One committed pool definition. ``tree`` is the content hash of the whole directory;
#: ``version`` hashes the tree with its parent, author, message and time (like a git commit).
policy_versions = sa.Table(
    "policy_versions", metadata,
    sa.Column("seq", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("version", sa.String(64), nullable=False, unique=True),
    sa.Column("pool", sa.String(200), nullable=False),
    sa.Column("tree", sa.String(64), nullable=False),
    sa.Column("parent", sa.String(64), nullable=True),
    sa.Column("author", sa.String(200), nullable=False),
    sa.Column("message", sa.Text, nullable=False),
    sa.Column("committed_at", sa.Float, nullable=False),
    sa.Column("manifest", sa.Text, nullable=False),  # JSON {relative path: blob sha}
)

#: One recorded simulation: what went in (hashes) and what came out (summary).
runs = sa.Table(
    "runs", metadata,
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

#: One row per job (the last record Slurm keeps of it; requeued runs show in events).
jobs = sa.Table(
    "jobs", metadata,
    sa.Column("origin", sa.String(200), primary_key=True),  # cluster name or "run:<id>"
    sa.Column("job_id", sa.String(64), primary_key=True),  # as sacct prints it: 42, 40_3
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
    sa.Column("gpu_seconds_idle", sa.Float, nullable=False, server_default="0"),  # migration 0002
    sa.Column("flags", sa.Text, nullable=False, server_default=""),
    sa.Column("extra", sa.Text, nullable=False, server_default="{}"),  # JSON: other sacct fields
    sa.Column("source", sa.Text, nullable=False, server_default=""),
)

#: Who held which devices when. ``node=''`` / ``gpu_index=-1`` when the source does not say
#: (sacct gives counts, Kueue gives flavors); ``gpu_count`` is then the number of devices.
allocations = sa.Table(
    "allocations", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("origin", sa.String(200), nullable=False),
    sa.Column("job_id", sa.String(64), nullable=False),
    sa.Column("node", sa.String(200), nullable=False),
    sa.Column("gpu_index", sa.Integer, nullable=False),
    sa.Column("gpu_count", sa.Integer, nullable=False),
    sa.Column("gpu_type", sa.String(200), nullable=False, server_default=""),
    sa.Column("time_from", sa.Float, nullable=False),
    sa.Column("time_to", sa.Float, nullable=True),  # None: still held when last seen
    sa.Column("as_of", sa.Float, nullable=True),  # last time an open allocation was seen held
    sa.Column("policy_version", sa.String(64), nullable=True),
    sa.UniqueConstraint("origin", "job_id", "node", "gpu_index", "time_from", name="uq_allocations_slot"),
)
sa.Index("ix_allocations_node_time", allocations.c.node, allocations.c.time_from)  # migration 0002

#: The clock hours of a UTC day, as the usage table's value columns: ``h00`` holds the
#: TRES-seconds of 00:00–01:00, … ``h23`` those of 23:00–24:00 (NULL: no usage row that hour).
USAGE_HOURS: tuple[str, ...] = tuple(f"h{k:02d}" for k in range(24))

#: Hourly roll-up of TRES-seconds (as slurmdbd's hourly usage tables), kept equal to a rebuild
#: from allocations and jobs after each write. One row holds the 24 hours of one UTC day
#: (``day_start``, epoch seconds) of one key (migration 0005; before it, a row per hour): a
#: million jobs' roll-up is about 160k rows instead of 3.8M, which an import upserts and
#: ``usage`` reads. Keyed in the order ``usage --by account,gpu-type`` reads it: one origin and
#: TRES, by day, account, GPU type; on SQLite the key is the table (WITHOUT ROWID).
#: ``store.usage_hours`` gives the rows one per hour, as the table held them before 0005.
usage = sa.Table(
    "usage", metadata,
    sa.Column("origin", sa.String(200), nullable=False),
    sa.Column("tres", sa.String(64), nullable=False),
    sa.Column("day_start", sa.Float, nullable=False),
    sa.Column("account", sa.String(200), nullable=False),
    sa.Column("gpu_type", sa.String(200), nullable=False),
    sa.Column("user", sa.String(200), nullable=False),
    sa.Column("qos", sa.String(200), nullable=False),
    sa.Column("queue", sa.String(200), nullable=False),
    *(sa.Column(h, sa.Float, nullable=True) for h in USAGE_HOURS),
    sa.PrimaryKeyConstraint("origin", "tres", "day_start", "account", "gpu_type", "user", "qos", "queue",
                            name="usage_pkey"),
    sqlite_with_rowid=False,
)

#: Append-only job transitions, each with the policy version in force.
events = sa.Table(
    "events", metadata,
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

# ---- migration 0002 --------------------------------------------------------------------

#: Each imported file once, by content hash: importing the same bytes again is a no-op.
imports = sa.Table(
    "imports", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("kind", sa.String(32), nullable=False),
    sa.Column("sha", sa.String(64), nullable=False),
    sa.Column("origin", sa.String(200), nullable=False),
    sa.Column("source", sa.Text, nullable=False),
    sa.Column("imported_at", sa.Float, nullable=False),
    sa.Column("rows", sa.Integer, nullable=False),
    sa.UniqueConstraint("kind", "sha", "origin", name="uq_imports_content"),
)

#: ``sshare -P -l`` snapshots, one row per association line.
shares = sa.Table(
    "shares", metadata,
    sa.Column("origin", sa.String(200), primary_key=True),
    sa.Column("snapshot", sa.String(64), primary_key=True),  # content hash of the sshare output
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

# ---- migration 0003: the live daemon's own state (gpupool/live) ---------------------------

#: Every job a live daemon accepted, with what it needs to run it again after a restart
#: (the script, environment and directory as submitted) and the process that runs it now
#: (pid + start time in clock ticks, so a reused pid is never mistaken for the job).
live_jobs = sa.Table(
    "live_jobs", metadata,
    sa.Column("daemon", sa.String(200), primary_key=True),  # the ledger origin, live:<pool>
    sa.Column("job_id", sa.BigInteger, primary_key=True),
    sa.Column("state", sa.String(32), nullable=False),  # PENDING, RUNNING or a final state
    sa.Column("name", sa.String(400), nullable=False, server_default=""),
    sa.Column("user", sa.String(200), nullable=False, server_default=""),
    sa.Column("uid", sa.Integer, nullable=False),
    sa.Column("gid", sa.Integer, nullable=False),
    sa.Column("submit", sa.Float, nullable=False),  # wall clock, epoch seconds
    sa.Column("kind", sa.String(32), nullable=False, server_default="sbatch"),
    sa.Column("script", sa.Text, nullable=False),
    sa.Column("source", sa.Text, nullable=False, server_default=""),  # the script's path as submitted
    sa.Column("env", sa.Text, nullable=False, server_default="{}"),  # JSON
    sa.Column("cwd", sa.Text, nullable=False, server_default=""),
    sa.Column("array_job_id", sa.BigInteger, nullable=True),
    sa.Column("array_task_id", sa.BigInteger, nullable=True),
    sa.Column("pid", sa.Integer, nullable=True),
    sa.Column("start_ticks", sa.BigInteger, nullable=True),
    sa.Column("start", sa.Float, nullable=True),
    sa.Column("end", sa.Float, nullable=True),
    sa.Column("placement", sa.Text, nullable=False, server_default=""),  # JSON [[node, mask, cpu_m, mem]]
    sa.Column("time_limit", sa.Float, nullable=True),
    sa.Column("partition", sa.String(200), nullable=False, server_default=""),  # the one a job runs in
    sa.Column("exit_code", sa.String(32), nullable=False, server_default=""),
    sa.Column("requeues", sa.Integer, nullable=False, server_default="0"),
    sa.Column("reason", sa.Text, nullable=False, server_default=""),
    # the partitions it landed in at submission, kept across a restart (migration 0006)
    sa.Column("job_partitions", sa.String(200), nullable=False, server_default=""),
)
sa.Index("ix_live_jobs_state", live_jobs.c.daemon, live_jobs.c.state)  # migration 0003

#: Small facts per daemon: the next job id, the pool it serves.
live_meta = sa.Table(
    "live_meta", metadata,
    sa.Column("daemon", sa.String(200), primary_key=True),
    sa.Column("key", sa.String(64), primary_key=True),
    sa.Column("value", sa.Text, nullable=False),
)
