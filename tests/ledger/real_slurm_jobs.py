"""Run a fixed set of jobs on a real Slurm (with slurmdbd) and capture what it reports.

Shared by the slow test (``test_real_slurm.py``, which starts a Slurm, runs these jobs and
imports the outputs) and by the command that made the fixtures in
``fixtures/real_slurm_22.05/`` (``python -m tests.ledger.real_slurm_jobs OUTDIR`` with
``SLURM_CONF`` pointing at a running cluster with accounting; see that folder's README).

The jobs cover what an importer must get right on real output: two accounts, a completed
single-node GPU job, a failing job, a two-node GPU job, a job cancelled while running, one
cancelled before it started, and one killed at its time limit. Each running job writes
``scontrol -d show job`` to its output, because Slurm drops the GPU indices once a job ends
(tools/real-slurm README, gotcha 9).
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

#: name -> (sbatch arguments, shell command). Names are unique; the test finds jobs by name.
JOBS: dict[str, tuple[list[str], str]] = {
    "ok-a": (["-A", "teamA", "-N1", "--gres=gpu:2", "-t", "2"], "sleep 3"),
    "fail-b": (["-A", "teamB", "-N1", "--gres=gpu:1", "-t", "2"], "sleep 2; exit 3"),
    "multi-a": (["-A", "teamA", "-N2", "--gpus-per-node=8", "-t", "2"], "sleep 4"),
    "cancel-run-b": (["-A", "teamB", "-N1", "--gres=gpu:4", "-t", "5"], "sleep 300"),
    "cancel-pend-a": (["-A", "teamA", "-N1", "--gres=gpu:1", "-t", "5", "--begin=now+1hour"], "sleep 5"),
    "timeout-b": (["-A", "teamB", "-N1", "--gres=gpu:2", "-t", "1"], "sleep 300"),
}

SACCT_FIELDS_ARGS = ["--parsable2", "--allocations", "--format=ALL"]


@dataclass
class Observed:
    """What squeue / scontrol said about one job while Slurm still knew it."""

    job_id: str
    name: str
    account: str = ""
    partition: str = ""
    user: str = ""
    nodes: str = ""
    num_nodes: int = 0
    gpus: int = 0
    time_limit_min: int | None = None
    submit: str = ""
    start: str = ""
    end: str = ""
    state: str = ""
    exit_code: str = ""
    gres_idx: dict[str, str] = field(default_factory=dict)


def _run(cmd: list[str], env: dict, timeout: float = 30) -> str:
    return subprocess.run(cmd, env=env, check=True, capture_output=True, text=True, timeout=timeout).stdout


def parse_scontrol(text: str) -> dict[str, str]:
    """``scontrol show job`` key=value pairs (first occurrence wins; per-node GRES lines are
    collected separately by ``gres_indices``)."""
    out: dict[str, str] = {}
    for m in re.finditer(r"(?:^|\s)([A-Za-z:/_]+)=(\S*)", text):
        out.setdefault(m.group(1), m.group(2))
    return out


def gres_indices(text: str) -> dict[str, str]:
    """``Nodes=gpu01 CPU_IDs=0 Mem=0 GRES=gpu:8(IDX:0-7)`` lines of ``scontrol -d show job``."""
    return {m.group(1): m.group(2) for m in re.finditer(r"Nodes=(\S+) CPU_IDs=\S+ Mem=\S+ GRES=\S*?\(IDX:([^)]*)\)", text)}


def submit(env: dict, out_dir: Path) -> dict[str, str]:
    """Submit every job in ``JOBS``; name -> job id."""
    ids = {}
    for name, (args, cmd) in JOBS.items():
        script = f'scontrol -d show job "$SLURM_JOB_ID"; {cmd}'
        text = _run(["sbatch", "--parsable", "-J", name, "-o", str(out_dir / "%j.out"), *args, "--wrap", script], env)
        ids[name] = text.strip().split(";")[0]
    return ids


def _squeue_states(env: dict) -> dict[str, str]:
    text = _run(["squeue", "-h", "-o", "%i|%T"], env)
    return dict(line.split("|", 1) for line in text.splitlines() if "|" in line)


def _observe(env: dict, job_id: str, name: str) -> Observed:
    text = _run(["scontrol", "-d", "show", "job", job_id], env)
    kv = parse_scontrol(text)
    limit = kv.get("TimeLimit", "")
    m = re.fullmatch(r"(?:(\d+)-)?(\d+):(\d+):(\d+)", limit)
    minutes = None if not m else int(m.group(1) or 0) * 1440 + int(m.group(2)) * 60 + int(m.group(3))
    gpus = 0
    tres = kv.get("TRES", "") or kv.get("ReqTRES", "")
    g = re.search(r"gres/gpu=(\d+)", tres)
    if g:
        gpus = int(g.group(1))
    return Observed(job_id=job_id, name=name, account=kv.get("Account", ""), partition=kv.get("Partition", ""),
                    user=kv.get("UserId", "").split("(")[0], nodes=kv.get("NodeList", ""),
                    num_nodes=int(kv.get("NumNodes", "0").split("-")[0] or 0), gpus=gpus, time_limit_min=minutes,
                    submit=kv.get("SubmitTime", ""), start=kv.get("StartTime", ""), end=kv.get("EndTime", ""),
                    state=kv.get("JobState", ""), exit_code=kv.get("ExitCode", ""), gres_idx=gres_indices(text))


def drive(env: dict, out_dir: Path, *, deadline_s: float = 240) -> dict[str, Observed]:
    """Submit the jobs, cancel two of them at the right moments, wait until all are done in
    slurmctld and in slurmdbd, and return what scontrol showed for each (the last look
    while running, completed by the final look, for start/end/state/exit code)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    ids = submit(env, out_dir)
    seen: dict[str, Observed] = {}
    t0 = time.monotonic()
    cancelled_pending = cancelled_running = False
    while True:
        states = _squeue_states(env)
        for name, jid in ids.items():
            if states.get(jid) == "RUNNING":
                seen[name] = _observe(env, jid, name)  # GRES IDX is only shown while running
        if not cancelled_pending and states.get(ids["cancel-pend-a"]) == "PENDING":
            _run(["scancel", ids["cancel-pend-a"]], env)
            cancelled_pending = True
        if not cancelled_running and states.get(ids["cancel-run-b"]) == "RUNNING" \
                and time.monotonic() - t0 > 3:
            _run(["scancel", ids["cancel-run-b"]], env)
            cancelled_running = True
        if cancelled_pending and cancelled_running and not (set(ids.values()) & set(states)):
            break
        if time.monotonic() - t0 > deadline_s:
            raise TimeoutError(f"jobs still queued after {deadline_s} s: {states}")
        time.sleep(0.5)
    for name, jid in ids.items():  # MinJobAge=86400: slurmctld still knows finished jobs
        final = _observe(env, jid, name)
        obs = seen.get(name, final)
        obs.state, obs.end, obs.exit_code, obs.start = final.state, final.end, final.exit_code, final.start
        if not obs.gres_idx:
            # Not caught running by the poll (a short job on a loaded host): the job printed
            # ``scontrol -d show job`` itself as its first action.
            printed = out_dir / f"{jid}.out"
            if printed.exists():
                obs.gres_idx = gres_indices(printed.read_text(errors="replace"))
        obs.nodes = obs.nodes if obs.gres_idx else final.nodes
        seen[name] = obs
    wait_for_accounting(env, list(ids.values()), deadline_s=60)
    return seen


