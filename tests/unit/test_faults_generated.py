"""Generated faults and operations: failures at a rate, maintenance windows, and their effect."""
from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpupool.engine.core import Engine, NodeEvent
from gpupool.engine.policy_api import make_policy
from gpupool.errors import InputError
from gpupool.formats.faults import (
    load_faults,
    maintenance_window,
    parse_fault_spec,
    random_faults,
)
from gpupool.model.pool import Gpu, Node, Pool
from gpupool.model.slurm import Partition, SlurmConfig
from gpupool.model.workload import PodSet, Workload

NODES = ["gpu01", "gpu02", "gpu03"]


def _pool(n=2):
    nodes = {f"n{i}": Node(f"n{i}", 8, 64000, tuple(Gpu(k) for k in range(8)), state="IDLE") for i in range(n)}
    cfg = SlurmConfig()
    cfg.partitions["batch"] = Partition("batch", tuple(nodes), default=True)
    return Pool("t", nodes=nodes, slurm=cfg)


def _wl(i, submit=0.0, run=1000.0, requeue=True, gpus=8):
    return Workload(i, f"j{i}", (PodSet(count=1, cpu_m=1000, gpus=gpus),), submit_time=submit, runtime=run,
                    time_limit=7200.0, requeue=requeue)


def test_maintenance_window_events():
    assert maintenance_window(["a"], 10, 20, 30) == [
        NodeEvent(10, "a", "drain", "maintenance"), NodeEvent(20, "a", "down", "maintenance"),
        NodeEvent(30, "a", "resume", "maintenance"), NodeEvent(30, "a", "up", "maintenance")]
    with pytest.raises(ValueError, match="drain <= down < up"):
        maintenance_window(["a"], 30, 20, 10)


def test_random_faults_are_seeded_per_node():
    a = random_faults(NODES, 86400, 3600, 30 * 86400, seed=1)
    assert a == random_faults(NODES, 86400, 3600, 30 * 86400, seed=1)
    assert a != random_faults(NODES, 86400, 3600, 30 * 86400, seed=2)
    # a node's failures do not move when another node joins the list
    only = [e for e in a if e.node == "gpu02"]
    assert only == [e for e in random_faults(["gpu02"], 86400, 3600, 30 * 86400, seed=1)]


def test_failure_rate_matches_mtbf():
    events = random_faults([f"n{i}" for i in range(200)], 10 * 86400, 3600, 100 * 86400, seed=3)
    downs = sum(e.event == "down" for e in events)
    expected = 200 * 100 * 86400 / (10 * 86400 + 3600)
    assert abs(downs - expected) < 0.1 * expected


def test_inline_specs_and_their_errors():
    ev = parse_fault_spec("rate:mtbf=1d,repair=2h,seed=4,until=10d,nodes=gpu[01-02];"
                          "maintenance:nodes=gpu03,drain=1h,down=2h,up=3h,reason=bios", NODES)
    assert {e.node for e in ev if e.reason == "fault"} <= {"gpu01", "gpu02"}
    assert [e for e in ev if e.node == "gpu03"] == maintenance_window(["gpu03"], 3600, 7200, 10800, "bios")
    for spec, message in [("rate:mtbf=1d", "missing repair="), ("rate:mtbf=1d,repair=1h,colour=red", "unknown key 'colour'"),
                          ("rate:mtbf=soon,repair=1h,until=1d", "mtbf: expected seconds"),
                          ("maintenance:nodes=gpu09,down=1h,up=2h", "the pool has no node 'gpu09'"),
                          ("chaos:x=1", "expected rate:… or maintenance:…"),
                          ("rate:mtbf=1d,repair=1h", "give until=")]:
        with pytest.raises(InputError, match=message):
            load_faults(spec, NODES)


@settings(max_examples=60, deadline=None)
@given(mtbf=st.floats(60, 1e6), repair=st.floats(0, 1e5), until=st.floats(0, 1e7), seed=st.integers(0, 1000),
       dist=st.sampled_from(["fixed", "exp"]))
def test_generated_faults_alternate_down_and_up(mtbf, repair, until, seed, dist):
    events = random_faults(NODES, mtbf, repair, until, seed, repair=dist)
    assert events == sorted(events, key=lambda e: (e.time, e.node, e.event))
    for node in NODES:
        mine = [e for e in events if e.node == node]
        assert [e.event for e in mine] == ["down", "up"] * (len(mine) // 2)
        assert all(d.time < until and u.time >= d.time for d, u in zip(mine[::2], mine[1::2]))
        assert all(a.time <= b.time for a, b in itertools.pairwise(mine))


@pytest.mark.parametrize("policy", ["fifo", "slurm", "bridge"])
def test_maintenance_drains_then_fails_the_remaining_work(policy):
    """Drained at 100: the running job goes on, a new one goes to the other node; down at 500:
    the job still there is requeued (or ends NODE_FAIL when it may not be requeued)."""
    pool = _pool(2)
    faults = maintenance_window(["n0"], 100, 500, 900)
    wls = [_wl(1, run=2000), _wl(2, run=2000, requeue=False), _wl(3, submit=200, run=100)]
    out = Engine(pool, wls, make_policy(policy, pool), check=True, faults=faults).run()
    jobs = {j.id: j for j in out.jobs}
    on_n0 = [j for j in (jobs[1], jobs[2]) if any(e[2] == j.id and e[1] == "started" and " n0:" in " " + e[3].split(" ")[-1] for e in out.events)]
    assert len(on_n0) == 1
    victim = on_n0[0]
    if victim.id == 1:
        assert victim.requeues == 1 and victim.state == "COMPLETED" and victim.first_start == 0
    else:
        assert victim.state == "NODE_FAIL" and victim.end == 500
    # nothing new started on n0 while it was drained or down
    for t, what, job, detail in out.events:
        if what == "started" and 100 <= t < 900:
            assert "n0:" not in detail, (t, job, detail)


@pytest.mark.parametrize("policy", ["slurm", "bridge", "kueue"])
def test_random_faults_run_to_completion_under_each_policy(policy):
    pool = _pool(2)
    faults = random_faults(list(pool.nodes), 3000, 600, 20000, seed=5)
    wls = [_wl(i, submit=i * 100.0, run=1500, gpus=4) for i in range(1, 12)]
    out = Engine(pool, wls, make_policy(policy, pool), check=True, faults=faults).run()
    if policy != "kueue":  # the small pool has no Kueue queues: Kueue admits nothing
        assert all(j.state in ("COMPLETED", "NODE_FAIL") for j in out.jobs)
        assert sum(j.requeues for j in out.jobs) >= 1
