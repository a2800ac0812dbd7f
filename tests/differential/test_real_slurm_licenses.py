"""Cluster licenses (slurm.conf ``Licenses=``, sbatch ``-L``) on a real Slurm 22.05 and in
gpupool, side by side (the rules: ``Cycle.license_limit``, ``submit_check.rejection``; without
a real Slurm: ``tests/unit/test_slurm_licenses.py``).

Two 16-core 8-GPU nodes, ``Licenses=lic:2,solo``. Jobs come a couple of seconds apart: three
asking one ``lic`` each (the first ends after 60 s), one asking none, two asking what the
cluster lacks, ``solo``, ``lic:1,solo`` and ``lic``. Per job: sbatch's refusal or the state and
reason after 150 s, and when the third ``lic`` job started against the first one's end.
gpupool replays the cluster's own slurm.conf and the same submissions. Skipped where Slurm is
not installed. Run alone with ``python -m pytest tests/differential/test_real_slurm_licenses.py -o addopts=""``.
"""
from __future__ import annotations

import pytest

from tests.differential.real_cluster import epoch, need, replay, show_jobs, submit_each, two_partitions

pytestmark = [pytest.mark.slurm_real, pytest.mark.slow]

GAP_S = 2.0
LOOK_S = 150.0  # after the first submission: the first lic job ends at 60 s
#: (sbatch options, sleep seconds)
JOBS = [("-L lic:1 -t 2", 60), ("-L lic:1", 3000), ("-L lic:1", 3000), ("-c1", 3000), ("-L lic:3", 10),
        ("-L other:1", 10), ("-L solo", 3000), ("-L lic:1,solo", 3000), ("-L lic", 3000)]


def _real(tmp_path):
    rs = two_partitions(tmp_path, 2, {"DefMemPerCPU": "100", "Licenses": "lic:2,solo"}, {})
    try:
        ids = submit_each(rs, [opts for opts, _ in JOBS], GAP_S, [sleep for _, sleep in JOBS])
        rs.sleep(LOOK_S - GAP_S * (len(JOBS) - 1))
        shown = show_jobs(rs, ids, ("JobState", "Reason", "StartTime", "EndTime"))
    finally:
        rs.stop()
    rows = [job if isinstance(job, tuple) else
            (job["JobState"], job["Reason"] if job["JobState"] == "PENDING" else "") for job in shown]
    # the third lic job started when the first ended
    gap = epoch(shown[2]["StartTime"]) - epoch(shown[0]["EndTime"])
    return rows, gap, rs.etc


def _ours(conf):
    engine, _ = replay(conf, [opts for opts, _ in JOBS], GAP_S, LOOK_S, [sleep for _, sleep in JOBS])
    jobs = sorted(engine.jobs.values(), key=lambda j: j.id)
    rows = []
    for job in jobs:
        if job.state == "REJECTED":
            rows.append(("REFUSED", job.reason))
        else:
            rows.append((job.state, job.reason if job.state == "PENDING" else ""))
    return rows, jobs[2].start - jobs[0].end


def test_licenses_match_real_slurm(tmp_path):
    need("none")
    real, real_gap, conf = _real(tmp_path / "real")
    ours, gap = _ours(conf)
    assert ours == real
    assert abs(gap - real_gap) <= 1.0 and gap == 0.0
