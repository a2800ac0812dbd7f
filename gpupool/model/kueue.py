"""Kueue's own objects, as plain data (semantics: ``../shared/spec/kueue.md``).

Quantities are canonical ints (``gpupool.model.resources``); None means "not set"
(no limit), which is different from 0.
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(slots=True)
class ResourceFlavor:
    name: str
    node_labels: dict[str, str] = field(default_factory=dict)
    node_taints: tuple[dict, ...] = ()
    tolerations: tuple[dict, ...] = ()
    topology_name: str | None = None


@dataclass(slots=True)
class Topology:
    name: str
    levels: tuple[str, ...]  # node label keys, outermost first


@dataclass(slots=True)
class ResourceQuota:
    nominal: int
    borrowing_limit: int | None = None
    lending_limit: int | None = None


@dataclass(slots=True)
class FlavorQuotas:
    flavor: str
    resources: dict[str, ResourceQuota] = field(default_factory=dict)


@dataclass(slots=True)
class ResourceGroup:
    covered_resources: tuple[str, ...]
    flavors: list[FlavorQuotas] = field(default_factory=list)


@dataclass(slots=True)
class Preemption:
    reclaim_within_cohort: str = "Never"
    borrow_within_cohort_policy: str = "Never"
    borrow_within_cohort_max_priority_threshold: int | None = None
    within_cluster_queue: str = "Never"


@dataclass(slots=True)
class ClusterQueue:
    name: str
    cohort: str | None = None
    resource_groups: list[ResourceGroup] = field(default_factory=list)
    queueing_strategy: str = "BestEffortFIFO"
    namespace_selector: dict | None = None
    preemption: Preemption = field(default_factory=Preemption)
    flavor_fungibility_when_can_borrow: str = "MayStopSearch"
    flavor_fungibility_when_can_preempt: str = "TryNextFlavor"
    #: ``flavorFungibility.preference``; unset behaves as BorrowingOverPreemption.
    flavor_fungibility_preference: str = "BorrowingOverPreemption"
    fair_weight: float = 1.0
    stop_policy: str = "None"
    admission_checks: tuple[str, ...] = ()
    #: ``admissionScope.admissionMode`` (Admission Fair Sharing); None = not set (off).
    admission_mode: str | None = None
    api_version: str = "kueue.x-k8s.io/v1beta2"

    def nominal(self) -> dict[tuple[str, str], int]:
        """Nominal quota per (flavor, resource)."""
        return {
            (fq.flavor, res): q.nominal
            for rg in self.resource_groups
            for fq in rg.flavors
            for res, q in fq.resources.items()
        }


@dataclass(slots=True)
class Cohort:
    name: str
    parent: str | None = None
    resource_groups: list[ResourceGroup] = field(default_factory=list)
    fair_weight: float = 1.0
    implicit: bool = False  # named by a ClusterQueue but with no Cohort object


@dataclass(slots=True)
class LocalQueue:
    namespace: str
    name: str
    cluster_queue: str
    stop_policy: str = "None"
    #: ``fairSharing.weight`` (used only by Admission Fair Sharing).
    fair_weight: float = 1.0


@dataclass(slots=True)
class WorkloadPriorityClass:
    name: str
    value: int
    description: str = ""


@dataclass(slots=True)
class KueueConfig:
    """All Kueue objects of a pool plus the Kueue Configuration (``raw_configuration``)."""

    flavors: dict[str, ResourceFlavor] = field(default_factory=dict)
    topologies: dict[str, Topology] = field(default_factory=dict)
    cohorts: dict[str, Cohort] = field(default_factory=dict)
    cluster_queues: dict[str, ClusterQueue] = field(default_factory=dict)
    local_queues: dict[tuple[str, str], LocalQueue] = field(default_factory=dict)
    priority_classes: dict[str, WorkloadPriorityClass] = field(default_factory=dict)
    #: The Configuration object as parsed YAML (Kueue's own field names).
    configuration: dict = field(default_factory=dict)
    feature_gates: dict[str, bool] = field(default_factory=dict)
    sources: list[str] = field(default_factory=list)
