"""Engine throughput and memory: replay a seeded synthetic month on examples/large-pool.

    python benchmarks/bench_engine.py                  # 100k jobs, fifo and first-fit
    python benchmarks/bench_engine.py --jobs 20000 --json
    python benchmarks/bench_engine.py --spec 'synthetic:month?seed=3&median=80' --submitted-before 16h \
        --policy slurm --cpu --no-memory      # the month's first busy stretch: a deep Slurm queue

Each policy's run is timed on its own (no tracer), then repeated under ``tracemalloc`` for the
peak of Python allocations during the run. Wall-clock figures depend on the machine, so every
time is also given as a ratio to a baseline measured in the same process: a minimal pure-Python
replay of the same jobs (one heap push and pop for each submission and each end, no policy and
no resources). ``engine_time / baseline_time`` is the figure to compare across machines and
over time (DESIGN.md: benchmarks are ratios against a baseline measured in the same run).
Target for the engine under fifo: at least 50k jobs/s on one core.
"""
from __future__ import annotations

import argparse
import gc
import heapq
import json
import platform
import resource
import sys
import time
import tracemalloc
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # runnable as a plain script from a checkout
    sys.path.insert(0, str(REPO))

from gpupool.engine.core import Engine  # noqa: E402
from gpupool.engine.policy_api import make_policy  # noqa: E402
from gpupool.formats.kube_services import parse_seconds  # noqa: E402
from gpupool.formats.pool_dir import load_pool  # noqa: E402
from gpupool.model.workload import Workload  # noqa: E402
from gpupool.workload.synthetic import generate, parse_synthetic_spec  # noqa: E402

DEFAULT_POOL = REPO / "examples" / "large-pool"
DEFAULT_POLICIES = ("fifo", "first-fit")
#: Job counts a policy is held to by default. Greedy first fit rescans its whole backlog after
#: every job end, and this month is overloaded at 100k jobs (a backlog of ~15k), so 100k takes
#: minutes; 40k keeps the default run short. ``--no-cap`` lifts it.
DEFAULT_CAPS = {"first-fit": 40_000}
MIB = 1024 * 1024


def baseline_replay(workloads: list[Workload]) -> int:
    """The reference loop: every job's submission and end through a heap, nothing else.

    It is the least any discrete-event replay of these jobs must do in Python, so the engine's
    time divided by this one measures the engine's own overhead, not the machine's speed.
    Returns the number of events popped (2 per job) so the work cannot be optimised away.
    """
    heap: list[tuple[float, int, int, float]] = []
    push, pop = heapq.heappush, heapq.heappop
    seq = 0
    for wl in workloads:
        seq += 1
        push(heap, (wl.submit_time, seq, 0, wl.runtime))
    popped = 0
    while heap:
        t, _, kind, runtime = pop(heap)
        popped += 1
        if kind == 0:
            seq += 1
            push(heap, (t + runtime, seq, 1, 0.0))
    return popped


def parse_duration(text: str) -> float:
    """Seconds from ``90``, ``90s``, ``30m``, ``16h``, ``2d`` or ``HH:MM:SS`` (``--submitted-before``),
    read as the project reads durations elsewhere (``kube_services.parse_seconds``)."""
    value = parse_seconds(text, "--submitted-before")
    if value <= 0:
        raise ValueError(f"--submitted-before: must be positive, got {text!r}")
    return value


def _timed(fn, repeat: int, clock=time.perf_counter) -> float:
    """Best of ``repeat`` times on ``clock`` (the least disturbed by other load), with GC
    settled. ``time.process_time`` (``--cpu``) counts this process's CPU seconds only, which
    a shared machine's other load disturbs far less than wall time."""
    best = float("inf")
    for _ in range(repeat):
        gc.collect()
        t0 = clock()
        fn()
        best = min(best, clock() - t0)
    return best


