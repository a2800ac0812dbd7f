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

    def __init__(self, kueue: KueueConfig, tree: QuotaTree | None = None) -> None:
        """``tree``: a quota tree built from ``kueue`` earlier, reused with its usage zeroed
        (the engine adapter builds a state on every pass; 1,000 ClusterQueues cost a few ms)."""
        self.kueue = kueue
        self.cq_models: dict[str, ClusterQueue] = kueue.cluster_queues
        self.flavors = kueue.flavors
        self.tree = tree.reset_usage() if tree is not None else QuotaTree.build(kueue)
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

    def group_of(self, cq_name: str) -> dict[str, int]:
        """Resource -> index of the ClusterQueue's resource group covering it (static memo,
        kept with the quota tree, which outlives the state in the engine adapter)."""
        memo = self.tree.group_of
        found = memo.get(cq_name)
        if found is None:
            groups = self.cq_models[cq_name].resource_groups
            found = memo[cq_name] = {res: i for i, rg in enumerate(groups) for res in rg.covered_resources}
        return found

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

    def admit_all(self, adms: list[Admitted]) -> None:
        """``admit`` each of ``adms`` in order, adding their quota usage per ClusterQueue in one
        step: the tree's usage is a function of the ClusterQueues' usage alone (see
        ``run_cycle``), so the sum lands where the single adds would, with one bubbling walk per
        ClusterQueue and resource instead of one per workload (20k workloads per pass)."""
        admitted, by_cq = self.admitted, self.by_cq
        per_cq: dict[str, dict] = {}
        for adm in adms:
            admitted[adm.wl.key] = adm
            by_cq.setdefault(adm.cq, []).append(adm)
            total = per_cq.get(adm.cq)
            if total is None:
                total = per_cq[adm.cq] = {}
            for fr, v in adm.usage.items():
                total[fr] = total.get(fr, 0) + v
            if self.tas is not None:
                self.tas.hold(adm.tas_uses())
        cqs = self.tree.cqs
        for cq, total in per_cq.items():
            cqs[cq].add_usage(total)

    def evict(self, adm: Admitted) -> None:
        del self.admitted[adm.wl.key]
        self.by_cq[adm.cq].remove(adm)
        self.tree.cqs[adm.cq].add_usage(adm.usage, -1)
        if self.tas is not None:
            self.tas.hold(adm.tas_uses(), -1)
