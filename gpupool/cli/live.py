"""Live-pool commands: ``serve`` (the daemon), ``submit``, ``queue``, ``cancel``.

``register(app)`` adds them to the main app. The client commands talk to the daemon over its
Unix socket (``--socket``, default ``$GPUPOOL_SOCKET`` or ~/.local/share/gpupool/live/gpupool.sock)
or over TCP (``--url`` with ``--token``). ``gpupool acct``/``share`` read the daemon's ledger
(``--db``, the same database ``serve --db`` writes) under the cluster name ``live:<pool>``.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import List, Optional

import typer

from gpupool.errors import GpupoolError

SOCKET_HELP = "Daemon socket (default $GPUPOOL_SOCKET or ~/.local/share/gpupool/live/gpupool.sock)."


def _fail(exc: Exception) -> None:
    sys.stderr.write(f"error: {exc}\n")
    raise typer.Exit(2)


def _client(socket: Optional[str], url: Optional[str], token: Optional[str]):
    from gpupool.live.client import Client

    return Client(socket, url=url, token=token)


def register(app: typer.Typer) -> None:
    @app.command()
    def serve(
        pool: Path = typer.Argument(..., help="Pool directory; its node for this host gives CPUs, memory and declared GPUs."),
        policy: str = typer.Option("slurm", "--policy", help="Scheduling policy (gpupool policies)."),
        executor: str = typer.Option("local", "--executor", help="local (processes on this host) or slurm (hand off to a real Slurm)."),
        db: Optional[str] = typer.Option(None, "--db", envvar="GPUPOOL_DB", help="Ledger (SQLite path or URL): the daemon's state and accounting."),
        state_dir: Optional[Path] = typer.Option(None, "--state-dir", help="Spool for job scripts and status files (default ~/.local/share/gpupool/live)."),
        socket: Optional[Path] = typer.Option(None, "--socket", help=SOCKET_HELP),
        devices: str = typer.Option("auto", "--devices", help="auto (NVML if present, else declared), nvml, or declared (fake devices from the pool)."),
        node: Optional[str] = typer.Option(None, "--node", help="The pool node this host is (default: the host name, else the first node)."),
        tcp: Optional[str] = typer.Option(None, "--tcp", help="Also listen on HOST:PORT (needs --token-file)."),
        token_file: Optional[Path] = typer.Option(None, "--token-file", help="'user token' lines for TCP clients."),
        slurm_conf: Optional[str] = typer.Option(None, "--slurm-conf", help="With --executor slurm: SLURM_CONF of the real cluster."),
    ) -> None:
        """Run the live pool on this host: the engine on the wall clock, jobs as real processes."""
        from gpupool.live.client import default_socket
        from gpupool.live.server import read_tokens, serve as run_server

        if tcp and not token_file:
            _fail(GpupoolError("--tcp needs --token-file: TCP clients are identified by bearer tokens"))
        try:
            if executor == "slurm":
                from gpupool.live.slurm_handoff import SlurmDaemon

                daemon = SlurmDaemon(pool, db=db, state_dir=state_dir, slurm_conf=slurm_conf)
            elif executor == "local":
                from gpupool.live.daemon import Daemon

                daemon = Daemon(pool, db=db, state_dir=state_dir, policy=policy, devices=devices, node=node)
            else:
                raise GpupoolError(f"--executor: expected local or slurm, got {executor!r}")
        except GpupoolError as exc:
            _fail(exc)
        path = socket.expanduser() if socket else default_socket()
        tokens = read_tokens(token_file) if token_file else None

        def ready() -> None:
            host = daemon.host
            sys.stderr.write(f"gpupool: serving pool {host.pool.name} on node {host.node_name} "
                             f"({len(host.devices)} GPU(s){', fake' if any(d.fake for d in host.devices) else ''}) "
                             f"policy {daemon.policy_name}, socket {path}, ledger {daemon.ledger.url}; "
                             f"recovered {json.dumps(daemon.recovered)}\n")
            sys.stderr.flush()

        run_server(daemon, path, tcp=tcp, tokens=tokens, on_ready=ready)

    @app.command()
    def submit(
        scripts: List[Path] = typer.Argument(..., help="sbatch scripts, or Deployment YAML (.yaml) for services; all are accepted or none."),
        socket: Optional[str] = typer.Option(None, "--socket", help=SOCKET_HELP),
        url: Optional[str] = typer.Option(None, "--url", help="Daemon over TCP, e.g. http://host:8642."),
        token: Optional[str] = typer.Option(None, "--token", envvar="GPUPOOL_TOKEN", help="Bearer token for --url."),
        parsable: bool = typer.Option(False, "--parsable", help="Print only the job ids, as sbatch --parsable."),
        as_json: bool = typer.Option(False, "--json", help="Print one JSON document."),
    ) -> None:
        """Submit sbatch scripts (same #SBATCH options as simulate) or services to the live daemon."""
        texts = []
        for path in scripts:
            try:
                texts.append((path.read_text(encoding="utf-8"), str(path.resolve())))
            except (OSError, UnicodeDecodeError) as exc:
                _fail(GpupoolError(f"{path}: cannot read the script: {exc}"))
        try:
            with _client(socket, url, token) as client:
                ids = client.submit(texts)
        except GpupoolError as exc:
            _fail(exc)
        if as_json:
            sys.stdout.write(json.dumps({"job_ids": ids}) + "\n")
        elif parsable:
            sys.stdout.write("".join(f"{i}\n" for i in ids))
        else:
            sys.stdout.write("".join(f"Submitted batch job {i}\n" for i in ids))

    @app.command()
    def queue(
        user: Optional[str] = typer.Option(None, "--user", "-u", help="Only this user's jobs."),
        state: Optional[str] = typer.Option(None, "--states", "-t", help="Comma-separated states (PD, R, PENDING, RUNNING)."),
        socket: Optional[str] = typer.Option(None, "--socket", help=SOCKET_HELP),
        url: Optional[str] = typer.Option(None, "--url", help="Daemon over TCP."),
        token: Optional[str] = typer.Option(None, "--token", envvar="GPUPOOL_TOKEN", help="Bearer token for --url."),
        noheader: bool = typer.Option(False, "--noheader", "-h", help="No header line."),
        as_json: bool = typer.Option(False, "--json", help="Print one JSON document."),
    ) -> None:
        """Pending and running jobs of the live daemon, like squeue."""
        from gpupool.formats.slurm_time import format_duration

        try:
            with _client(socket, url, token) as client:
                rows = client.queue(user, state)
        except GpupoolError as exc:
            _fail(exc)
        if as_json:
            sys.stdout.write(json.dumps({"jobs": rows}, indent=2, sort_keys=True) + "\n")
            return
        lines = []
        if not noheader:
            lines.append(f"{'JOBID':>18} {'PARTITION':9} {'NAME':8} {'USER':8} {'ST':2} {'TIME':>10} {'NODES':>6} NODELIST(REASON)")
        for r in rows:
            where = r["nodelist"] if r["st"] == "R" else f"({r['reason']})"
            lines.append(f"{r['job_id']:>18} {r['partition'][:9]:9} {r['name'][:8]:8} {r['user'][:8]:8} {r['st']:2} "
                         f"{format_duration(r['time']):>10} {r['nodes']:>6} {where}")
        sys.stdout.write("".join(line + "\n" for line in lines))

    @app.command()
    def cancel(
        job_ids: List[int] = typer.Argument(..., help="Job ids to cancel (scancel)."),
        socket: Optional[str] = typer.Option(None, "--socket", help=SOCKET_HELP),
        url: Optional[str] = typer.Option(None, "--url", help="Daemon over TCP."),
        token: Optional[str] = typer.Option(None, "--token", envvar="GPUPOOL_TOKEN", help="Bearer token for --url."),
        as_json: bool = typer.Option(False, "--json", help="Print one JSON document."),
    ) -> None:
        """Cancel jobs of the live daemon: yours, or anyone's if you are an operator of the pool."""
        try:
            with _client(socket, url, token) as client:
                res = client.cancel(list(job_ids))
        except GpupoolError as exc:
            _fail(exc)
        if as_json:
            sys.stdout.write(json.dumps(res) + "\n")
            return
        for jid in res["already_ended"]:
            sys.stderr.write(f"gpupool cancel: job {jid} already ended\n")
