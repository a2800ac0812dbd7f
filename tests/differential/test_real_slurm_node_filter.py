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

from gpupool.conformance.real_slurm import RealSlurm
from gpupool.formats.hostlist import expand_hostlist
from gpupool.model.slurm import Partition

from tests.differential.real_cluster import need, show_job, started
from tests.unit.test_slurm_node_filter import FEATURES, REFUSED, SCENARIOS, refusal, scenario

pytestmark = [pytest.mark.slurm_real, pytest.mark.slow]

SETTLE_S = 8.0  # after the last submission: the main scheduler, no backfill cycle yet


def _cluster(tmp_path) -> RealSlurm:
    rs = RealSlurm(tmp_path, nodes=4, gpus_per_node=8, cpus_per_node=16, memory_mb=64000, speedup=10,
                   overrides={"SelectTypeParameters": "CR_Core_Memory", "DefMemPerCPU": "100",
                              "PriorityType": "priority/basic"},
                   scheduler_parameters="bf_interval=30,sched_interval=60", slurmctld_debug="debug")
    n = rs.node_names
    for node, feats in zip(rs._nodes, FEATURES):
        node.features = feats
    rs._config.partitions = {
        "p": Partition(name="p", nodes=tuple(n[:3]), default=True, max_time=60 * 60),
        "small": Partition(name="small", nodes=(n[3],), max_time=60 * 60),
    }
    return started(rs)


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_node_limits_match_real_slurm(tmp_path, name):
    need("none")
    rs = _cluster(tmp_path / "real")
    ids: dict[str, int] = {}
    refused: dict[str, str] = {}
    try:
        if name == sorted(SCENARIOS)[0]:  # sbatch's refusals, once
            for key, opts in REFUSED.items():
                r = rs.run(["sbatch", "-t", "5", *opts.split(), "--wrap", "sleep 30"], check=False)
                m = re.search(r"submission failed: (.+)$", r.stderr.strip())
                refused[key] = m.group(1) if m else r.stdout.strip()
        last = 0.0
        for job, at, opts in SCENARIOS[name]:
            if at > last:
                rs.sleep(at - last)
                last = at
            ids[job] = rs.sbatch(["-o", str(rs.out_dir / "%j.out"), "-J", job, *opts.split(),
                                  "--wrap", "sleep 3000"])
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