def run_benchmark(
    jobs: int = 100_000,
    *,
    seed: int = 3,
    pool_dir: str | Path = DEFAULT_POOL,
    policies: tuple[str, ...] = DEFAULT_POLICIES,
    record_events: bool = False,
    spec: str | None = None,
    repeat: int = 1,
    memory: bool = True,
    caps: dict[str, int] | None = None,
    cpu: bool = False,
    submitted_before: float | None = None,
) -> dict:
    """Generate ``jobs`` synthetic jobs, replay them under each policy, return the report.

    ``record_events`` matches the CLI default when True; the figure of record is without the
    event log. ``memory`` adds a second, traced run per policy for the tracemalloc peak.
    ``caps`` (default ``DEFAULT_CAPS``) holds a policy to fewer jobs; each result row names
    its own workload and carries the baseline measured on exactly those jobs. ``cpu`` times
    replays in process CPU seconds instead of wall seconds. ``submitted_before`` keeps only the
    jobs submitted before that many seconds: a slice of a longer workload that keeps its busy
    stretch as it is (the synthetic spec's ``duration`` draws a different, shorter workload);
    the slice runs until its last job ends.
    """
    clock = time.process_time if cpu else time.perf_counter
    pool = load_pool(pool_dir)
    caps = DEFAULT_CAPS if caps is None else caps
    workloads_by_size: dict[int, tuple[str, list[Workload], float, float]] = {}

    def workload_for(size: int) -> tuple[str, list[Workload], float, float]:
        if size not in workloads_by_size:
            text = spec or f"synthetic:month?jobs={size}&seed={seed}"
            t0 = time.perf_counter()
            wls = generate(pool, parse_synthetic_spec(text))
            if submitted_before is not None:
                # dependencies point at earlier submissions, so none is cut off
                wls = [w for w in wls if w.submit_time < submitted_before]
                text += f" (submitted before {submitted_before:g} s)"
            gen_s = time.perf_counter() - t0
            base_s = _timed(lambda: baseline_replay(wls), repeat, clock)
            workloads_by_size[size] = (text, wls, gen_s, base_s)
        return workloads_by_size[size]

    main_spec, workloads, generate_s, baseline_s = workload_for(jobs)
    n = len(workloads)
    results = []
    for name in policies:
        size = jobs if spec else min(jobs, caps.get(name, jobs))
        run_spec, workloads, _, run_base_s = workload_for(size)
        outputs = []

        def replay() -> None:
            engine = Engine(pool, workloads, make_policy(name, pool), record_events=record_events)
            outputs.append(engine.run())

        seconds = _timed(replay, repeat, clock)
        out = outputs[-1]
        outputs.clear()
        row = {
            "policy": name,
            "workload": run_spec,
            "jobs": len(workloads),
            "record_events": record_events,
            "seconds": round(seconds, 4),
            "jobs_per_s": round(len(workloads) / seconds, 1),
            "baseline_seconds": round(run_base_s, 4),
            "ratio_to_baseline": round(seconds / run_base_s, 3),
            "instants": len(out.timeline),
            "completed": sum(1 for j in out.jobs if j.state == "COMPLETED"),
            "simulated_end_s": out.end_time,
        }
        del out
        if memory:
            gc.collect()
            tracemalloc.start()
            tracemalloc.reset_peak()
            replay()
            _, peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
            outputs.clear()
            row["tracemalloc_peak_mib"] = round(peak / MIB, 2)
        results.append(row)

    return {
        "benchmark": "engine",
        "pool": str(Path(pool_dir).name),
        "workload": main_spec,
        "jobs": n,
        "generate_s": round(generate_s, 3),
        "baseline": {
            "what": "heap push/pop of a submit and an end event per job, no policy",
            "seconds": round(baseline_s, 4),
            "jobs_per_s": round(n / baseline_s, 1),
        },
        "results": results,
        # Linux reports KiB; the whole process's high-water mark (workload generation included).
        "ru_maxrss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "repeat": repeat,
        "clock": "cpu" if cpu else "wall",
        "python": platform.python_version(),
        "machine": platform.machine(),
    }


def _print_table(report: dict) -> None:
    print(f"{report['jobs']} jobs ({report['workload']}) on {report['pool']}; "
          f"generated in {report['generate_s']:.2f}s")
    base = report["baseline"]
    print(f"baseline replay: {base['seconds']:.3f}s ({base['jobs_per_s']:,.0f} jobs/s); {report['clock']} seconds")
    print(f"{'policy':<12}{'jobs':>8}{'seconds':>9}{'jobs/s':>11}{'x baseline':>12}{'peak MiB':>10}")
    for row in report["results"]:
        peak = row.get("tracemalloc_peak_mib")
        print(f"{row['policy']:<12}{row['jobs']:>8}{row['seconds']:>9.3f}{row['jobs_per_s']:>11,.0f}"
              f"{row['ratio_to_baseline']:>12.2f}{'' if peak is None else f'{peak:>10.1f}'}")
    print("x baseline: engine time / time of a bare heap replay of the same jobs (lower is better)")
    print(f"ru_maxrss: {report['ru_maxrss_mib']:.1f} MiB (whole process)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=100_000, help="synthetic jobs to generate (default 100000)")
    parser.add_argument("--seed", type=int, default=3)
    parser.add_argument("--pool", default=str(DEFAULT_POOL), help="pool directory (default examples/large-pool)")
    parser.add_argument("--policy", action="append", dest="policies",
                        help="policy to replay under (repeatable; default fifo and first-fit)")
    parser.add_argument("--record-events", action="store_true", help="keep the event log, as the CLI does")
    parser.add_argument("--repeat", type=int, default=1, help="time each run this many times, keep the best")
    parser.add_argument("--no-memory", action="store_true", help="skip the traced run for peak memory")
    parser.add_argument("--no-cap", action="store_true",
                        help=f"run every policy on --jobs (default caps: {DEFAULT_CAPS})")
    parser.add_argument("--spec", help="a synthetic workload spec instead of month?jobs=N (no caps), e.g. the "
                        "Helios-like month 'synthetic:month?seed=3&median=80' (README)")
    parser.add_argument("--submitted-before", type=parse_duration, metavar="TIME",
                        help="keep only the jobs submitted before TIME (seconds, or 30m, 16h, 2d): e.g. "
                        "the Helios-like month's first 16 h, where the Slurm queue is thousands deep")
    parser.add_argument("--cpu", action="store_true",
                        help="time in process CPU seconds instead of wall seconds (a shared machine)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args(argv)
    report = run_benchmark(
        args.jobs, seed=args.seed, pool_dir=args.pool, policies=tuple(args.policies or DEFAULT_POLICIES),
        record_events=args.record_events, repeat=args.repeat, memory=not args.no_memory,
        caps={} if args.no_cap else None, spec=args.spec, cpu=args.cpu,
        submitted_before=args.submitted_before,
    )
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        _print_table(report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
