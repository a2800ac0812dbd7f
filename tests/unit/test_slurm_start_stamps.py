"""A replay's start stamps (``SlurmPolicy.start_stamp``): slurmctld stamps a job's start_time
with the second in which its pass selected the job's nodes. A pass that began just before a
second boundary may stamp the job with the next second (rich seed 31 of the differential test:
job 54's main pass began at 480.456 s, 16 ms before the second 480.472 its start carried), and
its limit end and fair-share usage count from there. A replay passes real Slurm's (allocation
instant, start_time) per job; the policy uses the stamp only for the same pass."""
from __future__ import annotations

from pathlib import Path

import pytest

from gpupool.engine.core import Engine
from gpupool.engine.policy_api import make_policy
from gpupool.policy.slurm import backfill
from gpupool.policy.slurm.decay import usage_clock
from tests.unit.sbatch_plans import DBD_LIMITS_CONF, GPU_NODES_CONF, slurm_pool, team_accounts, workload

#: whole epoch seconds fall at run-relative x.5
EPOCH = 1_000_000.5


#: multifactor priority with fair share from slurmdbd's associations: usage segments are kept
FAIRSHARE_CONF = "ClusterName=t\nDefMemPerCPU=1000\nPriorityWeightFairshare=1000\n" + DBD_LIMITS_CONF + """\
NodeName=gpu01 CPUs=16 RealMemory=64000 Gres=gpu:8
PartitionName=p Nodes=gpu01 Default=YES MaxTime=60 State=UP
"""


def _run(tmp_path: Path, stamps: dict | None, submit: float = 0.3, extra: dict | None = None):
    pool = slurm_pool(tmp_path, GPU_NODES_CONF.format(last=1))
    options: dict = {"epoch": EPOCH, **(extra or {})}
    if stamps is not None:
        options["start_stamps"] = stamps
    pol = make_policy("slurm", pool, options)
    engine = Engine(pool, [workload("a", "--gres=gpu:8 -t 5", submit, 1)], pol, until=30.0)
    engine.run()
    return engine.jobs[1], pol


def test_without_stamps_the_start_counts_from_the_pass_second(tmp_path: Path) -> None:
    job, pol = _run(tmp_path, None)
    assert job.start == pytest.approx(0.3)
    assert pol.limit_end(job, 30.0) == pytest.approx(-0.5 + 300)


def test_a_stamp_the_second_after_the_pass_began_moves_the_limit_end(tmp_path: Path) -> None:
    # real Slurm allocated the nodes at 0.6 s, after the second boundary at 0.5: start_time 0.5
    job, pol = _run(tmp_path, {1: (0.6, 0.5)})
    assert job.start == pytest.approx(0.3)  # the engine's start is the pass's instant
    assert pol.start_stamp(1, 0.3) == pytest.approx(0.5)
    assert pol.limit_end(job, 30.0) == pytest.approx(0.5 + 300)
    assert pol.expected_end(job, 30.0) == pytest.approx(0.5 + 300 + 1e-3)


def test_the_pass_that_starts_it_plans_its_end_from_the_stamp(tmp_path: Path, monkeypatch) -> None:
    # the end the starting pass enters in the running jobs' ends is the one read later
    entered: list[tuple[int, float]] = []
    insert = backfill.insert_end

    def spy(ends, end, job_id, placement, free_at):
        entered.append((job_id, end))
        insert(ends, end, job_id, placement, free_at)
    monkeypatch.setattr(backfill, "insert_end", spy)
    job, pol = _run(tmp_path, {1: (0.6, 0.5)})
    assert entered == [(1, pytest.approx(0.5 + 300))]
    assert pol.limit_end(job, 30.0) == pytest.approx(entered[0][1])


def test_the_fair_share_usage_counts_from_the_stamp(tmp_path: Path) -> None:
    (tmp_path / "gres.conf").write_text("NodeName=gpu01 Name=gpu File=/dev/nvidia[0-7]\n")
    (tmp_path / "accounts.cfg").write_text(team_accounts("gres/gpu=8"))
    pool = slurm_pool(tmp_path, FAIRSHARE_CONF)
    for stamps, second in (({1: (0.6, 0.5)}, 0.5), ({}, -0.5)):
        pol = make_policy("slurm", pool, {"epoch": EPOCH, "start_stamps": stamps})
        Engine(pool, [workload("a", "-A teamA --gres=gpu:8 -t 5", 0.3, 1)], pol, until=30.0).run()
        assert pol.use_fs
        assert pol._segs[1][0] == usage_clock(second + 1e-3, EPOCH)


@pytest.mark.parametrize("alloc, stamp", [
    (0.6, -0.5),   # stamped with the pass's own second: nothing to move
    (1.6, 1.5),    # allocated more than a second after the pass began: another pass
    (1.3, 0.5),    # allocated a second after the pass began, not within it
    (0.2, 0.5),    # allocated before this pass began: another pass
    (0.9, 2.5),    # a stamp that is not the next second
])
def test_a_stamp_of_another_pass_is_not_used(tmp_path: Path, alloc: float, stamp: float) -> None:
    job, pol = _run(tmp_path, {1: (alloc, stamp)})
    assert pol.start_stamp(1, 0.3) is None
    assert pol.limit_end(job, 30.0) == pytest.approx(-0.5 + 300)


def test_a_job_without_a_stamp_is_unaffected(tmp_path: Path) -> None:
    job, pol = _run(tmp_path, {7: (0.6, 0.5)})
    assert pol.limit_end(job, 30.0) == pytest.approx(-0.5 + 300)


def test_a_later_start_drops_an_earlier_reported_one(tmp_path: Path) -> None:
    # a requeued job starts again: the start_time kept from its earlier run no longer counts
    pool = slurm_pool(tmp_path, GPU_NODES_CONF.format(last=1))
    pol = make_policy("slurm", pool, {"epoch": EPOCH})
    pol.reported_start[1] = -100.0
    engine = Engine(pool, [workload("a", "--gres=gpu:8 -t 5", 0.3, 1)], pol, until=30.0)
    engine.run()
    assert 1 not in pol.reported_start
    assert pol.limit_end(engine.jobs[1], 30.0) == pytest.approx(-0.5 + 300)


def test_a_later_pass_of_the_replay_may_have_started_it(tmp_path: Path) -> None:
    # real Slurm's backfill cycle at 0.7 s, not the pass at 0.3 s, allocated the job at 0.8 s:
    # gpupool's start at 0.3 s is not that pass's, and keeps its own second
    job, pol = _run(tmp_path, {1: (0.8, 0.5)}, extra={"backfill_at": [0.7, 30.7]})
    assert job.start == pytest.approx(0.3)
    assert pol.start_stamp(1, 0.3) is None
    assert pol.limit_end(job, 30.0) == pytest.approx(-0.5 + 300)
    # a cycle after the allocation does not count
    job, pol = _run(tmp_path, {1: (0.6, 0.5)}, extra={"backfill_at": [0.7, 30.7]})
    assert pol.start_stamp(1, 0.3) == pytest.approx(0.5)


def test_a_retracted_start_forgets_its_stamp(tmp_path: Path) -> None:
    job, pol = _run(tmp_path, {1: (0.6, 0.5)})
    assert 1 in pol.reported_start
    pol.retract_start(1)
    assert 1 not in pol.reported_start
