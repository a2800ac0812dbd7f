"""QOS flag NoReserve on a real Slurm 22.05 and in gpupool, side by side.

One 8-GPU node, preempt/qos CANCEL: A (4 GPUs, 5 min) runs, B (8 GPUs, 5 min) waits for it, N (4
GPUs, 10 min, QOS ``scav`` with Flags=NoReserve, which QOS normal may preempt) comes after B.
Backfill plans N with one minute, which ends before B's reservation, and starts it with its own
10-minute limit; at A's end B preempts it. (A's 5 minutes leave room for the one-minute plan
whatever the phase of the backfill cycle: B's reservation starts at A's limit end rounded down
to a whole minute, and with 2 minutes a cycle late in its interval found no room.) gpupool's run of the same jobs
(``tests/unit/test_slurm_no_reserve.py``) must agree. Skipped where Slurm is not installed. Run
alone with ``python -m pytest tests/differential/test_real_slurm_no_reserve.py -o addopts=""``.
"""
from __future__ import annotations

import pytest

from gpupool.conformance.real_slurm import RealSlurm
from tests.differential.real_cluster import epoch as _epoch
from tests.differential.real_cluster import need, sacctmgr, show_job, started

pytestmark = [pytest.mark.slurm_real, pytest.mark.slow]


def _show(rs: RealSlurm, jid: int) -> dict[str, str]:
    return show_job(rs, jid, ("JobState", "TimeLimit", "StartTime", "EndTime"))


def test_no_reserve_jobs_fill_gaps_and_are_preempted(tmp_path):
    need("dbd")
    rs = started(RealSlurm(tmp_path / "rs", nodes=1, gpus_per_node=8, cpus_per_node=16, memory_mb=64000,
                           speedup=10, accounting="dbd",
                           overrides={"PreemptType": "preempt/qos", "PreemptMode": "CANCEL"},
                           scheduler_parameters="bf_interval=30,sched_interval=60"))
    try:
        sacctmgr(rs, ["add", "qos", "scav"], ["modify", "qos", "scav", "set", "Flags=NoReserve"],
                 ["modify", "qos", "normal", "set", "Preempt=scav"], ["modify", "user", "root", "set", "QOS+=scav"])
        o = ["-o", str(rs.out_dir / "%j.out"), "-N1", "-n1", "-A", "teamA"]
        a = rs.sbatch([*o, "--gres=gpu:4", "-t", "5", "--wrap", "sleep 3000"])
        rs.sleep(5)
        b = rs.sbatch([*o, "--gres=gpu:8", "-t", "5", "--wrap", "sleep 3000"])
        rs.sleep(5)
        n = rs.sbatch([*o, "--qos=scav", "--gres=gpu:4", "-t", "10", "--wrap", "sleep 3000"])
        rs.sleep(50)
        early = {name: _show(rs, j) for name, j in (("A", a), ("B", b), ("N", n))}
        waited = 0.0
        while _show(rs, b)["JobState"] == "PENDING" and waited < 500:
            rs.sleep(10)
            waited += 10
        late = {name: _show(rs, j) for name, j in (("A", a), ("B", b), ("N", n))}
        rs.run(["scancel", str(a), str(b), str(n)])
    finally:
        rs.stop()
    assert early["N"]["JobState"] == "RUNNING" and early["N"]["TimeLimit"] == "00:10:00", early
    assert early["B"]["JobState"] == "PENDING", early
    assert late["N"]["JobState"] == "PREEMPTED" and late["B"]["JobState"] == "RUNNING", late
    # N was cut short when B took the node (about 5 minutes in), well before its own 10-minute limit
    assert _epoch(late["N"]["EndTime"]) - _epoch(late["N"]["StartTime"]) < 450, late

    from tests.unit.test_slurm_no_reserve import run

    _pol, jobs, _ids = run()
    assert jobs["N"].via == "SchedBackfill" and jobs["N"].time_limit == 600.0
    assert jobs["N"].final_state == "PREEMPTED" and jobs["N"].end == jobs["B"].start