def wait_for_accounting(env: dict, job_ids: list[str], *, deadline_s: float) -> None:
    """sacct learns of a job's end a few seconds after it (an asynchronous agent)."""
    t0 = time.monotonic()
    while True:
        text = _run(["sacct", "-n", "-X", "-P", "-o", "JobID,State,End", "-j", ",".join(job_ids)], env)
        rows = [line.split("|") for line in text.splitlines() if line]
        done = {r[0] for r in rows if r[2] not in ("Unknown", "") and not r[1].startswith(("RUNNING", "PENDING"))}
        if set(job_ids) <= done:
            return
        if time.monotonic() - t0 > deadline_s:
            raise TimeoutError(f"slurmdbd has not recorded the end of {sorted(set(job_ids) - done)}")
        time.sleep(1)


def capture(env: dict, out: Path, job_ids: list[str]) -> dict[str, Path]:
    """Write the three accounting outputs the ledger imports (as Slurm prints them)."""
    out.mkdir(parents=True, exist_ok=True)
    ids = ",".join(job_ids)
    files = {
        "sacct": out / "sacct-parsable2-allocations-all.txt",
        "sacct_json": out / "sacct.json",
        "sshare": out / "sshare-P-l.txt",
    }
    files["sacct"].write_text(_run(["sacct", *SACCT_FIELDS_ARGS, "-j", ids], env))
    files["sacct_json"].write_text(_run(["sacct", "--json", "-j", ids], env))
    files["sshare"].write_text(_run(["sshare", "-P", "-l"], env))
    return files


