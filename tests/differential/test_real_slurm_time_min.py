"""``--time-min`` on a real Slurm 22.05 and in gpupool, side by side.

One 8-GPU node: A (4 GPUs, 10 min) runs, B (8 GPUs, 20 min) waits for it; C (4 GPUs, ``--time=30
--time-min=5``) and D (2 GPUs, ``--time=30 --time-min=12``) come after B. Backfill plans C with 5
minutes, which end before B's reservation, and starts it with a 5-minute limit (not stretched
towards B's reservation: 22.05's backfill sets the limit to time_min and only lowers it); D's 12
minutes reach B's reservation, so D is planned after B. gpupool's run of the same jobs
(``tests/unit/test_slurm_time_min.py``) must agree. Skipped where Slurm is not installed. Run
alone with ``python -m pytest tests/differential/test_real_slurm_time_min.py -o addopts=""``.
"""
from __future__ import annotations

import pytest

from gpupool.conformance.real_slurm import RealSlurm
from tests.differential.real_cluster import epoch as _epoch
from tests.differential.real_cluster import need, show_job, started

pytestmark = [pytest.mark.slurm_real, pytest.mark.slow]


def _show(rs: RealSlurm, jid: int) -> dict[str, str]:
    return show_job(rs, jid, ("JobState", "TimeLimit", "StartTime"))


def test_time_min_plans_short_and_starts_with_it_as_the_limit(tmp_path):
    need("none")
    rs = started(RealSlurm(tmp_path / "rs", nodes=1, gpus_per_node=8, cpus_per_node=16, memory_mb=64000,
                           speedup=10, scheduler_parameters="bf_interval=30,sched_interval=60"))
    try:
        o = ["-o", str(rs.out_dir / "%j.out"), "-N1", "-n1"]
        a = rs.sbatch([*o, "--gres=gpu:4", "-t", "10", "--wrap", "sleep 3000"])
        rs.sleep(5)
        b = rs.sbatch([*o, "--gres=gpu:8", "-t", "20", "--wrap", "sleep 3000"])
        rs.sleep(5)
        c = rs.sbatch([*o, "--gres=gpu:4", "-t", "30", "--time-min=5", "--wrap", "sleep 3000"])
        d = rs.sbatch([*o, "--gres=gpu:2", "-t", "30", "--time-min=12", "--wrap", "sleep 3000"])
        waited = 0.0
        while _show(rs, c)["JobState"] == "PENDING" and waited < 120:
            rs.sleep(5)
            waited += 5
        rs.sleep(35)  # past the next backfill cycle, so that D has its plan
        real = {name: _show(rs, j) for name, j in (("A", a), ("B", b), ("C", c), ("D", d))}
        rs.run(["scancel", str(a), str(b), str(c), str(d)])
    finally:
        rs.stop()
    assert real["C"]["JobState"] == "RUNNING" and real["C"]["TimeLimit"] == "00:05:00", real
    assert real["D"]["JobState"] == "PENDING" and real["D"]["TimeLimit"] == "00:30:00", real
    a_start = _epoch(real["A"]["StartTime"])
    # B at A's limit end, D (planned, rounded down to bf_resolution) at B's
    assert abs(_epoch(real["B"]["StartTime"]) - (a_start + 600)) <= 1, real
    assert abs(_epoch(real["D"]["StartTime"]) - (a_start + 1800)) <= 60, real
    assert _epoch(real["C"]["StartTime"]) < a_start + 60, real

    from tests.unit.test_slurm_time_min import run

    pol, jobs, ids = run({"C": 300.0, "D": 720.0})
    assert jobs["C"].time_limit == 300.0 and jobs["C"].start < jobs["A"].start + 60
    assert jobs["B"].start == jobs["A"].start + 600
    assert pol.plan_log[30.0][ids["D"]] == jobs["A"].start + 1800
