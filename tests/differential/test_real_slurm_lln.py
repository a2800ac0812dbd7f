"""Least-loaded node choice (partition ``LLN=YES``, SelectTypeParameters ``CR_LLN``) on a real
Slurm 22.05 and in gpupool, side by side (the rule: ``select._least_loaded``; without a real
Slurm: ``tests/unit/test_slurm_lln.py``).

Three 16-core, 8-GPU nodes; partition p (no LLN unless CR_LLN) and q (LLN=YES) hold all three.
gpu01 is given an 8-CPU job and gpu02 a 4-CPU one (``-w``), then jobs follow a couple of
seconds apart; per job the nodes and allocated CPUs are read from ``scontrol show job``, and
gpupool replays the cluster's own slurm.conf and the same submissions. Skipped where Slurm is
not installed. Run alone with ``python -m pytest tests/differential/test_real_slurm_lln.py -o addopts=""``.
"""
from __future__ import annotations

import re

import pytest

from gpupool.conformance.real_slurm import RealSlurm
from gpupool.engine.core import Engine
from gpupool.engine.policy_api import make_policy
from gpupool.formats.hostlist import expand_hostlist
from gpupool.formats.pool_dir import load_pool
from gpupool.model.slurm import Partition

from tests.differential.real_cluster import need, started
from tests.unit.sbatch_plans import workload

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
    rs = RealSlurm(tmp_path, nodes=3, gpus_per_node=8, cpus_per_node=16, memory_mb=64000, speedup=10,
                   overrides={"SelectTypeParameters": select, "PriorityType": "priority/basic", "DefMemPerCPU": "100"},
                   scheduler_parameters="bf_interval=30")
    names = rs.node_names
    rs._config.partitions = {
        "p": Partition(name="p", nodes=tuple(names), default=True, max_time=3600),
        "q": Partition(name="q", nodes=tuple(names), max_time=3600, extra={"LLN": "YES"}),
    }
    started(rs)
    try:
        ids = []
        for k, opts in enumerate(jobs):
            if k:
                rs.sleep(GAP_S)
            got = rs.run(["sbatch", "--parsable", "-o", "/dev/null", "-J", f"j{k}", *opts.split(),
                          "--wrap", "sleep 3000"])
            ids.append(int(got.stdout.split(";")[0]))
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
    import gpupool.policy.slurm  # noqa: F401  (registers the policy)

    pool = load_pool(conf)
    wls = [workload(f"j{k}", opts, GAP_S * k, k + 1) for k, opts in enumerate(jobs)]
    out = Engine(pool, wls, make_policy("slurm", pool), until=GAP_S * len(jobs) + SETTLE_S).run()
    rows = []
    for job in sorted(out.jobs, key=lambda j: j.id):
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
