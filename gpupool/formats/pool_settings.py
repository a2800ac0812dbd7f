"""``gpupool.yaml``: the few pool settings that no Slurm or Kubernetes file can carry.

Only what has no home in a real format lives here (the pool's name, its default
workload, and how services map onto Slurm and Kubernetes: ``spec.services``). Validated with pydantic, at the edge.
"""
from __future__ import annotations

from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from gpupool.errors import InputError

SETTINGS_FILE = "gpupool.yaml"
API_VERSION = "gpupool.io/v1alpha1"
KIND = "PoolSettings"


class _Metadata(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str


class SlurmServingSettings(BaseModel):
    """Where service replicas go under ``--policy slurm`` (docs/services.md)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    partition: str | None = None
    qos: str | None = None
    account: str | None = None
    user: str | None = None
    #: ``[D-]HH:MM:SS``, seconds, or UNLIMITED; unset = the partition's MaxTime.
    time_limit: str | int | None = Field(default=None, alias="timeLimit")


class ServicesSettings(BaseModel):
    """``spec.services``: how services map onto each policy."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    #: auto (Slurm: requeue; Kubernetes: restart in place), inplace or requeue.
    restart: Literal["auto", "inplace", "requeue"] = "auto"
    slurm: SlurmServingSettings = SlurmServingSettings()
    #: Traffic for services that name none (a traffic spec, see docs/services.md).
    traffic: str | None = None


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    default_workload: str | None = Field(default=None, alias="defaultWorkload")
    description: str | None = None
    services: ServicesSettings = ServicesSettings()


class _Settings(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    api_version: str = Field(alias="apiVersion")
    kind: str
    metadata: _Metadata
    spec: _Spec = _Spec()


class PoolSettings(BaseModel):
    name: str
    default_workload: str | None = None
    description: str | None = None
    services: ServicesSettings = ServicesSettings()


def load_pool_settings(path: Path) -> PoolSettings:
    """Read and validate ``gpupool.yaml``; errors name the field and what was expected."""
    try:
        body = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        line = getattr(getattr(exc, "problem_mark", None), "line", None)
        raise InputError(str(path), f"not valid YAML: {getattr(exc, 'problem', exc)}",
                         line=None if line is None else line + 1) from None
    if not isinstance(body, dict):
        raise InputError(str(path), f"expected a mapping with apiVersion {API_VERSION} and kind {KIND}")
    try:
        parsed = _Settings.model_validate(body)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"])
        raise InputError(str(path), err["msg"], field=field) from None
    if parsed.api_version != API_VERSION or parsed.kind != KIND:
        raise InputError(str(path), f"expected apiVersion {API_VERSION} and kind {KIND}, "
                         f"got {parsed.api_version} {parsed.kind}", field="apiVersion")
    return PoolSettings(name=parsed.metadata.name, default_workload=parsed.spec.default_workload,
                        description=parsed.spec.description, services=parsed.spec.services)
