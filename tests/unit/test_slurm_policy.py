"""End-to-end behaviour of --policy slurm on small pools (engine with check=True)."""
import pytest

from gpupool.engine.core import Engine
from gpupool.engine.policy_api import make_policy
from gpupool.model.pool import Gpu, Node, Pool
from gpupool.model.slurm import Accounting, Association, Partition, SlurmConfig, User
from gpupool.model.workload import PodSet, Workload


@pytest.fixture(autouse=True, scope="module")
def _slurm_registered():
    """"slurm" is registered for these tests; afterwards it is removed again unless
    ``policy_api._load_builtin`` imports gpupool.policy.slurm (other tests list the registry)."""
    import inspect

    from gpupool.engine import policy_api
    from gpupool.policy.slurm import policy as slurm_policy

    policy_api._REGISTRY.setdefault("slurm", (slurm_policy._slurm, slurm_policy.__doc__.split("\n")[0]))
    yield
    if "gpupool.policy.slurm" not in inspect.getsource(policy_api._load_builtin):
        policy_api._REGISTRY.pop("slurm", None)


def _pool(params=None, parts=None, n=1, cpus=1, gpus=0, acct=None):
    nodes = {f"n{i}": Node(f"n{i}", cpus, 1000, tuple(Gpu(k) for k in range(gpus)), state="IDLE") for i in range(n)}
    cfg = SlurmConfig(params=dict(params or {}), accounting=acct)
    for p in parts or [Partition("batch", tuple(nodes), default=True)]:
        cfg.partitions[p.name] = p
    return Pool("t", nodes=nodes, slurm=cfg)


def _wl(i, submit=0.0, run=100.0, tl=3600.0, **kw):
    ps = PodSet(count=1, cpu_m=kw.pop("cpus", 1) * 1000, gpus=kw.pop("gpus", 0), one_per_node=True)
    return Workload(i, f"j{i}", (ps,), submit_time=submit, runtime=run, time_limit=tl, **kw)


def _run(pool, wls):
    out = Engine(pool, wls, make_policy("slurm", pool), check=True).run()
    return {j.id: j for j in out.jobs}


def test_fair_share_orders_the_queue():
    acct = Accounting()
    acct.accounts = {"root": Association("root"), "a": Association("a", parent="root"),
                     "b": Association("b", parent="root")}
    acct.user_associations = [Association("a", user="ua"), Association("b", user="ub")]
    acct.users = {"ua": User("ua", "a"), "ub": User("ub", "b")}
    pool = _pool({"PriorityType": "priority/multifactor", "PriorityWeightFairshare": 10000}, acct=acct)
    jobs = _run(pool, [_wl(1, 0, 3600, user="ua"), _wl(2, 100, 10, user="ua"), _wl(3, 100, 10, user="ub")])
    assert jobs[3].start == 3600 and jobs[2].start == 3610


def test_submit_rejections_use_slurm_wording():
    pool = _pool(gpus=2)
    jobs = _run(pool, [_wl(1, gpus=8), _wl(2, partition="nope"), _wl(3)])
    assert jobs[1].state == "REJECTED" and jobs[1].reason == "Requested node configuration is not available"
    assert jobs[2].reason == "Invalid partition name specified"
    assert jobs[3].state == "COMPLETED"


def test_partition_time_limit_pends_or_rejects():
    part = Partition("batch", ("n0",), default=True, max_time=600)
    jobs = _run(_pool(parts=[part]), [_wl(1, tl=3600)])
    assert jobs[1].state == "PENDING" and jobs[1].reason == "PartitionTimeLimit"
    jobs = _run(_pool({"EnforcePartLimits": "ALL"}, parts=[part]), [_wl(1, tl=3600)])
    assert jobs[1].reason == "Requested time limit is invalid (missing or exceeds some limit)"


def test_partition_prio_preemption_requeues():
    low = Partition("low", ("n0",), default=True, priority_tier=1)
    high = Partition("high", ("n0",), priority_tier=10)
    pool = _pool({"PreemptType": "preempt/partition_prio", "PreemptMode": "REQUEUE"}, parts=[low, high])
    jobs = _run(pool, [_wl(1, 0, 1000, partition="low"), _wl(2, 100, 50, partition="high")])
    assert jobs[2].start == 100 and jobs[2].via == "SchedMain"
    assert jobs[1].requeues == 1 and jobs[1].eligible == 100 + 121 and jobs[1].start == 221


def test_array_max_running_and_default_time():
    part = Partition("batch", ("n0",), default=True, default_time=600)
    pool = _pool(parts=[part], cpus=4)
    wls = [_wl(10 + k, 0, 100, tl=None, array_job_id=10, array_task_id=k, array_max_running=1) for k in range(3)]
    jobs = _run(pool, wls)
    assert [jobs[10 + k].start for k in range(3)] == [0, 100, 200]


def test_builtin_never_backfills():
    pool = _pool({"SchedulerType": "sched/builtin"}, n=2)
    wls = [_wl(1, 0, 3600, cpus=1), Workload(2, "big", (PodSet(count=2, one_per_node=True),),
                                             submit_time=1, runtime=10, time_limit=60), _wl(3, 5, 60, tl=600)]
    jobs = _run(pool, wls)
    # job 2 (2 nodes) blocks the partition; job 3 (1 node, later) waits behind it
    assert jobs[2].start == 3600 and jobs[3].start == 3610
    pool = _pool({"SchedulerType": "sched/backfill"}, n=2)
    jobs = _run(pool, wls)
    assert jobs[3].start == 30 and jobs[3].via == "SchedBackfill" and jobs[2].start == 3600
