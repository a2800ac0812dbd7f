"""Cost of one Slurm backfill cycle against queue depth (issue 3).

A synthetic backlog on ``examples/large-pool``: every node is held by a long exclusive job
(time limits spread over 1 h .. 48 h, so reservations land at different times), and ``depth``
pending jobs, drawn from the seeded synthetic month (its shapes, users, accounts and
partitions), are submitted at t = 1 s. The engine runs under ``--policy slurm`` up to the first
backfill cycle (t = bf_interval); that one ``backfill.run`` call is timed (best of
``--repeat``) and the run is stopped. Each depth is reported as seconds per cycle and as a
ratio to the depth-100 cost measured in the same run: with the cycle bounded by
``bf_max_job_test`` (1000 in examples/large-pool) the cost must not grow quadratically.
Times are process CPU seconds.

The cycle is timed whole, every record planned (the policy's ``record`` option, as squeue
--start needs it), and again as a simulation runs it without plans to record: such a cycle ends
once no later record can start now, which in this backlog (every node held) is at once, so
that column is the cost of finding that out.
"""
from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from gpupool.engine.core import Engine
from gpupool.engine.policy_api import make_policy
from gpupool.formats.pool_dir import load_pool
from gpupool.model.workload import PodSet, Workload
from gpupool.policy.slurm import backfill
from gpupool.workload.synthetic import generate, parse_synthetic_spec

DEFAULT_POOL = REPO / "examples" / "large-pool"
DEFAULT_DEPTHS = (100, 1_000, 10_000)


class _Stop(Exception):
    pass


def backlog(pool, depth: int, seed: int) -> list[Workload]:
    """Fillers holding every node, then ``depth`` pending jobs from the synthetic month."""
    n_nodes = len(pool.nodes)
    out: list[Workload] = []
    for i in range(n_nodes):
        limit = 3600.0 * (1 + (i * 47) % 48)  # 1 h .. 48 h, spread over the nodes
        out.append(Workload(i + 1, f"fill-{i}", (PodSet(exclusive=True),), submit_time=0.0,
                            runtime=limit, time_limit=limit, partition="train"))
    spec = f"synthetic:month?jobs={max(depth * 2, 1000)}&seed={seed}"
    pending = [w for w in generate(pool, parse_synthetic_spec(spec)) if w.dependency is None]
    for k, wl in enumerate(pending[:depth]):
        out.append(dataclasses.replace(wl, id=n_nodes + k + 1, submit_time=1.0, begin_time=None,
                                       array_job_id=None, array_task_id=None, array_max_running=None))
    return out


def time_cycle(pool, workloads: list[Workload], record: bool = True) -> dict:
    """Run to the first backfill cycle and time that one ``backfill.run`` call (``record``: the
    whole cycle, every plan kept; else as a simulation runs it)."""
    original = backfill.run
    seen: dict = {}

    def timed(cy, records):
        t0 = time.process_time()  # CPU seconds: the least disturbed by a shared machine's load
        original(cy, records)
        seen["seconds"] = time.process_time() - t0
        seen["records"] = len(records)
        seen["planned"] = len(cy.pol.planned)
        seen["started"] = sum(1 for v in cy.started.values() if v[2] == backfill.VIA_BACKFILL)
        seen["now"] = cy.now
        raise _Stop

    backfill.run = timed
    try:
        gc.collect()
        Engine(pool, workloads, make_policy("slurm", pool, {"record": record}), record_events=False).run()
    except _Stop:
        pass
    finally:
        backfill.run = original
    if "seconds" not in seen:
        raise RuntimeError("no backfill cycle ran")
    return seen


def run_benchmark(depths=DEFAULT_DEPTHS, *, seed: int = 3, pool_dir=DEFAULT_POOL, repeat: int = 3) -> dict:
    pool = load_pool(pool_dir)
    rows = []
    for depth in depths:
        wls = backlog(pool, depth, seed)
        best = min((time_cycle(pool, wls) for _ in range(repeat)), key=lambda r: r["seconds"])
        pruned = min((time_cycle(pool, wls, record=False) for _ in range(repeat)), key=lambda r: r["seconds"])
        rows.append({"depth": depth, "queue_records": best["records"], "seconds": best["seconds"],
                     "ms_per_cycle": best["seconds"] * 1000, "planned": best["planned"],
                     "started": best["started"], "at": best["now"],
                     "ms_without_record": pruned["seconds"] * 1000, "started_without_record": pruned["started"]})
    base = rows[0]["seconds"]
    for row in rows:
        row["ratio_to_first"] = row["seconds"] / base if base else 0.0
    policy = make_policy("slurm", pool)
    s = policy.s
    return {"pool": str(pool_dir), "seed": seed, "repeat": repeat,
            "settings": {"bf_max_job_test": s.bf_max_job_test, "bf_window": s.bf_window,
                         "bf_resolution": s.bf_resolution, "bf_interval": s.bf_interval},
            "python": sys.version.split()[0], "results": rows}


def _print_table(report: dict) -> None:
    print(f"pool {report['pool']}  settings {report['settings']}  best of {report['repeat']}")
    print(f"{'depth':>8}{'records':>9}{'ms/cycle':>11}{'x depth-' + str(report['results'][0]['depth']):>13}"
          f"{'planned':>9}{'started':>9}{'ms w/o record':>15}")
    for r in report["results"]:
        print(f"{r['depth']:>8}{r['queue_records']:>9}{r['ms_per_cycle']:>11.1f}{r['ratio_to_first']:>13.2f}"
              f"{r['planned']:>9}{r['started']:>9}{r['ms_without_record']:>15.2f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--depth", type=int, action="append", dest="depths",
                        help="queue depth (repeatable; default 100, 1000, 10000)")
    parser.add_argument("--seed", type=int, default=3)
    parser.add_argument("--pool", default=str(DEFAULT_POOL))
    parser.add_argument("--repeat", type=int, default=3, help="time each cycle this many times, keep the best")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    report = run_benchmark(tuple(args.depths or DEFAULT_DEPTHS), seed=args.seed, pool_dir=args.pool,
                           repeat=args.repeat)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        _print_table(report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
