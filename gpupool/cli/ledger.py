"""Ledger commands: ``acct``, ``share``, ``usage``, ``policy …``, ``audit …``, ``runs``, ``import …``.

``register(app)`` adds them to the main ``gpupool`` app. Every command takes ``--db``
(default ``$GPUPOOL_DB`` or ``~/.local/share/gpupool/ledger.db``; a path or a SQLAlchemy URL
such as ``postgresql+psycopg://user@host/db``) and ``--json``.
"""
from __future__ import annotations

import csv
import io
import json
import sys
from pathlib import Path
from typing import List, Optional

import typer
from rich.console import Console
from rich.table import Table

from gpupool.errors import GpupoolError

out = Console(width=None if sys.stdout.isatty() else 200)
err = Console(stderr=True)

DB_HELP = "Ledger: a SQLite file or a URL (postgresql+psycopg://…); default $GPUPOOL_DB or ~/.local/share/gpupool/ledger.db."


def _db_option():
    return typer.Option(None, "--db", envvar="GPUPOOL_DB", help=DB_HELP)


def _json_option():
    return typer.Option(False, "--json", help="Print one JSON document.")


def _fail(exc: Exception) -> None:
    err.print(f"[bold red]error:[/] {exc}", highlight=False, soft_wrap=True)
    raise typer.Exit(2)


