"""A partition's OverTimeLimit on a real Slurm 22.05 and in gpupool, side by side (the rule:
``config._over_time_limit``, ``SlurmPolicy.over_time_limit_of``; the same cases without a real
Slurm: ``tests/unit/test_slurm_over_time_limit.py``).

The cluster allows 1 minute past a limit; partition q 3 minutes, partition r UNLIMITED. Three
one-minute jobs: a long sleep in the default partition and in q (both killed), a 200-s sleep in r
(runs to its end). Each job's final state and running time are read from ``scontrol show job``;
gpupool replays the cluster's own slurm.conf and the same submissions. The kill comes at
slurmctld's 30-s limit check, whose phase is the controller's own, so running times are
compared within one check interval. Skipped where Slurm is not installed. Run alone with
``python -m pytest tests/differential/test_real_slurm_over_time_limit.py -o addopts=""``.
"""
from __future__ import annotations

import re
import time

import pytest

from gpupool.conformance.real_slurm import RealSlurm
from gpupool.engine.core import Engine
from gpupool.engine.policy_api import make_policy
from gpupool.formats.pool_dir import load_pool
from gpupool.model.slurm import Partition

from tests.differential.real_cluster import need, started
from tests.unit.sbatch_plans import workload

pytestmark = [pytest.mark.slurm_real, pytest.mark.slow]

#: (sbatch options, sleep seconds)
JOBS = [("-t 1", 3000), ("-t 1 -p q", 3000), ("-t 1 -p r", 200)]
CHECK_S = 30.0  # slurmctld's limit check


def _clock(text: str) -> float:
    """``[D-]HH:MM:SS`` -> seconds."""
    days, _, rest = text.rpartition("-")
    h, m, s = (int(x) for x in rest.split(":"))
    return (int(days) if days else 0) * 86400 + h * 3600 + m * 60 + s


def _real(tmp_path):
    rs = RealSlurm(tmp_path, nodes=2, gpus_per_node=8, cpus_per_node=16, memory_mb=64000, speedup=10,
                   overrides={"PriorityType": "priority/basic", "OverTimeLimit": "1",
                              "DefMemPerCPU": "100"},
                   scheduler_parameters="bf_interval=30")
    names = rs.node_names
    rs._config.partitions = {
        "p": Partition(name="p", nodes=tuple(names), default=True, max_time=3600),
        "q": Partition(name="q", nodes=tuple(names), max_time=3600, extra={"OverTimeLimit": "3"}),
        "r": Partition(name="r", nodes=tuple(names), max_time=3600, extra={"OverTimeLimit": "UNLIMITED"}),
    }
    started(rs)
    try:
        ids = []
        for k, (opts, sleep) in enumerate(JOBS):
            got = rs.run(["sbatch", "--parsable", "-o", "/dev/null", "-J", f"j{k}", *opts.split(),
                          "--wrap", f"sleep {sleep}"])
            ids.append(int(got.stdout.split(";")[0]))
        done: dict[int, tuple[str, float]] = {}
        deadline = time.monotonic() + 120  # about 6 minutes on the x10 clock; q's kill is at ~4
        while len(done) < len(ids) and time.monotonic() < deadline:
            for jid in ids:
                if jid in done:
                    continue
                text = rs.run(["scontrol", "show", "job", str(jid)]).stdout
                state = re.search(r"JobState=(\S+)", text).group(1)
                if state not in ("PENDING", "RUNNING", "COMPLETING"):
                    done[jid] = (state, _clock(re.search(r"RunTime=(\S+)", text).group(1)))
            time.sleep(1.0)
    finally:
        rs.stop()
    return [done.get(jid) for jid in ids], rs.etc


def _ours(conf):
    import gpupool.policy.slurm  # noqa: F401  (registers the policy)

    pool = load_pool(conf)
    wls = [workload(f"j{k}", opts, 0.0, k + 1, runtime=float(sleep)) for k, (opts, sleep) in enumerate(JOBS)]
    out = Engine(pool, wls, make_policy("slurm", pool)).run()
    return [(job.state, job.end - job.start) for job in sorted(out.jobs, key=lambda j: j.id)]


def test_a_partitions_over_time_limit_replaces_the_clusters(tmp_path):
    need("none")
    real, conf = _real(tmp_path / "real")
    ours = _ours(conf)
    assert [r and r[0] for r in real] == ["TIMEOUT", "TIMEOUT", "COMPLETED"]
    assert [o[0] for o in ours] == [r[0] for r in real]
    for (_, ran), (_, real_ran), (opts, _) in zip(ours, real, JOBS):
        assert abs(ran - real_ran) <= CHECK_S, (opts, ran, real_ran)
