"""``gpupool conformance``: run spec cases (Slurm and Kueue) and the differential test against a real Slurm.

``run PATH...`` takes case files or folders of them. The kind of each file is read from the
file itself, so unseen cases of either format work: a Kueue case names its ``kind`` (cycle,
preemption, flavorassigner, integration); a Slurm case (spec/slurm.md §0) has an ``id`` and
some of ``config``/``cluster``/``jobs``/``tree``/``scenarios``/``constants``. ``register(app)``
adds the group to the main app.
"""
from __future__ import annotations

import json
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Annotated

import typer
import yaml
from rich.console import Console
from rich.markup import escape

from gpupool.errors import GpupoolError

out = Console(width=None if sys.stdout.isatty() else 200)
err = Console(stderr=True)

conformance_app = typer.Typer(help="Spec conformance: run Slurm/Kueue case files, diff against a real Slurm.",
                              no_args_is_help=True)

_SLURM_KEYS = {"config", "cluster", "jobs", "tree", "scenarios", "constants"}


@dataclass
class Outcome:
    """One case (or one variant of a Slurm case) and its verdict."""

    file: str
    kind: str
    case: str
    variant: str
    ok: bool
    failures: list[str] = field(default_factory=list)
    not_checked: list[str] = field(default_factory=list)


def case_kind(path: Path) -> str:
    """``"slurm"`` or ``"kueue"`` from the file's content; GpupoolError naming the file otherwise."""
    from gpupool.conformance.kueue_cases import KINDS

    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise GpupoolError(f"{path}: cannot read the case: {exc}") from None
    if not isinstance(doc, dict):
        raise GpupoolError(f"{path}: a case file holds one YAML mapping, got {type(doc).__name__}")
    if doc.get("kind") in KINDS:
        return "kueue"
    if "id" in doc and _SLURM_KEYS & set(doc):
        return "slurm"
    raise GpupoolError(f"{path}: neither a Kueue case (kind: {', '.join(KINDS)}) nor a Slurm case "
                       f"(id plus one of {', '.join(sorted(_SLURM_KEYS))})")


def case_files(paths: list[Path]) -> list[Path]:
    """Files named directly, and every ``*.yaml``/``*.yml`` under named folders (sorted)."""
    files: list[Path] = []
    for p in paths:
        if p.is_dir():
            files += sorted(f for f in p.rglob("*") if f.suffix in (".yaml", ".yml") and f.is_file())
        elif p.is_file():
            files.append(p)
        else:
            raise GpupoolError(f"{p}: no such file or folder")
    return files


def run_file(path: Path) -> list[Outcome]:
    """Run one case file through the runner its kind needs."""
    kind = case_kind(path)
    if kind == "kueue":
        from gpupool.conformance.kueue_cases import run_case as run_kueue

        r = run_kueue(path)
        return [Outcome(str(path), kind, r.name, "base", r.passed, list(r.mismatches), list(r.not_checked))]
    import gpupool.policy.slurm  # noqa: F401  (registers --policy slurm)
    from gpupool.conformance.slurm_cases import load_case, run_variant, variants_of

    case = load_case(path)
    outs = []
    for name, over, exp in variants_of(case):
        try:
            r = run_variant(case, name, over, exp)
            outs.append(Outcome(str(path), kind, r.case_id, name, r.ok, list(r.failures), list(r.not_checked)))
        except Exception as exc:  # noqa: BLE001 - a broken case is a failed case, reported with its cause
            outs.append(Outcome(str(path), kind, str(case.get("id")), name, False,
                                [f"runner error: {type(exc).__name__}: {exc}"]))
    return outs


def run_command(
    paths: Annotated[list[Path], typer.Argument(metavar="PATH...", help="Case files or folders of case files.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON document.")] = False,
) -> None:
    """Run spec cases (Slurm or Kueue, detected per file): pass/fail per case with what differs."""
    try:
        files = case_files(paths)
        results = [o for f in files for o in run_file(f)]
    except GpupoolError as exc:
        err.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None
    failed = [r for r in results if not r.ok]
    if as_json:
        doc = {"passed": len(results) - len(failed), "failed": len(failed), "cases": [asdict(r) for r in results]}
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
    else:
        for r in results:
            mark = "[green]PASS[/]" if r.ok else "[bold red]FAIL[/]"
            out.print(f"{mark} {r.kind} {escape(f'{r.case} [{r.variant}]  ({r.file})')}", highlight=False, soft_wrap=True)
            for f in r.failures:
                out.print(f"    - {escape(f)}", highlight=False, soft_wrap=True)
            if r.not_checked:
                out.print(f"    not checked: {escape('; '.join(r.not_checked))}", highlight=False, soft_wrap=True)
        out.print(f"{len(results) - len(failed)} passed, {len(failed)} failed", highlight=False)
    if failed:
        raise typer.Exit(1)


