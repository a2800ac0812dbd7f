"""Invariants of --policy bridge over random mixes of native Slurm jobs and Kubernetes pods."""
from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpupool.engine.core import Engine, NodeEvent
from gpupool.engine.policy_api import make_policy
from gpupool.model.pool import Gpu, Node, Pool
from gpupool.model.slurm import Partition, SlurmConfig
from gpupool.model.workload import GANG_ALL, GANG_NONE, KIND_SERVICE, PodSet, Workload

_END = ("finished", "preempted", "requeued", "node_fail")


def holdings(out):
    """(job, node, begin, end) while each job held resources on each node, from the events
    (a gang's pods may be bound at different times: each node from its own first event)."""
    live: dict[int, dict[str, float]] = {}
    rows = []
    for t, what, job, detail in out.events:
        if what in ("placed", "started"):
            held = live.setdefault(job, {})
            for pod in detail.rsplit(" ", 1)[-1].split(";"):
                if ":" in pod:
                    held.setdefault(pod.split(":")[0], t)
        elif what in _END and job in live:
            rows += [(job, n, b, t) for n, b in live.pop(job).items()]
    rows += [(job, n, b, out.end_time) for job, held in live.items() for n, b in held.items()]
    return rows


def _pool(n):
    nodes = {f"n{i}": Node(f"n{i}", 16, 64000, tuple(Gpu(k) for k in range(4)), state="IDLE") for i in range(n)}
    cfg = SlurmConfig()
    cfg.partitions["batch"] = Partition("batch", tuple(nodes), default=True)
    return Pool("t", nodes=nodes, slurm=cfg)


job_st = st.tuples(
    st.booleans(),                      # Kubernetes (bridge) or native
    st.integers(1, 3),                  # pods
    st.integers(0, 4),                  # GPUs per pod
    st.integers(0, 400),                # submit
    st.integers(1, 500),                # runtime
    st.sampled_from(["per-pod", "group", "service"]),
)


def _workloads(specs):
    out = []
    for i, (k8s, pods, gpus, submit, run, shape) in enumerate(specs, start=1):
        ps = PodSet(count=pods, cpu_m=1000, memory_mib=100, gpus=gpus, one_per_node=not k8s and pods > 1)
        labels = {"scheduling.x-k8s.io/pod-group": f"g{i}"} if k8s and shape == "group" else {}
        out.append(Workload(
            i, f"w{i}", (ps,), submit_time=float(submit), runtime=float(run), time_limit=3600.0,
            gang=GANG_ALL if pods > 1 else GANG_NONE, kind=KIND_SERVICE if k8s and shape == "service" and pods == 1 else "batch",
            labels=labels, source="x.yaml (document 1)" if k8s else "x.sbatch"))
    return out


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(specs=st.lists(job_st, min_size=1, max_size=12), exclusive=st.booleans(), n=st.integers(1, 3),
       fail=st.one_of(st.none(), st.tuples(st.integers(0, 2), st.integers(1, 600))))
def test_no_double_allocation_and_no_mixed_hybrid_node(specs, exclusive, n, fail):
    pool = _pool(n)
    wls = _workloads(specs)
    faults = []
    if fail is not None and fail[0] < n:
        faults = [NodeEvent(float(fail[1]), f"n{fail[0]}", "down"), NodeEvent(float(fail[1] + 300), f"n{fail[0]}", "up")]
    policy = make_policy("bridge", pool, {"exclusive": exclusive})
    # check=True: the engine proves no GPU is allocated twice and every job ends once
    out = Engine(pool, wls, policy, check=True, faults=faults).run()
    bridge = {wl.id for wl in wls if policy.is_bridge(next(j for j in out.jobs if j.id == wl.id))}
    rows = holdings(out)
    for job, node, b, e in rows:
        for job2, node2, b2, e2 in rows:
            if node2 != node or job2 <= job or not (b < e2 and b2 < e):
                continue
            # a hybrid node never runs native Slurm jobs and bridge pods at the same time
            assert (job in bridge) == (job2 in bridge), (job, job2, node, b, e, b2, e2)
            # an exclusive bridge pod has its node to itself
            if exclusive and job in bridge:
                raise AssertionError(f"jobs {job} and {job2} share {node} under exclusive bridge pods")
