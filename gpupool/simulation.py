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
from gpupool.errors import GpupoolError
from gpupool.model.pool import Pool
from gpupool.model.workload import Service, Workload
from gpupool.report import metrics


@dataclass
class SimulationResult:
    """One run's results: ``jobs``, ``timeline``, ``events`` and ``summary`` as DataFrames,
    ``summary_dict`` as plain data (what ``summary.json`` holds); with services, ``fleet`` and
    ``services_frame()`` (written as ``services.parquet``)."""

    output: RunOutput
    jobs: pd.DataFrame
    timeline: pd.DataFrame
    events: pd.DataFrame
    summary_dict: dict
    summary: pd.DataFrame = field(repr=False, default=None)
    #: The services' controllers and recorded segments (None when the run had no services).
    fleet: object = field(repr=False, default=None)

    def write(self, out_dir: str | Path) -> Path:
        """Write Parquet tables and ``summary.json`` into ``out_dir`` (created if needed)."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        frames = [("jobs", self.jobs), ("timeline", self.timeline), ("events", self.events)]
        if self.fleet is not None:
            frames.append(("services", self.services_frame()))
        for name, frame in frames:
            frame.to_parquet(out / f"{name}.parquet", index=False, compression="zstd")
        (out / "summary.json").write_text(json.dumps(self.summary_dict, indent=2, sort_keys=True) + "\n")
        return out


    def services_frame(self) -> pd.DataFrame:
        """Every autoscaler decision: service, time, replicas, ready replicas, desired, demand."""
        rows = []
        for ctrl in getattr(self.fleet, "controllers", ()):
            for t, current, ready, desired in ctrl.decisions:
                rows.append((ctrl.svc.name, t, current, ready, desired, ctrl.traffic.at(t)))
        return pd.DataFrame.from_records(
            rows, columns=["service", "time", "replicas", "ready", "desired", "requests_per_s"])


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
    services: list[Service] | str | None = None,
) -> SimulationResult:
    """Replay ``workload`` (a list, a workload spec, or the pool's default) on ``pool``.

    ``services``: inference services that run beside it, each an engine controller: a list,
    or ``"pool"`` for the pool's own (``services/`` in its directory); None runs none (a
    workload replay stays exactly what it was before services existed). ``compare`` and
    ``simulate --services`` pass ``"pool"``.
    """
    from gpupool.formats.pool_dir import load_pool
    from gpupool.workload.sources import load_workload

    if not isinstance(pool, Pool):
        pool = load_pool(pool)
    workloads = workload if isinstance(workload, list) else load_workload(workload, pool)
    pol = make_policy(policy, pool, options)
    fleet = None
    executor = None
    if services == "pool":
        from gpupool.fleet import pool_services

        services = pool_services(pool)
    elif isinstance(services, str):
        raise GpupoolError(f"services={services!r}: expected a list of services, 'pool' or None")
    if services:
        from gpupool.engine.executor import SimulatedExecutor
        from gpupool.fleet import Fleet

        base = SimulatedExecutor.for_policy(pol)
        first_id = max((wl.id for wl in workloads), default=0) + 1
        fleet = Fleet(pool, services, policy, base, first_id)
        executor = fleet.recorder
    engine = Engine(pool, workloads, pol, faults=list(faults), check=check, until=until,
                    record_events=record_events, executor=executor)
    if fleet is not None:
        fleet.attach(engine)
    # Controllers a policy brings with it (slurm-operator's NodeSet capacity controller).
    for ctrl in getattr(pol, "controllers", lambda: [])():
        engine.add_controller(ctrl)
    output = engine.run()
    jobs = metrics.jobs_frame(output)
    summary = metrics.summarise(output, jobs, fleet=fleet)
    policy_figures = getattr(pol, "summary_figures", None)
    if policy_figures is not None:
        # Figures only this policy has (operator: GPU-hours spent draining NodeSet nodes).
        summary["policy_figures"] = policy_figures(output)
    summary["workload_digest"] = workload_digest(workloads)
    return SimulationResult(
        output=output,
        jobs=jobs,
        timeline=metrics.timeline_frame(output),
        events=metrics.events_frame(output),
        summary_dict=summary,
        summary=metrics.summary_frame(summary),
        fleet=fleet,
    )
