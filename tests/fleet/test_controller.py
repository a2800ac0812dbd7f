"""Service controllers in the engine: replicas, readiness, CrashLoopBackOff, restarts per policy."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpupool.fleet.controller import container_intervals
from gpupool.fleet.mapping import ServiceSettings, replica_workload
from gpupool.formats.pool_dir import load_pool
from gpupool.model.workload import Autoscaling, PodSet, RestartPolicy, Service
from gpupool.simulation import simulate

SEED = Path(__file__).resolve().parents[2] / "examples" / "seed-pool"


@pytest.fixture(scope="module")
def pool():
    return load_pool(SEED)


def service(**kw) -> Service:
    base = dict(name="web", pod=PodSet(cpu_m=4000, memory_mib=16384, gpus=1), replicas=3,
                namespace="ml-serving", queue_name="inference", priority_class="inference-high", priority=1000,
                capacity_rps=50.0, startup_time=60.0, traffic="diurnal?base=40&peak=400&days=0.25&bursts_per_day=0",
                autoscaling=Autoscaling(kind="fixed"))
    base.update(kw)
    return Service(**base)


def test_backoff_doubles_from_10s_to_a_5_minute_cap():
    r = RestartPolicy()
    assert [r.backoff(k) for k in range(1, 8)] == [10, 20, 40, 80, 160, 300, 300]


def test_container_intervals_follow_crashloopbackoff():
    class Fixed:  # crash 5 s after every (re)start
        def exponential(self, _):
            return 5.0

    ready, crashes = container_intervals(0.0, 200.0, 2.0, 1.0, RestartPolicy(), Fixed())
    # starts at 0, 15, 40, 85, 170 (backoffs 10, 20, 40, 80): each ready 2 s in, crashes 5 s in
    assert crashes == [5.0, 20.0, 45.0, 90.0, 175.0]
    assert ready == [(2.0, 5.0), (17.0, 20.0), (42.0, 45.0), (87.0, 90.0), (172.0, 175.0)]


def test_backoff_resets_after_ten_minutes_running():
    class Draws:
        def __init__(self):
            self.seq = iter([5.0, 700.0, 5.0])

        def exponential(self, _):
            return next(self.seq, 1e9)

    _, crashes = container_intervals(0.0, 2000.0, 0.0, 1.0, RestartPolicy(), Draws())
    # crash at 5 -> restart at 15 (10 s); ran 700 s -> count resets: restart after 10 s again
    assert crashes == [5.0, 715.0, 730.0]


@settings(max_examples=50, deadline=None)
@given(st.floats(1, 5000), st.floats(0, 600), st.integers(0, 10**6))
def test_ready_intervals_are_disjoint_and_inside_the_segment(mtbf, startup, seed):
    ready, crashes = container_intervals(100.0, 20000.0, startup, mtbf, RestartPolicy(), np.random.default_rng(seed))
    prev = 100.0
    for a, b in ready:
        assert prev <= a < b <= 20000.0
        assert a - startup >= 100.0 - 1e-9
        prev = b
    assert crashes == sorted(crashes)


def test_fixed_service_runs_its_replicas_and_serves(pool):
    r = simulate(pool, [], "fifo", services=[service()], check=True)
    s = r.summary_dict["services"]["by_service"]["web"]
    assert s["peak_replicas"] == 3 and s["replica_jobs"] == 3
    # 3 GPUs for 6 hours; ready capacity 150 rps, so the 400 rps peak is partly dropped
    assert s["gpu_hours"] == pytest.approx(18.0)
    assert 0 < s["requests_dropped"] < s["requests_offered"]
    assert s["slo_attainment"] < 1.0 and s["restarts"] == 0
    jobs = r.jobs[r.jobs["kind"] == "service"]
    assert set(jobs["state"]) == {"CANCELLED"} and (jobs["end"] == 6 * 3600).all()


def test_hpa_follows_the_load_and_meets_the_slo_with_room(pool):
    svc = service(autoscaling=Autoscaling(kind="hpa"), replicas=2, min_replicas=2, max_replicas=16)
    r = simulate(pool, [], "kueue", services=[svc], check=True)
    s = r.summary_dict["services"]["by_service"]["web"]
    assert s["peak_replicas"] > 2
    assert s["slo_attainment"] > 0.9 and s["served_fraction"] > 0.98
    ctrl = r.fleet.controllers[0]
    assert max(c for _, c, _, _ in ctrl.decisions) <= 16


def test_crashes_restart_in_place_under_kubernetes_and_requeue_under_slurm(pool):
    svc = service(mtbf_s=1800.0, seed=7)
    k = simulate(pool, [], "kueue", services=[svc], check=True)
    ks = k.summary_dict["services"]["by_service"]["web"]
    assert ks["restart_mode"] == "inplace" and ks["restarts"] > 0
    assert ks["replica_jobs"] == 3  # pods keep their GPUs: no new workloads
    s = simulate(pool, [], "slurm", services=[svc], check=True)
    ss = s.summary_dict["services"]["by_service"]["web"]
    assert ss["restart_mode"] == "requeue" and ss["restarts"] > 0
    assert ss["replica_jobs"] == 3 + ss["replacements"]
    failed = s.jobs[(s.jobs["kind"] == "service") & (s.jobs["state"] == "FAILED")]
    assert len(failed) == ss["restarts"]
    # each replacement waits out its CrashLoopBackOff delay before it is eligible
    assert (s.jobs.loc[s.jobs["kind"] == "service", "eligible"] >= s.jobs.loc[s.jobs["kind"] == "service", "submit"]).all()


def test_slurm_replica_mapping_uses_pool_settings(pool):
    from gpupool.fleet import service_settings

    settings = service_settings(pool)
    wl = replica_workload(service(), 99, "web-0", 0.0, "slurm", settings, pool)
    assert (wl.qos, wl.account, wl.user) == ("serving", "ml-serving", "carol")
    assert wl.time_limit == 2 * 86400  # partition train's MaxTime
    assert not wl.ends_on_eviction
    k8s = replica_workload(service(), 99, "web-0", 0.0, "kueue", settings, pool)
    assert k8s.time_limit is None and k8s.ends_on_eviction and k8s.queue_name == "inference"
    custom = replica_workload(service(), 99, "web-0", 0.0, "slurm",
                              replace(settings, slurm=replace(settings.slurm, time_limit=3600.0)), pool)
    assert custom.time_limit == 3600.0
    assert replica_workload(service(), 1, "x", 0, "slurm", ServiceSettings(), pool).qos is None


def test_replicas_restart_elsewhere_when_their_node_fails(pool):
    from gpupool.engine.core import NodeEvent

    svc = service(replicas=4)
    r = simulate(pool, [], "kueue", services=[svc], check=True,
                 faults=[NodeEvent(3600.0, "gpu01", "down"), NodeEvent(3600.0, "gpu02", "down")])
    replicas = r.jobs[r.jobs["kind"] == "service"]
    assert replicas["requeues"].sum() >= 1  # the pods on the failed nodes came back elsewhere
    ev = r.events
    assert not ev[(ev["event"] == "node_fail")].empty
    s = r.summary_dict["services"]["by_service"]["web"]
    # four replicas still run on the two healthy nodes after a start-up gap
    assert s["gpu_hours"] > 4 * 5.5 and s["slo_attainment"] > 0.5


@pytest.mark.skipif(not Path("/work/shared/traces/alibaba-dlrm-inference-2025").exists(),
                    reason="the shared DLRM trace is not here")
def test_replay_follows_the_dlrm_trace_replica_counts(pool):
    from gpupool.fleet.traffic import load_traffic

    # app_111: between 1 and 3 GPU instances alive in the trace's first 6 hours; replay them
    spec = "dlrm:app_111?hours=6&rps_per_instance=35&step_s=300"
    traffic = load_traffic(spec)
    svc = service(traffic=spec, replicas=0, min_replicas=0, max_replicas=64, startup_time=0.0,
                  autoscaling=Autoscaling(kind="replay"), capacity_rps=50.0)
    r = simulate(pool, [], "kueue", services=[svc], check=True)
    ctrl = r.fleet.controllers[0]
    want = {t: min(64, round(traffic.at(t) / 35)) for t, _, _, _ in ctrl.decisions}
    assert all(desired == want[t] for t, _, _, desired in ctrl.decisions)
    assert max(want.values()) == 3 and min(want.values()) == 1
    assert r.summary_dict["services"]["by_service"]["web"]["peak_replicas"] == 3
