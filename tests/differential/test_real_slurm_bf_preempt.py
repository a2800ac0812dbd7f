"""Backfill plans preemptions, on a real Slurm 22.05 and in gpupool, side by side.

Two 8-GPU nodes, preempt/qos with PreemptMode=CANCEL: a low-QOS job L and a normal one N hold
them; H (both nodes, normal QOS) waits at the head of the queue, so every main pass stops the
partition there; P (QOS high, which may preempt low; lower priority than H) is never tried by a
main pass. Only the backfill cycle can preempt for it: its will-run test drops the jobs P may
preempt, finds P fits now, kills L and reserves L's node for P, and a later cycle starts P
(SchedBackfill), twenty minutes before N's end would have let it in. gpupool must do the same on
its own case of the scenario (``tests/conformance/slurm/preempt-gp-005``). Skipped where Slurm is
not installed. Run alone with
``python -m pytest tests/differential/test_real_slurm_bf_preempt.py -o addopts=""``.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from gpupool.conformance.real_slurm import RealSlurm
from gpupool.conformance.slurm_cases import build_pool, build_workloads, load_case
from gpupool.engine.core import Engine
from gpupool.engine.policy_api import make_policy
from tests.differential.real_cluster import epoch as _epoch
from tests.differential.real_cluster import need, sacctmgr, show_job, started

pytestmark = [pytest.mark.slurm_real, pytest.mark.slow]

CASE = Path(__file__).resolve().parents[1] / "conformance" / "slurm" / "preempt-gp-005-backfill-preempts.yaml"
#: Slurm seconds to wait for P to start after its submission (it took 85 s in the runs of
#: 2026-12-02; without backfill preemption it would wait for N's 20-minute limit, and then H,
#: ahead of it, would take both nodes), and again for slurmdbd to hold its start
WAIT_S = 900.0


def _sacct(rs: RealSlurm, ids: dict[str, int]) -> dict[str, dict[str, str]]:
    out = rs.run(["sacct", "-X", "-P", "-n", "-D", "-o", "JobID,State,Submit,Start,End,Flags", "-j",
                  ",".join(str(i) for i in ids.values())]).stdout
    by_id = {v: k for k, v in ids.items()}
    rows: dict[str, dict[str, str]] = {}
    for line in out.splitlines():
        jid, state, submit, start, end, flags = line.split("|")
        name = by_id.get(int(jid))
        if name is not None and name not in rows:  # the first record: a requeued job has more
            rows[name] = {"state": state, "submit": submit, "start": start, "end": end, "flags": flags}
    return rows


def test_backfill_preempts_for_a_job_no_main_pass_reaches(tmp_path):
    need("dbd")
    rs = started(RealSlurm(tmp_path / "rs", nodes=2, gpus_per_node=8, cpus_per_node=16, memory_mb=64000,
                           accounting="dbd", speedup=10,
                           overrides={"PreemptType": "preempt/qos", "PreemptMode": "CANCEL",
                                      "SelectTypeParameters": "CR_Core_Memory", "DefMemPerCPU": "100"},
                           scheduler_parameters="bf_interval=30,sched_interval=60"))
    try:
        sacctmgr(rs, ["add", "qos", "low"], ["add", "qos", "high"],
                 ["modify", "qos", "high", "set", "Priority=100", "Preempt=low"],
                 ["modify", "user", "root", "set", "QOS+=low,high"])
        common = ["-o", str(rs.out_dir / "%j.out"), "-A", "teamA", "-N1", "-n1", "--gres=gpu:8"]
        ids = {"L": rs.sbatch([*common, "--qos=low", "-t", "30", "--wrap", "sleep 3000"]),
               "N": rs.sbatch([*common, "--qos=normal", "-t", "20", "--wrap", "sleep 3000"])}
        rs.sleep(10)
        ids["H"] = rs.sbatch(["-o", str(rs.out_dir / "%j.out"), "-A", "teamA", "-N2", "-n2", "--gres=gpu:8",
                              "--qos=normal", "-t", "10", "--wrap", "sleep 300"])
        rs.sleep(10)
        # --nice: below H whatever the ages (H is 10 s older; age weight 1000 per hour)
        ids["P"] = rs.sbatch([*common, "--qos=high", "--nice=100", "-t", "10", "--wrap", "sleep 300"])
        submitted = rs.now()
        # slurmctld's own view decides when P has left the queue: slurmdbd's copy (which sacct
        # reads) can lag it on a loaded machine, so it is only read once P is known to be running
        while show_job(rs, ids["P"], ("JobState",)).get("JobState") == "PENDING" and rs.now() - submitted < WAIT_S:
            rs.sleep(5)
        ctld_view = rs.run(["scontrol", "show", "job", str(ids["P"])]).stdout + rs.run(["sinfo", "-N", "-l"]).stdout
        rows = _sacct(rs, ids)
        caught_up = rs.now()
        while rows.get("P", {}).get("start", "Unknown") == "Unknown" and "JobState=PENDING" not in ctld_view \
                and rs.now() - caught_up < WAIT_S:
            rs.sleep(5)
            rows = _sacct(rs, ids)
        rs.run(["scancel", *(str(i) for i in ids.values())])
    finally:
        rs.stop()
    real = rows
    assert real["L"]["state"] == "PREEMPTED", (real, ctld_view)
    assert real["P"]["state"] in ("RUNNING", "COMPLETED", "CANCELLED"), (real, ctld_view)
    assert "SchedBackfill" in real["P"]["flags"], real
    assert real["H"]["state"] == "PENDING", real
    p_wait = _epoch(real["P"]["start"]) - _epoch(real["P"]["submit"])
    assert _epoch(real["L"]["end"]) <= _epoch(real["P"]["start"]) and p_wait < 300, real

    import gpupool.policy.slurm  # noqa: F401  (registers the policy)

    case = load_case(CASE)
    pool, _ = build_pool(case)
    wls, _ids = build_workloads(case)
    out = Engine(pool, wls, make_policy("slurm", pool), check=True).run()
    sim = {j.wl.name: j for j in out.jobs}
    assert sim["L"].final_state == "PREEMPTED"
    assert sim["P"].via == "SchedBackfill"
    assert sim["L"].end <= sim["P"].start < sim["P"].wl.submit_time + 300
    assert sim["H"].start > sim["P"].start
