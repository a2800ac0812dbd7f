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
from gpupool.policy.slurm import gang, sharing

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
    rows = [{0: 16}, {0: 16}]
    jobs = {1: ({0: 8}, {0: 0}), 2: ({0: 16}, {0: 1}), 3: ({0: 8}, {0: 0})}
    assert sharing.releases_in_end_order(rows, jobs, [1, 2, 3]) == {1: {0: 0}, 2: {0: 8}, 3: {0: 8}}
    assert sharing.releases_in_end_order(rows, jobs, [2, 1, 3]) == {2: {0: 0}, 1: {0: 8}, 3: {0: 8}}
    assert rows == [{0: 16}, {0: 16}]  # the caller's rows are left as they were


def _two_partitions(share: str, jobs: list[tuple], nodes: str = "n1") -> dict:
    """Jobs (id, CPUs, partition s|x|t, submit, run_s, asks --oversubscribe) on 8-CPU nodes; s
    shares (``share``), t shares FORCE:2 too, x does not. Returns id -> (start, end)."""
    case = {"id": "r", "config": {"PriorityType": "fixed", "SchedulerParameters": {"bf_interval": 30}},
            "cluster": {"nodes": [{"name": nodes, "cpus": 8, "gpus": 4}],
                        "partitions": [{"name": "s", "nodes": nodes, "oversubscribe": share},
                                       {"name": "t", "nodes": nodes, "oversubscribe": "FORCE:2"},
                                       {"name": "x", "nodes": nodes}]},
            "jobs": [{"id": i, "submit": at, "cpus": c, "nodes": 1, "run_s": run, "time_limit_min": 20,
                      "partition": part, "oversubscribe": ask, "priority": 1000 - i}
                     for i, c, part, at, run, ask in jobs]}
    pool, _ = build_pool(case)
    wls, _ids = build_workloads(case)
    out = Engine(pool, wls, make_slurm(pool), check=True).run()
    return {j.id: (j.start, j.end) for j in out.jobs}


def test_rows_are_kept_so_idle_cpus_stay_idle():
    """Jobs 1 and 3 share CPUs; when job 2 (another partition) ends, its CPUs are idle again:
    job 4 starts on them at once (packing the rows again by count would put 1 and 3 into one
    row and hold their CPUs twice)."""
    got = _two_partitions("FORCE:2", [(1, 4, "s", 0, 600, False), (2, 4, "x", 0, 50, False),
                                      (3, 4, "s", 0, 600, False), (4, 4, "x", 100, 600, False)])
    assert got[4][0] == 100.0
    # the same with the other side sharing too (two sharing partitions on one node)
    got = _two_partitions("FORCE:2", [(1, 4, "s", 0, 600, False), (2, 4, "t", 0, 600, False),
                                      (3, 4, "s", 0, 600, False), (4, 4, "t", 100, 600, False)])
    assert got[4][0] == 100.0


@pytest.mark.parametrize("share,ask", [("FORCE:2", False), ("YES:2", True)])
def test_a_job_on_idle_cpus_takes_them_all(share, ask):
    """4 and 6 CPUs share the node's first 6; job 3 takes the 2 idle ones (in YES it did not
    ask, so they are its own), and job 4 of the unshared partition waits for the node."""
    got = _two_partitions(share, [(1, 4, "s", 0, 600, ask), (2, 6, "s", 0, 600, ask), (3, 2, "s", 0, 600, False),
                                  (4, 2, "x", 0, 600, False)])
    assert got[3][0] == 0.0 and got[4][0] == 600.0


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


def test_adopted_jobs_keep_sharing_their_cpus():
    """A live daemon restarting (or a replay) re-adopts two jobs co-allocated on all 8 CPUs of a
    FORCE:2 node: with the policy's ``cpu_share_of`` they share again; counted whole they would
    not fit."""
    case = {"id": "r", "config": {"PriorityType": "fixed"},
            "cluster": {"nodes": [{"name": "n1", "cpus": 8, "gpus": 4}],
                        "partitions": [{"name": "s", "nodes": "n1", "oversubscribe": "FORCE:2"},
                                       {"name": "y", "nodes": "n1", "oversubscribe": "YES:2"}]},
            "jobs": [{"id": i, "submit": 0, "cpus": 8, "nodes": 1, "run_s": 600, "time_limit_min": 20,
                      "partition": "s"} for i in (1, 2)]}
    pool, _ = build_pool(case)
    wls, _ids = build_workloads(case)
    eng = Engine(pool, [], make_slurm(pool), check=True)
    for wl in wls:  # FORCE:2: cpu_share_of gives 2 (next test)
        eng.adopt(wl, ((0, 0, 8000, 100),), started=0.0, submitted=0.0, partition="s", cpu_share=2)
    assert eng.nodes.shared_cpu[0] == {"s": 16000} and eng.nodes.free_cpu[0] == 8000
    with pytest.raises(InvariantViolation, match="exceeds capacity"):
        Engine(pool, [], make_slurm(pool), check=True).adopt(wls[0], ((0, 0, 9000, 100),), started=0.0,
                                                            submitted=0.0, partition="s")


