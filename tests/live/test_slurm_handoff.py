"""``gpupool serve --executor slurm`` in front of a real Slurm 22.05 (skipped where it is not installed)."""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from tests.live.conftest import DaemonProc, script, wait_for

real_slurm = pytest.importorskip("gpupool.conformance.real_slurm")
pytestmark = pytest.mark.slurm_real


@pytest.fixture
def slurm_daemon():
    work = Path(tempfile.mkdtemp(prefix="gpupool_handoff_"))
    os.chmod(work, 0o755)  # munged wants o+x on every directory of its socket path
    rs = real_slurm.RealSlurm(work / "slurm", nodes=1, gpus_per_node=4, cpus_per_node=8, memory_mb=16000)
    try:
        rs.start()
    except real_slurm.RealSlurmUnavailable as exc:
        shutil.rmtree(work, ignore_errors=True)
        pytest.skip(f"no real Slurm here: {exc}")
    try:
        jobs = work / "jobs"
        jobs.mkdir()
        os.chmod(jobs, 0o777)
        d = DaemonProc(work / "daemon", extra=["--executor", "slurm", "--slurm-conf", str(rs.conf_path)], env=rs.env)
        d.start()
    except BaseException:
        rs.stop()
        raise
    try:
        yield d, rs, jobs
    finally:
        d.stop()
        rs.stop()
        shutil.rmtree(work, ignore_errors=True)


def _acct(d, rs) -> dict[str, str]:
    out = d.cli("acct", "--db", str(d.db), "-M", rs.cluster, "-P", "-n", "-o", "JobID,State").stdout
    return dict(line.split("|") for line in out.splitlines() if line)


def test_jobs_run_in_real_slurm_and_are_mirrored_into_the_ledger(slurm_daemon):
    d, rs, jobs = slurm_daemon
    path = jobs / "hello.sbatch"
    path.write_text(script('echo "gpus=$CUDA_VISIBLE_DEVICES job=$SLURM_JOB_ID"', "--gres=gpu:2", "--time=1",
                           "--output=out-%j.txt"))
    jid = int(d.cli("submit", "--parsable", str(path), cwd=jobs).stdout)
    wait_for(lambda: _acct(d, rs).get(str(jid)) == "COMPLETED", timeout=60, interval=0.5)
    assert (jobs / f"out-{jid}.txt").read_text() == f"gpus=0,1 job={jid}\n"
    long = jobs / "long.sbatch"
    long.write_text(script("sleep 300", "--gres=gpu:1", "--time=5", "--output=/dev/null"))
    lid = int(d.cli("submit", "--parsable", str(long), cwd=jobs).stdout)
    wait_for(lambda: any(r["id"] == lid and r["st"] == "R" for r in d.client().queue()), timeout=60, interval=0.5)
    d.cli("cancel", str(lid))
    wait_for(lambda: _acct(d, rs).get(str(lid)) == "CANCELLED", timeout=60, interval=0.5)
    big = jobs / "big.sbatch"
    big.write_text(script("true", "--gres=gpu:9", "--time=1"))
    r = d.cli("submit", str(big), check=False, cwd=jobs)
    assert r.returncode == 2 and "sbatch refused" in r.stderr and "not available" in r.stderr
