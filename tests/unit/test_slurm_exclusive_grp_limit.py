"""An exclusive job's TRES limits: on whole nodes to start, as asked to be planned (finding 53).

The first expectation is what a real 22.05.8 did (2026-12-03, probe ``/tmp/p53/probe.py``):
two 16-core, 8-GPU nodes, account teamA with GrpTRES=gres/gpu=8 and one of its GPUs in use on
gpu01, gpu02 busy with teamB: an exclusive ``--gres=gpu:1`` job of teamA stayed pending with
AssocGrpGRES (its whole node's 8 GPUs would make 9) and had a planned start when the holders
end (``scontrol show job``: StartTime set, SchedNodeList gpu01). gpupool used to count the whole
node in backfill's test too and gave it no planned start.
"""
from __future__ import annotations

from tests.unit.sbatch_plans import DBD_LIMITS_CONF, run_spaced, slurm_pool, team_accounts

CONF = "ClusterName=t\nDefMemPerCPU=1000\n" + DBD_LIMITS_CONF + """\
NodeName=gpu[01-02] CPUs=16 RealMemory=64000 Gres=gpu:8
PartitionName=p Nodes=gpu[01-02] Default=YES MaxTime=60 State=UP
"""

ACCOUNTS = team_accounts("gres/gpu=8")


def _pool(tmp_path):
    (tmp_path / "gres.conf").write_text("NodeName=gpu[01-02] Name=gpu File=/dev/nvidia[0-7]\n")
    (tmp_path / "accounts.cfg").write_text(ACCOUNTS)
    return slurm_pool(tmp_path, CONF)


def test_an_exclusive_job_over_its_group_limit_on_whole_nodes_is_still_planned(tmp_path):
    pool = _pool(tmp_path)
    jobs = ["-A teamA -w gpu01 --gres=gpu:1 -t 20", "-A teamB -w gpu02 --gres=gpu:1 -t 20",
            "-A teamA --exclusive --gres=gpu:1 -t 10"]
    engine, pol = run_spaced(pool, jobs, 3, 3 * len(jobs) + 40, record=True)  # plans are read
    job = engine.jobs[3]
    assert (job.state, job.reason) == ("PENDING", "AssocGrpGRES")
    assert pol.planned.get(3) == 1203.0  # when gpu02's holder ends (gpu01's at 1200 is one batch)


def _pool_with(tmp_path, conf: str = CONF, accounts: str = ACCOUNTS):
    (tmp_path / "gres.conf").write_text("NodeName=gpu[01-02] Name=gpu File=/dev/nvidia[0-7]\n")
    (tmp_path / "accounts.cfg").write_text(accounts)
    return slurm_pool(tmp_path, conf)


def test_cpus_count_on_whole_nodes_before_a_reservation(tmp_path):
    """Not probed, from the source: backfill's test before a reservation counts the CPUs
    will-run found, an exclusive job's whole nodes (cons_common ``_job_test`` sets total_cpus
    so in will-run mode too), so over GrpTRES=cpu=20 with 8 in use it gets no planned start."""
    pool = _pool_with(tmp_path, accounts=ACCOUNTS.replace("GrpTRES=gres/gpu=8", "GrpTRES=cpu=20"))
    jobs = ["-A teamB -w gpu01 -n16 -t 20", "-A teamA -w gpu02 -n8 -t 20", "-A teamA --exclusive -n1 -t 10",
            "-A teamB -w gpu02 -n4 -t 30"]
    engine, pol = run_spaced(pool, jobs, 3, 3 * len(jobs) + 40, record=True)  # plans are read
    assert (engine.jobs[3].state, engine.jobs[3].reason) == ("PENDING", "AssocGrpCpuLimit")
    assert pol.planned.get(3) is None
    assert engine.jobs[4].state == "RUNNING"


def test_no_job_is_preempted_for_an_exclusive_job_over_its_limit_on_whole_nodes(tmp_path):
    """Not probed, from the source: ``select_nodes`` tests the whole nodes' limits before it
    preempts, so the preemptable job keeps running and the preemptor gets no reservation."""
    conf = CONF + "PreemptType=preempt/qos\nPreemptMode=REQUEUE\n"
    accounts = ACCOUNTS.replace("QOS - 'normal':Priority=0\n", "QOS - 'normal':Priority=0\n"
                                "QOS - 'high':Priority=100:Preempt='normal':PreemptMode='REQUEUE'\n")
    accounts = accounts.replace("QOS='normal':DefaultQOS", "QOS='normal,high':DefaultQOS")
    pool = _pool_with(tmp_path, conf, accounts)
    jobs = ["-A teamA --qos=high -w gpu01 --gres=gpu:1 -t 20", "-A teamB --requeue -w gpu02 --gres=gpu:1 -t 20",
            "-A teamA --qos=high --exclusive --gres=gpu:1 -t 10"]
    engine, pol = run_spaced(pool, jobs, 3, 3 * len(jobs) + 40, record=True)  # plans are read
    assert (engine.jobs[2].state, engine.jobs[2].start) == ("RUNNING", 3.0)
    assert (engine.jobs[3].state, engine.jobs[3].reason) == ("PENDING", "AssocGrpGRES")
    assert pol.planned.get(3) is None


def test_an_oversubscribed_partition_skips_an_exclusive_job_over_its_limit(tmp_path):
    """Not probed, from the source: will-run finds a start now in a co-allocation row under
    OverSubscribe=FORCE, the start (``select_nodes``) fails on the whole node's GPUs, and the
    job is skipped with no reservation."""
    pool = _pool_with(tmp_path, CONF.replace("State=UP", "State=UP OverSubscribe=FORCE:2"))
    jobs = ["-A teamB -w gpu01 -n16 -t 20", "-A teamA -w gpu02 -N1 -n16 --gres=gpu:1 -t 30",
            "-A teamA --exclusive --gres=gpu:1 -t 10"]
    engine, pol = run_spaced(pool, jobs, 3, 3 * len(jobs) + 40, record=True)  # plans are read
    assert (engine.jobs[3].state, engine.jobs[3].reason) == ("PENDING", "AssocGrpGRES")
    assert pol.planned.get(3) is None


def test_memory_per_gpu_counts_for_the_gpus_asked_before_a_reservation(tmp_path):
    """Not probed, from the source: will-run frees the job's resources, so the memory backfill
    counts before a reservation is ``--mem-per-gpu`` x the GPUs asked (4000 within
    GrpTRES=mem=20000 beside 1000 in use), while a start counts the whole node's 8 GPUs (32000)."""
    pool = _pool_with(tmp_path, accounts=ACCOUNTS.replace("GrpTRES=gres/gpu=8", "GrpTRES=mem=20000"))
    jobs = ["-A teamA -w gpu01 --gres=gpu:1 --mem=1000 -t 20", "-A teamB -w gpu02 --gres=gpu:1 -t 20",
            "-A teamA --exclusive --gres=gpu:1 --mem-per-gpu=4000 -t 10"]
    engine, pol = run_spaced(pool, jobs, 3, 3 * len(jobs) + 40, record=True)  # plans are read
    assert (engine.jobs[3].state, engine.jobs[3].reason) == ("PENDING", "AssocGrpMemLimit")
    assert pol.planned.get(3) is not None
