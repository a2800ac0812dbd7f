"""``gpupool sacct|squeue|sprio|sshare``: a simulated run through Slurm's own commands.

These replay POOL's workload (or read a finished run's Parquet with ``--run``) and print what
Slurm's commands would print at the end of the run or at ``--at T``. They differ from the
ledger's ``gpupool acct`` / ``gpupool share``, which read recorded jobs from a database.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import typer

from gpupool.errors import GpupoolError

_AT_HELP = ("Instant of the run: seconds (3600), a Slurm duration (1:00:00, 1-12) or a timestamp "
            "relative to --epoch; default: the end of the run.")
_EPOCH_HELP = "Wall-clock time of t=0 for printed timestamps (UTC)."


def _fail(exc: Exception) -> None:
    sys.stderr.write(f"error: {exc}\n")
    raise typer.Exit(2)


def _emit(data) -> None:
    sys.stdout.write(json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")


def _note(text: str) -> None:
    sys.stderr.write(f"note: {text}\n")


def _instant(pool: Path, workload, policy, at_text, epoch_text, run_dir: Path | None = None,
             need_policy: bool = False):
    from gpupool.formats.pool_dir import load_pool
    from gpupool.report import slurm_views as sv

    epoch = sv.parse_epoch(epoch_text)
    at = sv.parse_at(at_text, epoch)
    pool_obj = load_pool(pool)
    if run_dir is not None:
        if need_policy:
            raise sv.ViewError("this view needs the Slurm policy's state at the instant, which a run's Parquet "
                               "does not keep; drop --run to re-simulate")
        inst = sv.instant_from_run_dir(run_dir, pool_obj, at)
        for n in inst.notes:
            _note(n)
    else:
        inst = sv.instant(pool_obj, workload, policy, at)
    if inst.rejected:
        _note(f"{inst.rejected} job(s) rejected at submit are not listed (sbatch gives them no job record)")
    return inst, epoch


def register(app: typer.Typer) -> None:
    """Add ``sacct``, ``squeue``, ``sprio`` and ``sshare`` to ``app``."""


    @app.command()
    def sacct(
        pool: Path = typer.Argument(..., help="Pool directory."),
        workload: str | None = typer.Option(None, "--workload", "-w", help="Workload spec; default: the pool's."),
        policy: str = typer.Option("slurm", "--policy", help="Policy to simulate."),
        at: str | None = typer.Option(None, "--at", help=_AT_HELP),
        fmt: str | None = typer.Option(None, "--format", "-o", help="Fields, e.g. JobID,JobName%30,State,AllocTRES (sacct's names; %N width, %-N left)."),
        parsable2: bool = typer.Option(False, "--parsable2", "-P", help="'|'-separated, no trailing '|'."),
        noheader: bool = typer.Option(False, "--noheader", "-n", help="No header line."),
        duplicates: bool = typer.Option(False, "--duplicates", "-D", help="Every run of a requeued job (earlier runs end PREEMPTED or NODE_FAIL)."),
        epoch: str | None = typer.Option(None, "--epoch", help=_EPOCH_HELP),
        run_dir: Path | None = typer.Option(None, "--run", help="Read a finished run's jobs/events Parquet instead of re-simulating."),
        as_json: bool = typer.Option(False, "--json", help="Print {\"jobs\": [...]} as JSON."),
    ) -> None:
        """Job records of a SIMULATED run as sacct prints them (not the ledger: see `gpupool acct`)."""
        from gpupool.report import slurm_views as sv

        try:
            inst, ep = _instant(pool, workload, policy, at, epoch, run_dir)
            rows = sv.sacct_records(inst, epoch=ep, duplicates=duplicates)
            if as_json:
                _emit({"at": inst.at, "jobs": sv.sacct_json(rows, fmt)})
                return
            sys.stdout.write(sv.sacct_text(rows, fmt, parsable2=parsable2, noheader=noheader))
        except GpupoolError as exc:
            _fail(exc)

    @app.command()
    def squeue(
        pool: Path = typer.Argument(..., help="Pool directory."),
        workload: str | None = typer.Option(None, "--workload", "-w", help="Workload spec; default: the pool's."),
        policy: str = typer.Option("slurm", "--policy", help="Policy to simulate."),
        at: str | None = typer.Option(None, "--at", help=_AT_HELP),
        start: bool = typer.Option(False, "--start", help="Pending jobs with their expected start (the Slurm policy's backfill plan)."),
        parsable2: bool = typer.Option(False, "--parsable2", "-P", help="'|'-separated output."),
        epoch: str | None = typer.Option(None, "--epoch", help=_EPOCH_HELP),
        run_dir: Path | None = typer.Option(None, "--run", help="Read a finished run's Parquet (not with --start)."),
        as_json: bool = typer.Option(False, "--json", help="Print the rows as JSON."),
    ) -> None:
        """Pending and running jobs of a simulated run at an instant, as squeue prints them."""
        from gpupool.report import slurm_views as sv

        try:
            inst, ep = _instant(pool, workload, policy, at, epoch, run_dir, need_policy=start)
            if start and inst.slurm is None:
                _note(f"policy {policy} plans no starts: START_TIME is N/A")
            rows = sv.squeue_rows(inst, epoch=ep, start=start)
            if as_json:
                _emit({"at": inst.at, "jobs": sv.squeue_json(rows, start=start)})
                return
            sys.stdout.write(sv.squeue_text(rows, start=start, parsable2=parsable2))
        except GpupoolError as exc:
            _fail(exc)

    @app.command()
    def sprio(
        pool: Path = typer.Argument(..., help="Pool directory."),
        workload: str | None = typer.Option(None, "--workload", "-w", help="Workload spec; default: the pool's."),
        policy: str = typer.Option("slurm", "--policy", help="Policy to simulate (sprio needs slurm)."),
        at: str | None = typer.Option(None, "--at", help=_AT_HELP),
        norm: bool = typer.Option(False, "--norm", "-n", help="Normalised factors instead of weighted ones."),
        parsable2: bool = typer.Option(False, "--parsable2", "-P", help="'|'-separated output."),
        epoch: str | None = typer.Option(None, "--epoch", help=_EPOCH_HELP),
        as_json: bool = typer.Option(False, "--json", help="Factors, weighted values and priorities as JSON."),
    ) -> None:
        """Priority factors of each pending job at an instant, like sprio -l (simulated run)."""
        from gpupool.report import slurm_views as sv

        try:
            inst, _ = _instant(pool, workload, policy, at, epoch)
            rows = sv.sprio_rows(inst)
            if as_json:
                _emit({"at": inst.at, "jobs": rows})
                return
            sys.stdout.write(sv.sprio_text(rows, parsable2=parsable2, norm=norm))
        except GpupoolError as exc:
            _fail(exc)

    @app.command()
    def sshare(
        pool: Path = typer.Argument(..., help="Pool directory."),
        workload: str | None = typer.Option(None, "--workload", "-w", help="Workload spec; default: the pool's."),
        policy: str = typer.Option("slurm", "--policy", help="Policy to simulate."),
        at: str | None = typer.Option(None, "--at", help=_AT_HELP),
        parsable2: bool = typer.Option(False, "--parsable2", "-P", help="'|'-separated output."),
        long: bool = typer.Option(True, "--long", "-l", help="Long listing (always on)."),
        epoch: str | None = typer.Option(None, "--epoch", help=_EPOCH_HELP),
        as_json: bool = typer.Option(False, "--json", help="The rows as JSON."),
    ) -> None:
        """Fair share at an instant of a SIMULATED run, like sshare -l (not the ledger: see `gpupool share`)."""
        from gpupool.report import slurm_views as sv

        try:
            inst, _ = _instant(pool, workload, policy, at, epoch)
            rows = sv.sshare_rows(inst)
            if as_json:
                _emit({"at": inst.at, "rows": sv.sshare_json(rows)})
                return
            sys.stdout.write(sv.sshare_text(rows, parsable2=parsable2))
        except GpupoolError as exc:
            _fail(exc)
