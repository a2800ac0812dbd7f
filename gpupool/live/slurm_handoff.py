"""Hand-off: ``gpupool serve --executor slurm`` puts the daemon's API in front of a real Slurm.

Submissions go to ``sbatch`` (Slurm decides and runs them: its policy, its nodes), cancels to
``scancel``; every second the daemon reads ``squeue --states=all`` (slurmctld keeps ended
jobs for MinJobAge, 300 s by default, so no end is missed) and mirrors each job's state,
times, nodes and GPUs into the ledger: ``live_jobs`` for the submissions it made, and the
ordinary ``jobs``/``events`` tables under the cluster's name, so ``gpupool acct`` shows them as
it shows a sacct import. The same client commands (``submit``, ``queue``, ``cancel``) work.
"""
from __future__ import annotations

import concurrent.futures
import json
import os
import subprocess
import threading
import time
from collections import deque
from datetime import datetime
from pathlib import Path
from typing import Callable

from gpupool.errors import GpupoolError
from gpupool.formats.pool_dir import load_pool
from gpupool.ledger.store import Ledger
from gpupool.live.daemon import DEFAULT_STATE_DIR, Caller, Refused, SubmitRequest
from gpupool.live.host import live_host
from gpupool.live.state import Batch, LiveStore

FIELDS = ("%i", "%A", "%F", "%K", "%T", "%r", "%V", "%S", "%e", "%N", "%b", "%j", "%u", "%P", "%a", "%q", "%l", "%C")
KEYS = ("job_id", "raw_id", "array_job_id", "array_task_id", "state", "reason", "submit", "start", "end", "nodes",
        "gres", "name", "user", "partition", "account", "qos", "time_limit", "cpus")
FINAL = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "PREEMPTED", "NODE_FAIL", "BOOT_FAIL", "DEADLINE",
         "OUT_OF_MEMORY"}
SEP = "\x1f"  # never in a job name


def _time(text: str) -> float | None:
    if not text or text in ("N/A", "Unknown", "None"):
        return None
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        return None


def _limit(text: str) -> float | None:
    from gpupool.formats.slurm_time import parse_duration

    if not text or text in ("UNLIMITED", "INVALID", "N/A"):
        return None
    try:
        return float(parse_duration(text))
    except Exception:
        return None


def _gpus(gres: str) -> int:
    """``gres:gpu:2`` / ``gres/gpu:2`` / ``gpu:h100:2`` -> 2 (0 when none)."""
    total = 0
    for item in gres.split(","):
        parts = item.replace("gres/", "gres:").split(":")
        if "gpu" in parts:
            tail = parts[-1].split("(")[0]
            total += int(tail) if tail.isdigit() else 1
    return total


