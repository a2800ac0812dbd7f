"""kill -9 the daemon under a burst of submissions, start it again: queued jobs still queued,
running processes re-adopted (same pid and start time), ends that happened meanwhile recorded,
nothing run twice, no acknowledged submission lost."""
from __future__ import annotations

import os
import signal
import threading
import time
from collections import Counter

import pytest
import sqlalchemy as sa

from gpupool.ledger import schema as s
from gpupool.ledger.store import Ledger
from gpupool.live import proc
from tests.live.conftest import DaemonProc, cancel_all, script, wait_for

RUN_LOG = 'echo "$SLURM_JOB_ID $$" >> {log}\n'


def _burst(d: DaemonProc, scripts: list[str], acked: list[int], stop_at: int | None, batch: int, workers: int = 4):
    """Submit ``scripts`` in batches from several threads; record acknowledged ids. With
    ``stop_at``, the daemon is SIGKILLed once that many are acknowledged (requests in flight
    then fail, and are not acknowledged)."""
    lock = threading.Lock()
    chunks = [scripts[i:i + batch] for i in range(0, len(scripts), batch)]
    killed = threading.Event()

    def worker(k: int) -> None:
        with d.client(timeout=120) as c:
            for chunk in chunks[k::workers]:
                if killed.is_set():
                    return
                try:
                    ids = c.submit([(text, "burst.sbatch") for text in chunk], cwd=str(d.root), env={"PATH": os.defpath})
                except Exception:
                    return
                with lock:
                    acked.extend(ids)
                    if stop_at is not None and len(acked) >= stop_at and not killed.is_set():
                        killed.set()
                        d.kill9()

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def _live_rows(d: DaemonProc) -> dict[int, dict]:
    led = Ledger(str(d.db))
    try:
        with led.read() as conn:
            return {r["job_id"]: dict(r) for r in conn.execute(sa.select(s.live_jobs)).mappings()}
    finally:
        led.close()


def _restart_scenario(tmp_path, total: int, batch: int) -> None:
    # first-fit: CPU-only jobs start past the waiting GPU jobs, so jobs start and end during
    # the burst (Slurm's backfill would hold them behind the GPU jobs' reservations).
    d = DaemonProc(tmp_path, policy="first-fit")
    d.start()
    log = tmp_path / "runs.log"
    try:
        # Four long GPU jobs hold every GPU; one of them will end while the daemon is down.
        with d.client() as c:
            long_ids = c.submit([(script(RUN_LOG.format(log=log) + "sleep 600", "--gres=gpu:1"), "long.sbatch")] * 2
                                + [(script(RUN_LOG.format(log=log) + "sleep 4", "--gres=gpu:1"), "short.sbatch")]
                                + [(script(RUN_LOG.format(log=log) + "sleep 600", "--gres=gpu:1", "--no-requeue"),
                                    "norequeue.sbatch")], cwd=str(tmp_path), env={"PATH": os.defpath})
            wait_for(lambda: all(c.job(j)["state"] == "RUNNING" for j in long_ids))
            before = {j: c.job(j)["pid"] for j in long_ids}
        # The burst: mostly GPU jobs that must wait, every 25th a CPU-only job that runs at once.
        quick = script(RUN_LOG.format(log=log), "--ntasks=1")
        waiting = script(RUN_LOG.format(log=log) + "sleep 600", "--gres=gpu:1")
        scripts = [quick if i % 25 == 0 else waiting for i in range(total)]
        acked: list[int] = []
        _burst(d, scripts[: total // 2 + batch * 4], acked, stop_at=total // 2, batch=batch)
        assert d.proc.poll() is not None  # killed mid-burst
        # While it is down: the short job ends by itself; a long job's processes are killed.
        wait_for(lambda: proc.read_exit_status(d.state / "spool" / "pool" / str(long_ids[2]) / "rc.0") == 0, timeout=15)
        os.killpg(before[long_ids[1]], signal.SIGKILL)
        os.killpg(before[long_ids[3]], signal.SIGKILL)
        d.start()
        with d.client() as c:
            health = c.health()
        assert health["recovered"]["adopted"] >= 1
        assert health["recovered"]["ended_while_down"] >= 1
        with d.client() as c:
            assert c.job(long_ids[0])["pid"] == before[long_ids[0]]  # re-adopted, not restarted
            assert c.job(long_ids[0])["state"] == "RUNNING"
            assert c.job(long_ids[2])["state"] == "COMPLETED"  # its end was recorded from its status file
            gone = c.job(long_ids[1])
            assert gone["requeues"] == 1 and gone["state"] in ("PENDING", "RUNNING")  # requeued (default)
            assert c.job(long_ids[3])["state"] == "NODE_FAIL"  # --no-requeue
        # The rest of the burst, to the daemon started again.
        rest: list[int] = []
        _burst(d, scripts[len(acked):], rest, stop_at=None, batch=batch)
        acked += rest
        assert len(acked) >= total - batch * 8
        # No acknowledged submission lost; every one still queued, running or done.
        rows = _live_rows(d)
        missing = [j for j in acked if j not in rows]
        assert not missing, f"{len(missing)} acknowledged jobs lost, e.g. {missing[:5]}"
        quick_ids = [j for j in acked if rows[j]["script"] == quick]
        wait_for(lambda: all(_live_rows(d)[j]["state"] == "COMPLETED" for j in quick_ids), timeout=300, interval=0.5)
        rows = _live_rows(d)
        states = Counter(rows[j]["state"] for j in acked)
        assert set(states) <= {"PENDING", "RUNNING", "COMPLETED"}, states
        assert states["RUNNING"] <= 4
        # Nothing ran twice: each job id appears once in the run log (the requeued job once per run).
        runs = Counter(line.split()[0] for line in log.read_text().splitlines())
        twice = {j: n for j, n in runs.items() if n > 1 and int(j) != long_ids[1]}
        assert not twice, twice
        assert runs[str(long_ids[1])] <= 2
        assert all(runs[str(j)] == 1 for j in quick_ids)
        # The ledger's accounting has every acknowledged job too (acct reads it).
        led = Ledger(str(d.db))
        with led.read() as conn:
            n = conn.execute(sa.select(sa.func.count()).select_from(s.jobs).where(s.jobs.c.origin == "live:pool")).scalar()
        led.close()
        assert n >= len(acked) + len(long_ids)
    finally:
        cancel_all(d)
        d.stop()


def test_kill9_restart_under_a_burst(tmp_path):
    _restart_scenario(tmp_path, total=400, batch=20)


@pytest.mark.slow
def test_kill9_restart_under_a_burst_of_10000(tmp_path):
    _restart_scenario(tmp_path, total=10_000, batch=100)
