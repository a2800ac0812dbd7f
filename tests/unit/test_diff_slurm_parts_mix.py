"""The differential harness's ``parts`` mix: jobs sent with ``-p`` to one or two partitions of
a pool whose partitions overlap, replayed without a real Slurm (lockstep against gpupool's
own history, as ``test_diff_slurm_lockstep.py`` does for the other mixes)."""
from __future__ import annotations

import shutil

from gpupool.conformance.diff_slurm import DiffReport, accounts_of, compare, gpu_caps, partitions_of, replay
from gpupool.conformance.diff_slurm_workload import generate
from tests.unit.test_diff_slurm_lockstep import SEED_POOL, T0, _history, _pool, _submitted

_PARTS = ("PartitionName=p Nodes=gpu[01-04] Default=YES DefaultTime=04:00:00 MaxTime=2-00:00:00 PriorityTier=1 State=UP\n"
          "PartitionName=q Nodes=gpu[03-04] DefaultTime=00:03:00 MaxTime=00:03:00 PriorityTier=2 State=UP\n"
          "PartitionName=r Nodes=gpu[01-02] MaxTime=10 PriorityTier=1 State=DOWN")


def _two_partition_pool(tmp_path):
    """The seed pool with p over all four nodes (the default), q over gpu03-04 at a higher
    tier with MaxTime 3 minutes, and a DOWN r (never chosen)."""
    shutil.copytree(SEED_POOL, tmp_path / "pool")
    conf = tmp_path / "pool" / "slurm.conf"
    text = conf.read_text()
    line = next(x for x in text.splitlines() if x.startswith("PartitionName=train"))
    conf.write_text(text.replace(line, _PARTS))
    return _pool(tmp_path / "pool")


def test_partitions_of_lists_up_partitions_default_first(tmp_path):
    pool = _two_partition_pool(tmp_path)
    assert partitions_of(pool, list(pool.nodes)) == [("p", 4, 2880), ("q", 2, 3)]


def test_each_job_goes_to_partitions_that_hold_it(tmp_path):
    pool = _two_partition_pool(tmp_path)
    parts = dict((name, (count, most)) for name, count, most in partitions_of(pool, list(pool.nodes)))
    jobs = generate(7, 200, accounts_of(pool), max_nodes=4, gpus_per_node=8, mix="parts",
                    partitions=partitions_of(pool, list(pool.nodes)))
    seen = set()
    for job in jobs:
        asked = [o.split("=", 1)[1] for o in job.options if o.startswith("--partition=")]
        names = asked[0].split(",") if asked else ["p"]
        seen.add(tuple(names))
        for name in names:
            count, most = parts[name]
            assert job.nodes <= count and (most is None or job.limit_min <= most), (job.shape, job.limit_min)
    assert {("q",), ("p", "q"), ("q", "p"), ("p",)} <= seen


def test_lockstep_against_its_own_history_agrees(tmp_path):
    pool = _two_partition_pool(tmp_path)
    jobs = generate(3, 40, accounts_of(pool), max_nodes=4, gpus_per_node=8, max_limit_min=3, mean_gap_s=4.0,
                    gpu_caps=gpu_caps(pool), mix="parts", partitions=partitions_of(pool, list(pool.nodes)))
    ids = {j.index: j.index + 1 for j in jobs}
    own = replay(pool, jobs, _submitted(jobs, ids), ids, T0, "alice")
    assert all(s.first_start is not None for s in own.values())
    real = _history(pool, jobs, own, ids)
    sim = replay(pool, jobs, real, ids, T0, "alice", lockstep=1.0)
    rep = DiffReport("seed", 3, len(jobs), "none", None, 1.0, mode="lockstep")
    compare(rep, jobs, real, ids, sim, list(pool.nodes), T0)
    assert rep.order_agree == 1.0 and rep.gpus_agree == 1.0, "\n".join(rep.summary_lines())