class SlurmDaemon:
    """The daemon's API and ledger mirroring in front of a real Slurm (see module doc)."""

    policy_name = "real slurm"

    def __init__(self, pool_path: str | Path, *, db: str | None = None, state_dir: str | Path | None = None,
                 slurm_conf: str | None = None, poll: float = 1.0) -> None:
        pool = load_pool(pool_path)
        self.host = live_host(pool, devices="declared")
        self.env = dict(os.environ)
        if slurm_conf:
            self.env["SLURM_CONF"] = str(slurm_conf)
        self.cluster = self._cluster_name()
        self.origin = self.cluster
        self.ledger = Ledger(db)
        self.store = LiveStore(self.ledger, f"slurm:{self.cluster}")
        self.state_dir = Path(state_dir or DEFAULT_STATE_DIR).expanduser()
        self.spool = self.state_dir / "slurm-spool" / self.cluster
        self.spool.mkdir(parents=True, exist_ok=True)
        self.poll = poll
        self.operators = self.host.operators()
        self.ready = threading.Event()
        self.recovered: dict[str, int] = {}
        self._intake: deque = deque()
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self.owned: dict[int, dict] = {}  # Slurm job id -> live_jobs row facts (user, state)
        self.snapshot: dict[str, dict] = {}  # sacct-style job id -> last squeue row
        self.submitted_total = 0

    # ------------------------------------------------------------------ Slurm clients
    def _run(self, args: list[str], *, user: Caller | None = None, cwd: str | None = None,
             env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        full = dict(env if env is not None else self.env)
        for key in ("SLURM_CONF", "LD_PRELOAD", "FAKETIME", "FAKETIME_TIMESTAMP_FILE", "FAKETIME_NO_CACHE"):
            if key in self.env:
                full[key] = self.env[key]
        try:
            return subprocess.run(args, capture_output=True, text=True, env=full, cwd=cwd if cwd and os.path.isdir(cwd) else None,
                                  timeout=60)
        except FileNotFoundError as exc:
            raise GpupoolError(f"{args[0]} not found: --executor slurm needs Slurm's client commands ({exc})") from None

    def _cluster_name(self) -> str:
        r = self._run(["scontrol", "show", "config"])
        if r.returncode != 0:
            raise GpupoolError(f"cannot reach slurmctld (scontrol show config): {r.stderr.strip()}")
        for line in r.stdout.splitlines():
            key, _, value = line.partition("=")
            if key.strip() == "ClusterName":
                return value.strip()
        return "cluster"

    # ------------------------------------------------------------------ the loop
    def call(self, fn: Callable, *, submit: bool = False) -> concurrent.futures.Future:
        fut: concurrent.futures.Future = concurrent.futures.Future()
        with self._lock:
            self._intake.append((fn, fut))
        self._wake.set()
        return fut

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()

    def run_forever(self) -> None:
        for row in self.store.unfinished():
            self.owned[int(row["job_id"])] = {"user": row["user"], "state": row["state"], "name": row["name"]}
        self.recovered = {"watching": len(self.owned)}
        self.ready.set()
        next_poll = 0.0
        while not self._stop.is_set():
            self._wake.wait(max(0.0, next_poll - time.monotonic()))
            self._wake.clear()
            with self._lock:
                items = list(self._intake)
                self._intake.clear()
            for fn, fut in items:
                try:
                    fut.set_result(fn(None, time.time()))
                except Exception as exc:
                    fut.set_exception(exc)
            if time.monotonic() >= next_poll or items:
                self.mirror()
                next_poll = time.monotonic() + self.poll

    # ------------------------------------------------------------------ API operations
    def submit_fn(self, requests: list[SubmitRequest], caller: Caller) -> Callable:
        def run(_batch, now: float) -> list[int]:
            ids = []
            batch = Batch()
            for req in requests:
                path = self.spool / f"submit-{time.time_ns()}.sbatch"
                path.write_text(req.script)
                args = ["sbatch", "--parsable", f"--chdir={req.cwd}"]
                if os.geteuid() == 0 and caller.uid != 0:
                    args += [f"--uid={caller.uid}", f"--gid={caller.gid}"]
                r = self._run([*args, str(path)], cwd=req.cwd, env=dict(req.env) or None)
                if r.returncode != 0:
                    raise Refused(f"{req.source or 'script'}: sbatch refused the job: {r.stderr.strip()}")
                jid = int(r.stdout.strip().split(";")[0])
                ids.append(jid)
                self.owned[jid] = {"user": caller.user, "state": "PENDING", "name": ""}
                batch.new_jobs.append({
                    "daemon": self.store.origin, "job_id": jid, "state": "PENDING", "name": "", "user": caller.user,
                    "uid": caller.uid, "gid": caller.gid, "submit": now, "kind": "slurm", "script": req.script,
                    "source": req.source, "env": "{}", "cwd": req.cwd})
            self.store.commit(batch)
            self.submitted_total += len(ids)
            return ids
        return run

    def may_manage(self, caller: Caller, owner: str | None) -> bool:
        if caller.user == owner or caller.user in self.operators:
            return True
        return not caller.via_token and caller.uid == 0

    def cancel_fn(self, job_ids: list[int], caller: Caller) -> Callable:
        def run(_batch, now: float) -> dict:
            for jid in job_ids:
                if jid not in self.owned and self.store.job(jid) is None:
                    raise Refused(f"Invalid job id specified: {jid} (not submitted through this daemon)", 404)
                owner = (self.owned.get(jid) or self.store.job(jid) or {}).get("user")
                if not self.may_manage(caller, owner):
                    raise Refused(f"Access/permission denied: job {jid} belongs to {owner}", 403)
            done, ended = [], []
            for jid in job_ids:
                if (self.owned.get(jid) or {}).get("state") in FINAL or jid not in self.owned:
                    ended.append(jid)
                    continue
                r = self._run(["scancel", str(jid)])
                if r.returncode != 0:
                    raise Refused(f"scancel {jid}: {r.stderr.strip()}")
                done.append(jid)
            return {"cancelled": done, "already_ended": ended}
        return run

    def queue_rows(self, user: str | None = None, states: set[str] | None = None) -> list[dict]:
        rows = []
        for row in self.snapshot.values():
            if row["state"] not in ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "SUSPENDED"):
                continue
            if user and row["user"] != user:
                continue
            st = {"PENDING": "PD", "RUNNING": "R", "CONFIGURING": "CF", "COMPLETING": "CG", "SUSPENDED": "S"}[row["state"]]
            if states and st not in states and row["state"] not in states:
                continue
            start = _time(row["start"])
            rows.append({"job_id": row["job_id"], "id": int(row["raw_id"]), "partition": row["partition"],
                         "name": row["name"], "user": row["user"], "account": row["account"], "state": row["state"],
                         "st": st, "time": (time.time() - start) if st == "R" and start else 0.0,
                         "time_limit": _limit(row["time_limit"]), "nodes": 1,
                         "nodelist": row["nodes"] if st != "PD" else "", "reason": row["reason"], "gpus": [],
                         "submit": _time(row["submit"])})
        return rows

    def job_facts(self, job_id: int) -> dict:
        for row in self.snapshot.values():
            if int(row["raw_id"]) == job_id:
                return {"job_id": row["job_id"], "state": row["state"], "name": row["name"], "user": row["user"],
                        "start": _time(row["start"]), "end": _time(row["end"]) if row["state"] in FINAL else None,
                        "nodes": row["nodes"], "reason": row["reason"]}
        row = self.store.job(job_id)
        if row is None:
            raise Refused(f"Invalid job id specified: {job_id}", 404)
        return {k: row[k] for k in ("job_id", "state", "name", "user", "start", "end", "exit_code")}

    def metrics(self) -> dict:
        states: dict[str, int] = {}
        for row in self.snapshot.values():
            states[row["state"]] = states.get(row["state"], 0) + 1
        running = [r for r in self.snapshot.values() if r["state"] == "RUNNING"]
        usage: dict[str, float] = {}
        for r in running:
            start = _time(r["start"])
            if start:
                usage[r["account"]] = usage.get(r["account"], 0.0) + (time.time() - start) * _gpus(r["gres"])
        return {"pending": states.get("PENDING", 0), "running": len(running), "gpus_total": self.host.pool.gpu_count,
                "gpus_allocated": sum(_gpus(r["gres"]) for r in running), "usage_gpu_seconds": usage,
                "states": states, "submitted_total": self.submitted_total, "started_total": 0}

    # ------------------------------------------------------------------ mirroring
    def mirror(self) -> None:
        """Read every job slurmctld holds and write what changed for ours to the ledger."""
        if not self.owned:
            return
        r = self._run(["squeue", "-h", "-t", "all", "-o", SEP.join(FIELDS)])
        if r.returncode != 0:
            return  # slurmctld briefly unreachable: try again at the next poll
        batch = Batch()
        seen_master: dict[int, list[str]] = {}
        for line in r.stdout.splitlines():
            parts = line.split(SEP)
            if len(parts) != len(KEYS):
                continue
            row = dict(zip(KEYS, (p.strip() for p in parts)))
            master = int(row["array_job_id"]) if row["array_job_id"].isdigit() else int(row["raw_id"])
            if master not in self.owned:
                continue
            seen_master.setdefault(master, []).append(row["state"])
            old = self.snapshot.get(row["job_id"])
            self.snapshot[row["job_id"]] = row
            if old is not None and (old["state"], old["start"], old["end"], old["nodes"]) == \
                    (row["state"], row["start"], row["end"], row["nodes"]):
                continue
            if old is None or old["state"] != row["state"]:
                batch.events.append({"origin": self.origin, "job_id": row["job_id"], "time": time.time(),
                                     "kind": row["state"].lower(), "detail": row["reason"] if row["reason"] != "None" else "",
                                     "source": "slurm"})
            batch.ledger_jobs[row["job_id"]] = self._ledger_row(row)
        for master, states in seen_master.items():
            facts = self.owned[master]
            state = "RUNNING" if "RUNNING" in states else ("PENDING" if any(s not in FINAL for s in states) else
                                                            max(states, key=lambda s: s != "COMPLETED"))
            if state != facts["state"]:
                facts["state"] = state
                batch.update(master, state=state, end=time.time() if state in FINAL else None)
            if state in FINAL:
                del self.owned[master]
        self.store.commit(batch)

    def _ledger_row(self, row: dict) -> dict:
        start, end = _time(row["start"]), _time(row["end"])
        state = row["state"]
        running = state in ("RUNNING", "COMPLETING")
        ended = state in FINAL
        if not (running or ended) or (start and start > time.time()):
            start = None
        if not ended:
            end = None
        gpus = _gpus(row["gres"])
        elapsed = None if start is None else ((end or time.time()) - start)
        return {
            "origin": self.origin, "job_id": row["job_id"], "job_id_raw": int(row["raw_id"]),
            "array_job_id": int(row["array_job_id"]) if row["array_task_id"].isdigit() else None,
            "array_task_id": int(row["array_task_id"]) if row["array_task_id"].isdigit() else None,
            "name": row["name"], "user": row["user"], "account": row["account"], "qos": row["qos"],
            "partition": row["partition"], "queue": row["partition"], "submit": _time(row["submit"]),
            "eligible": _time(row["submit"]), "start": start, "end": end, "elapsed": elapsed,
            "timelimit": _limit(row["time_limit"]), "state": state,
            "reason": row["reason"] if row["reason"] != "None" else "", "nnodes": 1 if row["nodes"] else 0,
            "ncpus": int(row["cpus"]) if row["cpus"].isdigit() else 0, "node_list": row["nodes"] if start else "",
            "gpus": gpus, "gpu_seconds": (elapsed or 0.0) * gpus if start else 0.0,
            "extra": json.dumps({"executor": "slurm", "gres": row["gres"]}), "source": "slurm",
        }
