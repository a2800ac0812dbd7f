"""The ``gpupool`` command line: validate a pool, simulate a policy, compare policies.

Every command prints a table for people and, with ``--json``, one JSON document for
machines. Errors in user input print one line naming the file and field, and exit 2.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from gpupool.errors import GpupoolError, PolicyNotApplicable

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="One pool of GPUs, two job shapes: Slurm and Kueue policies side by side.")
# Tables are wide; when stdout is not a terminal (a pipe, CI logs) do not fold them at 80.
out = Console(width=None if sys.stdout.isatty() else 200)
err = Console(stderr=True)


def _fail(exc: Exception) -> None:
    err.print(f"[bold red]error:[/] {exc}", highlight=False, soft_wrap=True)
    raise typer.Exit(2)


def _progress(enabled: bool) -> Progress:
    return Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(),
                    console=err, transient=True, disable=not enabled)


def _emit_json(data) -> None:
    sys.stdout.write(json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")


@app.command()
def validate(
    pool: Path = typer.Argument(..., help="Pool directory (slurm.conf, gres.conf, sacctmgr dump, Kueue YAML)."),
    as_json: bool = typer.Option(False, "--json", help="Print the facts as JSON."),
) -> None:
    """Parse every file of a pool and print its nodes, GPUs, partitions, accounts, QOS and queues."""
    from gpupool.cli.render import pool_facts
    from gpupool.formats.pool_dir import load_pool

    try:
        facts = pool_facts(load_pool(pool))
    except GpupoolError as exc:
        _fail(exc)
    if as_json:
        _emit_json(facts)
        return
    out.print(f"[bold]pool {facts['pool']}[/]: {facts['nodes']} nodes, {facts['gpus']} GPUs "
              f"{facts['gpu_types']}; topology levels {', '.join(facts['topology_levels'])}")
    table = Table("node", "CPUs", "memory MiB", "GPUs", "type", "state", title="Nodes")
    for n in facts["node_list"]:
        table.add_row(n["name"], str(n["cpus"]), str(n["memory_mib"]), str(n["gpus"]), n["gpu_type"] or "-", n["state"])
    out.print(table)
    if facts["partitions"]:
        table = Table("partition", "nodes", "default", "MaxTime", "PriorityTier", title="Slurm partitions")
        for p in facts["partitions"]:
            table.add_row(p["name"], p["nodes"], "yes" if p["default"] else "", p["max_time"], str(p["priority_tier"]))
        out.print(table)
    if facts["accounts"]:
        table = Table("account", "parent", "fairshare", "users", title="Slurm accounts")
        for a in facts["accounts"]:
            users = [u["name"] for u in facts["users"] if u["account"] == a["name"]]
            table.add_row(a["name"], a["parent"] or "", str(a["fairshare"]), ", ".join(users))
        out.print(table)
    if facts["qos"]:
        table = Table("QOS", "priority", "preempt", "mode", "limits and flags", title="Slurm QOS")
        for q in facts["qos"]:
            table.add_row(q["name"], str(q["priority"]), ",".join(q["preempt"]), q["preempt_mode"] or "",
                          _qos_limits_text(q))
        out.print(table)
    if facts["cluster_queues"]:
        table = Table("ClusterQueue", "cohort", "flavor", "resource", "nominal", "borrowingLimit", "lendingLimit",
                      title="Kueue ClusterQueues")
        for cq in facts["cluster_queues"]:
            for flavor, resources in cq["quotas"].items():
                for res, q in resources.items():
                    table.add_row(cq["name"], cq["cohort"] or "", flavor, res, q["nominalQuota"],
                                  q["borrowingLimit"] or "-", q["lendingLimit"] or "-")
        out.print(table)
        out.print("cohorts: " + ", ".join(c["name"] for c in facts["cohorts"]))
        out.print("local queues: " + ", ".join(f"{q['namespace']}/{q['name']} -> {q['cluster_queue']}"
                                               for q in facts["local_queues"]))
    for note in facts["notes"][:3]:
        out.print(f"[dim]note: {note}[/]", soft_wrap=True)
    if len(facts["notes"]) > 3:
        out.print(f"[dim]… and {len(facts['notes']) - 3} more notes (see --json)[/]")
    if facts["not_modelled"]:
        keys = sorted({f"{item['key']}" for item in facts["not_modelled"]})
        out.print(f"[dim]not modelled ({len(keys)}): {', '.join(keys)}[/]")


#: (facts key, sacctmgr option) of the QOS limits ``validate`` lists, in sacctmgr's spelling
_QOS_LIMIT_NAMES = (("grp_tres", "GrpTRES"), ("grp_jobs", "GrpJobs"), ("max_tres_per_job", "MaxTRESPerJob"),
                    ("min_tres_per_job", "MinTRESPerJob"), ("max_tres_per_account", "MaxTRESPerAccount"),
                    ("max_tres_per_user", "MaxTRESPerUser"), ("max_jobs_per_account", "MaxJobsPA"),
                    ("max_jobs_per_user", "MaxJobsPU"), ("grp_submit_jobs", "GrpSubmitJobs"),
                    ("max_submit_jobs_per_account", "MaxSubmitJobsPA"), ("max_submit_jobs_per_user", "MaxSubmitJobsPU"),
                    ("max_wall", "MaxWall"), ("flags", "Flags"))


def _qos_limits_text(q: dict) -> str:
    """The limits and flags a QOS sets, ``Name=value`` in sacctmgr's spelling (TRES as k=v)."""
    parts = []
    for key, name in _QOS_LIMIT_NAMES:
        value = q.get(key)
        if value is None or value == {} or value == []:
            continue
        if isinstance(value, dict):
            value = ",".join(f"{k}={v}" for k, v in value.items())
        elif isinstance(value, list):
            value = ",".join(value)
        parts.append(f"{name}={value}")
    return " ".join(parts)


