"""Least-loaded node choice (partition ``LLN=YES``, SelectTypeParameters ``CR_LLN``) on a real
Slurm 22.05 and in gpupool, side by side (the rule: ``select._least_loaded``; without a real
Slurm: ``tests/unit/test_slurm_lln.py``).

Three 16-core, 8-GPU nodes (64000 MB, DefMemPerCPU=100); partition p (no LLN unless CR_LLN) and q (LLN=YES) hold all three.
gpu01 is given an 8-CPU job and gpu02 a 4-CPU one (``-w``), then jobs follow a couple of
seconds apart; per job the nodes and allocated CPUs are read from ``scontrol show job``, and
gpupool replays the cluster's own slurm.conf and the same submissions. Skipped where Slurm is
not installed. Run alone with ``python -m pytest tests/differential/test_real_slurm_lln.py -o addopts=""``.
"""
from __future__ import annotations

import re

import pytest

from gpupool.formats.hostlist import expand_hostlist

from tests.differential.real_cluster import need, replay, submit_each, two_partitions

pytestmark = [pytest.mark.slurm_real, pytest.mark.slow]

GAP_S = 2.0
SETTLE_S = 8.0
HOLD = ["-c8 -w gpu01", "-c4 -w gpu02"]
CASES = {
    # (SelectTypeParameters, jobs after HOLD)
    "partition": ("CR_Core_Memory", ["-p q -c2", "-p q -c2", "-c2", "-p q -N2 -c2", "-p q -n3 -c4"]),
    "cluster": ("CR_Core_Memory,CR_LLN", ["-c2", "-N2 -c2", "-n3 -c4"]),
}


def _real(tmp_path, select: str, jobs: list[str]):
    rs = two_partitions(tmp_path, 3, {"SelectTypeParameters": select, "DefMemPerCPU": "100"}, {"LLN": "YES"})
    names = rs.node_names
    try:
        ids = submit_each(rs, jobs, GAP_S)
        rs.sleep(SETTLE_S)
        rows = []
        for jid in ids:
            text = rs.run(["scontrol", "show", "job", str(jid)]).stdout
            state = re.search(r"JobState=(\S+)", text).group(1)
            if state != "RUNNING":
                rows.append((state,))
                continue
            # 22.05 prints a running job's allocation as TRES= (AllocTRES= on some versions)
            found = [v for v in re.findall(r"\b(?:Alloc)?TRES=(\S*)", text) if v]
            tres = dict(kv.split("=", 1) for kv in found[0].split(","))
            nodes = re.search(r"(?<![A-Za-z])NodeList=(\S+)", text).group(1)
            rows.append((int(tres["cpu"]), sorted(names.index(x) for x in expand_hostlist(nodes))))
    finally:
        rs.stop()
    return rows, rs.etc


def _ours(conf, jobs: list[str]):
    engine, _ = replay(conf, jobs, GAP_S, GAP_S * len(jobs) + SETTLE_S)
    rows = []
    for job in sorted(engine.jobs.values(), key=lambda j: j.id):
        if job.state != "RUNNING":
            rows.append((job.state,))
        else:
            rows.append((sum(p[2] for p in job.placement) // 1000, sorted({p[0] for p in job.placement})))
    return rows


@pytest.mark.parametrize("case", sorted(CASES))
def test_least_loaded_nodes_match_real_slurm(tmp_path, case):
    need("none")
    select, jobs = CASES[case]
    real, conf = _real(tmp_path / "real", select, HOLD + jobs)
    assert _ours(conf, HOLD + jobs) == real
