"""SchedulerParameters=bf_busy_nodes on a real Slurm 22.05 and in gpupool, side by side
(scenario and the real observations: ``tests/unit/test_slurm_busy_nodes.py``).

Two runs of a 5-node cluster, without and with the option. gpupool replays the cluster's own
slurm.conf and the same submissions; compared after the first backfill cycle: every job's
state and nodes, and the nodes J's reservation holds (``_dump_job_sched`` in the log).
Skipped where Slurm is not installed. Run alone with
``python -m pytest tests/differential/test_real_slurm_busy_nodes.py -o addopts=""``.
"""
from __future__ import annotations

import re

import pytest

from gpupool.formats.hostlist import expand_hostlist

from tests.differential.real_cluster import gpu_cluster, need, show_job, submit_plan
from tests.unit.test_slurm_busy_nodes import BASE, PLAN, scenario

pytestmark = [pytest.mark.slurm_real, pytest.mark.slow]

SETTLE_S = 45.0  # after the last submission: one backfill cycle (bf_interval=30), not two


def _real(tmp_path, params: str):
    rs = gpu_cluster(tmp_path, 5, params, {"p": (0, 1, 2, 3, 4), "small": (3, 4)})
    n = rs.node_names
    try:
        ids, _last = submit_plan(rs, PLAN)
        rs.sleep(SETTLE_S)
        shown = {name: show_job(rs, jid, ("JobState", "NodeList")) for name, jid in ids.items()}
        log = (rs.log_dir / "slurmctld.log").read_text(errors="replace")
    finally:
        rs.stop()
    index = {name: i for i, name in enumerate(n)}
    first = log[log.index("_attempt_backfill: beginning"):]
    m = re.search(rf"_dump_job_sched: JobId={ids['J']} .* on nodes (\S+) in partition", first)
    return {
        "states": {k: v["JobState"] for k, v in shown.items()},
        "nodes": {k: [index[x] for x in expand_hostlist(v["NodeList"])] for k, v in shown.items()
                  if v["JobState"] == "RUNNING"},
        "j_reserved": sorted(index[x] for x in expand_hostlist(m.group(1))),
    }, rs.etc


def _ours(tmp_path, conf):
    jobs, pol, ids = scenario(tmp_path, "", conf=conf)
    first = min(pol.resv_log)
    return {
        "states": {k: j.state for k, j in jobs.items()},
        "nodes": {k: [p[0] for p in j.placement] for k, j in jobs.items() if j.state == "RUNNING"},
        "j_reserved": sorted(next(nodes for jid, nodes, _b, _e in pol.resv_log[first] if jid == ids["J"])),
    }


@pytest.mark.parametrize("extra,j_reserved,k_state", [
    ("", [0, 1, 2, 3], "PENDING"),
    (",bf_busy_nodes", [0, 1, 3, 4], "RUNNING"),
])
def test_bf_busy_nodes_matches_real_slurm(tmp_path, extra, j_reserved, k_state):
    need("none")
    real, conf = _real(tmp_path / "real", BASE + extra)
    ours = _ours(tmp_path / "ours", conf)
    assert real == ours
    assert real["j_reserved"] == j_reserved and real["states"]["K"] == k_state
