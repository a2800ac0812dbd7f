"""The daemon's HTTP API (FastAPI): submit, queue, cancel, job facts, health and /metrics.

By default it listens on a Unix socket created with mode 0600, so only the daemon's user can
connect, and the caller is whoever the kernel says is on the other end (SO_PEERCRED), not what
a request claims. An optional TCP listener accepts a bearer token per user (``--token-file``:
``user token`` lines); a token never makes its holder a superuser. OpenAPI is at /openapi.json
and /docs, as FastAPI serves it.
"""
from __future__ import annotations

import asyncio
import socket
import struct

from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.responses import PlainTextResponse
from pydantic import BaseModel, Field
from uvicorn.protocols.http.h11_impl import H11Protocol

try:  # the C parser, about twice as fast per request; h11 (pure Python) otherwise
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol as _BaseProtocol
except ImportError:  # pragma: no cover - httptools not installed
    _BaseProtocol = H11Protocol

from gpupool.errors import GpupoolError
from gpupool.live.daemon import Caller, Daemon, Refused, SubmitRequest
from gpupool.live.metrics import exposition

PEER = "peer-uid"


class PeerCredProtocol(_BaseProtocol):
    """uvicorn's HTTP protocol that records the Unix-socket peer's uid as the request's client."""

    def connection_made(self, transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family == socket.AF_UNIX:
            creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
            _pid, uid, _gid = struct.unpack("3i", creds)
            self.client = (PEER, uid)


class JobIn(BaseModel):
    script: str = Field(description="The batch script's text (#SBATCH header and body).")
    source: str = Field("", description="The script's path, for messages and the job name.")
    cwd: str = Field("/", description="Submit directory: the job's working directory and SLURM_SUBMIT_DIR.")
    env: dict[str, str] = Field(default_factory=dict, description="Environment to export (sbatch --export=ALL).")
    kind: str = Field("sbatch", description="sbatch (a batch script) or service (Deployment / gpupool Service YAML).")


class SubmitIn(BaseModel):
    jobs: list[JobIn]


class CancelIn(BaseModel):
    job_ids: list[int]


def make_app(daemon: Daemon, tokens: dict[str, str] | None = None) -> FastAPI:
    app = FastAPI(title="gpupool live daemon", version="1",
                  description=f"Live pool {daemon.host.pool.name} on node {daemon.host.node_name}.")
    tokens = dict(tokens or {})

    def caller(request: Request) -> Caller:
        client = request.scope.get("client")
        if client and client[0] == PEER:
            return Caller.from_uid(int(client[1]))
        auth = request.headers.get("authorization", "")
        if auth.lower().startswith("bearer ") and auth[7:].strip() in tokens:
            c = Caller.from_name(tokens[auth[7:].strip()])
            c.via_token = True
            return c
        raise HTTPException(401, "a bearer token is required on TCP", headers={"WWW-Authenticate": "Bearer"})

    async def run(fn, *, submit: bool = False):
        try:
            return await asyncio.wrap_future(daemon.call(fn, submit=submit))
        except Refused as exc:
            raise HTTPException(exc.status, str(exc)) from None
        except GpupoolError as exc:
            raise HTTPException(400, str(exc)) from None

    @app.post("/v1/jobs", summary="Submit batch scripts (all or none)")
    async def submit(body: SubmitIn, who: Caller = Depends(caller)) -> dict:
        reqs = [SubmitRequest(j.script, j.source, j.cwd, j.env, j.kind) for j in body.jobs]
        ids = await run(daemon.submit_fn(reqs, who), submit=True)
        return {"job_ids": ids}

    @app.get("/v1/jobs", summary="Pending and running jobs (squeue)")
    async def queue(user: str | None = None, state: str | None = None, who: Caller = Depends(caller)) -> dict:
        states = {s.strip().upper() for s in state.split(",")} if state else None
        rows = await run(lambda b, now: daemon.queue_rows(user, states))
        return {"jobs": rows}

    @app.get("/v1/jobs/{job_id}", summary="One job's state, devices and process")
    async def job(job_id: int, who: Caller = Depends(caller)) -> dict:
        return await run(lambda b, now: daemon.job_facts(job_id))

    @app.delete("/v1/jobs/{job_id}", summary="Cancel one job (scancel)")
    async def cancel_one(job_id: int, who: Caller = Depends(caller)) -> dict:
        return await run(daemon.cancel_fn([job_id], who))

    @app.post("/v1/cancel", summary="Cancel several jobs (all checked first)")
    async def cancel(body: CancelIn, who: Caller = Depends(caller)) -> dict:
        return await run(daemon.cancel_fn(body.job_ids, who))

    @app.get("/v1/health", summary="Pool, node, devices, policy and what the last restart found")
    async def health() -> dict:
        return {"ready": daemon.ready.is_set(), "pool": daemon.host.pool.name, "node": daemon.host.node_name,
                "gpus": [{"index": d.index, "visible": d.visible, "type": d.type, "fake": d.fake}
                         for d in daemon.host.devices],
                "policy": daemon.policy_name, "origin": daemon.origin, "recovered": daemon.recovered,
                "fairshare": daemon.usage_restore}

    @app.get("/v1/share", summary="Fair share and pending priorities as the policy sees them (sshare -l, sprio)")
    async def share(who: Caller = Depends(caller)) -> dict:
        return await run(lambda b, now: daemon.share())

    @app.get("/metrics", response_class=PlainTextResponse, summary="Prometheus metrics")
    async def metrics() -> str:
        facts = await run(lambda b, now: daemon.metrics())
        return exposition(facts, daemon.host.pool.name)

    return app
