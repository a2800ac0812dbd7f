"""Kueue's own scheduler perf test, simulated end to end under ``--policy kueue`` (issue 4).

Shape (``../shared/spec/traces.md`` §3.2, ``kubernetes-sigs/kueue:test/performance/scheduler``):

* **baseline**: 5 cohorts x 6 ClusterQueues; each CQ: cpu nominalQuota 20, borrowingLimit 100,
  ``reclaimWithinCohort: Any``, ``withinClusterQueue: LowerPriority``; per CQ 350 small
  (1 CPU, 200 ms, priority 50, one every 100 ms), 100 medium (5 CPU, 500 ms, priority 100,
  every 500 ms) and 50 large (20 CPU, 1,000 ms, priority 200, every 1,200 ms) = 15,000 workloads.
* **large**: 10 cohorts x 100 CQs = 1,000 CQs, 50 workloads each = 50,000 (the spec gives no
  per-class split: the baseline's 7:2:1 is kept, i.e. 35 small, 10 medium, 5 large per CQ, with the
  same quotas, sizes, runtimes and intervals).

Kueue's harness runs "minimalkueue" against envtest with no nodes: a workload finishes
``runtimeMs`` after admission. gpupool needs nodes to place pods, so the pool gets 20% more CPU
than the total nominal quota in nodes of 200 CPU: placement never binds before quota does and
admission = start. The run is the real engine with the real ``kueue`` policy; the same jobs
under ``fifo`` (no queues, no quota) give the baseline ratio measured in the same run.

Also measured, from the same run: what one ``decide`` (Kueue cycles to quiescence at one
instant) costs by how many jobs are pending (30 vs 1,000 ClusterQueues between the shapes), and
the simulated time-to-admission per class against the limits Kueue's ``rangespec.yaml`` asserts
(Kueue's own figures include API-server latency, which gpupool does not simulate). Times are
process CPU seconds (the cost on one core) and wall seconds.
"""
from __future__ import annotations

import argparse
import gc
import json
import platform
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # runnable as a plain script from a checkout
    sys.path.insert(0, str(REPO))

import gpupool.policy.kueue  # noqa: F401  (registers kueue)
from gpupool.engine.core import Engine
from gpupool.engine.policy_api import make_policy
from gpupool.model.kueue import (
    ClusterQueue,
    Cohort,
    FlavorQuotas,
    KueueConfig,
    LocalQueue,
    Preemption,
    ResourceFlavor,
    ResourceGroup,
    ResourceQuota,
)
from gpupool.model.pool import Node, Pool
from gpupool.model.workload import PodSet, Workload

#: (class, cpu, runtime s, priority, interval s, count per CQ in the baseline)
CLASSES = (("small", 1, 0.2, 50, 0.1, 350), ("medium", 5, 0.5, 100, 0.5, 100), ("large", 20, 1.0, 200, 1.2, 50))
#: Kueue's rangespec.yaml: average time-to-admission limits (s) and the means it observed.
RANGESPEC = {
    "baseline": {"wall_limit_s": 425.0, "wall_mean_s": 351.116,
                 "wait_limit_s": {"large": 23.0, "medium": 90.0, "small": 260.0},
                 "wait_mean_s": {"large": 16.5, "medium": 76.8, "small": 215.5}, "min_cq_usage": 0.50},
    "large": {"wall_limit_s": 1416.0, "wall_mean_s": 1179.411,
              "wait_limit_s": None,
              "wait_mean_s": {"large": 105.6, "medium": 256.4, "small": 700.4}, "min_cq_usage": 0.316},
}
SHAPES = {"baseline": (5, 6, 1.0), "large": (10, 100, 0.1)}  # cohorts, CQs per cohort, workload scale
NOMINAL, BORROWING_LIMIT = 20, 100
NODE_CPUS = 200


