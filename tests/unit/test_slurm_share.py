"""CPU sharing without gang scheduling (OverSubscribe=FORCE:N / YES:N, PreemptMode OFF): the
engine's shared-CPU bookkeeping, and the Slurm policy's co-allocation checked on random
workloads. The decisions themselves are the cases ``share-gp-001``/``share-gp-002`` and the
differential test ``tests/differential/test_real_slurm_oversubscribe.py``."""
from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from gpupool.conformance.slurm_cases import build_pool, build_workloads
from gpupool.engine.core import Engine
from gpupool.engine.decisions import Resume, Start, Suspend
from gpupool.errors import InvariantViolation
from gpupool.policy.slurm import gang

from tests.unit.test_engine_suspend import Script, make_pool, wl


def shared(jid: int, mask: int, cpu: int = 8000, n: int = 2, group: str = "p") -> Start:
    return Start(jid, ((0, mask, cpu, 1000),), partition=group, cpu_share=n)


def test_shared_starts_run_at_once_on_the_same_cpus():
    pol = Script({0.0: [shared(1, 0b1), shared(2, 0b10)]})
    out = Engine(make_pool(), [wl(1, 1, 0, 60), wl(2, 1, 0, 90)], pol, check=True).run()
    jobs = {j.id: j for j in out.jobs}
    assert (jobs[1].start, jobs[1].end, jobs[2].start, jobs[2].end) == (0, 60, 0, 90)
    assert jobs[1].suspended_s == jobs[2].suspended_s == 0


def test_more_ways_than_the_partition_allows_is_refused():
    with pytest.raises(InvariantViolation, match="shared more than 2 ways"):
        Engine(make_pool(), [wl(i, 1, 0, 60) for i in (1, 2, 3)],
               Script({0.0: [shared(1, 0b1), shared(2, 0b10), shared(3, 0b100)]}), check=True).run()
    # an unshared job needs CPUs the sharing ones leave: 2 x 8000m shared 2 ways hold the node
    with pytest.raises(InvariantViolation, match="exceeds capacity"):
        Engine(make_pool(), [wl(i, 1, 0, 60) for i in (1, 2, 3)],
               Script({0.0: [shared(1, 0b1), shared(2, 0b10), Start(3, ((0, 0b100, 1000, 1000),))]}),
               check=True).run()


def test_gpus_are_never_shared():
    with pytest.raises(InvariantViolation, match="allocated twice"):
        Engine(make_pool(), [wl(1, 1, 0, 60), wl(2, 1, 0, 60)],
               Script({0.0: [shared(1, 0b1), shared(2, 0b1)]}), check=True).run()


def test_a_sharing_job_keeps_its_cpus_while_suspended_and_releases_everything_at_its_end():
    pool = make_pool()
    pol = Script({0.0: [shared(1, 0b1, 4000)], 10.0: [Suspend(1)],
                  20.0: [lambda snap: _probe(snap)], 30.0: [Resume(1)]})
    seen = {}

    def _probe(snap):
        seen["free_cpu"] = snap.nodes.free_cpu[0]
        seen["floor"] = snap.nodes.shared_floor(0)
        return Start(2, ((0, 0b10, 6000, 1000),))  # 6000m + 4000m/2 shared fits 8000m
    out = Engine(pool, [wl(1, 1, 0, 60, cpu_m=4000), wl(2, 1, 0, 10, cpu_m=6000)], pol, check=True).run()
    assert seen == {"free_cpu": 8000, "floor": 2000}
    jobs = {j.id: j for j in out.jobs}
    assert jobs[1].suspended_s == 20 and jobs[1].end == 80
    with pytest.raises(InvariantViolation, match="cannot be suspended"):
        Engine(make_pool(), [wl(1, 1, 0, 60)],
               Script({0.0: [Start(1, ((0, 1, 8000, 1000),), partition="p", cpu_share=2, suspended=True)]}),
               check=True).run()


