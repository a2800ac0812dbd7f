"""A partition's MaxCPUsPerNode on a real Slurm 22.05 and in gpupool, side by side (the rule:
``config._max_cpus_per_node``, ``Free.caps``; without a real Slurm:
``tests/unit/test_slurm_max_cpus_per_node.py``).

Two 16-core 8-GPU nodes; partition p without a cap and q with MaxCPUsPerNode=4 on both. A
10-CPU job of p holds gpu01; then, a couple of seconds apart, a 4-CPU job of q on gpu01, a
2-CPU one (30 minutes), a 3-CPU one (60 minutes; it must wait for q's CPUs on a node), a 2-CPU
one (20 minutes: backfilled before that), a 5-CPU one (more than the cap: refused) and an 8-CPU job of p
(no node of p is left to it in the main pass once q's job has failed there, and backfill cannot
start it before the 3-CPU job's reservation). Per job after
about 400 s: sbatch's refusal or its state, reason while pending, and nodes; and when the
3-CPU job is planned to start, against the start of the 30-minute job. gpupool replays the
cluster's own slurm.conf and the same submissions. Skipped where Slurm is not installed. Run
alone with ``python -m pytest tests/differential/test_real_slurm_max_cpus_per_node.py -o addopts=""``.
"""
from __future__ import annotations

import pytest

from gpupool.formats.hostlist import expand_hostlist

from tests.differential.real_cluster import epoch, need, replay, show_jobs, submit_each, two_partitions

pytestmark = [pytest.mark.slurm_real, pytest.mark.slow]

GAP_S = 2.0
LOOK_S = 400.0
JOBS = ["-c10 -w gpu01", "-p q -c4 -w gpu01", "-p q -c2 -t 30", "-p q -c3 -t 60", "-p q -c2 -t 20", "-p q -c5", "-c8"]
WAITS, PLANNED_AFTER = 3, 2  # the 3-CPU job, planned at the end of the 30-minute one


def _real(tmp_path):
    rs = two_partitions(tmp_path, 2, {"DefMemPerCPU": "100"}, {"MaxCPUsPerNode": "4"})
    names = rs.node_names
    try:
        ids = submit_each(rs, JOBS, GAP_S)
        rs.sleep(LOOK_S - GAP_S * (len(JOBS) - 1))
        shown = show_jobs(rs, ids, ("JobState", "StartTime", "NodeList", "Reason"))
    finally:
        rs.stop()
    rows = []
    for job in shown:
        if isinstance(job, tuple):
            rows.append(job)
        elif job["JobState"] == "RUNNING":
            rows.append((job["JobState"], sorted(names.index(x) for x in expand_hostlist(job["NodeList"]))))
        else:
            # scontrol writes the reason's spaces as underscores; squeue (and gpupool) as spaces
            rows.append((job["JobState"], job["Reason"].replace("_", " ")))
    return rows, epoch(shown[WAITS]["StartTime"]) - epoch(shown[PLANNED_AFTER]["StartTime"]), rs.etc


def _ours(conf):
    engine, pol = replay(conf, JOBS, GAP_S, LOOK_S, record=True)  # its plans are read
    rows = []
    for job in sorted(engine.jobs.values(), key=lambda j: j.id):
        if job.state == "REJECTED":
            rows.append(("REFUSED", job.reason))
        elif job.state == "RUNNING":
            rows.append((job.state, sorted({p[0] for p in job.placement})))
        else:
            rows.append((job.state, job.reason))
    return rows, pol.planned[WAITS + 1] - engine.jobs[PLANNED_AFTER + 1].start


def test_max_cpus_per_node_matches_real_slurm(tmp_path):
    need("none")
    real, real_planned, conf = _real(tmp_path / "real")
    ours, planned = _ours(conf)
    assert ours == real
    assert abs(planned - real_planned) <= 1.0, (planned, real_planned)
