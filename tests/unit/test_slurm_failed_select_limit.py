"""A main pass's failed selection still tests the TRES limits, a job asking its GPUs for the
whole job counted with all GPUs of its least nodes; failing them, the job pends with the
limit's reason and holds no partition back (docs/differential.md, finding 58).

Every expectation is what a real 22.05.8 did (2026-12-03, slurmdbd, debug2 logs: "being held,
... group max tres(gres/gpu) limit 24 with already used 14 + requested 16"): four 128-CPU,
8-GPU, 1000000 MB nodes, DefMemPerGPU=120000, account teamA with GrpTRES=gres/gpu=24; the
holders leave 5 GPUs (640000 MB) free on gpu01 and 3 GPUs (112000 MB: none usable) on gpu04,
teamA using 14, or no GPU free with teamA using 18.
"""
from __future__ import annotations

import pytest

from tests.unit.sbatch_plans import DBD_LIMITS_CONF, run_spaced, slurm_pool, team_accounts

CONF = "ClusterName=t\nDefMemPerGPU=120000\n" + DBD_LIMITS_CONF + """\
NodeName=gpu[01-04] CPUs=128 Sockets=2 CoresPerSocket=32 ThreadsPerCore=2 RealMemory=1000000 Gres=gpu:8
PartitionName=p Nodes=gpu[01-04] Default=YES MaxTime=60 State=UP
"""

ACCOUNTS = team_accounts("gres/gpu=24")

#: teamA holds 14 GPUs; gpu01 has 5 free, gpu04 3 without the memory for one
FOURTEEN = ["-A teamA -w gpu01 --gres=gpu:3 -c2 --mem=360000", "-A teamA -w gpu02 --gres=gpu:8 -c2 --mem=1000",
            "-A teamB -w gpu03 --gres=gpu:8 -c2 --mem=1000", "-A teamA -w gpu04 --gres=gpu:3 -c2 --mem=444000",
            "-A teamB -w gpu04 --gres=gpu:2 -c2 --mem=444000"]
#: teamA holds 18 GPUs; no GPU is free
EIGHTEEN = ["-A teamA -w gpu02 --gres=gpu:8 -c2 --mem=1000", "-A teamA -w gpu03 --gres=gpu:8 -c2 --mem=1000",
            "-A teamA -w gpu04 --gres=gpu:2 -c2 --mem=1000", "-A teamB -w gpu01 --gres=gpu:8 -c2 --mem=1000",
            "-A teamB -w gpu04 --gres=gpu:6 -c2 --mem=1000"]


def _pool(tmp_path, accounts: str = ACCOUNTS):
    (tmp_path / "gres.conf").write_text("NodeName=gpu[01-04] Name=gpu File=/dev/nvidia[0-7]\n")
    (tmp_path / "accounts.cfg").write_text(accounts)
    return slurm_pool(tmp_path, CONF)


def _run(tmp_path, jobs: list[str], accounts: str = ACCOUNTS):
    """Submitted 3 s apart; stopped before the first backfill cycle (t=30)."""
    engine, _ = run_spaced(_pool(tmp_path, accounts), jobs, 3, 3 * len(jobs) + 1)
    return engine


def test_a_job_failing_its_limit_after_a_failed_selection_holds_no_partition_back(tmp_path):
    """X (8 GPUs per job on two nodes) fits nowhere and counts 16 against 24 - 14: it pends
    with AssocGrpGRES and Y, lower in the queue, starts in the same pass on gpu01."""
    x, y = "-A teamA -N2 -n8 --gpus-per-task=1 -t 5", "-A teamA --gres=gpu:4 -c16 --mem-per-cpu=30000 -t 5"
    engine = _run(tmp_path, FOURTEEN + [x, y])
    got_x, got_y = engine.jobs[6], engine.jobs[7]
    assert (got_x.state, got_x.reason) == ("PENDING", "AssocGrpGRES")
    assert got_y.state == "RUNNING" and got_y.placement[0][0] == 0