def test_releases_follow_the_fullest_row():
    # rows: [1: 8, 3: 8] and [2: 16] on one 16-CPU node; ending 1, then 2, then 3
    jobs = [(1, {0: 8}), (2, {0: 16}), (3, {0: 8})]
    assert gang.releases_in_end_order(jobs, [1, 2, 3], [16]) == {1: {0: 0}, 2: {0: 8}, 3: {0: 8}}
    assert gang.releases_in_end_order(jobs, [2, 1, 3], [16]) == {2: {0: 0}, 1: {0: 8}, 3: {0: 8}}


_jobs_st = st.lists(
    st.tuples(st.integers(0, 200), st.integers(1, 8), st.integers(0, 2), st.integers(10, 600),
              st.integers(1, 12), st.booleans(), st.booleans(), st.integers(1, 2)),
    min_size=1, max_size=14)


@settings(max_examples=60, deadline=None)
@given(_jobs_st, st.sampled_from(["FORCE:2", "FORCE:3", "YES:2", "FORCE"]), st.sampled_from([1, 50]))
def test_property_sharing_without_gang(specs, share, queue_depth):
    """Random jobs in a sharing partition and an unshared one over the same two nodes, with
    backfill: the engine's checks hold (no GPU twice; unshared CPUs plus each group's CPUs
    spread over its N ways fit every node), every job ends once and is never suspended, the
    partition's jobs on a node never hold more than N times its CPUs, and in YES a job that did
    not ask ``--oversubscribe`` only ever has CPUs nobody else holds."""
    n_ways = gang.max_share(share)
    case = {
        "id": "prop",
        "config": {"PriorityType": "fixed",
                   "SchedulerParameters": {"bf_interval": 30, "default_queue_depth": queue_depth}},
        "cluster": {"nodes": [{"name": "n[1-2]", "cpus": 8, "gpus": 4}],
                    "partitions": [{"name": "s", "nodes": "n[1-2]", "oversubscribe": share},
                                   {"name": "x", "nodes": "n[1-2]"}]},
        "jobs": [{"id": i + 1, "submit": t, "cpus": c * n, "nodes": n, "gpus_per_node": g, "run_s": r,
                  "time_limit_min": tl, "partition": "x" if alone else "s", "oversubscribe": ask,
                  "priority": 100 + i}
                 for i, (t, c, g, r, tl, alone, ask, n) in enumerate(specs)],
    }
    pool, _ = build_pool(case)
    wls, _ids = build_workloads(case)
    out = Engine(pool, wls, make_slurm(pool), check=True).run()
    spec = {w.id: case["jobs"][k] for k, w in enumerate(wls)}
    total = pool.nodes["n1"].cpu_millicores
    for job in out.jobs:
        assert job.final_state in ("COMPLETED", "TIMEOUT") and job.suspended_s == 0
    instants = sorted({j.start for j in out.jobs})
    for t in instants:
        running = [j for j in out.jobs if j.start <= t < j.end]
        for node in range(len(pool.nodes)):
            here = [(j, sum(p[2] for p in j.placement if p[0] == node)) for j in running
                    if any(p[0] == node for p in j.placement)]
            part_s = sum(c for j, c in here if spec[j.id]["partition"] == "s")
            part_x = sum(c for j, c in here if spec[j.id]["partition"] == "x")
            assert part_s <= n_ways * total and part_x + -(-part_s // n_ways) <= total
            if share.startswith("YES"):
                # a job that did not ask sits on CPUs nobody else holds: beside the jobs that
                # asked, which hold at least their largest job's CPUs and their sum over N ways
                alone = sum(c for j, c in here if spec[j.id]["partition"] == "x" or not spec[j.id]["oversubscribe"])
                asked = [c for j, c in here if spec[j.id]["partition"] == "s" and spec[j.id]["oversubscribe"]]
                held = max(max(asked, default=0), -(-sum(asked) // n_ways))
                assert alone + held <= total, (t, node, [(j.id, c) for j, c in here])


def make_slurm(pool):
    import gpupool.policy.slurm  # noqa: F401  (registers the policy)
    from gpupool.engine.policy_api import make_policy

    return make_policy("slurm", pool, {})
