"""Where a run's workload comes from, named by one string.

- ``synthetic:PRESET[?key=value&…]`` — the calibrated generator (``docs/synthetic.md``);
- a directory — sbatch scripts and Kubernetes manifests with an ``arrivals.csv``;
- a file — a trace (gpupool's own JSONL/CSV/Parquet, SWF, Philly, PAI, Helios, OpenB) or a
  Kubernetes manifest;
- ``default`` (or nothing) — the pool's ``defaultWorkload`` from ``gpupool.yaml``.
Relative paths are tried against the working directory, then the pool directory.
"""
from __future__ import annotations

from pathlib import Path

from gpupool.errors import GpupoolError
from gpupool.model.pool import Pool
from gpupool.model.workload import Workload

SYNTHETIC_PREFIX = "synthetic:"


def resolve_workload_name(spec: str | None, pool: Pool) -> str:
    """The concrete workload spec a run uses (the pool's default when none is given)."""
    if spec in (None, "", "default"):
        if not pool.default_workload:
            raise GpupoolError(
                f"pool {pool.name!r} has no default workload: give --workload or set "
                "spec.defaultWorkload in its gpupool.yaml"
            )
        return pool.default_workload
    return spec


def load_workload(spec: str | None, pool: Pool) -> list[Workload]:
    """Load the workload named by ``spec`` for ``pool``."""
    spec = resolve_workload_name(spec, pool)
    if spec.startswith(SYNTHETIC_PREFIX):
        from gpupool.workload.synthetic import generate, parse_synthetic_spec

        return generate(pool, parse_synthetic_spec(spec))
    path = _find(spec, pool)
    if path.is_dir():
        from gpupool.workload.folder import load_workload_folder

        return load_workload_folder(path)
    if path.suffix in (".yaml", ".yml"):
        from gpupool.formats.kube_workloads import workloads_from_documents
        from gpupool.formats.kube_yaml import load_yaml_documents

        workloads = workloads_from_documents(load_yaml_documents(path), pool.kueue)
        return [_renumber(wl, i) for i, wl in enumerate(sorted(workloads, key=lambda w: w.submit_time), start=1)]
    from gpupool.formats.traces import read_trace

    return read_trace(path)


def _renumber(wl: Workload, new_id: int) -> Workload:
    from dataclasses import replace

    return replace(wl, id=new_id)


def _find(spec: str, pool: Pool) -> Path:
    candidates = [Path(spec)]
    if pool.path:
        candidates.append(Path(pool.path) / spec)
    for cand in candidates:
        if cand.exists():
            return cand
    tried = " or ".join(str(c) for c in candidates)
    raise GpupoolError(
        f"workload {spec!r} not found (looked for {tried}); expected 'synthetic:PRESET', a workload "
        "folder, a trace file or a Kubernetes manifest"
    )