def _emit(data) -> None:
    sys.stdout.write(json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")


def _ledger(db):
    from gpupool.ledger.store import Ledger

    return Ledger(db)


def _time(text: Optional[str]):
    from gpupool.ledger.timefmt import parse_time

    return None if text is None else parse_time(text)


def _load_pool_arg(ledger, pool: Optional[str]):
    """A pool from a directory, or from the ledger's newest policy version (of that pool name)."""
    from gpupool.formats.pool_dir import load_pool
    from gpupool.ledger import policy as pol
    from gpupool.ledger.db import LedgerError

    if pool and Path(pool).is_dir():
        return load_pool(pool)
    versions = pol.log(ledger, pool)
    if not versions:
        raise LedgerError("no pool given and no policy version in the ledger: give --pool DIR or run "
                          "`gpupool policy commit DIR -m …` first")
    return pol.load_version(ledger, versions[0])


def register(app: typer.Typer) -> None:
    """Add the ledger commands to ``app``."""
    policy_app = typer.Typer(no_args_is_help=True, help="Policy versions of a pool: commit, log, diff.")
    audit_app = typer.Typer(no_args_is_help=True, help="Who held what, when, and under which policy version.")
    import_app = typer.Typer(no_args_is_help=True, help="Import accounting from real Slurm and Kueue (idempotent).")
    app.add_typer(policy_app, name="policy")
    app.add_typer(audit_app, name="audit")
    app.add_typer(import_app, name="import")
    runs_app = typer.Typer(help="Recorded simulation runs: their inputs (hashes), seed, policy and times.")
    app.add_typer(runs_app, name="runs")

    # ------------------------------------------------------------------ acct
    @app.command()
    def acct(
        starttime: Optional[str] = typer.Option(None, "--starttime", "-S", help="Jobs running or ended after this time (2026-11-30, now-7days, …)."),
        endtime: Optional[str] = typer.Option(None, "--endtime", "-E", help="Jobs eligible or started before this time."),
        accounts: Optional[List[str]] = typer.Option(None, "--accounts", "-A", help="Comma-separated accounts."),
        users: Optional[List[str]] = typer.Option(None, "--users", "-u", help="Comma-separated users."),
        state: Optional[List[str]] = typer.Option(None, "--state", "-s", help="Comma-separated states (CD, F, TO, PR, R, …)."),
        partition: Optional[List[str]] = typer.Option(None, "--partition", "-r", help="Comma-separated partitions."),
        jobs: Optional[List[str]] = typer.Option(None, "--jobs", "-j", help="Comma-separated job ids."),
        clusters: Optional[List[str]] = typer.Option(None, "--clusters", "-M", help="Clusters (imports) or run:ID (simulations)."),
        fmt: Optional[str] = typer.Option(None, "--format", "-o", help="Fields, e.g. JobID,JobName%30,State,AllocTRES; ALL for every field."),
        parsable2: bool = typer.Option(False, "--parsable2", "-P", help="'|'-separated, no trailing '|'."),
        parsable: bool = typer.Option(False, "--parsable", "-p", help="'|'-separated with a trailing '|'."),
        noheader: bool = typer.Option(False, "--noheader", "-n", help="No header line."),
        allocations: bool = typer.Option(True, "--allocations", "-X", help="Job allocations only (the ledger keeps no steps)."),
        helpformat: bool = typer.Option(False, "--helpformat", "-e", help="List the field names."),
        db: Optional[str] = _db_option(),
        as_json: bool = _json_option(),
    ) -> None:
        """Job records from the ledger, like sacct (Slurm's field names and time formats; times UTC)."""
        from gpupool.ledger import query
        from gpupool.ledger.sacct_fields import GPUPOOL_FIELDS, SACCT_2205_FIELDS

        if helpformat:
            names = list(SACCT_2205_FIELDS) + list(GPUPOOL_FIELDS)
            if as_json:
                _emit(names)
            else:
                for i in range(0, len(names), 4):
                    sys.stdout.write("".join(n.ljust(20) for n in names[i:i + 4]).rstrip() + "\n")
            return
        try:
            fields = query.parse_format(fmt)
            rows = query.acct_jobs(_ledger(db), starttime=_time(starttime), endtime=_time(endtime),
                                   accounts=accounts, users=users, states=state, clusters=clusters, jobs=jobs,
                                   partitions=partition)
        except GpupoolError as exc:
            _fail(exc)
        if as_json:
            _emit({"jobs": query.acct_json(rows, fields)})
            return
        sep = "|" if parsable2 else ("|+" if parsable else None)
        sys.stdout.write(query.render_acct(rows, fields, parsable=sep, noheader=noheader))

    # ------------------------------------------------------------------ share
    @app.command()
    def share(
        pool: Optional[str] = typer.Option(None, "--pool", help="Pool directory (account tree, decay); default: the ledger's newest policy version."),
        clusters: Optional[str] = typer.Option(None, "--clusters", "-M", help="Usage of this cluster or run:ID only."),
        accounts: Optional[List[str]] = typer.Option(None, "--accounts", "-A", help="Comma-separated accounts."),
        users: Optional[List[str]] = typer.Option(None, "--users", "-u", help="Comma-separated users."),
        now: Optional[str] = typer.Option(None, "--now", help="Decay usage up to this time (default: the newest job end)."),
        parsable2: bool = typer.Option(False, "--parsable2", "-P", help="'|'-separated output."),
        long: bool = typer.Option(True, "--long", "-l", help="Long listing (always on)."),
        db: Optional[str] = _db_option(),
        as_json: bool = _json_option(),
    ) -> None:
        """Fair share like sshare -l: decayed usage (PriorityDecayHalfLife) and Fair Tree factors."""
        from gpupool.ledger import query

        try:
            ledger = _ledger(db)
            pool_obj = _load_pool_arg(ledger, pool)
            rows = query.share_report(ledger, pool_obj, cluster=clusters, now=_time(now), accounts=accounts,
                                      users=users)
        except GpupoolError as exc:
            _fail(exc)
        if as_json:
            _emit({"pool": pool_obj.name, "rows": [r.as_dict() for r in rows]})
            return
        sys.stdout.write(query.render_share(rows, parsable2))

    # ------------------------------------------------------------------ usage
    @app.command()
    def usage(
        by: str = typer.Option("account", "--by", help="Group by: account, user, qos, queue, gpu-type, cluster (comma-separated)."),
        period: str = typer.Option("month", "--period", help="hour, day, week, month, year or all."),
        tres: str = typer.Option("gres/gpu", "--tres", "-T", help="TRES: gres/gpu, cpu or billing."),
        start: Optional[str] = typer.Option(None, "--start", "-S", help="From this time."),
        end: Optional[str] = typer.Option(None, "--end", "-E", help="Until this time."),
        clusters: Optional[List[str]] = typer.Option(None, "--clusters", "-M", help="Clusters or run:ID."),
        weights: Optional[str] = typer.Option(None, "--weights", help="Billing weight per GPU type, e.g. h100=2,a100=1,*=1."),
        as_csv: bool = typer.Option(False, "--csv", help="CSV for chargeback."),
        db: Optional[str] = _db_option(),
        as_json: bool = _json_option(),
    ) -> None:
        """TRES-hours per period and group, like sreport (GPU-hours by default, with billed hours)."""
        from gpupool.ledger import query

        try:
            rows = query.usage_report(_ledger(db), by=[by], period=period, tres=tres, start=_time(start),
                                      end=_time(end), clusters=clusters, weights=query.parse_weights(weights))
        except GpupoolError as exc:
            _fail(exc)
        if as_json:
            _emit({"tres": tres, "period": period, "rows": rows})
            return
        cols = list(rows[0]) if rows else ["period", *by.split(","), "hours"]
        if as_csv:
            buf = io.StringIO()
            writer = csv.writer(buf, lineterminator="\n")
            writer.writerow(cols)
            for r in rows:
                writer.writerow([r.get(c) for c in cols])
            sys.stdout.write(buf.getvalue())
            return
        table = Table(*cols, title=f"{tres} hours per {period}")
        for r in rows:
            table.add_row(*[f"{r[c]:.2f}" if isinstance(r.get(c), float) else str(r.get(c)) for c in cols])
        out.print(table)

    # ------------------------------------------------------------------ policy
    @policy_app.command("commit")
    def policy_commit(
        pool: Path = typer.Argument(..., help="Pool directory to snapshot."),
        message: str = typer.Option(..., "--message", "-m", help="Why the policy changed."),
        author: Optional[str] = typer.Option(None, "--author", help="Default: $GPUPOOL_AUTHOR, $GIT_AUTHOR_NAME or $USER."),
        db: Optional[str] = _db_option(),
        as_json: bool = _json_option(),
    ) -> None:
        """Record the pool directory as a new policy version (nothing when it is unchanged)."""
        from gpupool.ledger import policy as pol

        try:
            version, created = pol.commit(_ledger(db), pool, message, author=author)
        except GpupoolError as exc:
            _fail(exc)
        if as_json:
            _emit({**version.as_dict(), "created": created})
            return
        if created:
            out.print(f"[bold]{version.short}[/] {version.pool}: {version.message}")
        else:
            out.print(f"unchanged: {version.pool} is already at {version.short}")

    @policy_app.command("log")
    def policy_log(
        pool: Optional[str] = typer.Option(None, "--pool", help="Only this pool (by name)."),
        db: Optional[str] = _db_option(),
        as_json: bool = _json_option(),
    ) -> None:
        """Policy versions, newest first."""
        from gpupool.ledger import policy as pol

        try:
            versions = pol.log(_ledger(db), pool)
        except GpupoolError as exc:
            _fail(exc)
        if as_json:
            _emit([v.as_dict() for v in versions])
            return
        table = Table("version", "pool", "committed", "author", "message")
        for v in versions:
            table.add_row(v.short, v.pool, v.as_dict()["committed_at"], v.author, v.message)
        out.print(table)

    @policy_app.command("diff")
    def policy_diff(
        a: str = typer.Argument(..., help="Older version (hash prefix, HEAD, HEAD~1) or a pool directory."),
        b: str = typer.Argument("HEAD", help="Newer version or a pool directory (default HEAD)."),
        pool: Optional[str] = typer.Option(None, "--pool", help="Pool name for HEAD~N."),
        db: Optional[str] = _db_option(),
        as_json: bool = _json_option(),
    ) -> None:
        """What changed between two policy versions, object by object and field by field."""
        from gpupool.formats.pool_dir import load_pool
        from gpupool.ledger import policy as pol

        def load(ref: str, ledger):
            if Path(ref).is_dir():
                return load_pool(ref), ref
            v = pol.resolve(ledger, ref, pool)
            return pol.load_version(ledger, v), v.short

        try:
            ledger = _ledger(db)
            (pa, na), (pb, nb) = load(a, ledger), load(b, ledger)
            lines = pol.diff_pools(pa, pb)
        except GpupoolError as exc:
            _fail(exc)
        if as_json:
            _emit({"from": na, "to": nb, "changes": lines})
            return
        out.print(f"[bold]{na} → {nb}[/]: {len(lines)} change(s)")
        for line in lines:
            out.print(line, highlight=False, soft_wrap=True)

    # ------------------------------------------------------------------ audit
    @audit_app.command("job")
    def audit_job(
        job_id: str = typer.Argument(..., help="Job id as sacct prints it (42, 40_3, ns/workload)."),
        cluster: Optional[str] = typer.Option(None, "--cluster", "-M", help="Cluster or run:ID."),
        db: Optional[str] = _db_option(),
        as_json: bool = _json_option(),
    ) -> None:
        """A job's timeline: which policy version admitted it, who preempted it and why."""
        from gpupool.ledger import query
        from gpupool.ledger.db import LedgerError

        try:
            records = query.audit_job(_ledger(db), job_id, cluster)
            if not records:
                raise LedgerError(f"no job {job_id} in the ledger" + (f" for {cluster}" if cluster else ""))
        except GpupoolError as exc:
            _fail(exc)
        if as_json:
            _emit(records)
            return
        for r in records:
            out.print(f"[bold]{r['cluster']} job {r['job_id']}[/] {r['name']} user={r['user']} account={r['account']} "
                      f"qos={r['qos']} queue={r['queue']} state={r['state']} gpus={r['gpus']}", highlight=False)
            table = Table("time", "event", "detail", "policy version", "committed by")
            for ev in r["events"]:
                v = ev["policy_version"] or {}
                table.add_row(ev["time"], ev["event"], ev["detail"], v.get("short", "-"),
                              f"{v.get('author', '')} {v.get('committed_at', '')}".strip())
            out.print(table)
            if r["allocations"]:
                out.print("allocations: " + "; ".join(
                    f"{al['node'] or '?'}:{al['gpu_index'] if al['gpu_index'] is not None else '×' + str(al['gpus'])} "
                    f"{al['from']}–{al['to'] or 'now'}" for al in r["allocations"]), highlight=False, soft_wrap=True)

    @audit_app.command("gpus")
    def audit_gpus(
        spec: str = typer.Argument(..., help="NODE:IDX[,IDX] (e.g. gpu01:0,1) or NODE for every GPU."),
        at: str = typer.Option(..., "--at", help="The instant (2026-01-05T10:00:00, now-2hours, …)."),
        cluster: Optional[str] = typer.Option(None, "--cluster", "-M", help="Cluster or run:ID."),
        db: Optional[str] = _db_option(),
        as_json: bool = _json_option(),
    ) -> None:
        """Who held these GPUs at that time, under which policy version, committed when and by whom."""
        from gpupool.ledger import query

        try:
            rows = query.audit_gpus(_ledger(db), spec, _time(at), cluster)
        except GpupoolError as exc:
            _fail(exc)
        if as_json:
            _emit(rows)
            return
        if not rows:
            out.print(f"nobody held {spec} at {at}")
            return
        table = Table("cluster", "GPU", "job", "user", "account", "qos", "from", "to", "policy", "committed", "by", "message")
        for r in rows:
            v = r["policy_version"] or {}
            gpu = f"{r['node']}:{r['gpu_index']}" if r["gpu_index"] is not None else f"{r['node']} ×{r['gpus']}"
            table.add_row(r["cluster"], gpu, r["job_id"], r["user"], r["account"], r["qos"], r["from"],
                          r["to"] or "-", v.get("short", "-"), v.get("committed_at", ""), v.get("author", ""),
                          v.get("message", ""))
        out.print(table)

    # ------------------------------------------------------------------ runs
    @runs_app.callback(invoke_without_command=True)
    def runs_list(
        ctx: typer.Context,
        pool: Optional[str] = typer.Option(None, "--pool", help="Only runs of this pool (by name)."),
        policy: Optional[str] = typer.Option(None, "--policy", help="Only runs of this policy."),
        db: Optional[str] = _db_option(),
        as_json: bool = _json_option(),
    ) -> None:
        """List recorded runs (`gpupool simulate … --db`), oldest first; `runs show ID` for one."""
        if ctx.invoked_subcommand is not None:
            return
        from gpupool.ledger.runs import list_runs

        try:
            rows = list_runs(_ledger(db), pool=pool, policy=policy)
        except GpupoolError as exc:
            _fail(exc)
        if as_json:
            _emit(rows)
            return
        table = Table("run", "pool", "pool hash", "policy", "version", "workload", "digest", "seed", "epoch",
                      "recorded", "jobs", "GPU-h")
        for r in rows:
            table.add_row(r["run_id"], r["pool"], r["pool_hash"][:12], r["policy"], r["policy_version"][:12] or "-",
                          r["workload"], r["workload_digest"][:12], "-" if r["seed"] is None else str(r["seed"]),
                          r["epoch"], r["recorded_at"], str(r["jobs"]), f"{r['gpu_hours']:.1f}")
        out.print(table)

    @runs_app.command("show")
    def runs_show(
        run_id: str = typer.Argument(..., help="Run id, a unique prefix of it, or run:ID."),
        db: Optional[str] = _db_option(),
        as_json: bool = _json_option(),
    ) -> None:
        """Everything recorded about one run: inputs, options, policy version, job states, summary."""
        from gpupool.ledger.runs import show_run

        try:
            run = show_run(_ledger(db), run_id)
        except GpupoolError as exc:
            _fail(exc)
        if as_json:
            _emit(run)
            return
        pv = run["policy_version_commit"]
        lines = [
            ("run", run["run_id"]), ("cluster", run["cluster"]), ("pool", f"{run['pool']} (tree {run['pool_hash']})"),
            ("policy", run["policy"]), ("options", json.dumps(run["policy_options"], sort_keys=True)),
            ("policy version", (f"{pv['version'][:12]} committed {pv['committed_at']} by {pv['author']}: "
                                f"{pv['message']}") if pv else (run["policy_version"] or "-")),
            ("workload", run["workload"]), ("workload digest", run["workload_digest"]),
            ("seed", "-" if run["seed"] is None else str(run["seed"])), ("epoch", run["epoch"]),
            ("jobs span", f"{run['first_submit']} .. {run['last_end']}"), ("recorded", run["recorded_at"]),
            ("jobs", f"{run['jobs']} ({', '.join(f'{k} {v}' for k, v in run['states'].items()) or 'none'})"),
            ("GPU-hours", f"{run['gpu_hours']:.3f}"),
        ]
        width = max(len(k) for k, _ in lines)
        for k, v in lines:
            sys.stdout.write(f"{k.ljust(width)}  {v}\n")

    # ------------------------------------------------------------------ import
    def _report(result: dict, as_json: bool) -> None:
        if as_json:
            _emit(result)
            return
        added = {k: v for k, v in result.items() if k.endswith(("_added", "_updated")) and v}
        out.print(f"{result['source']}: {result['records']} records; "
                  + (", ".join(f"{k.replace('_', ' ')} {v}" for k, v in added.items()) or "nothing new"),
                  highlight=False)

    @import_app.command("sacct")
    def import_sacct_cmd(
        files: List[Path] = typer.Argument(..., help="sacct --parsable2 --allocations --format=ALL output, or sacct --json output."),
        cluster: Optional[str] = typer.Option(None, "--cluster", "-M", help="Cluster name (default: the Cluster field)."),
        pool: Optional[str] = typer.Option(None, "--pool", help="Pool name whose policy versions were in force (default: the cluster)."),
        db: Optional[str] = _db_option(),
        as_json: bool = _json_option(),
    ) -> None:
        """Import sacct job records; importing the same records again adds nothing."""
        from gpupool.ledger.imports import import_sacct_files, import_sacct_json

        results = []
        try:
            ledger = _ledger(db)
            text: list[Path] = []  # runs of parsable files go through the pipelined importer, in order
            for f in files:
                with open(f, "rb") as fh:
                    head = fh.read(64).lstrip()
                if head.startswith(b"{"):
                    results.extend(import_sacct_files(ledger, text, cluster=cluster, pool=pool))
                    text = []
                    results.append(import_sacct_json(ledger, f, cluster=cluster, pool=pool))
                else:
                    text.append(f)
            results.extend(import_sacct_files(ledger, text, cluster=cluster, pool=pool))
        except (GpupoolError, OSError) as exc:
            _fail(exc)
        if as_json:
            _emit(results)
        else:
            for r in results:
                _report(r, False)

    @import_app.command("sshare")
    def import_sshare_cmd(
        file: Path = typer.Argument(..., help="sshare -P -l output."),
        cluster: str = typer.Option("cluster", "--cluster", "-M", help="Cluster name."),
        at: Optional[str] = typer.Option(None, "--at", help="When it was taken (default: now)."),
        db: Optional[str] = _db_option(),
        as_json: bool = _json_option(),
    ) -> None:
        """Import a fair-share snapshot; the same output again adds nothing."""
        from gpupool.ledger.imports import import_sshare

        try:
            _report(import_sshare(_ledger(db), file, cluster=cluster, at=_time(at)), as_json)
        except (GpupoolError, OSError) as exc:
            _fail(exc)

    @import_app.command("kueue")
    def import_kueue_cmd(
        files: List[Path] = typer.Argument(..., help="kubectl get workloads -A -o yaml dumps, oldest first."),
        cluster: str = typer.Option("kueue", "--cluster", "-M", help="Cluster name."),
        at: Optional[str] = typer.Option(None, "--at", help="When the dump was taken (default: its newest timestamp)."),
        pool: Optional[Path] = typer.Option(None, "--pool", help="Pool directory: GPU types of ResourceFlavors, policy versions."),
        db: Optional[str] = _db_option(),
        as_json: bool = _json_option(),
    ) -> None:
        """Import Kueue Workload dumps taken over time; repeated dumps add only what is new."""
        from gpupool.formats.pool_dir import load_pool
        from gpupool.ledger.imports import import_kueue_workloads

        results = []
        try:
            ledger = _ledger(db)
            pool_obj = load_pool(pool) if pool else None
            for f in files:
                results.append(import_kueue_workloads(ledger, f, cluster=cluster, at=_time(at), pool=pool_obj))
        except (GpupoolError, OSError) as exc:
            _fail(exc)
        if as_json:
            _emit(results)
        else:
            for r in results:
                _report(r, False)