def test_cpu_share_of_follows_the_partition_and_the_flag():
    """FORCE:N shares every job; YES:N only one that asks; another partition none."""
    case = {"id": "r", "config": {"PriorityType": "fixed"},
            "cluster": {"nodes": [{"name": "n1", "cpus": 8, "gpus": 4}],
                        "partitions": [{"name": "s", "nodes": "n1", "oversubscribe": "FORCE:3"},
                                       {"name": "y", "nodes": "n1", "oversubscribe": "YES:2"},
                                       {"name": "x", "nodes": "n1"}]},
            "jobs": [{"id": 1, "submit": 0, "cpus": 1, "run_s": 60, "partition": "s"},
                     {"id": 2, "submit": 0, "cpus": 1, "run_s": 60, "partition": "y", "oversubscribe": True}]}
    pool, _ = build_pool(case)
    wls, _ids = build_workloads(case)
    pol = make_slurm(pool)
    Engine(pool, wls, pol, check=True).run()  # sets the policy up on the pool's nodes
    asks, plain = wls[1], wls[0]
    assert pol.cpu_share_of(plain, "s") == 3 and pol.cpu_share_of(plain, "x") == 1
    assert pol.cpu_share_of(asks, "y") == 2 and pol.cpu_share_of(plain, "y") == 1


def test_an_exclusive_job_in_a_force_partition_is_co_allocated_with_the_whole_node():
    """A real 22.05.8 (FORCE:2, PreemptMode OFF, 8-CPU 4-GPU nodes, probe of 2026-12-02): an
    ``--exclusive -n2`` job beside a job holding all 8 CPUs ran at once on CPU_IDs 0-7 with GPUs
    0-3; ``--exclusive -n2 --gres=gpu:1`` beside a job holding GPU 0 waited (Resources), as
    GPUs are never shared."""
    case = {"id": "x", "config": {"PriorityType": "fixed", "SchedulerParameters": {"bf_interval": 30}},
            "cluster": {"nodes": [{"name": "n[1-2]", "cpus": 8, "gpus": 4}],
                        "partitions": [{"name": "f", "nodes": "n1", "oversubscribe": "FORCE:2"},
                                       {"name": "g", "nodes": "n2", "oversubscribe": "FORCE:2"}]},
            "jobs": [{"id": 1, "submit": 0, "cpus": 8, "run_s": 3000, "time_limit_min": 30, "partition": "f"},
                     {"id": 2, "submit": 0, "cpus": 2, "gpus_per_node": 1, "run_s": 3000, "time_limit_min": 30,
                      "partition": "g"},
                     {"id": 3, "submit": 5, "cpus": 2, "exclusive": True, "run_s": 3000, "time_limit_min": 30,
                      "partition": "f"},
                     {"id": 4, "submit": 5, "cpus": 2, "exclusive": True, "gpus_per_node": 1, "run_s": 3000,
                      "time_limit_min": 30, "partition": "g"}]}
    pool, _ = build_pool(case)
    wls, _ids = build_workloads(case)
    out = Engine(pool, wls, make_slurm(pool), check=True, until=50.0).run()
    jobs = {j.id: j for j in out.jobs}
    assert jobs[3].state == "RUNNING" and jobs[3].placement == ((0, 0b1111, 8000, 0),)
    assert (jobs[4].state, jobs[4].reason) == ("PENDING", "Resources")


def test_an_exclusive_multi_task_job_in_a_force_partition_ends_cleanly(tmp_path):
    # its tasks after the first hold no CPUs of their own on the node; releasing the job's
    # shared CPUs once raised KeyError (a review's fuzzing, 1.3 % of its random cases)
    from gpupool.engine.policy_api import make_policy
    from gpupool.formats.pool_dir import load_pool

    from tests.unit.sbatch_plans import workload

    (tmp_path / "slurm.conf").write_text(
        "ClusterName=fz\nSchedulerType=sched/backfill\nSelectType=select/cons_tres\n"
        "SelectTypeParameters=CR_Core_Memory\nDefMemPerCPU=100\nNodeName=n[1-2] CPUs=8 RealMemory=32000\n"
        "PartitionName=p1 Nodes=n[1-2] Default=YES MaxTime=60 OverSubscribe=FORCE:3\n")
    pool = load_pool(tmp_path)
    wls = [workload("j", "-n5 --exclusive -t 5", 0.0, 1, runtime=30.0),
           workload("k", "-n2 -t 5", 40.0, 2, runtime=30.0)]
    out = Engine(pool, wls, make_policy("slurm", pool), check=True).run()
    jobs = {j.id: j for j in out.jobs}
    assert (jobs[1].state, jobs[1].start, jobs[1].end) == ("COMPLETED", 0.0, 30.0)
    assert len({p[0] for p in jobs[1].placement}) == 1 and len(jobs[1].placement) == 5
    # the node is whole again: the next job runs at once
    assert (jobs[2].state, jobs[2].start) == ("COMPLETED", 40.0)


def test_shared_cpus_released_twice_are_an_invariant_violation():
    from gpupool.engine.nodes import NodeTable

    nodes = NodeTable(make_pool(), check=True)
    placement = ((0, 0b1, 8000, 1000), (0, 0, 0, 0))  # an exclusive job's second task holds no CPUs
    nodes.allocate_shared(placement, "p", 3)
    nodes.release_shared(placement, "p")
    assert nodes.shared_cpu[0] == {} and nodes.shared_floor(0) == 0
    nodes.allocate_held(((0, 0b1, 0, 1000),))  # (GPUs and memory back, so that only CPUs are wrong)
    with pytest.raises(InvariantViolation, match="released from sharing group 'p'"):
        nodes.release_shared(placement, "p")