def diff_slurm_command(
    pool: Annotated[Path, typer.Argument(metavar="POOL", help="Pool folder (slurm.conf, gres.conf, sacctmgr dump).")],
    jobs: Annotated[int, typer.Option("--jobs", min=1, max=2000, help="Jobs in the random workload.")] = 100,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the random workload.")] = 1,
    accounting: Annotated[str, typer.Option("--accounting", help="dbd (slurmdbd + MariaDB: fair share, sacct) or none.")] = "dbd",
    speedup: Annotated[float, typer.Option("--speedup", min=1.0, max=60.0, help="libfaketime clock speed-up (1 = real time).")] = 10.0,
    sched_params: Annotated[str | None, typer.Option(
        "--scheduler-parameters", metavar="TEXT", help="SchedulerParameters for both sides (default: 1 s backfill and main passes).")] = None,
    max_limit: Annotated[int, typer.Option("--max-limit", min=1, help="Longest time limit drawn, in minutes.")] = 5,
    gap: Annotated[float, typer.Option("--gap", min=0.0, help="Mean seconds between arrivals.")] = 6.0,
    mix: Annotated[str, typer.Option("--mix", help="Workload options: gpus (nodes and GPUs per node only), rich (also CPUs, memory, tasks, --exclusive), gpus-job (some multi-node jobs ask --gpus for the whole job), gpus-walk (some jobs ask --gpus with no --nodes), gpus-tasks (some jobs ask --ntasks and --gpus with no --nodes), gpus-per-task (some jobs ask --ntasks and --gpus-per-task with no --nodes), gres-tasks (some jobs ask --ntasks and --gres=gpu:G with no --nodes), gpus-uneven (some jobs ask --ntasks=T and --gpus=X, X not a multiple of T, with no --nodes), gpus-range (some jobs ask --nodes=A-B and --gpus=X), gpus-few (some jobs ask --ntasks=T and --gpus=X with more tasks than GPUs), gpus-cpg (some jobs ask --gpus=X beside --cpus-per-gpu or --exclusive), gpus-cpg-tasks (some jobs ask --ntasks=T, --gpus=X and --cpus-per-gpu with no --nodes) or parts (some jobs sent with --partition to one or two of the pool's partitions that can hold them).")] = "gpus",
    workdir: Annotated[Path | None, typer.Option("--workdir", help="Keep the real cluster's files here (default: a temporary folder).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON document.")] = False,
) -> None:
    """Replay a random GPU workload on a real Slurm 22.05 and through --policy slurm; report agreement.

    Two replays are reported: the open one (gpupool on its own after the submissions) and the lockstep one (each of gpupool's decisions taken from the state real Slurm was in; "lockstep" in --json). See docs/differential.md.
    """
    from gpupool.conformance.diff_slurm import diff_slurm
    from gpupool.conformance.diff_slurm_workload import MIXES
    from gpupool.conformance.real_slurm import (
        DEFAULT_SCHEDULER_PARAMETERS,
        RealSlurmUnavailable,
    )

    if accounting not in ("dbd", "none"):
        err.print("[bold red]error:[/] --accounting: expected dbd or none", highlight=False)
        raise typer.Exit(2)
    if mix not in MIXES:
        err.print(f"[bold red]error:[/] --mix: expected {', '.join(MIXES)}, got {escape(mix)!r}", highlight=False)
        raise typer.Exit(2)
    try:
        report = diff_slurm(pool, jobs=jobs, seed=seed, accounting=accounting,
                            speedup=None if speedup == 1.0 else speedup, workdir=workdir,
                            scheduler_parameters=sched_params or DEFAULT_SCHEDULER_PARAMETERS,
                            max_limit_min=max_limit, mean_gap_s=gap, mix=mix)
    except RealSlurmUnavailable as exc:
        err.print(f"[bold red]real Slurm unavailable:[/] {exc}", highlight=False, soft_wrap=True)
        raise typer.Exit(3) from None
    except GpupoolError as exc:
        err.print(f"[bold red]error:[/] {exc}", highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None
    if as_json:
        sys.stdout.write(json.dumps(report.to_dict(), indent=2) + "\n")
        return
    for line in report.summary_lines():
        out.print(escape(line), highlight=False, soft_wrap=True)


conformance_app.command("run")(run_command)
conformance_app.command("diff-slurm")(diff_slurm_command)


def register(app: typer.Typer) -> None:
    app.add_typer(conformance_app, name="conformance")
