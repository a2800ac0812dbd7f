"""Shapes a partition can never hold, and exclusive jobs, on a real Slurm 22.05 and in gpupool
(the rules: ``select.holds_exclusive``, ``select._packed``, ``select.exclusive_memory``,
``select._node_count``, ``submit_check._access_refusal``; without a real Slurm: ``tests/unit/test_slurm_exclusive_fit.py``).

Two 16-core, 64000 MB, 8-GPU nodes in one partition (CR_Core_Memory, DefMemPerCPU=1000). Each
case submits its jobs a couple of seconds apart and reads, per job, sbatch's refusal or the
state, allocated CPUs, memory and nodes (``scontrol show job``); gpupool replays the same slurm.conf and
submissions and reads the same from its placements. Skipped where Slurm is not installed. Run
alone with ``python -m pytest tests/differential/test_real_slurm_exclusive_fit.py -o addopts=""``.
"""
from __future__ import annotations

import pytest

from gpupool.engine.core import Engine
from gpupool.engine.policy_api import make_policy
from gpupool.formats.pool_dir import load_pool

from tests.differential.real_cluster import need
from tests.differential.test_real_slurm_job_defaults import GAP_S, SETTLE_S, _real
from tests.unit.sbatch_plans import workload

pytestmark = [pytest.mark.slurm_real, pytest.mark.slow]

CASES = {
    # refused at submit, each with sbatch's own message
    "never_fits": ["--exclusive --gres=gpu:9", "--exclusive -c20", "-N1 -c20", "-N2 -c17", "-n33", "-N3 -c2",
                   "-N3 -c20", "--exclusive -n33", "-N3 --exclusive"],
    # an exclusive job's tasks share the whole nodes it takes, and memory per CPU (here
    # DefMemPerCPU) counts every CPU of those nodes
    "exclusive_tasks": ["--exclusive -n20", "--exclusive -c2"],
    # memory per CPU or per GPU counts every CPU or GPU of the node; more than a node has is
    # refused
    "exclusive_memory": ["--exclusive -c2 --mem-per-cpu=500", "--exclusive --gres=gpu:2 --mem-per-gpu=1000",
                         "--exclusive -c2 --mem-per-cpu=5000"],
    # a node range takes as many nodes as it can now, at least its least count
    "node_range": ["-N1-3 -c2", "-N2 -c2"],
    "node_range_busy": ["-N1 --exclusive", "-N1-3 -c2", "-N2-3 --exclusive", "-N3-4 -c2"],
}
GLOBALS = {"DefMemPerCPU": "1000"}


def _ours(conf, jobs: list[str]):
    import gpupool.policy.slurm  # noqa: F401  (registers the policy)

    pool = load_pool(conf)
    wls = [workload(f"j{k}", opts, GAP_S * k, k + 1) for k, opts in enumerate(jobs)]
    out = Engine(pool, wls, make_policy("slurm", pool), until=GAP_S * len(jobs) + SETTLE_S).run()
    rows = []
    for job in sorted(out.jobs, key=lambda j: j.id):
        if job.state == "REJECTED":
            rows.append(("REFUSED", job.reason))
        elif job.state == "RUNNING":
            rows.append((sum(c for _n, _m, c, _mem in job.placement) // 1000, sum(p[3] for p in job.placement),
                         sorted({p[0] for p in job.placement}), job.state))
        else:
            rows.append((job.state,))
    return rows


def _shape(row):
    """A real row as ``_ours`` writes it: refusal, or (CPUs, memory, nodes, state) for a running
    job."""
    if row[0] == "REFUSED":
        return row
    cpus, mem, where, state = row
    return (cpus, mem, where, state) if state == "RUNNING" else (state,)


@pytest.mark.parametrize("case", sorted(CASES))
def test_shapes_and_exclusive_jobs_match_real_slurm(tmp_path, case):
    need("none")
    jobs = CASES[case]
    real, conf = _real(tmp_path / "real", GLOBALS, {}, jobs)
    assert _ours(conf, jobs) == [_shape(r) for r in real]
