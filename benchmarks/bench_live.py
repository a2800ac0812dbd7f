"""Live daemon: submit->start latency on an idle host and sustained submissions per second,
measured in the same run as a real Slurm 22.05 on the same host with the same job.

    python benchmarks/bench_live.py                 # gpupool, and real Slurm when installed
    python benchmarks/bench_live.py --no-slurm --json

Latency: one job at a time on an idle pool (4 fake GPUs); the job writes ``date +%s.%N`` as its
first action; latency = that instant minus the moment the client began its submit call (for
gpupool an HTTP request over the daemon's Unix socket, for Slurm the ``sbatch`` command).
Throughput: jobs that cannot start (``--begin=now+1hour``) submitted as fast as the client can
for a few seconds: one job per request from 4 client threads (like 4 users running sbatch in a
loop), and 100 per request (``gpupool submit a.sbatch b.sbatch …``). For Slurm, ``sbatch`` in a
loop from 4 threads. Targets (issue 7): median latency <= 50 ms, >= 500 submissions/s.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tests.live.conftest import DaemonProc  # noqa: E402

JOB = "#!/bin/sh\n#SBATCH --gres=gpu:1\n#SBATCH --time=1\n#SBATCH --output=/dev/null\ndate +%s.%N > {out}/start.$SLURM_JOB_ID\n"
HELD = "#!/bin/sh\n#SBATCH --gres=gpu:1\n#SBATCH --time=1\n#SBATCH --begin=now+3600\n#SBATCH --output=/dev/null\ntrue\n"


def _wait_file(path: Path, timeout: float = 30.0) -> float:
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            text = path.read_text().strip()
            if text:
                return float(text)
        except OSError:
            pass
        time.sleep(0.001)
    raise TimeoutError(f"{path} never appeared")


def _latencies(submit, out: Path, n: int) -> list[float]:
    lat = []
    for _ in range(n):
        t0 = time.time()
        jid = submit()
        lat.append(_wait_file(out / f"start.{jid}") - t0)
        time.sleep(0.05)
    return lat


def _rate(submit_batch, seconds: float, threads: int) -> float:
    count = [0]
    lock = threading.Lock()
    stop = time.time() + seconds

    def worker() -> None:
        while time.time() < stop:
            n = submit_batch()
            with lock:
                count[0] += n

    ts = [threading.Thread(target=worker) for _ in range(threads)]
    t0 = time.time()
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return count[0] / (time.time() - t0)


def bench_gpupool(work: Path, n: int, seconds: float) -> dict:
    work.mkdir(parents=True, exist_ok=True)
    d = DaemonProc(work)
    d.start()
    out = work / "out"
    out.mkdir()
    job = JOB.format(out=out)
    try:
        with d.client() as c:
            env = {"PATH": os.defpath}
            lat = _latencies(lambda: c.submit([(job, "lat.sbatch")], cwd=str(work), env=env)[0], out, n)
        clients = [d.client() for _ in range(4)]
        it = iter(clients)
        local = threading.local()

        def one() -> int:
            if not hasattr(local, "c"):
                local.c = next(it)
            return len(local.c.submit([(HELD, "held.sbatch")], cwd=str(work), env={}))

        single = _rate(one, seconds, 4)
        with d.client() as c:
            batched = _rate(lambda: len(c.submit([(HELD, "held.sbatch")] * 100, cwd=str(work), env={})), seconds, 1)
        for c in clients:
            c.close()
        with d.client() as c:
            ids = [r["id"] for r in c.queue()]
            for i in range(0, len(ids), 1000):
                c.cancel(ids[i:i + 1000])
    finally:
        d.stop()
    return {"latency_ms_median": 1000 * statistics.median(lat), "latency_ms_p90": 1000 * sorted(lat)[int(0.9 * len(lat))],
            "submissions_per_s_1_per_request_4_clients": single, "submissions_per_s_100_per_request": batched,
            "n": n}


def bench_slurm(work: Path, n: int, seconds: float) -> dict | None:
    try:
        from gpupool.conformance.real_slurm import RealSlurm, RealSlurmUnavailable
    except ImportError:
        return None
    out = work / "out"
    out.mkdir(parents=True, exist_ok=True)
    os.chmod(work, 0o755)
    os.chmod(out, 0o777)
    try:
        rs = RealSlurm(work / "slurm", nodes=1, gpus_per_node=4, cpus_per_node=64, memory_mb=64000)
        rs.start()
    except RealSlurmUnavailable as exc:
        return {"skipped": str(exc)}
    try:
        script = work / "lat.sbatch"
        script.write_text(JOB.format(out=out))
        held = work / "held.sbatch"
        held.write_text(HELD)
        lat = _latencies(lambda: rs.sbatch([str(script)]), out, n)
        rate = _rate(lambda: (rs.sbatch([str(held)]), 1)[1], seconds, 4)
        rs.run(["scancel", "--user", os.environ.get("USER", "root")], check=False)
    finally:
        rs.stop()
    return {"latency_ms_median": 1000 * statistics.median(lat), "latency_ms_p90": 1000 * sorted(lat)[int(0.9 * len(lat))],
            "submissions_per_s_sbatch_4_clients": rate, "n": n}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", type=int, default=30, help="latency samples")
    ap.add_argument("--seconds", type=float, default=5.0, help="length of each throughput run")
    ap.add_argument("--no-slurm", action="store_true", help="skip the real Slurm")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench_live_"))
    os.chmod(work, 0o755)  # munged refuses a socket path without o+x on every directory
    try:
        result = {"gpupool": bench_gpupool(work / "gpupool", args.n, args.seconds)}
        if not args.no_slurm:
            result["slurm"] = bench_slurm(work / "slurm-bench", args.n, args.seconds)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    g = result["gpupool"]
    result["targets"] = {"latency_ms_median<=50": g["latency_ms_median"] <= 50,
                         "submissions_per_s>=500": max(g["submissions_per_s_1_per_request_4_clients"],
                                                       g["submissions_per_s_100_per_request"]) >= 500}
    if args.json:
        print(json.dumps(result, indent=2))
        return
    for who, r in result.items():
        print(f"{who}: " + (", ".join(f"{k}={v:.1f}" if isinstance(v, float) else f"{k}={v}" for k, v in r.items())
                            if isinstance(r, dict) else str(r)))


if __name__ == "__main__":
    main()
