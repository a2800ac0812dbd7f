"""The inference fleet: services with traffic, autoscalers, restarts and SLO accounting.

A pool's services live in ``services/`` of its directory (Kubernetes Deployment +
HorizontalPodAutoscaler YAML, or gpupool ``kind: Service`` files, with their traffic files).
For a run, :class:`Fleet` turns each service into an engine controller
(:class:`~gpupool.fleet.controller.ServiceController`) and wraps the executor so every run
segment is recorded for the accounting in :mod:`gpupool.fleet.accounting`.
"""
from __future__ import annotations

import itertools
from pathlib import Path

from gpupool.errors import GpupoolError, InputError
from gpupool.fleet.controller import ServiceController
from gpupool.fleet.mapping import ServiceSettings, SlurmServing
from gpupool.fleet.recorder import RecordingExecutor
from gpupool.fleet.traffic import Traffic, load_traffic
from gpupool.model.pool import Pool
from gpupool.model.workload import Service

SERVICES_DIR = "services"

__all__ = ["SERVICES_DIR", "Fleet", "pool_services", "service_settings"]


def pool_services(pool: Pool) -> list[Service]:
    """The services declared in ``services/*.yaml`` of the pool directory (none without one)."""
    if not pool.path:
        return []
    folder = Path(pool.path) / SERVICES_DIR
    if not folder.is_dir():
        return []
    from gpupool.formats.kube_services import load_services

    files = sorted(p for p in folder.iterdir() if p.suffix in (".yaml", ".yml"))
    return load_services(files, pool.kueue)


def service_settings(pool: Pool) -> ServiceSettings:
    """``spec.services`` of the pool's gpupool.yaml (defaults without one)."""
    if not pool.path or not (Path(pool.path) / "gpupool.yaml").exists():
        return ServiceSettings()
    from gpupool.formats.pool_settings import load_pool_settings
    from gpupool.formats.slurm_time import SlurmTimeError, parse_duration

    path = Path(pool.path) / "gpupool.yaml"
    cfg = load_pool_settings(path).services
    limit = None
    if cfg.slurm.time_limit is not None:
        text = str(cfg.slurm.time_limit)
        try:
            secs = parse_duration(text)
        except SlurmTimeError as exc:
            raise InputError(str(path), f"timeLimit: {exc}", field="spec.services.slurm.timeLimit") from None
        limit = float("inf") if secs is None else float(secs)
    s = cfg.slurm
    return ServiceSettings(SlurmServing(s.partition, s.qos, s.account, s.user, limit), cfg.restart,
                           default_traffic=cfg.traffic)


class Fleet:
    """The services of one run: their controllers, traffic and the recording executor."""

    def __init__(self, pool: Pool, services: list[Service], policy: str, base_executor,
                 first_id: int, settings: ServiceSettings | None = None) -> None:
        self.pool = pool
        self.policy = policy
        self.settings = settings or service_settings(pool)
        self.recorder = RecordingExecutor(base_executor)
        ids = itertools.count(first_id)
        base = Path(pool.path) / SERVICES_DIR if pool.path else None
        self.controllers: list[ServiceController] = []
        for svc in services:
            spec = svc.traffic or self.settings.default_traffic
            if not spec:
                raise GpupoolError(f"service {svc.name} ({svc.source}) has no traffic source")
            traffic = load_traffic(spec, base, where=svc.source or svc.name)
            self.controllers.append(ServiceController(
                svc, traffic, policy=policy, settings=self.settings, pool=pool, ids=ids, recorder=self.recorder))

    def attach(self, engine) -> None:
        for ctrl in self.controllers:
            engine.add_controller(ctrl)

    def traffic(self) -> dict[str, Traffic]:
        return {c.svc.name: c.traffic for c in self.controllers}