def test_without_a_limit_the_failed_job_holds_its_partition(tmp_path):
    """The same jobs in teamB (no limit): X waits for Resources and Y behind it (Priority)."""
    x, y = "-A teamB -N2 -n8 --gpus-per-task=1 -t 5", "-A teamB --gres=gpu:4 -c16 --mem-per-cpu=30000 -t 5"
    engine = _run(tmp_path, FOURTEEN + [x, y])
    assert (engine.jobs[6].state, engine.jobs[6].reason) == ("PENDING", "Resources")
    assert (engine.jobs[7].state, engine.jobs[7].reason) == ("PENDING", "Priority")


@pytest.mark.parametrize(("holders", "job", "reason"), [
    # whole-job GPUs: the least nodes' 8 GPUs each (16 or 24 with 14 or 18 in use)
    (FOURTEEN, "-N2 -n8 --gpus-per-task=1", "AssocGrpGRES"),
    (FOURTEEN, "-N2 --gpus=8", "AssocGrpGRES"),
    (FOURTEEN, "-N2 -n4 --gpus-per-task=2", "AssocGrpGRES"),
    (EIGHTEEN, "-N3 --gpus=6", "AssocGrpGRES"),
    (EIGHTEEN, "-N3 -n6 --gpus-per-task=1", "AssocGrpGRES"),
    (EIGHTEEN, "-N2 --gpus=2", "AssocGrpGRES"),
    (EIGHTEEN, "-N1 --gpus=2", "AssocGrpGRES"),
    (EIGHTEEN, "--gpus=2", "AssocGrpGRES"),
    (EIGHTEEN, "-n2 --gpus-per-task=1", "AssocGrpGRES"),
    # one node's 8 with 14 in use: within 24
    (FOURTEEN, "-n8 --gpus-per-task=1", "Resources"),
    # GPUs per node: as asked
    (FOURTEEN, "-N2 --gres=gpu:4", "Resources"),
    (FOURTEEN, "-N2 --gres=gpu:3", "Resources"),
    (FOURTEEN, "-N1 --gres=gpu:8", "Resources"),
    (FOURTEEN, "-N1 --gres=gpu:6", "Resources"),
    (EIGHTEEN, "-N2 --gres=gpu:1", "Resources"),
])
def test_the_reason_of_a_job_that_fits_nowhere(tmp_path, holders, job, reason):
    engine = _run(tmp_path, holders + [f"-A teamA {job} -t 5"])
    got = engine.jobs[len(holders) + 1]
    assert (got.state, got.reason) == ("PENDING", reason)


# From the 22.05.8 source, not probed: the count is what the test-only selection on an idle
# cluster (``_pick_best_nodes``) summed into the job's total_gres, node by node: the node's
# GPUs of the type asked, no more than its RealMemory pays for at memory per GPU.

G8 = "NodeName=gpu[01-04] Name=gpu File=/dev/nvidia[0-7]\n"
#: teamA holds 10 GPUs; no GPU is free
TEN = ["-A teamA -w gpu02 --gres=gpu:8 -c2 --mem=1000", "-A teamA -w gpu03 --gres=gpu:2 -c2 --mem=1000",
       "-A teamB -w gpu01 --gres=gpu:8 -c2 --mem=1000", "-A teamB -w gpu03 --gres=gpu:6 -c2 --mem=1000",
       "-A teamB -w gpu04 --gres=gpu:8 -c2 --mem=1000"]
LOWER = "-A teamA -c4 --mem=1000 -t 5"  # a CPU-only job of the account, lower in the queue
TYPED_CONF = CONF.replace("Gres=gpu:8", "Gres=gpu:a100:4,gpu:v100:4")
TYPED_GRES = ("NodeName=gpu[01-04] Name=gpu Type=a100 File=/dev/nvidia[0-3]\n"
              "NodeName=gpu[01-04] Name=gpu Type=v100 File=/dev/nvidia[4-7]\n")
