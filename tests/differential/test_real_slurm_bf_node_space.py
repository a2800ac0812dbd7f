"""The backfill map's size limit (bf_node_space_size) and bf_max_job_array_resv, on a real
Slurm 22.05 and in gpupool, side by side (scenario: ``tests/unit/test_slurm_bf_node_space.py``).

Two runs of the cluster: a map of 4 records, where the cycle stops at C's reservation and S,
which would fit now, stays pending; and the same map with one array of 4 tasks and
bf_max_job_array_resv=1, where the array gets one reservation and S is started by backfill.
gpupool replays the cluster's own slurm.conf and the same sbatch scripts; S's state, the jobs
planned in the first cycle and whether the cycle stopped must agree. Skipped where Slurm is
not installed. Run alone with
``python -m pytest tests/differential/test_real_slurm_bf_node_space.py -o addopts=""``.
"""
from __future__ import annotations

import re

import pytest

from gpupool.conformance.real_slurm import RealSlurm
from gpupool.engine.core import Engine
from gpupool.engine.policy_api import make_policy
from gpupool.formats.pool_dir import load_pool
from gpupool.formats.sbatch import parse_sbatch_text, sbatch_to_workload

from tests.differential.real_cluster import need, started

pytestmark = [pytest.mark.slurm_real, pytest.mark.slow]

SETTLE_S = 45.0


def _scripts(array: bool) -> list[tuple[str, float, str]]:
    plan = [("R", 0.0, ["-N1", "-n1", "--gres=gpu:8", "-t", "10"])]
    if array:
        plan.append(("A", 3.0, ["-N2", "-n2", "--gres=gpu:8", "-t", "10", "--array=1-4"]))
    else:
        plan += [(n, 3.0, ["-N2", "-n2", "--gres=gpu:8", "-t", "10"]) for n in "ABCD"]
    plan.append(("S", 3.0, ["-N1", "-n1", "--gres=gpu:8", "-t", "5"]))
    out = []
    for name, at, opts in plan:
        lines = [f"#SBATCH {o}" for o in _pairs(opts)]
        out.append((name, at, "#!/bin/bash\n#SBATCH -J " + name + "\n" + "\n".join(lines) + "\nsleep 3000\n"))
    return out


def _pairs(opts: list[str]) -> list[str]:
    out: list[str] = []
    for tok in opts:
        if tok.startswith("-") or not out:
            out.append(tok)
        else:
            out[-1] += f" {tok}"
    return out


def _run(tmp_path, params: str, array: bool):
    rs = RealSlurm(tmp_path, nodes=2, gpus_per_node=8, cpus_per_node=16, memory_mb=64000, speedup=10,
                   overrides={"SelectTypeParameters": "CR_Core_Memory", "DefMemPerCPU": "100",
                              "PriorityType": "priority/basic"},
                   scheduler_parameters=params, slurmctld_debug="debug")
    started(rs)
    scripts = _scripts(array)
    try:
        ids = {}
        last = 0.0
        for name, at, text in scripts:
            if at > last:
                rs.sleep(at - last)
                last = at
            path = rs.dir / f"{name}.sbatch"
            path.write_text(text.replace("sleep 3000", f"#SBATCH -o {rs.out_dir / '%j.out'}\nsleep 3000"))
            ids[name] = rs.sbatch([str(path)])
        rs.sleep(SETTLE_S)
        s_state = re.search(r"JobState=(\S+)", rs.run(["scontrol", "show", "job", str(ids["S"])]).stdout).group(1)
        log = (rs.log_dir / "slurmctld.log").read_text()
        pool = load_pool(rs.etc)
    finally:
        rs.stop()
    first = log[log.index("_attempt_backfill: beginning"):]
    nxt = first.find("_attempt_backfill: beginning", 10)
    first = first if nxt < 0 else first[:nxt]
    real = {"S": s_state, "planned": len(re.findall(r"_dump_job_sched: JobId=", first)),
            "full": "table size limit" in first}
    # gpupool: the same scripts from the same instants, the first cycle at 30 s
    import gpupool.policy.slurm  # noqa: F401  (registers the policy)

    wls = []
    sid = None
    for name, at, text in scripts:
        for wl in sbatch_to_workload(parse_sbatch_text(text, f"{name}.sbatch"), id=len(wls) + 1,
                                     submit_time=at, runtime=3000.0):
            wls.append(wl)
            if name == "S":
                sid = wl.id
    pol = make_policy("slurm", pool, {"record": True})
    out = Engine(pool, wls, pol, check=True, until=3.0 + SETTLE_S).run()
    plans = pol.plan_log[30.0]
    ours = {"S": next(j for j in out.jobs if j.id == sid).state,
            "planned": len(plans) - (1 if sid in plans else 0),
            "full": pol.bf_full_log.get(30.0, False)}
    return real, ours


def test_map_size_limit_and_array_reservations_match_real_slurm(tmp_path):
    need("none")
    real, ours = _run(tmp_path / "full", "bf_interval=30,sched_interval=60,bf_node_space_size=4", False)
    assert real == ours == {"S": "PENDING", "planned": 3, "full": True}
    real, ours = _run(tmp_path / "array",
                      "bf_interval=30,sched_interval=60,bf_node_space_size=4,bf_max_job_array_resv=1", True)
    assert real == ours == {"S": "RUNNING", "planned": 1, "full": False}