def load_observed(path: Path) -> dict[str, Observed]:
    return {name: Observed(**fields) for name, fields in json.loads(path.read_text()).items()}


def check_ledger(ledger, cluster: str, observed: dict[str, Observed], *, exit_codes: bool = True) -> None:
    """Assert that the imported jobs, events, allocations and usage of ``cluster`` say what
    squeue/scontrol said about each job. ``exit_codes=False`` for ``sacct --json`` of 22.05,
    whose job exit codes read 0 even for a job that exited 3 (its text output is right)."""
    import sqlalchemy as sa

    from gpupool.formats.hostlist import expand_hostlist
    from gpupool.ledger import schema as s
    from gpupool.ledger.query import acct_jobs
    from gpupool.ledger.store import usage_hours
    from gpupool.ledger.timefmt import parse_slurm_ts

    jobs = {j["name"]: j for j in acct_jobs(ledger, clusters=[cluster])}
    assert sorted(jobs) == sorted(observed), (sorted(jobs), sorted(observed))
    with ledger.read() as conn:
        events = [tuple(r) for r in conn.execute(sa.select(s.events.c.job_id, s.events.c.kind, s.events.c.time)
                                                 .where(s.events.c.origin == cluster))]
        allocs = [r._asdict() for r in conn.execute(sa.select(s.allocations).where(s.allocations.c.origin == cluster))]
        usage: dict[str, float] = {}
        for row in sorted(usage_hours(conn, cluster)):  # (origin, hour, account, …, tres, seconds)
            if row[7] == "gres/gpu":
                usage[row[2]] = usage.get(row[2], 0.0) + row[8]
    expected_usage: dict[str, float] = {}
    for name, obs in observed.items():
        job = jobs[name]
        where = f"job {obs.job_id} ({name})"
        assert job["job_id"] == obs.job_id, where
        assert (job["account"], job["partition"], job["user"]) == (obs.account, obs.partition, obs.user), where
        assert job["state"].split()[0] == obs.state, (where, job["state"], obs.state)
        assert job["timelimit"] == obs.time_limit_min * 60, where
        assert job["submit"] == parse_slurm_ts(obs.submit), where
        if exit_codes and obs.state in ("COMPLETED", "FAILED"):
            assert job["exit_code"] == obs.exit_code, (where, job["exit_code"], obs.exit_code)
        kinds = sorted(k for jid, k, _ in events if jid == obs.job_id)
        mine = [a for a in allocs if a["job_id"] == obs.job_id]
        if not obs.gres_idx:  # never ran: cancelled while pending
            assert kinds == ["finished", "submitted"] and mine == [], (where, kinds, mine)
            assert job["gpus"] == 0 and job["node_list"] == "", where
            continue
        start, end = parse_slurm_ts(obs.start), parse_slurm_ts(obs.end)
        assert (job["start"], job["end"]) == (start, end), where
        assert job["elapsed"] == end - start, where
        assert job["node_list"] == obs.nodes and job["nnodes"] == obs.num_nodes, where
        assert job["gpus"] == obs.gpus, where
        assert kinds == ["finished", "started", "submitted"], (where, kinds)
        assert sorted(a["node"] for a in mine) == sorted(expand_hostlist(obs.nodes)), where
        assert sum(a["gpu_count"] for a in mine) == obs.gpus, where
        assert all((a["time_from"], a["time_to"]) == (start, end) for a in mine), where
        per_node = {n: len(_indices(idx)) for spec, idx in obs.gres_idx.items() for n in expand_hostlist(spec)}
        assert {a["node"]: a["gpu_count"] for a in mine} == per_node, (where, per_node)
        expected_usage[obs.account] = expected_usage.get(obs.account, 0.0) + obs.gpus * (end - start)
    assert usage == expected_usage, (usage, expected_usage)


def _indices(text: str) -> list[int]:
    """``0-1,4`` (an IDX list of scontrol -d) -> [0, 1, 4]."""
    out: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out.extend(range(int(lo), int(hi or lo) + 1))
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 1 or "SLURM_CONF" not in os.environ:
        print("usage: SLURM_CONF=DIR/etc/slurm.conf python -m tests.ledger.real_slurm_jobs OUTDIR", file=sys.stderr)
        return 2
    out = Path(argv[0])
    env = dict(os.environ)
    observed = drive(env, out / "job-output")
    capture(env, out, [o.job_id for o in observed.values()])
    doc = {name: o.__dict__ for name, o in observed.items()}
    (out / "observed.json").write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