def _report_skipped(workloads) -> None:
    """Trace readers count the rows they could not use; say so rather than drop them quietly."""
    if getattr(workloads, "skipped", None) or getattr(workloads, "notes", None):
        err.print(f"[dim]{workloads.summary()}[/]", highlight=False, soft_wrap=True)
        for note in getattr(workloads, "notes", ())[:5]:
            err.print(f"[dim]  note: {note}[/]", highlight=False, soft_wrap=True)


def _load_faults(path: Optional[Path], pool_obj):
    if path is None:
        return []
    from gpupool.formats.faults import parse_faults

    return parse_faults(path, set(pool_obj.nodes))


def _run_one(pool_obj, workloads, policy: str, check: bool, until: Optional[float], faults=(), services=None):
    from gpupool.simulation import simulate as run

    return run(pool_obj, workloads, policy, check=check, until=until, faults=faults, services=services)


@app.command()
def simulate(
    pool: Path = typer.Argument(..., help="Pool directory."),
    policy: str = typer.Option("fifo", "--policy", "-p", help="Policy name (see `gpupool policies`)."),
    workload: Optional[str] = typer.Option(None, "--workload", "-w",
                                           help="synthetic:PRESET[?k=v…], a workload folder, a trace file; default: the pool's."),
    out_dir: Optional[Path] = typer.Option(None, "--out", "-o", help="Write jobs/timeline/events Parquet and summary.json here."),
    check: bool = typer.Option(False, "--check", help="Run the invariant checker (slower)."),
    until: Optional[float] = typer.Option(None, "--until", help="Stop the simulated clock at this many seconds."),
    faults: Optional[Path] = typer.Option(None, "--faults", help="CSV of time,node,event[,reason] (down, up, drain, resume)."),
    db: Optional[str] = typer.Option(None, "--db", help="Record the run in this ledger (a SQLite file or a database URL)."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
    services: bool = typer.Option(False, "--services/--no-services",
                                  help="Run the pool's inference services (services/) beside the workload."),
) -> None:
    """Replay a workload on a pool under one policy (and record it in a ledger with --db)."""
    from gpupool.formats.pool_dir import load_pool
    from gpupool.workload.sources import load_workload

    try:
        with _progress(not as_json) as progress:
            task = progress.add_task("loading pool and workload", total=2)
            pool_obj = load_pool(pool)
            workloads = load_workload(workload, pool_obj)
            _report_skipped(workloads)
            node_events = _load_faults(faults, pool_obj)
            progress.update(task, advance=1, description=f"simulating {len(workloads)} jobs under {policy}")
            if db is None:
                result = _run_one(pool_obj, workloads, policy, check, until, node_events,
                                  services="pool" if services else None)
            else:
                from gpupool.ledger.record import record_run, simulate_for_ledger

                result = simulate_for_ledger(pool_obj, workloads, policy, check=check, until=until, faults=node_events,
                                             services="pool" if services else None)
                recorded = record_run(db, result, pool_obj, workload, policy)
                result.summary_dict["ledger"] = {k: v for k, v in recorded.items() if isinstance(v, (str, int, float, dict))}
            progress.update(task, advance=1)
        if out_dir is not None:
            result.write(out_dir)
    except GpupoolError as exc:
        _fail(exc)
    if as_json:
        _emit_json(result.summary_dict)
        return
    _print_summary_table([result.summary_dict])
    if out_dir is not None:
        out.print(f"results written to {out_dir}")


def _print_summary_table(summaries: list[dict]) -> None:
    from gpupool.cli.render import COMPARE_COLUMNS, SERVICE_COLUMNS, format_cell, summary_value

    table = Table(*[header for _, header, _ in COMPARE_COLUMNS])
    for s in summaries:
        table.add_row(*[format_cell(summary_value(s, path), fmt) for path, _, fmt in COMPARE_COLUMNS])
    out.print(table)
    if any("services" in s for s in summaries):
        # Services and quotas side by side with the training table above, one row per policy.
        table = Table("policy", *[header for _, header, _ in SERVICE_COLUMNS], title="services and quotas")
        for s in summaries:
            table.add_row(s.get("policy", "-"),
                          *[format_cell(summary_value(s, path), fmt) for path, _, fmt in SERVICE_COLUMNS])
        out.print(table)


@app.command()
def compare(
    pool: Path = typer.Argument(..., help="Pool directory."),
    workload: Optional[str] = typer.Option(None, "--workload", "-w", help="Workload spec; default: the pool's."),
    policies: Optional[str] = typer.Option(None, "--policies", help="Comma-separated policies; default: every registered one."),
    out_dir: Optional[Path] = typer.Option(None, "--out", "-o", help="Report folder; default runs/POOL/compare."),
    check: bool = typer.Option(False, "--check", help="Run the invariant checker."),
    faults: Optional[Path] = typer.Option(None, "--faults", help="CSV of time,node,event[,reason] for every run."),
    as_json: bool = typer.Option(False, "--json", help="Print the comparison as JSON."),
    services: bool = typer.Option(True, "--services/--no-services",
                                  help="Run the pool's inference services (services/) beside the workload."),
) -> None:
    """Run every registered policy on the same workload and print one comparison table
    (with the pool's services, their SLOs and the quota figures, when it has any)."""
    from gpupool.engine.policy_api import registered
    from gpupool.formats.pool_dir import load_pool
    from gpupool.workload.sources import load_workload

    names = [p.strip() for p in policies.split(",")] if policies else list(registered())
    summaries = []
    try:
        pool_obj = load_pool(pool)
        workloads = load_workload(workload, pool_obj)
        _report_skipped(workloads)
        node_events = _load_faults(faults, pool_obj)
        target = out_dir or Path("runs") / pool_obj.name / "compare"
        with _progress(not as_json) as progress:
            task = progress.add_task("comparing", total=len(names))
            for name in names:
                progress.update(task, description=f"{name}: {len(workloads)} jobs")
                try:
                    result = _run_one(pool_obj, workloads, name, check, None, node_events,
                                      services="pool" if services else None)
                except PolicyNotApplicable as exc:
                    if policies:  # asked for by name: that is an error, not a skip
                        raise
                    err.print(f"[yellow]skipped {name}:[/] {exc}", highlight=False, soft_wrap=True)
                    progress.update(task, advance=1)
                    continue
                result.write(target / name)
                summaries.append(result.summary_dict)
                progress.update(task, advance=1)
        _write_comparison(target, summaries)
    except GpupoolError as exc:
        _fail(exc)
    if as_json:
        _emit_json({"pool": pool_obj.name, "jobs": len(workloads), "policies": summaries})
        return
    out.print(f"[bold]{pool_obj.name}[/]: {len(workloads)} jobs on {pool_obj.gpu_count} GPUs")
    _print_summary_table(summaries)
    out.print(f"report written to {target}")


def _write_comparison(target: Path, summaries: list[dict]) -> None:
    import csv

    from gpupool.cli.render import compare_columns, summary_value

    columns = compare_columns(summaries)
    target.mkdir(parents=True, exist_ok=True)
    (target / "comparison.json").write_text(json.dumps(summaries, indent=2, sort_keys=True) + "\n")
    with open(target / "comparison.csv", "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow([path for path, _, _ in columns])
        for s in summaries:
            writer.writerow([summary_value(s, path) for path, _, _ in columns])


@app.command()
def policies(as_json: bool = typer.Option(False, "--json", help="Print as JSON.")) -> None:
    """List the registered scheduling policies."""
    from gpupool.engine.policy_api import registered

    reg = registered()
    if as_json:
        _emit_json(reg)
        return
    table = Table("policy", "what it does")
    for name, desc in reg.items():
        table.add_row(name, desc)
    out.print(table)


# Commands that live in their own modules: the ledger (acct, share, usage, policy, audit,
# import), Kueue's explain, and Slurm-shaped views of a simulation (sacct, squeue, sprio, sshare).
from gpupool.cli.explain import register as _register_explain  # noqa: E402
from gpupool.cli.ledger import register as _register_ledger  # noqa: E402
from gpupool.cli.slurm_views import register as _register_slurm_views  # noqa: E402

_register_ledger(app)
_register_explain(app)
_register_slurm_views(app)
from gpupool.cli.live import register as _register_live; _register_live(app)  # noqa: E402,E702
from gpupool.cli.conformance import register as _register_conformance; _register_conformance(app)  # noqa: E402,E702


def main() -> None:  # pragma: no cover - console entry point
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
