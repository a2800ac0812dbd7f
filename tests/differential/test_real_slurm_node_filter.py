"""--nodelist, --exclude and --constraint on a real Slurm 22.05 and in gpupool, side by side
(the rules: ``gpupool/policy/slurm/node_filter.py``; scenarios without Slurm:
``tests/unit/test_slurm_node_filter.py``).

One cluster of four 8-GPU nodes: partition p holds gpu01-03, partition small gpu04; gpu01 has
the feature ib, gpu02 ib and a100, gpu03 a100. gpupool replays the cluster's own slurm.conf and
the same submissions; compared: sbatch's refusals, then every job's state and nodes.
Skipped where Slurm is not installed. Run alone with
``python -m pytest tests/differential/test_real_slurm_node_filter.py -o addopts=""``.
"""
from __future__ import annotations

import re

import pytest

from gpupool.formats.hostlist import expand_hostlist

from tests.differential.real_cluster import gpu_cluster, need, show_job, submit_plan
from tests.unit.test_slurm_node_filter import FEATURES, REFUSED, SCENARIOS, refusal, scenario

pytestmark = [pytest.mark.slurm_real, pytest.mark.slow]

SETTLE_S = 8.0  # after the last submission: the main scheduler, no backfill cycle yet


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_node_limits_match_real_slurm(tmp_path, name):
    need("none")
    rs = gpu_cluster(tmp_path / "real", 4, "bf_interval=30,sched_interval=60", {"p": (0, 1, 2), "small": (3,)},
                     FEATURES)
    refused: dict[str, str] = {}
    try:
        if name == sorted(SCENARIOS)[0]:  # sbatch's refusals, once
            for key, opts in REFUSED.items():
                r = rs.run(["sbatch", "-t", "5", *opts.split(), "--wrap", "sleep 30"], check=False)
                m = re.search(r"submission failed: (.+)$", r.stderr.strip())
                refused[key] = m.group(1) if m else r.stdout.strip()
        ids, last = submit_plan(rs, SCENARIOS[name])
        rs.sleep(SETTLE_S)
        shown = {job: show_job(rs, jid, ("JobState", "NodeList")) for job, jid in ids.items()}
        conf = rs.etc
        index = {node: i for i, node in enumerate(rs.node_names)}
    finally:
        rs.stop()
    real = {job: (v["JobState"], [index[x] for x in expand_hostlist(v["NodeList"])] if v["JobState"] == "RUNNING"
                  else []) for job, v in shown.items()}
    jobs = scenario(tmp_path / "ours", name, conf=conf, until=last + SETTLE_S)
    ours = {job: (j.state, sorted({p[0] for p in j.placement}) if j.state == "RUNNING" else [])
            for job, j in jobs.items()}
    assert real == ours
    for key, message in refused.items():
        assert refusal(conf, REFUSED[key]) == message, key
