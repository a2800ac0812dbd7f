"""Invariants with both shapes in one pool, over random services and training jobs (hypothesis).

- no GPU is ever held by two jobs at once (the engine's checker, plus an independent check
  over every run segment's devices);
- a service never has more replicas than its maxReplicas, at any instant;
- the autoscaler's every decision is within [minReplicas, maxReplicas].
"""
from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpupool.engine.core import Engine
from gpupool.engine.executor import SimulatedExecutor
from gpupool.engine.nodes import mask_indices
from gpupool.engine.policy_api import make_policy
from gpupool.fleet import Fleet
from gpupool.formats.pool_dir import load_pool
from gpupool.model.workload import Autoscaling, PodSet, Service, Workload

SEED = Path(__file__).resolve().parents[2] / "examples" / "seed-pool"
POOL = load_pool(SEED)


class Probe:
    """Executor wrapper that records which devices each run segment held."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.open: dict[int, list] = {}
        self.spans: list[tuple[int, int, float, float, int]] = []  # (node, gpu, start, end, job)

    def launch(self, job, now):
        end, state = self.inner.launch(job, now)
        self.open[job.id] = [(node, mask) for node, mask, _, _ in job.placement]
        self._end = getattr(self, "_end", {})
        self._end[job.id] = (now, end)
        return end, state

    def stop(self, job, now, reason):
        self.inner.stop(job, now, reason)
        self._close(job.id, now)

    def _close(self, job_id, now):
        if job_id in self.open:
            start, _ = self._end[job_id]
            for node, mask in self.open.pop(job_id):
                for g in mask_indices(mask):
                    self.spans.append((node, g, start, now, job_id))

    def finish_all(self, engine):
        for job_id in list(self.open):
            job = engine.jobs[job_id]
            _, end = self._end[job_id]
            self._close(job_id, job.end if job.end is not None else min(end, engine.now))


def run(workloads, services, policy):
    pol = make_policy(policy, POOL, {})
    fleet = Fleet(POOL, services, policy, SimulatedExecutor(pol.over_time_limit, 0.0),
                  max((w.id for w in workloads), default=0) + 1)
    probe = Probe(fleet.recorder)
    engine = Engine(POOL, workloads, pol, check=True, executor=probe)
    fleet.attach(engine)
    engine.run()
    probe.finish_all(engine)
    return engine, fleet, probe


training = st.builds(
    lambda i, t, gpus, pods, hours, prio: Workload(
        id=i, name=f"t{i}", pod_sets=(PodSet(count=pods, cpu_m=8000, memory_mib=65536, gpus=gpus),),
        submit_time=t, runtime=hours * 3600.0, namespace="ml-training", queue_name="training",
        priority_class=prio[0], priority=prio[1], account="ml-research", user="alice", partition="train",
        checkpoint_interval=1800.0),
    st.just(0), st.floats(0, 20000), st.sampled_from([1, 2, 4, 8]), st.integers(1, 2), st.floats(0.2, 6),
    st.sampled_from([("training-low", 100), ("training-high", 500)]),
)

services = st.builds(
    lambda k, lo, span, kind, gpus, mtbf, base, peak, seed: Service(
        name=f"s{k}", pod=PodSet(cpu_m=4000, memory_mib=32768, gpus=gpus), replicas=lo, min_replicas=lo,
        max_replicas=lo + span, namespace="ml-serving", queue_name="inference", priority_class="inference-high",
        priority=1000, capacity_rps=40.0, startup_time=120.0, autoscaling=Autoscaling(kind=kind),
        mtbf_s=mtbf, traffic=f"diurnal?base={base}&peak={base + peak}&days=0.3&bursts_per_day=6&seed={seed}",
        seed=seed),
    st.just(0), st.integers(0, 3), st.integers(1, 10), st.sampled_from(["hpa", "kpa", "fixed"]),
    st.sampled_from([1, 2]), st.sampled_from([None, 900.0, 7200.0]), st.integers(0, 200), st.integers(0, 800),
    st.integers(0, 50),
)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(training, max_size=12), st.lists(services, min_size=1, max_size=2),
       st.sampled_from(["kueue", "slurm", "fifo", "kueue-gang"]))
def test_no_double_allocation_and_replicas_within_max(jobs, svcs, policy):
    jobs = [Workload(**{**{f: getattr(w, f) for f in w.__dataclass_fields__}, "id": i + 1})
            for i, w in enumerate(jobs)]
    svcs = [Service(**{**{f: getattr(s, f) for f in s.__dataclass_fields__}, "name": f"svc{i}"})
            for i, s in enumerate(svcs)]
    engine, fleet, probe = run(jobs, svcs, policy)
    # 1. every device is held by at most one run segment at a time
    by_gpu = defaultdict(list)
    for node, g, s, e, job in probe.spans:
        if e > s:
            by_gpu[(node, g)].append((s, e, job))
    for spans in by_gpu.values():
        spans.sort()
        for (s1, e1, j1), (s2, e2, j2) in zip(spans, spans[1:]):
            assert s2 >= e1 - 1e-9, f"jobs {j1} and {j2} share a GPU"
    # 2. no service ever has more replica workloads alive than maxReplicas
    for ctrl in fleet.controllers:
        points = []
        for rec in ctrl.records.values():
            job = engine.jobs[rec.job_id]
            end = job.end if job.end is not None else engine.now
            points += [(rec.created, 1), (end, -1)]
        level = peak = 0
        for _, d in sorted(points, key=lambda p: (p[0], p[1])):
            level += d
            peak = max(peak, level)
        assert peak <= ctrl.svc.hi
        assert all(ctrl.svc.lo <= desired <= ctrl.svc.hi for _, _, _, desired in ctrl.decisions)
        assert all(ready <= current for _, current, ready, _ in ctrl.decisions)
