"""The Python API: run a workload on a pool under a policy and get tables back.

    >>> import gpupool
    >>> result = gpupool.simulate("examples/seed-pool", policy="fifo")
    >>> result.jobs.head(); result.timeline; result.summary

Everything the CLI's ``simulate`` writes is built here, so notebooks and the CLI agree.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from gpupool.engine.core import Engine, NodeEvent, RunOutput
from gpupool.engine.policy_api import make_policy
from gpupool.model.pool import Pool
from gpupool.model.workload import Workload
from gpupool.report import metrics


@dataclass
class SimulationResult:
    """One run's results: ``jobs``, ``timeline``, ``events`` and ``summary`` as DataFrames,
    ``summary_dict`` as plain data (what ``summary.json`` holds)."""

    output: RunOutput
    jobs: pd.DataFrame
    timeline: pd.DataFrame
    events: pd.DataFrame
    summary_dict: dict
    summary: pd.DataFrame = field(repr=False, default=None)

    def write(self, out_dir: str | Path) -> Path:
        """Write Parquet tables and ``summary.json`` into ``out_dir`` (created if needed)."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        for name, frame in (("jobs", self.jobs), ("timeline", self.timeline), ("events", self.events)):
            frame.to_parquet(out / f"{name}.parquet", index=False, compression="zstd")
        (out / "summary.json").write_text(json.dumps(self.summary_dict, indent=2, sort_keys=True) + "\n")
        return out


def workload_digest(workloads: list[Workload]) -> str:
    """A short content hash of a workload list, recorded with each run."""
    h = hashlib.sha256()
    for wl in workloads:
        h.update(repr((wl.id, wl.name, wl.submit_time, wl.runtime, wl.time_limit, wl.outcome,
                       wl.pod_sets, wl.account, wl.queue_name, wl.partition)).encode())
    return h.hexdigest()[:16]


def simulate(
    pool: Pool | str | Path,
    workload: list[Workload] | str | None = None,
    policy: str = "fifo",
    *,
    options: dict | None = None,
    faults: list[NodeEvent] = (),
    check: bool = False,
    until: float | None = None,
    record_events: bool = True,
) -> SimulationResult:
    """Replay ``workload`` (a list, a workload spec, or the pool's default) on ``pool``."""
    from gpupool.formats.pool_dir import load_pool
    from gpupool.workload.sources import load_workload

    if not isinstance(pool, Pool):
        pool = load_pool(pool)
    workloads = workload if isinstance(workload, list) else load_workload(workload, pool)
    engine = Engine(pool, workloads, make_policy(policy, pool, options), faults=list(faults),
                    check=check, until=until, record_events=record_events)
    output = engine.run()
    jobs = metrics.jobs_frame(output)
    summary = metrics.summarise(output, jobs)
    summary["workload_digest"] = workload_digest(workloads)
    return SimulationResult(
        output=output,
        jobs=jobs,
        timeline=metrics.timeline_frame(output),
        events=metrics.events_frame(output),
        summary_dict=summary,
        summary=metrics.summary_frame(summary),
    )
