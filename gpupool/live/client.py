"""Talking to a live daemon: over its Unix socket (default) or TCP with a bearer token."""
from __future__ import annotations

import os
from pathlib import Path

import httpx

from gpupool.errors import GpupoolError

SOCKET_ENV = "GPUPOOL_SOCKET"
DEFAULT_SOCKET = Path("~/.local/share/gpupool/live/gpupool.sock")


def default_socket() -> Path:
    return Path(os.environ.get(SOCKET_ENV) or DEFAULT_SOCKET).expanduser()


class DaemonError(GpupoolError):
    """The daemon refused a request or cannot be reached; the message says which and why."""


class Client:
    def __init__(self, socket: str | Path | None = None, *, url: str | None = None, token: str | None = None,
                 timeout: float = 60.0) -> None:
        headers = {"authorization": f"Bearer {token}"} if token else {}
        if url:
            self.where = url
            self.http = httpx.Client(base_url=url, headers=headers, timeout=timeout)
        else:
            path = Path(socket).expanduser() if socket else default_socket()
            self.where = str(path)
            self.http = httpx.Client(transport=httpx.HTTPTransport(uds=str(path)), base_url="http://gpupool",
                                     headers=headers, timeout=timeout)

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _request(self, method: str, path: str, **kwargs):
        try:
            r = self.http.request(method, path, **kwargs)
        except (httpx.ConnectError, FileNotFoundError) as exc:
            raise DaemonError(f"no gpupool daemon at {self.where} ({exc}); start one with `gpupool serve POOL`") from None
        if r.status_code >= 400:
            try:
                detail = r.json().get("detail", r.text)
            except ValueError:
                detail = r.text
            raise DaemonError(f"{detail}" if isinstance(detail, str) else str(detail))
        return r

    def submit(self, scripts: list[tuple[str, str]], *, cwd: str | None = None, env: dict[str, str] | None = None) -> list[int]:
        """Submit ``(text, source path)`` scripts; all are accepted or none."""
        cwd = cwd or os.getcwd()
        env = dict(os.environ) if env is None else env
        body = {"jobs": [{"script": text, "source": source, "cwd": cwd, "env": env,
                          "kind": "service" if source.endswith((".yaml", ".yml")) else "sbatch"}
                         for text, source in scripts]}
        return self._request("POST", "/v1/jobs", json=body).json()["job_ids"]

    def queue(self, user: str | None = None, state: str | None = None) -> list[dict]:
        params = {k: v for k, v in (("user", user), ("state", state)) if v}
        return self._request("GET", "/v1/jobs", params=params).json()["jobs"]

    def job(self, job_id: int) -> dict:
        return self._request("GET", f"/v1/jobs/{job_id}").json()

    def cancel(self, job_ids: list[int]) -> dict:
        return self._request("POST", "/v1/cancel", json={"job_ids": job_ids}).json()

    def health(self) -> dict:
        return self._request("GET", "/v1/health").json()

    def share(self) -> dict:
        """The policy's fair share: ``associations`` (sshare -l rows, usage as of ``as_of``,
        the last decay pass) and ``jobs`` (sprio: each pending job's priority and factors)."""
        return self._request("GET", "/v1/share").json()

    def metrics(self) -> str:
        return self._request("GET", "/metrics").text
