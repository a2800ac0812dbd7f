"""PreemptExemptTime: the cluster's, and the victim's QOS over it (``preempt.exempt_until``).

Probe p127 (2026-12-05, a real 22.05.8 with slurmdbd, the seed pool with PreemptExemptTime=00:02:00,
preempt/qos REQUEUE): L (QOS normal, ``-w gpu01 --gres=gpu:8``) ran, H (QOS high, which preempts
normal, same node) was submitted a second later. With normal's PreemptExemptTime unset H's pass
requeued L 153 s after L's start (the first main pass after start_time + 120 s), with normal's
set to 00:04:00 277 s after (after + 240 s), with 0 three seconds after (at once: a QOS value
overrides the cluster's, even 0), and with -1 (INFINITE, read as not set) 130 s after. Which
pass comes first after the exemption ends is slurmctld's timing; here passes run on the model's
ticks, so the requeue falls on the exemption's end.

From the 22.05.8 source (``acct_policy_get_preemptable_time``): the exemption ends at the job's
start_time, a whole epoch second, plus the time, and is compared with time(0); the QOS read
first is the one ``acct_policy_set_qos_order`` puts first (the partition's QOS, unless the
job's has OverPartQOS).
"""
from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from gpupool.engine.core import Engine
from gpupool.engine.policy_api import make_policy
from gpupool.formats.pool_dir import load_pool
from gpupool.policy.slurm.preempt import exempt_until
from tests.unit.sbatch_plans import workload

SEED_POOL = Path(__file__).resolve().parents[2] / "examples" / "seed-pool"
NORMAL = "QOS - 'normal':Description='Default QOS':Priority=0"


def _pool(tmp_path: Path, qos_exempt: str | None = None, conf_extra: str = "PreemptExemptTime=00:02:00\n",
          part_qos: str | None = None):
    import gpupool.policy.slurm  # noqa: F401  (registers the policy)

    d = tmp_path / "pool"
    shutil.copytree(SEED_POOL, d)
    conf = (d / "slurm.conf").read_text() + conf_extra
    accounts = (d / "accounts.cfg").read_text()
    if qos_exempt is not None:
        accounts = accounts.replace(NORMAL, f"{NORMAL}:PreemptExemptTime={qos_exempt}")
    if part_qos is not None:
        accounts = accounts.replace(NORMAL, f"QOS - 'part':Priority=0:{part_qos}\n{NORMAL}")
        conf = conf.replace("PartitionName=train Nodes=gpu[01-04]", "PartitionName=train Nodes=gpu[01-04] QOS=part")
    (d / "slurm.conf").write_text(conf)
    (d / "accounts.cfg").write_text(accounts)
    return load_pool(d)


def _run(pool, submit_l: float = 0.0, submit_h: float = 1.0, epoch: float = 0.0, l_qos: str = "normal"):
    wls = [workload("L", f"-A ml-research --qos={l_qos} -w gpu01 --gres=gpu:8 -t 30", submit_l, 1),
           workload("H", "-A ml-research --qos=high -w gpu01 --gres=gpu:8 -t 30", submit_h, 2)]
    wls = [replace(w, user="alice") for w in wls]
    pol = make_policy("slurm", pool, {"epoch": epoch})
    engine = Engine(pool, wls, pol, until=900.0)
    engine.run()
    return engine.jobs[1], engine.jobs[2], pol


@pytest.mark.parametrize("qos_exempt, h_start", [
    (None, 120.0),        # the cluster's 120 s
    ("00:04:00", 240.0),  # the victim's QOS over it
    ("0", 1.0),           # even 0: preempted at once
    ("-1", 120.0),        # INFINITE: not set, the cluster's again
])
def test_the_victims_qos_exempt_time_comes_before_the_clusters(tmp_path: Path, qos_exempt, h_start) -> None:
    L, H, _pol = _run(_pool(tmp_path, qos_exempt))
    assert L.first_start == 0.0 and L.requeues == 1
    assert H.start == pytest.approx(h_start)


def test_without_any_exempt_time_the_preemptor_starts_at_once(tmp_path: Path) -> None:
    L, H, pol = _run(_pool(tmp_path, conf_extra=""))
    assert exempt_until(pol, L) is None and L.requeues == 1
    assert H.start == pytest.approx(1.0)


