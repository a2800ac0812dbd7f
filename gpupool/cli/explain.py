"""``gpupool explain``: what Kueue's next scheduling cycle(s) do on a real object dump, and why.

``register(app)`` adds the command to the main ``gpupool`` app.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from gpupool.errors import GpupoolError

out = Console(width=None if sys.stdout.isatty() else 200)
err = Console(stderr=True)


def _fail(exc: Exception) -> None:
    err.print(f"[bold red]error:[/] {exc}", highlight=False, soft_wrap=True)
    raise typer.Exit(2)


def explain_command(
    state: Annotated[list[Path], typer.Option(
        "--state", "-s", metavar="DUMP",
        help="A dump: kubectl get resourceflavors,topologies,cohorts,clusterqueues,localqueues,"
             "workloadpriorityclasses,workloads -A -o yaml (repeat for several files; Nodes and the "
             "Kueue Configuration may be included).")],
    config: Annotated[Path | None, typer.Option(
        "--config", metavar="CONFIG", help="The Kueue Configuration (kind: Configuration) or the kueue-manager-config ConfigMap.")] = None,
    cycles: Annotated[int, typer.Option(
        "--cycles", metavar="N", min=1, max=10000, help="Run this many scheduling cycles (nothing finishes between them).")] = 1,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON document.")] = False,
) -> None:
    """What the next Kueue scheduling cycle does: admissions with flavors, evictions with their
    Preempted reason, and why every pending workload waits."""
    from gpupool.explain.dump import load_dump
    from gpupool.explain.render import print_explanation, to_json
    from gpupool.explain.run import explain

    try:
        dump = load_dump(list(state), config)
        result = explain(dump, cycles)
    except GpupoolError as exc:
        _fail(exc)
    if as_json:
        sys.stdout.write(json.dumps(to_json(result), indent=2, sort_keys=True) + "\n")
        return
    print_explanation(result, out)


def register(app: typer.Typer) -> None:
    app.command("explain")(explain_command)
