"""The Kueue state one scheduling cycle works on: configuration, quota tree, admitted workloads.

Built fresh from a case file (conformance) or from the engine's snapshot (simulation); the
cycle mutates only usage in the tree and the admitted lists, as Kueue's snapshot does.
"""
from __future__ import annotations

from gpupool.model.kueue import ClusterQueue, KueueConfig
from gpupool.policy.kueue.quota import QuotaTree
from gpupool.policy.kueue.records import Admitted

#: Feature gates that change admission, with their defaults at Kueue HEAD (spec §10).
GATE_DEFAULTS = {
    "PartialAdmission": True,
    "FlavorFungibility": True,
    "PrioritySortingWithinCohort": True,
    "FairSharingPreemptWithinNominal": True,
    "FairSharingPrioritizeNonBorrowing": True,
    "TopologyAwareScheduling": True,
    "SchedulingEquivalenceHashing": True,
    "RecomputeAssignmentUponPreemptionTargetsOverlap": True,
    "FlavorFungibilityPreserveScanProgress": True,
    "PrioritizePreemptorWorkloads": False,
    "PriorityBoost": False,
    "DisableWaitForPodsReady": False,
    "AdmissionFairSharing": True,
}
DEFAULT_STRATEGIES = ["LessThanOrEqualToFinalShare", "LessThanInitialShare"]


class KueueState:
    """Configuration plus mutable admission state for one cycle (or a run of cycles)."""

    def __init__(self, kueue: KueueConfig) -> None:
        self.kueue = kueue
        self.cq_models: dict[str, ClusterQueue] = kueue.cluster_queues
        self.flavors = kueue.flavors
        self.tree = QuotaTree.build(kueue)
        self.admitted: dict[object, Admitted] = {}
        self.by_cq: dict[str, list[Admitted]] = {name: [] for name in kueue.cluster_queues}
        self.gates = dict(GATE_DEFAULTS)
        #: Admission Fair Sharing (§6.5): ClusterQueue -> ``kwl -> its LocalQueue's usage`` for
        #: the CQs that use it (set by the engine adapter); None = off everywhere.
        self.afs: dict | None = None
        self.gates.update(kueue.feature_gates or {})
        cfg = kueue.configuration or {}
        fair = cfg.get("fairSharing")
        self.fair_sharing = isinstance(fair, dict) and fair.get("enable", True) is not False
        strategies = list((fair or {}).get("preemptionStrategies") or []) if isinstance(fair, dict) else []
        self.strategies = strategies or list(DEFAULT_STRATEGIES)
        #: Skipped preemptions per ClusterQueue in the last cycle (Kueue's metric).
        self.skipped_preemptions: dict[str, int] = {}
        #: Topology-Aware Scheduling capacity (``tas_capacity.TasSnapshot``) when the pool has
        #: TAS flavors and the gate is on; set by whoever builds the state (None = no TAS).
        self.tas = None
        self._tas_only: dict[str, bool] = {}
        #: Set by a cycle while it nominates (the tree is then its initial snapshot): other-CQ
        #: preemption candidates per (cohort node, frs), shared by the heads (preemption.py).
        self.candidate_memo: dict | None = None

    def gate(self, name: str) -> bool:
        return bool(self.gates.get(name, False))

    def tas_only(self, cq_name: str) -> bool:
        """Whether every flavor of the ClusterQueue is a TAS flavor (implied TAS, §8)."""
        found = self._tas_only.get(cq_name)
        if found is None:
            cq = self.cq_models[cq_name]
            names = [fq.flavor for rg in cq.resource_groups for fq in rg.flavors]
            found = bool(names) and all(n in self.flavors and self.flavors[n].topology_name for n in names)
            self._tas_only[cq_name] = found
        return found

    def admit(self, adm: Admitted) -> None:
        """Add an admitted workload; its TAS usage is held when the TAS snapshot exists (a
        builder that makes the snapshot later holds what is not on the nodes itself)."""
        self.admitted[adm.wl.key] = adm
        self.by_cq.setdefault(adm.cq, []).append(adm)
        self.tree.cqs[adm.cq].add_usage(adm.usage)
        if self.tas is not None:
            self.tas.hold(adm.tas_uses())

    def evict(self, adm: Admitted) -> None:
        del self.admitted[adm.wl.key]
        self.by_cq[adm.cq].remove(adm)
        self.tree.cqs[adm.cq].add_usage(adm.usage, -1)
        if self.tas is not None:
            self.tas.hold(adm.tas_uses(), -1)
