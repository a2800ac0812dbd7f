"""QOS limits count an exclusive job's whole nodes, on a real Slurm 22.05 and in gpupool (the
rule: ``SlurmPolicy.limit_req``; without a real Slurm: ``tests/unit/test_slurm_exclusive_fit.py``).

Two 16-core, 64000 MB, 8-GPU nodes (CR_Core_Memory, DefMemPerCPU=1000), slurmdbd with
AccountingStorageEnforce=associations,limits,qos and a QOS ``lim`` with
MaxTRESPerJob=cpu=4,mem=4000,gres/gpu=2. Exclusive jobs asking less than that still hold 16
CPUs, so real Slurm leaves them pending (QOSMaxCpuPerJobLimit) while a non-exclusive job
within the limits runs. gpupool replays the same slurm.conf, the same QOS and the same
submissions. Skipped where Slurm or slurmdbd is not installed. Run alone with
``python -m pytest tests/differential/test_real_slurm_exclusive_limits.py -o addopts=""``.
"""
from __future__ import annotations

import shutil

import pytest

from gpupool.conformance.real_slurm import RealSlurm
from gpupool.engine.core import Engine
from gpupool.engine.policy_api import make_policy
from gpupool.formats.pool_dir import load_pool

from tests.differential.real_cluster import need, sacctmgr, show_jobs, started, submit_each
from tests.unit.sbatch_plans import workload

pytestmark = [pytest.mark.slurm_real, pytest.mark.slow]

JOBS = ["--qos=lim --exclusive -c2", "--qos=lim --exclusive -c1 --mem=1000", "--qos=lim -c2 --gres=gpu:1",
        "--qos=lim --exclusive --gres=gpu:1 --mem=1000 -c1"]
GAP_S = 3.0
SETTLE_S = 8.0
#: the QOS and association the sacctmgr commands below make, as gpupool reads them
ACCOUNTS = """\
QOS - 'normal':Priority=0
QOS - 'lim':MaxTRESPerJob=cpu=4,mem=4000,gres/gpu=2
Cluster - 'real':Fairshare=1:QOS='normal'
Parent - 'root'
Account - 'teamA':Fairshare=1:QOS='normal,lim':DefaultQOS='normal'
Parent - 'teamA'
User - 'root':DefaultAccount='teamA':Fairshare=1
"""


def _real(tmp_path):
    rs = started(RealSlurm(tmp_path / "rs", nodes=2, gpus_per_node=8, cpus_per_node=16, memory_mb=64000,
                           accounting="dbd", speedup=10,
                           overrides={"SelectTypeParameters": "CR_Core_Memory", "DefMemPerCPU": "1000"},
                           scheduler_parameters="bf_interval=30"))
    try:
        sacctmgr(rs, ["add", "qos", "lim"], ["modify", "qos", "lim", "set", "MaxTRESPerJob=cpu=4,mem=4000,gres/gpu=2"],
                 ["modify", "user", "root", "set", "QOS+=lim"])
        ids = submit_each(rs, ["-A teamA -t 10 " + opts for opts in JOBS], GAP_S)
        rs.sleep(SETTLE_S)
        shown = show_jobs(rs, ids, ("JobState", "Reason"))
    finally:
        rs.stop()
    return [job if isinstance(job, tuple) else (job["JobState"], "" if job["Reason"] == "None" else job["Reason"])
            for job in shown], rs.etc


def _ours(etc, pool_dir):
    import gpupool.policy.slurm  # noqa: F401  (registers the policy)

    pool_dir.mkdir()
    for name in ("slurm.conf", "gres.conf"):
        shutil.copy(etc / name, pool_dir / name)
    (pool_dir / "accounts.cfg").write_text(ACCOUNTS)
    pool = load_pool(pool_dir)
    wls = [workload(f"j{k}", "-A teamA -t 10 " + opts, GAP_S * k, k + 1) for k, opts in enumerate(JOBS)]
    out = Engine(pool, wls, make_policy("slurm", pool), until=GAP_S * len(JOBS) + SETTLE_S).run()
    return [(job.state, job.reason or "") for job in sorted(out.jobs, key=lambda j: j.id)]


def test_qos_limits_count_an_exclusive_jobs_whole_nodes(tmp_path):
    need("dbd")
    real, etc = _real(tmp_path)
    assert [r[0] for r in real] == ["PENDING", "PENDING", "RUNNING", "PENDING"], real
    assert _ours(etc, tmp_path / "pool") == real
