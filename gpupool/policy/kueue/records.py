"""What the Kueue scheduler works on: workloads as Kueue sees them, admissions, assignments.

Plain ``__slots__`` records shared by the cycle, the flavor assigner, preemption, the engine
adapter and the conformance runner. Requests are canonical ints per resource name.
"""
from __future__ import annotations

from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field

from gpupool.policy.kueue.quota import FR
from gpupool.policy.kueue.tas import TopologyRequest

# Granular flavor modes, worst first (spec §4.2).
NOFIT, NO_CANDIDATES, PREEMPT, RECLAIM, FIT = 0, 1, 2, 3, 4
MODE_NAMES = {NOFIT: "NoFit", NO_CANDIDATES: "NoPreemptionCandidates", PREEMPT: "Preempt",
              RECLAIM: "Reclaim", FIT: "Fit"}

# Preempted-condition reasons.
IN_CQ = "InClusterQueue"
IN_COHORT_RECLAMATION = "InCohortReclamation"
IN_COHORT_RECLAIM_WHILE_BORROWING = "InCohortReclaimWhileBorrowing"
IN_COHORT_FAIR_SHARING = "InCohortFairSharing"


@dataclass(slots=True)
class KPodSet:
    name: str
    count: int
    requests: dict[str, int]  # per pod, zero quantities left out
    min_count: int | None = None
    node_selector: dict[str, str] = field(default_factory=dict)
    tolerations: tuple[dict, ...] = ()
    #: The pod set's TAS request (annotations, §8); None = none asked for (may be implied).
    topology: TopologyRequest | None = None
    #: The engine's GPU product constraint (counts only nodes with that product for TAS).
    gpu_type: str | None = None


@dataclass(slots=True)
class KWorkload:
    key: object  # engine job id or case name
    name: str
    cq: str
    priority: int
    created: float  # queue-order timestamp
    uid: tuple  # tie-break, ascending
    pod_sets: list[KPodSet]
    #: ``(namespace, LocalQueue)``; read only by Admission Fair Sharing (§6.5).
    lq: tuple | None = None

    def total(self, counts: list[int] | None = None) -> dict[str, int]:
        out: dict[str, int] = {}
        for i, ps in enumerate(self.pod_sets):
            n = ps.count if counts is None else counts[i]
            for r, v in ps.requests.items():
                out[r] = out.get(r, 0) + v * n
        return out


@dataclass(slots=True)
class PodSetAssignment:
    name: str
    count: int
    flavors: dict[str, str]  # resource -> flavor
    usage: dict[str, int]  # resource -> quantity (request x count)
    #: TAS: pods per leaf domain (label values, broadest level first) in ``tas_flavor``.
    topology: dict | None = None
    tas_flavor: str | None = None


@dataclass(slots=True)
class Assignment:
    """The flavor assigner's answer for one workload."""

    pod_sets: list[PodSetAssignment]
    mode: int  # FIT, PREEMPT (incl. reclaim / no candidates), NOFIT
    borrowing: int
    usage: dict[FR, int]
    frs_preempt: AbstractSet[FR] = field(default_factory=set)  # read-only (shared: see flavors._interned)
    message: str = ""
    #: (pod set index, resource) -> index of the last flavor examined (scan resume, §4.3).
    last_index: dict = field(default_factory=dict)
    #: (fr, quantity) -> targets the single-fr preemption oracle found for the chosen flavors
    #: (the same state as the nomination's own target search, so it can be reused).
    oracle: dict = field(default_factory=dict)
    #: TAS (§8): ``(pod set index, reason)`` of the pod set the topology could not hold.
    tas_failure: tuple[int, str] | None = None

    @property
    def counts(self) -> list[int]:
        return [p.count for p in self.pod_sets]


@dataclass(slots=True)
class Admitted:
    """A workload holding quota in a ClusterQueue."""

    wl: KWorkload
    cq: str
    usage: dict[FR, int]
    reserved_at: float = 0.0
    pod_sets: list[PodSetAssignment] = field(default_factory=list)
    evicted: bool = False

    def tas_uses(self) -> list[tuple[str, dict, dict[str, int]]]:
        """``(flavor, pods per leaf, per-pod requests)`` of its TAS pod sets."""
        out = []
        requests = {ps.name: ps.requests for ps in self.wl.pod_sets}
        for psa in self.pod_sets:
            if psa.topology and psa.tas_flavor:
                out.append((psa.tas_flavor, psa.topology, requests.get(psa.name, {})))
        return out

    def uses_any(self, frs) -> bool:
        usage = self.usage
        return any(usage.get(fr, 0) > 0 for fr in frs)


@dataclass(slots=True)
class Target:
    adm: Admitted
    reason: str
