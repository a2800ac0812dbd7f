"""Running the daemon: the engine loop on the main thread, the API on a uvicorn thread."""
from __future__ import annotations

import os
import signal
import socket
import threading
from pathlib import Path

import uvicorn

from gpupool.live.api import PeerCredProtocol, make_app
from gpupool.live.daemon import Daemon


def bind_unix(path: Path) -> socket.socket:
    """A listening Unix socket at ``path`` created with mode 0600 (no window with wider modes)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists() or path.is_socket():
        probe = socket.socket(socket.AF_UNIX)
        try:
            probe.connect(str(path))
            probe.close()
            raise SystemExit(f"error: a daemon already listens on {path}")
        except (ConnectionRefusedError, FileNotFoundError):
            path.unlink(missing_ok=True)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)
    try:
        sock.bind(str(path))
    finally:
        os.umask(old)
    os.chmod(path, 0o600)
    sock.listen(1024)
    return sock


def bind_tcp(address: str) -> socket.socket:
    host, _, port = address.rpartition(":")
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host or "127.0.0.1", int(port)))
    sock.listen(1024)
    return sock


def read_tokens(path: Path) -> dict[str, str]:
    """``user token`` per line (``#`` comments) -> {token: user}."""
    out: dict[str, str] = {}
    for number, line in enumerate(path.read_text().splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split()
        if len(parts) != 2:
            raise SystemExit(f"error: {path}:{number}: expected 'user token'")
        out[parts[1]] = parts[0]
    return out


def serve(daemon: Daemon, socket_path: Path, *, tcp: str | None = None, tokens: dict[str, str] | None = None,
          on_ready=None) -> None:
    socks = [bind_unix(socket_path)]
    if tcp:
        socks.append(bind_tcp(tcp))
    app = make_app(daemon, tokens)
    config = uvicorn.Config(app, http=PeerCredProtocol, lifespan="off", log_level="warning", access_log=False)
    server = uvicorn.Server(config)
    api = threading.Thread(target=server.run, kwargs={"sockets": socks}, name="gpupool-api", daemon=True)

    def stop(_sig, _frame) -> None:
        daemon.stop()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    loop = threading.Thread(target=daemon.run_forever, name="gpupool-engine", daemon=True)
    loop.start()
    daemon.ready.wait()
    api.start()
    if on_ready is not None:
        on_ready()
    try:
        while loop.is_alive():
            loop.join(0.5)
    finally:
        server.should_exit = True
        api.join(5)
        socket_path.unlink(missing_ok=True)
    if not daemon._stop.is_set():  # the engine loop died: say so, and exit non-zero for a supervisor
        raise SystemExit("gpupool serve: the engine loop stopped unexpectedly (see the traceback above); "
                         "start the daemon again: it recovers from the ledger")