TYPED_TEN = [f"-A teamB -w gpu0{n} --gres=gpu:a100:4 -c2 --mem=1000" for n in range(1, 5)] + [
    "-A teamA -w gpu01 --gres=gpu:v100:4 -c2 --mem=1000", "-A teamA -w gpu02 --gres=gpu:v100:4 -c2 --mem=1000",
    "-A teamA -w gpu03 --gres=gpu:v100:2 -c2 --mem=1000"]
MIXED_CONF = CONF.replace(
    "NodeName=gpu[01-04] CPUs=128 Sockets=2 CoresPerSocket=32 ThreadsPerCore=2 RealMemory=1000000 Gres=gpu:8",
    "NodeName=gpu[01-02] CPUs=128 Sockets=2 CoresPerSocket=32 ThreadsPerCore=2 RealMemory=1000000 Gres=gpu:4\n"
    "NodeName=gpu[03-04] CPUs=128 Sockets=2 CoresPerSocket=32 ThreadsPerCore=2 RealMemory=1000000 Gres=gpu:8")
MIXED_GRES = "NodeName=gpu[01-02] Name=gpu File=/dev/nvidia[0-3]\nNodeName=gpu[03-04] Name=gpu File=/dev/nvidia[0-7]\n"
MIXED_EIGHTEEN = ["-A teamA -w gpu03 --gres=gpu:8 -c2 --mem=1000", "-A teamA -w gpu04 --gres=gpu:8 -c2 --mem=1000",
                  "-A teamA -w gpu01 --gres=gpu:2 -c2 --mem=1000", "-A teamB -w gpu01 --gres=gpu:2 -c2 --mem=1000",
                  "-A teamB -w gpu02 --gres=gpu:4 -c2 --mem=1000"]
SMALL_CONF = CONF.replace("RealMemory=1000000", "RealMemory=500000")


@pytest.mark.parametrize(("conf", "gres", "holders", "job", "expected"), [
    # no node count, but two nodes' GPUs: 16 with 10 in use
    (CONF, G8, TEN, "-n12 --gpus-per-task=1", ("AssocGrpGRES", "RUNNING")),
    (CONF, G8, TEN, "-n3 --gpus-per-task=4", ("AssocGrpGRES", "RUNNING")),
    (CONF, G8, TEN, "-n2 -c100 --gpus=2", ("AssocGrpGRES", "RUNNING")),
    # the type asked: two nodes' 4 a100 make 8, with 10 in use within 24
    (TYPED_CONF, TYPED_GRES, TYPED_TEN, "-N2 --gpus=a100:2", ("Resources", "PENDING")),
    # the node the selection picks: one 4-GPU node, with 18 in use within 24
    (MIXED_CONF, MIXED_GRES, MIXED_EIGHTEEN, "--gpus=2", ("Resources", "PENDING")),
    # 500000 MB pays for 4 GPUs at DefMemPerGPU=120000: two nodes' 8 with 10 in use
    (SMALL_CONF, G8, [t.replace("--mem=1000", "--mem-per-gpu=1000") for t in TEN], "-N2 --gpus=2",
     ("Resources", "PENDING")),
])
def test_what_the_idle_selection_counts(tmp_path, conf, gres, holders, job, expected):
    (tmp_path / "gres.conf").write_text(gres)
    (tmp_path / "accounts.cfg").write_text(ACCOUNTS)
    jobs = holders + [f"-A teamA {job} -t 5", LOWER]
    engine, _ = run_spaced(slurm_pool(tmp_path, conf), jobs, 3, 3 * len(jobs) + 1)
    x, lower = engine.jobs[len(holders) + 1], engine.jobs[len(holders) + 2]
    assert (x.state, x.reason, lower.state) == ("PENDING", *expected)
