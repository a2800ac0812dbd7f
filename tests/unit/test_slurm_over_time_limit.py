"""A partition's OverTimeLimit replaces the cluster's for the jobs running in it, as on a real
22.05.8 (``tests/differential/test_real_slurm_over_time_limit.py``: with OverTimeLimit=1 and a
partition at 3, ``-t 1`` jobs were killed after 2:27 and 4:27 of running time; with UNLIMITED a
200-s sleep completed)."""
from __future__ import annotations

import math
from pathlib import Path

import pytest

from gpupool.engine.core import Engine
from gpupool.engine.executor import SimulatedExecutor
from gpupool.engine.policy_api import make_policy
from gpupool.errors import GpupoolError
from gpupool.formats.pool_dir import load_pool

from tests.unit.sbatch_plans import slurm_pool, workload

CONF = """\
ClusterName=otl
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
PriorityType=priority/basic
DefMemPerCPU=100
GresTypes=gpu
{globals}
NodeName=n[1-2] CPUs=16 RealMemory=64000 Gres=gpu:8
PartitionName=p Nodes=n[1-2] Default=YES MaxTime=60
PartitionName=q Nodes=n[1-2] MaxTime=60 {q}
PartitionName=r Nodes=n[1-2] MaxTime=60 {r}
"""


def _pool(tmp_path: Path, globals_: str = "OverTimeLimit=1", q: str = "OverTimeLimit=3",
          r: str = "OverTimeLimit=UNLIMITED"):
    return slurm_pool(tmp_path, CONF.format(globals=globals_, q=q, r=r))


def _ends(pool, jobs: list[tuple[str, float]], policy: str = "slurm", options: dict | None = None):
    wls = [workload(f"j{k}", opts, 0.0, k + 1, runtime=run) for k, (opts, run) in enumerate(jobs)]
    out = Engine(pool, wls, make_policy(policy, pool, options)).run()
    return [(j.state, j.end - j.start) for j in sorted(out.jobs, key=lambda j: j.id)]


def test_each_job_gets_its_partitions_allowance(tmp_path: Path) -> None:
    got = _ends(_pool(tmp_path), [("-t 1", 3000), ("-t 1 -p q", 3000), ("-t 1 -p r", 200), ("-t 1 -p r", 3000)])
    # the cluster's 1 minute, q's 3, r's none (a 3000-s sleep in r runs to its end too)
    assert got == [("TIMEOUT", 120.0), ("TIMEOUT", 240.0), ("COMPLETED", 200.0), ("COMPLETED", 3000.0)]


def test_a_partition_without_one_takes_the_clusters(tmp_path: Path) -> None:
    pool = _pool(tmp_path, globals_="OverTimeLimit=2", q="", r="")
    assert _ends(pool, [("-t 1 -p q", 3000), ("-t 1", 3000)]) == [("TIMEOUT", 180.0)] * 2
    pol = make_policy("slurm", pool)
    Engine(pool, [workload("a", "-t 1", 0.0, 1, runtime=10)], pol).run()
    assert {name: info.over_time_limit for name, info in pol.parts.items()} == {"p": None, "q": None, "r": None}


def test_the_partitions_allowance_moves_a_running_jobs_planned_end(tmp_path: Path) -> None:
    # past its limit a running job is planned to end at limit end + KillWait + OverTimeLimit
    pool = _pool(tmp_path, globals_="OverTimeLimit=1\nKillWait=30")
    pol = make_policy("slurm", pool)
    wls = [workload("a", "-t 1 -p q", 0.0, 1, runtime=3000), workload("b", "-t 1", 0.0, 2, runtime=3000)]
    engine = Engine(pool, wls, pol, until=90.0)
    engine.run()
    a, b = engine.jobs[1], engine.jobs[2]
    assert pol.over_time_limit_of(a) == 180.0 and pol.over_time_limit_of(b) == 60.0
    assert pol.expected_end(a, 90.0) == 60.0 + 30.0 + 180.0
    assert pol.expected_end(b, 90.0) == 60.0 + 30.0 + 60.0


def test_the_bridge_passes_the_allowance_on(tmp_path: Path) -> None:
    pool = _pool(tmp_path)
    assert _ends(pool, [("-t 1 -p q", 3000)], "bridge") == [("TIMEOUT", 240.0)]
    assert make_policy("bridge", pool).over_time_limit_of.__self__.__class__.__name__ == "SlurmPolicy"


def test_the_executor_for_a_policy_asks_it_per_job(tmp_path: Path) -> None:
    pol = make_policy("slurm", _pool(tmp_path))
    ex = SimulatedExecutor.for_policy(pol)
    assert (ex.over_time_limit, ex.check_interval) == (60.0, 30.0)
    assert ex.over_time_limit_of == pol.over_time_limit_of
    Engine(pol.pool, [workload("a", "-t 1", 0.0, 1, runtime=10)], pol).run()
    assert pol.parts["r"].over_time_limit == math.inf


@pytest.mark.parametrize("value", ["soon", "-2"])
def test_a_bad_partition_over_time_limit_names_the_line(tmp_path: Path, value: str) -> None:
    (tmp_path / "slurm.conf").write_text(CONF.format(globals="", q=f"OverTimeLimit={value}", r=""))
    with pytest.raises(GpupoolError, match="OverTimeLimit") as err:
        load_pool(tmp_path)
    assert "slurm.conf" in str(err.value) and ":11" in str(err.value)


def test_an_unlimited_allowance_never_kills_in_the_replay_and_live_executors() -> None:
    from types import SimpleNamespace

    from gpupool.conformance.diff_slurm import ReplayExecutor
    from gpupool.live.executor import LiveExecutor

    job = SimpleNamespace(id=1, time_limit=60.0, remaining=100.0, wl=SimpleNamespace(outcome="COMPLETED"))
    replay = ReplayExecutor(0.0, [], over_time_limit_of=lambda j: math.inf)
    assert replay.launch(job, 0.0) == (100.0, "COMPLETED")
    assert ReplayExecutor(0.0, [], over_time_limit_of=lambda j: 60.0).launch(job, 0.0) == (100.0, "TIMEOUT")
    assert ReplayExecutor(0.0, [], over_time_limit_of=lambda j: 0.0).launch(job, 0.0) == (60.0, "TIMEOUT")
    for allowance, timers in ((math.inf, []), (60.0, [(120.0, "timeout")])):
        live = LiveExecutor.__new__(LiveExecutor)
        live._timers, live._seq, live.submissions = [], 0, {}
        live.over_time_limit, live.over_time_limit_of, live.check_interval = 0.0, (lambda j, a=allowance: a), 30.0
        live._arm(job, SimpleNamespace(start=0.0, token=7))
        assert [(t, action) for t, _seq, _job, _token, action in live._timers] == timers


def test_a_job_adopted_before_the_first_call_takes_its_partitions_allowance(tmp_path: Path) -> None:
    from types import SimpleNamespace

    pol = make_policy("slurm", _pool(tmp_path))
    assert pol.over_time_limit_of(SimpleNamespace(id=9, partition="q")) == 180.0
    assert pol.over_time_limit_of(SimpleNamespace(id=9, partition=None)) == 60.0