def test_the_exemption_ends_on_whole_seconds(tmp_path: Path) -> None:
    # epoch seconds fall at run-relative x.5: L starts at 0.3, start_time -0.5, exempt until
    # 119.5; H submitted at 119.6 preempts it at once (from the engine's own start, 0.3 + 120,
    # it would have waited past 120.3)
    pool = _pool(tmp_path)
    L, H, pol = _run(pool, submit_l=0.3, submit_h=119.6, epoch=1_000_000.5)
    assert L.first_start == pytest.approx(0.3) and L.requeues == 1
    assert H.start == pytest.approx(119.6)


def _alone(pool, submit: float = 0.0, epoch: float = 0.0):
    """L (QOS normal) run alone for 10 s: (the job, the policy)."""
    pol = make_policy("slurm", pool, {"epoch": epoch})
    wl = replace(workload("L", "-A ml-research --qos=normal -w gpu01 --gres=gpu:8 -t 30", submit, 1), user="alice")
    engine = Engine(pool, [wl], pol, until=10.0)
    engine.run()
    return engine.jobs[1], pol


def test_exempt_until_reads_the_running_job(tmp_path: Path) -> None:
    job, pol = _alone(_pool(tmp_path, "00:04:00"), 0.3, 1_000_000.5)
    assert exempt_until(pol, job) == pytest.approx(-0.5 + 240)


@pytest.mark.parametrize("flags, exempt", [
    ("", 300),                          # the partition's QOS is read first
    (":Flags=OverPartQOS", 240),        # unless the job's QOS has OverPartQOS
])
def test_the_partition_qos_comes_first_unless_over_part_qos(tmp_path: Path, flags: str, exempt: int) -> None:
    job, pol = _alone(_pool(tmp_path, "00:04:00" + flags, part_qos="PreemptExemptTime=00:05:00"))
    assert exempt_until(pol, job) == pytest.approx(exempt)


def test_a_partition_qos_without_one_leaves_the_jobs(tmp_path: Path) -> None:
    job, pol = _alone(_pool(tmp_path, "00:04:00", part_qos="UsageFactor=1.0"))
    assert exempt_until(pol, job) == pytest.approx(240)


def test_a_job_adopted_without_the_policys_partition_record_reads_its_own(tmp_path: Path) -> None:
    # a live daemon's restart adopts running jobs: their partition is the job's own record
    job, pol = _alone(_pool(tmp_path, "00:04:00", part_qos="PreemptExemptTime=00:05:00"))
    pol.run_part.pop(1)
    assert job.partition == "train"
    assert exempt_until(pol, job) == pytest.approx(300)


def _suspend_pool(tmp_path: Path, qos_exempt: str | None):
    """Probe p128's pool: the seed pool under preempt/qos SUSPEND,GANG with its partition
    OverSubscribe=FORCE:1 (a preemptor is co-allocated on its victim's CPUs)."""
    pool = _pool(tmp_path, qos_exempt)
    d = tmp_path / "pool"
    conf = (d / "slurm.conf").read_text().replace("PreemptMode=REQUEUE", "PreemptMode=SUSPEND,GANG").replace(
        "PartitionName=train Nodes=gpu[01-04] ", "PartitionName=train Nodes=gpu[01-04] OverSubscribe=FORCE:1 ")
    (d / "slurm.conf").write_text(conf)
    (d / "accounts.cfg").write_text((d / "accounts.cfg").read_text().replace("PreemptMode='REQUEUE'",
                                                                            "PreemptMode='SUSPEND'"))
    assert pool is not None
    return load_pool(d)


@pytest.mark.parametrize("qos_exempt, h_start", [(None, 120.0), ("0", 1.0)])
def test_under_preempt_qos_a_suspend_victim_is_exempt_too(tmp_path: Path, qos_exempt, h_start) -> None:
    # probe p128 (a real 22.05.8): L (QOS normal, -c 128 --gres=gpu:4 on gpu01) ran, H (QOS high,
    # the same on gpu01) came a second later; with PreemptExemptTime=00:02:00 H waited with
    # Resources and started 120 s after L, suspending it; with normal's set to 0, 3 s after
    pool = _suspend_pool(tmp_path, qos_exempt)
    opts = "-A ml-research --qos={} -w gpu01 --gres=gpu:4 -c 128 --mem=1000 -t 30"
    wls = [replace(workload("L", opts.format("normal"), 0.0, 1), user="alice"),
           replace(workload("H", opts.format("high"), 1.0, 2), user="alice")]
    pol = make_policy("slurm", pool)
    engine = Engine(pool, wls, pol, until=200.0)
    engine.run_until(21.0)
    H = engine.jobs[2]
    if qos_exempt is None:
        assert H.start is None and H.reason == "Resources"
    engine.run_until(200.0)
    assert H.first_start == pytest.approx(h_start)