def perf_pool(cohorts: int, cqs_per_cohort: int) -> Pool:
    """Kueue objects of the perf generator plus nodes with 20% more CPU than all quota."""
    kueue = KueueConfig()
    kueue.flavors["default"] = ResourceFlavor("default")
    for c in range(cohorts):
        kueue.cohorts[f"cohort-{c}"] = Cohort(f"cohort-{c}")
        for q in range(cqs_per_cohort):
            name = f"cq-{c}-{q}"
            quota = ResourceQuota(NOMINAL * 1000, BORROWING_LIMIT * 1000)
            kueue.cluster_queues[name] = ClusterQueue(
                name, cohort=f"cohort-{c}",
                resource_groups=[ResourceGroup(("cpu",), [FlavorQuotas("default", {"cpu": quota})])],
                namespace_selector={}, preemption=Preemption("Any", "Never", None, "LowerPriority"))
            kueue.local_queues[(f"ns-{c}-{q}", "lq")] = LocalQueue(f"ns-{c}-{q}", "lq", name)
    total = cohorts * cqs_per_cohort * NOMINAL
    n_nodes = max(1, -(-int(total * 1.2) // NODE_CPUS))
    nodes = {f"node-{i}": Node(f"node-{i}", NODE_CPUS, 1024 * 1024, state="IDLE",
                               labels={"kubernetes.io/hostname": f"node-{i}"}) for i in range(n_nodes)}
    return Pool("kueue-perf", nodes=nodes, kueue=kueue)


def perf_workloads(cohorts: int, cqs_per_cohort: int, scale: float = 1.0) -> list[Workload]:
    """Every CQ's small/medium/large series, submitted at multiples of their intervals."""
    out: list[Workload] = []
    for c in range(cohorts):
        for q in range(cqs_per_cohort):
            for cls, cpu, runtime, prio, interval, count in CLASSES:
                for i in range(max(1, round(count * scale))):
                    out.append(Workload(0, f"{cls}-{c}-{q}-{i}", (PodSet(cpu_m=cpu * 1000, memory_mib=0),),
                                        submit_time=round(i * interval, 6), runtime=runtime,
                                        namespace=f"ns-{c}-{q}", queue_name="lq", priority=prio,
                                        labels={"perf-class": cls}))
    out.sort(key=lambda w: (w.submit_time, w.name))
    return [Workload(i + 1, w.name, w.pod_sets, submit_time=w.submit_time, runtime=w.runtime,
                     namespace=w.namespace, queue_name=w.queue_name, priority=w.priority, labels=w.labels)
            for i, w in enumerate(out)]


class _Meter:
    """Per ``decide``: pending jobs, Kueue cycles run and seconds (two clock reads per call)."""

    def __init__(self, policy) -> None:
        import gpupool.policy.kueue.policy as kp

        self.rows: list[tuple[int, int, float]] = []
        self.cycles = 0
        self._kp = kp
        self._run_cycle = kp.run_cycle
        inner = policy.decide
        clock = time.perf_counter

        def run_cycle(*args, **kw):
            self.cycles += 1
            return self._run_cycle(*args, **kw)

        def decide(snap):
            before = self.cycles
            t0 = clock()
            out = inner(snap)
            self.rows.append((len(snap.pending), self.cycles - before, clock() - t0))
            return out

        kp.run_cycle = run_cycle
        policy.decide = decide

    def close(self) -> None:
        self._kp.run_cycle = self._run_cycle

    def by_backlog(self) -> list[dict]:
        """Mean cost of a decide (and of one cycle) by how many jobs were pending."""
        out = []
        for lo, hi in ((0, 100), (100, 1_000), (1_000, 10_000), (10_000, 10**9)):
            rows = [r for r in self.rows if lo <= r[0] < hi]
            if not rows:
                continue
            secs = sum(r[2] for r in rows)
            cycles = sum(r[1] for r in rows)
            out.append({"pending": f"{lo}-{hi if hi < 10**9 else 'inf'}", "decides": len(rows),
                        "ms_per_decide": round(secs / len(rows) * 1000, 3),
                        "cycles_per_decide": round(cycles / len(rows), 2),
                        "ms_per_cycle": round(secs / cycles * 1000, 3) if cycles else None})
        return out


def _timed_run(pool: Pool, workloads: list[Workload], policy: str, meter: bool = False):
    """Wall and process CPU seconds of one engine run (CPU time = the cost on one core; the
    wall clock also counts whatever else the machine runs)."""
    gc.collect()
    pol = make_policy(policy, pool)
    m = _Meter(pol) if meter else None
    engine = Engine(pool, workloads, pol, record_events=False)
    t0, c0 = time.perf_counter(), time.process_time()
    try:
        out = engine.run()
    finally:
        if m is not None:
            m.close()
    return time.perf_counter() - t0, time.process_time() - c0, out, m


def end_to_end(shape: str, scale: float | None = None, fifo: bool = True) -> dict:
    cohorts, per, default_scale = SHAPES[shape]
    scale = default_scale if scale is None else scale
    pool = perf_pool(cohorts, per)
    workloads = perf_workloads(cohorts, per, scale)
    seconds, cpu, out, meter = _timed_run(pool, workloads, "kueue", meter=True)
    jobs = out.jobs
    admitted = [j for j in jobs if j.first_start is not None]
    waits: dict[str, list[float]] = {}
    for j in admitted:
        waits.setdefault(j.wl.labels["perf-class"], []).append(j.first_start - j.submit)
    mean_wait = {c: round(sum(v) / len(v), 3) for c, v in sorted(waits.items())}
    spec = RANGESPEC[shape] if scale == default_scale else None
    row = {
        "shape": shape,
        "cluster_queues": cohorts * per,
        "workloads": len(workloads),
        "seconds": round(seconds, 3),
        "cpu_seconds": round(cpu, 3),
        "admissions": len(admitted),
        "admissions_per_cpu_s": round(len(admitted) / cpu, 1),
        "completed": sum(1 for j in jobs if j.state == "COMPLETED"),
        "simulated_end_s": round(out.end_time, 3),
        "preemptions": sum(j.preemptions for j in jobs),
        "decides": len(meter.rows),
        "cycles": meter.cycles,
        "cost_by_backlog": meter.by_backlog(),
        "mean_wait_s": mean_wait,
        "max_wait_s": {c: round(max(v), 3) for c, v in sorted(waits.items())},
        "work_over_nominal": round(_work_over_nominal(pool, workloads, out.end_time), 3),
    }
    if spec is not None:
        limits = spec["wait_limit_s"] or {}
        row["kueue_rangespec"] = spec
        row["waits_within_kueue_limits"] = {c: mean_wait.get(c, 0.0) <= lim for c, lim in limits.items()}
        row["simulated_end_vs_kueue_wall"] = round(out.end_time / spec["wall_mean_s"], 4)
    if fifo:
        _, fifo_cpu, _, _ = _timed_run(pool, workloads, "fifo")
        row["fifo_cpu_seconds"] = round(fifo_cpu, 3)
        row["ratio_to_fifo"] = round(cpu / fifo_cpu, 2)
    return row


def _work_over_nominal(pool: Pool, workloads: list[Workload], end: float) -> float:
    """CPU-seconds of work done over nominal CPU-seconds of the run (Kueue's harness reports
    usage per ClusterQueue; with borrowing a CQ can exceed 1, the whole cohort cannot)."""
    if end <= 0:
        return 0.0
    work = sum(w.runtime * w.pod_sets[0].cpu_m / 1000 for w in workloads)
    return work / (len(pool.kueue.cluster_queues) * NOMINAL * end)


def run_benchmark(shapes=("baseline", "large"), scale: float | None = None, fifo: bool = True) -> dict:
    return {"python": platform.python_version(), "runs": [end_to_end(s, scale, fifo) for s in shapes]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shape", action="append", choices=sorted(SHAPES), help="baseline, large (default both)")
    ap.add_argument("--scale", type=float, help="fraction of each CQ's workload series (smoke runs)")
    ap.add_argument("--no-fifo", action="store_true", help="skip the fifo baseline run")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    report = run_benchmark(tuple(args.shape or ("baseline", "large")), args.scale, not args.no_fifo)
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    for r in report["runs"]:
        print(f"{r['shape']}: {r['workloads']} workloads, {r['cluster_queues']} CQs: {r['cpu_seconds']} s CPU "
              f"({r['seconds']} s wall), {r['admissions_per_cpu_s']} admissions/CPU-s, "
              f"x{r.get('ratio_to_fifo')} fifo; {r['decides']} decides, {r['cycles']} cycles; "
              f"simulated end {r['simulated_end_s']} s; mean waits {r['mean_wait_s']}")
        for c in r["cost_by_backlog"]:
            print(f"  pending {c['pending']}: {c['decides']} decides, {c['ms_per_decide']} ms each, "
                  f"{c['cycles_per_decide']} cycles, {c['ms_per_cycle']} ms/cycle")
        if r.get("kueue_rangespec"):
            print(f"  Kueue's harness: wall mean {r['kueue_rangespec']['wall_mean_s']} s, mean waits "
                  f"{r['kueue_rangespec']['wait_mean_s']}, within its limits: {r.get('waits_within_kueue_limits')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
